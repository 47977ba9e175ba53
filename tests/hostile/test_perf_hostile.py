"""Hostile, damaged and unfinished perf.data recordings through ``pysframe perf``.

Each case ends cleanly: exit status 0, 1 or 2; one ``pysframe:`` line per problem on standard
error (no traceback, no internal error); no file changed but the output; time and memory
linear in the size of the recording (each count doubled twice, with tests/test_hostile_sweep's
``sweep``).  The recordings are hand-made (perf_support.PerfFile), but for two made by perf
itself: one cut short, one of a ``perf record`` killed with SIGKILL, which perf reads too once
told where the data ends.

* the attributes' id sections, read once each (sections that overlap are refused);
* pipe mode: a prologue of many side-band records, many HEADER_ATTR records, before and among
  the samples, in time linear in the stream;
* sizes checked before arithmetic: an AUXTRACE payload of 2^64-1 bytes;
* a mapped file of /proc is not read as a module (nor a device, nor any file of the kernel);
* a mapping whose end passes 2^64 holds no address, as perf's (its end wraps);
* a recording with data size 0 (``perf record`` killed), or cut short, is read up to its last
  whole record, with one warning; without the feature sections, the architecture is the
  mapped files' machine, then this machine's;
* LOST and LOST_SAMPLES records give one warning with the count and the share of samples, in
  file and pipe mode;
* standard input, when a pipe, is read ahead of the reader (a writer never waits on it).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from conftest import unavailable
from perf_support import (
    CPU,
    FEAT_ARCH,
    IDENTIFIER,
    IP,
    PERF,
    PERIOD,
    REGS_USER,
    STACK_USER,
    TID,
    TIME,
    Attr,
    PerfFile,
    Unavailable,
    check_perf,
    unfinished,
)
from pysframe.cli import main
from test_hostile_sweep import sweep
from test_loadmap import program

#: The sample fields of the hand-made recordings: an id in every record (several attributes).
FIELDS = IP | TID | TIME | CPU | PERIOD | IDENTIFIER
#: perf's AArch64 user registers X29 (29), LR (30), SP (31), PC (32), in that order in a sample.
AARCH64_REGS = 0xF << 29
#: The samples' pc and sp: the code of test_loadmap.program, mapped at its link address.
PC, SP = 0x400100, 0x7FFF0000
#: struct perf_file_attr of PerfFile's files: the attribute (136 bytes) and its ids' section.
ATTR_ENTRY = 136 + 16


# -- running the command line -------------------------------------------------------------------


def tree(top: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``top``: its content's digest and modification time."""
    return {
        str(path): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(top.rglob("*")) if path.is_file()
    }  # fmt: skip


@dataclass
class Run:
    status: int
    out: str
    #: The lines on standard error.
    err: list[str]


