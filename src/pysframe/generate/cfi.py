"""DWARF call-frame information records: the CIEs and FDEs of ``.eh_frame`` / ``.debug_frame``.

Sections cited are from DWARF 5 (6.4 "Call Frame Information") and the Linux Standard Base
Core specification (LSB 5.0, 10.6 "Exception Frames": ``.eh_frame``, augmentations and pointer
encodings).

* :func:`records`, :func:`parse_cie` and :func:`parse_fde` read the section one record at a
  time (augmentations ``z``, ``R``, ``P``, ``L``, ``S``, ``B``, ``G``; ``eh``; every pointer
  encoding and application, ``indirect`` through a caller-supplied memory reader).
* :func:`scan_fdes` gives what the generator needs of a whole section: the CIEs, and per FDE
  its CIE, address range and instruction bytes; a well-formed ``.eh_frame`` is scanned with
  numpy, anything else record by record, with the same result.

The instructions themselves are decoded by :mod:`pysframe.generate.ops`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from ..errors import CfiError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# ---------------------------------------------------------------------------------------------
# Pointer encodings (LSB 5.0 10.5 "DWARF Extensions", DW_EH_PE_*)

DW_EH_PE_absptr = 0x00
DW_EH_PE_uleb128 = 0x01
DW_EH_PE_udata2 = 0x02
DW_EH_PE_udata4 = 0x03
DW_EH_PE_udata8 = 0x04
DW_EH_PE_sleb128 = 0x09
DW_EH_PE_sdata2 = 0x0A
DW_EH_PE_sdata4 = 0x0B
DW_EH_PE_sdata8 = 0x0C
DW_EH_PE_pcrel = 0x10
DW_EH_PE_textrel = 0x20
DW_EH_PE_datarel = 0x30
DW_EH_PE_funcrel = 0x40
DW_EH_PE_aligned = 0x50
DW_EH_PE_indirect = 0x80
DW_EH_PE_omit = 0xFF
#: The FDE pointer encoding GCC and GNU as use in ``.eh_frame``.
_PCREL_SDATA4 = DW_EH_PE_pcrel | DW_EH_PE_sdata4


class CfiFormat(Enum):
    """Which section the records come from (their CIE pointers and addresses differ)."""

    EH_FRAME = "eh_frame"
    DEBUG_FRAME = "debug_frame"


@dataclass(frozen=True, slots=True)
class PointerContext:
    """Bases for pointer encodings: the section's own address and the optional others.

    ``read_memory(address, size)`` resolves ``DW_EH_PE_indirect`` pointers; None makes an
    indirect pointer an error (for the FDE address range) or keeps the pointer's address
    (personality, LSDA: see :attr:`Cie.personality_indirect`).
    """

    section_address: int = 0
    text_base: int | None = None
    data_base: int | None = None
    read_memory: Callable[[int, int], bytes] | None = None


@dataclass(frozen=True, slots=True)
class Cie:
    """A Common Information Entry (DWARF 5 6.4.1, LSB 10.6.1.1)."""

    #: Byte offset of the record (its length field) in the section.
    offset: int
    version: int
    augmentation: str
    code_alignment: int
    data_alignment: int
    return_column: int
    address_size: int
    #: Pointer encoding of FDE addresses ('R'); absptr without it.
    fde_encoding: int
    #: Pointer encoding of the LSDA pointer in FDEs ('L'); DW_EH_PE_omit without it.
    lsda_encoding: int
    #: Personality routine address ('P'), None without it.
    personality: int | None
    #: True when the personality pointer is indirect and was not resolved (address of the slot).
    personality_indirect: bool
    #: 'S': the FDEs using this CIE describe signal trampolines.
    signal_frame: bool
    #: 'B': AArch64 return addresses are signed with the B key.
    b_key: bool
    #: 'G': AArch64 MTE-tagged frames.
    mte_tagged: bool
    #: [start, end) byte offsets of the initial instructions in the section.
    instructions_start: int
    instructions_end: int


@dataclass(frozen=True, slots=True)
class Fde:
    """A Frame Description Entry (DWARF 5 6.4.1, LSB 10.6.1.2)."""

    offset: int
    cie: Cie
    pc_begin: int
    pc_range: int
    lsda: int | None
    instructions_start: int
    instructions_end: int

    @property
    def pc_end(self) -> int:
        return self.pc_begin + self.pc_range


class Reader:
    """Cursor over section bytes with the section's byte order; errors name the offset."""

    __slots__ = ("data", "end", "order", "u16", "u32", "u64")

    def __init__(self, data: bytes, big_endian: bool) -> None:
        self.data = data
        self.end = len(data)
        order = ">" if big_endian else "<"
        self.order = order
        self.u16 = struct.Struct(order + "H").unpack_from
        self.u32 = struct.Struct(order + "I").unpack_from
        self.u64 = struct.Struct(order + "Q").unpack_from


