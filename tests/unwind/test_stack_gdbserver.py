"""pysframe stack --remote on a local x86-64 process under gdbserver --attach: every thread's
frames against gdb's, the executable named by the stub (qXfer:exec-file), the shared objects
found through r_debug, the vDSO through the auxiliary vector.  Skips without gdbserver."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import require, require_program, unavailable
from cross_support import free_port, listening
from pysframe.unwind.core import StopKind
from pysframe.unwind.stack import stack_of_remote
from stack_support import Unavailable, build_programs, check_ptrace, gdb_backtraces, run_program

DEPTH, THREADS = 8, 2


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_program("gdbserver")
    try:
        path = build_programs(tmp_path_factory.mktemp("gdbserver"))
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    return path


@contextmanager
def gdbserver_attached(pid: int) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        ["gdbserver", "--attach", f"127.0.0.1:{port}", str(pid)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                require("gdbserver", "gdbserver did not start listening")
            time.sleep(0.01)
        yield f"127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait(timeout=20)


def test_threads_under_gdbserver_match_gdb(program: Path) -> None:
    with run_program(program, DEPTH, THREADS) as running:
        gdb = gdb_backtraces("-p", str(running.pid))
        with gdbserver_attached(running.pid) as address:
            report = stack_of_remote(address)
    assert report.kind == "remote" and report.pid == running.pid
    ours = {
        t.tid: [None if f.signal_trampoline else f.pc for f in t.backtrace.frames]
        for t in report.threads
    }
    assert ours == gdb
    assert all(t.backtrace.stop is StopKind.OUTERMOST for t in report.threads)
    paths = {m.path for m in report.modules.modules}
    assert str(program) in paths and "[vdso]" in paths
    assert any(path.endswith("libstacklib.so") for path in paths)
