"""Every FRE of a section at once: byte positions, start offsets and distinct row forms.

For whole-section work (``pysframe dump``) where decoding a :class:`~pysframe.model.FrameRow`
per FRE costs too much.  Two phases (V2 spec 2.4 FRE layout: start address of 1, 2 or 4 bytes
by FRE type, u8 info, then ``count`` data words of 1, 2 or 4 bytes):

1. walk the FREs step by step to find each one's byte position: step j reads the j-th FRE of
   every function that has one, functions ordered by descending FRE count so that the ones
   still walking are a prefix; an FRE's length comes from a table indexed by FRE type and info;
2. read every row's start offset at once, and group rows by their *form*: the FDE type (FLEX
   or not) with the info byte and data-word bytes.  Real sections have a few hundred forms for
   hundreds of thousands of rows; each form is decoded once with :func:`decode_rules`.

The checks are those of :func:`pysframe.decode.decode_rows`; on any problem every function is
decoded in order with it, so that the error raised is the one it raises first.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import SFrameError, TruncatedError
from .constants import FdeType
from .decode import decode_rows, row_context
from .rules import decode_rules

if TYPE_CHECKING:
    from .section import SFrameSection

I64 = npt.NDArray[np.int64]

_WORD_CODES = "bhi"  # struct codes of 1-, 2- and 4-byte data words (size codes 0-2)
_TOO_LONG = 1 << 40  # FRE "length" for the invalid word-size code 3: fails the bounds check


def _fre_lengths() -> I64:
    """Bytes of an FRE by ``fre_type * 256 + info``: address, info byte, data words."""
    info = np.arange(256, dtype=np.int64)
    size_code = (info >> 5) & 3
    words = ((info >> 1) & 0xF) << size_code
    tail = np.where(size_code == 3, _TOO_LONG, 1 + words)
    return np.concatenate([(1 << fre_type) + tail for fre_type in range(3)])


_FRE_LENGTHS = _fre_lengths()


@dataclass(frozen=True, slots=True)
class RowForm:
    """What a row's dumped cells depend on, besides the header: FDE type, info byte, words."""

    flex: bool
    info: int
    words: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RowScan:
    """Function i's rows are ``row_base[i]:row_base[i + 1]``; per row its raw start offset
    and the index of its form in ``forms``."""

    row_base: I64
    start_offset: I64
    form: I64
    forms: tuple[RowForm, ...]


def scan_rows(section: SFrameSection) -> RowScan:
    """Parse and check every FRE of ``section``, as decode_rows would one function at a time."""
    try:
        return _scan(section)
    except SFrameError:
        _raise_first_error(section)
        raise


def _raise_first_error(section: SFrameSection) -> None:
    for function in section:
        decode_rows(section.data, section.header, function)


def _scan(section: SFrameSection) -> RowScan:
    header, table = section.header, section.table
    octets = np.frombuffer(section.data, dtype=np.uint8)
    row_base = np.zeros(len(table) + 1, dtype=np.int64)
    np.cumsum(table.num_fres, out=row_base[1:])
    type_of_row = np.repeat(table.info & 0xF, table.num_fres)  # 0-2, checked at open
    position = _positions(octets, section, row_base)
    # Phase 2: every row at once (phase 1 checked that every FRE lies in the sub-section).
    info_at = position + np.left_shift(1, type_of_row)
    tail = position + _FRE_LENGTHS[type_of_row * 256 + octets[info_at]] - info_at
    # Room for reading whole 8-byte chunks of the longest FRE (61 bytes from its info byte).
    padded = np.concatenate((octets, np.zeros(72, dtype=np.uint8)))
    start_offset = _start_offsets(padded, position, type_of_row, header.big_endian)
    flex = np.repeat((table.info2 & 0x1F) == FdeType.FLEX, table.num_fres)
    form, first = _group(padded, info_at, tail, flex)
    forms = tuple(
        _form(section, int(position[r]), int(info_at[r]), bool(flex[r])) for r in first.tolist()
    )
    return RowScan(row_base, start_offset, form, forms)


