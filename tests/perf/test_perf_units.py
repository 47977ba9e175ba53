"""The perf.data reader on hand-built files (perf_support.PerfFile writes them field by field):
headers, attributes, features, every sample field, side-band records and their times, several
attributes, pipe-mode records, streams, and bad input.  Each case is read by the reader and by
the oracle of its sample decoder (perf_sample_oracle.py), which must agree."""

from __future__ import annotations

import io
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perf_support import (
    ADDR,
    AUX,
    BRANCH_STACK,
    CALLCHAIN,
    CGROUP,
    CODE_PAGE_SIZE,
    CPU,
    DATA_PAGE_SIZE,
    DATA_SRC,
    FEAT_ARCH,
    FEAT_BUILD_ID,
    FEAT_CMDLINE,
    FEAT_EVENT_DESC,
    FEAT_HOSTNAME,
    FEAT_NRCPUS,
    FEAT_OSRELEASE,
    FEAT_VERSION,
    FINISHED_ROUND,
    ID,
    IDENTIFIER,
    IP,
    PERIOD,
    PHYS_ADDR,
    RAW,
    READ,
    REGS_INTR,
    REGS_USER,
    STACK_USER,
    STREAM_ID,
    TID,
    TIME,
    TRANSACTION,
    WEIGHT,
    Attr,
    PerfFile,
    read_both,
)  # fmt: skip
from pysframe.errors import FormatError, SFrameError
from pysframe.perf import (
    CommEvent,
    LostEvent,
    MmapEvent,
    PerfData,
    PerfDataError,
    SampleChunk,
    TaskEvent,
)
from pysframe.perf import data as data_module

U64_MAX = 2**64 - 1
ORDERS = pytest.mark.parametrize("big_endian", [False, True], ids=["little", "big"])
MODES = pytest.mark.parametrize("pipe", [False, True], ids=["file", "pipe"])


def write(tmp_path: Path, perf: PerfFile, name: str = "perf.data") -> Path:
    path = tmp_path / name
    path.write_bytes(perf.build())
    return path


def agreed(path: Path, chunk: int = 3) -> list:
    """The samples of ``path``, the reader and the oracle holding the same ones."""
    reading = read_both(path, chunk)
    assert reading.bulk_error is None and reading.oracle_error is None, reading
    assert reading.bulk == reading.oracle
    return reading.bulk


def standard_features(perf: PerfFile) -> None:
    perf.add_feature(FEAT_HOSTNAME, perf.string("host-1"))
    perf.add_feature(FEAT_OSRELEASE, perf.string("6.1.0-test"))
    perf.add_feature(FEAT_VERSION, perf.string("6.1.187"))
    perf.add_feature(FEAT_ARCH, perf.string("x86_64"))
    perf.add_feature(FEAT_NRCPUS, perf.pack("II", 8, 4))  # u32 nr_cpus_available, online
    cmdline = [b"perf", b"record", b"-g"]
    perf.add_feature(FEAT_CMDLINE, perf.pack("I", len(cmdline)) + b"".join(  # u32 nr
        perf.string(arg.decode()) for arg in cmdline                          # strings[nr]
    ))  # fmt: skip


# -- header, attributes, features -------------------------------------------------------------


@ORDERS
@MODES
def test_header_attributes_and_features(tmp_path: Path, big_endian: bool, pipe: bool) -> None:
    perf = PerfFile(big_endian, pipe)
    perf.add_attr(Attr(
        IP | TID | TIME | CALLCHAIN | REGS_USER | STACK_USER, ids=(17, 18),
        regs_user=0xFF0FFF, stack_user=8192, period=100000,
    ))  # fmt: skip
    standard_features(perf)
    perf.sample(0, ip=1)  # a data size of 0 would mean perf record did not finish
    with PerfData.open(write(tmp_path, perf)) as data:
        assert (data.header.big_endian, data.header.pipe) == (big_endian, pipe)
        (attr,) = data.attrs
        assert attr.type == 1 and attr.sample_period == 100000 and not attr.freq
        assert attr.sample_type == IP | TID | TIME | CALLCHAIN | REGS_USER | STACK_USER
        assert attr.sample_regs_user == 0xFF0FFF and attr.sample_stack_user == 8192
        assert attr.sample_id_all and attr.ids == (17, 18) and attr.size == 136
        f = data.features
        assert (f.hostname, f.os_release, f.version, f.arch) == (
            "host-1", "6.1.0-test", "6.1.187", "x86_64"
        )
        assert (f.nrcpus_available, f.nrcpus_online) == (8, 4)
        assert f.cmdline == ("perf", "record", "-g")
        assert {FEAT_HOSTNAME, FEAT_CMDLINE, FEAT_NRCPUS} <= f.present
        assert data.problems == []


