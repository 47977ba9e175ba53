"""DWARF call-frame information: parse ``.eh_frame`` / ``.debug_frame`` and run CFA programs.

Sections cited are from DWARF 5 (6.4 "Call Frame Information") and the Linux Standard Base
Core specification (LSB 5.0, 10.6 "Exception Frames": ``.eh_frame``, augmentations and pointer
encodings).

Three layers:

* :func:`parse_cfi` walks the section and returns :class:`Cie` and :class:`Fde` records
  (augmentations ``z``, ``R``, ``P``, ``L``, ``S``, ``B``, ``G``; ``eh``; every pointer
  encoding and application, ``indirect`` through a caller-supplied memory reader).
* :func:`decode_instructions` turns a CFA program into a list of canonical operations
  (``(op, a, b)`` tuples, operands unfactored), one per DWARF instruction; the SFrame
  generator translates these the way GNU as does.
* :func:`run_program` / :meth:`CfiTable.rows` interpret the program (DWARF 5 6.4.2) and give the
  row table: for each address range, the CFA rule and the rule of every register.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

import numpy as np
import numpy.typing as npt

from ..errors import CfiError

# ---------------------------------------------------------------------------------------------
# DW_CFA opcodes (DWARF 5 7.24, GNU and AArch64 extensions)

DW_CFA_advance_loc = 0x40
DW_CFA_offset = 0x80
DW_CFA_restore = 0xC0
DW_CFA_nop = 0x00
DW_CFA_set_loc = 0x01
DW_CFA_advance_loc1 = 0x02
DW_CFA_advance_loc2 = 0x03
DW_CFA_advance_loc4 = 0x04
DW_CFA_offset_extended = 0x05
DW_CFA_restore_extended = 0x06
DW_CFA_undefined = 0x07
DW_CFA_same_value = 0x08
DW_CFA_register = 0x09
DW_CFA_remember_state = 0x0A
DW_CFA_restore_state = 0x0B
DW_CFA_def_cfa = 0x0C
DW_CFA_def_cfa_register = 0x0D
DW_CFA_def_cfa_offset = 0x0E
DW_CFA_def_cfa_expression = 0x0F
DW_CFA_expression = 0x10
DW_CFA_offset_extended_sf = 0x11
DW_CFA_def_cfa_sf = 0x12
DW_CFA_def_cfa_offset_sf = 0x13
DW_CFA_val_offset = 0x14
DW_CFA_val_offset_sf = 0x15
DW_CFA_val_expression = 0x16
DW_CFA_MIPS_advance_loc8 = 0x1D
#: AArch64: toggle the "return address is signed with the PC" state (not translatable).
DW_CFA_AARCH64_negate_ra_state_with_pc = 0x2C
#: SPARC register-window save; on AArch64 the same code is DW_CFA_AARCH64_negate_ra_state.
DW_CFA_GNU_window_save = 0x2D
DW_CFA_GNU_args_size = 0x2E
DW_CFA_GNU_negative_offset_extended = 0x2F

CFA_NAMES: dict[int, str] = {
    DW_CFA_advance_loc: "DW_CFA_advance_loc",
    DW_CFA_offset: "DW_CFA_offset",
    DW_CFA_restore: "DW_CFA_restore",
    DW_CFA_nop: "DW_CFA_nop",
    DW_CFA_set_loc: "DW_CFA_set_loc",
    DW_CFA_advance_loc1: "DW_CFA_advance_loc1",
    DW_CFA_advance_loc2: "DW_CFA_advance_loc2",
    DW_CFA_advance_loc4: "DW_CFA_advance_loc4",
    DW_CFA_offset_extended: "DW_CFA_offset_extended",
    DW_CFA_restore_extended: "DW_CFA_restore_extended",
    DW_CFA_undefined: "DW_CFA_undefined",
    DW_CFA_same_value: "DW_CFA_same_value",
    DW_CFA_register: "DW_CFA_register",
    DW_CFA_remember_state: "DW_CFA_remember_state",
    DW_CFA_restore_state: "DW_CFA_restore_state",
    DW_CFA_def_cfa: "DW_CFA_def_cfa",
    DW_CFA_def_cfa_register: "DW_CFA_def_cfa_register",
    DW_CFA_def_cfa_offset: "DW_CFA_def_cfa_offset",
    DW_CFA_def_cfa_expression: "DW_CFA_def_cfa_expression",
    DW_CFA_expression: "DW_CFA_expression",
    DW_CFA_offset_extended_sf: "DW_CFA_offset_extended_sf",
    DW_CFA_def_cfa_sf: "DW_CFA_def_cfa_sf",
    DW_CFA_def_cfa_offset_sf: "DW_CFA_def_cfa_offset_sf",
    DW_CFA_val_offset: "DW_CFA_val_offset",
    DW_CFA_val_offset_sf: "DW_CFA_val_offset_sf",
    DW_CFA_val_expression: "DW_CFA_val_expression",
    DW_CFA_MIPS_advance_loc8: "DW_CFA_MIPS_advance_loc8",
    DW_CFA_AARCH64_negate_ra_state_with_pc: "DW_CFA_AARCH64_negate_ra_state_with_pc",
    DW_CFA_GNU_window_save: "DW_CFA_GNU_window_save",
    DW_CFA_GNU_args_size: "DW_CFA_GNU_args_size",
    DW_CFA_GNU_negative_offset_extended: "DW_CFA_GNU_negative_offset_extended",
}

# Canonical operations produced by decode_instructions: (op, a, b).
#   OP_ADVANCE  a = byte delta (code alignment applied)      OP_SET_LOC a = absolute address
#   OP_DEF_CFA  a = reg, b = offset                          OP_DEF_CFA_REGISTER a = reg
#   OP_DEF_CFA_OFFSET a = offset                             OP_DEF_CFA_EXPRESSION b = bytes
#   OP_OFFSET   a = reg, b = CFA-relative offset (unfactored) OP_VAL_OFFSET a = reg, b = offset
#   OP_EXPRESSION / OP_VAL_EXPRESSION a = reg, b = bytes     OP_REGISTER a = reg, b = reg2
#   OP_RESTORE / OP_UNDEFINED / OP_SAME_VALUE a = reg        OP_ARGS_SIZE a = size
#   OP_REMEMBER, OP_RESTORE_STATE, OP_WINDOW_SAVE, OP_NEGATE_RA_WITH_PC: no operands
# The codes are the basic DWARF opcodes, so CFA_NAMES names them.
OP_ADVANCE = DW_CFA_advance_loc
OP_SET_LOC = DW_CFA_set_loc
OP_OFFSET = DW_CFA_offset
OP_RESTORE = DW_CFA_restore
OP_UNDEFINED = DW_CFA_undefined
OP_SAME_VALUE = DW_CFA_same_value
OP_REGISTER = DW_CFA_register
OP_REMEMBER = DW_CFA_remember_state
OP_RESTORE_STATE = DW_CFA_restore_state
OP_DEF_CFA = DW_CFA_def_cfa
OP_DEF_CFA_REGISTER = DW_CFA_def_cfa_register
OP_DEF_CFA_OFFSET = DW_CFA_def_cfa_offset
OP_DEF_CFA_EXPRESSION = DW_CFA_def_cfa_expression
OP_EXPRESSION = DW_CFA_expression
OP_VAL_OFFSET = DW_CFA_val_offset
OP_VAL_EXPRESSION = DW_CFA_val_expression
OP_NEGATE_RA_WITH_PC = DW_CFA_AARCH64_negate_ra_state_with_pc
OP_WINDOW_SAVE = DW_CFA_GNU_window_save
OP_ARGS_SIZE = DW_CFA_GNU_args_size

#: One decoded CFA instruction: (canonical op, operand a, operand b).
Op = tuple[int, int, "int | bytes"]

# ---------------------------------------------------------------------------------------------
# Pointer encodings (LSB 5.0 10.5 "DWARF Extensions", DW_EH_PE_*)

DW_EH_PE_absptr = 0x00
DW_EH_PE_uleb128 = 0x01
DW_EH_PE_udata2 = 0x02
DW_EH_PE_udata4 = 0x03
DW_EH_PE_udata8 = 0x04
DW_EH_PE_sleb128 = 0x09
DW_EH_PE_sdata2 = 0x0A
DW_EH_PE_sdata4 = 0x0B
DW_EH_PE_sdata8 = 0x0C
DW_EH_PE_pcrel = 0x10
DW_EH_PE_textrel = 0x20
DW_EH_PE_datarel = 0x30
DW_EH_PE_funcrel = 0x40
DW_EH_PE_aligned = 0x50
DW_EH_PE_indirect = 0x80
DW_EH_PE_omit = 0xFF


class CfiFormat(Enum):
    """Which section the records come from (their CIE pointers and addresses differ)."""

    EH_FRAME = "eh_frame"
    DEBUG_FRAME = "debug_frame"


@dataclass(frozen=True, slots=True)
class PointerContext:
    """Bases for pointer encodings: the section's own address and the optional others.

    ``read_memory(address, size)`` resolves ``DW_EH_PE_indirect`` pointers; None makes an
    indirect pointer an error (for the FDE address range) or keeps the pointer's address
    (personality, LSDA: see :attr:`Cie.personality_indirect`).
    """

    section_address: int = 0
    text_base: int | None = None
    data_base: int | None = None
    read_memory: Callable[[int, int], bytes] | None = None


@dataclass(frozen=True, slots=True)
class Cie:
    """A Common Information Entry (DWARF 5 6.4.1, LSB 10.6.1.1)."""

    #: Byte offset of the record (its length field) in the section.
    offset: int
    version: int
    augmentation: str
    code_alignment: int
    data_alignment: int
    return_column: int
    address_size: int
    #: Pointer encoding of FDE addresses ('R'); absptr without it.
    fde_encoding: int
    #: Pointer encoding of the LSDA pointer in FDEs ('L'); DW_EH_PE_omit without it.
    lsda_encoding: int
    #: Personality routine address ('P'), None without it.
    personality: int | None
    #: True when the personality pointer is indirect and was not resolved (address of the slot).
    personality_indirect: bool
    #: 'S': the FDEs using this CIE describe signal trampolines.
    signal_frame: bool
    #: 'B': AArch64 return addresses are signed with the B key.
    b_key: bool
    #: 'G': AArch64 MTE-tagged frames.
    mte_tagged: bool
    #: [start, end) byte offsets of the initial instructions in the section.
    instructions_start: int
    instructions_end: int


@dataclass(frozen=True, slots=True)
class Fde:
    """A Frame Description Entry (DWARF 5 6.4.1, LSB 10.6.1.2)."""

    offset: int
    cie: Cie
    pc_begin: int
    pc_range: int
    lsda: int | None
    instructions_start: int
    instructions_end: int

    @property
    def pc_end(self) -> int:
        return self.pc_begin + self.pc_range


class _Reader:
    """Cursor over section bytes with the section's byte order; errors name the offset."""

    __slots__ = ("data", "end", "order", "u16", "u32", "u64")

    def __init__(self, data: bytes, big_endian: bool) -> None:
        self.data = data
        self.end = len(data)
        order = ">" if big_endian else "<"
        self.order = order
        self.u16 = struct.Struct(order + "H").unpack_from
        self.u32 = struct.Struct(order + "I").unpack_from
        self.u64 = struct.Struct(order + "Q").unpack_from


