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
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import unavailable
from perf_support import Unavailable, build_program, record
from pysframe.cli import main
from pysframe.cli import perf as perf_cli
from pysframe.perf import analyze
from pysframe.perf.analyze import Options, profile_parts, profile_recording
from pysframe.perf.profile import Profile
from pysframe.perf.report import write_folded, write_json, write_top
from pysframe.perf.script import write_script
from pysframe.perf.speedscope import write_speedscope

#: Small ring buffers (-m 16 pages): perf record empties them often, each time a round of
#: records (FINISHED_ROUND), so that perf delivers the samples in many stretches.  A sample
#: a millisecond of CPU: a ring (some 15 samples of 4 KB stacks) then fills in 15 ms, time
#: for perf record to empty it on a loaded machine (at a sample each 0.1 ms, some of a
#: recording's samples were lost even on a quiet one, and most on a loaded one).
OPTIONS = ("-e", "cpu-clock", "-c", "1000000", "--call-graph", "dwarf,4096", "-m", "16")
#: perfprog's loop iterations per thread, in millions: some 0.3 s of CPU, 200-odd samples.
ITERATIONS = "60"
#: Samples per delivery: a few hundred samples make many slices' worth.
CHUNK = 16


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("perf-parts")
    try:
        program = build_program(out, "perfprog")
        return record(out / "perf.data", [str(program), ITERATIONS], options=OPTIONS)
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
    merging, part_stats, finished = profile_parts(str(recording), options, 3, finish=len)
    merged = merging()
    assert merging() is merged  # merged once
    if inline:  # addr2line's answers depend on what it was asked before: one process
        assert len(part_stats) == 1 and finished == []
    else:
        assert len(part_stats) == 3
        assert finished == [len(part) for part in parts]  # each slice's, in order
    assert _texts(merged) == _texts(whole)
    assert merged.lost_samples == whole.lost_samples and merged.sources == whole.sources
    assert sum(s.samples for s in part_stats) == stats.samples


@pytest.mark.parametrize("inline", [False, True])
def test_slices_cut_to_the_record_hold_the_whole(recording: Path, inline: bool) -> None:
    """Slices cut to the record (``cut``, later ones shorter): every sample once, in order;
    merged, the text of perf script and the folded stacks of the whole (the frames and
    stacks may be numbered in another order)."""
    options = Options(chunk=CHUNK, inline=inline)
    whole, stats = profile_recording(str(recording), options)
    parts = [profile_recording(str(recording), options, part=(i, 3), cut=True) for i in range(3)]
    assert sum(1 for part, _ in parts if len(part)) >= 2, [len(part) for part, _ in parts]
    assert [t for part, _ in parts for t in part.time] == whole.time
    assert sum(part_stats.samples for _, part_stats in parts) == stats.samples
    merged = Profile()
    for part, _ in parts:
        merged.merge(part)
    assert _texts(merged)[:2] == _texts(whole)[:2]  # write_script, write_folded
    assert merged.lost_samples == whole.lost_samples and merged.sources == whole.sources


#: Commands whose output with ``-j 2`` and ``-j 3`` is held to ``-j 1``'s, each slice's text
#: made in its own process and joined (with inline frames, perf's default, or srclines: read
#: in one process): perf script with field sets (headers alone, nanoseconds, fields added
#: and taken away), with filters (a thread; a time range that leaves the first and last
#: slices few samples or none), and perf report's folded stacks.  ``{tid}``: the busiest
#: thread; ``{middle}``: the middle third of the recording's time.
COMMANDS = {
    "script": ["script"],
    "script-fields": ["script", "--no-inline", "-F", "comm,pid,tid,time,event,ip,sym,dso,period"],
    "script-ns": ["script", "--no-inline", "-F", "tid,time,ip,sym,symoff", "--ns"],
    "script-changed": ["script", "--no-inline", "-F", "+pid,-period"],
    "script-headers": ["script", "--no-inline", "-F", "comm,tid,time,event"],
    "script-tid": ["script", "--no-inline", "--tid", "{tid}"],
    "script-time": ["script", "--no-inline", "--time", "{middle}"],
    "script-srcline": ["script", "--no-inline", "-F", "+srcline"],
    "folded": ["report", "--format", "folded"],
    "folded-time": ["report", "--format", "folded", "--no-inline", "--time", "{middle}"],
}  # fmt: skip