@ORDERS
def test_attribute_sizes_of_older_perf(tmp_path: Path, big_endian: bool) -> None:
    """size 0 means PERF_ATTR_SIZE_VER0 (64 bytes); fields an older attribute lacks are 0."""
    perf = PerfFile(big_endian)
    perf.add_attr(Attr(IP | TID, size=0, regs_user=0xFF, ids=(5,)))
    perf.sample(0, ip=0x1234, pid=7, tid=8)
    path = write(tmp_path, perf)
    with PerfData.open(path) as data:
        (attr,) = data.attrs
        assert attr.size == 64 and attr.sample_regs_user == 0 and attr.ids == (5,)
    (sample,) = agreed(path)
    assert (sample.ip, sample.pid, sample.tid) == (0x1234, 7, 8)


@ORDERS
def test_event_names_and_build_ids_from_features(tmp_path: Path, big_endian: bool) -> None:
    perf = PerfFile(big_endian)
    first = perf.add_attr(Attr(IP | IDENTIFIER, ids=(3,)))
    second = perf.add_attr(Attr(IP | IDENTIFIER, ids=(4, 5)))
    desc = perf.pack("II", 2, 136)                           # u32 nr, u32 attr_size
    for index, name in ((first, "cycles"), (second, "instructions")):
        attr = perf.attrs[index]
        desc += perf.attr_bytes(attr)                        # struct perf_event_attr
        desc += perf.pack("I", len(attr.ids))                # u32 nr_ids
        desc += perf.string(name)                            # perf_header_string name
        desc += perf.pack(f"{len(attr.ids)}Q", *attr.ids)    # u64 ids[nr_ids]
    perf.add_feature(FEAT_EVENT_DESC, desc)
    name = b"/usr/lib/libc.so.6\0".ljust(24, b"\0")
    build_ids = (
        perf.pack("IHH", 0, 2 | 1 << 15, 8 + 4 + 24 + len(name))  # header: misc user|size
        + perf.pack("i", -1)                                  # pid: the host
        + bytes(range(1, 17)).ljust(20, b"\0")                # build_id[20]: 16 used
        + bytes([16, 0, 0, 0])                                # u8 size, reserved
        + name                                                # filename
        + perf.pack("IHH", 0, 1, 8 + 4 + 24 + 24)             # misc kernel, no size: 20
        + perf.pack("i", -1)
        + bytes(range(100, 120)) + bytes(4)
        + b"[kernel.kallsyms]\0".ljust(24, b"\0")
    )  # fmt: skip
    perf.add_feature(FEAT_BUILD_ID, build_ids)
    perf.sample(first, ip=1)
    with PerfData.open(write(tmp_path, perf)) as data:
        assert [a.name for a in data.attrs] == ["cycles", "instructions"]
        libc, kernel = data.features.build_ids
        assert (libc.pid, libc.filename, libc.build_id, libc.cpumode) == (
            -1, "/usr/lib/libc.so.6", bytes(range(1, 17)), 2
        )
        assert kernel.build_id == bytes(range(100, 120)) and kernel.cpumode == 1
        assert data.features.build_id("/usr/lib/libc.so.6") == bytes(range(1, 17))
        assert data.features.build_id("/usr/lib/libc.so.6", pid=3) is None


def test_an_event_name_that_is_not_utf8_reads_as_every_name(tmp_path: Path) -> None:
    """An event's name with a byte that is not UTF-8 (a hostile or damaged header) reads as
    names read everywhere: the byte as ``\\xNN``, not U+FFFD."""
    perf = PerfFile()
    attr = perf.add_attr(Attr(IP | IDENTIFIER, ids=(3,)))
    raw = b"cyc\xffles\0".ljust(64, b"\0")
    desc = perf.pack("II", 1, 136)                           # u32 nr, u32 attr_size
    desc += perf.attr_bytes(perf.attrs[attr])                # struct perf_event_attr
    desc += perf.pack("I", 1)                                # u32 nr_ids
    desc += perf.pack("I", len(raw)) + raw                   # perf_header_string name
    desc += perf.pack("Q", 3)                                # u64 ids[1]
    perf.add_feature(FEAT_EVENT_DESC, desc)
    perf.sample(attr, ip=1)
    with PerfData.open(write(tmp_path, perf)) as data:
        assert [a.name for a in data.attrs] == ["cyc\\xffles"]


