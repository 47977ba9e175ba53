"""Relocations of a relocatable object's section, applied the way bfd's simple relocation
(``bfd_perform_relocation``) applies them in objdump 2.47: every section of an object sits at
address 0, so S is the symbol's value and P the field's offset (plus the section address).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import ElfError
from .layout import EM_386, EM_AARCH64, EM_S390, EM_X86_64, byte_order

#: (machine, relocation type) -> (field size in bytes, PC-relative).  Type 0 (NONE) is skipped.
#: Sources: the psABIs of x86-64 (R_X86_64_*), i386, AArch64 (R_AARCH64_*) and s390x (R_390_*).
RELOCATION_KINDS: dict[tuple[int, int], tuple[int, bool]] = {
    (EM_X86_64, 1): (8, False),  # R_X86_64_64        S + A
    (EM_X86_64, 2): (4, True),  # R_X86_64_PC32       S + A - P
    (EM_X86_64, 10): (4, False),  # R_X86_64_32       S + A
    (EM_X86_64, 11): (4, False),  # R_X86_64_32S      S + A
    (EM_X86_64, 24): (8, True),  # R_X86_64_PC64      S + A - P
    (EM_386, 1): (4, False),  # R_386_32
    (EM_386, 2): (4, True),  # R_386_PC32
    (EM_AARCH64, 257): (8, False),  # R_AARCH64_ABS64
    (EM_AARCH64, 258): (4, False),  # R_AARCH64_ABS32
    (EM_AARCH64, 260): (8, True),  # R_AARCH64_PREL64
    (EM_AARCH64, 261): (4, True),  # R_AARCH64_PREL32
    (EM_S390, 4): (4, False),  # R_390_32
    (EM_S390, 5): (4, True),  # R_390_PC32
    (EM_S390, 22): (8, False),  # R_390_64
    (EM_S390, 23): (8, True),  # R_390_PC64
}


@dataclass(frozen=True, slots=True)
class Relocation:
    """One relocation against a section: the field at ``offset`` gets S + A (- P if PC-relative).

    ``addend`` None means a REL entry: the addend is the field's current content.
    """

    offset: int
    type: int
    symbol_value: int
    addend: int | None = None
    symbol_name: str = ""
    #: The index of the section the symbol is defined in (0: none, or a special index).
    symbol_section: int = 0


def apply_relocations(
    data: bytes,
    relocations: Iterable[Relocation],
    machine: int,
    big_endian: bool,
    section_address: int = 0,
) -> bytes:
    """``data`` with ``relocations`` applied (S + A - P for PC-relative kinds, S + A otherwise).

    P is ``section_address + offset``.  Results are truncated to the field size, as bfd's
    ``bfd_perform_relocation`` stores them in relocatable links.
    """
    out = bytearray(data)
    order = byte_order(big_endian)
    for reloc in relocations:
        if reloc.type == 0:
            continue
        kind = RELOCATION_KINDS.get((machine, reloc.type))
        if kind is None:
            raise ElfError(
                f"relocation type {reloc.type} (machine {machine}) at offset {reloc.offset:#x} "
                "is not supported"
            )
        size, pcrel = kind
        if reloc.offset < 0 or reloc.offset + size > len(out):
            raise ElfError(
                f"relocation at offset {reloc.offset:#x} runs past the section end ({len(out):#x})"
            )
        fmt = order + ("q" if size == 8 else "i")
        addend = reloc.addend
        if addend is None:
            (addend,) = struct.unpack_from(fmt, out, reloc.offset)
        value = reloc.symbol_value + addend
        if pcrel:
            value -= section_address + reloc.offset
        mask = (1 << (8 * size)) - 1
        struct.pack_into(order + ("Q" if size == 8 else "I"), out, reloc.offset, value & mask)
    return bytes(out)


__all__ = ["RELOCATION_KINDS", "Relocation", "apply_relocations"]
