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

import errno
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..dataclass import dataclass
from ..elf.layout import AT_ENTRY
from ..errors import InputError, UnwindError
from ..sources.trust import Policy
from .core import Backtrace, Frame, FrameSource, StopKind, Unwinder
from .limits import DEFAULT_MAX_FRAMES, TIME_LIMIT
from .mappings import AT_SYSINFO_EHDR, process_mappings, process_vdso_address
from .modules import AddressSpace, ElfFiles, load_modules, prepare_sframe
from .ptrace import ThreadState, attach
from .symbolize import SymbolOptions

if TYPE_CHECKING:  # core files, remote stubs and gdb's layout import theirs when used
    from ..elf.dwarf_lines import SourceFrame
    from .corefile import CoreFile
    from .loadmap import ElfLayout
    from .remote import RemoteTarget

_DEFAULT_SYMBOLS = SymbolOptions()


@dataclass(frozen=True, slots=True)
class ThreadTrace:
    tid: int
    backtrace: Backtrace


@dataclass(frozen=True, slots=True)
class StackReport:
    pid: int
    kind: str  # "process", "core" or "remote"
    threads: tuple[ThreadTrace, ...]
    modules: AddressSpace
    #: Lines to warn with, each ``FILE: why`` (an executable that is not the core's).
    warnings: tuple[str, ...] = ()


def stack_of_process(
    pid: int,
    *,
    max_frames: int = DEFAULT_MAX_FRAMES,
    policy: Policy = Policy.AUTO,
    symbols: SymbolOptions = _DEFAULT_SYMBOLS,
) -> StackReport:
    """Stop every thread of ``pid``, unwind them all, detach.  ``symbols``: how frames are
    named (debug directories, demangling)."""
    try:
        mappings = process_mappings(pid)
    except InputError as error:
        if not os.path.exists(f"/proc/{pid}"):
            raise UnwindError(f"no such process: {pid}") from None
        if error.errno in (errno.EACCES, errno.EPERM):
            raise UnwindError(f"no permission to read the mappings of process {pid}") from None
        raise UnwindError(
            f"cannot read the mappings of process {pid}: {error.message}"
        ) from None
    # Generating SFrame for the modules happens before the threads are stopped.
    files = ElfFiles()
    modules = load_modules(mappings, policy=policy, symbols=symbols, pid=pid, files=files)
    prepare_sframe(modules)
    with attach(pid) as process:
        now = process_mappings(pid)
        vdso = process_vdso_address(pid)
        if now != mappings or vdso is not None:
            # The files were read above: this reads the vDSO and compares build IDs.
            modules = load_modules(
                now, process.read_memory, policy=policy, vdso=vdso, symbols=symbols, pid=pid,
                files=files,
            )  # fmt: skip
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
    policy: Policy = Policy.AUTO,
    symbols: SymbolOptions = _DEFAULT_SYMBOLS,
) -> StackReport:
    """Unwind every thread recorded in a core file; ``sysroot`` holds the files of the machine
    that dumped it (gdb's ``set sysroot``).  ``exe`` must exist; when its build ID is not the
    one the core holds for its executable, the report warns, and frames in it are marked."""
    from .corefile import CoreFile

    if exe is not None and not os.path.isfile(exe):
        why = "not a file" if os.path.exists(exe) else "No such file or directory"
        raise UnwindError(why, path=exe)
    with CoreFile(path, exe, sysroot) as core:
        modules = load_modules(
            core.mappings, core.read_memory, policy=policy, vdso=core.vdso_address,
            symbols=symbols,
        )
        warnings: tuple[str, ...] = tuple(core.warnings)
        mismatch = _executable_mismatch(core, exe)
        if exe is not None and mismatch is not None:
            modules = AddressSpace(
                m.with_problem(mismatch) if m.path == exe else m for m in modules.modules
            )
            warnings += (f"{exe}: {mismatch}",)
        unwinder = Unwinder(core.abi, modules, max_frames=max_frames, va_bits=core.va_bits)
        threads = tuple(
            ThreadTrace(state.tid, unwinder.unwind(state.registers, core.read_memory))
            for state in core.threads
        )
        return StackReport(core.pid, "core", threads, modules, warnings)


def _executable_mismatch(core: CoreFile, exe: str | None) -> str | None:
    """Why ``exe`` is not the executable the core was dumped from: its build ID (the
    NT_GNU_BUILD_ID note of the file) is not the one the core holds in the first page of the
    executable's mapping.  None when they agree or either has none to compare."""
    from .loadmap import ElfLayout, build_id_in_memory

    if exe is None:
        return None
    starts = [m.start for m in core.mappings if m.path == exe and m.file_offset == 0]
    if not starts:
        return None
    dumped = build_id_in_memory(core.read_dumped, min(starts))
    own = ElfLayout.read(exe).build_id
    if dumped is None or own is None or dumped == own:
        return None
    return (
        f"build ID {own.hex()} is not the one in {core.path} ({dumped.hex()}): the core was "
        "dumped from another build of the program"
    )


