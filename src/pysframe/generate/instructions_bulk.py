"""The DW_CFA instructions of many CFA programs at once, with numpy: the operand table of
:mod:`pysframe.generate.ops` as per-opcode arrays, where each program's instructions start,
and the operands of its advances.

The programs lie end to end in one byte buffer (a section, or programs joined).  A bulk path
says which instructions it handles; :func:`operand_tables` gives, per opcode byte, how many
LEB128 operands follow (DWARF 5 7.6) and how many other bytes the instruction has, from the one
declaration of every instruction's operands (:data:`~pysframe.generate.ops.CFA_INSTRUCTIONS`).
From those the path computes the length of the instruction that would start at each byte, and
:func:`instruction_positions` walks every program with them.  The generator's bulk path
(:mod:`pysframe.generate.bulk`) and the DWARF interpreter's
(:mod:`pysframe.generate.interpret_bulk`) both work this way.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from .ops import (
    CFA_INSTRUCTIONS,
    HIGH_2_BITS,
    LOW_6_BITS,
    DW_CFA_advance_loc,
    DW_CFA_advance_loc1,
    DW_CFA_advance_loc4,
    Operand,
)

#: The array types of the bulk paths.
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
ByteArray = npt.NDArray[np.uint8]
#: A column of row fields: int64 (registers, offsets, locations) or bool (flags).
Column = npt.NDArray[Any]

#: The value of :func:`operand_tables`' LEB128 count for an instruction a path does not handle.
NOT_HANDLED = -1


def operand_tables(handled: Iterable[int]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]]:
    """Per opcode byte, for the instructions ``handled`` (by opcode; DW_CFA_advance_loc,
    DW_CFA_offset and DW_CFA_restore stand for all 64 opcodes with their operand in the low six
    bits): how many LEB128 operands follow the opcode (:data:`NOT_HANDLED` for the others), and
    how many bytes the instruction has besides them (the opcode and fixed-size operands; 0 for
    the others).

    Instructions whose operands are neither LEB128 numbers nor fixed-size (blocks, addresses)
    cannot be handled this way."""
    lebs = np.full(256, NOT_HANDLED, dtype=np.int8)
    fixed = np.zeros(256, dtype=np.int8)
    for code in handled:
        name, operands = CFA_INSTRUCTIONS[code]
        sizes = [operand.size for operand in operands if operand not in _LEB128]
        if None in sizes:
            raise ValueError(f"{name} has an operand of no fixed size")
        last = code + LOW_6_BITS if code & HIGH_2_BITS else code
        lebs[code : last + 1] = sum(operand in _LEB128 for operand in operands)
        fixed[code : last + 1] = 1 + sum(size or 0 for size in sizes)
    return lebs, fixed


_LEB128 = (Operand.ULEB, Operand.SLEB)


def instruction_positions(
    lengths: npt.NDArray[np.int8], starts: IntArray, ends: IntArray, ok: BoolArray
) -> tuple[IntArray, IntArray]:
    """(position, program) of every instruction, grouped by program in program order, from
    ``lengths``: per byte, the length of the instruction that would start there (0 for one the
    path does not handle; never negative).

    Walks the programs together, one instruction of each per numpy round, while at least
    :data:`FEW_PROGRAMS` are being walked; then the programs left (the longest) one at a time:
    one Python loop turn per instruction (:func:`_walk_one`), or, for one of more than
    :data:`LONG_PROGRAM` bytes, jumps of :data:`STRIDE` instructions (:func:`_walk_long`).  A
    round costs some microseconds whatever the number of programs in it, a loop turn a tenth
    of one: the cost stays linear in the number of instructions, also for one program of a
    million.  A program with an unhandled or truncated instruction is marked in ``ok``.
    Programs must not overlap and must be in section order (FDE bodies are)."""
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
        if not len(cur) or len(cur) < FEW_PROGRAMS:
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
    for at, program, stop in zip(cur.tolist(), prog.tolist(), end.tolist(), strict=True):
        if stop - at > LONG_PROGRAM:
            found = _walk_long(lengths[at:stop])
        else:
            found = _walk_one(lengths[at:stop].tobytes())
        if found is None:
            ok[program] = False
            continue
        found += at
        is_start[found] = True
        program_at[found] = program
    pos = np.flatnonzero(is_start)
    del is_start
    prg = program_at[pos].astype(np.int64)
    del program_at
    keep = ok[prg]
    if keep.all():
        return pos, prg
    return pos[keep], prg[keep]


#: Fewer programs than this left to walk: one at a time (see :func:`instruction_positions`).
FEW_PROGRAMS = 64


def _walk_one(lengths: bytes) -> IntArray | None:
    """Where the instructions of one program are (offsets from its start), from the lengths of
    those starting at each of its bytes; None when one is not handled or runs past the end."""
    found = array("q")
    append = found.append
    at, end = 0, len(lengths)
    while at < end:
        step = lengths[at]
        if not step:
            return None
        append(at)
        at += step
    if at > end:
        return None
    return np.frombuffer(found, dtype=np.int64)


#: Programs longer than this (bytes) are walked by :func:`_walk_long`.
LONG_PROGRAM = 1 << 12
#: :func:`_walk_long` jumps 2**STRIDE_BITS instructions at a time.
STRIDE_BITS = 6
STRIDE = 1 << STRIDE_BITS


def _walk_long(lengths: npt.NDArray[np.int8]) -> IntArray | None:
    """:func:`_walk_one` of a long program, in fewer Python turns: every :data:`STRIDE`-th
    instruction is found by jumps in a table doubled :data:`STRIDE_BITS` times (one turn
    each), then those between by stepping from them all at once, one numpy round per
    instruction of a stride.  The positions come in no particular order."""
    size = len(lengths)
    broken = size + 1  # the end (size) and broken are absorbing
    following: npt.NDArray[Any] = np.arange(
        size + 2, dtype=np.int32 if size < 1 << 30 else np.int64
    )
    ahead = following[:size]
    ahead += lengths
    ahead[(lengths == 0) | (ahead > size)] = broken
    jump = following
    for _ in range(STRIDE_BITS):
        jump = jump[jump]
    table = jump.data  # a memoryview: fast element reads for the Python loop
    every = array("q")
    append = every.append
    at = 0
    while at < size:
        append(at)
        at = table[at]
    if at == broken:
        return None
    found = [np.frombuffer(every, dtype=np.int64)]
    current = found[0]
    for _ in range(STRIDE - 1):
        current = following[current]
        current = current[current < size]
        if not len(current):
            break
        found.append(current.astype(np.int64))
    return np.concatenate(found)


def advance_deltas(buf: ByteArray, pos: IntArray, op: ByteArray, big_endian: bool) -> IntArray:
    """Per instruction at ``pos`` (opcodes ``op``): an advance's delta (DWARF 5 6.4.2.1), not
    yet times the code alignment factor, and 0 for the other instructions.  DW_CFA_advance_loc
    keeps it in its low six bits, DW_CFA_advance_loc1/2/4 in 1, 2 or 4 bytes in the section's
    byte order (``buf`` is padded past its last program)."""
    delta = np.where((op & HIGH_2_BITS) == DW_CFA_advance_loc, op & LOW_6_BITS, 0)
    delta = delta.astype(np.int64)
    wide = np.flatnonzero((op >= DW_CFA_advance_loc1) & (op <= DW_CFA_advance_loc4))
    if len(wide):
        size = 1 << (op[wide].astype(np.int64) - DW_CFA_advance_loc1)
        at = pos[wide] + 1
        raw = np.zeros(len(wide), dtype=np.int64)
        for k in range(4):
            byte = np.where(k < size, buf[at + np.minimum(k, size - 1)], 0).astype(np.int64)
            shift = 8 * (size - 1 - k) if big_endian else np.full(len(wide), 8 * k)
            raw |= byte << np.maximum(shift, 0)
        delta[wide] = raw
    return delta


__all__ = [
    "NOT_HANDLED",
    "BoolArray",
    "ByteArray",
    "Column",
    "IntArray",
    "advance_deltas",
    "instruction_positions",
    "operand_tables",
]
