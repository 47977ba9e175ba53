"""ELF files read with struct: headers, section and program header tables, section contents,
notes, build ID.

:class:`ElfReader` is how pysframe reads an ELF file, for every command and the unwinder
alike: the layouts of :mod:`pysframe.elf.layout`, read with struct, so that opening a file
costs a few reads (``pysframe stack`` opens every file a process maps).  Every failure raises
:class:`pysframe.errors.ElfError` naming the file; a header may claim any size, so every read
is checked against the file's size first.

pyelftools is the oracle it is tested against (tests/elf/test_elf_reader.py: the same headers,
sections, segments and contents on real files and damaged ones).  Where pyelftools refuses a
file, this reader refuses it too, with its own message:

* section headers (pyelftools ``ELFFile``): a table past the end of the file or with entries
  smaller than the class's; with ``e_shnum`` 0 the count is section 0's ``sh_size``, with
  ``e_shstrndx`` SHN_XINDEX the name table's index section 0's ``sh_link``; the name table's
  header must lie in the file; names are read from the file up to their NUL, wherever it is
  (a name without one is empty);
* a section's contents, for the types pysframe reads entry by entry: a symbol table needs a
  non-zero ``sh_entsize`` dividing its size and a string table at ``sh_link``; a relocation
  table entries of its class's size; ``.dynamic`` a string table, NOBITS or NULL section at
  ``sh_link``;
* with ``e_phnum`` PN_XNUM the count is section 0's ``sh_info``.
"""

from __future__ import annotations

import hashlib
import io
import operator
import os
import struct
import zlib
from collections.abc import Callable, Collection, Iterator
from contextlib import suppress
from dataclasses import field
from types import TracebackType
from typing import BinaryIO, Self

from ..dataclass import dataclass
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
    MACHINE_NAMES,
    NOTE_HEADER_SIZE,
    NT_GNU_BUILD_ID,
    PF_X,
    PHDR_NAMES,
    PN_XNUM,
    PT_INTERP,
    PT_LOAD,
    PT_NOTE,
    RELOCATION_FIELDS,
    SHDR_NAMES,
    SHF_ALLOC,
    SHF_COMPRESSED,
    SHF_EXECINSTR,
    SHN_XINDEX,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_NOBITS,
    SHT_NOTE,
    SHT_NULL,
    SHT_REL,
    SHT_RELA,
    SHT_STRTAB,
    SHT_SYMTAB,
    ElfHeader,
    byte_order,
    note_padded,
    note_struct,
    phdr_struct,
    shdr_struct,
    unpack_chdr,
)


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
    _image: ElfReader | None = field(default=None, compare=False, repr=False)

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
    """A program header (its contents: :meth:`ElfReader.segment_data`)."""

    type: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    flags: int
    align: int

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


#: A section header's fields (SHDR_NAMES order) in the order of ElfSection's after its index
#: and name.
_SHDR_AS_SECTION = operator.itemgetter(
    *(
        SHDR_NAMES.index(name)
        for name in ("type", "address", "offset", "size", "flags", "link", "info", "entsize",
                     "name_offset", "addralign")
    )
)  # fmt: skip

#: Where a section header's fields are in its tuple (SHDR_NAMES order).
_SH_NAME, _SH_TYPE, _SH_FLAGS, _SH_OFFSET, _SH_SIZE, _SH_LINK, _SH_INFO = (
    SHDR_NAMES.index(name)
    for name in ("name_offset", "type", "flags", "offset", "size", "link", "info")
)

#: Decompressed sections may be this many times their compressed size (plus 1 MiB)...
MAX_EXPANSION = 64
#: ... and never more than this (512 MiB).
MAX_DECOMPRESSED = 512 << 20
#: Bytes read at a time for a digest of a whole file.
_DIGEST_CHUNK = 1 << 20
#: What reading a damaged file raises below this module's checks.
_STRUCT_ERRORS = (struct.error, OverflowError, ValueError, LookupError, EOFError, OSError)

def is_elf_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts with the ELF magic (False if it cannot
    be opened as :func:`pysframe.input.open_input` opens inputs: a FIFO, a device...)."""
    try:
        with open_input(path) as stream:
            return stream.read(4) == ELF_MAGIC
    except (InputError, OSError):
        return False


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _SectionTable:
    """A file's section header table: its bytes, each entry's size in the file and as the
    class defines it, and each header's fields (SHDR_NAMES order) and name."""

    data: bytes
    entry_size: int
    size: int
    fields: list[tuple[int, ...]]
    names: list[str]

    def entry(self, index: int) -> bytes:
        """Header ``index`` as stored (what ``ElfSection.pack`` gives back)."""
        at = index * self.entry_size
        return self.data[at : at + self.size]


