"""The tables addr2line looks an address up in, one per compilation unit, built as BFD builds
them (bfd/dwarf2.c, binutils 2.40; :mod:`pysframe.elf.addr2line` has the rules): the unit's
line table (``decode_line_info``, ``add_line_info``, ``sort_line_sequences``) and its
functions with their ranges and the functions around them (``scan_unit_for_symbols``,
``read_rangelist``, ``arange_add``).

A table holds lists of numbers and names only, so that it could be stored and read back.
"""

from __future__ import annotations

import bisect
import itertools
import os
from dataclasses import field
from typing import TYPE_CHECKING

from ..dataclass import dataclass
from .dwarf_info import (
    Abbreviation,
    DebugSections,
    DieReader,
    DW_AT_abstract_origin,
    DW_AT_call_file,
    DW_AT_call_line,
    DW_AT_high_pc,
    DW_AT_linkage_name,
    DW_AT_low_pc,
    DW_AT_MIPS_linkage_name,
    DW_AT_name,
    DW_AT_ranges,
    DW_AT_specification,
    DW_FORM_addr,
    DW_FORM_rnglistx,
    DW_TAG_entry_point,
    DW_TAG_inlined_subroutine,
    DW_TAG_lexical_block,
    DW_TAG_module,
    DW_TAG_namespace,
    DW_TAG_subprogram,
    UnitHeader,
)
from .dwarf_ranges import range_list
from .line_program import line_rows, read_line_program, read_uleb

if TYPE_CHECKING:
    import numpy as np

_MASK = (1 << 64) - 1
_FUNCTION_TAGS = frozenset({DW_TAG_subprogram, DW_TAG_entry_point, DW_TAG_inlined_subroutine})
#: Tags whose children are read for functions: the rest (types, call sites...) hold none
#: with code, and their subtrees are skipped.
_DESCEND = _FUNCTION_TAGS | {DW_TAG_lexical_block, DW_TAG_namespace, DW_TAG_module,
                             0x25, 0x32}  # fmt: skip  # catch_block, try_block
#: The attributes that name a function, in the order BFD meets them.
NAMING = frozenset({DW_AT_abstract_origin, DW_AT_specification, DW_AT_name,
                    DW_AT_linkage_name, DW_AT_MIPS_linkage_name})  # fmt: skip
#: The attributes of a function DIE that are read.
_WANTED = NAMING | {DW_AT_low_pc, DW_AT_high_pc, DW_AT_ranges, DW_AT_call_file, DW_AT_call_line}


@dataclass(slots=True)
class Function:
    """A function DIE of a unit: its offset, tag, ranges (merged as BFD merges them), the
    function around it (an index, -1: none) and the call's file and line, and the attributes
    that name it, in DIE order."""

    offset: int
    tag: int
    ranges: list[list[int]]
    caller: int
    call_file: int | None
    call_line: int
    naming: list[tuple[int, int, object]]


def arange_add(ranges: list[list[int]], low: int, high: int) -> None:
    """bfd/dwarf2.c arange_add: an empty range is dropped; one that starts where a range
    ends, or ends where one starts, extends it; else it is added."""
    if low == high:
        return
    for existing in ranges:
        if low == existing[1]:
            existing[1] = high
            return
        if high == existing[0]:
            existing[0] = low
            return
    ranges.append([low, high])


@dataclass(slots=True)
class UnitTable:
    """One compilation unit as BFD looks addresses up in it: its functions' ranges sorted
    (with the highest end up to each, for bisection), the functions, and its line table
    (sequences, rows, file names)."""

    lows: list[int] = field(default_factory=list)
    reach: list[int] = field(default_factory=list)
    #: (low, high, function index) sorted by low.
    ranges: list[tuple[int, int, int]] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    #: Sequences: (low, high, first row, end row), disjoint and sorted.
    sequences: list[tuple[int, int, int, int]] = field(default_factory=list)
    sequence_lows: list[int] = field(default_factory=list)
    row_addresses: list[int] = field(default_factory=list)
    row_files: list[int] = field(default_factory=list)
    row_lines: list[int] = field(default_factory=list)
    #: The file name of each file number (concat_filename; None: an empty one).
    file_names: list[str | None] = field(default_factory=list)
    #: Names worked out so far: function index -> (name, is a linkage name).
    names: dict[int, tuple[str | None, bool]] = field(default_factory=dict)
    #: Functions named by a DW_AT_name of a mangling language that were looked up in the
    #: symbols (their entries in ``names`` are then linkage names): BFD renames such a
    #: function the first time it is asked about it.
    looked_up: set[int] = field(default_factory=set)

    def function_at(self, address: int) -> int:
        """lookup_address_in_function_table: the index of the function whose smallest range
        holds ``address`` (the later function on a tie), -1 for none."""
        first = bisect.bisect_right(self.reach, address)
        last = bisect.bisect_right(self.lows, address)
        best, best_length = -1, _MASK + 1
        for low, high, index in self.ranges[first:last]:
            if low <= address < high:
                length = high - low
                if length < best_length or (length == best_length and index > best):
                    best, best_length = index, length
        return best

    def line_at(self, address: int) -> tuple[int, int] | None:
        """lookup_address_in_line_info_table: (file number, line) of ``address``, or None."""
        at = bisect.bisect_right(self.sequence_lows, address) - 1
        if at < 0:
            return None
        low, high, first, end = self.sequences[at]
        if not low <= address < high:
            return None
        row = bisect.bisect_right(self.row_addresses, address, first, end) - 1
        if row < first or row >= end - 1:  # none at or below it, or the sequence's end
            return None
        return self.row_files[row], self.row_lines[row]

    def file_name(self, number: int | None) -> str | None:
        """File ``number``'s name (concat_filename: ``<unknown>`` for a number the table
        has not); None without a number."""
        if number is None:
            return None
        if not 0 <= number < len(self.file_names):
            return "<unknown>"
        return self.file_names[number]


