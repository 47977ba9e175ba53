"""Bulk (numpy) translation of the common CFA programs of a whole section, beside the rules it
must match.

:func:`pysframe.generate.translator.translate_ops` interprets one CFA program at a time, one
Python loop turn per DWARF instruction (DWARF 5 6.4.2); on a large library most of the
generation time would go there.  This module applies the same rules (GNU as 2.47
gas/gen-sframe.c, as :mod:`pysframe.generate.translator` states them) to every distinct
program of a section at once: the instructions become numpy columns, the register rules in
effect after each instruction are carried forward with cumulative maxima, and the rows are the
advances after a state change.  The rows are :class:`~pysframe.generate.rows.RowState` columns,
from which :mod:`pysframe.generate.fres_bulk` writes the FREs of every FDE in one pass, each
distinct row checked and encoded once by the code the per-function path uses.

It covers the instructions that make up almost every program: ``advance_loc`` (all sizes),
``def_cfa`` and ``def_cfa_register`` with the SP or FP and one-byte operands,
``def_cfa_offset``, ``offset`` and ``nop``.  A program with any other instruction, and every
case that needs more than these rules (an unusual operand, a CFA register other than the SP
or FP, a rule before any row) or where a function would be left out, is reported as not
handled: the caller translates those one by one, so the output is the same byte for byte.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .instructions_bulk import (
    NOT_HANDLED,
    BoolArray,
    ByteArray,
    Column,
    IntArray,
    advance_deltas,
    instruction_positions,
    operand_tables,
)
from .ops import (
    HIGH_2_BITS,
    LOW_6_BITS,
    DW_CFA_advance_loc,
    DW_CFA_advance_loc1,
    DW_CFA_advance_loc2,
    DW_CFA_advance_loc4,
    DW_CFA_def_cfa,
    DW_CFA_def_cfa_offset,
    DW_CFA_def_cfa_register,
    DW_CFA_nop,
    DW_CFA_offset,
)
from .rows import (
    EMPTY_STATE,
    LOC_NONE,
    LOC_STACK,
    REG_INVALID,
    AbiParams,
    RowState,
    row_at,
)

#: Zero bytes after the section so operands can be read past a truncated last record.
PAD = 8
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1


class Start(NamedTuple):
    """Interpreter state before a program's first instruction: after its CIE's, or, for a
    program run in slices (see :func:`interpret`), after its instructions in the slices
    before."""

    #: There is a scratch row (gas cur_fre).
    has_row: BoolArray
    #: Its rules changed since the last row was written.
    dirty: BoolArray
    state: RowState[Column]
    #: The location (bytes from the function's start), and where the scratch row begins.
    loc: IntArray
    begin: IntArray

    def take(self, index: IntArray | slice) -> Start:
        """The state of the programs ``index``."""
        return Start(
            self.has_row[index],
            self.dirty[index],
            RowState._make(column[index] for column in self.state),
            self.loc[index],
            self.begin[index],
        )


class Programs(NamedTuple):
    """What :func:`interpret` found: per program, and the rows of every program."""

    #: The program contains only handled instructions, used in the handled ways.
    ok: BoolArray
    #: The program contains an advance (CIE programs with one are not handled).
    has_advance: BoolArray
    #: State after the last instruction (meaningful for programs without advances).
    end: Start
    #: Rows of all programs in order: program number, start offset and rules.
    row_program: IntArray
    row_begin: IntArray
    rows: RowState[Column]


class _Tracked(NamedTuple):
    """The :class:`RowState` fields the handled instructions change, one column each."""

    cfa_reg: IntArray
    cfa_offset: IntArray
    fp_loc: IntArray
    fp_offset: IntArray
    ra_loc: IntArray
    ra_offset: IntArray


def tracked(state: RowState[Column]) -> _Tracked:
    """The columns of ``state`` the handled instructions change."""
    return _Tracked(
        state.cfa_reg,
        state.cfa_offset,
        state.fp_loc,
        state.fp_offset,
        state.ra_loc,
        state.ra_offset,
    )


def _full_state(tracked: _Tracked) -> RowState[Column]:
    """Every field of rows the handled instructions reach from :data:`EMPTY_STATE`: the CFA is
    never dereferenced (def_cfa, def_cfa_register), an FP or RA on the stack is dereferenced and
    in no register (offset), nothing mangles the RA or makes it undefined."""
    count = len(tracked.cfa_reg)

    def constant(value: int) -> Column:
        return np.broadcast_to(np.asarray(value), (count,))

    return RowState(
        cfa_reg=tracked.cfa_reg,
        cfa_offset=tracked.cfa_offset,
        cfa_deref=constant(EMPTY_STATE.cfa_deref),
        fp_loc=tracked.fp_loc,
        fp_reg=constant(EMPTY_STATE.fp_reg),
        fp_offset=tracked.fp_offset,
        fp_deref=tracked.fp_loc == LOC_STACK,
        ra_loc=tracked.ra_loc,
        ra_reg=constant(EMPTY_STATE.ra_reg),
        ra_offset=tracked.ra_offset,
        ra_deref=tracked.ra_loc == LOC_STACK,
        mangled_ra=constant(EMPTY_STATE.mangled_ra),
        ra_undefined=constant(EMPTY_STATE.ra_undefined),
    )


#: The instructions this path handles; a program with another goes to the per-function path.
_HANDLED = (
    DW_CFA_nop,
    DW_CFA_advance_loc,
    DW_CFA_advance_loc1,
    DW_CFA_advance_loc2,
    DW_CFA_advance_loc4,
    DW_CFA_def_cfa,
    DW_CFA_def_cfa_register,
    DW_CFA_def_cfa_offset,
    DW_CFA_offset,
)


def _length_tables() -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    """Per opcode byte: the length of the handled instruction with one-byte LEB128 operands (0
    for unhandled ones), and whether it has an offset, one ULEB128 operand that can be longer
    (DW_CFA_offset, DW_CFA_def_cfa_offset; registers are read as one byte)."""
    lebs, fixed = operand_tables(_HANDLED)
    length = np.where(lebs == NOT_HANDLED, 0, fixed + lebs).astype(np.int8)
    uleb_offset = lebs == 1
    uleb_offset[DW_CFA_def_cfa_register] = False
    return length, uleb_offset


_LENGTH, _ULEB_OPERAND = _length_tables()


def instruction_lengths(buf: ByteArray) -> npt.NDArray[np.int8]:
    """For each byte of ``buf`` (padded with :data:`PAD` zeros): the length of the handled
    instruction that would start there, 0 for an instruction the bulk path does not handle."""
    n = len(buf) - PAD
    op = buf[:n]
    lengths = _LENGTH[op]
    # ULEB128 offsets of 2-4 bytes; longer ones go to the general path.
    at = np.flatnonzero((buf[1 : n + 1] >= 0x80) & _ULEB_OPERAND[op])
    c2 = buf[at + 2] >= 0x80
    c3 = c2 & (buf[at + 3] >= 0x80)
    size = 3 + c2.astype(np.int8) + c3
    size[c3 & (buf[at + 4] >= 0x80)] = 0
    lengths[at] = size
    # def_cfa and def_cfa_register with longer operands: general path.
    at = np.flatnonzero(op == DW_CFA_def_cfa)
    lengths[at[(buf[at + 1] >= 0x80) | (buf[at + 2] >= 0x80)]] = 0
    at = np.flatnonzero(op == DW_CFA_def_cfa_register)
    lengths[at[buf[at + 1] >= 0x80]] = 0
    return lengths


class _Walk:
    """The instructions of the programs, in program order, with the per-program carries and
    sums the rule columns are built from."""

    __slots__ = ("bounds", "first", "index", "is_first", "pos", "prg")

    def __init__(self, pos: IntArray, prg: IntArray, count: int) -> None:
        #: Per instruction: where it is in the buffer, and its program.
        self.pos = pos
        self.prg = prg
        self.index = np.arange(len(pos), dtype=np.int64)
        #: Program i's instructions are [bounds[i], bounds[i + 1]).
        self.bounds = np.searchsorted(prg, np.arange(count + 1)).astype(np.int64)
        #: Per instruction: the number of its program's first instruction.
        self.first = self.bounds[prg]
        self.is_first = self.index == self.first

    def per_op(self, initial: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A per-program start column for each instruction (one value when all agree)."""
        if len(initial) and (initial == initial[0]).all():
            return initial[:1]
        return initial[self.prg]

    def last(self, mask: BoolArray) -> IntArray:
        """Per instruction: the number of the last instruction at or before it with ``mask``
        set, in any program (-1: none); it is in the same program when at least ``first``."""
        return np.maximum.accumulate(np.where(mask, self.index, -1))

    def carried(self, mask: BoolArray, values: IntArray, initial: IntArray) -> IntArray:
        """The value after each instruction: the last one set in the program, or initial."""
        last = self.last(mask)
        return np.where(last >= self.first, values[np.maximum(last, 0)], self.per_op(initial))

    def count_before(self, mask: BoolArray) -> IntArray:
        """How many earlier instructions of the same program have ``mask`` set."""
        total: IntArray = np.cumsum(mask) - mask
        return total - total[self.first]

    def sums(self, mask: BoolArray) -> IntArray:
        """Per program: how many of its instructions have ``mask`` set."""
        total = np.zeros(len(mask) + 1, dtype=np.int64)
        np.cumsum(mask, out=total[1:])
        return total[self.bounds[1:]] - total[self.bounds[:-1]]


