"""Helpers of the live stack tests and the benchmark: build the test program, run it to its
stopping point, ask gdb for its backtraces."""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SOURCES = Path(__file__).parent.parent / "data" / "stack"
GDB_SCRIPT = Path(__file__).parent / "gdb_frames.py"
#: A gdb frame: its PC, or None for "<signal handler called>".
GdbFrame = int | None


class Unavailable(Exception):
    """A tool or permission the live tests need is missing: ``tool`` names it (as the tests'
    summary counts it, conftest.require), the message says what happened."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(message)
        self.tool = tool


def build_programs(out: Path) -> Path:
    """Compile the shared library and the program (-O2, no frame pointers, SFrame by gas)."""
    if shutil.which("gcc") is None:
        raise Unavailable("gcc", "gcc is not installed")
    flags = ["-O2", "-fomit-frame-pointer", "-Wa,--gsframe"]
    commands = [
        ["gcc", *flags, "-fPIC", "-shared", "-o", str(out / "libstacklib.so"),
         str(SOURCES / "stacklib.c")],
        ["gcc", *flags, "-pthread", "-o", str(out / "stack_prog"), str(SOURCES / "stack_prog.c"),
         f"-L{out}", "-lstacklib", "-Wl,-rpath,$ORIGIN"],
    ]
    for command in commands:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode:
            message = f"cannot compile the test program: {result.stderr.strip()[:200]}"
            raise Unavailable("gcc", message)
    return out / "stack_prog"


def check_ptrace() -> None:
    """Raise Unavailable unless this process may ptrace its children."""
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    if scope.exists() and scope.read_text().strip() == "3":
        raise Unavailable("ptrace", "ptrace is disabled (kernel.yama.ptrace_scope = 3)")
    from pysframe.errors import SFrameError
    from pysframe.unwind.ptrace import attach

    child = subprocess.Popen(["sleep", "30"])
    try:
        with attach(child.pid) as process:
            process.snapshot()
    except SFrameError as error:
        raise Unavailable("ptrace", f"cannot ptrace a child process: {error}") from None
    finally:
        child.kill()
        child.wait()


@dataclass
class Running:
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid


@contextmanager
def run_program(program: Path, depth: int, threads: int, stop: bool = True) -> Iterator[Running]:
    """Start the program, wait for READY, stop it with SIGSTOP; kill and reap it on leaving."""
    process = subprocess.Popen(
        [str(program), str(depth), str(threads)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 20)
        line = process.stdout.readline() if ready else b""
        if not line.startswith(b"READY"):
            raise RuntimeError(f"test program did not get ready: {line!r}")
        if stop:
            os.kill(process.pid, signal.SIGSTOP)
            wait_stopped(process.pid)
        yield Running(process)
    finally:
        process.kill()
        process.wait(timeout=20)
        if process.stdout:
            process.stdout.close()
        if process.stderr:
            process.stderr.close()


def wait_stopped(pid: int) -> None:
    """Wait until every thread is in the stopped state."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            states.append(text.rsplit(")", 1)[1].split()[0])
        if states and all(state in ("T", "t") for state in states):
            return
        time.sleep(0.01)
    raise RuntimeError(f"process {pid} did not stop")


_THREAD = re.compile(r"^Thread \d+ \(.*?LWP (\d+)")
_FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in |(<signal handler called>))")
_FRAME_NO_ADDR = re.compile(r"^#(\d+)\s+\S")
_SCRIPT_LINE = re.compile(r"^(THREAD|FRAME) (\S+)$")


def gdb_command(*args: str) -> list[str]:
    if shutil.which("gdb") is None:
        raise Unavailable("gdb", "gdb is not installed")
    return [
        "gdb", "-nx", "-batch", "-ex", "set debuginfod enabled off",
        "-ex", "set backtrace past-main on", "-ex", "set backtrace limit 100000",
        *args, "-ex", "thread apply all bt -frame-info location-and-address",
    ]


