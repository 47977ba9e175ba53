"""Encoding: the one writer of SFrame sections, V1, V2 or V3 layout, either byte order.

Two entries, one writer:

* :func:`assemble_section` writes a header, an FDE table and an FRE sub-section from FDE fields
  given as columns and each function's FREs already encoded (start address fields, info bytes,
  data words).  It checks every field against its layout and lays the FRE blocks out in any
  order.  The generator (:mod:`pysframe.generate`) writes through it directly.
* :func:`encode_section` writes what the model holds (:class:`~pysframe.format.model.Function`
  with its rows: each row's raw info byte and words), by encoding each function's FREs and
  assembling them.  Choosing those bytes (smallest FRE type and word size, FLEX or DEFAULT) is
  the builder's job.

Every layout (header, FDE per version, V3 attribute record, FRE fields) comes from
:mod:`pysframe.format.layout`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from struct import error as StructError
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from ..errors import EncodeError
from .constants import KNOWN_FLAGS, SFRAME_MAGIC, Abi, Flags, Version
from .layout import (
    FDE_INFO_MASK,
    FDE_SIZE,
    FDE_START_BITS,
    HEADER_SIZE,
    V3_ATTR_FIELDS,
    V3_ATTR_SIZE,
    byte_order,
    fde_dtype,
    fre_address_struct,
    fre_words_struct,
    header_struct,
)
from .model import FrameRow, Function

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: A column of FDE fields: a sequence of ints or a numpy integer array.
Column: TypeAlias = "Sequence[int] | npt.NDArray[np.int64]"

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


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


class FdeColumns(NamedTuple):
    """The FDE fields of every function, one column per field, in FDE order.

    ``start`` holds absolute addresses; the writer stores them relative to the section or to
    the field itself (FDE_FUNC_START_PCREL, errata 1).  ``num_fres`` must be the number of FREs
    in the function's block.  Versions without a field (V1 ``rep_size``, V1/V2 ``info2``, all
    but V2 ``padding``) need zeros in its column.
    """

    start: Column
    size: Column
    num_fres: Column
    info: Column
    info2: Column
    rep_size: Column
    padding: Column


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
    _check_spec(spec)
    order = _block_order(len(functions), fre_block_order)
    blocks: list[bytes] = [b""] * len(functions)
    row_bytes: dict[tuple[int, tuple[int, ...]], bytes] = {}
    for position in range(len(functions)) if order is None else order:
        function = functions[position]
        blocks[position] = _encode_block(spec, function, function.rows, row_bytes)
    columns = FdeColumns(
        [f.start for f in functions],
        [f.size for f in functions],
        [len(f.rows) for f in functions],
        [f.info for f in functions],
        [f.info2 for f in functions],
        [f.rep_size for f in functions],
        [f.padding for f in functions],
    )
    return _assemble(spec, columns, blocks, order)


def assemble_section(
    spec: SectionSpec,
    fdes: FdeColumns,
    fre_blocks: Sequence[bytes],
    fre_block_order: Sequence[int] | None = None,
) -> bytes:
    """Write a section from FDE columns and each function's encoded FREs.

    ``fre_blocks[i]`` is function ``i``'s FREs as written (start address field of the
    function's FRE type, info byte, data words; without the V3 attribute record, which is
    written from the columns).  ``fre_block_order`` as for :func:`encode_section`.
    """
    _check_spec(spec)
    return _assemble(spec, fdes, fre_blocks, _block_order(len(fre_blocks), fre_block_order))


def _check_spec(spec: SectionSpec) -> None:
    unknown = spec.flags & ~KNOWN_FLAGS[spec.version]
    if unknown:
        raise EncodeError(f"flags {int(unknown):#x} are not defined in SFrame V{int(spec.version)}")
    if len(spec.auxiliary_header) > 0xFF:
        raise EncodeError("auxiliary header longer than 255 bytes")
    for name in ("cfa_fixed_fp_offset", "cfa_fixed_ra_offset"):
        if not -0x80 <= getattr(spec, name) <= 0x7F:
            raise EncodeError(f"{name} {getattr(spec, name)} does not fit a signed byte")


def _block_order(count: int, fre_block_order: Sequence[int] | None) -> list[int] | None:
    """The block order checked, or None for FDE order."""
    if fre_block_order is None:
        return None
    order = list(fre_block_order)
    if sorted(order) != list(range(count)):
        raise EncodeError("fre_block_order must list every function exactly once")
    return order


def _assemble(
    spec: SectionSpec, fdes: FdeColumns, blocks: Sequence[bytes], order: list[int] | None
) -> bytes:
    import numpy as np

    count = len(blocks)
    if any(len(column) != count for column in fdes):
        raise EncodeError("every FDE column needs one value per FRE block")
    version = spec.version
    v3 = version is Version.V3
    fde_size = FDE_SIZE[version]
    stored = _stored_starts(spec, fdes.start, HEADER_SIZE + len(spec.auxiliary_header), fde_size)
    fields = [_int_column(column) for column in fdes[1:]]
    _check_fields(spec, fdes, stored, fields)
    size, num_fres, info, info2, rep_size, padding = fields

    # The FRE sub-section: the blocks in ``order``, each after its V3 attribute record.
    lengths = np.fromiter(map(len, blocks), dtype=np.int64, count=count)
    position = np.arange(count) if order is None else np.array(order, dtype=np.int64)
    laid_out = (lengths + V3_ATTR_SIZE if v3 else lengths)[position]
    fre_offset = np.zeros(count, dtype=np.int64)
    fre_offset[position] = np.cumsum(laid_out) - laid_out
    fre_len = int(laid_out.sum())
    total_fres = int(num_fres.sum())
    if max(fre_len, total_fres, fde_size * count) > 0xFFFFFFFF:
        raise EncodeError(
            f"{count} FDEs and {total_fres} FREs in {fre_len} bytes exceed the 32-bit fields "
            "of the header"
        )
    ordered_blocks = blocks if order is None else [blocks[p] for p in order]
    if v3:
        attributes = np.zeros(count, dtype=_record_dtype(V3_ATTR_FIELDS, spec.big_endian))
        names = attributes.dtype.names or ()
        for name, column in zip(names, (num_fres, info, info2, rep_size), strict=True):
            attributes[name] = column[position]
        raw = attributes.tobytes()
        pieces = [b""] * (2 * count)
        pieces[0::2] = [
            raw[at : at + V3_ATTR_SIZE] for at in range(0, V3_ATTR_SIZE * count, V3_ATTR_SIZE)
        ]
        pieces[1::2] = ordered_blocks
        fre_blob = b"".join(pieces)
    else:
        fre_blob = b"".join(ordered_blocks)

    table = np.zeros(count, dtype=fde_dtype(version, spec.big_endian))
    table["start"] = stored
    table["size"] = size
    table["fre_off"] = fre_offset
    if not v3:
        table["num_fres"] = num_fres
        table["info"] = info
    if version is Version.V2:
        table["rep_size"] = rep_size
        table["padding"] = padding
    header = header_struct(spec.big_endian).pack(
        SFRAME_MAGIC,
        int(version),
        int(spec.flags),
        int(spec.abi),
        spec.cfa_fixed_fp_offset,
        spec.cfa_fixed_ra_offset,
        len(spec.auxiliary_header),
        count,
        total_fres,
        fre_len,
        0,
        fde_size * count,
    )
    return b"".join((header, spec.auxiliary_header, table.tobytes(), fre_blob, spec.trailing))


def _record_dtype(fields: str, big_endian: bool) -> np.dtype[Any]:
    """numpy record type of a packed struct layout (struct codes are numpy type codes)."""
    import numpy as np

    order = byte_order(big_endian)
    return np.dtype([(f"f{k}", order + code) for k, code in enumerate(fields)])


def _int_column(values: Column) -> npt.NDArray[np.int64]:
    """A column as int64; values beyond int64 are clamped (the range checks report them)."""
    import numpy as np

    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:
        return np.array([min(max(v, _INT64_MIN), _INT64_MAX) for v in values], dtype=np.int64)


def _stored_starts(
    spec: SectionSpec, starts: Column, header_size: int, fde_size: int
) -> npt.NDArray[np.int64]:
    """Function starts as stored: from the field itself (PCREL) or the section (errata 1),
    modulo 2**64 as signed numbers."""
    import numpy as np

    count = len(starts)
    try:
        absolute = np.asarray(starts, dtype=np.int64).astype(np.uint64)
    except OverflowError:
        absolute = np.array([start % (1 << 64) for start in starts], dtype=np.uint64)
    base = np.full(count, spec.section_address % (1 << 64), dtype=np.uint64)
    if spec.flags & Flags.FDE_FUNC_START_PCREL:
        base += (header_size + fde_size * np.arange(count, dtype=np.int64)).astype(np.uint64)
    return (absolute - base).view(np.int64)


def _check_fields(
    spec: SectionSpec,
    given: FdeColumns,
    stored: npt.NDArray[np.int64],
    fields: list[npt.NDArray[np.int64]],
) -> None:
    """Raise EncodeError for the first function (in FDE order) with a field its layout cannot
    hold; a function's fields are checked in the order of the messages below.

    ``given`` are the columns as passed (for messages), ``stored`` the starts as stored and
    ``fields`` the other columns as int64 arrays."""
    import numpy as np

    version = spec.version
    size, num_fres, info, info2, rep_size, padding = fields
    nothing = np.zeros(len(stored), dtype=bool)
    fre_limit = 0xFFFF if version is Version.V3 else 0xFFFFFFFF
    bits = FDE_START_BITS[version]
    pcrel = bool(spec.flags & Flags.FDE_FUNC_START_PCREL)
    checks: list[tuple[npt.NDArray[np.bool_], Callable[[int], str]]] = [
        ((size < 0) | (size > 0xFFFFFFFF), lambda i: f"size {given.size[i]} out of range"),
        (
            (rep_size < 0) | (rep_size > 0xFF),
            lambda i: f"rep_size {given.rep_size[i]} out of range",
        ),
        (
            rep_size != 0 if version is Version.V1 else nothing,
            lambda i: "SFrame V1 has no rep_size field",
        ),
        ((info < 0) | (info > 0xFF), lambda i: f"info {given.info[i]} is not a byte"),
        ((info2 < 0) | (info2 > 0xFF), lambda i: f"info2 {given.info2[i]} is not a byte"),
        (
            (info2 != 0) | ((info & ~FDE_INFO_MASK[version]) != 0)
            if version is not Version.V3
            else nothing,
            lambda i: "FLEX FDEs and signal frames need SFrame V3",
        ),
        (
            (num_fres < 0) | (num_fres > fre_limit),
            lambda i: f"{given.num_fres[i]} FREs exceed the V{int(version)} limit of {fre_limit}",
        ),
        ((padding < 0) | (padding > 0xFFFF), lambda i: f"padding {given.padding[i]} out of range"),
        (
            (stored < -(1 << (bits - 1))) | (stored >= (1 << (bits - 1))) if bits < 64 else nothing,
            lambda i: (
                f"at {int(given.start[i]):#x}: start is {int(stored[i]):#x} bytes from "
                f"{'its FDE' if pcrel else 'the section'}, "
                f"beyond the {bits}-bit field of SFrame V{int(version)}"
            ),
        ),
    ]
    first: tuple[int, Callable[[int], str]] | None = None
    for bad, message in checks:
        where = np.flatnonzero(bad)
        if len(where) and (first is None or where[0] < first[0]):
            first = (int(where[0]), message)
    if first is not None:
        index, message = first
        text = message(index)
        raise EncodeError(f"function {index}{'' if text.startswith('at ') else ':'} {text}")


def _encode_block(
    spec: SectionSpec,
    function: Function,
    rows: Sequence[FrameRow],
    row_bytes: dict[tuple[int, tuple[int, ...]], bytes],
) -> bytes:
    """A function's FREs; ``row_bytes`` keeps each distinct row's info byte and words encoded
    (sections repeat a few hundred distinct rows many times)."""
    if spec.version is Version.V3 and len(rows) > 0xFFFF:
        raise EncodeError(
            f"function {function.index}: {len(rows)} FREs exceed the V3 limit of 65535"
        )
    out = bytearray()
    fre_type = function.fre_type
    address = fre_address_struct(fre_type, spec.big_endian)
    for number, row in enumerate(rows):
        if not 0 <= row.start_offset < fre_type.limit:
            raise EncodeError(
                f"function {function.index}: FRE {number} start offset {row.start_offset} does "
                f"not fit FRE type {fre_type.name}"
            )
        out += address.pack(row.start_offset)
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


def _encode_words(spec: SectionSpec, function: Function, number: int, row: FrameRow) -> bytes:
    if len(row.words) != row.word_count:
        raise EncodeError(
            f"function {function.index}: FRE {number} info byte says {row.word_count} words, "
            f"the row has {len(row.words)}"
        )
    size = row.word_size
    try:
        return fre_words_struct(size, len(row.words), spec.big_endian).pack(*row.words)
    except StructError:
        raise EncodeError(
            f"function {function.index}: FRE {number}: a word of {row.words} does not fit "
            f"{size.size} bytes"
        ) from None
