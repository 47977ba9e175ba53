"""DWARF debugging information read straight from the section bytes (DWARF 5 sections 7.5 and
2.17; versions 2 to 5): the one reader of ``.debug_info`` and the sections it refers to.  gdb's
rules (:mod:`pysframe.elf.dwarf_lines`) and BFD's (:mod:`pysframe.elf.addr2line`) are layers
on it.

* :class:`DebugSections`: the ``.debug_*`` sections, decompressed and, in an object, relocated;
* :class:`Units`: the units of ``.debug_info`` (7.5.1: unit_length, version, unit_type,
  debug_abbrev_offset, address_size), each with where its first DIE and its end are, and the
  unit that holds an offset;
* :class:`Abbreviations`: a unit's abbreviation table (7.5.3), each declaration with the size
  its attributes take when all of their forms have a fixed size (most DIEs are skipped in one
  addition);
* :class:`DieReader`: a DIE's attributes (7.5.4), the values of the forms (7.5.6) that name
  strings, addresses, constants and references made plain: a string is ``str``, a reference
  an offset in ``.debug_info``, ``DW_FORM_implicit_const`` its abbreviation's value, and the
  indexed forms (strx, addrx, rnglistx) looked up in ``.debug_str_offsets``, ``.debug_addr``
  and ``.debug_rnglists`` from the bases the unit's own DIE gives;
* :class:`DieTree`: the DIEs of a unit as a tree, walked so that no damage makes a walk
  endless.

:mod:`pysframe.elf.dwarf_ranges` reads the addresses units and DIEs cover.

Malformed data raises :class:`pysframe.errors.ElfError` (a read past a section's end, an
unknown form, abbreviation or range list entry); callers decide what it costs.  No count read
from the data allocates more than the bytes that hold it, and no walk goes back.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Callable, Iterator
from typing import Literal

from ..dataclass import dataclass
from ..errors import ElfError
from .line_program import read_sleb, read_uleb
from .reader import ElfReader, inflate
from .relocation import relocated

_INFO = ".debug_info"
_MASK = (1 << 64) - 1

# Tags (DWARF 5 7.5.4, table 7.3).
DW_TAG_class_type = 0x02
DW_TAG_entry_point = 0x03
DW_TAG_lexical_block = 0x0B
DW_TAG_compile_unit = 0x11
DW_TAG_structure_type = 0x13
DW_TAG_union_type = 0x17
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
    children, their attributes as (attribute, form, implicit constant), the bytes each
    attribute takes in the unit (-1 where its form's size varies), and ``size``: the bytes
    all of them take when every form has a fixed size (else -1)."""

    tag: int
    children: bool
    attributes: tuple[tuple[int, int, int], ...]
    sizes: tuple[int, ...]
    size: int


def _fixed_size(form: int, unit: UnitHeader) -> int:
    """The bytes an attribute of ``form`` takes in ``unit``, -1 where it varies."""
    if form == DW_FORM_ref_addr:  # an address in DWARF 2, an offset since (7.5.5)
        return unit.address_size if unit.version == 2 else unit.offset_size
    fixed = _FIXED.get(form)
    if fixed is None:
        return -1
    return unit.offset_size if fixed == -1 else unit.address_size if fixed == -2 else fixed


def read_unit_header(info: bytes, pos: int, little: bool = True) -> UnitHeader:
    """The header of the unit at ``pos`` of ``.debug_info``; ElfError when it does not fit."""
    order: Literal["little", "big"] = "little" if little else "big"
    start, size = pos, len(info)
    try:
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
    except IndexError:
        raise ElfError("unit header runs past the section", start, section=_INFO) from None
    if pos > end:
        raise ElfError("unit header longer than its unit", start, section=_INFO)
    return UnitHeader(start, end, version, unit_type, address_size, offset_size, abbrev, pos)


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
            sizes = []
            while True:
                name, pos = read_uleb(data, pos, end)
                form, pos = read_uleb(data, pos, end)
                if name == 0 and form == 0:
                    break
                const = 0
                if form == DW_FORM_implicit_const:
                    const, pos = read_sleb(data, pos, end)
                attributes.append((name, form, const))
                sizes.append(_fixed_size(form, unit))
        except IndexError:
            raise ElfError("abbreviation table runs past its end", self.offset,
                           section=".debug_abbrev") from None  # fmt: skip
        self._pos = pos
        if code not in self:  # the first declaration of a code counts
            size = -1 if -1 in sizes else sum(sizes)
            self[code] = Abbreviation(tag, children, tuple(attributes), tuple(sizes), size)
        return code


