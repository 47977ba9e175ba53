"""Validator rules: one section per rule that breaks exactly that rule, and the clean corpus.

Sections are assembled field by field (V2 spec 2.2-2.4; docs/format.md for V3); the comment
beside each field names it.  The base section is a clean V3 AMD64 section with two functions.
"""

from __future__ import annotations

import shutil
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from conftest import corpus_files
from pysframe import SFrameSection, Version
from pysframe.elf.reader import ElfReader
from pysframe.sources import load_sframe
from pysframe.tools.validate import (
    RULES,
    Finding,
    Severity,
    validate_bytes,
    validate_elf,
    validate_section,
)

# -- building sections --------------------------------------------------------------------------


@dataclass(frozen=True)
class Fn:
    """One function: its FDE fields, V3 attribute record fields and raw FRE bytes."""

    start: int
    size: int
    fres: bytes
    num_fres: int
    info: int = 0x00  # attribute info: FRE type ADDR1, PCINC
    info2: int = 0x00  # attribute info2: FDE type DEFAULT
    rep_size: int = 0


#: FRE: start 0, info 0x03 (CFA base SP, 1 word, 1-byte words), CFA = sp+8.
FRE_SP8 = bytes([0x00, 0x03, 0x08])
#: FRE: start 1, info 0x05 (SP, 2 words, 1-byte), CFA = sp+16, FP saved at CFA-16.
FRE_SP16_FP = bytes([0x01, 0x05, 0x10, 0xF0])

F0 = Fn(0x1000, 0x20, FRE_SP8 + FRE_SP16_FP, 2)
F1 = Fn(0x1020, 0x10, FRE_SP8, 1)


def v3(
    functions: list[Fn] | None = None,
    *,
    flags: int = 0x5,  # FDE_SORTED | FDE_FUNC_START_PCREL
    abi: int = 3,  # AMD64, little-endian
    fixed_fp: int = 0,
    fixed_ra: int = -8,
    aux: bytes = b"",
    num_fres: int | None = None,
    fre_len: int | None = None,
    fre_offsets: list[int] | None = None,
    gap: bytes = b"",
    fres_first: bool = False,
    trailing: bytes = b"",
) -> bytes:
    """A V3 little-endian section; function starts are absolute (section address 0)."""
    functions = [F0, F1] if functions is None else functions
    header_size = 28 + len(aux)
    blocks, offsets = b"", []
    for index, fn in enumerate(functions):
        if index:
            blocks += gap  # unused bytes between FRE blocks
        offsets.append(len(blocks))
        blocks += struct.pack("<HBBB", fn.num_fres, fn.info, fn.info2, fn.rep_size) + fn.fres
    offsets = fre_offsets or offsets
    fde_len = 16 * len(functions)
    fde_off, fre_off = (len(blocks), 0) if fres_first else (0, fde_len)
    fdes = b""
    for index, fn in enumerate(functions):
        field_at = header_size + fde_off + 16 * index
        base = field_at if flags & 0x4 else 0
        fdes += struct.pack(
            "<qII",
            fn.start - base,  # func_start_offset (PCREL: from this field)
            fn.size,  # func_size
            offsets[index],  # func_start_fre_off (of the attribute record)
        )
    head = struct.pack(
        "<HBBBbbBIIIII",
        0xDEE2,  # sfp_magic
        3,  # sfp_version
        flags,  # sfp_flags
        abi,  # sfh_abi_arch
        fixed_fp,  # sfh_cfa_fixed_fp_offset
        fixed_ra,  # sfh_cfa_fixed_ra_offset
        len(aux),  # sfh_auxhdr_len
        len(functions),  # sfh_num_fdes
        sum(f.num_fres for f in functions) if num_fres is None else num_fres,  # sfh_num_fres
        len(blocks) if fre_len is None else fre_len,  # sfh_fre_len
        fde_off,  # sfh_fdeoff
        fre_off,  # sfh_freoff
    )
    body = blocks + fdes if fres_first else fdes + blocks
    return head + aux + body + trailing


