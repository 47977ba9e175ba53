"""The CFI table of a whole ``.eh_frame`` or ``.debug_frame``: for every FDE, the CFA, FP and RA
rules at each of its PC ranges, read with DWARF's semantics (DWARF 5 6.4).

This is the other side of :mod:`pysframe.generate.translator`: that module says what GNU as
makes of the CFI, this one what the CFI itself says, so that the two can be compared with an
SFrame section (``pysframe verify``).  Functions share their programs byte for byte, so each
distinct (CIE, instructions) program is interpreted once: with numpy for the common
instructions (:mod:`pysframe.generate.interpret_bulk`), one by one otherwise
(:func:`pysframe.generate.cfa_rules.interpret_program`).  Programs whose rows depend on where
the FDE is (``DW_CFA_set_loc``, a CFA expression that reads the PC, as x86-64 PLT FDEs have)
are interpreted per FDE, the PC-dependent expression evaluated at each PC
(:func:`pysframe.generate.expression.evaluate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import CfiError
from ..format.constants import Abi
from .cfa_rules import (
    CfaKind,
    CfiAbi,
    Quirk,
    Row,
    Rules,
    decode_error,
    initial_rules,
    interpret_program,
)
from .cfi import CfiFormat, Cie, FdeSpan, PointerContext, oversized_program, scan_fdes
from .expression import evaluate
from .instructions_bulk import IntArray
from .interpret_bulk import PAD, BulkRows, RuleColumns, concatenate, interpret_programs
from .ops import decode_instructions

#: Row starts are combined with a program number in one int64 key.
_KEY_SHIFT = 33
_KEY_LIMIT = (1 << _KEY_SHIFT) - 1
#: PC-dependent CFA expressions are evaluated at every PC of ranges up to this size.
MAX_PER_PC = 1 << 20


@dataclass(frozen=True, slots=True)
class CfiTable:
    """Every FDE of one CFI section with its rows.

    FDEs are numbered in section order (``spans[i]``); ``begin``/``size`` are their address
    ranges.  Rows are in FDE order, each FDE's in address order: row ``k`` is FDE
    ``row_fde[k]`` from ``begin + row_begin[k]`` to the next row (or the FDE's end), with the
    rules ``rules.row(row_rule[k])``.  An FDE whose CFI cannot be read has no rows and a
    ``problems`` entry.
    """

    source: str
    abi: Abi
    data: bytes
    cies: dict[int, Cie]
    spans: list[FdeSpan]
    begin: IntArray
    size: IntArray
    problems: dict[int, str]
    row_fde: IntArray
    row_begin: IntArray
    row_rule: IntArray
    rules: RuleColumns

    def __len__(self) -> int:
        return len(self.spans)

    def rows_of(self, fde: int) -> list[tuple[int, Rules]]:
        """(absolute start, rules) of one FDE's rows."""
        lo, hi = np.searchsorted(self.row_fde, [fde, fde + 1])
        start = int(self.begin[fde])
        return [
            (start + int(self.row_begin[k]), self.rules.row(int(self.row_rule[k])))
            for k in range(int(lo), int(hi))
        ]


def fde_rows(table: CfiTable, fde: int, quirks: Quirk = Quirk.NONE) -> list[Row] | str:
    """The rows of FDE ``fde`` of ``table``, interpreted on their own and read with ``quirks``
    (offsets from the FDE's start), or why they cannot be had."""
    cie_offset, pc_begin, size, lo, hi = table.spans[fde]
    cie = table.cies[cie_offset]
    abi = table.abi
    cfi_abi = CfiAbi.of(abi)
    try:
        initial_ops = decode_instructions(
            table.data, cie.instructions_start, cie.instructions_end, cie, abi.big_endian
        )
        ops = decode_instructions(table.data, lo, hi, cie, abi.big_endian)
    except CfiError as error:
        return decode_error(error)
    state = initial_rules(initial_ops, cfi_abi, abi.big_endian, quirks)
    if isinstance(state, str):
        return state
    program = interpret_program(
        ops,
        cfi_abi,
        state[0],
        initial_expression=state[1],
        pc_begin=pc_begin,
        big_endian=abi.big_endian,
        quirks=quirks,
    )
    if isinstance(program, str):
        return program
    return _per_pc(program.rows, pc_begin, size, cfi_abi, abi.big_endian)


def interpret_cfi(
    data: bytes,
    section_address: int,
    abi: Abi | int,
    *,
    debug_frame: bool = False,
    address_size: int = 8,
    pointers: PointerContext | None = None,
    bulk: bool = True,
) -> CfiTable:
    """The CFI table of ``.eh_frame`` (or ``.debug_frame``) bytes at ``section_address``.

    ``bulk=False`` interprets every program one by one (same table, slower).  Raises CfiError
    when the section's records cannot be read; an FDE whose instructions cannot be is listed
    in ``problems`` instead.
    """
    abi = Abi(abi)
    big_endian = abi.big_endian
    cfi_abi = CfiAbi.of(abi)
    data = bytes(data)
    cies, spans = scan_fdes(
        data,
        section_address,
        big_endian=big_endian,
        address_size=address_size,
        cfi_format=CfiFormat.DEBUG_FRAME if debug_frame else CfiFormat.EH_FRAME,
        pointers=pointers,
        bulk=bulk,
    )
    source = ".debug_frame" if debug_frame else ".eh_frame"
    count = len(spans)
    begin = np.array([span[1] for span in spans], dtype=np.uint64).astype(np.int64)
    size = np.array([span[2] for span in spans], dtype=np.int64) if count else np.zeros(0, np.int64)
    initial = _initial_states(data, cies, cfi_abi, big_endian)
    problems: dict[int, str] = {}
    wanted, keys, fde_program = _programs_of(data, spans, initial, problems)
    rows = _ProgramRows()
    programs = _Programs(keys, cies, initial, cfi_abi, big_endian)
    per_fde, next_program = programs.interpret(rows, fde_program, bulk)
    if per_fde or rows.failed:
        dependent = set(per_fde)
        for index in wanted:
            program = int(fde_program[index])
            if program in rows.failed:
                problems[index] = rows.failed[program]
                fde_program[index] = -1
            elif program in dependent:
                result = programs.at_address(data, spans[index])
                if isinstance(result, str):
                    problems[index] = result
                    fde_program[index] = -1
                    continue
                rows.add(next_program, result)
                fde_program[index] = next_program
                next_program += 1
    row_program, row_begin, row_rule, rules = rows.finish()
    row_fde, fde_row_begin, fde_row_rule = _expand(
        row_program, row_begin, row_rule, fde_program, size
    )
    return CfiTable(
        source, abi, data, cies, list(spans), begin, size, problems, row_fde, fde_row_begin,
        fde_row_rule, rules,
    )  # fmt: skip


#: Per CIE: the rules after its initial instructions and a PER_PC CFA's expression, or why they
#: cannot be had.
_InitialStates = dict[int, tuple[Rules, bytes | None] | str]


def _initial_states(
    data: bytes, cies: dict[int, Cie], cfi_abi: CfiAbi, big_endian: bool
) -> _InitialStates:
    """Every CIE's state after its initial instructions (DWARF 5 6.4.1)."""
    initial: _InitialStates = {}
    for offset, cie in cies.items():
        try:
            ops = decode_instructions(
                data, cie.instructions_start, cie.instructions_end, cie, big_endian
            )
        except CfiError as error:
            initial[offset] = decode_error(error)
            continue
        initial[offset] = initial_rules(ops, cfi_abi, big_endian)
    return initial


def _programs_of(
    data: bytes, spans: list[FdeSpan], initial: _InitialStates, problems: dict[int, str]
) -> tuple[list[int], list[tuple[int, bytes]], IntArray]:
    """The FDEs to interpret (with code, a readable CIE and a program not too long for the code:
    the others with code get their problem), the distinct (CIE, instructions) programs, and
    each FDE's program number (-1: none to interpret)."""
    readable = {offset for offset, state in initial.items() if not isinstance(state, str)}
    for index, span in enumerate(spans):
        flood = oversized_program(span) if span[2] > 0 and span[0] in readable else None
        if flood is not None:
            problems[index] = flood
    wanted = [
        index
        for index, span in enumerate(spans)
        if span[2] > 0 and span[0] in readable and index not in problems
    ]
    for index, span in enumerate(spans):
        if span[2] > 0 and span[0] not in readable:
            problem = initial[span[0]]
            assert isinstance(problem, str)
            problems[index] = problem
    programs: dict[object, int] = {}
    number = programs.setdefault
    if len(readable) == 1:
        numbers = [number(data[spans[i][3] : spans[i][4]], len(programs)) for i in wanted]
        only = next(iter(readable))
        keys: list[tuple[int, bytes]] = [(only, code) for code in programs]  # type: ignore[misc]
    else:
        numbers = [
            number((spans[i][0], data[spans[i][3] : spans[i][4]]), len(programs)) for i in wanted
        ]
        keys = list(programs)  # type: ignore[arg-type]
    fde_program = np.full(len(spans), -1, dtype=np.int64)
    fde_program[np.array(wanted, dtype=np.int64)] = numbers
    return wanted, keys, fde_program


@dataclass(frozen=True, slots=True)
class _Programs:
    """The distinct programs of a section, ``keys[i]`` = (CIE offset, instructions), and what
    their interpretation needs."""

    keys: list[tuple[int, bytes]]
    cies: dict[int, Cie]
    initial: _InitialStates
    cfi_abi: CfiAbi
    big_endian: bool

    def interpret(
        self, rows: _ProgramRows, fde_program: IntArray, bulk: bool
    ) -> tuple[list[int], int]:
        """Every program's rows into ``rows``: the bulk path's, then one by one the others,
        numbered after the bulk path's programs so that their rows, appended, stay in program
        order (``fde_program`` renumbered).  Returns the programs whose rows depend on where
        the FDE is (to interpret per FDE), and the next free program number."""
        keys = self.keys
        solved = np.zeros(len(keys), dtype=bool)
        if bulk and keys:
            solved = _interpret_in_bulk(
                keys, self.cies, self.initial, self.cfi_abi, self.big_endian, rows
            )
        per_fde: list[int] = []
        renumber = np.arange(len(keys), dtype=np.int64)
        next_program = len(keys)
        for program in np.flatnonzero(~solved).tolist():
            cie_offset, code = keys[program]
            result = self._one(code, cie_offset, None)
            if isinstance(result, str):
                rows.fail(program, result)
            elif result is None:
                per_fde.append(program)
            else:
                rows.add(next_program, result)
                renumber[program] = next_program
                next_program += 1
        listed = fde_program >= 0
        fde_program[listed] = renumber[fde_program[listed]]
        return per_fde, next_program

    def at_address(self, data: bytes, span: FdeSpan) -> list[Row] | str:
        """The rows of one FDE whose program's rows depend on where it is, a PC-dependent CFA
        evaluated at each of its PCs; or why there are none."""
        cie_offset, pc_begin, length, lo, hi = span
        result = self._one(data[lo:hi], cie_offset, pc_begin)
        if isinstance(result, str) or result is None:
            return result or "CFI rows depend on the PC"
        return _per_pc(result, pc_begin, length, self.cfi_abi, self.big_endian)

    def _one(self, code: bytes, cie_offset: int, pc_begin: int | None) -> list[Row] | str | None:
        state = self.initial[cie_offset]
        assert not isinstance(state, str)
        return _interpret_one(
            code, self.cies[cie_offset], state, self.cfi_abi, self.big_endian, pc_begin
        )


class _ProgramRows:
    """Rows of programs as they are interpreted: a numpy block from the bulk path, lists from
    the per-program path (added in program order, after the block's programs)."""

    def __init__(self) -> None:
        #: Blocks of rows from the bulk path, one per chunk, in program order.
        self.blocks: list[tuple[IntArray, IntArray, RuleColumns]] = []
        self.programs: list[int] = []
        self.begins: list[int] = []
        self.rules: list[Rules] = []
        self.failed: dict[int, str] = {}

    def add(self, program: int, rows: Sequence[Row]) -> None:
        for row in rows:
            self.programs.append(program)
            self.begins.append(row.begin)
            self.rules.append(row.rules)

    def fail(self, program: int, reason: str) -> None:
        self.failed[program] = reason

    def finish(self) -> tuple[IntArray, IntArray, IntArray, RuleColumns]:
        """(program, begin, rule) of every row, by program, and the rule columns: the bulk
        block's rows, then the listed ones (their programs are numbered after the block's)."""
        listed = (
            np.array(self.programs, dtype=np.int64),
            np.array(self.begins, dtype=np.int64),
            RuleColumns.of(self.rules),
        )
        blocks = [block for block in (*self.blocks, listed) if len(block[0])] or [listed]
        self.blocks = []  # released: the rows are held once, here or in the joined columns
        if len(blocks) == 1:
            program, begin, rules = blocks[0]
        else:
            program = np.concatenate([block[0] for block in blocks])
            begin = np.concatenate([block[1] for block in blocks])
            rules = concatenate([block[2] for block in blocks])
        return program, begin, np.arange(len(program), dtype=np.int64), rules


def _interpret_in_bulk(
    keys: list[tuple[int, bytes]],
    cies: dict[int, Cie],
    initial: _InitialStates,
    cfi_abi: CfiAbi,
    big_endian: bool,
    rows: _ProgramRows,
) -> npt.NDArray[np.bool_]:
    """Interpret the programs the bulk path handles; which ones it did.

    In chunks of :data:`CHUNK` programs, as the generator does, to bound the memory of the
    columns (several int64 per instruction and per row)."""
    ok = np.zeros(len(keys), dtype=bool)
    for low in range(0, len(keys), CHUNK):
        chunk = keys[low : low + CHUNK]
        found = _interpret_chunk(chunk, cies, initial, cfi_abi, big_endian)
        rows.blocks.append((found.row_program + low, found.row_begin, found.rules))
        ok[low : low + len(chunk)] = found.ok
    return ok


def _interpret_chunk(
    keys: list[tuple[int, bytes]],
    cies: dict[int, Cie],
    initial: _InitialStates,
    cfi_abi: CfiAbi,
    big_endian: bool,
) -> BulkRows:
    """The bulk path over ``keys``' programs (numbered from 0)."""
    lengths = np.fromiter((len(code) for _cie, code in keys), dtype=np.int64, count=len(keys))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    buf = np.frombuffer(b"".join(code for _cie, code in keys) + bytes(PAD), dtype=np.uint8)
    cie_of = [cie for cie, _code in keys]
    cie_list = sorted(set(cie_of))
    cie_number = {offset: i for i, offset in enumerate(cie_list)}
    which = np.array([cie_number[offset] for offset in cie_of], dtype=np.int64)
    start_rules: list[Rules] = []
    for offset in cie_list:
        state = initial[offset]
        assert not isinstance(state, str)
        start_rules.append(state[0])
    start = RuleColumns.of(start_rules).take(which)
    caf = np.array([cies[offset].code_alignment for offset in cie_list], dtype=np.int64)[which]
    daf = np.array([cies[offset].data_alignment for offset in cie_list], dtype=np.int64)[which]
    return interpret_programs(buf, starts, ends, caf, daf, start, cfi_abi, big_endian)


#: Programs interpreted together by the bulk path.
CHUNK = 4096


def _interpret_one(
    code: bytes,
    cie: Cie,
    state: tuple[Rules, bytes | None],
    cfi_abi: CfiAbi,
    big_endian: bool,
    pc_begin: int | None,
) -> list[Row] | str | None:
    """One program's rows; a reason when it cannot be read; None when its rows depend on
    where the FDE is and ``pc_begin`` is None (a program shared by FDEs: interpret it per
    FDE)."""
    try:
        ops = decode_instructions(code, 0, len(code), cie, big_endian)
    except CfiError as error:
        return decode_error(error)
    rules, expression = state
    program = interpret_program(
        ops,
        cfi_abi,
        rules,
        initial_expression=expression,
        pc_begin=pc_begin or 0,
        big_endian=big_endian,
    )
    if isinstance(program, str):
        return program
    if program.position_dependent and pc_begin is None:
        return None
    return program.rows


def _per_pc(
    rows: list[Row], pc_begin: int, size: int, cfi_abi: CfiAbi, big_endian: bool
) -> list[Row]:
    """``rows`` with each PC-dependent CFA evaluated at every PC of its range, as runs of PCs
    with the same rule."""
    out: list[Row] = []
    ends = [row.begin for row in rows[1:]] + [size]
    for row, end in zip(rows, ends, strict=True):
        if row.begin >= size:
            break
        end = min(end, size)
        if row.rules.cfa_kind != CfaKind.PER_PC or row.cfa_expression is None:
            out.append(row)
            continue
        if end - row.begin > MAX_PER_PC or pc_begin + end >= 1 << 63:
            # Too many PCs to evaluate, or addresses a hostile FDE puts beyond int64.
            out.append(Row(row.begin, row.rules._replace(cfa_kind=CfaKind.OTHER)))
            continue
        offsets = np.arange(row.begin, end, dtype=np.int64)
        reduced = evaluate(
            row.cfa_expression,
            push_cfa=False,
            big_endian=big_endian,
            pc_register=cfi_abi.pc,
            pcs=offsets + pc_begin,
        )
        if reduced is None or reduced.base is None or reduced.base < 0:
            out.append(Row(row.begin, row.rules._replace(cfa_kind=CfaKind.OTHER)))
            continue
        kind = CfaKind.DEREF if reduced.deref else CfaKind.REG
        value = np.broadcast_to(np.asarray(reduced.offset, dtype=np.int64), offsets.shape)
        change = np.flatnonzero(np.diff(value, prepend=value[0] - 1) != 0)
        for at in change.tolist():
            rules = row.rules._replace(
                cfa_kind=kind, cfa_reg=reduced.base, cfa_offset=int(value[at])
            )
            out.append(Row(int(offsets[at]), rules))
    return out


def _expand(
    row_program: IntArray, row_begin: IntArray, row_rule: IntArray, fde_program: IntArray,
    size: IntArray,
) -> tuple[IntArray, IntArray, IntArray]:  # fmt: skip
    """Each FDE's rows: its program's rows that start before its end."""
    key = (row_program << _KEY_SHIFT) | np.minimum(row_begin, _KEY_LIMIT)
    has = fde_program >= 0
    program = np.where(has, fde_program, 0)
    first = np.searchsorted(key, program << _KEY_SHIFT, side="left")
    end = np.searchsorted(key, (program << _KEY_SHIFT) | np.minimum(size, _KEY_LIMIT), side="left")
    counts = np.where(has & (size > 0), end - first, 0)
    total = int(counts.sum())
    fde = np.repeat(np.arange(len(fde_program), dtype=np.int64), counts)
    before = np.cumsum(counts) - counts
    row = np.repeat(first - before, counts) + np.arange(total, dtype=np.int64)
    return fde, row_begin[row], row_rule[row]


__all__ = ["MAX_PER_PC", "CfiTable", "fde_rows", "interpret_cfi"]