@dataclass(slots=True)
class UnitFacts:
    """A compilation unit of the file: its header, its own DIE's facts, and its table once
    built (None: not yet; False: it cannot be read, as BFD's unit->error)."""

    header: UnitHeader
    language: int
    ranges: list[list[int]]
    base: int
    comp_dir: str | None
    stmt_list: int | None
    table: UnitTable | bool | None = None


def build_table(reader: DieReader, unit: UnitFacts) -> UnitTable:
    """The unit's table (comp_unit_maybe_decode_line_info): its line table, then its
    functions.  ElfError (or IndexError, ValueError) when either cannot be read: BFD then
    answers nothing from the unit."""
    table = UnitTable()
    _read_lines(reader.sections, unit, table)
    _read_functions(reader, unit, table)
    return table


def read_rangelist(reader: DieReader, base: int, offset: int, out: list[list[int]]) -> None:
    """read_rangelist: the ranges of the list at ``offset`` (``.debug_ranges``, or
    ``.debug_rnglists`` without the entries that index ``.debug_addr``, which fail it as they
    fail BFD 2.40), each added with :func:`arange_add`.  ElfError where BFD fails the list:
    the unit then answers nothing."""
    for low, high in range_list(reader, offset, base, indexed=False):
        arange_add(out, low, high)


def _read_lines(sections: DebugSections, unit: UnitFacts, table: UnitTable) -> None:
    """decode_line_info and sort_line_sequences."""
    program = read_line_program(
        sections.get(".debug_line"), unit.stmt_list or 0,
        address_size=unit.header.address_size, big_endian=not sections.little,
        string=sections.line_string,
    )  # fmt: skip
    version = program.version
    rows = line_rows(program.code, program.header, first_file=0 if version >= 5 else 1)
    files_read = program.files + [(os.fsdecode(name), directory)
                                  for name, directory in rows.defined_files]  # fmt: skip
    table.file_names = [
        _concat_filename(program.directories, files_read, number, version, unit.comp_dir)
        for number in range(len(files_read) + (0 if version >= 5 else 1))
    ]
    if len(rows):
        _sequences(rows.addresses, rows.files, rows.lines, rows.ends, table)


def _sequences(
    addresses: np.ndarray, files: np.ndarray, lines: np.ndarray, ends: np.ndarray,
    table: UnitTable,
) -> None:
    """The line table's sequences as add_line_info and sort_line_sequences leave them: of
    rows in a row at one address (neither ending its sequence), the last; each sequence's
    rows sorted by address, its end (the end_sequence row, or the last row of a program cut
    short) last; the sequences sorted by low address, the higher end first, then the later
    sequence, those inside an earlier one dropped and those overlapping one cut."""
    import numpy as np

    count = len(addresses)
    sequence = np.zeros(count, dtype=np.int64)
    sequence[1:] = np.cumsum(ends[:-1])
    last = np.zeros(count, dtype=bool)  # each sequence's end
    last[:-1] = sequence[:-1] != sequence[1:]
    last[-1] = True
    repeated = np.zeros(count, dtype=bool)
    repeated[:-1] = ~last[:-1] & ~last[1:] & (addresses[:-1] == addresses[1:])
    kept = np.flatnonzero(~repeated)
    order = kept[np.lexsort((addresses[kept], last[kept], sequence[kept]))]
    addresses, files, lines, sequence = (column[order] for column in
                                         (addresses, files, lines, sequence))  # fmt: skip
    starts = np.flatnonzero(np.r_[True, sequence[1:] != sequence[:-1]])
    stops = np.r_[starts[1:], len(order)]
    lows = np.minimum.reduceat(addresses, starts).tolist()
    highs = addresses[stops - 1].tolist()
    numbers = sorted(range(len(starts)), key=lambda n: (lows[n], -highs[n], -n))
    picked: list[int] = []
    high_so_far = None
    rows = 0
    for n in numbers:
        low, high = lows[n], highs[n]
        if high_so_far is not None and low < high_so_far:
            if high <= high_so_far:
                continue  # nested: dropped
            low = high_so_far  # overlapping: cut
        high_so_far = high
        size = int(stops[n] - starts[n])
        table.sequences.append((low, high, rows, rows + size))
        table.sequence_lows.append(low)
        picked.append(n)
        rows += size
    chosen = np.concatenate([np.arange(starts[n], stops[n]) for n in picked])
    table.row_addresses = addresses[chosen].tolist()
    table.row_files = files[chosen].tolist()
    table.row_lines = lines[chosen].tolist()