def rules(findings: list[Finding]) -> set[str]:
    return {f.rule for f in findings}


def only(data: bytes, rule: str, **options: object) -> Finding:
    """Validate ``data`` and check that exactly ``rule`` is broken; return its first finding."""
    findings = validate_bytes(data, **options)  # type: ignore[arg-type]
    assert rules(findings) == {rule}, [str(f) for f in findings]
    return findings[0]


def test_base_section_is_clean() -> None:
    assert validate_bytes(v3()) == []
    assert validate_bytes(v3(), kernel=True, sframe_segment_address=0) == []
    assert SFrameSection.from_bytes(v3()).validate() == []


def test_every_rule_is_documented_and_has_a_test() -> None:
    source = Path(__file__).read_text()
    for rule in RULES:
        assert f'"{rule}"' in source, f"no test names rule {rule}"


# -- header ---------------------------------------------------------------------------------


def test_truncated() -> None:
    assert only(v3()[:3], "truncated").offset == 0  # shorter than the preamble
    assert only(v3()[:20], "truncated").offset == 0  # shorter than the header
    data = bytearray(v3())
    data[7] = 200  # sfh_auxhdr_len past the end
    assert only(bytes(data), "truncated").offset == 7


def test_truncated_kernel_nothing_after_header() -> None:
    # A bare header: the kernel's "header doesn't fit", and necessarily no FDE either.
    findings = validate_bytes(v3([]), kernel=True, sframe_segment_address=0)
    assert rules(findings) == {"truncated", "empty"}
    assert "nothing follows the header" in str(findings)


def test_magic() -> None:
    assert only(b"\x12\x34" + v3()[2:], "magic").message == "bad magic 1234"


def test_version() -> None:
    data = bytearray(v3())
    data[2] = 4  # sfp_version
    assert only(bytes(data), "version").offset == 2


def test_version_kernel() -> None:
    # A V2 section with both flags (errata 1): fine for the format, not for the kernel.
    v2 = SFrameSection.from_bytes(v3()).convert(Version.V2, pcrel=True)
    assert validate_section(v2) == []
    findings = validate_section(v2, kernel=True, sframe_segment_address=0)
    assert rules(findings) == {"version"}


def test_abi_unknown() -> None:
    data = bytearray(v3())
    data[4] = 9  # sfh_abi_arch
    assert only(bytes(data), "abi").message == "unknown ABI/arch identifier 9"


def test_abi_byte_order() -> None:
    finding = only(v3(abi=1), "abi")  # AArch64 big-endian ABI in a little-endian section
    assert "little-endian" in finding.message


def test_flags_unknown() -> None:
    finding = only(v3(flags=0x7), "flags")  # FRAME_POINTER is not defined in V3
    assert finding.message == "flags 0x2 are not defined in V3"


def test_flags_kernel() -> None:
    data = v3(flags=0x1)  # FDE_SORTED only: starts are from the section start
    assert validate_bytes(data) == []
    finding = only(data, "flags", kernel=True, sframe_segment_address=0)
    assert "FDE_FUNC_START_PCREL" in finding.message


def test_auxiliary_header_kernel() -> None:
    data = v3(aux=bytes(4))
    assert validate_bytes(data) == []
    assert only(data, "auxiliary-header", kernel=True, sframe_segment_address=0).offset == 7


def test_empty_kernel() -> None:
    data = v3([], trailing=b"\0")
    assert validate_bytes(data) == []
    only(data, "empty", kernel=True, sframe_segment_address=0)


def test_subsection_past_the_end() -> None:
    finding = only(v3(fre_len=100), "subsection-bounds")
    assert finding.offset == 0x18 and "runs past the end" in finding.message


def test_subsection_overlap() -> None:
    # The FRE sub-section (first) claims one byte of the FDE index after it.
    data = v3(fres_first=True, fre_len=len(FRE_SP8) * 2 + len(FRE_SP16_FP) + 10 + 1)
    assert "subsection-bounds" in rules(validate_bytes(data))


