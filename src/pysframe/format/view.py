"""What the whole-section helpers (the bulk walk, the batch index, validation) read a section
through: its bytes, its header and its FDE table as numpy columns.  :class:`SectionView` names
the three; :class:`~pysframe.format.section.SFrameSection` is one, and the helpers take any, so
that they need not know the section type (which itself calls them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeAlias

from ..dataclass import dataclass
from .model import Header

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The bytes a section is read from (not copied).
Buffer = bytes | bytearray | memoryview
# numpy's array types, named as strings: the bulk readers that make such arrays import numpy,
# this module does not (a single-PC lookup runs without it).
IntArray: TypeAlias = "npt.NDArray[np.int64]"
U64Array: TypeAlias = "npt.NDArray[np.uint64]"


@dataclass(frozen=True, slots=True)
class FunctionTable:
    """The FDE sub-section as columns, one element per function in stored order: the fields
    of :class:`~pysframe.format.model.Function`, and where each function's first FRE is."""

    start_field: IntArray
    start: U64Array
    size: IntArray
    fre_offset: IntArray
    #: How many rows (FREs) each function has.
    num_rows: IntArray
    info: IntArray
    info2: IntArray
    rep_size: IntArray
    padding: IntArray
    #: Byte offset of each function's first FRE (after the V3 attribute record).
    fre_data: IntArray

    def __len__(self) -> int:
        return len(self.start)


class SectionView(Protocol):
    """A decoded section as the whole-section helpers read it."""

    @property
    def data(self) -> Buffer:
        """The section's bytes."""

    @property
    def header(self) -> Header:
        """The parsed header."""

    @property
    def section_address(self) -> int:
        """The address of the section's first byte."""

    @property
    def table(self) -> FunctionTable:
        """Every FDE as columns, read and checked (the decoder's error if one is bad)."""