_SIGNED = {2: 1 << 16, 4: 1 << 32, 8: 1 << 64}


def read_uleb(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of an unsigned LEB128 at ``pos`` (DWARF 5 7.6)."""
    result = 0
    shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    raise CfiError("LEB128 number runs past the end of its record", pos)


def read_sleb(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of a signed LEB128 at ``pos`` (DWARF 5 7.6)."""
    result = 0
    shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos
    raise CfiError("LEB128 number runs past the end of its record", pos)


def _read_fixed(r: _Reader, pos: int, size: int, end: int) -> int:
    if pos + size > end:
        raise CfiError(f"{size}-byte field runs past the end of its record", pos)
    if size == 8:
        value: int = r.u64(r.data, pos)[0]
    elif size == 4:
        value = r.u32(r.data, pos)[0]
    elif size == 2:
        value = r.u16(r.data, pos)[0]
    elif size == 1:
        value = r.data[pos]
    else:
        raise CfiError(f"unsupported address size {size}", pos)
    return value


def read_encoded(
    r: _Reader,
    pos: int,
    end: int,
    encoding: int,
    address_size: int,
    ctx: PointerContext,
    func_base: int | None = None,
) -> tuple[int, int, bool]:
    """Read a pointer in ``encoding`` at ``pos``: (value, next position, unresolved_indirect).

    LSB 10.5: low 4 bits give the format, bits 4-6 the base it is relative to, bit 7 an
    indirection through memory.
    """
    if encoding == DW_EH_PE_omit:
        raise CfiError("pointer with encoding DW_EH_PE_omit read", pos)
    fmt = encoding & 0x0F
    application = encoding & 0x70
    start = pos
    if application == DW_EH_PE_aligned:
        pos = (pos + address_size - 1) // address_size * address_size
    if fmt == DW_EH_PE_absptr:
        value = _read_fixed(r, pos, address_size, end)
        pos += address_size
    elif fmt == DW_EH_PE_uleb128:
        value, pos = read_uleb(r.data, pos, end)
    elif fmt == DW_EH_PE_sleb128:
        value, pos = read_sleb(r.data, pos, end)
    elif fmt in (DW_EH_PE_udata2, DW_EH_PE_udata4, DW_EH_PE_udata8):
        size = 1 << (fmt - 1)
        value = _read_fixed(r, pos, size, end)
        pos += size
    elif fmt in (DW_EH_PE_sdata2, DW_EH_PE_sdata4, DW_EH_PE_sdata8):
        size = 1 << (fmt - 9)
        value = _read_fixed(r, pos, size, end)
        if value >= _SIGNED[size] >> 1:
            value -= _SIGNED[size]
        pos += size
    else:
        raise CfiError(f"unknown pointer encoding {encoding:#04x}", start)
    if application == DW_EH_PE_pcrel:
        value += ctx.section_address + start
    elif application == DW_EH_PE_textrel:
        if ctx.text_base is None:
            raise CfiError("DW_EH_PE_textrel pointer without a text base", start)
        value += ctx.text_base
    elif application == DW_EH_PE_datarel:
        if ctx.data_base is None:
            raise CfiError("DW_EH_PE_datarel pointer without a data base", start)
        value += ctx.data_base
    elif application == DW_EH_PE_funcrel:
        if func_base is None:
            raise CfiError("DW_EH_PE_funcrel pointer outside an FDE", start)
        value += func_base
    elif application not in (0, DW_EH_PE_aligned):
        raise CfiError(f"unknown pointer application {encoding:#04x}", start)
    mask = (1 << (8 * address_size)) - 1
    value &= mask
    unresolved = False
    if encoding & DW_EH_PE_indirect:
        if ctx.read_memory is None:
            unresolved = True
        else:
            raw = ctx.read_memory(value, address_size)
            if len(raw) != address_size:
                raise CfiError(f"indirect pointer at {value:#x} cannot be read", start)
            value = int.from_bytes(raw, "big" if r.order == ">" else "little")
    return value, pos, unresolved


def _encoded_size(encoding: int, address_size: int) -> int:
    """Bytes of a fixed-size pointer format (pc_range uses only the format bits)."""
    fmt = encoding & 0x0F
    if fmt == DW_EH_PE_absptr:
        return address_size
    if fmt in (DW_EH_PE_udata2, DW_EH_PE_sdata2):
        return 2
    if fmt in (DW_EH_PE_udata4, DW_EH_PE_sdata4):
        return 4
    if fmt in (DW_EH_PE_udata8, DW_EH_PE_sdata8):
        return 8
    return 0


@dataclass(slots=True)
class CfiTable:
    """Every CIE and FDE of one section, in section order, with the bytes they point into."""

    data: bytes
    format: CfiFormat
    big_endian: bool
    address_size: int
    cies: dict[int, Cie] = field(default_factory=dict)
    fdes: list[Fde] = field(default_factory=list)

    def instructions(self, fde: Fde) -> list[Op]:
        """The CIE's initial instructions followed by the FDE's, decoded."""
        cie = fde.cie
        return decode_instructions(
            self.data,
            cie.instructions_start,
            cie.instructions_end,
            cie,
            self.big_endian,
        ) + decode_instructions(
            self.data, fde.instructions_start, fde.instructions_end, cie, self.big_endian
        )

    def rows(self, fde: Fde) -> list[CfiRow]:
        """The FDE's row table (DWARF 5 6.4.2)."""
        cie = fde.cie
        initial = decode_instructions(
            self.data, cie.instructions_start, cie.instructions_end, cie, self.big_endian
        )
        body = decode_instructions(
            self.data, fde.instructions_start, fde.instructions_end, cie, self.big_endian
        )
        return run_program(initial, body, fde.pc_begin, fde.pc_end)


def parse_cfi(
    data: bytes,
    section_address: int = 0,
    *,
    big_endian: bool = False,
    address_size: int = 8,
    cfi_format: CfiFormat = CfiFormat.EH_FRAME,
    pointers: PointerContext | None = None,
) -> CfiTable:
    """Parse every CIE and FDE of an ``.eh_frame`` or ``.debug_frame`` section.

    Raises CfiError (with the byte offset) for malformed records.  A zero length ends an
    ``.eh_frame`` section (LSB 10.6.1).
    """
    data = bytes(data)
    ctx = pointers or PointerContext(section_address)
    if ctx.section_address != section_address:
        ctx = PointerContext(section_address, ctx.text_base, ctx.data_base, ctx.read_memory)
    table = CfiTable(data, cfi_format, big_endian, address_size)
    r = _Reader(data, big_endian)
    for kind, offset, body, end, _id_pos, cie_ref in _records(r, cfi_format):
        if kind == 0:
            table.cies[offset] = _parse_cie(r, offset, body, end, address_size, cfi_format, ctx)
        else:
            cie = table.cies.get(cie_ref)
            if cie is None:
                cie = _cie_at(r, table.cies, cie_ref, address_size, cfi_format, ctx, offset)
            table.fdes.append(_parse_fde(r, offset, body, end, cie, cfi_format, ctx))
    return table


#: (CIE offset, pc_begin, pc_range, instructions start, instructions end) of one FDE.
FdeSpan = tuple[int, int, int, int, int]


def scan_fdes(
    data: bytes,
    section_address: int = 0,
    *,
    big_endian: bool = False,
    address_size: int = 8,
    cfi_format: CfiFormat = CfiFormat.EH_FRAME,
    pointers: PointerContext | None = None,
) -> tuple[dict[int, Cie], list[FdeSpan]]:
    """Like :func:`parse_cfi` but fast and lean: CIEs, and one tuple per FDE (no LSDA).

    ``.eh_frame`` FDEs in the usual ``DW_EH_PE_pcrel | DW_EH_PE_sdata4`` encoding are read
    inline; others go through the general reader.
    """
    ctx = pointers or PointerContext(section_address)
    if ctx.section_address != section_address:
        ctx = PointerContext(section_address, ctx.text_base, ctx.data_base, ctx.read_memory)
    if cfi_format is CfiFormat.EH_FRAME:
        fast = _scan_eh_frame_bulk(data, section_address, big_endian, address_size, ctx)
        if fast is not None:
            return fast
    r = _Reader(data, big_endian)
    order = ">" if big_endian else "<"
    s32 = struct.Struct(order + "i").unpack_from
    u32 = struct.Struct(order + "I").unpack_from
    mask = (1 << (8 * address_size)) - 1
    cies: dict[int, Cie] = {}
    out: list[FdeSpan] = []
    append = out.append
    eh = cfi_format is CfiFormat.EH_FRAME
    for kind, offset, body, end, _id_pos, cie_ref in _records(r, cfi_format):
        if kind == 0:
            cies[offset] = _parse_cie(r, offset, body, end, address_size, cfi_format, ctx)
            continue
        cie = cies.get(cie_ref)
        if cie is None:
            cie = _cie_at(r, cies, cie_ref, address_size, cfi_format, ctx, offset)
        if eh and cie.fde_encoding == 0x1B and body + 9 <= end and data[body + 8] < 0x80:
            pc_begin = (s32(data, body)[0] + section_address + body) & mask
            pc_range = u32(data, body + 4)[0]
            pos = body + 8
            if cie.augmentation[:1] == "z":
                pos += 1 + data[pos]
                if pos > end:
                    raise CfiError("FDE augmentation data runs past the record", offset)
            append((cie_ref, pc_begin, pc_range, pos, end))
        else:
            fde = _parse_fde(r, offset, body, end, cie, cfi_format, ctx)
            append((cie_ref, fde.pc_begin, fde.pc_range, fde.instructions_start, end))
    return cies, out


def _scan_eh_frame_bulk(
    data: bytes, section_address: int, big_endian: bool, address_size: int, ctx: PointerContext
) -> tuple[dict[int, Cie], list[FdeSpan]] | None:
    """:func:`scan_fdes` for a well-formed ``.eh_frame`` (LSB 10.6.1): the record lengths are
    followed in a tight loop, then the FDE headers read with numpy.  None when anything is
    unusual (64-bit lengths, a CIE pointer that is not a CIE, a malformed record): the
    record-by-record scanner then gives the same result, or the error at the right place."""
    order = ">" if big_endian else "<"
    u32 = struct.Struct(order + "I").unpack_from
    end = len(data)
    offsets: list[int] = []
    append = offsets.append
    pos = 0
    while pos + 4 <= end:
        length = u32(data, pos)[0]
        if length == 0:
            break
        if length < 4 or length >= 0xFFFFFFF0 or pos + 4 + length > end:
            return None
        append(pos)
        pos += 4 + length
    if not offsets or end < 16:
        return None if offsets else ({}, [])
    view = np.frombuffer(data, dtype=np.uint8)
    record = np.array(offsets, dtype=np.int64)
    record_end = np.empty_like(record)
    record_end[:-1] = record[1:]
    record_end[-1] = pos
    ids = _u32_at(view, record + 4, big_endian)
    cie_at = record[ids == 0]
    cies: dict[int, Cie] = {}
    r = _Reader(data, big_endian)
    try:
        for offset, body, stop in zip(
            cie_at.tolist(),
            (cie_at + 8).tolist(),
            record_end[ids == 0].tolist(),
            strict=True,
        ):
            cies[offset] = _parse_cie(r, offset, body, stop, address_size, CfiFormat.EH_FRAME, ctx)
    except CfiError:
        return None
    fde = ids != 0
    fde_at = record[fde]
    body = fde_at + 8
    fde_end = record_end[fde]
    cie_ref = fde_at + 4 - ids[fde].astype(np.int64)
    refs = cie_ref.tolist()
    if not set(refs) <= cies.keys():
        return None
    # The usual header: pcrel|sdata4 start, udata4 size, one-byte augmentation length.
    usual = np.array(
        [cies[ref].fde_encoding == 0x1B and cies[ref].augmentation[:1] == "z" for ref in cies],
        dtype=bool,
    )
    cie_number = {ref: i for i, ref in enumerate(cies)}
    fast = usual[np.array([cie_number[ref] for ref in refs], dtype=np.int64)]
    # Header fields are read at ``safe`` (inside the section); ``fast`` keeps only the FDEs
    # where that is their real position.
    safe = np.minimum(body, end - 9)
    fast &= (body + 9 <= fde_end) & (view[safe + 8] < 0x80)
    start = _u32_at(view, safe, big_endian)
    start -= (start >= 1 << 31).astype(np.int64) << 32
    pc_range = _u32_at(view, safe + 4, big_endian)
    instructions = body + 9 + view[safe + 8].astype(np.int64)
    if (fast & (instructions > fde_end)).any():
        return None  # augmentation data past the record: the scanner raises
    mask = (1 << (8 * address_size)) - 1
    if 0 <= section_address < 1 << 40 and address_size in (4, 8):
        # DW_EH_PE_pcrel: relative to the field's own address, modulo the address size.
        pc_begin = start + section_address + body
        if address_size == 4:
            pc_begin &= mask
        begin_list = pc_begin.tolist()
        if address_size == 8 and (pc_begin < 0).any():
            begin_list = [value & mask for value in begin_list]
    else:
        begin_list = [
            (value + section_address + at) & mask
            for value, at in zip(start.tolist(), body.tolist(), strict=True)
        ]
    spans = list(
        zip(
            refs,
            begin_list,
            pc_range.tolist(),
            instructions.tolist(),
            fde_end.tolist(),
            strict=True,
        )
    )
    slow = np.flatnonzero(~fast).tolist()
    if slow:
        fde_list, body_list, end_list = fde_at.tolist(), body.tolist(), fde_end.tolist()
        for i in slow:
            cie = cies[refs[i]]
            try:
                parsed = _parse_fde(
                    r, fde_list[i], body_list[i], end_list[i], cie, CfiFormat.EH_FRAME, ctx
                )
            except CfiError:
                return None
            spans[i] = (
                refs[i],
                parsed.pc_begin,
                parsed.pc_range,
                parsed.instructions_start,
                end_list[i],
            )
    return cies, spans


def _u32_at(
    view: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], big_endian: bool
) -> npt.NDArray[np.int64]:
    """The 4-byte unsigned numbers at byte offsets ``at``."""
    parts = [view[at + k].astype(np.int64) for k in range(4)]
    if big_endian:
        parts.reverse()
    return parts[0] | (parts[1] << 8) | (parts[2] << 16) | (parts[3] << 24)


