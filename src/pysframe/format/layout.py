"""Every binary layout of the SFrame format, declared once.

Readers, writers and walkers take their struct formats, numpy dtypes, sizes, field offsets and
bit fields from here and never spell them again.  All multi-byte fields are in the section's
byte order, which the magic tells (V2 spec 2.1.1).  Each record is declared as its struct codes
and field names; sizes, offsets and numpy dtypes are derived from that one declaration.

* Header, 28 bytes + ``sfh_auxhdr_len`` (V2 spec 2.2): u16 magic, u8 version, u8 flags,
  u8 abi, i8 cfa_fixed_fp_offset, i8 cfa_fixed_ra_offset, u8 auxhdr_len, u32 num_fdes,
  u32 num_fres, u32 fre_len, u32 fdeoff, u32 freoff.
* V1 FDE, 17 bytes packed: i32 start, u32 size, u32 fre_off, u32 num_fres, u8 info (V1 spec).
* V2 FDE, 20 bytes: the V1 fields, then u8 rep_size, u16 padding (V2 spec 2.3).
* V3 FDE index entry, 16 bytes: i64 start, u32 size, u32 fre_off; at fre_off in the FRE
  sub-section a 5-byte attribute record: u16 num_fres, u8 info, u8 info2, u8 rep_size
  (docs/format.md, "V3 FDE").
* FRE (V2 spec 2.4): start address of 1, 2 or 4 bytes (the FDE's FRE type), u8 info, then
  ``word_count`` signed data words of 1, 2 or 4 bytes.
* FLEX control word (docs/format.md, "FLEX FDEs"): ``(dwarf_regnum << 3) | (deref << 1) |
  reg_p``.

The bit-field accessors take an ``int`` or a numpy int64 array alike.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from .constants import Version

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: An int, or a numpy array of them: the accessors below work on either.
Bits = TypeVar("Bits", int, "npt.NDArray[np.int64]")


def byte_order(big_endian: bool) -> str:
    """The struct prefix of a section's byte order."""
    return ">" if big_endian else "<"


def field_spans(codes: str) -> tuple[tuple[int, int], ...]:
    """(byte offset, width) of each field of a packed record with these struct codes
    (standard sizes, no alignment)."""
    spans, at = [], 0
    for code in codes:
        width = struct.calcsize("<" + code)
        spans.append((at, width))
        at += width
    return tuple(spans)


def _field_offsets(names: tuple[str, ...], codes: str) -> dict[str, int]:
    """Byte offset of each named field of a packed record."""
    return {name: at for name, (at, _) in zip(names, field_spans(codes), strict=True)}


def _record_dtype(names: tuple[str, ...], codes: str, big_endian: bool) -> np.dtype[Any]:
    """numpy record type of a packed record: struct codes are numpy type codes too."""
    import numpy as np

    order = byte_order(big_endian)
    offsets = _field_offsets(names, codes)
    return np.dtype(
        {
            "names": list(names),
            "formats": [order + code for code in codes],
            "offsets": [offsets[name] for name in names],
            "itemsize": struct.calcsize(order + codes),
        }
    )


# -- header (V2 spec 2.2) ------------------------------------------------------------------------

#: Struct codes of the fixed header, without the byte-order prefix.
HEADER_FIELDS = "HBBBbbBIIIII"
HEADER_NAMES = (
    "magic", "version", "flags", "abi", "cfa_fixed_fp_offset", "cfa_fixed_ra_offset",
    "auxhdr_len", "num_fdes", "num_fres", "fre_len", "fde_off", "fre_off",
)  # fmt: skip
#: Byte offset of each header field (error messages point at them).
HEADER_AT = _field_offsets(HEADER_NAMES, HEADER_FIELDS)
#: The preamble (V2 spec 2.1): magic, version and flags, the fields every version shares.
PREAMBLE_SIZE = HEADER_AT["abi"]
#: Size of the fixed part of the header; an auxiliary header of sfh_auxhdr_len bytes follows.
HEADER_SIZE = struct.calcsize("<" + HEADER_FIELDS)
HEADER_NUM_FDES_AT = HEADER_AT["num_fdes"]
HEADER_FRE_LEN_AT = HEADER_AT["fre_len"]
HEADER_FDE_OFF_AT = HEADER_AT["fde_off"]
HEADER_FRE_OFF_AT = HEADER_AT["fre_off"]