_SIGNED = {2: 1 << 16, 4: 1 << 32, 8: 1 << 64}


#: Bits an LEB128 number may carry: DWARF's values here (offsets, register numbers, lengths)
#: are 64-bit.  Longer encodings may only pad (groups of zeros, or of ones after a negative
#: number); anything else is malformed.  Bounding the value keeps decoding linear in the
#: encoding's length (no huge integers).
_LEB_BITS = 64
#: Bits read before only padding may follow: the 7-bit groups that cover 64 bits.
_LEB_READ_BITS = 7 * 10


def _leb(data: bytes, pos: int, end: int, signed: bool) -> tuple[int, int]:
    """(value, next position) of an LEB128 at ``pos`` (DWARF 5 7.6)."""
    start = pos
    result = 0
    shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        if shift < _LEB_READ_BITS:
            result |= (byte & 0x7F) << shift
        elif byte & 0x7F not in (0, 0x7F if signed else 0):
            raise CfiError("LEB128 number does not fit in 64 bits", start)
        shift += 7
        if byte < 0x80:
            if signed and byte & 0x40:
                result -= 1 << min(shift, _LEB_READ_BITS)
            if not -(1 << (_LEB_BITS - 1)) <= result < (1 << _LEB_BITS):
                raise CfiError("LEB128 number does not fit in 64 bits", start)
            return result, pos
    raise CfiError("LEB128 number runs past the end of its record", pos)


#: A function's CFA program may hold this many bytes per byte of code, plus CFI_SLACK; real
#: programs hold well under one (a few instructions per prologue and epilogue).  Longer ones
#: are floods (of rows or operands), refused before they are decoded.
MAX_CFI_BYTES_PER_CODE_BYTE = 16
CFI_SLACK = 256


def oversized_program(span: FdeSpan) -> str | None:
    """Why the FDE ``span`` (CIE offset, start, size, program start, program end; as
    :func:`scan_fdes` gives it) is malformed for its length, or None."""
    _, _, size, begin, end = span
    if end - begin > MAX_CFI_BYTES_PER_CODE_BYTE * size + CFI_SLACK:
        return f"CFI program of {end - begin} bytes for {size} bytes of code (malformed)"
    return None


