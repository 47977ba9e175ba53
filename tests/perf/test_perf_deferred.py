"""Deferred user callchains (Linux 6.19, ``perf record --call-graph fp,defer``).

No kernel here writes them, and perf 6.1 here cannot read them (it counts a
PERF_RECORD_CALLCHAIN_DEFERRED as an unknown event), so every recording is built from the
layout (include/uapi/linux/perf_event.h of Linux 6.19), and every expected text is written by
hand from the construction: the kernel's names come from a kallsyms file the test writes, the
user frames' names from ``nm`` of the corpus program ``frames`` (leaf at 0x1220, small_frame at
0x1230, main at 0x10a0), the layout of perf's text from builtin-script.c and
util/evsel_fprintf.c of Linux 6.19 (a merged sample, the ``(cookie)`` entry,
``DEFERRED CALLCHAIN [cookie: HEX]``), the stitching from util/session.c
(evlist__deliver_deferred_callchain, session__flush_deferred_samples).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import perf_oracles
from conftest import DATA
from perf_support import (
    CALLCHAIN,
    CONTEXT_KERNEL,
    CONTEXT_USER_DEFERRED,
    FEAT_BUILD_ID,
    FEAT_EVENT_DESC,
    IP,
    PERIOD,
    TID,
    TIME,
    Attr,
    PerfFile,
)
from pysframe.elf.reader import ElfReader
from pysframe.perf import PerfData, PerfDataError
from pysframe.perf.analyze import Options, profile_recording
from pysframe.perf.filters import filter_profile
from pysframe.perf.profile import Profile
from pysframe.perf.records import DeferredCallchainEvent
from pysframe.perf.script import script_text

PROGRAM = (DATA / "corpus" / "x86_64" / "v3" / "frames").resolve()
#: Where the recordings map PROGRAM's executable segment (file offset 0x1000, address 0x1000).
BASE = 0x555555554000
TEXT_AT, TEXT_SIZE = BASE + 0x1000, 0x1E09
#: User addresses: leaf+0x4, small_frame+0x1a, main+0x10 (nm: 0x1220, 0x1230, 0x10a0).
LEAF, SMALL, MAIN = BASE + 0x1224, BASE + 0x124A, BASE + 0x10B0
#: The kernel of the recordings: its build ID and its kallsyms, written by the tests.
KERNEL_BUILD_ID = bytes(range(100, 120))
KALLSYMS = (
    "ffffffff81000000 T entry_SYSCALL_64\n"
    "ffffffff81000100 T do_syscall_64\n"
    "ffffffff81000200 T __x64_sys_write\n"
    "ffffffff81001000 T _etext\n"
)
#: Kernel addresses: __x64_sys_write+0x10, do_syscall_64+0x20, entry_SYSCALL_64+0x8.
WRITE, SYSCALL, ENTRY = 0xFFFFFFFF81000210, 0xFFFFFFFF81000120, 0xFFFFFFFF81000008
KERNEL_CHAIN = (CONTEXT_KERNEL, WRITE, SYSCALL, ENTRY)
COOKIE, OTHER_COOKIE = 0xB00000006, 0xC00000007

#: What perf script prints for each frame (tab, %16lx, symbol+offset, module).
K = {
    WRITE: "\tffffffff81000210 __x64_sys_write+0x10 ([kernel.kallsyms])\n",
    SYSCALL: "\tffffffff81000120 do_syscall_64+0x20 ([kernel.kallsyms])\n",
    ENTRY: "\tffffffff81000008 entry_SYSCALL_64+0x8 ([kernel.kallsyms])\n",
}
#: A recorded user address is printed at map_ip (its address in the file: perf 6.1 prints a
#: frame-pointer callchain so; the series' example, of a later perf, shows the address itself).
U = {
    LEAF: f"\t            1224 leaf+0x4 ({PROGRAM})\n",
    SMALL: f"\t            124a small_frame+0x1a ({PROGRAM})\n",
    MAIN: f"\t            10b0 main+0x10 ({PROGRAM})\n",
}
KERNEL_TEXT = K[WRITE] + K[SYSCALL] + K[ENTRY]


def _cookie_line(cookie: int) -> str:
    """The entry perf prints for the cookie of a sample left unmerged."""
    return f"\t{cookie:16x} (cookie) ([unknown])\n"


def _header(comm: str, tid: int, time_us: int, period: int) -> str:
    stamp = f"{time_us // 10**6}.{time_us % 10**6:06d}"
    return f"{comm} {tid:5d} {stamp:>12}: {period:10d} cpu-clock: \n"


def _deferred_header(comm: str, tid: int, time_us: int, cookie: int) -> str:
    stamp = f"{time_us // 10**6}.{time_us % 10**6:06d}"
    return f"{comm} {tid:5d} {stamp:>12}: DEFERRED CALLCHAIN [cookie: {cookie:x}]\n"


def _recording(big_endian: bool = False, pipe: bool = False) -> PerfFile:
    """A recording of one deferring event (cpu-clock) with the kernel's build ID, the comms of
    threads 7 and 8 of process 7, and PROGRAM mapped in it; the samples are the test's."""
    perf = PerfFile(big_endian, pipe)
    attr = perf.add_attr(Attr(IP | TID | TIME | PERIOD | CALLCHAIN, defer=True))
    desc = perf.pack("II", 1, 136)                        # u32 nr, u32 attr_size
    desc += perf.attr_bytes(perf.attrs[attr])             # struct perf_event_attr
    desc += perf.pack("I", 0)                             # u32 nr_ids
    desc += perf.string("cpu-clock")                      # perf_header_string name
    perf.add_feature(FEAT_EVENT_DESC, desc)
    kernel = (
        perf.pack("IHH", 0, 1, 8 + 4 + 24 + 24)           # header: misc kernel
        + perf.pack("i", -1)                              # pid: the host
        + KERNEL_BUILD_ID + bytes(4)                      # build_id[20], padding
        + b"[kernel.kallsyms]\0".ljust(24, b"\0")         # filename
    )  # fmt: skip
    perf.add_feature(FEAT_BUILD_ID, kernel)
    with ElfReader.open(str(PROGRAM)) as image:
        build_id = image.build_id()
    assert build_id is not None
    perf.comm(attr, 7, 7, "prog", time=1_000)
    perf.comm(attr, 7, 8, "worker", time=1_000)
    perf.mmap2(attr, 7, 7, TEXT_AT, TEXT_SIZE, 0x1000, str(PROGRAM), build_id=build_id,
               time=2_000)  # fmt: skip
    return perf


