"""ELF files: headers, sections, segments, symbols, relocations and notes, read with pyelftools.

:class:`ElfImage` is how pysframe reads an ELF file: its headers, sections, segments and
notes.  It is an :class:`~pysframe.elf.reader.ElfReader` (the code of what it gives: the
machine, notes, the build ID, the SFrame section's header...) whose header tables and section
contents come from pyelftools, and the reference the struct-only reader is held to.
:mod:`pysframe.elf.layout` declares the layouts it writes or parses by hand,
:mod:`pysframe.elf.relocation` reads and applies an object's relocations,
:mod:`pysframe.elf.symbols` reads symbol tables, and :mod:`pysframe.elf.sframe` finds and loads
the SFrame section.  Every failure raises :class:`pysframe.errors.ElfError` naming the file.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

from elftools.common.exceptions import ELFError as _PyElfError
from elftools.construct import ConstructError as _ConstructError
from elftools.elf import enums as _enums
from elftools.elf.elffile import ELFFile

from ..errors import ElfError, SFrameError
from .layout import SHF_COMPRESSED, SHT_NOBITS
from .reader import (
    MAX_DECOMPRESSED,
    MAX_EXPANSION,
    ElfReader,
    ElfSection,
    ElfSegment,
    is_elf_file,
    iter_notes,
)

#: Name -> number for the enums pyelftools turns into strings (it keeps unknown values as ints).
_SH_TYPES: dict[str, int] = {}
for _table in (
    _enums.ENUM_SH_TYPE_BASE,
    _enums.ENUM_SH_TYPE_AMD64,
    _enums.ENUM_SH_TYPE_AARCH64,
    _enums.ENUM_SH_TYPE_ARM,
    _enums.ENUM_SH_TYPE_MIPS,
    _enums.ENUM_SH_TYPE_RISCV,
):
    _SH_TYPES.update({k: v for k, v in _table.items() if isinstance(v, int)})
_P_TYPES: dict[str, int] = {}
for _table in (
    _enums.ENUM_P_TYPE_BASE,
    _enums.ENUM_P_TYPE_AARCH64,
    _enums.ENUM_P_TYPE_ARM,
    _enums.ENUM_P_TYPE_MIPS,
    _enums.ENUM_P_TYPE_RISCV,
):
    _P_TYPES.update({k: v for k, v in _table.items() if isinstance(v, int)})
_E_TYPES: dict[str, int] = {k: v for k, v in _enums.ENUM_E_TYPE.items() if isinstance(v, int)}
_MACHINES: dict[str, int] = {k: v for k, v in _enums.ENUM_E_MACHINE.items() if isinstance(v, int)}


def _number(value: object, names: dict[str, int]) -> int:
    """pyelftools gives known enum values as names and unknown ones as ints."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value in names:
        return names[value]
    raise ElfError(f"unknown ELF enum value {value!r}")


_READ_ERRORS = (
    _PyElfError,
    OverflowError,
    _ConstructError,
    struct.error,
    ValueError,
    LookupError,
    AttributeError,
    EOFError,
    OSError,
)


