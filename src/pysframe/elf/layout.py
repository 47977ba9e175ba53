"""Every ELF layout pysframe reads or writes, declared once, and the ELF numbers it uses.

Layouts from the System V gABI ("ELF Header", "Program Header", "Sections", "Note Section"),
in the file's byte order (``e_ident[EI_DATA]``) and class (``e_ident[EI_CLASS]``):

* ELF header: ``e_ident[16]``, u16 e_type, u16 e_machine, u32 e_version, then e_entry, e_phoff
  and e_shoff (u32 in ELFCLASS32, u64 in ELFCLASS64), u32 e_flags, and six u16: e_ehsize,
  e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx.
* Program header: Elf32_Phdr puts p_flags after p_memsz, Elf64_Phdr right after p_type.
* Section header: the same ten fields in both classes; the six address-sized ones widen.
* Note header: u32 namesz, u32 descsz, u32 type; name and descriptor padded to 4 bytes.
* Auxiliary vector entry (Elf64_auxv_t): u64 type, u64 value.
* Dynamic entry (Elf64_Dyn): s64 d_tag, u64 d_val.
* The dynamic linker's debugger interface (glibc ``<link.h>``, 64-bit): ``struct r_debug`` and
  ``struct link_map``, which a debugger reads from a program's memory to find its shared objects.
* Core file notes beside NT_PRSTATUS (Linux ``<linux/elf.h>``, ``<asm/ptrace.h>``): the AArch64
  pointer-authentication masks (NT_ARM_PAC_MASK) and the s390x floating-point registers
  (NT_PRFPREG).

:mod:`pysframe.elf.reader` reads files with them, :mod:`pysframe.elf.inject` writes headers
with them, and the unwinder sizes an image from its header (a vDSO read from memory).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from dataclasses import astuple
from functools import cache
from typing import Any, Literal

from ..dataclass import dataclass
from ..errors import ElfError

# -- numbers (System V gABI; GNU extensions from binutils' include/elf/common.h) ---------------
ELF_MAGIC = b"\x7fELF"
EI_CLASS, EI_DATA = 4, 5
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2
ET_REL, ET_EXEC, ET_DYN, ET_CORE = 1, 2, 3, 4
EM_386, EM_S390, EM_ARM, EM_X86_64, EM_AARCH64, EM_RISCV = 3, 22, 40, 62, 183, 243
EM_PPC, EM_PPC64 = 20, 21
#: e_machine as the gABI names it, without ``EM_``, for the machines named here.
MACHINE_NAMES = {
    EM_386: "386", EM_S390: "S390", EM_ARM: "ARM", EM_X86_64: "X86_64", EM_AARCH64: "AARCH64",
    EM_RISCV: "RISCV", EM_PPC: "PPC", EM_PPC64: "PPC64",
}  # fmt: skip
SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_REL, SHT_DYNSYM = 0, 1, 2, 4, 8, 9, 11
SHT_NOTE = 7
SHT_DYNAMIC = 6
SHT_STRTAB, SHT_HASH = 3, 5
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = (
    0x6FFFFFF6,
    0x6FFFFFFD,
    0x6FFFFFFE,
    0x6FFFFFFF,
)
SHN_UNDEF, SHN_LORESERVE, SHN_ABS, SHN_COMMON = 0, 0xFF00, 0xFFF1, 0xFFF2
#: e_shstrndx when the index is in section 0's sh_link; e_phnum when the count is in its
#: sh_info (gABI; x86-64 psABI 4.1.2 for PN_XNUM).
SHN_XINDEX, PN_XNUM = 0xFFFF, 0xFFFF
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_COMPRESSED = 0x1, 0x2, 0x4, 0x800
SHF_TLS = 0x400
#: ch_type of a compressed section's header (gABI "Compressed Sections").
ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD = 1, 2
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR = 1, 2, 3, 4, 6
PT_GNU_PROPERTY = 0x6474E553
PF_X, PF_W, PF_R = 0x1, 0x2, 0x4
STT_FUNC, STT_GNU_IFUNC = 2, 10
#: The GNU build ID note (name "GNU").
NT_GNU_BUILD_ID = 3
#: Core file notes (name "CORE"; "LINUX" for the machine-specific ones from 0x400 up).
NT_PRFPREG = 2
NT_ARM_PAC_MASK = 0x406
#: Auxiliary vector types (System V gABI "Process Initialization").
AT_PHDR, AT_PAGESZ, AT_BASE, AT_ENTRY = 3, 6, 7, 9
#: Dynamic section tags.
DT_NULL, DT_DEBUG = 0, 21
#: The dynamic tags whose value is an address (d_ptr), from the gABI's table and GNU's
#: include/elf/common.h (the DT_ADDRRNGLO..DT_ADDRRNGHI range, DT_VERSYM, DT_VERDEF,
#: DT_VERNEED): PLTGOT, HASH, STRTAB, SYMTAB, RELA, INIT, FINI, REL, JMPREL, INIT_ARRAY,
#: FINI_ARRAY, PREINIT_ARRAY, SYMTAB_SHNDX, RELR.
DT_ADDRESS_TAGS = frozenset(
    {3, 4, 5, 6, 7, 12, 13, 17, 23, 25, 26, 32, 34, 36, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE}
)
DT_ADDRRNGLO, DT_ADDRRNGHI = 0x6FFFFE00, 0x6FFFFEFF
#: AArch64 dynamic tags of PLTs whose entries begin with ``bti c`` or authenticate the target
#: (the ABI's "ELF for the Arm 64-bit Architecture", Dynamic Section).
DT_AARCH64_BTI_PLT, DT_AARCH64_PAC_PLT = 0x70000001, 0x70000003


def is_address_tag(tag: int) -> bool:
    """Whether a dynamic entry with ``tag`` holds an address (d_ptr)."""
    return tag in DT_ADDRESS_TAGS or DT_ADDRRNGLO <= tag <= DT_ADDRRNGHI


def byte_order(big_endian: bool) -> str:
    """The struct prefix of a file's byte order."""
    return ">" if big_endian else "<"


