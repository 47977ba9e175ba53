"""Names for PLT entries, ``NAME@plt``, as BFD's synthetic symbols give them to gdb and objdump.

A PLT entry jumps through a GOT slot whose dynamic relocation names the function.  BFD names
the entries from the relocations of the dynamic symbol table only, so a static program's
PLT (``.rela.plt`` linked to ``.symtab``) has no names, as in gdb.  A relocation with an addend
gives ``NAME+0xADDEND@plt``; one without a symbol ``*ABS*+0xADDEND@plt``.  Each name covers
its entry.

* x86-64 (``_bfd_x86_elf_get_synthetic_symtab``): every entry of ``.plt``, ``.plt.sec`` and
  ``.plt.got`` (``sh_entsize`` bytes) that starts with ``[endbr64] [bnd] jmp *disp32(%rip)``
  is named after the relocation of the slot it jumps through (``R_X86_64_JUMP_SLOT``, or
  ``R_X86_64_GLOB_DAT`` for ``.plt.got``); the first entry of ``.plt``, and its lazy entries
  when ``.plt.sec`` holds the jumps, have none.
* AArch64 (``_bfd_elf_get_synthetic_symtab`` with ``elfNN_aarch64_plt_sym_val``): the i-th
  relocation of ``.rela.plt`` names the i-th entry after the 32-byte first one; entries are
  16 bytes, 24 when the dynamic section asks for BTI or PAC PLTs
  (``DT_AARCH64_BTI_PLT``, ``DT_AARCH64_PAC_PLT``).

* s390x (``elf_s390_get_synthetic_symtab``): as x86-64, each 32-byte entry of ``.plt`` that
  starts with ``larl %r1,SLOT``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from ..errors import ElfError
from .layout import (
    DT_AARCH64_BTI_PLT,
    DT_AARCH64_PAC_PLT,
    EM_AARCH64,
    EM_S390,
    EM_X86_64,
    SHF_ALLOC,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_PROGBITS,
    SHT_RELA,
    dyn64_struct,
)
from .reader import ElfReader, ElfSection
from .relocation import relocation_columns
from .symbols import SymbolRecord, read_symbol_table, symbol_names

#: The sections that hold PLT entries (GNU ld; .plt.bnd is the MPX name of .plt.sec).
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got", ".plt.bnd")
_ENDBR64 = b"\xf3\x0f\x1e\xfa"
_BND = 0xF2
_JMP_RIP = b"\xff\x25"  # jmp *disp32(%rip)
_LARL_R1 = b"\xc0\x10"  # larl %r1, PC + 2 * imm32


def plt_symbols(image: ElfReader) -> list[SymbolRecord]:
    """The ``NAME@plt`` symbols of ``image``'s PLT entries (empty for other machines, and for
    files without section headers)."""
    if image.elfclass != 64:
        return []
    if image.machine == EM_X86_64:
        return _slot_symbols(image, _x86_64_slot, 16)
    if image.machine == EM_S390:
        return _slot_symbols(image, _s390x_slot, 32)
    if image.machine == EM_AARCH64:
        return _aarch64_symbols(image)
    return []


def _slot_symbols(
    image: ElfReader,
    slot_of: Callable[[bytes, int], int | None],
    default_size: int,
) -> list[SymbolRecord]:
    """The entries of the PLT sections (``sh_entsize`` bytes, else ``default_size``) whose
    code ``slot_of`` finds a GOT slot in, named after the slot's relocation."""
    entries: list[tuple[int, int, int]] = []  # (entry address, entry size, GOT slot)
    for section in image.sections():
        if section.name not in PLT_SECTIONS or section.type != SHT_PROGBITS:
            continue
        step = section.entsize or default_size
        data = section.data()
        for at in range(0, len(data) - step + 1, step):
            slot = slot_of(data[at : at + step], section.address + at)
            if slot is not None:
                entries.append((section.address + at, step, slot))
    if not entries:
        return []
    names: dict[int, str] = {}
    for section in _dynamic_relocation_sections(image):
        names.update(_relocation_names(image, section, {slot for _a, _s, slot in entries}))
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
    return _address(address + at + 6 + displacement)


