"""DWARF call-frame information records: the CIEs and FDEs of ``.eh_frame`` / ``.debug_frame``.

Sections cited are from DWARF 5 (6.4 "Call Frame Information") and the Linux Standard Base
Core specification (LSB 5.0, 10.6 "Exception Frames": ``.eh_frame``, augmentations and pointer
encodings).

* :func:`records`, :func:`parse_cie` and :func:`parse_fde` read the section one record at a
  time (augmentations ``z``, ``R``, ``P``, ``L``, ``S``, ``B``, ``G``; ``eh``; every pointer
  encoding and application, ``indirect`` through a caller-supplied memory reader).
* :func:`scan_fdes` gives what the generator and the interpreter need of a whole section:
  the CIEs, and per FDE its CIE, address range and instruction bytes (the usual ``.eh_frame``
  FDE headers read together with numpy).

The instructions themselves are decoded by :mod:`pysframe.generate.ops`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

from ..dataclass import dataclass
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
) -> tuple[dict[int, Cie], list[FdeSpan]]:
    """The CIEs of a section by offset, and one :data:`FdeSpan` per FDE (no LSDA), in
    section order; CfiError at the first record that cannot be read.

    The records are walked one by one (:func:`records`) and the CIEs parsed; the headers of
    ``.eh_frame`` FDEs in the usual ``DW_EH_PE_pcrel | DW_EH_PE_sdata4`` encoding, with a
    one-byte augmentation length, are read together with numpy, the others (and those whose
    header the numpy read finds amiss) with :func:`parse_fde`.
    """
    import numpy as np

    ctx = pointers or PointerContext(section_address)
    if ctx.section_address != section_address:
        ctx = PointerContext(section_address, ctx.text_base, ctx.data_base, ctx.read_memory)
    r = Reader(data, big_endian)
    walked, failure = records(r, cfi_format)
    # The first record that cannot be read (those after it are not read): its number.
    stop = len(walked.offset)
    cies: dict[int, Cie] = {}
    usual_cies: list[int] = []
    kinds = np.array(walked.kind, dtype=np.int8)
    offsets, bodies, ends, refs = walked.offset, walked.body, walked.end, walked.cie
    for at in np.flatnonzero(kinds == 0).tolist():
        offset = offsets[at]
        try:
            cie = parse_cie(r, offset, bodies[at], ends[at], address_size, cfi_format, ctx)
        except CfiError as error:
            stop, failure = at, error
            break
        cies[offset] = cie
        if cie.fde_encoding == _PCREL_SDATA4 and cie.augmentation[:1] == "z":
            usual_cies.append(offset)
    fde_at = np.flatnonzero(kinds[:stop] == 1)
    usual = np.zeros(len(fde_at), dtype=bool)
    if cfi_format is CfiFormat.EH_FRAME:
        # (A CIE pointer outside the section, which a hostile 64-bit record may make too
        # large for int64, points to no CIE.)
        inside = [ref if 0 <= ref < r.end else -1 for ref in map(refs.__getitem__, fde_at)]
        usual = np.isin(np.array(inside, dtype=np.int64), usual_cies)
    others: dict[int, FdeSpan] = {}
    for at in fde_at[~usual].tolist():  # in section order, up to the first unreadable record
        offset, cie_ref = offsets[at], refs[at]
        try:
            cie = cies.get(cie_ref) or cie_at(r, cies, cie_ref, address_size, cfi_format, ctx,
                                              offset)  # fmt: skip
            fde = parse_fde(r, offset, bodies[at], ends[at], cie, cfi_format, ctx)
        except CfiError as error:
            stop, failure = at, error
            break
        others[at] = (cie_ref, fde.pc_begin, fde.pc_range, fde.instructions_start, ends[at])
    chosen = fde_at[usual & (fde_at < stop)]
    spans = _usual_headers(r, walked, chosen, cies, section_address, address_size, ctx)
    if failure is not None:
        raise failure
    if others:  # in section order with the others
        by_record = dict(zip(chosen.tolist(), spans, strict=True)) | others
        spans = [by_record[at] for at in fde_at.tolist()]
    return cies, spans


def _usual_headers(
    r: Reader,
    walked: Records,
    chosen: npt.NDArray[np.int64],
    cies: dict[int, Cie],
    section_address: int,
    address_size: int,
    ctx: PointerContext,
) -> list[FdeSpan]:
    """The spans of the FDEs ``walked[k]`` for ``k`` in ``chosen`` (in section order), whose
    CIEs say pcrel|sdata4 and 'z' (LSB 10.6.1.2: a 4-byte start relative to its field, a
    4-byte size, the augmentation length): read with numpy where the length is one byte and
    all lies in the record; the others by :func:`parse_fde`, which raises where one cannot
    be read."""
    import numpy as np

    if not len(chosen):
        return []
    view = np.frombuffer(r.data, dtype=np.uint8)
    body = np.array(walked.body, dtype=np.int64)[chosen]
    end = np.array(walked.end, dtype=np.int64)[chosen]
    refs = [walked.cie[k] for k in chosen.tolist()]
    safe = np.minimum(body, max(len(view) - 9, 0))
    instructions = body + 9 + view[safe + 8].astype(np.int64)
    fast = (body + 9 <= end) & (view[safe + 8] < 0x80) & (instructions <= end)
    start = _u32_at(view, safe, r.order == ">")
    start -= (start >= 1 << 31).astype(np.int64) << 32
    size = _u32_at(view, safe + 4, r.order == ">").tolist()
    begin = _pcrel_addresses(start, body, section_address, address_size)
    spans = list(zip(refs, begin, size, instructions.tolist(), end.tolist(), strict=True))
    for k in np.flatnonzero(~fast).tolist():
        at, fde_end = int(chosen[k]), int(end[k])
        fde = parse_fde(r, walked.offset[at], walked.body[at], fde_end, cies[refs[k]],
                        CfiFormat.EH_FRAME, ctx)  # fmt: skip
        spans[k] = (refs[k], fde.pc_begin, fde.pc_range, fde.instructions_start, fde_end)
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


class Records(NamedTuple):
    """Records of a section, a column per field and an element per record: 0 for a CIE or 1
    for an FDE, its offset, where its body (after the CIE id or pointer) begins, where it
    ends, and (FDEs) its CIE's offset."""

    kind: list[int]
    offset: list[int]
    body: list[int]
    end: list[int]
    cie: list[int]