# -- ELF header ----------------------------------------------------------------------------------

#: Struct codes of the ELF header per class (32 or 64 bits), without the byte-order prefix.
EHDR_FIELDS: dict[int, str] = {32: "16sHHIIIIIHHHHHH", 64: "16sHHIQQQIHHHHHH"}
#: Bytes of the ELF header: 52 (ELFCLASS32), 64 (ELFCLASS64).
EHDR_SIZE: dict[int, int] = {32: 52, 64: 64}


@cache
def ehdr_struct(bits: int, big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + EHDR_FIELDS[bits])


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ElfHeader:
    """The ELF header, field by field (the ``e_`` prefixes left out)."""

    ident: bytes
    type: int
    machine: int
    version: int
    entry: int
    phoff: int
    shoff: int
    flags: int
    ehsize: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int
    shstrndx: int

    @classmethod
    def unpack(cls, data: bytes) -> ElfHeader:
        """The header at the start of ``data``; ElfError if it is not one."""
        if data[:4] != ELF_MAGIC:
            raise ElfError("not an ELF file")
        if len(data) <= EI_DATA:
            raise ElfError("ELF header is truncated")
        if data[EI_CLASS] not in (ELFCLASS32, ELFCLASS64) or data[EI_DATA] not in (1, 2):
            raise ElfError(f"unknown ELF class {data[EI_CLASS]} or data encoding {data[EI_DATA]}")
        bits = 64 if data[EI_CLASS] == ELFCLASS64 else 32
        if len(data) < EHDR_SIZE[bits]:
            raise ElfError("ELF header is truncated")
        return cls(*ehdr_struct(bits, data[EI_DATA] == ELFDATA2MSB).unpack_from(data))

    def pack(self) -> bytes:
        return ehdr_struct(self.bits, self.big_endian).pack(*astuple(self))

    @property
    def bits(self) -> int:
        """32 (ELFCLASS32) or 64 (ELFCLASS64)."""
        return 64 if self.ident[EI_CLASS] == ELFCLASS64 else 32

    @property
    def big_endian(self) -> bool:
        return self.ident[EI_DATA] == ELFDATA2MSB

    @property
    def tables_end(self) -> int:
        """Where the last of the ELF header, program and section header tables ends."""
        return max(
            EHDR_SIZE[self.bits],
            self.phoff + self.phentsize * self.phnum,
            self.shoff + self.shentsize * self.shnum,
        )


# -- compressed sections -------------------------------------------------------------------------

#: Elf32_Chdr: u32 ch_type, u32 ch_size, u32 ch_addralign; Elf64_Chdr: u32 ch_type,
#: u32 ch_reserved, u64 ch_size, u64 ch_addralign.  The compressed bytes follow.
CHDR_FIELDS: dict[int, str] = {32: "III", 64: "IIQQ"}


