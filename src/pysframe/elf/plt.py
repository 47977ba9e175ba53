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

import sys
from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from typing import TYPE_CHECKING

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
    SYM_NAMES,
    dyn64_struct,
    rela64_dtype,
    rela64_struct,
    sym_dtype,
    sym_struct,
)
from .reader import ElfReader, ElfSection
from .symbols import SymbolRecord, check_name_bytes, name_between, name_end, symbol_names

if TYPE_CHECKING:
    import numpy as np

#: The sections that hold PLT entries (GNU ld; .plt.bnd is the MPX name of .plt.sec).
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got", ".plt.bnd")
_ENDBR64 = b"\xf3\x0f\x1e\xfa"
_BND = 0xF2
_JMP_RIP = b"\xff\x25"  # jmp *disp32(%rip)
_LARL_R1 = b"\xc0\x10"  # larl %r1, PC + 2 * imm32


def plt_symbols(image: ElfReader, *, scalar: bool = False) -> list[SymbolRecord]:
    """The ``NAME@plt`` symbols of ``image``'s PLT entries (empty for other machines, and for
    files without section headers).  ``scalar``: read the relocations and dynamic symbols
    without numpy (the reference path, for callers that must start fast)."""
    if image.elfclass != 64:
        return []
    if image.machine == EM_X86_64:
        return _slot_symbols(image, _x86_64_slot, 16, scalar)
    if image.machine == EM_S390:
        return _slot_symbols(image, _s390x_slot, 32, scalar)
    if image.machine == EM_AARCH64:
        return _aarch64_symbols(image, scalar)
    return []


def _slot_symbols(
    image: ElfReader,
    slot_of: Callable[[bytes, int], int | None],
    default_size: int,
    scalar: bool,
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
    relocation_names = _relocation_names_scalar if scalar else _relocation_names
    for section in _dynamic_relocation_sections(image):
        names.update(relocation_names(image, section, {slot for _a, _s, slot in entries}))
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


def _aarch64_symbols(image: ElfReader, scalar: bool) -> list[SymbolRecord]:
    plt = image.section(".plt")
    relocations = image.section(".rela.plt")
    if plt is None or relocations is None or relocations not in _dynamic_relocation_sections(image):
        return []
    tags = _dynamic_tags(image)
    size = 24 if tags & {DT_AARCH64_BTI_PLT, DT_AARCH64_PAC_PLT} else 16
    relocation_names = _relocation_names_scalar if scalar else _relocation_names
    names = list(relocation_names(image, relocations).values())
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
    BFD gives the PLT entry whose slot it is, without ``@plt``."""
    import numpy as np

    rela = rela64_dtype(image.big_endian)
    data = section.data()
    entries = np.frombuffer(data, dtype=rela, count=len(data) // rela.itemsize)
    if slots is not None:
        entries = entries[np.isin(entries["offset"], np.array(sorted(slots), dtype=np.uint64))]
    if not len(entries):
        return {}
    symbols = _dynamic_symbol_names(image, section.link, entries["info"] >> np.uint64(32))
    return _entry_names(entries.tolist(), symbols)


def _relocation_names_scalar(
    image: ElfReader, section: ElfSection, slots: set[int] | None = None
) -> dict[int, str]:
    """:func:`_relocation_names` without numpy."""
    rela = rela64_struct(image.big_endian)
    data = section.data()
    count = len(data) // rela.size
    if image.big_endian == (sys.byteorder == "big"):
        # The machine's own byte order: the r_offset column straight from the bytes, and the
        # relocations of the slots asked for chosen without a Python step per relocation.
        offsets = memoryview(data)[: count * rela.size].cast("Q")[0::3].tolist()
        chosen: Iterable[int] = range(count)
        if slots is not None:
            chosen = compress(chosen, map(slots.__contains__, offsets))
        entries = [rela.unpack_from(data, i * rela.size) for i in chosen]
    else:
        entries = [
            entry for entry in rela.iter_unpack(data[: count * rela.size])
            if slots is None or entry[0] in slots
        ]  # fmt: skip
    if not entries:
        return {}
    indexes = [info >> 32 for _, info, _ in entries]
    return _entry_names(entries, _dynamic_symbol_names_scalar(image, section.link, indexes))


def _entry_names(entries: Sequence[tuple[int, int, int]], symbols: Sequence[str]) -> dict[int, str]:
    """Per relocated address, in the relocations' order, the name BFD gives the PLT entry whose
    slot it is (the relocation's symbol, with its addend), without ``@plt``."""
    names: dict[int, str] = {}
    for (offset, info, addend), name in zip(entries, symbols, strict=True):
        if info >> 32:
            names[offset] = f"{name}+{addend:#x}" if addend else name
        else:
            names[offset] = f"*ABS*+{addend:#x}"
    return names


def _dynamic_tags(image: ElfReader) -> set[int]:
    """The tags of the ``.dynamic`` section's entries (a few dozen: read with struct)."""
    dynamic = image.section(".dynamic")
    if dynamic is None or dynamic.type != SHT_DYNAMIC:
        return set()
    entry = dyn64_struct(image.big_endian)
    data = dynamic.data()
    return {tag for tag, _ in entry.iter_unpack(data[: len(data) - len(data) % entry.size])}


def _dynamic_symbol_names(image: ElfReader, link: int, indexes: np.ndarray) -> list[str]:
    """The names (without a version) of the symbols at ``indexes`` of the table at section
    ``link``; empty for an index past its end (read in bulk: :func:`symbol_names`)."""
    import numpy as np

    table, strings_section = _dynamic_tables(image, link)
    dtype = sym_dtype(image.elfclass, image.big_endian)
    data = table.data()
    entries = np.frombuffer(data, dtype=dtype, count=len(data) // dtype.itemsize)
    strings = strings_section.data()
    inside = indexes < len(entries)
    offsets = np.full(len(indexes), len(strings), dtype=np.int64)  # past the end: ""
    offsets[inside] = entries["name"][indexes[inside].astype(np.int64)]
    try:
        return symbol_names(strings, offsets, section=strings_section.name)
    except ElfError as error:
        raise error.at(path=image.path) from None


def _dynamic_tables(image: ElfReader, link: int) -> tuple[ElfSection, ElfSection]:
    """The symbol table at section ``link`` and its string table; ElfError when it links to
    no section."""
    sections = image.sections()
    table = sections[link]
    if not 0 < table.link < len(sections):
        raise ElfError(
            f"links to no string table ({table.link})", path=image.path, section=table.name
        )
    return table, sections[table.link]


def _dynamic_symbol_names_scalar(image: ElfReader, link: int, indexes: Sequence[int]) -> list[str]:
    """:func:`_dynamic_symbol_names` without numpy (names bounded by
    :func:`~pysframe.elf.symbols.check_name_bytes`)."""
    table, strings_section = _dynamic_tables(image, link)
    entry = sym_struct(image.elfclass, image.big_endian)
    name_at = SYM_NAMES[image.elfclass].index("name")
    data = table.data()
    count = len(data) // entry.size
    strings = strings_section.data()
    offsets = [
        entry.unpack_from(data, index * entry.size)[name_at] if index < count else len(strings)
        for index in indexes
    ]  # past the end: ""
    try:
        check_name_bytes(strings, offsets, section=strings_section.name)
    except ElfError as error:
        raise error.at(path=image.path) from None
    return [name_between(strings, start, name_end(strings, start)) for start in offsets]
