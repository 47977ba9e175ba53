"""Function symbols of ELF symbol tables, and the symbol that names an address, as gdb picks it.

A symbol table (``SHT_SYMTAB`` ``.symtab``, ``SHT_DYNSYM`` ``.dynsym``) is an array of gABI
``Elf64_Sym`` / ``Elf32_Sym`` entries; it is read here in one piece with numpy rather than
entry by entry, and only the names of function symbols (``STT_FUNC``, ``STT_GNU_IFUNC``) are
decoded from the linked string table (by :func:`pysframe.names.decode_name`: bytes that are not
UTF-8 as ``\\xNN``).  Versioned names (``memcpy@@GLIBC_2.14``) lose their
version, as gdb records them (``elf_symtab_read``).  :func:`read_symbol_entries` gives every
entry of a table as arrays, names with their versions, for readers with rules of their own
(perf's: :mod:`pysframe.perf.symbols`).

:class:`FunctionSymbols` merges tables (a file's ``.symtab`` and ``.dynsym``, a separate debug
file's ``.symtab``, MiniDebugInfo's) and answers "which function holds this address" with the
rules of gdb's ``lookup_minimal_symbol_by_pc_section`` (gdb/minsyms.c):

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
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import ElfError
from ..names import decode_name
from .layout import (
    SHN_UNDEF,
    SHT_DYNSYM,
    SHT_SYMTAB,
    STT_FUNC,
    STT_GNU_IFUNC,
    SYM_AT,
    SYM_NAMES,
    sym_dtype,
    sym_struct,
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


def symbol_name(strings: bytes, at: int, *, versions: bool = False) -> str:
    """The name at ``at`` in a string table, without its version (``@GLIBC_2.2.5``,
    ``@@GLIBC_2.14``), as gdb records it, unless ``versions`` (as stored, as perf keeps it);
    it ends at its NUL or at the table's end (BFD ends a table without a final NUL there:
    ``bfd_elf_get_str_section``); empty past the table's end.  The reference for
    :func:`symbol_names`."""
    end = strings.find(b"\0", at)
    raw = decode_name(strings[at : end if end >= 0 else len(strings)])
    return raw if versions else raw.split("@", 1)[0]


def symbol_names(
    strings: bytes,
    offsets: Sequence[int] | np.ndarray,
    *,
    section: str | None = None,
    versions: bool = False,
) -> list[str]:
    """:func:`symbol_name` of each offset, in bulk: the table's NULs are found once, so each
    name costs its own bytes, never a search through the rest of the table.  ElfError when the
    names add up to more than :data:`MAX_NAME_BYTES_FACTOR` times the table (plus 1 MiB):
    names laid over each other, each running to a far NUL or to the table's end."""
    import numpy as np

    starts = np.asarray(offsets, dtype=np.int64)
    size = len(strings)
    nuls = np.flatnonzero(np.frombuffer(strings, dtype=np.uint8) == 0)
    following = np.searchsorted(nuls, np.minimum(starts, size))
    ends = np.append(nuls, size)[following]
    lengths = np.maximum(ends - starts, 0)
    limit = MAX_NAME_BYTES_FACTOR * size + (1 << 20)
    total = int(lengths.sum())
    if total > limit:
        raise ElfError(
            f"{len(starts)} names of {total} bytes in all from a {size}-byte string table "
            f"(more than {limit}): names laid over each other, not read",
            section=section,
        )
    if versions:
        return [
            decode_name(strings[start:end]) if end > start else ""
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True)
        ]
    return [
        name_between(strings, start, end)
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True)
    ]


def name_between(strings: bytes, start: int, end: int) -> str:
    """The name stored in ``strings[start:end]``, without its version; empty if none."""
    return decode_name(strings[start:end]).split("@", 1)[0] if end > start else ""