def _records(
    r: _Reader, cfi_format: CfiFormat, start: int = 0
) -> Iterator[tuple[int, int, int, int, int, int]]:
    """(0 for CIE / 1 for FDE, record offset, body start, record end, id position, CIE offset)."""
    data = r.data
    pos = start
    end = r.end
    eh = cfi_format is CfiFormat.EH_FRAME
    while pos + 4 <= end:
        offset = pos
        length = r.u32(data, pos)[0]
        pos += 4
        if length == 0:
            if eh:
                return
            continue  # .debug_frame: an empty record is only padding
        wide = length == 0xFFFFFFFF
        if wide:
            if pos + 8 > end:
                raise CfiError("64-bit record length runs past the section end", offset)
            length = r.u64(data, pos)[0]
            pos += 8
        record_end = pos + length
        if record_end > end:
            raise CfiError(f"record of {length} bytes runs past the section end", offset)
        id_size = 8 if wide else 4
        if pos + id_size > record_end:
            raise CfiError("record too short for its CIE id", offset)
        id_pos = pos
        cie_id = r.u64(data, pos)[0] if wide else r.u32(data, pos)[0]
        pos += id_size
        if eh:
            if cie_id == 0:
                yield 0, offset, pos, record_end, id_pos, 0
            else:
                yield 1, offset, pos, record_end, id_pos, id_pos - cie_id
        elif cie_id == (0xFFFFFFFFFFFFFFFF if wide else 0xFFFFFFFF):
            yield 0, offset, pos, record_end, id_pos, 0
        else:
            yield 1, offset, pos, record_end, id_pos, cie_id
        pos = record_end
    if pos != end and eh and end - pos >= 4:
        raise CfiError("trailing bytes after the last record", pos)