def read_uleb(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of an unsigned LEB128 at ``pos`` (DWARF 5 7.6)."""
    return _leb(data, pos, end, signed=False)


def read_sleb(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of a signed LEB128 at ``pos`` (DWARF 5 7.6)."""
    return _leb(data, pos, end, signed=True)


def _read_fixed(r: Reader, pos: int, size: int, end: int) -> int:
    if pos + size > end:
        raise CfiError(f"{size}-byte field runs past the end of its record", pos)
    if size == 8:
        value: int = r.u64(r.data, pos)[0]
    elif size == 4:
        value = r.u32(r.data, pos)[0]
    elif size == 2:
        value = r.u16(r.data, pos)[0]
    elif size == 1:
        value = r.data[pos]
    else:
        raise CfiError(f"unsupported address size {size}", pos)
    return value


def read_encoded(
    r: Reader,
    pos: int,
    end: int,
    encoding: int,
    address_size: int,
    ctx: PointerContext,
    func_base: int | None = None,
) -> tuple[int, int, bool]:
    """Read a pointer in ``encoding`` at ``pos``: (value, next position, unresolved_indirect).

    LSB 10.5: low 4 bits give the format, bits 4-6 the base it is relative to, bit 7 an
    indirection through memory.
    """
    if encoding == DW_EH_PE_omit:
        raise CfiError("pointer with encoding DW_EH_PE_omit read", pos)
    fmt = encoding & 0x0F
    application = encoding & 0x70
    start = pos
    if application == DW_EH_PE_aligned:
        pos = (pos + address_size - 1) // address_size * address_size
    if fmt == DW_EH_PE_absptr:
        value = _read_fixed(r, pos, address_size, end)
        pos += address_size
    elif fmt == DW_EH_PE_uleb128:
        value, pos = read_uleb(r.data, pos, end)
    elif fmt == DW_EH_PE_sleb128:
        value, pos = read_sleb(r.data, pos, end)
    elif fmt in (DW_EH_PE_udata2, DW_EH_PE_udata4, DW_EH_PE_udata8):
        size = 1 << (fmt - 1)
        value = _read_fixed(r, pos, size, end)
        pos += size
    elif fmt in (DW_EH_PE_sdata2, DW_EH_PE_sdata4, DW_EH_PE_sdata8):
        size = 1 << (fmt - 9)
        value = _read_fixed(r, pos, size, end)
        if value >= _SIGNED[size] >> 1:
            value -= _SIGNED[size]
        pos += size
    else:
        raise CfiError(f"unknown pointer encoding {encoding:#04x}", start)
    if application == DW_EH_PE_pcrel:
        value += ctx.section_address + start
    elif application == DW_EH_PE_textrel:
        if ctx.text_base is None:
            raise CfiError("DW_EH_PE_textrel pointer without a text base", start)
        value += ctx.text_base
    elif application == DW_EH_PE_datarel:
        if ctx.data_base is None:
            raise CfiError("DW_EH_PE_datarel pointer without a data base", start)
        value += ctx.data_base
    elif application == DW_EH_PE_funcrel:
        if func_base is None:
            raise CfiError("DW_EH_PE_funcrel pointer outside an FDE", start)
        value += func_base
    elif application not in (0, DW_EH_PE_aligned):
        raise CfiError(f"unknown pointer application {encoding:#04x}", start)
    mask = (1 << (8 * address_size)) - 1
    value &= mask
    unresolved = False
    if encoding & DW_EH_PE_indirect:
        if ctx.read_memory is None:
            unresolved = True
        else:
            raw = ctx.read_memory(value, address_size)
            if len(raw) != address_size:
                raise CfiError(f"indirect pointer at {value:#x} cannot be read", start)
            value = int.from_bytes(raw, "big" if r.order == ">" else "little")
    return value, pos, unresolved


def _encoded_size(encoding: int, address_size: int) -> int:
    """Bytes of a fixed-size pointer format (pc_range uses only the format bits)."""
    fmt = encoding & 0x0F
    if fmt == DW_EH_PE_absptr:
        return address_size
    if fmt in (DW_EH_PE_udata2, DW_EH_PE_sdata2):
        return 2
    if fmt in (DW_EH_PE_udata4, DW_EH_PE_sdata4):
        return 4
    if fmt in (DW_EH_PE_udata8, DW_EH_PE_sdata8):
        return 8
    return 0


#: (CIE offset, pc_begin, pc_range, instructions start, instructions end) of one FDE.
FdeSpan = tuple[int, int, int, int, int]


def scan_fdes(
    data: bytes,
    section_address: int = 0,
    *,
    big_endian: bool = False,
    address_size: int = 8,
    cfi_format: CfiFormat = CfiFormat.EH_FRAME,
    pointers: PointerContext | None = None,
    bulk: bool = True,
) -> tuple[dict[int, Cie], list[FdeSpan]]:
    """The CIEs of a section by offset, and one :data:`FdeSpan` per FDE (no LSDA), in
    section order.

    A well-formed ``.eh_frame`` is scanned with numpy (``bulk=False`` turns that off: the
    record-by-record scan gives the same result, or raises where the section is malformed).
    ``.eh_frame`` FDEs in the usual ``DW_EH_PE_pcrel | DW_EH_PE_sdata4`` encoding are read
    inline; others go through :func:`parse_fde`.
    """
    ctx = pointers or PointerContext(section_address)
    if ctx.section_address != section_address:
        ctx = PointerContext(section_address, ctx.text_base, ctx.data_base, ctx.read_memory)
    if bulk and cfi_format is CfiFormat.EH_FRAME:
        fast = _scan_eh_frame_bulk(data, section_address, big_endian, address_size, ctx)
        if fast is not None:
            return fast
    r = Reader(data, big_endian)
    order = ">" if big_endian else "<"
    s32 = struct.Struct(order + "i").unpack_from
    u32 = struct.Struct(order + "I").unpack_from
    mask = (1 << (8 * address_size)) - 1
    cies: dict[int, Cie] = {}
    out: list[FdeSpan] = []
    append = out.append
    eh = cfi_format is CfiFormat.EH_FRAME
    for kind, offset, body, end, _id_pos, cie_ref in records(r, cfi_format):
        if kind == 0:
            cies[offset] = parse_cie(r, offset, body, end, address_size, cfi_format, ctx)
            continue
        cie = cies.get(cie_ref)
        if cie is None:
            cie = cie_at(r, cies, cie_ref, address_size, cfi_format, ctx, offset)
        if eh and cie.fde_encoding == _PCREL_SDATA4 and body + 9 <= end and data[body + 8] < 0x80:
            pc_begin = (s32(data, body)[0] + section_address + body) & mask
            pc_range = u32(data, body + 4)[0]
            pos = body + 8
            if cie.augmentation[:1] == "z":
                pos += 1 + data[pos]
                if pos > end:
                    raise CfiError("FDE augmentation data runs past the record", offset)
            append((cie_ref, pc_begin, pc_range, pos, end))
        else:
            fde = parse_fde(r, offset, body, end, cie, cfi_format, ctx)
            append((cie_ref, fde.pc_begin, fde.pc_range, fde.instructions_start, end))
    return cies, out


def _scan_eh_frame_bulk(
    data: bytes, section_address: int, big_endian: bool, address_size: int, ctx: PointerContext
) -> tuple[dict[int, Cie], list[FdeSpan]] | None:
    """:func:`scan_fdes` for a well-formed ``.eh_frame`` (LSB 10.6.1): the record lengths are
    followed in a tight loop, then the FDE headers read with numpy.  None when anything is
    unusual (64-bit lengths, a CIE pointer that is not a CIE, a malformed record): the
    record-by-record scanner then gives the same result, or the error at the right place."""
    import numpy as np

    bounds = _record_bounds(data, big_endian)
    if bounds is None:
        return None
    record, record_end = bounds
    if not len(record):
        return {}, []
    view = np.frombuffer(data, dtype=np.uint8)
    ids = _u32_at(view, record + 4, big_endian)
    is_cie = ids == 0
    cies: dict[int, Cie] = {}
    r = Reader(data, big_endian)
    try:
        for offset, stop in zip(record[is_cie].tolist(), record_end[is_cie].tolist(), strict=True):
            cies[offset] = parse_cie(
                r, offset, offset + 8, stop, address_size, CfiFormat.EH_FRAME, ctx
            )
    except CfiError:
        return None
    fde_at = record[~is_cie]
    refs = (fde_at + 4 - ids[~is_cie].astype(np.int64)).tolist()
    if not set(refs) <= cies.keys():
        return None
    spans = _fde_spans_bulk(
        view, r, fde_at, record_end[~is_cie], refs, cies, section_address, address_size, ctx
    )
    return None if spans is None else (cies, spans)


def _record_bounds(
    data: bytes, big_endian: bool
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """[start, end) of every record of a well-formed ``.eh_frame``, up to its zero terminator
    or its end (LSB 10.6.1: each record opens with its 4-byte length); None at a 64-bit length
    or a record running past the section."""
    import numpy as np

    u32 = struct.Struct((">" if big_endian else "<") + "I").unpack_from
    end = len(data)
    offsets: list[int] = []
    append = offsets.append
    pos = 0
    while pos + 4 <= end:
        length = u32(data, pos)[0]
        if length == 0:
            break
        if length < 4 or length >= 0xFFFFFFF0 or pos + 4 + length > end:
            return None
        append(pos)
        pos += 4 + length
    if offsets and end < 16:
        return None
    record = np.array(offsets, dtype=np.int64)
    record_end = np.empty_like(record)
    record_end[:-1] = record[1:]
    record_end[-1:] = pos
    return record, record_end


def _fde_spans_bulk(
    view: npt.NDArray[np.uint8],
    r: Reader,
    fde_at: npt.NDArray[np.int64],
    fde_end: npt.NDArray[np.int64],
    refs: list[int],
    cies: dict[int, Cie],
    section_address: int,
    address_size: int,
    ctx: PointerContext,
) -> list[FdeSpan] | None:
    """The spans of the FDEs at ``fde_at`` (their CIEs at ``refs``): the usual headers read
    with numpy, the others with :func:`parse_fde`; None when one cannot be read."""
    import numpy as np

    end = len(view)
    big_endian = r.order == ">"
    body = fde_at + 8
    # The usual header: pcrel|sdata4 start, udata4 size, one-byte augmentation length.
    usual = np.array(
        [
            cies[ref].fde_encoding == _PCREL_SDATA4 and cies[ref].augmentation[:1] == "z"
            for ref in cies
        ],
        dtype=bool,
    )
    cie_number = {ref: i for i, ref in enumerate(cies)}
    fast = usual[np.array([cie_number[ref] for ref in refs], dtype=np.int64)]
    # Header fields are read at ``safe`` (inside the section); ``fast`` keeps only the FDEs
    # where that is their real position.
    safe = np.minimum(body, end - 9)
    fast &= (body + 9 <= fde_end) & (view[safe + 8] < 0x80)
    start = _u32_at(view, safe, big_endian)
    start -= (start >= 1 << 31).astype(np.int64) << 32
    pc_range = _u32_at(view, safe + 4, big_endian)
    instructions = body + 9 + view[safe + 8].astype(np.int64)
    if (fast & (instructions > fde_end)).any():
        return None  # augmentation data past the record: the scanner raises
    spans = list(
        zip(
            refs,
            _pcrel_addresses(start, body, section_address, address_size),
            pc_range.tolist(),
            instructions.tolist(),
            fde_end.tolist(),
            strict=True,
        )
    )
    slow = np.flatnonzero(~fast).tolist()
    if slow:
        fde_list, body_list, end_list = fde_at.tolist(), body.tolist(), fde_end.tolist()
        for i in slow:
            cie = cies[refs[i]]
            try:
                parsed = parse_fde(
                    r, fde_list[i], body_list[i], end_list[i], cie, CfiFormat.EH_FRAME, ctx
                )
            except CfiError:
                return None
            spans[i] = (
                refs[i],
                parsed.pc_begin,
                parsed.pc_range,
                parsed.instructions_start,
                end_list[i],
            )
    return spans


def _pcrel_addresses(
    stored: npt.NDArray[np.int64],
    at: npt.NDArray[np.int64],
    section_address: int,
    address_size: int,
) -> list[int]:
    """DW_EH_PE_pcrel addresses: the ``stored`` values at section offsets ``at``, relative to
    the field's own address, modulo the address size."""
    mask = (1 << (8 * address_size)) - 1
    if 0 <= section_address < 1 << 40 and address_size in (4, 8):
        address = stored + section_address + at
        if address_size == 4:
            address &= mask
        addresses: list[int] = address.tolist()
        if address_size == 8 and (address < 0).any():
            addresses = [value & mask for value in addresses]
        return addresses
    return [
        (value + section_address + offset) & mask
        for value, offset in zip(stored.tolist(), at.tolist(), strict=True)
    ]


def _u32_at(
    view: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], big_endian: bool
) -> npt.NDArray[np.int64]:
    """The 4-byte unsigned numbers at byte offsets ``at``."""
    import numpy as np

    parts = [view[at + k].astype(np.int64) for k in range(4)]
    if big_endian:
        parts.reverse()
    return parts[0] | (parts[1] << 8) | (parts[2] << 16) | (parts[3] << 24)


def records(
    r: Reader, cfi_format: CfiFormat, start: int = 0
) -> Iterator[tuple[int, int, int, int, int, int]]:
    """(0 for CIE / 1 for FDE, record offset, body start, record end, id position, CIE offset)."""
    data = r.data
    pos = start
    end = r.end
    eh = cfi_format is CfiFormat.EH_FRAME
    while pos + 4 <= end:
        offset = pos
        length = r.u32(data, pos)[0]
        pos += 4
        if length == 0:
            if eh:
                return
            continue  # .debug_frame: an empty record is only padding
        wide = length == 0xFFFFFFFF
        if wide:
            if pos + 8 > end:
                raise CfiError("64-bit record length runs past the section end", offset)
            length = r.u64(data, pos)[0]
            pos += 8
        record_end = pos + length
        if record_end > end:
            raise CfiError(f"record of {length} bytes runs past the section end", offset)
        id_size = 8 if wide else 4
        if pos + id_size > record_end:
            raise CfiError("record too short for its CIE id", offset)
        id_pos = pos
        cie_id = r.u64(data, pos)[0] if wide else r.u32(data, pos)[0]
        pos += id_size
        if eh:
            if cie_id == 0:
                yield 0, offset, pos, record_end, id_pos, 0
            else:
                yield 1, offset, pos, record_end, id_pos, id_pos - cie_id
        elif cie_id == (0xFFFFFFFFFFFFFFFF if wide else 0xFFFFFFFF):
            yield 0, offset, pos, record_end, id_pos, 0
        else:
            yield 1, offset, pos, record_end, id_pos, cie_id
        pos = record_end
    if pos != end and eh and end - pos >= 4:
        raise CfiError("trailing bytes after the last record", pos)


def cie_at(
    r: Reader,
    cies: dict[int, Cie],
    cie_offset: int,
    address_size: int,
    cfi_format: CfiFormat,
    ctx: PointerContext,
    fde_offset: int,
) -> Cie:
    """A CIE that appears after its FDE (allowed, if unusual): parse it on demand."""
    if not 0 <= cie_offset < r.end:
        raise CfiError(f"FDE points to CIE offset {cie_offset:#x} outside the section", fde_offset)
    for kind, offset, body, end, _id_pos, _ref in records(r, cfi_format, cie_offset):
        if kind != 0 or offset != cie_offset:
            break
        cie = parse_cie(r, offset, body, end, address_size, cfi_format, ctx)
        cies[offset] = cie
        return cie
    raise CfiError(f"FDE points to offset {cie_offset:#x}, which is not a CIE", fde_offset)


def parse_cie(
    r: Reader,
    offset: int,
    pos: int,
    end: int,
    address_size: int,
    cfi_format: CfiFormat,
    ctx: PointerContext,
) -> Cie:
    """The CIE whose record starts at ``offset`` and whose body (after the CIE id) is
    ``[pos, end)`` (DWARF 5 6.4.1, LSB 10.6.1.1); raises CfiError naming the offset."""
    data = r.data
    if pos >= end:
        raise CfiError("CIE has no version byte", offset)
    version = data[pos]
    pos += 1
    if version not in (1, 3, 4):
        raise CfiError(f"CIE version {version} is not 1, 3 or 4", offset)
    nul = data.find(b"\0", pos, end)
    if nul < 0:
        raise CfiError("CIE augmentation string is not terminated", offset)
    augmentation = data[pos:nul].decode("latin-1")
    pos = nul + 1
    if "eh" in augmentation:  # old GCC: an eh_ptr follows the augmentation string
        pos += address_size
    if version == 4:
        if pos + 2 > end:
            raise CfiError("CIE too short for address and segment sizes", offset)
        address_size = data[pos]
        if data[pos + 1] != 0:
            raise CfiError(f"CIE segment selector size {data[pos + 1]} is not supported", offset)
        pos += 2
    code_alignment, pos = read_uleb(data, pos, end)
    data_alignment, pos = read_sleb(data, pos, end)
    if version == 1:
        if pos >= end:
            raise CfiError("CIE has no return address column", offset)
        return_column = data[pos]
        pos += 1
    else:
        return_column, pos = read_uleb(data, pos, end)
    if augmentation.startswith("z"):
        augmentations, pos = _cie_augmentation_data(
            r, offset, pos, end, augmentation, address_size, ctx
        )
    elif augmentation in ("", "eh"):
        augmentations = _NO_AUGMENTATION_DATA
    else:
        raise CfiError(f"CIE augmentation {augmentation!r} is not understood", offset)
    return Cie(
        offset,
        version,
        augmentation,
        code_alignment,
        data_alignment,
        return_column,
        address_size,
        *augmentations,
        pos,
        end,
    )


#: What a CIE's augmentation data says (LSB 10.6.1.1.1): the FDE pointer encoding ('R'), the
#: LSDA pointer encoding ('L'), the personality routine and whether it is an unresolved indirect
#: pointer ('P'), signal frame ('S'), AArch64 B key ('B'), MTE-tagged frames ('G'); the
#: fields of :class:`Cie` in its order.
_AugmentationData = tuple[int, int, int | None, bool, bool, bool, bool]
_NO_AUGMENTATION_DATA: _AugmentationData = (
    DW_EH_PE_absptr, DW_EH_PE_omit, None, False, False, False, False
)  # fmt: skip


def _cie_augmentation_data(
    r: Reader,
    offset: int,
    pos: int,
    end: int,
    augmentation: str,
    address_size: int,
    ctx: PointerContext,
) -> tuple[_AugmentationData, int]:
    """The augmentation data of a ``z`` CIE at ``pos`` (its ULEB128 length, then one item per
    letter after the ``z``), and where the initial instructions start."""
    data = r.data
    fde_encoding, lsda_encoding, personality, personality_indirect, signal, b_key, mte = (
        _NO_AUGMENTATION_DATA
    )
    aug_len, pos = read_uleb(data, pos, end)
    aug_end = pos + aug_len
    if aug_end > end:
        raise CfiError("CIE augmentation data runs past the record", offset)
    for char in augmentation[1:]:
        if char == "R":
            fde_encoding = _aug_byte(data, pos, aug_end, offset)
            pos += 1
        elif char == "L":
            lsda_encoding = _aug_byte(data, pos, aug_end, offset)
            pos += 1
        elif char == "P":
            encoding = _aug_byte(data, pos, aug_end, offset)
            personality, pos, personality_indirect = read_encoded(
                r, pos + 1, aug_end, encoding, address_size, ctx
            )
        elif char == "S":
            signal = True
        elif char == "B":
            b_key = True
        elif char == "G":
            mte = True
        else:
            break  # unknown augmentation: the length lets us skip the rest
    found = (fde_encoding, lsda_encoding, personality, personality_indirect, signal, b_key, mte)
    return found, aug_end


def _aug_byte(data: bytes, pos: int, end: int, offset: int) -> int:
    if pos >= end:
        raise CfiError("CIE augmentation data is too short", offset)
    return data[pos]


def parse_fde(
    r: Reader,
    offset: int,
    pos: int,
    end: int,
    cie: Cie,
    cfi_format: CfiFormat,
    ctx: PointerContext,
) -> Fde:
    """The FDE whose record starts at ``offset`` and whose body (after the CIE pointer) is
    ``[pos, end)`` (DWARF 5 6.4.1, LSB 10.6.1.2); raises CfiError naming the offset."""
    size = cie.address_size
    if cfi_format is CfiFormat.DEBUG_FRAME:
        pc_begin = _read_fixed(r, pos, size, end)
        pc_range = _read_fixed(r, pos + size, size, end)
        pos += 2 * size
    else:
        pc_begin, pos, unresolved = read_encoded(r, pos, end, cie.fde_encoding, size, ctx)
        if unresolved:
            raise CfiError("indirect FDE address without a memory reader", offset)
        range_size = _encoded_size(cie.fde_encoding, size)
        if range_size:
            pc_range = _read_fixed(r, pos, range_size, end)
            pos += range_size
        else:
            pc_range, pos = read_uleb(r.data, pos, end)
    lsda: int | None = None
    if cie.augmentation.startswith("z"):
        aug_len, pos = read_uleb(r.data, pos, end)
        aug_end = pos + aug_len
        if aug_end > end:
            raise CfiError("FDE augmentation data runs past the record", offset)
        if cie.lsda_encoding != DW_EH_PE_omit and aug_len:
            lsda, _, _ = read_encoded(
                r, pos, aug_end, cie.lsda_encoding, size, ctx, func_base=pc_begin
            )
        pos = aug_end
    return Fde(offset, cie, pc_begin, pc_range, lsda, pos, end)


__all__ = [
    "CfiFormat",
    "Cie",
    "Fde",
    "FdeSpan",
    "PointerContext",
    "Reader",
    "cie_at",
    "parse_cie",
    "parse_fde",
    "read_encoded",
    "read_sleb",
    "read_uleb",
    "records",
    "scan_fdes",
]
