"""A flat, columnar table of every row of a section, for answering many PCs at once.

All FREs are parsed together with numpy: step j reads the j-th FRE of every function that
has one, so the Python-level loop runs as many times as the longest function has rows.
DEFAULT rows get their rules computed column-wise with the same rules as
:mod:`pysframe.rules`; FLEX rows go through :func:`pysframe.rules.decode_rules` itself.
Functions whose rows are not in increasing order, V1 PCMASK functions and overlapping unsorted
tables are answered by the scalar lookup, which defines the semantics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .constants import (
    MAX_WORDS,
    S390X_CFA_OFFSET_ADJUSTMENT,
    S390X_CFA_OFFSET_ALIGNMENT,
    Abi,
    DwarfReg,
    FdeType,
    PcType,
    Version,
)
from .errors import InvalidFieldError, TruncatedError
from .lookup import RULE_KIND_CODES, BatchResult
from .model import FrameRow, RuleKind
from .rules import decode_rules

if TYPE_CHECKING:
    from .section import SFrameSection

I64 = npt.NDArray[np.int64]
_KIND = RULE_KIND_CODES


@dataclass(slots=True)
class _Columns:
    """Per-row rule columns (one element per FRE)."""

    cfa_reg: I64
    cfa_offset: I64
    cfa_deref: npt.NDArray[np.bool_]
    fp_kind: npt.NDArray[np.int8]
    fp_offset: I64
    fp_reg: I64
    ra_kind: npt.NDArray[np.int8]
    ra_offset: I64
    ra_reg: I64
    mangled_ra: npt.NDArray[np.bool_]

    @classmethod
    def empty(cls, count: int) -> _Columns:
        def ints() -> I64:
            return np.zeros(count, dtype=np.int64)

        def kinds() -> npt.NDArray[np.int8]:
            return np.zeros(count, dtype=np.int8)

        return cls(
            ints(),
            ints(),
            np.zeros(count, bool),
            kinds(),
            ints(),
            ints(),
            kinds(),
            ints(),
            ints(),
            np.zeros(count, bool),
        )

    def set_missing(self, at: int) -> None:
        self.cfa_reg[at] = self.fp_reg[at] = self.ra_reg[at] = -1

    def set_row(self, at: int, row: FrameRow) -> None:
        if row.cfa is not None:
            self.cfa_reg[at], self.cfa_offset[at] = row.cfa.reg, row.cfa.offset
            self.cfa_deref[at] = row.cfa.deref
        else:
            self.cfa_reg[at] = -1
        self.fp_kind[at] = _KIND[row.fp.kind]
        self.fp_offset[at] = row.fp.offset
        self.fp_reg[at] = -1 if row.fp.reg is None else row.fp.reg
        self.ra_kind[at] = _KIND[row.ra.kind]
        self.ra_offset[at] = row.ra.offset
        self.ra_reg[at] = -1 if row.ra.reg is None else row.ra.reg
        self.mangled_ra[at] = row.mangled_ra


class RowTable:
    """Every row of a section as columns, plus what is needed to find rows by PC."""

    def __init__(self, section: SFrameSection) -> None:
        self.section = section
        table = section.table
        self.num_fres = table.num_fres
        self.row_base = np.zeros(len(table) + 1, dtype=np.int64)
        np.cumsum(table.num_fres, out=self.row_base[1:])
        total = int(self.row_base[-1])
        self.start_offset = np.zeros(total, dtype=np.int64)
        self.info = np.zeros(total, dtype=np.int64)
        self.count = np.zeros(total, dtype=np.int64)
        self.words = np.zeros((total, MAX_WORDS), dtype=np.int64)
        self.word_size = np.zeros(total, dtype=np.int64)
        # One extra row past the end answers "no row": gathers need no masking.
        self.columns = _Columns.empty(total + 1)
        self.columns.set_missing(total)
        self._parse()
        self._compute_rules()
        self._prepare_search()

    @classmethod
    def build(cls, section: SFrameSection) -> RowTable:
        return cls(section)

    # -- parsing ---------------------------------------------------------------------------
    def _parse(self) -> None:
        section = self.section
        header, table = section.header, section.table
        octets = np.frombuffer(section.data, dtype=np.uint8)
        fre_end = header.size + header.fre_offset + header.fre_len
        addr_size = np.left_shift(1, table.info & 0xF)
        cursor = table.fre_data.copy()
        by_count = np.argsort(-table.num_fres, kind="stable")
        sorted_counts = table.num_fres[by_count]
        longest = int(sorted_counts[0]) if len(sorted_counts) else 0
        big = header.big_endian
        for step in range(longest):
            active = by_count[: int(np.count_nonzero(sorted_counts > step))]
            pos = cursor[active]
            size = addr_size[active]
            if np.any(pos + size + 1 > fre_end):
                bad = int(active[np.argmax(pos + size + 1 > fre_end)])
                raise TruncatedError(
                    f"function {bad}: FRE {step} runs past the FRE sub-section", int(cursor[bad])
                )
            rows = self.row_base[active] + step
            self.start_offset[rows] = _read_unsigned(octets, pos, size, big)
            info = octets[pos + size].astype(np.int64)
            size_code = (info >> 5) & 3
            if np.any(size_code == 3):
                bad_at = int(np.argmax(size_code == 3))
                raise InvalidFieldError(
                    f"function {int(active[bad_at])}: FRE {step} has invalid data-word size code 3",
                    int(pos[bad_at] + size[bad_at]),
                )
            count = (info >> 1) & 0xF
            word_size = np.left_shift(1, size_code)
            words_at = pos + size + 1
            overrun = words_at + count * word_size > fre_end
            if np.any(overrun):
                bad_at = int(np.argmax(overrun))
                raise TruncatedError(
                    f"function {int(active[bad_at])}: data words of FRE {step} run past the FRE "
                    "sub-section",
                    int(pos[bad_at]),
                )
            self.info[rows], self.count[rows], self.word_size[rows] = info, count, word_size
            for k in range(MAX_WORDS):
                present = count > k
                if not np.any(present):
                    break
                at = words_at[present] + k * word_size[present]
                self.words[rows[present], k] = _read_signed(octets, at, word_size[present], big)
            cursor[active] = words_at + count * word_size

    # -- rules -------------------------------------------------------------------------------
    def _compute_rules(self) -> None:
        table = self.section.table
        function_of_row = np.repeat(np.arange(len(table)), table.num_fres)
        flex = (table.info2[function_of_row] & 0x1F) == FdeType.FLEX
        self._default_rules(np.flatnonzero(~flex))
        for row in np.flatnonzero(flex):
            self._scalar_rule(int(row), int(function_of_row[row]))

    def _scalar_rule(self, row: int, function: int) -> None:
        from .decode import row_context

        section = self.section
        count = int(self.count[row])
        if count > MAX_WORDS:
            raise InvalidFieldError(f"function {function}: FLEX FRE with {count} data words")
        words = tuple(int(w) for w in self.words[row, :count])
        info = int(self.info[row])
        ctx = row_context(section.header, int(section.table.info2[function]))
        cfa, fp, ra = decode_rules(ctx, info, words, int(self.word_size[row]))
        self.columns.set_row(row, FrameRow(0, 0, info, words, cfa, fp, ra))

    def _default_rules(self, rows: I64) -> None:
        header = self.section.header
        abi, c = header.abi, self.columns
        info, count, words = self.info[rows], self.count[rows], self.words[rows]
        s390x = abi is Abi.S390X_ENDIAN_BIG
        v2_registers = s390x and header.version is Version.V2
        undefined = count == 0
        c.mangled_ra[rows] = (info & 0x80) != 0
        c.cfa_reg[rows] = np.where(
            undefined, -1, np.where(info & 1, DwarfReg.SP[abi], DwarfReg.FP[abi])
        )
        cfa_offset = words[:, 0]
        if s390x:
            cfa_offset = cfa_offset * S390X_CFA_OFFSET_ALIGNMENT + S390X_CFA_OFFSET_ADJUSTMENT
        c.cfa_offset[rows] = np.where(undefined, 0, cfa_offset)
        index = np.ones(len(rows), dtype=np.int64)
        if header.cfa_fixed_ra_offset:
            ra_kind = np.full(len(rows), _KIND[RuleKind.FIXED], dtype=np.int8)
            ra_offset = np.full(len(rows), header.cfa_fixed_ra_offset, dtype=np.int64)
            ra_reg = np.full(len(rows), -1, dtype=np.int64)
        else:
            has_ra = count > 1
            ra_kind, ra_offset, ra_reg = _word_rules(words[:, 1], has_ra, s390x, v2_registers, True)
            index = np.where(has_ra, 2, 1)
        if header.cfa_fixed_fp_offset:
            fp_kind = np.full(len(rows), _KIND[RuleKind.FIXED], dtype=np.int8)
            fp_offset = np.full(len(rows), header.cfa_fixed_fp_offset, dtype=np.int64)
            fp_reg = np.full(len(rows), -1, dtype=np.int64)
        else:
            fp_word = words[np.arange(len(rows)), np.minimum(index, MAX_WORDS - 1)]
            fp_kind, fp_offset, fp_reg = _word_rules(
                fp_word, count > index, s390x, v2_registers, False
            )
        c.ra_kind[rows] = np.where(undefined, _KIND[RuleKind.UNDEFINED], ra_kind)
        c.ra_offset[rows] = np.where(undefined, 0, ra_offset)
        c.ra_reg[rows] = np.where(undefined, -1, ra_reg)
        c.fp_kind[rows] = np.where(undefined, _KIND[RuleKind.UNTRACKED], fp_kind)
        c.fp_offset[rows] = np.where(undefined, 0, fp_offset)
        c.fp_reg[rows] = np.where(undefined, -1, fp_reg)

    # -- searching ---------------------------------------------------------------------------
    def _prepare_search(self) -> None:
        section = self.section
        table = section.table
        self.sorted = section.header.sorted
        self.function_order: I64 | None = None
        self.scalar_everything = False
        if not self.sorted and len(table):
            order = np.argsort(table.start, kind="stable")
            self.function_order = order.astype(np.int64)
            starts, ends = (
                table.start[order],
                table.start[order] + table.size[order].astype(np.uint64),
            )
            self.scalar_everything = bool(np.any(ends[:-1] > starts[1:]))
            self.order_starts = starts
        # Functions whose rows are not strictly increasing, and V1 PCMASK ones, use the scalar path.
        function_of_row = np.repeat(np.arange(len(table)), table.num_fres)
        within = np.diff(self.start_offset) <= 0
        same_function = function_of_row[1:] == function_of_row[:-1]
        irregular = np.zeros(len(table), dtype=bool)
        irregular[function_of_row[1:][within & same_function]] = True
        if section.version is Version.V1:
            irregular |= ((table.info >> 4) & 1) == PcType.MASK
        self.irregular = irregular
        self.key = function_of_row.astype(np.int64) * (1 << 33) + self.start_offset
        self.function_of_row = function_of_row
        self._build_points()

    def find(self, pcs: npt.NDArray[np.uint64]) -> BatchResult:
        if self.points is None:
            function, row = self._find_sorted(pcs)
        elif len(pcs) >= 1024 and not bool(np.all(pcs[1:] >= pcs[:-1])):
            # Searching PCs in increasing order walks the (large) points array in order and
            # lets each binary search start from the last: sorting first pays for itself.
            order = np.argsort(pcs)
            function_sorted, row_sorted = self._find_by_points(pcs[order])
            function, row = np.empty_like(function_sorted), np.empty_like(row_sorted)
            function[order], row[order] = function_sorted, row_sorted
        else:
            function, row = self._find_by_points(pcs)
        return self._gather(function, row)

    # A section whose functions do not overlap is searched once: the sorted "points" are every
    # row's absolute start, plus each function's start and end marking "no row" (rows win ties).
    # Functions the scalar path must answer (PCMASK, rows out of order) get one marker point.
    _NO_ROW = -1
    _SPECIAL = -2

    def _build_points(self) -> None:
        table = self.section.table
        self.points: npt.NDArray[np.uint64] | None = None
        if len(table) == 0 or self.scalar_everything:
            return
        order = np.argsort(table.start, kind="stable")
        starts = table.start[order]
        ends = starts + table.size[order].astype(np.uint64)
        if np.any(ends[:-1] > starts[1:]) or np.any(ends < starts):
            return  # overlapping (or wrapping) functions: two-step search, scalar semantics
        masked = ((table.info >> 4) & 1) == PcType.MASK
        special = masked | self.irregular
        rows = np.arange(len(self.start_offset))
        fn = self.function_of_row
        plain_rows = rows[~special[fn] & (self.start_offset < table.size[fn])]
        count = len(table)
        addresses = np.concatenate(
            [
                table.start,
                table.start + table.size.astype(np.uint64),
                table.start[fn[plain_rows]] + self.start_offset[plain_rows].astype(np.uint64),
            ]
        )
        row_of_point = np.concatenate(
            [
                np.where(special, self._SPECIAL, self._NO_ROW),
                np.full(count, self._NO_ROW),
                plain_rows,
            ]
        ).astype(np.int64)
        function_of_point = np.concatenate(
            [np.arange(count), np.full(count, -1), fn[plain_rows]]
        ).astype(np.int64)
        rank = np.concatenate(
            [np.ones(count, np.int8), np.zeros(count, np.int8), np.full(len(plain_rows), 2)]
        )
        by_address = np.lexsort((rank, addresses))
        self.points = addresses[by_address]
        self.row_of_point = np.append(row_of_point[by_address], self._NO_ROW)
        self.function_of_point = function_of_point[by_address]
        self.function_of_row_padded = np.append(self.function_of_row, -1)

    def _find_by_points(self, pcs: npt.NDArray[np.uint64]) -> tuple[I64, I64]:
        assert self.points is not None
        # Point -1 (before every function) reads the padding entry at the end: "no row".
        point = np.searchsorted(self.points, pcs, side="right") - 1
        global_row = self.row_of_point[point]
        found = global_row >= 0
        # Gather only at rows (-1, the padding, elsewhere): a marker (-2) would index out of
        # bounds when the section has fewer than two rows.
        function = self.function_of_row_padded[np.where(found, global_row, -1)]
        row = np.where(found, global_row - self.row_base[np.maximum(function, 0)], -1)
        special = np.flatnonzero(global_row == self._SPECIAL)
        if special.size:
            function_special, row_special = self._find_sorted(pcs[special])
            function[special], row[special] = function_special, row_special
        return function, row

    def _find_sorted(self, pcs: npt.NDArray[np.uint64]) -> tuple[I64, I64]:
        """(function index, row index) per PC, -1 where none applies."""
        section = self.section
        table = section.table
        n = len(pcs)
        function = np.full(n, -1, dtype=np.int64)
        if len(table) and not self.scalar_everything:
            if self.function_order is None:
                candidate = np.searchsorted(table.start, pcs, side="right").astype(np.int64) - 1
            else:
                found = np.searchsorted(self.order_starts, pcs, side="right").astype(np.int64) - 1
                candidate = np.where(found >= 0, self.function_order[np.maximum(found, 0)], -1)
            safe = np.maximum(candidate, 0)
            sizes = table.size[safe].astype(np.uint64)
            inside = (candidate >= 0) & (pcs - table.start[safe] < sizes)
            function = np.where(inside, candidate, -1)
        row = np.full(n, -1, dtype=np.int64)
        have = function >= 0
        f = function[have]
        offset = (pcs[have] - table.start[f]).astype(np.int64)
        masked = ((table.info[f] >> 4) & 1) == PcType.MASK
        rep = table.rep_size[f]
        target = np.where(masked, offset % np.maximum(rep, 1), offset)
        usable = ~(masked & (rep == 0))
        row[have] = self._rows_in_functions(f, target, usable)
        # The scalar lookup defines the answer wherever the vectorized shortcut does not apply.
        scalar = np.flatnonzero(have)[self.irregular[f]] if len(f) else np.zeros(0, np.int64)
        if self.scalar_everything:
            scalar = np.arange(n)
        for at in scalar:
            answer = section.lookup(int(pcs[at]))
            function[at] = -1 if answer is None else answer.function.index
            row[at] = -1 if answer is None else answer.row_index
        return function, row

    def _rows_in_functions(
        self, function: I64, target: I64, usable: npt.NDArray[np.bool_]
    ) -> I64:
        """Row index within ``function`` whose [start, end] holds ``target``, else -1."""
        if len(self.key) == 0:
            return np.full(len(function), -1, dtype=np.int64)
        keys = function * (1 << 33) + target
        found = np.searchsorted(self.key, keys, side="right").astype(np.int64) - 1
        belongs = (found >= self.row_base[function]) & usable
        following = np.minimum(np.maximum(found, 0) + 1, len(self.key) - 1)
        has_next = np.maximum(found, 0) + 1 < self.row_base[function + 1]
        table = self.section.table
        next_start = np.where(has_next, self.start_offset[following], table.size[function])
        belongs &= target <= next_start - 1
        return np.where(belongs, found - self.row_base[function], -1)

    def _gather(self, function: I64, row: I64) -> BatchResult:
        ok = row >= 0
        missing = len(self.columns.cfa_reg) - 1
        at = np.where(ok, self.row_base[np.maximum(function, 0)] + row, missing)
        c = self.columns
        return BatchResult(
            function_index=np.where(ok, function, -1),
            row_index=np.where(ok, row, -1),
            cfa_reg=c.cfa_reg[at],
            cfa_offset=c.cfa_offset[at],
            cfa_deref=c.cfa_deref[at],
            fp_kind=c.fp_kind[at],
            fp_offset=c.fp_offset[at],
            fp_reg=c.fp_reg[at],
            ra_kind=c.ra_kind[at],
            ra_offset=c.ra_offset[at],
            ra_reg=c.ra_reg[at],
            mangled_ra=c.mangled_ra[at],
        )


def _word_rules(
    word: I64, present: npt.NDArray[np.bool_], s390x: bool, v2_registers: bool, is_ra: bool
) -> tuple[npt.NDArray[np.int8], I64, I64]:
    """Column-wise :func:`pysframe.rules._default_word_rule` for DEFAULT FP/RA words."""
    kind = np.where(present, _KIND[RuleKind.SAVED], _KIND[RuleKind.UNTRACKED]).astype(np.int8)
    offset = np.where(present, word, 0)
    reg = np.full(len(word), -1, dtype=np.int64)
    if s390x:
        if is_ra:
            padding = present & (word == 0)
            kind[padding] = _KIND[RuleKind.PADDING]
        if v2_registers:
            in_register = present & ((word & 1) == 1) & ~(is_ra & (word == 0))
            kind[in_register] = _KIND[RuleKind.VALUE]
            reg[in_register] = word[in_register] >> 1
            offset[in_register] = 0
    return kind, offset, reg


def _read_unsigned(octets: npt.NDArray[np.uint8], pos: I64, size: I64, big: bool) -> I64:
    """Unsigned integers of 1, 2 or 4 bytes (per element) at ``pos``."""
    value = np.zeros(len(pos), dtype=np.int64)
    last = len(octets) - 1
    for k in range(4):
        present = size > k
        if not np.any(present):
            break
        byte = octets[np.minimum(pos + k, last)].astype(np.int64)
        shift = (size - 1 - k) * 8 if big else np.full(len(pos), 8 * k)
        value |= np.where(present, byte << np.maximum(shift, 0), 0)
    return value


def _read_signed(octets: npt.NDArray[np.uint8], pos: I64, size: I64, big: bool) -> I64:
    value = _read_unsigned(octets, pos, size, big)
    sign = np.left_shift(1, 8 * size - 1)
    return np.where(value & sign, value - 2 * sign, value)
