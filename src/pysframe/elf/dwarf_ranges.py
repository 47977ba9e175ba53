"""The addresses DWARF says units and DIEs cover, read from the section bytes, and looked up:

* :func:`address_ranges`: ``.debug_aranges`` (DWARF 5 6.1.2), the ranges of each unit;
* :func:`range_list`: a DIE's ``DW_AT_ranges`` (2.17.3), in ``.debug_ranges`` or
  ``.debug_rnglists``;
* :class:`Spans`: ranges looked up by address.

Malformed data raises :class:`pysframe.errors.ElfError`; no count read from the data
allocates more than the bytes that hold it.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from typing import Literal

from ..errors import ElfError
from .dwarf_info import DieReader
from .line_program import read_uleb

_MASK = (1 << 64) - 1

# Range list entries (table 7.30).
DW_RLE_end_of_list, DW_RLE_base_addressx, DW_RLE_startx_endx = 0x00, 0x01, 0x02
DW_RLE_startx_length, DW_RLE_offset_pair, DW_RLE_base_address = 0x03, 0x04, 0x05
DW_RLE_start_end, DW_RLE_start_length = 0x06, 0x07


def address_ranges(data: bytes, little: bool = True) -> list[tuple[int, int, int]]:
    """The ranges ``.debug_aranges`` gives (DWARF 5 6.1.2): (low, high, unit offset) in
    section order, empty ranges left out; ElfError at a set that does not fit."""
    order: Literal["little", "big"] = "little" if little else "big"
    out: list[tuple[int, int, int]] = []
    pos, size = 0, len(data)
    while pos + 4 <= size:
        start = pos
        length = int.from_bytes(data[pos : pos + 4], order)
        offset_size, pos = 4, pos + 4
        if length == 0xFFFFFFFF:
            length = int.from_bytes(data[pos : pos + 8], order)
            offset_size, pos = 8, pos + 8
        end = pos + length
        if end > size or length < 4 + offset_size:
            raise ElfError("address range set runs past the section", start,
                           section=".debug_aranges")  # fmt: skip
        unit = int.from_bytes(data[pos + 2 : pos + 2 + offset_size], order)
        address_size = data[pos + 2 + offset_size]
        pos += 4 + offset_size  # version, debug_info_offset, address_size, segment_selector_size
        if address_size not in (4, 8):
            raise ElfError(f"address range set of {address_size}-byte addresses", start,
                           section=".debug_aranges")  # fmt: skip
        pos = start + -(-(pos - start) // (2 * address_size)) * (2 * address_size)
        while pos + 2 * address_size <= end:
            low = int.from_bytes(data[pos : pos + address_size], order)
            span = int.from_bytes(data[pos + address_size : pos + 2 * address_size], order)
            pos += 2 * address_size
            if low == 0 and span == 0:
                break
            if span:
                out.append((low, low + span, unit))
        pos = end
    return out


class Spans:
    """Address ranges ``(low, high, value)`` looked up by address (they may overlap): sorted
    by start, then value, with the highest end up to each so that a lookup bisects."""

    __slots__ = ("_lows", "_reach", "spans")

    def __init__(self, spans: Iterable[tuple[int, int, int]]) -> None:
        self.spans = sorted(spans, key=lambda span: (span[0], span[2]))
        self._lows = [span[0] for span in self.spans]
        self._reach = list(itertools.accumulate((span[1] for span in self.spans), max))

    def __len__(self) -> int:
        return len(self.spans)

    def holding(self, address: int) -> list[tuple[int, int, int]]:
        """The spans that hold ``address``, in order: from the first that reaches past it to
        the last that starts at or below it."""
        first = bisect.bisect_right(self._reach, address)
        last = bisect.bisect_right(self._lows, address)
        return [span for span in self.spans[first:last] if span[0] <= address < span[1]]


def range_list(
    reader: DieReader, offset: int, base: int, *, indexed: bool = True
) -> list[tuple[int, int]]:
    """The ranges (low, high) of the range list at ``offset`` of a DIE of ``reader``'s unit
    (DWARF 5 2.17.3), its base address ``base`` at the start (the unit's DW_AT_low_pc):

    * units of DWARF 4 and before: ``.debug_ranges``, pairs of addresses ended by (0, 0), a
      pair whose first is the largest address giving the base (DWARF 4 2.17.3);
    * DWARF 5: ``.debug_rnglists``, entries of table 7.30.  Those that give indexes in
      ``.debug_addr`` (DW_RLE_base_addressx, startx_endx, startx_length) are looked up there;
      with ``indexed`` False they are refused, as BFD 2.40 refuses them (bfd/dwarf2.c
      read_rnglists).

    Addresses wrap at 64 bits; empty ranges are kept.  ElfError for a list that runs past its
    section, or an entry of an unknown kind."""
    size, order = reader.unit.address_size, reader.order
    out: list[tuple[int, int]] = []
    if reader.unit.version <= 4:
        data = reader.sections.get(".debug_ranges")
        largest = (1 << 8 * size) - 1
        for pos in range(offset, len(data) - 2 * size + 1, 2 * size):
            low = int.from_bytes(data[pos : pos + size], order)
            high = int.from_bytes(data[pos + size : pos + 2 * size], order)
            if low == 0 and high == 0:
                return out
            if low == largest:
                base = high
            else:
                out.append(((base + low) & _MASK, (base + high) & _MASK))
        raise ElfError("range list runs past the section", offset, section=".debug_ranges")
    data = reader.sections.get(".debug_rnglists")
    end, pos = len(data), offset

    def fixed(at: int) -> int:
        if at + size > end:
            raise IndexError(at)
        return int.from_bytes(data[at : at + size], order)

    try:
        while True:
            kind = data[pos]
            pos += 1
            if kind == DW_RLE_end_of_list:
                return out
            if not indexed and kind in (DW_RLE_base_addressx, DW_RLE_startx_endx,
                                        DW_RLE_startx_length):  # fmt: skip
                raise ElfError(f"range list entry of kind {kind} (an index in .debug_addr)",
                               pos - 1, section=".debug_rnglists")  # fmt: skip
            if kind == DW_RLE_base_addressx:
                index, pos = read_uleb(data, pos, end)
                base = reader.address(index)
                continue
            if kind == DW_RLE_base_address:
                base, pos = fixed(pos), pos + size
                continue
            if kind == DW_RLE_startx_endx:
                first, pos = read_uleb(data, pos, end)
                last, pos = read_uleb(data, pos, end)
                low, high = reader.address(first), reader.address(last)
            elif kind == DW_RLE_startx_length:
                first, pos = read_uleb(data, pos, end)
                length, pos = read_uleb(data, pos, end)
                low = reader.address(first)
                high = low + length
            elif kind == DW_RLE_offset_pair:
                start, pos = read_uleb(data, pos, end)
                stop, pos = read_uleb(data, pos, end)
                low, high = base + start, base + stop
            elif kind == DW_RLE_start_end:
                low, high, pos = fixed(pos), fixed(pos + size), pos + 2 * size
            elif kind == DW_RLE_start_length:
                low = fixed(pos)
                length, pos = read_uleb(data, pos + size, end)
                high = low + length
            else:
                raise ElfError(f"range list entry of unknown kind {kind}", pos - 1,
                               section=".debug_rnglists")  # fmt: skip
            out.append((low & _MASK, high & _MASK))
    except IndexError:
        raise ElfError("range list runs past the section", offset,
                       section=".debug_rnglists") from None  # fmt: skip


__all__ = ["Spans", "address_ranges", "range_list"]
