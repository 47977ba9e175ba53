"""Where a file's ``.eh_frame`` is: by its section header, or, when the section headers are
stripped, through the ``PT_GNU_EH_FRAME`` program header.

``PT_GNU_EH_FRAME`` locates ``.eh_frame_hdr`` (LSB 5.0 10.6.2 ".eh_frame_hdr"): u8 version (1),
u8 ``eh_frame_ptr_enc``, u8 ``fde_count_enc``, u8 ``table_enc``, then ``eh_frame_ptr``, the
address of ``.eh_frame`` in ``eh_frame_ptr_enc`` (``DW_EH_PE_pcrel | DW_EH_PE_sdata4`` as GNU ld
and lld write it, relative to the field).  ``.eh_frame``'s size is not recorded anywhere: it
runs to its zero terminator (LSB 10.6.1), which the CFI scanner stops at, so the made-up
section reaches to the end of the loaded file bytes that hold it.
"""

from __future__ import annotations

from ..elf.layout import PT_LOAD, SHF_ALLOC, SHT_PROGBITS
from ..elf.reader import ElfReader, ElfSection
from ..errors import CfiError
from .cfi import PointerContext, Reader, read_encoded

#: PT_GNU_EH_FRAME (binutils include/elf/common.h).
PT_GNU_EH_FRAME = 0x6474E550
#: The .eh_frame_hdr version LSB 10.6.2 defines.
EH_FRAME_HDR_VERSION = 1


def find_eh_frame(image: ElfReader) -> ElfSection | None:
    """The ``.eh_frame`` section of ``image``: its section header, or one made up (index -1)
    from ``PT_GNU_EH_FRAME`` when the file has no section headers; None without either.
    CfiError when ``.eh_frame_hdr`` cannot be read."""
    found = image.section(".eh_frame")
    if found is not None or image.has_section_headers():
        return found
    header = image.segment(PT_GNU_EH_FRAME)
    if header is None or header.filesz < 8:
        return None
    data = image.segment_data(header)
    if data[0] != EH_FRAME_HDR_VERSION:
        raise CfiError(
            f".eh_frame_hdr version {data[0]} is not {EH_FRAME_HDR_VERSION}", 0, path=image.path
        )
    reader = Reader(data, image.big_endian)
    context = PointerContext(section_address=header.vaddr)
    try:
        address, _, _ = read_encoded(reader, 4, len(data), data[1], image.elfclass // 8, context)
    except CfiError as error:
        raise error.at(path=image.path, section=".eh_frame_hdr") from None
    load = next(
        (
            s for s in image.segments()
            if s.type == PT_LOAD and s.vaddr <= address < s.vaddr + s.filesz
        ),
        None,
    )  # fmt: skip
    if load is None:
        return None
    offset = load.offset + (address - load.vaddr)
    return ElfSection(
        index=-1,
        name=".eh_frame",
        type=SHT_PROGBITS,
        address=address,
        offset=offset,
        size=load.filesz - (address - load.vaddr),
        flags=SHF_ALLOC,
        _image=image,
    )


__all__ = ["PT_GNU_EH_FRAME", "find_eh_frame"]
