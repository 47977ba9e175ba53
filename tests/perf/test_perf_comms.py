"""The command name of each sample's thread, as perf 6.1 names it, wherever pysframe prints
one: ``perf script``'s comm column, ``perf report``'s Command column (``--sort comm``), the
process frame of folded stacks.

perf's rules (util/machine.c, util/thread.c), each checked against perf itself:

* the idle task (pid and tid 0, one per CPU) is ``swapper``: perf names it before the first
  record (machine__idle_thread), and no COMM record ever does;
* a thread no record named is ``:TID`` (thread__new), though its process has a name, and a
  sample of no thread (pid and tid -1) is ``:-1``;
* a thread's FORK makes it anew (machine__process_fork_event removes a thread of the same
  number): its parent thread's name where that has one, else ``:TID``, whatever a thread
  that had the number before was named.

On a hand-built recording with each case, and on a system-wide recording made here
(``perf record -a``), whose samples on idle CPUs are the idle task's.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import unavailable
from perf_support import (
    IP,
    PERF,
    PERIOD,
    TID,
    TIME,
    Attr,
    PerfFile,
    Unavailable,
    check_perf,
    perf_output,
)
from pysframe.cli import main

#: ``-F`` of both scripts: the command name and what says which thread it is.
FIELDS = "comm,pid,tid,time"


def _ours(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    capsys.readouterr()
    assert main(["perf", *arguments]) == 0
    return capsys.readouterr().out


def _perf_available() -> None:
    try:
        check_perf()
    except Unavailable as why:
        unavailable(why)


def test_each_naming_rule_is_perfs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _perf_available()
    perf = PerfFile()
    # perf 6.1 reads attributes up to PERF_ATTR_SIZE_VER7: a VER6 one (120 bytes) here.
    attr = perf.add_attr(Attr(IP | TID | TIME | PERIOD, size=120))
    perf.comm(attr, 60, 60, "parent", time=1)
    perf.comm(attr, 50, 50, "old", time=2)
    perf.comm(attr, 51, 51, "stale", time=2)
    perf.task(attr, False, 50, 50, 50, 50, time=3)  # thread 50 exits...
    perf.task(attr, True, 50, 60, 50, 60, time=4)  # ...and its number is a child's of 60
    perf.task(attr, True, 51, 61, 51, 61, time=4)  # 51 anew, of a parent nothing named
    perf.task(attr, True, 60, 60, 62, 60, time=5)  # a new thread of process 60
    perf.task(attr, True, 2, 0, 2, 0, time=5)  # a process the idle task forked
    perf.comm(attr, 80, 80, "main", time=6)  # a process, and a thread of it no record made
    threads = [(0, 0), (77, 77), (50, 50), (51, 51), (60, 62), (2, 2), (0, 0), (80, 81),
               (-1, -1)]  # fmt: skip
    for number, (pid, tid) in enumerate(threads):
        perf.sample(attr, ip=0x1000, pid=pid, tid=tid, time=10 + number, period=1)
    path = tmp_path / "names.data"
    path.write_bytes(perf.build())

    theirs = perf_output("script", "-i", str(path), "-F", FIELDS)
    names = [line.split()[0] for line in theirs.splitlines()]
    # The rules above, as perf applied them: not computed by the code under test.
    assert names == ["swapper", ":77", "parent", ":51", "parent", "swapper", "swapper", ":81",
                     ":-1"]  # fmt: skip
    assert _ours(capsys, "script", "-F", FIELDS, str(path)) == theirs


def _system_wide(out: Path) -> Path:
    """A recording of every CPU for half a second, at 1 kHz of CPU time: the samples of a CPU
    with nothing to run are the idle task's."""
    done = subprocess.run(
        [PERF, "record", "-q", "-a", "-e", "cpu-clock", "-c", "1000000", "-o", str(out),
         "--", "sleep", "0.5"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode:
        unavailable(Unavailable("perf", f"perf record -a failed: {done.stderr[:200]}"))
    return out


#: Recordings made, at most, for one with samples of the idle task (a busy machine has none).
ATTEMPTS = 4


@pytest.fixture(scope="module")
def system_wide(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The recording, and how many of its samples perf gives the idle task (pid/tid 0);
    where none of :data:`ATTEMPTS` recordings has one (every CPU busy throughout), the tests
    that need them are skipped."""
    _perf_available()
    out = tmp_path_factory.mktemp("comms")
    for attempt in range(ATTEMPTS):
        path = _system_wide(out / f"all{attempt}.data")
        text = perf_output("script", "-i", str(path), "-F", "pid,tid")
        idle = sum(line.split() == ["0/0"] for line in text.splitlines())
        if idle:
            return path, idle
    pytest.skip(f"no sample of the idle task in {ATTEMPTS} recordings: every CPU was busy")


def test_script_names_the_idle_task(
    system_wide: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, idle = system_wide
    theirs = perf_output("script", "-i", str(path), "-F", f"{FIELDS},cpu")
    assert sum(line.split()[:2] == ["swapper", "0/0"] for line in theirs.splitlines()) == idle
    assert _ours(capsys, "script", "-F", f"{FIELDS},cpu", str(path)) == theirs


def _rows(text: str) -> list[str]:
    """The rows of the first event's table of ``perf report --stdio``."""
    return [line for line in text.split("# Samples:")[1].splitlines() if re.match(r"\s+\d", line)]


def test_report_and_folded_name_the_idle_task(
    system_wide: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, idle = system_wide
    table = ("--stdio", "--sort", "comm", "--no-children", "-g", "none")
    theirs = _rows(perf_output("report", "-i", str(path), *table))
    assert any(row.split()[1:] == ["swapper"] for row in theirs)
    assert _rows(_ours(capsys, "report", *table, str(path))) == theirs
    # Folded stacks: a sample's process frame is perf script's command name
    # (stackcollapse-perf.pl takes it from the sample's header line).
    folded = _ours(capsys, "report", "--format", "folded", str(path)).splitlines()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded
               if line.split(";")[0].split(" ")[0] == "swapper") == idle  # fmt: skip
    assert not any(line.startswith(":0") for line in folded)
