"""DWARF CFA instructions: the DW_CFA opcodes and their operands (DWARF 5 7.24, GNU and AArch64
extensions), declared once, and the one decoder of CFA programs into canonical operations
(DWARF 5 6.4.2 "Call Frame Instructions").

:data:`CFA_INSTRUCTIONS` declares the operands of every instruction; :data:`CANONICAL` the
operation it is and where that operation's operands ``(a, b)`` come from (a delta times the
code alignment factor, an offset times the data alignment factor...), so that every encoding
of one operation gives the same ``(op, a, b)`` (``advance_loc1`` and ``advance_loc``,
``def_cfa_sf`` and ``def_cfa``...).

:func:`decode_programs` decodes many programs at once, with numpy, from those two tables: the
length of the instruction that would start at each byte, a walk of every program with those
lengths, then the operands of every instruction.  Operands numpy cannot hold exactly (LEB128
numbers of 9 bytes or more, 8-byte constants, expression blocks, the products of unusual
alignment factors) are read one instruction at a time (:func:`_read_one`, the same tables),
which also says why a malformed program cannot be decoded.  :func:`decode_instructions` is the
same decoder for one program.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from enum import Enum
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from ..dataclass import dataclass
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
#: here for all 64 of their opcodes.
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

# Canonical operations produced by the decoder: (op, a, b).
#   OP_ADVANCE  a = byte delta (code alignment applied)      OP_SET_LOC a = absolute address
#   OP_DEF_CFA  a = reg, b = offset                          OP_DEF_CFA_REGISTER a = reg
#   OP_DEF_CFA_OFFSET a = offset                             OP_DEF_CFA_EXPRESSION b = bytes
#   OP_OFFSET   a = reg, b = CFA-relative offset (unfactored) OP_VAL_OFFSET a = reg, b = offset
#   OP_EXPRESSION / OP_VAL_EXPRESSION a = reg, b = bytes     OP_REGISTER a = reg, b = reg2
#   OP_RESTORE / OP_UNDEFINED / OP_SAME_VALUE a = reg        OP_ARGS_SIZE a = size
#   OP_REMEMBER, OP_RESTORE_STATE, OP_WINDOW_SAVE, OP_NEGATE_RA_WITH_PC: no operands
# The codes are the basic DWARF opcodes, so CFA_NAMES names them.  DW_CFA_nop is dropped.
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
_OP_NOP = DW_CFA_nop

#: One decoded CFA instruction: (canonical op, operand a, operand b).
Op = tuple[int, int, "int | bytes"]

# Where a canonical operand comes from, and what it is multiplied by.
_NONE, _LOW_6_BITS, _FIRST, _SECOND = 0, 1, 2, 3
_ONE, _CODE_FACTOR, _DATA_FACTOR, _MINUS_DATA_FACTOR = 0, 1, 2, 3
_A = tuple[int, int]

#: Per instruction of :data:`CFA_INSTRUCTIONS`: its canonical operation, and where a and b come
#: from, each (operand, factor) (DWARF 5 6.4.2.1-6.4.2.4: advances are times the code
#: alignment factor, the offsets of the factored forms times the data alignment factor).
CANONICAL: dict[int, tuple[int, _A, _A]] = {
    DW_CFA_advance_loc: (OP_ADVANCE, (_LOW_6_BITS, _CODE_FACTOR), (_NONE, _ONE)),
    DW_CFA_offset: (OP_OFFSET, (_LOW_6_BITS, _ONE), (_FIRST, _DATA_FACTOR)),
    DW_CFA_restore: (OP_RESTORE, (_LOW_6_BITS, _ONE), (_NONE, _ONE)),
    DW_CFA_nop: (_OP_NOP, (_NONE, _ONE), (_NONE, _ONE)),
    DW_CFA_set_loc: (OP_SET_LOC, (_FIRST, _ONE), (_NONE, _ONE)),
    DW_CFA_advance_loc1: (OP_ADVANCE, (_FIRST, _CODE_FACTOR), (_NONE, _ONE)),
    DW_CFA_advance_loc2: (OP_ADVANCE, (_FIRST, _CODE_FACTOR), (_NONE, _ONE)),
    DW_CFA_advance_loc4: (OP_ADVANCE, (_FIRST, _CODE_FACTOR), (_NONE, _ONE)),
    DW_CFA_offset_extended: (OP_OFFSET, (_FIRST, _ONE), (_SECOND, _DATA_FACTOR)),
    DW_CFA_restore_extended: (OP_RESTORE, (_FIRST, _ONE), (_NONE, _ONE)),
    DW_CFA_undefined: (OP_UNDEFINED, (_FIRST, _ONE), (_NONE, _ONE)),
    DW_CFA_same_value: (OP_SAME_VALUE, (_FIRST, _ONE), (_NONE, _ONE)),
    DW_CFA_register: (OP_REGISTER, (_FIRST, _ONE), (_SECOND, _ONE)),
    DW_CFA_remember_state: (OP_REMEMBER, (_NONE, _ONE), (_NONE, _ONE)),
    DW_CFA_restore_state: (OP_RESTORE_STATE, (_NONE, _ONE), (_NONE, _ONE)),
    DW_CFA_def_cfa: (OP_DEF_CFA, (_FIRST, _ONE), (_SECOND, _ONE)),
    DW_CFA_def_cfa_register: (OP_DEF_CFA_REGISTER, (_FIRST, _ONE), (_NONE, _ONE)),
    DW_CFA_def_cfa_offset: (OP_DEF_CFA_OFFSET, (_FIRST, _ONE), (_NONE, _ONE)),
    DW_CFA_def_cfa_expression: (OP_DEF_CFA_EXPRESSION, (_NONE, _ONE), (_FIRST, _ONE)),
    DW_CFA_expression: (OP_EXPRESSION, (_FIRST, _ONE), (_SECOND, _ONE)),
    DW_CFA_offset_extended_sf: (OP_OFFSET, (_FIRST, _ONE), (_SECOND, _DATA_FACTOR)),
    DW_CFA_def_cfa_sf: (OP_DEF_CFA, (_FIRST, _ONE), (_SECOND, _DATA_FACTOR)),
    DW_CFA_def_cfa_offset_sf: (OP_DEF_CFA_OFFSET, (_FIRST, _DATA_FACTOR), (_NONE, _ONE)),
    DW_CFA_val_offset: (OP_VAL_OFFSET, (_FIRST, _ONE), (_SECOND, _DATA_FACTOR)),
    DW_CFA_val_offset_sf: (OP_VAL_OFFSET, (_FIRST, _ONE), (_SECOND, _DATA_FACTOR)),
    DW_CFA_val_expression: (OP_VAL_EXPRESSION, (_FIRST, _ONE), (_SECOND, _ONE)),
    DW_CFA_MIPS_advance_loc8: (OP_ADVANCE, (_FIRST, _CODE_FACTOR), (_NONE, _ONE)),
    DW_CFA_AARCH64_negate_ra_state_with_pc: (OP_NEGATE_RA_WITH_PC, (_NONE, _ONE), (_NONE, _ONE)),
    DW_CFA_GNU_window_save: (OP_WINDOW_SAVE, (_NONE, _ONE), (_NONE, _ONE)),
    DW_CFA_GNU_args_size: (OP_ARGS_SIZE, (_FIRST, _ONE), (_NONE, _ONE)),
    DW_CFA_GNU_negative_offset_extended: (
        OP_OFFSET, (_FIRST, _ONE), (_SECOND, _MINUS_DATA_FACTOR)
    ),
}  # fmt: skip

# ---------------------------------------------------------------------------------------------
# Per opcode byte, from the two tables above

_KINDS = (None, *Operand)
#: Bytes after the last program, so that operands are read past a truncated one.
PAD = 16
#: LEB128 numbers of more bytes than this, and constants of 8 bytes, are read one at a time.
_MAX_LEB = 8
#: A block length read past any program (its instruction runs past its end).
_HUGE = 1 << 40
#: Alignment factors beyond this are multiplied one instruction at a time (no int64 overflow).
_MAX_FACTOR = 1 << 6
#: Per instruction: bytes of a fixed-size operand kind (0 for the others).
_FIXED = np.array([0 if k is None else (k.size or 0) for k in _KINDS], dtype=np.int64)
_ULEB, _SLEB, _BLOCK, _ADDRESS = (
    _KINDS.index(Operand.ULEB), _KINDS.index(Operand.SLEB), _KINDS.index(Operand.BLOCK),
    _KINDS.index(Operand.ADDRESS),
)  # fmt: skip


def _opcode_tables() -> tuple[npt.NDArray[np.int64], ...]:
    """Per opcode byte: the kinds of its two operands, its canonical operation (-1: unknown),
    and the source and factor of a and of b."""
    tables = np.zeros((7, 256), dtype=np.int64)
    tables[2] = -1
    for code, (_name, operands) in CFA_INSTRUCTIONS.items():
        last = code + LOW_6_BITS if code & HIGH_2_BITS else code
        kinds = [_KINDS.index(operand) for operand in operands] + [0, 0]
        op, (a_from, a_factor), (b_from, b_factor) = CANONICAL[code]
        columns = (kinds[0], kinds[1], op, a_from, a_factor, b_from, b_factor)
        tables[:, code : last + 1] = np.array(columns, dtype=np.int64)[:, None]
    return tuple(tables)


_KIND1, _KIND2, _OP, _A_FROM, _A_FACTOR, _B_FROM, _B_FACTOR = _opcode_tables()
#: Per opcode byte, for :func:`_instruction_lengths`: the opcode and its fixed-size operands'
#: bytes (0: unknown opcode); whether its first operand is an LEB128 number, and then
#: whether a second operand follows; whether its first operand is a block or an address.
_BASE = np.where(_OP >= 0, 1 + _FIXED[_KIND1] + _FIXED[_KIND2], 0).astype(np.int64)
_FIRST_LEB = (_KIND1 == _ULEB) | (_KIND1 == _SLEB)
_HAS_SECOND = _KIND2 != 0
_FIRST_OTHER = (_KIND1 == _BLOCK) | (_KIND1 == _ADDRESS)

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class _Source:
    """The programs a :class:`Decoded` was decoded from: laid end to end, with their CIEs'
    alignment factors and address sizes."""

    joined: bytes
    starts: IntArray
    ends: IntArray
    code_alignment: list[int]
    data_alignment: list[int]
    address_size: list[int]
    big_endian: bool

    def reader(self) -> _Reader:
        order: Literal["big", "little"] = "big" if self.big_endian else "little"
        return _Reader(self.joined, self.starts, self.ends, self.code_alignment,
                       self.data_alignment, self.address_size, order)  # fmt: skip


class Decoded(NamedTuple):
    """Programs decoded by :func:`decode_programs`: their instructions (DW_CFA_nop left out),
    program by program, program ``i``'s ``[bounds[i], bounds[i + 1])`` (none when it cannot
    be decoded: ``errors[i]`` says why).  The operands of the instructions of a program are
    read when it is asked for (:meth:`operations`)."""

    program: IntArray
    op: IntArray
    #: Where each instruction is in the programs laid end to end, and its length.
    position: IntArray
    length: IntArray
    #: Per instruction: how far an advance moves (code alignment applied; at most 2**40, past
    #: any function), 0 for the other instructions.
    moves: IntArray
    bounds: IntArray
    errors: dict[int, CfiError]
    source: _Source

    def operations(self, programs: Sequence[int], *, moves: bool = False) -> list[list[Op]]:
        """The operations of ``programs`` (which can be decoded), operands read now;
        ``moves``: each advance's delta 1 when it moves, 0 when not."""
        source = self.source
        starts, ends = source.starts, source.ends
        chosen = np.asarray(programs, dtype=np.int64)
        lo, hi = self.bounds[chosen], self.bounds[chosen + 1]
        count = hi - lo
        before = np.cumsum(count) - count
        taken = np.repeat(lo - before, count) + np.arange(int(count.sum()), dtype=np.int64)
        # The programs asked for, end to end: their instructions' places there.
        sizes = ends[chosen] - starts[chosen]
        placed = np.cumsum(sizes) - sizes
        text = b"".join(source.joined[s:e] for s, e in zip(starts[chosen].tolist(),
                                                               ends[chosen].tolist(), strict=True))
        buf = np.frombuffer(text + bytes(PAD), dtype=np.uint8)
        owner = np.repeat(np.arange(len(chosen), dtype=np.int64), count)
        pos = self.position[taken] - starts[chosen][owner] + placed[owner]
        caf = [source.code_alignment[p] for p in chosen.tolist()]
        daf = [source.data_alignment[p] for p in chosen.tolist()]
        address = np.array([source.address_size[p] for p in chosen.tolist()], dtype=np.int64)
        _op, a, b, exotic = _operands(buf, _leb_lengths(buf), pos, owner, caf, daf, address,
                                      source.big_endian)  # fmt: skip
        op = self.op[taken]
        if moves:
            a = np.where(op == OP_ADVANCE, self.moves[taken] > 0, a)
        found = list(zip(op.tolist(), a.tolist(), b.tolist(), strict=True))
        if len(exotic):
            reader = source.reader()
            for at in exotic.tolist():
                program = int(chosen[owner[at]])
                one = reader.one(int(self.position[taken[at]]), program)[0]
                assert one is not None
                if not moves or one[0] != OP_ADVANCE:
                    found[at] = one
        edges = np.append(before, len(taken)).tolist()
        return [found[edges[k] : edges[k + 1]] for k in range(len(chosen))]

    def ops(self, program: int) -> list[Op]:
        """The operations of one program."""
        return self.operations([program])[0]


