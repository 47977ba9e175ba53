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

import dataclasses
import io
from dataclasses import dataclass
from typing import Protocol

from ..errors import ElfError
from ..format.constants import PT_GNU_SFRAME, SHT_GNU_SFRAME
from ..input import read_input
from ..output import write_file
from .image import ElfImage, ElfSection, ElfSegment
from .layout import (
    ELF_MAGIC,
    ET_DYN,
    ET_EXEC,
    PF_R,
    PT_LOAD,
    PT_PHDR,
    SHF_ALLOC,
    SHN_LORESERVE,
    phdr_struct,
    shdr_struct,
)

#: What the messages call the file (the caller names it).
_NAME = "ELF file"


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


def _image(data: bytes) -> ElfImage:
    """``data`` opened as an ELF image whose header tables are whole and of the expected
    entry sizes."""
    if data[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    image = ElfImage(_NAME, io.BytesIO(data))
    _check_tables(image, len(data))
    return image


def _check_tables(image: ElfImage, file_size: int) -> None:
    header = image.header
    if header.phnum and header.phentsize != phdr_struct(header.bits, header.big_endian).size:
        raise ElfError(f"unexpected program header size {header.phentsize}")
    if header.shnum and header.shentsize != shdr_struct(header.bits, header.big_endian).size:
        raise ElfError(f"unexpected section header size {header.shentsize}")
    if (
        header.phoff + header.phnum * header.phentsize > file_size
        or header.shoff + header.shnum * header.shentsize > file_size
    ):
        raise ElfError("program or section header table runs past the end of the file")


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _section_headers(image: ElfImage) -> list[ElfSection]:
    """The section headers as e_shnum counts them (none when it is 0: extended numbering,
    refused before anything is written, keeps them out)."""
    return image.sections() if image.header.shnum else []


def _sframe_header(image: ElfImage) -> ElfSection | None:
    """The file's SFrame section header (by type, else by name), or None."""
    headers = _section_headers(image)
    by_type = next((h for h in headers if h.type == SHT_GNU_SFRAME), None)
    if by_type is not None:
        return by_type
    if 0 < image.header.shstrndx < len(headers):
        return next((h for h in headers if h.name == ".sframe"), None)
    return None


def plan_injection(
    data: bytes, *, allow_existing: bool = False, replace: bool = False
) -> InjectionPlan:
    """Where :func:`inject_sframe` will put things in ``data`` (an executable or shared object).

    A file that already has an SFrame section (a ``PT_GNU_SFRAME`` segment or a ``.sframe``
    section) is refused unless ``replace`` (the plan for replacing it) or ``allow_existing``
    (the plan for adding another, used to know the address only).
    """
    with _image(data) as image:
        return _plan(image, len(data), allow_existing=allow_existing, replace=replace)


def _plan(
    image: ElfImage, file_size: int, *, allow_existing: bool = False, replace: bool = False
) -> InjectionPlan:
    if image.e_type not in (ET_EXEC, ET_DYN):
        raise ElfError("only executables and shared objects can get a loadable .sframe")
    segments = image.segments()
    loads = [s for s in segments if s.type == PT_LOAD]
    if not loads:
        raise ElfError("the file has no PT_LOAD segment")
    has_segment = any(s.type == PT_GNU_SFRAME for s in segments)
    if not (allow_existing or replace) and (has_segment or _sframe_header(image)):
        raise ElfError("the file already has an SFrame section (--replace replaces it)")
    page = max([0x1000, *(s.align for s in loads if s.align and s.align & (s.align - 1) == 0)])
    end_address = max(s.vaddr + s.memsz for s in loads)
    # The new segment goes after the file's last byte (appended data stays where it is) and
    # above every segment's memory, each page aligned, so that p_offset and p_vaddr agree
    # modulo the page size without writing out a .bss or padding the file up to its end.
    offset = _align(file_size, page)
    address = _align(end_address, page)
    if address >= 1 << (64 if image.elfclass == 64 else 32):
        raise ElfError("no address is left above the file's segments for a new one")
    # The old entries, the new PT_LOAD, and PT_GNU_SFRAME unless an old one is reused.
    entries = len(segments) + (1 if replace and has_segment else 2)
    phdr_size = entries * phdr_struct(image.elfclass, image.big_endian).size
    sframe_offset = offset + _align(phdr_size, 8)
    return InjectionPlan(
        offset, address, phdr_size, sframe_offset, address + (sframe_offset - offset), page
    )


def new_section_address(image: ElfImage) -> int:
    """The address :func:`inject_sframe` gives the ``.sframe`` section of ``image``."""
    _check_tables(image, image.file_size)
    return _plan(image, image.file_size, allow_existing=True).sframe_address


def inject_sframe(
    data: bytes, sframe: bytes, plan: InjectionPlan | None = None, *, replace: bool = False
) -> bytes:
    """A copy of the ELF file ``data`` with ``sframe`` added as a loadable ``.sframe``, or
    replacing the file's own (``replace``).

    ``sframe`` must have been encoded for ``plan.sframe_address`` (V3 starts are relative to
    their own position); :func:`plan_injection` (with the same ``replace``) gives it.
    """
    with _image(data) as image:
        return _inject(image, data, sframe, plan, replace)


def _inject(
    image: ElfImage, data: bytes, sframe: bytes, plan: InjectionPlan | None, replace: bool
) -> bytes:
    header = image.header
    bits, big_endian = header.bits, header.big_endian
    plan = plan or _plan(image, len(data), replace=replace)
    if header.shnum >= SHN_LORESERVE or header.shstrndx >= SHN_LORESERVE:
        raise ElfError("files with extended section numbering are not supported")
    segments = image.segments()
    old_sframe = _sframe_header(image)
    if not replace and (any(s.type == PT_GNU_SFRAME for s in segments) or old_sframe):
        raise ElfError("the file already has an SFrame section (--replace replaces it)")
    seg_end = plan.sframe_offset + len(sframe)
    new_load = ElfSegment(
        type=PT_LOAD,
        offset=plan.load_offset,
        vaddr=plan.load_address,
        paddr=plan.load_address,
        filesz=seg_end - plan.load_offset,
        memsz=seg_end - plan.load_offset,
        flags=PF_R,
        align=plan.page_size,
    )
    sframe_seg = ElfSegment(
        type=PT_GNU_SFRAME,
        offset=plan.sframe_offset,
        vaddr=plan.sframe_address,
        paddr=plan.sframe_address,
        filesz=len(sframe),
        memsz=len(sframe),
        flags=PF_R,
        align=8,
    )
    table: list[ElfSegment] = []
    last_load = max(i for i, s in enumerate(segments) if s.type == PT_LOAD)
    reuse = replace and any(s.type == PT_GNU_SFRAME for s in segments)
    if len(segments) + (1 if reuse else 2) != plan.phdr_size // phdr_struct(bits, big_endian).size:
        raise ElfError("the injection plan was made for another mode (replace or add)")
    for index, seg in enumerate(segments):
        if seg.type == PT_PHDR:
            seg = dataclasses.replace(
                seg,
                offset=plan.load_offset,
                vaddr=plan.load_address,
                paddr=plan.load_address,
                filesz=plan.phdr_size,
                memsz=plan.phdr_size,
            )
        if seg.type == PT_GNU_SFRAME and reuse:
            seg = sframe_seg
        table.append(seg)
        if index == last_load:
            table.append(new_load)
    if not reuse:
        table.append(sframe_seg)
    phdrs = b"".join(s.pack(bits, big_endian) for s in table)

    out = bytearray(data)
    out += bytes(plan.load_offset - len(out))
    out += phdrs
    out += bytes(plan.sframe_offset - len(out))
    out += sframe

    # Section headers: the old ones with the old .sframe pointed at the new data, or with a
    # new name table and a new .sframe.
    headers = _section_headers(image)
    old_index = old_sframe.index if replace and old_sframe is not None else None
    names_known = 0 < header.shstrndx < len(headers)
    new_sframe = ElfSection(
        index=len(headers),
        name=".sframe",
        type=SHT_GNU_SFRAME,
        address=plan.sframe_address,
        offset=plan.sframe_offset,
        size=len(sframe),
        flags=SHF_ALLOC,
        addralign=8,
    )
    if old_index is not None:
        old = headers[old_index]
        headers[old_index] = dataclasses.replace(
            new_sframe,
            index=old.index,
            name=old.name,
            name_offset=old.name_offset,
            link=old.link,
            info=old.info,
            entsize=old.entsize,
        )
    elif names_known:
        names_hdr = headers[header.shstrndx]
        names = data[names_hdr.offset : names_hdr.offset + names_hdr.size]
        name_offset = len(names)
        names += b".sframe\0"
        headers[header.shstrndx] = dataclasses.replace(names_hdr, offset=len(out), size=len(names))
        out += names
        headers.append(dataclasses.replace(new_sframe, name_offset=name_offset))
    if old_index is not None or names_known:
        out += bytes(_align(len(out), 8) - len(out))
        shoff = len(out)
        for section in headers:
            out += section.pack(bits, big_endian)
        shnum = len(headers)
    else:
        shoff, shnum = header.shoff, header.shnum
    new_header = dataclasses.replace(
        header, phoff=plan.load_offset, shoff=shoff, phnum=len(table), shnum=shnum
    )
    out[: len(new_header.pack())] = new_header.pack()
    return bytes(out)


class EncodableSection(Protocol):
    """An SFrame section that can be encoded for any address (what ``generate`` makes)."""

    @property
    def data(self) -> bytes:
        """The section encoded for :attr:`section_address`."""
        ...

    @property
    def section_address(self) -> int: ...

    def encode(self, section_address: int) -> bytes:
        """The section encoded for ``section_address``."""
        ...


def inject_file(
    path: str, output: str, section: EncodableSection, *, replace: bool = False
) -> None:
    """Write to ``output`` a copy of the ELF file ``path`` carrying ``section`` (encoded for
    the address the plan gives it; see :func:`inject_sframe`), with ``path``'s permissions."""
    original = read_input(path)
    plan = plan_injection(original, replace=replace)
    data = section.data
    if plan.sframe_address != section.section_address:
        data = section.encode(plan.sframe_address)
    new = inject_sframe(original, data, plan, replace=replace)
    # Atomically, never over the input, a new file with the input's permissions.
    write_file(output, new, input_path=path, mode_from=path)


__all__ = [
    "EncodableSection",
    "InjectionPlan",
    "inject_file",
    "inject_sframe",
    "new_section_address",
    "plan_injection",
]
