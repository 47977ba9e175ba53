"""Decoding: probe the preamble once, parse the header, read the lookup index (every
function's start address), read the FDE table in bulk or one FDE alone, and decode one
function's FREs on demand.  Every layout comes from :mod:`pysframe.format.layout`; stepping
through FREs is :mod:`pysframe.format.walk`'s.

numpy is imported by the bulk readers (the lookup index, the FDE table) when they run: the
header, one FDE and one function's rows are read without it
(:class:`~pysframe.format.lookup.SectionLookup`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import (
    BadMagicError,
    InvalidFieldError,
    OutOfBoundsError,
    TruncatedError,
    UnsortedError,
    UnsupportedVersionError,
)
from .constants import SFRAME_MAGIC, Abi, FdeType, Flags, FreType, Version
from .layout import (
    FDE_AT,
    FDE_SIZE,
    HEADER_AT,
    HEADER_FDE_OFF_AT,
    HEADER_FRE_LEN_AT,
    HEADER_FRE_OFF_AT,
    HEADER_SIZE,
    PREAMBLE_SIZE,
    V3_ATTR_AT,
    V3_ATTR_NAMES,
    V3_ATTR_SIZE,
    byte_order,
    fde_dtype,
    fde_fre_type,
    fde_struct,
    fde_type_of,
    fre_min_length,
    header_struct,
    v3_attr_dtype,
    v3_attr_struct,
    word_mask,
)
from .model import FrameRow, Function, Header
from .view import Buffer, FunctionTable, IntArray, U64Array
from .walk import read_rows

if TYPE_CHECKING:
    from ..bounded import BoundedCache
    from .rules import Rules

_U64 = 1 << 64


def probe(data: Buffer) -> tuple[bool, Version]:
    """Return (big_endian, version) from the preamble (V2 spec 2.1)."""
    if len(data) < PREAMBLE_SIZE:
        raise TruncatedError(
            f"section of {len(data)} bytes is shorter than the {PREAMBLE_SIZE}-byte preamble", 0
        )
    at_version = HEADER_AT["version"]
    magic = bytes(data[:at_version])
    if int.from_bytes(magic, "little") == SFRAME_MAGIC:
        big_endian = False
    elif int.from_bytes(magic, "big") == SFRAME_MAGIC:
        big_endian = True
    else:
        raise BadMagicError(f"bad SFrame magic {magic.hex()} (expected e2de or dee2)", 0)
    version = data[at_version]
    if version not in Version._value2member_map_:
        raise UnsupportedVersionError(f"unsupported SFrame version {version}", at_version)
    return big_endian, Version(version)


def parse_header(data: Buffer) -> Header:
    """Parse and bounds-check the header (V2 spec 2.2)."""
    big_endian, version = probe(data)
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
    ) = header_struct(big_endian).unpack_from(data, 0)
    if abi not in Abi._value2member_map_:
        raise InvalidFieldError(f"unknown ABI/arch identifier {abi}", HEADER_AT["abi"])
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
            HEADER_FDE_OFF_AT,
        )
    fre_start = header_end + fre_off
    if fre_start + fre_len > len(data):
        raise OutOfBoundsError(
            f"FRE sub-section ({fre_len} bytes at offset {fre_start:#x}) runs past the end "
            f"of the {len(data)}-byte section",
            HEADER_FRE_OFF_AT,
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
    return header.fre_start + fre_offset + record


# -- the lookup index: every function's start address, read at open ---------------------------


def read_starts(data: Buffer, header: Header, section_address: int) -> U64Array:
    """Every function's absolute start address, in stored order: what a lookup searches.

    Start = stored start + (PCREL ? field address : section address), modulo 2**64 like the C
    code (errata 1).  The field address counts sfh_fdeoff; libsframe 2.47 leaves sfh_fdeoff out
    of it, which differs only for a section whose FDE sub-section does not follow the header
    directly, which no producer writes.  When the section is flagged sorted the order is
    checked here, as a binary search relies on it.
    """
    import numpy as np

    count = header.num_fdes
    fde_size = FDE_SIZE[header.version]
    first = header.size + header.fde_offset
    # The FDEs as records, and their start fields: views, the section is not copied.
    fdes = np.ndarray(
        (count,), dtype=fde_dtype(header.version, header.big_endian), buffer=data, offset=first
    )
    starts = fdes["start"].astype(np.int64)
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
    import numpy as np

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
    version, big_endian = header.version, header.big_endian
    fde = fde_struct(version, big_endian).unpack_from(data, fde_position(header, index))
    padding = rep_size = info2 = 0
    if version is Version.V3:
        start_field, size, fre_offset = fde
        if fre_offset > header.fre_len - V3_ATTR_SIZE:
            raise _attribute_record_error(header, index, fre_offset)
        record = header.fre_start + fre_offset
        num_fres, info, info2, rep_size = v3_attr_struct(big_endian).unpack_from(data, record)
    elif version is Version.V2:
        start_field, size, fre_offset, num_fres, info, rep_size, padding = fde
    else:
        start_field, size, fre_offset, num_fres, info = fde
    fre_type = fde_fre_type(info)
    if fre_type > FreType.ADDR4:
        raise _fre_type_error(index, fre_type)
    if version is Version.V3 and fde_type_of(info2) > FdeType.FLEX:
        raise _fde_type_error(index, info2)
    # Each FRE takes at least its start address and info byte (V2 spec 2.4).
    least = num_fres * fre_min_length(fre_type)
    if fre_data_position(header, fre_offset) + least > header.fre_end:
        raise _fres_do_not_fit(header, index, num_fres, fre_offset)
    return Function(
        index=index,
        start=start,
        size=size,
        start_field=start_field,
        fre_offset=fre_offset,
        num_rows=num_fres,
        info=info,
        info2=info2,
        rep_size=rep_size,
        padding=padding,
        _loader=loader,
    )


def _attribute_record_error(header: Header, index: int, fre_offset: int) -> OutOfBoundsError:
    return OutOfBoundsError(
        f"attribute record at FRE offset {fre_offset} runs past the {header.fre_len}-byte FRE "
        "sub-section",
        fde_position(header, index) + FDE_AT[Version.V3]["fre_off"],
        function=index,
    )


def _fre_type_error(index: int, fre_type: int) -> InvalidFieldError:
    return InvalidFieldError(f"invalid FRE type {fre_type}", function=index)


def _fde_type_error(index: int, info2: int) -> InvalidFieldError:
    return InvalidFieldError(f"invalid FDE type {fde_type_of(info2)}", function=index)


def _fres_do_not_fit(
    header: Header, index: int, num_fres: int, fre_offset: int
) -> OutOfBoundsError:
    return OutOfBoundsError(
        f"{num_fres} FREs at FRE offset {fre_offset} do not fit in the {header.fre_len}-byte "
        "FRE sub-section",
        fde_position(header, index),
        function=index,
    )


# -- every function at once, as columns --------------------------------------------------------


def read_fde_table(data: Buffer, header: Header, start: U64Array) -> FunctionTable:
    """Read all FDEs at once (``start`` from :func:`read_starts`) and check every one, that
    their distinct FRE blocks fit in the FRE sub-section together, and that they count at most
    :data:`MAX_ROWS_PER_BYTE` FREs per byte of the section."""
    import numpy as np

    count = header.num_fdes
    fde_base = header.size + header.fde_offset
    dtype = fde_dtype(header.version, header.big_endian)
    raw = np.frombuffer(data, dtype=dtype, count=count, offset=fde_base)
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
    table = FunctionTable(
        start_field, start, size, fre_offset, num_fres, info, info2, rep_size, padding, fre_data
    )
    _check_table(header, table, len(data))
    return table


def _read_v3_attributes(
    data: Buffer, header: Header, fre_offset: IntArray
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Gather each function's 5-byte attribute record (docs/format.md, "V3 FDE")."""
    import numpy as np

    limit = header.fre_len - V3_ATTR_SIZE
    if len(fre_offset) and int(fre_offset.max()) > limit:
        index = int(np.flatnonzero(fre_offset > limit)[0])
        raise _attribute_record_error(header, index, int(fre_offset[index]))
    if not len(fre_offset):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy(), empty.copy()
    # The records' first four bytes, gathered once through a view with a 4-byte element at
    # every byte, hold num_fres, info and info2: each is cut out of that word.  rep_size is
    # gathered alone.  Two passes over the functions instead of four.
    fre_base = header.fre_start
    big_endian = header.big_endian
    record = v3_attr_dtype(big_endian)
    positions = header.fre_len - V3_ATTR_SIZE + 1  # a record may start at any of these bytes

    def at_every_byte(dtype: str | np.dtype[Any], at: int) -> IntArray:
        view: IntArray = np.ndarray(
            (positions,), dtype=dtype, buffer=data, offset=fre_base + at, strides=(1,)
        )
        return view

    head = at_every_byte(byte_order(big_endian) + "u4", 0)[fre_offset].astype(np.int64)
    fields = []
    for name in V3_ATTR_NAMES:
        at, width = V3_ATTR_AT[name], record[name].itemsize
        if at + width <= 4:
            shift = 8 * (4 - at - width) if big_endian else 8 * at
            fields.append((head >> shift) & word_mask(width))
        else:
            fields.append(at_every_byte(record[name], at)[fre_offset].astype(np.int64))
    num_fres, info, info2, rep_size = fields
    return num_fres, info, info2, rep_size