def gdb_backtraces(*args: str, gdb: str = "gdb") -> dict[int, list[GdbFrame]]:
    """Every thread's physical frames, as gdb unwinds them, in a process (``-p PID``) or a core.

    Frames gdb makes for inlined functions are left out (see gdb_frames.py): they share the
    PC of the function they were inlined into, and an unwinder has no such frames.
    ``gdb``: the debugger to run (gdb-multiarch for other architectures).
    """
    if shutil.which(gdb) is None:
        raise Unavailable(gdb, f"{gdb} is not installed")
    command = [
        gdb, "-nx", "-batch", "-ex", "set debuginfod enabled off",
        "-ex", "set backtrace past-main on", "-ex", "set backtrace limit 100000",
        *args, "-x", str(GDB_SCRIPT),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    if "Python scripting is not supported" in result.stderr:
        raise Unavailable("gdb", "gdb has no Python support")
    traces: dict[int, list[GdbFrame]] = {}
    current: list[GdbFrame] = []
    for line in result.stdout.splitlines():
        match = _SCRIPT_LINE.match(line)
        if match is None:
            continue
        kind, value = match.groups()
        if kind == "THREAD":
            current = traces.setdefault(int(value), [])
        else:
            current.append(None if value == "signal" else int(value, 16))
    return traces


GDB_NAMES_SCRIPT = Path(__file__).parent / "gdb_names.py"


@dataclass(frozen=True)
class NamedFrame:
    """A physical frame as gdb names it: ``bt_name`` as ``bt`` prints it (DWARF's name when
    gdb has one), ``symbol`` the minimal symbol ``info symbol`` gives (None: no name)."""

    pc: int
    bt_name: str | None
    symbol: str | None


def gdb_named_frames(*args: str) -> dict[int, list[NamedFrame | None]]:
    """Every thread's physical frames with gdb's names (None for a signal trampoline), from
    ``gdb_names.py``; ``args`` say what gdb debugs (``-p PID``, a program and its core) and
    may set its ``debug-file-directory``."""
    if shutil.which("gdb") is None:
        raise Unavailable("gdb", "gdb is not installed")
    command = [
        "gdb", "-nx", "-batch", "-ex", "set debuginfod enabled off",
        "-ex", "set backtrace past-main on", "-ex", "set backtrace limit 100000",
        *args, "-x", str(GDB_NAMES_SCRIPT),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    if "Python scripting is not supported" in result.stderr:
        raise Unavailable("gdb", "gdb has no Python support")
    traces: dict[int, list[NamedFrame | None]] = {}
    current: list[NamedFrame | None] = []
    for line in result.stdout.splitlines():
        if line.startswith("THREAD "):
            current = traces.setdefault(int(line.split()[1]), [])
        elif line == "FRAME signal":
            current.append(None)
        elif line.startswith("FRAME "):
            pc, bt_name, symbol = line[len("FRAME "):].split("\t")
            current.append(NamedFrame(
                int(pc, 16), None if bt_name == "-" else bt_name, None if symbol == "-" else symbol
            ))
    return traces


GDB_LINES_SCRIPT = Path(__file__).parent / "gdb_lines.py"
#: A frame as gdb_lines.py prints it: kind ("inline", "normal", "signal"), name, file, line.
GdbSourceFrame = tuple[str, str | None, str | None, int | None]


def gdb_source_frames(*args: str) -> dict[int, list[GdbSourceFrame]]:
    """Every thread's frames, inlined ones included, with gdb's names and source lines."""
    if shutil.which("gdb") is None:
        raise Unavailable("gdb", "gdb is not installed")
    command = [
        "gdb", "-nx", "-batch", "-ex", "set debuginfod enabled off",
        "-ex", "set backtrace past-main on", *args, "-x", str(GDB_LINES_SCRIPT),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    traces: dict[int, list[GdbSourceFrame]] = {}
    current: list[GdbSourceFrame] = []
    for line in result.stdout.splitlines():
        if line.startswith("THREAD "):
            current = traces.setdefault(int(line.split()[1]), [])
        elif line.startswith("FRAME "):
            kind, name, file, number = line[len("FRAME "):].split("\t")
            current.append((
                kind, None if name == "-" else name, None if file == "-" else file,
                None if number == "-" else int(number),
            ))
    return traces


def parse_gdb_bt(text: str) -> dict[int, list[GdbFrame]]:
    traces: dict[int, list[GdbFrame]] = {}
    current: list[GdbFrame] | None = None
    for line in text.splitlines():
        thread = _THREAD.match(line)
        if thread:
            current = traces.setdefault(int(thread.group(1)), [])
            continue
        frame = _FRAME.match(line)
        if frame and current is not None:
            if int(frame.group(1)) != len(current):
                raise ValueError(f"gdb frame numbers out of order: {line}")
            current.append(None if frame.group(3) else int(frame.group(2), 16))
        elif _FRAME_NO_ADDR.match(line) and current is not None:
            raise ValueError(f"gdb frame line without an address: {line}")
    return traces