def _cie_at(
    r: _Reader,
    cies: dict[int, Cie],
    cie_offset: int,
    address_size: int,
    cfi_format: CfiFormat,
    ctx: PointerContext,
    fde_offset: int,
) -> Cie:
    """A CIE that appears after its FDE (allowed, if unusual): parse it on demand."""
    if not 0 <= cie_offset < r.end:
        raise CfiError(f"FDE points to CIE offset {cie_offset:#x} outside the section", fde_offset)
    for kind, offset, body, end, _id_pos, _ref in _records(r, cfi_format, cie_offset):
        if kind != 0 or offset != cie_offset:
            break
        cie = _parse_cie(r, offset, body, end, address_size, cfi_format, ctx)
        cies[offset] = cie
        return cie
    raise CfiError(f"FDE points to offset {cie_offset:#x}, which is not a CIE", fde_offset)


def _parse_cie(
    r: _Reader,
    offset: int,
    pos: int,
    end: int,
    address_size: int,
    cfi_format: CfiFormat,
    ctx: PointerContext,
) -> Cie:
    data = r.data
    if pos >= end:
        raise CfiError("CIE has no version byte", offset)
    version = data[pos]
    pos += 1
    if version not in (1, 3, 4):
        raise CfiError(f"CIE version {version} is not 1, 3 or 4", offset)
    nul = data.find(b"\0", pos, end)
    if nul < 0:
        raise CfiError("CIE augmentation string is not terminated", offset)
    augmentation = data[pos:nul].decode("latin-1")
    pos = nul + 1
    if "eh" in augmentation:  # old GCC: an eh_ptr follows the augmentation string
        pos += address_size
    if version == 4:
        if pos + 2 > end:
            raise CfiError("CIE too short for address and segment sizes", offset)
        address_size = data[pos]
        if data[pos + 1] != 0:
            raise CfiError(f"CIE segment selector size {data[pos + 1]} is not supported", offset)
        pos += 2
    code_alignment, pos = read_uleb(data, pos, end)
    data_alignment, pos = read_sleb(data, pos, end)
    if version == 1:
        if pos >= end:
            raise CfiError("CIE has no return address column", offset)
        return_column = data[pos]
        pos += 1
    else:
        return_column, pos = read_uleb(data, pos, end)
    fde_encoding = DW_EH_PE_absptr
    lsda_encoding = DW_EH_PE_omit
    personality: int | None = None
    personality_indirect = False
    signal = b_key = mte = False
    if augmentation.startswith("z"):
        aug_len, pos = read_uleb(data, pos, end)
        aug_end = pos + aug_len
        if aug_end > end:
            raise CfiError("CIE augmentation data runs past the record", offset)
        for char in augmentation[1:]:
            if char == "R":
                fde_encoding = _aug_byte(data, pos, aug_end, offset)
                pos += 1
            elif char == "L":
                lsda_encoding = _aug_byte(data, pos, aug_end, offset)
                pos += 1
            elif char == "P":
                encoding = _aug_byte(data, pos, aug_end, offset)
                personality, pos, personality_indirect = read_encoded(
                    r, pos + 1, aug_end, encoding, address_size, ctx
                )
            elif char == "S":
                signal = True
            elif char == "B":
                b_key = True
            elif char == "G":
                mte = True
            else:
                break  # unknown augmentation: the length lets us skip the rest
        pos = aug_end
    elif augmentation not in ("", "eh"):
        raise CfiError(f"CIE augmentation {augmentation!r} is not understood", offset)
    return Cie(
        offset,
        version,
        augmentation,
        code_alignment,
        data_alignment,
        return_column,
        address_size,
        fde_encoding,
        lsda_encoding,
        personality,
        personality_indirect,
        signal,
        b_key,
        mte,
        pos,
        end,
    )


