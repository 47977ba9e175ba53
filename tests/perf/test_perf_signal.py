"""Walks through a signal frame, in a recording and in a live process, against perf and a chain
known by construction.

tests/data/perf/sigspin.c spends its time in a SIGALRM handler, built with -O2
-fomit-frame-pointer (its SFrame generated from its CFI, or its own from gas' --gsframe); libc
has no SFrame of its own here, and SFrame generated from its CFI leaves the signal trampoline
``__restore_rt`` without a row.  A sample or backtrace taken in the handler is, innermost first:
``spin_in_handler``, ``on_alarm``, the trampoline in libc, ``interrupted`` (the frame the signal
interrupted, restored from the context the kernel saved), ``main``, libc's start-up, ``_start``.

* ``perf record --call-graph dwarf``: every sample in the handler walks through the trampoline
  to ``interrupted`` and ``main``, and ``pysframe perf script`` prints perf script's text for
  it (libdw walks through signal frames too);
* ``pysframe stack`` of the program while it runs in the handler walks through it to the same
  functions.

The trampoline's code is not in a recording's stack copy: the walk reads it from libc's file.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import unavailable
from perf_support import DATA, PERF, Unavailable, record
from stack_support import check_ptrace

#: The functions of a sample in the handler from the trampoline's caller on (by construction).
INTERRUPTED = ["interrupted", "main"]
HANDLER = ["spin_in_handler", "on_alarm"]
FLAVOURS = {"generated": [], "own": ["-Wa,--gsframe"]}


def _build(out: Path, flavour: str) -> Path:
    if shutil.which("gcc") is None:
        raise Unavailable("gcc", "gcc is not installed")
    program = out / f"sigspin-{flavour}"
    done = subprocess.run(
        ["gcc", "-O2", "-fomit-frame-pointer", *FLAVOURS[flavour], "-o", str(program),
         str(DATA / "sigspin.c")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise Unavailable("gcc", f"cannot build sigspin.c: {done.stderr[:200]}")
    return program


@pytest.fixture(scope="module", params=list(FLAVOURS))
def program(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return _build(tmp_path_factory.mktemp("sigspin"), request.param)
    except Unavailable as why:
        unavailable(why)


def _samples(text: str) -> list[list[tuple[str, str, str]]]:
    """The user frames of each sample of ``perf script``'s text: (address, symbol, module)."""
    samples: list[list[tuple[str, str, str]]] = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        frames = []
        for line in lines[1:]:
            address, rest = line.strip().split(" ", 1)
            symbol, module = rest.rsplit(" (", 1)
            if module != "[kernel.kallsyms])":
                frames.append((address, symbol.split("+")[0], module.rstrip(")")))
        samples.append(frames)
    return samples


def test_samples_in_a_signal_handler_walk_through_the_signal_frame(
    program: Path, tmp_path: Path
) -> None:
    try:
        path = record(tmp_path / "sig.data", [str(program), "0.5"], options=(
            "-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf",
        ))  # fmt: skip
    except Unavailable as why:
        unavailable(why)
    theirs = subprocess.run(
        [PERF, "script", "--no-inline", "-i", str(path)],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    ours = subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", "script", "--no-inline", str(path)],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    perf_samples, our_samples = _samples(theirs), _samples(ours)
    assert len(our_samples) == len(perf_samples)
    in_handler = [
        (mine, perfs)
        for mine, perfs in zip(our_samples, perf_samples, strict=True)
        if mine and mine[0][1] == HANDLER[0]
    ]
    assert len(in_handler) > len(our_samples) // 2, "the program did not run in its handler"
    for mine, perfs in in_handler:
        names = [symbol for _address, symbol, _module in mine]
        # spin_in_handler, on_alarm, the trampoline in libc, interrupted, main, start-up.
        assert names[:2] == HANDLER, mine
        assert "libc.so" in mine[2][2], mine
        assert names[3:5] == INTERRUPTED, mine
        assert names[-1] == "_start", mine
        assert mine == perfs  # perf's libdw walks through signal frames: the same frames


def _stack_names(pid: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pysframe", "stack", str(pid)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = []
    for line in done.stdout.splitlines():
        if line.startswith("#"):
            text = line.split(None, 2)[2]
            names.append(text.split(" - ")[0].split("+")[0])
    return names


def test_stack_of_a_process_in_a_signal_handler_walks_through_the_signal_frame(
    program: Path,
) -> None:
    try:
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    process = subprocess.Popen([str(program), "0"], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 20)
        assert ready and process.stdout.readline() == b"READY\n"
        time.sleep(0.05)
        names = _stack_names(process.pid)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=20)
    at = names.index(HANDLER[0])
    assert names[at : at + 5] == [*HANDLER, "<signal handler called>", *INTERRUPTED], names
    assert names[-1] == "_start", names
