"""Build small ELF64 files in tests: sections, symbols, relocations, program headers.

Layouts from the System V gABI (Elf64_Ehdr, Elf64_Shdr, Elf64_Phdr, Elf64_Sym, Elf64_Rel[a]).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


@dataclass
class Sec:
    name: str
    type: int
    data: bytes = b""
    flags: int = 0
    addr: int = 0
    link: int = 0
    info: int = 0
    entsize: int = 0
    align: int = 8


@dataclass
class Seg:
    """A program header covering the named section (or nothing)."""

    type: int
    section: str | None = None
    flags: int = 4
    extra: dict[str, int] = field(default_factory=dict)


def symtab(symbols: list[tuple[int, int, int, int]], big_endian: bool = False) -> bytes:
    """Elf64_Sym entries from (st_info, st_shndx, st_value, st_size); a null entry first.
    Names are all empty (index 0 of the string table)."""
    order = ">" if big_endian else "<"
    out = bytes(24)
    for info, shndx, value, size in symbols:
        out += struct.pack(order + "IBBHQQ", 0, info, 0, shndx, value, size)
    return out


def rela(entries: list[tuple[int, int, int, int]], big_endian: bool = False) -> bytes:
    """Elf64_Rela from (offset, symbol index, type, addend)."""
    order = ">" if big_endian else "<"
    return b"".join(struct.pack(order + "QQq", o, (s << 32) | t, a) for o, s, t, a in entries)


def rel(entries: list[tuple[int, int, int]], big_endian: bool = False) -> bytes:
    """Elf64_Rel from (offset, symbol index, type)."""
    order = ">" if big_endian else "<"
    return b"".join(struct.pack(order + "QQ", o, (s << 32) | t) for o, s, t in entries)


def build_elf(
    sections: list[Sec],
    *,
    machine: int = 62,
    e_type: int = 1,
    big_endian: bool = False,
    segments: list[Seg] | None = None,
    strip_section_headers: bool = False,
    entry: int = 0,
) -> bytes:
    """An ELF64 file; section 0 (null) and .shstrtab (last) are added."""
    order = ">" if big_endian else "<"
    segments = segments or []
    names = b"\0"
    name_at: list[int] = []
    for sec in [*sections, Sec(".shstrtab", 3)]:
        name_at.append(len(names))
        names += sec.name.encode() + b"\0"
    all_sections = [*sections, Sec(".shstrtab", 3, names, align=1)]
    phoff = 64
    pos = phoff + 56 * len(segments)
    offsets = []
    body = b""
    for sec in all_sections:
        pos_aligned = (pos + sec.align - 1) // sec.align * sec.align
        body += bytes(pos_aligned - pos) + sec.data
        offsets.append(pos_aligned)
        pos = pos_aligned + len(sec.data)
    shoff = (pos + 7) // 8 * 8
    body += bytes(shoff - pos)
    shdrs = bytes(64)
    for sec, off, nm in zip(all_sections, offsets, name_at, strict=True):
        shdrs += struct.pack(
            order + "IIQQQQIIQQ",
            nm,
            sec.type,
            sec.flags,
            sec.addr,
            off,
            len(sec.data),
            sec.link,
            sec.info,
            sec.align,
            sec.entsize,
        )
    phdrs = b""
    by_name = {s.name: (s, o) for s, o in zip(all_sections, offsets, strict=True)}
    for seg in segments:
        if seg.section is not None:
            s, o = by_name[seg.section]
            values = {"offset": o, "vaddr": s.addr, "filesz": len(s.data), "memsz": len(s.data)}
        else:
            values = {"offset": 0, "vaddr": 0, "filesz": 0, "memsz": 0}
        values.update(seg.extra)
        phdrs += struct.pack(
            order + "IIQQQQQQ",
            seg.type,
            seg.flags,
            values["offset"],
            values["vaddr"],
            values["vaddr"],
            values["filesz"],
            values["memsz"],
            8,
        )
    shnum = 0 if strip_section_headers else len(all_sections) + 1
    ident = b"\x7fELF" + bytes([2, 2 if big_endian else 1, 1]) + bytes(9)
    header = ident + struct.pack(
        order + "HHIQQQIHHHHHH",
        e_type,
        machine,
        1,
        entry,
        phoff if segments else 0,
        0 if strip_section_headers else shoff,
        0,
        64,
        56,
        len(segments),
        64,
        shnum,
        0 if strip_section_headers else len(all_sections),
    )
    image = header + phdrs + body
    if not strip_section_headers:
        image += shdrs
    return image


# -- raw SFrame sections -----------------------------------------------------------------------


@dataclass
class RawFunction:
    """An FDE as stored: ``start`` is the raw start field; rows are (start, fre_info, words)."""

    start: int
    size: int
    info: int = 0
    info2: int = 0
    rep_size: int = 0
    rows: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)


def fre_info(count: int, size_code: int = 0, sp: bool = True, mangled: bool = False) -> int:
    """sfre_info (V2 spec 2.4.1): base reg bit 0, count bits 1-4, size bits 5-6, mangled bit 7."""
    return int(sp) | count << 1 | size_code << 5 | int(mangled) << 7


def sframe_bytes(
    version: int,
    abi: int,
    functions: list[RawFunction],
    *,
    flags: int = 0,
    fixed_fp: int = 0,
    fixed_ra: int = 0,
    big_endian: bool = False,
) -> bytes:
    """An SFrame section laid out as V1 (17-byte FDEs), V2 (20) or V3 (16 + 5-byte attributes)."""
    order = ">" if big_endian else "<"
    fres = b""
    fdes = b""
    num_fres = 0
    for function in functions:
        fre_off = len(fres)
        addr_code = {0: "B", 1: "H", 2: "I"}[function.info & 0xF]
        block = b""
        for start, info, words in function.rows:
            word_code = {0: "b", 1: "h", 2: "i"}[(info >> 5) & 3]
            block += struct.pack(order + addr_code + "B", start, info)
            block += struct.pack(f"{order}{len(words)}{word_code}", *words)
        num_fres += len(function.rows)
        if version == 3:
            attr = struct.pack(
                order + "HBBB", len(function.rows), function.info, function.info2, function.rep_size
            )
            fres += attr + block
            fdes += struct.pack(order + "qII", function.start, function.size, fre_off)
        else:
            fres += block
            fdes += struct.pack(
                order + "iIIIB",
                function.start,
                function.size,
                fre_off,
                len(function.rows),
                function.info,
            )
            if version == 2:
                fdes += struct.pack(order + "BH", function.rep_size, 0)
    header = struct.pack(
        order + "HBBBbbBIIIII",
        0xDEE2,
        version,
        flags,
        abi,
        fixed_fp,
        fixed_ra,
        0,
        len(functions),
        num_fres,
        len(fres),
        0,
        len(fdes),
    )
    return header + fdes + fres