def decode_programs(
    programs: Sequence[bytes],
    code_alignment: Sequence[int],
    data_alignment: Sequence[int],
    address_size: Sequence[int],
    big_endian: bool,
    offsets: Sequence[int] | None = None,
) -> Decoded:
    """Decode the CFA programs ``programs`` (DWARF 5 6.4.2), each with its CIE's alignment
    factors and address size: their instructions, to canonical operations with operands
    unfactored (advances in bytes, offsets in bytes) when asked for.  ``offsets``: where each
    program is in its section, for the offsets errors give (from the program's start without
    it)."""
    count = len(programs)
    joined = b"".join(programs)
    sizes = np.fromiter(map(len, programs), dtype=np.int64, count=count)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    buf = np.frombuffer(joined + bytes(PAD), dtype=np.uint8)
    lebs = _leb_lengths(buf)
    addresses = np.asarray(address_size, dtype=np.int64)
    source = _Source(joined, starts, ends, [int(f) for f in code_alignment],
                     [int(f) for f in data_alignment], [int(s) for s in address_size],
                     big_endian)  # fmt: skip
    reader = source.reader()
    lengths = _instruction_lengths(buf, lebs, starts, addresses, reader)
    pos, prg, broken = _walk(lengths, starts, ends)
    length = lengths[pos]
    del lengths
    code = buf[pos]
    op = _OP[code]
    errors: dict[int, CfiError] = {}
    # LEB128 numbers of ten bytes or more may not fit in 64 bits: their programs are read
    # exactly, one instruction at a time, up to those.
    long = _long_numbers(buf, lebs, code, pos, addresses[prg]) if lebs.max() > _MAX_LEB else ()
    for at in np.asarray(long, dtype=np.int64).tolist():
        program = int(prg[at])
        if program not in errors:
            try:
                reader.one(int(pos[at]), program)
            except CfiError as error:
                errors[program] = error
    for program in np.flatnonzero(broken >= 0).tolist():
        if program not in errors:
            errors[program] = reader.error_at(int(broken[program]), program)
    moves = _moves(buf, pos, prg, code, op, source, reader)
    keep = op != _OP_NOP
    if errors:
        failed = np.zeros(count, dtype=bool)
        failed[list(errors)] = True
        keep &= ~failed[prg]
    kept = np.flatnonzero(keep)
    prg = prg[kept]
    shift = np.zeros(count, dtype=np.int64)
    if offsets is not None:
        shift = np.asarray(offsets, dtype=np.int64) - starts
    for program, found in errors.items():
        if found.offset is not None:
            errors[program] = CfiError(found.message, found.offset + int(shift[program]))
    return Decoded(
        prg,
        op[kept],
        pos[kept],
        length[kept],
        moves[kept],
        np.searchsorted(prg, np.arange(count + 1)).astype(np.int64),
        errors,
        source,
    )


