"""Kernel frames named from the kernel's symbol table (kallsyms), as perf names them.

A sample's kernel frames are its recorded callchain's (the kernel walks its own stack); they
are named from a ``kallsyms`` file of the kernel that ran: the copy ``perf record`` kept in
its build-ID cache (``DEBUG_DIR/[kernel.kallsyms]/BUILD-ID/kallsyms``), else this machine's
``/proc/kallsyms`` when its kernel's build ID (``/sys/kernel/notes``) is the recorded one.
Without either, kernel frames stay unnamed.

perf's rules (util/symbol.c __dso__load_kallsyms): text symbols only (types ``t``, ``T``,
``w``, ``W``; ``W`` weak, upper case global, else local: kallsyms2elf_binding), each empty
at first, in file order; then perf's fixups (:class:`pysframe.perf.symbols.SymbolSet`): an
empty symbol ends where the next one starts, or on the page after it where the kernel gives
way to a module or a module to the kernel (symbols__fixup_end), and of the symbols of one
address the one choose_best_symbol prefers is kept (symbols__fixup_duplicate) -- the last
one listed, the only one the first fixup left non-empty.  A module's symbols (``[name]``
after them) belong to the module's map, named ``[name]``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, overload

import numpy as np

from ..dataclass import dataclass
from ..elf.layout import NT_GNU_BUILD_ID
from ..elf.reader import iter_notes
from ..errors import InputError, SFrameError
from ..input import map_up_to, open_input, read_proc
from ..names import decode_name
from .profile import KERNEL_MODULE
from .symtab import STB_GLOBAL, STB_LOCAL, STB_WEAK, SymbolSet

if TYPE_CHECKING:
    import mmap

    import numpy.typing as npt

#: perf's context markers in a callchain (include/uapi/linux/perf_event.h): entries at or
#: above PERF_CONTEXT_MAX are markers, not addresses.
PERF_CONTEXT_MAX = (1 << 64) - 4095
PERF_CONTEXT_KERNEL = (1 << 64) - 128
PERF_CONTEXT_USER = (1 << 64) - 512
#: kallsyms files are a few MB; more than this is not read.
MAX_KALLSYMS = 64 << 20
#: The most of ``/sys/kernel/notes`` (the running kernel's ELF notes) read.
MAX_NOTES = 1 << 16


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class KernelSymbols:
    """Kernel text symbols sorted by address: ``names[i]`` covers ``[starts[i], starts[i+1])``
    (the last one, ``ends[-1]``), in module ``modules[i]`` (``[kernel.kallsyms]`` or
    ``[name]``)."""

    starts: npt.NDArray[np.uint64]
    ends: npt.NDArray[np.uint64]
    names: Sequence[str]
    modules: Sequence[str]

    def find_many(self, addresses: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """The index of the symbol holding each address (-1: none)."""
        at = np.searchsorted(self.starts, addresses, side="right").astype(np.int64) - 1
        safe = np.maximum(at, 0)
        inside = (at >= 0) & (addresses < self.ends[safe]) if len(self.starts) else at < -1
        return np.where(inside, at, -1)

    def __len__(self) -> int:
        return len(self.names)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Lines:
    """The text-symbol lines of a kallsyms file, in file order: address, type letter, name,
    and the module named after it (by line number; none for the kernel's own)."""

    addresses: npt.NDArray[np.uint64]
    kinds: bytes
    names: list[str]
    modules: dict[int, str]
    #: Where each name is in the text: its first byte and the byte after its last.
    name_starts: npt.NDArray[np.int64]
    name_ends: npt.NDArray[np.int64]


def _module_name(rest: str) -> str:
    """The module named after a symbol (``\t[MODULE]``), or "" for the kernel's own."""
    rest = rest.strip()
    return rest[1:-1] if rest[:1] == "[" and rest[-1:] == "]" else ""


#: hex digit values by byte (16: not a hex digit).
_HEX_VALUE = np.full(256, 16, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16, dtype=np.uint8)
_TEXT_TYPES = np.zeros(256, dtype=bool)
_TEXT_TYPES[np.frombuffer(b"tTwW", np.uint8)] = True
#: A name ends at the first byte at or below the space (a tab precedes a module).
_BLANK = 0x20


def _lines(text: bytes) -> _Lines:
    """The text-symbol lines, found with numpy (``ADDRESS TYPE NAME [MODULE]``: 1 to 16 hex
    digits, a space, a type letter, a space, a name); a line of another shape is skipped."""
    data = np.frombuffer(text, dtype=np.uint8)
    line_ends = np.flatnonzero(data == ord("\n"))
    if len(data) and data[-1] != ord("\n"):
        line_ends = np.append(line_ends, len(data))
    line_starts = np.append(0, line_ends[:-1] + 1)[: len(line_ends)]
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
    line_ends, digits = line_ends[shaped], digits[shaped]
    name_starts = (line_starts + widths + 3)[shaped]
    # Two hex digits to a byte, the bytes read as one big-endian word of 64 bits.
    addresses = ((digits[:, 0::2] << 4) | digits[:, 1::2]).view(">u8")[:, 0].astype(np.uint64)
    # The name ends at the first blank after it (a tab precedes a module).
    blanks = np.flatnonzero(data <= _BLANK)
    name_ends = np.append(blanks, len(data))[np.searchsorted(blanks, name_starts)]
    name_ends = np.minimum(name_ends, line_ends)
    decoded = text.decode("latin-1")  # one character per byte: the offsets hold
    names = [
        decoded[start:end] for start, end in zip(name_starts.tolist(), name_ends.tolist(),
                                                 strict=True)
    ]  # fmt: skip
    modules = {}
    for at in np.flatnonzero(name_ends < line_ends).tolist():
        if name := _module_name(decoded[name_ends[at] : line_ends[at]]):
            modules[at] = name
    if not text.isascii():  # names are UTF-8: decode them by the rule for names
        names = [decode_name(name.encode("latin-1")) for name in names]
        modules = {at: decode_name(name.encode("latin-1")) for at, name in modules.items()}
    return _Lines(addresses, padded[name_starts + 14].tobytes(), names, modules, name_starts,
                  name_ends)  # fmt: skip


def parse_kallsyms(text: bytes) -> KernelSymbols:
    """The text symbols of a kallsyms file (``ADDRESS TYPE NAME [MODULE]`` lines), as perf
    keeps them (see the module's docstring)."""
    return _parsed(text)[0]


def _parsed(
    text: bytes,
) -> tuple[KernelSymbols, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """:func:`parse_kallsyms` of ``text``, and where each of its symbols' names is in the text
    (first byte, and the byte after the last)."""
    lines = _lines(text)
    kinds = np.frombuffer(lines.kinds, dtype=np.uint8)
    bindings = np.where(
        kinds == ord("W"), STB_WEAK, np.where(kinds == ord("T"), STB_GLOBAL, STB_LOCAL)
    ).astype(np.uint8)
    in_module = np.zeros(len(lines.names), dtype=bool)
    in_module[list(lines.modules)] = True
    symbols = SymbolSet()
    symbols.add(
        lines.addresses, np.zeros(len(lines.names), dtype=np.uint64), bindings, lines.names,
        named=True, in_module=in_module,
    )  # fmt: skip
    symbols.fix(kallsyms=True)
    table = symbols.table()
    modules = [KERNEL_MODULE] * len(table.numbers)
    numbers = np.asarray(table.numbers, dtype=np.int64)
    for position in np.flatnonzero(in_module[numbers]).tolist():
        modules[position] = f"[{lines.modules[int(numbers[position])]}]"
    kept = KernelSymbols(table.starts, table.ends, table.names, modules)
    return kept, lines.name_starts[numbers], lines.name_ends[numbers]


def running_kernel_build_id() -> bytes | None:
    """The build ID of the running kernel (its NT_GNU_BUILD_ID note), or None."""
    try:
        data = read_proc("/sys/kernel/notes", MAX_NOTES)
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
        base = os.path.join(os.path.expanduser(debug_dir), KERNEL_MODULE)
        candidates.append(os.path.join(base, build_id.hex(), "kallsyms"))
    if build_id is None or running_kernel_build_id() in (None, build_id):
        candidates.append("/proc/kallsyms")
    for candidate in candidates:
        try:
            text = _read_text(candidate)
        except InputError:
            continue
        symbols = _parsed_kept(text)
        if len(symbols) and int(symbols.starts[-1]) != 0:  # zeroed addresses: no permission
            return symbols
    return None


#: The code that makes KernelSymbols of a kallsyms text (a kept table names its digest).
_KALLSYMS_CODE = ("perf/kernel.py", "perf/symtab.py", "perf/profile.py", "names.py")
#: The cache's words: little-endian, whatever the machine.
_U64 = np.dtype("<u8")
_U32 = np.dtype("<u4")
_I32 = np.dtype("<i4")


def _parsed_kept(text: bytes | mmap.mmap) -> KernelSymbols:
    """:func:`parse_kallsyms` of ``text``, kept in the cache (:mod:`pysframe.sources.cache`)
    under the SHA-256 of the text and the code's digest: the same kallsyms is parsed once
    (a table with zeroed addresses is not kept)."""
    from ..sources.cache import cache_directory, cached_tables, code_digest, keep_tables

    if cache_directory() is None:
        return parse_kallsyms(bytes(text))
    key = hashlib.sha256(text).hexdigest()
    binding = {"code": code_digest(*_KALLSYMS_CODE), "text": key}
    parts = cached_tables(key, "kallsyms", binding)
    if parts is not None:
        try:
            return _from_parts(parts, text)
        except (ValueError, RecursionError):
            pass  # written by this code and checked: not expected; parsed again
    symbols, name_starts, name_ends = _parsed(bytes(text))
    # the kept table says where names are in 32 bits: a text of 4 GiB or more is not kept
    if len(symbols) and int(symbols.starts[-1]) != 0 and len(text) <= 0xFFFFFFFF:
        keep_tables(key, "kallsyms", binding, _parts(symbols, name_starts, name_ends))
    return symbols


class _Named(Sequence[str]):
    """The names of a kept table, read from the kallsyms text when asked for (a report names
    a few of a kernel's hundred thousand symbols): ``text[starts[i]:ends[i]]``, decoded by
    the rule for names, as :func:`parse_kallsyms` decodes them (the text is the one the
    table was made from: its digest names the table)."""

    __slots__ = ("_ends", "_starts", "_text")

    def __init__(
        self, text: bytes | mmap.mmap, starts: npt.NDArray[np.uint32],
        ends: npt.NDArray[np.uint32],
    ) -> None:  # fmt: skip
        self._text, self._starts, self._ends = text, starts, ends

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[at] for at in range(*index.indices(len(self)))]
        return decode_name(self._text[int(self._starts[index]) : int(self._ends[index])])


class _Chosen(Sequence[str]):
    """``choices[which[i]]``: a kept table's modules (a few names, one for each symbol)."""

    __slots__ = ("_choices", "_which")

    def __init__(self, choices: list[str], which: npt.NDArray[np.int32]) -> None:
        self._choices, self._which = choices, which

    def __len__(self) -> int:
        return len(self._which)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._choices[at] for at in self._which[index].tolist()]
        return self._choices[int(self._which[index])]