def test_subsection_order_kernel() -> None:
    data = v3(fres_first=True)
    assert validate_bytes(data) == []
    finding = only(data, "subsection-bounds", kernel=True, sframe_segment_address=0)
    assert "precedes the FDE index" in finding.message


# -- functions ------------------------------------------------------------------------------


def test_fre_type() -> None:
    finding = only(v3([F0, replace(F1, info=0x03)]), "fre-type")
    assert (finding.function, finding.offset) == (1, 28 + 32 + 12 + 2)


def test_fde_type() -> None:
    finding = only(v3([F0, replace(F1, info2=0x02)]), "fde-type")
    assert finding.function == 1 and finding.message == "invalid FDE type 2"


def test_attribute_bounds() -> None:
    finding = only(v3(fre_offsets=[0, 17]), "attribute-bounds")  # FRE sub-section is 20 bytes
    assert (finding.function, finding.offset) == (1, 28 + 16 + 12)


def test_fre_bounds_count() -> None:
    finding = only(v3([F0, replace(F1, num_fres=100)], num_fres=102), "fre-bounds")
    assert finding.function == 1 and "100 FREs" in finding.message


def test_fre_bounds_words() -> None:
    # FRE: start 0, info 0x1f: 15 one-byte words, more than the sub-section holds.
    finding = only(v3([F0, replace(F1, fres=bytes([0x00, 0x1F, 0x08]))]), "fre-bounds")
    assert finding.function == 1 and "data words of FRE 0" in finding.message


def test_fde_sorted() -> None:
    data = v3([F1, F0])  # decreasing starts, FDE_SORTED set
    finding = only(data, "fde-sorted")
    assert "function 1 starts at 0x1000" in finding.message


def test_fde_sorted_equal_starts() -> None:
    # Equal starts pass the decoder but not the strict order the kernel needs.
    f1 = replace(F1, start=0x1000)
    findings = validate_bytes(v3([F0, f1]))
    assert rules(findings) == {"fde-sorted", "fde-overlap"}


def test_fde_sorted_kernel_without_flag() -> None:
    data = v3([F1, F0], flags=0x4)  # PCREL only: unsorted is allowed by the format
    assert validate_bytes(data) == []
    findings = validate_bytes(data, kernel=True, sframe_segment_address=0)
    assert rules(findings) == {"flags", "fde-sorted"}


def test_concatenated() -> None:
    # A second section after the first one's end and 4 bytes of zero padding, as lld leaves
    # its inputs' sections: one error, at the second section's first byte.
    first = v3()
    second = v3([Fn(0x2000, 0x10, FRE_SP8, 1)])
    finding = only(first + bytes(4) + second, "concatenated")
    assert finding.offset == len(first) + 4
    assert "SFrame section 2 of 2 starts at byte" in finding.message
    # Zero padding alone after the end is no second section.
    assert validate_bytes(first + bytes(8)) == []


def test_fde_overlap() -> None:
    finding = only(v3([replace(F0, size=0x28), F1]), "fde-overlap")
    assert finding.function == 1 and "overlaps function 0" in finding.message


def test_fde_overlap_skipped_for_relocatable_objects() -> None:
    assert validate_bytes(v3([replace(F0, size=0x28), F1]), relocatable=True) == []


def test_fde_gap_is_opt_in() -> None:
    data = v3([F0, replace(F1, start=0x1030)])
    assert validate_bytes(data) == []
    finding = only(data, "fde-gap", address_gaps=True)
    assert finding.severity is Severity.WARNING and finding.message.startswith("16 bytes")


def test_fde_text() -> None:
    finding = only(v3(), "fde-text", text_ranges=[(0x1000, 0x1028)])
    assert finding.function == 1 and "[0x1020, 0x1030)" in finding.message


def test_fde_size() -> None:
    finding = only(v3([F0, Fn(0x1020, 0, b"", 0)]), "fde-size")
    assert finding.severity is Severity.WARNING and finding.function == 1


def test_rep_size() -> None:
    finding = only(v3([F0, replace(F1, info=0x10)]), "rep-size")  # PCMASK, rep_size 0
    assert finding.function == 1