def pysframe(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    inputs: Path,
    *arguments: str,
    stdin: bytes | None = None,
) -> Run:
    """``pysframe ARGUMENTS`` in this process (``stdin``: standard input's bytes), checked to
    end cleanly: a status of 0, 1 or 2, every line on standard error a ``pysframe:`` one and
    no internal error, and no file under ``inputs`` changed."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    before = tree(inputs)
    status = main(list(arguments))
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert status in (0, 1, 2), captured.err
    assert all(line.startswith("pysframe: ") for line in err), captured.err
    assert "internal error" not in captured.err and "Traceback" not in captured.err
    assert tree(inputs) == before
    return Run(status, captured.out, err)


def quiet(*arguments: str, stdin: Callable[[], bytes] | None = None) -> Callable[[], object]:
    """A run of the command line for a sweep (its output thrown away); it must end with 0."""

    def run() -> None:
        saved = sys.stdin, sys.stdout, sys.stderr
        try:
            if stdin is not None:
                sys.stdin = io.TextIOWrapper(io.BytesIO(stdin()))
            sys.stdout = sys.stderr = io.StringIO()
            assert main(list(arguments)) == 0
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved

    return run


def recording(fields: int = FIELDS, *, pipe: bool = False) -> PerfFile:
    perf = PerfFile(pipe=pipe)
    perf.add_attr(Attr(fields, ids=(7,)))
    return perf


def samples_in(folded: str) -> int:
    """The samples of ``perf report --format folded`` text."""
    return sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines())


# -- attributes: their ids read once each ----------------------------------------------------------


def overlapping_ids(attrs: int, ids: int) -> bytes:
    """A file of ``attrs`` attributes whose id sections all hold the same ``ids`` ids."""
    perf = PerfFile()
    for _ in range(attrs):
        perf.add_attr(Attr(FIELDS))
    perf.sample(0, ip=0x1000, pid=1, tid=1, ident=0)
    blob = bytearray(perf.build())
    shared = len(blob)
    blob += struct.pack(f"<{ids}Q", *range(1, ids + 1))
    attr_size, attrs_offset = struct.unpack_from("<QQ", blob, 16)  # header: attr_size, attrs
    for index in range(attrs):
        section = attrs_offset + index * attr_size + attr_size - 16  # perf_file_attr.ids
        struct.pack_into("<QQ", blob, section, shared, 8 * ids)
    return bytes(blob)


def test_attribute_id_sections_that_overlap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """6,000 attributes whose id sections all cover the same 128 K ids of a 2 MB file: read
    each time, 768 M ids (more than 2 GB).  The sections are refused before any is read."""
    path = tmp_path / "overlap.data"
    path.write_bytes(overlapping_ids(6000, 1 << 17))
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "report", "--format", "folded",
                   str(path))  # fmt: skip
    second = 104 + ATTR_ENTRY  # sorted by offset, the first two entries' sections overlap
    assert run.status == 1 and run.err == [
        f"pysframe: {path}: the ids of this event attribute overlap those of another attribute "
        f"(at byte offset {second:#x})"
    ]

    def make(count: int) -> Callable[[], object]:
        path = tmp_path / f"overlap-{count}.data"
        path.write_bytes(overlapping_ids(count, 20 * count))

        def run() -> None:
            assert main(["perf", "stats", str(path)]) == 1

        return run

    sweep(make, [1500, 3000, 6000])


def test_many_attributes_with_ids_of_their_own(tmp_path: Path) -> None:
    def make(count: int) -> Callable[[], object]:
        perf = PerfFile()
        for index in range(count):
            perf.add_attr(Attr(FIELDS, ids=(2 * index + 1, 2 * index + 2)))
        for index in range(0, count, 10):
            perf.sample(index, ip=0x1000, pid=1, tid=1)
        path = tmp_path / f"attrs-{count}.data"
        path.write_bytes(perf.build())
        return quiet("perf", "report", "--format", "folded", str(path))

    sweep(make, [800, 1600, 3200])


# -- pipe mode: linear in the stream ---------------------------------------------------------------


def comm_prologue(count: int) -> bytes:
    """A pipe-mode stream of ``count`` COMM records of long names (4 KiB a record), then one
    sample (a system-wide recording on a busy machine starts so, with shorter names)."""
    perf = recording(pipe=True)
    for tid in range(count):
        perf.comm(0, 100 + tid, 100 + tid, f"task-{tid}-".ljust(4000, "x"))
    perf.sample(0, ip=0x1000, pid=100, tid=100)
    return perf.build()


def test_a_pipe_mode_prologue_of_many_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records before the first sample are kept whole for the pass that reads them: past
    a block (8 MiB; 64 KiB here), they were copied again for each record (more than 100 s for
    215,000 COMM records)."""
    from pysframe.perf import data as data_module

    monkeypatch.setattr(data_module, "STREAM_BLOCK", 64 << 10)
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "report", "--format", "folded", "-",
                   stdin=comm_prologue(500))  # fmt: skip
    assert (run.status, run.out, run.err) == (0, "task-0-".ljust(4000, "x") + ";[unknown] 1\n", [])

    def make(count: int) -> Callable[[], object]:
        stream = comm_prologue(count)
        return quiet("perf", "report", "--format", "folded", "-", stdin=lambda: stream)

    sweep(make, [500, 1000, 2000])


def header_attrs(count: int, where: str) -> bytes:
    """A pipe-mode stream of ``count`` HEADER_ATTR records: ``before`` the first sample (a
    sample of the last attribute), ``after`` it (then a sample of each attribute), or each
    ``among`` the samples (followed by a sample of its attribute)."""
    perf = PerfFile(pipe=True)
    attrs = [Attr(FIELDS, ids=(index + 1,)) for index in range(count)]
    if where == "before":
        for attr in attrs:
            perf.add_attr(attr)
        perf.sample(count - 1, ip=0x1000, pid=1, tid=1)
    elif where == "after":
        perf.sample(perf.attr_record(attrs[0]), ip=0x1000, pid=1, tid=1)
        for attr in attrs[1:]:
            perf.attr_record(attr)
        for index in range(count):
            perf.sample(index, ip=0x1000, pid=1, tid=1)
    else:
        for attr in attrs:
            perf.sample(perf.attr_record(attr), ip=0x1000, pid=1, tid=1)
    return perf.build()


