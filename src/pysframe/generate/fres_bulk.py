"""The FREs of many functions at once, with numpy (SFrame V2 spec 2.4; docs/format.md, "V3
FDE").

The bulk path (:mod:`pysframe.generate.bulk`) gives the rows of a chunk's programs as
:class:`~pysframe.generate.rows.RowState` columns.  Each distinct row is checked and encoded
once, by the code the per-function path uses (:func:`encode_rows`), each function's rows are
its program's rows before its end (:func:`function_rows`), and the FREs of every function are
written in one pass: start address field by FRE type, then the row's info byte and data words
(:func:`write_fres`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..errors import EncodeError
from ..format.constants import FreType
from ..format.layout import FRE_ADDRESS_CODES, byte_order, fre_address_size
from .instructions_bulk import BoolArray, ByteArray, Column, IntArray
from .rows import FunctionEncoder, RowState, row_at
from .translator import row_problem

#: Row starts and function sizes are combined with the program number in one int64 key.
_KEY_SHIFT = 33


class RowBytes(NamedTuple):
    """The encoded form of every row (FRE info byte and data words), through its distinct row."""

    #: Per row: the number of its distinct row.
    code: IntArray
    #: Per distinct row: its bytes (info byte, then words), zero-padded to the longest.
    table: ByteArray
    #: Per distinct row: how many bytes of ``table`` are its.
    length: IntArray
    #: Per distinct row: gas' end-of-function checks refuse it, or it cannot be encoded.
    refused: BoolArray


def encode_rows(
    rows: RowState[Column], varying: Sequence[Column], encoder: FunctionEncoder
) -> RowBytes:
    """Check and encode each distinct row once, with the per-function path's code: gas'
    end-of-function checks (:func:`~pysframe.generate.translator.row_problem`) and the format
    core's encoder (:meth:`~pysframe.generate.rows.FunctionEncoder.row`).  ``varying`` are the
    columns in which the rows differ (the others hold one value)."""
    representative, code = _distinct_rows(varying)
    encoded: list[bytes] = []
    refused = np.zeros(len(representative), dtype=bool)
    for number, index in enumerate(representative.tolist()):
        state = row_at(rows, index)
        try:
            encoded.append(encoder.row(state, False))
        except EncodeError:  # the per-function path raises it
            encoded.append(b"")
            refused[number] = True
        else:
            refused[number] = bool(row_problem(state, encoder.params))
    width = max(map(len, encoded), default=1)
    table = np.frombuffer(b"".join(raw.ljust(width, b"\0") for raw in encoded), dtype=np.uint8)
    length = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return RowBytes(code, table.reshape(len(encoded), width), length, refused)


def _distinct_rows(columns: Sequence[Column]) -> tuple[IntArray, IntArray]:
    """(one row of each distinct value, the number of each row's distinct value)."""
    count = len(columns[0])
    if not count:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    values = [np.asarray(column, dtype=np.int64) for column in columns]
    # One int64 key per row when the value ranges allow (they nearly always do).
    key = np.zeros(count, dtype=np.int64)
    product = 1
    for column in values:
        low = int(column.min())
        span = int(column.max()) - low + 1
        product *= span
        if product >= 1 << 62:
            break
        key = key * span + (column - low)
    if product < 1 << 62:
        _, code = np.unique(key, return_inverse=True)
    else:
        _, code = np.unique(np.stack(values, axis=1), axis=0, return_inverse=True)
    code = code.ravel().astype(np.int64)
    representative = np.zeros(int(code.max()) + 1, dtype=np.int64)
    representative[code] = np.arange(count, dtype=np.int64)
    return representative, code


def function_rows(
    row_program: IntArray, row_begin: IntArray, programs: IntArray, sizes: IntArray
) -> tuple[IntArray, IntArray]:
    """[first, end) row numbers of each function: its program's rows that start before its
    end (:func:`pysframe.generate.translator.rows_before_end` of one function)."""
    key = (row_program << _KEY_SHIFT) | row_begin
    first = np.searchsorted(key, programs << _KEY_SHIFT, side="left")
    end = np.searchsorted(key, (programs << _KEY_SHIFT) | np.minimum(sizes, 1 << 32), side="left")
    return first, end


def write_fres(
    row_begin: IntArray,
    encoded: RowBytes,
    first: IntArray,
    end: IntArray,
    fre_types: IntArray,
    big_endian: bool,
) -> tuple[bytes, IntArray]:
    """The FREs of every function, one after the other, and where each function's start
    (one more offset than functions): start address field (1, 2 or 4 bytes by FRE type),
    then the row's encoded info byte and data words."""
    counts = end - first
    total = int(counts.sum())
    function_of = np.repeat(np.arange(len(first)), counts)
    before = np.cumsum(counts) - counts
    row = np.repeat(first - before, counts) + np.arange(total, dtype=np.int64)
    width = fre_address_size(fre_types[function_of])
    code = encoded.code[row]
    row_length = encoded.length[code]
    # Each FRE in a slot: the widest start address field, then the longest encoded row.
    address = np.dtype(byte_order(big_endian) + FRE_ADDRESS_CODES[FreType.ADDR4])
    field = address.itemsize
    slots = np.empty((total, field + encoded.table.shape[1]), dtype=np.uint8)
    slots[:, :field] = row_begin[row].astype(address).view(np.uint8).reshape(total, field)
    slots[:, field:] = encoded.table[code]
    present = np.empty(slots.shape, dtype=bool)
    k = np.arange(field)
    # The address's low bytes: at the field's end in big-endian order.
    if big_endian:
        present[:, :field] = k[None, :] >= field - width[:, None]
    else:
        present[:, :field] = k[None, :] < width[:, None]
    present[:, field:] = np.arange(encoded.table.shape[1])[None, :] < row_length[:, None]
    data = slots[present].tobytes()
    offsets = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(width + row_length, out=offsets[1:])
    bounds = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    return data, offsets[bounds]


__all__ = [
    "RowBytes",
    "encode_rows",
    "function_rows",
    "write_fres",
]
