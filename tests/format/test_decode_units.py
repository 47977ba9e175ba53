"""Unit tests on hand-built sections: every version, ABI, FRE type, word size and rule kind.

Each byte string is assembled field by field; the comment beside a field names it as the
specification does (V2 spec 2.2-2.4; docs/format.md, "Errata 1" and "V3 FDE").
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest

from pysframe import (
    Abi,
    BaseReg,
    CfaRule,
    FdeType,
    Flags,
    FreType,
    PauthKey,
    PcType,
    RegRule,
    RuleKind,
    SFrameSection,
    Version,
    WordSize,
)
from sframe_scan import scan


def header(
    order: str,
    version: int,
    flags: int,
    abi: int,
    fixed_fp: int,
    fixed_ra: int,
    num_fdes: int,
    num_fres: int,
    fre_len: int,
    fde_off: int,
    fre_off: int,
    aux: bytes = b"",
) -> bytes:
    return (
        struct.pack(
            order + "HBBBbbBIIIII",
            0xDEE2,  # sfp_magic
            version,  # sfp_version
            flags,  # sfp_flags
            abi,  # sfh_abi_arch
            fixed_fp,  # sfh_cfa_fixed_fp_offset
            fixed_ra,  # sfh_cfa_fixed_ra_offset
            len(aux),  # sfh_auxhdr_len
            num_fdes,  # sfh_num_fdes
            num_fres,  # sfh_num_fres
            fre_len,  # sfh_fre_len
            fde_off,  # sfh_fdeoff (from the end of the header)
            fre_off,  # sfh_freoff (from the end of the header)
        )
        + aux
    )


# -- V1 ---------------------------------------------------------------------------------------


def v1_amd64() -> bytes:
    """One AMD64 function at 0x1000 (section at 0x2000): push %rbp; mov %rsp,%rbp."""
    fres = (
        bytes([0x00, 0x03, 0x08])  # FRE0: start 0, info SP|1 word|1B, CFA=sp+8
        + bytes([0x01, 0x05, 0x10, 0xF0])  # FRE1: start 1, SP|2 words, CFA=sp+16, FP=c-16
        + bytes([0x04, 0x04, 0x10, 0xF0])  # FRE2: start 4, FP|2 words, CFA=fp+16, FP=c-16
    )
    fde = struct.pack(
        "<iIIIB",
        0x1000 - 0x2000,  # sfde_func_start_address: from the section start (no PCREL in V1)
        0x20,  # sfde_func_size
        0,  # sfde_func_start_fre_off
        3,  # sfde_func_num_fres
        0x00,  # sfde_func_info: ADDR1, PCINC
    )
    return header("<", 1, 0x1, 3, 0, -8, 1, 3, len(fres), 0, len(fde)) + fde + fres


def test_v1_amd64_rows() -> None:
    section = SFrameSection.from_bytes(v1_amd64(), section_address=0x2000)
    assert section.version is Version.V1 and section.abi is Abi.AMD64_ENDIAN_LITTLE
    assert section.flags == Flags.FDE_SORTED
    (function,) = section
    assert (function.start, function.size, function.fre_type) == (0x1000, 0x20, FreType.ADDR1)
    assert function.pc_type is PcType.INC and function.fde_type is FdeType.DEFAULT
    rows = function.rows
    assert [r.start_address for r in rows] == [0x1000, 0x1001, 0x1004]
    assert rows[0].cfa == CfaRule(7, 8) and rows[0].base_reg is BaseReg.SP
    assert rows[1].fp == RegRule.at_cfa(-16)
    assert rows[2].cfa == CfaRule(6, 16) and rows[2].base_reg is BaseReg.FP
    assert all(r.ra == RegRule.fixed(-8) for r in rows)
    assert section.find_row(0x1003).row == rows[1]
    assert section.find_row(0x101F).row == rows[2]
    assert section.find_row(0x1020) is None and section.find_row(0xFFF) is None
    assert section.to_bytes() == v1_amd64()


def test_v1_pcmask_uses_low_four_bits() -> None:
    # V1 PCMASK (x86-64 PLT): rows at 0 and 0xb inside each 16-byte entry, matched on the low
    # four bits of absolute addresses (libsframe 2.40).
    fres = bytes([0x00, 0x03, 0x08, 0x0B, 0x03, 0x10])  # sp+8 from 0, sp+16 from 0xb
    fde = struct.pack("<iIIIB", 0x1000, 0x40, 0, 2, 0x10)  # info: ADDR1 | PCMASK
    data = header("<", 1, 1, 3, 0, -8, 1, 2, len(fres), 0, len(fde)) + fde + fres
    section = SFrameSection.from_bytes(data)
    assert section[0].pc_type is PcType.MASK
    assert section.find_row(0x1025).row.cfa.offset == 8  # type: ignore[union-attr]
    assert section.find_row(0x102C).row.cfa.offset == 16  # type: ignore[union-attr]


# -- V2 ---------------------------------------------------------------------------------------


def v2_aarch64(order: str = "<", abi: int = 2, pcrel: bool = False) -> bytes:
    """AArch64: stp x29, x30, [sp, -32]! at 4; pac-signed RA; B key."""
    word = {"<": "<", ">": ">"}[order]
    fres = (
        bytes([0x00, 0x03, 0x00])  # start 0: SP|1 word, CFA=sp+0
        + bytes([0x04, 0x83, 0x00])  # start 4: mangled RA|SP|1 word, CFA=sp+0
        + bytes(
            [0x08, 0x87, 0x20, 0xF8, 0xE0]
        )  # start 8: mangled|SP|3 words: sp+32, RA c-8, FP c-32
    )
    header_size = 28
    start = 0x400 - (header_size if pcrel else 0)  # PCREL: from the field itself (errata 1)
    fde = struct.pack(
        word + "iIIIBBH",
        start,  # sfde_func_start_address
        0x30,  # sfde_func_size
        0,  # sfde_func_start_fre_off
        3,  # sfde_func_num_fres
        0x20,  # sfde_func_info: ADDR1, PCINC, pauth key B
        0,  # sfde_func_rep_size
        0,  # sfde_func_padding2
    )
    flags = 0x1 | (0x4 if pcrel else 0)
    return header(order, 2, flags, abi, 0, 0, 1, 3, len(fres), 0, len(fde)) + fde + fres


@pytest.mark.parametrize(
    ("order", "abi"), [("<", Abi.AARCH64_ENDIAN_LITTLE), (">", Abi.AARCH64_ENDIAN_BIG)]
)
@pytest.mark.parametrize("pcrel", [False, True])
def test_v2_aarch64_both_byte_orders(order: str, abi: Abi, pcrel: bool) -> None:
    data = v2_aarch64(order, int(abi), pcrel)
    section = SFrameSection.from_bytes(data)
    assert section.big_endian == (order == ">") and section.abi is abi
    (function,) = section
    assert function.start == 0x400 and function.pauth_key is PauthKey.B
    first, signed, saved = function.rows
    assert first.ra == RegRule.untracked() and not first.mangled_ra
    assert signed.mangled_ra and signed.ra == RegRule.untracked()
    assert saved.cfa == CfaRule(31, 32)
    assert (saved.ra, saved.fp) == (RegRule.at_cfa(-8), RegRule.at_cfa(-32))
    assert section.to_bytes() == data


def test_v2_pcmask_uses_rep_size() -> None:
    fres = bytes([0x00, 0x03, 0x08, 0x0B, 0x03, 0x10])  # sp+8 from 0, sp+16 from 0xb
    fde = struct.pack(
        "<iIIIBBH",
        0x1000,  # start (section-relative)
        0x40,  # size: four 16-byte PLT entries
        0,  # fre_off
        2,  # num_fres
        0x10,  # info: ADDR1 | PCMASK
        16,  # rep_size
        0,  # padding
    )
    data = header("<", 2, 1, 3, 0, -8, 1, 2, len(fres), 0, len(fde)) + fde + fres
    section = SFrameSection.from_bytes(data)
    assert section.find_row(0x1035).row.cfa.offset == 8  # type: ignore[union-attr]
    assert section.find_row(0x103B).row.cfa.offset == 16  # type: ignore[union-attr]
    assert section.find_row(0x103B).row_index == 1  # type: ignore[union-attr]


def test_v2_s390x_registers_and_padding() -> None:
    # s390x V2: CFA stored (off-160)/8; RA word 0 = padding; odd word = register (word >> 1).
    fres = (
        bytes([0x00, 0x03, 0x00])  # start 0: sp+160
        + bytes([0x06, 0x07, 0x18, 0x00, 0xB8])  # start 6: sp+352, RA padding, FP c-72
        + bytes([0x0C, 0x07, 0x18, 0x1D, 0x11])  # start 12: RA in r14 (29), FP in r8 (17)
    )
    fde = struct.pack(">iIIIBBH", 0x100, 0x40, 0, 3, 0, 0, 0)
    data = header(">", 2, 1, 4, 0, 0, 1, 3, len(fres), 0, len(fde)) + fde + fres
    rows = SFrameSection.from_bytes(data)[0].rows
    assert rows[0].cfa == CfaRule(15, 160)
    assert rows[1].cfa == CfaRule(15, 352)
    assert rows[1].ra == RegRule.padding() and rows[1].fp == RegRule.at_cfa(-72)
    assert rows[2].ra == RegRule.in_register(14) and rows[2].fp == RegRule.in_register(8)


# -- V3 ---------------------------------------------------------------------------------------


def v3_section(
    fres: bytes,
    *,
    info: int = 0,
    info2: int = 0,
    rep_size: int = 0,
    num_fres: int,
    abi: int = 3,
    order: str = "<",
    size: int = 0x40,
    aux: bytes = b"",
    fixed_ra: int = -8,
) -> bytes:
    attr = struct.pack(
        order + "HBBB",
        num_fres,  # num_fres
        info,  # info: FRE type, PC type, pauth key, signal
        info2,  # info2: FDE type
        rep_size,  # rep_size
    )
    header_size = 28 + len(aux)
    fde = struct.pack(
        order + "qII",
        0x1000 - header_size,  # func_start_offset, PCREL: from the field itself
        size,  # func_size
        0,  # func_start_fre_off: the attribute record
    )
    fre_blob = attr + fres
    return (
        header(order, 3, 0x5, abi, 0, fixed_ra, 1, num_fres, len(fre_blob), 0, len(fde), aux)
        + fde
        + fre_blob
    )


def test_v3_flex_drap() -> None:
    # The DRAP pattern GNU as 2.47 emits for x86-64 stack realignment (corpus frames.o).
    fres = (
        bytes([0x00, 0x04, 0x39, 0x08])  # start 0: 2 words: ctl(r7,reg_p)=0x39, 8 -> sp+8
        + bytes([0x05, 0x04, 0x51, 0x00])  # start 5: ctl(r10,reg_p)=0x51, 0 -> r10+0
        + bytes([0x21, 0x0A, 0x51, 0x00, 0x00, 0x33, 0x00])  # r10+0, RA pad, FP=*(r6+0)
        + bytes([0x23, 0x0A, 0x33, 0xF8, 0x00, 0x33, 0x00])  # CFA=*(fp-8), RA pad, FP=*(fp+0)
    )
    data = v3_section(fres, info2=1, num_fres=4)
    section = SFrameSection.from_bytes(data)
    function = section[0]
    assert function.fde_type is FdeType.FLEX and function.start == 0x1000
    rows = function.rows
    assert rows[0].cfa == CfaRule(7, 8) and rows[0].ra == RegRule.fixed(-8)
    assert rows[1].cfa == CfaRule(10, 0)
    assert rows[2].ra == RegRule.padding() and rows[2].fp == RegRule(RuleKind.SAVED, 0, 6)
    assert rows[3].cfa == CfaRule(6, -8, deref=True)
    assert section.to_bytes() == data


def test_v3_flex_register_value_and_cfa_relative_pairs() -> None:
    # RA pair ctl=(30<<3)|reg_p -> value of x30; FP pair ctl=deref only -> saved at CFA-16.
    fres = bytes([0x00, 0x2C])  # start 0; info: 6 words of 2 bytes
    fres += struct.pack("<hhhhhh", (31 << 3) | 1, 16, (30 << 3) | 1, 0, 2, -16)
    data = v3_section(fres, info2=1, num_fres=1, abi=2, fixed_ra=0)
    row = SFrameSection.from_bytes(data)[0].rows[0]
    assert row.word_size is WordSize.B2
    assert row.cfa == CfaRule(31, 16)
    assert row.ra == RegRule.in_register(30)
    assert row.fp == RegRule.at_cfa(-16)


@pytest.mark.parametrize(
    ("fre_type", "start_bytes"),
    [(0, bytes([0x10])), (1, struct.pack("<H", 0x1234)), (2, struct.pack("<I", 0x12345))],
)
@pytest.mark.parametrize(
    ("size_code", "word", "packed"),
    [
        (0, -8, struct.pack("<b", -8)),
        (1, 300, struct.pack("<h", 300)),
        (2, 70016, struct.pack("<i", 70016)),
    ],
)
def test_v3_every_fre_type_and_word_size(
    fre_type: int, start_bytes: bytes, size_code: int, word: int, packed: bytes
) -> None:
    info = 0x03 | (size_code << 5)  # SP | 1 word | word size
    fres = bytes([0x00] * (1 << fre_type)) + bytes([info]) + packed  # first row at 0
    fres += start_bytes + bytes([info]) + packed
    data = v3_section(fres, info=fre_type, num_fres=2, size=0x20000)
    function = SFrameSection.from_bytes(data)[0]
    assert function.fre_type is FreType(fre_type)
    second = function.rows[1]
    assert second.start_offset == int.from_bytes(start_bytes, "little")
    assert second.word_size is WordSize(size_code) and second.cfa == CfaRule(7, word)


def test_v3_ra_undefined_signal_and_pauth_bits() -> None:
    fres = bytes([0x00, 0x03, 0x10]) + bytes([0x04, 0x00])  # sp+16, then no words
    data = v3_section(fres, info=0x80 | 0x20, num_fres=2, abi=2, fixed_ra=0)
    function = SFrameSection.from_bytes(data)[0]
    assert function.signal_frame and function.pauth_key is PauthKey.B
    outer = function.rows[1]
    assert outer.ra_undefined and outer.cfa is None and outer.words == ()


def test_v3_pcmask_and_rep_size() -> None:
    fres = bytes([0x00, 0x03, 0x08, 0x06, 0x03, 0x10])
    data = v3_section(fres, info=0x10, rep_size=16, num_fres=2)
    section = SFrameSection.from_bytes(data)
    assert section[0].rep_size == 16 and section[0].pc_type is PcType.MASK
    assert section.find_row(0x1027).row.cfa.offset == 16  # type: ignore[union-attr]


def test_auxiliary_header_moves_the_subsections() -> None:
    aux = b"\xaa\xbb\xcc"  # three bytes of auxiliary header
    fres = bytes([0x00, 0x03, 0x08])
    data = v3_section(fres, num_fres=1, aux=aux)
    section = SFrameSection.from_bytes(data)
    assert section.header.auxiliary_header == aux and section.header.size == 31
    assert section[0].start == 0x1000 and section[0].rows[0].cfa == CfaRule(7, 8)
    assert section.to_bytes() == data


def test_v3_big_endian_s390x_cfa_decoding() -> None:
    fres = bytes([0x00, 0x03, 0x00, 0x06, 0x07, 0x18, 0xD0, 0xB8])
    data = v3_section(fres, num_fres=2, abi=4, order=">", fixed_ra=0)
    rows = SFrameSection.from_bytes(data)[0].rows
    assert rows[0].cfa == CfaRule(15, 160)
    assert rows[1].cfa == CfaRule(15, 352)
    assert (rows[1].ra, rows[1].fp) == (RegRule.at_cfa(-48), RegRule.at_cfa(-72))


def test_lookups_on_hand_built_sections_are_libsframes() -> None:
    """One PC and many, against libsframe's scan (tests/support/sframe_scan.py)."""
    for data in (v1_amd64(), v2_aarch64(), v3_section(bytes([0, 3, 8, 6, 3, 16]), num_fres=2)):
        section = SFrameSection.from_bytes(data, 0x2000)
        pcs = np.arange(0, 0x5000, dtype=np.uint64)
        batch = section.find_rows(pcs)
        for i, pc in enumerate(pcs):
            want = scan(section, int(pc))
            found = section.find_row(int(pc))
            assert (None if found is None else (found.function.index, found.row_index)) == want
            assert batch.row_index[i] == (-1 if want is None else want[1])


