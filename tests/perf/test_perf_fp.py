"""``pysframe perf`` on frame-pointer recordings (``perf record -g``) against perf itself.

A program (tests/data/perf/profiled.c and its shared library) built with -O2
-fno-omit-frame-pointer is recorded with perf's user callchains: ``-g`` of a child, ``-g -p``
of a process already running (its modules known from the MMAP2 records perf synthesizes),
``-a -g`` (every process on the machine), and two events in one recording, one ``fp`` and one
``dwarf``.  Then, through the CLI:

* ``pysframe perf script`` prints what ``perf script`` prints, sample by sample (the recorded
  user frames: address, symbol+offset, module); perf 6.1 adds no inline entries to them;
* ``pysframe perf stats`` says how each event recorded user stacks, and counts the samples
  whose chain left out a caller.  By construction: ``lib_hash`` (the library's hot loop) is
  called only by ``hashing`` and sets up no frame of its own, so perf's chain of a sample in
  it goes from ``lib_hash`` straight to ``worker``: SFrame says so of every such sample.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import unavailable
from perf_support import PERF, Unavailable, build_profiled, check_perf, dump_text, perf_output
from pysframe.cli import main

#: Share of samples whose text must be perf's (the issue's bar: 99%).
AGREEMENT = 0.99


def _perf_record(out: Path, *arguments: str) -> Path:
    done = subprocess.run(
        [PERF, "record", "-q", "-o", str(out), *arguments],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode:
        raise Unavailable(
            "perf", f"perf record {' '.join(arguments)} failed ({done.returncode}): "
            f"{done.stderr[:200]}",
        )  # fmt: skip
    return out


def _record_attached(out: Path, program: Path) -> tuple[Path, int]:
    """``perf record -g -p PID`` of the program, started before perf, and its pid."""
    running = subprocess.Popen([str(program), "3"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # its libraries are mapped, its threads running
        path = _perf_record(out, "-e", "cpu-clock", "-c", "100000", "-g",
                            "-p", str(running.pid), "--", "sleep", "0.5")  # fmt: skip
        return path, running.pid
    finally:
        running.kill()
        running.wait()


@pytest.fixture(scope="module")
def attached(recordings: dict[str, Path]) -> tuple[Path, int]:
    """Where the kernel will not open events on another process (perf: "No such process",
    in some containers), the test is skipped; test_system_wide still reads processes perf
    found running, from the MMAP2 records it synthesized."""
    try:
        return _record_attached(recordings["fp"].parent / "attached.data",
                                recordings["fp"].parent / "profiled")  # fmt: skip
    except Unavailable as why:
        unavailable(why)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("perf-fp")
    try:
        check_perf()
        program = build_profiled(out, frame_pointers=True)
        run = [str(program), "0.5"]
        return {
            "fp": _perf_record(out / "fp.data", "-e", "cpu-clock", "-c", "100000", "-g",
                               "--", *run),
            "mixed": _perf_record(
                out / "mixed.data", "-e", "cpu-clock/call-graph=fp/",
                "-e", "task-clock/call-graph=dwarf,stack-size=8192/", "-c", "100000", "--", *run,
            ),
        }  # fmt: skip
    except Unavailable as why:
        unavailable(why)


def _ours(capsys: pytest.CaptureFixture[str], *arguments: str) -> str:
    capsys.readouterr()
    assert main(["perf", *arguments]) == 0
    return capsys.readouterr().out


def _samples(text: str) -> list[str]:
    """The samples of ``perf script`` text: each its header line and frame lines."""
    return [block for block in text.split("\n\n") if block.strip()]


def _tid(sample: str) -> int:
    """The thread id in a sample's header (after the command name, which may hold spaces;
    -1 for a kernel sample of no thread, which perf prints as ``:-1    -1``)."""
    found = re.match(r"^.*?\s(-?\d+) (?:\[\d+\] )?\s*\d+\.\d+: ", sample)
    assert found, sample.splitlines()[0]
    return int(found.group(1))


def _agreement(theirs: str, ours: str) -> tuple[float, int]:
    """The share of perf's samples whose text is ours (in order), and how many it has."""
    expected, found = _samples(theirs), _samples(ours)
    assert len(found) == len(expected)
    same = sum(a == b for a, b in zip(expected, found, strict=True))
    return same / len(expected), len(expected)


