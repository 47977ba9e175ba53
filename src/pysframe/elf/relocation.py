"""Relocations of a relocatable object's section, read and applied the way bfd's simple
relocation (``bfd_perform_relocation``) applies them in objdump 2.47: every section of an
object sits at address 0, so S is the symbol's value and P the field's offset (plus the section
address).

* :func:`relocations_for` reads the REL/RELA entries that apply to a section (gABI
  "Relocation": the relocation sections whose ``sh_info`` names it), each entry's symbol
  resolved in the symbol table its ``sh_link`` names (:mod:`pysframe.elf.symbols`) -- in bulk,
  with the layouts of :mod:`pysframe.elf.layout`;
* :func:`relocated` gives a section's contents as objdump 2.47 shows them (relocations applied
  with every section at 0);
* :func:`object_layout` and :func:`relocated_at` lay an object's sections out one after the
  other, as a link would, so that code of different sections has different addresses
  (``pysframe verify`` compares an object's SFrame with its CFI so).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..dataclass import dataclass
from ..errors import ElfError
from .layout import (
    EM_386,
    EM_AARCH64,
    EM_S390,
    EM_X86_64,
    R_INFO_SHIFT,
    RELOCATION_FIELDS,
    SHF_ALLOC,
    SHN_LORESERVE,
    SHT_REL,
    SHT_RELA,
    byte_order,
    table_columns,
)

if TYPE_CHECKING:
    import numpy as np

    from .reader import ElfReader, ElfSection

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
                "is not supported",
                reloc.offset,
            )
        size, pcrel = kind
        if reloc.offset < 0 or reloc.offset + size > len(out):
            raise ElfError(
                f"relocation at offset {reloc.offset:#x} runs past the section end ({len(out):#x})",
                reloc.offset,
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


def relocations_for(image: ElfReader, section: ElfSection) -> list[Relocation]:
    """The REL/RELA entries of ``image`` that apply to ``section`` (those of the relocation
    sections whose sh_info names it), with their symbols' values (plus, for a symbol defined in
    a section, that section's address)."""
    if section.index < 0:
        return []
    sections = image.sections()
    out: list[Relocation] = []
    for rel in sections:
        if rel.type in (SHT_REL, SHT_RELA) and rel.info == section.index:
            out.extend(_read_relocations(image, rel, sections))
    return out


def _read_relocations(
    image: ElfReader, rel: ElfSection, sections: list[ElfSection]
) -> list[Relocation]:
    from .symbols import read_symbol_table

    entries = relocation_columns(image, rel)
    shift = R_INFO_SHIFT[image.elfclass]
    addends: Sequence[int | None] = entries.get("addend", [None] * len(entries["offset"]))
    linked = sections[rel.link] if 0 < rel.link < len(sections) else None
    symbols = None if linked is None else read_symbol_table(image, linked)
    out = []
    for offset, info, addend in zip(entries["offset"], entries["info"], addends, strict=True):
        index, value, defined_in = info >> shift, 0, 0
        if index and symbols is not None:
            if index >= len(symbols):
                raise ElfError(
                    f"{rel.name}: relocation at {offset:#x} names symbol {index}, past the end "
                    f"of its {len(symbols)}-entry table",
                    path=image.path,
                )
            shndx = symbols.columns["shndx"][index]
            value = symbols.columns["value"][index]
            if 0 < shndx < SHN_LORESERVE and shndx < len(sections):
                value += sections[shndx].address
                defined_in = shndx
        out.append(Relocation(offset, info & ((1 << shift) - 1), value, addend, defined_in))
    return out


def relocation_columns(image: ElfReader, rel: ElfSection) -> dict[str, Sequence[int]]:
    """The entries of the REL or RELA section ``rel`` as columns: ``offset``, ``info`` and,
    for RELA, ``addend`` (:func:`~pysframe.elf.layout.table_columns`)."""
    addend = rel.type == SHT_RELA
    names = ("offset", "info", "addend") if addend else ("offset", "info")
    fields = RELOCATION_FIELDS[image.elfclass, addend]
    return table_columns(rel.data(), fields, names, image.big_endian)


def relocation_symbols(image: ElfReader, rel: ElfSection) -> np.ndarray:
    """The symbol index of each entry of the REL or RELA section ``rel``, in table order
    (``r_info`` shifted by :data:`R_INFO_SHIFT`), as a numpy array."""
    import numpy as np

    info = np.asarray(relocation_columns(image, rel)["info"], dtype=np.uint64)
    indexes: np.ndarray = info >> np.uint64(R_INFO_SHIFT[image.elfclass])
    return indexes


def relocated(image: ElfReader, section: ElfSection, data: bytes) -> bytes:
    """``data``, the contents of ``section``, with the section's relocations applied when the
    file is relocatable (unchanged otherwise, or when none apply)."""
    if not image.is_relocatable:
        return data
    relocations = relocations_for(image, section)
    if not relocations:
        return data
    try:
        return apply_relocations(
            data, relocations, image.machine, image.big_endian, section.address
        )
    except ElfError as error:
        raise error.at(path=image.path, section=section.name) from None


def object_layout(image: ElfReader) -> dict[int, int]:
    """For a relocatable object: an address for each allocated section (by index), one after
    the other in index order, each aligned as it asks, as a link would lay them out.  Code of
    different sections then has different addresses (every section of an object is at
    address 0)."""
    layout: dict[int, int] = {}
    address = 0
    for sec in image.sections():
        if not sec.flags & SHF_ALLOC or sec.index <= 0:
            continue
        align = max(sec.addralign, 1)
        address = (address + align - 1) // align * align
        layout[sec.index] = address
        address += max(sec.size, 1)
    return layout


def relocated_at(
    image: ElfReader, section: ElfSection, data: bytes, layout: dict[int, int]
) -> bytes:
    """``data``, the contents of ``section`` of a relocatable object, relocated as if each
    section were at its address in ``layout`` (:func:`object_layout`)."""
    relocations = [
        replace(r, symbol_value=r.symbol_value + layout.get(r.symbol_section, 0))
        for r in relocations_for(image, section)
    ]
    try:
        return apply_relocations(
            data, relocations, image.machine, image.big_endian, layout.get(section.index, 0)
        )
    except ElfError as error:
        raise error.at(path=image.path, section=section.name) from None


__all__ = [
    "RELOCATION_KINDS",
    "Relocation",
    "apply_relocations",
    "object_layout",
    "relocated",
    "relocated_at",
    "relocation_columns",
    "relocation_symbols",
    "relocations_for",
]
