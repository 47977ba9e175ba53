"""One PC at a time, without numpy: a section opened for the lookups of a few PCs.

:class:`~pysframe.format.section.SFrameSection` reads every function's start address with
numpy when it opens (its lookup index, checked to be in order).  A caller that looks up a
handful of PCs and must start fast (``pysframe stack`` of a live process) opens the section
here instead: opening parses the header alone (:func:`~pysframe.format.decode.parse_header`).
A lookup reads FDE start fields one at a time with struct -- a binary search in a section
flagged sorted, else the first function holding the PC in stored order (docs/format.md,
"Lookups") -- then the function and its rows with the decoder's own functions
(:func:`~pysframe.format.decode.read_function`, :func:`~pysframe.format.decode.decode_rows`)
and the row by binary search (:func:`~pysframe.format.lookup.lookup_in`, through the
function's :class:`~pysframe.format.row_index.RowIndex`): the answers and the errors of
:meth:`SFrameSection.lookup <pysframe.format.section.SFrameSection.lookup>`, which
tests/test_single_lookup.py holds it to.

What opening leaves out are the checks of the whole FDE table: that a sorted section's
functions are in order, and the checks of ``SFrameSection.table``.  The caller vouches for
them (the section passed them before: :mod:`pysframe.sources.trust`); whatever the section
holds, every read stays inside its bytes.
"""

from __future__ import annotations

from .bounded import BoundedCache
from .decode import decode_rows, fde_position, parse_header, read_function
from .layout import FDE_SIZE, fde_start_struct, fde_struct
from .lookup import lookup_in
from .model import FrameRow, Function, Header, LookupResult
from .row_index import RowIndex, index_rows
from .view import Buffer

_U64 = 1 << 64


class SectionLookup:
    """An SFrame section at ``section_address`` for single-PC lookups (bytes not copied).

    >>> from pysframe import Abi, CfaRule, SFrameBuilder
    >>> builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE)
    >>> _ = builder.add_function(0x1000, 0x20).add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16))
    >>> section = SectionLookup(builder.to_bytes())
    >>> section.lookup(0x1004).row.cfa
    CfaRule(reg=7, offset=16, deref=False)
    >>> section.lookup(0x2000) is None
    True
    """

    __slots__ = (
        "_functions",
        "_indexes",
        "_rows",
        "_start_field",
        "data",
        "header",
        "section_address",
    )

    #: Functions read, and rows decoded, kept per section (cleared when full).
    CACHE_SIZE = 256

    def __init__(self, data: Buffer, section_address: int = 0) -> None:
        self.data = data
        self.section_address = section_address
        self.header: Header = parse_header(data)
        self._start_field = fde_start_struct(self.header.version, self.header.big_endian)
        self._functions: BoundedCache[int, Function] = BoundedCache(self.CACHE_SIZE)
        self._rows: BoundedCache[int, tuple[FrameRow, ...]] = BoundedCache(self.CACHE_SIZE)
        self._indexes: BoundedCache[int, RowIndex] = BoundedCache(self.CACHE_SIZE)

    def __len__(self) -> int:
        return self.header.num_fdes

    def start(self, index: int) -> int:
        """Function ``index``'s absolute start address."""
        at = fde_position(self.header, index)
        return self._absolute(index, self._start_field.unpack_from(self.data, at)[0])

    def _absolute(self, index: int, stored: int) -> int:
        """The start address of function ``index`` whose FDE stores ``stored``, as
        :func:`~pysframe.format.decode.read_starts` computes it: relative to the field's own
        address (FDE_FUNC_START_PCREL) or the section's, modulo 2**64."""
        base = fde_position(self.header, index) if self.header.pcrel else 0
        return (stored + base + self.section_address) % _U64

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
        if low == 0:
            return None
        function = self._function(low - 1, self.start(low - 1))
        return function if pc - function.start < function.size else None

    def _first_containing(self, pc: int) -> Function | None:
        """The first function in stored order holding ``pc`` (an unsorted section)."""
        header = self.header
        fde = fde_struct(header.version, header.big_endian)
        first = fde_position(header, 0)
        fdes = memoryview(self.data)[first : first + len(self) * FDE_SIZE[header.version]]
        # Every version's FDE begins with the function's start, then its size.
        for index, (stored, size, *_) in enumerate(fde.iter_unpack(fdes)):
            start = self._absolute(index, stored)
            if start <= pc and pc - start < size:
                return self._function(index, start)
        return None

    def _function(self, index: int, start: int) -> Function:
        return self._functions.get(
            index, read_function, self.data, self.header, index, start, self._rows_of
        )

    def _rows_of(self, function: Function) -> tuple[FrameRow, ...]:
        return self._rows.get(function.index, decode_rows, self.data, self.header, function)

    def _row_index(self, function: Function) -> RowIndex:
        return self._indexes.get(function.index, index_rows, self.data, self.header, function)

    def lookup(self, pc: int) -> LookupResult | None:
        """The function and the row that apply at ``pc``, or None."""
        return lookup_in(self.find_function(pc), self._row_index, pc)

    def find_row(self, pc: int) -> FrameRow | None:
        """The row that applies at ``pc``, or None."""
        found = self.lookup(pc)
        return None if found is None else found.row

    def __repr__(self) -> str:
        return (
            f"<SectionLookup V{int(self.header.version)} {self.header.abi.name} {len(self)} "
            f"functions at {self.section_address:#x}>"
        )


__all__ = ["SectionLookup"]