class ElfReader:
    """An open ELF file: ``path`` names it in messages; ``file`` is any seekable binary file
    object (an open file, io.BytesIO...), which the reader reads and closes.  Use as a context
    manager, or call :meth:`close`."""

    def __init__(self, path: str, file: BinaryIO) -> None:
        self.path = path
        self._file = file
        try:
            head = file.read(EHDR_SIZE[64]) if file.seek(0) == 0 else b""
            bits = 64 if head[4:5] == b"\x02" else 32
            #: The ELF header's bytes (what ``header.pack()`` gives back).
            self._header_bytes = head[: EHDR_SIZE[bits]]
            self.header: ElfHeader = ElfHeader.unpack(self._header_bytes)
        except (SFrameError, *_STRUCT_ERRORS) as error:
            raise ElfError(f"unreadable ELF file ({error})", path=path) from None
        self.e_type: int = self.header.type
        self.machine: int = self.header.machine
        self._table: _SectionTable | None = None
        self._sections: list[ElfSection] | None = None
        self._segments: list[ElfSegment] | None = None
        #: The program header table's entries as stored, one per segment.
        self._segment_bytes: list[bytes] = []

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str) -> Self:
        """Open ``path``; InputError if it cannot be opened as inputs are
        (:func:`pysframe.input.open_input`: missing, not a regular file...), ElfError if it is
        not an ELF file."""
        file = open_input(path)  # closed by close()/__exit__
        try:
            try:
                magic = file.read(4)
            except OSError as error:  # the read failed: it is this file's error
                raise InputError(error.strerror or str(error), path=path) from None
            if magic != ELF_MAGIC:
                raise ElfError("not an ELF file", path=path)
            file.seek(0)
            return cls(path, file)
        except BaseException:
            file.close()
            raise

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> Self:
        """An ELF image held in memory (the vDSO read from a process, for one); ``name`` is
        what messages call it."""
        if data[:4] != ELF_MAGIC:
            raise ElfError("not an ELF file", path=name)
        return cls(name, io.BytesIO(data))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
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
    def machine_name(self) -> str:
        """The machine as the gABI names it, without ``EM_`` (``X86_64``, ``AARCH64``...);
        its number for the machines :data:`~pysframe.elf.layout.MACHINE_NAMES` does not name."""
        return MACHINE_NAMES.get(self.machine, str(self.machine))

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
        headers = self._section_table().fields
        if headers:
            wanted = SHF_ALLOC | SHF_EXECINSTR
            return sum(
                h[_SH_SIZE]
                for h in headers
                if h[_SH_FLAGS] & wanted == wanted and h[_SH_TYPE] != SHT_NOBITS
            )
        return sum(seg.filesz for seg in self.load_segments() if seg.flags & PF_X)

    def code_ranges(self) -> list[tuple[int, int]]:
        """The link-time ``[start, end)`` ranges of the executable PT_LOAD segments."""
        return [(s.vaddr, s.vaddr + s.memsz) for s in self.load_segments() if s.flags & PF_X]

    def content_digest(self, names: Collection[str]) -> str:
        """A SHA-256 (hex) of the file's headers -- the ELF header, the program headers, the
        section headers with their names -- and of the stored bytes of the sections called
        one of ``names``; of every byte of the file when it has no section headers (nothing
        then says where a section ends).  ElfError when they cannot be read.  (Each header is
        hashed as the file stores it, what its ``pack`` gives back.)"""
        self.segments()
        digest = hashlib.sha256(b"".join([self._header_bytes, *self._segment_bytes]))
        if not self.has_section_headers():
            size = self.file_size
            for at in range(0, size, _DIGEST_CHUNK):
                digest.update(self.read(at, min(_DIGEST_CHUNK, size - at)))
            return digest.hexdigest()
        table = self._section_table()
        parts: list[bytes] = []
        for index, (fields, name) in enumerate(zip(table.fields, table.names, strict=True)):
            parts += (name.encode(), b"\0", table.entry(index))
            kind, offset, size = fields[_SH_TYPE], fields[_SH_OFFSET], fields[_SH_SIZE]
            if name in names and kind != SHT_NOBITS:
                parts.append(self.read(offset, size))
        digest.update(b"".join(parts))
        return digest.hexdigest()

    # -- sections ------------------------------------------------------------------------------
    def sections(self) -> list[ElfSection]:
        """All section headers, in index order (empty when they are stripped)."""
        if self._sections is None:
            table = self._section_table()
            self._sections = [self._section_at(index) for index in range(len(table.names))]
        return list(self._sections)

    def has_section_headers(self) -> bool:
        """Whether the file has section headers: more than the null entry (gABI, "Sections":
        index 0 is reserved, so a table of one entry describes no section)."""
        return len(self._section_table().names) > 1

    def _section_header(self, index: int) -> tuple[int, ...]:
        """The fields of section header ``index`` (SHDR_NAMES order), which must lie in the
        file whole."""
        header = self.header
        layout = shdr_struct(header.bits, header.big_endian)
        if header.shoff and header.shentsize < layout.size:
            raise ElfError(f"entries of {header.shentsize} bytes are too small", path=self.path)
        return layout.unpack(self.read(header.shoff + index * header.shentsize, layout.size))

    def _section_table(self) -> _SectionTable:
        """The section header table, read once (its headers made into ElfSections as they
        are asked for: a lookup by name makes one)."""
        if self._table is None:
            self._table = self._read_section_table()
        return self._table

    def _read_section_table(self) -> _SectionTable:
        header = self.header
        try:
            count = 0 if header.shoff == 0 else header.shnum or self._section_header(0)[_SH_SIZE]
            # e_shnum 0 means section 0's sh_size counts them: any number, so bound it first.
            self._check_table("section", count, header.shoff, header.shentsize)
            if not count:
                return _SectionTable(b"", 0, 0, [], [])
            layout = shdr_struct(header.bits, header.big_endian)
            table = self.read(header.shoff, count * header.shentsize)
            names = self._name_table()
            fields = [
                layout.unpack_from(table, at)
                for at in range(0, count * header.shentsize, header.shentsize)
            ]
            return _SectionTable(
                table, header.shentsize, layout.size, fields, [names(f[_SH_NAME]) for f in fields]
            )
        except SFrameError as error:
            raise ElfError(f"unreadable section headers ({error.detail})", path=self.path) from None
        except _STRUCT_ERRORS as error:
            raise ElfError(f"unreadable section headers ({error})", path=self.path) from None

    def _section_at(self, index: int) -> ElfSection:
        """The header of section ``index`` of the table."""
        if self._sections is not None:
            return self._sections[index]
        table = self._section_table()
        kind, address, offset, size, flags, link, info, entsize, at, align = _SHDR_AS_SECTION(
            table.fields[index]
        )
        return ElfSection(
            index, table.names[index], kind, address, offset, size, flags, link, info, entsize,
            at, align, self,
        )  # fmt: skip

    def _name_table(self) -> Callable[[int], str]:
        """The names of sections by sh_name: read from the name table's offset on, up to a NUL
        wherever it is in the file (none: the name is empty), as pyelftools reads them."""
        index = self.header.shstrndx
        if index == SHN_XINDEX:
            index = self._section_header(0)[_SH_LINK]
        fields = self._section_header(index)
        start, size = fields[_SH_OFFSET], fields[_SH_SIZE]
        file_size = self.file_size
        table = self.read(start, min(size, file_size - start)) if start < file_size else b""

        def name(offset: int) -> str:
            at = start + offset
            if at >= 1 << 63:
                raise ElfError(f"name at file offset {at:#x} cannot be read", path=self.path)
            end = table.find(b"\0", offset) if offset < len(table) else -1
            # A name past its table, or running past its end: the file decides.
            raw = table[offset:end] if end >= 0 else self._string_at(at)
            return raw.decode("utf-8", errors="replace") if raw else ""

        return name

    def _string_at(self, offset: int) -> bytes:
        """The bytes at ``offset`` up to the next NUL; empty without one before the end."""
        if offset >= self.file_size:
            return b""
        chunks = []
        self._file.seek(offset)
        while chunk := self._file.read(1 << 16):
            before, nul, _ = chunk.partition(b"\0")
            chunks.append(before)
            if nul:
                return b"".join(chunks)
        return b""

    def section(self, name: str) -> ElfSection | None:
        """The first section called ``name``."""
        names = self._section_table().names
        return self._section_at(names.index(name)) if name in names else None

    def linked_names(self, names: Collection[str]) -> set[str]:
        """The names of the sections that the sections called one of ``names`` link to
        (``sh_link``: a symbol table's string table), where that is a section of the file."""
        table = self._section_table()
        count = len(table.names)
        links = (
            f[_SH_LINK] for f, name in zip(table.fields, table.names, strict=True) if name in names
        )
        return {table.names[link] for link in links if 0 < link < count}

    def section_by_type(self, sh_type: int) -> ElfSection | None:
        for index, fields in enumerate(self._section_table().fields):
            if fields[_SH_TYPE] == sh_type:
                return self._section_at(index)
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
        self._check_readable(section)
        return self.read(section.offset, section.size)

    def _check_readable(self, section: ElfSection) -> None:
        """ElfError when the header of ``section``, of a type read entry by entry, does not fit
        its type (see the module's docstring)."""
        kind = section.type
        why = None
        if kind in (SHT_SYMTAB, SHT_DYNSYM):
            if not section.entsize or section.size % section.entsize:
                why = f"entries of {section.entsize} bytes do not divide {section.size}"
            elif self._linked_type(section) != SHT_STRTAB:
                why = "links to no string table"
        elif kind in (SHT_REL, SHT_RELA):
            codes = RELOCATION_FIELDS[self.elfclass, kind == SHT_RELA]
            if section.entsize != struct.calcsize("<" + codes):
                why = f"entries of {section.entsize} bytes"
        elif kind == SHT_DYNAMIC and self._linked_type(section) not in (
            SHT_STRTAB, SHT_NOBITS, SHT_NULL
        ):  # fmt: skip
            why = "links to no string table"
        if why is not None:
            raise ElfError(f"cannot read it ({why})", path=self.path, section=section.name)

    def _linked_type(self, section: ElfSection) -> int | None:
        """sh_type of the section at ``section``'s sh_link (None: its header is not in the
        file)."""
        try:
            return self._section_header(section.link)[_SH_TYPE]
        except SFrameError:
            return None

    def _decompressed(self, section: ElfSection) -> bytes:
        """A SHF_COMPRESSED section's contents (gABI "Compressed Sections"), decompressed
        within a bound (:func:`inflate`)."""
        stored = self.read(section.offset, section.size)
        try:
            kind, size, header = unpack_chdr(stored, self.header.bits, self.big_endian)
        except ElfError as error:
            raise error.at(path=self.path, section=section.name) from None
        if kind != ELFCOMPRESS_ZLIB:
            raise ElfError(
                f"compression type {kind} is not supported (only zlib)",
                path=self.path,
                section=section.name,
            )
        return inflate(stored[header:], size, len(stored), path=self.path, section=section.name)

    # -- segments ------------------------------------------------------------------------------
    def segments(self) -> list[ElfSegment]:
        """All program headers (empty for relocatable objects)."""
        if self._segments is None:
            self._segments = self._read_segments()
        return list(self._segments)

    def _read_segments(self) -> list[ElfSegment]:
        header = self.header
        try:
            count = header.phnum if header.phnum != PN_XNUM else self._count_in_section_zero()
            self._check_table("program", count, header.phoff, header.phentsize)
            layout = phdr_struct(header.bits, header.big_endian)
            if not count:
                return []
            table = self.read(header.phoff, count * header.phentsize)
            starts = range(0, count * header.phentsize, header.phentsize)
            self._segment_bytes = [table[at : at + layout.size] for at in starts]
            return [
                ElfSegment(
                    **dict(zip(PHDR_NAMES[header.bits], layout.unpack_from(table, at), strict=True))
                )
                for at in starts
            ]
        except SFrameError as error:
            raise ElfError(f"unreadable program headers ({error.detail})", path=self.path) from None
        except _STRUCT_ERRORS as error:
            raise ElfError(f"unreadable program headers ({error})", path=self.path) from None

    def _count_in_section_zero(self) -> int:
        """The program header count e_phnum PN_XNUM leaves to section 0's sh_info (x86-64
        psABI 4.1.2), read as pyelftools reads it: section 0 named (its name table found),
        of type SHT_NULL (another type is not read here)."""
        fields = self._section_header(0)
        self._name_table()(fields[_SH_NAME])
        if fields[_SH_TYPE] != SHT_NULL:
            raise ElfError(f"section 0 of type {fields[_SH_TYPE]:#x} is not read here")
        return int(fields[_SH_INFO])

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

    def interpreter(self) -> str | None:
        seg = self.segment(PT_INTERP)
        if seg is None:
            return None
        return self.segment_data(seg).split(b"\0", 1)[0].decode("utf-8", "replace")


def inflate(stream: bytes, size: int, stored: int, *, path: str, section: str) -> bytes:
    """The ``size`` bytes the zlib ``stream`` of a compressed section of ``stored`` bytes
    decompresses to, within a bound: at most :data:`MAX_EXPANSION` times ``stored`` plus 1 MiB,
    and never more than :data:`MAX_DECOMPRESSED` bytes, so a small bomb stays small."""
    limit = min(MAX_DECOMPRESSED, MAX_EXPANSION * stored + (1 << 20))
    if size > limit:
        raise ElfError(
            f"claims {size} bytes decompressed from {stored}, more than the {limit} allowed",
            path=path,
            section=section,
        )
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(stream, size + 1)
    except zlib.error as error:
        raise ElfError(f"bad zlib data ({error})", path=path, section=section) from None
    if len(data) != size:
        raise ElfError(
            f"decompresses to {len(data)} bytes, its header says {size}",
            path=path,
            section=section,
        )
    return data


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
    "MAX_DECOMPRESSED",
    "MAX_EXPANSION",
    "ElfReader",
    "ElfSection",
    "ElfSegment",
    "inflate",
    "is_elf_file",
    "iter_notes",
]
