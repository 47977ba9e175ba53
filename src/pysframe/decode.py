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
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

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
from .errors import (
    BadMagicError,
    InvalidFieldError,
    OutOfBoundsError,
    TruncatedError,
    UnsortedError,
    UnsupportedVersionError,
)
from .model import CfaRule, FrameRow, Header, RegRule
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


def fde_position(header: Header, index: int) -> int:
    """Byte offset of FDE ``index`` in the section."""
    return header.size + header.fde_offset + index * FDE_SIZE[header.version]


def read_fde_table(data: Buffer, header: Header, section_address: int) -> FdeTable:
    """Read all FDEs at once and check what a lookup relies on (bounds, FRE types, order)."""
    order = ">" if header.big_endian else "<"
    count = header.num_fdes
    fde_base = header.size + header.fde_offset
    fre_base = header.size + header.fre_offset
    raw = np.frombuffer(data, dtype=_fde_dtype(header.version, order), count=count, offset=fde_base)
    start_field = raw["start"].astype(np.int64)
    size = raw["size"].astype(np.int64)
    fre_offset = raw["fre_off"].astype(np.int64)
    if header.version is Version.V3:
        num_fres, info, info2, rep_size = _read_v3_attributes(data, header, fre_offset)
        padding = np.zeros(count, dtype=np.int64)
        fre_data = fre_offset + (fre_base + V3_ATTR_SIZE)
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
        fre_data = fre_base + fre_offset
    start = _absolute_starts(header, start_field, section_address)
    table = FdeTable(
        start_field, start, size, fre_offset, num_fres, info, info2, rep_size, padding, fre_data
    )
    _check_table(header, table)
    return table


def _absolute_starts(header: Header, start_field: IntArray, section_address: int) -> U64Array:
    """Function start = stored start + (PCREL ? field address : section address) (errata 1).

    The field address counts sfh_fdeoff.  libsframe 2.47 leaves sfh_fdeoff out of it; the two
    differ only for a section whose FDE sub-section does not follow the header directly, which
    no producer writes.
    """
    starts = start_field.astype(np.uint64)
    starts += np.uint64(section_address % _U64)  # wraps modulo 2**64 like the C code
    if header.pcrel:
        fde_size = FDE_SIZE[header.version]
        first = header.size + header.fde_offset
        starts += np.arange(first, first + len(start_field) * fde_size, fde_size, dtype=np.uint64)
    return starts


def _read_v3_attributes(
    data: Buffer, header: Header, fre_offset: IntArray
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Gather each function's 5-byte attribute record (VERSIONS.md V3)."""
    limit = header.fre_len - V3_ATTR_SIZE
    if len(fre_offset) and int(fre_offset.max()) > limit:
        index = int(np.flatnonzero(fre_offset > limit)[0])
        raise OutOfBoundsError(
            f"function {index}: attribute record at FRE offset {int(fre_offset[index])} runs "
            f"past the {header.fre_len}-byte FRE sub-section",
            fde_position(header, index) + 12,
        )
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
        raise InvalidFieldError(f"function {i}: invalid FRE type {int(fre_type[i])}", None)
    if header.version is Version.V3:
        bad = np.flatnonzero((table.info2 & 0x1F) > int(FdeType.FLEX))
        if bad.size:
            i = int(bad[0])
            raise InvalidFieldError(f"function {i}: invalid FDE type {int(table.info2[i] & 0x1F)}")
    # Each FRE takes at least its start address and info byte (V2 spec 2.4).
    min_fre = (1 << fre_type) + 1
    fre_end = header.size + header.fre_offset + header.fre_len
    fre_bytes = table.num_fres * min_fre
    # One pass for the common case: fre_data + fre_bytes > fre_end also catches room < 0,
    # as fre_bytes >= 0; the error path finds the first bad function as before.
    if len(table) and int((fre_bytes + table.fre_data).max()) > fre_end:
        room = fre_end - table.fre_data
        i = int(np.flatnonzero((room < 0) | (fre_bytes > room))[0])
        raise OutOfBoundsError(
            f"function {i}: {int(table.num_fres[i])} FREs at FRE offset "
            f"{int(table.fre_offset[i])} do not fit in the {header.fre_len}-byte FRE sub-section",
            fde_position(header, i),
        )
    if header.sorted and len(table) > 1:
        bad = np.flatnonzero(table.start[1:] < table.start[:-1])
        if bad.size:
            i = int(bad[0]) + 1
            raise UnsortedError(
                f"FDEs flagged sorted but function {i} starts at {int(table.start[i]):#x}, "
                f"before function {i - 1} at {int(table.start[i - 1]):#x}",
                fde_position(header, i),
            )
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


def decode_rows(
    data: Buffer, header: Header, table: FdeTable, index: int, function_start: int
) -> tuple[FrameRow, ...]:
    """Decode function ``index``'s FREs (V2 spec 2.4), checking every bound."""
    order = ">" if header.big_endian else "<"
    fre_type = int(table.info[index]) & 0xF
    addr_size = 1 << fre_type
    addr_struct = _struct(order, _ADDR_CODES[fre_type], 1)
    ctx = row_context(header, int(table.info2[index]))
    known_rules = _rules_cache(ctx)
    end = header.size + header.fre_offset + header.fre_len
    pos = int(table.fre_data[index])
    rows = []
    for number in range(int(table.num_fres[index])):
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