@pytest.mark.parametrize("inline", ["--no-inline", "--inline"])
def test_script_is_perfs(
    recordings: dict[str, Path], capsys: pytest.CaptureFixture[str], inline: str
) -> None:
    path = recordings["fp"]
    theirs = perf_output("script", *(["--no-inline"] if inline == "--no-inline" else []),
                         "-i", str(path))  # fmt: skip
    ours = _ours(capsys, "script", inline, str(path))
    share, count = _agreement(theirs, ours)
    assert count > 100
    assert share >= AGREEMENT, f"{share:.2%} of {count} samples"
    # the program's own frames are there, named (before this change: none of them)
    assert "lib_hash+0x" in ours and "worker+0x" in ours and "(inlined)" not in ours


def test_stats_say_fp_and_the_missed_callers(
    recordings: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = recordings["fp"]
    stats = json.loads(_ours(capsys, "stats", "--json", str(path)))
    (event,) = stats["events"].values()
    assert event["kind"] == "fp"
    assert event["recorded"] == event["samples"] == stats["samples"]
    assert event["walked"] == event["both"] == 0
    # perf's own chains: a sample in lib_hash goes on at worker, its caller hashing left out
    theirs = _samples(perf_output("script", "--no-inline", "-i", str(path)))
    in_lib_hash = 0
    for sample in theirs:
        user = [line for line in sample.splitlines()[1:] if "[kernel.kallsyms]" not in line]
        if user and " lib_hash+0x" in user[0]:
            in_lib_hash += 1
            assert len(user) < 2 or " hashing+0x" not in user[1]
    assert in_lib_hash > 10
    missed = {Path(name).name: count for name, count in stats["chain_missed_caller"].items()}
    assert missed.get("libprofiled.so", 0) >= in_lib_hash
    text = _ours(capsys, "stats", str(path))
    assert "cpu-clock: fp;" in text and "recorded 100.0%" in text
    assert "left out a caller" in text


def test_mixed_events(recordings: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """One recording, an fp event and a dwarf event: the fp event's samples are perf's text
    (with the event names right-aligned as perf aligns them); perf 6.1 gives the dwarf event
    of such a recording only its first user frame, pysframe walks it: perf's frames are the
    start of pysframe's."""
    path = recordings["mixed"]
    theirs = _samples(perf_output("script", "--no-inline", "-i", str(path)))
    ours = _samples(_ours(capsys, "script", "--no-inline", str(path)))
    assert len(ours) == len(theirs)
    fp = [(a, b) for a, b in zip(theirs, ours, strict=True) if "call-graph=fp" in a]
    dwarf = [(a, b) for a, b in zip(theirs, ours, strict=True) if "call-graph=dwarf" in a]
    assert len(fp) > 50 and len(dwarf) > 50
    assert sum(a == b for a, b in fp) >= AGREEMENT * len(fp)
    starts = sum(b.startswith(a) for a, b in dwarf)
    assert starts >= AGREEMENT * len(dwarf)
    deeper = sum(len(b.splitlines()) > len(a.splitlines()) for a, b in dwarf)
    assert deeper > len(dwarf) // 2
    stats = json.loads(_ours(capsys, "stats", "--json", str(path)))
    kinds = {name.split("/")[0]: event for name, event in stats["events"].items()}
    assert kinds["cpu-clock"]["kind"] == "fp"
    assert kinds["cpu-clock"]["recorded"] == kinds["cpu-clock"]["samples"]
    assert kinds["task-clock"]["kind"] == "dwarf"
    assert kinds["task-clock"]["walked"] >= 0.9 * kinds["task-clock"]["samples"]
    assert kinds["task-clock"]["recorded"] == 0


def test_attached_process(
    attached: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """``-p PID``: the modules of a process perf found running come from the MMAP2 records
    perf synthesized from its /proc/PID/maps."""
    path, pid = attached
    theirs = perf_output("script", "--no-inline", "--pid", str(pid), "-i", str(path))
    ours = _ours(capsys, "script", "--no-inline", "--pid", str(pid), str(path))
    share, count = _agreement(theirs, ours)
    assert count > 100
    assert share >= AGREEMENT, f"{share:.2%} of {count} samples"
    assert "(" + str(path.parent / "libprofiled.so") + ")" in ours


def test_system_wide(
    recordings: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``-a``: every process on the machine, the CPU of each sample in its header."""
    program = recordings["fp"].parent / "profiled"
    try:
        path = _perf_record(tmp_path / "all.data", "-a", "-e", "cpu-clock", "-c", "1000000",
                            "-g", "--", str(program), "0.3")  # fmt: skip
    except Unavailable as why:
        unavailable(why)
    theirs = perf_output("script", "--no-inline", "-i", str(path))
    ours = _ours(capsys, "script", "--no-inline", str(path))
    assert len(_samples(theirs)) == len(_samples(ours))
    # Both read a JIT's /tmp/perf-PID.map when they print: one another process (a test
    # running beside this one) removed between the two reads names its frames in one text
    # only.  Its samples are left out.
    gone = {name for name in re.findall(r"\((/tmp/perf-\d+\.map)\)", theirs + ours)
            if not os.path.exists(name)}  # fmt: skip
    pairs = [(a, b) for a, b in zip(_samples(theirs), _samples(ours), strict=True)
             if not any(f"({name})" in a + b for name in gone)]  # fmt: skip
    count = len(pairs)
    share = sum(a == b for a, b in pairs) / max(count, 1)
    assert count > 50
    differing = [(a, b) for a, b in pairs if a != b]
    assert share >= AGREEMENT, f"{share:.2%} of {count} samples; perf, then ours: {differing[:3]}"
    assert "] " in ours.splitlines()[0]  # "[000] ": the CPU
    # The processes perf found running: their mappings are the MMAP2 records perf
    # synthesized (at time 0) from /proc/PID/maps before the first sample.
    found_running = {
        int(match.group(1))
        for match in re.finditer(r"^\d+ 0 0x[0-9a-f]+ \[0x[0-9a-f]+\]: PERF_RECORD_MMAP2 (\d+)/",
                                 dump_text(path), re.MULTILINE)
    }  # fmt: skip
    assert found_running
    pairs = [
        (a, b) for a, b in zip(_samples(theirs), _samples(ours), strict=True)
        if _tid(a) in found_running and "\t" in a and " (/" in a
    ]  # fmt: skip
    assert pairs, "no sample of a process perf found running has a frame in a file"
    assert sum(a == b for a, b in pairs) >= AGREEMENT * len(pairs)


def test_fix_leaf_says_what_it_cannot_prove(
    recordings: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A -g recording has no stack copy: the left-out callers' return addresses are in stack
    memory, so --fix-leaf changes no frame and says so, with the count perf stats gives."""
    path = str(recordings["fp"])
    plain = _ours(capsys, "script", "--no-inline", path)
    capsys.readouterr()
    assert main(["perf", "script", "--no-inline", "--fix-leaf", path]) == 0
    fixed = capsys.readouterr()
    assert fixed.out == plain
    stats = json.loads(_ours(capsys, "stats", "--json", path))
    missed = sum(stats["chain_missed_caller"].values())
    (line,) = [line for line in fixed.err.splitlines() if "--fix-leaf" in line]
    assert f"{missed:,} recorded callchains left out the caller" in line
    assert "no stack copy" in line