def _spy(
    monkeypatch: pytest.MonkeyPatch,
    module: object,
    name: str,
    calls: list[tuple[tuple[object, ...], object]],
) -> None:
    """Add to ``calls`` the arguments of each call of ``module.name`` from now on, and what
    it returned."""
    original = getattr(module, name)

    def spy(*args: object) -> object:
        calls.append((args, original(*args)))
        return calls[-1][1]

    monkeypatch.setattr(module, name, spy)


def _spans(recording: Path, count: int, cut: bool = True) -> list[tuple[int, int] | None]:
    """The earliest and the latest time each of ``count`` slices' samples are delivered at
    (None: no sample), the slices cut to the record (``cut``) as the command line cuts them
    for perf script's text and folded stacks without inline frames."""
    spans: list[tuple[int, int] | None] = []
    for index in range(count):
        part, _ = profile_recording(
            str(recording), Options(chunk=CHUNK), part=(index, count), cut=cut
        )
        times = [part.delivered.get(row, time) for row, time in enumerate(part.time)]
        spans.append((min(times), max(times)) if times else None)
    return spans


def _in_order(spans: list[tuple[int, int] | None]) -> bool:
    """Whether no sample of a slice is delivered before one of an earlier slice."""
    latest = 0
    for span in spans:
        if span is not None:
            if span[0] < latest:
                return False
            latest = max(latest, span[1])
    return True


def _seconds(time: int) -> str:
    return f"{time // 10**9}.{time % 10**9:09d}"


