"""Source lines and inlined functions at an address, from DWARF (DWARF 5 sections 6.2, the
line number program, and 3.3.8, inlined subroutines), as gdb shows them in ``bt``.

Only the compilation unit holding the address is read: ``.debug_aranges`` says which (else
each unit's ``DW_AT_low_pc``/``DW_AT_high_pc``/``DW_AT_ranges``), then

* the line: the row of the unit's line table with the highest address not above it, within
  one sequence (a row that ends a sequence names no line);
* the functions: the ``DW_TAG_subprogram`` whose ranges hold the address, and inside it the
  chain of ``DW_TAG_inlined_subroutine`` entries that hold it.  The innermost function is at
  the line of the line table; each inlined function was called from its ``DW_AT_call_file``
  and ``DW_AT_call_line``, which is where the function around it is.

These are gdb's rules, a layer on the one DWARF reader, :mod:`pysframe.elf.dwarf_info` (its
units, DIEs and range lists; the sections read once and the file closed), with the line
programs of :mod:`pysframe.elf.line_program` (flat arrays, not an object per row).  DIE trees
are walked by :class:`~pysframe.elf.dwarf_info.DieTree`, whose walks always move forward and
stop, with a warning in ``problems``, at a DIE they reach twice (a ``DW_AT_sibling``
pointing at its own DIE, back, or into another subtree).  Malformed DWARF gives no source for
the addresses it covers, never an exception nor an endless walk; so does a name or a
reference in a dwz supplementary file (``DW_FORM_GNU_strp_alt``, ``DW_FORM_GNU_ref_alt``),
which is not read.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..dataclass import dataclass
from ..errors import ElfError, SFrameError
from .dwarf_info import (
    UNIT_REFERENCES,
    DebugSections,
    DieReader,
    DieTree,
    DW_AT_abstract_origin,
    DW_AT_call_file,
    DW_AT_call_line,
    DW_AT_high_pc,
    DW_AT_language,
    DW_AT_linkage_name,
    DW_AT_low_pc,
    DW_AT_MIPS_linkage_name,
    DW_AT_name,
    DW_AT_ranges,
    DW_AT_specification,
    DW_AT_stmt_list,
    DW_FORM_addr,
    DW_FORM_ref_addr,
    DW_TAG_class_type,
    DW_TAG_inlined_subroutine,
    DW_TAG_lexical_block,
    DW_TAG_namespace,
    DW_TAG_structure_type,
    DW_TAG_subprogram,
    DW_TAG_union_type,
    UnitHeader,
    Units,
)
from .dwarf_ranges import Spans, address_ranges, range_list
from .line_program import LineRows, line_rows, read_line_program
from .reader import ElfReader

if TYPE_CHECKING:
    import numpy as np

_DW_LANG_MIPS_ASSEMBLER = 0x8001
_SCOPES = frozenset({DW_TAG_namespace, DW_TAG_class_type, DW_TAG_structure_type,
                     DW_TAG_union_type})  # fmt: skip
#: The attributes read of a DIE for its ranges, and for its name.
_RANGES = frozenset({DW_AT_low_pc, DW_AT_high_pc, DW_AT_ranges})
_NAMING = frozenset({DW_AT_name, DW_AT_linkage_name, DW_AT_MIPS_linkage_name,
                     DW_AT_abstract_origin, DW_AT_specification})  # fmt: skip
_CALL = frozenset({DW_AT_call_file, DW_AT_call_line})
#: The errors a malformed unit raises while it is read (the reader's, and a value of an
#: unexpected type).
_DAMAGE = (SFrameError, IndexError, ValueError, TypeError)


@dataclass(frozen=True, slots=True)
class SourceFrame:
    """One function at an address: its name (as DWARF names it: the demangled linkage name
    when there is one, else ``DW_AT_name``; ``mangled``: the linkage name), and the source
    line it is at.  ``inlined``: the function was inlined into the next frame."""

    function: str | None
    mangled: str | None
    file: str | None
    line: int | None
    inlined: bool
    #: The unit is assembly (DW_LANG_Mips_Assembler, as gas writes it): gdb names such code
    #: by its symbols.
    assembler: bool = False


def _number(values: dict[int, tuple[int, object]], attribute: int) -> int | None:
    found = values.get(attribute)
    return found[1] if found is not None and isinstance(found[1], int) else None


class _Unit:
    """One compilation unit: its line rows, sorted by address, and its DIEs, walked by a
    :class:`~pysframe.elf.dwarf_info.DieTree`."""

    def __init__(self, sections: DebugSections, reader: DieReader, tree: DieTree) -> None:
        import numpy as np

        self.reader = reader
        self.tree = tree
        _, top = reader.unit_die()
        #: The base address of the unit's range lists (DWARF 5 3.1.1).
        self.base = _number(top, DW_AT_low_pc) or 0
        self.assembler = _number(top, DW_AT_language) == _DW_LANG_MIPS_ASSEMBLER
        #: Rows sorted by address (stable: within one address, the last row of the program
        #: applies, as gdb keeps the last line of several at one address in a sequence).
        self.addresses: np.ndarray = np.zeros(0, dtype=np.uint64)
        self.files: np.ndarray = np.zeros(0, dtype=np.int64)
        self.lines: np.ndarray = self.files
        self.ends: np.ndarray = np.zeros(0, dtype=np.bool_)
        self.file_names: list[str | None] = []
        #: The unit's functions by their ranges (value: the DIE's offset), once looked for.
        self.functions: Spans | None = None
        #: The number of the first file: DWARF 5 numbers files from 0, earlier versions from 1.
        self.first_file = 0 if reader.unit.version >= 5 else 1
        stmt_list = _number(top, DW_AT_stmt_list)
        if stmt_list is None:
            return
        program = read_line_program(
            sections.get(".debug_line"), stmt_list, address_size=reader.unit.address_size,
            big_endian=not sections.little, string=sections.line_string,
        )  # fmt: skip
        version = program.version
        rows = line_rows(program.code, program.header)
        defined = [(os.fsdecode(name), directory) for name, directory in rows.defined_files]
        for name, directory in [*program.files, *defined]:
            # DWARF 5 numbers directories from 0 (0: the compilation's, joined too); earlier
            # versions from 1, with 0 meaning the compilation directory, left out.  gdb's
            # file_file_name does the same.
            base = directory if version >= 5 else directory - 1
            if not os.path.isabs(name) and 0 <= base < len(program.directories):
                name = os.path.join(program.directories[base], name)
            self.file_names.append(name)
        first = 0 if version >= 5 else 1
        recorded = _recorded(rows)
        if recorded.all():
            order = np.argsort(rows.addresses, kind="stable")
        else:
            kept = np.flatnonzero(recorded)
            order = kept[np.argsort(rows.addresses[kept], kind="stable")]
        self.addresses = rows.addresses[order]
        self.files = rows.files[order].astype(np.int64) - first
        self.ends = rows.ends[order]
        self.lines = _statement_lines(self.addresses, self.files, self.ends, rows.stmts[order],
                                      rows.lines[order])  # fmt: skip

    def _row_at_or_below(self, address: int) -> int:
        import numpy as np

        return int(np.searchsorted(self.addresses, np.uint64(address), side="right")) - 1

    def line_at(self, address: int) -> tuple[str | None, int | None]:
        index = self._row_at_or_below(address)
        if index < 0 or self.ends[index]:
            return None, None
        return self.file(int(self.files[index])), int(self.lines[index])

    def file(self, index: int) -> str | None:
        return self.file_names[index] if 0 <= index < len(self.file_names) else None

    def row_starts_at(self, address: int) -> bool:
        index = self._row_at_or_below(address)
        return index >= 0 and int(self.addresses[index]) == address


class SourceLines:
    """Source lines and inline chains of one ELF file's DWARF (a separate debug file, or the
    file itself), its sections read once.  ``problems``: a line for each
    damage met that cost some addresses their source (a DIE walk stopped, ...)."""

    def __init__(self, path: str, problems: list[str] | None = None) -> None:
        self.path = path
        self.problems: list[str] = [] if problems is None else problems
        self._units: Units | None = None
        #: Units read (by offset; None: one that could not be read, not read again).
        self._read: dict[int, _Unit | None] = {}
        #: The DIE trees of units, by offset (those read only for a DIE's parent too).
        self._trees: dict[int, DieTree] = {}
        #: Whether a walk of a unit's namespaces and classes has set their members' parents.
        self._scopes_walked: set[int] = set()
        #: Unit offsets by their own ranges, once needed.
        self._unit_ranges: Spans | None = None
        self._aranges: Spans | None = None
        with ElfReader.open(path) as image:
            try:
                sections = DebugSections.read(image)
            except SFrameError:  # a section that cannot be read: no source lines from the file
                return
        if not sections.get(".debug_info"):
            return
        self._units = Units(sections)
        try:
            self._aranges = Spans(address_ranges(sections.get(".debug_aranges"),
                                                 sections.little))  # fmt: skip
        except ElfError:  # as gdb, damaged aranges are left aside: units say their ranges
            self._aranges = None

    @property
    def available(self) -> bool:
        return self._units is not None

    def frames(self, address: int) -> list[SourceFrame]:
        """The functions at link-time ``address``, innermost (inlined) first, the function
        that holds them last; empty where the DWARF says nothing of it."""
        try:
            unit = self._unit_at(address)
            return [] if unit is None else self._frames(unit, address)
        except _DAMAGE:  # a malformed unit costs its own addresses only
            return []

    def starts_line(self, address: int) -> bool:
        """Whether a line-table row starts exactly at ``address`` (gdb then prints a frame
        without its address)."""
        try:
            unit = self._unit_at(address)
        except _DAMAGE:
            return False
        return unit is not None and unit.row_starts_at(address)

    # -- finding the unit ------------------------------------------------------------------

    def _unit_at(self, address: int) -> _Unit | None:
        units = self._units
        if units is None:
            return None
        header = None
        if self._aranges is not None:
            holding = self._aranges.holding(address)
            if holding:  # the set that starts last (they do not overlap in a sound file)
                header = units.at(holding[-1][2])
                if header is not None and header.offset != holding[-1][2]:
                    header = None
        if header is None:
            header = self._unit_by_ranges(units, address)
        if header is None:
            return None
        if header.offset not in self._read:
            self._read[header.offset] = None  # a unit that fails to read is not read again
            reader = units.reader(header)
            self._read[header.offset] = _Unit(units.sections, reader, self._tree(header))
        return self._read[header.offset]

    def _tree(self, header: UnitHeader) -> DieTree:
        tree = self._trees.get(header.offset)
        if tree is None:
            assert self._units is not None
            tree = self._trees[header.offset] = DieTree(self._units.reader(header), self._warn)
        return tree

    def _warn(self, message: str, offset: int) -> None:
        line = str(ElfError(message, offset, path=self.path, section=".debug_info"))
        if line not in self.problems:
            self.problems.append(line)

    def _unit_by_ranges(self, units: Units, address: int) -> UnitHeader | None:
        """The first unit (by its ranges' starts) whose own ranges hold ``address``; a unit
        whose ranges cannot be read has none."""
        if self._unit_ranges is None:
            spans = []
            for header in units.headers:
                try:
                    reader = units.reader(header)
                    _, top = reader.unit_die()
                    base = _number(top, DW_AT_low_pc) or 0
                    spans += [(low, high, header.offset)
                              for low, high in _ranges(reader, top, base)]  # fmt: skip
                except _DAMAGE:
                    continue
            self._unit_ranges = Spans(spans)
        holding = self._unit_ranges.holding(address)
        return units.at(holding[0][2]) if holding else None

    # -- DIEs --------------------------------------------------------------------------------

    def _holds(self, unit: _Unit, offset: int, address: int) -> bool:
        _, values, _ = unit.reader.attributes(offset, _RANGES)
        return any(low <= address < high for low, high in _ranges(unit.reader, values, unit.base))

    def _functions(self, unit: _Unit) -> Spans:
        """The unit's DW_TAG_subprogram entries with code, by their ranges (found once per
        unit, in namespaces and classes too)."""
        if unit.functions is None:
            unit.functions = Spans(())  # a unit whose functions cannot be read has none
            tree, reader = unit.tree, unit.reader
            found = []
            top = reader.unit.die_offset
            for offset in tree.walk(tree.children(top), lambda die: tree.tag(die) in _SCOPES):
                if tree.tag(offset) == DW_TAG_subprogram:
                    _, values, _ = reader.attributes(offset, _RANGES)
                    found += [(low, high, offset)
                              for low, high in _ranges(reader, values, unit.base)]  # fmt: skip
            self._scopes_walked.add(reader.unit.offset)
            unit.functions = Spans(found)
        return unit.functions

    def _frames(self, unit: _Unit, address: int) -> list[SourceFrame]:
        holding = self._functions(unit).holding(address)
        if not holding:
            return []
        tree, reader = unit.tree, unit.reader
        # The innermost: the one that starts last (of those, the first in the unit).
        last_start = max(span[0] for span in holding)
        chain = [next(span[2] for span in holding if span[0] == last_start)]
        # Down through the inlined subroutines (and the lexical blocks around them) that hold
        # the address: each child list starts after its parent, so the descent moves forward.
        children = list(tree.children(chain[-1]))
        while children:
            offset = children.pop(0)
            tag = tree.tag(offset)
            if tag in (DW_TAG_inlined_subroutine, DW_TAG_lexical_block) and self._holds(
                unit, offset, address
            ):
                if tag == DW_TAG_inlined_subroutine:
                    chain.append(offset)
                children = list(tree.children(offset))
        file, line = unit.line_at(address)
        frames = []
        for depth in range(len(chain) - 1, -1, -1):
            offset = chain[depth]
            name, mangled = self._name(reader, offset)
            inlined = tree.tag(offset) != DW_TAG_subprogram
            frames.append(SourceFrame(name, mangled, file, line, inlined, unit.assembler))
            if depth and inlined:
                _, values, _ = reader.attributes(offset, _CALL)
                call_file = _number(values, DW_AT_call_file)
                file = None if call_file is None else unit.file(call_file - unit.first_file)
                line = _number(values, DW_AT_call_line)
        return frames

    def _name(self, reader: DieReader, offset: int) -> tuple[str | None, str | None]:
        """(the name qualified by its namespaces and classes, DW_AT_linkage_name), following
        DW_AT_abstract_origin and DW_AT_specification to the declarations that have them."""
        assert self._units is not None
        seen = 0
        name = mangled = None
        current: int | None = offset
        while current is not None and seen < 8:
            _, values, _ = reader.attributes(current, _NAMING)
            if name is None and DW_AT_name in values:
                name = self._qualified(reader, current, _string(values[DW_AT_name]))
            for key in (DW_AT_linkage_name, DW_AT_MIPS_linkage_name):
                if mangled is None and key in values:
                    mangled = _string(values[key])
            if name is not None and mangled is not None:
                break
            current = None
            for key in (DW_AT_abstract_origin, DW_AT_specification):
                if key in values:
                    form, target = values[key]
                    header = self._units.at(target) if isinstance(target, int) else None
                    if not isinstance(target, int) or header is None or (
                        form not in UNIT_REFERENCES and form != DW_FORM_ref_addr
                    ):  # dwz's DW_FORM_GNU_ref_alt, type units' DW_FORM_ref_sig8
                        raise ElfError(f"reference of form {form:#x} is not followed",
                                       section=".debug_info")  # fmt: skip
                    reader, current = self._units.reader(header), target
                    break
            seen += 1
        return name, mangled

    def _qualified(self, reader: DieReader, offset: int, name: str) -> str:
        """``name`` with the names of the namespaces and classes around the DIE at
        ``offset``, as gdb's ``dwarf2_compute_name`` writes them; an unnamed class (a
        lambda's) ends the prefix, an unnamed namespace is ``(anonymous namespace)``."""
        tree = self._tree(reader.unit)
        parts = [name]
        parent = self._parent(tree, offset)
        depth = 0
        while parent is not None and tree.tag(parent) in _SCOPES and depth < 32:
            _, values, _ = reader.attributes(parent, frozenset({DW_AT_name}))
            if DW_AT_name not in values:
                if tree.tag(parent) != DW_TAG_namespace:
                    break
                parts.append("(anonymous namespace)")
            else:
                parts.append(_string(values[DW_AT_name]))
            parent = self._parent(tree, parent)
            depth += 1
        return "::".join(reversed(parts))

    def _parent(self, tree: DieTree, offset: int) -> int | None:
        """The parent of the DIE at ``offset``, as a walk of its unit's scopes sets it; None
        for a DIE that no walk reaches."""
        unit = tree.reader.unit
        if offset not in tree.parents and unit.offset not in self._scopes_walked:
            self._scopes_walked.add(unit.offset)
            top = unit.die_offset
            for _ in tree.walk(tree.children(top), lambda die: tree.tag(die) in _SCOPES):
                pass
        return tree.parents.get(offset)