def test_reserved_bits() -> None:
    finding = only(v3([F0, replace(F1, info=0x40)]), "reserved-bits")
    assert finding.severity is Severity.WARNING and finding.offset == 28 + 32 + 12 + 2


def test_fde_rules_on_v1() -> None:
    v1 = SFrameSection.from_bytes(v3()).convert(Version.V1)
    assert validate_section(v1) == []


# -- rows -----------------------------------------------------------------------------------


def test_word_size() -> None:
    finding = only(v3([F0, replace(F1, fres=bytes([0x00, 0x63, 0x08]))]), "word-size")
    assert finding.offset == 28 + 32 + 12 + 5 + 1  # the FRE's info byte


def test_fre_order() -> None:
    f0 = replace(F0, fres=FRE_SP8 + bytes([0x00, 0x05, 0x10, 0xF0]))  # second FRE at 0 too
    finding = only(v3([f0, F1]), "fre-order")
    assert finding.function == 0 and "FRE 1 starts at offset 0x0" in finding.message


def test_fre_start_past_the_end() -> None:
    finding = only(v3([F0, replace(F1, fres=bytes([0x11, 0x03, 0x08]))]), "fre-start")
    assert finding.severity is Severity.ERROR


def test_fre_start_at_the_end() -> None:
    f0 = replace(F0, fres=FRE_SP8 + bytes([0x20, 0x05, 0x10, 0xF0]))  # at size 0x20
    finding = only(v3([f0, F1]), "fre-start")
    assert finding.severity is Severity.WARNING


def test_fre_words_default() -> None:
    # FRE: info 0x07 = SP, 3 words: AMD64 DEFAULT rows have CFA and FP only.
    finding = only(v3([F0, replace(F1, fres=bytes([0x00, 0x07, 0x08, 0x00, 0xF0]))]), "fre-words")
    assert "at most 2" in finding.message


def test_fre_words_flex() -> None:
    # FLEX FRE with 7 words: more than the CFA, RA and FP pairs.
    fres = bytes([0x00, 0x0E, 0x39, 0x08, 0x02, 0xF8, 0x02, 0xF0, 0x00])
    finding = only(v3([F0, replace(F1, info2=0x01, fres=fres)]), "fre-words")
    assert "7 data words" in finding.message and finding.severity is Severity.ERROR


def test_fre_words_flex_lone_padding() -> None:
    # FLEX FRE with 3 words: CFA pair (sp, reg_p) and a 0 padding word.  libsframe reads it;
    # the kernel finds a word left over.
    fres = bytes([0x00, 0x06, 0x39, 0x08, 0x00])
    data = v3([F0, replace(F1, info2=0x01, fres=fres)])
    assert only(data, "fre-words").severity is Severity.WARNING
    kernel = only(data, "fre-words", kernel=True, sframe_segment_address=0)
    assert kernel.severity is Severity.ERROR


def test_flex_is_clean_when_well_formed() -> None:
    # CFA = *(r6+16) [control (6<<3)|deref|reg_p = 0x33], RA pair, FP pair.
    fres = bytes([0x00, 0x0C, 0x33, 0x10, 0x02, 0xF8, 0x02, 0xF0])
    assert validate_bytes(v3([F0, replace(F1, info2=0x01, fres=fres)])) == []


def test_flex_control_cfa_without_register() -> None:
    fres = bytes([0x00, 0x04, 0x38, 0x08])  # CFA control 0x38: reg 7 but reg_p clear
    finding = only(v3([F0, replace(F1, info2=0x01, fres=fres)]), "flex-control")
    assert "names no register" in finding.message


def test_flex_control_zero_ra_pair() -> None:
    fres = bytes([0x00, 0x08, 0x39, 0x08, 0x00, 0xF8])  # RA control 0: the kernel reads padding
    finding = only(v3([F0, replace(F1, info2=0x01, fres=fres)]), "flex-control")
    assert "RA control word 0x0 is zero" in finding.message


