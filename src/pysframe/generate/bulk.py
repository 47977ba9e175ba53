"""Bulk (numpy) translation of the common CFA programs to SFrame FREs.

:func:`pysframe.generate.translate_ops` interprets one CFA program at a time, one Python
loop turn per DWARF instruction (DWARF 5 6.4.2); on a large library most of the generation time
goes there.  This module applies the same rules (GNU as 2.47 gen-sframe.c, see
:mod:`pysframe.generate`) to every distinct program of a section at once: the instructions
become numpy columns, the register rules in effect after each instruction are carried forward
with cumulative maxima, and the rows are the advances after a state change.  Then the FREs of
every FDE (SFrame spec 2.4 "SFrame FRE") are written in one pass.

It covers the instructions that make up almost every program: ``advance_loc`` (all sizes),
``def_cfa`` and ``def_cfa_register`` with the SP or FP and one-byte operands,
``def_cfa_offset``, ``offset`` and ``nop``.  A program with any other instruction, and every
case that needs more than these rules (an unusual operand, a CFA register other than the SP
or FP, a rule before any row) or where a function would be skipped, is reported as not
handled: the caller translates those one by one, so the output is the same byte for byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from .translate import AbiParams

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
ByteArray = npt.NDArray[np.uint8]

#: Zero bytes after the section so operands can be read past a truncated last record.
PAD = 8
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
#: Row starts and function sizes are combined with the program number in one int64 key.
_KEY_SHIFT = 33
# The register-location kinds and invalid register of pysframe.generate (gas' sframe_row_entry).
LOC_NONE = 0
LOC_STACK = 2
REG_INVALID = -1

# DW_CFA opcodes (DWARF 5 7.24) the bulk path understands.
_NOP = 0x00
_ADVANCE_LOC1 = 0x02
_ADVANCE_LOC2 = 0x03
_ADVANCE_LOC4 = 0x04
_DEF_CFA = 0x0C
_DEF_CFA_REGISTER = 0x0D
_DEF_CFA_OFFSET = 0x0E


class RowState(NamedTuple):
    """Per-program (or per-row) columns of the rule fields the bulk path can change.

    The other fields of :data:`pysframe.generate.RowState` keep their initial values here: no
    handled instruction sets a register rule, a dereference, the mangled-RA bit or an
    undefined RA.
    """

    cfa_reg: IntArray
    cfa_off: IntArray
    fp_loc: IntArray
    fp_off: IntArray
    ra_loc: IntArray
    ra_off: IntArray

    def take(self, index: IntArray) -> RowState:
        return RowState(*(column[index] for column in self))


class Start(NamedTuple):
    """Interpreter state before a program's first instruction (after its CIE's)."""

    has_row: BoolArray
    dirty: BoolArray
    state: RowState


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
    rows: RowState


def _length_tables() -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    """Per opcode byte: the length of the handled instruction with one-byte operands (0 for
    unhandled ones), and whether its operand is a ULEB128 that can be longer."""
    length = np.zeros(256, dtype=np.int8)
    length[0x40:0x80] = 1  # DW_CFA_advance_loc
    length[0x80:0xC0] = 2  # DW_CFA_offset, ULEB128 offset
    length[_DEF_CFA_OFFSET] = 2
    length[_DEF_CFA] = 3
    length[_DEF_CFA_REGISTER] = 2
    length[_ADVANCE_LOC1] = 2
    length[_ADVANCE_LOC2] = 3
    length[_ADVANCE_LOC4] = 5
    length[_NOP] = 1
    uleb = np.zeros(256, dtype=bool)
    uleb[0x80:0xC0] = True
    uleb[_DEF_CFA_OFFSET] = True
    return length, uleb


_LENGTH, _ULEB_OPERAND = _length_tables()


def instruction_lengths(buf: ByteArray) -> npt.NDArray[np.int8]:
    """For each byte of ``buf`` (padded with :data:`PAD` zeros): the length of the handled
    instruction that would start there, 0 for an instruction the bulk path does not handle."""
    n = len(buf) - PAD
    op = buf[:n]
    lengths = _LENGTH[op]
    # ULEB128 operands of 2-4 bytes; longer ones go to the general path.
    at = np.flatnonzero((buf[1 : n + 1] >= 0x80) & _ULEB_OPERAND[op])
    c2 = buf[at + 2] >= 0x80
    c3 = c2 & (buf[at + 3] >= 0x80)
    size = 3 + c2.astype(np.int8) + c3
    size[c3 & (buf[at + 4] >= 0x80)] = 0
    lengths[at] = size
    # def_cfa and def_cfa_register with longer operands: general path.
    at = np.flatnonzero(op == _DEF_CFA)
    lengths[at[(buf[at + 1] >= 0x80) | (buf[at + 2] >= 0x80)]] = 0
    at = np.flatnonzero(op == _DEF_CFA_REGISTER)
    lengths[at[buf[at + 1] >= 0x80]] = 0
    return lengths


def _instruction_positions(
    lengths: npt.NDArray[np.int8], starts: IntArray, ends: IntArray, ok: BoolArray
) -> tuple[IntArray, IntArray]:
    """(position, program) of every instruction, grouped by program in program order.

    Walks all programs together, one instruction per step: at most as many steps as the
    longest program has bytes.  A program with an unhandled or truncated instruction is marked
    in ``ok``.  Programs must not overlap and must be in section order (FDE bodies are)."""
    if len(starts) > 1 and not (starts[1:] >= ends[:-1]).all():
        ok[:] = False  # overlapping programs (malformed CIE pointers): general path
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    cur = starts.copy()
    prog = np.arange(len(starts), dtype=np.int32)
    end = ends.copy()
    is_start = np.zeros(len(lengths) + 1, dtype=bool)
    program_at = np.empty(len(lengths) + 1, dtype=np.int32)
    while True:
        live = cur < end
        if not live.all():
            cur, prog, end = cur[live], prog[live], end[live]
        if not len(cur):
            break
        step = lengths[cur]
        nxt = cur + step
        broken = (step <= 0) | (nxt > end)
        if broken.any():
            ok[prog[broken]] = False
            keep = ~broken
            cur, prog, end, nxt = cur[keep], prog[keep], end[keep], nxt[keep]
        is_start[cur] = True
        program_at[cur] = prog
        cur = nxt
    pos = np.flatnonzero(is_start)
    prg = program_at[pos].astype(np.int64)
    keep = ok[prg]
    return pos[keep], prg[keep]


def _segment_sums(mask: npt.NDArray[np.bool_], bounds: IntArray) -> IntArray:
    """Per program: how many of its instructions have ``mask`` set."""
    total = np.zeros(len(mask) + 1, dtype=np.int64)
    np.cumsum(mask, out=total[1:])
    return total[bounds[1:]] - total[bounds[:-1]]


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
) -> Programs:
    """Run every program ``buf[starts[i]:ends[i]]`` from ``start`` (translate_ops' rules).

    Programs must not overlap and must be in section order."""
    count = len(starts)
    ok = np.ones(count, dtype=bool)
    pos, prg = _instruction_positions(lengths, starts, ends, ok)
    n = len(pos)
    idx = np.arange(n, dtype=np.int64)
    bounds = np.searchsorted(prg, np.arange(count + 1)).astype(np.int64)
    first = bounds[prg]
    is_first = idx == first

    # Operands (DWARF 5 6.4.2): one-byte forms in bulk, the longer ones on their own.
    op = buf[pos]
    b1 = buf[pos + 1]
    high = op & 0xC0
    is_offset = high == 0x80
    is_def_cfa = op == _DEF_CFA
    is_def_register = op == _DEF_CFA_REGISTER
    is_def_offset = op == _DEF_CFA_OFFSET
    is_advance = high == 0x40
    delta = np.where(is_advance, op & 0x3F, 0).astype(np.int64)
    wide = np.flatnonzero((op >= _ADVANCE_LOC1) & (op <= _ADVANCE_LOC4))
    if len(wide):
        is_advance[wide] = True
        size = 1 << (op[wide].astype(np.int64) - _ADVANCE_LOC1)
        at = pos[wide] + 1
        raw = np.zeros(len(wide), dtype=np.int64)
        for k in range(4):
            byte = np.where(k < size, buf[at + k], 0).astype(np.int64)
            shift = np.where(big_endian, 8 * (size - 1 - k), 8 * k)
            raw |= byte << np.maximum(shift, 0)
        delta[wide] = raw
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
    reg = np.where(is_offset, op & 0x3F, b1).astype(np.int64)

    def per_op(initial: npt.NDArray[np.int64 | np.bool_]) -> npt.NDArray[np.int64 | np.bool_]:
        """A per-program start column for each instruction (one value when all agree)."""
        if len(initial) and (initial == initial[0]).all():
            return initial[:1]
        return initial[prg]

    def carried(mask: BoolArray, values: IntArray, initial: IntArray) -> IntArray:
        """The value after each instruction: the last one set in the program, or initial."""
        last = np.maximum.accumulate(np.where(mask, idx, -1))
        return np.where(last >= first, values[np.maximum(last, 0)], per_op(initial))

    def count_before(mask: BoolArray) -> IntArray:
        """How many earlier instructions of the same program have ``mask`` set."""
        total: IntArray = np.cumsum(mask) - mask
        return total - total[first]

    effective = is_advance & (delta > 0)
    has_row = per_op(start.has_row) | (count_before(effective | is_def_cfa) > 0)
    sets_cfa_reg = is_def_cfa | is_def_register
    cfa_reg = carried(sets_cfa_reg, reg, start.state.cfa_reg)
    cfa_reg_before = np.where(is_first, per_op(start.state.cfa_reg), np.roll(cfa_reg, 1))
    # Cases left to the per-function path (translate_ops).
    bad = is_def_offset & (~has_row | (cfa_reg_before == REG_INVALID))
    bad |= (is_offset | is_def_register) & ~has_row
    bad |= sets_cfa_reg & (reg != params.sp) & (reg != params.fp)
    bad |= (is_offset | is_def_offset) & ((value < _INT32_MIN) | (value > _INT32_MAX))
    is_fp = is_offset & (reg == params.fp)
    is_ra = is_offset & (reg == params.ra)
    if not params.ra_tracking:
        bad |= is_ra & (value != params.cfa_ra_offset)
    ok[prg[bad]] = False

    cfa_off = carried(is_def_cfa | is_def_offset, value, start.state.cfa_off)
    fp_last = np.maximum.accumulate(np.where(is_fp, idx, -1))
    fp_set = fp_last >= first
    fp_loc = np.where(fp_set, LOC_STACK, per_op(start.state.fp_loc))
    fp_off = np.where(fp_set, value[np.maximum(fp_last, 0)], per_op(start.state.fp_off))
    ra_last = np.maximum.accumulate(np.where(is_ra, idx, -1))
    ra_set = ra_last >= first
    if params.ra_tracking:
        ra_loc = np.where(ra_set, LOC_STACK, per_op(start.state.ra_loc))
        ra_off = np.where(ra_set, value[np.maximum(ra_last, 0)], per_op(start.state.ra_off))
    else:
        ra_loc = np.where(ra_set, LOC_NONE, per_op(start.state.ra_loc))
        ra_off = np.broadcast_to(per_op(start.state.ra_off), (n,))
    after = RowState(cfa_reg, cfa_off, fp_loc, fp_off, ra_loc, ra_off)

    # A row is written at an advance when the state changed since the previous one.
    dirty = is_def_cfa | is_def_offset | is_def_register | is_fp | is_ra
    moved = np.where(is_advance, delta, 0)
    loc = np.cumsum(moved)
    loc -= (loc - moved)[first]
    last_advance = np.maximum.accumulate(np.where(effective, idx, -1))
    previous = np.roll(last_advance, 1)
    if n:
        previous[0] = -1
    has_previous = previous >= first
    previous = np.maximum(previous, 0)
    dirty_before = np.cumsum(dirty) - dirty
    changed = dirty_before > np.where(has_previous, dirty_before[previous], dirty_before[first])
    changed |= ~has_previous & per_op(start.dirty)
    at = np.flatnonzero(effective & has_row & changed)
    at_prog = prg[at]
    at_begin = np.where(has_previous[at], loc[previous[at]], 0)
    at_first = is_first[at]
    at_prev = np.maximum(at - 1, 0)
    at_state = [
        np.where(at_first, initial[at_prog], column[at_prev])
        for column, initial in zip(after, start.state, strict=True)
    ]

    # The last row of each program (always written when there is a row).
    has_ops = bounds[1:] > bounds[:-1]
    last_op = np.maximum(bounds[1:] - 1, 0)
    if n:
        end_state = RowState(
            *(
                np.where(has_ops, column[last_op], initial)
                for column, initial in zip(after, start.state, strict=True)
            )
        )
        last_eff = last_advance[last_op]
        end_begin = np.where(has_ops & (last_eff >= bounds[:-1]), loc[np.maximum(last_eff, 0)], 0)
        loc_end = np.where(has_ops, loc[last_op], 0)
    else:
        end_state = start.state
        end_begin = np.zeros(count, dtype=np.int64)
        loc_end = end_begin
    ok &= loc_end < (1 << 32)
    end_has_row = start.has_row | (_segment_sums(effective | is_def_cfa, bounds) > 0)
    end_dirty = start.dirty | (_segment_sums(dirty, bounds) > 0)
    has_advance = _segment_sums(is_advance, bounds) > 0

    # Each program's rows, then its last row; programs in order, without the refused ones.
    finals_before: IntArray = np.cumsum(end_has_row) - end_has_row
    finals = np.flatnonzero(end_has_row)
    at_upto = np.searchsorted(at_prog, finals, side="right")
    total = len(at) + len(finals)
    slot_at = np.arange(len(at), dtype=np.int64) + finals_before[at_prog]
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
    return Programs(
        ok,
        has_advance,
        Start(end_has_row, end_dirty, end_state),
        row_program,
        row_begin,
        RowState(*columns),
    )


def empty_start(count: int) -> Start:
    """gas' state before a CIE's first instruction (no row, no rules)."""
    invalid = np.full(count, REG_INVALID, dtype=np.int64)
    zero = np.zeros(count, dtype=np.int64)
    none = np.full(count, LOC_NONE, dtype=np.int64)
    no = np.zeros(count, dtype=bool)
    return Start(no, no.copy(), RowState(invalid, zero, none, zero.copy(), none.copy(), zero))


class RowBytes(NamedTuple):
    """The encoded form of every row (FRE info byte and data words), SFrame spec 2.4."""

    #: Info byte then three 4-byte words, in section byte order.
    block: ByteArray
    #: Which bytes of ``block`` are written for the row's word size and word count.
    present: npt.NDArray[np.bool_]
    #: Bytes written for the row (info byte and words).
    length: IntArray
    #: Rows a function must not contain (gas' end-of-function checks or a word too large).
    refused: BoolArray


def encode_rows(rows: RowState, params: AbiParams, big_endian: bool) -> RowBytes:
    """DEFAULT FRE info and words of each row (as generate.encode_row writes them)."""
    count = len(rows.cfa_reg)
    cfa = rows.cfa_off
    if params.s390x:
        cfa = (cfa - 160) // 8
    has_fp = rows.fp_loc == LOC_STACK
    if params.ra_tracking:
        has_ra = rows.ra_loc == LOC_STACK
        second = has_ra | (params.s390x & ~has_ra & has_fp)
    else:
        has_ra = np.zeros(count, dtype=bool)
        second = has_ra
    ra_word = np.where(has_ra, rows.ra_off, 0)
    fp_word = np.where(has_fp, rows.fp_off, 0)
    words = np.stack([cfa, np.where(second, ra_word, fp_word), fp_word], axis=1)

    def size_code(value: IntArray) -> IntArray:
        return np.where((value >= -0x80) & (value <= 0x7F), 0, 1) + (
            (value < -0x8000) | (value > 0x7FFF)
        )

    size = np.maximum(size_code(cfa), np.where(has_ra, size_code(ra_word), 0))
    size = np.maximum(size, np.where(has_fp, size_code(fp_word), 0))
    nwords = 1 + second.astype(np.int64) + has_fp
    base = np.where(rows.cfa_reg == params.fp, 0, 1)
    info = (size << 5) | (nwords << 1) | base
    refused = rows.cfa_reg == REG_INVALID
    refused |= ((words < _INT32_MIN) | (words > _INT32_MAX)).any(axis=1)
    if params.s390x:
        refused |= (rows.cfa_off - 160) % 8 != 0
    if params.ra_tracking and not params.s390x:
        refused |= (rows.ra_loc != LOC_STACK) & has_fp
    order = ">" if big_endian else "<"
    block = np.zeros((count, 13), dtype=np.uint8)
    block[:, 0] = info
    clipped = np.clip(words, _INT32_MIN, _INT32_MAX).astype(order + "i4")
    block[:, 1:] = clipped.view(np.uint8).reshape(count, 12)
    width = 1 << size
    k = np.arange(4)
    # The low bytes of each 4-byte word: at its end in big-endian order.
    in_word = (k[None, :] >= 4 - width[:, None]) if big_endian else (k[None, :] < width[:, None])
    present = np.zeros((count, 13), dtype=bool)
    present[:, 0] = True
    for slot in range(3):
        present[:, 1 + 4 * slot : 5 + 4 * slot] = in_word & (nwords > slot)[:, None]
    return RowBytes(block, present, 1 + nwords * width, refused)


def function_rows(
    row_program: IntArray, row_begin: IntArray, programs: IntArray, sizes: IntArray
) -> tuple[IntArray, IntArray]:
    """[first, end) row numbers of each function: its program's rows that start before its
    end (gas drops rows at or past the end of the function)."""
    key = (row_program << _KEY_SHIFT) | row_begin
    first = np.searchsorted(key, programs << _KEY_SHIFT, side="left")
    end = np.searchsorted(key, (programs << _KEY_SHIFT) | np.minimum(sizes, 1 << 32), side="left")
    return first, end


def write_fres(
    row_begin: IntArray,
    encoded: RowBytes,
    first: IntArray,
    end: IntArray,
    fre_types: IntArray,
    big_endian: bool,
) -> tuple[bytes, IntArray]:
    """The FREs of every function, one after the other, and where each function's start
    (one more offset than functions): start address field (1, 2 or 4 bytes by FRE type),
    info byte, data words."""
    counts = end - first
    total = int(counts.sum())
    function_of = np.repeat(np.arange(len(first)), counts)
    before = np.cumsum(counts) - counts
    row = np.repeat(first - before, counts) + np.arange(total, dtype=np.int64)
    width = 1 << fre_types[function_of]
    order = ">" if big_endian else "<"
    slots = np.empty((total, 17), dtype=np.uint8)
    slots[:, :4] = row_begin[row].astype(order + "u4").view(np.uint8).reshape(total, 4)
    slots[:, 4:] = encoded.block[row]
    present = np.empty((total, 17), dtype=bool)
    k = np.arange(4)
    if big_endian:
        present[:, :4] = k[None, :] >= 4 - width[:, None]
    else:
        present[:, :4] = k[None, :] < width[:, None]
    present[:, 4:] = encoded.present[row]
    data = slots[present].tobytes()
    lengths = width + encoded.length[row]
    offsets = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    bounds = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    return data, offsets[bounds]


__all__ = [
    "PAD",
    "Programs",
    "RowBytes",
    "RowState",
    "Start",
    "empty_start",
    "encode_rows",
    "function_rows",
    "instruction_lengths",
    "interpret",
    "write_fres",
]
