"""Decoding: probe the preamble once, parse the header, read the FDE table in bulk, and decode
one function's FREs on demand.

Layouts (all in the section's byte order, detected from the magic, V2 spec 2.1.1):

* header, 28 bytes + sfh_auxhdr_len (V2 spec 2.2);
* V1 FDE, 17 bytes packed: i32 start, u32 size, u32 fre_off, u32 num_fres, u8 info (V1 spec);
* V2 FDE, 20 bytes: the V1 fields then u8 rep_size, u16 padding (V2 spec 2.3);
* V3 FDE index entry, 16 bytes: i64 start, u32 size, u32 fre_off, and at fre_off in the FRE
  sub-section a 5-byte attribute record u16 num_fres, u8 info, u8 info2, u8 rep_size
  (VERSIONS.md V3);
* FRE: start address (1, 2 or 4 bytes by FRE type), u8 info, then N words of 1, 2 or 4 bytes
  (V2 spec 2.4).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import (
    BadMagicError,
    InvalidFieldError,
    OutOfBoundsError,
    TruncatedError,
    UnsortedError,
    UnsupportedVersionError,
)
from .constants import (
    FDE_SIZE,
    HEADER_SIZE,
    SFRAME_MAGIC,
    V3_ATTR_SIZE,
    Abi,
    FdeType,
    Flags,
    Version,
)
from .model import CfaRule, FrameRow, Function, Header, RegRule
from .rules import RowContext, decode_rules

Buffer = bytes | bytearray | memoryview
IntArray = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]

_HEADER_FIELDS = "HBBBbbBIIIII"
_U64 = 1 << 64


def probe(data: Buffer) -> tuple[bool, Version]:
    """Return (big_endian, version) from the preamble (V2 spec 2.1)."""
    if len(data) < 4:
        raise TruncatedError(f"section of {len(data)} bytes is shorter than the 4-byte preamble", 0)
    magic_le = int.from_bytes(data[0:2], "little")
    if magic_le == SFRAME_MAGIC:
        big_endian = False
    elif int.from_bytes(data[0:2], "big") == SFRAME_MAGIC:
        big_endian = True
    else:
        raise BadMagicError(f"bad SFrame magic {bytes(data[0:2]).hex()} (expected e2de or dee2)", 0)
    version = data[2]
    if version not in Version._value2member_map_:
        raise UnsupportedVersionError(f"unsupported SFrame version {version}", 2)
    return big_endian, Version(version)


def parse_header(data: Buffer) -> Header:
    """Parse and bounds-check the header (V2 spec 2.2)."""
    big_endian, version = probe(data)
    order = ">" if big_endian else "<"
    if len(data) < HEADER_SIZE:
        raise TruncatedError(
            f"section of {len(data)} bytes is shorter than the {HEADER_SIZE}-byte header", 0
        )
    (
        _,
        _,
        flags,
        abi,
        fixed_fp,
        fixed_ra,
        aux_len,
        num_fdes,
        num_fres,
        fre_len,
        fde_off,
        fre_off,
    ) = struct.unpack_from(order + _HEADER_FIELDS, data, 0)
    if abi not in Abi._value2member_map_:
        raise InvalidFieldError(f"unknown ABI/arch identifier {abi}", 4)
    header_end = HEADER_SIZE + aux_len
    if len(data) < header_end:
        raise TruncatedError(
            f"auxiliary header of {aux_len} bytes runs past the end of the section", HEADER_SIZE
        )
    fde_bytes = num_fdes * FDE_SIZE[version]
    fde_start = header_end + fde_off
    if fde_start + fde_bytes > len(data):
        raise OutOfBoundsError(
            f"FDE sub-section ({num_fdes} FDEs of {FDE_SIZE[version]} bytes at offset "
            f"{fde_start:#x}) runs past the end of the {len(data)}-byte section",
            0x14,
        )
    fre_start = header_end + fre_off
    if fre_start + fre_len > len(data):
        raise OutOfBoundsError(
            f"FRE sub-section ({fre_len} bytes at offset {fre_start:#x}) runs past the end "
            f"of the {len(data)}-byte section",
            0x18,
        )
    return Header(
        version=version,
        flags=Flags(flags),
        abi=Abi(abi),
        cfa_fixed_fp_offset=fixed_fp,
        cfa_fixed_ra_offset=fixed_ra,
        auxiliary_header=bytes(data[HEADER_SIZE:header_end]),
        num_fdes=num_fdes,
        num_fres=num_fres,
        fre_len=fre_len,
        fde_offset=fde_off,
        fre_offset=fre_off,
        big_endian=big_endian,
    )


def fde_position(header: Header, index: int) -> int:
    """Byte offset of FDE ``index`` in the section."""
    return header.size + header.fde_offset + index * FDE_SIZE[header.version]


def fre_data_position(header: Header, fre_offset: int) -> int:
    """Byte offset of the first FRE of a function whose sfde_func_start_fre_off is
    ``fre_offset`` (V3: past its attribute record)."""
    record = V3_ATTR_SIZE if header.version is Version.V3 else 0
    return header.size + header.fre_offset + fre_offset + record


# -- the lookup index: every function's start address, read at open ---------------------------


def read_starts(data: Buffer, header: Header, section_address: int) -> U64Array:
    """Every function's absolute start address, in stored order: what a lookup searches.

    Start = stored start + (PCREL ? field address : section address), modulo 2**64 like the C
    code (errata 1).  The field address counts sfh_fdeoff; libsframe 2.47 leaves sfh_fdeoff out
    of it, which differs only for a section whose FDE sub-section does not follow the header
    directly, which no producer writes.  When the section is flagged sorted the order is
    checked here, as a binary search relies on it.
    """
    count = header.num_fdes
    fde_size = FDE_SIZE[header.version]
    first = header.size + header.fde_offset
    order = ">" if header.big_endian else "<"
    code = order + ("i8" if header.version is Version.V3 else "i4")
    # One strided gather of the start fields (a view: the section is not copied).
    fields = np.ndarray((count,), dtype=code, buffer=data, offset=first, strides=(fde_size,))
    starts = fields.astype(np.int64)
    addend = section_address % _U64
    addend -= _U64 if addend >> 63 else 0  # the same bits as a signed 64-bit number
    if header.pcrel:
        low, high = first + addend, first + addend + count * fde_size
        if low >= -(1 << 63) and high < (1 << 63):
            starts += np.arange(low, high, fde_size, dtype=np.int64)
        else:  # the sum wraps: add the two parts separately, each wrapping like the C code
            starts += np.arange(first, first + count * fde_size, fde_size, dtype=np.int64)
            starts += np.int64(addend)
    elif addend:
        starts += np.int64(addend)
    unsigned: U64Array = starts.view(np.uint64)
    unsigned.flags.writeable = False
    if header.sorted:
        _check_sorted(header, unsigned)
    return unsigned


def _check_sorted(header: Header, starts: U64Array) -> None:
    if len(starts) < 2:
        return
    backwards = np.less(starts[1:], starts[:-1])
    if backwards.any():
        i = int(backwards.argmax()) + 1
        raise UnsortedError(
            f"FDEs flagged sorted but function {i} starts at {int(starts[i]):#x}, "
            f"before function {i - 1} at {int(starts[i - 1]):#x}",
            fde_position(header, i),
        )


# -- one function, read and checked on its own ------------------------------------------------


def read_function(
    data: Buffer,
    header: Header,
    index: int,
    start: int,
    loader: Callable[[Function], tuple[FrameRow, ...]] | None = None,
) -> Function:
    """FDE ``index`` (V2 spec 2.3; V3 index entry and attribute record), with the checks
    :func:`read_fde_table` makes on every FDE (the same errors)."""
    order = ">" if header.big_endian else "<"
    position = fde_position(header, index)
    padding = rep_size = info2 = 0
    if header.version is Version.V3:
        start_field, size, fre_offset = _struct(order, "qII", 1).unpack_from(data, position)
        if fre_offset > header.fre_len - V3_ATTR_SIZE:
            raise _attribute_record_error(header, index, fre_offset)
        record = header.size + header.fre_offset + fre_offset
        num_fres, info, info2, rep_size = _struct(order, "HBBB", 1).unpack_from(data, record)
    elif header.version is Version.V2:
        start_field, size, fre_offset, num_fres, info, rep_size, padding = _struct(
            order, "iIIIBBH", 1
        ).unpack_from(data, position)
    else:
        start_field, size, fre_offset, num_fres, info = _struct(order, "iIIIB", 1).unpack_from(
            data, position
        )
    fre_type = info & 0xF
    if fre_type > 2:
        raise _fre_type_error(index, fre_type)
    if header.version is Version.V3 and (info2 & 0x1F) > FdeType.FLEX:
        raise _fde_type_error(index, info2)
    fre_end = header.size + header.fre_offset + header.fre_len
    # Each FRE takes at least its start address and info byte (V2 spec 2.4).
    if fre_data_position(header, fre_offset) + num_fres * ((1 << fre_type) + 1) > fre_end:
        raise _fres_do_not_fit(header, index, num_fres, fre_offset)
    return Function(
        index=index,
        start=start,
        size=size,
        start_field=start_field,
        fre_offset=fre_offset,
        num_fres=num_fres,
        info=info,
        info2=info2,
        rep_size=rep_size,
        padding=padding,
        _loader=loader,
    )


def _attribute_record_error(header: Header, index: int, fre_offset: int) -> OutOfBoundsError:
    return OutOfBoundsError(
        f"function {index}: attribute record at FRE offset {fre_offset} runs "
        f"past the {header.fre_len}-byte FRE sub-section",
        fde_position(header, index) + 12,
    )


def _fre_type_error(index: int, fre_type: int) -> InvalidFieldError:
    return InvalidFieldError(f"function {index}: invalid FRE type {fre_type}", None)


def _fde_type_error(index: int, info2: int) -> InvalidFieldError:
    return InvalidFieldError(f"function {index}: invalid FDE type {info2 & 0x1F}")


def _fres_do_not_fit(
    header: Header, index: int, num_fres: int, fre_offset: int
) -> OutOfBoundsError:
    return OutOfBoundsError(
        f"function {index}: {num_fres} FREs at FRE offset {fre_offset} do not fit in the "
        f"{header.fre_len}-byte FRE sub-section",
        fde_position(header, index),
    )


# -- every function at once, as columns --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FdeTable:
    """The FDE sub-section as columns (one element per function, in stored order)."""

    start_field: IntArray
    start: U64Array
    size: IntArray
    fre_offset: IntArray
    num_fres: IntArray
    info: IntArray
    info2: IntArray
    rep_size: IntArray
    padding: IntArray
    #: Byte offset of each function's first FRE (after the V3 attribute record).
    fre_data: IntArray

    def __len__(self) -> int:
        return len(self.start)


def _fde_dtype(version: Version, order: str) -> np.dtype[Any]:
    if version is Version.V3:
        return np.dtype(
            {
                "names": ["start", "size", "fre_off"],
                "formats": [order + "i8", order + "u4", order + "u4"],
                "offsets": [0, 8, 12],
                "itemsize": 16,
            }
        )
    names = ["start", "size", "fre_off", "num_fres", "info"]
    formats = [order + "i4", order + "u4", order + "u4", order + "u4", "u1"]
    offsets = [0, 4, 8, 12, 16]
    if version is Version.V2:
        names += ["rep_size", "padding"]
        formats += ["u1", order + "u2"]
        offsets += [17, 18]
    return np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": FDE_SIZE[version]}
    )


def read_fde_table(data: Buffer, header: Header, start: U64Array) -> FdeTable:
    """Read all FDEs at once (``start`` from :func:`read_starts`) and check every one, and
    that their FRE blocks fit in the FRE sub-section together."""
    order = ">" if header.big_endian else "<"
    count = header.num_fdes
    fde_base = header.size + header.fde_offset
    raw = np.frombuffer(data, dtype=_fde_dtype(header.version, order), count=count, offset=fde_base)
    start_field = raw["start"].astype(np.int64)
    size = raw["size"].astype(np.int64)
    fre_offset = raw["fre_off"].astype(np.int64)
    if header.version is Version.V3:
        num_fres, info, info2, rep_size = _read_v3_attributes(data, header, fre_offset)
        padding = np.zeros(count, dtype=np.int64)
    else:
        num_fres = raw["num_fres"].astype(np.int64)
        info = raw["info"].astype(np.int64)
        info2 = np.zeros(count, dtype=np.int64)
        if header.version is Version.V2:
            rep_size = raw["rep_size"].astype(np.int64)
            padding = raw["padding"].astype(np.int64)
        else:
            rep_size = np.zeros(count, dtype=np.int64)
            padding = np.zeros(count, dtype=np.int64)
    fre_data = fre_offset + fre_data_position(header, 0)
    table = FdeTable(
        start_field, start, size, fre_offset, num_fres, info, info2, rep_size, padding, fre_data
    )
    _check_table(header, table)
    return table


def _read_v3_attributes(
    data: Buffer, header: Header, fre_offset: IntArray
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Gather each function's 5-byte attribute record (VERSIONS.md V3)."""
    limit = header.fre_len - V3_ATTR_SIZE
    if len(fre_offset) and int(fre_offset.max()) > limit:
        index = int(np.flatnonzero(fre_offset > limit)[0])
        raise _attribute_record_error(header, index, int(fre_offset[index]))
    if not len(fre_offset):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy(), empty.copy()
    # One gather of the first four bytes (num_fres, info, info2) through a view with a
    # 4-byte element starting at every byte, and one of rep_size: two passes instead of five.
    fre_base = header.size + header.fre_offset
    order = ">" if header.big_endian else "<"
    at_every_byte = np.ndarray(
        (header.fre_len - 3,), dtype=order + "u4", buffer=data, offset=fre_base, strides=(1,)
    )
    head = at_every_byte[fre_offset].astype(np.int64)
    rep_size = np.frombuffer(data, np.uint8, header.fre_len - 4, fre_base + 4)[fre_offset]
    if header.big_endian:
        num_fres, info, info2 = head >> 16, (head >> 8) & 0xFF, head & 0xFF
    else:
        num_fres, info, info2 = head & 0xFFFF, (head >> 16) & 0xFF, head >> 24
    return num_fres, info, info2, rep_size.astype(np.int64)