def _aug_byte(data: bytes, pos: int, end: int, offset: int) -> int:
    if pos >= end:
        raise CfiError("CIE augmentation data is too short", offset)
    return data[pos]


def _parse_fde(
    r: _Reader,
    offset: int,
    pos: int,
    end: int,
    cie: Cie,
    cfi_format: CfiFormat,
    ctx: PointerContext,
) -> Fde:
    size = cie.address_size
    if cfi_format is CfiFormat.DEBUG_FRAME:
        pc_begin = _read_fixed(r, pos, size, end)
        pc_range = _read_fixed(r, pos + size, size, end)
        pos += 2 * size
    else:
        pc_begin, pos, unresolved = read_encoded(r, pos, end, cie.fde_encoding, size, ctx)
        if unresolved:
            raise CfiError("indirect FDE address without a memory reader", offset)
        range_size = _encoded_size(cie.fde_encoding, size)
        if range_size:
            pc_range = _read_fixed(r, pos, range_size, end)
            pos += range_size
        else:
            pc_range, pos = read_uleb(r.data, pos, end)
    lsda: int | None = None
    if cie.augmentation.startswith("z"):
        aug_len, pos = read_uleb(r.data, pos, end)
        aug_end = pos + aug_len
        if aug_end > end:
            raise CfiError("FDE augmentation data runs past the record", offset)
        if cie.lsda_encoding != DW_EH_PE_omit and aug_len:
            lsda, _, _ = read_encoded(
                r, pos, aug_end, cie.lsda_encoding, size, ctx, func_base=pc_begin
            )
        pos = aug_end
    return Fde(offset, cie, pc_begin, pc_range, lsda, pos, end)


