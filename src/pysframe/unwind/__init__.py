"""Stack unwinding: one unwinder, the address spaces it walks through, and the adapters that
feed it.

* :mod:`~pysframe.unwind.core`: the unwinder, sans-IO: one set of rules (ABIs, FLEX, signal
  frames, RA undefined, the frame-pointer fallback, stops) applied one frame at a time
  (``Unwinder.step``), and whole walks (``Unwinder.unwind``);
* :mod:`~pysframe.unwind.batch`: many stacks walked together (a recording's samples): the
  plain SFrame step vectorized, every other frame stepped by the unwinder;
* :mod:`~pysframe.unwind.modules`: the address space of a process: its modules, their load
  bias, their SFrame (chosen by the trust policy) and symbols, and the ELF files behind them;
* :mod:`~pysframe.unwind.mappings`, :mod:`~pysframe.unwind.vdso`: what a process maps
  (``/proc/PID/maps``, the auxiliary vector), and the vDSO's image;
* :mod:`~pysframe.unwind.symbolize`, :mod:`~pysframe.unwind.demangle`: function names, from
  every place gdb takes them, and C++ and Rust demangling;
* :mod:`~pysframe.unwind.ptrace`, :mod:`~pysframe.unwind.corefile`,
  :mod:`~pysframe.unwind.loadmap`, :mod:`~pysframe.unwind.rsp`,
  :mod:`~pysframe.unwind.remote`: live processes, core files, where modules sit in a core
  without ``NT_FILE``, and programs under a GDB remote stub;
* :mod:`~pysframe.unwind.stack`: whole-process backtraces, their text and JSON.

* :mod:`~pysframe.unwind.limits`: the default limits of walks and remote exchanges.

The names other packages use are exported here, each imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    **dict.fromkeys(("DEFAULT_MAX_FRAMES", "EXCHANGE_TIMEOUT", "TIME_LIMIT"), "limits"),
    **dict.fromkeys(
        ("S390X_FPR_DWARF", "Backtrace", "Frame", "FrameSource", "ModuleInfo", "ReadMemory",
         "Registers", "StopKind", "Unwinder"),
        "core",
    ),
    **dict.fromkeys(
        ("STOPS", "BatchMemory", "BatchSpaces", "BatchStart", "BatchUnwinder", "Walks",
         "frames_not_set_up", "joined", "no_walks"),
        "batch",
    ),
    **dict.fromkeys(
        ("AddressSpace", "ElfFacts", "ElfFiles", "Module", "load_bias"), "modules"
    ),
    **dict.fromkeys(("ModuleSymbols", "SymbolOptions"), "symbolize"),
    **dict.fromkeys(("VDSO_NAME", "read_vdso_image"), "vdso"),
    **dict.fromkeys(("Mapping", "process_vdso_address"), "mappings"),
}  # fmt: skip

if TYPE_CHECKING:
    from .batch import (
        STOPS,
        BatchMemory,
        BatchSpaces,
        BatchStart,
        BatchUnwinder,
        Walks,
        frames_not_set_up,
        joined,
        no_walks,
    )
    from .core import (
        S390X_FPR_DWARF,
        Backtrace,
        Frame,
        FrameSource,
        ModuleInfo,
        ReadMemory,
        Registers,
        StopKind,
        Unwinder,
    )
    from .limits import DEFAULT_MAX_FRAMES, EXCHANGE_TIMEOUT, TIME_LIMIT
    from .mappings import Mapping, process_vdso_address
    from .modules import AddressSpace, ElfFacts, ElfFiles, Module, load_bias
    from .symbolize import ModuleSymbols, SymbolOptions
    from .vdso import VDSO_NAME, read_vdso_image


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_MAX_FRAMES",
    "EXCHANGE_TIMEOUT",
    "S390X_FPR_DWARF",
    "STOPS",
    "TIME_LIMIT",
    "VDSO_NAME",
    "AddressSpace",
    "Backtrace",
    "BatchMemory",
    "BatchSpaces",
    "BatchStart",
    "BatchUnwinder",
    "ElfFacts",
    "ElfFiles",
    "Frame",
    "FrameSource",
    "Mapping",
    "Module",
    "ModuleInfo",
    "ModuleSymbols",
    "ReadMemory",
    "Registers",
    "StopKind",
    "SymbolOptions",
    "Unwinder",
    "Walks",
    "frames_not_set_up",
    "joined",
    "load_bias",
    "no_walks",
    "process_vdso_address",
    "read_vdso_image",
]