def _check_table(header: Header, table: FdeTable) -> None:
    fre_type = table.info & 0xF
    bad = np.flatnonzero(fre_type > 2)
    if bad.size:
        i = int(bad[0])
        raise _fre_type_error(i, int(fre_type[i]))
    if header.version is Version.V3:
        bad = np.flatnonzero((table.info2 & 0x1F) > int(FdeType.FLEX))
        if bad.size:
            i = int(bad[0])
            raise _fde_type_error(i, int(table.info2[i]))
    # Each FRE takes at least its start address and info byte (V2 spec 2.4).
    min_fre = (1 << fre_type) + 1
    fre_end = header.size + header.fre_offset + header.fre_len
    fre_bytes = table.num_fres * min_fre
    # One pass for the common case: fre_data + fre_bytes > fre_end also catches room < 0,
    # as fre_bytes >= 0; the error path finds the first bad function as before.
    if len(table) and int((fre_bytes + table.fre_data).max()) > fre_end:
        room = fre_end - table.fre_data
        i = int(np.flatnonzero((room < 0) | (fre_bytes > room))[0])
        raise _fres_do_not_fit(header, i, int(table.num_fres[i]), int(table.fre_offset[i]))
    # FRE blocks (and V3 attribute records) of different functions do not share bytes, so
    # together they fit in sfh_fre_len.  This bounds the number of rows by the input size:
    # without it, many FDEs naming one large block make row tables quadratic in the input.
    record = V3_ATTR_SIZE if header.version is Version.V3 else 0
    needed = int(fre_bytes.sum()) + record * len(table)
    if needed > header.fre_len:
        raise OutOfBoundsError(
            f"the {len(table)} functions' FREs need at least {needed} bytes but the FRE "
            f"sub-section has {header.fre_len}: FRE blocks overlap",
            0x10,
        )


