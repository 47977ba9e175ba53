"""A flat, columnar table of every row of a section, for answering many PCs at once
(:meth:`SFrameSection.find_rows`).

All FREs are read together by :func:`pysframe.format.walk.scan_rows`, which also groups them
into their distinct forms (FDE type, info byte, words): real sections repeat a few hundred.
Each form's rules come from :func:`pysframe.format.rules.decode_rules` itself, once, into
per-form columns; a row's rules are its form's.
Functions whose rows are not in increasing order, V1 PCMASK functions and overlapping unsorted
tables are answered by the scalar lookup, which defines the semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .constants import FdeType, PcType, Version
from .layout import fde_pc_type, fre_word_size
from .lookup import RULE_KIND_CODES, BatchResult
from .model import FrameRow, LookupResult
from .rules import decode_rules, row_context
from .walk import RowForm, scan_rows

if TYPE_CHECKING:
    from .view import SectionView

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
    """Every row of a section as columns, plus what is needed to find rows by PC.

    ``lookup`` is the section's scalar lookup, which answers the PCs the columns cannot."""

    def __init__(
        self, section: SectionView, lookup: Callable[[int], LookupResult | None]
    ) -> None:
        self.section = section
        self.lookup = lookup
        scan = scan_rows(section)
        self.row_base = scan.row_base
        self.start_offset = scan.start_offset
        # One extra form past the end, and one extra row naming it, answer "no row".
        # Narrow index columns: the batch lookup reads them at random, and smaller ones stay
        # in the processor's caches longer.
        self.form_of_row = np.append(scan.form, len(scan.forms)).astype(
            _index_dtype(len(scan.forms))
        )
        self.columns = _form_columns(section, scan.forms)
        self._prepare_search()

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
        function_of_row = np.repeat(np.arange(len(table)), table.num_rows)
        within = np.diff(self.start_offset) <= 0
        same_function = function_of_row[1:] == function_of_row[:-1]
        irregular = np.zeros(len(table), dtype=bool)
        irregular[function_of_row[1:][within & same_function]] = True
        if section.header.version is Version.V1:
            irregular |= fde_pc_type(table.info) == PcType.MASK
        self.irregular = irregular
        # Each row's index within its function, and -1 past the end ("no row").
        within_function = np.arange(len(function_of_row)) - self.row_base[function_of_row]
        largest_count = int(table.num_rows.max()) if len(table) else 0
        self.row_in_function_padded = np.append(within_function, -1).astype(
            _index_dtype(largest_count)
        )
        self.function_of_row_padded = np.append(function_of_row, -1).astype(
            _index_dtype(len(table))
        )
        self._build_points(function_of_row)

    @property
    def function_of_row(self) -> I64:
        """Each row's function index (a new array: the table keeps only the narrow column)."""
        return self.function_of_row_padded[:-1].astype(np.int64)

    @cached_property
    def key(self) -> I64:
        """(function, start offset) of each row as one increasing integer, for the two-step
        search; built the first time a PC needs it (PCMASK functions, rows out of order,
        overlapping functions), not kept otherwise."""
        key: I64 = self.function_of_row * (1 << 33) + self.start_offset
        return key

    def find(self, pcs: npt.NDArray[np.uint64]) -> BatchResult:
        if self.points is None:
            function, row = self._find_sorted(pcs)
            return self._gather(self._flat_rows(function, row))
        if len(pcs) >= 1024 and not bool(np.all(pcs[1:] >= pcs[:-1])):
            # Searching PCs in increasing order walks the (large) points array in order and
            # lets each binary search start from the last: sorting first pays for itself.
            order = self._order(pcs)
            flat = np.empty(len(pcs), dtype=np.int64)
            np.put(flat, order, self._find_by_points(pcs.take(order)))
        else:
            flat = self._find_by_points(pcs)
        return self._gather(flat)

    def _order(self, pcs: npt.NDArray[np.uint64]) -> I64:
        """A permutation that puts ``pcs`` in increasing order, at least where they fall
        between the first and the last point (below and above, any order does).

        Sorting values is several times faster than ``argsort``: when the PC's place in that
        range and its index fit in 64 bits together, the sorted values are those pairs."""
        assert self.points is not None
        first, last = self.points[0], self.points[-1]
        span = int(last - first) + 1
        index_bits = max(len(pcs) - 1, 1).bit_length()
        if span.bit_length() + index_bits > 64:
            by_value: I64 = np.argsort(pcs).astype(np.int64)
            return by_value
        place = np.minimum(pcs - first, np.uint64(span))
        place[pcs < first] = 0
        keys = (place << np.uint64(index_bits)) | np.arange(len(pcs), dtype=np.uint64)
        keys.sort()
        order: I64 = (keys & np.uint64((1 << index_bits) - 1)).astype(np.int64)
        return order

    # A section whose functions do not overlap is searched once: the sorted "points" are every
    # row's absolute start, plus each function's start and end marking "no row" (rows win ties).
    # Functions the scalar path must answer (PCMASK, rows out of order) get one marker point.
    _NO_ROW = -1
    _SPECIAL = -2

    def _build_points(self, function_of_row: I64) -> None:
        table = self.section.table
        self.points: npt.NDArray[np.uint64] | None = None
        if len(table) == 0 or self.scalar_everything:
            return
        order = np.argsort(table.start, kind="stable")
        starts = table.start[order]
        ends = starts + table.size[order].astype(np.uint64)
        if np.any(ends[:-1] > starts[1:]) or np.any(ends < starts):
            return  # overlapping (or wrapping) functions: two-step search, scalar semantics
        masked = fde_pc_type(table.info) == PcType.MASK
        special = masked | self.irregular
        rows = np.arange(len(self.start_offset))
        fn = function_of_row
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
        rank = np.concatenate(
            [np.ones(count, np.int8), np.zeros(count, np.int8), np.full(len(plain_rows), 2)]
        )
        by_address = np.lexsort((rank, addresses))
        self.points = addresses[by_address]
        # Narrow, as the other index columns: -2 .. the number of rows.
        self.row_of_point = np.append(row_of_point[by_address], self._NO_ROW).astype(
            _index_dtype(len(self.start_offset))
        )

    def _find_by_points(self, pcs: npt.NDArray[np.uint64]) -> I64:
        """Per PC the index in the whole table of the row that applies, -1 where none."""
        assert self.points is not None
        # Point -1 (before every function) reads the padding entry at the end: "no row".
        point = np.searchsorted(self.points, pcs, side="right") - 1
        # Widened once here: take() converts narrower index arrays on every call.
        flat: I64 = self.row_of_point.take(point).astype(np.int64)
        special = np.flatnonzero(flat == self._SPECIAL)
        if special.size:
            function_special, row_special = self._find_sorted(pcs[special])
            flat[special] = self._flat_rows(function_special, row_special)
        return flat

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
        masked = fde_pc_type(table.info[f]) == PcType.MASK
        rep = table.rep_size[f]
        target = np.where(masked, offset % np.maximum(rep, 1), offset)
        usable = ~(masked & (rep == 0))
        row[have] = self._rows_in_functions(f, target, usable)
        # The scalar lookup defines the answer wherever the vectorized shortcut does not apply.
        scalar = np.flatnonzero(have)[self.irregular[f]] if len(f) else np.zeros(0, np.int64)
        if self.scalar_everything:
            scalar = np.arange(n)
        for at in scalar:
            answer = self.lookup(int(pcs[at]))
            function[at] = -1 if answer is None else answer.function.index
            row[at] = -1 if answer is None else answer.row_index
        return function, row

    def _rows_in_functions(self, function: I64, target: I64, usable: npt.NDArray[np.bool_]) -> I64:
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

    def _flat_rows(self, function: I64, row: I64) -> I64:
        """Each row's index in the whole table, -1 where there is none."""
        return np.where(row >= 0, self.row_base[np.maximum(function, 0)] + row, -1)

    def _gather(self, flat: I64) -> BatchResult:
        """The answers for rows ``flat`` (indices in the whole table, -1 for none)."""
        # Index -1 reads the padding at the end of each column: function -1, row -1, the "no
        # row" form.  take() is several times faster than fancy indexing on these arrays.
        function = self.function_of_row_padded.take(flat).astype(np.int64)
        row = self.row_in_function_padded.take(flat).astype(np.int64)
        at = self.form_of_row.take(flat).astype(np.intp)
        c = self.columns
        return BatchResult(
            function_index=function,
            row_index=row,
            cfa_reg=c.cfa_reg.take(at),
            cfa_offset=c.cfa_offset.take(at),
            cfa_deref=c.cfa_deref.take(at),
            fp_kind=c.fp_kind.take(at),
            fp_offset=c.fp_offset.take(at),
            fp_reg=c.fp_reg.take(at),
            ra_kind=c.ra_kind.take(at),
            ra_offset=c.ra_offset.take(at),
            ra_reg=c.ra_reg.take(at),
            mangled_ra=c.mangled_ra.take(at),
        )


def _index_dtype(largest: int) -> np.dtype[np.signedinteger[Any]]:
    """The narrowest signed integer type holding -1 .. ``largest``."""
    if largest < 1 << 15:
        return np.dtype(np.int16)
    return np.dtype(np.int32) if largest < 1 << 31 else np.dtype(np.int64)


def _form_columns(section: SectionView, forms: tuple[RowForm, ...]) -> _Columns:
    """Rule columns of each distinct form, plus a last entry meaning "no row"."""
    columns = _Columns.empty(len(forms) + 1)
    for at, form in enumerate(forms):
        ctx = row_context(section.header, int(FdeType.FLEX) if form.flex else 0)
        cfa, fp, ra = decode_rules(ctx, form.info, form.words, fre_word_size(form.info))
        columns.set_row(at, FrameRow(0, 0, form.info, form.words, cfa, fp, ra))
    columns.set_missing(len(forms))
    return columns
