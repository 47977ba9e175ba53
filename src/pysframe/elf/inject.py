"""Write a copy of an ELF file with an added ``.sframe`` section and ``PT_GNU_SFRAME`` segment.

Nothing already in the file moves, so the copy runs exactly as before.  The additions go at
the end of the file (System V gABI, "Program Header" and "Sections"):

* a new ``PT_LOAD`` segment (read-only) that holds a new program header table (the old
  entries plus the new ``PT_LOAD`` and ``PT_GNU_SFRAME``) followed by the SFrame data;
  ``e_phoff`` points at the new table and ``PT_PHDR``, if present, describes it.  The new
  segment's address minus its file offset equals that of the first ``PT_LOAD``, so kernels
  that compute ``AT_PHDR`` from ``e_phoff`` and those that use ``PT_PHDR`` agree;
* ``PT_GNU_SFRAME`` covering the SFrame data (errata 1);
* a new section header table: the old headers plus ``.sframe`` (``SHT_GNU_SFRAME``,
  ``SHF_ALLOC``, 8-byte aligned), and a copy of the section-name string table with
  ``.sframe`` appended.

Replacing (``replace=True``) a file's own SFrame section: its ``PT_GNU_SFRAME`` entry and its
``.sframe`` section header are pointed at the new data instead of added; the old section's
bytes stay where they were, unused.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import ElfError
from ..format.constants import PT_GNU_SFRAME, SHT_GNU_SFRAME

PT_LOAD = 1
PT_PHDR = 6
PF_R = 4
SHF_ALLOC = 2
ET_EXEC, ET_DYN = 2, 3
SHN_LORESERVE = 0xFF00


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where an ELF file's tables are (ELF header fields)."""

    order: str
    wide: bool
    e_type: int
    phoff: int
    phentsize: int
    phnum: int
    shoff: int
    shentsize: int
    shnum: int
    shstrndx: int

    @property
    def phdr_format(self) -> str:
        return self.order + ("IIQQQQQQ" if self.wide else "IIIIIIII")

    @property
    def shdr_format(self) -> str:
        return self.order + ("IIQQQQIIQQ" if self.wide else "IIIIIIIIII")


@dataclass(frozen=True, slots=True)
class Segment:
    type: int
    flags: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    align: int


@dataclass(frozen=True, slots=True)
class InjectionPlan:
    """Where the new segment, program header table and SFrame section go."""

    #: File offset and address of the new PT_LOAD (starts with the program header table).
    load_offset: int
    load_address: int
    phdr_size: int
    #: File offset and address of the SFrame data.
    sframe_offset: int
    sframe_address: int
    page_size: int


def _layout(data: bytes) -> _Layout:
    if len(data) < 52 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    wide = data[4] == 2
    if data[4] not in (1, 2) or data[5] not in (1, 2):
        raise ElfError(f"unknown ELF class {data[4]} or data encoding {data[5]}")
    order = "<" if data[5] == 1 else ">"
    if wide:
        if len(data) < 64:
            raise ElfError("ELF header is truncated")
        e_type, phoff, shoff = (
            struct.unpack_from(order + "H", data, 16)[0],
            *struct.unpack_from(order + "QQ", data, 32),
        )
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(order + "HHHHH", data, 54)
    else:
        e_type = struct.unpack_from(order + "H", data, 16)[0]
        phoff, shoff = struct.unpack_from(order + "II", data, 28)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(order + "HHHHH", data, 42)
    layout = _Layout(
        order, wide, e_type, phoff, phentsize, phnum, shoff, shentsize, shnum, shstrndx
    )
    if phnum and phentsize != struct.calcsize(layout.phdr_format):
        raise ElfError(f"unexpected program header size {phentsize}")
    if shnum and shentsize != struct.calcsize(layout.shdr_format):
        raise ElfError(f"unexpected section header size {shentsize}")
    if phoff + phnum * phentsize > len(data) or shoff + shnum * shentsize > len(data):
        raise ElfError("program or section header table runs past the end of the file")
    return layout


def _segments(data: bytes, layout: _Layout) -> list[Segment]:
    out = []
    for index in range(layout.phnum):
        fields = struct.unpack_from(
            layout.phdr_format, data, layout.phoff + index * layout.phentsize
        )
        if layout.wide:
            p_type, flags, offset, vaddr, paddr, filesz, memsz, align = fields
        else:
            p_type, offset, vaddr, paddr, filesz, memsz, flags, align = fields
        out.append(Segment(p_type, flags, offset, vaddr, paddr, filesz, memsz, align))
    return out


