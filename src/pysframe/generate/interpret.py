"""A whole section's CFA programs through the one interpreter, and the CFI table ``verify``
compares with SFrame: for every FDE, the CFA, FP and RA rules at each of its PC ranges, read
with DWARF's semantics (DWARF 5 6.4).

Functions share their CFA programs byte for byte, and distinct programs mostly differ only in
how far their advances move (one function's prologue is another's, a few bytes longer).  So
:func:`read_programs` decodes each distinct (CIE, instructions) program once
(:func:`pysframe.generate.ops.decode_programs`, all of them together), and groups them by
*shape*: the program with every advance reduced to whether it moves.  A reader interprets each
shape once (:func:`pysframe.generate.cfa_rules.interpret_program`), its rows numbered by the
advances that begin them; :meth:`Programs.place` puts those rows at each program's own
locations, and :func:`fde_rows_before` cuts them at each FDE's end.  Programs whose rows depend
on where the FDE is (``DW_CFA_set_loc``) are interpreted per FDE.

:func:`interpret_cfi` reads a section this way with DWARF's semantics; a CFA expression that
reads the PC (x86-64 PLT FDEs) is evaluated at each PC
(:func:`pysframe.generate.expression.evaluate`).  The generator reads it the same way with GNU
as' rules (:mod:`pysframe.generate.driver`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ..dataclass import dataclass
from ..errors import CfiError
from ..format.constants import Abi
from .cfa_rules import (
    CfaKind,
    CfiAbi,
    Quirk,
    Row,
    Rules,
    decode_error,
    interpret_program,
)
from .cfi import CfiFormat, Cie, FdeSpan, PointerContext, oversized_program, scan_fdes
from .expression import evaluate
from .ops import OP_ADVANCE, OP_SET_LOC, Decoded, Op, decode_programs

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Row starts are combined with a program number in one int64 key.
_KEY_SHIFT = 33
_KEY_LIMIT = (1 << _KEY_SHIFT) - 1
#: An advance moves at most this far in the locations of placed rows (no int64 overflow); a
#: row that far in is past the end of any function SFrame can describe.
_FAR = 1 << 40
#: PC-dependent CFA expressions are evaluated at every PC of ranges up to this size.
MAX_PER_PC = 1 << 20


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a section is read: reading makes only acyclic
    objects (tuples, bytes), and the collector's passes over them cost more than the rest of
    the Python-level work on a large library."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# A section's programs

#: What a reading makes of one shape, from its CIE's initial operations and its operations:
#: its rows (each begun by a moving advance, its number, and with its rules: (begin, rules,
#: ...) tuples such as :class:`~pysframe.generate.cfa_rules.Row`), and a flag of the
#: reading's own (GNU as': the function needs a FLEX FDE; DWARF's: the rows depend on where
#: the FDE is); or why it makes none.
ShapeRows = tuple[Sequence[tuple[int, Rules, *tuple[object, ...]]], bool]
Reading = Callable[[list[Op], list[Op]], "ShapeRows | str"]


class Shapes:
    """The shapes of the programs read so far, each read once by ``reading`` (the cache of
    one reader of one section, which owns it): a shape's rows are numbered by their distinct
    rules (:attr:`rules`)."""

    def __init__(self, reading: Reading) -> None:
        self.reading = reading
        self.numbers: dict[tuple[int, bytes], int] = {}
        #: Per shape: the reading's flag, or why it makes no rows.
        self.results: list[bool | str] = []
        #: The distinct rules of the shapes' rows, numbered as they come.
        self.rules: dict[Rules, int] = {}
        self._bounds = [0]
        self._ordinals: list[int] = []
        self._values: list[int] = []
        self._arrays: tuple[IntArray, IntArray, IntArray] | None = None

    def add(self, key: tuple[int, bytes], cie_ops: list[Op], ops: list[Op]) -> int:
        """Read a new shape; its number."""
        result = self.reading(cie_ops, ops)
        if not isinstance(result, str):
            number = self.rules.setdefault
            self._ordinals += [row[0] for row in result[0]]
            self._values += [number(row[1], len(self.rules)) for row in result[0]]
        self._bounds.append(len(self._ordinals))
        self.results.append(result if isinstance(result, str) else result[1])
        self._arrays = None
        return self.numbers.setdefault(key, len(self.numbers))

    def rows(self) -> tuple[IntArray, IntArray, IntArray]:
        """Shape ``s``'s rows are ``[bounds[s], bounds[s + 1])`` of the ordinals (which moving
        advance begins each) and values (its rules' number): (bounds, ordinals, values)."""
        if self._arrays is None:
            self._arrays = (
                np.array(self._bounds, dtype=np.int64),
                np.array(self._ordinals, dtype=np.int64),
                np.array(self._values, dtype=np.int64),
            )
        return self._arrays


@dataclass(frozen=True, slots=True)
class Programs:
    """The distinct CFA programs of a section's FDEs, decoded, and their shapes.

    Program ``p`` is ``keys[p]`` = (CIE offset, instructions).  When it can be decoded (not in
    :attr:`errors`, its CIE not in :attr:`cie_errors`), it has a shape (``shape[p]``, a
    number of :class:`Shapes`) or, when its rows depend on where its FDE is, none (-1: read
    it per FDE with :meth:`ops`)."""

    keys: list[tuple[int, bytes]]
    #: Per FDE read: its program.
    fde_program: IntArray
    #: Why programs, and the initial instructions of CIEs, cannot be decoded.
    errors: dict[int, CfiError]
    cie_errors: dict[int, CfiError]
    shape: IntArray
    #: Per CIE that programs use: its initial instructions.
    cie_ops: dict[int, list[Op]]
    cies: dict[int, Cie]
    big_endian: bool
    #: How far the advances that move have gone, program after program (0, then after each),
    #: and per program the number of the moving advances before its own: its row after its
    #: ``m``-th moving advance begins ``reached[first_move + m] - reached[first_move]`` in.
    reached: IntArray
    first_move: IntArray

    def operations(self, programs: Sequence[int]) -> list[list[Op]]:
        """The operations of ``programs`` (which can be decoded), with their own advances:
        decoded again (what a section's programs decode to is not kept)."""
        keys = [self.keys[program] for program in programs]
        found = decode_programs([code for _cie, code in keys],
                                *_factors([self.cies[cie] for cie, _code in keys]),
                                self.big_endian)  # fmt: skip
        return found.operations(range(len(keys)))

    def problem(self, program: int) -> str | None:
        """Why ``program`` cannot be read, or None."""
        cie = self.cie_errors.get(self.keys[program][0])
        error = cie if cie is not None else self.errors.get(program)
        return None if error is None else decode_error(error)

    def place(self, shapes: Shapes, programs: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """The rows of ``programs`` (increasing, their shapes read), from their shapes' rows
        at their own locations: per row its program, its rules' number, where it begins."""
        bounds, ordinals, values = shapes.rows()
        shape = self.shape[programs]
        counts = bounds[shape + 1] - bounds[shape]
        total = int(counts.sum())
        row_program = np.repeat(programs, counts)
        before = np.cumsum(counts) - counts
        index = np.repeat(bounds[shape] - before, counts) + np.arange(total, dtype=np.int64)
        first = self.first_move[row_program]
        begin = self.reached[first + ordinals[index]] - self.reached[first]
        return row_program, values[index], begin


#: Programs decoded together (their per-byte and per-instruction columns stay small).
PROGRAMS = 4096


def read_programs(
    data: bytes,
    cies: dict[int, Cie],
    spans: Sequence[FdeSpan],
    big_endian: bool,
    shapes: Shapes,
) -> Programs:
    """The programs of the FDEs ``spans`` (all read; the caller leaves out those it does not
    want), decoded once each, with their shapes (those not in ``shapes`` yet read)."""
    programs: dict[tuple[int, bytes], int] = {}
    number = programs.setdefault
    fde_program = np.array(
        [number((span[0], data[span[3] : span[4]]), len(programs)) for span in spans],
        dtype=np.int64,
    )
    keys = list(programs)
    used = sorted({cie for cie, _code in keys})
    initial = decode_programs(
        [data[cies[c].instructions_start : cies[c].instructions_end] for c in used],
        *_factors([cies[c] for c in used]), big_endian, [cies[c].instructions_start for c in used],
    )  # fmt: skip
    cie_errors = {cie: initial.errors[k] for k, cie in enumerate(used) if k in initial.errors}
    readable = [k for k, cie in enumerate(used) if cie not in cie_errors]
    cie_ops = dict(zip([used[k] for k in readable], initial.operations(readable), strict=True))
    _, first_fde = np.unique(fde_program, return_index=True)
    offsets = [spans[k][3] for k in first_fde.tolist()]  # where errors are: the first FDE's
    errors: dict[int, CfiError] = {}
    shape = np.full(len(keys), -1, dtype=np.int64)
    moves: list[IntArray] = []
    first_move = np.zeros(len(keys) + 1, dtype=np.int64)
    for low in range(0, len(keys), PROGRAMS):
        chunk = keys[low : low + PROGRAMS]
        found = decode_programs(
            [code for _cie, code in chunk], *_factors([cies[cie] for cie, _code in chunk]),
            big_endian, offsets[low : low + PROGRAMS],
        )  # fmt: skip
        errors.update((low + p, error) for p, error in found.errors.items())
        unread = set(found.errors) | {p for p, (cie, _code) in enumerate(chunk)
                                      if cie in cie_errors}  # fmt: skip
        shape[low : low + len(chunk)] = _shapes(found, chunk, unread, shapes, cie_ops)
        moving = found.moves > 0
        moves.append(found.moves[moving])
        per_program = np.bincount(found.program[moving], minlength=len(chunk))
        first_move[low + 1 : low + len(chunk) + 1] = per_program
    np.cumsum(first_move, out=first_move)
    reached = np.zeros(int(first_move[-1]) + 1, dtype=np.int64)
    if moves:
        np.cumsum(np.concatenate(moves), out=reached[1:])
    return Programs(keys, fde_program, errors, cie_errors, shape, cie_ops, cies, big_endian,
                    reached, first_move)  # fmt: skip


def _factors(cies: list[Cie]) -> tuple[list[int], list[int], list[int]]:
    """The code and data alignment factors and the address sizes of ``cies``."""
    return (
        [cie.code_alignment for cie in cies],
        [cie.data_alignment for cie in cies],
        [cie.address_size for cie in cies],
    )


def _shapes(
    decoded: Decoded, keys: list[tuple[int, bytes]], unread: set[int], shapes: Shapes,
    cie_ops: dict[int, list[Op]],
) -> IntArray:  # fmt: skip
    """Per program its shape (-1: none), those not in ``shapes`` read: the program with each
    advance reduced to whether it moves.  A shape's key is the program's instructions,
    DW_CFA_nop left out and each advance written as one byte, 0x41 if it moves and 0x40 if
    not: equal keys decode to equal operations but for how far advances move."""
    position, length = decoded.position, decoded.length
    advance = decoded.op == OP_ADVANCE
    piece = np.where(advance, 1, length)
    total = int(piece.sum())
    before = np.cumsum(piece) - piece
    source = np.repeat(position - before, piece) + np.arange(total, dtype=np.int64)
    text = np.frombuffer(decoded.source.joined, dtype=np.uint8)[source]
    text[before[advance]] = np.where(decoded.moves[advance] > 0, 0x41, 0x40)
    ends = np.zeros(len(piece) + 1, dtype=np.int64)
    np.cumsum(piece, out=ends[1:])
    bounds = ends[decoded.bounds].tolist()
    raw = text.tobytes()
    dependent = np.zeros(len(keys) + 1, dtype=bool)
    dependent[decoded.program[decoded.op == OP_SET_LOC]] = True
    dependent[list(unread)] = True
    readable = np.flatnonzero(~dependent[: len(keys)]).tolist()
    found = shapes.numbers.get
    texts = [(keys[p][0], raw[bounds[p] : bounds[p + 1]]) for p in readable]
    numbers = [found(key, -1) for key in texts]
    new: dict[tuple[int, bytes], list[int]] = {}
    for k in [k for k, number in enumerate(numbers) if number < 0]:
        new.setdefault(texts[k], []).append(k)
    if new:
        # One program of each new shape stands for it: its operations, advances 1 or 0.
        first = [readable[ks[0]] for ks in new.values()]
        for (key, ks), ops in zip(new.items(), decoded.operations(first, moves=True),
                                  strict=True):  # fmt: skip
            number = shapes.add(key, cie_ops[key[0]], ops)
            for k in ks:
                numbers[k] = number
    shape = np.full(len(keys), -1, dtype=np.int64)
    shape[readable] = numbers
    return shape


def fde_rows_before(
    row_program: IntArray, row_begin: IntArray, fde_program: IntArray, size: IntArray
) -> tuple[IntArray, IntArray]:
    """[first, end) of each FDE's rows among the rows of the programs (grouped by program, in
    address order): its program's rows that start before its end (the FDE's ``size``)."""
    key = (row_program << _KEY_SHIFT) | np.minimum(row_begin, _KEY_LIMIT)
    program = np.maximum(fde_program, 0)
    first = np.searchsorted(key, program << _KEY_SHIFT, side="left")
    end = np.searchsorted(key, (program << _KEY_SHIFT) | np.minimum(size, _KEY_LIMIT), "left")
    empty = (fde_program < 0) | (size <= 0)
    return first, np.where(empty, first, end)


# ---------------------------------------------------------------------------------------------
# The CFI table (DWARF semantics)


class RuleColumns(NamedTuple):
    """:class:`~pysframe.generate.cfa_rules.Rules` as columns, one element per rule."""

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
    def of(cls, rows: Sequence[Rules]) -> RuleColumns:
        """Columns of ``rows`` (offsets a hostile program makes larger than int64, clamped)."""
        if not rows:
            return cls._make(np.zeros(0, dtype=np.int64) for _ in cls._fields)
        try:
            table = np.array(rows, dtype=np.int64)
        except OverflowError:
            limit = 1 << 62
            table = np.array(
                [[max(-limit, min(value, limit)) for value in row] for row in rows],
                dtype=np.int64,
            )
        table = table.reshape(len(rows), len(cls._fields))
        return cls._make(np.ascontiguousarray(table[:, k]) for k in range(len(cls._fields)))

    def take(self, index: IntArray) -> RuleColumns:
        return RuleColumns._make(column[index] for column in self)

    def row(self, index: int) -> Rules:
        return Rules._make(int(column[index]) for column in self)


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
    #: The programs of the FDEs, and each FDE's (-1: none), for reading an FDE again
    #: (:func:`fde_rows`).
    programs: Programs
    fde_program: IntArray

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

    def operations(self, fdes: Sequence[int]) -> list[list[Op]]:
        """The operations of the programs of FDEs ``fdes`` (none for one that cannot be
        read)."""
        readable = [fde for fde in fdes if self.fde_program[fde] >= 0 and fde not in self.problems]
        found = self.programs.operations([int(self.fde_program[fde]) for fde in readable])
        by_fde = dict(zip(readable, found, strict=True))
        return [by_fde.get(fde, []) for fde in fdes]


def fde_rows(table: CfiTable, fde: int, quirks: Quirk = Quirk.NONE) -> list[Row] | str:
    """The rows of FDE ``fde`` of ``table`` read with ``quirks`` (offsets from the FDE's
    start, those at or past its end left out), or why they cannot be had."""
    program = int(table.fde_program[fde])
    problem = table.problems.get(fde)
    if program < 0 or problem is not None:
        return problem or "no CFI"
    return _read_fde(table.programs, table.spans[fde], program, table.abi, quirks)


def _read_fde(
    programs: Programs, span: FdeSpan, program: int, abi: Abi, quirks: Quirk = Quirk.NONE
) -> list[Row] | str:
    """The rows of one FDE of ``program`` (its own advances, DW_CFA_set_loc and PC-dependent
    CFA expressions read at its place)."""
    cie_offset, pc_begin, size, _lo, _hi = span
    cfi_abi = CfiAbi.of(abi)
    result = interpret_program(
        programs.operations([program])[0],
        cfi_abi,
        initial_ops=programs.cie_ops[cie_offset],
        pc_begin=pc_begin,
        big_endian=abi.big_endian,
        quirks=quirks,
    )
    if isinstance(result, str):
        return result
    return _per_pc(result.rows, pc_begin, size, cfi_abi, abi.big_endian)


def interpret_cfi(
    data: bytes,
    section_address: int,
    abi: Abi | int,
    *,
    debug_frame: bool = False,
    address_size: int = 8,
    pointers: PointerContext | None = None,
) -> CfiTable:
    """The CFI table of ``.eh_frame`` (or ``.debug_frame``) bytes at ``section_address``.

    Raises CfiError when the section's records cannot be read; an FDE whose instructions
    cannot be is listed in ``problems`` instead.
    """
    abi = Abi(abi)
    with gc_paused():
        return _interpret_cfi(bytes(data), section_address, abi, debug_frame, address_size,
                              pointers)  # fmt: skip


def _interpret_cfi(
    data: bytes, section_address: int, abi: Abi, debug_frame: bool, address_size: int,
    pointers: PointerContext | None,
) -> CfiTable:  # fmt: skip
    big_endian = abi.big_endian
    cfi_abi = CfiAbi.of(abi)
    cies, spans = scan_fdes(
        data,
        section_address,
        big_endian=big_endian,
        address_size=address_size,
        cfi_format=CfiFormat.DEBUG_FRAME if debug_frame else CfiFormat.EH_FRAME,
        pointers=pointers,
    )
    count = len(spans)
    begin = np.array([span[1] for span in spans], dtype=np.uint64).astype(np.int64)
    size = _sizes(spans)
    problems: dict[int, str] = {}
    wanted = []
    for index, span in enumerate(spans):
        if span[2] > 0:
            flood = oversized_program(span)
            if flood is None:
                wanted.append(index)
            else:
                problems[index] = flood

    def reading(cie_ops: list[Op], ops: list[Op]) -> ShapeRows | str:
        read = interpret_program(ops, cfi_abi, initial_ops=cie_ops, big_endian=big_endian)
        if isinstance(read, str):
            return read
        return read.rows, read.position_dependent

    shapes = Shapes(reading)
    programs = read_programs(data, cies, [spans[i] for i in wanted], big_endian, shapes)
    fdes = np.array(wanted, dtype=np.int64)
    fde_program = np.full(count, -1, dtype=np.int64)
    fde_program[fdes] = programs.fde_program
    row_fde, row_begin, row_rule = _section_rows(programs, shapes, fdes, spans, size, abi,
                                                 problems)  # fmt: skip
    return CfiTable(
        ".debug_frame" if debug_frame else ".eh_frame", abi, data, cies, list(spans), begin,
        size, problems, row_fde, row_begin, row_rule, RuleColumns.of(list(shapes.rules)),
        programs, fde_program,
    )  # fmt: skip


def _section_rows(
    programs: Programs, shapes: Shapes, fdes: IntArray, spans: list[FdeSpan], size: IntArray,
    abi: Abi, problems: dict[int, str],
) -> tuple[IntArray, IntArray, IntArray]:  # fmt: skip
    """The rows of the FDEs ``fdes`` (of ``programs``) in FDE order: (FDE, begin, rule
    number); their problems into ``problems``."""
    results = shapes.results
    placed = np.array([result is False for result in results] + [False],
                      dtype=bool)  # fmt: skip
    shape = programs.shape
    row_program, row_value, row_begin = programs.place(shapes, np.flatnonzero(placed[shape]))
    local = programs.fde_program
    first, end = fde_rows_before(row_program, row_begin, local, size[fdes])
    counts = end - first
    own: dict[int, list[Row]] = {}
    for k in np.flatnonzero(~placed[shape[local]]).tolist():
        fde, program = int(fdes[k]), int(local[k])
        number = int(shape[program])
        found = programs.problem(program)
        if found is None and number >= 0:
            result = results[number]
            found = result if isinstance(result, str) else None
        if found is None:
            rows = _read_fde(programs, spans[fde], program, abi)
            if isinstance(rows, str):
                found = rows
            else:
                own[k] = rows
        if found is not None:
            problems[fde] = found
        counts[k] = len(own.get(k, ()))
    total = int(counts.sum())
    row_fde = np.repeat(fdes, counts)
    before = np.cumsum(counts) - counts
    source = np.repeat(first - before, counts) + np.arange(total, dtype=np.int64)
    if not own:
        return row_fde, row_begin[source], row_value[source]
    mine = np.zeros(len(fdes), dtype=bool)
    mine[list(own)] = True
    placed_rows = ~np.repeat(mine, counts)
    begins = np.zeros(total, dtype=np.int64)
    rules = np.zeros(total, dtype=np.int64)
    begins[placed_rows] = row_begin[source[placed_rows]]
    rules[placed_rows] = row_value[source[placed_rows]]
    number_of = shapes.rules.setdefault
    for k, rows in own.items():
        lo = int(before[k])
        begins[lo : lo + len(rows)] = [min(row.begin, _KEY_LIMIT) for row in rows]
        rules[lo : lo + len(rows)] = [number_of(row.rules, len(shapes.rules)) for row in rows]
    return row_fde, begins, rules


def _sizes(spans: Sequence[FdeSpan]) -> IntArray:
    """The FDEs' sizes (those beyond int64, which a hostile FDE may give, clamped)."""
    sizes = [span[2] for span in spans]
    try:
        return np.array(sizes, dtype=np.int64)
    except OverflowError:
        return np.array([min(value, (1 << 63) - 1) for value in sizes], dtype=np.int64)


def _per_pc(
    rows: list[Row], pc_begin: int, size: int, cfi_abi: CfiAbi, big_endian: bool
) -> list[Row]:
    """``rows`` before ``size``, each PC-dependent CFA evaluated at every PC of its range, as
    runs of PCs with the same rule."""
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


__all__ = [
    "MAX_PER_PC",
    "PROGRAMS",
    "CfiTable",
    "Programs",
    "RuleColumns",
    "ShapeRows",
    "Shapes",
    "fde_rows",
    "fde_rows_before",
    "interpret_cfi",
    "read_programs",
]