@cache
def chdr_struct(bits: int, big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + CHDR_FIELDS[bits])


def unpack_chdr(data: bytes, bits: int, big_endian: bool) -> tuple[int, int, int]:
    """(ch_type, ch_size, header size) of the compression header at the start of ``data``."""
    layout = chdr_struct(bits, big_endian)
    if len(data) < layout.size:
        raise ElfError("compressed section shorter than its compression header")
    fields = layout.unpack_from(data)
    return fields[0], fields[1] if bits == 32 else fields[2], layout.size


# -- program and section headers ---------------------------------------------------------------

#: Struct codes of a program header per class, and the fields in that order (named as the
#: attributes of :class:`pysframe.elf.reader.ElfSegment`).
PHDR_FIELDS: dict[int, str] = {32: "IIIIIIII", 64: "IIQQQQQQ"}
PHDR_NAMES: dict[int, tuple[str, ...]] = {
    32: ("type", "offset", "vaddr", "paddr", "filesz", "memsz", "flags", "align"),
    64: ("type", "flags", "offset", "vaddr", "paddr", "filesz", "memsz", "align"),
}
#: Struct codes of a section header per class, and its fields (named as the attributes of
#: :class:`pysframe.elf.reader.ElfSection`; ``name_offset`` is sh_name).
SHDR_FIELDS: dict[int, str] = {32: "IIIIIIIIII", 64: "IIQQQQIIQQ"}
SHDR_NAMES = (
    "name_offset",
    "type",
    "flags",
    "address",
    "offset",
    "size",
    "link",
    "info",
    "addralign",
    "entsize",
)


@cache
def phdr_struct(bits: int, big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + PHDR_FIELDS[bits])


@cache
def shdr_struct(bits: int, big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + SHDR_FIELDS[bits])


# -- notes ---------------------------------------------------------------------------------------

#: Struct codes of a note header (namesz, descsz, type), the same in both classes.
NOTE_FIELDS = "III"
NOTE_HEADER_SIZE = 12
#: Name and descriptor are padded to this many bytes.
NOTE_ALIGN = 4


@cache
def note_struct(big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + NOTE_FIELDS)


def note_padded(size: int) -> int:
    return (size + NOTE_ALIGN - 1) & -NOTE_ALIGN


# -- auxiliary vector (System V gABI "Process Initialization"; Linux /proc/PID/auxv, NT_AUXV) --

#: Struct codes of an Elf64_auxv_t entry: u64 a_type, u64 a_val.
AUXV64_FIELDS = "QQ"


@cache
def auxv64_struct(big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + AUXV64_FIELDS)


# -- dynamic section (System V gABI "Dynamic Section") ---------------------------------------

#: Struct codes of an Elf64_Dyn entry: s64 d_tag, u64 d_val / d_ptr.
DYN64_FIELDS = "qQ"


@cache
def dyn64_struct(big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + DYN64_FIELDS)


#: Struct codes of a dynamic entry per class: d_tag, d_val / d_ptr.
DYN_FIELDS: dict[int, str] = {32: "iI", 64: DYN64_FIELDS}


@cache
def dyn_struct(bits: int, big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + DYN_FIELDS[bits])


# -- symbols (System V gABI "Symbol Table") ------------------------------------------------------

#: Struct codes of a symbol per class: Elf32_Sym is st_name, st_value, st_size, st_info,
#: st_other, st_shndx; Elf64_Sym is st_name, st_info, st_other, st_shndx, st_value, st_size.
SYM_FIELDS: dict[int, str] = {32: "IIIBBH", 64: "IBBHQQ"}


#: The fields of a symbol per class, in :data:`SYM_FIELDS` order, without ``st_``.
SYM_NAMES: dict[int, tuple[str, ...]] = {
    32: ("name", "value", "size", "info", "other", "shndx"),
    64: ("name", "info", "other", "shndx", "value", "size"),
}


def sym_dtype(bits: int, big_endian: bool) -> Any:
    """The numpy dtype of a symbol: fields ``f0``.. in :data:`SYM_FIELDS` order, titled with
    :data:`SYM_NAMES` (``entries["value"]`` is ``entries["f4"]`` in a 64-bit table); numpy is
    imported here, by the callers that read symbol tables in bulk."""
    return _dtype(SYM_FIELDS[bits], SYM_NAMES[bits], big_endian)


# -- relocations with addends (System V gABI "Relocation") -------------------------------------

