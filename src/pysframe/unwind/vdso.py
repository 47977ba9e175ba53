"""The vDSO: an ELF image the kernel maps into every process, with no file behind it.

It is found through the auxiliary vector (``AT_SYSINFO_EHDR``:
:func:`pysframe.unwind.mappings.vdso_address`), read from the address space (bounded to
:data:`VDSO_LIMIT`), and its facts are read from that image, which they keep: its symbols, and
SFrame generated from its ``.eh_frame``, are read from it when first needed (there is no file
to read them from).  It becomes a module named ``[vdso]``
(:func:`pysframe.unwind.modules.vdso_module`).
"""

from __future__ import annotations

from ..elf.layout import EHDR_SIZE, ElfHeader
from ..elf.reader import ElfReader
from ..errors import SFrameError
from .core import ReadMemory
from .facts import ElfFacts, facts_of_image

VDSO_NAME = "[vdso]"
#: A vDSO is a few pages; an image that claims more is not read.
VDSO_LIMIT = 1 << 20
_VDSO_CACHE: dict[bytes, ElfFacts] = {}


def vdso_facts(address: int, read_memory: ReadMemory) -> tuple[ElfFacts, int] | None:
    """The facts of the vDSO mapped at ``address`` and its size in memory, read from the
    address space (cached per image); None if it cannot be read."""
    image = read_vdso_image(address, read_memory)
    if image is None:
        return None
    facts = _VDSO_CACHE.get(image)
    if facts is None:
        try:
            facts = _vdso_facts(image)
        except SFrameError:
            return None
        if len(_VDSO_CACHE) >= 8:
            _VDSO_CACHE.clear()
        _VDSO_CACHE[image] = facts
    return facts, len(image)


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


def _vdso_facts(image: bytes) -> ElfFacts:
    with ElfReader.from_bytes(VDSO_NAME, image) as elf:
        facts = facts_of_image(elf)
    # Its symbols and generated SFrame are read from these bytes when first needed.
    facts.image = image
    return facts


__all__ = ["VDSO_LIMIT", "VDSO_NAME", "read_vdso_image", "vdso_facts"]
