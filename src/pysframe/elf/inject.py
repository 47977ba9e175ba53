"""Write a copy of an ELF file with an added ``.sframe`` section and ``PT_GNU_SFRAME`` segment.

The copy is laid out the way a linker would have laid it out (System V gABI, "Program
Header" and "Sections"), so that strip, objcopy and eu-strip keep it running:

* the program header table stays at ``e_phoff`` in the first ``PT_LOAD`` and grows in place
  by the new ``PT_LOAD`` and ``PT_GNU_SFRAME`` entries (binutils 2.40's BFD always writes the
  table right after the ELF header and lays out again a segment that holds it elsewhere;
  eu-strip empties such a table).  Room is made by moving the read-only sections that follow
  it (``.interp``, notes, ``.gnu.hash``, ``.dynsym``, ...) as one block to the new segment,
  keeping their place in the page, and pointing at them again the program headers
  (``PT_INTERP``, ``PT_NOTE``, ``PT_GNU_PROPERTY``), the dynamic entries that hold addresses
  and the symbols defined in them.  When one of them cannot move (a static program's
  ``.rela.plt``, which its code finds by address), an executable at a fixed address has its
  first segment lowered by whole pages instead (every later file offset moves, no address
  does); a position-independent file is refused with the reason;
* a new read-only ``PT_LOAD`` at the first page after the file's last byte and the first
  page address above every segment's memory and a gap as large as the largest dynamic symbol
  (no ``.bss`` written out, appended bytes left where they are), holding the moved block and
  then the SFrame data, and ``PT_GNU_SFRAME`` covering the SFrame data (errata 1);
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
from typing import Protocol

from ..dataclass import dataclass
from ..errors import ElfError
from ..format.constants import PT_GNU_SFRAME, SHT_GNU_SFRAME
from ..input import read_input
from ..output import write_file
from .layout import (
    DT_NULL,
    ELF_MAGIC,
    ET_DYN,
    ET_EXEC,
    PF_R,
    PT_DYNAMIC,
    PT_GNU_PROPERTY,
    PT_INTERP,
    PT_LOAD,
    PT_NOTE,
    PT_PHDR,
    SHF_ALLOC,
    SHF_COMPRESSED,
    SHF_EXECINSTR,
    SHF_WRITE,
    SHN_LORESERVE,
    SHT_DYNSYM,
    SHT_GNU_HASH,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_HASH,
    SHT_NOBITS,
    SHT_NOTE,
    SHT_PROGBITS,
    SHT_STRTAB,
    SHT_SYMTAB,
    dyn_struct,
    is_address_tag,
    phdr_struct,
    shdr_struct,
    sym_dtype,
)
from .reader import ElfReader, ElfSection, ElfSegment
from .symbols import read_symbol_table

#: The section that keeps a lowered executable's original ELF header and program headers.
ORIGINAL_HEADERS = ".pysframe.ehdr"

#: What the messages call the file (the caller names it).
_NAME = "ELF file"


@dataclass(frozen=True, slots=True)
class MovedSections:
    """The sections moved out of the way of the grown program header table: a block of the
    file (sections, the segments that describe only them) copied to the start of the new
    segment, keeping every offset and address modulo the page size."""

    #: The block's old file offset, address and size.
    offset: int
    address: int
    size: int
    #: What is added to their file offsets and addresses.
    offset_delta: int
    address_delta: int
    #: Section indexes and program header indexes (PT_INTERP, PT_NOTE, PT_GNU_PROPERTY).
    sections: tuple[int, ...]
    segments: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class InjectionPlan:
    """Where the program header table grows, what moves, and where the new segment goes."""

    #: File offset and address of the new PT_LOAD.
    load_offset: int
    load_address: int
    #: Size of the program header table once grown (it stays at e_phoff).
    phdr_size: int
    #: File offset and address of the SFrame data.
    sframe_offset: int
    sframe_address: int
    page_size: int
    #: The sections moved to make room for the table, if any.
    moved: MovedSections | None = None
    #: Bytes inserted after the table (whole pages), the first PT_LOAD lowered by as much.
    file_shift: int = 0


def _image(data: bytes) -> ElfReader:
    """``data`` opened as an ELF image whose header tables are whole and of the expected
    entry sizes."""
    if data[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    image = ElfReader(_NAME, io.BytesIO(data))
    _check_tables(image, len(data))
    return image


def _check_tables(image: ElfReader, file_size: int) -> None:
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


def _section_headers(image: ElfReader) -> list[ElfSection]:
    """The section headers as e_shnum counts them (none when it is 0: extended numbering,
    refused before anything is written, keeps them out)."""
    return image.sections() if image.header.shnum else []


def _sframe_header(image: ElfReader) -> ElfSection | None:
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
    image: ElfReader, file_size: int, *, allow_existing: bool = False, replace: bool = False
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
    _check_padding(offset - file_size, file_size, page)
    address = _align(end_address + _largest_dynamic_symbol(image), page)
    # The old entries, the new PT_LOAD, and PT_GNU_SFRAME unless an old one is reused.
    entry_size = phdr_struct(image.elfclass, image.big_endian).size
    table_size = (len(segments) + (1 if replace and has_segment else 2)) * entry_size
    try:
        moved = _room_for_table(image, segments, file_size, table_size, page)
    except _NoRoom as reason:
        # An executable at a fixed address can instead lower its first segment by whole
        # pages, as a linker would have laid it out with a larger table (every file offset
        # after the table moves, no address does); a position-independent file cannot.
        shift = (
            _lowering_for_table(image, loads, table_size, page) if image.e_type == ET_EXEC else 0
        )
        if not shift:
            raise _Unsafe(f"a loadable .sframe cannot be added safely: {reason}") from None
        _check_padding(shift, file_size, page)
        offset = _align(file_size + shift, page)
        return InjectionPlan(
            offset,
            address,
            table_size,
            offset,
            _address_checked(image, address),
            page,
            file_shift=shift,
        )
    sframe_offset = offset
    if moved is not None:
        # The moved block opens the new segment, at its old place in the page.
        in_page = moved.address % page
        moved = dataclasses.replace(
            moved,
            offset_delta=offset + in_page - moved.offset,
            address_delta=address + in_page - moved.address,
        )
        offset, address = offset + in_page, address + in_page
        sframe_offset = _align(offset + moved.size, 8)
    sframe_address = _address_checked(image, address + (sframe_offset - offset))
    return InjectionPlan(offset, address, table_size, sframe_offset, sframe_address, page, moved)


#: Zero bytes a layout may add to a file (alignment padding, a lowered first segment): this
#: many, or as many as the file holds, whichever is more.  A 2 MiB page (the largest that
#: linkers use, -z max-page-size) pads at most 2 MiB; a p_align of 2**30 asks a gigabyte.
MAX_PADDING = 16 << 20


def _check_padding(padding: int, file_size: int, page: int) -> None:
    """ElfError (_Unsafe), before anything is allocated, when the layout adds more than
    :data:`MAX_PADDING` bytes (or the file's size, if larger) to the file."""
    allowed = max(MAX_PADDING, file_size)
    if padding > allowed:
        raise _Unsafe(
            f"the PT_LOAD alignment {page:#x} would add {padding} bytes of padding to a file of "
            f"{file_size} (at most {allowed}): layout refused"
        )


def _address_checked(image: ElfReader, address: int) -> int:
    if address >= 1 << (64 if image.elfclass == 64 else 32):
        raise ElfError("no address is left above the file's segments for a new one")
    return address


#: Dynamic symbols larger than this do not widen the gap below the new segment.
_GAP_LIMIT = 16 << 20


def _largest_dynamic_symbol(image: ElfReader) -> int:
    """The size of the largest dynamic symbol (up to 16 MiB), left free below the new
    segment: eu-elflint takes a dynamic relocation's offset plus its symbol's size as the
    bytes it writes, and calls a read-only segment within reach a text relocation."""
    dynsym = next((s for s in _section_headers(image) if s.type == SHT_DYNSYM), None)
    if dynsym is None or dynsym.flags & SHF_COMPRESSED:
        return 0
    try:
        table = read_symbol_table(image, dynsym)
    except ElfError:  # a damaged table: no gap (the injection itself decides about the file)
        return 0
    sizes = [] if table is None else table.columns["size"]
    return max((size for size in sizes if size <= _GAP_LIMIT), default=0)


class _NoRoom(ElfError):
    """The program header table cannot grow where it is."""


class _Unsafe(ElfError):
    """No layout that later tools keep valid exists for the file."""


def _lowering_for_table(
    image: ElfReader, loads: list[ElfSegment], table_size: int, page: int
) -> int:
    """How many bytes (whole pages) the first PT_LOAD of an executable must be lowered by
    for the table to grow to ``table_size`` at e_phoff, or 0 when it cannot be."""
    header = image.header
    first = min(loads, key=lambda s: s.vaddr)
    table_end = header.phoff + header.phnum * header.phentsize
    if first.offset or table_end > first.filesz:
        return 0
    headers = _section_headers(image)
    contents = [s.offset for s in headers[1:] if s.type != SHT_NOBITS and s.size] + [
        s.offset for s in image.segments() if s.filesz and s.type not in (PT_LOAD, PT_PHDR)
    ]
    first_content = min([c for c in contents if c >= table_end] or [first.filesz])
    if len(headers) <= 1:  # no section headers: what no program header describes may follow
        first_content = table_end
    shift = _align(max(0, header.phoff + table_size - first_content), page)
    return shift if 0 < shift <= first.vaddr else 0


#: What may be moved out of the program header table's way: read-only data that only program
#: headers, dynamic entries and symbols point at (what GNU ld puts right after the table).
_MOVABLE_TYPES = frozenset(
    {SHT_NOTE, SHT_HASH, SHT_GNU_HASH, SHT_DYNSYM, SHT_GNU_VERSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED}
)
_MOVABLE_NAMES = {".interp": SHT_PROGBITS, ".dynstr": SHT_STRTAB}
#: Segments that may describe moved sections (they move with them).
_MOVABLE_SEGMENTS = frozenset({PT_INTERP, PT_NOTE, PT_GNU_PROPERTY})


def _movable(section: ElfSection) -> bool:
    if not section.flags & SHF_ALLOC or section.flags & (SHF_WRITE | SHF_EXECINSTR):
        return False
    return section.type in _MOVABLE_TYPES or _MOVABLE_NAMES.get(section.name) == section.type


def _room_for_table(
    image: ElfReader, segments: list[ElfSegment], file_size: int, table_size: int, page: int
) -> MovedSections | None:
    """What must move for the program header table to grow in place to ``table_size`` bytes.

    The table stays at e_phoff inside the first PT_LOAD, where the linker put it: binutils
    2.40's strip and objcopy always write it right after the ELF header, and lay out again a
    segment holding it elsewhere (over the read-write segment), and eu-strip empties such a
    table.  The sections after it (.interp, notes, .gnu.hash, ...) move instead, as one block
    to the new segment; None when nothing is in the way.
    """
    header = image.header
    old_end = header.phoff + header.phnum * header.phentsize
    new_end = header.phoff + table_size
    _check_table_can_grow(image, segments, file_size, old_end, new_end)
    sections = [s for s in _section_headers(image)[1:] if s.type != SHT_NOBITS and s.size]
    # What the table would grow over: sections, and the contents of segments (PT_INTERP,
    # PT_NOTE, ...) whether or not a section describes them.
    contents = [(s.offset, s.offset + s.size) for s in sections] + [
        (s.offset, s.offset + s.filesz)
        for s in segments
        if s.type not in (PT_LOAD, PT_PHDR) and s.filesz
    ]
    in_way = [(low, high) for low, high in contents if low < new_end and old_end < high]
    if not in_way:
        return None
    start, end = min(low for low, _ in in_way), max(high for _, high in in_way)
    if start < old_end:
        raise _NoRoom("a section or segment overlaps the program header table")
    end = _block_end(sections, segments, start, end)
    block = [s for s in sections if start <= s.offset < end]
    for section in block:
        if not _movable(section):
            raise _NoRoom(
                "the program header table cannot grow: section "
                f"{section.name or section.index} follows it and cannot be moved"
            )
    load = next(
        (
            s
            for s in segments
            if s.type == PT_LOAD and s.offset <= start and end <= s.offset + s.filesz
        ),
        None,
    )
    if load is None or (load.vaddr - load.offset) % page:
        raise _NoRoom("the program header table cannot grow: the sections after it are not loaded")
    return MovedSections(
        offset=start,
        address=load.vaddr + (start - load.offset),
        size=end - start,
        offset_delta=0,
        address_delta=0,
        sections=tuple(s.index for s in block),
        segments=_moved_segments(segments, start, end),
    )


def _check_table_can_grow(
    image: ElfReader, segments: list[ElfSegment], file_size: int, old_end: int, new_end: int
) -> None:
    """_NoRoom when the table cannot grow to ``new_end`` whatever moves: its segment or the
    file ends first, the section header table follows it, or no section headers say what
    follows it."""
    header = image.header
    host = next(
        (
            s
            for s in segments
            if s.type == PT_LOAD and s.offset <= header.phoff and old_end <= s.offset + s.filesz
        ),
        None,
    )
    if host is not None and new_end > host.offset + host.filesz:
        raise _NoRoom(
            "the program header table cannot grow: its segment ends "
            f"{new_end - host.offset - host.filesz} bytes too early"
        )
    if new_end > file_size:
        raise _NoRoom("the program header table cannot grow: the file ends after it")
    shdr_end = header.shoff + header.shnum * header.shentsize
    if header.shnum and header.shoff < new_end and old_end < shdr_end:
        raise _NoRoom("the program header table cannot grow: the section header table follows it")
    if len(_section_headers(image)) <= 1:
        # Stripped section headers (or the null entry only): what follows the table (.gnu.hash,
        # .dynsym, ...: no program header describes them) is not known, so nothing may grow
        # over it.
        raise _NoRoom("the program header table cannot grow: no section headers tell what "
                      "follows it")  # fmt: skip


def _block_end(sections: list[ElfSection], segments: list[ElfSegment], start: int, end: int) -> int:
    """The end of the block that moves: every section inside [start, end), grown until no
    section straddles its end, nor a note or interpreter segment (which moves whole, with all
    it describes)."""
    movable_segments = [
        s for s in segments if s.type in _MOVABLE_SEGMENTS and s.filesz and s.offset >= start
    ]
    while True:
        grown = max(
            [
                end,
                *(s.offset + s.size for s in sections if start <= s.offset < end),
                *(s.offset + s.filesz for s in movable_segments if s.offset < end),
            ]
        )
        if grown == end:
            return end
        end = grown


def _moved_segments(segments: list[ElfSegment], start: int, end: int) -> tuple[int, ...]:
    """The segments that move with the block [start, end): those inside it, which must be
    of a kind that describes only what it holds (notes, the interpreter's path)."""
    moved = []
    for index, seg in enumerate(segments):
        if seg.type in (PT_LOAD, PT_PHDR) or not seg.filesz:
            continue
        if seg.offset < end and start < seg.offset + seg.filesz:
            inside = start <= seg.offset and seg.offset + seg.filesz <= end
            if seg.type not in _MOVABLE_SEGMENTS or not inside:
                raise _NoRoom(
                    f"the program header table cannot grow: segment {index} "
                    "describes more than the sections after it"
                )
            moved.append(index)
    return tuple(moved)


def new_section_address(image: ElfReader) -> int:
    """The address :func:`inject_sframe` gives the ``.sframe`` section of ``image``."""
    _check_tables(image, image.file_size)
    try:
        return _plan(image, image.file_size, allow_existing=True).sframe_address
    except _Unsafe:
        # Not injectable: the section describes the file all the same, at the first page
        # above its segments (where a new segment would go).
        loads = image.load_segments()
        return _address_checked(image, _align(max(s.vaddr + s.memsz for s in loads), 0x1000))


def inject_sframe(
    data: bytes, sframe: bytes, plan: InjectionPlan | None = None, *, replace: bool = False
) -> bytes:
    """A copy of the ELF file ``data`` with ``sframe`` added as a loadable ``.sframe``, or
    replacing the file's own (``replace``).

    ``sframe`` must have been encoded for ``plan.sframe_address`` (V3 starts are relative to
    their own position); :func:`plan_injection` (with the same ``replace``) gives it.
    """
    with _image(data) as image:
        return bytes(_inject(image, data, sframe, plan, replace))


def _inject(
    image: ElfReader, data: bytes, sframe: bytes, plan: InjectionPlan | None, replace: bool
) -> bytearray:
    """The new file's bytes (a bytearray: the caller writes it without another copy): the
    grown program header table, the moved block and the SFrame data appended, the moved
    contents' addresses patched, then the section headers."""
    header = image.header
    bits, big_endian = header.bits, header.big_endian
    plan = plan or _plan(image, len(data), replace=replace)
    if header.shnum >= SHN_LORESERVE or header.shstrndx >= SHN_LORESERVE:
        raise ElfError("files with extended section numbering are not supported")
    segments = image.segments()
    old_sframe = _sframe_header(image)
    if not replace and (any(s.type == PT_GNU_SFRAME for s in segments) or old_sframe):
        raise ElfError("the file already has an SFrame section (--replace replaces it)")
    moved = plan.moved
    headers = _section_headers(image)
    out = bytearray(data)
    if plan.file_shift:
        segments, headers, out = _lowered(segments, headers, data, plan.file_shift)
    table = _new_program_headers(segments, plan, len(sframe), replace)
    phdrs = b"".join(s.pack(bits, big_endian) for s in table)
    if len(phdrs) != plan.phdr_size:
        raise ElfError("the injection plan was made for another mode (replace or add)")
    block = b""
    if moved is not None:
        # The moved sections leave zeros behind, under the grown table and after it.
        block = data[moved.offset : moved.offset + moved.size]
        out[moved.offset : moved.offset + moved.size] = bytes(moved.size)
    out[header.phoff : header.phoff + len(phdrs)] = phdrs
    out += bytes(plan.load_offset - len(out))
    out += block
    out += bytes(plan.sframe_offset - len(out))
    out += sframe
    if moved is not None:
        _patch_moved(segments, headers, out, moved, len(data), bits, big_endian)
    shoff, shnum = _write_section_headers(
        image, headers, out, plan, len(sframe), old_sframe if replace else None, segments
    )
    new_header = dataclasses.replace(header, shoff=shoff, phnum=len(table), shnum=shnum)
    out[: len(new_header.pack())] = new_header.pack()
    return out


def _new_program_headers(
    segments: list[ElfSegment], plan: InjectionPlan, size: int, replace: bool
) -> list[ElfSegment]:
    """The program headers of the new file: the old ones (PT_PHDR grown, moved ones moved,
    an old PT_GNU_SFRAME pointed at the new data), a PT_LOAD for the appended bytes after
    the last PT_LOAD, and a PT_GNU_SFRAME for the section."""
    moved = plan.moved
    seg_end = plan.sframe_offset + size
    new_load = ElfSegment(
        type=PT_LOAD, offset=plan.load_offset, vaddr=plan.load_address,
        paddr=plan.load_address, filesz=seg_end - plan.load_offset,
        memsz=seg_end - plan.load_offset, flags=PF_R, align=plan.page_size,
    )  # fmt: skip
    sframe_seg = ElfSegment(
        type=PT_GNU_SFRAME, offset=plan.sframe_offset, vaddr=plan.sframe_address,
        paddr=plan.sframe_address, filesz=size, memsz=size, flags=PF_R, align=8,
    )  # fmt: skip
    table: list[ElfSegment] = []
    last_load = max(i for i, s in enumerate(segments) if s.type == PT_LOAD)
    reuse = replace and any(s.type == PT_GNU_SFRAME for s in segments)
    for index, seg in enumerate(segments):
        if seg.type == PT_PHDR:
            seg = dataclasses.replace(seg, filesz=plan.phdr_size, memsz=plan.phdr_size)
        if moved is not None and index in moved.segments:
            seg = dataclasses.replace(
                seg,
                offset=seg.offset + moved.offset_delta,
                vaddr=seg.vaddr + moved.address_delta,
                paddr=seg.paddr + moved.address_delta,
            )
        if seg.type == PT_GNU_SFRAME and reuse:
            seg = sframe_seg
        table.append(seg)
        if index == last_load:
            table.append(new_load)
    if not reuse:
        table.append(sframe_seg)
    return table


def _patch_moved(
    segments: list[ElfSegment],
    headers: list[ElfSection],
    out: bytearray,
    moved: MovedSections,
    input_size: int,
    bits: int,
    big_endian: bool,
) -> None:
    """The moved sections' headers, and the dynamic entries and symbols that point into
    them, given their new places."""
    # Symbols are patched where they are: a table running past the end of the file would
    # reach into the bytes appended to it (the moved block, the SFrame data).
    for section in headers:
        if (
            section.type in (SHT_SYMTAB, SHT_DYNSYM)
            and not section.flags & SHF_COMPRESSED
            and section.offset + section.size > input_size
        ):
            raise ElfError("runs past the end of the file", section=section.name)
    for index in moved.sections:
        old = headers[index]
        headers[index] = dataclasses.replace(
            old,
            address=old.address + moved.address_delta,
            offset=old.offset + moved.offset_delta,
        )
    _relocate_dynamic(segments, out, moved, bits, big_endian)
    _relocate_symbols(headers, out, moved, bits, big_endian)


def _write_section_headers(
    image: ElfReader,
    headers: list[ElfSection],
    out: bytearray,
    plan: InjectionPlan,
    size: int,
    old_sframe: ElfSection | None,
    segments: list[ElfSegment],
) -> tuple[int, int]:
    """Section headers: the old ones with the old .sframe pointed at the new data, or with a
    new name table and a new .sframe (and, where the file was lowered, a section over its
    old headers), appended to ``out`` when they change; the new e_shoff and e_shnum."""
    header = image.header
    rewrite = plan.moved is not None and bool(headers)
    new_sframe = ElfSection(
        index=len(headers), name=".sframe", type=SHT_GNU_SFRAME, address=plan.sframe_address,
        offset=plan.sframe_offset, size=size, flags=SHF_ALLOC, addralign=8,
    )  # fmt: skip
    added: list[ElfSection] = []
    if old_sframe is not None:
        old = headers[old_sframe.index]
        headers[old_sframe.index] = dataclasses.replace(
            new_sframe, index=old.index, name=old.name, name_offset=old.name_offset,
            link=old.link, info=old.info, entsize=old.entsize,
        )  # fmt: skip
        rewrite = True
    else:
        added.append(new_sframe)
    if plan.file_shift:
        # The old ELF header and program header table stay at the old first address, where
        # a static program's __ehdr_start points (AArch64's glibc reads the program headers
        # through it); a section covers them so that strip and objcopy keep their bytes.
        first = min((s for s in segments if s.type == PT_LOAD), key=lambda s: s.vaddr)
        added.append(ElfSection(
            index=len(headers) + len(added), name=ORIGINAL_HEADERS, type=SHT_PROGBITS,
            address=first.vaddr + plan.file_shift, offset=plan.file_shift,
            size=header.phoff + header.phnum * header.phentsize, flags=SHF_ALLOC, addralign=8,
        ))  # fmt: skip
    if added and 0 < header.shstrndx < len(headers):
        _add_names(headers, header.shstrndx, added, out)
        rewrite = True
    if not rewrite:
        # The table moves with the bytes after it; e_shoff 0 says there is none (gABI).
        return header.shoff + (plan.file_shift if header.shoff else 0), header.shnum
    out += bytes(_align(len(out), 8) - len(out))
    shoff = len(out)
    for section in headers:
        out += section.pack(header.bits, header.big_endian)
    return shoff, len(headers)


def _add_names(
    headers: list[ElfSection], shstrndx: int, added: list[ElfSection], out: bytearray
) -> None:
    """Append the ``added`` sections to ``headers``, their names to a new copy of the
    section-name table written at the end of ``out``."""
    names_hdr = headers[shstrndx]
    names = bytes(out[names_hdr.offset : names_hdr.offset + names_hdr.size])
    if any(h.name_offset >= len(names) for h in headers):
        # A name appended at an sh_name past the table's end would become that section's.
        raise ElfError(
            f"the section-name table ({len(names)} bytes) does not hold every section's "
            "name: a name added to it would rename a section"
        )
    for section in added:
        headers.append(dataclasses.replace(section, name_offset=len(names)))
        names += section.name.encode() + b"\0"
    headers[shstrndx] = dataclasses.replace(names_hdr, offset=len(out), size=len(names))
    out += names


def _lowered(
    segments: list[ElfSegment],
    headers: list[ElfSection],
    data: bytes,
    shift: int,
) -> tuple[list[ElfSegment], list[ElfSection], bytearray]:
    """The segments, sections and bytes of ``data`` with ``shift`` bytes inserted after the
    program header table's page: the first PT_LOAD starts ``shift`` bytes lower (it keeps
    the ELF header and the table), everything else keeps its address at a later offset."""
    first = min((s for s in segments if s.type == PT_LOAD), key=lambda s: s.vaddr)
    lowered = []
    for seg in segments:
        if seg is first:
            seg = dataclasses.replace(
                seg,
                vaddr=seg.vaddr - shift,
                paddr=seg.paddr - shift,
                filesz=seg.filesz + shift,
                memsz=seg.memsz + shift,
            )
        elif seg.type == PT_PHDR:
            seg = dataclasses.replace(seg, vaddr=seg.vaddr - shift, paddr=seg.paddr - shift)
        elif seg.offset or seg.filesz:
            seg = dataclasses.replace(seg, offset=seg.offset + shift)
        lowered.append(seg)
    moved = [
        s if s.index == 0 else dataclasses.replace(s, offset=s.offset + shift) for s in headers
    ]
    # The old ELF header and table stay at the old first address (a program's __ehdr_start).
    out = bytearray(shift) + data
    return lowered, moved, out


def _moved_address(moved: MovedSections, address: int) -> int | None:
    """``address`` once its section has moved, or None when it is not in the moved block."""
    if moved.address <= address < moved.address + moved.size:
        return address + moved.address_delta
    return None


def _relocate_dynamic(
    segments: list[ElfSegment], out: bytearray, moved: MovedSections, bits: int, big_endian: bool
) -> None:
    """Point the dynamic entries that hold addresses (DT_GNU_HASH, DT_SYMTAB, ...) at the
    moved sections."""
    entry = dyn_struct(bits, big_endian)
    for seg in segments:
        if seg.type != PT_DYNAMIC:
            continue
        end = min(seg.offset + seg.filesz, len(out))
        for offset in range(seg.offset, end - entry.size + 1, entry.size):
            tag, value = entry.unpack_from(out, offset)
            if tag == DT_NULL:
                break
            if is_address_tag(tag) and (new := _moved_address(moved, value)) is not None:
                entry.pack_into(out, offset, tag, new)


def _relocate_symbols(
    headers: list[ElfSection], out: bytearray, moved: MovedSections, bits: int, big_endian: bool
) -> None:
    """Add the move to the value of every symbol defined in a moved section (``headers`` are
    the sections' new headers, so a moved ``.dynsym`` is patched where it now is)."""
    import numpy as np

    dtype = sym_dtype(bits, big_endian)
    indexes = np.array(moved.sections, dtype=np.uint16)
    for section in headers:
        if section.type not in (SHT_SYMTAB, SHT_DYNSYM) or section.flags & SHF_COMPRESSED:
            continue
        count = min(section.size, max(len(out) - section.offset, 0)) // dtype.itemsize
        if not count:
            continue
        symbols = np.frombuffer(out, dtype=dtype, count=count, offset=section.offset)
        inside = np.isin(symbols["shndx"], indexes)
        if inside.any():
            symbols["value"][inside] += np.array(moved.address_delta, dtype=symbols["value"].dtype)


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
    with _image(original) as image:
        new = _inject(image, original, data, plan, replace)
    # Atomically, never over the input, a new file with the input's permissions.
    write_file(output, new, inputs=[path], mode_from=path)


__all__ = [
    "EncodableSection",
    "InjectionPlan",
    "inject_file",
    "inject_sframe",
    "new_section_address",
    "plan_injection",
]
