"""Kernel frames named from the kernel's symbol table (kallsyms), as perf names them.

A sample's kernel frames are its recorded callchain's (the kernel walks its own stack); they
are named from a ``kallsyms`` file of the kernel that ran: the copy ``perf record`` kept in
its build-ID cache (``DEBUG_DIR/[kernel.kallsyms]/BUILD-ID/kallsyms``), else this machine's
``/proc/kallsyms`` when its kernel's build ID (``/sys/kernel/notes``) is the recorded one.
Without either, kernel frames stay unnamed.

perf's rules (util/symbol.c): text symbols only (types ``t``, ``T``, ``w``, ``W``); a
symbol's end is the next symbol's start (symbols__fixup_end); among the symbols of one
address the one choose_best_symbol prefers is kept (symbols__fixup_duplicate): a non-weak one
over a weak one, a global one over a local one, fewer leading underscores, then the longer
name, and never a ``SyS`` syscall alias (arch__choose_best_symbol).  A module's symbols
(``[name]`` after them) belong to the module's map, named ``[name]``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..elf.image import iter_notes
from ..elf.layout import NT_GNU_BUILD_ID
from ..errors import InputError, SFrameError
from ..input import open_input, read_input
from .profile import KERNEL_MODULE

if TYPE_CHECKING:
    import numpy.typing as npt

#: perf's context markers in a callchain (include/uapi/linux/perf_event.h): entries at or
#: above PERF_CONTEXT_MAX are markers, not addresses.
PERF_CONTEXT_MAX = (1 << 64) - 4095
PERF_CONTEXT_KERNEL = (1 << 64) - 128
PERF_CONTEXT_USER = (1 << 64) - 512
#: kallsyms files are a few MB; more than this is not read.
MAX_KALLSYMS = 64 << 20


@dataclass(frozen=True, slots=True)
class KernelSymbols:
    """Kernel text symbols sorted by address: ``names[i]`` covers ``[starts[i], starts[i+1])``
    (the last one, ``ends[-1]``), in module ``modules[i]`` (``[kernel.kallsyms]`` or
    ``[name]``)."""

    starts: npt.NDArray[np.uint64]
    ends: npt.NDArray[np.uint64]
    names: list[str]
    modules: list[str]

    def find_many(self, addresses: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """The index of the symbol holding each address (-1: none)."""
        at = np.searchsorted(self.starts, addresses, side="right").astype(np.int64) - 1
        safe = np.maximum(at, 0)
        inside = (at >= 0) & (addresses < self.ends[safe]) if len(self.starts) else at < -1
        return np.where(inside, at, -1)

    def __len__(self) -> int:
        return len(self.names)


def _underscores(name: str) -> int:
    return len(name) - len(name.lstrip("_"))


def _better(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Whether perf's choose_best_symbol keeps ``a`` (name, type letter) over ``b`` (all
    kallsyms symbols of one address have the same, non-zero, extent)."""
    name_a, kind_a = a
    name_b, kind_b = b
    weak_a, weak_b = kind_a in "wW", kind_b in "wW"
    if weak_a != weak_b:
        return weak_b
    global_a, global_b = kind_a in "TW", kind_b in "TW"
    if global_a != global_b:
        return global_a
    if _underscores(name_a) != _underscores(name_b):
        return _underscores(name_a) < _underscores(name_b)
    if len(name_a) != len(name_b):
        return len(name_a) > len(name_b)
    return not name_a.startswith(("SyS", "compat_SyS"))


#: A kallsyms line of a text symbol: address, type, name, then the module in brackets.
_TEXT_SYMBOL = re.compile(r"^([0-9a-fA-F]+) ([tTwW]) (\S+)(?:\s+\[(\S+)\])?\s*$", re.MULTILINE)


def parse_kallsyms(text: str) -> KernelSymbols:
    """The text symbols of a kallsyms file (``ADDRESS TYPE NAME [MODULE]`` lines)."""
    found = _TEXT_SYMBOL.findall(text)
    if not found:
        empty = np.zeros(0, dtype=np.uint64)
        return KernelSymbols(empty, empty, [], [])
    addresses = np.array([int(entry[0], 16) for entry in found], dtype=np.uint64)
    order = np.argsort(addresses, kind="stable")
    addresses = addresses[order]
    first = np.append(True, addresses[1:] != addresses[:-1])
    starts = addresses[first]
    groups = np.flatnonzero(first)
    picked = order[groups].tolist()
    # Aliases of one address (a few per cent): perf's pick among them.
    sizes = np.diff(np.append(groups, len(addresses)))
    for group in np.flatnonzero(sizes > 1).tolist():
        begin = int(groups[group])
        for position in order[begin + 1 : begin + int(sizes[group])].tolist():
            best = found[picked[group]]
            if _better((found[position][2], found[position][1]), (best[2], best[1])):
                picked[group] = position
    names = [found[i][2] for i in picked]
    modules = [f"[{found[i][3]}]" if found[i][3] else KERNEL_MODULE for i in picked]
    ends = np.append(starts[1:], np.uint64((1 << 64) - 1))
    return KernelSymbols(starts, ends, names, modules)


def running_kernel_build_id() -> bytes | None:
    """The build ID of the running kernel (its NT_GNU_BUILD_ID note), or None."""
    try:
        data = read_input("/sys/kernel/notes")
    except InputError:
        return None
    try:
        for name, kind, descriptor in iter_notes(data, big_endian=sys.byteorder == "big"):
            if name == b"GNU" and kind == NT_GNU_BUILD_ID:
                return descriptor
    except SFrameError:  # a notes file that does not parse: no build ID
        return None
    return None


def kernel_symbols(build_id: bytes | None, debug_dir: str | None) -> KernelSymbols | None:
    """The kallsyms of the kernel with ``build_id``: perf's cached copy, else this machine's
    when it is that kernel (any kernel when the recording names none); None without one."""
    candidates: list[str] = []
    if build_id and debug_dir:
        base = Path(debug_dir).expanduser() / KERNEL_MODULE
        candidates.append(str(base / build_id.hex() / "kallsyms"))
    if build_id is None or running_kernel_build_id() in (None, build_id):
        candidates.append("/proc/kallsyms")
    for candidate in candidates:
        try:
            text = _read_text(candidate)
        except InputError:
            continue
        symbols = parse_kallsyms(text)
        if len(symbols) and int(symbols.starts[-1]) != 0:  # zeroed addresses: no permission
            return symbols
    return None


def _read_text(path: str) -> str:
    """A kallsyms file (``/proc/kallsyms`` is no regular file: read with a bound)."""
    if path.startswith("/proc/"):
        try:
            with open(path, "rb") as stream:
                return stream.read(MAX_KALLSYMS).decode("utf-8", "replace")
        except OSError as error:
            raise InputError(error.strerror or str(error), path=path) from None
    with open_input(path) as stream:
        return stream.read(MAX_KALLSYMS).decode("utf-8", "replace")


__all__ = [
    "PERF_CONTEXT_KERNEL",
    "PERF_CONTEXT_MAX",
    "PERF_CONTEXT_USER",
    "KernelSymbols",
    "kernel_symbols",
    "parse_kallsyms",
    "running_kernel_build_id",
]
