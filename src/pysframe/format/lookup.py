"""Finding the function and the row that apply at a PC, with libsframe's semantics: the one
lookup of a section, for one PC or for many.

* FDE: the function with start <= pc < start + size; binary search when the section is
  SORTED, the first match in stored order when it is not (docs/format.md, "Lookups").
* FRE (PCINC): the row whose [start, next start) holds pc - function start; the scan of
  ``sframe_find_fre`` gives up at a row starting past that offset.
* FRE (PCMASK, V2/V3): the same test on (pc - function start) % rep_size.
* FRE (PCMASK, V1): the low four bits of pc against those of the row's first and last
  address (libsframe 2.40; V1 spec 2.3.2 states it as ``PC & FRE_START_ADDR_AS_MASK``).

:class:`SectionLookup` answers them.  One PC (:meth:`~SectionLookup.find_row`), without numpy:
the FDE start fields are read with struct as a binary search passes them, then the function's
FREs are stepped through once (:func:`~pysframe.format.walk.step_fres`: only each FRE's
position is read) and kept as a :class:`RowSearch` over their start offsets, and the one row a
search lands on is decoded.  A function of millions of rows costs one pass to index and a
logarithmic search per PC, where the scan costs a pass per PC.  Many PCs
(:meth:`~SectionLookup.find_rows`), with numpy: every row of the section is read into a
columnar table on first use (:func:`~pysframe.format.walk.scan_rows`, rules decoded once per
distinct form), and the PCs are searched in one sorted array of row and function bounds.  The
PCs that table cannot answer (functions whose rows are out of order, PCMASK functions,
overlapping functions) are answered one by one, by :meth:`~SectionLookup.find_row`.

:func:`covered_bytes` counts the bytes the functions of a table cover.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate, chain, islice, pairwise
from typing import TYPE_CHECKING, Any

from ..bounded import BoundedCache
from ..dataclass import dataclass
from .constants import FdeType, PcType, Version
from .decode import (
    decode_rows,
    fde_position,
    fre_data_position,
    parse_header,
    read_fde_table,
    read_function,
    read_starts,
)
from .layout import (
    FDE_SIZE,
    FRE_INFO_SIZE,
    fde_start_struct,
    fde_struct,
    fre_address_size,
    fre_address_struct,
    fre_mangled_ra,
    fre_word_count,
    fre_word_size,
    fre_word_size_code,
    fre_words_struct,
)
from .model import CfaRule, FrameRow, Function, Header, LookupResult, RegRule, RuleKind
from .rules import Rules, decode_rules, row_context
from .walk import read_rows, step_fres

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .view import Buffer, FunctionTable, IntArray, U64Array
    from .walk import RowForm

_U64 = 1 << 64
#: V1 PCMASK rows compare the low four bits of addresses (libsframe 2.40).
_V1_MASK = 0xF
#: Unsigned 32-bit items: FRE start addresses, and FRE positions from a function's first FRE
#: (both less than 2**32: the fields are u32 at most, sfh_fre_len is a u32).
_U32 = "I" if array("I").itemsize == 4 else "L"


# -- one function's rows ------------------------------------------------------------------------


class RowSearch:
    """The rows of one function, searched by their start offsets: which row applies at a PC
    (the scan's answer, whatever the order of the rows).

    * rows whose start offsets do not decrease: the last row starting at or before the target
      (the offset, or the offset modulo rep_size for PCMASK), if the target is before its end;
    * rows out of order: the first row whose [start, next start) holds the target, unless a
      row before it starts past the offset (the scan stops there).  The first row holding each
      stretch of offsets is found once, painting the rows' ranges in order over the sorted
      start offsets (each stretch painted once); the stop is a search in the running maximum
      of the start offsets;
    * V1 PCMASK rows match the low four bits of the address: the first row matching each of
      the 16 values is found once.

    >>> from pysframe import PcType
    >>> from pysframe.format.model import Function
    >>> function = Function(0, 0x1000, 0x20, 0, 0, 3, 0, 0, 0)
    >>> search = RowSearch(function, Version.V2, [0, 4, 9])
    >>> [search.find(0x1000 + offset) for offset in (0, 3, 4, 0x1F, 0x20)]
    [0, 0, 1, 2, None]
    """

    __slots__ = (
        "_first_by_nibble",
        "_painted",
        "_running_max",
        "function",
        "increasing",
        "starts",
        "version",
    )

    def __init__(self, function: Function, version: Version, starts: Sequence[int]) -> None:
        self.function = function
        self.version = version
        self.starts = starts if isinstance(starts, array) else array(_U32, starts)
        #: The start offsets do not decrease: a binary search finds the scan's row.
        self.increasing = all(a <= b for a, b in pairwise(self.starts))
        self._running_max: array[int] | None = None
        self._painted: tuple[array[int], array[int]] | None = None
        self._first_by_nibble: tuple[int, ...] | None = None

    def find(self, pc: int) -> int | None:
        """The index of the row that applies at ``pc`` (the scan's answer), or None."""
        function, count = self.function, len(self.starts)
        offset = (pc - function.start) % _U64
        masked = function.pc_type is PcType.MASK
        if masked and self.version is Version.V1:
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


def _ranges(starts: Sequence[int], last_end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each item: from its start to the next one's, the last to ``last_end``
    (rows: the function's size; FREs: the byte after the last)."""
    # As long as ``starts`` (the ends have one more item when it is empty).
    return zip(starts, chain(islice(starts, 1, None), (last_end,)), strict=False)


def _paint(starts: Sequence[int], size: int) -> tuple[array[int], array[int]]:
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


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _IndexedRows:
    """A function's FREs stepped through once: where each is (from ``first``) and the search
    over their start offsets."""

    first: int
    positions: array[int]
    search: RowSearch


def _index_rows(
    data: Buffer,
    header: Header,
    function: Function,
    known: BoundedCache[tuple[int, int, tuple[int, ...]], Rules],
) -> _IndexedRows:
    """Step through ``function``'s FREs and index them; raise the decoder's error
    (:func:`~pysframe.format.decode.decode_rows`'s, the first in FRE order) when one is
    bad.  ``known``: the rules decoded before, by (info2, info, words)."""
    first = fre_data_position(header, function.fre_offset)
    fre_type = function.fre_type
    positions = array(_U32)
    count, end = function.num_rows, header.fre_end
    following = step_fres(data, fre_type, first, count, end, positions, first)
    sound = len(positions) == count and following <= end
    if not sound or function.fde_type is FdeType.FLEX:
        # Decoding the rows raises the decoder's first error: where stepping was not sound,
        # or a FLEX row whose words do not decode (DEFAULT rows decode whatever their words).
        read_rows(data, header, function.index, fre_type, first, count, function.info2, known)
    if not sound:
        raise AssertionError("decoding found no problem where stepping did")
    unpack = fre_address_struct(fre_type, header.big_endian).unpack_from
    starts = array(_U32, (unpack(data, first + at)[0] for at in positions))
    return _IndexedRows(first, positions, RowSearch(function, header.version, starts))


# -- a section's lookups ------------------------------------------------------------------------


class SectionLookup:
    """The lookups of an SFrame section at ``section_address`` (bytes not copied): one PC, or
    many at once (see the module's docstring).  It keeps what it decoded (functions, rows,
    each function's row search, rules by form) in bounded caches of its own.

    Opening parses the header alone.  The checks of the whole FDE table (a sorted section's
    functions in order, :func:`~pysframe.format.decode.read_fde_table`'s) are made by
    :attr:`starts` and :attr:`table` when they are first read, which
    :class:`~pysframe.format.section.SFrameSection` does when it opens; a caller that looks
    up a few PCs of a section that passed them before need not (:mod:`pysframe.sources.trust`).
    Whatever the section holds, every read stays inside its bytes.

    >>> from pysframe import Abi, CfaRule, SFrameBuilder
    >>> builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE)
    >>> _ = builder.add_function(0x1000, 0x20).add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16))
    >>> lookup = SectionLookup(builder.to_bytes())
    >>> lookup.find_row(0x1004).row.cfa
    CfaRule(reg=7, offset=16, deref=False)
    >>> lookup.find_row(0x2000) is None
    True
    >>> lookup.find_rows([0x1000, 0x1004, 0x2000]).row_index.tolist()
    [0, 1, -1]
    """

    __slots__ = (
        "_asked",
        "_batch",
        "_functions",
        "_indexed",
        "_rows",
        "_rules",
        "_start_field",
        "_starts",
        "_table",
        "data",
        "header",
        "section_address",
    )

    #: Functions read, their rows decoded and indexed, kept per section.
    CACHE_SIZE = 1024
    #: Rules decoded, by FDE type, info byte and data words (real sections repeat a few
    #: hundred forms).
    RULES_CACHE_SIZE = 4096

    def __init__(
        self, data: Buffer, section_address: int = 0, *, header: Header | None = None
    ) -> None:
        self.data = data
        self.section_address = section_address
        self.header: Header = parse_header(data) if header is None else header
        self._start_field = fde_start_struct(self.header.version, self.header.big_endian)
        self._starts: U64Array | None = None
        self._table: FunctionTable | None = None
        self._functions: BoundedCache[int, Function] = BoundedCache(self.CACHE_SIZE)
        self._rows: BoundedCache[tuple[int, ...], tuple[FrameRow, ...]] = BoundedCache(
            self.CACHE_SIZE
        )
        self._indexed: BoundedCache[tuple[int, ...], _IndexedRows] = BoundedCache(
            self.CACHE_SIZE
        )
        self._rules: BoundedCache[tuple[int, int, tuple[int, ...]], Rules] = BoundedCache(
            self.RULES_CACHE_SIZE
        )
        self._batch: _RowTable | None = None
        #: PCs find_rows_of_checked answered one by one, before it built the table.
        self._asked = 0

    def __len__(self) -> int:
        return self.header.num_fdes

    # -- the FDE table ---------------------------------------------------------------------------
    @property
    def starts(self) -> U64Array:
        """Every function's absolute start address, in stored order (numpy, read-only), read
        on first use and checked to be in order when the section is flagged sorted."""
        if self._starts is None:
            self._starts = read_starts(self.data, self.header, self.section_address)
        return self._starts

    @property
    def table(self) -> FunctionTable:
        """The FDE table as numpy columns, read and checked on first use."""
        if self._table is None:
            self._table = read_fde_table(self.data, self.header, self.starts)
        return self._table

    def start(self, index: int) -> int:
        """Function ``index``'s absolute start address: relative to the start field's own
        address (FDE_FUNC_START_PCREL) or the section's, modulo 2**64, as
        :func:`~pysframe.format.decode.read_starts` computes it."""
        at = fde_position(self.header, index)
        base = at if self.header.pcrel else 0
        stored: int = self._start_field.unpack_from(self.data, at)[0]
        return (stored + base + self.section_address) % _U64

    def function(self, index: int) -> Function:
        """Function ``index`` (0 <= index < len), read and checked on first use."""
        return self._functions.get(index, self._read_function, index)

    def _read_function(self, index: int) -> Function:
        return read_function(self.data, self.header, index, self.start(index), self.rows)

    def rows(self, function: Function) -> tuple[FrameRow, ...]:
        """``function``'s rows, decoded on first use."""
        return self._rows.get(
            _rows_key(function), decode_rows, self.data, self.header, function, self._rules
        )

    # -- one PC ----------------------------------------------------------------------------------
    def find_function(self, pc: int) -> Function | None:
        """The function whose [start, start + size) holds ``pc``, or None."""
        if not 0 <= pc < _U64 or not len(self):
            return None
        if not self.header.sorted:
            return self._first_containing(pc)
        low, high = 0, len(self)
        while low < high:  # the last function starting at or before pc
            middle = (low + high) // 2
            if self.start(middle) <= pc:
                low = middle + 1
            else:
                high = middle
        return self._holding(low - 1, pc)

    def _holding(self, index: int, pc: int) -> Function | None:
        """Function ``index``, the last starting at or before ``pc`` in a sorted section (-1:
        none), when its [start, start + size) holds ``pc``; else None."""
        if index < 0:
            return None
        function = self.function(index)
        return function if pc - function.start < function.size else None

    def _first_containing(self, pc: int) -> Function | None:
        """The first function in stored order holding ``pc`` (an unsorted section)."""
        header = self.header
        fde = fde_struct(header.version, header.big_endian)
        first = fde_position(header, 0)
        fdes = memoryview(self.data)[first : first + len(self) * FDE_SIZE[header.version]]
        pcrel, address = header.pcrel, self.section_address
        # Every version's FDE begins with the function's start, then its size.
        for index, (stored, size, *_) in enumerate(fde.iter_unpack(fdes)):
            start = (stored + (first + index * fde.size if pcrel else 0) + address) % _U64
            if start <= pc and pc - start < size:
                return self.function(index)
        return None

    def find_row(self, pc: int) -> LookupResult | None:
        """The function and its row that apply at ``pc`` (with the row's index), or None."""
        function = self.find_function(pc)
        return None if function is None else self._row_at(function, pc)

    def _row_at(self, function: Function, pc: int) -> LookupResult | None:
        """The row of ``function`` (which holds ``pc``) that applies at ``pc``, or None."""
        indexed = self._indexed.get(
            _rows_key(function), _index_rows, self.data, self.header, function, self._rules
        )
        found = indexed.search.find(pc)
        if found is None:
            return None
        return LookupResult(function, self._row(function, indexed, found), found)

    def _row(self, function: Function, indexed: _IndexedRows, index: int) -> FrameRow:
        """Row ``index`` of ``function``, decoded from its FRE as
        :func:`~pysframe.format.decode.decode_rows` decodes it."""
        header = self.header
        position = indexed.first + indexed.positions[index]
        info_at = position + fre_address_size(function.fre_type)
        info = self.data[info_at]
        words: tuple[int, ...] = fre_words_struct(
            fre_word_size_code(info), fre_word_count(info), header.big_endian
        ).unpack_from(self.data, info_at + FRE_INFO_SIZE)
        rules = self._rules.get(
            (function.info2, info, words),
            decode_rules,
            row_context(header, function.info2),
            info,
            words,
            fre_word_size(info),
            position,
        )
        start = indexed.search.starts[index]
        return FrameRow(start, (function.start + start) % _U64, info, words, *rules)

    # -- many PCs --------------------------------------------------------------------------------
    def find_rows(self, pcs: Sequence[int] | npt.ArrayLike) -> BatchResult:
        """What :meth:`find_row` answers at each of ``pcs`` (element i of each column answers
        ``pcs[i]``), as columns; see :class:`BatchResult`."""
        addresses, outside = _addresses(pcs)
        if self._batch is None:
            self._batch = _RowTable(self)
        result = self._batch.find(addresses)
        if outside is not None and outside.any():
            result = result.not_found_at(outside)
        return result

    def find_rows_of_checked(self, pcs: Sequence[int] | npt.ArrayLike) -> BatchResult:
        """:meth:`find_rows` for a section whose rows are known to decode (checked whole, or
        generated): while few PCs have been asked, each is answered by :meth:`find_row`,
        which decodes the rows of its function alone, instead of the table of every row of
        the section being built (libc's 25,000 rows: some 10 ms, for the few hundred PCs of
        a short recording); the table once the PCs asked come to :data:`ONE_BY_ONE_PCS`
        plus a :data:`ONE_BY_ONE_SHARE` of the section's rows (a PC costs some 40 us one by
        one, a row some 0.3 us in the table: at most about twice the least of the two).
        The answers are :meth:`find_rows`'s: its table gives :meth:`find_row`'s answers (it
        hands it the PCs it does not answer itself); a malformed row the PCs do not reach
        raises nothing here."""
        addresses, outside = _addresses(pcs)
        if self._batch is not None or (
            self._asked + addresses.size
            > ONE_BY_ONE_PCS + self.header.num_fres // ONE_BY_ONE_SHARE
        ):
            return self.find_rows(pcs)
        import numpy as np

        self._asked += addresses.size
        flat = addresses.ravel()
        count = len(flat)
        minus_one = np.full(count, -1, dtype=np.int64)
        columns: dict[str, Any] = {
            name: minus_one.copy() if name in _MINUS_ONE_WHEN_MISSING
            else np.zeros(count, dtype=_RULE_DTYPES.get(name, np.int64))
            for name in BatchResult.__dataclass_fields__
        }  # fmt: skip
        result = BatchResult(**columns)
        # A sorted section: each PC's function is the last starting at or before it, as
        # find_function's binary search finds it, found for every PC at once.
        last = None
        if self.header.sorted and len(self):
            last = (np.searchsorted(self.starts, flat, side="right") - 1).tolist()
        for at, pc in enumerate(flat.tolist()):
            function = self.find_function(pc) if last is None else self._holding(last[at], pc)
            found = None if function is None else self._row_at(function, pc)
            if found is not None:
                _set_found(result, at, found)
        if outside is not None and outside.any():
            result = result.not_found_at(outside.ravel())
        return result

    def row_starts(self) -> tuple[IntArray, IntArray]:
        """Every row's function index and start offset (``sfre_start_address``), in stored
        order, from the table :meth:`find_rows` searches (built on first use)."""
        if self._batch is None:
            self._batch = _RowTable(self)
        return self._batch.function_of_row, self._batch.start_offset

    def __repr__(self) -> str:
        return (
            f"<SectionLookup V{int(self.header.version)} {self.header.abi.name} {len(self)} "
            f"functions at {self.section_address:#x}>"
        )


def _rows_key(function: Function) -> tuple[int, ...]:
    """What a function's rows are read from: a Function changed with dataclasses.replace
    never reads or leaves another's rows."""
    return (
        function.index,
        function.start,
        function.fre_offset,
        function.num_rows,
        function.info,
        function.info2,
    )


def _addresses(
    pcs: Sequence[int] | npt.ArrayLike,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_] | None]:
    """``pcs`` as uint64 addresses, and a mask of those that are no address (negative, or
    2**64 and above), which are answered as not found, as ``find_row`` answers them; None
    when every PC is one."""
    import numpy as np

    if isinstance(pcs, np.ndarray):
        values = pcs
    else:
        try:  # the common case: every PC an address
            return np.asarray(pcs, dtype=np.uint64), None
        except (OverflowError, TypeError, ValueError):
            values = np.asarray(pcs, dtype=object)
    if values.dtype == np.uint64:
        return values, None
    if values.dtype.kind == "i":
        outside = values < 0
        return np.where(outside, 0, values).astype(np.uint64), outside
    if values.dtype == object:  # Python integers beyond 64 bits
        flat = values.ravel().tolist()
        inside = [isinstance(pc, int) and 0 <= pc < _U64 for pc in flat]
        addresses = np.array([pc if ok else 0 for pc, ok in zip(flat, inside, strict=True)],
                             dtype=np.uint64).reshape(values.shape)  # fmt: skip
        return addresses, ~np.array(inside, dtype=bool).reshape(values.shape)
    return values.astype(np.uint64), None


# -- the batch table ----------------------------------------------------------------------------

#: Codes of RuleKind in the batch result's ``*_kind`` arrays.
RULE_KIND_CODES: dict[RuleKind, int] = {kind: code for code, kind in enumerate(RuleKind)}
RULE_KINDS: tuple[RuleKind, ...] = tuple(RuleKind)

#: find_rows_of_checked answers this many PCs of a section one by one, plus one for every
#: ONE_BY_ONE_SHARE of its rows, before it builds the table of every row.
ONE_BY_ONE_PCS = 64
ONE_BY_ONE_SHARE = 128
#: The columns of a BatchResult that hold -1 where no row applies (the others hold 0).
_MINUS_ONE_WHEN_MISSING = frozenset({"function_index", "row_index", "cfa_reg", "fp_reg", "ra_reg"})
#: The rule columns, one value per row form.
_RULE_COLUMNS = (
    "cfa_reg", "cfa_offset", "cfa_deref", "fp_kind", "fp_offset", "fp_reg", "ra_kind",
    "ra_offset", "ra_reg", "mangled_ra",
)  # fmt: skip
#: The rule columns' types, besides int64.
_RULE_DTYPES = {"cfa_deref": "bool", "mangled_ra": "bool", "fp_kind": "int8", "ra_kind": "int8"}


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

    def subset(self, keep: npt.NDArray[np.bool_]) -> BatchResult:
        """The answers where ``keep`` (a mask) is true."""
        fields = self.__dataclass_fields__
        return BatchResult(**{name: getattr(self, name)[keep] for name in fields})

    def __len__(self) -> int:
        return len(self.row_index)


class _RowTable:
    """Every row of a section as columns, and the sorted points :meth:`find` searches: every
    row's absolute start, plus each function's start and end marking "no row" (rows win ties).
    Functions the table does not answer (PCMASK, rows out of order, V1) get one marker point,
    their PCs answered by the section's :meth:`SectionLookup.find_row`; so are every PC's of a
    section whose functions overlap."""

    _NO_ROW = -1
    _ONE_BY_ONE = -2

    def __init__(self, section: SectionLookup) -> None:
        import numpy as np

        from .walk import scan_rows

        self.section = section
        table = section.table
        scan = scan_rows(section)
        self.start_offset = scan.start_offset
        function_of_row = np.repeat(np.arange(len(table), dtype=np.int64), table.num_rows)
        # Rule columns per form, and one more form past the end: "no row".
        self.columns = _form_columns(scan.forms, scan.rules)
        # Narrow index columns, each with one more entry at the end that row -1 reads ("no
        # row"): the batch lookup reads them at random, and smaller ones stay in the
        # processor's caches longer.
        self.form_of_row = np.append(scan.form, len(scan.forms)).astype(
            _index_dtype(len(scan.forms))
        )
        within_function = np.arange(len(function_of_row)) - scan.row_base[function_of_row]
        largest_count = int(table.num_rows.max()) if len(table) else 0
        self.row_in_function = np.append(within_function, -1).astype(_index_dtype(largest_count))
        self.function_of_row_padded = np.append(function_of_row, -1).astype(
            _index_dtype(len(table))
        )
        self.points: U64Array | None = None
        order = np.argsort(table.start, kind="stable")
        starts = table.start[order]
        ends = starts + table.size[order].astype(np.uint64)
        if len(table) and not (np.any(ends[:-1] > starts[1:]) or np.any(ends < starts)):
            self._build_points(table, function_of_row)

    @property
    def function_of_row(self) -> IntArray:
        """Each row's function index (a new array: the table keeps only the narrow column)."""
        import numpy as np

        column: IntArray = self.function_of_row_padded[:-1].astype(np.int64)
        return column

    def _build_points(self, table: FunctionTable, function_of_row: IntArray) -> None:
        import numpy as np

        from .layout import fde_pc_type

        # Answered one by one: PCMASK functions, and those whose rows are out of order.
        within = np.diff(self.start_offset) <= 0
        same_function = function_of_row[1:] == function_of_row[:-1]
        one_by_one = fde_pc_type(table.info) == PcType.MASK
        one_by_one[function_of_row[1:][within & same_function]] = True
        rows = np.arange(len(self.start_offset))
        fn = function_of_row
        plain_rows = rows[~one_by_one[fn] & (self.start_offset < table.size[fn])]
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
                np.where(one_by_one, self._ONE_BY_ONE, self._NO_ROW),
                np.full(count, self._NO_ROW),
                plain_rows,
            ]
        ).astype(np.int64)
        rank = np.concatenate(
            [np.ones(count, np.int8), np.zeros(count, np.int8), np.full(len(plain_rows), 2)]
        )
        by_address = np.lexsort((rank, addresses))
        self.points = addresses[by_address]
        # Narrow, as the other index columns; point -1 (before every function) reads the
        # padding entry at the end: "no row".
        self.row_of_point = np.append(row_of_point[by_address], self._NO_ROW).astype(
            _index_dtype(len(self.start_offset))
        )

    def find(self, pcs: U64Array) -> BatchResult:
        import numpy as np

        if self.points is None:
            flat = np.full(len(pcs), self._ONE_BY_ONE, dtype=np.int64)
        elif len(pcs) >= 1024 and not bool(np.all(pcs[1:] >= pcs[:-1])):
            # Searching PCs in increasing order walks the (large) points array in order and
            # lets each binary search start from the last: sorting first pays for itself.
            order = self._order(pcs)
            flat = np.empty(len(pcs), dtype=np.int64)
            np.put(flat, order, self._find_by_points(pcs.take(order)))
        else:
            flat = self._find_by_points(pcs)
        one_by_one = np.flatnonzero(flat == self._ONE_BY_ONE)
        flat[one_by_one] = self._NO_ROW
        result = self._gather(flat)
        for at in one_by_one.tolist():
            found = self.section.find_row(int(pcs[at]))
            if found is not None:
                _set_found(result, at, found)
        return result

    def _order(self, pcs: U64Array) -> IntArray:
        """A permutation that puts ``pcs`` in increasing order, at least where they fall
        between the first and the last point (below and above, any order does).

        Sorting values is several times faster than ``argsort``: when the PC's place in that
        range and its index fit in 64 bits together, the sorted values are those pairs."""
        import numpy as np

        assert self.points is not None
        first, last = self.points[0], self.points[-1]
        span = int(last - first) + 1
        index_bits = max(len(pcs) - 1, 1).bit_length()
        if span.bit_length() + index_bits > 64:
            by_value: IntArray = np.argsort(pcs).astype(np.int64)
            return by_value
        place = np.minimum(pcs - first, np.uint64(span))
        place[pcs < first] = 0
        keys = (place << np.uint64(index_bits)) | np.arange(len(pcs), dtype=np.uint64)
        keys.sort()
        order: IntArray = (keys & np.uint64((1 << index_bits) - 1)).astype(np.int64)
        return order

    def _find_by_points(self, pcs: U64Array) -> IntArray:
        """Per PC the index in the whole table of the row that applies, -1 where none, -2
        where the PC is answered one by one."""
        import numpy as np

        assert self.points is not None
        point = np.searchsorted(self.points, pcs, side="right") - 1
        # Widened once here: take() converts narrower index arrays on every call.
        flat: IntArray = self.row_of_point.take(point).astype(np.int64)
        return flat

    def _gather(self, flat: IntArray) -> BatchResult:
        """The answers for rows ``flat`` (indices in the whole table, -1 for none)."""
        import numpy as np

        # Index -1 reads the padding at the end of each column: function -1, row -1, the "no
        # row" form.  take() is several times faster than fancy indexing on these arrays.
        function = self.function_of_row_padded.take(flat).astype(np.int64)
        row = self.row_in_function.take(flat).astype(np.int64)
        at = self.form_of_row.take(flat).astype(np.intp)
        rules = {name: self.columns[name].take(at) for name in _RULE_COLUMNS}
        return BatchResult(function_index=function, row_index=row, **rules)



def _set_found(result: BatchResult, at: int, found: LookupResult) -> None:
    """Put the answer ``found`` (one PC's, from find_row) at position ``at``."""
    result.function_index[at] = found.function.index
    result.row_index[at] = found.row_index
    row = found.row
    for name, value in _rule_values(row.cfa, row.fp, row.ra, row.mangled_ra).items():
        getattr(result, name)[at] = value


#: Each rule column's value where no row applies.
_NO_RULE_VALUES = {**dict.fromkeys(_RULE_COLUMNS, 0), "cfa_reg": -1, "fp_reg": -1, "ra_reg": -1}


def _rule_values(cfa: CfaRule | None, fp: RegRule, ra: RegRule, mangled_ra: bool) -> dict[str, int]:
    """Each rule column's value for a row with these rules."""
    return {
        "cfa_reg": -1 if cfa is None else cfa.reg,
        "cfa_offset": 0 if cfa is None else cfa.offset,
        "cfa_deref": cfa is not None and cfa.deref,
        "fp_kind": RULE_KIND_CODES[fp.kind],
        "fp_offset": fp.offset,
        "fp_reg": -1 if fp.reg is None else fp.reg,
        "ra_kind": RULE_KIND_CODES[ra.kind],
        "ra_offset": ra.offset,
        "ra_reg": -1 if ra.reg is None else ra.reg,
        "mangled_ra": mangled_ra,
    }


def _form_columns(forms: Sequence[RowForm], rules: Sequence[Rules]) -> dict[str, Any]:
    """Rule columns of each distinct form and its decoded rules
    (:func:`~pysframe.format.walk.scan_rows`), plus a last entry meaning "no row"."""
    import numpy as np

    values = [
        _rule_values(cfa, fp, ra, bool(fre_mangled_ra(form.info)))
        for form, (cfa, fp, ra) in zip(forms, rules, strict=True)
    ]
    values.append(_NO_RULE_VALUES)
    return {
        name: np.array([value[name] for value in values], dtype=_RULE_DTYPES.get(name, np.int64))
        for name in _RULE_COLUMNS
    }


def _index_dtype(largest: int) -> np.dtype[Any]:
    """The narrowest signed integer type holding -1 .. ``largest``."""
    import numpy as np

    if largest < 1 << 15:
        return np.dtype(np.int16)
    return np.dtype(np.int32) if largest < 1 << 31 else np.dtype(np.int64)


# -- coverage -----------------------------------------------------------------------------------


def covered_bytes(
    starts: U64Array, sizes: U64Array, within: Sequence[tuple[int, int]] | None = None
) -> int:
    """Bytes the functions [start, start + size) cover together, each byte once (functions
    may overlap); with ``within`` ([low, high) pairs that do not overlap, read inside
    [0, 2**64 - 1]), only the bytes inside them.  A function ending past 2**64 counts its
    bytes up there too, as Python integers do (the ranges are then merged in Python)."""
    import numpy as np

    starts = np.asarray(starts, dtype=np.uint64)
    sizes = np.asarray(sizes, dtype=np.uint64)
    if len(starts) == 0:
        return 0
    if bool(np.any(starts > np.uint64(_U64 - 1) - sizes)):
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


__all__ = [
    "RULE_KINDS",
    "RULE_KIND_CODES",
    "BatchResult",
    "RowSearch",
    "SectionLookup",
    "covered_bytes",
]
