"""Every sub-command on damaged copies of a real program: one ``pysframe: FILE: ...`` line at
most, exit 0 or 1, never a traceback or an internal error.

The copies are the corpus program (GNU as/ld 2.47, with .sframe) and the object it was linked
from, each damaged one way: cut short at the places where a reader goes next (the ELF header,
the program and section header tables, the SFrame section), an ELF header field or a section
or program header field set to a value no linker writes (offsets and sizes past the end of the
file or of the address space, counts, entry sizes, names, types, the compressed flag).  Field
offsets are the gABI's Elf64_Ehdr, Elf64_Phdr and Elf64_Shdr.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import CORPUS
from pysframe.cli import main
from pysframe.elf.reader import ElfReader

PROGRAMS = [CORPUS / "x86_64/v3/app", CORPUS / "x86_64/v3/app.o"]

#: Elf64_Ehdr fields: (name, offset, struct code).
EHDR_FIELDS = [
    ("ei_class", 4, "B"),
    ("ei_data", 5, "B"),
    ("e_type", 16, "<H"),
    ("e_machine", 18, "<H"),
    ("e_phoff", 32, "<Q"),
    ("e_shoff", 40, "<Q"),
    ("e_phentsize", 54, "<H"),
    ("e_phnum", 56, "<H"),
    ("e_shentsize", 58, "<H"),
    ("e_shnum", 60, "<H"),
    ("e_shstrndx", 62, "<H"),
]
#: Elf64_Shdr fields.
SHDR_FIELDS = [
    ("sh_name", 0, "<I"),
    ("sh_type", 4, "<I"),
    ("sh_flags", 8, "<Q"),
    ("sh_addr", 16, "<Q"),
    ("sh_offset", 24, "<Q"),
    ("sh_size", 32, "<Q"),
    ("sh_link", 40, "<I"),
    ("sh_info", 44, "<I"),
    ("sh_entsize", 56, "<Q"),
]
#: Elf64_Phdr fields.
PHDR_FIELDS = [
    ("p_type", 0, "<I"),
    ("p_offset", 8, "<Q"),
    ("p_vaddr", 16, "<Q"),
    ("p_filesz", 32, "<Q"),
]
#: Values no linker writes, by struct code.
ODD_VALUES = {
    "B": [0, 3, 0xFF],
    "<H": [0, 1, 0xFFFF],
    "<I": [0, 8, 0xFFFFFFFF],  # 8: SHT_NOBITS as a type
    "<Q": [0, 1 << 40, (1 << 64) - 1],
}
#: The sections whose headers are damaged (the ones the commands read).
SECTIONS = [".sframe", ".rela.sframe", ".eh_frame", ".text", ".symtab", ".strtab", ".shstrtab"]
#: Set in sh_flags on top of the damage above: SHF_COMPRESSED with no compression header.
SHF_COMPRESSED = 0x800


def _patched(data: bytes, offset: int, code: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(code, out, offset, value)
    return bytes(out)


def _damaged(path: Path) -> Iterator[tuple[str, bytes]]:
    """Damaged copies of the ELF file ``path``, with a label each (the damages of its SFrame
    section only when it has one)."""
    data = path.read_bytes()
    with ElfReader.open(str(path)) as image:
        header = image.header
        sections = {s.name: s.index for s in image.sections()}
        sframe = image.section(".sframe")
    sframe_cuts = [] if sframe is None else [sframe.offset + at for at in (3, 40, sframe.size - 1)]
    for cut in sorted(
        {
            0,
            4,
            20,
            63,
            header.phoff + 30,
            header.shoff + 10,
            header.shoff + 64 * 3 + 7,
            *sframe_cuts,
            len(data) - 1,
        }
    ):
        if 0 <= cut < len(data):
            yield f"cut at {cut}", data[:cut]
    for name, offset, code in EHDR_FIELDS:
        for value in ODD_VALUES[code]:
            yield f"{name}={value:#x}", _patched(data, offset, code, value)
    for section in SECTIONS:
        if section not in sections:
            continue
        base = header.shoff + 64 * sections[section]
        for name, offset, code in SHDR_FIELDS:
            for value in ODD_VALUES[code]:
                yield f"{section} {name}={value:#x}", _patched(data, base + offset, code, value)
        (flags,) = struct.unpack_from("<Q", data, base + 8)
        yield f"{section} compressed", _patched(data, base + 8, "<Q", flags | SHF_COMPRESSED)
    for index in range(header.phnum):
        base = header.phoff + 56 * index
        for name, offset, code in PHDR_FIELDS:
            for value in ODD_VALUES[code][1:]:
                yield f"phdr {index} {name}={value:#x}", _patched(data, base + offset, code, value)
    # The section's own bytes: the magic and the header's counts.
    if sframe is None:
        return
    for at, byte in ((0, 0), (2, 9), (8, 0xFF), (12, 0xFF), (16, 0xFF)):
        out = bytearray(data)
        out[sframe.offset + at] = byte
        yield f".sframe byte {at}={byte:#x}", bytes(out)


COMMANDS = [
    ["dump"],
    ["dump", "--json"],
    ["info"],
    ["check"],
    ["lookup", "FILE", "0x1139"],
    ["stats"],
    ["verify"],
    ["generate", "FILE", "-o", "OUT"],
    ["generate", "FILE", "--inject", "-o", "OUT"],
    ["compact", "FILE", "-o", "OUT"],
    ["repair", "FILE", "-o", "OUT"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_damaged_copies_give_one_line(
    program: Path, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failures = []
    copies = 0
    for label, data in _damaged(program):
        copies += 1
        path = tmp_path / "damaged"
        path.write_bytes(data)
        out = tmp_path / "out"
        out.unlink(missing_ok=True)
        arguments = [
            str(path) if word == "FILE" else str(out) if word == "OUT" else word for word in command
        ]
        if "FILE" not in command:
            arguments.append(str(path))
        code = main(arguments)
        captured = capsys.readouterr()
        errors = [line for line in captured.err.splitlines() if line]
        problems = []
        if code not in (0, 1):
            problems.append(f"exit {code}")
        if "Traceback" in captured.err or "internal error" in captured.err:
            problems.append("traceback")
        not_ours = [e for e in errors if not e.startswith("pysframe: ")]
        failing = [e for e in errors if not e.startswith("pysframe: warning: ")]
        if not_ours:
            problems.append(f"lines not from pysframe: {not_ours[:2]}")
        # check and verify report what they find on stdout, each line naming the file; lookup
        # answers there that a PC has no row.
        reported = command[0] in ("check", "verify", "lookup") and not failing
        if reported and code == 1 and not captured.out.strip():
            problems.append("exit 1 with nothing said")
        if not reported and code == 1 and (len(failing) != 1 or str(path) not in failing[0]):
            problems.append(f"error lines {failing[:3]}")
        if code == 0 and failing:
            problems.append(f"exit 0 with error lines {failing[:2]}")
        if problems:
            failures.append(f"{label}: {'; '.join(problems)}")
    assert copies > 100
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} of {copies})"