def test_flex_control_padding_not_zero() -> None:
    fres = bytes([0x00, 0x0A, 0x39, 0x08, 0x05, 0x02, 0xF0])  # 5 words, padding word 5
    finding = only(v3([F0, replace(F1, info2=0x01, fres=fres)]), "flex-control")
    assert "padding word is 0x5" in finding.message


def test_flex_control_kernel_register_number() -> None:
    # CFA based on DWARF register 40 (control 0x141 needs 2-byte words: info 0x24).
    fres = bytes([0x00, 0x24]) + struct.pack("<hh", 40 << 3 | 1, 16)
    data = v3([F0, replace(F1, info2=0x01, fres=fres)])
    assert validate_bytes(data) == []
    finding = only(data, "flex-control", kernel=True, sframe_segment_address=0)
    assert "5-bit register numbers" in finding.message


def test_mangled_ra() -> None:
    finding = only(v3([F0, replace(F1, fres=bytes([0x00, 0x83, 0x08]))]), "mangled-ra")
    assert finding.severity is Severity.WARNING


# -- counts and FRE blocks ------------------------------------------------------------------


def test_num_fres() -> None:
    finding = only(v3(num_fres=4), "num-fres")
    assert finding.message == "header counts 4 FREs but the functions have 3"


def test_fre_len() -> None:
    finding = only(v3(fre_len=21, trailing=b"\0"), "fre-len")
    assert finding.message == "sfh_fre_len is 21 but the FRE blocks end at 20"


def test_fre_gap() -> None:
    finding = only(v3(gap=b"\0\0"), "fre-gap")
    assert finding.severity is Severity.WARNING and finding.function == 1


def test_shared_fre_block_is_legal() -> None:
    # Function 1's FDE names function 0's block (attribute record and FREs): a shared block.
    twin = Fn(0x1020, 0x10, F0.fres, F0.num_fres)
    data = v3([F0, twin], fre_offsets=[0, 0], fre_len=12)[: 28 + 32 + 12]
    assert validate_bytes(data) == []
    assert validate_bytes(data, kernel=True, sframe_segment_address=0) == []
    finding = only(data, "fre-block-shared", foreign_endian=True)
    assert finding.severity is Severity.WARNING and finding.function == 1
    assert "1 functions use another function's FRE block" in finding.message


def test_fre_block_overlap_pigeonhole() -> None:
    # Function 1's block starts inside function 0's (bytes 5-9 read as its attribute record,
    # 1 FRE): at different offsets, the two blocks need more than sfh_fre_len.
    f0 = Fn(0x1000, 0x20, bytes([0x01, 0x00, 0x00, 0x00, 0x00, 0x00]), 3)
    data = v3([f0, Fn(0x1020, 0x10, b"", 1)], fre_offsets=[0, 5], fre_len=12)
    finding = only(data, "fre-block-overlap")
    assert "need at least 18 bytes" in finding.message and "FRE blocks overlap" in finding.message


def v2(fdes: list[tuple[int, int, int, int, int]], fres: bytes) -> bytes:
    """A V2 AMD64 section (section address 0, sorted, starts from the section) from FDEs
    (start, size, fre_off, num_fres, info) and the FRE sub-section."""
    head = struct.pack(
        "<HBBBbbBIIIII",
        0xDEE2,  # sfp_magic
        2,  # sfp_version
        0x1,  # sfp_flags: FDE_SORTED
        3,  # sfh_abi_arch: AMD64
        0,  # sfh_cfa_fixed_fp_offset
        -8,  # sfh_cfa_fixed_ra_offset
        0,  # sfh_auxhdr_len
        len(fdes),  # sfh_num_fdes
        sum(f[3] for f in fdes),  # sfh_num_fres
        len(fres),  # sfh_fre_len
        0,  # sfh_fdeoff
        20 * len(fdes),  # sfh_freoff
    )
    # start, size, fre_off, num_fres, info, rep_size, padding (V2 spec 2.3)
    table = b"".join(struct.pack("<iIIIBBH", *fde, 0, 0) for fde in fdes)
    return head + table + fres


