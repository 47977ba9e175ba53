"""Compressed recordings (``perf record -z``) against perf 6.1, on recordings made here and now.

* ``pysframe perf script`` of a ``perf record -z`` recording, with ``--call-graph dwarf`` and
  with ``-g`` (frame pointers), is ``perf script``'s text; ``perf report --stdio`` agrees as
  it does on recordings without ``-z`` (tests/perf/test_perf_callgraph_golden.py: the
  samples whose walks part ways left out, 99% of the lines).
* A pipe-mode recording made with ``-z`` and its copy with every COMPRESSED record replaced by
  what it decompresses to (written here by a decoder of the test's own, zstandard's one-shot
  stream), the same recording without compression: pysframe gives the same text for both
  (and perf does too, which holds the copy to be the recording uncompressed).
* ``-j 2`` reads a compressed recording in one process, with ``-j 1``'s text.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest

from conftest import require_module, unavailable
from perf_support import Unavailable, build_profiled, record
from pysframe.perf import PerfData, analyze
from pysframe.perf.analyze import Options, profile_parts, profile_recording
from test_perf_callgraph_golden import (
    BIND_NOW,
    agreeing_samples,
    agreement,
    perf_lines,
    pysframe_lines,
)


def zstandard() -> ModuleType:
    """The zstandard package (the ``zstd`` extra, in ``dev``): skipped without it, failed
    under CI (conftest.require_module)."""
    return require_module("zstandard")


DWARF = ("-z", "-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,8192", "--sample-cpu")
FRAME_POINTERS = ("-z", "-e", "cpu-clock", "-c", "100000", "-g", "--sample-cpu")


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The C program of tests/data/perf/profiled.c recorded with -z: ``dwarf``, ``fp`` (built
    with frame pointers, recorded with -g) and ``pipe`` (dwarf, perf record -o -)."""
    out = tmp_path_factory.mktemp("compressed")
    try:
        program = build_profiled(out)
        fp_dir = out / "fp"
        fp_dir.mkdir()
        fp_program = build_profiled(fp_dir, frame_pointers=True)
        made = {
            "dwarf": record(out / "dwarf.data", [str(program), "0.5"], options=DWARF,
                            environment=BIND_NOW),
            "fp": record(out / "fp.data", [str(fp_program), "0.5"], options=FRAME_POINTERS,
                         environment=BIND_NOW),
            "pipe": record(out / "pipe.data", [str(program), "0.3"], options=DWARF, pipe=True,
                           environment=BIND_NOW),
        }  # fmt: skip
    except Unavailable as why:
        unavailable(why)
    for path in made.values():
        with PerfData.open(path) as data:
            assert data.compressed
    return made


@pytest.mark.parametrize("name", ["dwarf", "fp"])
def test_script_of_a_compressed_recording_is_perfs(recordings: dict[str, Path], name: str) -> None:
    data = recordings[name]
    arguments = ["script", "-i", str(data), "--no-inline", *agreeing_samples(data)]
    theirs, ours = perf_lines(*arguments), pysframe_lines(*arguments)
    assert len(theirs) > 100
    assert ours == theirs


@pytest.mark.parametrize("name", ["dwarf", "fp"])
@pytest.mark.parametrize("options", [[], ["--no-children"]], ids=["children", "no-children"])
def test_report_of_a_compressed_recording_is_perfs(
    recordings: dict[str, Path], name: str, options: list[str]
) -> None:
    data = recordings[name]
    arguments = ["report", "-i", str(data), "--stdio", "--no-inline", *agreeing_samples(data),
                 *options]  # fmt: skip
    theirs, ours = perf_lines(*arguments), pysframe_lines(*arguments)
    assert len(theirs) > 10
    share, diff = agreement(theirs, ours)
    assert share >= 0.99, f"{share:.4f} of the lines agree\n{diff}"


def uncompressed_copy(pipe_recording: Path, out: Path) -> Path:
    """The pipe-mode ``pipe_recording`` with each COMPRESSED record (u32 type 81, u16 misc, u16
    size, zstd bytes) replaced by the whole records it decompresses to, all of them one zstd
    stream; a record the output of one COMPRESSED record ends within is finished by the next
    one's and comes with it, after the records between them (perf's util/session.c keeps it
    in decomp_last_rem)."""
    blob = pipe_recording.read_bytes()
    stream = zstandard().ZstdDecompressor().decompressobj()
    parts, position, pending = [blob[:16]], 16, b""  # the pipe header: magic, u64 size
    while position < len(blob):
        kind, _misc, size = struct.unpack_from("<IHH", blob, position)
        record = blob[position : position + size]
        position += size
        if kind != 81:
            parts.append(record)
            continue
        pending += stream.decompress(record[8:])
        whole = 0
        while whole + 8 <= len(pending):
            length = struct.unpack_from("<H", pending, whole + 6)[0]
            if length < 8 or whole + length > len(pending):
                break
            whole += length
        parts.append(pending[:whole])
        pending = pending[whole:]
    out.write_bytes(b"".join(parts) + pending)
    return out


@pytest.mark.parametrize("command", [
    ["script", "--no-inline"],
    ["script", "--no-inline", "-F", "comm,tid,time,ip,sym,dso,period", "--ns"],
    ["report", "--stdio", "--no-inline"],
    ["report", "--stdio", "--no-inline", "--no-children", "-g", "caller"],
], ids=["script", "script-fields", "report", "report-caller"])  # fmt: skip
def test_a_compressed_recording_reads_as_it_uncompressed(
    recordings: dict[str, Path], tmp_path: Path, command: list[str]
) -> None:
    compressed = recordings["pipe"]
    plain = uncompressed_copy(compressed, tmp_path / "plain.data")
    if command[0] == "script":
        # perf's own text of the two files: the copy holds the records the compressed one
        # does.  (Not perf report's: of the same two files, perf once ordered two branches
        # of equal overhead otherwise, and once named a frame by another of its symbol's
        # aliases, __libc_start_main@@GLIBC_2.34 for __libc_start_call_main.)
        theirs = perf_lines(command[0], "-i", str(plain), *command[1:])
        assert perf_lines(command[0], "-i", str(compressed), *command[1:]) == theirs
        assert len(theirs) > 10
    ours = pysframe_lines(command[0], "-i", str(compressed), *command[1:])
    assert len(ours) > 10
    assert ours == pysframe_lines(command[0], "-i", str(plain), *command[1:])


def test_a_compressed_recording_is_read_in_one_process(
    recordings: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(recordings["dwarf"])
    options = Options(inline=False)
    whole, stats = profile_recording(path, options)
    assert len(whole) > 100
    monkeypatch.setattr(analyze, "MIN_PART_BYTES", 1)  # else slices for a recording this small
    merging, part_stats, finished = profile_parts(path, options, 2, finish=len)
    assert len(part_stats) == 1 and finished == []
    assert merging().time == whole.time and part_stats[0].samples == stats.samples


def test_jobs_give_one_process_s_text(recordings: dict[str, Path]) -> None:
    arguments = ["script", "-i", str(recordings["dwarf"]), "--no-inline"]
    assert pysframe_lines(*arguments, "-j", "2") == pysframe_lines(*arguments, "-j", "1")