class _Instructions(NamedTuple):
    """What each instruction is and its operands (DWARF 5 6.4.2), one element per instruction."""

    is_advance: BoolArray
    is_def_cfa: BoolArray
    is_def_register: BoolArray
    is_def_offset: BoolArray
    is_offset: BoolArray
    #: DW_CFA_offset of the FP, of the RA.
    is_fp: BoolArray
    is_ra: BoolArray
    #: Bytes an advance moves (times the code alignment factor).
    delta: IntArray
    #: The register of DW_CFA_offset, DW_CFA_def_cfa and DW_CFA_def_cfa_register.
    reg: IntArray
    #: The offset of DW_CFA_offset (times the data alignment factor), DW_CFA_def_cfa and
    #: DW_CFA_def_cfa_offset.
    value: IntArray


def _decode(
    buf: ByteArray,
    walk: _Walk,
    code_alignment: IntArray,
    data_alignment: IntArray,
    params: AbiParams,
    big_endian: bool,
) -> _Instructions:
    """The instructions' kinds and operands: one-byte forms in bulk, the longer ULEB128 offsets
    on their own (:func:`instruction_lengths` lets no other long operand through)."""
    pos, prg = walk.pos, walk.prg
    op = buf[pos]
    b1 = buf[pos + 1]
    high = op & HIGH_2_BITS
    is_offset = high == DW_CFA_offset
    is_def_cfa = op == DW_CFA_def_cfa
    is_def_offset = op == DW_CFA_def_cfa_offset
    is_advance = high == DW_CFA_advance_loc
    is_advance |= (op >= DW_CFA_advance_loc1) & (op <= DW_CFA_advance_loc4)
    delta = advance_deltas(buf, pos, op, big_endian)
    if (code_alignment != 1).any():
        delta *= code_alignment[prg]
    value = (b1 & 0x7F).astype(np.int64)
    long = np.flatnonzero((b1 >= 0x80) & (is_offset | is_def_offset))
    if len(long):
        at = pos[long] + 1
        more = np.ones(len(long), dtype=bool)
        for k in range(1, 4):
            more &= buf[at + k - 1] >= 0x80
            value[long] |= np.where(more, buf[at + k] & 0x7F, 0).astype(np.int64) << (7 * k)
    at = np.flatnonzero(is_offset)
    value[at] *= data_alignment[prg[at]]
    at = np.flatnonzero(is_def_cfa)
    value[at] = buf[pos[at] + 2]
    reg = np.where(is_offset, op & LOW_6_BITS, b1).astype(np.int64)
    return _Instructions(
        is_advance,
        is_def_cfa,
        op == DW_CFA_def_cfa_register,
        is_def_offset,
        is_offset,
        is_offset & (reg == params.fp),
        is_offset & (reg == params.ra),
        delta,
        reg,
        value,
    )