#: The sections the readers here take.
DEBUG_SECTIONS = (
    _INFO, ".debug_abbrev", ".debug_str", ".debug_line", ".debug_line_str", ".debug_aranges",
    ".debug_ranges", ".debug_rnglists", ".debug_addr", ".debug_str_offsets",
)  # fmt: skip


class DebugSections:
    """The ``.debug_*`` sections of one ELF file as gdb and BFD read them: decompressed
    (``SHF_COMPRESSED``, or, as both read each one, ``.zdebug_*`` in the GNU form, whose
    contents start with ``ZLIB`` and the size, big-endian u64), and in a relocatable object
    relocated (:func:`pysframe.elf.relocation.relocated`); a section the file lacks is empty.
    Each is read when first asked for, or all at once (:meth:`read`, after which the file may
    be closed).  ElfError for a section that cannot be read."""

    __slots__ = ("_data", "_reader", "little")

    def __init__(self, reader: ElfReader) -> None:
        self._reader: ElfReader | None = reader
        self._data: dict[str, bytes] = {}
        self.little = not reader.big_endian

    @classmethod
    def read(cls, reader: ElfReader) -> DebugSections:
        """The sections the readers here take (:data:`DEBUG_SECTIONS`), read now."""
        sections = cls(reader)
        for name in DEBUG_SECTIONS:
            sections.get(name)
        sections._reader = None
        return sections

    def get(self, name: str) -> bytes:
        found = self._data.get(name)
        if found is None:
            found = self._data[name] = b"" if self._reader is None else self._load(name)
        return found

    def _load(self, name: str) -> bytes:
        image = self._reader
        assert image is not None
        gnu = image.section(".z" + name[1:])
        section = gnu or image.section(name)
        if section is None:
            return b""
        data = image.section_data(section)
        if gnu is not None:
            if data[:4] != b"ZLIB" or len(data) < 12:
                raise ElfError("no ZLIB header", path=image.path, section=section.name)
            (size,) = struct.unpack_from(">Q", data, 4)
            data = inflate(data[12:], size, len(data), path=image.path, section=section.name)
        return relocated(image, section, data)

    def string(self, name: str, offset: int) -> str:
        """The NUL-terminated string at ``offset`` of section ``name``."""
        data = self.get(name)
        end = data.find(b"\0", offset)
        if offset >= len(data) or end < 0:
            raise ElfError(f"string offset {offset:#x} past the end of {name}", section=_INFO)
        return os.fsdecode(data[offset:end])

    def line_string(self, form: int, offset: int) -> str:
        """A name in a line program's header (DWARF 5 6.2.4.1): DW_FORM_line_strp in
        ``.debug_line_str``, DW_FORM_strp in ``.debug_str``."""
        return self.string(".debug_line_str" if form == DW_FORM_line_strp else ".debug_str",
                           offset)  # fmt: skip


class Units:
    """The units of one file's ``.debug_info``: their headers, read once in section order up
    to the first that does not fit (``error`` says why; as BFD's stash_comp_unit, none after
    it is trusted), a :class:`DieReader` for each, and the unit an offset is in."""

    def __init__(self, sections: DebugSections) -> None:
        self.sections = sections
        self.error: ElfError | None = None
        self._headers: list[UnitHeader] | None = None
        self._starts: list[int] = []
        self._readers: dict[int, DieReader] = {}

    @property
    def headers(self) -> list[UnitHeader]:
        if self._headers is None:
            self._headers = []
            info = self.sections.get(_INFO)
            pos = 0
            try:
                while pos + 4 <= len(info):
                    self._headers.append(read_unit_header(info, pos, self.sections.little))
                    pos = self._headers[-1].end
            except ElfError as error:
                self.error = error
            self._starts = [header.offset for header in self._headers]
        return self._headers

    def at(self, offset: int) -> UnitHeader | None:
        """The unit that holds ``offset`` of ``.debug_info``."""
        headers = self.headers
        index = bisect.bisect_right(self._starts, offset) - 1
        return headers[index] if index >= 0 and offset < headers[index].end else None

    def reader(self, unit: UnitHeader) -> DieReader:
        found = self._readers.get(unit.offset)
        if found is None:
            found = self._readers[unit.offset] = DieReader(self.sections, unit)
        return found


