"""DWARF debugging information entries read straight from the section bytes (DWARF 5
sections 7.5.1-7.5.6; versions 2 to 5), for readers that want a few attributes of many DIEs.

* :func:`unit_headers`: the units of ``.debug_info`` (7.5.1: unit_length, version, unit_type,
  debug_abbrev_offset, address_size), each with where its first DIE and its end are;
* :class:`Abbreviations`: a unit's abbreviation table (7.5.3), each declaration with the size
  its attributes take when all of their forms have a fixed size (most DIEs are skipped in one
  addition);
* :class:`DieReader`: a DIE's attributes (7.5.4), the values of the forms (7.5.6) that name
  strings, addresses, constants and references made plain: a string is ``str``, a reference
  an offset in ``.debug_info``, ``DW_FORM_implicit_const`` its abbreviation's value.

Section bytes come decompressed from :class:`pysframe.elf.reader.ElfReader`.  Malformed data
raises :class:`pysframe.errors.ElfError` (a read past a section's end, an unknown form or
abbreviation); callers decide what it costs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from ..errors import ElfError
from .line_program import read_sleb, read_uleb
from .reader import ElfReader

_INFO = ".debug_info"
_MASK = (1 << 64) - 1

# Tags (DWARF 5 7.5.4, table 7.3).
DW_TAG_entry_point = 0x03
DW_TAG_lexical_block = 0x0B
DW_TAG_compile_unit = 0x11
DW_TAG_inlined_subroutine = 0x1D
DW_TAG_module = 0x1E
DW_TAG_subprogram = 0x2E
DW_TAG_namespace = 0x39
DW_TAG_partial_unit = 0x3C
DW_TAG_skeleton_unit = 0x4A

# Attributes (table 7.5).
DW_AT_sibling = 0x01
DW_AT_name = 0x03
DW_AT_stmt_list = 0x10
DW_AT_low_pc = 0x11
DW_AT_high_pc = 0x12
DW_AT_language = 0x13
DW_AT_comp_dir = 0x1B
DW_AT_abstract_origin = 0x31
DW_AT_specification = 0x47
DW_AT_ranges = 0x55
DW_AT_call_file = 0x58
DW_AT_call_line = 0x59
DW_AT_linkage_name = 0x6E
DW_AT_str_offsets_base = 0x72
DW_AT_addr_base = 0x73
DW_AT_rnglists_base = 0x74
DW_AT_MIPS_linkage_name = 0x2007

# Forms (table 7.6), and the GNU ones for dwz and split DWARF.
DW_FORM_addr = 0x01
DW_FORM_block2 = 0x03
DW_FORM_block4 = 0x04
DW_FORM_data2 = 0x05
DW_FORM_data4 = 0x06
DW_FORM_data8 = 0x07
DW_FORM_string = 0x08
DW_FORM_block = 0x09
DW_FORM_block1 = 0x0A
DW_FORM_data1 = 0x0B
DW_FORM_flag = 0x0C
DW_FORM_sdata = 0x0D
DW_FORM_strp = 0x0E
DW_FORM_udata = 0x0F
DW_FORM_ref_addr = 0x10
DW_FORM_ref1 = 0x11
DW_FORM_ref2 = 0x12
DW_FORM_ref4 = 0x13
DW_FORM_ref8 = 0x14
DW_FORM_ref_udata = 0x15
DW_FORM_indirect = 0x16
DW_FORM_sec_offset = 0x17
DW_FORM_exprloc = 0x18
DW_FORM_flag_present = 0x19
DW_FORM_strx = 0x1A
DW_FORM_addrx = 0x1B
DW_FORM_ref_sup4 = 0x1C
DW_FORM_strp_sup = 0x1D
DW_FORM_data16 = 0x1E
DW_FORM_line_strp = 0x1F
DW_FORM_ref_sig8 = 0x20
DW_FORM_implicit_const = 0x21
DW_FORM_loclistx = 0x22
DW_FORM_rnglistx = 0x23
DW_FORM_ref_sup8 = 0x24
DW_FORM_strx1, DW_FORM_strx2, DW_FORM_strx3, DW_FORM_strx4 = 0x25, 0x26, 0x27, 0x28
DW_FORM_addrx1, DW_FORM_addrx2, DW_FORM_addrx3, DW_FORM_addrx4 = 0x29, 0x2A, 0x2B, 0x2C
DW_FORM_GNU_addr_index = 0x1F01
DW_FORM_GNU_str_index = 0x1F02
DW_FORM_GNU_ref_alt = 0x1F20
DW_FORM_GNU_strp_alt = 0x1F21

# Unit types (table 7.2).
DW_UT_skeleton, DW_UT_split_compile = 0x04, 0x05
DW_UT_type, DW_UT_split_type = 0x02, 0x06

#: Forms of a fixed size: bytes, where -1 is the unit's offset size and -2 its address size.
_FIXED: dict[int, int] = {
    DW_FORM_addr: -2, DW_FORM_data1: 1, DW_FORM_data2: 2, DW_FORM_data4: 4, DW_FORM_data8: 8,
    DW_FORM_data16: 16, DW_FORM_flag: 1, DW_FORM_flag_present: 0, DW_FORM_strp: -1,
    DW_FORM_line_strp: -1, DW_FORM_strp_sup: -1, DW_FORM_sec_offset: -1, DW_FORM_ref1: 1,
    DW_FORM_ref2: 2, DW_FORM_ref4: 4, DW_FORM_ref8: 8, DW_FORM_ref_sig8: 8, DW_FORM_ref_sup4: 4,
    DW_FORM_ref_sup8: 8, DW_FORM_implicit_const: 0, DW_FORM_strx1: 1, DW_FORM_strx2: 2,
    DW_FORM_strx3: 3, DW_FORM_strx4: 4, DW_FORM_addrx1: 1, DW_FORM_addrx2: 2,
    DW_FORM_addrx3: 3, DW_FORM_addrx4: 4, DW_FORM_GNU_ref_alt: -1, DW_FORM_GNU_strp_alt: -1,
}  # fmt: skip
#: Forms that are one LEB128 number.
_LEB = frozenset({
    DW_FORM_sdata, DW_FORM_udata, DW_FORM_ref_udata, DW_FORM_strx, DW_FORM_addrx,
    DW_FORM_loclistx, DW_FORM_rnglistx, DW_FORM_GNU_addr_index, DW_FORM_GNU_str_index,
})  # fmt: skip
#: Forms that are a length, then that many bytes: the length's size (0: a ULEB128).
_BLOCKS = {DW_FORM_block1: 1, DW_FORM_block2: 2, DW_FORM_block4: 4, DW_FORM_block: 0,
           DW_FORM_exprloc: 0}  # fmt: skip
#: Forms of a reference inside the unit (an offset from the unit's header).
UNIT_REFERENCES = frozenset(
    {DW_FORM_ref1, DW_FORM_ref2, DW_FORM_ref4, DW_FORM_ref8, DW_FORM_ref_udata}
)


@dataclass(frozen=True, slots=True)
class UnitHeader:
    """A unit of ``.debug_info`` (DWARF 5 7.5.1): offsets in the section."""

    offset: int
    #: Where the next unit starts.
    end: int
    version: int
    unit_type: int
    address_size: int
    #: 4 (32-bit DWARF) or 8 (64-bit DWARF).
    offset_size: int
    abbrev_offset: int
    #: Where its first DIE (the unit's own) is.
    die_offset: int


@dataclass(frozen=True, slots=True)
class Abbreviation:
    """One abbreviation declaration (DWARF 5 7.5.3): the tag, whether DIEs of it have
    children, their attributes as (attribute, form, implicit constant), and ``size``: the
    bytes the attributes take when every form has a fixed size for the unit (else -1)."""

    tag: int
    children: bool
    attributes: tuple[tuple[int, int, int], ...]
    size: int


def unit_headers(info: bytes, little: bool = True) -> list[UnitHeader]:
    """The units of ``.debug_info`` in section order; ElfError at a header that does not fit
    (the units before it are kept by nobody: the section is unreadable from there)."""
    order: Literal["little", "big"] = "little" if little else "big"
    out: list[UnitHeader] = []
    pos, size = 0, len(info)
    while pos + 4 <= size:
        start = pos
        length = int.from_bytes(info[pos : pos + 4], order)
        offset_size, pos = 4, pos + 4
        if length == 0xFFFFFFFF:
            length = int.from_bytes(info[pos : pos + 8], order)
            offset_size, pos = 8, pos + 8
        end = pos + length
        if length < 2 or end > size:
            raise ElfError(f"unit of {length:#x} bytes runs past the section", start, section=_INFO)
        version = int.from_bytes(info[pos : pos + 2], order)
        pos += 2
        unit_type = 0
        if version >= 5:
            unit_type, address_size = info[pos], info[pos + 1]
            abbrev = int.from_bytes(info[pos + 2 : pos + 2 + offset_size], order)
            pos += 2 + offset_size
            if unit_type in (DW_UT_skeleton, DW_UT_split_compile):
                pos += 8  # dwo_id
            elif unit_type in (DW_UT_type, DW_UT_split_type):
                pos += 8 + offset_size  # type_signature, type_offset
        elif version >= 2:
            abbrev = int.from_bytes(info[pos : pos + offset_size], order)
            address_size = info[pos + offset_size]
            pos += offset_size + 1
        else:
            raise ElfError(f"unit of DWARF version {version}", start, section=_INFO)
        if pos > end:
            raise ElfError("unit header longer than its unit", start, section=_INFO)
        out.append(UnitHeader(start, end, version, unit_type, address_size, offset_size,
                              abbrev, pos))  # fmt: skip
        pos = end
    return out


def address_ranges(data: bytes, little: bool = True) -> list[tuple[int, int, int]]:
    """The ranges ``.debug_aranges`` gives (DWARF 5 6.1.2): (low, high, unit offset) in
    section order, empty ranges left out; ElfError at a set that does not fit."""
    order: Literal["little", "big"] = "little" if little else "big"
    out: list[tuple[int, int, int]] = []
    pos, size = 0, len(data)
    while pos + 4 <= size:
        start = pos
        length = int.from_bytes(data[pos : pos + 4], order)
        offset_size, pos = 4, pos + 4
        if length == 0xFFFFFFFF:
            length = int.from_bytes(data[pos : pos + 8], order)
            offset_size, pos = 8, pos + 8
        end = pos + length
        if end > size or length < 4 + offset_size:
            raise ElfError("address range set runs past the section", start,
                           section=".debug_aranges")  # fmt: skip
        unit = int.from_bytes(data[pos + 2 : pos + 2 + offset_size], order)
        address_size = data[pos + 2 + offset_size]
        pos += 4 + offset_size  # version, debug_info_offset, address_size, segment_selector_size
        if address_size not in (4, 8):
            raise ElfError(f"address range set of {address_size}-byte addresses", start,
                           section=".debug_aranges")  # fmt: skip
        pos = start + -(-(pos - start) // (2 * address_size)) * (2 * address_size)
        while pos + 2 * address_size <= end:
            low = int.from_bytes(data[pos : pos + address_size], order)
            span = int.from_bytes(data[pos + address_size : pos + 2 * address_size], order)
            pos += 2 * address_size
            if low == 0 and span == 0:
                break
            if span:
                out.append((low, low + span, unit))
        pos = end
    return out


class Abbreviations(dict[int, Abbreviation]):
    """The abbreviation table at an offset of ``.debug_abbrev``, by code, sized for a unit
    (DWARF 5 7.5.3), read only as far as the codes asked for: a unit's own DIE needs the
    first declaration of a table of thousands.  ElfError when it runs past the section."""

    def __init__(self, data: bytes, offset: int, unit: UnitHeader) -> None:
        super().__init__()
        self.data, self.offset, self.unit = data, offset, unit
        self._pos: int | None = offset  # where reading goes on; None: the table's end

    def __missing__(self, code: int) -> Abbreviation:
        while self._pos is not None:
            found = self._next()
            if found == code:
                return self[code]
        raise KeyError(code)

    def _next(self) -> int:
        """Read the next declaration; its code (0 at the table's end)."""
        data, pos, unit = self.data, self._pos or 0, self.unit
        end = len(data)
        try:
            code, pos = read_uleb(data, pos, end)
            if code == 0:
                self._pos = None
                return 0
            tag, pos = read_uleb(data, pos, end)
            children = data[pos] != 0
            pos += 1
            attributes = []
            size = 0
            while True:
                name, pos = read_uleb(data, pos, end)
                form, pos = read_uleb(data, pos, end)
                if name == 0 and form == 0:
                    break
                const = 0
                if form == DW_FORM_implicit_const:
                    const, pos = read_sleb(data, pos, end)
                attributes.append((name, form, const))
                fixed = _FIXED.get(form)
                if form == DW_FORM_ref_addr:
                    fixed = -2 if unit.version == 2 else -1
                if fixed is None or size < 0:
                    size = -1
                else:
                    size += unit.offset_size if fixed == -1 else (
                        unit.address_size if fixed == -2 else fixed
                    )
        except IndexError:
            raise ElfError("abbreviation table runs past its end", self.offset,
                           section=".debug_abbrev") from None  # fmt: skip
        self._pos = pos
        if code not in self:  # the first declaration of a code counts
            self[code] = Abbreviation(tag, children, tuple(attributes), size)
        return code


@dataclass(slots=True)
class DebugSections:
    """The ``.debug_*`` sections of one ELF file, each read (decompressed) when first asked
    for; a section the file lacks is empty."""

    reader: ElfReader
    _data: dict[str, bytes] = field(default_factory=dict)

    def get(self, name: str) -> bytes:
        found = self._data.get(name)
        if found is None:
            section = self.reader.section(name)
            found = self._data[name] = b"" if section is None else self.reader.section_data(section)
        return found

    @property
    def little(self) -> bool:
        return not self.reader.big_endian


class DieReader:
    """The DIEs of one unit: attribute values (:meth:`attributes`) and skipping
    (:meth:`skip`).  ``bases``: DW_AT_str_offsets_base and DW_AT_addr_base, set from the unit's
    own DIE (:meth:`read_bases`) so that strx and addrx forms resolve."""

    def __init__(self, sections: DebugSections, unit: UnitHeader) -> None:
        self.sections = sections
        self.unit = unit
        self.info = sections.get(_INFO)
        self.order: Literal["little", "big"] = "little" if sections.little else "big"
        self.abbrevs = Abbreviations(sections.get(".debug_abbrev"), unit.abbrev_offset, unit)
        self._sizes: dict[int, tuple[int, ...]] = {}
        self.str_offsets_base = 8 if unit.offset_size == 4 else 16
        self.addr_base = 8 if unit.offset_size == 4 else 16

    def read_bases(self, values: dict[int, tuple[int, object]]) -> None:
        for attribute, slot in ((DW_AT_str_offsets_base, "str_offsets_base"),
                                (DW_AT_addr_base, "addr_base")):  # fmt: skip
            found = values.get(attribute)
            if found is not None and isinstance(found[1], int):
                setattr(self, slot, found[1])

    def abbreviation(self, code: int, offset: int) -> Abbreviation:
        try:
            return self.abbrevs[code]
        except KeyError:
            raise ElfError(f"abbreviation {code} is not in the unit's table", offset,
                           section=_INFO) from None  # fmt: skip

    def attributes(
        self, offset: int
    ) -> tuple[Abbreviation | None, dict[int, tuple[int, object]], int]:
        """(abbreviation, {attribute: (form, value)}, the offset after the DIE) of the DIE at
        ``offset``; no abbreviation for a null entry."""
        try:
            code, pos = read_uleb(self.info, offset, len(self.info))
            if code == 0:
                return None, {}, pos
            abbrev = self.abbreviation(code, offset)
            values: dict[int, tuple[int, object]] = {}
            for name, form, const in abbrev.attributes:
                value, pos = self.value(form, const, pos)
                values[name] = (form, value)
            return abbrev, values, pos
        except IndexError:
            raise ElfError("DIE runs past the section", offset, section=_INFO) from None

    def sizes(self, abbrev: Abbreviation) -> tuple[int, ...]:
        """The size of each attribute of ``abbrev`` in this unit, -1 where it varies."""
        found = self._sizes.get(id(abbrev))
        if found is None:
            unit = self.unit
            out = []
            for _name, form, _const in abbrev.attributes:
                fixed = _FIXED.get(form)
                if form == DW_FORM_ref_addr:
                    fixed = -2 if unit.version == 2 else -1
                out.append(-3 if fixed is None else unit.offset_size if fixed == -1 else (
                    unit.address_size if fixed == -2 else fixed
                ))
            found = self._sizes[id(abbrev)] = tuple(-1 if size == -3 else size for size in out)
        return found

    def sibling(self, abbrev: Abbreviation, pos: int) -> tuple[int | None, int]:
        """(DW_AT_sibling's offset or None, the offset after the attributes) of a DIE of
        ``abbrev`` whose attributes start at ``pos``."""
        found = None
        for (name, form, const), size in zip(abbrev.attributes, self.sizes(abbrev), strict=True):
            if name == DW_AT_sibling:
                value, pos = self.value(form, const, pos)
                found = value if isinstance(value, int) else None
            elif size >= 0:
                pos += size
            else:
                _, pos = self.value(form, const, pos)
        return found, pos

    def skip(self, abbrev: Abbreviation, pos: int) -> int:
        """The offset after the attributes of a DIE of ``abbrev`` that start at ``pos``."""
        if abbrev.size >= 0:
            return pos + abbrev.size
        info = self.info
        for _name, form, _const in abbrev.attributes:
            fixed = _FIXED.get(form)
            if fixed is not None:
                pos += self.unit.offset_size if fixed == -1 else (
                    self.unit.address_size if fixed == -2 else fixed
                )
            elif form in _LEB:
                while info[pos] & 0x80:
                    pos += 1
                pos += 1
            elif form == DW_FORM_string:
                pos = info.index(b"\0", pos) + 1
            else:
                _, pos = self.value(form, 0, pos)
        return pos

    def value(self, form: int, const: int, pos: int) -> tuple[object, int]:
        """(value, next position) of an attribute of ``form`` at ``pos``."""
        info, unit = self.info, self.unit
        if form == DW_FORM_indirect:
            form, pos = read_uleb(info, pos, len(info))
            if form == DW_FORM_implicit_const:
                const, pos = read_sleb(info, pos, len(info))
        fixed = _FIXED.get(form)
        if form == DW_FORM_ref_addr:
            fixed = unit.address_size if unit.version == 2 else unit.offset_size
        if form == DW_FORM_implicit_const:
            return const, pos
        if form == DW_FORM_flag_present:
            return 1, pos
        if fixed is not None:
            size = (
                unit.offset_size if fixed == -1 else unit.address_size if fixed == -2 else fixed
            )
            if pos + size > len(info):
                raise IndexError(pos)
            number = int.from_bytes(info[pos : pos + size], self.order)
            return self._resolved(form, number), pos + size
        if form in _LEB:
            if form == DW_FORM_sdata:
                return read_sleb(info, pos, len(info))
            number, pos = read_uleb(info, pos, len(info))
            return self._resolved(form, number), pos
        if form == DW_FORM_string:
            end = info.index(b"\0", pos)
            return os.fsdecode(info[pos:end]), end + 1
        length_size = _BLOCKS.get(form)
        if length_size is None:
            raise ElfError(f"unknown attribute form {form:#x}", pos, section=_INFO)
        if length_size:
            length = int.from_bytes(info[pos : pos + length_size], self.order)
            pos += length_size
        else:
            length, pos = read_uleb(info, pos, len(info))
        if pos + length > len(info):
            raise IndexError(pos)
        return info[pos : pos + length], pos + length

    def _resolved(self, form: int, number: int) -> object:
        """A form's number made plain: strings read, references made section offsets,
        indexes looked up."""
        if form in UNIT_REFERENCES:
            return self.unit.offset + number
        if form == DW_FORM_strp:
            return self._string(".debug_str", number)
        if form == DW_FORM_line_strp:
            return self._string(".debug_line_str", number)
        if form in (DW_FORM_strx, DW_FORM_strx1, DW_FORM_strx2, DW_FORM_strx3, DW_FORM_strx4,
                    DW_FORM_GNU_str_index):  # fmt: skip
            return self._string(".debug_str", self._indexed(".debug_str_offsets",
                                                           self.str_offsets_base, number,
                                                           self.unit.offset_size))  # fmt: skip
        if form in (DW_FORM_addrx, DW_FORM_addrx1, DW_FORM_addrx2, DW_FORM_addrx3,
                    DW_FORM_addrx4, DW_FORM_GNU_addr_index):  # fmt: skip
            return self._indexed(".debug_addr", self.addr_base, number, self.unit.address_size)
        return number

    def _indexed(self, section: str, base: int, index: int, size: int) -> int:
        data = self.sections.get(section)
        at = base + index * size
        if at + size > len(data):
            raise ElfError(f"index {index} past the end of {section}", section=_INFO)
        return int.from_bytes(data[at : at + size], self.order)

    def _string(self, section: str, offset: int) -> str:
        data = self.sections.get(section)
        end = data.find(b"\0", offset)
        if offset >= len(data) or end < 0:
            raise ElfError(f"string offset {offset:#x} past the end of {section}", section=_INFO)
        return os.fsdecode(data[offset:end])


__all__ = [
    "Abbreviation",
    "Abbreviations",
    "DebugSections",
    "DieReader",
    "UnitHeader",
    "address_ranges",
    "unit_headers",
]
