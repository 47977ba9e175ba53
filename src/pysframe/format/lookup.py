"""Finding the function and the row that apply at a PC, with libsframe's semantics.

* FDE: the function with start <= pc < start + size; binary search when the section is
  SORTED, a first-match scan when it is not (docs/format.md, "Lookups").
* FRE (PCINC): the row whose [start, next start) holds pc - function start.
* FRE (PCMASK, V2/V3): the same test on (pc - function start) % rep_size.
* FRE (PCMASK, V1): the low four bits of pc against those of the row's first and last
  address (libsframe 2.40; V1 spec 2.3.2 states it as ``PC & FRE_START_ADDR_AS_MASK``).

:func:`find_row_index` is the scan itself, the reference: :func:`lookup_in`, the lookup of
both ``SFrameSection`` and :mod:`pysframe.format.single`, gives its answers by binary search
(:mod:`pysframe.format.row_index`); neither needs numpy.  ``find_rows`` (``find_fres``)
answers many PCs at once from a flat, columnar table of all rows, built on first use with
numpy; the scalar path is the reference it is tested against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .constants import PcType, Version
from .model import FrameRow, Function, LookupResult, RuleKind

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .row_index import RowIndex
    from .view import FunctionTable, U64Array

_U64 = 1 << 64


def last_function_starting_at_or_before(starts: U64Array, pc: int) -> int | None:
    """Index of the last function starting at or before ``pc`` in a sorted section (binary
    search), or None; whether it contains ``pc`` is for its size to tell."""
    import numpy as np

    if not 0 <= pc < _U64:
        return None
    index = int(np.searchsorted(starts, np.uint64(pc), side="right")) - 1
    return index if index >= 0 else None


def first_function_containing(table: FunctionTable, pc: int) -> int | None:
    """Index of the first function with start <= pc < start + size, in stored order."""
    import numpy as np

    if not 0 <= pc < _U64 or len(table) == 0:
        return None
    key = np.uint64(pc)
    hits = np.flatnonzero((table.start <= key) & (key - table.start < table.size.astype(np.uint64)))
    return int(hits[0]) if hits.size else None


def covered_bytes(
    starts: U64Array,
    sizes: U64Array,
    within: Sequence[tuple[int, int]] | None = None,
    *,
    scalar: bool = False,
) -> int:
    """Bytes the functions [start, start + size) cover together, each byte once (functions
    may overlap); with ``within`` ([low, high) pairs that do not overlap, read inside
    [0, 2**64 - 1]), only the bytes inside them.  A function ending past 2**64 counts its
    bytes up there too, as Python integers do.  ``scalar``: the reference path, in Python
    integers, the numpy one is tested against (and taken when an end is past 2**64)."""
    import numpy as np

    starts = np.asarray(starts, dtype=np.uint64)
    sizes = np.asarray(sizes, dtype=np.uint64)
    if len(starts) == 0:
        return 0
    if scalar or bool(np.any(starts > np.uint64(_U64 - 1) - sizes)):
        ends = [b + n for b, n in zip(starts.tolist(), sizes.tolist(), strict=True)]
        return _covered_exact(_merged(sorted(zip(starts.tolist(), ends, strict=True))), within)
    order = np.argsort(starts, kind="stable")
    low, high = starts[order], np.maximum.accumulate(starts[order] + sizes[order])
    # A merged range begins where a function starts past every earlier function's end.
    begins = np.ones(len(low), dtype=bool)
    begins[1:] = low[1:] > high[:-1]
    first = np.flatnonzero(begins)
    merged_low, merged_high = low[first], high[np.append(first[1:], len(low)) - 1]
    if within is None:
        return int((merged_high - merged_low).sum(dtype=np.uint64))
    total = 0
    for within_low, within_high in within:
        begin = np.maximum(merged_low, np.uint64(min(max(within_low, 0), _U64 - 1)))
        end = np.minimum(merged_high, np.uint64(min(max(within_high, 0), _U64 - 1)))
        total += int(np.where(end > begin, end - begin, np.uint64(0)).sum(dtype=np.uint64))
    return total


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The sorted [start, end) ``ranges`` merged where they overlap or touch."""
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _covered_exact(merged: list[tuple[int, int]], within: Sequence[tuple[int, int]] | None) -> int:
    """Bytes of the merged ranges, or of them inside ``within`` (read, as the numpy path
    does, inside [0, 2**64 - 1])."""
    if within is None:
        return sum(end - start for start, end in merged)
    bounds = [(min(max(low, 0), _U64 - 1), min(max(high, 0), _U64 - 1)) for low, high in within]
    return sum(
        max(0, min(end, high) - max(start, low)) for start, end in merged for low, high in bounds
    )


