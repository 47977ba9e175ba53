"""``pysframe stack``: backtraces of every thread of a live process or a core file.

Output follows eu-stack::

    PID 1234 - process
    TID 1234:
    #0  0x000055d1c8c3e3de spin_here+0xe - /tmp/prog
    #1  0x000055d1c8c3e41f recurse+0x1f - /tmp/prog

Frames found by the frame-pointer chain end with ``[frame-pointer]``; frames in a module whose
file is missing or changed end with ``[unresolved: why]``; a walk that ended before the
outermost frame says why on a last line.  ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from ..errors import UnwindError
from ..unwind.core import DEFAULT_MAX_FRAMES, Backtrace, Frame, FrameSource, StopKind, Unwinder
from ..unwind.corefile import CoreFile
from ..unwind.modules import ModuleTable, load_modules, process_mappings, process_vdso_address
from ..unwind.ptrace import attach


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
    max_frames: int = DEFAULT_MAX_FRAMES,
    generate: bool = True,
) -> StackReport:
    """Unwind every thread recorded in a core file."""
    with CoreFile(path, exe) as core:
        modules = load_modules(
            core.mappings, core.read_memory, generate=generate, vdso=core.vdso_address
        )
        unwinder = Unwinder(core.abi, modules, max_frames=max_frames)
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


def write_text(report: StackReport, out: TextIO) -> None:
    out.write(f"PID {report.pid} - {report.kind}\n")
    for thread in report.threads:
        out.write(f"TID {thread.tid}:\n")
        for frame in thread.backtrace.frames:
            out.write(format_frame(frame) + "\n")
        if thread.backtrace.stop is not StopKind.OUTERMOST:
            out.write(f"backtrace stopped: {thread.backtrace.reason}\n")


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


# ---------------------------------------------------------------------------------------------
# Command


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stack",
        help="print the stack of every thread of a process or a core file",
        description="Print each thread's backtrace, unwound with SFrame (generated from "
        ".eh_frame for modules without .sframe), like eu-stack.",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("pid", nargs="?", type=int, help="process to attach to (ptrace)")
    target.add_argument("--core", metavar="CORE", help="core file to read instead of a process")
    parser.add_argument("--exe", metavar="EXE", help="the core's executable, if it moved")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--max-frames", type=int, default=DEFAULT_MAX_FRAMES, metavar="N",
        help=f"at most N frames per thread (default {DEFAULT_MAX_FRAMES})",
    )
    parser.add_argument(
        "--no-generate", action="store_true",
        help="do not generate SFrame from .eh_frame for modules without .sframe",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.exe and not args.core:
        raise UnwindError("--exe needs --core")
    if args.max_frames < 1:
        raise UnwindError(f"--max-frames must be at least 1, not {args.max_frames}")
    generate = not args.no_generate
    if args.core:
        report = stack_of_core(args.core, args.exe, max_frames=args.max_frames, generate=generate)
    else:
        report = stack_of_process(args.pid, max_frames=args.max_frames, generate=generate)
    if args.json:
        json.dump(report_json(report), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        write_text(report, sys.stdout)
    return 0
