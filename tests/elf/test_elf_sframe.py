"""pysframe.elf.sframe: which section is SFrame data, how it is loaded, and that its bytes are
read from the file once."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from conftest import CORPUS
from elf_build import RawFunction, Sec, build_elf, fre_info, sframe_bytes
from pysframe.elf.layout import SHF_ALLOC, SHT_PROGBITS
from pysframe.elf.reader import ElfReader
from pysframe.elf.relocation import relocated, relocations_for
from pysframe.elf.sframe import find_sframe
from pysframe.errors import ElfError
from pysframe.format.constants import SHT_GNU_SFRAME, Version
from pysframe.sources import load_sframe, locate_sframe


class CountingFile(io.BytesIO):
    """A file in memory that records the (offset, size) of every read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads: list[tuple[int, int]] = []

    def read(self, size: int | None = -1) -> bytes:
        at = self.tell()
        data = super().read(size)
        self.reads.append((at, len(data)))
        return data

    def reads_of(self, offset: int, size: int) -> int:
        """How many reads fetched bytes of [offset, offset + size)."""
        return sum(1 for at, n in self.reads if n and at < offset + size and offset < at + n)


def _counted(path: Path) -> tuple[ElfReader, CountingFile]:
    file = CountingFile(path.read_bytes())
    return ElfReader(str(path), file), file


@pytest.mark.parametrize(
    "name",
    ["x86_64/v3/frames.o", "x86_64/v1/frames.o", "x86_64/v2/app", "s390x/v3/frames.o"],
)
def test_a_dump_reads_the_section_once(name: str) -> None:
    """Everything a dump asks of the section -- objdump's type rule, the version that picks
    the framing, the relocated contents, the decoded section -- costs one read of its bytes."""
    path = CORPUS / name
    image, file = _counted(path)
    with image:
        found = find_sframe(image)
        assert found is not None
        section = found.section
        assert file.reads_of(section.offset, section.size) == 0
        assert found.is_sframe_data()
        assert found.version in (Version.V1, Version.V2, Version.V3)
        relocated = found.contents()
        decoded = found.decode()
        assert found.decode(relocate=False).data == found.stored
        assert decoded.data == relocated
        if image.is_relocatable and found.version is not Version.V1:
            assert relocated != found.stored  # the relocations were applied
        assert file.reads_of(section.offset, section.size) == 1
        # The counter sees every read: reading the section again is counted.
        section.data()
        assert file.reads_of(section.offset, section.size) == 2


def test_v1_sections_are_not_relocated() -> None:
    """readelf 2.40 showed V1 objects' fields as stored; so does the loader."""
    with ElfReader.open(str(CORPUS / "x86_64/v1/frames.o")) as image:
        found = locate_sframe(image)
        assert found.version is Version.V1
        assert relocations_for(image, found.section)
        assert found.contents() == found.stored
        assert relocated(image, found.section, found.stored) != found.stored


def _v3_section() -> bytes:
    function = RawFunction(0x1000 - 28, 16, rows=[(0, fre_info(1), (8,))])
    return sframe_bytes(3, 3, [function], flags=5, fixed_ra=-8)


@pytest.mark.parametrize(
    ("name", "sh_type", "asked", "is_sframe"),
    [
        (".sframe", SHT_GNU_SFRAME, None, True),
        (".sframe", SHT_PROGBITS, None, True),
        (".sframe", SHT_PROGBITS, ".sframe", True),
        (".other", SHT_PROGBITS, ".other", False),
        (".other", SHT_GNU_SFRAME, ".other", True),
        (".sframe", 7, None, False),  # SHT_NOTE
    ],
)
def test_objdumps_rule_for_sframe_data(
    tmp_path: Path, name: str, sh_type: int, asked: str | None, is_sframe: bool
) -> None:
    path = tmp_path / "file"
    path.write_bytes(build_elf([Sec(name, sh_type, _v3_section(), flags=SHF_ALLOC)], e_type=3))
    with ElfReader.open(str(path)) as image:
        found = find_sframe(image, asked)
        assert found is not None and found.name == name
        assert found.is_sframe_data(asked) is is_sframe


def test_no_section_names_the_file_and_the_section(tmp_path: Path) -> None:
    path = tmp_path / "plain"
    path.write_bytes(build_elf([Sec(".text", SHT_PROGBITS, b"\xc3", flags=6)]))
    with ElfReader.open(str(path)) as image:
        assert find_sframe(image) is None
        with pytest.raises(ElfError, match=rf"^{path}: no \.sframe section$"):
            load_sframe(image)
        with pytest.raises(ElfError, match=rf"^{path}: no \.sfrm section$"):
            locate_sframe(image, ".sfrm")