def records(
    r: Reader, cfi_format: CfiFormat, start: int = 0, count: int | None = None
) -> tuple[Records, CfiError | None]:
    """The records of the section from ``start`` (``count`` of them at most), up to the end,
    its zero terminator (``.eh_frame``) or the first that cannot be read, and why that one
    cannot be (DWARF 5 6.4.1 and LSB 10.6.1: a 4-byte length, or 0xffffffff and an 8-byte
    one; then the CIE id or pointer, 4 or 8 bytes).

    The lengths of the usual records (a 4-byte length, the record in the section) are followed
    in a tight loop and their ids read together; the others are read one at a time."""
    data = r.data
    pos = start
    end = r.end
    eh = cfi_format is CfiFormat.EH_FRAME
    u32 = r.u32
    found = Records([], [], [], [], [])
    left = end if count is None else count  # records at most (each takes 4 bytes at least)
    while pos + 4 <= end and left:
        usual: list[int] = []
        append = usual.append
        while pos + 8 <= end and left:
            length = u32(data, pos)[0]
            if not 4 <= length <= end - pos - 4 or length == 0xFFFFFFFF:
                break
            append(pos)
            pos += 4 + length
            left -= 1
        if usual:
            _usual_records(r, usual, pos, eh, found)
        if pos + 4 > end or not left:
            break
        # An unusual record: a terminator, a 64-bit length, one that cannot be read.
        length = u32(data, pos)[0]
        left -= 1
        if length == 0:
            if eh:
                break
            pos += 4  # .debug_frame: an empty record is only padding
            continue
        if length == 0xFFFFFFFF:  # 64-bit DWARF: an 8-byte length and an 8-byte id
            if pos + 12 > end:
                return found, CfiError("64-bit record length runs past the section end", pos)
            length = r.u64(data, pos + 4)[0]
            record_end = pos + 12 + length
            if record_end > end:
                return found, CfiError(f"record of {length} bytes runs past the section end",
                                       pos)  # fmt: skip
            if pos + 20 > record_end:
                return found, CfiError("record too short for its CIE id", pos)
            cie_id = r.u64(data, pos + 12)[0]
            fde = cie_id != (0 if eh else 0xFFFFFFFFFFFFFFFF)
            for column, value in zip(found, (int(fde), pos, pos + 20, record_end,
                                             (pos + 12 - cie_id if eh else cie_id) if fde else 0),
                                     strict=True):  # fmt: skip
                column.append(value)
            pos = record_end
            continue
        if pos + 4 + length > end:
            return found, CfiError(f"record of {length} bytes runs past the section end", pos)
        return found, CfiError("record too short for its CIE id", pos)
    return found, None


def _usual_records(r: Reader, starts: list[int], stop: int, eh: bool, into: Records) -> None:
    """Add to ``into`` the records at ``starts`` (4-byte lengths, one after the other up to
    ``stop``): their 4-byte ids read together."""
    import numpy as np

    at = np.array(starts, dtype=np.int64)
    ids = _u32_at(np.frombuffer(r.data, dtype=np.uint8), at + 4, r.order == ">")
    kind = ids != (0 if eh else 0xFFFFFFFF)
    into.kind.extend(kind.astype(np.int64).tolist())
    into.offset.extend(starts)
    into.body.extend((at + 8).tolist())
    into.end.extend(starts[1:])
    into.end.append(stop)
    into.cie.extend(np.where(kind, at + 4 - ids if eh else ids, 0).tolist())


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
    found, failure = records(r, cfi_format, cie_offset, 1)
    if failure is not None:
        raise failure
    if found.kind[:1] == [0] and found.offset[0] == cie_offset:
        cie = parse_cie(r, cie_offset, found.body[0], found.end[0], address_size, cfi_format,
                        ctx)  # fmt: skip
        cies[cie_offset] = cie
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
    "Records",
    "cie_at",
    "parse_cie",
    "parse_fde",
    "read_encoded",
    "read_sleb",
    "read_uleb",
    "records",
    "scan_fdes",
]