def interpret(
    buf: ByteArray,
    lengths: npt.NDArray[np.int8],
    starts: IntArray,
    ends: IntArray,
    code_alignment: IntArray,
    data_alignment: IntArray,
    start: Start,
    params: AbiParams,
    big_endian: bool,
    max_rows: int | None = None,
) -> Programs:
    """Run every program ``buf[starts[i]:ends[i]]`` from ``start``, with the rules of
    :func:`~pysframe.generate.translator.translate_ops`; ``max_rows``: the rows of a program
    after its first ``max_rows`` are left out (all kept when None).

    The columns take some 200 bytes per instruction, so programs of more than :data:`SLICE`
    instructions in all are run a slice of instructions at a time, a program cut between two
    slices going on in the next from where it stopped (its :class:`Start`): the memory stays
    bounded, one long program included.  Programs must not overlap and must be in section
    order."""
    count = len(starts)
    ok = np.ones(count, dtype=bool)
    pos, prg = instruction_positions(lengths, starts, ends, ok)
    if len(pos) > SLICE:
        return _interpret_in_slices(
            buf, pos, prg, ok, code_alignment, data_alignment, start, params, big_endian, max_rows
        )
    found = _interpret_slice(
        buf,
        _Walk(pos, prg, count),
        ok,
        code_alignment,
        data_alignment,
        start,
        np.ones(count, dtype=bool),
        params,
        big_endian,
    )
    if max_rows is None or len(found.row_program) <= max_rows:
        return found
    kept = _first_rows(found.row_program, np.zeros(count, dtype=np.int64), max_rows)
    return found._replace(
        row_program=found.row_program[kept],
        row_begin=found.row_begin[kept],
        rows=RowState._make(column[kept] for column in found.rows),
    )


