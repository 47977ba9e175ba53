"""format.encode, the one section writer: assemble_section rebuilds every corpus section from its
FDE fields and raw FRE blocks, and every field its layout cannot hold is an EncodeError that
names the first function (in FDE order) with the problem."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import corpus_files
from pysframe.elf.reader import ElfReader
from pysframe.errors import EncodeError
from pysframe.format.constants import Abi, Flags, Version
from pysframe.format.encode import FdeColumns, SectionSpec, assemble_section
from pysframe.format.layout import V3_ATTR_SIZE
from pysframe.format.section import SFrameSection
from pysframe.sources import load_sframe

CORPUS = corpus_files()
IDS = [f"{p.parent.parent.name}/{p.parent.name}/{p.name}" for p in CORPUS]


def _section(path: Path) -> tuple[SFrameSection, bytes]:
    with ElfReader.open(str(path)) as image:
        section = load_sframe(image)
    return section, bytes(section.data)


def _columns(section: SFrameSection) -> FdeColumns:
    functions = list(section)
    return FdeColumns(
        [f.start for f in functions],
        [f.size for f in functions],
        [f.num_rows for f in functions],
        [f.info for f in functions],
        [f.info2 for f in functions],
        [f.rep_size for f in functions],
        [f.padding for f in functions],
    )


def _raw_blocks(section: SFrameSection, data: bytes) -> tuple[list[bytes], list[int]]:
    """Each function's FRE bytes as stored (without the V3 attribute record), and the order
    of the blocks in the FRE sub-section."""
    header = section.header
    fres_at = header.size + header.fre_offset
    functions = list(section)
    order = sorted(range(len(functions)), key=lambda i: (functions[i].fre_offset, i))
    skip = V3_ATTR_SIZE if section.version is Version.V3 else 0
    blocks = [b""] * len(functions)
    for k, position in enumerate(order):
        begin = functions[position].fre_offset + skip
        end = functions[order[k + 1]].fre_offset if k + 1 < len(order) else header.fre_len
        blocks[position] = data[fres_at + begin : fres_at + end]
    return blocks, order


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_assemble_rebuilds_every_corpus_section(path: Path) -> None:
    section, data = _section(path)
    blocks, order = _raw_blocks(section, data)
    assert assemble_section(section.spec(), _columns(section), blocks, order) == data
    assert section.to_bytes() == data


def _spec(version: Version, **changes: object) -> SectionSpec:
    spec = SectionSpec(version, Abi.AMD64_ENDIAN_LITTLE, Flags.FDE_SORTED, 0, -8, False)
    return replace(spec, **changes)  # type: ignore[arg-type]


def _two(**second: int) -> FdeColumns:
    """Two one-FRE functions; ``second`` overrides fields of the second."""
    columns = {
        "start": [0x1000, 0x2000],
        "size": [16, 16],
        "num_fres": [1, 1],
        "info": [0, 0],
        "info2": [0, 0],
        "rep_size": [0, 0],
        "padding": [0, 0],
    }
    for name, value in second.items():
        columns[name][1] = value
    return FdeColumns(**columns)


BLOCKS = [b"\x00\x03\x08", b"\x00\x03\x08"]


@pytest.mark.parametrize(
    ("version", "second", "message"),
    [
        (Version.V2, {"size": 1 << 32}, "function 1: size 4294967296 out of range"),
        (Version.V2, {"size": -1}, "function 1: size -1 out of range"),
        (Version.V3, {"rep_size": 256}, "function 1: rep_size 256 out of range"),
        (Version.V1, {"rep_size": 16}, "function 1: SFrame V1 has no rep_size field"),
        (Version.V2, {"info": 0x100}, "function 1: info 256 is not a byte"),
        (Version.V3, {"info2": -1}, "function 1: info2 -1 is not a byte"),
        (Version.V2, {"info": 0x80}, "function 1: FLEX FDEs and signal frames need SFrame V3"),
        (Version.V1, {"info2": 1}, "function 1: FLEX FDEs and signal frames need SFrame V3"),
        (Version.V3, {"num_fres": 0x10000}, "function 1: 65536 FREs exceed the V3 limit of 65535"),
        (Version.V2, {"padding": 0x10000}, "function 1: padding 65536 out of range"),
        (
            Version.V2,
            {"start": 1 << 40},
            "function 1 at 0x10000000000: start is 0x10000000000 bytes from the section, beyond "
            "the 32-bit field of SFrame V2",
        ),
        (Version.V3, {"start": 1 << 70}, None),  # any start fits V3's 64 bits (modulo 2**64)
    ],
)
def test_fields_beyond_their_layout(
    version: Version, second: dict[str, int], message: str | None
) -> None:
    if message is None:
        assert assemble_section(_spec(version), _two(**second), BLOCKS)
        return
    with pytest.raises(EncodeError) as raised:
        assemble_section(_spec(version), _two(**second), BLOCKS)
    assert str(raised.value) == message


def test_the_first_function_with_a_problem_is_named() -> None:
    columns = _two(size=1 << 32)._replace(start=[1 << 40, 0x2000])
    with pytest.raises(EncodeError, match=r"^function 0 at 0x10000000000: start is"):
        assemble_section(_spec(Version.V2), columns, BLOCKS)


def test_section_level_checks() -> None:
    with pytest.raises(EncodeError, match="one value per FRE block"):
        assemble_section(_spec(Version.V3), _two(), BLOCKS[:1])
    with pytest.raises(EncodeError, match="fre_block_order must list every function"):
        assemble_section(_spec(Version.V3), _two(), BLOCKS, [0, 0])
    with pytest.raises(EncodeError, match="cfa_fixed_ra_offset -200 does not fit a signed byte"):
        assemble_section(_spec(Version.V3, cfa_fixed_ra_offset=-200), _two(), BLOCKS)
    with pytest.raises(EncodeError, match=r"flags 0x2 are not defined in SFrame V3"):
        assemble_section(_spec(Version.V3, flags=Flags.FRAME_POINTER), _two(), BLOCKS)


def test_pcrel_starts_are_relative_to_each_field() -> None:
    spec = _spec(Version.V3, flags=Flags.FDE_SORTED | Flags.FDE_FUNC_START_PCREL)
    spec = replace(spec, section_address=0x9000)
    data = assemble_section(spec, _two(), BLOCKS)
    section = SFrameSection.from_bytes(data, 0x9000)
    assert [f.start for f in section] == [0x1000, 0x2000]
    assert [f.rows[0].cfa.offset for f in section] == [8, 8]