def test_a_bad_feature_section_is_a_problem_not_an_error(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    perf.add_feature(FEAT_HOSTNAME, perf.pack("I", 4000) + b"vm\0\0")  # len past the section
    perf.add_feature(FEAT_ARCH, perf.string("x86_64"))
    perf.sample(0, ip=1)
    path = write(tmp_path, perf)
    with PerfData.open(path) as data:
        assert data.features.hostname is None and data.features.arch == "x86_64"
        (problem,) = data.problems
        assert "HOSTNAME" in problem.message and problem.path == str(path)
    assert [s.ip for s in agreed(path)] == [1]


# -- samples ---------------------------------------------------------------------------------


@ORDERS
@MODES
def test_fixed_sample_fields(tmp_path: Path, big_endian: bool, pipe: bool) -> None:
    perf = PerfFile(big_endian, pipe)
    perf.add_attr(Attr(
        IP | TID | TIME | ADDR | ID | STREAM_ID | CPU | PERIOD, ids=(42,), period=999
    ))  # fmt: skip
    perf.sample(0, misc=1, ip=0xFFFFFFFF81000010, pid=-1, tid=0, time=2**63 + 5, addr=0xAB,
                stream_id=77, cpu=3, period=12345)  # fmt: skip
    perf.sample(0, ip=0x401000, pid=100, tid=101, time=6, addr=0, stream_id=78, cpu=1, period=1)
    first, second = agreed(write(tmp_path, perf))
    assert (first.misc, first.ip, first.pid, first.tid, first.time, first.addr) == (
        1, 0xFFFFFFFF81000010, -1, 0, 2**63 + 5, 0xAB
    )
    assert (first.id, first.stream_id, first.cpu, first.period) == (42, 77, 3, 12345)
    assert (second.pid, second.tid, second.cpu, second.period, second.misc) == (100, 101, 1, 1, 2)


def test_absent_sample_fields_take_perfs_defaults(tmp_path: Path) -> None:
    """evsel__parse_sample: pid, tid, cpu -1; time, id, stream_id all ones; the period of
    the attribute."""
    perf = PerfFile()
    perf.add_attr(Attr(IP, period=4321))
    perf.sample(0, ip=5)
    (sample,) = agreed(write(tmp_path, perf))
    assert (sample.pid, sample.tid, sample.cpu) == (-1, -1, -1)
    assert (sample.time, sample.id, sample.stream_id) == (U64_MAX, U64_MAX, U64_MAX)
    assert (sample.period, sample.addr, sample.callchain, sample.regs) == (4321, 0, (), ())


#: Every field of varying size, and those after them.
EVERY_FIELD = (
    IP | TID | TIME | READ | CALLCHAIN | RAW | BRANCH_STACK | REGS_USER | STACK_USER | WEIGHT
    | DATA_SRC | TRANSACTION | REGS_INTR | PHYS_ADDR | CGROUP | DATA_PAGE_SIZE | CODE_PAGE_SIZE
    | AUX
)


def read_group(perf: PerfFile, values: list[tuple[int, int]]) -> bytes:
    """struct read_format with PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | ID."""
    out = perf.pack("Q", len(values))                        # u64 nr
    out += perf.pack("Q", 1000)                              # u64 time_enabled
    for value, ident in values:
        out += perf.pack("QQ", value, ident)                 # u64 value, u64 id
    return out


@ORDERS
@MODES
def test_every_sample_field(tmp_path: Path, big_endian: bool, pipe: bool) -> None:
    perf = PerfFile(big_endian, pipe)
    perf.add_attr(Attr(
        EVERY_FIELD, read_format=1 | 4 | 8, branch_sample_type=1 << 17, regs_user=0b1011,
        regs_intr=0b11, stack_user=64,
    ))  # fmt: skip
    stack = bytes(range(64))
    # A RAW field of 5 bytes leaves every later field, and the next records, off 8-alignment.
    perf.sample(0, ip=0x10, pid=1, tid=2, time=3, read=read_group(perf, [(7, 70), (8, 80)]),
                callchain=(2**64 - 512, 0x400100, 0x400200), raw=b"\1\2\3\4\5",
                branches=((1, 2, 3), (4, 5, 6)), hw_idx=9, regs=(11, 12, 13), stack=stack,
                dyn_size=40, aux=b"\xaa" * 3)  # fmt: skip
    perf.sample(0, ip=0x20, pid=1, tid=2, time=4, read=read_group(perf, []), callchain=(),
                raw=b"", branches=(), regs_abi=0, stack=b"")  # fmt: skip
    perf.sample(0, ip=0x30, pid=5, tid=6, time=5, read=read_group(perf, [(1, 2)]),
                callchain=(0x400300,), raw=b"\xff" * 12, regs=(21, 22, 23), stack=stack,
                dyn_size=64, intr_regs=())  # fmt: skip
    path = write(tmp_path, perf)
    first, second, third = agreed(path, chunk=2)
    assert first.callchain == (2**64 - 512, 0x400100, 0x400200)
    assert (first.regs_abi, first.regs, first.regs_mask) == (2, (11, 12, 13), 0b1011)
    assert (first.stack_size, first.stack_dyn_size) == (64, 40)
    assert (second.ip, second.callchain, second.regs_abi, second.regs) == (0x20, (), 0, ())
    assert (second.stack_size, second.stack_dyn_size) == (0, 0)
    assert (third.ip, third.callchain, third.regs) == (0x30, (0x400300,), (21, 22, 23))
    with PerfData.open(path) as data:
        (chunk,) = data.samples()
        assert bytes(chunk.stack(0)) == stack[:40] and bytes(chunk.stack(2)) == stack
        assert bytes(chunk.stack(1)) == b""
        # each column of the mask (bits 0, 1 and 3), in any order, a row per sample
        assert chunk.registers([2, 0]).tolist() == [[13, 11], [0, 0], [23, 21]]
        assert chunk.registers([1], np.array([2, 0])).tolist() == [[22], [12]]
        assert chunk.callchain_offsets.tolist() == [0, 3, 3, 4]


def test_stack_copies_are_views_into_the_map(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP | STACK_USER, stack_user=16))
    perf.sample(0, ip=1, stack=b"0123456789abcdef", dyn_size=10)
    with PerfData.open(write(tmp_path, perf)) as data:
        (chunk,) = data.samples()
        view = chunk.stack(0)
        assert view.obj is data._map and bytes(view) == b"0123456789"
        view.release()