def test_v2_prefix_of_a_block_is_legal() -> None:
    # Function 1 uses the first FRE of function 0's two (V2: the FRE count is the FDE's).
    data = v2([(0x1000, 0x20, 0, 2, 0x00), (0x1020, 0x10, 0, 1, 0x00)], FRE_SP8 + FRE_SP16_FP)
    assert validate_bytes(data) == []
    assert rules(validate_bytes(data, foreign_endian=True)) == {"fre-block-shared"}


def test_v2_block_read_with_another_fre_type_overlaps() -> None:
    # Function 1 names function 0's block but reads it with 2-byte start addresses (which
    # also makes its one FRE start past its end, with too many words).
    data = v2([(0x1000, 0x20, 0, 2, 0x00), (0x1020, 0x10, 0, 1, 0x01)], FRE_SP8 + FRE_SP16_FP)
    findings = validate_bytes(data)
    assert rules(findings) == {"fre-block-overlap", "fre-start", "fre-words"}
    (finding,) = [f for f in findings if f.rule == "fre-block-overlap"]
    assert finding.function == 1 and "read with FRE type 1, not 0" in finding.message


def test_fre_block_overlap_partial() -> None:
    # Function 0's FRE: start 0, info 0x25 (SP, 2 words of 2 bytes), CFA=sp+0, FP=c+0.  Its
    # block is [0, 11); function 1's attribute record (no FREs) is read at 7 from the zero
    # words and one more zero byte: [7, 12).  The 12-byte sub-section fits both.
    f0 = Fn(0x1000, 0x20, bytes([0x00, 0x25, 0, 0, 0, 0]), 1)
    f1 = Fn(0x1020, 0x10, b"", 0)
    data = v3([f0, f1], fre_offsets=[0, 7], fre_len=12)
    # The builder laid out 16 bytes of blocks; the section keeps the first 12 (byte 11 is 0).
    finding = only(data[: 28 + 32 + 12], "fre-block-overlap")
    assert finding.function == 1 and "overlaps that of function 0 [0, 11)" in finding.message


# -- ELF ------------------------------------------------------------------------------------


def test_elf_segment() -> None:
    section = SFrameSection.from_bytes(v3(), section_address=0)
    findings = validate_section(section, sframe_segment_address=0x40)
    assert rules(findings) == {"elf-segment"} and "PT_GNU_SFRAME is at 0x40" in str(findings[0])
    findings = validate_section(section, sframe_segment_address=0, sframe_segment_size=8)
    assert rules(findings) == {"elf-segment"}
    assert rules(validate_section(section, kernel=True)) == {"elf-segment"}


def test_decode_fallback() -> None:
    """Without the structural checks on the raw bytes, what the decoder rejects when the
    section is opened is the one finding, with the decoder's message and offset."""
    moved = bytearray(v3())
    moved[0x18] = 0xFF  # sfh_freoff: the FRE sub-section past the end
    assert rules(validate_bytes(bytes(moved))) == {"subsection-bounds"}
    finding = only(bytes(moved), "decode", structure_checks=False)
    assert finding.offset == 0x18 and "FRE sub-section" in finding.message
    finding = only(v3()[:20], "decode", structure_checks=False)
    assert finding.offset == 0 and "28-byte header" in finding.message
    assert validate_bytes(v3(), structure_checks=False) == []


def _patched_copy(tmp_path: Path, name: str) -> tuple[Path, ELFFile, object]:
    source = Path(__file__).parent.parent / "data" / "corpus" / name
    target = tmp_path / source.name
    shutil.copy(source, target)
    stream = target.open("rb")
    return target, ELFFile(stream), stream


