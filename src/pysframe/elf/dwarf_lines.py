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

The DWARF is read with pyelftools (:meth:`pysframe.elf.image.ElfImage.dwarf`).  Malformed
DWARF gives no source for the addresses it covers, never an exception.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from typing import Any

from ..errors import SFrameError
from .image import ElfImage

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
    """One compilation unit: its line rows, sorted, and its DIEs."""

    def __init__(self, dwarf: Any, unit: Any) -> None:
        self.unit = unit
        self.top = unit.get_top_DIE()
        self.rows: list[tuple[int, int, int, bool]] = []  # (address, file index, line, end)
        self.files: list[str | None] = []
        self._addresses: list[int] = []
        #: Starts and (low, high, DIE) of the unit's functions, once looked for.
        self.functions: tuple[list[int], list[tuple[int, int, Any]]] | None = None
        #: The number of the first file: DWARF 5 numbers files from 0, earlier versions from 1.
        self.first_file = 0 if unit.header.version >= 5 else 1
        program = dwarf.line_program_for_CU(unit)
        if program is None:
            return
        version = program.header.version
        directories = [_text(d) for d in program.header.get("include_directory", [])]
        for entry in program.header.get("file_entry", []):
            name = _text(entry.name)
            directory = entry.dir_index
            # DWARF 5 numbers directories from 0 (0: the compilation's, joined too); earlier
            # versions from 1, with 0 meaning the compilation directory, left out.  gdb's
            # file_file_name does the same.
            base = directory if version >= 5 else directory - 1
            if not os.path.isabs(name) and 0 <= base < len(directories):
                name = os.path.join(directories[base], name)
            self.files.append(name)
        first = 0 if version >= 5 else 1
        rows = []
        for entry in program.get_entries():
            state = entry.state
            if state is None:
                continue
            rows.append((state.address, state.file - first, state.line, state.end_sequence))
        # Stable: within one address, the last row is the one that applies (gdb keeps the
        # last line of several at one address in a sequence).
        rows.sort(key=lambda r: r[0])
        self.rows = rows
        self._addresses = [r[0] for r in rows]

    def line_at(self, address: int) -> tuple[str | None, int | None]:
        if not self.rows:
            return None, None
        index = bisect.bisect_right(self._addresses, address) - 1
        if index < 0 or self.rows[index][3]:
            return None, None
        _, file_index, line, _ = self.rows[index]
        return self.file(file_index), line

    def file(self, index: int) -> str | None:
        return self.files[index] if 0 <= index < len(self.files) else None

    def row_starts_at(self, address: int) -> bool:
        index = bisect.bisect_left(self._addresses, address) if self.rows else 0
        return index < len(self.rows) and self.rows[index][0] == address


class SourceLines:
    """Source lines and inline chains of one ELF file's DWARF (a separate debug file, or the
    file itself).  Keeps the file open: :meth:`close` it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._image = ElfImage.open(path)
        self._dwarf: Any = None
        self._units: dict[int, _Unit | None] = {}
        self._ranges: list[tuple[int, int, int]] | None = None  # (low, high, unit offset)
        self._aranges: Any = None
        try:
            self._dwarf = self._image.dwarf()
            if self._dwarf is not None:
                self._aranges = self._dwarf.get_aranges()
        except Exception:  # malformed DWARF: no source lines from this file
            self._dwarf = None

    def close(self) -> None:
        self._image.close()

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
            self._units[offset] = _Unit(self._dwarf, self._dwarf.get_CU_at(offset))
        return self._units[offset]

    def _unit_by_ranges(self, address: int) -> int | None:
        if self._ranges is None:
            self._ranges = []
            for unit in self._dwarf.iter_CUs():
                for low, high in self._die_ranges(unit, unit.get_top_DIE()):
                    self._ranges.append((low, high, unit.cu_offset))
            self._ranges.sort()
        for low, high, offset in self._ranges:
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
            pending = list(unit.top.iter_children())
            while pending:
                die = pending.pop()
                if die.tag == "DW_TAG_subprogram":
                    found += [(low, high, die) for low, high in self._die_ranges(unit.unit, die)]
                elif die.tag in _SCOPES:
                    pending += die.iter_children()
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
        # the address.
        children = list(chain[-1].iter_children())
        while children:
            die = children.pop(0)
            if die.tag in ("DW_TAG_inlined_subroutine", "DW_TAG_lexical_block") and self._holds(
                unit.unit, die, address
            ):
                if die.tag == "DW_TAG_inlined_subroutine":
                    chain.append(die)
                children = list(die.iter_children())
        if not chain:
            return []
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
                name = _qualified(die, _text(attributes["DW_AT_name"].value))
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


_SCOPES = ("DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type",
           "DW_TAG_union_type")


def _qualified(die: Any, name: str) -> str:
    """``name`` with the names of the namespaces and classes around ``die``, as gdb's
    ``dwarf2_compute_name`` writes them; an unnamed class (a lambda's) ends the prefix, an
    unnamed namespace is ``(anonymous namespace)``."""
    parts = [name]
    parent = die.get_parent()
    depth = 0
    while parent is not None and parent.tag in _SCOPES and depth < 32:
        scope = parent.attributes.get("DW_AT_name")
        if scope is None:
            if parent.tag != "DW_TAG_namespace":
                break
            parts.append("(anonymous namespace)")
        else:
            parts.append(_text(scope.value))
        parent = parent.get_parent()
        depth += 1
    return "::".join(reversed(parts))


def source_lines(path: str) -> SourceLines | None:
    """The DWARF line and inline information of the ELF file at ``path``; None if it has no
    ``.debug_info`` or cannot be read."""
    try:
        lines = SourceLines(path)
    except SFrameError:
        return None
    if not lines.available:
        lines.close()
        return None
    return lines


__all__ = ["SourceFrame", "SourceLines", "source_lines"]