# ---------------------------------------------------------------------------------------------
# Instructions (DWARF 5 6.4.2)


def decode_instructions(
    data: bytes, pos: int, end: int, cie: Cie, big_endian: bool = False
) -> list[Op]:
    """Decode the CFA program in ``data[pos:end]`` to canonical operations.

    Operands are unfactored: advances are in bytes (times the code alignment factor),
    offsets in bytes (times the data alignment factor, DWARF 5 6.4.2.2-6.4.2.3).  All
    encodings of one operation give the same canonical op (``advance_loc1`` and ``advance_loc``,
    ``def_cfa_sf`` and ``def_cfa``...).  DW_CFA_nop is dropped.
    """
    ops: list[Op] = []
    append = ops.append
    caf = cie.code_alignment
    daf = cie.data_alignment
    order: Literal["big", "little"] = "big" if big_endian else "little"
    address_size = cie.address_size
    while pos < end:
        opcode = data[pos]
        pos += 1
        high = opcode & 0xC0
        if high:
            low = opcode & 0x3F
            if high == 0x40:
                append((OP_ADVANCE, low * caf, 0))
            elif high == 0x80:
                # Inline one-byte ULEB (the usual case).
                if pos < end and data[pos] < 0x80:
                    value = data[pos]
                    pos += 1
                else:
                    value, pos = read_uleb(data, pos, end)
                append((OP_OFFSET, low, value * daf))
            else:
                append((OP_RESTORE, low, 0))
            continue
        if opcode == DW_CFA_def_cfa_offset:
            if pos < end and data[pos] < 0x80:
                value = data[pos]
                pos += 1
            else:
                value, pos = read_uleb(data, pos, end)
            append((OP_DEF_CFA_OFFSET, value, 0))
        elif opcode == DW_CFA_nop:
            continue
        elif opcode in (DW_CFA_advance_loc1, DW_CFA_advance_loc2, DW_CFA_advance_loc4):
            size = 1 << (opcode - DW_CFA_advance_loc1)
            if pos + size > end:
                raise CfiError(f"{CFA_NAMES[opcode]} operand runs past the program", pos)
            append((OP_ADVANCE, int.from_bytes(data[pos : pos + size], order) * caf, 0))
            pos += size
        elif opcode == DW_CFA_MIPS_advance_loc8:
            if pos + 8 > end:
                raise CfiError("DW_CFA_MIPS_advance_loc8 operand runs past the program", pos)
            append((OP_ADVANCE, int.from_bytes(data[pos : pos + 8], order) * caf, 0))
            pos += 8
        elif opcode in (DW_CFA_remember_state, DW_CFA_restore_state):
            append((opcode, 0, 0))
        elif opcode == DW_CFA_def_cfa:
            reg, pos = read_uleb(data, pos, end)
            value, pos = read_uleb(data, pos, end)
            append((OP_DEF_CFA, reg, value))
        elif opcode == DW_CFA_def_cfa_register:
            reg, pos = read_uleb(data, pos, end)
            append((OP_DEF_CFA_REGISTER, reg, 0))
        elif opcode == DW_CFA_def_cfa_sf:
            reg, pos = read_uleb(data, pos, end)
            value, pos = read_sleb(data, pos, end)
            append((OP_DEF_CFA, reg, value * daf))
        elif opcode == DW_CFA_def_cfa_offset_sf:
            value, pos = read_sleb(data, pos, end)
            append((OP_DEF_CFA_OFFSET, value * daf, 0))
        elif opcode in (DW_CFA_offset_extended, DW_CFA_val_offset):
            reg, pos = read_uleb(data, pos, end)
            value, pos = read_uleb(data, pos, end)
            append(
                (OP_OFFSET if opcode == DW_CFA_offset_extended else OP_VAL_OFFSET, reg, value * daf)
            )
        elif opcode in (DW_CFA_offset_extended_sf, DW_CFA_val_offset_sf):
            reg, pos = read_uleb(data, pos, end)
            value, pos = read_sleb(data, pos, end)
            append(
                (
                    OP_OFFSET if opcode == DW_CFA_offset_extended_sf else OP_VAL_OFFSET,
                    reg,
                    value * daf,
                )
            )
        elif opcode == DW_CFA_GNU_negative_offset_extended:
            reg, pos = read_uleb(data, pos, end)
            value, pos = read_uleb(data, pos, end)
            append((OP_OFFSET, reg, -value * daf))
        elif opcode in (DW_CFA_restore_extended, DW_CFA_undefined, DW_CFA_same_value):
            reg, pos = read_uleb(data, pos, end)
            code = OP_RESTORE if opcode == DW_CFA_restore_extended else opcode
            append((code, reg, 0))
        elif opcode == DW_CFA_register:
            reg, pos = read_uleb(data, pos, end)
            reg2, pos = read_uleb(data, pos, end)
            append((OP_REGISTER, reg, reg2))
        elif opcode == DW_CFA_def_cfa_expression:
            length, pos = read_uleb(data, pos, end)
            if pos + length > end:
                raise CfiError("DW_CFA_def_cfa_expression block runs past the program", pos)
            append((OP_DEF_CFA_EXPRESSION, 0, data[pos : pos + length]))
            pos += length
        elif opcode in (DW_CFA_expression, DW_CFA_val_expression):
            reg, pos = read_uleb(data, pos, end)
            length, pos = read_uleb(data, pos, end)
            if pos + length > end:
                raise CfiError(f"{CFA_NAMES[opcode]} block runs past the program", pos)
            append((opcode, reg, data[pos : pos + length]))
            pos += length
        elif opcode == DW_CFA_set_loc:
            if pos + address_size > end:
                raise CfiError("DW_CFA_set_loc operand runs past the program", pos)
            append((OP_SET_LOC, int.from_bytes(data[pos : pos + address_size], order), 0))
            pos += address_size
        elif opcode == DW_CFA_GNU_args_size:
            value, pos = read_uleb(data, pos, end)
            append((OP_ARGS_SIZE, value, 0))
        elif opcode in (DW_CFA_GNU_window_save, DW_CFA_AARCH64_negate_ra_state_with_pc):
            append((opcode, 0, 0))
        else:
            raise CfiError(f"unknown DW_CFA opcode {opcode:#04x}", pos - 1)
    return ops


