"""Recorded user callchains (``perf record -g``) on hand-built recordings: perf 6.1's rules
(util/machine.c thread__resolve_callchain_sample, add_callchain_ip) written out by hand.

* the user frames are the entries after PERF_CONTEXT_USER, each looked up and printed at its
  own address (no byte back for return addresses), in the module's file (map_ip: address -
  start + pgoff), an address no mapping holds as it is;
* a chain holding a context marker other than HV, KERNEL or USER (the -1 a kernel's walk may
  end with) is thrown away whole: perf prints no frame of that sample;
* ``perf stats`` calls such an event "fp" and counts its samples with recorded frames.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perf_support import CALLCHAIN, IP, PERIOD, TID, TIME, Attr, PerfFile
from pysframe.cli import main

USER = 2**64 - 512  # PERF_CONTEXT_USER
KERNEL = 2**64 - 128  # PERF_CONTEXT_KERNEL
#: A mapping of a file that is not there: its frames are "[unknown]" in it.
START, LENGTH, PGOFF = 0x7F0000001000, 0x4000, 0x3000
LIBRARY = "/nonexistent/libgone.so"


def _recording(tmp_path: Path, chains: list[tuple[int, ...]]) -> Path:
    perf = PerfFile()
    perf.add_attr(Attr(IP | TID | TIME | CALLCHAIN | PERIOD))  # unnamed: "event0"
    perf.comm(0, 7, 7, "prog")
    perf.mmap2(0, 7, 7, START, LENGTH, PGOFF, LIBRARY, time=1)
    for number, chain in enumerate(chains):
        perf.sample(0, ip=START + 0x10, pid=7, tid=7, time=10 + number, period=1,
                    callchain=chain)  # fmt: skip
    path = tmp_path / "fp.data"
    path.write_bytes(perf.build())
    return path


def _script(path: Path, capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    """Each sample's frame lines, as ``pysframe perf script --no-inline`` prints them."""
    capsys.readouterr()
    assert main(["perf", "script", "--no-inline", "--buildid-dir", "", str(path)]) == 0
    blocks = capsys.readouterr().out.split("\n\n")
    return [block.splitlines()[1:] for block in blocks if block.strip()]


def test_recorded_user_frames_are_perfs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pc, ret, outside = START + 0x10, START + 0x2345, 0x1000
    path = _recording(tmp_path, [
        (USER, pc, ret, outside),  # the sample's PC, a return address, a stray word
        (USER, pc, ret, 2**64 - 1),  # a walk ended by -1: the chain thrown away
    ])  # fmt: skip
    first, second = _script(path, capsys)
    assert first == [
        f"\t{pc - START + PGOFF:16x} [unknown] ({LIBRARY})",
        f"\t{ret - START + PGOFF:16x} [unknown] ({LIBRARY})",  # not one byte back
        f"\t{outside:16x} [unknown] ([unknown])",
    ]
    assert second == []


def test_stats_count_recorded_frames(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _recording(tmp_path, [(USER, START + 0x10), (USER, START + 0x20, START + 0x30), ()])
    capsys.readouterr()
    assert main(["perf", "stats", "--json", "--buildid-dir", "", str(path)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["events"] == {
        "event0": {"kind": "fp", "samples": 3, "walked": 0, "recorded": 2, "both": 0}
    }
    assert stats["recorded"] == 2 and stats["walked"] == 0
    assert stats["chain_missed_caller"] == {}  # no SFrame for a file that is not there


def test_an_exec_keeps_the_old_mappings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """perf 6.1 keeps a process's mappings at an exec (util/thread.c __thread__set_comm only
    flushes its unwinding caches): a sample taken in the execve call, after the COMM of the
    exec and before the new program's mappings, is still in the old program's library; a
    new mapping over it replaces it."""
    perf = PerfFile()
    perf.add_attr(Attr(IP | TID | TIME | CALLCHAIN | PERIOD))
    perf.comm(0, 7, 7, "shim")
    perf.mmap2(0, 7, 7, START, LENGTH, PGOFF, LIBRARY, time=1)
    perf.comm(0, 7, 7, "prog", time=2, exec_=True)
    perf.sample(0, ip=START + 0x10, pid=7, tid=7, time=3, period=1,
                callchain=(USER, START + 0x10))  # fmt: skip
    perf.mmap2(0, 7, 7, START, LENGTH, 0, "/nonexistent/prog", time=4)
    perf.sample(0, ip=START + 0x10, pid=7, tid=7, time=5, period=1,
                callchain=(USER, START + 0x10))  # fmt: skip
    path = tmp_path / "exec.data"
    path.write_bytes(perf.build())
    in_execve, after = _script(path, capsys)
    assert in_execve == [f"\t{0x10 + PGOFF:16x} [unknown] ({LIBRARY})"]
    assert after == [f"\t{0x10:16x} [unknown] (/nonexistent/prog)"]


def test_stats_call_an_event_with_deferred_chains_deferred(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sample whose callchain holds PERF_CONTEXT_USER_DEFERRED ((u64)-640, then the cookie
    of the record that will carry its user frames: Linux 6.19's perf_event.h)."""
    path = _recording(tmp_path, [(KERNEL, 0xFFFFFFFF81000000, 2**64 - 640, 42)])
    capsys.readouterr()
    assert main(["perf", "stats", "--json", "--buildid-dir", "", str(path)]) == 0
    (event,) = json.loads(capsys.readouterr().out)["events"].values()
    assert event["kind"] == "deferred" and event["recorded"] == 0
