"""Symbol tables: their entries, the function symbols among them, and the symbol that names an
address, as gdb picks it.

A symbol table (``SHT_SYMTAB`` ``.symtab``, ``SHT_DYNSYM`` ``.dynsym``) is an array of gABI
``Elf64_Sym`` / ``Elf32_Sym`` entries.  It is read here, and only here, in one piece
(:func:`read_symbol_table`: a column per field, cut from the bytes without numpy, so that
``pysframe stack`` names a few PCs without importing it), and its names are decoded from the
linked string table only for the entries asked for (:func:`symbol_names`).  On top of it:

* :func:`read_function_symbols`: the defined, named function symbols (``STT_FUNC``,
  ``STT_GNU_IFUNC``), names without their version (``memcpy@@GLIBC_2.14`` is ``memcpy``), as
  gdb records them (``elf_symtab_read``);
* :func:`read_symbol_entries`: every entry as numpy arrays, for readers with rules of their
  own (perf's, :mod:`pysframe.perf.symbols`).

:class:`FunctionSymbols` merges tables (a file's ``.symtab`` and ``.dynsym``, a separate debug
file's ``.symtab``, MiniDebugInfo's) and answers "which function holds this address", for one
address or many at once, with the rules of gdb's ``lookup_minimal_symbol_by_pc_section``
(gdb/minsyms.c):

* symbols are sorted by address, then by name (``compare_minimal_symbols``); duplicates of the
  same name and address are one symbol (``compact_minimal_symbols``);
* of the symbols at the highest address not above the PC, the last one in that order with a
  non-zero size wins, except that a local symbol gives way to the global one just before it
  when they have the same size (``__libc_start_main`` over ``__libc_start_main_impl``: gdb's
  "prefer" ``mst_text`` over ``mst_file_text``); zero-sized symbols are kept aside
  (``best_zero_sized``) and used only when no sized symbol is found, or when the sized one
  ends before the PC.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import ElfError
from .layout import (
    SHT_DYNSYM,
    SHT_SYMTAB,
    STT_FUNC,
    STT_GNU_IFUNC,
    SYM_FIELDS,
    SYM_NAMES,
    table_columns,
)
from .reader import ElfReader, ElfSection

if TYPE_CHECKING:
    import numpy as np

STB_LOCAL = 0


@dataclass(frozen=True, slots=True)
class SymbolRecord:
    """One function symbol: link-time address, size (0: unknown), name, and whether it is
    global or weak (gdb's ``mst_text``) rather than local (``mst_file_text``)."""

    address: int
    size: int
    name: str
    is_global: bool = True


#: The names read from one string table may add up to this many times its size (plus 1 MiB):
#: names share bytes only where one is the tail of another (a linker's suffix merging), so more
#: means names laid over each other to multiply the table.
MAX_NAME_BYTES_FACTOR = 4


def check_name_bytes(strings: bytes, offsets: Sequence[int], *, section: str | None = None) -> None:
    """ElfError when the names at ``offsets`` of a string table add up to more than
    :data:`MAX_NAME_BYTES_FACTOR` times the table (plus 1 MiB): names laid over each other,
    each running to a far NUL or to the table's end.  Cheap when every name is short enough
    that no count of them could pass the bound; else each search stops once the names found
    so far would pass it, so that the work stays linear in the table however the names lie."""
    size = len(strings)
    limit = MAX_NAME_BYTES_FACTOR * size + (1 << 20)
    if len(offsets) * (size + 1) <= limit:
        return  # a few names: even each running the whole table would do
    if len(offsets) * (max(map(len, strings.split(b"\0"))) + 1) <= limit:
        return  # each name is at most the longest run between NULs
    total = 0
    for start in offsets:
        start = min(start, size)
        stop = min(size, start + limit - total + 1)
        end = strings.find(b"\0", start, stop)
        total += (end if end >= 0 else stop) - start
        if total > limit:
            raise ElfError(
                f"{len(offsets)} names of more than {limit} bytes in all from a {size}-byte "
                "string table: names laid over each other, not read",
                section=section,
            )


def symbol_names(
    strings: bytes,
    offsets: Sequence[int],
    *,
    section: str | None = None,
    versions: bool = False,
) -> list[str]:
    """The name at each offset of a string table, without its version (``@GLIBC_2.2.5``,
    ``@@GLIBC_2.14``), as gdb records it, unless ``versions`` (as stored, as perf keeps it).
    A name ends at its NUL or at the table's end (BFD ends a table without a final NUL there:
    ``bfd_elf_get_str_section``); empty past the table's end.  ElfError when they add up to
    too much (:func:`check_name_bytes`)."""
    check_name_bytes(strings, offsets, section=section)
    return _names_at(strings, offsets, versions)


def _names_at(strings: bytes, offsets: Iterable[int], versions: bool = False) -> list[str]:
    """:func:`symbol_names` once the names are known to be within the bound."""
    find, size = strings.find, len(strings)
    names = [
        strings[start : end if (end := find(b"\0", start)) >= 0 else size].decode(
            "utf-8", "replace"
        )
        for start in offsets
    ]
    return names if versions else [name.split("@", 1)[0] for name in names]


@dataclass(frozen=True, slots=True)
class SymbolTableColumns:
    """Every entry of one symbol table, in table order, a sequence of integers per gABI
    ``Elf64_Sym`` / ``Elf32_Sym`` field (named as :data:`~pysframe.elf.layout.SYM_NAMES`
    names them: ``name`` is ``st_name``...), and the string table its names are in."""

    path: str
    table: str
    columns: dict[str, Sequence[int]]
    strings: bytes

    def __len__(self) -> int:
        return len(self.columns["name"])


def read_symbol_table(image: ElfReader, table: str | ElfSection) -> SymbolTableColumns | None:
    """The entries of ``table`` (a symbol table, or the name of one: ``.symtab``,
    ``.dynsym``) and its string table; None when the file has no such table.  ElfError when
    the table links to no string table, or either is unreadable."""
    section = image.section(table) if isinstance(table, str) else table
    if section is None or section.type not in (SHT_SYMTAB, SHT_DYNSYM):
        return None
    sections = image.sections()
    if not 0 < section.link < len(sections):
        raise ElfError(
            f"links to no string table ({section.link})", path=image.path, section=section.name
        )
    bits = image.elfclass
    columns = table_columns(section.data(), SYM_FIELDS[bits], SYM_NAMES[bits], image.big_endian)
    return SymbolTableColumns(image.path, section.name, columns, sections[section.link].data())


#: Per st_info byte: 1 for the symbol types kept (STT_FUNC, STT_GNU_IFUNC), else 0...
_FUNCTION_TYPES = bytes(int(info & 0xF in (STT_FUNC, STT_GNU_IFUNC)) for info in range(256))
#: ... and 1 for a global or weak STT_FUNC (gdb's mst_text), else 0.
_GLOBAL_FUNCTIONS = bytes(
    int(info >> 4 != STB_LOCAL and info & 0xF == STT_FUNC) for info in range(256)
)
#: The first byte of a name that is empty without its version: none (NUL) or "@".
_NO_NAME = frozenset(b"\0@")


@dataclass(frozen=True, slots=True)
class FunctionColumns:
    """Function symbols of one table as columns: addresses, sizes and whether each is global
    or weak (gdb's ``mst_text``: 1) rather than local (0); names are decoded when asked for
    (``names``), and none is empty."""

    addresses: Sequence[int]
    sizes: Sequence[int]
    is_global: Sequence[int]
    #: The names of the symbols at some indexes.
    names: Callable[[Sequence[int]], list[str]]

    def __len__(self) -> int:
        return len(self.addresses)

    def records(self) -> list[SymbolRecord]:
        """Every symbol, its name decoded."""
        names = self.names(range(len(self)))
        return [
            SymbolRecord(address, size, name, bool(is_global))
            for address, size, is_global, name in zip(
                self.addresses, self.sizes, self.is_global, names, strict=True
            )
        ]

    @classmethod
    def of_records(cls, records: Iterable[SymbolRecord]) -> FunctionColumns:
        """The table of symbols already read (the PLT's, or made in code)."""
        kept = [record for record in records if record.name]
        return cls(
            [record.address for record in kept],
            [record.size for record in kept],
            [int(record.is_global) for record in kept],
            lambda indexes: [kept[i].name for i in indexes],
        )


def read_function_columns(
    image: ElfReader, table: str, layout: dict[int, int] | None = None
) -> FunctionColumns:
    """The defined, named function symbols of ``table`` (``.symtab`` or ``.dynsym``); an
    empty table if the file has none.  ``layout`` (a relocatable object's sections laid out,
    :func:`pysframe.elf.relocation.object_layout`) adds to each symbol's value the address of
    the section it is defined in.  ElfError when the table or its strings are unreadable, or
    the names add up to too much (:func:`check_name_bytes`)."""
    symbols = read_symbol_table(image, table)
    if symbols is None:
        return FunctionColumns.of_records([])
    column, strings = symbols.columns, symbols.strings
    infos = bytes(column["info"])
    # Function type (by st_info, at C speed), defined (st_shndx not SHN_UNDEF, 0) and named
    # (st_name not 0): the product is not 0.
    kept = map(int.__mul__, map(int.__mul__, infos.translate(_FUNCTION_TYPES), column["shndx"]),
               column["name"])  # fmt: skip
    chosen = list(itertools.compress(range(len(infos)), kept))
    starts = [column["name"][i] for i in chosen]
    if starts and max(starts) >= len(strings):
        past = next(start for start in starts if start >= len(strings))
        raise ElfError(
            f"a symbol name at {past:#x} is past the end of its {len(strings)}-byte string "
            "table",
            path=image.path,
            section=table,
        )
    try:
        check_name_bytes(strings, starts, section=table)
    except ElfError as error:
        raise error.at(path=image.path) from None
    # A name that is empty once its version is cut off is no symbol.
    named = [i for i, start in enumerate(starts) if strings[start] not in _NO_NAME]
    chosen, starts = [chosen[i] for i in named], [starts[i] for i in named]
    values = [column["value"][i] for i in chosen]
    if layout is not None:
        # Addresses wrap at 2**64 as the file's own would (a layout past a damaged size).
        values = [
            (v + layout.get(column["shndx"][i], 0)) & 0xFFFF_FFFF_FFFF_FFFF
            for v, i in zip(values, chosen, strict=True)
        ]
    is_global = infos.translate(_GLOBAL_FUNCTIONS)
    return FunctionColumns(
        values,
        [column["size"][i] for i in chosen],
        [is_global[i] for i in chosen],
        lambda indexes: _names_at(strings, [starts[i] for i in indexes]),
    )


def read_function_symbols(
    image: ElfReader, table: str, layout: dict[int, int] | None = None
) -> list[SymbolRecord]:
    """:func:`read_function_columns`'s symbols, names decoded."""
    return read_function_columns(image, table, layout).records()


@dataclass(frozen=True, slots=True)
class SymbolEntries:
    """Every entry of one symbol table, in table order, as numpy arrays of the gABI fields
    (``st_info`` split into ``binds`` and ``types``, ``st_other`` cut to its visibility);
    names are decoded on demand (:meth:`names`), versions kept."""

    path: str
    table: str
    name_offsets: np.ndarray
    values: np.ndarray
    sizes: np.ndarray
    binds: np.ndarray
    types: np.ndarray
    visibility: np.ndarray
    shndx: np.ndarray
    strings: bytes

    def __len__(self) -> int:
        return len(self.values)

    def names(self, indexes: np.ndarray) -> list[str]:
        """The names of the entries at ``indexes`` as the table stores them
        (``memcpy@@GLIBC_2.14``): each to its NUL; empty past the string table's end.
        ElfError when they add up to too much (:func:`symbol_names`)."""
        try:
            return symbol_names(
                self.strings, self.name_offsets[indexes].tolist(), section=self.table,
                versions=True,
            )  # fmt: skip
        except ElfError as error:
            raise error.at(path=self.path) from None


def read_symbol_entries(image: ElfReader, table: str) -> SymbolEntries | None:
    """All the entries of ``table`` (``.symtab`` or ``.dynsym``, :func:`read_symbol_table`)
    as numpy arrays; None when the file has no such table.  ElfError when the table or its
    strings are unreadable."""
    import numpy as np

    symbols = read_symbol_table(image, table)
    if symbols is None:
        return None
    column = symbols.columns
    info = np.asarray(column["info"], dtype=np.uint8)
    return SymbolEntries(
        image.path,
        table,
        np.asarray(column["name"], dtype=np.int64),
        np.asarray(column["value"], dtype=np.uint64),
        np.asarray(column["size"], dtype=np.uint64),
        info >> 4,
        info & 0xF,
        np.asarray(column["other"], dtype=np.uint8) & 0x3,
        np.asarray(column["shndx"], dtype=np.int64),
        symbols.strings,
    )


def pick_in_group(
    sizes: Sequence[int], is_global: Sequence[int], first: int, last: int
) -> tuple[int, int]:
    """gdb's scan down through the symbols of one address, ``first`` to ``last`` (in the
    order of address and name): the sized symbol it stops at, and the first zero-sized one it
    passed (-1: none)."""
    hi, zero = last, -1
    while hi >= first:
        if (
            hi > first
            and not is_global[hi]
            and is_global[hi - 1]
            and sizes[hi] == sizes[hi - 1]
        ):
            hi -= 1
            continue
        if sizes[hi] == 0:
            if zero < 0:
                zero = hi
            hi -= 1
            continue
        return hi, zero
    return -1, zero


class FunctionSymbols:
    """Function symbols merged from one or more tables, searchable by address (one at a time,
    or many at once with numpy) and by name."""

    def __init__(self, *tables: FunctionColumns | Iterable[SymbolRecord]) -> None:
        """The symbols of ``tables`` (each a :class:`FunctionColumns`, or symbols already read):
        only the names of symbols that share an address are decoded here, the others' when
        asked for."""
        parts = [
            t if isinstance(t, FunctionColumns) else FunctionColumns.of_records(t) for t in tables
        ]
        addresses: list[int] = []
        sizes: list[int] = []
        is_global: list[int] = []
        #: The part each symbol is in (by the index of its first symbol), for its name.
        self._parts, self._firsts = parts, []
        for part in parts:
            self._firsts.append(len(addresses))
            addresses += part.addresses
            sizes += part.sizes
            is_global += part.is_global
        count = len(addresses)
        order = sorted(range(count), key=addresses.__getitem__)
        ordered = list(map(addresses.__getitem__, order))
        # Where each distinct address starts in ``order``, and the names of the symbols that
        # share an address with another (gdb's choice among them goes by name).
        bounds = [0, *itertools.compress(range(1, count), map(operator.ne, ordered[1:], ordered))]
        bounds.append(count)
        shared = [
            i for first, stop in itertools.pairwise(bounds) if stop - first > 1
            for i in order[first:stop]
        ]  # fmt: skip
        names = dict(zip(shared, self._read_names(shared), strict=True))
        # The merged symbols, in the order of address and name: start, size, global, and the
        # index of the symbol read (its name decoded when asked for), or the name itself.
        self._starts: list[int] = []
        self._sizes: list[int] = []
        self._global: list[int] = []
        self._names: list[int | str] = []
        # Per distinct address: its start, and the symbols gdb's scan from there finds: the
        # nearest sized one at or below it, the nearest zero-sized one (-1: none).
        self._group_starts = ordered[:1] and [ordered[first] for first in bounds[:-1]]
        self._nearest_sized: list[int] = []
        self._nearest_zero: list[int] = []
        sized = zero = -1
        for first, stop in itertools.pairwise(bounds):
            base = len(self._starts)
            if stop - first == 1:  # a lone symbol (most addresses): its name is not needed
                i = order[first]
                self._starts.append(addresses[i])
                self._sizes.append(sizes[i])
                self._global.append(is_global[i])
                self._names.append(i)
                if sizes[i]:
                    sized = base
                else:
                    zero = base
            else:
                # Same name twice (.symtab and .dynsym): one symbol, global if either is, with
                # the size that is not zero (the first's first).
                merged: dict[str, tuple[int, int]] = {}
                for i in order[first:stop]:
                    size, bound = merged.get(names[i], (0, 0))
                    merged[names[i]] = (size or sizes[i], bound | is_global[i])
                for name in sorted(merged):
                    self._starts.append(addresses[order[first]])
                    self._sizes.append(merged[name][0])
                    self._global.append(merged[name][1])
                    self._names.append(name)
                here = pick_in_group(self._sizes, self._global, base, len(self._starts) - 1)
                sized, zero = max(sized, here[0]), max(zero, here[1])
            self._nearest_sized.append(sized)
            self._nearest_zero.append(zero)
        self._arrays: tuple[np.ndarray, ...] | None = None

    def _read_names(self, indexes: list[int]) -> list[str]:
        """The names of the symbols read at ``indexes`` (over all the parts)."""
        names = [""] * len(indexes)
        for part, (first, stop) in zip(
            self._parts, itertools.pairwise([*self._firsts, 1 << 63]), strict=True
        ):
            picks = [k for k, i in enumerate(indexes) if first <= i < stop]
            for k, name in zip(picks, part.names([indexes[k] - first for k in picks]), strict=True):
                names[k] = name
        return names

    def __len__(self) -> int:
        return len(self._names)

    def find_index(self, address: int) -> int:
        """The index of the symbol that names ``address`` (-1: none)."""
        group = bisect.bisect_right(self._group_starts, address) - 1
        if group < 0:
            return -1
        sized, zero = self._nearest_sized[group], self._nearest_zero[group]
        if sized >= 0 and address < self._starts[sized] + self._sizes[sized]:
            return sized
        return zero if zero > sized else -1

    def find(self, address: int) -> tuple[str, int] | None:
        """(name, offset from its start) of the symbol naming ``address``, or None."""
        index = self.find_index(address)
        if index < 0:
            return None
        return self.name_of(index), address - self._starts[index]

    def _columns(self) -> tuple[np.ndarray, ...]:
        """The starts and sizes of the symbols, and the groups, as numpy arrays (made once)."""
        import numpy as np

        if self._arrays is None:
            self._arrays = (
                np.array(self._starts, dtype=np.uint64),
                np.array(self._sizes, dtype=np.uint64),
                np.array(self._group_starts, dtype=np.uint64),
                np.array(self._nearest_sized, dtype=np.int64),
                np.array(self._nearest_zero, dtype=np.int64),
            )
        return self._arrays

    def find_many(self, addresses: Sequence[int] | np.ndarray) -> np.ndarray:
        """:meth:`find_index` of each address, at once."""
        import numpy as np

        pcs = np.asarray(addresses, dtype=np.uint64)
        starts, sizes, group_starts, nearest_sized, nearest_zero = self._columns()
        if not len(group_starts) or not len(pcs):
            return np.full(len(pcs), -1, dtype=np.int64)
        group = np.searchsorted(group_starts, pcs, side="right").astype(np.int64) - 1
        valid = group >= 0
        at = np.where(valid, group, 0)
        sized = np.where(valid, nearest_sized[at], -1)
        zero = np.where(valid, nearest_zero[at], -1)
        # A zero-sized symbol counts only above the sized one (gdb scans down from the PC
        # and stops at the first sized symbol).
        zero = np.where(zero > sized, zero, -1)
        safe = np.maximum(sized, 0)
        inside = (sized >= 0) & (pcs < starts[safe] + sizes[safe])
        found: np.ndarray = np.where(inside, sized, zero)
        return found

    def starts_of(self, indexes: np.ndarray) -> np.ndarray:
        """The start addresses of the symbols at ``indexes`` (all found, none -1)."""
        starts: np.ndarray = self._columns()[0][indexes]
        return starts

    def start_of(self, index: int) -> int:
        return self._starts[index]

    def name_of(self, index: int) -> str:
        name = self._names[index]
        if isinstance(name, int):
            name = self._names[index] = self._read_names([name])[0]
        return name

    def symbol(self, index: int) -> SymbolRecord:
        return SymbolRecord(self._starts[index], self._sizes[index], self.name_of(index))

    def by_name(self, name: str) -> list[SymbolRecord]:
        """Every symbol called ``name`` (several for a local name used by several objects)."""
        return [self.symbol(i) for i, n in enumerate(self.names) if n == name]

    @property
    def names(self) -> list[str]:
        """Every symbol's name, in the order of the symbols."""
        return [self.name_of(index) for index in range(len(self._names))]


class SymbolTable(Protocol):
    """What naming one address needs of a table of function symbols (:class:`FunctionSymbols`):
    the index of the symbol naming it, and that symbol's start and name."""

    def find_index(self, address: int) -> int: ...

    def start_of(self, index: int) -> int: ...

    def name_of(self, index: int) -> str: ...


def find_in_objfiles(
    tables: Sequence[FunctionSymbols], addresses: Sequence[int] | np.ndarray
) -> list[tuple[int, int]]:
    """For each address, (table, symbol index) of the symbol naming it across the tables of
    one file and its separate debug files, in that order; (-1, -1) where none does.  As gdb's
    ``lookup_minimal_symbol_by_pc_section`` goes through an objfile's separate debug objfiles:
    each table picks its symbol, and a later table's wins only if it starts higher."""
    import numpy as np

    pcs = np.asarray(addresses, dtype=np.uint64)
    best_table = np.full(len(pcs), -1, dtype=np.int64)
    best_index = np.full(len(pcs), -1, dtype=np.int64)
    best_start = np.zeros(len(pcs), dtype=np.uint64)
    for number, table in enumerate(tables):
        indexes = table.find_many(pcs)
        found = indexes >= 0
        starts = np.zeros(len(pcs), dtype=np.uint64)
        starts[found] = table.starts_of(indexes[found])
        better = found & ((best_table < 0) | (starts > best_start))
        best_table[better] = number
        best_index[better] = indexes[better]
        best_start[better] = starts[better]
    return list(zip(best_table.tolist(), best_index.tolist(), strict=True))


__all__ = [
    "FunctionColumns",
    "FunctionSymbols",
    "SymbolEntries",
    "SymbolRecord",
    "SymbolTable",
    "SymbolTableColumns",
    "check_name_bytes",
    "find_in_objfiles",
    "pick_in_group",
    "read_function_columns",
    "read_function_symbols",
    "read_symbol_entries",
    "read_symbol_table",
    "symbol_names",
]
