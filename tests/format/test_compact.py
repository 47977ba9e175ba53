"""Compaction (pysframe.format.compact): smaller sections with the same rules at every PC.

Every corpus section (GNU as and ld, V1 to V3, four ABIs) is compacted and compared with the
original PC by PC; each trick is shown on sections built for it; random sections (hypothesis)
keep their rules too.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compact_support import assert_same_rules
from conftest import corpus_files
from pysframe import Abi, CfaRule, RegRule, SFrameSection, Version
from pysframe.elf.reader import ElfReader
from pysframe.errors import EncodeError
from pysframe.format.builder import SFrameBuilder
from pysframe.format.compact import (
    NO_TRICKS,
    CompactOptions,
    check_same_rows,
    compact_section,
    safe_to_share,
)
from pysframe.format.constants import FdeType, FreType, PcType
from pysframe.format.decode import MAX_ROWS_PER_BYTE
from pysframe.format.findings import Severity
from pysframe.sources import load_sframe
from pysframe.tools.dump import section_text
from test_validate import v3

CORPUS = [p for p in corpus_files() if p.suffix != ".txt"]

SP8 = CfaRule(7, 8)
SP16 = CfaRule(7, 16)
FP_SAVED = RegRule.at_cfa(-16)


def _load(path: Path) -> tuple[SFrameSection, bool]:
    with ElfReader.open(str(path)) as image:
        return load_sframe(image), image.is_relocatable


def _errors(section: SFrameSection, relocatable: bool) -> set[str]:
    return {
        f.rule for f in section.validate(relocatable=relocatable) if f.severity is Severity.ERROR
    }


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: "/".join(p.parts[-3:]))
def test_corpus_sections_keep_their_rules(path: Path) -> None:
    section, relocatable = _load(path)
    compacted = compact_section(section)
    after = SFrameSection.from_bytes(compacted.data, section.section_address)
    assert compacted.size <= len(section.data)
    assert assert_same_rules(section, after) > 0
    # The dump (the text of objdump 2.47, or readelf 2.40 for V1) does not change.
    assert section_text(after) == section_text(section)
    # Writing the compacted section again gives its bytes: shared blocks are kept.
    assert after.to_bytes() == compacted.data
    assert _errors(after, relocatable) <= _errors(section, relocatable)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: "/".join(p.parts[-3:]))
def test_no_tricks_lays_a_gnu_section_out_byte_for_byte(path: Path) -> None:
    section, _ = _load(path)
    assert compact_section(section, NO_TRICKS).data == bytes(section.data)


def _two_alike(version: Version, second_size: int = 0x30) -> SFrameBuilder:
    """Two functions with the same rows, and a third with other rows (not a prefix of theirs)."""
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, version)
    for start, size in ((0x1000, 0x20), (0x1020, second_size)):
        function = builder.add_function(start, size)
        function.add_row(0, SP8).add_row(1, SP16, FP_SAVED).add_row(8, SP8)
    builder.add_function(0x1100, 0x10).add_row(0, SP16)
    return builder


@pytest.mark.parametrize("version", [Version.V2, Version.V3])
def test_functions_with_the_same_rows_share_one_block(version: Version) -> None:
    section = _two_alike(version).build()
    compacted = compact_section(section)
    after = SFrameSection.from_bytes(compacted.data)
    assert compacted.blocks == 2 and compacted.shared == 1
    assert after.table.fre_offset[0] == after.table.fre_offset[1]
    assert after.table.fre_offset[2] != after.table.fre_offset[0]
    # The shared block is written once: 3 FREs of 2 + 2 + 2 bytes and 1 word of 1 byte...
    block = 3 + 4 + 3  # sp+8; sp+16 with the FP word; sp+8
    record = 5 if version is Version.V3 else 0
    assert after.header.fre_len == (record + block) + (record + 3)
    assert after.header.num_fres == section.header.num_fres == 7
    assert_same_rules(section, after)
    unshared = compact_section(section, replace(CompactOptions(), share_blocks=False))
    assert unshared.size == compacted.size + record + block


def test_v2_shares_a_prefix_and_v3_does_not() -> None:
    for version, expected in ((Version.V2, 1), (Version.V3, 0)):
        builder = _two_alike(version)
        # A fourth function whose rows are the first two of the shared ones.
        builder.add_function(0x1200, 0x10).add_row(0, SP8).add_row(1, SP16, FP_SAVED)
        section = builder.build()
        compacted = compact_section(section)
        after = SFrameSection.from_bytes(compacted.data)
        assert compacted.prefixes == expected
        assert (after.table.fre_offset[3] == after.table.fre_offset[0]) == bool(expected)
        assert after.table.num_rows.tolist() == [3, 3, 1, 2]
        assert_same_rules(section, after)
        assert not _errors(after, False)


def test_start_addresses_narrowed_to_the_largest_start_offset() -> None:
    # A 600-byte function whose rows all start in its first 256 bytes: GNU as and the builder
    # give it 2-byte start addresses, its offsets fit one byte.
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3)
    builder.add_function(0x1000, 600).add_row(0, SP8).add_row(1, SP16).add_row(200, SP8)
    builder.add_function(0x1300, 600).add_row(0, SP8).add_row(300, SP16)
    section = builder.build()
    assert [f.fre_type for f in section] == [FreType.ADDR2, FreType.ADDR2]
    compacted = compact_section(section)
    after = SFrameSection.from_bytes(compacted.data)
    assert [f.fre_type for f in after] == [FreType.ADDR1, FreType.ADDR2]
    assert compacted.narrowed_functions == 1
    assert compacted.size == len(section.data) - 3
    assert_same_rules(section, after)


def test_data_words_narrowed_offsets_signed_control_words_unsigned() -> None:
    # Function 0: CFA = sp+8 in a 2-byte word (info 0x23: SP, 1 word, 2 bytes).
    # Function 1 (FLEX): CFA = r16+8, control word 0x81 (r16, reg_p) and offset 8 in 2-byte
    # words (info 0x24: 2 words, 2 bytes); 0x81 fits one unsigned byte, as gas sizes it.
    f0 = (0x1000, 0x20, bytes([0x00, 0x23, 0x08, 0x00]), 1, 0x00, 0x00)
    f1 = (0x1020, 0x20, bytes([0x00, 0x24, 0x81, 0x00, 0x08, 0x00]), 1, 0x00, 0x01)
    from test_validate import Fn

    data = v3([Fn(*f0[:4]), Fn(f1[0], f1[1], f1[2], f1[3], info2=f1[5])])
    section = SFrameSection.from_bytes(data)
    compacted = compact_section(section)
    after = SFrameSection.from_bytes(compacted.data)
    assert compacted.narrowed_forms == 2
    assert [row.word_size.size for f in after for row in f.rows] == [1, 1]
    assert [r.cfa for f in after for r in f.rows] == [CfaRule(7, 8), CfaRule(16, 8)]
    assert compacted.size == len(data) - 1 - 2
    assert_same_rules(section, after)
    assert section_text(after) == section_text(section)


def test_trailing_bytes_dropped() -> None:
    data = v3(trailing=bytes(6))
    section = SFrameSection.from_bytes(data)
    assert compact_section(section).size == len(data) - 6
    assert compact_section(section, NO_TRICKS).data == data


def test_a_changed_row_is_caught() -> None:
    section = _two_alike(Version.V3).build()
    other = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3)
    for start, size in ((0x1000, 0x20), (0x1020, 0x30)):
        other.add_function(start, size).add_row(0, SP8).add_row(1, SP16, FP_SAVED).add_row(9, SP8)
    other.add_function(0x1100, 0x10).add_row(0, SP16)
    with pytest.raises(EncodeError, match="changed FRE 2 of function 0"):
        check_same_rows(section, other.build())
    fewer = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3)
    fewer.add_function(0x1000, 0x20).add_row(0, SP8)
    with pytest.raises(EncodeError, match="changed the functions"):
        check_same_rows(section, fewer.build())


def test_big_endian_sections_are_not_safe_to_share() -> None:
    s390x = SFrameBuilder(Abi.S390X_ENDIAN_BIG, Version.V3)
    s390x.add_function(0x1000, 0x20).add_row(0, CfaRule(15, 160))
    assert not safe_to_share(s390x.build())
    assert safe_to_share(_two_alike(Version.V3).build())


def test_compacted_sections_stay_far_below_the_decoder_bound() -> None:
    # The decoder refuses more than MAX_ROWS_PER_BYTE FREs per byte of a section; compacted
    # sections of real code have a small fraction of that.
    for path in CORPUS:
        section, _ = _load(path)
        compacted = compact_section(section)
        assert section.num_rows < compacted.size * MAX_ROWS_PER_BYTE / 4


# -- random sections ----------------------------------------------------------------------------

#: A few row shapes, so that random functions often share blocks or prefixes.
_RULES = [
    (SP8, RegRule.untracked()),
    (SP16, RegRule.untracked()),
    (SP16, FP_SAVED),
    (CfaRule(6, 16), FP_SAVED),
    (CfaRule(7, 200), FP_SAVED),
    (CfaRule(7, 40000), RegRule.untracked()),
]


@st.composite
def _sections(draw: st.DrawFn) -> SFrameSection:
    version = draw(st.sampled_from([Version.V2, Version.V3]))
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, version)
    address = 0x10000
    for _ in range(draw(st.integers(1, 12))):
        size = draw(st.sampled_from([4, 16, 40, 300, 70000]))
        function = builder.add_function(address, size)
        steps = draw(st.lists(st.integers(1, 90), max_size=6))
        offset = 0
        for number, step in enumerate([0, *steps]):
            offset += step
            if offset > size:
                break
            cfa, fp = _RULES[draw(st.integers(0, len(_RULES) - 1))] if number else _RULES[0]
            function.add_row(offset, cfa, fp)
        address += size + draw(st.sampled_from([0, 16]))
    if draw(st.booleans()):  # a PLT-like PCMASK function
        plt = builder.add_function(address, 64, pc_type=PcType.MASK, rep_size=16)
        plt.add_row(0, SP8).add_row(6, SP16)
    return builder.build()


@settings(max_examples=60, deadline=None)
@given(_sections())
def test_random_sections_keep_their_rules(section: SFrameSection) -> None:
    compacted = compact_section(section)
    after = SFrameSection.from_bytes(compacted.data)
    assert compacted.size <= len(section.data)
    assert_same_rules(section, after)
    assert section_text(after) == section_text(section)
    assert after.to_bytes() == compacted.data
    assert not _errors(after, False)
    if after.version is Version.V3:
        kernel = after.validate(kernel=True, sframe_segment_address=0)
        assert not {f.rule for f in kernel if f.severity is Severity.ERROR}


def test_flex_and_signal_frames_share_only_with_their_like() -> None:
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3)
    builder.add_function(0x1000, 0x10).add_row(0, SP8)
    builder.add_function(0x1010, 0x10, signal_frame=True).add_row(0, SP8)
    builder.add_function(0x1020, 0x10, fde_type=FdeType.FLEX).add_row(0, SP8)
    builder.add_function(0x1030, 0x10).add_row(0, SP8)
    section = builder.build()
    compacted = compact_section(section)
    after = SFrameSection.from_bytes(compacted.data)
    assert compacted.blocks == 3 and compacted.shared == 1
    assert after.table.fre_offset[3] == after.table.fre_offset[0]
    assert_same_rules(section, after)
    assert section_text(after) == section_text(section)


def test_header_fields_kept() -> None:
    section = _two_alike(Version.V3).build()
    after = SFrameSection.from_bytes(compact_section(section).data)
    keep = ("version", "flags", "abi", "cfa_fixed_fp_offset", "cfa_fixed_ra_offset", "num_fdes")
    for name in (*keep, "num_fres", "auxiliary_header"):
        assert getattr(after.header, name) == getattr(section.header, name)
    assert struct.unpack_from("<I", compact_section(section).data, 12)[0] == 7