def decode_instructions(
    data: bytes, pos: int, end: int, cie: Cie, big_endian: bool = False
) -> list[Op]:
    """Decode the CFA program ``data[pos:end]`` of ``cie`` to canonical operations
    (:func:`decode_programs` of one program); raises CfiError naming the offset in ``data``."""
    decoded = decode_programs(
        [data[pos:end]], [cie.code_alignment], [cie.data_alignment], [cie.address_size],
        big_endian, [pos],
    )  # fmt: skip
    if decoded.errors:
        raise decoded.errors[0]
    return decoded.ops(0)


def _leb_lengths(buf: npt.NDArray[np.uint8]) -> IntArray:
    """Per byte: the length of the LEB128 number (DWARF 5 7.6) that would start there."""
    count = len(buf)
    index = np.arange(count, dtype=np.int32 if count < 1 << 30 else np.int64)
    stop = np.where(buf < 0x80, index, count)
    stop = np.minimum.accumulate(stop[::-1])[::-1]
    stop -= index - 1
    return stop.astype(np.int64)


def _operand_sizes(
    buf: npt.NDArray[np.uint8], lebs: IntArray, kinds: IntArray, at: IntArray,
    address_size: IntArray, reader: _Reader | None = None,
) -> IntArray:  # fmt: skip
    """Bytes of the operands of kinds ``kinds`` at ``at`` (``address_size``: per operand); a
    block's length of more than :data:`_MAX_LEB` bytes is read by ``reader`` (without one, or
    when it cannot be, the block runs past any program)."""
    at = np.minimum(at, len(buf) - 1)
    size = _FIXED[kinds]
    leb = np.flatnonzero((kinds == _ULEB) | (kinds == _SLEB))
    size[leb] = lebs[at[leb]]
    block = np.flatnonzero(kinds == _BLOCK)
    if len(block):
        where = at[block]
        length = lebs[where]
        value = _uleb_values(buf, where, np.minimum(length, _MAX_LEB))
        value[length > _MAX_LEB] = _HUGE
        data = reader.data if reader is not None else b""
        for k in np.flatnonzero(length > _MAX_LEB).tolist() if data else ():
            with suppress(CfiError):
                value[k] = min(read_uleb(data, int(where[k]), len(data))[0], _HUGE)
        size[block] = length + value
    address = np.flatnonzero(kinds == _ADDRESS)
    size[address] = address_size[address]
    return size