def _check_table(header: Header, table: FunctionTable, section_size: int) -> None:
    import numpy as np

    fre_type = fde_fre_type(table.info)
    bad = np.flatnonzero(fre_type > FreType.ADDR4)
    if bad.size:
        i = int(bad[0])
        raise _fre_type_error(i, int(fre_type[i]))
    if header.version is Version.V3:
        bad = np.flatnonzero(fde_type_of(table.info2) > int(FdeType.FLEX))
        if bad.size:
            i = int(bad[0])
            raise _fde_type_error(i, int(table.info2[i]))
    # Each FRE takes at least its start address and info byte (V2 spec 2.4).
    min_fre = fre_min_length(fre_type)
    fre_end = header.fre_end
    fre_bytes = table.num_rows * min_fre
    # One pass for the common case: fre_data + fre_bytes > fre_end also catches room < 0,
    # as fre_bytes >= 0; the error path finds the first bad function as before.
    if len(table) and int((fre_bytes + table.fre_data).max()) > fre_end:
        room = fre_end - table.fre_data
        i = int(np.flatnonzero((room < 0) | (fre_bytes > room))[0])
        raise _fres_do_not_fit(header, i, int(table.num_rows[i]), int(table.fre_offset[i]))
    # FDEs may share FRE blocks (sfde_func_start_fre_off is only an offset; pysframe compact
    # points functions with identical FREs at one copy), but blocks at different offsets do
    # not share bytes: together they fit in sfh_fre_len.  A block named with several FRE
    # counts (a V2 prefix) counts once, with the largest.
    record = V3_ATTR_SIZE if header.version is Version.V3 else 0
    needed = _distinct_block_bytes(table.fre_offset, fre_bytes + record)
    if needed > header.fre_len:
        raise OutOfBoundsError(
            f"the {len(table)} functions' FREs need at least {needed} bytes but the FRE "
            f"sub-section has {header.fre_len}: FRE blocks overlap",
            HEADER_FRE_LEN_AT,
        )
    # Whole-section work (the batch lookup's row table, the dump, validation) reads every
    # FDE's FREs, shared or not.  Bound their number by the section's size, so that many
    # FDEs naming one large block cannot make that work quadratic in the input.
    rows = int(table.num_rows.sum())
    if rows > MAX_ROWS_PER_BYTE * section_size:
        raise OutOfBoundsError(
            f"the {len(table)} functions have {rows} FREs, more than {MAX_ROWS_PER_BYTE} per "
            f"byte of the {section_size}-byte section: too many FDEs share FRE blocks",
            HEADER_AT["num_fres"],
        )


