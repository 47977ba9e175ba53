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
from typing import TYPE_CHECKING, Protocol

from ..dataclass import dataclass
from ..errors import ElfError
from ..names import decode_name
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
        decode_name(strings[start : end if (end := find(b"\0", start)) >= 0 else size])
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
    or many at once with numpy) and by name.

    The symbols are kept in the order of their addresses; an index is a place in that order.
    What gdb's scan needs of an address is worked out when first asked, and kept: the symbols
    that share it, merged and in the order of their names (their names decoded then), and the
    nearest sized and zero-sized symbols the scan down from it finds.  Naming a few PCs so
    costs the sort of the addresses and the names of the symbols passed; naming many at once
    works out every address once."""

    def __init__(self, *tables: FunctionColumns | Iterable[SymbolRecord]) -> None:
        """The symbols of ``tables`` (each a :class:`FunctionColumns`, or symbols already
        read)."""
        self._parts = [
            t if isinstance(t, FunctionColumns) else FunctionColumns.of_records(t) for t in tables
        ]
        #: The index of each part's first symbol among all, for its names.
        self._firsts: list[int] = []
        self._addresses: list[int] = []
        self._sizes: list[int] = []
        self._global: list[int] = []
        for part in self._parts:
            self._firsts.append(len(self._addresses))
            self._addresses += part.addresses
            self._sizes += part.sizes
            self._global += part.is_global
        #: The symbols read, in the order of their addresses, and those addresses.
        self._order = sorted(range(len(self._addresses)), key=self._addresses.__getitem__)
        self._ordered = list(map(self._addresses.__getitem__, self._order))
        #: Per address several symbols share (by its first place): their merged sizes,
        #: whether global, and names, in the order of the names.
        self._shared: dict[int, tuple[list[int], list[int], list[str]]] = {}
        #: Per address (by its first place): the places of the nearest sized symbol at or
        #: below it, and of the nearest zero-sized one above that (-1: none).
        self._nearest: dict[int, tuple[int, int]] = {}
        self._names: dict[int, str] = {}
        #: Every symbol's index, and the indexes by name, once asked for.
        self._every: list[int] | None = None
        self._by_name: dict[str, list[int]] | None = None
        self._arrays: tuple[np.ndarray, ...] | None = None

    # -- the symbols of one address ------------------------------------------------------------

    def _first(self, index: int) -> int:
        """The first place of the address of place ``index``."""
        return bisect.bisect_left(self._ordered, self._ordered[index], 0, index + 1)

    def _merged(
        self, first: int, stop: int | None = None
    ) -> tuple[list[int], list[int], list[str]] | None:
        """The symbols of the address at places ``first`` to ``stop`` (found when not given)
        when several share it: the same name twice (.symtab and .dynsym) is one symbol, global
        if either is, with the size that is not zero (the first's first); ordered by name.
        None for a lone symbol."""
        if stop is None:
            stop = bisect.bisect_right(self._ordered, self._ordered[first], first)
        if stop - first == 1:
            return None
        known = self._shared.get(first)
        if known is None:
            members = self._order[first:stop]
            merged: dict[str, tuple[int, int]] = {}
            for i, name in zip(members, self._read_names(members), strict=True):
                size, bound = merged.get(name, (0, 0))
                merged[name] = (size or self._sizes[i], bound | self._global[i])
            names = sorted(merged)
            known = self._shared[first] = (
                [merged[name][0] for name in names], [merged[name][1] for name in names], names
            )  # fmt: skip
        return known

    def _picks(self, first: int, stop: int | None = None) -> tuple[int, int]:
        """gdb's scan down through the symbols of the address at places ``first`` to
        ``stop``: the place of the sized symbol it stops at, and of the first zero-sized one
        it passes (-1: none)."""
        merged = self._merged(first, stop)
        if merged is None:
            return (first, -1) if self._sizes[self._order[first]] else (-1, first)
        sizes, is_global, _ = merged
        sized, zero = pick_in_group(sizes, is_global, 0, len(sizes) - 1)
        return (first + sized if sized >= 0 else -1), (first + zero if zero >= 0 else -1)

    def _scan(self, first: int) -> tuple[int, int]:
        """gdb's scan down from the address at place ``first``: the place of the nearest sized
        symbol, and of the nearest zero-sized one above it (-1: none).  Every address the scan
        passes keeps its answer, so no address is scanned twice."""
        passed: list[tuple[int, int]] = []  # (first place, zero-sized pick) of each address
        sized, zero = -1, -1
        while first >= 0:
            known = self._nearest.get(first)
            if known is not None:
                sized, zero = known
                break
            here_sized, here_zero = self._picks(first)
            passed.append((first, here_zero))
            if here_sized >= 0:
                sized = here_sized
                break
            first = self._first(first - 1) if first else -1
        for place, here_zero in reversed(passed):  # from the lowest address up
            zero = max(zero, here_zero)
            self._nearest[place] = (sized, zero)
        return sized, zero

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

    # -- looking up ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._places())

    def find_index(self, address: int) -> int:
        """The index of the symbol that names ``address`` (-1: none)."""
        position = bisect.bisect_right(self._ordered, address)
        if not position:
            return -1
        sized, zero = self._scan(self._first(position - 1))
        if sized >= 0 and address < self._ordered[sized] + self._size(sized):
            return sized
        return zero

    def find(self, address: int) -> tuple[str, int] | None:
        """(name, offset from its start) of the symbol naming ``address``, or None."""
        index = self.find_index(address)
        if index < 0:
            return None
        return self.name_of(index), address - self._ordered[index]

    def _columns(self) -> tuple[np.ndarray, ...]:
        """Every address's start and the scan's answers from it, as numpy arrays, and the
        symbols' starts and sizes by place (0 where no symbol is): worked out once, in one
        pass up through the addresses (the answers kept as :meth:`_scan` keeps them)."""
        import numpy as np

        if self._arrays is None:
            count = len(self._ordered)
            firsts = [0, *itertools.compress(
                range(1, count), map(operator.ne, self._ordered[1:], self._ordered)
            )] if count else []  # fmt: skip
            sizes = [0] * count
            nearest: list[tuple[int, int]] = []
            sized = zero = -1
            for first, stop in itertools.pairwise([*firsts, count]):
                merged = None if stop - first == 1 else self._merged(first, stop)
                if merged is None:  # a lone symbol (most addresses)
                    size = sizes[first] = self._sizes[self._order[first]]
                    here_sized, here_zero = (first, -1) if size else (-1, first)
                else:
                    sizes[first : first + len(merged[0])] = merged[0]
                    here_sized, here_zero = self._picks(first, stop)
                # A sized symbol here ends the scan from above; the zero-sized ones that
                # count are those above the nearest sized one.
                if here_sized >= 0:
                    sized, zero = here_sized, here_zero
                else:
                    zero = max(zero, here_zero)
                nearest.append(self._nearest.setdefault(first, (sized, zero)))
            self._arrays = (
                np.array([self._ordered[first] for first in firsts], dtype=np.uint64),
                np.array([s for s, _ in nearest], dtype=np.int64),
                np.array([z for _, z in nearest], dtype=np.int64),
                np.array(self._ordered, dtype=np.uint64),
                np.array(sizes, dtype=np.uint64),
            )
        return self._arrays

    def find_many(self, addresses: Sequence[int] | np.ndarray) -> np.ndarray:
        """:meth:`find_index` of each address, at once."""
        import numpy as np

        pcs = np.asarray(addresses, dtype=np.uint64)
        group_starts, nearest_sized, nearest_zero, starts, sizes = self._columns()
        if not len(group_starts) or not len(pcs):
            return np.full(len(pcs), -1, dtype=np.int64)
        group = np.searchsorted(group_starts, pcs, side="right").astype(np.int64) - 1
        valid = group >= 0
        at = np.where(valid, group, 0)
        sized = np.where(valid, nearest_sized[at], -1)
        zero = np.where(valid, nearest_zero[at], -1)
        safe = np.maximum(sized, 0)
        inside = (sized >= 0) & (pcs < starts[safe] + sizes[safe])
        found: np.ndarray = np.where(inside, sized, zero)
        return found

    # -- the symbols -------------------------------------------------------------------------

    def _size(self, index: int) -> int:
        merged = self._merged(first := self._first(index))
        return self._sizes[self._order[index]] if merged is None else merged[0][index - first]

    def starts_of(self, indexes: np.ndarray) -> np.ndarray:
        """The start addresses of the symbols at ``indexes`` (all found, none -1)."""
        starts: np.ndarray = self._columns()[3][indexes]
        return starts

    def start_of(self, index: int) -> int:
        return self._ordered[index]

    def name_of(self, index: int) -> str:
        merged = self._merged(first := self._first(index))
        if merged is not None:
            return merged[2][index - first]
        name = self._names.get(index)
        if name is None:
            name = self._names[index] = self._read_names([self._order[index]])[0]
        return name

    def symbol(self, index: int) -> SymbolRecord:
        return SymbolRecord(self._ordered[index], self._size(index), self.name_of(index))

    def _places(self) -> list[int]:
        """The index of every symbol (an address several share has fewer once merged)."""
        if self._every is None:
            places: list[int] = []
            first = 0
            while first < len(self._ordered):
                merged = self._merged(first)
                places += range(first, first + (1 if merged is None else len(merged[0])))
                first = bisect.bisect_right(self._ordered, self._ordered[first], first)
            self._every = places
        return self._every

    def by_name(self, name: str) -> list[SymbolRecord]:
        """Every symbol called ``name`` (several for a local name used by several objects)."""
        if self._by_name is None:
            self._by_name = {}
            for index, known in zip(self._places(), self.names, strict=True):
                self._by_name.setdefault(known, []).append(index)
        return [self.symbol(i) for i in self._by_name.get(name, [])]

    @property
    def names(self) -> list[str]:
        """Every symbol's name, in the order of the symbols."""
        return [self.name_of(i) for i in self._places()]


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