def _positions(octets: npt.NDArray[np.uint8], section: SFrameSection, row_base: I64) -> I64:
    """Phase 1: the byte position of every FRE, checking that each lies in the sub-section."""
    header, table = section.header, section.table
    fre_end = header.size + header.fre_offset + header.fre_len
    order = np.argsort(-table.num_fres, kind="stable")
    counts = table.num_fres[order]
    cursor = table.fre_data[order].astype(np.int64)
    info_offset = np.left_shift(1, table.info[order] & 0xF)
    length_row = (table.info[order] & 0xF) * 256
    base = row_base[:-1][order]
    longest = int(counts[0]) if len(counts) else 0
    # Functions with more than `step` FREs: a prefix of `order`, of this many functions.
    walking = np.searchsorted(-counts, -np.arange(longest), side="left")
    position = np.empty(int(row_base[-1]), dtype=np.int64)
    for step, k in enumerate(walking.tolist()):
        at = cursor[:k]
        # mode="clip": a read past the end only happens for an FRE that fails the check below.
        info = octets.take(at + info_offset[:k], mode="clip")
        following = at + _FRE_LENGTHS[length_row[:k] + info]
        position[base[:k] + step] = at
        cursor[:k] = following
    # Each function's cursor only grows, so its last value shows whether any FRE ran over.
    if len(cursor) and int(cursor.max()) > fre_end:
        raise TruncatedError("an FRE runs past the FRE sub-section", None)
    return position


def _start_offsets(
    padded: npt.NDArray[np.uint8], position: I64, fre_type: I64, big_endian: bool
) -> I64:
    """The unsigned 1-, 2- or 4-byte start address at each position."""
    u32 = _every_byte(padded, (">" if big_endian else "<") + "u4")
    raw = u32[position].astype(np.int64)
    bits = 8 << fre_type
    if big_endian:
        return raw >> (32 - bits)
    return raw & ((1 << bits) - 1)


def _every_byte(padded: npt.NDArray[np.uint8], dtype: str) -> npt.NDArray[np.uint64]:
    """A view holding the ``dtype`` value that starts at every byte of ``padded``."""
    size = np.dtype(dtype).itemsize
    view: npt.NDArray[np.uint64] = np.ndarray(
        (len(padded) - size + 1,), dtype=dtype, buffer=padded, strides=(1,)
    )
    return view


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the key hash
_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def _group(
    padded: npt.NDArray[np.uint8], info_at: I64, tail: I64, flex: npt.NDArray[np.bool_]
) -> tuple[I64, I64]:
    """Per row the index of its form, and the first row of each form.

    A form's key is the row's ``tail`` bytes from the info byte on, 8 at a time (bytes past
    the row masked off), and its FDE type."""
    u64 = _every_byte(padded, "<u8")
    longest = int(tail.max()) if len(tail) else 0
    columns = []
    for chunk in range(0, longest, 8):
        keep = _LOW_BYTES[np.clip(tail - chunk, 0, 8)]
        columns.append(u64[info_at + chunk] & keep)
    if bool(flex.any()):
        columns.append(flex.astype(np.uint64))
    if not columns:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # One 64-bit key per row: the columns mixed into a hash, checked below.  Sorting the
    # keys (a vectorized sort) and searching them is several times faster than np.unique.
    key = columns[0]
    for column in columns[1:]:
        key = key * _MIX + column
    ordered = np.sort(key)
    distinct = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    form = np.searchsorted(distinct, key)
    first = np.empty(len(distinct), dtype=np.int64)
    first[form] = np.arange(len(key))  # a row of each form, whichever
    if len(columns) > 1 and not all(np.array_equal(c, c[first][form]) for c in columns):
        # Two forms share a hash: sort on the whole keys (slower).
        whole = np.column_stack(columns)
        _, first, form = np.unique(whole, return_index=True, return_inverse=True, axis=0)
    return form.reshape(-1).astype(np.int64), first.astype(np.int64)


def _form(section: SFrameSection, position: int, info_at: int, flex: bool) -> RowForm:
    """Read the info byte and words of the FRE at ``position``; check them with decode_rules."""
    header = section.header
    info = section.data[info_at]
    size_code = (info >> 5) & 3
    code = (">" if header.big_endian else "<") + f"{(info >> 1) & 0xF}{_WORD_CODES[size_code]}"
    words: tuple[int, ...] = struct.unpack_from(code, section.data, info_at + 1)
    info2 = int(FdeType.FLEX) if flex else 0
    decode_rules(row_context(header, info2), info, words, 1 << size_code, position)
    return RowForm(flex, info, words)