def _recorded(rows: LineRows) -> np.ndarray:
    """Which rows gdb records (``lnp_state_machine::record_line``, gdb/dwarf2/read.c): not a
    row of line 0 (the line before it goes on), nor a row that is not a statement and
    switches file at the address of the row before it where a statement row was (the end
    marker the switch writes in the old file would remove that statement).  The file
    switched from is the last recorded row's, so those candidates are decided in order."""
    import numpy as np

    addresses, ends, stmts, files = rows.addresses, rows.ends, rows.stmts, rows.files
    keep: np.ndarray = ends | (rows.lines != 0)
    # Run: rows of one address in one sequence.  Candidates: within a run, after a statement.
    inside = (addresses[1:] == addresses[:-1]) & ~ends[:-1]
    candidates, _ = _after_a_statement(np.flatnonzero(inside & keep[1:] & ~stmts[1:]) + 1,
                                       inside, stmts)  # fmt: skip
    if not len(candidates):
        return keep
    # The last row before each that is not of line 0 (-1: none).
    kept = np.flatnonzero(keep)
    kept_before = np.concatenate(([-1], kept))[np.searchsorted(kept, candidates)]
    recorded_before: dict[int, int] = {}  # of each candidate dropped: the row recorded before
    for candidate, before in zip(candidates.tolist(), kept_before.tolist(), strict=True):
        before = recorded_before.get(before, before)
        if before >= 0 and files[candidate] != files[before]:
            keep[candidate] = False
            recorded_before[candidate] = before
    return keep


