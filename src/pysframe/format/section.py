"""SFrameSection: a decoded .sframe section, its functions, rows and lookups, and the entry
points of validation, re-encoding and conversion (done by :mod:`pysframe.format.validate`,
:mod:`pysframe.format.encode` and :mod:`pysframe.format.convert`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, overload

import numpy as np
import numpy.typing as npt

from .constants import Abi, Flags, Version
from .decode import parse_header
from .encode import SectionSpec, encode_section
from .lookup import BatchResult, SectionLookup
from .model import FrameRow, Function, Header, LookupResult
from .view import Buffer, FunctionTable, U64Array

if TYPE_CHECKING:
    from .findings import Finding


class SFrameSection(Sequence[Function]):
    """A decoded SFrame section.

    Opening reads the header and the lookup index, every function's start address (checked to
    be in order when the section is flagged sorted).  A function reached by index or by a
    lookup is read and checked on its own; iteration, ``table`` and the batch and whole-section
    operations read every FDE at once and check them all first.  Each function's rows are
    decoded when asked for.  ``section_address`` is the address of the section's first byte
    (its ELF ``sh_addr``), which absolute function addresses are computed from.

    Lookups are the section's :attr:`lookup` (:class:`~pysframe.format.lookup.SectionLookup`),
    which keeps what it decodes: :meth:`find_function` (the FDE at a PC), :meth:`find_row`
    (the function and its row at a PC) and :meth:`find_rows` (the rows at many PCs).

    >>> from pysframe import Abi, CfaRule, SFrameBuilder
    >>> builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE)
    >>> _ = builder.add_function(0x1000, 0x20).add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16))
    >>> section = SFrameSection.from_bytes(builder.to_bytes())
    >>> len(section), section.num_rows
    (1, 2)
    >>> section.find_function(0x1004).start == 0x1000
    True
    >>> section.find_row(0x1004).row.cfa
    CfaRule(reg=7, offset=16, deref=False)
    >>> section.find_rows([0x1000, 0x2000]).row_index.tolist()
    [0, -1]
    """

    __slots__ = ("_data", "_pin", "header", "lookup")

    def __init__(self, data: Buffer, section_address: int = 0) -> None:
        if isinstance(data, memoryview) and (data.itemsize != 1 or data.ndim != 1):
            if not data.c_contiguous:
                raise TypeError("an SFrame section needs contiguous bytes")
            data = data.cast("B")  # a view of the same bytes, one item per byte
        # A bytearray stays the caller's: a view of it, held, makes resizing it raise
        # BufferError rather than leave this section reading past its new end.
        self._pin = memoryview(data) if isinstance(data, bytearray) else None
        self._data = data
        self.header: Header = parse_header(data)
        #: The section's lookups, and what they decoded.
        self.lookup = SectionLookup(data, section_address, header=self.header)
        _ = self.lookup.starts  # the lookup index, checked to be in order now

    @classmethod
    def from_bytes(cls, data: Buffer, section_address: int = 0) -> SFrameSection:
        """Decode ``data`` (bytes, bytearray or memoryview; not copied)."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"from_bytes needs a bytes-like object, not {type(data).__name__}")
        return cls(data, section_address)

    # -- header shortcuts ------------------------------------------------------------------
    @property
    def version(self) -> Version:
        return self.header.version

    @property
    def abi(self) -> Abi:
        return self.header.abi

    @property
    def flags(self) -> Flags:
        return self.header.flags

    @property
    def big_endian(self) -> bool:
        return self.header.big_endian

    @property
    def data(self) -> Buffer:
        """The section bytes as given."""
        return self._data

    @property
    def section_address(self) -> int:
        return self.lookup.section_address

    @property
    def starts(self) -> U64Array:
        """Every function's absolute start address, in stored order: the lookup index, read
        when the section is opened (read-only)."""
        return self.lookup.starts

    @property
    def table(self) -> FunctionTable:
        """The FDE table as numpy columns (start addresses, sizes, ...), read and checked on
        first use."""
        return self.lookup.table

    # -- functions ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.header.num_fdes

    @overload
    def __getitem__(self, index: int) -> Function: ...
    @overload
    def __getitem__(self, index: slice) -> list[Function]: ...
    def __getitem__(self, index: int | slice) -> Function | list[Function]:
        if isinstance(index, slice):
            return [self.lookup.function(i) for i in range(*index.indices(len(self)))]
        count = len(self)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"function index {index} out of range (section has {count})")
        return self.lookup.function(index)

    def __iter__(self) -> Iterator[Function]:
        t = self.table
        columns = zip(
            t.start.tolist(), t.size.tolist(), t.start_field.tolist(), t.fre_offset.tolist(),
            t.num_rows.tolist(), t.info.tolist(), t.info2.tolist(), t.rep_size.tolist(),
            t.padding.tolist(), strict=True,
        )
        for index, (start, size, field, fre_offset, num_fres, info, info2, rep, pad) in enumerate(
            columns
        ):
            yield Function(
                index=index, start=start, size=size, start_field=field, fre_offset=fre_offset,
                num_rows=num_fres, info=info, info2=info2, rep_size=rep, padding=pad,
                _loader=self.lookup.rows,
            )

    def rows(self, index: int) -> tuple[FrameRow, ...]:
        """The rows of function ``index`` (negative: from the end, as ``section[index]``),
        decoded on first use (a bounded cache keeps them)."""
        return self.lookup.rows(self[index])

    @property
    def num_rows(self) -> int:
        """How many rows (FREs) the functions have together (the header's ``num_fres``
        claims a number; this is the functions' own)."""
        return int(self.table.num_rows.sum())

    # -- lookups -------------------------------------------------------------------------------
    def find_function(self, pc: int) -> Function | None:
        """The function whose [start, start + size) holds ``pc``, or None."""
        return self.lookup.find_function(pc)

    def find_row(self, pc: int) -> LookupResult | None:
        """The function and its row that apply at ``pc``, or None, as libsframe's
        sframe_find_fre finds them."""
        return self.lookup.find_row(pc)

    def find_rows(self, pcs: Sequence[int] | npt.ArrayLike) -> BatchResult:
        """Answer many PCs at once (element i of each column answers ``pcs[i]``); see
        :class:`~pysframe.format.lookup.BatchResult`."""
        return self.lookup.find_rows(pcs)

    def row_starts(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Every row's function index and start offset (``sfre_start_address``), in stored
        order, from the batch index :meth:`find_rows` searches (built on first use)."""
        return self.lookup.row_starts()

    # -- validation ----------------------------------------------------------------------------
    def validate(
        self,
        *,
        text_ranges: Sequence[tuple[int, int]] | None = None,
        sframe_segment_address: int | None = None,
        kernel: bool = False,
        relocatable: bool = False,
        address_gaps: bool = False,
        foreign_endian: bool = False,
    ) -> list[Finding]:
        """Check the section; see :func:`pysframe.format.validate.validate_section`."""
        from .validate import validate_section

        return validate_section(
            self,
            text_ranges=text_ranges,
            sframe_segment_address=sframe_segment_address,
            kernel=kernel,
            relocatable=relocatable,
            address_gaps=address_gaps,
            foreign_endian=foreign_endian,
        )

    # -- encoding ------------------------------------------------------------------------------
    def spec(self) -> SectionSpec:
        """The encoder settings that reproduce this section."""
        h = self.header
        end = h.fre_end
        return SectionSpec(
            version=h.version,
            abi=h.abi,
            flags=h.flags,
            cfa_fixed_fp_offset=h.cfa_fixed_fp_offset,
            cfa_fixed_ra_offset=h.cfa_fixed_ra_offset,
            big_endian=h.big_endian,
            auxiliary_header=h.auxiliary_header,
            section_address=self.section_address,
            trailing=bytes(self._data[end:]),
        )

    def to_bytes(self) -> bytes:
        """Encode the decoded model again (identical to the input for a well-formed section).

        Functions whose FDEs name one FRE offset keep sharing its block (a V1/V2 function
        without FREs shares nothing)."""
        functions = list(self)
        block_order = sorted(range(len(functions)), key=lambda i: (functions[i].fre_offset, i))
        materialized = [_with_rows(f) for f in functions]
        first: dict[int, int] = {}
        block_of = [
            first.setdefault(f.fre_offset, f.index)
            if f.num_rows or self.version is Version.V3
            else f.index
            for f in functions
        ]
        if len(set(block_of)) == len(functions):
            return encode_section(self.spec(), materialized, block_order)
        names = [i for i in block_order if block_of[i] == i]
        return encode_section(self.spec(), materialized, names, block_of)

    def convert(
        self,
        version: Version | int,
        *,
        big_endian: bool | None = None,
        pcrel: bool | None = None,
        pcmask_rep_size: int | None = None,
    ) -> SFrameSection:
        """This section in another version (or byte order); see :mod:`pysframe.format.convert`
        (its rows read and written in bulk)."""
        from .convert import convert_rows

        data = convert_rows(
            self,
            self.spec(),
            Version(version),
            self.__getitem__,
            big_endian=big_endian,
            pcrel=pcrel,
            pcmask_rep_size=pcmask_rep_size,
        )
        return SFrameSection.from_bytes(data, self.section_address)

    def __repr__(self) -> str:
        return (
            f"<SFrameSection V{int(self.version)} {self.abi.name} {len(self)} functions "
            f"at {self.section_address:#x}>"
        )


def _with_rows(function: Function) -> Function:
    from dataclasses import replace

    return replace(function, _rows=function.rows, _loader=None)
