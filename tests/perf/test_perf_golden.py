"""The perf.data reader against perf itself.

Every sample's time, CPU, pid, tid, ip, period, misc, addr, callchain, user registers and
user stack (size used, place in the record) against ``perf script -D``; the side-band records
(MMAP, MMAP2, COMM, FORK, EXIT) as perf prints them; pid, tid, time, ip, period and CPU
against ``perf script -F pid,tid,time,ip,period,cpu --ns -G``; the features and attributes
against ``perf report --header-only -I``; build IDs against ``perf buildid-list``.

On the recordings of tests/data/perf (made by its record.sh, with perf's outputs beside
them), and on recordings made here and now where perf may record (file mode, pipe mode, a
pipe read as it is written, two events, frame-pointer call graphs, frequency mode).
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_module, unavailable
from perf_support import (
    DATA,
    PERF,
    Unavailable,
    build_program,
    dump_text,
    mmap_text,
    parse_dump,
    parse_header,
    parse_script,
    perf_output,
    read_both,
    record,
)
from pysframe.perf import CommEvent, MmapEvent, PerfData, SampleChunk, TaskEvent
from pysframe.perf.registers import register_layout

#: perf report's names of the sample_type bits (util/evsel.c __p_sample_type).
SAMPLE_TYPE_NAMES = {
    "IP": 1 << 0, "TID": 1 << 1, "TIME": 1 << 2, "ADDR": 1 << 3, "READ": 1 << 4,
    "CALLCHAIN": 1 << 5, "ID": 1 << 6, "CPU": 1 << 7, "PERIOD": 1 << 8, "STREAM_ID": 1 << 9,
    "RAW": 1 << 10, "BRANCH_STACK": 1 << 11, "REGS_USER": 1 << 12, "STACK_USER": 1 << 13,
    "WEIGHT": 1 << 14, "DATA_SRC": 1 << 15, "IDENTIFIER": 1 << 16, "TRANSACTION": 1 << 17,
    "REGS_INTR": 1 << 18,
}  # fmt: skip


# -- comparisons -------------------------------------------------------------------------------


def check_against_dump(path: Path, dump: str, pipe: bool) -> int:
    """Every sample and side-band record of ``path`` against ``perf script -D``; the number of
    samples."""
    expected = parse_dump(dump, pipe)
    with PerfData.open(path) as data:
        arch = data.features.arch or "x86_64"
        found: dict[int, tuple[SampleChunk, int]] = {}
        events = {}
        for stretch in data.read(chunk=7):
            events.update({event.offset: event for event in stretch.events})
            chunk = stretch.samples
            assert isinstance(chunk, SampleChunk)
            found.update({int(chunk.file_offset[i]): (chunk, i) for i in range(len(chunk))})
        assert data.problems == []
    assert found.keys() == expected.samples.keys()
    for offset, theirs in expected.samples.items():
        chunk, index = found[offset]
        ours = chunk.sample(index)
        assert (ours.time, ours.pid, ours.tid, ours.ip, ours.period, ours.misc, ours.addr) == (
            theirs.time, theirs.pid, theirs.tid, theirs.ip, theirs.period, theirs.misc,
            theirs.addr,
        ), hex(offset)  # fmt: skip
        if theirs.cpu is not None:
            assert ours.cpu == theirs.cpu
        assert list(ours.callchain) == theirs.callchain, hex(offset)
        if theirs.regs_mask is None:
            assert ours.regs == ()
        else:
            layout = register_layout(arch, ours.regs_mask)
            assert (ours.regs_mask, ours.regs_abi) == (theirs.regs_mask, 2)
            assert dict(zip(layout.names, ours.regs, strict=True)) == theirs.regs
        if theirs.ustack_size is not None:
            assert ours.stack_dyn_size == theirs.ustack_size
            assert ours.stack_offset - 8 - ours.offset == theirs.ustack_offset
            assert len(chunk.stack(index)) == theirs.ustack_size
    side_band = {
        offset: record for offset, record in expected.records.items()
        if record.kind in ("MMAP", "MMAP2", "COMM", "FORK", "EXIT")
    }  # fmt: skip
    assert side_band.keys() == {o for o, e in events.items() if not _is_lost(e)}
    for offset, theirs in side_band.items():
        event = events[offset]
        assert (event.time or 0, event.sample_id.cpu) == (theirs.time, theirs.cpu)
        assert event_text(event) == theirs.text, hex(offset)
    return len(found)


def _is_lost(event: object) -> bool:
    return not isinstance(event, MmapEvent | CommEvent | TaskEvent)


def event_text(event: object) -> str:
    """A side-band event as perf script -D prints it after its PERF_RECORD_ name (util/event.c
    perf_event__fprintf_*)."""
    if isinstance(event, MmapEvent):
        return mmap_text(event)
    if isinstance(event, CommEvent):
        return f"{'exec' if event.exec else ''}: {event.comm}:{event.pid}/{event.tid}".strip()
    assert isinstance(event, TaskEvent)
    return f"({event.pid}:{event.tid}):({event.ppid}:{event.ptid})"


def check_against_script(path: Path, script: str) -> None:
    """pid, tid, CPU, time, period and ip of every sample against perf script (which sorts
    them by time: compared as sorted lists)."""
    with PerfData.open(path) as data:
        ours = [
            (int(c.pid[i]), int(c.tid[i]), int(c.cpu[i]), int(c.time[i]), int(c.period[i]),
             int(c.ip[i]))
            for c in data.samples() for i in range(len(c))
        ]  # fmt: skip
    theirs = parse_script(script)
    assert len(theirs) == len(ours) > 0
    assert sorted(ours) == sorted(theirs)


def check_against_header(path: Path, header: str) -> None:
    """The features and attributes against perf report --header-only -I."""
    values = parse_header(header)
    with PerfData.open(path) as data:
        f = data.features
        assert f.hostname == values["hostname"]
        assert f.os_release == values["os release"]
        assert f.version == values["perf version"]
        assert f.arch == values["arch"]
        assert str(f.nrcpus_online) == values["nrcpus online"]
        assert str(f.nrcpus_available) == values["nrcpus avail"]
        assert f.cpudesc == values["cpudesc"] and f.cpuid == values["cpuid"]
        assert f"{f.total_mem} kB" == values["total memory"]
        assert " ".join(f.cmdline) == values["cmdline"].strip()
        if "time of first sample" in values:
            assert f.sample_time is not None
            for time, text in zip(f.sample_time, (
                values["time of first sample"], values["time of last sample"]
            ), strict=True):  # fmt: skip
                assert f"{time // 10**9}.{time % 10**9 // 1000:06d}" == text
        events = values["event"].split("\n")
        assert len(events) == len(data.attrs)
        for attr, line in zip(data.attrs, events, strict=True):
            fields = dict(re.findall(r"(\w+) = ([^,{]+|\{[^}]*\})", line))
            assert attr.name == fields["name"]
            ids = fields["id"].strip("{} ").split(", ")
            assert attr.ids == tuple(int(i) for i in ids)
            assert str(attr.type) == fields["type"] and str(attr.size) == fields["size"]
            assert attr.sample_type == sum(
                SAMPLE_TYPE_NAMES[n] for n in fields["sample_type"].strip().split("|")
            )
            assert attr.sample_id_all == (fields.get("sample_id_all") == "1")
            assert attr.exclude_callchain_user == (fields.get("exclude_callchain_user") == "1")
            assert attr.freq == (fields.get("freq") == "1")
            if attr.sample_regs_user:
                assert f"{attr.sample_regs_user:#x}" == fields["sample_regs_user"].strip()
                assert str(attr.sample_stack_user) == fields["sample_stack_user"].strip()


def check_build_ids(path: Path, listing: str) -> None:
    with PerfData.open(path) as data:
        ours = {(b.hex, b.filename) for b in data.features.build_ids}
    theirs = {tuple(line.split(maxsplit=1)) for line in listing.splitlines() if line.strip()}
    assert ours == theirs and ours


# -- the recordings of tests/data/perf ----------------------------------------------------------

RECORDINGS = pytest.mark.parametrize("name", ["threads", "pipe"])


@RECORDINGS
def test_recording_against_perf_script_dump(name: str) -> None:
    dump = gzip.decompress((DATA / f"{name}.dump.txt.gz").read_bytes()).decode()
    assert check_against_dump(DATA / f"{name}.data", dump, name == "pipe") > 20


@RECORDINGS
def test_recording_against_perf_script_fields(name: str) -> None:
    check_against_script(DATA / f"{name}.data", (DATA / f"{name}.script.txt").read_text())


@RECORDINGS
def test_recording_against_perf_report_header(name: str) -> None:
    check_against_header(DATA / f"{name}.data", (DATA / f"{name}.header.txt").read_text())


def test_recording_build_ids_against_perf_buildid_list() -> None:
    check_build_ids(DATA / "threads.data", (DATA / "threads.buildids.txt").read_text())


@RECORDINGS
def test_recording_read_as_the_oracle_reads_it(name: str) -> None:
    for chunk in (1, 4, 1000):
        reading = read_both(DATA / f"{name}.data", chunk)
        assert reading.bulk == reading.oracle and len(reading.bulk) > 20
        assert reading.bulk_error is None and reading.problems == []


def test_threads_recording_has_what_the_tests_need() -> None:
    """Samples of four threads and a forked child, FORK and EXIT records."""
    reading = read_both(DATA / "threads.data")
    assert len({s.tid for s in reading.bulk}) >= 4 and len({s.pid for s in reading.bulk}) == 2
    assert {type(e) for e in reading.events} == {MmapEvent, CommEvent, TaskEvent}


def test_compressed_recording_is_read() -> None:
    """perf record -z of a short run (side-band records, no samples): the records its two
    COMPRESSED records hold, counted as ``perf report --stats`` (perf 6.1) counts them."""
    require_module("zstandard")
    path = DATA / "compressed.data"
    reading = read_both(path)
    assert reading.bulk_error is None and reading.problems == [] and reading.bulk == []
    with PerfData.open(path) as data:
        assert data.compressed
        list(data.events())
        counts = {kind: data.record_counts[kind] for kind in (1, 3, 4, 7, 10, 68)}
    # MMAP 1, COMM 2, EXIT 5, FORK 4, MMAP2 4, FINISHED_ROUND 2
    assert counts == {1: 1, 3: 2, 4: 5, 7: 4, 10: 4, 68: 2}


# -- recordings made here ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return build_program(tmp_path_factory.mktemp("perfprog"), "perfprog")
    except Unavailable as why:
        unavailable(why)


def live(
    out: Path, program: Path, *, pipe: bool = False, iterations: str = "0.6", **kwargs: object
) -> Path:
    """``program`` (perfprog: ``iterations`` million loops a thread) recorded into ``out``."""
    try:
        return record(out, [str(program), iterations], pipe=pipe, **kwargs)  # type: ignore[arg-type]
    except Unavailable as why:
        unavailable(why)


@pytest.mark.parametrize("pipe", [False, True], ids=["file", "pipe"])
def test_live_recording_against_perf(tmp_path: Path, program: Path, pipe: bool) -> None:
    path = live(tmp_path / "live.data", program, pipe=pipe)
    assert check_against_dump(path, dump_text(path), pipe) > 10
    check_against_script(path, perf_output(
        "script", "-F", "pid,tid,time,ip,period,cpu", "--ns", "-G", "-i", str(path)
    ))  # fmt: skip
    check_against_header(path, perf_output("report", "--header-only", "-I", "-i", str(path)))
    if not pipe:
        check_build_ids(path, perf_output("buildid-list", "-i", str(path)))


def test_live_two_events(tmp_path: Path, program: Path) -> None:
    """Two events: each record's event found by PERF_SAMPLE_IDENTIFIER."""
    path = live(tmp_path / "two.data", program, options=(
        "-e", "cpu-clock", "-e", "task-clock", "-c", "200000", "--call-graph", "dwarf,128",
        "--sample-cpu",
    ))  # fmt: skip
    with PerfData.open(path) as data:
        assert [a.name for a in data.attrs] == ["cpu-clock", "task-clock"]
        attrs = {int(a) for c in data.samples() for a in c.attr}
        assert attrs == {0, 1} and data.unknown_id_samples == 0
    check_against_dump(path, dump_text(path), False)
    check_against_header(path, perf_output("report", "--header-only", "-I", "-i", str(path)))


