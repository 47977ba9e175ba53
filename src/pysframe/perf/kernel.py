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


class KernelSymbols:
    """Kernel text symbols sorted by address: symbol ``i`` covers ``[starts[i], ends[i])``
    (up to the next symbol's start), is named ``name(i)`` and lives in ``module(i)``
    (``[kernel.kallsyms]`` or ``[name]``).

    Names are read from the kallsyms text only for the symbols asked for: a profile names a
    few hundred of a kernel's 100k+ symbols.
    """

    def __init__(
        self,
        starts: npt.NDArray[np.uint64],
        lines: list[list[tuple[str, str, str]]] | None = None,
        *,
        text: bytes = b"",
        members: npt.NDArray[np.int64] | None = None,
        member_starts: npt.NDArray[np.int64] | None = None,
        name_spans: npt.NDArray[np.int64] | None = None,
    ) -> None:
        self.starts = starts
        self.ends = np.append(starts[1:], np.uint64((1 << 64) - 1)) if len(starts) else starts
        self._lines = lines  # the reference path's parsed aliases per symbol
        self._text = text
        self._members = members  # line numbers of each symbol's aliases, grouped
        self._member_starts = member_starts  # where symbol i's aliases begin in _members
        self._name_spans = name_spans  # per line: name start, name end, line end
        self._picked: dict[int, tuple[str, str]] = {}

    def find_many(self, addresses: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """The index of the symbol holding each address (-1: none)."""
        at = np.searchsorted(self.starts, addresses, side="right").astype(np.int64) - 1
        safe = np.maximum(at, 0)
        inside = (at >= 0) & (addresses < self.ends[safe]) if len(self.starts) else at < -1
        return np.where(inside, at, -1)

    def name(self, index: int) -> str:
        """The name perf gives symbol ``index``."""
        return self._pick(index)[0]

    def module(self, index: int) -> str:
        """The map symbol ``index`` belongs to: ``[kernel.kallsyms]`` or ``[MODULE]``."""
        return self._pick(index)[1]

    def _pick(self, index: int) -> tuple[str, str]:
        found = self._picked.get(index)
        if found is None:
            best: tuple[str, str, str] | None = None
            for candidate in self._aliases(index):
                if best is None or _better((candidate[0], candidate[1]), (best[0], best[1])):
                    best = candidate
            assert best is not None
            module = f"[{best[2]}]" if best[2] else KERNEL_MODULE
            found = self._picked[index] = (best[0], module)
        return found

    def _aliases(self, index: int) -> list[tuple[str, str, str]]:
        """(name, type letter, module) of each kallsyms line at symbol ``index``'s address,
        in the file's order."""
        if self._lines is not None:
            return self._lines[index]
        assert self._members is not None and self._member_starts is not None
        assert self._name_spans is not None
        out = []
        begin, stop = int(self._member_starts[index]), int(self._member_starts[index + 1])
        for line in self._members[begin:stop].tolist():
            name_start, name_end, line_end = self._name_spans[line].tolist()
            name = self._text[name_start:name_end].decode("utf-8", "replace")
            kind = chr(self._text[name_start - 2])
            out.append((name, kind, _module_name(self._text[name_end:line_end])))
        return out

    def __len__(self) -> int:
        return len(self.starts)


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


def _module_name(rest: bytes) -> str:
    """The module named after a symbol (``\t[MODULE]``), or "" for the kernel's own."""
    rest = rest.strip()
    return rest[1:-1].decode("utf-8", "replace") if rest[:1] == b"[" and rest[-1:] == b"]" else ""


#: A kallsyms line of a text symbol: address, type, name, then the module in brackets.
_TEXT_SYMBOL = re.compile(
    rb"^([0-9a-fA-F]{1,16}) ([tTwW]) ([^\x00-\x20\[][^\x00-\x20]*)([^\n]*)$", re.MULTILINE
)


def parse_kallsyms_reference(text: bytes) -> KernelSymbols:
    """The text symbols of a kallsyms file, one line at a time (the reference that
    :func:`parse_kallsyms` is held equal to)."""
    by_address: dict[int, list[tuple[str, str, str]]] = {}
    for address, kind, name, rest in _TEXT_SYMBOL.findall(text):
        by_address.setdefault(int(address, 16), []).append(
            (name.decode("utf-8", "replace"), kind.decode(), _module_name(rest))
        )
    starts = np.array(sorted(by_address), dtype=np.uint64)
    return KernelSymbols(starts, [by_address[int(start)] for start in starts.tolist()])


#: hex digit values by byte (16: not a hex digit).
_HEX_VALUE = np.full(256, 16, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16, dtype=np.uint8)
_TEXT_TYPES = np.zeros(256, dtype=bool)
_TEXT_TYPES[np.frombuffer(b"tTwW", np.uint8)] = True
#: A name ends at the first byte at or below the space (a tab precedes a module).
_BLANK = 0x20


def parse_kallsyms(text: bytes) -> KernelSymbols:
    """The text symbols of a kallsyms file (``ADDRESS TYPE NAME [MODULE]`` lines), read
    with numpy; a line of another shape is skipped, as the reference does."""
    data = np.frombuffer(text, dtype=np.uint8)
    line_ends = np.flatnonzero(data == ord("\n"))
    if len(data) and data[-1] != ord("\n"):
        line_ends = np.append(line_ends, len(data))
    line_starts = np.append(0, line_ends[:-1] + 1)[: len(line_ends)]
    # ADDRESS (1 to 16 hex digits), a space, a type letter, a space, a name
    spaces = np.flatnonzero(data == ord(" "))
    first_space = np.append(spaces, len(data))[np.searchsorted(spaces, line_starts)]
    widths = first_space - line_starts
    shaped = (widths >= 1) & (widths <= 16) & (line_ends - first_space >= 4)
    line_starts, line_ends, widths = line_starts[shaped], line_ends[shaped], widths[shaped]
    # Sixteen digits ending at each address's last one; those before its first are zeros.
    padded = np.concatenate([np.zeros(16, np.uint8), data, np.zeros(4, np.uint8)])
    columns = np.arange(16)
    digits = _HEX_VALUE[padded[(line_starts + widths)[:, None] + columns]]
    digits[columns < 16 - widths[:, None]] = 0
    after = line_starts + widths + 16  # the space after the address, in padded
    shaped = (
        (digits < 16).all(axis=1)
        & _TEXT_TYPES[padded[after + 1]]
        & (padded[after + 2] == ord(" "))
        & (padded[after + 3] > _BLANK)
        & (padded[after + 3] != ord("["))
    )
    if not shaped.any():
        return KernelSymbols(np.zeros(0, dtype=np.uint64))
    line_ends, digits = line_ends[shaped], digits[shaped]
    name_starts = (line_starts + widths + 3)[shaped]
    # Two hex digits to a byte, the bytes read as one big-endian word of 64 bits.
    addresses = ((digits[:, 0::2] << 4) | digits[:, 1::2]).view(">u8")[:, 0].astype(np.uint64)
    # The name ends at the first blank after it (a tab precedes a module).
    blanks = np.flatnonzero(data <= _BLANK)
    name_ends = np.append(blanks, len(data))[np.searchsorted(blanks, name_starts)]
    name_ends = np.minimum(name_ends, line_ends)
    spans = np.stack([name_starts, name_ends, line_ends], axis=1).astype(np.int64)
    order = np.argsort(addresses, kind="stable")
    sorted_addresses = addresses[order]
    first = np.append(True, sorted_addresses[1:] != sorted_addresses[:-1])
    member_starts = np.append(np.flatnonzero(first), len(order)).astype(np.int64)
    return KernelSymbols(
        sorted_addresses[first],
        text=text,
        members=order.astype(np.int64),
        member_starts=member_starts,
        name_spans=spans,
    )


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


def _read_text(path: str) -> bytes:
    """A kallsyms file (``/proc/kallsyms`` is no regular file: read with a bound)."""
    if path.startswith("/proc/"):
        try:
            with open(path, "rb") as stream:
                return stream.read(MAX_KALLSYMS)
        except OSError as error:
            raise InputError(error.strerror or str(error), path=path) from None
    with open_input(path) as stream:
        return stream.read(MAX_KALLSYMS)


__all__ = [
    "PERF_CONTEXT_KERNEL",
    "PERF_CONTEXT_MAX",
    "PERF_CONTEXT_USER",
    "KernelSymbols",
    "kernel_symbols",
    "parse_kallsyms",
    "parse_kallsyms_reference",
    "running_kernel_build_id",
]