@pytest.mark.parametrize("where", ["before", "after"])
def test_many_header_attr_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:  # fmt: skip
    """30,000 HEADER_ATTR records did not end in 60 s: each rebuilt every attribute's format
    and name."""
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "script", "-",
                   stdin=header_attrs(1000, where))  # fmt: skip
    assert run.status == 0 and run.err == []
    assert len(script_samples(run.out)) == (1 if where == "before" else 1001)

    def make(count: int) -> Callable[[], object]:
        stream = header_attrs(count, where)
        return quiet("perf", "report", "--format", "folded", "-", stdin=lambda: stream)

    # After the first sample, each sample is of an attribute of its own: a group to decode.
    sweep(make, [1500, 3000, 6000] if where == "before" else [800, 1600, 3200])


def test_header_attr_records_among_the_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each sample after the attribute it is of, which it is found as (by its id)."""
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "script", "-",
                   stdin=header_attrs(300, "among"))  # fmt: skip
    assert run.status == 0 and run.err == []
    # each sample's event: the last word with a colon (the samples have no callchain: their
    # address and symbol follow on the line)
    events = [[word for word in line.split() if word.endswith(":")][-1]
              for line in script_samples(run.out)]  # fmt: skip
    assert events == ["event0:"] + ["event:"] * 299  # named: the attributes of the prologue


# -- sizes checked before arithmetic ---------------------------------------------------------------


def test_an_auxtrace_payload_of_two_to_the_64_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """File mode: an error at the record (it was ``internal error: OverflowError``); pipe
    mode, from a file or a stream: the data is cut short there, the same warning."""
    huge = (1 << 64) - 1
    said = (
        f"the payload of {huge} bytes of the AUXTRACE record at this offset runs past the end "
        "of the "
    )
    for pipe in (False, True):
        perf = recording(pipe=pipe)
        perf.sample(0, ip=0x1000, pid=1, tid=1)
        # The header, then the attribute's id (7) and its entry, or its HEADER_ATTR record.
        at = (104 + 8 + ATTR_ENTRY if not pipe else 16 + 8 + 136 + 8) + len(perf.records[0])
        perf.auxtrace(huge, bytes(64))
        perf.sample(0, ip=0x2000, pid=1, tid=1)
        path = tmp_path / f"aux-{pipe}.data"
        path.write_bytes(perf.build())
        run = pysframe(capsys, monkeypatch, tmp_path, "perf", "report", "--format", "folded",
                       str(path))  # fmt: skip
        if not pipe:
            assert run.status == 1 and run.err == [
                f"pysframe: {path}: {said}data section (at byte offset {at:#x})"
            ]
            continue
        warning = f"; {said}{{}}, the records before it were read (at byte offset {at:#x})"
        assert (run.status, run.out) == (0, ":1;[unknown] 1\n")
        assert run.err == [f"pysframe: warning: {path}: the file is cut short" +
                           warning.format("file")]  # fmt: skip
        run = pysframe(capsys, monkeypatch, tmp_path, "perf", "report", "--format", "folded",
                       "-", stdin=path.read_bytes())  # fmt: skip
        assert (run.status, run.out) == (0, ":1;[unknown] 1\n")
        assert run.err == [
            "pysframe: warning: -: the stream is cut short" + warning.format("stream")
        ]


# -- files of the kernel are not modules -----------------------------------------------------------


def test_a_mapped_file_of_proc_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MMAP2 of /proc/self/mem: reading it failed (EIO), and the command ended with
    ``pysframe: standard output: Input/output error``.  It is not read: the frame is in a
    module without a file, as a missing file's is."""
    perf = recording(FIELDS | REGS_USER | STACK_USER)
    perf.attrs[0].regs_user, perf.attrs[0].stack_user = 0x1C0, 64  # BP, SP, IP (x86-64)
    perf.add_feature(FEAT_ARCH, perf.string("x86_64"))
    for name in ("/proc/self/mem", "/dev/zero"):
        perf.mmap2(0, 1, 1, 0x400000, 0x1000, 0, name)
        perf.sample(0, ip=0x400010, pid=1, tid=1, regs=(0, SP, 0x400010), stack=bytes(64))
    path = tmp_path / "proc.data"
    path.write_bytes(perf.build())
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "report", "--format", "folded",
                   str(path))  # fmt: skip
    assert (run.status, run.err) == (0, [])
    # an executable mapping of /dev/zero is JIT code to perf (util/map.c map__new)
    assert run.out.splitlines() == [":1;[mem] 1", ":1;[perf-1.map] 1"]