#: Instructions run together by :func:`interpret` (some 13 MB of columns).
SLICE = 1 << 16


def _interpret_slice(
    buf: ByteArray,
    walk: _Walk,
    ok: BoolArray,
    code_alignment: IntArray,
    data_alignment: IntArray,
    start: Start,
    closes: BoolArray,
    params: AbiParams,
    big_endian: bool,
) -> Programs:
    """:func:`interpret` of the programs (or pieces of programs) of ``walk``; their last
    rows are written only for the programs ``closes`` (the others go on in another slice)."""
    ins = _decode(buf, walk, code_alignment, data_alignment, params, big_endian)
    initial = tracked(start.state)
    # An advance that moves: a row is written there (when there is one and it changed).
    effective = ins.is_advance & (ins.delta > 0)
    has_row = walk.per_op(start.has_row) | (walk.count_before(effective | ins.is_def_cfa) > 0)
    after = _rules_after(walk, ins, has_row, initial, params, ok)
    dirty = ins.is_def_cfa | ins.is_def_offset | ins.is_def_register | ins.is_fp | ins.is_ra
    moved = np.where(ins.is_advance, ins.delta, 0)
    loc = np.cumsum(moved)
    loc -= (loc - moved)[walk.first] - walk.per_op(start.loc)
    last_advance = walk.last(effective)
    at, at_begin, at_state = _rows_at_advances(
        walk, effective & has_row, dirty, loc, last_advance, after, initial, start
    )
    end_state, end_begin, loc_end, end_dirty = _program_ends(
        walk, loc, last_advance, dirty, after, initial, start
    )
    ok &= loc_end < (1 << 32)
    end = Start(
        start.has_row | (walk.sums(effective | ins.is_def_cfa) > 0),
        end_dirty,
        _full_state(end_state),
        loc_end,
        end_begin,
    )
    row_program, row_begin, rows = _in_program_order(
        walk.prg[at], at_begin, at_state, end.has_row & closes, end_begin, end_state, ok
    )
    has_advance = walk.sums(ins.is_advance) > 0
    return Programs(ok, has_advance, end, row_program, row_begin, _full_state(rows))