def _statement_lines(
    addresses: np.ndarray, files: np.ndarray, ends: np.ndarray, stmts: np.ndarray,
    lines: np.ndarray,
) -> np.ndarray:
    """The line gdb gives at each row (sorted by address; ``find_pc_sect_line``,
    gdb/symtab.c): a row that is not a statement gives way to the last statement row before
    it at its address, in its file."""
    import numpy as np

    inside = (addresses[1:] == addresses[:-1]) & (files[1:] == files[:-1]) & ~ends[:-1]
    rows, statements = _after_a_statement(np.flatnonzero(inside & ~stmts[1:]) + 1, inside, stmts)
    if len(rows):
        lines = lines.copy()
        lines[rows] = lines[statements]
    return lines


def _after_a_statement(
    rows: np.ndarray, inside: np.ndarray, stmts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Those of ``rows`` with a statement row before them in their run (``inside[i]``: row
    i + 1 is in the run of row i), and for each the last such statement row."""
    import numpy as np

    if not len(rows):
        return rows, rows
    run_starts = np.flatnonzero(np.concatenate(([True], ~inside)))
    statements = np.flatnonzero(stmts)
    run_start = run_starts[np.searchsorted(run_starts, rows, side="right") - 1]
    at = np.searchsorted(statements, rows) - 1  # the last statement row before each
    found = at >= 0
    found[found] = statements[at[found]] >= run_start[found]
    return rows[found], statements[at[found]]


def _string(value: tuple[int, object]) -> str:
    """A name's value; ElfError for one not in the file (dwz's DW_FORM_GNU_strp_alt)."""
    if not isinstance(value[1], str):
        raise ElfError(f"name of form {value[0]:#x} is not read", section=".debug_info")
    return value[1]


def _ranges(
    reader: DieReader, values: dict[int, tuple[int, object]], base: int
) -> list[tuple[int, int]]:
    """The ranges of a DIE of ``values`` (DWARF 5 2.17): DW_AT_low_pc and DW_AT_high_pc (an
    address, or of a constant form its size), else DW_AT_ranges from ``base``."""
    low = _number(values, DW_AT_low_pc)
    high = values.get(DW_AT_high_pc)
    if low is not None and high is not None and isinstance(high[1], int):
        return [(low, high[1] if high[0] == DW_FORM_addr else low + high[1])]
    ranges = _number(values, DW_AT_ranges)
    return [] if ranges is None else range_list(reader, ranges, base)


def source_lines(path: str, problems: list[str] | None = None) -> SourceLines | None:
    """The DWARF line and inline information of the ELF file at ``path``; None if it has no
    ``.debug_info`` or cannot be read.  ``problems`` gets the damage met on the way
    (:attr:`SourceLines.problems`)."""
    try:
        lines = SourceLines(path, problems)
    except SFrameError:
        return None
    return lines if lines.available else None


__all__ = ["SourceFrame", "SourceLines", "source_lines"]
