"""One recording read in time slices (``pysframe perf script -j N``): each slice walked in a
worker process with the address spaces as of its start, the profiles merged in order, give
the bytes a single process gives, in every output format.

The recordings are real: tests/data/perf/perfprog.c (threads, and a child process that runs
another program: an exec between slices) recorded with ``perf record --call-graph dwarf``,
with small ring buffers and read in small chunks, so that it makes many of perf's deliveries
to split.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import unavailable
from perf_support import Unavailable, build_program, record
from pysframe.cli import main
from pysframe.perf import analyze
from pysframe.perf.analyze import Options, profile_parts, profile_recording
from pysframe.perf.profile import Profile
from pysframe.perf.report import write_folded, write_json, write_top
from pysframe.perf.script import write_script
from pysframe.perf.speedscope import write_speedscope

#: Small ring buffers (-m 16 pages): perf record empties them often, each time a round of
#: records (FINISHED_ROUND), so that perf delivers the samples in many stretches.
OPTIONS = ("-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,4096", "-m", "16")
#: Samples per delivery: a few hundred samples make many slices' worth.
CHUNK = 16


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("perf-parts")
    try:
        program = build_program(out, "perfprog")
        return record(out / "perf.data", [str(program), "6"], options=OPTIONS)
    except Unavailable as why:
        unavailable(why)


def _texts(profile: Profile) -> list[str]:
    texts = []
    for write in (write_script, write_folded, write_json, write_speedscope, write_top):
        out = io.StringIO()
        write(profile, out)
        texts.append(out.getvalue())
    return texts


@pytest.mark.parametrize("inline", [False, True])
def test_slices_merged_are_the_whole(
    recording: Path, monkeypatch: pytest.MonkeyPatch, inline: bool
) -> None:
    options = Options(chunk=CHUNK, inline=inline)
    whole, stats = profile_recording(str(recording), options)
    assert len(whole) > 50
    # Each slice alone: together every sample once, in order, each slice some of them.
    parts = [profile_recording(str(recording), options, part=(i, 3))[0] for i in range(3)]
    assert sum(1 for part in parts if len(part)) >= 2, [len(part) for part in parts]
    assert sum(len(part) for part in parts) == len(whole)
    assert [t for part in parts for t in part.time] == whole.time
    monkeypatch.setattr(analyze, "MIN_PART_BYTES", 1)
    merged, part_stats = profile_parts(str(recording), options, 3)
    assert len(part_stats) == 3
    assert _texts(merged) == _texts(whole)
    assert merged.lost_samples == whole.lost_samples and merged.sources == whole.sources
    assert sum(s.samples for s in part_stats) == stats.samples


def test_the_command_line_with_jobs(
    recording: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = {}
    for jobs in ("1", "2"):
        for command in (["script"], ["report", "--format", "folded"]):
            monkeypatch.setattr(analyze, "MIN_PART_BYTES", 1)
            assert main(["perf", *command, "-j", jobs, str(recording)]) == 0
            outputs[jobs, command[0]] = capsys.readouterr().out
    assert outputs["1", "script"] == outputs["2", "script"]
    assert outputs["1", "report"] == outputs["2", "report"]
    assert outputs["1", "script"].count("\n\n") > 50


def test_each_slice_reads_up_to_its_end(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slice's worker reads the recording up to the end of its slice, not beyond: the
    first of three stops within the first two thirds of the data, the last reads it all."""
    from pysframe.perf.data import PerfData, Stretch

    read = PerfData.read
    ends: list[int] = []

    def reading(self: PerfData, chunk: int = CHUNK) -> Iterator[Stretch]:
        for stretch in read(self, chunk):
            ends.append(stretch.end)
            yield stretch

    monkeypatch.setattr(PerfData, "read", reading)
    reached = []
    for index in (0, 2):
        ends.clear()
        profile_recording(str(recording), Options(chunk=CHUNK), part=(index, 3))
        reached.append(ends[-1])
    with PerfData.open(recording) as data:
        start, size = data.header.data_offset, data.header.data_size
    assert reached[0] < start + size * 2 // 3, (reached, start, size)
    assert reached[1] == start + size