@pytest.mark.parametrize("chunk", [1, 2, 5, 1000])
def test_any_chunk_size_gives_the_same_samples(tmp_path: Path, chunk: int) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP | TID | CALLCHAIN))
    for n in range(11):
        perf.sample(0, ip=n, pid=n, tid=n, callchain=tuple(range(n)))
        if n % 4 == 0:
            perf.record(FINISHED_ROUND, 0, b"")
    samples = agreed(write(tmp_path, perf), chunk)
    assert [s.ip for s in samples] == list(range(11))
    assert [s.callchain for s in samples] == [tuple(range(n)) for n in range(11)]


# -- side-band records ---------------------------------------------------------------------------


@ORDERS
@MODES
def test_side_band_records_with_their_times(tmp_path: Path, big_endian: bool, pipe: bool) -> None:
    perf = PerfFile(big_endian, pipe)
    perf.add_attr(Attr(IP | TID | TIME | CPU, ids=(9,)))
    perf.mmap(0, -1, 0, 0xFFFFFFFF81000000, 0x1000000, 0xFFFFFFFF81000000,
              "[kernel.kallsyms]_text", misc=1)  # fmt: skip
    perf.comm(0, 10, 10, "prog", time=100, exec_=True)
    perf.mmap2(0, 10, 10, 0x400000, 0x2000, 0x1000, "/bin/prog", time=101, prot=5, flags=2)
    perf.mmap2(0, 10, 10, 0x7F0000, 0x1000, 0, "/lib/x.so", time=102,
               build_id=bytes(range(20)))  # fmt: skip
    perf.sample(0, ip=0x400010, pid=10, tid=10, time=103, cpu=1)
    perf.task(0, True, 10, 10, 11, 10, time=104)
    perf.task(0, False, 10, 10, 11, 11, time=105)
    perf.lost(0, 9, 17, time=106)
    path = write(tmp_path, perf)
    with PerfData.open(path) as data:
        stretches = list(data.read())
        events = [e for s in stretches for e in s.events]
        assert [type(e) for e in events] == [
            MmapEvent, CommEvent, MmapEvent, MmapEvent, TaskEvent, TaskEvent, LostEvent
        ]
        kernel, comm, prog, lib, fork, exit_, lost = events
        assert (kernel.pid, kernel.start, kernel.filename, kernel.mmap2, kernel.time) == (
            -1, 0xFFFFFFFF81000000, "[kernel.kallsyms]_text", False, 0
        )
        assert kernel.cpumode == 1 and kernel.executable
        assert (comm.comm, comm.exec, comm.time, comm.pid) == ("prog", True, 100, 10)
        assert (prog.start, prog.length, prog.pgoff, prog.prot, prog.flags) == (
            0x400000, 0x2000, 0x1000, 5, 2
        )
        assert (prog.maj, prog.min, prog.ino, prog.ino_generation, prog.build_id) == (
            8, 1, 1234, 7, None
        )
        assert prog.executable and prog.time == 101
        assert (lib.build_id, lib.maj, lib.filename, lib.time) == (
            bytes(range(20)), None, "/lib/x.so", 102
        )
        assert (fork.fork, fork.pid, fork.ppid, fork.tid, fork.ptid, fork.task_time) == (
            True, 10, 10, 11, 10, 104
        )
        assert (exit_.fork, exit_.time, exit_.sample_id.pid, exit_.sample_id.cpu) == (
            False, 105, 10, 0
        )
        assert (lost.id, lost.lost, lost.time) == (9, 17, 106)
        assert list(data.events()) == events
        # File order: the sample lies between the third mmap and the fork.
        (chunk,) = [s.samples for s in stretches if s.samples]
        assert isinstance(chunk, SampleChunk)
        assert lib.offset < int(chunk.file_offset[0]) < fork.offset
        assert data.record_counts[10] == 2 and data.record_counts[9] == 1


def test_records_without_sample_id_all_have_no_time(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP | TIME, sample_id_all=False))
    perf.comm(0, 1, 1, "a")
    (comm,) = read_both(write(tmp_path, perf)).events
    assert comm.time is None and comm.comm == "a"


# -- several attributes -----------------------------------------------------------------------


