"""Rewrite an ELF file's SFrame section in place: new bytes where the old ones were.

A linked file loads its ``.sframe`` in a ``PT_LOAD`` segment among other sections, so a new
section can only take the old one's place if it is no larger (System V gABI, "Program
Header"): :func:`rewrite_sframe` writes it at the old section's file offset, zeroes the bytes
it no longer uses, and updates the section header's ``sh_size`` and the ``PT_GNU_SFRAME``
entry's ``p_filesz`` and ``p_memsz`` (errata 1).  Nothing else moves or changes: addresses,
other sections, the segments that load them.  A section that does not fit is refused
(ElfError); moving it elsewhere is what :mod:`pysframe.elf.inject` does.
"""

from __future__ import annotations

import dataclasses

from ..dataclass import dataclass
from ..errors import ElfError
from ..format.constants import PT_GNU_SFRAME
from .layout import ELF_MAGIC, SHF_COMPRESSED, SHT_NOBITS, phdr_struct, shdr_struct
from .reader import ElfReader, ElfSection


@dataclass(frozen=True, slots=True)
class Rewritten:
    """The new file, and what changed in it."""

    data: bytes
    #: The section's size before and after; whether a PT_GNU_SFRAME entry was updated.
    old_size: int
    new_size: int
    segment_updated: bool


def rewrite_sframe(data: bytes, section: ElfSection, sframe: bytes) -> Rewritten:
    """A copy of the ELF file ``data`` whose SFrame ``section`` (a header of ``data``, or the
    one made up from ``PT_GNU_SFRAME`` when section headers are stripped) holds ``sframe``.

    Raises ElfError when ``sframe`` is larger than the section, or the section has no bytes
    of its own in the file (SHT_NOBITS, compressed)."""
    if data[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    if section.type == SHT_NOBITS or section.flags & SHF_COMPRESSED:
        raise ElfError(f"section {section.name} has no bytes of its own to rewrite")
    if len(sframe) > section.size:
        raise ElfError(
            f"the new {section.name} ({len(sframe)} bytes) does not fit in place of the old "
            f"one ({section.size} bytes)"
        )
    if section.offset + section.size > len(data):
        raise ElfError(f"section {section.name} runs past the end of the file")
    out = bytearray(data)
    end = section.offset + len(sframe)
    out[section.offset : end] = sframe
    out[end : section.offset + section.size] = bytes(section.offset + section.size - end)
    with ElfReader.from_bytes("ELF file", data) as image:
        header = image.header
        bits, big_endian = header.bits, header.big_endian
        if section.index >= 0:
            entry = shdr_struct(bits, big_endian).size
            if header.shentsize != entry or section.index >= header.shnum:
                raise ElfError("unexpected section header table")
            at = header.shoff + section.index * entry
            packed = dataclasses.replace(section, size=len(sframe)).pack(bits, big_endian)
            out[at : at + entry] = packed
        entry = phdr_struct(bits, big_endian).size
        updated = False
        for index, segment in enumerate(image.segments()):
            if segment.type != PT_GNU_SFRAME or segment.offset != section.offset:
                continue
            if header.phentsize != entry:
                raise ElfError("unexpected program header size")
            at = header.phoff + index * entry
            resized = dataclasses.replace(segment, filesz=len(sframe), memsz=len(sframe))
            out[at : at + entry] = resized.pack(bits, big_endian)
            updated = True
    return Rewritten(bytes(out), section.size, len(sframe), updated)


__all__ = ["Rewritten", "rewrite_sframe"]