def _pack_segment(layout: _Layout, seg: Segment) -> bytes:
    if layout.wide:
        return struct.pack(
            layout.phdr_format,
            seg.type,
            seg.flags,
            seg.offset,
            seg.vaddr,
            seg.paddr,
            seg.filesz,
            seg.memsz,
            seg.align,
        )
    return struct.pack(
        layout.phdr_format,
        seg.type,
        seg.offset,
        seg.vaddr,
        seg.paddr,
        seg.filesz,
        seg.memsz,
        seg.flags,
        seg.align,
    )


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def plan_injection(
    data: bytes, *, allow_existing: bool = False, replace: bool = False
) -> InjectionPlan:
    """Where :func:`inject_sframe` will put things in ``data`` (an executable or shared object).

    A file that already has an SFrame section (a ``PT_GNU_SFRAME`` segment or a ``.sframe``
    section) is refused unless ``replace`` (the plan for replacing it) or ``allow_existing``
    (the plan for adding another, used to know the address only).
    """
    layout = _layout(data)
    if layout.e_type not in (ET_EXEC, ET_DYN):
        raise ElfError("only executables and shared objects can get a loadable .sframe")
    segments = _segments(data, layout)
    loads = [s for s in segments if s.type == PT_LOAD]
    if not loads:
        raise ElfError("the file has no PT_LOAD segment")
    has_segment = any(s.type == PT_GNU_SFRAME for s in segments)
    if not (allow_existing or replace) and (has_segment or _sframe_header_index(data, layout)):
        raise ElfError("the file already has an SFrame section (--replace replaces it)")
    page = max([0x1000, *(s.align for s in loads if s.align and s.align & (s.align - 1) == 0)])
    first = min(loads, key=lambda s: s.vaddr)
    delta = first.vaddr - first.offset
    end_address = max(s.vaddr + s.memsz for s in loads)
    offset = max(_align(len(data), page), _align(end_address - delta, page))
    address = offset + delta
    # The old entries, the new PT_LOAD, and PT_GNU_SFRAME unless an old one is reused.
    entries = layout.phnum + (1 if replace and has_segment else 2)
    phdr_size = entries * struct.calcsize(layout.phdr_format)
    sframe_offset = offset + _align(phdr_size, 8)
    return InjectionPlan(
        offset, address, phdr_size, sframe_offset, address + (sframe_offset - offset), page
    )


def _section_headers(data: bytes, layout: _Layout) -> list[list[int]]:
    size = struct.calcsize(layout.shdr_format)
    return [
        list(struct.unpack_from(layout.shdr_format, data, layout.shoff + i * size))
        for i in range(layout.shnum)
    ]


def _sframe_header_index(data: bytes, layout: _Layout) -> int | None:
    """Index of the file's SFrame section header (by type, else by name), or None."""
    headers = _section_headers(data, layout)
    for index, header in enumerate(headers):
        if header[1] == SHT_GNU_SFRAME:
            return index
    if 0 < layout.shstrndx < len(headers):
        names_hdr = headers[layout.shstrndx]
        names = data[names_hdr[4] : names_hdr[4] + names_hdr[5]]
        for index, header in enumerate(headers):
            if names[header[0] : header[0] + 8] == b".sframe\0":
                return index
    return None


def new_section_address(image: object) -> int:
    """The address :func:`inject_sframe` gives the ``.sframe`` section of ``image``."""
    from .image import ElfImage

    if not isinstance(image, ElfImage):
        raise ElfError("new_section_address needs an ElfImage")
    # Only the headers are read: a file on disk is mapped rather than read whole.
    with image.whole_file() as data:
        return plan_injection(data, allow_existing=True).sframe_address  # type: ignore[arg-type]


