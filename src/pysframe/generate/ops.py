"""DWARF CFA instructions: the DW_CFA opcodes and their operands (DWARF 5 7.24, GNU and AArch64
extensions), declared once in :data:`CFA_INSTRUCTIONS`, and their decoding into canonical
operations (DWARF 5 6.4.2 "Call Frame Instructions").

:func:`decode_instructions` turns a CFA program into a list of ``(op, a, b)`` tuples, one per
DWARF instruction, operands unfactored; every encoding of one operation gives the same
canonical op.  The translator (:mod:`pysframe.generate.translator`) reads these the way GNU as
reads its ``.cfi_*`` directives (gas/gen-sframe.c ``sframe_do_cfi_insn``).  The bulk paths
(:mod:`pysframe.generate.bulk`, :mod:`pysframe.generate.interpret_bulk`) read the opcodes
directly, with per-opcode tables made from :data:`CFA_INSTRUCTIONS`.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from ..errors import CfiError
from .cfi import Cie, read_sleb, read_uleb

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


class Operand(Enum):
    """One operand of a DW_CFA instruction, as the program stores it (DWARF 5 7.24)."""

    ULEB = "ULEB128"
    SLEB = "SLEB128"
    DATA1 = "1-byte constant"
    DATA2 = "2-byte constant"
    DATA4 = "4-byte constant"
    DATA8 = "8-byte constant"
    #: A ULEB128 length, then that many bytes (a DWARF expression).
    BLOCK = "block"
    #: A target address of the CIE's address size.
    ADDRESS = "address"

    @property
    def size(self) -> int | None:
        """Bytes of a fixed-size operand (None: LEB128, block or address)."""
        return _SIZES.get(self)


_SIZES = {Operand.DATA1: 1, Operand.DATA2: 2, Operand.DATA4: 4, Operand.DATA8: 8}

U, S = Operand.ULEB, Operand.SLEB  # short names for the table below only

#: Every DW_CFA instruction: its name and the operands after its opcode byte (DWARF 5 Table
#: 7.29, GNU and AArch64 extensions).  DW_CFA_advance_loc, DW_CFA_offset and DW_CFA_restore
#: keep their first operand (the delta, the register) in the opcode's low six bits and stand
#: here for all 64 of their opcodes.  :func:`decode_instructions` reads these layouts one
#: instruction at a time; the bulk paths take their per-opcode tables from this one
#: (:func:`pysframe.generate.instructions_bulk.operand_tables`).
CFA_INSTRUCTIONS: dict[int, tuple[str, tuple[Operand, ...]]] = {
    DW_CFA_advance_loc: ("DW_CFA_advance_loc", ()),
    DW_CFA_offset: ("DW_CFA_offset", (U,)),
    DW_CFA_restore: ("DW_CFA_restore", ()),
    DW_CFA_nop: ("DW_CFA_nop", ()),
    DW_CFA_set_loc: ("DW_CFA_set_loc", (Operand.ADDRESS,)),
    DW_CFA_advance_loc1: ("DW_CFA_advance_loc1", (Operand.DATA1,)),
    DW_CFA_advance_loc2: ("DW_CFA_advance_loc2", (Operand.DATA2,)),
    DW_CFA_advance_loc4: ("DW_CFA_advance_loc4", (Operand.DATA4,)),
    DW_CFA_offset_extended: ("DW_CFA_offset_extended", (U, U)),
    DW_CFA_restore_extended: ("DW_CFA_restore_extended", (U,)),
    DW_CFA_undefined: ("DW_CFA_undefined", (U,)),
    DW_CFA_same_value: ("DW_CFA_same_value", (U,)),
    DW_CFA_register: ("DW_CFA_register", (U, U)),
    DW_CFA_remember_state: ("DW_CFA_remember_state", ()),
    DW_CFA_restore_state: ("DW_CFA_restore_state", ()),
    DW_CFA_def_cfa: ("DW_CFA_def_cfa", (U, U)),
    DW_CFA_def_cfa_register: ("DW_CFA_def_cfa_register", (U,)),
    DW_CFA_def_cfa_offset: ("DW_CFA_def_cfa_offset", (U,)),
    DW_CFA_def_cfa_expression: ("DW_CFA_def_cfa_expression", (Operand.BLOCK,)),
    DW_CFA_expression: ("DW_CFA_expression", (U, Operand.BLOCK)),
    DW_CFA_offset_extended_sf: ("DW_CFA_offset_extended_sf", (U, S)),
    DW_CFA_def_cfa_sf: ("DW_CFA_def_cfa_sf", (U, S)),
    DW_CFA_def_cfa_offset_sf: ("DW_CFA_def_cfa_offset_sf", (S,)),
    DW_CFA_val_offset: ("DW_CFA_val_offset", (U, U)),
    DW_CFA_val_offset_sf: ("DW_CFA_val_offset_sf", (U, S)),
    DW_CFA_val_expression: ("DW_CFA_val_expression", (U, Operand.BLOCK)),
    DW_CFA_MIPS_advance_loc8: ("DW_CFA_MIPS_advance_loc8", (Operand.DATA8,)),
    DW_CFA_AARCH64_negate_ra_state_with_pc: ("DW_CFA_AARCH64_negate_ra_state_with_pc", ()),
    DW_CFA_GNU_window_save: ("DW_CFA_GNU_window_save", ()),
    DW_CFA_GNU_args_size: ("DW_CFA_GNU_args_size", (U,)),
    DW_CFA_GNU_negative_offset_extended: ("DW_CFA_GNU_negative_offset_extended", (U, U)),
}

del U, S

#: DW_CFA opcode -> name.
CFA_NAMES: dict[int, str] = {code: name for code, (name, _operands) in CFA_INSTRUCTIONS.items()}

#: The high two bits of an opcode byte: DW_CFA_advance_loc, DW_CFA_offset, DW_CFA_restore, or
#: 0 for the others (DWARF 5 Table 7.29).
HIGH_2_BITS = 0xC0
#: The low six bits: the operand of those three, the whole opcode of the others.
LOW_6_BITS = 0x3F

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
# Instructions (DWARF 5 6.4.2)


# About 125 lines on purpose: one loop, one branch per opcode of CFA_INSTRUCTIONS, the cursor and
# the factors in local variables.  It decodes every program the bulk paths leave; a call per
# instruction would cost about 9% (measured on libLLVM-15: 163 ns a call, 1.8 us an
# instruction).
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


__all__ = [
    "CFA_INSTRUCTIONS",
    "CFA_NAMES",
    "HIGH_2_BITS",
    "LOW_6_BITS",
    "Op",
    "Operand",
    "decode_instructions",
]