@pytest.mark.parametrize("length", [0x1000, 0x2000], ids=["to-2**64", "past-2**64"])
def test_a_mapping_that_runs_past_the_address_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    length: int,
) -> None:
    """An MMAP2 whose start plus length reaches 2**64: its end does not fit in a u64 (the
    command ended with an internal error).  perf's end wraps, and no address is found in the
    mapping; nor here: the sample's frame has no module."""
    perf = recording()
    start = (1 << 64) - 0x1000
    perf.mmap2(0, 1, 1, start, length, 0, sys.executable)
    perf.sample(0, ip=start + 0x10, pid=1, tid=1)
    path = tmp_path / "wrapped.data"
    path.write_bytes(perf.build())
    for command in (("script",), ("report", "--format", "folded")):
        run = pysframe(capsys, monkeypatch, tmp_path, "perf", *command, str(path))
        assert (run.status, run.err) == (0, [])
        assert "[unknown]" in run.out and Path(sys.executable).name not in run.out

def test_files_of_the_kernel_are_no_inputs() -> None:
    from pysframe.elf.reader import ElfReader
    from pysframe.input import InputError, open_input, read_proc

    for name in ("/proc/self/mem", "/proc/self/maps", "/sys/kernel/notes"):
        if not os.path.exists(name):
            continue
        with pytest.raises(InputError, match=r"a file of the kernel \((proc|sysfs) file system"):
            open_input(name)
        with pytest.raises(InputError) as raised:
            ElfReader.open(name)
        assert raised.value.path == name
    assert b"r-xp" in read_proc("/proc/self/maps", 1 << 24)  # read as the kernel's file it is
    open_input("/proc/self/exe").close()  # a link to the program's file: an input


# -- unfinished and cut recordings -----------------------------------------------------------------


def aarch64_recording() -> PerfFile:
    """A recording of an AArch64 program's samples (perf's AArch64 user registers, which
    x86-64 does not have): :func:`add_aarch64_samples` adds them."""
    perf = recording(FIELDS | REGS_USER | STACK_USER)
    perf.attrs[0].regs_user, perf.attrs[0].stack_user = AARCH64_REGS, 32
    perf.comm(0, 5, 5, "prog")
    return perf


def add_aarch64_samples(perf: PerfFile, binary: Path, count: int) -> None:
    """``count`` samples in the code of ``binary`` (test_loadmap.program's file), mapped."""
    perf.mmap2(0, 5, 5, 0x400000, 0x1000, 0, str(binary))
    for n in range(count):
        perf.sample(0, ip=PC + 4 * n, pid=5, tid=5, time=10 + n, regs=(0, 0, SP, PC + 4 * n),
                    stack=bytes(32))  # fmt: skip


def script_samples(text: str) -> list[str]:
    """The header lines of ``perf script`` text (one per sample): not a frame's line (a tab
    first); a sample without a callchain is one line, its command right-aligned (``%16s``)."""
    return [line for line in text.splitlines() if line and not line.startswith("\t")]