def _sample(perf: PerfFile, tid: int, time_ns: int, chain: tuple[int, ...], period: int) -> None:
    perf.sample(0, misc=1, ip=chain[1] if len(chain) > 1 else 0, pid=7, tid=tid, time=time_ns,
                period=period, callchain=chain)  # fmt: skip


def _debug_dir(tmp_path: Path) -> Path:
    """A build-ID cache holding the recordings' kallsyms."""
    folder = tmp_path / "debug"
    where = folder / "[kernel.kallsyms]" / KERNEL_BUILD_ID.hex()
    where.mkdir(parents=True)
    (where / "kallsyms").write_text(KALLSYMS)
    return folder


def _script(tmp_path: Path, perf: PerfFile, merge: bool = True) -> tuple[str, list[str]]:
    path = tmp_path / "perf.data"
    path.write_bytes(perf.build())
    options = Options(debug_dir=str(_debug_dir(tmp_path)), merge_callchains=merge)
    profile, stats = profile_recording(str(path), options)
    return "".join(script_text(profile)), stats.problems


def _two_threads(perf: PerfFile) -> None:
    """Thread 7 takes two samples in the kernel before going back to user space, then one in
    user mode whose chain comes too; thread 8 takes one in between, whose chain comes first."""
    _sample(perf, 7, 10_000_000, (*KERNEL_CHAIN, CONTEXT_USER_DEFERRED, COOKIE), 1)
    _sample(perf, 8, 11_000_000, (CONTEXT_KERNEL, WRITE, CONTEXT_USER_DEFERRED, OTHER_COOKIE), 2)
    perf.callchain_deferred(0, 7, 8, OTHER_COOKIE, (MAIN,), time=11_500_000)
    _sample(perf, 7, 12_000_000, (CONTEXT_KERNEL, SYSCALL, ENTRY, CONTEXT_USER_DEFERRED, COOKIE), 3)
    perf.callchain_deferred(0, 7, 7, COOKIE, (LEAF, SMALL, MAIN), time=13_000_000)


# -- the reader ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("big_endian", "pipe"), [(False, False), (True, False), (False, True)])
def test_reads_callchain_deferred_records(tmp_path: Path, big_endian: bool, pipe: bool) -> None:
    perf = _recording(big_endian, pipe)
    perf.callchain_deferred(0, 7, 8, COOKIE, (LEAF, SMALL), time=5_000)
    path = tmp_path / "perf.data"
    path.write_bytes(perf.build())
    with PerfData.open(path) as data:
        assert data.attrs[0].defer_callchain
        (deferred,) = [e for e in data.events() if isinstance(e, DeferredCallchainEvent)]
    assert (deferred.cookie, deferred.ips, deferred.time) == (COOKIE, (LEAF, SMALL), 5_000)
    assert (deferred.sample_id.pid, deferred.sample_id.tid) == (7, 8)


