"""Processes that cannot be traced are refused with the reason, before ptrace's bare EPERM:
a zombie, a kernel thread, and a process another tracer holds."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import require, require_program
from pysframe.cli import main


def _kernel_thread() -> int | None:
    for pid in (2, 3):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[6]) & 0x00200000:  # PF_KTHREAD
            return pid
    return None


def test_kernel_thread(capsys: pytest.CaptureFixture[str]) -> None:
    pid = _kernel_thread()
    if pid is None:
        require("kernel threads", "no kernel thread visible in this PID namespace")
    assert main(["stack", str(pid)]) == 1
    err = capsys.readouterr().err
    reason = "is a kernel thread: it has no user-space stack to unwind"
    assert err == f"pysframe: process {pid} {reason}\n"


def test_zombie(capsys: pytest.CaptureFixture[str]) -> None:
    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        stat = Path(f"/proc/{child}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":  # state (proc(5))
            assert time.monotonic() < deadline, "the child did not become a zombie"
            time.sleep(0.01)
        assert main(["stack", str(child)]) == 1
        err = capsys.readouterr().err
        assert err == (
            f"pysframe: process {child} has exited (a zombie its parent has not yet waited "
            "for): it has no stack to unwind\n"
        )
    finally:
        os.waitpid(child, 0)


def test_process_traced_by_another(capsys: pytest.CaptureFixture[str]) -> None:
    require_program("gdb")
    sleeper = subprocess.Popen(["sleep", "60"])
    holder = subprocess.Popen(
        ["gdb", "-q", "-batch", "-p", str(sleeper.pid), "-ex", "shell sleep 20"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        status = Path(f"/proc/{sleeper.pid}/status")
        deadline = time.monotonic() + 15
        while "TracerPid:\t0" in status.read_text():
            if time.monotonic() > deadline:
                require("ptrace", "gdb did not attach (ptrace not permitted here?)")
            time.sleep(0.05)
        assert main(["stack", str(sleeper.pid)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"pysframe: process {sleeper.pid} is already traced by process ")
        assert "(gdb)" in err and err.count("\n") == 1
    finally:
        holder.kill()
        holder.wait()
        sleeper.kill()
        sleeper.wait()