def _patch(path: Path, offset: int, value: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[offset : offset + len(value)] = value
    path.write_bytes(bytes(data))


def elf_with_sframe_abi(tmp_path: Path, abi: int) -> Path:
    """A copy of the x86-64 V3 executable whose .sframe claims another ABI."""
    path, elf, stream = _patched_copy(tmp_path, "x86_64/v3/frames")
    offset = elf.get_section_by_name(".sframe")["sh_offset"]
    stream.close()  # type: ignore[attr-defined]
    _patch(path, offset + 4, bytes([abi]))
    return path


def elf_with_moved_sframe_segment(tmp_path: Path) -> Path:
    """A copy of the x86-64 V3 executable whose PT_GNU_SFRAME p_vaddr is off by 8."""
    path, elf, stream = _patched_copy(tmp_path, "x86_64/v3/frames")
    for index, segment in enumerate(elf.iter_segments()):
        if segment["p_type"] == 0x6474E554 or segment["p_type"] == "PT_GNU_SFRAME":
            at = elf["e_phoff"] + index * elf["e_phentsize"] + 16  # ELF64 p_vaddr
            _patch(path, at, struct.pack("<Q", segment["p_vaddr"] + 8))
    stream.close()  # type: ignore[attr-defined]
    return path


def elf_with_function_outside_text(tmp_path: Path) -> Path:
    """A copy of the x86-64 V3 executable whose last function is moved past the text."""
    path, elf, stream = _patched_copy(tmp_path, "x86_64/v3/frames")
    sframe = elf.get_section_by_name(".sframe")
    section = SFrameSection.from_bytes(sframe.data(), sframe["sh_addr"])
    stream.close()  # type: ignore[attr-defined]
    last = len(section) - 1
    at = sframe["sh_offset"] + 28 + section.header.fde_offset + 16 * last  # func_start_offset
    _patch(path, at, struct.pack("<q", section[last].start_field + 0x100000))
    return path


def test_elf_abi_mismatch(tmp_path: Path) -> None:
    path = elf_with_sframe_abi(tmp_path, 2)  # AArch64 little-endian in an x86-64 file
    with ElfReader.open(str(path)) as image:
        findings = validate_elf(image)
    assert rules(findings) == {"abi"}
    assert "ELF file is for AMD64_ENDIAN_LITTLE" in findings[0].message


def test_elf_sframe_segment_mismatch(tmp_path: Path) -> None:
    with ElfReader.open(str(elf_with_moved_sframe_segment(tmp_path))) as image:
        findings = validate_elf(image)
    assert rules(findings) == {"elf-segment"}


def test_elf_function_outside_executable_segment(tmp_path: Path) -> None:
    with ElfReader.open(str(elf_with_function_outside_text(tmp_path))) as image:
        findings = validate_elf(image)
    assert rules(findings) == {"fde-text"}


# -- the clean corpus -----------------------------------------------------------------------


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: "/".join(p.parts[-3:]))
def test_corpus_is_clean(path: Path) -> None:
    with ElfReader.open(str(path)) as image:
        assert validate_elf(image) == []
        assert validate_elf(image, address_gaps=False) == []
        if image.is_relocatable:
            return
        section = load_sframe(image)
        if section.version is Version.V3:
            # Linked V3 sections are what the kernel registers: they pass its checks too.
            assert validate_elf(image, kernel=True) == []


def test_load_overlap_in_a_program_stripped_after_injection() -> None:
    """See tests/cli/test_check_elf_rules.py: binutils 2.40's strip laid an injected program's
    new segment out again over the RW segment's last page."""
    path = Path(__file__).parent.parent / "data" / "elf-damaged" / "injected-then-stripped-by-2.40"
    with ElfReader.open(str(path)) as image:
        findings = validate_elf(image)
    assert [(f.rule, f.severity) for f in findings] == [("load-overlap", Severity.ERROR)]


def test_no_loadable_segment_in_a_program_eu_stripped_after_injection() -> None:
    """eu-strip (elfutils 0.188) wrote an injected program's program header table as NULL
    entries: no PT_LOAD is left, and the program does not start."""
    path = Path(__file__).parent.parent / "data" / "elf-damaged" / "injected-then-eu-stripped"
    with ElfReader.open(str(path)) as image:
        findings = validate_elf(image)
    assert ("elf-segment", Severity.ERROR) in [(f.rule, f.severity) for f in findings]
    assert any("no loadable segment" in f.message for f in findings)