def _interpret_in_slices(
    buf: ByteArray,
    pos: IntArray,
    prg: IntArray,
    ok: BoolArray,
    code_alignment: IntArray,
    data_alignment: IntArray,
    start: Start,
    params: AbiParams,
    big_endian: bool,
    max_rows: int | None,
) -> Programs:
    """:func:`interpret` of the instructions at ``pos`` (of programs ``prg``), :data:`SLICE`
    at a time.  A slice runs the programs from the one its first instruction is in to the one
    its last is in (those without instructions between included); a program cut at the end of
    a slice writes no last row there and starts the next slice where it stopped."""
    count = len(ok)
    has_advance = np.zeros(count, dtype=bool)
    end_flags = np.zeros((2, count), dtype=bool)  # has_row, dirty
    end_numbers = np.zeros((2 + len(_Tracked._fields), count), dtype=np.int64)  # loc, begin...
    rows_before = np.zeros(count, dtype=np.int64)
    parts: list[tuple[IntArray, IntArray, _Tracked]] = []
    carried: Start | None = None
    first = 0
    for low in range(0, len(pos), SLICE):
        high = min(low + SLICE, len(pos))
        last = count - 1 if high == len(pos) else int(prg[high - 1])
        goes_on = high < len(pos) and int(prg[high]) == last
        programs = slice(first, last + 1)
        if carried is None:
            piece_start = start.take(programs)
        else:
            piece_start = _joined(carried, start.take(slice(first + 1, last + 1)))
        closes = np.ones(last + 1 - first, dtype=bool)
        closes[-1] = not goes_on
        found = _interpret_slice(
            buf,
            _Walk(pos[low:high], prg[low:high] - first, last + 1 - first),
            ok[programs],  # a view: the slice marks the programs it refuses in ``ok``
            code_alignment[programs],
            data_alignment[programs],
            piece_start,
            closes,
            params,
            big_endian,
        )
        has_advance[programs] |= found.has_advance
        end = found.end
        end_flags[:, programs] = end.has_row, end.dirty
        end_numbers[:, programs] = end.loc, end.begin, *tracked(end.state)
        row_program, row_begin, rows = found.row_program + first, found.row_begin, found.rows
        if max_rows is not None:
            kept = _first_rows(row_program, rows_before, max_rows)
            row_program, row_begin = row_program[kept], row_begin[kept]
            rows = RowState._make(column[kept] for column in rows)
        rows_before[programs] += np.bincount(row_program - first, minlength=last + 1 - first)
        parts.append((row_program, row_begin, tracked(rows)))
        carried = end.take(slice(-1, None)) if goes_on else None
        first = last if goes_on else last + 1
    row_program = np.concatenate([part[0] for part in parts])
    kept = ok[row_program]
    kept_rows = _Tracked._make(
        np.concatenate([part[2][k] for part in parts])[kept] for k in range(len(_Tracked._fields))
    )
    end = Start(
        end_flags[0], end_flags[1], _full_state(_Tracked._make(end_numbers[2:])), *end_numbers[:2]
    )
    row_begin = np.concatenate([part[1] for part in parts])[kept]
    return Programs(ok, has_advance, end, row_program[kept], row_begin, _full_state(kept_rows))


def _joined(head: Start, rest: Start) -> Start:
    """The state of the programs of ``head``, then those of ``rest``."""
    return Start(
        np.concatenate([head.has_row, rest.has_row]),
        np.concatenate([head.dirty, rest.dirty]),
        RowState._make(np.concatenate(pair) for pair in zip(head.state, rest.state, strict=True)),
        np.concatenate([head.loc, rest.loc]),
        np.concatenate([head.begin, rest.begin]),
    )


