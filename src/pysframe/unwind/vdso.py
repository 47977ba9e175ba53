"""The vDSO: an ELF image the kernel maps into every process, with no file behind it.

It is found through the auxiliary vector (``AT_SYSINFO_EHDR``:
:func:`pysframe.unwind.mappings.vdso_address`) and read from the address space (bounded to
:data:`VDSO_LIMIT`); its facts are read from that image, which they keep: its symbols, and
SFrame generated from its ``.eh_frame``, are read from it when first needed (there is no file
to read them from).  It becomes a module named ``[vdso]``
(:func:`pysframe.unwind.modules.vdso_module`).
"""

from __future__ import annotations

from ..elf.layout import EHDR_SIZE, ElfHeader
from ..errors import SFrameError
from .core import ReadMemory

VDSO_NAME = "[vdso]"
#: A vDSO is a few pages; an image that claims more is not read.
VDSO_LIMIT = 1 << 20


def read_vdso_image(address: int, read_memory: ReadMemory) -> bytes | None:
    """The vDSO's bytes: up to the end of its section or program headers, whichever is last
    (its file image is mapped whole)."""
    try:
        header = ElfHeader.unpack(read_memory(address, EHDR_SIZE[64]))
        if header.bits != 64:
            return None
        size = header.tables_end
        if size > VDSO_LIMIT:
            return None
        image = read_memory(address, size)
    except (OSError, ValueError, SFrameError):
        return None
    return image if len(image) == size else None


__all__ = ["VDSO_LIMIT", "VDSO_NAME", "read_vdso_image"]
