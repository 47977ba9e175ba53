"""Fuzzing beyond the section: ELF files and DWARF CFI (see :mod:`pysframe.tools.fuzz`).

Two more targets for :func:`pysframe.tools.fuzz.check_input` and its random engine, with the
same invariants (only SFrameError escapes, bounded time, memory within a multiple of the input):

* ``elf``: an ELF file read in memory as the commands read files: headers, section and program
  header tables, every section's contents (compressed ones included), notes and build-id, the
  SFrame section found, relocated and decoded, validation with the ELF-level rules, symbols,
  and SFrame generated from the file's CFI.  Mutations change the ELF header, section and
  program header fields (to boundary values), bytes anywhere, and the file's length.
* ``cfi``: ``.eh_frame`` (and ``.debug_frame``) bytes given to the generator and to the CFI
  interpreter of ``verify``.  Mutations change bytes (CFA opcodes and LEB128 operands
  included), record lengths, and splice records.

Seeds come from the test corpus: its smaller ELF files whole, and their ``.eh_frame`` sections.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from ..elf.layout import EHDR_SIZE, EI_CLASS, EI_DATA, ELFCLASS64, ELFDATA2MSB
from ..elf.reader import ElfReader, is_elf_file
from ..elf.sframe import ElfSFrame, find_sframe
from ..elf.symbols import read_function_symbols
from ..errors import SFrameError
from ..format.constants import Abi
from ..format.section import SFrameSection

#: Corpus files up to this size are ELF seeds (bigger ones make each input slow).
MAX_ELF_SEED = 64 << 10
CORPUS_DIR = Path(__file__).resolve().parents[3] / "tests" / "data" / "corpus"

#: Bytes worth trying in a CFA program: nop, def_cfa, def_cfa_offset, GNU_args_size, advance_loc
#: 0 and 1, offset r0 and r1, restore r0, and LEB128 continuation bytes.
_CFI_BYTES = (0x00, 0x0C, 0x0E, 0x2E, 0x40, 0x41, 0x80, 0x81, 0xC0, 0xFF)
_BOUNDARY = (0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 40, (1 << 63) - 1,
             (1 << 64) - 1)  # fmt: skip


# -- targets ------------------------------------------------------------------------------------


def exercise_elf(data: bytes) -> None:
    """Read ``data`` as an ELF file the ways the commands do."""
    from ..generate import generate_from_elf
    from .validate import validate_elf

    try:
        image = ElfReader.from_bytes("fuzz.elf", data)
    except SFrameError:
        return
    with image:
        for step in (
            image.sections,
            image.segments,
            lambda: list(image.notes()),
            image.build_id,
            lambda: read_function_symbols(image, ".symtab"),
            lambda: read_function_symbols(image, ".dynsym"),
            image.code_bytes,
        ):
            _quietly(step)
        sections = _quietly(image.sections)
        for one in sections if isinstance(sections, list) else []:
            _quietly(one.data)
        found = _quietly(lambda: find_sframe(image))
        if isinstance(found, ElfSFrame):
            section = _quietly(lambda: found.decode(True))
            if isinstance(section, SFrameSection):
                _quietly(lambda: [function.rows for function in section])
        _quietly(lambda: validate_elf(image))
        _quietly(lambda: generate_from_elf(image))


def exercise_cfi(data: bytes) -> None:
    """Generate SFrame from ``data`` as ``.eh_frame`` and as ``.debug_frame``."""
    from ..generate import generate_from_eh_frame

    for debug_frame in (False, True):
        for abi in (Abi.AMD64_ENDIAN_LITTLE, Abi.AARCH64_ENDIAN_LITTLE):
            _quietly(
                lambda a=abi, d=debug_frame: generate_from_eh_frame(  # type: ignore[misc]
                    data, 0x1000, a, debug_frame=d
                )
            )


def _quietly(step: Callable[[], object]) -> object | None:
    """``step()``, or None when it raises SFrameError (the only error allowed)."""
    try:
        return step()
    except SFrameError:
        return None


# -- seeds --------------------------------------------------------------------------------------


def elf_seeds(corpus: Path | None = None) -> list[bytes]:
    """The corpus's ELF files of at most :data:`MAX_ELF_SEED` bytes."""
    folder = CORPUS_DIR if corpus is None else corpus
    seeds = []
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file() and path.stat().st_size <= MAX_ELF_SEED and is_elf_file(path):
            seeds.append(path.read_bytes())
    return seeds