@ORDERS
def test_several_attributes_found_by_identifier(tmp_path: Path, big_endian: bool) -> None:
    perf = PerfFile(big_endian)
    # Both put the id first in samples and last in other records (PERF_SAMPLE_IDENTIFIER);
    # their other fields differ.
    cycles = perf.add_attr(Attr(IDENTIFIER | IP | TID | TIME | CALLCHAIN, ids=(31, 32)))
    clock = perf.add_attr(Attr(
        IDENTIFIER | IP | TID | TIME | CPU | PERIOD | REGS_USER, ids=(41,), regs_user=0b110
    ))  # fmt: skip
    perf.comm(clock, 5, 5, "p", time=50)
    perf.sample(cycles, ip=1, time=51, callchain=(7, 8), ident=32)
    perf.sample(clock, ip=2, time=52, cpu=3, period=9, regs=(4, 5))
    perf.sample(clock, ip=3, time=53, ident=999, regs=(6, 7))  # no attribute has id 999
    perf.sample(cycles, ip=4, time=54, ident=0)  # id 0: perf synthesized it, the first event
    reading = read_both(write(tmp_path, perf))
    assert reading.bulk == reading.oracle and reading.bulk_error is None
    assert [(s.attr, s.ip) for s in reading.bulk] == [(0, 1), (1, 2), (0, 4)]
    first, second, _ = reading.bulk
    assert first.callchain == (7, 8) and first.id == 32 and first.regs == ()
    assert (second.cpu, second.period, second.regs, second.regs_mask) == (3, 9, (4, 5), 0b110)
    (comm,) = reading.events
    assert comm.sample_id.id == 41 and comm.sample_id.cpu == 0 and comm.time == 50
    with PerfData.open(write(tmp_path, perf)) as data:
        (chunk,) = data.samples()
        assert data.unknown_id_samples == 1 and chunk.regs_mask == 0b110


def test_several_attributes_found_by_id(tmp_path: Path) -> None:
    """Without IDENTIFIER the id follows IP, TID, TIME and ADDR in a sample, and comes before
    STREAM_ID and CPU at the end of other records (evsel.c __evsel__calc_id_pos)."""
    perf = PerfFile()
    one = perf.add_attr(Attr(IP | TID | TIME | ID | CPU, ids=(1,)))
    two = perf.add_attr(Attr(IP | TID | TIME | ID | CPU | PERIOD, ids=(2,)))
    perf.sample(two, ip=0x22, time=9, period=4)
    perf.sample(one, ip=0x11, time=8)
    perf.mmap2(two, 3, 3, 0x1000, 0x1000, 0, "/x", time=7)
    reading = read_both(write(tmp_path, perf))
    assert [(s.attr, s.ip, s.period) for s in reading.bulk] == [(1, 0x22, 4), (0, 0x11, 4000)]
    assert reading.bulk == reading.oracle
    (mmap,) = reading.events
    assert mmap.time == 7 and mmap.sample_id.id == 2


def test_attributes_that_disagree_on_the_id_place(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP | ID, ids=(1,)))
    perf.add_attr(Attr(IP | TID | ID, ids=(2,)))
    with pytest.raises(PerfDataError, match="do not agree"):
        PerfData.open(write(tmp_path, perf))


def test_a_sample_type_bit_this_reader_does_not_know(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP | 1 << 40))
    with pytest.raises(PerfDataError, match="0x10000000000"):
        PerfData.open(write(tmp_path, perf))


# -- pipe mode and streams --------------------------------------------------------------------


def pipe_file(big_endian: bool = False) -> PerfFile:
    """A pipe-mode file with the records perf writes for itself among the kernel's."""
    perf = PerfFile(big_endian, pipe=True)
    perf.add_attr(Attr(IP | TID | TIME | ID | STACK_USER, ids=(26, 27), stack_user=32))
    standard_features(perf)
    perf.comm(0, 1, 1, "init", time=1)
    name = b"cpu-clock\0".ljust(16, b"\0")
    perf.record(78, 0, perf.pack("QQ", 2, 27) + name)  # EVENT_UPDATE: u64 type NAME, u64 id
    perf.record(66, 0, perf.pack("II", 13, 0))              # HEADER_TRACING_DATA: 13 bytes follow
    perf.records[-1] += b"T" * 13 + b"\0" * 3               # the tracing data, 8-aligned
    perf.sample(0, ip=0x100, pid=1, tid=1, time=2, stack=b"s" * 32, dyn_size=8)
    perf.record(71, 0, perf.pack("QQQIIII", 24, 0, 0, 0, 0, 0, 0))  # AUXTRACE: 24 bytes follow
    perf.records[-1] += b"A" * 24
    perf.record(200, 0, b"\xff" * 16)                      # a type nobody knows: stepped over
    name = b"/bin/x\0".ljust(16, b"\0")
    perf.record(67, 2, perf.pack("i", -1) + bytes(range(20)) + bytes(4) + name)  # HEADER_BUILD_ID
    perf.record(FINISHED_ROUND, 0, b"")
    perf.add_attr(Attr(IP | TID | TIME | ID, ids=(50,)))   # an event added after samples
    perf.records.append(
        perf.pack("IHH", 64, 0, 8 + 136 + 8) + perf.attr_bytes(perf.attrs[1]) + perf.pack("Q", 50)
    )  # HEADER_ATTR
    perf.sample(1, ip=0x200, pid=1, tid=1, time=3)
    perf.sample(0, ip=0x300, pid=1, tid=1, time=4, stack=b"t" * 32, dyn_size=32)
    return perf