#: Forms whose numbers index a table found from a base the unit's own DIE gives.
_STRX = frozenset({DW_FORM_strx, DW_FORM_strx1, DW_FORM_strx2, DW_FORM_strx3, DW_FORM_strx4,
                   DW_FORM_GNU_str_index})  # fmt: skip
_ADDRX = frozenset({DW_FORM_addrx, DW_FORM_addrx1, DW_FORM_addrx2, DW_FORM_addrx3,
                    DW_FORM_addrx4, DW_FORM_GNU_addr_index})  # fmt: skip


class DieReader:
    """The DIEs of one unit: attribute values (:meth:`attributes`) and skipping
    (:meth:`skip`).  The bases of the indexed forms (DW_AT_str_offsets_base, DW_AT_addr_base,
    DW_AT_rnglists_base) come from the unit's own DIE (:meth:`unit_die`, or
    :meth:`read_bases`); before, each is the size of its section's first header."""

    def __init__(self, sections: DebugSections, unit: UnitHeader) -> None:
        self.sections = sections
        self.unit = unit
        self.info = sections.get(_INFO)
        self.order: Literal["little", "big"] = "little" if sections.little else "big"
        self.abbrevs = Abbreviations(sections.get(".debug_abbrev"), unit.abbrev_offset, unit)
        self.str_offsets_base = self.addr_base = 8 if unit.offset_size == 4 else 16
        self.rnglists_base = 12 if unit.offset_size == 4 else 20
        #: Whether indexed forms are looked up (not while the unit's own DIE is first read).
        self._indexes = True
        self._unit_die: tuple[Abbreviation | None, dict[int, tuple[int, object]]] | None = None

    def read_bases(self, values: dict[int, tuple[int, object]]) -> None:
        for attribute, slot in ((DW_AT_str_offsets_base, "str_offsets_base"),
                                (DW_AT_addr_base, "addr_base"),
                                (DW_AT_rnglists_base, "rnglists_base")):  # fmt: skip
            found = values.get(attribute)
            if found is not None and isinstance(found[1], int):
                setattr(self, slot, found[1])

    def unit_die(self) -> tuple[Abbreviation | None, dict[int, tuple[int, object]]]:
        """The unit's own DIE: its abbreviation (None: a null entry) and attributes, read
        once, its own indexed forms looked up with the bases it gives."""
        if self._unit_die is None:
            self._indexes = False
            try:
                _, values, _ = self.attributes(self.unit.die_offset)
            finally:
                self._indexes = True
            self.read_bases(values)
            abbrev, values, _ = self.attributes(self.unit.die_offset)
            self._unit_die = abbrev, values
        return self._unit_die

    def abbreviation(self, code: int, offset: int) -> Abbreviation:
        try:
            return self.abbrevs[code]
        except KeyError:
            raise ElfError(f"abbreviation {code} is not in the unit's table", offset,
                           section=_INFO) from None  # fmt: skip

    def entry(self, offset: int) -> tuple[Abbreviation | None, int]:
        """(abbreviation, where its attributes start) of the DIE at ``offset``; no
        abbreviation for a null entry (then the offset after it)."""
        try:
            code, pos = read_uleb(self.info, offset, len(self.info))
        except IndexError:
            raise ElfError("DIE runs past the section", offset, section=_INFO) from None
        return (None, pos) if code == 0 else (self.abbreviation(code, offset), pos)

    def attributes(
        self, offset: int, wanted: frozenset[int] | None = None
    ) -> tuple[Abbreviation | None, dict[int, tuple[int, object]], int]:
        """(abbreviation, {attribute: (form, value)}, the offset after the DIE) of the DIE at
        ``offset`` (only the attributes in ``wanted``, if given); no abbreviation for a null
        entry."""
        abbrev, pos = self.entry(offset)
        values: dict[int, tuple[int, object]] = {}
        if abbrev is None:
            return None, values, pos
        try:
            for (name, form, const), size in zip(abbrev.attributes, abbrev.sizes, strict=True):
                if wanted is None or name in wanted:
                    value, pos = self.value(form, const, pos)
                    values[name] = (form, value)
                else:
                    pos = pos + size if size >= 0 else self._skip_form(form, pos)
        except (IndexError, ValueError):
            raise ElfError("DIE runs past the section", offset, section=_INFO) from None
        return abbrev, values, pos

    def sibling(self, abbrev: Abbreviation, pos: int) -> tuple[tuple[int, int] | None, int]:
        """((form, DW_AT_sibling's offset) or None, the offset after the attributes) of a DIE
        of ``abbrev`` whose attributes start at ``pos``."""
        found = None
        try:
            for (name, form, const), size in zip(abbrev.attributes, abbrev.sizes, strict=True):
                if name == DW_AT_sibling:
                    value, pos = self.value(form, const, pos)
                    found = (form, value) if isinstance(value, int) else None
                else:
                    pos = pos + size if size >= 0 else self._skip_form(form, pos)
        except (IndexError, ValueError):
            raise ElfError("DIE runs past the section", pos, section=_INFO) from None
        return found, pos

    def skip(self, abbrev: Abbreviation, pos: int) -> int:
        """The offset after the attributes of a DIE of ``abbrev`` that start at ``pos``."""
        if abbrev.size >= 0:
            return pos + abbrev.size
        try:
            for (_name, form, _const), size in zip(abbrev.attributes, abbrev.sizes, strict=True):
                pos = pos + size if size >= 0 else self._skip_form(form, pos)
        except (IndexError, ValueError):
            raise ElfError("DIE runs past the section", pos, section=_INFO) from None
        return pos

    def _skip_form(self, form: int, pos: int) -> int:
        """The offset after an attribute of ``form`` (of no fixed size) at ``pos``."""
        info = self.info
        if form in _LEB:
            while info[pos] & 0x80:
                pos += 1
            return pos + 1
        if form == DW_FORM_string:
            return info.index(b"\0", pos) + 1
        return self.value(form, 0, pos)[1]

    def value(self, form: int, const: int, pos: int) -> tuple[object, int]:
        """(value, next position) of an attribute of ``form`` at ``pos``."""
        info, unit = self.info, self.unit
        if form == DW_FORM_indirect:
            form, pos = read_uleb(info, pos, len(info))
            if form == DW_FORM_implicit_const:
                const, pos = read_sleb(info, pos, len(info))
        if form == DW_FORM_implicit_const:
            return const, pos
        if form == DW_FORM_flag_present:
            return 1, pos
        size = _fixed_size(form, unit)
        if size >= 0:
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
            if pos + length_size > len(info):
                raise IndexError(pos)
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
            return self.sections.string(".debug_str", number)
        if form == DW_FORM_line_strp:
            return self.sections.string(".debug_line_str", number)
        if not self._indexes:
            return number
        if form in _STRX:
            offset = self._indexed(".debug_str_offsets", self.str_offsets_base, number,
                                   self.unit.offset_size)  # fmt: skip
            return self.sections.string(".debug_str", offset)
        if form in _ADDRX:
            return self.address(number)
        if form == DW_FORM_rnglistx:  # an offset from the unit's table (DWARF 5 7.28)
            offset_size = self.unit.offset_size
            return self.rnglists_base + self._indexed(".debug_rnglists", self.rnglists_base,
                                                      number, offset_size)  # fmt: skip
        return number

    def address(self, index: int) -> int:
        """Address ``index`` of the unit's table in ``.debug_addr`` (DWARF 5 7.27)."""
        return self._indexed(".debug_addr", self.addr_base, index, self.unit.address_size)

    def _indexed(self, section: str, base: int, index: int, size: int) -> int:
        data = self.sections.get(section)
        at = base + index * size
        if at + size > len(data):
            raise ElfError(f"index {index} past the end of {section}", section=_INFO)
        return int.from_bytes(data[at : at + size], self.order)