def _read_functions(reader: DieReader, unit: UnitFacts, table: UnitTable) -> None:
    """scan_unit_for_symbols, for functions: each function DIE with its ranges and the
    function DIE around it."""
    info, abbrevs, end = reader.info, reader.abbrevs, unit.header.end
    _, _, pos = reader.attributes(unit.header.die_offset)
    level = 0
    path = [-1] * 8  # the function at each level of the path to the current DIE
    skip_below = -1
    functions = table.functions
    while pos < end:
        at = pos
        code = info[pos]
        pos += 1
        if code >= 0x80:
            code, pos = read_uleb(info, at, end)
        if code == 0:
            level -= 1
            if level < 0:
                break
            if level <= skip_below:
                skip_below = -1
            continue
        abbrev = abbrevs[code] if code in abbrevs else reader.abbreviation(code, at)
        if skip_below >= 0:
            pos = reader.skip(abbrev, pos)
            if abbrev.children:
                level += 1
            continue
        tag = abbrev.tag
        if tag in _FUNCTION_TAGS:
            pos = _function(reader, unit, abbrev, at, pos, level, path, functions)
        else:
            path[level] = -1
            if abbrev.children and tag not in _DESCEND:
                sibling, pos = reader.sibling(abbrev, pos)
                if sibling is not None and pos <= sibling[1] <= end:
                    pos = sibling[1]
                    continue
                skip_below = level
                level += 1
                continue
            pos = reader.skip(abbrev, pos)
        if abbrev.children:
            level += 1
            if level >= len(path):
                path += [-1] * len(path)
            path[level] = -1
    spans = sorted(
        (low, high, index)
        for index, function in enumerate(functions)
        for low, high in function.ranges
    )
    table.ranges = spans
    table.lows = [span[0] for span in spans]
    table.reach = list(itertools.accumulate((span[1] for span in spans), max))


def _function(
    reader: DieReader,
    unit: UnitFacts,
    abbrev: Abbreviation,
    at: int,
    pos: int,
    level: int,
    path: list[int],
    functions: list[Function],
) -> int:
    """Read the function DIE at ``at`` (its attributes from ``pos``) into ``functions``;
    the offset after it."""
    caller = -1
    if abbrev.tag == DW_TAG_inlined_subroutine:
        for depth in range(level - 1, -1, -1):
            if path[depth] >= 0:
                caller = path[depth]
                break
    ranges: list[list[int]] = []
    naming: list[tuple[int, int, object]] = []
    low = high = 0
    high_relative = False
    call_file: int | None = None
    call_line = 0
    for (name, form, const), size in zip(abbrev.attributes, abbrev.sizes, strict=True):
        if name not in _WANTED:
            if size >= 0:
                pos += size
            else:
                _, pos = reader.value(form, const, pos)
            continue
        value, pos = reader.value(form, const, pos)
        if name in NAMING:
            naming.append((name, form, value))
        elif not isinstance(value, int):
            continue
        elif name == DW_AT_low_pc:
            low = value
        elif name == DW_AT_high_pc:
            high, high_relative = value, form != DW_FORM_addr
        elif name == DW_AT_ranges and form != DW_FORM_rnglistx:  # BFD's is_int_form
            read_rangelist(reader, unit.base, value, ranges)
        elif name == DW_AT_call_file:
            call_file = value
        elif name == DW_AT_call_line:
            call_line = value
    if high:
        arange_add(ranges, low, (high + (low if high_relative else 0)) & _MASK)
    path[level] = len(functions)
    functions.append(Function(at, abbrev.tag, ranges, caller, call_file, call_line, naming))
    return pos


def _concat_filename(
    directories: list[str], files: list[tuple[str, int]], number: int, version: int,
    comp_dir: str | None,
) -> str | None:
    """bfd/dwarf2.c concat_filename: the name of file ``number`` (DWARF 5 numbers files and
    directories from 0; earlier versions from 1, file 0 being ``<unknown>``), joined to its
    directory and, when that is not absolute, to the compilation directory."""
    if version < 5:
        if number == 0:
            return "<unknown>"
        number -= 1
    if not 0 <= number < len(files):
        return "<unknown>"
    name, directory = files[number]
    if name.startswith("/"):
        return name
    if version < 5:
        directory -= 1
    subdir = directories[directory] if 0 <= directory < len(directories) else None
    parent = comp_dir if subdir is None or not subdir.startswith("/") else None
    if parent is None:
        parent, subdir = subdir, None
    if parent is None:
        return name
    return f"{parent}/{subdir}/{name}" if subdir is not None else f"{parent}/{name}"


def number(value: tuple[int, object] | None) -> int | None:
    """The value of an attribute read by :meth:`DieReader.attributes` when it is a number."""
    return value[1] if value is not None and isinstance(value[1], int) else None


__all__ = ["Function", "UnitFacts", "UnitTable", "arange_add", "build_table", "number",
           "read_rangelist"]  # fmt: skip
