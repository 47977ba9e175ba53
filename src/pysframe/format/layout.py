"""Every binary layout of the SFrame format, declared once.

Readers, writers and walkers take their struct formats, numpy dtypes, sizes and bit fields
from here and never spell them again.  All multi-byte fields are in the section's byte order,
which the magic tells (V2 spec 2.1.1).

* Header, 28 bytes + ``sfh_auxhdr_len`` (V2 spec 2.2): u16 magic, u8 version, u8 flags,
  u8 abi, i8 cfa_fixed_fp_offset, i8 cfa_fixed_ra_offset, u8 auxhdr_len, u32 num_fdes,
  u32 num_fres, u32 fre_len, u32 fdeoff, u32 freoff.
* V1 FDE, 17 bytes packed: i32 start, u32 size, u32 fre_off, u32 num_fres, u8 info (V1 spec).
* V2 FDE, 20 bytes: the V1 fields, then u8 rep_size, u16 padding (V2 spec 2.3).
* V3 FDE index entry, 16 bytes: i64 start, u32 size, u32 fre_off; at fre_off in the FRE
  sub-section a 5-byte attribute record: u16 num_fres, u8 info, u8 info2, u8 rep_size
  (VERSIONS.md V3).
* FRE (V2 spec 2.4): start address of 1, 2 or 4 bytes (the FDE's FRE type), u8 info, then
  ``word_count`` signed data words of 1, 2 or 4 bytes.

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

# -- header (V2 spec 2.2) ------------------------------------------------------------------------

#: Struct codes of the fixed header, without the byte-order prefix.
HEADER_FIELDS = "HBBBbbBIIIII"
#: Size of the fixed part of the header; an auxiliary header of sfh_auxhdr_len bytes follows.
HEADER_SIZE = 28
#: Byte offsets of header fields that error messages point at.
HEADER_NUM_FDES_AT = 0x08
HEADER_FRE_LEN_AT = 0x10
HEADER_FDE_OFF_AT = 0x14
HEADER_FRE_OFF_AT = 0x18


def byte_order(big_endian: bool) -> str:
    """The struct prefix of a section's byte order."""
    return ">" if big_endian else "<"


@cache
def header_struct(big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + HEADER_FIELDS)


# -- FDEs (V1 spec, V2 spec 2.3, VERSIONS.md V3) -------------------------------------------------

#: Struct codes of an FDE per version (V3: the index entry only).
FDE_FIELDS: dict[Version, str] = {Version.V1: "iIIIB", Version.V2: "iIIIBBH", Version.V3: "qII"}
#: Bytes per FDE: V1 17 packed, V2 20, V3 16 (the index entry).
FDE_SIZE: dict[Version, int] = {Version.V1: 17, Version.V2: 20, Version.V3: 16}
#: Byte offset of sfde_func_start_fre_off within an FDE (every version).
FDE_FRE_OFF_AT = 8
#: Bits of the stored function start: i32 before V3, i64 in V3.
FDE_START_BITS: dict[Version, int] = {Version.V1: 32, Version.V2: 32, Version.V3: 64}

#: V3 attribute record before a function's FREs: u16 num_fres, u8 info, u8 info2, u8 rep_size.
V3_ATTR_FIELDS = "HBBB"
V3_ATTR_SIZE = 5


@cache
def fde_struct(version: Version, big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + FDE_FIELDS[version])


@cache
def v3_attr_struct(big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + V3_ATTR_FIELDS)


@cache
def fde_dtype(version: Version, big_endian: bool) -> np.dtype[Any]:
    """numpy record type of one FDE, with the field names ``start``, ``size``, ``fre_off``
    and (before V3) ``num_fres``, ``info``, and (V2) ``rep_size``, ``padding``."""
    import numpy as np

    o = byte_order(big_endian)
    if version is Version.V3:
        names, formats, offsets = (
            ["start", "size", "fre_off"],
            [o + "i8", o + "u4", o + "u4"],
            [0, 8, 12],
        )
    else:
        names = ["start", "size", "fre_off", "num_fres", "info"]
        formats = [o + "i4", o + "u4", o + "u4", o + "u4", "u1"]
        offsets = [0, 4, 8, 12, 16]
        if version is Version.V2:
            names += ["rep_size", "padding"]
            formats += ["u1", o + "u2"]
            offsets += [17, 18]
    return np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": FDE_SIZE[version]}
    )


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


def fre_address_size(fre_type: Bits) -> Bits:
    return 1 << fre_type


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


def fre_info(base: int, word_count: int, size_code: int, mangled_ra: bool) -> int:
    """Compose sfre_info."""
    return (int(mangled_ra) << 7) | ((size_code & 3) << 5) | ((word_count & 0xF) << 1) | (base & 1)


def fre_length(fre_type: int, info: int) -> int:
    """Bytes of an FRE: start address, info byte and data words (size code 3 is invalid)."""
    return (1 << fre_type) + 1 + (fre_word_count(info) << fre_word_size_code(info))
