"""An oracle for lookups: libsframe's own search, written plainly, over decoded functions.

``sframe_find_fde`` (binutils 2.47, libsframe/sframe.c) searches the FDEs of a sorted section
by binary search, of an unsorted one in stored order; ``sframe_find_fre`` then scans the
function's FREs in order: it gives up at an FRE starting past the PC's offset, and answers the
first whose [start, end] holds it (end: the next FRE's start less one, or the function's size
less one).  PCMASK FREs match the offset modulo rep_size (V2/V3), or in V1 (libsframe 2.40) the
low four bits of the PC against those of the FRE's first and last address.  The product's
lookups (:class:`pysframe.format.lookup.SectionLookup`) search otherwise: by binary search
over start offsets indexed once, and over columns for many PCs.
"""

from __future__ import annotations

from collections.abc import Sequence

from pysframe import FrameRow, Function, PcType, SFrameSection, Version

U64 = 1 << 64
_V1_MASK = 0xF


def find_row_index(
    function: Function, rows: Sequence[FrameRow], version: Version, pc: int
) -> int | None:
    """Index of the row of ``function`` that applies at ``pc``, scanning as libsframe does."""
    offset = (pc - function.start) % U64
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


def find_function(section: SFrameSection, pc: int) -> Function | None:
    """The FDE libsframe finds at ``pc``: in a sorted section the last one starting at or
    before it (a binary search), else the first in stored order holding it."""
    functions = list(section)
    if not 0 <= pc < U64:
        return None
    if section.header.sorted:
        before = [f for f in functions if f.start <= pc]
        chosen = before[-1] if before else None
        return chosen if chosen is not None and pc - chosen.start < chosen.size else None
    return next((f for f in functions if f.start <= pc and pc - f.start < f.size), None)


def scan(section: SFrameSection, pc: int) -> tuple[int, int] | None:
    """(function index, row index) libsframe finds at ``pc``, or None."""
    function = find_function(section, pc)
    if function is None:
        return None
    index = find_row_index(function, function.rows, section.version, pc)
    return None if index is None else (function.index, index)