def stack_of_remote(
    address: str,
    exe: str | None = None,
    *,
    sysroot: str | None = None,
    resume: bool = False,
    max_frames: int = DEFAULT_MAX_FRAMES,
    policy: Policy = Policy.AUTO,
    symbols: SymbolOptions = _DEFAULT_SYMBOLS,
    time_limit: float | None = TIME_LIMIT,
) -> StackReport:
    """Unwind every thread of a program stopped under a GDB remote stub at ``HOST:PORT``
    (after letting it run to its next stop, with ``resume``), then detach.  ``exe``: the
    program's executable (default: the path the stub gives, under ``sysroot``).
    ``time_limit``: seconds the whole exchange with the stub may take (None: no limit;
    :mod:`pysframe.unwind.rsp`), counted again once a resumed program stops."""
    from .loadmap import (
        AddressSpace,
        place_executable,
        shared_object_mappings,
        va_bits_for,
        va_bits_from_pac_mask,
    )
    from .remote import RemoteTarget

    with RemoteTarget.connect(address, time_limit=time_limit) as target:
        if resume:
            target.resume()
        warnings: list[str] = []
        layout = _remote_executable(target, exe, sysroot, warnings)
        abi = layout.abi
        if abi is None:
            raise UnwindError("not an executable for a machine SFrame supports", path=layout.path)
        auxv = target.auxv(abi.big_endian)
        reported = None if AT_ENTRY in auxv else target.text_offset()
        space = AddressSpace(
            target.name, abi, target.read_memory, target.read_memory, auxv, None, reported
        )
        bias = place_executable(space, layout)
        mappings = layout.mappings(bias, space.page_size)
        mappings += shared_object_mappings(space, layout, bias, sysroot, warnings)
        modules = load_modules(
            mappings, target.read_memory, policy=policy, vdso=auxv.get(AT_SYSINFO_EHDR),
            symbols=symbols,
        )
        remote_threads = target.threads()
        states = [ThreadState(t.tid, target.registers(t, abi)) for t in remote_threads]
        mask = target.pac_mask(abi)
        va_bits = (va_bits_from_pac_mask(mask) if mask else None) or va_bits_for(
            [*(s.registers.sp + 1 for s in states), *(m.end for m in modules.modules)]
        )
        unwinder = Unwinder(abi, modules, max_frames=max_frames, va_bits=va_bits)
        threads = tuple(
            ThreadTrace(state.tid, unwinder.unwind(state.registers, target.read_memory))
            for state in states
        )
        pid = remote_threads[0].pid
    return StackReport(
        pid if pid is not None else threads[0].tid, "remote", threads, modules, tuple(warnings)
    )


def _remote_executable(
    target: RemoteTarget, exe: str | None, sysroot: str | None, warnings: list[str]
) -> ElfLayout:
    from .loadmap import ElfLayout, lookup_paths

    if exe is None:
        named = target.exec_file()
        if named is None:
            raise UnwindError(
                "the stub does not say which program it runs: name it with --exe",
                path=target.name,
            )
        found = lookup_paths(named, sysroot, warnings)
        exe = next((p for p in found if os.path.exists(p)), named)
    return ElfLayout.read(exe)


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


def report_lines(report: StackReport, *, lines: bool = False) -> Iterator[str]:
    """The report as eu-stack prints it, line by line (without line ends).  ``lines``: each
    frame is followed by the functions inlined at its PC (``inlined NAME at FILE:LINE``,
    innermost first) and its own source line (``at FILE:LINE``), from DWARF."""
    yield f"PID {report.pid} - {report.kind}"
    for thread in report.threads:
        yield f"TID {thread.tid}:"
        for frame, sources in _with_sources(report, thread, lines):
            yield format_frame(frame)
            for source in sources:
                where = f"at {source.file}:{source.line}" if source.file else "at ??"
                yield f"    inlined {source.function} {where}" if source.inlined else (
                    f"    {where}"
                )
        if thread.backtrace.stop is not StopKind.OUTERMOST:
            yield f"backtrace stopped: {thread.backtrace.reason}"