class ElfImage(ElfReader):
    """An open ELF file read with pyelftools: ``path`` names it in messages; ``file`` is any
    seekable binary file object (an open file, io.BytesIO...), which the image reads and
    closes.  Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: str, file: BinaryIO) -> None:
        try:
            self._elf = ELFFile(file)
            #: e_machine as pyelftools names it ("EM_X86_64"), or the number when unknown.
            self._machine_value: str | int = self._elf.header["e_machine"]
        except (SFrameError, *_READ_ERRORS) as error:
            raise ElfError(f"unreadable ELF file ({error})", path=path) from None
        super().__init__(path, file)

    @classmethod
    def reopen(cls, reader: ElfReader) -> ElfImage:
        """The file ``reader`` reads, opened again with pyelftools (the caller closes it)."""
        return cls(reader.path, reader.reopened_file())

    @property
    def machine_name(self) -> str:
        """The machine as pyelftools names it, without ``EM_`` (``X86_64``, ``AARCH64``...);
        the number when it has no name."""
        return str(self._machine_value).removeprefix("EM_")

    # -- sections ------------------------------------------------------------------------------
    def _read_sections(self) -> Iterator[ElfSection]:
        try:
            count = self._elf.num_sections()
            # e_shnum 0 means section 0's sh_size counts them: any number, so bound it first.
            self._check_table("section", count, self.header.shoff, self.header.shentsize)
            # Headers only: building pyelftools section objects parses hash tables (slow).
            for index in range(count):
                h = self._elf._get_section_header(index)
                yield ElfSection(
                    index=index,
                    name=self._elf._get_section_name(h),
                    type=_number(h["sh_type"], _SH_TYPES),
                    address=int(h["sh_addr"]),
                    offset=int(h["sh_offset"]),
                    size=int(h["sh_size"]),
                    flags=int(h["sh_flags"]),
                    link=int(h["sh_link"]),
                    info=int(h["sh_info"]),
                    entsize=int(h["sh_entsize"]),
                    name_offset=int(h["sh_name"]),
                    addralign=int(h["sh_addralign"]),
                    _image=self,
                )
        except SFrameError:
            raise
        except _READ_ERRORS as error:
            raise ElfError(f"unreadable section headers ({error})", path=self.path) from None

    def section_data(self, section: ElfSection) -> bytes:
        """The contents of ``section``, read from the file (each call reads them again)."""
        if section.type == SHT_NOBITS or section.index < 0 or section.flags & SHF_COMPRESSED:
            return super().section_data(section)
        self.check_range(
            f"section {section.name} ({section.size:#x} bytes at file offset {section.offset:#x})",
            section.offset,
            section.size,
        )
        try:
            data = self._elf.get_section(section.index).data()
        except _READ_ERRORS as error:
            raise ElfError(
                f"cannot read it ({error})", path=self.path, section=section.name
            ) from None
        if section.size and len(data) < section.size:
            raise ElfError(
                f"{section.size:#x} bytes at file offset {section.offset:#x} run past the end of "
                "the file",
                path=self.path,
                section=section.name,
            )
        return bytes(data)

    # -- segments ------------------------------------------------------------------------------
    def _read_segments(self) -> list[ElfSegment]:
        try:
            count = self._elf.num_segments()
            self._check_table("program", count, self.header.phoff, self.header.phentsize)
            return [
                ElfSegment(
                    type=_number(seg["p_type"], _P_TYPES),
                    offset=int(seg["p_offset"]),
                    vaddr=int(seg["p_vaddr"]),
                    paddr=int(seg["p_paddr"]),
                    filesz=int(seg["p_filesz"]),
                    memsz=int(seg["p_memsz"]),
                    flags=int(seg["p_flags"]),
                    align=int(seg["p_align"]),
                )
                # The headers alone: iter_segments() would also parse PT_DYNAMIC's tables.
                for seg in map(self._elf._get_segment_header, range(self._elf.num_segments()))
            ]
        except SFrameError:
            raise
        except _READ_ERRORS as error:
            raise ElfError(f"unreadable program headers ({error})", path=self.path) from None

    # -- DWARF ------------------------------------------------------------------------------------
    def dwarf(self) -> Any:
        """pyelftools' DWARFInfo of the file (its ``.debug_*`` sections, decompressed), or
        None without ``.debug_info``.  Parsing is lazy: malformed DWARF raises when read."""
        if self.section(".debug_info") is None:
            return None
        try:
            return self._elf.get_dwarf_info(relocate_dwarf_sections=self.is_relocatable)
        except _READ_ERRORS as error:
            raise ElfError(f"unreadable DWARF ({error})", path=self.path) from None


__all__ = [
    "MAX_DECOMPRESSED",
    "MAX_EXPANSION",
    "ElfImage",
    "ElfSection",
    "ElfSegment",
    "is_elf_file",
    "iter_notes",
]