def _parts(
    symbols: KernelSymbols, name_starts: npt.NDArray[np.int64], name_ends: npt.NDArray[np.int64]
) -> list[bytes]:
    """The table as bytes: starts, ends, each symbol's module as an index into the module
    names, where each name is in the kallsyms text (first byte and the byte after its last:
    the names are read from the text, which the table is kept for) and the module names (a
    JSON list)."""
    shown = list(dict.fromkeys(symbols.modules))
    index = {name: at for at, name in enumerate(shown)}
    return [
        symbols.starts.astype(_U64).tobytes(),
        symbols.ends.astype(_U64).tobytes(),
        np.array([index[name] for name in symbols.modules], dtype=_I32).tobytes(),
        name_starts.astype(_U32).tobytes(),
        name_ends.astype(_U32).tobytes(),
        json.dumps(shown).encode(),
    ]


def _from_parts(parts: Sequence[bytes | memoryview], text: bytes | mmap.mmap) -> KernelSymbols:
    """The table :func:`_parts` gave for ``text``, checked whole (each name is read from the
    text when first asked for); ValueError when the parts make none.  The table keeps views
    of the parts and the text: no copy of a kernel's megabytes of names is made."""
    if len(parts) != 6 or any(len(parts[at]) % 8 for at in (0, 1)) or any(
        len(parts[at]) % 4 for at in (2, 3, 4)
    ):
        raise ValueError("not the parts of a kallsyms table")
    starts, ends = np.frombuffer(parts[0], _U64), np.frombuffer(parts[1], _U64)
    which = np.frombuffer(parts[2], _I32)
    name_starts, name_ends = np.frombuffer(parts[3], _U32), np.frombuffer(parts[4], _U32)
    shown = json.loads(bytes(parts[5]))
    count = len(starts)
    if (
        len(ends) != count or len(which) != count or len(name_starts) != count
        or len(name_ends) != count
        or not isinstance(shown, list) or not all(isinstance(name, str) for name in shown)
        or (count and not 0 <= int(which.min()) <= int(which.max()) < len(shown))
        or bool((name_starts > name_ends).any())
        or (count and int(name_ends.max()) > len(text))
    ):  # fmt: skip
        raise ValueError("not the parts of a kallsyms table")
    # The starts aligned (a copy where the part is not): numpy's binary search copies an
    # unaligned table at each search.
    return KernelSymbols(
        np.require(starts, requirements="A"), ends.astype(np.uint64, copy=False),
        _Named(text, name_starts, name_ends), _Chosen(shown, which),
    )  # fmt: skip


def _read_text(path: str) -> bytes | mmap.mmap:
    """A kallsyms file: perf's copy mapped (perf writes each copy whole, a new file linked
    to its name: util/copyfile.c copyfile_mode_ns), ``/proc/kallsyms``, which is no regular
    file, read with a bound."""
    if path.startswith("/proc/"):
        try:
            with open(path, "rb") as stream:
                return stream.read(MAX_KALLSYMS)
        except OSError as error:
            raise InputError(error.strerror or str(error), path=path) from None
    with open_input(path) as stream:
        return map_up_to(stream, MAX_KALLSYMS)


__all__ = [
    "PERF_CONTEXT_KERNEL",
    "PERF_CONTEXT_MAX",
    "PERF_CONTEXT_USER",
    "KernelSymbols",
    "kernel_symbols",
    "parse_kallsyms",
    "running_kernel_build_id",
]