# ---------------------------------------------------------------------------------------------
# Row tables (DWARF 5 6.4.1 "Structure of Call Frame Information")


class RuleType(Enum):
    """Register rules of DWARF 5 6.4.1."""

    UNDEFINED = "undefined"
    SAME_VALUE = "same_value"
    OFFSET = "offset"  # saved at CFA + N
    VAL_OFFSET = "val_offset"  # value is CFA + N
    REGISTER = "register"  # saved in another register
    EXPRESSION = "expression"  # saved at the address the expression computes
    VAL_EXPRESSION = "val_expression"


@dataclass(frozen=True, slots=True)
class RegisterRule:
    type: RuleType
    #: Offset (OFFSET, VAL_OFFSET) or register number (REGISTER).
    value: int = 0
    expression: bytes = b""


@dataclass(frozen=True, slots=True)
class CfiRow:
    """One row of the table: from ``address`` (inclusive) to ``end`` (exclusive)."""

    address: int
    end: int
    #: CFA = cfa_register + cfa_offset; cfa_expression is set instead for def_cfa_expression.
    cfa_register: int | None
    cfa_offset: int
    cfa_expression: bytes | None
    #: Rules of registers that have one (others follow the ABI's default, usually same value).
    registers: dict[int, RegisterRule]
    #: AArch64 RA-signing state, toggled by DW_CFA_AARCH64_negate_ra_state.
    ra_signed: bool = False
    args_size: int = 0


