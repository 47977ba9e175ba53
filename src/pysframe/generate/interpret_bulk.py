"""The rows of many CFA programs at once, with numpy: the same rows as
:func:`pysframe.generate.cfa_rules.interpret_program` (DWARF 5 6.4.2 semantics), for the
instructions almost every program is made of.

The programs are laid end to end in one byte buffer.  Every byte's LEB128 length and value
(DWARF 5 7.6) is computed once; the instruction that would start at each byte then has a
known length, and the programs are walked together, one instruction of each per step, to find
where their instructions are.  The rules in effect after each instruction are carried forward
with cumulative maxima of "last instruction that set this rule", and a row is the state at each
advance, plus the state after the last instruction.

Handled: ``nop``, ``advance_loc`` (all sizes), ``def_cfa`` (``_sf``), ``def_cfa_register``,
``def_cfa_offset`` (``_sf``), ``offset`` (``_extended``, ``_extended_sf``), ``val_offset``
(``_sf``), ``register``, ``restore`` (``_extended``), ``undefined``, ``same_value``,
``GNU_args_size`` and, on AArch64, ``negate_ra_state``, with LEB128 operands of up to four
bytes.  A program with anything else (expressions, ``set_loc``, ``remember_state``...) is
reported as not handled, for the per-program interpreter.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .cfa_rules import NOT_SIGNED, SIGNED, CfaKind, CfiAbi, RegKind, Rules
from .instructions_bulk import (
    BoolArray,
    IntArray,
    advance_deltas,
    instruction_positions,
    operand_tables,
)
from .ops import (
    LOW_6_BITS,
    DW_CFA_advance_loc,
    DW_CFA_advance_loc1,
    DW_CFA_advance_loc2,
    DW_CFA_advance_loc4,
    DW_CFA_def_cfa,
    DW_CFA_def_cfa_offset,
    DW_CFA_def_cfa_offset_sf,
    DW_CFA_def_cfa_register,
    DW_CFA_def_cfa_sf,
    DW_CFA_GNU_args_size,
    DW_CFA_GNU_window_save,
    DW_CFA_nop,
    DW_CFA_offset,
    DW_CFA_offset_extended,
    DW_CFA_offset_extended_sf,
    DW_CFA_register,
    DW_CFA_restore,
    DW_CFA_restore_extended,
    DW_CFA_same_value,
    DW_CFA_undefined,
    DW_CFA_val_offset,
    DW_CFA_val_offset_sf,
)

#: Zero bytes after the programs, so that operands are read past a truncated last program.
PAD = 16
#: LEB128 numbers of more bytes than this are left to the per-program interpreter.
_MAX_LEB = 4


class RuleColumns(NamedTuple):
    """:class:`~pysframe.generate.cfa_rules.Rules` as columns, one element per row."""

    cfa_kind: IntArray
    cfa_reg: IntArray
    cfa_offset: IntArray
    fp_kind: IntArray
    fp_reg: IntArray
    fp_offset: IntArray
    ra_kind: IntArray
    ra_reg: IntArray
    ra_offset: IntArray
    mangled: IntArray

    @classmethod
    def of(cls, rows: list[Rules]) -> RuleColumns:
        if not rows:
            return cls._make(np.zeros(0, dtype=np.int64) for _ in cls._fields)
        table = np.array(rows, dtype=np.int64).reshape(len(rows), len(cls._fields))
        return cls._make(np.ascontiguousarray(table[:, k]) for k in range(len(cls._fields)))

    def take(self, index: IntArray) -> RuleColumns:
        return RuleColumns._make(column[index] for column in self)

    def row(self, index: int) -> Rules:
        return Rules._make(int(column[index]) for column in self)


def concatenate(parts: list[RuleColumns]) -> RuleColumns:
    return RuleColumns._make(np.concatenate(columns) for columns in zip(*parts, strict=True))


class BulkRows(NamedTuple):
    """What :func:`interpret_programs` found."""

    #: Per program: every instruction was handled (its rows are below).
    ok: BoolArray
    #: The rows of the handled programs, in program order, each program's in address order.
    row_program: IntArray
    row_begin: IntArray
    rules: RuleColumns


# ---------------------------------------------------------------------------------------------
# Instruction lengths

#: The instructions this path handles (and, on AArch64, DW_CFA_AARCH64_negate_ra_state); a
#: program with another goes to the per-program interpreter.
_HANDLED = (
    DW_CFA_nop,
    DW_CFA_advance_loc,
    DW_CFA_advance_loc1,
    DW_CFA_advance_loc2,
    DW_CFA_advance_loc4,
    DW_CFA_restore,
    DW_CFA_offset,
    DW_CFA_def_cfa_register,
    DW_CFA_def_cfa_offset,
    DW_CFA_def_cfa_offset_sf,
    DW_CFA_restore_extended,
    DW_CFA_undefined,
    DW_CFA_same_value,
    DW_CFA_GNU_args_size,
    DW_CFA_def_cfa,
    DW_CFA_def_cfa_sf,
    DW_CFA_offset_extended,
    DW_CFA_offset_extended_sf,
    DW_CFA_register,
    DW_CFA_val_offset,
    DW_CFA_val_offset_sf,
)
_OPERAND_TABLES = {
    False: operand_tables(_HANDLED),
    True: operand_tables((*_HANDLED, DW_CFA_GNU_window_save)),
}


class _Lebs:
    """LEB128 numbers (DWARF 5 7.6) in a buffer: the length of the one starting at each byte
    (0 when longer than :data:`_MAX_LEB` bytes), and the values of those at given bytes."""

    def __init__(self, buf: npt.NDArray[np.uint8]) -> None:
        count = len(buf)
        index = np.arange(count, dtype=np.int32 if count < 1 << 30 else np.int64)
        # The first byte at or after each position without the continuation bit.
        stop = np.where(buf < 0x80, index, count)
        stop = np.minimum.accumulate(stop[::-1])[::-1]
        stop -= index
        self.length = np.where(stop < _MAX_LEB, stop + 1, 0).astype(np.int8)
        self._buf = np.concatenate([buf, np.zeros(_MAX_LEB, dtype=np.uint8)])

    def unsigned(self, at: IntArray) -> IntArray:
        value = self._buf[at].astype(np.int64) & 0x7F
        longer = np.flatnonzero(self.length[at] > 1)
        if len(longer):
            where = at[longer]
            length = self.length[where]
            extra = np.zeros(len(longer), dtype=np.int64)
            for k in range(1, _MAX_LEB):
                byte = (self._buf[where + k] & 0x7F).astype(np.int64)
                extra |= np.where(length > k, byte, 0) << (7 * k)
            value[longer] |= extra
        return value

    def signed(self, at: IntArray) -> IntArray:
        length = self.length[at]
        value = self.unsigned(at)
        last = self._buf[np.maximum(at + length - 1, 0)]
        negative = (length > 0) & ((last & 0x40) != 0)
        signed: IntArray = value - (negative.astype(np.int64) << (7 * length))
        return signed


def _instruction_lengths(
    buf: npt.NDArray[np.uint8], lebs: _Lebs, aarch64: bool
) -> npt.NDArray[np.int8]:
    """Per byte: the length of the handled instruction that would start there (0: not handled,
    or a LEB128 operand longer than :data:`_MAX_LEB` bytes)."""
    count = len(buf) - PAD
    leb_table, fixed_table = _OPERAND_TABLES[aarch64]
    op = buf[:count]
    operands = leb_table[op]
    length = fixed_table[op]  # 0 for the instructions not handled
    first = lebs.length[1 : count + 1]
    one = operands == 1
    length[one] = np.where(first[one] > 0, length[one] + first[one], 0)
    at = np.flatnonzero(operands == 2)
    first_at = lebs.length[at + 1]
    second_at = lebs.length[at + 1 + first_at]
    length[at] = np.where((first_at > 0) & (second_at > 0), length[at] + first_at + second_at, 0)
    return length


def _code_classes(cfi_abi: CfiAbi) -> npt.NDArray[np.int8]:
    """Per opcode byte, what the instruction does to the rows (the _C_* classes)."""
    table = np.zeros(256, dtype=np.int8)
    table[DW_CFA_advance_loc : DW_CFA_advance_loc + LOW_6_BITS + 1] = _C_ADVANCE
    table[[DW_CFA_advance_loc1, DW_CFA_advance_loc2, DW_CFA_advance_loc4]] = _C_ADVANCE
    table[[DW_CFA_def_cfa, DW_CFA_def_cfa_sf]] = _C_DEF_CFA
    table[DW_CFA_def_cfa_register] = _C_DEF_CFA_REGISTER
    table[[DW_CFA_def_cfa_offset, DW_CFA_def_cfa_offset_sf]] = _C_DEF_CFA_OFFSET
    for number in (cfi_abi.fp, cfi_abi.ra):
        if number <= LOW_6_BITS:
            table[DW_CFA_offset | number] = _C_REGISTER
            table[DW_CFA_restore | number] = _C_REGISTER
    table[list(_EXTENDED)] = _C_EXTENDED
    if cfi_abi.aarch64:
        table[DW_CFA_GNU_window_save] = _C_TOGGLE
    return table


# What an instruction does: nothing to the rows, advance, set the CFA (register and offset, the
# register, the offset), give a rule to the FP or RA, give a rule to a register named by its
# first operand, toggle the AArch64 RA signing state.
_C_NONE, _C_ADVANCE, _C_DEF_CFA, _C_DEF_CFA_REGISTER, _C_DEF_CFA_OFFSET = 0, 1, 2, 3, 4
_C_REGISTER, _C_EXTENDED, _C_TOGGLE = 5, 6, 7
#: The instructions that give a rule to the register named by their first (LEB128) operand.
_EXTENDED = (
    DW_CFA_offset_extended,
    DW_CFA_offset_extended_sf,
    DW_CFA_restore_extended,
    DW_CFA_undefined,
    DW_CFA_same_value,
    DW_CFA_register,
    DW_CFA_val_offset,
    DW_CFA_val_offset_sf,
)


def _per_row(column: IntArray, index: IntArray) -> IntArray:
    """``column[index]``, or one element (which broadcasts) when all of ``column`` is equal."""
    if len(column) and (column == column[0]).all():
        return column[:1]
    return column[index]


class _Setters:
    """The instructions that set one rule: their positions, and how many of them come at or
    before each instruction, so that the rule in effect at any instruction is found by
    counting."""

    def __init__(self, mask: BoolArray, bounds: IntArray) -> None:
        self.at = np.flatnonzero(mask)
        self.count = np.cumsum(mask, dtype=np.int64)
        #: Per program: how many setters come before its first instruction.
        first = np.minimum(bounds[:-1], max(len(mask) - 1, 0))
        self.before = np.where(bounds[:-1] < len(mask), self.count[first] - mask[first], 0)

    def last(self, rows: IntArray, programs: IntArray) -> tuple[IntArray, BoolArray]:
        """For instructions ``rows`` of ``programs``: the number of the last setter at or before
        each in the same program, and whether there is one."""
        k = self.count[rows]
        return np.maximum(k - 1, 0), k > self.before[programs]


def interpret_programs(
    buf: npt.NDArray[np.uint8],
    starts: IntArray,
    ends: IntArray,
    code_alignment: IntArray,
    data_alignment: IntArray,
    initial: RuleColumns,
    cfi_abi: CfiAbi,
    big_endian: bool,
) -> BulkRows:
    """The rows of every program ``buf[starts[i]:ends[i]]`` (``buf`` ends with :data:`PAD`
    zero bytes; programs in buffer order, not overlapping), each starting from ``initial[i]``,
    which DW_CFA_restore also returns to (the state after the CIE's instructions)."""
    count = len(starts)
    ok = np.ones(count, dtype=bool)
    # Programs whose CIE leaves the CFA to an expression: per-program path.
    ok &= (initial.cfa_kind == CfaKind.NONE) | (initial.cfa_kind == CfaKind.REG)
    lebs = _Lebs(buf)
    length = _instruction_lengths(buf, lebs, cfi_abi.aarch64)
    pos, prg = instruction_positions(length, starts, ends, ok)
    n = len(pos)
    bounds = np.searchsorted(prg, np.arange(count + 1)).astype(np.int64)
    has_ops = bounds[1:] > bounds[:-1]
    op = buf[pos]
    kind_of = _code_classes(cfi_abi)[op]

    advances = _advances(buf, pos, prg, op, kind_of, code_alignment, count, big_endian)

    # The rows: the state at each advance that moves, then after each program's last
    # instruction; their instructions, and their programs.
    last_op = np.maximum(bounds[1:] - 1, 0)
    at = np.concatenate([advances.row_at, last_op])
    at_program = np.concatenate([advances.row_program, np.arange(count, dtype=np.int64)])
    real = np.concatenate([np.ones(len(advances.row_at), dtype=bool), has_ops])
    at = np.where(real, at, 0)
    start = RuleColumns._make(_per_row(column, at_program) for column in initial)
    if n == 0:
        columns = list(start)
    else:
        columns = _rules_at(
            pos, prg, op, kind_of, bounds, at, at_program, real, start, initial, lebs,
            data_alignment,
            cfi_abi,
        )  # fmt: skip
    begins = np.concatenate([advances.begin, advances.end_loc])
    del pos, prg, op, kind_of, lebs  # the per-instruction columns: only the rows are left
    return _in_program_order(advances.row_program, at_program, begins, columns, ok)


class _Advances(NamedTuple):
    """The rows the advances make (DWARF 5 6.4.2.1): each advance that moves ends a row."""

    #: Per row ended by an advance: the advance, its program, and where the row starts.
    row_at: IntArray
    row_program: IntArray
    begin: IntArray
    #: Per program: where its last row starts (the location after its last advance).
    end_loc: IntArray


def _advances(
    buf: npt.NDArray[np.uint8],
    pos: IntArray,
    prg: IntArray,
    op: npt.NDArray[np.uint8],
    kind_of: npt.NDArray[np.int8],
    code_alignment: IntArray,
    count: int,
    big_endian: bool,
) -> _Advances:
    """Where each program's location is before each of its advances, and after the last."""
    advances = np.flatnonzero(kind_of == _C_ADVANCE)
    delta = advance_deltas(buf, pos[advances], op[advances], big_endian)
    advance_program = prg[advances]
    delta = delta * code_alignment[advance_program]
    reached = np.cumsum(delta)
    first_advance = np.searchsorted(advance_program, np.arange(count + 1))
    has_advance = first_advance[1:] > first_advance[:-1]
    base = np.zeros(count, dtype=np.int64)
    if len(advances):
        safe = np.minimum(first_advance[:-1], len(advances) - 1)
        base = np.where(has_advance, (reached - delta)[safe], 0)
    moving = delta > 0
    row_program = advance_program[moving]
    begin = (reached - delta)[moving] - base[row_program]
    end_loc = np.zeros(count, dtype=np.int64)
    if len(advances):
        last = np.maximum(first_advance[1:] - 1, 0)
        end_loc = np.where(has_advance, reached[last] - base, 0)
    return _Advances(advances[moving], row_program, begin, end_loc)


def _in_program_order(
    moving_program: IntArray,
    at_program: IntArray,
    begins: IntArray,
    columns: list[IntArray],
    ok: BoolArray,
) -> BulkRows:
    """The rows ended by advances (of programs ``moving_program``) and then one last row per
    program, placed program by program, without the programs not ``ok``."""
    count = len(ok)
    moving = len(moving_program)
    per_program = np.bincount(moving_program, minlength=count).astype(np.int64)
    before_program = np.cumsum(per_program) - per_program
    total = moving + count
    slot = np.concatenate(
        [
            np.arange(moving, dtype=np.int64) + moving_program,
            before_program + per_program + np.arange(count, dtype=np.int64),
        ]
    )
    row_program = np.empty(total, dtype=np.int64)
    row_program[slot] = at_program
    row_begin = np.empty(total, dtype=np.int64)
    row_begin[slot] = begins
    ordered = []
    columns.reverse()
    while columns:  # each column let go once placed: the rows are held once
        column = columns.pop()
        out = np.empty(total, dtype=np.int64)
        out[slot] = column
        ordered.append(out)
    kept = ok[row_program]
    if not kept.all():
        row_program, row_begin = row_program[kept], row_begin[kept]
        ordered = [column[kept] for column in ordered]
    return BulkRows(ok, row_program, row_begin, RuleColumns._make(ordered))


def _rules_at(
    pos: IntArray,
    prg: IntArray,
    op: npt.NDArray[np.uint8],
    kind_of: npt.NDArray[np.int8],
    bounds: IntArray,
    at: IntArray,
    at_program: IntArray,
    real: BoolArray,
    start: RuleColumns,
    initial: RuleColumns,
    lebs: _Lebs,
    data_alignment: IntArray,
    cfi_abi: CfiAbi,
) -> list[IntArray]:
    """The rule columns in effect after instructions ``at`` (where ``real``; ``start``
    elsewhere)."""
    at_first = np.where(real, at, 0)

    def effective(
        setters: _Setters, values: tuple[IntArray, ...], start_columns: tuple[IntArray, ...]
    ) -> list[IntArray]:
        """Each column of ``values`` (one value per setter) in effect at the rows."""
        if not len(setters.at):
            return list(start_columns)
        last, inside = setters.last(at_first, at_program)
        inside &= real  # an empty program has only its start state
        return [
            np.where(inside, column[last], start_column)
            for column, start_column in zip(values, start_columns, strict=True)
        ]

    # The CFA (DWARF 5 6.4.2.2).
    def_cfa = (kind_of == _C_DEF_CFA) | (kind_of == _C_DEF_CFA_REGISTER)
    sets_register = _Setters(def_cfa, bounds)
    register_at = pos[sets_register.at] + 1
    cfa_kind, cfa_reg = effective(
        sets_register,
        (np.full(len(register_at), int(CfaKind.REG), np.int64), lebs.unsigned(register_at)),
        (start.cfa_kind, start.cfa_reg),
    )
    sets_offset = _Setters((kind_of == _C_DEF_CFA) | (kind_of == _C_DEF_CFA_OFFSET), bounds)
    where = sets_offset.at
    offset = _cfa_offsets(op[where], pos[where] + 1, data_alignment[prg[where]], lebs)
    (cfa_offset,) = effective(sets_offset, (offset,), (start.cfa_offset,))
    del sets_register, sets_offset, register_at, where, offset  # one setter's columns at a time

    # The FP and the RA (DWARF 5 6.4.2.3).
    extended = np.flatnonzero(kind_of == _C_EXTENDED)
    named = lebs.unsigned(pos[extended] + 1)
    out: list[IntArray] = [cfa_kind, cfa_reg, cfa_offset]
    registers = (
        (cfi_abi.fp, initial[3:6], start[3:6]),
        (cfi_abi.ra, initial[6:9], start[6:9]),
    )
    for number, program_start, row_start in registers:
        mask = np.zeros(len(pos), dtype=bool)
        if number <= LOW_6_BITS:
            low = np.flatnonzero(kind_of == _C_REGISTER)
            mask[low[(op[low] & LOW_6_BITS) == number]] = True
        mask[extended[named == number]] = True
        setters = _Setters(mask, bounds)
        rules = _register_rules(
            pos[setters.at], op[setters.at], prg[setters.at], program_start, lebs, data_alignment
        )
        out += effective(setters, rules, tuple(row_start))
    mangled = start.mangled
    if cfi_abi.aarch64:
        # DW_CFA_AARCH64_negate_ra_state: an odd number of them signs an unsigned RA and
        # leaves a signed one unsigned.
        toggles = _Setters(kind_of == _C_TOGGLE, bounds)
        seen = toggles.count[at_first] - toggles.before[at_program]
        flipped = np.where(start.mangled == NOT_SIGNED, SIGNED, NOT_SIGNED)
        mangled = np.where(real & ((seen & 1) == 1), flipped, start.mangled)
    out.append(mangled)
    return out


def _cfa_offsets(
    code: npt.NDArray[np.uint8], one_at: IntArray, data_alignment: IntArray, lebs: _Lebs
) -> IntArray:
    """The CFA offsets instructions ``code`` set (DWARF 5 6.4.2.2), their first operand at
    ``one_at``: DW_CFA_def_cfa_offset's, DW_CFA_def_cfa's second operand, the _sf forms'
    times the data alignment factor."""
    second_at = one_at + lebs.length[one_at]
    offset = lebs.unsigned(one_at)  # def_cfa_offset
    if not (code == DW_CFA_def_cfa_offset).all():
        daf = data_alignment
        offset = np.where(code == DW_CFA_def_cfa_offset_sf, lebs.signed(one_at) * daf, offset)
        offset = np.where(code == DW_CFA_def_cfa, lebs.unsigned(second_at), offset)
        offset = np.where(code == DW_CFA_def_cfa_sf, lebs.signed(second_at) * daf, offset)
    return offset


def _register_rules(
    pos: IntArray,
    op: npt.NDArray[np.uint8],
    prg: IntArray,
    program_start: tuple[IntArray, ...],
    lebs: _Lebs,
    data_alignment: IntArray,
) -> tuple[IntArray, IntArray, IntArray]:
    """(kind, register, offset) of the rule each of these instructions gives its register
    (DWARF 5 6.4.2.3); DW_CFA_restore gives the program's start rule."""
    code = op.astype(np.int64)
    high = code & ~LOW_6_BITS
    one_at = pos + 1
    second_at = one_at + lebs.length[one_at]
    factor = data_alignment[prg]
    count = len(pos)
    kind = np.full(count, int(RegKind.SAME), dtype=np.int64)
    reg = np.full(count, -1, dtype=np.int64)
    offset = np.zeros(count, dtype=np.int64)
    at_cfa = high == DW_CFA_offset
    first_operand = lebs.unsigned(one_at)
    second_unsigned, second_signed = lebs.unsigned(second_at), lebs.signed(second_at)
    offset = np.where(at_cfa, first_operand * factor, offset)
    for extended, signed, rule in (
        (DW_CFA_offset_extended, False, RegKind.AT_CFA),
        (DW_CFA_offset_extended_sf, True, RegKind.AT_CFA),
        (DW_CFA_val_offset, False, RegKind.VAL_CFA),
        (DW_CFA_val_offset_sf, True, RegKind.VAL_CFA),
    ):
        here = code == extended
        at_cfa |= here & (rule == RegKind.AT_CFA)
        kind[here] = rule
        value = second_signed if signed else second_unsigned
        offset = np.where(here, value * factor, offset)
    kind[at_cfa] = RegKind.AT_CFA
    kind[code == DW_CFA_undefined] = RegKind.UNDEFINED
    into = code == DW_CFA_register
    other = second_unsigned
    moved = into & (other != first_operand)  # register(r, r) is same_value
    kind[moved] = RegKind.VAL_REG
    reg[moved] = other[moved]
    restores = (high == DW_CFA_restore) | (code == DW_CFA_restore_extended)
    start_kind, start_reg, start_offset = (column[prg] for column in program_start)
    return (
        np.where(restores, start_kind, kind),
        np.where(restores, start_reg, reg),
        np.where(restores, start_offset, offset),
    )


__all__ = ["PAD", "BulkRows", "RuleColumns", "concatenate", "interpret_programs"]