@ORDERS
def test_pipe_mode_records(tmp_path: Path, big_endian: bool) -> None:
    perf = pipe_file(big_endian)
    attrs = perf.attrs
    perf.attrs = attrs[:1]  # the pipe header carries the first; the second comes as a record
    path = tmp_path / "pipe.data"
    path.write_bytes(perf.build())
    perf.attrs = attrs
    samples = agreed(path)
    assert [(s.attr, s.ip, s.time) for s in samples] == [
        (0, 0x100, 2), (1, 0x200, 3), (0, 0x300, 4)
    ]
    with PerfData.open(path) as data:
        assert data.features.hostname == "host-1" and data.attrs[0].name == "cpu-clock"
        list(data.samples())
        assert len(data.attrs) == 2 and data.attrs[1].ids == (50,)
        assert data.features.build_id("/bin/x") == bytes(range(20))
        assert data.record_counts[200] == 1 and data.problems == []
        list(data.samples())  # a second pass applies nothing twice
        assert len(data.attrs) == 2 and len(data.features.build_ids) == 1


def test_a_stream_read_in_small_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Standard input: blocks of 64 bytes make every record straddle two; stack views of the
    first chunks stay valid after the last is read."""
    perf = PerfFile(pipe=True)
    perf.add_attr(Attr(IP | TID | STACK_USER, stack_user=24))
    for n in range(20):
        perf.sample(0, ip=n, pid=n, tid=n, stack=bytes([n]) * 24, dyn_size=n % 25)
    blob = perf.build()
    monkeypatch.setattr(data_module, "STREAM_BLOCK", 64)
    data = PerfData.from_stream(io.BytesIO(blob))
    chunks = list(data.samples(chunk=3))
    views = [(c.sample(i).ip, bytes(c.stack(i))) for c in chunks for i in range(len(c))]
    assert views == [(n, bytes([n]) * (n % 25)) for n in range(20)]
    with pytest.raises(PerfDataError, match="read once"):
        list(data.samples())
    # The same bytes as a file: the same samples, but for where they lie in memory.
    path = tmp_path / "same.data"
    path.write_bytes(blob)
    from_file = [replace(s, offset=0, stack_offset=0) for s in agreed(path)]
    streamed = [
        replace(c.sample(i), offset=0, stack_offset=0) for c in chunks for i in range(len(c))
    ]
    assert streamed == from_file and len(from_file) == 20


def test_a_stream_cut_short(monkeypatch: pytest.MonkeyPatch) -> None:
    perf = PerfFile(pipe=True)
    perf.add_attr(Attr(IP))
    for n in range(5):
        perf.sample(0, ip=n)
    blob = perf.build()[:-5]
    monkeypatch.setattr(data_module, "STREAM_BLOCK", 16)
    data = PerfData.from_stream(io.BytesIO(blob), "-")
    assert [c.sample(i).ip for c in data.samples() for i in range(len(c))] == [0, 1, 2, 3]
    (problem,) = data.problems
    assert "cut short" in problem.message and problem.path == "-"
    assert problem.offset == len(blob) + 5 - 16


def test_a_file_mode_stream_is_refused() -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    with pytest.raises(PerfDataError, match="give its path"):
        PerfData.from_stream(io.BytesIO(perf.build()))


# -- bad input -------------------------------------------------------------------------------


def test_not_perf_data(tmp_path: Path) -> None:
    for name, content, words in (
        ("empty", b"", "empty"), ("short", b"PERF", "too short"),
        ("elf", b"\x7fELF" + bytes(200), "not a perf.data file"),
        ("v1", b"PERFFILE" + bytes(200), "version 1"),
    ):  # fmt: skip
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(PerfDataError, match=words) as caught:
            PerfData.open(path)
        assert caught.value.path == str(path)
        assert isinstance(caught.value, FormatError) and isinstance(caught.value, SFrameError)
    with pytest.raises(SFrameError, match="directory"):
        PerfData.open(tmp_path)


@pytest.mark.parametrize("size", [0, 4])
def test_a_record_size_under_eight_is_an_error(tmp_path: Path, size: int) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    perf.sample(0, ip=1)
    perf.records.append(perf.pack("IHH", 9, 0, size) + bytes(8))
    path = write(tmp_path, perf)
    reading = read_both(path)
    at = 104 + 136 + 16 + 16
    expected = f"{path}: SAMPLE record of size {size} (at byte offset {at:#x})"
    assert reading.bulk_error == expected and reading.agreed
    assert [s.ip for s in reading.bulk] == [1]


def test_a_record_past_the_end_of_a_whole_data_section(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    perf.sample(0, ip=1)
    perf.records.append(perf.pack("IHH", 9, 0, 64) + perf.pack("Q", 2))  # says 64, has 16
    perf.add_feature(FEAT_HOSTNAME, perf.string("after-the-data"))
    reading = read_both(write(tmp_path, perf))
    assert reading.agreed
    assert "record of 64 bytes runs past the end of the data section" in reading.bulk_error
    assert [s.ip for s in reading.bulk] == [1]


def test_a_file_cut_short(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP | TID | CALLCHAIN))
    for n in range(4):
        perf.sample(0, ip=n, callchain=(n,) * n)
    perf.add_feature(FEAT_HOSTNAME, perf.string("h"))
    blob = perf.build()
    data_end = len(blob) - 16 - 68
    path = tmp_path / "cut.data"
    path.write_bytes(blob[: data_end - 7])
    reading = read_both(path)
    assert reading.bulk_error is None and reading.oracle_error is None
    assert [s.ip for s in reading.bulk] == [0, 1, 2] and reading.bulk == reading.oracle
    (problem,) = reading.problems
    assert "the file is cut short: its data should run to" in problem
    assert "a record of 56 bytes runs past the end of the file" in problem
    assert problem.endswith(f"(at byte offset {data_end - 56:#x})")


def test_a_header_with_data_size_zero(tmp_path: Path) -> None:
    """perf record killed before writing the header back: the data runs to the end."""
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    perf.sample(0, ip=1)
    perf.sample(0, ip=2)
    blob = bytearray(perf.build())
    struct.pack_into("<Q", blob, 48, 0)  # data.size
    path = tmp_path / "killed.data"
    path.write_bytes(bytes(blob))
    reading = read_both(path)
    assert [s.ip for s in reading.bulk] == [1, 2]
    assert len(reading.problems) == 1 and "the header's data size is 0" in reading.problems[0]


def test_a_corrupt_sample_ends_the_reading_after_those_before(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP | CALLCHAIN))
    perf.sample(0, ip=1, callchain=(5,))
    perf.sample(0, ip=2, callchain=(6,))
    perf.records[-1] = perf.records[-1][:16] + perf.pack("Q", 1000) + perf.records[-1][24:]
    perf.sample(0, ip=3)
    path = write(tmp_path, perf)
    reading = read_both(path, chunk=10)
    at = 104 + 136 + 16 + len(perf.records[0])
    assert reading.bulk_error == reading.oracle_error == (
        f"{path}: sample field callchain runs past the end of its record (at byte offset {at:#x})"
    )
    assert [s.ip for s in reading.bulk] == [1] and reading.bulk == reading.oracle


def test_a_stack_that_says_it_used_more_than_it_copied(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP | STACK_USER, stack_user=8))
    perf.sample(0, ip=1, stack=bytes(8), dyn_size=9)
    reading = read_both(write(tmp_path, perf))
    assert reading.bulk_error == reading.oracle_error
    assert "user stack of 8 bytes says 9 were used" in reading.bulk_error


@ORDERS
@MODES
def test_a_sample_cut_short_anywhere_is_worded_as_the_oracle_words_it(
    tmp_path: Path, big_endian: bool, pipe: bool
) -> None:
    """A sample whose size says it ends before its fields do, at each size from its header's
    on: the reader stops there, after the sample before it, with the oracle's error (the same
    field at the same offset); the sizes name every field the reader checks."""
    perf = PerfFile(big_endian, pipe)
    attr = Attr(
        EVERY_FIELD | IDENTIFIER | ADDR | ID | STREAM_ID | CPU | PERIOD, ids=(5,),
        read_format=1 | 4 | 8, branch_sample_type=1 << 17, regs_user=0b111, regs_intr=0b11,
        stack_user=16,
    )  # fmt: skip
    perf.add_attr(attr)
    perf.add_attr(replace(attr, ids=(6,)))  # two: a sample's id says which it is of
    read = read_group(perf, [(10, 5), (11, 6)])
    perf.sample(0, ip=1, read=read)
    perf.sample(1, ip=2, read=read, callchain=(3, 4), raw=b"abc", branches=((7, 8, 9),),
                regs=(1, 2, 3), stack=bytes(range(16)), dyn_size=8, aux=b"xy")  # fmt: skip
    whole = perf.records.pop()
    seen = set()
    for size in range(8, len(whole)):
        perf.records.append(perf.pack("IHH", 9, 2, size) + whole[8:size])  # u32 type, u16
        path = write(tmp_path, perf)                                         # misc, u16 size
        perf.records.pop()
        reading = read_both(path)
        (before,) = reading.bulk
        assert before.ip == 1 and reading.bulk == reading.oracle
        at = before.file_offset + len(perf.records[-1])
        assert reading.bulk_error == reading.oracle_error, size
        assert str(reading.bulk_error).endswith(f" (at byte offset {at:#x})")
        seen.add(str(reading.bulk_error)[len(f"{path}: ") : -len(f" (at byte offset {at:#x})")])
    fields = (
        "ip", "tid", "time", "addr", "id", "stream_id", "cpu", "period", "read", "callchain",
        "raw", "branch stack", "user registers", "user stack", "interrupt registers", "aux",
        "data",
    )  # fmt: skip
    assert seen == {"sample too short to hold its id"} | {
        f"sample field {name} runs past the end of its record" for name in fields
    }
    perf.records.append(whole)  # whole, it reads
    assert [s.stack_dyn_size for s in agreed(write(tmp_path, perf))] == [0, 8]


@pytest.mark.parametrize("kind", [81, 83])
def test_compressed_records_without_the_feature_are_refused(tmp_path: Path, kind: int) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    perf.sample(0, ip=1)
    perf.record(kind, 0, bytes(16))
    reading = read_both(write(tmp_path, perf))
    assert "record cannot be read: the recording has no COMPRESSED feature" in reading.bulk_error
    assert reading.agreed and [s.ip for s in reading.bulk] == [1]


def test_a_sample_before_any_attribute(tmp_path: Path) -> None:
    perf = PerfFile(pipe=True)
    perf.records.append(perf.pack("IHH", 9, 0, 16) + perf.pack("Q", 1))
    reading = read_both(write(tmp_path, perf))
    assert reading.bulk_error == reading.oracle_error
    assert "sample record before any event attribute" in reading.bulk_error


def test_a_payload_past_the_end_of_the_data(tmp_path: Path) -> None:
    """An AUXTRACE record whose trace data would run past the end of a whole data section is
    an error, not an end."""
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    perf.sample(0, ip=1)
    perf.record(71, 0, perf.pack("QQQIIII", 4096, 0, 0, 0, 0, 0, 0))  # says 4096 bytes follow
    perf.records[-1] += bytes(8)
    reading = read_both(write(tmp_path, perf))
    assert reading.agreed
    at = 104 + 136 + 16 + len(perf.records[0])  # header, attribute and its ids' section
    assert reading.bulk_error.endswith(
        "the payload of 4096 bytes of the AUXTRACE record at this offset runs past the end of "
        f"the data section (at byte offset {at:#x})"
    )
    assert [s.ip for s in reading.bulk] == [1]


def test_a_file_cut_at_a_record_boundary(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    for n in range(3):
        perf.sample(0, ip=n)
    blob = perf.build()
    path = tmp_path / "cut.data"
    path.write_bytes(blob[:-16])  # the last sample, 16 bytes, is gone
    reading = read_both(path)
    assert [s.ip for s in reading.bulk] == [0, 1]
    (problem,) = reading.problems
    assert f"its data should run to {len(blob):#x}" in problem


def _record_bounds(path: Path) -> list[tuple[int, int]]:
    """Each record's start and end in the data section, from the record headers (u32 type,
    u16 misc, u16 size: perf_event_header) read here, one after the other."""
    with PerfData.open(path) as data:
        position, end = data.header.data_offset, data.header.data_offset + data.header.data_size
    raw = path.read_bytes()
    bounds = []
    while position < end:
        (size,) = struct.unpack_from("<H", raw, position + 6)
        bounds.append((position, position + size))
        position += size
    return bounds


def test_stretches_are_cut_where_asked(tmp_path: Path) -> None:
    """``read(cuts=...)``: the same records, and no stretch holds a record that ends at or
    before a cut with one that ends after it; ``stop``: the records that end at or before it
    are read, no other (and ``stopped`` says whether one was left)."""
    perf = PerfFile()
    perf.add_attr(Attr(IP | TID | TIME | CALLCHAIN, sample_id_all=True))
    for n in range(30):  # samples of several sizes, side-band records, rounds
        perf.sample(0, ip=n, pid=1, tid=1, time=10 + n, callchain=tuple(range(n % 7)))
        if n % 5 == 0:
            perf.comm(0, 1, 1, f"c{n}", time=10 + n)
        if n % 8 == 0:
            perf.record(FINISHED_ROUND, 0, b"")
    path = write(tmp_path, perf)
    records = _record_bounds(path)

    def read(**how: object) -> tuple[list[Any], list[int], list[tuple[int, int]], bool]:
        with PerfData.open(path) as data:
            stretches = list(data.read(4, **how))  # type: ignore[arg-type]
            ips = [ip for s in stretches if s.samples for ip in s.samples.ip.tolist()]
            events = [e.offset for s in stretches for e in s.events]
            return ips, events, [(s.start, s.end) for s in stretches], data.stopped

    whole_ips, whole_events, _, stopped = read()
    assert whole_ips == list(range(30)) and len(whole_events) == 6 and not stopped
    with PerfData.open(path) as data:
        offsets = [int(o) for s in data.read(4) if s.samples for o in s.samples.file_offset]
    first, last = records[0][0], records[-1][1]
    for cut in range(first - 1, last + 2, 5):
        ips, events, spans, stopped = read(cuts=[cut])
        assert (ips, events, stopped) == (whole_ips, whole_events, False)
        for start, end in spans:
            inside = [stop for begin, stop in records if start <= begin and stop <= end]
            assert inside and (max(inside) <= cut or min(inside) > cut), (cut, start, end)
        ips, events, spans, stopped = read(stop=cut)
        kept = [begin for begin, stop in records if stop <= cut]
        assert stopped == (len(kept) < len(records))
        assert all(end <= cut for _, end in spans)
        assert ips == [ip for ip, offset in zip(whole_ips, offsets, strict=True) if offset in kept]
        assert events == [offset for offset in whole_events if offset in kept]
