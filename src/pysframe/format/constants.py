"""Numeric constants of the SFrame format, named as in the specification: the magic, the
enumerations (versions, flags, ABIs, FRE/PC/FDE types...), DWARF register numbers and ABI
defaults.  Record layouts, their sizes and bit fields are :mod:`pysframe.format.layout`'s.

Sections cited: V1 spec (sframe-spec-v1), V2 spec 2.x (sframe-spec-v2), and for the later
changes (errata 1 and 2, V3) the headings of docs/format.md, the project's notes on the format.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

#: Preamble magic (V2 spec 2.1).  Read as 0xe2de, the section is in the other byte order.
SFRAME_MAGIC = 0xDEE2

#: ELF section type and program header type of .sframe (errata 1).
SHT_GNU_SFRAME = 0x6FFFFFF4
PT_GNU_SFRAME = 0x6474E554


class Version(IntEnum):
    """sfp_version (V2 spec 2.1.2; docs/format.md, "Versions and producers")."""

    V1 = 1
    V2 = 2
    V3 = 3


class Flags(IntFlag):
    """sfp_flags (V2 spec 2.1.3, errata 1)."""

    NONE = 0
    FDE_SORTED = 0x1
    FRAME_POINTER = 0x2
    FDE_FUNC_START_PCREL = 0x4


#: Flags each version defines (V3 drops FRAME_POINTER, errata 1 adds PCREL to V2).
KNOWN_FLAGS: dict[Version, Flags] = {
    Version.V1: Flags.FDE_SORTED | Flags.FRAME_POINTER,
    Version.V2: Flags.FDE_SORTED | Flags.FRAME_POINTER | Flags.FDE_FUNC_START_PCREL,
    Version.V3: Flags.FDE_SORTED | Flags.FDE_FUNC_START_PCREL,
}


class Abi(IntEnum):
    """sfh_abi_arch (V2 spec 2.2.1, errata 1 for s390x)."""

    AARCH64_ENDIAN_BIG = 1
    AARCH64_ENDIAN_LITTLE = 2
    AMD64_ENDIAN_LITTLE = 3
    S390X_ENDIAN_BIG = 4

    @property
    def big_endian(self) -> bool:
        return self in (Abi.AARCH64_ENDIAN_BIG, Abi.S390X_ENDIAN_BIG)

    @property
    def is_aarch64(self) -> bool:
        return self in (Abi.AARCH64_ENDIAN_BIG, Abi.AARCH64_ENDIAN_LITTLE)


class FreType(IntEnum):
    """Width of an FRE's start-address field (V2 spec 2.3.3)."""

    ADDR1 = 0
    ADDR2 = 1
    ADDR4 = 2

    @property
    def size(self) -> int:
        return 1 << self.value

    @property
    def limit(self) -> int:
        """First start offset the type cannot hold."""
        return 1 << (8 << self.value)


class PcType(IntEnum):
    """How FRE start addresses are matched (V2 spec 2.3.2: PCINC/PCMASK; V3 'PC type')."""

    INC = 0
    MASK = 1


class FdeType(IntEnum):
    """V3 info2 bits 0-4: how an FRE's data words are read (docs/format.md, "V3 FDE")."""

    DEFAULT = 0
    FLEX = 1


class PauthKey(IntEnum):
    """AArch64 return-address signing key (V2 spec 2.3.1)."""

    A = 0
    B = 1


class BaseReg(IntEnum):
    """fre_cfa_base_reg_id of a DEFAULT FRE (V2 spec 2.4.1)."""

    FP = 0
    SP = 1


class WordSize(IntEnum):
    """fre_offset_size: bytes per data word (V2 spec 2.4.1)."""

    B1 = 0
    B2 = 1
    B4 = 2

    @property
    def size(self) -> int:
        return 1 << self.value


#: s390x stores CFA offsets as (offset - 160) / 8 (errata 1).
S390X_CFA_OFFSET_ADJUSTMENT = 160
S390X_CFA_OFFSET_ALIGNMENT = 8
#: On s390x the stack pointer at the CFA is CFA - 160.
S390X_SP_VAL_OFFSET = -160


class DwarfReg:
    """DWARF register numbers of the SP, FP and RA per ABI (docs/format.md, "DWARF register
    numbers")."""

    SP: dict[Abi, int] = {
        Abi.AMD64_ENDIAN_LITTLE: 7,
        Abi.AARCH64_ENDIAN_LITTLE: 31,
        Abi.AARCH64_ENDIAN_BIG: 31,
        Abi.S390X_ENDIAN_BIG: 15,
    }
    FP: dict[Abi, int] = {
        Abi.AMD64_ENDIAN_LITTLE: 6,
        Abi.AARCH64_ENDIAN_LITTLE: 29,
        Abi.AARCH64_ENDIAN_BIG: 29,
        Abi.S390X_ENDIAN_BIG: 11,
    }
    RA: dict[Abi, int] = {
        Abi.AMD64_ENDIAN_LITTLE: 16,
        Abi.AARCH64_ENDIAN_LITTLE: 30,
        Abi.AARCH64_ENDIAN_BIG: 30,
        Abi.S390X_ENDIAN_BIG: 14,
    }


#: Header defaults GNU as writes per ABI: (cfa_fixed_fp_offset, cfa_fixed_ra_offset).
DEFAULT_FIXED_OFFSETS: dict[Abi, tuple[int, int]] = {
    Abi.AMD64_ENDIAN_LITTLE: (0, -8),
    Abi.AARCH64_ENDIAN_LITTLE: (0, 0),
    Abi.AARCH64_ENDIAN_BIG: (0, 0),
    Abi.S390X_ENDIAN_BIG: (0, 0),
}
