"""Encoding: write a header, FDEs and FREs in V1, V2 or V3 layout and either byte order.

The encoder writes what the model holds: each row's raw info byte and words, each function's
info bytes.  Choosing those (smallest FRE type and word size, FLEX or DEFAULT) is the
builder's job.  Layouts are those listed in :mod:`pysframe.decode`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import EncodeError
from .constants import (
    KNOWN_FLAGS,
    SFRAME_MAGIC,
    Abi,
    Flags,
    FreType,
    Version,
)
from .layout import HEADER_SIZE
from .model import FrameRow, Function

_ADDR_CODES = {FreType.ADDR1: "B", FreType.ADDR2: "H", FreType.ADDR4: "I"}
_WORD_CODES = {1: "b", 2: "h", 4: "i"}
_FIELD_RANGE = {Version.V1: 32, Version.V2: 32, Version.V3: 64}


@dataclass(frozen=True, slots=True)
class SectionSpec:
    """What the encoder needs besides the functions."""

    version: Version
    abi: Abi
    flags: Flags
    cfa_fixed_fp_offset: int
    cfa_fixed_ra_offset: int
    big_endian: bool
    auxiliary_header: bytes = b""
    section_address: int = 0
    #: Bytes written after the FRE sub-section (alignment padding of the original section).
    trailing: bytes = b""


def encode_section(
    spec: SectionSpec,
    functions: Sequence[Function],
    fre_block_order: Sequence[int] | None = None,
) -> bytes:
    """Serialize ``functions`` (each with its rows) as an SFrame section.

    ``fre_block_order`` lists function positions in the order their FRE blocks are laid out in
    the FRE sub-section (default: FDE order), so that a linked section, whose FDEs were sorted
    after the FREs were written, re-encodes byte for byte.
    """
    unknown = spec.flags & ~KNOWN_FLAGS[spec.version]
    if unknown:
        raise EncodeError(f"flags {int(unknown):#x} are not defined in SFrame V{int(spec.version)}")
    if len(spec.auxiliary_header) > 0xFF:
        raise EncodeError("auxiliary header longer than 255 bytes")
    order = ">" if spec.big_endian else "<"
    order_list = list(range(len(functions))) if fre_block_order is None else list(fre_block_order)
    if sorted(order_list) != list(range(len(functions))):
        raise EncodeError("fre_block_order must list every function exactly once")
    blocks: dict[int, bytes] = {}
    total_fres = 0
    row_bytes: dict[tuple[int, tuple[int, ...]], bytes] = {}
    for position in order_list:
        function = functions[position]
        rows = function.rows
        total_fres += len(rows)
        blocks[position] = _encode_block(spec, order, function, rows, row_bytes)
    fre_offsets: dict[int, int] = {}
    fre_blob = bytearray()
    for position in order_list:
        fre_offsets[position] = len(fre_blob)
        fre_blob += blocks[position]
    header_size = HEADER_SIZE + len(spec.auxiliary_header)
    fde_blob = bytearray()
    for position, function in enumerate(functions):
        field_offset = header_size + len(fde_blob)
        fde_blob += _encode_fde(spec, order, function, fre_offsets[position], field_offset)
    header = struct.pack(
        order + "HBBBbbBIIIII",
        SFRAME_MAGIC,
        int(spec.version),
        int(spec.flags),
        int(spec.abi),
        spec.cfa_fixed_fp_offset,
        spec.cfa_fixed_ra_offset,
        len(spec.auxiliary_header),
        len(functions),
        total_fres,
        len(fre_blob),
        0,
        len(fde_blob),
    )
    return b"".join((header, spec.auxiliary_header, fde_blob, fre_blob, spec.trailing))


def _stored_start(spec: SectionSpec, function: Function, field_offset: int) -> int:
    """Function start as stored: from the field itself (PCREL) or the section (errata 1)."""
    base = spec.section_address + (field_offset if spec.flags & Flags.FDE_FUNC_START_PCREL else 0)
    bits = _FIELD_RANGE[spec.version]
    value = (function.start - base) % (1 << 64)
    if value >= 1 << 63:
        value -= 1 << 64
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise EncodeError(
            f"function {function.index} at {function.start:#x}: start is {value:#x} bytes from "
            f"{'its FDE' if spec.flags & Flags.FDE_FUNC_START_PCREL else 'the section'}, "
            f"beyond the {bits}-bit field of SFrame V{int(spec.version)}"
        )
    return value


def _check_function(spec: SectionSpec, function: Function) -> None:
    if not 0 <= function.size < 1 << 32:
        raise EncodeError(f"function {function.index}: size {function.size} out of range")
    if not 0 <= function.rep_size < 256:
        raise EncodeError(f"function {function.index}: rep_size {function.rep_size} out of range")
    if spec.version is Version.V1 and function.rep_size:
        raise EncodeError(f"function {function.index}: SFrame V1 has no rep_size field")
    if spec.version is not Version.V3 and (function.info2 or function.info & 0xC0):
        raise EncodeError(f"function {function.index}: FLEX FDEs and signal frames need SFrame V3")


def _encode_fde(
    spec: SectionSpec, order: str, function: Function, fre_offset: int, field_offset: int
) -> bytes:
    _check_function(spec, function)
    start = _stored_start(spec, function, field_offset)
    if spec.version is Version.V3:
        return struct.pack(order + "qII", start, function.size, fre_offset)
    fde = struct.pack(
        order + "iIIIB", start, function.size, fre_offset, len(function.rows), function.info
    )
    if spec.version is Version.V2:
        fde += struct.pack(order + "BH", function.rep_size, function.padding)
    return fde


def _encode_block(
    spec: SectionSpec,
    order: str,
    function: Function,
    rows: Sequence[FrameRow],
    row_bytes: dict[tuple[int, tuple[int, ...]], bytes],
) -> bytes:
    """A function's FRE block; ``row_bytes`` keeps each distinct row's info byte and words
    encoded (sections repeat a few hundred distinct rows many times)."""
    out = bytearray()
    if spec.version is Version.V3:
        if len(rows) > 0xFFFF:
            raise EncodeError(
                f"function {function.index}: {len(rows)} FREs exceed the V3 limit of 65535"
            )
        out += struct.pack(
            order + "HBBB", len(rows), function.info, function.info2, function.rep_size
        )
    fre_type = function.fre_type
    addr = struct.Struct(order + _ADDR_CODES[fre_type])
    for number, row in enumerate(rows):
        if not 0 <= row.start_offset < fre_type.limit:
            raise EncodeError(
                f"function {function.index}: FRE {number} start offset {row.start_offset} does "
                f"not fit FRE type {fre_type.name}"
            )
        out += addr.pack(row.start_offset)
        key = (row.info, row.words)
        encoded = row_bytes.get(key)
        if encoded is None:
            if not 0 <= row.info <= 0xFF:
                raise EncodeError(
                    f"function {function.index}: FRE {number} info {row.info} is not a byte"
                )
            encoded = row_bytes[key] = bytes([row.info]) + _encode_words(
                spec, function, number, row
            )
        out += encoded
    return bytes(out)


_WORD_STRUCTS: dict[tuple[bool, int, int], struct.Struct] = {}


def _encode_words(spec: SectionSpec, function: Function, number: int, row: FrameRow) -> bytes:
    size = row.word_size.size
    if len(row.words) != row.word_count:
        raise EncodeError(
            f"function {function.index}: FRE {number} info byte says {row.word_count} words, "
            f"the row has {len(row.words)}"
        )
    key = (spec.big_endian, size, len(row.words))
    packer = _WORD_STRUCTS.get(key)
    if packer is None:
        order = ">" if spec.big_endian else "<"
        packer = _WORD_STRUCTS[key] = struct.Struct(f"{order}{len(row.words)}{_WORD_CODES[size]}")
    try:
        return packer.pack(*row.words)
    except struct.error:
        raise EncodeError(
            f"function {function.index}: FRE {number}: a word of {row.words} does not fit "
            f"{size} bytes"
        ) from None