class DieTree:
    """The DIEs of one unit as a tree, walked so that no damage makes a walk endless (DWARF 5
    2.3, "Relationship of Debugging Information Entries"): a DIE's children follow it, each
    after the previous one's subtree (which ``DW_AT_sibling`` may skip to) and up to a null
    entry.

    A child list only moves forward: a ``DW_AT_sibling`` that points back, at the DIE itself
    or out of the unit is not followed (the subtree is scanned for its end instead; one that
    is no reference inside the unit is not followed either, as gdb), and the list ends at the
    unit's end.  A scan for a subtree's end records the end of every subtree it passes, so no
    subtree is scanned twice.  A walk (:meth:`walk`) that reaches a DIE a second time stops
    there.  ``warn(message, offset)`` hears of each such stop and each pointer not followed.
    ``parents``: the parent of each DIE listed as a child so far."""

    def __init__(self, reader: DieReader, warn: Callable[[str, int], None]) -> None:
        self.reader = reader
        self.end = reader.unit.end
        self.warn = warn
        self.parents: dict[int, int] = {}
        self._children: dict[int, list[int]] = {}
        self._subtree_end: dict[int, int] = {}

    def tag(self, offset: int) -> int:
        """The tag of the DIE at ``offset`` (0 for a null entry)."""
        abbrev, _ = self.reader.entry(offset)
        return 0 if abbrev is None else abbrev.tag

    def children(self, offset: int) -> list[int]:
        """The offsets of the children of the DIE at ``offset``."""
        known = self._children.get(offset)
        if known is not None:
            return known
        reader, out = self.reader, []
        abbrev, pos = reader.entry(offset)
        if abbrev is not None and abbrev.children:
            child = reader.skip(abbrev, pos)
            while child < self.end:
                child_abbrev, pos = reader.entry(child)
                if child_abbrev is None:
                    break
                self.parents[child] = offset
                out.append(child)
                if not child_abbrev.children:
                    child = reader.skip(child_abbrev, pos)
                    continue
                sibling, after = reader.sibling(child_abbrev, pos)
                if sibling is not None and sibling[0] in UNIT_REFERENCES:
                    if after <= sibling[1] <= self.end:
                        child = sibling[1]
                        continue
                    self.warn(f"DW_AT_sibling points to {sibling[1]:#x}, not after the DIE",
                              child)  # fmt: skip
                child = self._subtree_end_of(child, after)
        self._children[offset] = out
        return out

    def _subtree_end_of(self, offset: int, after: int) -> int:
        """Where the subtree of the DIE at ``offset`` (one with children, its attributes
        ending at ``after``) ends: after the null entry that closes it, found by reading the
        DIEs after it in order (each one's size moves forward), through the ends already
        known."""
        known = self._subtree_end.get(offset)
        if known is not None:
            return known
        reader, ends = self.reader, self._subtree_end
        open_dies, pos = [offset], after
        while open_dies and pos < self.end:
            if pos in ends:  # a subtree already scanned: skipped whole
                pos = ends[pos]
                continue
            abbrev, attributes = reader.entry(pos)
            if abbrev is None:
                pos = ends[open_dies.pop()] = attributes
            elif abbrev.children:
                open_dies.append(pos)
                pos = reader.skip(abbrev, attributes)
            else:
                pos = reader.skip(abbrev, attributes)
        for unclosed in open_dies:  # the unit ended first
            ends[unclosed] = self.end
        return ends[offset]

    def walk(self, roots: list[int], descend: Callable[[int], bool]) -> Iterator[int]:
        """``roots`` and, depth first, the children of each DIE for which ``descend`` is
        true; a DIE reached a second time (a sibling pointer into another subtree) stops
        that branch."""
        seen: set[int] = set()
        pending = list(reversed(roots))
        while pending:
            offset = pending.pop()
            if offset in seen:
                self.warn("DIE reached twice: the walk stops there", offset)
                continue
            seen.add(offset)
            yield offset
            if descend(offset):
                pending += reversed(self.children(offset))


__all__ = [
    "DEBUG_SECTIONS",
    "Abbreviation",
    "Abbreviations",
    "DebugSections",
    "DieReader",
    "DieTree",
    "UnitHeader",
    "Units",
    "read_unit_header",
]