@pytest.mark.parametrize(
    ("nr", "ips", "cut", "message"),
    [
        (2**61, (LEAF,), 0, "CALLCHAIN_DEFERRED record of 48 bytes cannot hold its "
                            "2305843009213693952 addresses"),
        (3, (LEAF, SMALL), 0, "CALLCHAIN_DEFERRED record of 56 bytes cannot hold its 3"),
        # the cookie alone, and the trailer: no room for nr
        (None, (), 8, "CALLCHAIN_DEFERRED record of 32 bytes is too short"),
    ],
)  # fmt: skip
def test_hostile_deferred_records(
    tmp_path: Path, nr: int | None, ips: tuple[int, ...], cut: int, message: str
) -> None:
    perf = _recording()
    perf.callchain_deferred(0, 7, 7, COOKIE, ips, time=5_000, nr=nr)
    if cut:  # the record without its nr field: header, cookie, trailer
        record = perf.records[-1]
        size = len(record) - cut
        perf.records[-1] = perf.pack("IHH", 22, 2, size) + record[8:16] + record[24:]
    path = tmp_path / "perf.data"
    blob = perf.build()
    path.write_bytes(blob)
    offset = blob.index(perf.records[-1])
    with PerfData.open(path) as data, pytest.raises(PerfDataError) as caught:
        list(data.events())
    assert message in str(caught.value)
    assert caught.value.offset == offset


# -- stitching ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("big_endian", "pipe"), [(False, False), (True, False), (False, True)])
def test_merged_text_is_perfs(tmp_path: Path, big_endian: bool, pipe: bool) -> None:
    perf = _recording(big_endian, pipe)
    _two_threads(perf)
    text, problems = _script(tmp_path, perf)
    # Each sample with its kernel frames, then the user frames of its thread's chain, printed
    # when that chain comes: thread 8's (at 11.5 ms) before thread 7's two (at 13 ms).
    assert text == (
        _header("worker", 8, 11_000, 2) + K[WRITE] + U[MAIN] + "\n"
        + _header("prog", 7, 10_000, 1) + KERNEL_TEXT + U[LEAF] + U[SMALL] + U[MAIN] + "\n"
        + _header("prog", 7, 12_000, 3) + K[SYSCALL] + K[ENTRY] + U[LEAF] + U[SMALL] + U[MAIN]
        + "\n"
    )  # fmt: skip
    assert problems == []


def test_unmerged_text_is_perfs(tmp_path: Path) -> None:
    perf = _recording()
    _two_threads(perf)
    text, problems = _script(tmp_path, perf, merge=False)
    assert text == (
        _header("prog", 7, 10_000, 1) + KERNEL_TEXT + _cookie_line(COOKIE) + "\n"
        + _header("worker", 8, 11_000, 2) + K[WRITE] + _cookie_line(OTHER_COOKIE) + "\n"
        + _deferred_header("worker", 8, 11_500, OTHER_COOKIE) + U[MAIN] + "\n"
        + _header("prog", 7, 12_000, 3) + K[SYSCALL] + K[ENTRY] + _cookie_line(COOKIE) + "\n"
        + _deferred_header("prog", 7, 13_000, COOKIE) + U[LEAF] + U[SMALL] + U[MAIN] + "\n"
    )  # fmt: skip
    assert problems == []


def test_chains_that_never_come_leave_kernel_frames_and_one_warning(tmp_path: Path) -> None:
    perf = _recording()
    # thread 7: a chain of another thread only, then none; thread 8: a chain with another
    # cookie (perf delivers the sample then, its cookie an ordinary user address)
    _sample(perf, 7, 10_000_000, (*KERNEL_CHAIN, CONTEXT_USER_DEFERRED, COOKIE), 1)
    _sample(perf, 8, 11_000_000, (CONTEXT_KERNEL, WRITE, CONTEXT_USER_DEFERRED, COOKIE), 2)
    perf.callchain_deferred(0, 7, 8, OTHER_COOKIE, (MAIN,), time=12_000_000)
    _sample(perf, 7, 13_000_000, (CONTEXT_KERNEL, SYSCALL, CONTEXT_USER_DEFERRED, COOKIE), 3)
    text, problems = _script(tmp_path, perf)
    # thread 8's sample when the chain of its thread comes, thread 7's at the end
    assert text == (
        _header("worker", 8, 11_000, 2) + K[WRITE]
        + f"\t{COOKIE:16x} [unknown] ([unknown])\n\n"
        + _header("prog", 7, 10_000, 1) + KERNEL_TEXT + _cookie_line(COOKIE) + "\n"
        + _header("prog", 7, 13_000, 3) + K[SYSCALL] + _cookie_line(COOKIE) + "\n"
    )  # fmt: skip
    path = tmp_path / "perf.data"
    assert problems == [
        f"{path}: 3 of 3 samples waiting for a deferred user callchain got none (no "
        "CALLCHAIN_DEFERRED record of their thread and cookie came): they have their kernel "
        "frames alone"
    ]


