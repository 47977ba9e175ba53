"""A file's SFrame section: which section it is, its bytes, and how they are loaded.

:mod:`pysframe.sources` (the one way commands and the unwinder get a file's SFrame section)
finds and loads an ELF file's own section here, the way the GNU tools do:

* which section: :meth:`ElfReader.find_sframe <pysframe.elf.reader.ElfReader.find_sframe>` -- by
  name (``.sframe`` unless told otherwise), else by type ``SHT_GNU_SFRAME`` (errata 1), else
  the ``PT_GNU_SFRAME`` segment when the section headers are stripped;
* what objdump 2.47 accepts as SFrame data (:meth:`ElfSFrame.is_sframe_data`): sections of
  type ``SHT_GNU_SFRAME``, and ``SHT_PROGBITS`` ones named ``.sframe`` (what older linkers and
  assemblers wrote);
* relocation: in relocatable objects the section's ``.rela.sframe`` / ``.rel.sframe`` entries
  are applied, as objdump 2.47 loads the section -- except in V1 sections (the preamble's
  version byte, V2 spec 2.1), which readelf 2.40, the reader of V1, showed as stored.

The section's bytes are read from the file once, however often they are asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format.constants import SHT_GNU_SFRAME, Version
from .layout import SHT_PROGBITS
from .reader import ElfReader, ElfSection

if TYPE_CHECKING:
    from ..format.section import SFrameSection

#: The section name the tools look for when given none.
DEFAULT_NAME = ".sframe"


class ElfSFrame:
    """The SFrame section of an open ELF file: its header, and its bytes read on first use."""

    def __init__(self, image: ElfReader, section: ElfSection) -> None:
        self.image = image
        self.section = section
        self._stored: bytes | None = None

    @property
    def name(self) -> str:
        return self.section.name

    @property
    def address(self) -> int:
        return self.section.address

    @property
    def stored(self) -> bytes:
        """The section's bytes as the file stores them (read from the file on first use)."""
        if self._stored is None:
            self._stored = self.section.data()
        return self._stored

    @property
    def version(self) -> Version | None:
        """The preamble's version byte (V2 spec 2.1), None when it names no known version."""
        data = self.stored
        if len(data) >= 3 and data[2] in Version._value2member_map_:
            return Version(data[2])
        return None

    def is_sframe_data(self, asked: str | None = None) -> bool:
        """Whether objdump 2.47 reads the section as SFrame data: type SHT_GNU_SFRAME (or the
        PT_GNU_SFRAME segment), or SHT_PROGBITS when the name looked for is ``.sframe``."""
        if self.section.type == SHT_GNU_SFRAME or self.section.index < 0:
            return True
        return self.section.type == SHT_PROGBITS and (asked or DEFAULT_NAME) == DEFAULT_NAME

    def contents(self, relocate: bool = True) -> bytes:
        """The bytes to decode: relocated in relocatable objects when ``relocate``, unless the
        section is V1."""
        if not relocate or not self.image.is_relocatable or self.version is Version.V1:
            return self.stored
        from .relocation import relocated

        return relocated(self.image, self.section, self.stored)

    def decode(self, relocate: bool = True) -> SFrameSection:
        """The decoded section (see :meth:`contents`); FormatError if it is malformed."""
        from ..format.section import SFrameSection

        return SFrameSection.from_bytes(self.contents(relocate), self.section.address)


def find_sframe(image: ElfReader, name: str | None = None) -> ElfSFrame | None:
    """The SFrame section of ``image`` (section ``name`` if given), or None."""
    section = image.find_sframe(name)
    return None if section is None else ElfSFrame(image, section)


__all__ = ["DEFAULT_NAME", "ElfSFrame", "find_sframe"]