def _instruction_lengths(
    buf: npt.NDArray[np.uint8], lebs: IntArray, starts: IntArray, address_size: IntArray,
    reader: _Reader,
) -> IntArray:  # fmt: skip
    """Per byte of the programs: the length of the instruction that would start there (0 for
    an unknown opcode): its opcode and fixed-size operands, then its LEB128 numbers, block
    and address (the operands :data:`CFA_INSTRUCTIONS` declares)."""
    count = len(buf) - PAD
    op = buf[:count]
    length = _BASE[op]
    first = np.flatnonzero(_FIRST_LEB[op])  # most operands: LEB128 numbers
    first_size = lebs[first + 1]
    length[first] += first_size
    pick = _HAS_SECOND[op[first]]
    at = first[pick]
    length[at] += _operand_sizes(buf, lebs, _KIND2[op[at]], at + 1 + first_size[pick],
                                 np.broadcast_to(address_size[:1], (len(at),)), reader)  # fmt: skip
    other = np.flatnonzero(_FIRST_OTHER[op])  # a block, or an address (DW_CFA_set_loc)
    if len(other):
        if len(address_size) and (address_size == address_size[0]).all():
            sizes = np.broadcast_to(address_size[:1], (len(other),))
        else:  # CIEs of several address sizes: the size of the program each byte is in
            sizes = address_size[np.maximum(np.searchsorted(starts, other, "right") - 1, 0)]
        length[other] += _operand_sizes(buf, lebs, _KIND1[op[other]], other + 1, sizes, reader)
    return length