@cache
def header_struct(big_endian: bool) -> struct.Struct:
    """The fixed header, fields in :data:`HEADER_NAMES` order."""
    return struct.Struct(byte_order(big_endian) + HEADER_FIELDS)


# -- FDEs (V1 spec, V2 spec 2.3; docs/format.md, "V3 FDE") --------------------------------------

#: Struct codes of an FDE per version (V3: the index entry only).
FDE_FIELDS: dict[Version, str] = {Version.V1: "iIIIB", Version.V2: "iIIIBBH", Version.V3: "qII"}
#: Field names of an FDE per version (also the names of :func:`fde_dtype`).
FDE_NAMES: dict[Version, tuple[str, ...]] = {
    Version.V1: ("start", "size", "fre_off", "num_fres", "info"),
    Version.V2: ("start", "size", "fre_off", "num_fres", "info", "rep_size", "padding"),
    Version.V3: ("start", "size", "fre_off"),
}
#: Byte offset of each FDE field within the FDE, per version.
FDE_AT: dict[Version, dict[str, int]] = {
    v: _field_offsets(FDE_NAMES[v], FDE_FIELDS[v]) for v in Version
}
#: Bytes per FDE: V1 17 packed, V2 20, V3 16 (the index entry).
FDE_SIZE: dict[Version, int] = {v: struct.calcsize("<" + FDE_FIELDS[v]) for v in Version}
#: Bits of the stored function start: i32 before V3, i64 in V3.
FDE_START_BITS: dict[Version, int] = {
    v: 8 * struct.calcsize("<" + FDE_FIELDS[v][0]) for v in Version
}

#: V3 attribute record before a function's FREs: u16 num_fres, u8 info, u8 info2, u8 rep_size.
V3_ATTR_FIELDS = "HBBB"
V3_ATTR_NAMES = ("num_fres", "info", "info2", "rep_size")
#: Byte offset of each attribute-record field within the record.
V3_ATTR_AT = _field_offsets(V3_ATTR_NAMES, V3_ATTR_FIELDS)
V3_ATTR_SIZE = struct.calcsize("<" + V3_ATTR_FIELDS)
#: Most FREs a V3 function has: its attribute record's num_fres (the record's first field).
V3_MAX_FRES = (1 << (8 * struct.calcsize("<" + V3_ATTR_FIELDS[0]))) - 1


@cache
def fde_struct(version: Version, big_endian: bool) -> struct.Struct:
    """One FDE, fields in ``FDE_NAMES[version]`` order."""
    return struct.Struct(byte_order(big_endian) + FDE_FIELDS[version])


@cache
def fde_start_struct(version: Version, big_endian: bool) -> struct.Struct:
    """The first field of an FDE alone: its stored function start."""
    return struct.Struct(byte_order(big_endian) + FDE_FIELDS[version][0])


@cache
def v3_attr_struct(big_endian: bool) -> struct.Struct:
    """The V3 attribute record, fields in :data:`V3_ATTR_NAMES` order."""
    return struct.Struct(byte_order(big_endian) + V3_ATTR_FIELDS)


@cache
def fde_dtype(version: Version, big_endian: bool) -> np.dtype[Any]:
    """numpy record type of one FDE, with the field names of ``FDE_NAMES[version]``."""
    return _record_dtype(FDE_NAMES[version], FDE_FIELDS[version], big_endian)


@cache
def v3_attr_dtype(big_endian: bool) -> np.dtype[Any]:
    """numpy record type of the V3 attribute record, with the names of :data:`V3_ATTR_NAMES`."""
    return _record_dtype(V3_ATTR_NAMES, V3_ATTR_FIELDS, big_endian)


# sfde_func_info (V2 spec 2.3.1; V3 attribute-record info): bits 0-3 FRE type, bit 4 PC type,
# bit 5 AArch64 pauth key, bit 7 (V3) signal frame.


def fde_fre_type(info: Bits) -> Bits:
    return info & 0xF


def fde_pc_type(info: Bits) -> Bits:
    return (info >> 4) & 1


def fde_pauth_key(info: Bits) -> Bits:
    return (info >> 5) & 1


def fde_signal_frame(info: Bits) -> Bits:
    return (info >> 7) & 1


def fde_info(fre_type: int, pc_type: int, pauth_key: int, signal_frame: bool = False) -> int:
    """Compose sfde_func_info."""
    return (
        (int(signal_frame) << 7) | ((pauth_key & 1) << 5) | ((pc_type & 1) << 4) | (fre_type & 0xF)
    )