def find_row_index(
    function: Function, rows: Sequence[FrameRow], version: Version, pc: int
) -> int | None:
    """Index of the row of ``function`` that applies at ``pc``, scanning as libsframe does.

    Row i covers offsets [start_i, end_i] with end_i = start_{i+1} - 1, or size - 1 for the
    last row.  The scan gives up at a row starting past pc - function start (sframe_find_fre).
    V2/V3 PCMASK rows match the offset modulo rep_size; V1 PCMASK rows compare the low four
    bits of absolute addresses (libsframe 2.40's fixed 0xf mask for 16-byte PLT entries).
    """
    offset = (pc - function.start) % _U64
    masked = function.pc_type is PcType.MASK
    if masked and version is not Version.V1:
        if function.rep_size == 0:
            return None
        target = offset % function.rep_size
    else:
        target = offset
    last = len(rows) - 1
    for index, row in enumerate(rows):
        if row.start_offset > offset:
            return None
        end = (rows[index + 1].start_offset if index < last else function.size) - 1
        if masked and version is Version.V1:
            low, high = function.start + row.start_offset, function.start + end
            if (low & _V1_MASK) <= (pc & _V1_MASK) <= (high & _V1_MASK):
                return index
        elif row.start_offset <= target <= end:
            return index
    return None


_V1_MASK = 0xF


def lookup_in(
    function: Function | None, row_index: Callable[[Function], RowIndex], pc: int
) -> LookupResult | None:
    """``function`` (the one holding ``pc``, or None) and its row that applies at ``pc``, or
    None: what a section's ``lookup`` answers once it has found the function.  The row is
    found by binary search in the function's :class:`~pysframe.format.row_index.RowIndex`
    (``row_index(function)``, which the section keeps), with :func:`find_row_index`'s answer."""
    if function is None:
        return None
    index = row_index(function)
    found = index.find(pc)
    if found is None:
        return None
    return LookupResult(function, index.row(found), found)


#: Codes of RuleKind in the batch result's ``*_kind`` arrays.
RULE_KIND_CODES: dict[RuleKind, int] = {kind: code for code, kind in enumerate(RuleKind)}
RULE_KINDS: tuple[RuleKind, ...] = tuple(RuleKind)


#: The columns of a BatchResult that hold -1 where no row applies (the others hold 0).
_MINUS_ONE_WHEN_MISSING = frozenset({"function_index", "row_index", "cfa_reg", "fp_reg", "ra_reg"})


@dataclass(frozen=True, slots=True)
class BatchResult:
    """Columnar answers of ``find_rows``: element i answers pcs[i].

    ``function_index`` and ``row_index`` are -1 where no row applies; the rule columns are then
    zero.  ``*_kind`` hold codes of :class:`RuleKind` (see ``RULE_KINDS``); ``*_reg`` is -1 for
    "relative to the CFA".
    """

    function_index: npt.NDArray[np.int64]
    row_index: npt.NDArray[np.int64]
    cfa_reg: npt.NDArray[np.int64]
    cfa_offset: npt.NDArray[np.int64]
    cfa_deref: npt.NDArray[np.bool_]
    fp_kind: npt.NDArray[np.int8]
    fp_offset: npt.NDArray[np.int64]
    fp_reg: npt.NDArray[np.int64]
    ra_kind: npt.NDArray[np.int8]
    ra_offset: npt.NDArray[np.int64]
    ra_reg: npt.NDArray[np.int64]
    mangled_ra: npt.NDArray[np.bool_]

    @property
    def found(self) -> npt.NDArray[np.bool_]:
        return self.row_index >= 0

    def not_found_at(self, positions: npt.NDArray[np.bool_]) -> BatchResult:
        """A copy where the answers at ``positions`` (a mask) say "no row applies": -1 in
        the index and register columns, zero in the others."""
        columns = {}
        for name in self.__dataclass_fields__:
            column = getattr(self, name).copy()
            column[positions] = -1 if name in _MINUS_ONE_WHEN_MISSING else 0
            columns[name] = column
        return BatchResult(**columns)

    def __len__(self) -> int:
        return len(self.row_index)