def _long_numbers(
    buf: npt.NDArray[np.uint8], lebs: IntArray, code: npt.NDArray[np.uint8], pos: IntArray,
    address_size: IntArray,
) -> IntArray:  # fmt: skip
    """The instructions at ``pos`` with an LEB128 operand longer than :data:`_MAX_LEB`
    bytes."""
    kind = _KIND1[code]
    first = (kind == _ULEB) | (kind == _SLEB)
    found = first & (lebs[np.minimum(pos + 1, len(buf) - 1)] > _MAX_LEB)
    kind = _KIND2[code]
    two = np.flatnonzero((kind == _ULEB) | (kind == _SLEB))
    if len(two):
        size = _operand_sizes(buf, lebs, _KIND1[code[two]], pos[two] + 1, address_size[two])
        found[two] |= lebs[np.minimum(pos[two] + 1 + size, len(buf) - 1)] > _MAX_LEB
    return np.flatnonzero(found)


def _moves(
    buf: npt.NDArray[np.uint8], pos: IntArray, prg: IntArray, code: npt.NDArray[np.uint8],
    op: IntArray, source: _Source, reader: _Reader,
) -> IntArray:  # fmt: skip
    """Per instruction: how far it moves when it is an advance (DWARF 5 6.4.2.1: the delta in
    the opcode's low six bits or in a 1-, 2-, 4- or 8-byte operand, times the code alignment
    factor), at most :data:`_FAR`; 0 for the others."""
    moves = np.zeros(len(pos), dtype=np.int64)
    advance = np.flatnonzero(op == OP_ADVANCE)
    if not len(advance):
        return moves
    where, opcode = pos[advance], code[advance]
    delta = np.where(opcode & HIGH_2_BITS, opcode & LOW_6_BITS, 0).astype(np.int64)
    wide = np.flatnonzero((opcode & HIGH_2_BITS) == 0)
    exact = np.zeros(len(advance), dtype=bool)
    if len(wide):
        none = np.zeros(len(wide), dtype=np.int64)  # no LEB128 numbers, no addresses
        value, _size, odd = _values(buf, none, _KIND1[opcode[wide]], where[wide] + 1, none,
                                    none, source.big_endian)  # fmt: skip
        delta[wide] = value
        exact[wide[odd]] = True
    caf = source.code_alignment
    factor: IntArray | int
    if len(set(caf)) == 1:  # one CIE, or CIEs of one code alignment: the usual case
        factor = min(caf[0], _FAR)
    else:
        factor = np.array([min(f, _FAR) for f in caf], dtype=np.int64)[prg[advance]]
    exact |= (factor >= _MAX_FACTOR) & (delta > 0)
    moves[advance] = np.minimum(delta * np.minimum(factor, _MAX_FACTOR), _FAR)
    for k in np.flatnonzero(exact).tolist():
        one = reader.one(int(where[k]), int(prg[advance[k]]))[0]
        assert one is not None and isinstance(one[1], int)
        moves[advance[k]] = min(one[1], _FAR)
    return moves