def inject_sframe(
    data: bytes, sframe: bytes, plan: InjectionPlan | None = None, *, replace: bool = False
) -> bytes:
    """A copy of the ELF file ``data`` with ``sframe`` added as a loadable ``.sframe``, or
    replacing the file's own (``replace``).

    ``sframe`` must have been encoded for ``plan.sframe_address`` (V3 starts are relative to
    their own position); :func:`plan_injection` (with the same ``replace``) gives it.
    """
    layout = _layout(data)
    plan = plan or plan_injection(data, replace=replace)
    if layout.shnum >= SHN_LORESERVE or layout.shstrndx >= SHN_LORESERVE:
        raise ElfError("files with extended section numbering are not supported")
    segments = _segments(data, layout)
    if not replace and (
        any(s.type == PT_GNU_SFRAME for s in segments) or _sframe_header_index(data, layout)
    ):
        raise ElfError("the file already has an SFrame section (--replace replaces it)")
    seg_end = plan.sframe_offset + len(sframe)
    new_load = Segment(
        PT_LOAD,
        PF_R,
        plan.load_offset,
        plan.load_address,
        plan.load_address,
        seg_end - plan.load_offset,
        seg_end - plan.load_offset,
        plan.page_size,
    )
    sframe_seg = Segment(
        PT_GNU_SFRAME,
        PF_R,
        plan.sframe_offset,
        plan.sframe_address,
        plan.sframe_address,
        len(sframe),
        len(sframe),
        8,
    )
    table: list[Segment] = []
    last_load = max(i for i, s in enumerate(segments) if s.type == PT_LOAD)
    reuse = replace and any(s.type == PT_GNU_SFRAME for s in segments)
    if len(segments) + (1 if reuse else 2) != plan.phdr_size // struct.calcsize(
        layout.phdr_format
    ):
        raise ElfError("the injection plan was made for another mode (replace or add)")
    for index, seg in enumerate(segments):
        if seg.type == PT_PHDR:
            seg = Segment(
                PT_PHDR,
                seg.flags,
                plan.load_offset,
                plan.load_address,
                plan.load_address,
                plan.phdr_size,
                plan.phdr_size,
                seg.align,
            )
        if seg.type == PT_GNU_SFRAME and reuse:
            seg = sframe_seg
        table.append(seg)
        if index == last_load:
            table.append(new_load)
    if not reuse:
        table.append(sframe_seg)
    phdrs = b"".join(_pack_segment(layout, s) for s in table)

    out = bytearray(data)
    out += bytes(plan.load_offset - len(out))
    out += phdrs
    out += bytes(plan.sframe_offset - len(out))
    out += sframe

    # Section headers: the old ones with the old .sframe pointed at the new data, or with a
    # new name table and a new .sframe.
    headers = _section_headers(data, layout)
    old_index = _sframe_header_index(data, layout) if replace else None
    names_known = 0 < layout.shstrndx < len(headers)
    if old_index is not None:
        headers[old_index][1:6] = [
            SHT_GNU_SFRAME, SHF_ALLOC, plan.sframe_address, plan.sframe_offset, len(sframe)
        ]
        headers[old_index][8] = 8
    elif names_known:
        names_hdr = headers[layout.shstrndx]
        names = data[names_hdr[4] : names_hdr[4] + names_hdr[5]]
        name_offset = len(names)
        names += b".sframe\0"
        names_hdr[4] = len(out)
        names_hdr[5] = len(names)
        out += names
        headers.append(
            [name_offset, SHT_GNU_SFRAME, SHF_ALLOC, plan.sframe_address, plan.sframe_offset,
             len(sframe), 0, 0, 8, 0]
        )
    if old_index is not None or names_known:
        out += bytes(_align(len(out), 8) - len(out))
        shoff = len(out)
        for header in headers:
            out += struct.pack(layout.shdr_format, *header)
        shnum = len(headers)
    else:
        shoff, shnum = layout.shoff, layout.shnum
    # ELF header: e_phoff, e_shoff, e_phnum, e_shnum.
    if layout.wide:
        struct.pack_into(layout.order + "QQ", out, 32, plan.load_offset, shoff)
        struct.pack_into(layout.order + "H", out, 56, len(table))
        struct.pack_into(layout.order + "H", out, 60, shnum)
    else:
        struct.pack_into(layout.order + "II", out, 28, plan.load_offset, shoff)
        struct.pack_into(layout.order + "H", out, 44, len(table))
        struct.pack_into(layout.order + "H", out, 48, shnum)
    return bytes(out)


__all__ = ["InjectionPlan", "Segment", "inject_sframe", "new_section_address", "plan_injection"]