#: Struct codes of an Elf64_Rela: r_offset, r_info (symbol << 32 | type), r_addend.
RELA64_FIELDS = "QQq"
#: Struct codes of Elf32_Rel / Elf32_Rela and Elf64_Rel / Elf64_Rela per class, with and
#: without the addend: r_offset, r_info, [r_addend].  r_info is ``symbol << 8 | type`` in
#: ELFCLASS32 and ``symbol << 32 | type`` in ELFCLASS64 (:data:`R_INFO_SHIFT`).
RELOCATION_FIELDS: dict[tuple[int, bool], str] = {
    (32, False): "II",
    (32, True): "IIi",
    (64, False): "QQ",
    (64, True): RELA64_FIELDS,
}
R_INFO_SHIFT: dict[int, int] = {32: 8, 64: 32}


def table_columns(
    data: bytes, fields: str, names: tuple[str, ...], big_endian: bool
) -> dict[str, Sequence[int]]:
    """The whole entries of a table of struct-coded ``fields`` (symbols, relocations...) in
    ``data``, one column per field of ``names``, read without numpy: in the machine's byte
    order, each field whose offset is a multiple of its size is cut from the bytes
    (memoryview casts, no step in Python per entry); else the entries are unpacked."""
    layout = struct.Struct(byte_order(big_endian) + fields)
    count = len(data) // layout.size
    whole = memoryview(data)[: count * layout.size]
    if big_endian == (sys.byteorder == "big"):
        out: dict[str, Sequence[int]] = {}
        for name, code, at in zip(names, fields, _offsets(fields), strict=True):
            size = struct.calcsize(code)
            if at % size or layout.size % size:
                break
            column = whole if size == 1 else whole.cast(_INTEGERS[code])
            out[name] = column[at // size :: layout.size // size]
        else:
            return out
    unpacked = list(zip(*layout.iter_unpack(whole), strict=True)) or [()] * len(names)
    return dict(zip(names, unpacked, strict=True))


#: The struct codes of integers, as memoryview.cast takes them.
_INTEGERS: dict[str, Literal["B", "H", "I", "Q", "b", "h", "i", "q"]] = {
    "B": "B", "H": "H", "I": "I", "Q": "Q", "b": "b", "h": "h", "i": "i", "q": "q",
}  # fmt: skip


def _offsets(fields: str) -> list[int]:
    """The byte offset of each struct-coded field (none packed: the codes align nothing)."""
    return [struct.calcsize("<" + fields[:index]) for index in range(len(fields))]


def _dtype(fields: str, names: tuple[str, ...], big_endian: bool) -> Any:
    """A numpy dtype from struct codes: fields ``f0``.., titled ``names``."""
    import numpy as np

    codes = {"I": "u4", "i": "i4", "B": "u1", "H": "u2", "Q": "u8", "q": "i8"}
    order = ">" if big_endian else "<"
    pairs = enumerate(zip(fields, names, strict=True))
    return np.dtype([((name, f"f{i}"), order + codes[code]) for i, (code, name) in pairs])


# -- the dynamic linker's debugger interface (glibc <link.h>, LP64) ----------------------------

#: struct r_debug: int r_version (padded), struct link_map *r_map, ElfW(Addr) r_brk,
#: enum r_state (padded), ElfW(Addr) r_ldbase.
R_DEBUG64_FIELDS = "i4xQQi4xQ"
#: struct link_map, the public head of glibc's list entries: ElfW(Addr) l_addr (load bias),
#: char *l_name, ElfW(Dyn) *l_ld, struct link_map *l_next, *l_prev.
LINK_MAP64_FIELDS = "QQQQQ"


@cache
def r_debug64_struct(big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + R_DEBUG64_FIELDS)


@cache
def link_map64_struct(big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + LINK_MAP64_FIELDS)


# -- core file notes (Linux <linux/elf.h>, <asm/ptrace.h>) -----------------------------------

#: NT_ARM_PAC_MASK: struct user_pac_mask { u64 data_mask; u64 insn_mask; }.
PAC_MASK_FIELDS = "QQ"
#: NT_PRFPREG on s390x: s390_fp_regs { u32 fpc; u32 pad; u64 fprs[16]; } (f0 to f15).
S390X_FPREGS_FIELDS = "I4x16Q"


@cache
def pac_mask_struct(big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + PAC_MASK_FIELDS)


@cache
def s390x_fpregs_struct() -> struct.Struct:
    return struct.Struct(byte_order(True) + S390X_FPREGS_FIELDS)