def test_a_recording_perf_record_did_not_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """perf record killed: the header's data size is 0, no feature section (no ARCH).  It was
    ``user registers of architecture '' are not supported``; now the records are read to the
    last whole one, with one warning, and the registers are the mapped file's machine's
    (AArch64, not this machine's), as the finished recording's are."""
    binary = program(tmp_path / "bin" / "prog")
    perf = aarch64_recording()
    perf.add_feature(FEAT_ARCH, perf.string("aarch64"))
    add_aarch64_samples(perf, binary, 3)
    finished = tmp_path / "finished.data"
    finished.write_bytes(perf.build())
    killed = tmp_path / "killed.data"
    killed.write_bytes(unfinished(perf.build()))
    torn = tmp_path / "torn.data"  # killed while writing its last record
    torn.write_bytes(unfinished(perf.build())[:-10])
    reference = pysframe(capsys, monkeypatch, tmp_path, "perf", "script", str(finished))
    assert reference.err == [] and len(script_samples(reference.out)) == 3
    # without a callchain, perf prints the sample's address as the process saw it
    assert f" 400100 [unknown] ({binary})\n" in reference.out
    said = (
        "the header's data size is 0: perf record did not finish (was it killed?) and wrote "
        "no feature sections; "
    )
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "script", str(killed))
    end = killed.stat().st_size
    assert (run.status, run.out) == (0, reference.out)
    assert run.err == [
        f"pysframe: warning: {killed}: {said}the records were read to the end of the file "
        f"(at byte offset {end:#x})"
    ]
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "script", str(torn))
    last = torn.stat().st_size + 10 - len(perf.records[-1])
    assert run.status == 0 and script_samples(run.out) == script_samples(reference.out)[:2]
    assert run.err == [
        f"pysframe: warning: {torn}: {said}a record of {len(perf.records[-1])} bytes runs past "
        f"the end of the file, the records before it were read (at byte offset {last:#x})"
    ]


def test_without_features_the_architecture_of_this_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ARCH feature and no mapped file of a known machine: this machine's registers."""
    if os.uname().machine != "x86_64":
        pytest.skip("x86-64 registers")
    perf = recording(FIELDS | REGS_USER | STACK_USER)
    perf.attrs[0].regs_user, perf.attrs[0].stack_user = 0x1C0, 16  # BP, SP, IP (x86-64)
    perf.sample(0, ip=0x1000, pid=1, tid=1, regs=(0, SP, 0x1000), stack=bytes(16))
    path = tmp_path / "killed.data"
    path.write_bytes(unfinished(perf.build()))
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "report", "--format", "folded",
                   str(path))  # fmt: skip
    assert (run.status, run.out) == (0, ":1;[unknown] 1\n") and len(run.err) == 1