#: How far the advances an instruction column holds go at most (beyond any function).
_FAR = 1 << 40


def _uleb_values(buf: npt.NDArray[np.uint8], at: IntArray, length: IntArray) -> IntArray:
    """The unsigned LEB128 numbers of ``length`` (at most :data:`_MAX_LEB`) bytes at ``at``."""
    value = (buf[at] & 0x7F).astype(np.int64)
    longer = np.flatnonzero(length > 1)
    if len(longer):
        where, size = at[longer], length[longer]
        extra = np.zeros(len(longer), dtype=np.int64)
        for k in range(1, _MAX_LEB):
            extra |= np.where(size > k, buf[where + k] & 0x7F, 0).astype(np.int64) << (7 * k)
        value[longer] |= extra
    return value


def _walk(
    lengths: IntArray, starts: IntArray, ends: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """(position, program) of every instruction of the programs ``[starts[i], ends[i])``, in
    order, from the lengths of the instructions at each byte; and per program where an
    instruction is unknown or runs past its end (-1: nowhere).

    The programs are walked together, one instruction of each per numpy round, while at least
    :data:`FEW_PROGRAMS` are left; the rest (the longest) one at a time in Python: a round costs
    some microseconds whatever the number of programs in it, a loop turn a tenth of one, so the
    cost stays linear in the number of instructions, one program of a million included."""
    broken = np.full(len(starts), -1, dtype=np.int64)
    cur = starts.copy()
    prog = np.arange(len(starts), dtype=np.int64)
    end = ends.copy()
    is_start = np.zeros(len(lengths) + 1, dtype=bool)
    program_at = np.empty(len(lengths) + 1, dtype=np.int64)
    while True:
        live = cur < end
        if not live.all():
            cur, prog, end = cur[live], prog[live], end[live]
        if len(cur) < FEW_PROGRAMS:
            break
        step = lengths[cur]
        nxt = cur + step
        bad = (step <= 0) | (nxt > end)
        if bad.any():
            broken[prog[bad]] = cur[bad]
            keep = ~bad
            cur, prog, end, nxt = cur[keep], prog[keep], end[keep], nxt[keep]
        is_start[cur] = True
        program_at[cur] = prog
        cur = nxt
    for at, program, stop in zip(cur.tolist(), prog.tolist(), end.tolist(), strict=True):
        local = lengths[at:stop].tolist()
        size, offset = stop - at, 0
        found = []
        while offset < size:
            step = local[offset]
            if step <= 0 or offset + step > size:
                broken[program] = at + offset
                break
            found.append(offset)
            offset += step
        found_at = np.array(found, dtype=np.int64) + at
        is_start[found_at] = True
        program_at[found_at] = program
    pos = np.flatnonzero(is_start[: len(lengths)])
    return pos, program_at[pos], broken


#: Fewer programs than this left to walk: one at a time (see :func:`_walk`).
FEW_PROGRAMS = 64


def _operands(
    buf: npt.NDArray[np.uint8], lebs: IntArray, pos: IntArray, prg: IntArray, caf: list[int],
    daf: list[int], address_size: IntArray, big_endian: bool,
) -> tuple[IntArray, IntArray, IntArray, IntArray]:  # fmt: skip
    """The canonical operation and operands of the instructions at ``pos`` (of programs
    ``prg``), and which of them must be read one at a time (numpy cannot hold them)."""
    code = buf[pos]
    count = len(pos)
    first, size, exotic = _values(buf, lebs, _KIND1[code], pos + 1, address_size, prg, big_endian)
    kind = _KIND2[code]
    second = np.zeros(count, dtype=np.int64)
    has = np.flatnonzero(kind)
    if len(has):
        value, _size, odd = _values(buf, lebs, kind[has], pos[has] + 1 + size[has],
                                    address_size, prg[has], big_endian)  # fmt: skip
        second[has] = value
        exotic[has] |= odd
    # Per program: 1, the code and data alignment factors and the negated data factor, where
    # they are small enough (products within int64); the others' products in Python.
    plain = [abs(c) < _MAX_FACTOR and abs(d) < _MAX_FACTOR for c, d in zip(caf, daf, strict=True)]
    factors = np.zeros((4, len(caf)), dtype=np.int64)
    factors[0] = 1
    factors[1] = [c if small else 0 for c, small in zip(caf, plain, strict=True)]
    factors[2] = [d if small else 0 for d, small in zip(daf, plain, strict=True)]
    factors[3] = -factors[2]
    uniform = (factors == factors[:, :1]).all() if len(caf) else True
    low = (code & LOW_6_BITS).astype(np.int64)
    out = []
    for take, factor in ((_A_FROM, _A_FACTOR), (_B_FROM, _B_FACTOR)):
        source, scale = take[code], factor[code]
        value = np.where(source == _FIRST, first, np.where(source == _SECOND, second, 0))
        value = np.where(source == _LOW_6_BITS, low, value)
        if uniform:
            value *= factors[:, 0][scale] if len(caf) else 1
        else:
            value *= factors[scale, prg]
        if not all(plain):
            exotic |= (scale != _ONE) & ~np.array(plain, dtype=bool)[prg]
        out.append(value)
    return _OP[code], out[0], out[1], np.flatnonzero(exotic)


def _values(
    buf: npt.NDArray[np.uint8], lebs: IntArray, kind: IntArray, at: IntArray,
    address_size: IntArray, prg: IntArray, big_endian: bool,
) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]]:  # fmt: skip
    """The values and sizes of operands of kinds ``kind`` at ``at`` (0 for none), and which
    numpy does not hold (longer LEB128 numbers, large constants, blocks)."""
    count = len(kind)
    at = np.minimum(at, len(buf) - 1)
    value = np.zeros(count, dtype=np.int64)
    size = np.zeros(count, dtype=np.int64)
    odd = np.zeros(count, dtype=bool)
    leb = np.flatnonzero((kind == _ULEB) | (kind == _SLEB))
    if len(leb):
        where = at[leb]
        length = lebs[where]
        size[leb] = length
        odd[leb[length > _MAX_LEB]] = True
        length = np.minimum(length, _MAX_LEB)
        number = _uleb_values(buf, where, length)
        signed = np.flatnonzero(kind[leb] == _SLEB)
        if len(signed):
            last = buf[where[signed] + length[signed] - 1]
            negative = (last & 0x40) != 0
            number[signed] -= negative.astype(np.int64) << (7 * length[signed])
        value[leb] = number
    rest = np.flatnonzero(kind > _SLEB)
    if not len(rest):
        return value, size, odd
    kinds, where = kind[rest], at[rest]
    width = np.where(kinds == _ADDRESS, address_size[prg[rest]], _FIXED[kinds])
    block = kinds == _BLOCK
    odd[rest[block]] = True
    length = lebs[where[block]]
    block_size = _uleb_values(buf, where[block], np.minimum(length, _MAX_LEB))
    width[block] = 0
    part = np.zeros(len(rest), dtype=np.int64)
    part[block] = length + np.where(length <= _MAX_LEB, block_size, _HUGE)
    for bytes_ in (1, 2, 4, 8):
        fixed = np.flatnonzero(width == bytes_)
        if not len(fixed):
            continue
        gather = np.minimum(where[fixed, None] + np.arange(bytes_), len(buf) - 1)
        raw = np.ascontiguousarray(buf[gather]).view(f"{'>' if big_endian else '<'}u{bytes_}")
        raw = raw.ravel().astype(np.uint64)
        odd[rest[fixed[raw >= 1 << 56]]] = True
        value[rest[fixed]] = np.minimum(raw, 1 << 56).astype(np.int64)
        part[fixed] = bytes_
    size[rest] = part
    return value, size, odd