def report_lines_gdb(report: StackReport, *, demangle: bool = True) -> Iterator[str]:
    """The report as gdb's ``thread apply all bt`` prints it, without argument values: frames
    numbered with the inlined ones (``#N  0x... in NAME () at FILE:LINE``; a function inlined
    into the frame before it has no address), names from DWARF where it is, else the symbol
    (``#N  0x... in NAME () from MODULE``)."""
    for number, thread in enumerate(report.threads, 1):
        yield f"Thread {number} (LWP {thread.tid}):"
        index = 0
        for frame, sources in _with_sources(report, thread, True):
            if frame.signal_trampoline:
                yield f"#{index:<2} <signal handler called>"
                index += 1
                continue
            address = f"0x{frame.pc:016x} in "
            if not sources:
                name = frame.symbol or "??"
                where = f" from {frame.module}" if frame.module else ""
                yield f"#{index:<2} {address}{name} (){where}"
                index += 1
                continue
            for position, source in enumerate(sources):
                shown = address if position == 0 and not _at_line_start(report, frame) else ""
                name = _source_name(source, frame, demangle)
                where = f" at {source.file}:{source.line}" if source.file else ""
                yield f"#{index:<2} {shown}{name} (){where}"
                index += 1
        if thread.backtrace.stop is not StopKind.OUTERMOST:
            yield f"Backtrace stopped: {thread.backtrace.reason}"
        yield ""


def _source_name(source: SourceFrame, frame: Frame, demangle: bool) -> str:
    """The name gdb prints for a function DWARF describes: its linkage name demangled, without
    parameters and return type (the demangler's spelling: ``Box<long>``, where DWARF says
    ``Box<long int>``), else DWARF's qualified name; an assembler function's symbol."""
    from .demangle import bare_name
    from .demangle import demangle as demangle_name

    if source.assembler and not source.inlined and frame.symbol:
        return frame.symbol
    if source.mangled:
        if not demangle:
            return source.mangled
        text = demangle_name(source.mangled)
        # A linkage name that is no mangled name (a C function's assembler name, such as
        # glibc's __GI_ aliases) is what gdb prints, as it stands.
        return bare_name(text) if text != source.mangled else source.mangled
    return source.function or frame.symbol or "??"


def _lookup_pc(frame: Frame, previous: Frame | None) -> int:
    """The address the frame's code is looked up at: a caller's return address less one (it
    may be past the end of the call's line or function), as gdb's
    ``get_frame_address_in_block``; the PC itself in the newest frame and after a signal."""
    exact = previous is None or previous.signal_trampoline
    return frame.pc if exact else frame.pc - 1


def _with_sources(
    report: StackReport, thread: ThreadTrace, lines: bool
) -> Iterator[tuple[Frame, list[SourceFrame]]]:
    previous = None
    for frame in thread.backtrace.frames:
        sources: list[SourceFrame] = []
        if lines and not frame.signal_trampoline and not frame.problem:
            module = report.modules.module_at(frame.pc)
            symbols = None if module is None else module.symbols()
            if module is not None and symbols is not None:
                sources = symbols.source(_lookup_pc(frame, previous) - module.bias)
        yield frame, sources
        previous = frame


def _at_line_start(report: StackReport, frame: Frame) -> bool:
    """gdb leaves the address out of the newest frame when its PC starts a line."""
    if frame.index != 0:
        return False
    module = report.modules.module_at(frame.pc)
    symbols = None if module is None else module.symbols()
    if module is None or symbols is None:
        return False
    return symbols.starts_line(frame.pc - module.bias)


def module_warnings(report: StackReport) -> list[str]:
    """The report's warnings, then one line per module whose frames could not use its data
    (unreadable or hostile file, build-id mismatch...): its frames went on by the
    frame-pointer chain, marked."""
    used = {frame.module for thread in report.threads for frame in thread.backtrace.frames}
    lines = list(report.warnings)
    for module in report.modules.modules:
        if module.path not in used:
            continue
        problems = [module.reason, module.problem]
        symbols = module.symbols()
        if symbols is not None:
            # What reading its symbols met (debug files passed over, DWARF walks stopped).
            problems += symbols.problems
        for why in problems:
            line = why if why and why.startswith(f"{module.path}:") else f"{module.path}: {why}"
            if why and line not in lines:
                lines.append(line)
    return lines


def report_json(report: StackReport, *, lines: bool = False) -> dict[str, Any]:
    """The report as JSON; ``lines``: each frame has ``source``, the functions at its PC with
    their source lines, innermost inlined function first (empty without DWARF)."""
    def frame_json(frame: Frame, sources: list[SourceFrame]) -> dict[str, Any]:
        out = _frame_json(frame)
        if lines:
            out["source"] = [
                {"function": s.function, "linkage_name": s.mangled, "file": s.file,
                 "line": s.line, "inlined": s.inlined}
                for s in sources
            ]
        return out

    return {
        "pid": report.pid,
        "kind": report.kind,
        "threads": [
            {
                "tid": thread.tid,
                "stop": thread.backtrace.stop.value,
                "reason": thread.backtrace.reason,
                "frames": [
                    frame_json(frame, sources)
                    for frame, sources in _with_sources(report, thread, lines)
                ],
            }
            for thread in report.threads
        ],
        "modules": [
            {
                "path": module.path,
                "start": module.start,
                "end": module.end,
                "bias": module.bias,
                "origin": module.origin,
                "reason": module.reason,
                "problem": module.problem,
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
    "report_lines_gdb",
    "stack_of_core",
    "stack_of_process",
    "stack_of_remote",
]