def cfi_seeds(corpus: Path | None = None) -> list[bytes]:
    """The ``.eh_frame`` sections of the corpus's ELF files (distinct ones)."""
    seeds: dict[bytes, None] = {}
    for data in elf_seeds(corpus):
        with ElfReader.from_bytes("seed", data) as image:
            section = image.section(".eh_frame")
            if section is not None and section.size:
                seeds[section.data()] = None
    return list(seeds)


# -- mutations ------------------------------------------------------------------------------------


def mutate_elf(data: bytes, rng: random.Random, seeds: Sequence[bytes]) -> bytes:
    """One structure-aware change of an ELF file."""
    out = bytearray(data)
    fields = _elf_fields(data)
    choice = rng.random()
    if fields and choice < 0.6:
        at, width = rng.choice(fields)
        value = rng.choice(_BOUNDARY) if rng.random() < 0.7 else rng.getrandbits(8 * width)
        if rng.random() < 0.3:  # nearby: off by a little
            value = int.from_bytes(out[at : at + width], _order(data)) + rng.randint(-64, 64)
        out[at : at + width] = (value % (1 << (8 * width))).to_bytes(width, _order(data))
    elif choice < 0.85 and out:
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.getrandbits(8)
    elif choice < 0.95 and out:
        del out[rng.randrange(len(out)) :]
    else:
        other = rng.choice(seeds)
        at = rng.randrange(len(out) + 1)
        start = rng.randrange(len(other) + 1)
        out[at : at + 256] = other[start : start + 256]
    return bytes(out)


def mutate_cfi(data: bytes, rng: random.Random, seeds: Sequence[bytes]) -> bytes:
    """One change of ``.eh_frame`` bytes: opcodes, LEB128 runs, lengths, splices."""
    out = bytearray(data)
    choice = rng.random()
    if choice < 0.5 and out:
        for _ in range(rng.randint(1, 6)):
            out[rng.randrange(len(out))] = rng.choice((*_CFI_BYTES, rng.getrandbits(8)))
    elif choice < 0.65 and out:
        at = rng.randrange(len(out))
        out[at:at] = bytes([0xFF if rng.random() < 0.5 else 0x80]) * rng.randint(1, 64)
    elif choice < 0.8 and len(out) >= 4:
        at = rng.randrange(0, len(out) - 3) & ~3
        out[at : at + 4] = struct.pack("<I", rng.choice(_BOUNDARY) % (1 << 32))
    elif choice < 0.9 and out:
        del out[rng.randrange(len(out)) :]
    else:
        other = rng.choice(seeds)
        start = rng.randrange(len(other) + 1)
        out += other[start : start + rng.randint(8, 512)]
    return bytes(out)


def _order(data: bytes) -> Literal["big", "little"]:
    return "big" if len(data) > EI_DATA and data[EI_DATA] == ELFDATA2MSB else "little"


def _elf_fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of the ELF header's fields and of the first section and program
    headers' fields (gABI layouts, 32- or 64-bit)."""
    if len(data) < EHDR_SIZE[32] or data[:4] != b"\x7fELF":
        return []
    wide = data[EI_CLASS] == ELFCLASS64
    order = "<" if _order(data) == "little" else ">"
    address = 8 if wide else 4
    header = [(16, 2), (18, 2), (24, address), (24 + address, address), (24 + 2 * address, address)]
    tail = 24 + 3 * address + 4
    header += [(tail + 2 * i, 2) for i in range(6)]  # e_ehsize ... e_shstrndx
    if len(data) < tail + 12:
        return header
    phoff, shoff = struct.unpack_from(order + ("QQ" if wide else "II"), data, 24 + address)
    phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", data, tail + 2)
    fields = list(header)
    section_fields = [4, 4, address, address, address, address, 4, 4, address, address]
    segment_fields = [4, 4, 8, 8, 8, 8, 8, 8] if wide else [4] * 8
    for base, count, size, widths in (
        (shoff, shnum, shentsize, section_fields),
        (phoff, phnum, phentsize, segment_fields),
    ):
        for index in range(min(count, 48)):
            at = base + index * size
            for width in widths:
                if at + width <= len(data):
                    fields.append((at, width))
                at += width
    return fields


TARGETS: dict[str, tuple[Callable[[bytes], None], Callable[..., bytes], Callable[[], list[bytes]]]]
TARGETS = {
    "elf": (exercise_elf, mutate_elf, elf_seeds),
    "cfi": (exercise_cfi, mutate_cfi, cfi_seeds),
}

__all__ = [
    "TARGETS",
    "cfi_seeds",
    "elf_seeds",
    "exercise_cfi",
    "exercise_elf",
    "mutate_cfi",
    "mutate_elf",
]
