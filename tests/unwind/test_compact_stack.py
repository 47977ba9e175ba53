"""Compacted programs still unwind: ``pysframe stack`` of the live test program (threads
recursing through a shared library, a signal handler, a thread blocked in libc) is the same
before and after its program and library are compacted, frame by frame.

The program and library are those of the live stack tests (SFrame written by gcc's assembler),
compacted, and given the libraries' V3 generated, compacted, in place of their own too.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from conftest import unavailable
from pysframe.cli import main
from pysframe.tools.compact import compact_file
from pysframe.unwind.stack import StackReport, stack_of_process
from stack_support import Unavailable, build_programs, check_ptrace, run_program, wait_stopped

DEPTH, THREADS = 9, 2
Frames = list[tuple[str | None, str | None, int | None, str, bool, bool]]


def _frames(report: StackReport) -> list[Frames]:
    """Each thread's frames as module name, symbol, offset, source, covered, trampoline; the
    threads sorted (their ids differ between runs).  The offset of the frame a signal
    interrupted is left out: the main thread spins there, at any PC of its loop."""
    threads = []
    for thread in report.threads:
        frames: Frames = []
        interrupted = False
        for f in thread.backtrace.frames:
            module = None if f.module is None else Path(f.module).name
            offset = None if interrupted else f.offset
            frames.append((module, f.symbol, offset, str(f.source), f.covered, f.signal_trampoline))
            interrupted = f.signal_trampoline
        threads.append(frames)
    return sorted(threads, key=repr)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The program as built, compacted, and with V3 generated and compacted (each beside its
    library)."""
    try:
        original = build_programs(tmp_path_factory.mktemp("original"))
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    library = original.with_name("libstacklib.so")
    compacted = tmp_path_factory.mktemp("compacted")
    for path in (original, library):
        report = compact_file(str(path), str(compacted / path.name))
        assert report.new_size <= report.old_size
    generated = tmp_path_factory.mktemp("generated")
    for path in (original, library):
        status = main(
            ["generate", str(path), "--inject", "--replace", "--compact", "-o",
             str(generated / path.name)]
        )  # fmt: skip
        assert status == 0
    shutil.copymode(original, generated / original.name)
    return original, compacted / original.name, generated / original.name


#: x86-64's pause(2) system call number (asm/unistd_64.h).
_SYS_PAUSE = 34


def _in_pause(pid: int) -> bool:
    """Whether every thread of ``pid`` sits in pause(2): the workers pause in spin_here, and
    the sleeper thread prints READY and then pauses; until it gets there it may be inside
    libc's write, a stack that differs from run to run."""
    calls = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            calls.append((task / "syscall").read_text().split()[:1])
        except OSError:
            continue
    return bool(calls) and all(call == [str(_SYS_PAUSE)] for call in calls)


def _stack(program: Path) -> list[Frames]:
    with run_program(program, DEPTH, THREADS, stop=False) as running:
        deadline = time.monotonic() + 10
        while not _in_pause(running.pid):
            if time.monotonic() > deadline:
                pytest.fail("the program's threads never all reached pause()")
            time.sleep(0.005)
        os.kill(running.pid, signal.SIGSTOP)
        wait_stopped(running.pid)
        return _frames(stack_of_process(running.pid))


def test_compacted_program_unwinds_as_before(builds: tuple[Path, Path, Path]) -> None:
    original, compacted, _ = builds
    before = _stack(original)
    assert sum(len(frames) for frames in before) > 2 * DEPTH
    assert _stack(compacted) == before


def test_generated_and_compacted_program_unwinds(builds: tuple[Path, Path, Path]) -> None:
    original, _, generated = builds
    before = _stack(original)
    after = _stack(generated)
    # The same frames (the generated rows cover what gas' did, and more: the PLT).
    assert [[frame[:3] for frame in thread] for thread in after] == [
        [frame[:3] for frame in thread] for thread in before
    ]