#: Most FREs the FDEs of a section may count per byte of the section (shared blocks counted
#: once per FDE).  Sections without shared blocks have at most one FRE per two bytes; the
#: compacted sections of real programs about one per four.
MAX_ROWS_PER_BYTE = 4


def _distinct_block_bytes(fre_offset: IntArray, least: IntArray) -> int:
    """Bytes the FRE blocks take at least: ``least`` per function, once per distinct offset
    (the largest of the functions naming it)."""
    import numpy as np

    if not len(fre_offset):
        return 0
    if bool(np.all(fre_offset[1:] > fre_offset[:-1])):  # the usual layout: every offset once
        return int(least.sum())
    order = np.lexsort((-least, fre_offset))
    offsets = fre_offset[order]
    first = np.concatenate(([True], offsets[1:] != offsets[:-1]))
    return int(least[order][first].sum())


def decode_rows(
    data: Buffer,
    header: Header,
    function: Function,
    known: BoundedCache[tuple[int, int, tuple[int, ...]], Rules] | None = None,
) -> tuple[FrameRow, ...]:
    """Decode ``function``'s FREs (V2 spec 2.4), checking every bound; the first problem in
    FRE order is raised.  ``known``: the caller's rules decoded before
    (:func:`~pysframe.format.walk.read_rows`)."""
    start = function.start
    rows = []
    for start_offset, info, words, (cfa, fp, ra) in read_rows(
        data,
        header,
        function.index,
        fde_fre_type(function.info),
        fre_data_position(header, function.fre_offset),
        function.num_rows,
        function.info2,
        known,
    ):
        rows.append(FrameRow(start_offset, (start + start_offset) % _U64, info, words, cfa, fp, ra))
    return tuple(rows)