def test_a_recording_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy cut short: its features (ARCH) are past the cut.  Every whole sample is read,
    with one warning."""
    binary = program(tmp_path / "bin" / "prog")
    perf = aarch64_recording()
    perf.add_feature(FEAT_ARCH, perf.string("aarch64"))
    add_aarch64_samples(perf, binary, 40)
    blob = perf.build()
    whole = len(blob) - 16 - len(perf.features[0][1])  # the data's end: then the features
    cut = whole - len(perf.records[-1]) * 5 // 2  # in the middle of the third sample from the end
    path = tmp_path / "cut.data"
    path.write_bytes(blob[:cut])
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "script", str(path))
    assert run.status == 0 and len(script_samples(run.out)) == 37
    last = whole - 3 * len(perf.records[-1])
    assert run.err == [
        f"pysframe: warning: {path}: the file is cut short: its data should run to {whole:#x}, "
        f"and the feature sections after it are missing; a record of {len(perf.records[-1])} "
        f"bytes runs past the end of the file, the records before it were read (at byte offset "
        f"{last:#x})"
    ]


def _perf_samples_before(path: Path, end: int) -> int:
    """The SAMPLE records ``perf script -D`` lists in ``path`` before file offset ``end``."""
    done = subprocess.run([PERF, "script", "-D", "-i", str(path)], capture_output=True,
                          text=True, errors="replace", timeout=300, check=False)  # fmt: skip
    offsets = re.findall(r"^\d+ (0x[0-9a-f]+) \[0x[0-9a-f]+\]: PERF_RECORD_SAMPLE", done.stdout,
                         re.MULTILINE)  # fmt: skip
    return sum(1 for offset in offsets if int(offset, 16) < end)


def _workload(seconds: float) -> list[str]:
    return [
        sys.executable,
        "-c",
        f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass",
    ]


def test_a_perf_recording_cut_short_and_one_killed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recordings of perf: one cut at half its size, one of a perf record killed with
    SIGKILL.  The samples pysframe prints are the SAMPLE records perf lists before the cut
    (perf script itself stops at the first record it cannot read, and may drop those after
    the last round), and, for the killed one, those of a copy whose header is told where the
    data ends (perf reads nothing of a file whose data size is 0)."""
    try:
        check_perf()
    except Unavailable as why:
        unavailable(why)
    options = ["-e", "cpu-clock", "-c", "200000", "--call-graph", "dwarf,1024"]
    full = tmp_path / "full.data"
    subprocess.run([PERF, "record", "-q", *options, "-o", str(full), "--", *_workload(0.5)],
                   capture_output=True, timeout=120, check=True)  # fmt: skip
    cut = tmp_path / "cut.data"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "script", str(cut))
    (warning,) = run.err
    stopped = int(re.search(r"at byte offset (0x[0-9a-f]+)\)$", warning)[1], 16)  # type: ignore[index]
    assert run.status == 0 and "the file is cut short" in warning
    assert len(script_samples(run.out)) == _perf_samples_before(full, stopped) > 0

    killed = tmp_path / "killed.data"
    recorder = subprocess.Popen([PERF, "record", "-q", *options, "-o", str(killed), "--",
                                 *_workload(4)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(1.5)
    recorder.send_signal(signal.SIGKILL)
    recorder.wait()
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "script", str(killed))
    (warning,) = run.err
    assert run.status == 0 and "the header's data size is 0" in warning
    told = bytearray(killed.read_bytes())
    data_offset = struct.unpack_from("<Q", told, 40)[0]
    struct.pack_into("<Q", told, 48, len(told) - data_offset)  # data.size
    told[72:104] = bytes(32)  # no features: there are none
    copy = tmp_path / "told.data"
    copy.write_bytes(bytes(told))
    stopped = int(re.search(r"at byte offset (0x[0-9a-f]+)\)$", warning)[1], 16)  # type: ignore[index]
    assert len(script_samples(run.out)) == _perf_samples_before(copy, stopped) > 0


# -- lost samples ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kinds", ["both", "lost", "lost-samples"])
@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_lost_samples_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    kinds: str, stream: bool,
) -> None:  # fmt: skip
    """perf record that did not keep up: LOST records (the kernel's, per chunk of records
    dropped) and the LOST_SAMPLES records perf 6 ends a recording with, which count the same
    samples again.  One warning: how many samples, and their share of those taken."""
    perf = recording(pipe=stream)
    for n in range(70):
        perf.sample(0, ip=0x1000, pid=1, tid=1, time=n)
        if n in (10, 50) and kinds != "lost-samples":
            perf.lost(0, 7, 15, time=n)
    if kinds != "lost":
        perf.lost_samples(0, 30, time=70)
    path = tmp_path / "lost.data"
    path.write_bytes(perf.build())
    name = "-" if stream else str(path)
    run = pysframe(capsys, monkeypatch, tmp_path, "perf", "report", "--format", "folded", name,
                   stdin=path.read_bytes() if stream else None)  # fmt: skip
    assert (run.status, samples_in(run.out)) == (0, 70)
    assert run.err == [
        f"pysframe: warning: {name}: 30 samples were lost (30.00% of 100): the kernel dropped "
        "them when perf record did not keep up (LOST records); check the I/O and CPU load, or "
        "record at a lower frequency"
    ]


# -- standard input read ahead ---------------------------------------------------------------------


def test_a_pipe_is_read_ahead_of_the_reader() -> None:
    """The writer of a pipe never waits on a reader busy elsewhere: its bytes are read as they
    come, up to the limit; past it, the writer waits until the reader takes some."""
    from pysframe.input import ReadAhead

    try:
        pipe_max = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        pipe_max = 1 << 20
    # More than the limit, a read (1 MiB) past it and the largest pipe buffer hold.
    payload = os.urandom((3 << 20) + pipe_max)
    for limit, writer_waits in ((1 << 30, False), (1 << 20, True)):
        read_end, write_end = os.pipe()

        def write(end: int = write_end) -> None:
            with open(end, "wb") as sink:
                sink.write(payload)

        reader = ReadAhead(read_end, "pipe", limit=limit)
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(timeout=10 if not writer_waits else 0.5)
        assert writer.is_alive() == writer_waits
        received = b"".join(iter(partial(reader.read, 1 << 16), b""))
        writer.join(timeout=10)
        assert received == payload and not writer.is_alive()
        os.close(read_end)


def test_a_recording_piped_into_pysframe(tmp_path: Path) -> None:
    """Through a real pipe, in a process of its own: the stream read ahead by a thread."""
    perf = recording(pipe=True)
    for n in range(2000):
        perf.comm(0, 1, 1, f"name-{n}")
        perf.sample(0, ip=0x1000, pid=1, tid=1, time=n)
    done = subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", "report", "--format", "folded", "-"],
        input=perf.build(), capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, b"")
    assert samples_in(done.stdout.decode()) == 2000
