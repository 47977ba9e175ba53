"""ELF files: headers, sections, segments, symbols, relocations and notes, read with pyelftools.

:class:`ElfImage` is how pysframe reads an ELF file: its headers, sections, segments and
notes.  :mod:`pysframe.elf.layout` declares the layouts it writes or parses by hand,
:mod:`pysframe.elf.relocation` reads and applies an object's relocations,
:mod:`pysframe.elf.symbols` reads symbol tables, and :mod:`pysframe.elf.sframe` finds and loads
the SFrame section.  Every failure raises :class:`pysframe.errors.ElfError` naming the file.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, BinaryIO

from elftools.common.exceptions import ELFError as _PyElfError
from elftools.construct import ConstructError as _ConstructError
from elftools.elf import enums as _enums
from elftools.elf.elffile import ELFFile

from ..errors import ElfError, SFrameError
from ..format.constants import PT_GNU_SFRAME, SHT_GNU_SFRAME, Abi
from ..input import InputError, open_input
from .layout import (
    EHDR_SIZE,
    ELF_MAGIC,
    ELFCOMPRESS_ZLIB,
    EM_386,
    EM_AARCH64,
    EM_ARM,
    EM_PPC,
    EM_PPC64,
    EM_RISCV,
    EM_S390,
    EM_X86_64,
    ET_REL,
    NOTE_HEADER_SIZE,
    NT_GNU_BUILD_ID,
    PF_X,
    PHDR_NAMES,
    PT_INTERP,
    PT_LOAD,
    PT_NOTE,
    SHDR_NAMES,
    SHF_ALLOC,
    SHF_COMPRESSED,
    SHF_EXECINSTR,
    SHT_NOBITS,
    SHT_NOTE,
    ElfHeader,
    byte_order,
    note_padded,
    note_struct,
    phdr_struct,
    shdr_struct,
    unpack_chdr,
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


@dataclass(frozen=True, slots=True)
class ElfSection:
    """A section header.  ``index`` -1: made up from the ``PT_GNU_SFRAME`` segment."""

    index: int
    name: str
    type: int
    address: int
    offset: int
    size: int
    flags: int
    link: int = 0
    info: int = 0
    entsize: int = 0
    #: sh_name (the name's offset in the section-name string table) and sh_addralign.
    name_offset: int = 0
    addralign: int = 0
    _image: ElfImage | None = field(default=None, compare=False, repr=False)

    def data(self) -> bytes:
        """The section contents (decompressed if SHF_COMPRESSED; empty for SHT_NOBITS)."""
        if self._image is None:
            raise ElfError(f"section {self.name} has no file to read from")
        return self._image.section_data(self)

    def pack(self, bits: int, big_endian: bool) -> bytes:
        """The section header as the file stores it (class ``bits``, byte order)."""
        return _packed(shdr_struct(bits, big_endian), "section header", self, SHDR_NAMES, bits)


@dataclass(frozen=True, slots=True)
class ElfSegment:
    """A program header (its contents: :meth:`ElfImage.segment_data`)."""

    type: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    flags: int
    align: int

    def contains(self, address: int) -> bool:
        return self.vaddr <= address < self.vaddr + self.memsz

    def pack(self, bits: int, big_endian: bool) -> bytes:
        """The program header as the file stores it (class ``bits``, byte order)."""
        layout = phdr_struct(bits, big_endian)
        return _packed(layout, "program header", self, PHDR_NAMES[bits], bits)


def _packed(
    layout: struct.Struct,
    what: str,
    header: ElfSection | ElfSegment,
    names: tuple[str, ...],
    bits: int,
) -> bytes:
    """``header``'s fields ``names`` packed by ``layout``; ElfError naming the field when one
    does not fit it (an address moved past the end of the ELF class's address space)."""
    values = [getattr(header, name) for name in names]
    try:
        return layout.pack(*values)
    except struct.error:
        for name, value, code in zip(names, values, layout.format.lstrip("<>"), strict=True):
            if not 0 <= value < 1 << (8 * struct.calcsize(code)):
                raise ElfError(
                    f"the {what}'s {name} {value:#x} does not fit an ELFCLASS{bits} field"
                ) from None
        raise


#: What pyelftools and the file layer raise on malformed input.
#: Decompressed sections may be this many times their compressed size (plus 1 MiB)...
MAX_EXPANSION = 64
#: ... and never more than this (512 MiB).
MAX_DECOMPRESSED = 512 << 20

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


def is_elf_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts with the ELF magic (False if it cannot
    be opened as :func:`pysframe.input.open_input` opens inputs: a FIFO, a device...)."""
    try:
        with open_input(path) as stream:
            return stream.read(4) == ELF_MAGIC
    except (InputError, OSError):
        return False


class ElfImage:
    """An open ELF file: ``path`` names it in messages; ``file`` is any seekable binary file
    object (an open file, io.BytesIO...), which the image reads and closes.  Use as a context
    manager, or call :meth:`close`."""

    def __init__(self, path: str, file: BinaryIO) -> None:
        self.path = path
        self._file = file
        try:
            self._elf = ELFFile(file)
            #: e_machine as pyelftools names it ("EM_X86_64"), or the number when unknown.
            self._machine_value: str | int = self._elf.header["e_machine"]
            bits = 64 if self._elf.elfclass == 64 else 32
            self.header: ElfHeader = ElfHeader.unpack(self.read(0, EHDR_SIZE[bits]))
        except (SFrameError, *_READ_ERRORS) as error:
            raise ElfError(f"unreadable ELF file ({error})", path=path) from None
        self.e_type: int = self.header.type
        self.machine: int = self.header.machine
        self._sections: list[ElfSection] | None = None
        self._segments: list[ElfSegment] | None = None

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str) -> ElfImage:
        """Open ``path``; InputError if it cannot be opened as inputs are
        (:func:`pysframe.input.open_input`: missing, not a regular file...), ElfError if it is
        not an ELF file."""
        file = open_input(path)  # closed by close()/__exit__
        try:
            magic = file.read(4)
            if magic != ELF_MAGIC:
                raise ElfError("not an ELF file", path=path)
            file.seek(0)
            return cls(path, file)
        except BaseException:
            file.close()
            raise

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> ElfImage:
        """An ELF image held in memory (the vDSO read from a process, for one); ``name`` is
        what messages call it."""
        if data[:4] != ELF_MAGIC:
            raise ElfError("not an ELF file", path=name)
        return cls(name, io.BytesIO(data))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ElfImage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- file facts ----------------------------------------------------------------------------
    @property
    def elfclass(self) -> int:
        """32 or 64."""
        return self.header.bits

    @property
    def big_endian(self) -> bool:
        return self.header.big_endian

    @property
    def is_relocatable(self) -> bool:
        return self.e_type == ET_REL

    @property
    def entry(self) -> int:
        return self.header.entry

    @property
    def machine_name(self) -> str:
        """The machine as pyelftools names it, without ``EM_`` (``X86_64``, ``AARCH64``...);
        the number when it has no name."""
        return str(self._machine_value).removeprefix("EM_")

    @property
    def abi(self) -> Abi | None:
        """The SFrame ABI of the machine (None when SFrame defines none for it)."""
        if self.machine == EM_X86_64 and self.elfclass == 64:
            return Abi.AMD64_ENDIAN_LITTLE
        if self.machine == EM_AARCH64 and self.elfclass == 64:
            return Abi.AARCH64_ENDIAN_BIG if self.big_endian else Abi.AARCH64_ENDIAN_LITTLE
        if self.machine == EM_S390 and self.elfclass == 64:
            return Abi.S390X_ENDIAN_BIG
        return None

    @property
    def file_format(self) -> str:
        """The BFD target name objdump prints (``elf64-x86-64``, ``elf64-littleaarch64``...)."""
        bits = self.elfclass
        endian = "big" if self.big_endian else "little"
        if self.machine == EM_X86_64:
            return f"elf{bits}-x86-64"
        if self.machine == EM_386:
            return "elf32-i386"
        if self.machine == EM_AARCH64:
            return f"elf{bits}-{endian}aarch64"
        if self.machine == EM_S390:
            return f"elf{bits}-s390"
        if self.machine == EM_ARM:
            return f"elf32-{endian}arm"
        if self.machine == EM_RISCV:
            return f"elf{bits}-{endian}riscv"
        if self.machine == EM_PPC64:
            return "elf64-powerpc" if self.big_endian else "elf64-powerpcle"
        if self.machine == EM_PPC:
            return "elf32-powerpc" if self.big_endian else "elf32-powerpcle"
        return f"elf{bits}-{endian}"

    @property
    def file_size(self) -> int:
        """Bytes in the file."""
        try:
            return os.fstat(self._file.fileno()).st_size
        except (OSError, ValueError, io.UnsupportedOperation):  # in memory
            return self._file.seek(0, io.SEEK_END)

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes of the file at ``offset``; ElfError if the file is shorter (checked
        before reading: a header may claim any size)."""
        self.check_range(f"{size} bytes at file offset {offset:#x}", offset, size)
        try:
            self._file.seek(offset)
            data = self._file.read(size)
        except (OSError, ValueError, OverflowError) as error:
            raise ElfError(
                f"cannot read {size} bytes at file offset {offset:#x}: {error}", path=self.path
            ) from None
        if len(data) != size:
            raise ElfError(
                f"{size} bytes at file offset {offset:#x} run past the end of the file",
                path=self.path,
            )
        return data

    def check_range(self, what: str, offset: int, size: int) -> None:
        """ElfError unless ``size`` bytes at ``offset`` lie inside the file."""
        if offset < 0 or size < 0 or offset + size > self.file_size:
            raise ElfError(f"{what} run past the end of the file", path=self.path)

    def _check_table(self, kind: str, count: int, offset: int, entry_size: int) -> None:
        # gABI: e_phentsize and e_shentsize give each entry's size, at least the class's.
        layout = phdr_struct if kind == "program" else shdr_struct
        smallest = layout(self.header.bits, self.big_endian).size
        if count and entry_size < smallest:
            raise ElfError(
                f"unreadable {kind} headers (entries of {entry_size} bytes, fewer than the "
                f"{smallest} of ELFCLASS{self.header.bits})",
                path=self.path,
            )
        if count and offset + count * entry_size > self.file_size:
            raise ElfError(
                f"unreadable {kind} headers ({count} headers of {entry_size} bytes at "
                f"{offset:#x} run past the end of the file)",
                path=self.path,
            )

    def code_bytes(self) -> int:
        """Bytes of executable code: of the allocated executable sections with contents, or,
        when the section headers are stripped, of the executable PT_LOAD segments."""
        sections = self.sections()
        if sections:
            wanted = SHF_ALLOC | SHF_EXECINSTR
            return sum(
                s.size for s in sections if s.flags & wanted == wanted and s.type != SHT_NOBITS
            )
        return sum(seg.filesz for seg in self.load_segments() if seg.flags & PF_X)

    # -- sections ------------------------------------------------------------------------------
    def sections(self) -> list[ElfSection]:
        """All section headers, in index order (empty when they are stripped)."""
        if self._sections is None:
            self._sections = list(self._read_sections())
        return list(self._sections)

    def has_section_headers(self) -> bool:
        """Whether the file has section headers: more than the null entry (gABI, "Sections":
        index 0 is reserved, so a table of one entry describes no section)."""
        return len(self.sections()) > 1

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

    def section(self, name: str) -> ElfSection | None:
        """The first section called ``name``."""
        for sec in self.sections():
            if sec.name == name:
                return sec
        return None

    def section_by_type(self, sh_type: int) -> ElfSection | None:
        for sec in self.sections():
            if sec.type == sh_type:
                return sec
        return None

    def section_data(self, section: ElfSection) -> bytes:
        """The contents of ``section``, read from the file (each call reads them again)."""
        if section.type == SHT_NOBITS:
            return b""
        if section.index < 0:
            return self.read(section.offset, section.size)
        if section.flags & SHF_COMPRESSED:
            return self._decompressed(section)
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
        if section.size and len(data) < section.size and not section.flags & SHF_COMPRESSED:
            raise ElfError(
                f"{section.size:#x} bytes at file offset {section.offset:#x} run past the end of "
                "the file",
                path=self.path,
                section=section.name,
            )
        return bytes(data)

    def _decompressed(self, section: ElfSection) -> bytes:
        """A SHF_COMPRESSED section's contents (gABI "Compressed Sections"), decompressed
        within a bound: at most :data:`MAX_EXPANSION` times the compressed size plus 1 MiB,
        and never more than :data:`MAX_DECOMPRESSED` bytes, so a small bomb stays small."""
        stored = self.read(section.offset, section.size)
        try:
            kind, size, header = unpack_chdr(stored, self.header.bits, self.big_endian)
        except ElfError as error:
            raise error.at(path=self.path, section=section.name) from None
        path, name = self.path, section.name
        if kind != ELFCOMPRESS_ZLIB:
            raise ElfError(
                f"compression type {kind} is not supported (only zlib)", path=path, section=name
            )
        limit = min(MAX_DECOMPRESSED, MAX_EXPANSION * len(stored) + (1 << 20))
        if size > limit:
            raise ElfError(
                f"claims {size} bytes decompressed from {len(stored)}, more than the {limit} "
                "allowed",
                path=path,
                section=name,
            )
        inflater = zlib.decompressobj()
        try:
            data = inflater.decompress(stored[header:], size + 1)
        except zlib.error as error:
            raise ElfError(f"bad zlib data ({error})", path=path, section=name) from None
        if len(data) != size:
            raise ElfError(
                f"decompresses to {len(data)} bytes, its header says {size}",
                path=path,
                section=name,
            )
        return data

    # -- segments ------------------------------------------------------------------------------
    def segments(self) -> list[ElfSegment]:
        """All program headers (empty for relocatable objects)."""
        if self._segments is None:
            self._segments = self._read_segments()
        return list(self._segments)

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

    def load_segments(self) -> list[ElfSegment]:
        return [seg for seg in self.segments() if seg.type == PT_LOAD]

    def segment(self, p_type: int) -> ElfSegment | None:
        for seg in self.segments():
            if seg.type == p_type:
                return seg
        return None

    def segment_data(self, segment: ElfSegment) -> bytes:
        """The file bytes of ``segment`` (p_filesz bytes at p_offset)."""
        return self.read(segment.offset, segment.filesz)

    # -- the SFrame section ----------------------------------------------------------------------
    def find_sframe(self, name: str | None = None) -> ElfSection | None:
        """The header of the SFrame section: by ``name`` if given; else ``.sframe``, else the
        first section of type SHT_GNU_SFRAME, else (no section headers) the PT_GNU_SFRAME
        segment.  :mod:`pysframe.elf.sframe` loads it."""
        if name is not None:
            return self.section(name)
        found = self.section(".sframe") or self.section_by_type(SHT_GNU_SFRAME)
        if found is not None:
            return found
        if self.has_section_headers():
            return None
        seg = self.segment(PT_GNU_SFRAME)
        if seg is None:
            return None
        return ElfSection(
            index=-1,
            name=".sframe",
            type=SHT_GNU_SFRAME,
            address=seg.vaddr,
            offset=seg.offset,
            size=seg.filesz,
            flags=SHF_ALLOC,
            _image=self,
        )

    # -- notes ------------------------------------------------------------------------------------
    def notes(self) -> Iterator[tuple[bytes, int, bytes]]:
        """(name, type, descriptor) of every note of the PT_NOTE segments; ElfError when one
        runs past the end of its segment."""
        for seg in self.segments():
            if seg.type == PT_NOTE:
                yield from iter_notes(self.segment_data(seg), self.big_endian)

    def build_id(self) -> bytes | None:
        """The NT_GNU_BUILD_ID descriptor of ``.note.gnu.build-id`` (or of a PT_NOTE segment)."""
        sources: list[bytes] = []
        sec = self.section(".note.gnu.build-id")
        if sec is not None and sec.type == SHT_NOTE:
            sources.append(sec.data())
        elif not self.has_section_headers():
            sources.extend(self.segment_data(s) for s in self.segments() if s.type == PT_NOTE)
        for data in sources:
            # A note running past its section ends the search (junk after the build ID).
            with suppress(ElfError):
                for name, note_type, desc in iter_notes(data, self.big_endian):
                    if name == b"GNU" and note_type == NT_GNU_BUILD_ID:
                        return desc
        return None

    def build_id_as_perf(self) -> bytes | None:
        """The build ID as perf reads it (util/symbol-elf.c elf_read_build_id): the
        NT_GNU_BUILD_ID note of the first section there is of ``.note.gnu.build-id``,
        ``.notes`` and ``.note`` (the vDSO's), whatever its type."""
        for name in (".note.gnu.build-id", ".notes", ".note"):
            sec = self.section(name)
            if sec is None:
                continue
            with suppress(ElfError):
                for note_name, note_type, desc in iter_notes(sec.data(), self.big_endian):
                    if note_name == b"GNU" and note_type == NT_GNU_BUILD_ID:
                        return desc
            return None
        return None

    def debuglink(self) -> tuple[str, int] | None:
        """(file name, CRC32) of ``.gnu_debuglink``."""
        sec = self.section(".gnu_debuglink")
        if sec is None:
            return None
        data = sec.data()
        end = data.find(b"\0")
        if end <= 0:
            return None
        crc_at = (end + 4) & ~3
        if crc_at + 4 > len(data):
            return None
        (crc,) = struct.unpack_from(byte_order(self.big_endian) + "I", data, crc_at)
        return data[:end].decode("utf-8", "replace"), int(crc)

    def dwarf(self) -> Any:
        """pyelftools' DWARFInfo of the file (its ``.debug_*`` sections, decompressed), or
        None without ``.debug_info``.  Parsing is lazy: malformed DWARF raises when read."""
        if self.section(".debug_info") is None:
            return None
        try:
            return self._elf.get_dwarf_info(relocate_dwarf_sections=self.is_relocatable)
        except _READ_ERRORS as error:
            raise ElfError(f"unreadable DWARF ({error})", path=self.path) from None

    def interpreter(self) -> str | None:
        seg = self.segment(PT_INTERP)
        if seg is None:
            return None
        return self.segment_data(seg).split(b"\0", 1)[0].decode("utf-8", "replace")


def iter_notes(data: bytes, big_endian: bool) -> Iterator[tuple[bytes, int, bytes]]:
    """(name, type, descriptor) of each ELF note in ``data``, names without their NULs;
    ElfError when a note runs past the end of ``data``."""
    header = note_struct(big_endian)
    pos = 0
    while pos + NOTE_HEADER_SIZE <= len(data):
        namesz, descsz, note_type = header.unpack_from(data, pos)
        name_at = pos + NOTE_HEADER_SIZE
        desc_at = name_at + note_padded(namesz)
        if desc_at + descsz > len(data):
            raise ElfError(f"the note at byte {pos:#x} runs past the end of its {len(data)} bytes")
        yield (
            data[name_at : name_at + namesz].rstrip(b"\0"),
            note_type,
            data[desc_at : desc_at + descsz],
        )
        pos = desc_at + note_padded(descsz)


__all__ = [
    "ElfImage",
    "ElfSection",
    "ElfSegment",
    "is_elf_file",
    "iter_notes",
]