def _first_rows(row_program: IntArray, earlier: IntArray, max_rows: int) -> BoolArray:
    """Which of the rows (grouped by program, in order) are among the first ``max_rows`` of
    their program, ``earlier[p]`` rows of program ``p`` having come before them."""
    first_of_program = np.searchsorted(row_program, row_program, side="left")
    rank = np.arange(len(row_program), dtype=np.int64) - first_of_program
    kept: BoolArray = rank + earlier[row_program] < max_rows
    return kept


def _rules_after(
    walk: _Walk,
    ins: _Instructions,
    has_row: BoolArray,
    initial: _Tracked,
    params: AbiParams,
    ok: BoolArray,
) -> _Tracked:
    """The rules in effect after each instruction.  The programs whose instructions need more
    than these rules (translate_ops refuses them, or handles them its own way) are marked in
    ``ok``: the per-function path translates them."""
    reg, value = ins.reg, ins.value
    sets_cfa_reg = ins.is_def_cfa | ins.is_def_register
    cfa_reg = walk.carried(sets_cfa_reg, reg, initial.cfa_reg)
    cfa_reg_before = np.where(walk.is_first, walk.per_op(initial.cfa_reg), np.roll(cfa_reg, 1))
    bad = ins.is_def_offset & (~has_row | (cfa_reg_before == REG_INVALID))
    bad |= (ins.is_offset | ins.is_def_register) & ~has_row
    bad |= sets_cfa_reg & (reg != params.sp) & (reg != params.fp)
    bad |= (ins.is_offset | ins.is_def_offset) & ((value < _INT32_MIN) | (value > _INT32_MAX))
    if not params.ra_tracking:
        bad |= ins.is_ra & (value != params.cfa_ra_offset)
    ok[walk.prg[bad]] = False

    cfa_off = walk.carried(ins.is_def_cfa | ins.is_def_offset, value, initial.cfa_offset)
    fp_last = walk.last(ins.is_fp)
    fp_set = fp_last >= walk.first
    fp_loc = np.where(fp_set, LOC_STACK, walk.per_op(initial.fp_loc))
    fp_off = np.where(fp_set, value[np.maximum(fp_last, 0)], walk.per_op(initial.fp_offset))
    ra_last = walk.last(ins.is_ra)
    ra_set = ra_last >= walk.first
    if params.ra_tracking:
        ra_loc = np.where(ra_set, LOC_STACK, walk.per_op(initial.ra_loc))
        ra_off = np.where(ra_set, value[np.maximum(ra_last, 0)], walk.per_op(initial.ra_offset))
    else:  # the RA at its fixed offset (all this path lets through): not tracked
        ra_loc = np.where(ra_set, LOC_NONE, walk.per_op(initial.ra_loc))
        ra_off = np.broadcast_to(walk.per_op(initial.ra_offset), (len(walk.pos),))
    return _Tracked(cfa_reg, cfa_off, fp_loc, fp_off, ra_loc, ra_off)


def _rows_at_advances(
    walk: _Walk,
    writes: BoolArray,
    dirty: BoolArray,
    loc: IntArray,
    last_advance: IntArray,
    after: _Tracked,
    initial: _Tracked,
    start: Start,
) -> tuple[IntArray, IntArray, list[IntArray]]:
    """The rows written at advances: at the advances ``writes`` where a rule changed since the
    previous advance (gas writes a row at each advance after a state change).  Returns those
    advances, where their rows start (the previous advance's location), and their rules (those
    in effect before the advance)."""
    first = walk.first
    previous = np.roll(last_advance, 1)
    if len(previous):
        previous[0] = -1
    has_previous = previous >= first
    previous = np.maximum(previous, 0)
    dirty_before: IntArray = np.cumsum(dirty) - dirty
    changed = dirty_before > np.where(has_previous, dirty_before[previous], dirty_before[first])
    changed |= ~has_previous & walk.per_op(start.dirty)
    at = np.flatnonzero(writes & changed)
    at_prog = walk.prg[at]
    at_begin = np.where(has_previous[at], loc[previous[at]], start.begin[at_prog])
    at_first = walk.is_first[at]
    at_prev = np.maximum(at - 1, 0)
    at_state = [
        np.where(at_first, start_column[at_prog], column[at_prev])
        for column, start_column in zip(after, initial, strict=True)
    ]
    return at, at_begin, at_state