#: Bits of sfde_func_info that V1 and V2 define (bit 7, the signal frame, is V3's).
FDE_INFO_MASK: dict[Version, int] = {Version.V1: 0x3F, Version.V2: 0x3F, Version.V3: 0xFF}
#: Bits of sfde_func_info no version gives a meaning: 6-7 before V3, 6 in V3.
FDE_INFO_UNUSED: dict[Version, int] = {Version.V1: 0xC0, Version.V2: 0xC0, Version.V3: 0x40}
#: V3 info2 bits 5-7 are unused.
FDE_INFO2_UNUSED = 0xE0


def fde_type_of(info2: Bits) -> Bits:
    """V3 info2 bits 0-4: the FDE type (DEFAULT or FLEX)."""
    return info2 & 0x1F


# -- FREs (V2 spec 2.4) --------------------------------------------------------------------------

#: Struct codes of the FRE start address by FRE type (ADDR1, ADDR2, ADDR4).
FRE_ADDRESS_CODES = ("B", "H", "I")
#: Struct codes of data words by size code (1, 2 and 4 bytes; code 3 is invalid).
FRE_WORD_CODES = ("b", "h", "i")
#: The invalid data-word size code.
FRE_BAD_WORD_SIZE = 3
#: At most this many data words follow an FRE (V3 FLEX: three control/offset pairs).
MAX_WORDS = 6
#: The info byte between an FRE's start address and its data words.
FRE_INFO_SIZE = 1


def fre_address_size(fre_type: Bits) -> Bits:
    return 1 << fre_type


def fre_min_length(fre_type: Bits) -> Bits:
    """Bytes every FRE of this FRE type takes at least: start address and info byte."""
    return (1 << fre_type) + FRE_INFO_SIZE


@cache
def fre_address_struct(fre_type: int, big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + FRE_ADDRESS_CODES[fre_type])


@cache
def fre_words_struct(size_code: int, count: int, big_endian: bool) -> struct.Struct:
    return struct.Struct(f"{byte_order(big_endian)}{count}{FRE_WORD_CODES[size_code]}")


# sfre_info (V2 spec 2.4.1): bit 0 CFA base register (DEFAULT), bits 1-4 number of data words,
# bits 5-6 data-word size code, bit 7 mangled RA.


def fre_base_reg(info: Bits) -> Bits:
    return info & 1


def fre_word_count(info: Bits) -> Bits:
    return (info >> 1) & 0xF


def fre_word_size_code(info: Bits) -> Bits:
    return (info >> 5) & 3


def fre_mangled_ra(info: Bits) -> Bits:
    return (info >> 7) & 1


def fre_word_size(info: Bits) -> Bits:
    """Bytes per data word (8 for the invalid size code 3)."""
    return 1 << fre_word_size_code(info)


def fre_info(base: int, word_count: int, size_code: int, mangled_ra: bool) -> int:
    """Compose sfre_info (``size_code`` may be a :class:`~pysframe.format.constants.WordSize`)."""
    return (int(mangled_ra) << 7) | ((size_code & 3) << 5) | ((word_count & 0xF) << 1) | (base & 1)


def fre_length(fre_type: int, info: Bits) -> Bits:
    """Bytes of an FRE: start address, info byte and data words (size code 3 is invalid)."""
    return fre_min_length(fre_type) + (fre_word_count(info) << fre_word_size_code(info))


def word_mask(word_size: int) -> int:
    """The bits of a ``word_size``-byte data word: its value read as unsigned."""
    return (1 << (8 * word_size)) - 1


# -- FLEX control words (docs/format.md, "FLEX FDEs") -------------------------------------------


def flex_reg(control: int) -> int:
    """The DWARF register number of a FLEX control word."""
    return control >> 3


def flex_deref(control: int) -> bool:
    """The location holds the value (saved at), rather than being it."""
    return bool(control & 2)


def flex_reg_p(control: int) -> bool:
    """The rule is based on the register, not on the CFA."""
    return bool(control & 1)


#: Control-word bit 2 has no meaning.
FLEX_UNUSED = 0x4


def flex_control(reg: int, deref: bool, reg_p: bool) -> int:
    """Compose a FLEX control word."""
    return (reg << 3) | (int(deref) << 1) | int(reg_p)