def test_samples_of_events_without_defer_do_not_wait(tmp_path: Path) -> None:
    """Only an attribute with defer_callchain makes its samples wait (evsel__parse_sample):
    without it the marker and cookie are left as they are, and no warning is given."""
    perf = _recording()
    perf.attrs[0].defer = False
    _sample(perf, 7, 10_000_000, (*KERNEL_CHAIN, CONTEXT_USER_DEFERRED, COOKIE), 1)
    perf.callchain_deferred(0, 7, 7, COOKIE, (LEAF,), time=11_000_000)
    text, problems = _script(tmp_path, perf)
    assert text == _header("prog", 7, 10_000, 1) + KERNEL_TEXT + "\n"
    assert problems == []


def test_cli_no_merge_callchain_and_warning(tmp_path: Path) -> None:
    perf = _recording()
    _sample(perf, 7, 10_000_000, (*KERNEL_CHAIN, CONTEXT_USER_DEFERRED, COOKIE), 1)
    path = tmp_path / "perf.data"
    path.write_bytes(perf.build())
    debug = str(_debug_dir(tmp_path))
    command = [sys.executable, "-m", "pysframe", "perf", "script", "--buildid-dir", debug]
    merged = subprocess.run([*command, str(path)], capture_output=True, text=True, check=False)
    apart = subprocess.run([*command, "--no-merge-callchain", str(path)], capture_output=True,
                           text=True, check=False)  # fmt: skip
    expected = _header("prog", 7, 10_000, 1) + KERNEL_TEXT + _cookie_line(COOKIE) + "\n"
    assert (merged.returncode, merged.stdout) == (0, expected)
    assert merged.stderr == (
        f"pysframe: warning: {path}: 1 of 1 samples waiting for a deferred user callchain got "
        "none (no CALLCHAIN_DEFERRED record of their thread and cookie came): they have their "
        "kernel frames alone\n"
    )
    assert (apart.returncode, apart.stdout, apart.stderr) == (0, expected, "")


def test_perfs_order_survives_filters_and_merges(tmp_path: Path) -> None:
    """Where perf delivers a sample (when its chain came) is kept by the profile's selections
    (the filters) and by merging recordings."""
    perf = _recording()
    _two_threads(perf)
    path = tmp_path / "perf.data"
    path.write_bytes(perf.build())
    profile, _ = profile_recording(str(path), Options(debug_dir=str(_debug_dir(tmp_path))))
    text = "".join(script_text(profile))
    merged = Profile()
    merged.merge(profile)
    for chosen in (profile.take(range(len(profile))), profile.where([True] * len(profile)),
                   merged):  # fmt: skip
        assert "".join(script_text(chosen)) == text
    assert text.startswith(_header("worker", 8, 11_000, 2))


def test_filters_choose_deferred_records_shown_apart(tmp_path: Path) -> None:
    """perf script filters a CALLCHAIN_DEFERRED record by its thread and time, and drops it
    under --dsos (it has no sampled address)."""
    perf = _recording()
    _two_threads(perf)
    path = tmp_path / "perf.data"
    path.write_bytes(perf.build())
    options = Options(debug_dir=str(_debug_dir(tmp_path)), merge_callchains=False)
    profile, _ = profile_recording(str(path), options)
    for choose in (filter_profile, perf_oracles.filtered):
        assert "".join(script_text(choose(profile, tids=[8]))) == (
            _header("worker", 8, 11_000, 2) + K[WRITE] + _cookie_line(OTHER_COOKIE) + "\n"
            + _deferred_header("worker", 8, 11_500, OTHER_COOKIE) + U[MAIN] + "\n"
        )  # fmt: skip
        late = choose(profile, comms=["prog"], time_range=(12_500_000, None))
        assert "".join(script_text(late)) == (
            _deferred_header("prog", 7, 13_000, COOKIE) + U[LEAF] + U[SMALL] + U[MAIN] + "\n"
        )
        assert choose(profile, dsos=["[kernel.kallsyms]"]).deferred == []
        early = choose(profile, time_range=(None, 12_000_000))  # the first record only
        assert [(chain.tid, chain.time) for chain in early.deferred] == [(8, 11_500_000)]