def _program_ends(
    walk: _Walk,
    loc: IntArray,
    last_advance: IntArray,
    dirty: BoolArray,
    after: _Tracked,
    initial: _Tracked,
    start: Start,
) -> tuple[_Tracked, IntArray, IntArray, BoolArray]:
    """Per program: the rules after its last instruction (its last row's), where that row
    starts (the last advance that moved), the location after its last instruction, and
    whether the rules changed since that advance (since the start, when none moved)."""
    bounds = walk.bounds
    if not len(walk.pos):
        return initial, start.begin, start.loc, start.dirty
    has_ops = bounds[1:] > bounds[:-1]
    last_op = np.maximum(bounds[1:] - 1, 0)
    end_state = _Tracked._make(
        np.where(has_ops, column[last_op], start_column)
        for column, start_column in zip(after, initial, strict=True)
    )
    last_eff = last_advance[last_op]
    moved = has_ops & (last_eff >= bounds[:-1])
    last_eff = np.maximum(last_eff, 0)
    end_begin = np.where(moved, loc[last_eff], start.begin)
    dirty_upto = np.cumsum(dirty)
    end_dirty = np.where(
        moved, dirty_upto[last_op] > dirty_upto[last_eff], start.dirty | (walk.sums(dirty) > 0)
    )
    return end_state, end_begin, np.where(has_ops, loc[last_op], start.loc), end_dirty


def _in_program_order(
    at_prog: IntArray,
    at_begin: IntArray,
    at_state: list[IntArray],
    end_has_row: BoolArray,
    end_begin: IntArray,
    end_state: _Tracked,
    ok: BoolArray,
) -> tuple[IntArray, IntArray, _Tracked]:
    """Each program's rows at advances, then its last row (when it has a row), programs in
    order, without those not ``ok``: (program, start, rules) of every row."""
    finals_before: IntArray = np.cumsum(end_has_row) - end_has_row
    finals = np.flatnonzero(end_has_row)
    at_upto = np.searchsorted(at_prog, finals, side="right")
    total = len(at_prog) + len(finals)
    slot_at = np.arange(len(at_prog), dtype=np.int64) + finals_before[at_prog]
    slot_final = at_upto + finals_before[finals]
    row_program = np.empty(total, dtype=np.int64)
    row_program[slot_at] = at_prog
    row_program[slot_final] = finals
    row_begin = np.empty(total, dtype=np.int64)
    row_begin[slot_at] = at_begin
    row_begin[slot_final] = end_begin[finals]
    columns = []
    for at_column, end_column in zip(at_state, end_state, strict=True):
        column = np.empty(total, dtype=np.int64)
        column[slot_at] = at_column
        column[slot_final] = end_column[finals]
        columns.append(column)
    kept = ok[row_program]
    if not kept.all():
        row_program, row_begin = row_program[kept], row_begin[kept]
        columns = [column[kept] for column in columns]
    return row_program, row_begin, _Tracked._make(columns)


def empty_start(count: int) -> Start:
    """gas' state before a CIE's first instruction (no row, no rules), for ``count`` programs."""
    no = np.zeros(count, dtype=bool)
    zero = np.zeros(count, dtype=np.int64)
    return Start(
        no, no.copy(), RowState._make(np.full(count, value) for value in EMPTY_STATE), zero, zero
    )


__all__ = [
    "PAD",
    "Programs",
    "Start",
    "empty_start",
    "instruction_lengths",
    "interpret",
    "row_at",
    "tracked",
]
