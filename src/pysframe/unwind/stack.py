"""Backtraces of every thread of a live process or a core file, and their text and JSON.

The text follows eu-stack::

    PID 1234 - process
    TID 1234:
    #0  0x000055d1c8c3e3de spin_here+0xe - /tmp/prog
    #1  0x000055d1c8c3e41f recurse+0x1f - /tmp/prog

Frames found by the frame-pointer chain end with ``[frame-pointer]``; frames in a module whose
file is missing or changed end with ``[unresolved: why]``; a walk that ended before the
outermost frame says why on a last line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import UnwindError
from .core import DEFAULT_MAX_FRAMES, Backtrace, Frame, FrameSource, StopKind, Unwinder
from .corefile import CoreFile
from .modules import ModuleTable, load_modules, process_mappings, process_vdso_address
from .ptrace import attach


@dataclass(frozen=True, slots=True)
class ThreadTrace:
    tid: int
    backtrace: Backtrace


@dataclass(frozen=True, slots=True)
class StackReport:
    pid: int
    kind: str  # "process" or "core"
    threads: tuple[ThreadTrace, ...]
    modules: ModuleTable


def stack_of_process(
    pid: int, *, max_frames: int = DEFAULT_MAX_FRAMES, generate: bool = True
) -> StackReport:
    """Stop every thread of ``pid``, unwind them all, detach."""
    try:
        mappings = process_mappings(pid)
    except FileNotFoundError:
        raise UnwindError(f"no such process: {pid}") from None
    except PermissionError:
        raise UnwindError(f"no permission to read the mappings of process {pid}") from None
    # Generating SFrame for the modules happens before the threads are stopped.
    modules = load_modules(mappings, generate=generate)
    with attach(pid) as process:
        now = process_mappings(pid)
        vdso = process_vdso_address(pid)
        if now != mappings or vdso is not None:
            # Files already read are cached: this reads the vDSO and compares build IDs.
            modules = load_modules(now, process.read_memory, generate=generate, vdso=vdso)
        unwinder = Unwinder(process.abi, modules, max_frames=max_frames)
        threads = tuple(
            ThreadTrace(state.tid, unwinder.unwind(state.registers, process.read_memory))
            for state in process.snapshot()
        )
    return StackReport(pid, "process", threads, modules)


def stack_of_core(
    path: str,
    exe: str | None = None,
    *,
    sysroot: str | None = None,
    max_frames: int = DEFAULT_MAX_FRAMES,
    generate: bool = True,
) -> StackReport:
    """Unwind every thread recorded in a core file; ``sysroot`` holds the files of the machine
    that dumped it (gdb's ``set sysroot``)."""
    with CoreFile(path, exe, sysroot) as core:
        modules = load_modules(
            core.mappings, core.read_memory, generate=generate, vdso=core.vdso_address
        )
        unwinder = Unwinder(core.abi, modules, max_frames=max_frames, va_bits=core.va_bits)
        threads = tuple(
            ThreadTrace(state.tid, unwinder.unwind(state.registers, core.read_memory))
            for state in core.threads
        )
        return StackReport(core.pid, "core", threads, modules)


# ---------------------------------------------------------------------------------------------
# Output


def format_frame(frame: Frame) -> str:
    if frame.signal_trampoline:
        text = f"#{frame.index:<2} 0x{frame.pc:016x} <signal handler called>"
    else:
        text = f"#{frame.index:<2} 0x{frame.pc:016x} {frame.symbol_text}"
    if frame.module:
        text += f" - {frame.module}"
    if frame.source is FrameSource.FRAME_POINTER:
        text += " [frame-pointer]"
    if frame.problem:
        text += f" [unresolved: {frame.problem}]"
    return text


def report_lines(report: StackReport) -> Iterator[str]:
    """The report as eu-stack prints it, line by line (without line ends)."""
    yield f"PID {report.pid} - {report.kind}"
    for thread in report.threads:
        yield f"TID {thread.tid}:"
        for frame in thread.backtrace.frames:
            yield format_frame(frame)
        if thread.backtrace.stop is not StopKind.OUTERMOST:
            yield f"backtrace stopped: {thread.backtrace.reason}"


def report_json(report: StackReport) -> dict[str, Any]:
    return {
        "pid": report.pid,
        "kind": report.kind,
        "threads": [
            {
                "tid": thread.tid,
                "stop": thread.backtrace.stop.value,
                "reason": thread.backtrace.reason,
                "frames": [_frame_json(frame) for frame in thread.backtrace.frames],
            }
            for thread in report.threads
        ],
        "modules": [
            {
                "path": module.path,
                "start": module.start,
                "end": module.end,
                "bias": module.bias,
                "sframe": module.sframe_origin,
                "problem": module.info.problem,
            }
            for module in report.modules.modules
        ],
    }


def _frame_json(frame: Frame) -> dict[str, Any]:
    return {
        "index": frame.index,
        "pc": frame.pc,
        "sp": frame.sp,
        "cfa": frame.cfa,
        "symbol": frame.symbol,
        "offset": frame.offset,
        "module": frame.module,
        "source": frame.source.value,
        "covered": frame.covered,
        "signal_trampoline": frame.signal_trampoline,
        "problem": frame.problem,
    }


__all__ = [
    "StackReport",
    "ThreadTrace",
    "format_frame",
    "report_json",
    "report_lines",
    "stack_of_core",
    "stack_of_process",
]