def _table_entries(image: ElfReader, table: str) -> tuple[np.ndarray, bytes] | None:
    """The entries of ``table`` (:func:`_symbol_table`) read in one piece with numpy, and its
    string table; None without one.  ElfError when either is unreadable."""
    import numpy as np

    found = _symbol_table(image, table)
    if found is None:
        return None
    section, strings_section = found
    dtype = sym_dtype(image.elfclass, image.big_endian)
    data = section.data()
    entries = np.frombuffer(data, dtype=dtype, count=len(data) // dtype.itemsize)
    return entries, strings_section.data()


def read_function_symbols(
    image: ElfReader, table: str, layout: dict[int, int] | None = None
) -> list[SymbolRecord]:
    """The defined, named function symbols of ``table`` (``.symtab`` or ``.dynsym``); empty
    if the file has no such table.  ``layout`` (a relocatable object's sections laid out,
    :func:`pysframe.elf.relocation.object_layout`) adds to each symbol's value the address of
    the section it is defined in.  ElfError when the table or its strings are unreadable."""
    found = _table_entries(image, table)
    if found is None:
        return []
    entries, strings = found
    kind = entries["info"] & 0xF
    keep = ((kind == STT_FUNC) | (kind == STT_GNU_IFUNC)) & (entries["shndx"] != SHN_UNDEF)
    keep &= entries["name"] != 0
    chosen = entries[keep]
    if not len(chosen):
        return []
    name_offsets = chosen["name"]
    past = name_offsets >= len(strings)
    if past.any():
        name_at = int(name_offsets[past][0])
        raise ElfError(
            f"a symbol name at {name_at:#x} is past the end of its {len(strings)}-byte string "
            "table",
            path=image.path,
            section=table,
        )
    try:
        names = symbol_names(strings, name_offsets, section=table)
    except ElfError as error:
        raise error.at(path=image.path) from None
    binds = (chosen["info"] >> 4).tolist()
    kinds = (chosen["info"] & 0xF).tolist()
    values = chosen["value"].tolist()
    if layout is not None:
        sections_of = chosen["shndx"].tolist()
        # Addresses wrap at 2**64 as the file's own would (a layout past a damaged size).
        values = [
            (v + layout.get(i, 0)) & 0xFFFF_FFFF_FFFF_FFFF
            for v, i in zip(values, sections_of, strict=True)
        ]
    return [
        SymbolRecord(value, size, name, bind != STB_LOCAL and kind == STT_FUNC)
        for name, value, size, bind, kind in zip(
            names, values, chosen["size"].tolist(), binds, kinds, strict=True
        )
        if name
    ]


def _symbol_table(image: ElfReader, table: str) -> tuple[ElfSection, ElfSection] | None:
    """The symbol table ``table`` and the string table it links to; None if the file has no
    such table, ElfError when it links to no section."""
    section = image.section(table)
    if section is None or section.type not in (SHT_SYMTAB, SHT_DYNSYM):
        return None
    sections = image.sections()
    if not 0 < section.link < len(sections):
        raise ElfError(
            f"links to no string table ({section.link})", path=image.path, section=table
        )
    return section, sections[section.link]


def name_end(strings: bytes, start: int) -> int:
    """Where the name at ``start`` in a string table ends: its NUL, or the table's end."""
    end = strings.find(b"\0", start)
    return end if end >= 0 else max(len(strings), start)


def check_name_bytes(strings: bytes, offsets: Sequence[int], *, section: str | None = None) -> None:
    """ElfError when the names at ``offsets`` add up to more bytes than :func:`symbol_names`
    allows (its scalar reference, without numpy).  Cheap when every name is short enough that
    no count of them could pass the bound; else each search stops once the names found so far
    would pass it, so that the work stays linear in the table however the names lie."""
    size = len(strings)
    limit = MAX_NAME_BYTES_FACTOR * size + (1 << 20)
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


@dataclass(frozen=True, slots=True)
class FunctionEntries:
    """The defined, named function symbols of one table, as :func:`read_function_symbols`
    chooses them, read without numpy: names are decoded when asked for (a symbol whose name is
    empty once its version is cut off is no symbol, as there)."""

    addresses: list[int]
    sizes: list[int]
    is_global: list[bool]
    name_starts: list[int]
    strings: bytes

    def __len__(self) -> int:
        return len(self.addresses)

    def name(self, index: int) -> str:
        start = self.name_starts[index]
        return name_between(self.strings, start, name_end(self.strings, start))


#: Per st_info byte: 1 for the symbol types kept (STT_FUNC, STT_GNU_IFUNC), else 0...
_FUNCTION_TYPES = bytes(int(info & 0xF in (STT_FUNC, STT_GNU_IFUNC)) for info in range(256))
#: ... and 1 for a global or weak STT_FUNC (gdb's mst_text), else 0.
_GLOBAL_FUNCTIONS = bytes(
    int(info >> 4 != STB_LOCAL and info & 0xF == STT_FUNC) for info in range(256)
)


def _function_columns(
    image: ElfReader, data: bytes
) -> tuple[list[int], bytes, list[int], list[int]]:
    """st_name, st_info, st_value and st_size of the defined, named function symbols of a
    symbol table's bytes, as columns.  In the machine's own byte order the columns are cut
    from the bytes (memoryview casts at the offsets of :data:`~pysframe.elf.layout.SYM_AT`)
    and the symbols chosen without a step in Python per symbol."""
    bits = image.elfclass
    entry = sym_struct(bits, image.big_endian)
    count = len(data) // entry.size
    size = entry.size
    if bits == 64 and image.big_endian == (sys.byteorder == "big"):
        at = SYM_AT[64]
        table = memoryview(data)[: count * size]
        names = table.cast("I")[at["name"] // 4 :: size // 4].tolist()
        shndx = table.cast("H")[at["shndx"] // 2 :: size // 2].tolist()
        infos = data[at["info"] : count * size : size]
        wide = table.cast("Q")
        values = wide[at["value"] // 8 :: size // 8].tolist()
        sizes = wide[at["size"] // 8 :: size // 8].tolist()
    else:
        fields = list(zip(*entry.iter_unpack(memoryview(data)[: count * size]), strict=True))
        if not fields:
            return [], b"", [], []
        column = {name: list(fields[i]) for i, name in enumerate(SYM_NAMES[bits])}
        names, shndx, values, sizes = (column[k] for k in ("name", "shndx", "value", "size"))
        infos = bytes(column["info"])
    # Function type, defined (st_shndx not SHN_UNDEF, 0) and named (st_name not 0).
    kept = map(operator.mul, map(operator.mul, infos.translate(_FUNCTION_TYPES), shndx), names)
    picked = list(itertools.compress(range(count), kept))
    return (
        [names[i] for i in picked],
        bytes([infos[i] for i in picked]),
        [values[i] for i in picked],
        [sizes[i] for i in picked],
    )


def read_function_entries(image: ElfReader, table: str) -> FunctionEntries | None:
    """The scalar reference of :func:`read_function_symbols` (without ``layout``): the same
    symbols, the same ElfErrors (their messages may differ), names left undecoded; None when
    the file has no such table or it holds no function."""
    found = _symbol_table(image, table)
    if found is None:
        return None
    section, strings_section = found
    starts, infos, addresses, sizes = _function_columns(image, section.data())
    if not starts:
        return None
    strings = strings_section.data()
    if max(starts) >= len(strings):
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
    is_global = list(map(bool, infos.translate(_GLOBAL_FUNCTIONS)))
    return FunctionEntries(addresses, sizes, is_global, starts, strings)


def _merged(seen: SymbolRecord | None, record: SymbolRecord) -> SymbolRecord:
    """``record`` merged with the symbol of the same address and name ``seen`` before it
    (.symtab and .dynsym both have it): one symbol, global if either is, with the size that is
    not zero (``seen``'s first)."""
    if seen is None:
        return record
    return SymbolRecord(
        record.address, seen.size or record.size, record.name, seen.is_global or record.is_global
    )


def pick_in_group(
    sizes: Sequence[int] | np.ndarray, is_global: Sequence[bool], first: int, last: int
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


@dataclass(frozen=True, slots=True)
class SymbolEntries:
    """Every entry of one symbol table, in table order, as arrays of the gABI ``Elf64_Sym`` /
    ``Elf32_Sym`` fields (``st_info`` split into ``binds`` and ``types``, ``st_other`` cut to
    its visibility); names are decoded on demand (:meth:`names`), versions kept."""

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
                self.strings, self.name_offsets[indexes], section=self.table, versions=True
            )
        except ElfError as error:
            raise error.at(path=self.path) from None


def read_symbol_entries(image: ElfReader, table: str) -> SymbolEntries | None:
    """All the entries of ``table`` (``.symtab`` or ``.dynsym``), for readers that apply
    rules of their own to them (perf's, :mod:`pysframe.perf.symbols`); None when the file
    has no such table.  ElfError when the table or its strings are unreadable."""
    import numpy as np

    found = _table_entries(image, table)
    if found is None:
        return None
    entries, strings = found
    info = entries["info"].astype(np.uint8)
    return SymbolEntries(
        image.path,
        table,
        entries["name"].astype(np.int64),
        entries["value"].astype(np.uint64),
        entries["size"].astype(np.uint64),
        info >> 4,
        info & 0xF,
        entries["other"].astype(np.uint8) & 0x3,
        entries["shndx"].astype(np.int64),
        strings,
    )


class FunctionSymbols:
    """Function symbols merged from one or more tables, searchable by address (one at a time
    or in bulk with numpy) and by name."""

    def __init__(self, records: Iterable[SymbolRecord]) -> None:
        import numpy as np

        # Same address and name in two tables (.symtab and .dynsym): one symbol, global if
        # either is, with the size that is not zero.
        by_key: dict[tuple[int, str], SymbolRecord] = {}
        for record in records:
            key = (record.address, record.name)
            by_key[key] = _merged(by_key.get(key), record)
        merged = [by_key[key] for key in sorted(by_key)]
        self._names = [m.name for m in merged]
        self._starts = np.fromiter((m.address for m in merged), dtype=np.uint64, count=len(merged))
        self._sizes = np.fromiter((m.size for m in merged), dtype=np.uint64, count=len(merged))
        self._global = [m.is_global for m in merged]
        self._groups = self._group()
        # The same, as Python lists, for one address at a time (bisect beats a numpy call on
        # a single value by an order of magnitude).
        self._group_starts: list[int] = self._groups[0].tolist()
        self._nearest_sized: list[int] = self._groups[1].tolist()
        self._nearest_zero: list[int] = self._groups[2].tolist()
        self._start_list: list[int] = self._starts.tolist()
        self._size_list: list[int] = self._sizes.tolist()

    def _pick(self, first: int, last: int) -> tuple[int, int]:
        return pick_in_group(self._sizes, self._global, first, last)

    def _group(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per distinct address: its start, and the symbols gdb's scan from there finds: the
        nearest sized one at or below it, the nearest zero-sized one."""
        import numpy as np

        count = len(self._names)
        starts = self._starts
        if not count:
            empty = np.zeros(0, dtype=np.int64)
            return np.zeros(0, dtype=np.uint64), empty, empty
        new_group = np.append(True, starts[1:] != starts[:-1])
        firsts = np.flatnonzero(new_group)
        lasts = np.append(firsts[1:] - 1, count - 1)
        sized = self._sizes != 0
        # Lone symbols (most addresses): sized or zero-sized, vectorized; groups of aliases go
        # through gdb's scan one by one.
        sized_pick = np.where(sized[firsts], firsts, -1).astype(np.int64)
        zero_pick = np.where(sized[firsts], -1, firsts).astype(np.int64)
        for group in np.flatnonzero(lasts > firsts).tolist():
            sized_pick[group], zero_pick[group] = self._pick(int(firsts[group]),
                                                             int(lasts[group]))
        return starts[firsts], np.maximum.accumulate(sized_pick), np.maximum.accumulate(zero_pick)

    def __len__(self) -> int:
        return len(self._names)

    def find_many(self, addresses: Sequence[int] | np.ndarray) -> np.ndarray:
        """For each address, the index of the symbol that names it (-1: none)."""
        import numpy as np

        pcs = np.asarray(addresses, dtype=np.uint64)
        group_starts, nearest_sized, nearest_zero = self._groups
        out = np.full(len(pcs), -1, dtype=np.int64)
        if not len(group_starts) or not len(pcs):
            return out
        group = np.searchsorted(group_starts, pcs, side="right").astype(np.int64) - 1
        valid = group >= 0
        at = np.where(valid, group, 0)
        sized = np.where(valid, nearest_sized[at], -1)
        zero = np.where(valid, nearest_zero[at], -1)
        # A zero-sized symbol counts only above the sized one (gdb scans down from the PC
        # and stops at the first sized symbol).
        zero = np.where(zero > sized, zero, -1)
        safe = np.maximum(sized, 0)
        inside = (sized >= 0) & (pcs < self._starts[safe] + self._sizes[safe])
        out = np.where(inside, sized, zero)
        return out

    def starts_of(self, indexes: np.ndarray) -> np.ndarray:
        """The start addresses of the symbols at ``indexes`` (all found, none -1)."""
        starts: np.ndarray = self._starts[indexes]
        return starts

    def find_index(self, address: int) -> int:
        """:meth:`find_many` for one address, without numpy."""
        group = bisect.bisect_right(self._group_starts, address) - 1
        if group < 0:
            return -1
        sized, zero = self._nearest_sized[group], self._nearest_zero[group]
        if sized >= 0 and address < self._start_list[sized] + self._size_list[sized]:
            return sized
        return zero if zero > sized else -1

    def find(self, address: int) -> tuple[str, int] | None:
        """(name, offset from its start) of the symbol naming ``address``, or None."""
        index = self.find_index(address)
        if index < 0:
            return None
        return self._names[index], address - self._start_list[index]

    def start_of(self, index: int) -> int:
        return self._start_list[index]

    def name_of(self, index: int) -> str:
        return self._names[index]

    def symbol(self, index: int) -> SymbolRecord:
        return SymbolRecord(int(self._starts[index]), int(self._sizes[index]), self._names[index])

    def by_name(self, name: str) -> list[SymbolRecord]:
        """Every symbol called ``name`` (several for a local name used by several objects)."""
        return [self.symbol(i) for i, n in enumerate(self._names) if n == name]

    @property
    def names(self) -> list[str]:
        return list(self._names)


class SymbolTable(Protocol):
    """What naming one address needs of a table of function symbols (FunctionSymbols, or
    LazyFunctionSymbols): the index of the symbol naming it, and that symbol's start and name."""

    def find_index(self, address: int) -> int: ...

    def start_of(self, index: int) -> int: ...

    def name_of(self, index: int) -> str: ...


class LazyFunctionSymbols:
    """Function symbols merged from tables as :class:`FunctionSymbols` merges them, searched
    one address at a time without numpy, decoding only the names of the symbols at the
    addresses a search passes: the scalar reference of :meth:`FunctionSymbols.find_index`
    (tests/test_symbols_scalar.py holds them equal), for callers that name a few PCs.

    ``tables``: FunctionEntries (:func:`read_function_entries`) and records (the PLT's), in
    the order FunctionSymbols would be given their records.  A search walks down from the PC
    through the addresses that have symbols, as gdb's scan does, until a sized symbol: the
    symbols of each address are merged and ordered by name when first passed."""

    def __init__(self, tables: Sequence[FunctionEntries | Sequence[SymbolRecord]]) -> None:
        self._tables = list(tables)
        self._first: list[int] = []  # the index of each table's first symbol
        addresses: list[int] = []
        for table in self._tables:
            self._first.append(len(addresses))
            if isinstance(table, FunctionEntries):
                addresses += table.addresses
            else:
                addresses += [record.address for record in table]
        self._order = sorted(range(len(addresses)), key=addresses.__getitem__)
        self._sorted = [addresses[i] for i in self._order]
        #: Per address passed: where its merged symbols start in ``_records``, and its picks.
        self._groups: dict[int, tuple[int, int, int]] = {}
        self._records: list[SymbolRecord] = []

    def _symbol(self, index: int) -> SymbolRecord:
        at = bisect.bisect_right(self._first, index) - 1
        table, local = self._tables[at], index - self._first[at]
        if isinstance(table, FunctionEntries):
            return SymbolRecord(
                table.addresses[local], table.sizes[local], table.name(local),
                table.is_global[local],
            )  # fmt: skip
        return table[local]

    def _group(self, first: int, stop: int) -> tuple[int, int, int]:
        """The symbols at the address of sorted positions [first, stop): merged (an empty
        name is no symbol), ordered by name and kept; where they start in ``_records``, and
        gdb's picks among them (-1: none), relative to that start."""
        address = self._sorted[first]
        known = self._groups.get(address)
        if known is None:
            by_name: dict[str, SymbolRecord] = {}
            for index in self._order[first:stop]:
                record = self._symbol(index)
                if record.name:
                    by_name[record.name] = _merged(by_name.get(record.name), record)
            ordered = [by_name[name] for name in sorted(by_name)]
            sized, zero = pick_in_group(
                [r.size for r in ordered], [r.is_global for r in ordered], 0, len(ordered) - 1
            )
            known = self._groups[address] = (len(self._records), sized, zero)
            self._records += ordered
        return known

    def find_index(self, address: int) -> int:
        """The index of the symbol naming ``address`` (-1: none), as
        :meth:`FunctionSymbols.find_index` picks it."""
        position = bisect.bisect_right(self._sorted, address)
        zero = -1
        while position > 0:
            first = bisect.bisect_left(self._sorted, self._sorted[position - 1], 0, position)
            base, sized, zero_here = self._group(first, position)
            if zero < 0 and zero_here >= 0:
                zero = base + zero_here  # the nearest zero-sized symbol, above any sized one
            if sized >= 0:
                record = self._records[base + sized]
                return base + sized if address < record.address + record.size else zero
            position = first
        return zero

    def find(self, address: int) -> tuple[str, int] | None:
        """(name, offset from its start) of the symbol naming ``address``, or None."""
        index = self.find_index(address)
        if index < 0:
            return None
        return self._records[index].name, address - self._records[index].address

    def start_of(self, index: int) -> int:
        return self._records[index].address

    def name_of(self, index: int) -> str:
        return self._records[index].name


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
    "FunctionEntries",
    "FunctionSymbols",
    "LazyFunctionSymbols",
    "SymbolEntries",
    "SymbolRecord",
    "SymbolTable",
    "check_name_bytes",
    "find_in_objfiles",
    "name_between",
    "name_end",
    "pick_in_group",
    "read_function_entries",
    "read_function_symbols",
    "read_symbol_entries",
    "symbol_name",
    "symbol_names",
]
