"""ELF files whose headers claim more than the file holds: refused before anything is read or
allocated, with one line naming the file.

Each case is a copy of a corpus program with one header field changed (offsets from the
gABI's Elf64_Ehdr and Elf64_Shdr); the commands run in a subprocess under a memory limit, so
an attempt to allocate what a header claims fails the test instead of the machine.
"""

from __future__ import annotations

import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from conftest import CORPUS
from pysframe.elf.reader import ElfReader
from pysframe.errors import ElfError

APP = CORPUS / "x86_64/v3/app"
#: Elf64_Ehdr: e_shoff at 40, e_shentsize at 58, e_shnum at 60.
E_SHOFF, E_SHNUM = 40, 60
#: Elf64_Shdr: sh_flags at 8, sh_offset at 24, sh_size at 32; 64 bytes each.
SH_FLAGS, SH_OFFSET, SH_SIZE, SHDR = 8, 24, 32, 64


def _section_header(data: bytes, name: str) -> int:
    """File offset of the section header of ``name`` in the corpus program."""
    with ElfReader.open(str(APP)) as image:
        section = image.section(name)
        assert section is not None
        index = section.index
    (shoff,) = struct.unpack_from("<Q", data, E_SHOFF)
    return shoff + index * SHDR


def _patched(tmp_path: Path, name: str, patches: list[tuple[int, str, int]]) -> Path:
    data = bytearray(APP.read_bytes())
    for offset, code, value in patches:
        struct.pack_into(code, data, offset, value)
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return path


def huge_sframe(tmp_path: Path) -> Path:
    header = _section_header(APP.read_bytes(), ".sframe")
    return _patched(tmp_path, "huge-sframe", [(header + SH_SIZE, "<Q", 1 << 40)])


def far_sframe(tmp_path: Path) -> Path:
    header = _section_header(APP.read_bytes(), ".sframe")
    return _patched(tmp_path, "far-sframe", [(header + SH_OFFSET, "<Q", (1 << 63) - 16)])


def many_sections(tmp_path: Path) -> Path:
    """e_shnum 0: section 0's sh_size counts the sections (gABI), here 2**40 of them."""
    data = APP.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, E_SHOFF)
    return _patched(tmp_path, "many", [(E_SHNUM, "<H", 0), (shoff + SH_SIZE, "<Q", 1 << 40)])


def _run(arguments: list[str]) -> subprocess.CompletedProcess[str]:
    def limit() -> None:  # 1 GiB of address space: far below what the headers claim
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-m", "pysframe", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=limit,
    )


CASES = [huge_sframe, far_sframe, many_sections]
COMMANDS = [["dump"], ["info"], ["check"], ["lookup", "FILE", "0x1139"], ["stats"], ["verify"]]


@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_commands_give_one_line(tmp_path: Path, make: object, command: list[str]) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    arguments = [str(path) if word == "FILE" else word for word in command]
    if "FILE" not in command:
        arguments.append(str(path))
    done = _run(arguments)
    assert done.returncode in (1, 2), done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert f"{path}" in done.stderr and "run past the end of the file" in done.stderr


def test_library_raises_elf_error(tmp_path: Path) -> None:
    for make in CASES:
        path = make(tmp_path)
        with pytest.raises(ElfError, match="run past the end of the file"), ElfReader.open(
            str(path)
        ) as image:
            section = image.section(".sframe")
            assert section is not None
            section.data()


def _compressed(tmp_path: Path, claimed: int, payload: bytes) -> Path:
    """The corpus program with .sframe turned into a SHF_COMPRESSED section (Elf64_Chdr:
    ch_type 1 zlib, ch_size, ch_addralign) holding ``payload`` compressed, appended."""
    data = bytearray(APP.read_bytes())
    header = _section_header(bytes(data), ".sframe")
    body = struct.pack("<IIQQ", 1, 0, claimed, 8) + zlib.compress(payload, 9)
    offset = len(data)
    data += body
    (flags,) = struct.unpack_from("<Q", data, header + SH_FLAGS)
    struct.pack_into("<Q", data, header + SH_FLAGS, flags | 0x800)
    struct.pack_into("<Q", data, header + SH_OFFSET, offset)
    struct.pack_into("<Q", data, header + SH_SIZE, len(body))
    path = tmp_path / "compressed"
    path.write_bytes(bytes(data))
    return path


def test_compressed_section_reads_back(tmp_path: Path) -> None:
    with ElfReader.open(str(APP)) as image:
        section = image.section(".sframe")
        assert section is not None
        original = section.data()
    path = _compressed(tmp_path, len(original), original)
    with ElfReader.open(str(path)) as image:
        section = image.section(".sframe")
        assert section is not None and section.data() == original


def test_decompression_bomb_is_refused(tmp_path: Path) -> None:
    # 400 MB of zeros compress to about 400 KB: above 64 times that plus 1 MiB.
    bomb = _compressed(tmp_path, 400_000_000, bytes(400_000_000))
    assert bomb.stat().st_size < 1_000_000
    with ElfReader.open(str(bomb)) as image:
        section = image.section(".sframe")
        assert section is not None
        with pytest.raises(ElfError, match=r"more than the .* allowed"):
            section.data()
    done = _run(["dump", str(bomb)])
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr


def test_decompressed_size_must_match_the_header(tmp_path: Path) -> None:
    lying = _compressed(tmp_path, 1000, bytes(5000))
    with ElfReader.open(str(lying)) as image:
        section = image.section(".sframe")
        assert section is not None
        with pytest.raises(ElfError, match="decompresses to 1001 bytes, its header says 1000"):
            section.data()
