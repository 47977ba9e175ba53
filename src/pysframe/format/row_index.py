"""Finding the row of one function that applies at a PC by binary search, without numpy.

A function's FREs are stepped through once (:func:`~pysframe.format.walk.step_fres`: only
each FRE's position is read, its length coming from a table indexed by the info byte, V2 spec
2.4), their start addresses read, and the result kept as a :class:`RowIndex`.  A lookup then
searches the start addresses (``bisect``) and decodes the one row it lands on, so that a
function of millions of rows costs one pass to index and a logarithmic search per PC, where
the scan of ``sframe_find_fre`` costs a pass per PC.

The answers are the scan's (:func:`pysframe.format.lookup.find_row_index`, the reference,
tests/test_properties.py holds them equal) whatever the order of the rows:

* rows whose start offsets do not decrease: the last row starting at or before the target
  (offset, or offset modulo rep_size for PCMASK), if the target is before its end;
* rows out of order: the scan answers the first row whose [start, next start) holds the
  target, unless a row before it starts past the offset (the scan stops there).  The first
  row holding each stretch of offsets is found once, painting the rows' ranges in order
  over the sorted start offsets (each stretch painted once); the stop is a search in the
  running maximum of the start offsets;
* V1 PCMASK rows match the low four bits of the address (libsframe 2.40): the first row
  matching each of the 16 values is found once.

The stepper is also the scalar leg of the bulk walk (:func:`pysframe.format.walk.locate_fres`)
for the few functions still walking after the others have ended.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate, chain, islice, pairwise
from typing import TYPE_CHECKING

from .constants import FdeType, PcType, Version
from .layout import (
    FRE_INFO_SIZE,
    fre_address_size,
    fre_address_struct,
    fre_word_count,
    fre_word_size,
    fre_word_size_code,
    fre_words_struct,
)
from .model import FrameRow
from .rules import decode_rules, row_context, rules_cache
from .walk import step_fres, walk_fres

if TYPE_CHECKING:
    from .model import Function, Header
    from .view import Buffer

_U64 = 1 << 64
#: V1 PCMASK rows compare the low four bits of addresses (libsframe 2.40).
_V1_MASK = 0xF
#: Unsigned 32-bit items: FRE start addresses, and FRE positions from a function's first FRE
#: (both less than 2**32: the fields are u32 at most, sfh_fre_len is a u32).
_U32 = "I" if array("I").itemsize == 4 else "L"


class RowIndex:
    """One function's rows, as the scalar lookup searches them: every FRE's start offset and
    position, read once; rows decoded one at a time as lookups land on them.

    Build with :func:`index_rows`."""

    __slots__ = (
        "_data",
        "_decoded",
        "_first_by_nibble",
        "_header",
        "_painted",
        "_running_max",
        "first",
        "function",
        "increasing",
        "positions",
        "starts",
    )

    def __init__(
        self,
        data: Buffer,
        header: Header,
        function: Function,
        first: int,
        positions: array[int],
        starts: array[int],
    ) -> None:
        self._data = data
        self._header = header
        self.function = function
        #: Byte position of the first FRE; ``positions`` count from it.
        self.first = first
        self.positions = positions
        self.starts = starts
        #: The start offsets do not decrease: a binary search finds the scan's row.
        self.increasing = all(a <= b for a, b in pairwise(starts))
        self._decoded: dict[int, FrameRow] = {}
        self._running_max: array[int] | None = None
        self._painted: tuple[array[int], array[int]] | None = None
        self._first_by_nibble: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return len(self.starts)

    # -- searching ------------------------------------------------------------------------------
    def find(self, pc: int) -> int | None:
        """The index of the row that applies at ``pc`` (the scan's answer), or None."""
        function, count = self.function, len(self.starts)
        offset = (pc - function.start) % _U64
        masked = function.pc_type is PcType.MASK
        if masked and self._header.version is Version.V1:
            found = self._nibble_table()[pc & _V1_MASK]
            return found if found < self._stop(offset) else None
        if masked:
            if function.rep_size == 0:
                return None
            target = offset % function.rep_size
        else:
            target = offset
        if not self.increasing:
            found = self._first_holding(target)
            return found if 0 <= found < self._stop(offset) else None
        index = bisect_right(self.starts, target) - 1
        if index < 0 or (index == count - 1 and target >= function.size):
            return None
        return index

    def _stop(self, offset: int) -> int:
        """How many rows the scan looks at for ``offset``: it stops at the first row starting
        past it."""
        if self._running_max is None:
            self._running_max = array(_U32, accumulate(self.starts, max))
        return bisect_right(self._running_max, offset)

    def _first_holding(self, target: int) -> int:
        """The first row whose [start, end) holds ``target``, -1 if none."""
        if self._painted is None:
            self._painted = _paint(self.starts, self.function.size)
        bounds, owner = self._painted
        stretch = bisect_right(bounds, target) - 1
        return owner[stretch] if stretch >= 0 else -1

    def _nibble_table(self) -> tuple[int, ...]:
        """For each value of the low four bits of a PC, the first row whose first and last
        address have low bits around it (the row count if none: matches no PC)."""
        if self._first_by_nibble is None:
            start = self.function.start
            first = [len(self.starts)] * (_V1_MASK + 1)
            for index, (low, end) in enumerate(_ranges(self.starts, self.function.size)):
                low, high = (start + low) & _V1_MASK, (start + end - 1) & _V1_MASK
                for nibble in range(low, high + 1):
                    first[nibble] = min(first[nibble], index)
            self._first_by_nibble = tuple(first)
        return self._first_by_nibble

    # -- rows -----------------------------------------------------------------------------------
    def row(self, index: int) -> FrameRow:
        """Row ``index``, decoded from its FRE (as :func:`~pysframe.format.decode.decode_rows`
        decodes it)."""
        row = self._decoded.get(index)
        if row is None:
            row = self._decoded[index] = self._decode(index)
        return row

    def _decode(self, index: int) -> FrameRow:
        header, function = self._header, self.function
        position = self.first + self.positions[index]
        info_at = position + fre_address_size(function.fre_type)
        info = self._data[info_at]
        words: tuple[int, ...] = fre_words_struct(
            fre_word_size_code(info), fre_word_count(info), header.big_endian
        ).unpack_from(self._data, info_at + FRE_INFO_SIZE)
        ctx = row_context(header, function.info2)
        known = rules_cache(ctx)
        rules = known.get((info, words))
        if rules is None:
            size = fre_word_size(info)
            rules = known[info, words] = decode_rules(ctx, info, words, size, position)
        start = self.starts[index]
        return FrameRow(start, (function.start + start) % _U64, info, words, *rules)


def _ranges(starts: array[int], last_end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each item: from its start to the next one's, the last to ``last_end``
    (rows: the function's size; FREs: the byte after the last)."""
    # As long as ``starts`` (the ends have one more item when it is empty).
    return zip(starts, chain(islice(starts, 1, None), (last_end,)), strict=False)


def _paint(starts: array[int], size: int) -> tuple[array[int], array[int]]:
    """The sorted distinct bounds of the rows' ranges, and for each stretch [bound k, bound
    k + 1) the first row whose [start, end) holds it (-1: none).  Rows are painted in order,
    each stretch once (``following`` jumps over painted stretches)."""
    bounds = array(_U32, sorted({*starts, size}))
    owner = array("q", [-1]) * len(bounds)
    following = array("q", range(len(bounds) + 1))  # the first unpainted stretch at or after k

    def unpainted(k: int) -> int:
        root = k
        while following[root] != root:
            root = following[root]
        while following[k] != root:  # path compression
            following[k], k = root, following[k]
        return root

    for row, (low, high) in enumerate(_ranges(starts, size)):
        if low >= high:
            continue
        last = bisect_right(bounds, high) - 1
        k = unpainted(bisect_right(bounds, low) - 1)
        while k < last:
            owner[k] = row
            following[k] = k + 1
            k = unpainted(k + 1)
    return bounds, owner


def index_rows(data: Buffer, header: Header, function: Function) -> RowIndex:
    """Step through ``function``'s FREs and index them; raise the decoder's error
    (:func:`~pysframe.format.decode.decode_rows`'s, the first in FRE order) when one is
    bad."""
    from .decode import fre_data_position  # decode imports walk, which imports this module

    first = fre_data_position(header, function.fre_offset)
    fre_type = function.fre_type
    positions = array(_U32)
    count, end = function.num_rows, header.fre_end
    following = step_fres(data, fre_type, first, count, end, positions, first)
    if len(positions) < count or following > end:
        _raise_walk_error(data, header, function, first, positions, following)
    if function.fde_type is FdeType.FLEX:
        _check_flex_rows(data, header, function, first, positions, len(positions), following)
    unpack = fre_address_struct(fre_type, header.big_endian).unpack_from
    starts = array(_U32, (unpack(data, first + at)[0] for at in positions))
    return RowIndex(data, header, function, first, positions, starts)


def _raise_walk_error(
    data: Buffer,
    header: Header,
    function: Function,
    first: int,
    positions: array[int],
    following: int,
) -> None:
    """Raise what decoding the rows raises first when :func:`step_fres` did not walk them all
    soundly: a FLEX row's error before the bad FRE, else the checked walk's problem, from
    the last FRE stepped to on (only it, or the one after it, can be the bad one)."""
    number = max(len(positions) - 1, 0)
    at = first + positions[number] if len(positions) else first
    walk = walk_fres(data, header, function.fre_type, at, function.num_rows - number, number)
    if walk.problem is None:  # cannot happen: the stepper saw the same bytes
        raise AssertionError("the FRE walk found no problem where stepping did")
    if function.fde_type is FdeType.FLEX:
        _check_flex_rows(data, header, function, first, positions, walk.problem.number, following)
    raise walk.problem.error(function.index)


def _check_flex_rows(
    data: Buffer,
    header: Header,
    function: Function,
    first: int,
    positions: array[int],
    count: int,
    following: int,
) -> None:
    """Decode each distinct form (info byte and data words) of the first ``count`` FREs of a
    FLEX function, and raise the error of the first FRE whose form fails, as decoding every
    row would (DEFAULT rows decode whatever their words)."""
    at_info = fre_address_size(function.fre_type)
    first_of_form: dict[bytes, int] = {}
    for number, (at, end) in enumerate(islice(_ranges(positions, following - first), count)):
        first_of_form.setdefault(bytes(data[first + at + at_info : first + end]), number)
    ctx = row_context(header, function.info2)
    for body, number in first_of_form.items():  # in order of first use
        info = body[0]
        words = fre_words_struct(fre_word_size_code(info), fre_word_count(info), header.big_endian)
        decode_rules(
            ctx,
            info,
            words.unpack_from(body, FRE_INFO_SIZE),
            fre_word_size(info),
            first + positions[number],
        )