class _Reader:
    """One instruction at a time, with Python integers: the operands numpy does not hold, and
    the error of a program that cannot be decoded."""

    def __init__(
        self, data: bytes, starts: IntArray, ends: IntArray, caf: list[int], daf: list[int],
        address_size: list[int], order: Literal["big", "little"],
    ) -> None:  # fmt: skip
        self.data = data
        self.starts = starts.tolist()
        self.ends = ends.tolist()
        self.caf, self.daf, self.address_size, self.order = caf, daf, address_size, order

    def one(self, pos: int, program: int) -> tuple[Op | None, int]:
        """The operation at ``pos`` (None for DW_CFA_nop) and where the next one starts."""
        data, end = self.data, self.ends[program]
        opcode = data[pos]
        key = opcode & HIGH_2_BITS or opcode
        found = CFA_INSTRUCTIONS.get(key)
        if found is None:
            raise CfiError(f"unknown DW_CFA opcode {opcode:#04x}", pos)
        name, operands = found
        at = pos + 1
        values: list[Any] = [0, opcode & LOW_6_BITS, 0, 0]
        for number, operand in enumerate(operands):
            value: int | bytes
            if operand is Operand.ULEB:
                value, at = read_uleb(data, at, end)
            elif operand is Operand.SLEB:
                value, at = read_sleb(data, at, end)
            elif operand is Operand.BLOCK:
                size, at = read_uleb(data, at, end)
                if at + size > end:
                    raise CfiError(f"{name} block runs past the program", at)
                value = data[at : at + size]
                at += size
            else:
                size = operand.size or self.address_size[program]
                if at + size > end:
                    raise CfiError(f"{name} operand runs past the program", at)
                value = int.from_bytes(data[at : at + size], self.order)
                at += size
            values[_FIRST + number] = value
        op, a_from, b_from = CANONICAL[key]
        if op == _OP_NOP:
            return None, at
        factors = (1, self.caf[program], self.daf[program], -self.daf[program])
        a, b = (
            values[source] if isinstance(values[source], bytes)
            else values[source] * factors[factor]
            for source, factor in (a_from, b_from)
        )  # fmt: skip
        return (op, a, b), at

    def error_at(self, pos: int, program: int) -> CfiError:
        """Why the instruction at ``pos`` cannot be decoded."""
        try:
            self.one(pos, program)
        except CfiError as error:
            return error
        return CfiError("CFA instruction runs past the program", pos)  # pragma: no cover


__all__ = [
    "CANONICAL",
    "CFA_INSTRUCTIONS",
    "CFA_NAMES",
    "HIGH_2_BITS",
    "LOW_6_BITS",
    "PAD",
    "Decoded",
    "Op",
    "Operand",
    "decode_instructions",
    "decode_programs",
]