_WORD_CODES = {0: "b", 1: "h", 2: "i"}
_ADDR_CODES = {0: "B", 1: "H", 2: "I"}
_STRUCTS: dict[tuple[str, str, int], struct.Struct] = {}


def _struct(order: str, code: str, count: int) -> struct.Struct:
    key = (order, code, count)
    found = _STRUCTS.get(key)
    if found is None:
        found = _STRUCTS[key] = struct.Struct(f"{order}{count}{code}")
    return found


#: Decoded rules per row context, keyed by (info, words, word size).  Real sections repeat a few
#: hundred distinct rows across hundreds of thousands of FREs, so decode_rows looks them up
#: instead of decoding each again; the values are immutable and can be shared.  Bounded: each
#: map is emptied when it reaches _RULES_CACHE_LIMIT entries.
_RulesKey = tuple[int, tuple[int, ...], int]
_Rules = tuple[CfaRule | None, RegRule, RegRule]
_RULES_CACHES: dict[RowContext, dict[_RulesKey, _Rules]] = {}
_RULES_CACHE_LIMIT = 1 << 14


def _rules_cache(ctx: RowContext) -> dict[_RulesKey, _Rules]:
    cache = _RULES_CACHES.get(ctx)
    if cache is None:
        if len(_RULES_CACHES) >= 64:
            _RULES_CACHES.clear()
        cache = _RULES_CACHES[ctx] = {}
    elif len(cache) >= _RULES_CACHE_LIMIT:
        cache.clear()
    return cache