def test_batch_of_many_shuffled_pcs_is_libsframes() -> None:
    # 1024 or more PCs out of order take the sort-first path of find_rows.
    section = SFrameSection.from_bytes(v3_section(bytes([0, 3, 8, 6, 3, 16]), num_fres=2))
    pcs = np.random.default_rng(7).permutation(np.arange(0xE00, 0x1300, dtype=np.uint64))
    assert len(pcs) >= 1024
    batch = section.find_rows(pcs)
    for i, pc in enumerate(pcs):
        want = scan(section, int(pc))
        assert batch.row_index[i] == (-1 if want is None else want[1])
        if want is not None:
            row = section[want[0]].rows[want[1]]
            assert batch.cfa_offset[i] == row.cfa.offset  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "address", [0, 0x2000, (1 << 63) - 0x10, 1 << 63, (1 << 64) - 0x18, (1 << 64) + 0x30]
)
def test_start_addresses_wrap_modulo_2_64(address: int) -> None:
    """Start = stored field + (PCREL ? field address : section address), modulo 2**64
    (errata 1), computed here from the raw field bytes for each layout."""
    for data, pcrel, field_code, field_at in (
        (v1_amd64(), False, "<i", 28),  # V1: no PCREL, i32 field at the FDE's first byte
        (v2_aarch64(pcrel=True), True, "<i", 28),  # V2 PCREL: i32 field
        (v3_section(bytes([0x00, 0x03, 0x08]), num_fres=1), True, "<q", 28),  # V3: i64 field
    ):
        (field,) = struct.unpack_from(field_code, data, field_at)
        expected = (field + address + (field_at if pcrel else 0)) % (1 << 64)
        section = SFrameSection.from_bytes(data, address)
        assert section.starts.tolist() == [expected]
        assert section[0].start == expected and section.table.start.tolist() == [expected]


def test_rows_follow_the_function_they_are_asked_of() -> None:
    """A Function changed with dataclasses.replace decodes from its own fields, and leaves the
    section's own rows alone (the row cache is keyed by those fields)."""
    section = SFrameSection.from_bytes(v1_amd64(), 0x2000)
    function = section[0]
    assert len(function.rows) == 3
    first_only = dataclasses.replace(function, num_rows=1)
    assert [row.start_offset for row in first_only.rows] == [0]
    assert len(section[0].rows) == 3 and len(section.rows(0)) == 3 and len(function.rows) == 3