def _rule_for(op: Op) -> RegisterRule | None:
    code, _a, b = op
    if code == OP_OFFSET:
        return RegisterRule(RuleType.OFFSET, int(b) if isinstance(b, int) else 0)
    if code == OP_VAL_OFFSET:
        return RegisterRule(RuleType.VAL_OFFSET, int(b) if isinstance(b, int) else 0)
    if code == OP_REGISTER:
        return RegisterRule(RuleType.REGISTER, int(b) if isinstance(b, int) else 0)
    if code == OP_UNDEFINED:
        return RegisterRule(RuleType.UNDEFINED)
    if code == OP_SAME_VALUE:
        return RegisterRule(RuleType.SAME_VALUE)
    if code == OP_EXPRESSION:
        return RegisterRule(RuleType.EXPRESSION, 0, bytes(b) if isinstance(b, bytes) else b"")
    if code == OP_VAL_EXPRESSION:
        return RegisterRule(RuleType.VAL_EXPRESSION, 0, bytes(b) if isinstance(b, bytes) else b"")
    return None


@dataclass(slots=True)
class _State:
    cfa_register: int | None = None
    cfa_offset: int = 0
    cfa_expression: bytes | None = None
    registers: dict[int, RegisterRule] = field(default_factory=dict)
    ra_signed: bool = False
    args_size: int = 0

    def copy(self) -> _State:
        return _State(
            self.cfa_register,
            self.cfa_offset,
            self.cfa_expression,
            dict(self.registers),
            self.ra_signed,
            self.args_size,
        )


def run_program(
    initial: Sequence[Op], body: Sequence[Op], pc_begin: int, pc_end: int
) -> list[CfiRow]:
    """Interpret CIE initial instructions then FDE instructions (DWARF 5 6.4.2).

    ``DW_CFA_restore`` returns a register to its rule after the initial instructions;
    ``remember_state`` / ``restore_state`` use a stack (the CFA is part of the saved state, as
    GCC's unwinder and the DWARF 5 text say).  Rows with an empty range are dropped.
    """
    state = _State()
    for op in initial:
        _apply(state, op, None, [])
    cie_rules = dict(state.registers)
    stack: list[_State] = []
    rows: list[CfiRow] = []
    loc = pc_begin

    def close(until: int) -> None:
        if until > loc:
            rows.append(
                CfiRow(
                    loc,
                    until,
                    state.cfa_register,
                    state.cfa_offset,
                    state.cfa_expression,
                    dict(state.registers),
                    state.ra_signed,
                    state.args_size,
                )
            )

    for op in body:
        code = op[0]
        if code in (OP_ADVANCE, OP_SET_LOC):
            target = loc + op[1] if code == OP_ADVANCE else op[1]
            if target < loc:
                raise CfiError(f"DW_CFA_set_loc moves backwards to {target:#x}")
            target = min(target, pc_end)
            close(target)
            loc = target
            continue
        if code == OP_REMEMBER:
            stack.append(state.copy())
        elif code == OP_RESTORE_STATE:
            if not stack:
                raise CfiError("DW_CFA_restore_state without DW_CFA_remember_state")
            state = stack.pop()
        else:
            _apply(state, op, cie_rules, stack)
    close(pc_end)
    return rows


def _apply(
    state: _State, op: Op, cie_rules: dict[int, RegisterRule] | None, stack: list[_State]
) -> None:
    code, a, b = op
    if code == OP_DEF_CFA:
        state.cfa_register, state.cfa_offset = a, int(b) if isinstance(b, int) else 0
        state.cfa_expression = None
    elif code == OP_DEF_CFA_REGISTER:
        state.cfa_register = a
        state.cfa_expression = None
    elif code == OP_DEF_CFA_OFFSET:
        state.cfa_offset = a
    elif code == OP_DEF_CFA_EXPRESSION:
        state.cfa_register = None
        state.cfa_expression = bytes(b) if isinstance(b, bytes) else b""
    elif code == OP_RESTORE:
        if cie_rules is not None and a in cie_rules:
            state.registers[a] = cie_rules[a]
        else:
            state.registers.pop(a, None)
    elif code == OP_WINDOW_SAVE:
        state.ra_signed = not state.ra_signed
    elif code == OP_ARGS_SIZE:
        state.args_size = a
    elif code in (OP_REMEMBER, OP_RESTORE_STATE, OP_NEGATE_RA_WITH_PC):
        if code == OP_REMEMBER:
            stack.append(state.copy())
    elif code in (OP_ADVANCE, OP_SET_LOC):
        pass  # location changes in the CIE's initial instructions have no effect
    else:
        rule = _rule_for(op)
        if rule is None:
            raise CfiError(f"operation {CFA_NAMES.get(code, hex(code))} has no register rule")
        state.registers[a] = rule


__all__ = [
    "CFA_NAMES",
    "CfiFormat",
    "CfiRow",
    "CfiTable",
    "Cie",
    "Fde",
    "FdeSpan",
    "Op",
    "PointerContext",
    "RegisterRule",
    "RuleType",
    "decode_instructions",
    "parse_cfi",
    "read_sleb",
    "read_uleb",
    "run_program",
    "scan_fdes",
]
