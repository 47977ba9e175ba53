"""SFrame sections that are not an ELF file's own: bare section files and generated sections.

``dump``, ``info`` and ``lookup`` read an ELF file's SFrame section through
:mod:`pysframe.elf.sframe`.  They also read:

* a **bare section file** -- the bytes of one SFrame section, as ``generate -o X.sframe``
  writes them (or ``objcopy -O binary --only-section=.sframe``): named by ``--raw``, or
  recognised by its first two bytes, the SFrame magic in either byte order (V2 spec 2.1).  It
  carries no address: ``--address`` gives the section's (0 by default), which PC-relative
  function starts need;
* a **generated section** (``--generate``) for an ELF file without one: made from its CFI by
  :func:`pysframe.generate.generate_from_elf`, as ``stack`` and ``stats`` do, at the address
  ``generate --inject`` would give it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..elf.image import ElfImage
from ..errors import SFrameError
from ..format.constants import SFRAME_MAGIC
from ..format.section import SFrameSection
from ..input import open_input, read_input

#: The objdump-style "file format" of a bare section file.
BARE_FORMAT = "sframe"
#: The first two bytes of an SFrame section, little- and big-endian (V2 spec 2.1).
_MAGIC_BYTES = (SFRAME_MAGIC.to_bytes(2, "little"), SFRAME_MAGIC.to_bytes(2, "big"))


@dataclass(frozen=True, slots=True)
class OtherSection:
    """A decoded SFrame section and what the commands print about where it came from."""

    path: str
    #: The section's name as shown (``.sframe``).
    name: str
    file_format: str
    section: SFrameSection
    #: Bytes of executable code of the file it describes (0 for a bare section).
    code_bytes: int
    relocatable: bool
    #: "bare" or "generated".
    origin: str


def is_bare_section(path: str) -> bool:
    """Whether the regular file ``path`` starts with the SFrame magic (and so is no ELF file)."""
    with open_input(path) as stream:
        return stream.read(2) in _MAGIC_BYTES


def is_elf_file(path: str) -> bool:
    """Whether ``path`` can be opened and starts with the ELF magic."""
    try:
        with open_input(path) as stream:
            return stream.read(4) == b"\x7fELF"
    except SFrameError:
        return False


def bare_section(path: str, address: int = 0) -> OtherSection:
    """The bare SFrame section in ``path``, at ``address`` (FormatError if malformed)."""
    try:
        section = SFrameSection.from_bytes(read_input(path), address)
    except SFrameError as error:
        text = str(error)
        raise SFrameError(text if text.startswith(f"{path}:") else f"{path}: {text}") from None
    return OtherSection(path, ".sframe", BARE_FORMAT, section, 0, False, "bare")


def generated_section(image: ElfImage) -> OtherSection:
    """A section generated from the CFI of ``image`` (ElfError when it has none usable)."""
    from ..generate import generate_from_elf

    result = generate_from_elf(image)
    return OtherSection(
        image.path,
        ".sframe",
        image.file_format,
        result.section,
        image.code_bytes(),
        image.is_relocatable,
        "generated",
    )


def generated_note(path: str) -> str:
    """The warning line's text when a section is shown generated."""
    return f"warning: {path}: no .sframe section; showing one generated from its CFI"


__all__ = [
    "BARE_FORMAT",
    "OtherSection",
    "bare_section",
    "generated_note",
    "generated_section",
    "is_bare_section",
    "is_elf_file",
]