@pytest.mark.parametrize("name", COMMANDS)
def test_the_command_line_with_jobs(
    recording: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    from pysframe.perf import report, script

    whole, _stats = profile_recording(str(recording), Options(chunk=CHUNK))
    times = sorted(whole.time)
    third = len(times) // 3
    values = {
        "tid": str(Counter(whole.tid).most_common(1)[0][0]),
        "middle": f"{_seconds(times[third])},{_seconds(times[2 * third])}",
    }
    command = [argument.format(**values) for argument in COMMANDS[name]]
    monkeypatch.setattr(analyze, "MIN_PART_BYTES", 1)  # a slice per job, however small
    options = perf_cli._options  # and many deliveries to slice
    monkeypatch.setattr(perf_cli, "_options", lambda args: replace(options(args), chunk=CHUNK))
    joined: list[tuple[tuple[object, ...], object]] = []
    _spy(monkeypatch, script, "joined_script", joined)
    _spy(monkeypatch, report, "joined_folded", joined)
    outputs = {}
    for jobs in ("1", "2", "3"):
        joined.clear()
        assert main(["perf", *command, "-j", jobs, str(recording)]) == 0
        outputs[jobs] = capsys.readouterr().out
        (slices,), text = joined[-1]
        if jobs == "1" or "--no-inline" not in command or "+srcline" in command:
            # read whole: nothing to join (with inline frames or srclines too: addr2line's
            # answers depend on what it was asked before, so one process asks them all)
            assert slices == [] and text is None
            continue
        # -j 2 and 3 join the slices' texts, each slice's made in its process, where no
        # sample is delivered before one of an earlier slice (perf record may write one
        # after a later round, and here it is then read whole); the folded stacks of one
        # event always
        spans = _spans(recording, int(jobs), cut="--no-inline" in command)
        assert len(slices) == len(spans)
        if command[0] == "report" or _in_order(spans):
            assert text is not None, spans
        if text is not None and not {"--time", "--tid"} & set(command):
            # the slices with samples are those read (an empty one has no event nor times)
            filled = [(piece[0] if isinstance(piece, tuple) else piece.delivered) is not None
                      for piece in slices]  # type: ignore[attr-defined]  # fmt: skip
            assert filled == [span is not None for span in spans]
            assert sum(filled) >= 2, spans
    for jobs in ("2", "3"):
        assert outputs[jobs] == outputs["1"], _difference(outputs["1"], outputs[jobs], recording)
    # not empty (a time range of a recording made on a busy machine may hold one stack only)
    assert outputs["1"].count("\n") > (20 if command[0] == "script" else 0)


def _difference(whole: str, joined: str, recording: Path) -> str:
    """What a failure says: the recording (kept in pytest's temporary folders) and the lines
    only one of the two texts has, the first few of each."""
    ours, theirs = Counter(whole.splitlines()), Counter(joined.splitlines())
    return (
        f"{recording} ({recording.stat().st_size} bytes): only -j 1's: "
        f"{list((ours - theirs).items())[:4]}; only the joined text's: "
        f"{list((theirs - ours).items())[:4]}"
    )


def test_a_refused_filter_is_said_as_with_one_job(
    recording: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A filter each slice's process refuses: the whole profile's path refuses it, in one
    line, as one process does."""
    monkeypatch.setattr(analyze, "MIN_PART_BYTES", 1)
    said = []
    for jobs in ("1", "2"):
        assert main(["perf", "script", "--no-inline", "--pid", "one", "-j", jobs,
                     str(recording)]) == 2  # fmt: skip
        said.append(capsys.readouterr())
    assert said[0] == said[1]
    assert said[0].out == "" and "not a list of numbers" in said[0].err


def test_each_slice_reads_up_to_its_end(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slice's worker reads the recording up to the end of its slice, not beyond: the
    first of three stops within the first two thirds of the data (cut to the record: within
    the first half, the later slices being shorter), the last reads it all."""
    from pysframe.perf.data import PerfData, Stretch

    read = PerfData.read
    ends: list[int] = []

    def reading(self: PerfData, *args: Any, **kwargs: Any) -> Iterator[Stretch]:
        for stretch in read(self, *args, **kwargs):
            ends.append(stretch.end)
            yield stretch

    monkeypatch.setattr(PerfData, "read", reading)
    with PerfData.open(recording) as data:
        start, size = data.header.data_offset, data.header.data_size
    for cut, bound in ((False, start + size * 2 // 3), (True, start + size // 2)):
        reached = []
        for index in (0, 2):
            ends.clear()
            profile_recording(str(recording), Options(chunk=CHUNK), part=(index, 3), cut=cut)
            reached.append(ends[-1])
        assert reached[0] < bound, (cut, reached, start, size)
        assert reached[1] == start + size


def test_each_workers_text_is_made_while_the_command_reads_its_own_slice(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-j 3``: each worker makes its slice's text, to the end, while this process reads
    the last slice (this process waits for both before it makes anything of its own: a
    worker that made its text only as this process wrote it would leave it waiting its 30
    seconds out).  This process makes its own text before it writes any (to a temporary
    file of its own, as the workers do: none waits whole in memory for the others).  The
    output is ``-j 1``'s, the workers' texts in order, then this process's own."""
    import os
    import select
    import sys

    from pysframe.perf import script

    spans = _spans(recording, 3)
    if not _in_order(spans):
        pytest.skip(f"a sample is delivered before one of an earlier slice: read whole {spans}")
    if not any(spans[:-1]):
        pytest.skip(f"no sample in the workers' slices (perf record lost them): {spans}")
    _slice_per_job(monkeypatch)
    parent, original, slice_text = os.getpid(), script.script_text, perf_cli._script_slice
    done, tell = os.pipe()  # a byte from each worker once its text is made, to the end
    # Each text this process made: how much of the output was written when it began, and it.
    made: list[tuple[int, str]] = []
    told: list[bytes] = []

    def text(*args: Any, **kwargs: Any) -> Iterator[str]:
        began = sys.stdout.tell()
        pieces = list(original(*args, **kwargs))
        if os.getpid() == parent:
            made.append((began, "".join(pieces)))
        yield from pieces
        if os.getpid() != parent:
            os.write(tell, b"x")

    def own_slice(*args: Any) -> object:  # the finish of each slice, in its process
        while os.getpid() == parent and len(b"".join(told)) < 2:
            if not select.select([done], [], [], 30)[0]:
                break
            told.append(os.read(done, 2))
        return slice_text(*args)

    monkeypatch.setattr(script, "script_text", text)
    monkeypatch.setattr(perf_cli, "_script_slice", own_slice)
    outputs = []
    try:
        for jobs in ("1", "3"):
            made.clear()
            monkeypatch.setattr(sys, "stdout", io.StringIO())
            assert main(["perf", "script", "--no-inline", "-j", jobs, str(recording)]) == 0
            outputs.append(sys.stdout.getvalue())
    finally:
        os.close(done)
        os.close(tell)
    assert b"".join(told) == b"xx", "a worker made its text only after the last slice was read"
    assert outputs[1] == outputs[0] and outputs[0].count("\n") > 20
    ((began, own),) = made  # this process's slice, the last: after the workers' texts
    assert began == 0, "this process made its text only as it wrote it, after the workers'"
    assert outputs[1].endswith(own) and len(outputs[1]) > len(own)


def _slice_per_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analyze, "MIN_PART_BYTES", 1)  # a slice per job, however small
    options = perf_cli._options  # and many deliveries to slice
    monkeypatch.setattr(perf_cli, "_options", lambda args: replace(options(args), chunk=CHUNK))


def _limit_files() -> None:
    """No file of this process grows past 0 bytes: a write fails as on a disk full (EFBIG,
    the signal that would end the process ignored)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


def _kill_self() -> None:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize(
    ("failure", "said"),
    [(_kill_self, "a worker process ended without its result (killed by signal 9)"),
     (_limit_files, "the text made in a worker process could not be written to a temporary "
                    "file (File too large)")],
)  # fmt: skip
def test_a_worker_whose_text_is_lost_is_one_line(
    recording: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failure: Callable[[], None],
    said: str,
) -> None:
    """A worker that dies as it makes its text, or whose temporary file cannot take it (a
    disk full): one line, status 1, and nothing on the output, not a part of the text."""
    import os

    from pysframe.perf import script

    _slice_per_job(monkeypatch)
    parent, original = os.getpid(), script.script_text

    def text(*args: Any, **kwargs: Any) -> Iterator[str]:
        if os.getpid() != parent:
            failure()
        yield from original(*args, **kwargs)

    monkeypatch.setattr(script, "script_text", text)
    assert main(["perf", "script", "--no-inline", "-j", "3", str(recording)]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"pysframe: {recording}: {said}\n")


def test_this_processs_text_that_cannot_be_spooled_is_one_line(
    recording: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-j 3``: this process makes its own slice's text into a temporary file of its own;
    where that file cannot take it (a disk full: no file of this process may grow while it
    makes it), one line, status 1, and nothing on the output."""
    import os
    import resource
    import signal

    _slice_per_job(monkeypatch)
    parent, slice_text = os.getpid(), perf_cli._script_slice

    def full(*args: Any) -> object:
        if os.getpid() != parent:
            return slice_text(*args)
        limits = resource.getrlimit(resource.RLIMIT_FSIZE)
        handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, limits[1]))
        try:
            return slice_text(*args)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, limits)
            signal.signal(signal.SIGXFSZ, handler)

    monkeypatch.setattr(perf_cli, "_script_slice", full)
    assert main(["perf", "script", "--no-inline", "-j", "3", str(recording)]) == 1
    out, err = capsys.readouterr()
    said = "the text made in this process could not be written to a temporary file"
    assert (out, err) == ("", f"pysframe: {recording}: {said} (File too large)\n")