def row_context(header: Header, info2: int) -> RowContext:
    fde_type = FdeType.FLEX if (info2 & 0x1F) == FdeType.FLEX else FdeType.DEFAULT
    return RowContext(
        header.abi, header.version, fde_type, header.cfa_fixed_fp_offset, header.cfa_fixed_ra_offset
    )


def decode_rows(data: Buffer, header: Header, function: Function) -> tuple[FrameRow, ...]:
    """Decode ``function``'s FREs (V2 spec 2.4), checking every bound."""
    index, function_start = function.index, function.start
    order = ">" if header.big_endian else "<"
    fre_type = function.info & 0xF
    addr_size = 1 << fre_type
    addr_struct = _struct(order, _ADDR_CODES[fre_type], 1)
    ctx = row_context(header, function.info2)
    known_rules = _rules_cache(ctx)
    end = header.size + header.fre_offset + header.fre_len
    pos = fre_data_position(header, function.fre_offset)
    rows = []
    for number in range(function.num_fres):
        if pos + addr_size + 1 > end:
            raise TruncatedError(
                f"function {index}: FRE {number} runs past the FRE sub-section", pos
            )
        (start_offset,) = addr_struct.unpack_from(data, pos)
        info = data[pos + addr_size]
        count = (info >> 1) & 0xF
        size_code = (info >> 5) & 0x3
        if size_code == 3:
            raise InvalidFieldError(
                f"function {index}: FRE {number} has invalid data-word size code 3", pos + addr_size
            )
        word_size = 1 << size_code
        words_at = pos + addr_size + 1
        if words_at + count * word_size > end:
            raise TruncatedError(
                f"function {index}: data words of FRE {number} run past the FRE sub-section", pos
            )
        words: tuple[int, ...] = _struct(order, _WORD_CODES[size_code], count).unpack_from(
            data, words_at
        )
        key = (info, words, word_size)
        rules = known_rules.get(key)
        if rules is None:
            rules = known_rules[key] = decode_rules(ctx, info, words, word_size, pos)
        cfa, fp, ra = rules
        rows.append(
            FrameRow(
                start_offset=start_offset,
                start_address=(function_start + start_offset) % _U64,
                info=info,
                words=words,
                cfa=cfa,
                fp=fp,
                ra=ra,
            )
        )
        pos = words_at + count * word_size
    return tuple(rows)
