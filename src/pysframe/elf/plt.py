"""Names for PLT entries, ``NAME@plt``, as BFD's synthetic symbols give them to gdb and objdump.

A PLT entry jumps through a GOT slot, and the dynamic relocation of that slot names the
function (``R_X86_64_JUMP_SLOT printf`` for a lazy ``.plt`` or ``.plt.sec`` entry,
``R_X86_64_GLOB_DAT __cxa_finalize`` for ``.plt.got``).  BFD's
``_bfd_x86_elf_get_synthetic_symtab`` reads the slot from each entry's ``jmp *disp32(%rip)``
and calls the entry ``NAME@plt`` (``NAME+0xADDEND@plt`` with an addend, ``*ABS*+0xADDR@plt``
for a slot without a symbol); only dynamic relocations count, so a static program's PLT has
no names, as in gdb.  Entries that do not
jump through a slot (the first entry of ``.plt``, and its lazy entries when ``.plt.sec`` holds
the jumps) have no name.  Each name covers its entry (``sh_entsize`` bytes).

Only x86-64 is read here; other machines' PLTs have no names yet.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ElfError
from .image import ElfImage, ElfSection
from .layout import EM_X86_64, SHF_ALLOC, SHT_DYNSYM, SHT_PROGBITS, SHT_RELA
from .symbols import SymbolRecord, sym_dtype

#: The sections that hold PLT entries (GNU ld; .plt.bnd is the MPX name of .plt.sec).
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got", ".plt.bnd")
_ENDBR64 = b"\xf3\x0f\x1e\xfa"
_BND = 0xF2
_JMP_RIP = b"\xff\x25"  # jmp *disp32(%rip)


def plt_symbols(image: ElfImage) -> list[SymbolRecord]:
    """The ``NAME@plt`` symbols of ``image``'s PLT entries (empty for other machines, and for
    files without section headers)."""
    if image.machine != EM_X86_64 or image.elfclass != 64:
        return []
    entries: list[tuple[int, int, int]] = []  # (entry address, entry size, GOT slot)
    for section in image.sections():
        if section.name not in PLT_SECTIONS or section.type != SHT_PROGBITS:
            continue
        step = section.entsize or 16
        data = section.data()
        for at in range(0, len(data) - step + 1, step):
            slot = _x86_64_slot(data[at : at + step], section.address + at)
            if slot is not None:
                entries.append((section.address + at, step, slot))
    if not entries:
        return []
    names = _slot_names(image, {slot for _a, _s, slot in entries})
    return [
        SymbolRecord(address, size, f"{names[slot]}@plt")
        for address, size, slot in entries
        if slot in names
    ]


def _x86_64_slot(entry: bytes, address: int) -> int | None:
    """The GOT slot the entry at ``address`` jumps through: ``[endbr64] [bnd] jmp
    *disp32(%rip)`` at its start; None for an entry that does not."""
    at = len(_ENDBR64) if entry.startswith(_ENDBR64) else 0
    if entry[at : at + 1] == bytes([_BND]):
        at += 1
    if entry[at : at + 2] != _JMP_RIP or len(entry) < at + 6:
        return None
    displacement = int.from_bytes(entry[at + 2 : at + 6], "little", signed=True)
    return address + at + 6 + displacement


def _slot_names(image: ElfImage, slots: set[int]) -> dict[int, str]:
    """For each GOT slot a dynamic RELA relocation applies to: the name BFD gives the PLT
    entry that jumps through it, without ``@plt``."""
    import numpy as np

    sections = image.sections()
    order = ">" if image.big_endian else "<"
    rela = np.dtype([("offset", order + "u8"), ("info", order + "u8"), ("addend", order + "i8")])
    wanted = np.array(sorted(slots), dtype=np.uint64)
    names: dict[int, str] = {}
    for section in sections:
        # Dynamic relocations only: BFD reads the PLT's through the dynamic symbol table, so
        # a static program's IRELATIVE PLT (.rela.plt linked to .symtab) has no names.
        if (
            section.type != SHT_RELA
            or not section.flags & SHF_ALLOC
            or not 0 < section.link < len(sections)
            or sections[section.link].type != SHT_DYNSYM
        ):
            continue
        data = section.data()
        entries = np.frombuffer(data, dtype=rela, count=len(data) // rela.itemsize)
        entries = entries[np.isin(entries["offset"], wanted)]
        if not len(entries):
            continue
        symbols = _dynamic_symbols(image, section.link, sections)
        for offset, info, addend in entries.tolist():
            index = info >> 32
            if index:
                name = symbols(index)
                names[offset] = f"{name}+{addend:#x}" if addend else name
            else:
                names[offset] = f"*ABS*+{addend:#x}"
    return names


def _dynamic_symbols(
    image: ElfImage, link: int, sections: list[ElfSection]
) -> Callable[[int], str]:
    """A function from a symbol index of the table at section ``link`` to its name (without
    a version)."""
    import numpy as np

    table = sections[link]
    if not 0 < table.link < len(sections):
        raise ElfError(f"{image.path}: {table.name} links to no string table ({table.link})")
    dtype = sym_dtype(image.elfclass, image.big_endian)
    data = table.data()
    entries = np.frombuffer(data, dtype=dtype, count=len(data) // dtype.itemsize)
    strings = sections[table.link].data()

    def name(index: int) -> str:
        if index >= len(entries):
            return ""
        at = int(entries[index]["name"])
        end = strings.find(b"\0", at)
        raw = strings[at : end if end >= 0 else len(strings)]
        return raw.decode("utf-8", "replace").split("@", 1)[0]

    return name
