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

The DWARF is parsed by pyelftools' ``DWARFInfo`` (:func:`dwarf_info`: the ``.debug_*``
sections as :class:`~pysframe.elf.reader.ElfReader` reads them, pyelftools reading no ELF),
the line programs by :mod:`pysframe.elf.line_program` (flat arrays, not an object per row), and
the DIE trees by :class:`_Dies`, whose walks always move forward and stop, with a warning in
``problems``, at a DIE they reach twice (a ``DW_AT_sibling`` pointing at its own DIE, back, or
into another subtree).  Malformed DWARF gives no source for the addresses it covers, never an
exception nor an endless walk.
"""

from __future__ import annotations

import bisect
import io
import itertools
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ElfError, SFrameError
from .line_program import LineProgramHeader, line_rows
from .reader import ElfReader, inflate
from .relocation import relocated

#: Names and files are bytes in pyelftools; they are decoded like file names.
_TAGS_WITH_CODE = ("DW_TAG_subprogram", "DW_TAG_inlined_subroutine")
_DW_LANG_MIPS_ASSEMBLER = 0x8001


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


def _text(value: Any) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


class _Unit:
    """One compilation unit: its line rows, sorted by address, and its DIEs, walked by
    :class:`_Dies`."""

    def __init__(self, dwarf: Any, unit: Any, dies: _Dies) -> None:
        import numpy as np

        self.unit = unit
        self.dies = dies
        self.top = unit.get_top_DIE()
        #: Rows sorted by address (stable: within one address, the last row of the program
        #: applies, as gdb keeps the last line of several at one address in a sequence).
        self.addresses = np.zeros(0, dtype=np.uint64)
        self.files = self.lines = np.zeros(0, dtype=np.int64)
        self.ends = np.zeros(0, dtype=np.bool_)
        self.file_names: list[str | None] = []
        #: Starts and (low, high, DIE) of the unit's functions, once looked for.
        self.functions: tuple[list[int], list[tuple[int, int, Any]]] | None = None
        #: The number of the first file: DWARF 5 numbers files from 0, earlier versions from 1.
        self.first_file = 0 if unit.header.version >= 5 else 1
        program = dwarf.line_program_for_CU(unit)
        if program is None:
            return
        version = program.header.version
        directories = [_text(d) for d in program.header.get("include_directory", [])]
        stream = program.stream
        stream.seek(program.program_start_offset)
        code = stream.read(max(0, program.program_end_offset - program.program_start_offset))
        rows = line_rows(code, LineProgramHeader.of(program))
        entries = [(entry.name, entry.dir_index) for entry in program.header.get("file_entry", [])]
        for name_bytes, directory in [*entries, *rows.defined_files]:
            name = _text(name_bytes)
            # DWARF 5 numbers directories from 0 (0: the compilation's, joined too); earlier
            # versions from 1, with 0 meaning the compilation directory, left out.  gdb's
            # file_file_name does the same.
            base = directory if version >= 5 else directory - 1
            if not os.path.isabs(name) and 0 <= base < len(directories):
                name = os.path.join(directories[base], name)
            self.file_names.append(name)
        first = 0 if version >= 5 else 1
        order = np.argsort(rows.addresses, kind="stable")
        self.addresses = rows.addresses[order]
        self.files = rows.files[order].astype(np.int64) - first
        self.lines = rows.lines[order]
        self.ends = rows.ends[order]

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


class _Dies:
    """The DIEs of one unit, walked so that no damage makes a walk endless (DWARF 5 2.3,
    "Relationship of Debugging Information Entries"): a DIE's children follow it, each after
    the previous one's subtree (which ``DW_AT_sibling`` may skip to) and up to a null entry.

    A child list only moves forward: a ``DW_AT_sibling`` that points back, at the DIE itself
    or out of the unit is not followed (the subtree is scanned for its end instead), and the
    list ends at the unit's end.  A scan for a subtree's end records the end of every subtree
    it passes, so no subtree is scanned twice.  A walk (:meth:`walk`) that reaches a DIE a
    second time stops there; each such stop, and each pointer not followed, leaves one line
    in ``problems``."""

    def __init__(self, unit: Any, path: str, problems: list[str]) -> None:
        self.unit = unit
        self.path = path
        self.problems = problems
        self.end = unit.cu_offset + unit.size
        self._children: dict[int, list[Any]] = {}
        self._subtree_end: dict[int, int] = {}
        #: Whether a walk of the unit's namespaces and classes has set their members' parents.
        self.scopes_walked = False

    def warn(self, message: str, offset: int) -> None:
        line = str(ElfError(message, offset, path=self.path, section=".debug_info"))
        if line not in self.problems:
            self.problems.append(line)

    def children(self, die: Any) -> list[Any]:
        """The children of ``die`` (their parent set to it)."""
        if not die.has_children:
            return []
        known = self._children.get(die.offset)
        if known is not None:
            return known
        out: list[Any] = []
        offset = die.offset + die.size
        while offset < self.end:
            child = self.unit.get_DIE_from_refaddr(offset)
            child.set_parent(die)
            if child.is_null():
                break
            out.append(child)
            offset = self._next_sibling(child)
        self._children[die.offset] = out
        return out

    def _next_sibling(self, child: Any) -> int:
        after: int = child.offset + child.size
        if not child.has_children:
            return after
        sibling = child.attributes.get("DW_AT_sibling")
        if sibling is not None and sibling.form in _UNIT_REFERENCES:
            target = self.unit.cu_offset + sibling.value
            if after <= target <= self.end:
                return int(target)
            self.warn(f"DW_AT_sibling points to {target:#x}, not after the DIE", child.offset)
        return self._scan_subtree(child)

    def _scan_subtree(self, die: Any) -> int:
        """Where the subtree of ``die`` (a DIE with children) ends: after the null entry that
        closes it, found by reading the DIEs after it in order (each one's size moves
        forward), through the ends already known."""
        known = self._subtree_end.get(die.offset)
        if known is not None:
            return known
        open_dies = [die.offset]
        offset = die.offset + die.size
        while open_dies and offset < self.end:
            if offset in self._subtree_end:  # a subtree already scanned: skipped whole
                offset = self._subtree_end[offset]
                continue
            entry = self.unit.get_DIE_from_refaddr(offset)
            offset += entry.size
            if entry.is_null():
                self._subtree_end[open_dies.pop()] = offset
            elif entry.has_children:
                open_dies.append(entry.offset)
        for unclosed in open_dies:  # the unit ended first
            self._subtree_end[unclosed] = self.end
        return self._subtree_end[die.offset]

    def walk(self, roots: list[Any], descend: Callable[[Any], bool]) -> Iterator[Any]:
        """``roots`` and, depth first, the children of each DIE for which ``descend`` is
        true; a DIE reached a second time (a sibling pointer into another subtree) stops
        that branch."""
        seen: set[int] = set()
        pending = list(reversed(roots))
        while pending:
            die = pending.pop()
            if die.offset in seen:
                self.warn("DIE reached twice: the walk stops there", die.offset)
                continue
            seen.add(die.offset)
            yield die
            if descend(die):
                pending += reversed(self.children(die))


#: The forms of a reference inside the unit (DWARF 5 7.5.5, class reference).
_UNIT_REFERENCES = frozenset(
    {"DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8", "DW_FORM_ref_udata"}
)


class SourceLines:
    """Source lines and inline chains of one ELF file's DWARF (a separate debug file, or the
    file itself), its sections read once.  ``problems``: a line for each
    damage met that cost some addresses their source (a DIE walk stopped, ...)."""

    def __init__(self, path: str, problems: list[str] | None = None) -> None:
        self.path = path
        self.problems: list[str] = [] if problems is None else problems
        self._dwarf: Any = None
        self._units: dict[int, _Unit | None] = {}
        #: The DIE walkers of units read only for a DIE's parent (by unit offset).
        self._walked: dict[int, _Dies] = {}
        #: (low, high, unit offset) sorted, and the highest end up to each (for bisection).
        self._ranges: list[tuple[int, int, int]] | None = None
        self._reach: list[int] = []
        self._aranges: Any = None
        with ElfReader.open(path) as image:
            try:
                self._dwarf = dwarf_info(image)
                if self._dwarf is not None:
                    self._aranges = self._dwarf.get_aranges()
            except Exception:  # malformed DWARF: no source lines from this file
                self._dwarf = None

    @property
    def available(self) -> bool:
        return self._dwarf is not None

    def frames(self, address: int) -> list[SourceFrame]:
        """The functions at link-time ``address``, innermost (inlined) first, the function
        that holds them last; empty where the DWARF says nothing of it."""
        if self._dwarf is None:
            return []
        try:
            unit = self._unit_at(address)
            if unit is None:
                return []
            return self._frames(unit, address)
        except Exception:  # a malformed unit costs its own addresses only
            return []

    def starts_line(self, address: int) -> bool:
        """Whether a line-table row starts exactly at ``address`` (gdb then prints a frame
        without its address)."""
        try:
            unit = self._unit_at(address)
        except Exception:
            return False
        return unit is not None and unit.row_starts_at(address)

    # -- finding the unit ------------------------------------------------------------------

    def _unit_at(self, address: int) -> _Unit | None:
        offset = None
        if self._aranges is not None:
            try:
                offset = self._aranges.cu_offset_at_addr(address)
            except Exception:
                offset = None
        if offset is None:
            offset = self._unit_by_ranges(address)
        if offset is None:
            return None
        if offset not in self._units:
            self._units[offset] = None  # a unit that fails to read is not read again
            unit = self._dwarf.get_CU_at(offset)
            self._units[offset] = _Unit(self._dwarf, unit, self._dies(unit))
        return self._units[offset]

    def _dies(self, unit: Any) -> _Dies:
        walked = self._walked.get(unit.cu_offset)
        if walked is None:
            walked = self._walked[unit.cu_offset] = _Dies(unit, self.path, self.problems)
        return walked

    def _unit_by_ranges(self, address: int) -> int | None:
        """The first unit (by its ranges' starts) whose ranges hold ``address``."""
        if self._ranges is None:
            self._ranges = []
            for unit in self._dwarf.iter_CUs():
                for low, high in self._die_ranges(unit, unit.get_top_DIE()):
                    self._ranges.append((low, high, unit.cu_offset))
            self._ranges.sort()
            self._reach = list(itertools.accumulate((r[1] for r in self._ranges), max))
        # The ranges that may hold it: from the first reaching past it to the last starting
        # at or below it (one, unless ranges overlap).
        first = bisect.bisect_right(self._reach, address)
        last = bisect.bisect_right(self._ranges, (address, 1 << 64, 0))
        for low, high, offset in self._ranges[first:last]:
            if low <= address < high:
                return offset
        return None

    # -- DIEs --------------------------------------------------------------------------------

    def _die_ranges(self, unit: Any, die: Any) -> list[tuple[int, int]]:
        attributes = die.attributes
        if "DW_AT_low_pc" in attributes and "DW_AT_high_pc" in attributes:
            low = attributes["DW_AT_low_pc"].value
            high = attributes["DW_AT_high_pc"]
            end = high.value if high.form == "DW_FORM_addr" else low + high.value
            return [(low, end)]
        if "DW_AT_ranges" not in attributes:
            return []
        lists = self._dwarf.range_lists()
        if lists is None:
            return []
        base = unit.get_top_DIE().attributes.get("DW_AT_low_pc")
        base_address = base.value if base is not None else 0
        out = []
        for entry in lists.get_range_list_at_offset(attributes["DW_AT_ranges"].value, cu=unit):
            if hasattr(entry, "base_address"):
                base_address = entry.base_address
            elif entry.is_absolute:
                out.append((entry.begin_offset, entry.end_offset))
            else:
                out.append((base_address + entry.begin_offset, base_address + entry.end_offset))
        return out

    def _holds(self, unit: Any, die: Any, address: int) -> bool:
        return any(low <= address < high for low, high in self._die_ranges(unit, die))

    def _functions(self, unit: _Unit) -> tuple[list[int], list[tuple[int, int, Any]]]:
        """The unit's DW_TAG_subprogram entries with code, by their ranges' starts (found
        once per unit, in namespaces and classes too)."""
        if unit.functions is None:
            found: list[tuple[int, int, Any]] = []
            dies = unit.dies
            for die in dies.walk(dies.children(unit.top), _in_scope):
                if die.tag == "DW_TAG_subprogram":
                    found += [(low, high, die) for low, high in self._die_ranges(unit.unit, die)]
            dies.scopes_walked = True
            found.sort(key=lambda entry: entry[0])
            unit.functions = ([entry[0] for entry in found], found)
        return unit.functions

    def _frames(self, unit: _Unit, address: int) -> list[SourceFrame]:
        lows, functions = self._functions(unit)
        holding = [
            entry for entry in functions[: bisect.bisect_right(lows, address)]
            if entry[0] <= address < entry[1]
        ]
        if not holding:
            return []
        chain = [max(holding, key=lambda entry: entry[0])[2]]  # the innermost
        # Down through the inlined subroutines (and the lexical blocks around them) that hold
        # the address: each child list starts after its parent, so the descent moves forward.
        children = list(unit.dies.children(chain[-1]))
        while children:
            die = children.pop(0)
            if die.tag in ("DW_TAG_inlined_subroutine", "DW_TAG_lexical_block") and self._holds(
                unit.unit, die, address
            ):
                if die.tag == "DW_TAG_inlined_subroutine":
                    chain.append(die)
                children = list(unit.dies.children(die))
        file, line = unit.line_at(address)
        language = unit.top.attributes.get("DW_AT_language")
        assembler = language is not None and language.value == _DW_LANG_MIPS_ASSEMBLER
        frames = []
        for depth in range(len(chain) - 1, -1, -1):
            die = chain[depth]
            name, mangled = self._name(die)
            inlined = die.tag != "DW_TAG_subprogram"
            frames.append(SourceFrame(name, mangled, file, line, inlined, assembler))
            call_file = die.attributes.get("DW_AT_call_file")
            call_line = die.attributes.get("DW_AT_call_line")
            if depth and die.tag == "DW_TAG_inlined_subroutine":
                file = None if call_file is None else unit.file(call_file.value - unit.first_file)
                line = None if call_line is None else call_line.value
        return frames

    def _name(self, die: Any) -> tuple[str | None, str | None]:
        """(the name qualified by its namespaces and classes, DW_AT_linkage_name), following
        DW_AT_abstract_origin and DW_AT_specification to the declarations that have them."""
        seen = 0
        name = mangled = None
        while die is not None and seen < 8:
            attributes = die.attributes
            if name is None and "DW_AT_name" in attributes:
                name = self._qualified(die, _text(attributes["DW_AT_name"].value))
            for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
                if mangled is None and key in attributes:
                    mangled = _text(attributes[key].value)
            if name is not None and mangled is not None:
                break
            for key in ("DW_AT_abstract_origin", "DW_AT_specification"):
                if key in attributes:
                    die = die.get_DIE_from_attribute(key)
                    break
            else:
                die = None
            seen += 1
        return name, mangled

    def _qualified(self, die: Any, name: str) -> str:
        """``name`` with the names of the namespaces and classes around ``die``, as gdb's
        ``dwarf2_compute_name`` writes them; an unnamed class (a lambda's) ends the prefix, an
        unnamed namespace is ``(anonymous namespace)``."""
        parts = [name]
        parent = self._parent(die)
        depth = 0
        while parent is not None and parent.tag in _SCOPES and depth < 32:
            scope = parent.attributes.get("DW_AT_name")
            if scope is None:
                if parent.tag != "DW_TAG_namespace":
                    break
                parts.append("(anonymous namespace)")
            else:
                parts.append(_text(scope.value))
            parent = self._parent(parent)
            depth += 1
        return "::".join(reversed(parts))

    def _parent(self, die: Any) -> Any:
        """The parent of ``die``, as a walk of its unit's scopes sets it (pyelftools' own
        search for a parent follows DW_AT_sibling without a guard); None for a DIE that no
        walk reaches.  ``_parent`` is where pyelftools keeps what ``set_parent`` set."""
        if die._parent is None:
            dies = self._dies(die.cu)
            if not dies.scopes_walked:
                dies.scopes_walked = True
                for _ in dies.walk(dies.children(die.cu.get_top_DIE()), _in_scope):
                    pass
        return die._parent


_SCOPES = ("DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type",
           "DW_TAG_union_type")


def _in_scope(die: Any) -> bool:
    """Whether a walk for functions goes into ``die`` (a namespace or a class)."""
    return die.tag in _SCOPES


def source_lines(path: str, problems: list[str] | None = None) -> SourceLines | None:
    """The DWARF line and inline information of the ELF file at ``path``; None if it has no
    ``.debug_info`` or cannot be read.  ``problems`` gets the damage met on the way
    (:attr:`SourceLines.problems`)."""
    try:
        lines = SourceLines(path, problems)
    except SFrameError:
        return None
    return lines if lines.available else None


#: The sections pyelftools' DWARFInfo takes, by the names of its arguments (its ELFFile reads
#: the same ones, ``get_dwarf_info``).
_DWARF_SECTIONS = {
    "debug_info_sec": ".debug_info", "debug_aranges_sec": ".debug_aranges",
    "debug_abbrev_sec": ".debug_abbrev", "debug_str_sec": ".debug_str",
    "debug_line_sec": ".debug_line", "debug_frame_sec": ".debug_frame",
    "debug_loc_sec": ".debug_loc", "debug_ranges_sec": ".debug_ranges",
    "debug_pubtypes_sec": ".debug_pubtypes", "debug_pubnames_sec": ".debug_pubnames",
    "debug_addr_sec": ".debug_addr", "debug_str_offsets_sec": ".debug_str_offsets",
    "debug_line_str_sec": ".debug_line_str", "debug_loclists_sec": ".debug_loclists",
    "debug_rnglists_sec": ".debug_rnglists", "debug_sup_sec": ".debug_sup",
    "gnu_debugaltlink_sec": ".gnu_debugaltlink", "debug_types_sec": ".debug_types",
}  # fmt: skip


def dwarf_info(image: ElfReader) -> Any:
    """pyelftools' ``DWARFInfo`` of the DWARF sections of ``image``, or None without
    ``.debug_info``.  The sections are read here: decompressed (``SHF_COMPRESSED``, or, as gdb
    reads each one, ``.zdebug_*`` in the GNU form, whose contents start with ``ZLIB`` and the
    size, big-endian u64), and in a relocatable object relocated
    (:func:`pysframe.elf.relocation.relocated`); pyelftools parses the DWARF in them, lazily:
    malformed DWARF raises when read."""
    from elftools.dwarf.dwarfinfo import DebugSectionDescriptor, DwarfConfig, DWARFInfo

    def descriptor(name: str) -> DebugSectionDescriptor | None:
        gnu = image.section(".z" + name[1:])
        section = gnu or image.section(name)
        if section is None:
            return None
        data = section.data()
        if gnu is not None:
            if data[:4] != b"ZLIB" or len(data) < 12:
                raise ElfError("no ZLIB header", path=image.path, section=section.name)
            (size,) = struct.unpack_from(">Q", data, 4)
            data = inflate(data[12:], size, len(data), path=image.path, section=section.name)
        data = relocated(image, section, data)
        return DebugSectionDescriptor(io.BytesIO(data), name, section.offset, len(data),
                                      section.address)

    sections = {argument: descriptor(name) for argument, name in _DWARF_SECTIONS.items()}
    if sections["debug_info_sec"] is None:
        return None
    config = DwarfConfig(
        little_endian=not image.big_endian,
        machine_arch=image.machine_name,
        default_address_size=image.elfclass // 8,
    )
    return DWARFInfo(config=config, eh_frame_sec=None, **sections)


__all__ = ["SourceFrame", "SourceLines", "dwarf_info", "source_lines"]