@pytest.mark.parametrize("options", [
    ("-e", "cpu-clock", "-c", "100000", "--call-graph", "fp"),
    ("-e", "cpu-clock", "-F", "5000", "-g"),
], ids=["frame-pointer", "frequency"])  # fmt: skip
def test_live_other_sample_layouts(tmp_path: Path, program: Path, options: tuple[str, ...]) -> None:
    # Ten times the loops of the other live recordings: at -F 5000 the kernel sets the period
    # from the rate it has seen, and the default program's few milliseconds of CPU gave no
    # sample at all once, in a loaded test run.
    path = live(tmp_path / "other.data", program, iterations="6", options=options)
    assert check_against_dump(path, dump_text(path), False) > 5
    reading = read_both(path)
    assert reading.bulk == reading.oracle


def test_live_pipe_read_as_it_is_written(tmp_path: Path, program: Path) -> None:
    """perf record -o - piped into a reader of standard input, against the same stream kept
    in a file."""
    live(tmp_path / "probe.data", program)  # skips where perf may not record
    script = (
        "import sys\n"
        "from pysframe.perf import PerfData\n"
        "data = PerfData.open('-')\n"
        "for chunk in data.samples(5):\n"
        "    for i in range(len(chunk)):\n"
        "        print(int(chunk.file_offset[i]), int(chunk.time[i]), int(chunk.ip[i]),\n"
        "              len(chunk.callchain_of(i)), bytes(chunk.stack(i)).hex())\n"
        "print('problems', len(data.problems))\n"
    )
    command = [PERF, "record", "-q", "-e", "cpu-clock", "-c", "100000", "--call-graph",
               "dwarf,256", "-o", "-", "--", str(program), "0.6"]  # fmt: skip
    copy = tmp_path / "copy.data"
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as perf:
        assert perf.stdout is not None
        tee = subprocess.Popen(["tee", str(copy)], stdin=perf.stdout, stdout=subprocess.PIPE)
        perf.stdout.close()
        done = subprocess.run(
            [sys.executable, "-c", script], stdin=tee.stdout, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        tee.wait()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "problems 0"
    with PerfData.open(copy) as data:
        expected = [
            f"{int(c.file_offset[i])} {int(c.time[i])} {int(c.ip[i])} "
            f"{len(c.callchain_of(i))} {bytes(c.stack(i)).hex()}"
            for c in data.samples() for i in range(len(c))
        ]  # fmt: skip
    assert lines[:-1] == expected and len(expected) > 10