def _s390x_slot(entry: bytes, address: int) -> int | None:
    """The GOT slot of an s390x PLT entry: ``larl %r1,SLOT`` at its start (the first entry
    stores registers first: none)."""
    if entry[:2] != _LARL_R1 or len(entry) < 6:
        return None
    return _address(address + 2 * int.from_bytes(entry[2:6], "big", signed=True))


def _address(slot: int) -> int | None:
    """``slot`` when it is an address (a displacement may point below 0 or past 2**64: such
    an entry jumps through no slot)."""
    return slot if 0 <= slot < 1 << 64 else None


def _aarch64_symbols(image: ElfReader) -> list[SymbolRecord]:
    plt = image.section(".plt")
    relocations = image.section(".rela.plt")
    if plt is None or relocations is None or relocations not in _dynamic_relocation_sections(image):
        return []
    tags = _dynamic_tags(image)
    size = 24 if tags & {DT_AARCH64_BTI_PLT, DT_AARCH64_PAC_PLT} else 16
    names = list(_relocation_names(image, relocations).values())
    return [
        SymbolRecord(plt.address + _AARCH64_PLT0 + i * size, size, f"{name}@plt")
        for i, name in enumerate(names)
        if _AARCH64_PLT0 + (i + 1) * size <= plt.size
    ]


#: The first entry of an AArch64 PLT (elfNN-aarch64.c PLT_ENTRY_SIZE); the others are 24
#: bytes, not 16, in BTI and PAC PLTs.
_AARCH64_PLT0 = 32


def _dynamic_relocation_sections(image: ElfReader) -> list[ElfSection]:
    """The RELA sections of the dynamic symbol table, in section order (BFD reads the PLT's
    relocations through it)."""
    sections = image.sections()
    return [
        section
        for section in sections
        if section.type == SHT_RELA
        and section.flags & SHF_ALLOC
        and 0 < section.link < len(sections)
        and sections[section.link].type == SHT_DYNSYM
    ]


def _relocation_names(
    image: ElfReader, section: ElfSection, slots: set[int] | None = None
) -> dict[int, str]:
    """Per relocated address (in the section's order; only ``slots`` when given), the name
    BFD gives the PLT entry whose slot it is, without ``@plt``: the relocation's symbol, with
    its addend; without a symbol, ``*ABS*`` and the addend."""
    entries = relocation_columns(image, section)
    offsets, infos, addends = entries["offset"], entries["info"], entries["addend"]
    chosen: Iterable[int] = range(len(offsets))
    if slots is not None:
        chosen = itertools.compress(chosen, map(slots.__contains__, offsets))
    picked = list(chosen)
    symbols = _dynamic_symbol_names(image, section.link, [infos[i] >> 32 for i in picked])
    names: dict[int, str] = {}
    for i, name in zip(picked, symbols, strict=True):
        addend = addends[i]
        if infos[i] >> 32:
            names[offsets[i]] = f"{name}+{addend:#x}" if addend else name
        else:
            names[offsets[i]] = f"*ABS*+{addend:#x}"
    return names


def _dynamic_tags(image: ElfReader) -> set[int]:
    """The tags of the ``.dynamic`` section's entries (a few dozen: read with struct)."""
    dynamic = image.section(".dynamic")
    if dynamic is None or dynamic.type != SHT_DYNAMIC:
        return set()
    entry = dyn64_struct(image.big_endian)
    data = dynamic.data()
    return {tag for tag, _ in entry.iter_unpack(data[: len(data) - len(data) % entry.size])}


def _dynamic_symbol_names(image: ElfReader, link: int, indexes: list[int]) -> list[str]:
    """The names (without a version) of the symbols at ``indexes`` of the table at section
    ``link``; empty for an index past its end."""
    table = read_symbol_table(image, image.sections()[link])
    if table is None:  # the caller found a SHT_DYNSYM section there
        raise ElfError("is no symbol table", path=image.path, section=image.sections()[link].name)
    offsets, past = table.columns["name"], len(table.strings)  # past the end: ""
    named = [offsets[i] if i < len(offsets) else past for i in indexes]
    try:
        return symbol_names(table.strings, named, section=table.table)
    except ElfError as error:
        raise error.at(path=image.path) from None
