"""Golden tests: every .sframe of the corpus against the GNU tools' own text.

The corpus files were made by GNU as/ld 2.40, 2.44 and 2.47; beside each is the exact output of
objdump --sframe 2.47 (V2/V3) or readelf --sframe 2.40 (V1).  The text is parsed into values
and compared with the decoded model: header, functions, and every row's rules.  Every section
must also re-encode to its exact bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from conftest import corpus_files
from pysframe import Abi, FdeType, PauthKey, PcType, RuleKind, SFrameSection, Version
from sframe_text import cfa_cell, parse_dump, reg_cell

_ARCH = {
    Abi.AMD64_ENDIAN_LITTLE: "x86_64",
    Abi.AARCH64_ENDIAN_LITTLE: "aarch64",
    Abi.AARCH64_ENDIAN_BIG: "aarch64",
    Abi.S390X_ENDIAN_BIG: "s390x",
}


def _load(path: Path) -> tuple[SFrameSection, bytes, bool]:
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        section = elf.get_section_by_name(".sframe")
        data = section.data()
        return SFrameSection.from_bytes(data, section["sh_addr"]), data, elf["e_type"] == "ET_REL"


def _reference_text(path: Path) -> Path:
    texts = sorted(path.parent.glob(path.name + ".objdump-2.47.txt")) or sorted(
        path.parent.glob(path.name + ".readelf-2.40.txt")
    )
    assert texts, f"no GNU dump beside {path}"
    return texts[0]


CORPUS = corpus_files()
IDS = [f"{p.parent.parent.name}/{p.parent.name}/{p.name}" for p in CORPUS]


def test_corpus_is_complete() -> None:
    # 27 ELF files across three architectures and three versions.
    assert len(CORPUS) == 27
    assert {p.parent.name for p in CORPUS} == {"v1", "v2", "v3"}


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_round_trip_bytes(path: Path) -> None:
    section, data, _ = _load(path)
    assert section.to_bytes() == data


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_matches_gnu_text(path: Path) -> None:
    section, _, relocatable = _load(path)
    text = parse_dump(_reference_text(path))
    arch = _ARCH[section.abi]
    header = section.header
    assert int(header.version) == text.version
    assert header.num_fdes == text.num_fdes == len(section)
    assert header.num_fres == text.num_fres == section.num_rows
    # objdump 2.47 prints the fixed RA offset line only when it is set.
    if text.version >= 2:
        assert (header.cfa_fixed_ra_offset or None) == text.fixed_ra
    flag_names = {f"SFRAME_F_{flag.name}" for flag in header.flags} or {"NONE"}
    assert set(text.flags) == flag_names
    assert len(text.functions) == len(section)
    for function, expected in zip(section, text.functions, strict=True):
        _compare_function(section, function, expected, arch, relocatable)


def _compare_function(section, function, expected, arch, relocatable) -> None:  # type: ignore[no-untyped-def]
    assert function.size == expected.size
    assert (function.pc_type is PcType.MASK) == expected.pcmask
    assert ("S" in expected.attrs) == function.signal_frame
    assert ("F" in expected.attrs) == (function.fde_type is FdeType.FLEX)
    assert expected.pauth_b == (function.pauth_key is PauthKey.B)
    if not relocatable:
        # Linked files: absolute addresses as printed.  (Objects are dumped by objdump after
        # applying .rela.sframe, which is the ELF layer's job; there only offsets compare.)
        assert function.start == expected.pc
    rows = function.rows
    assert len(rows) == len(expected.rows)
    for row, text_row in zip(rows, expected.rows, strict=True):
        printed_offset = text_row.start if expected.pcmask else text_row.start - expected.pc
        assert row.start_offset == printed_offset % (1 << 64)
        if text_row.cfa is None:  # "RA undefined"
            assert row.ra.kind is RuleKind.UNDEFINED and row.cfa is None
            continue
        reg, offset, deref = cfa_cell(text_row.cfa, arch)
        assert row.cfa is not None
        assert (row.cfa.reg, row.cfa.offset, row.cfa.deref) == (reg, offset, deref)
        _compare_rule(row.fp, text_row.fp, arch, section.version)
        signed = reg_cell(text_row.ra, arch)[3]
        assert row.mangled_ra == signed
        _compare_rule(row.ra, text_row.ra, arch, section.version)


def _compare_rule(rule, cell, arch, version) -> None:  # type: ignore[no-untyped-def]
    kind, offset, reg, _ = reg_cell(cell, arch)
    if version is Version.V1 and kind == "untracked" and rule.kind is RuleKind.FIXED:
        # readelf 2.40 prints the AMD64 RA, fixed at CFA-8 by the header, as "u": its dumper
        # has no "f" cell (binutils 2.40 libsframe/sframe-dump.c).
        return
    assert rule.kind.value == kind
    if kind == "saved":
        assert (rule.offset, rule.reg) == (offset, reg)
