"""Dump cells the corpus lacks, on hand-built sections.

Expected text follows the printf formats of binutils 2.47 libsframe/sframe-dump.c (V2/V3) and
2.40 (V1), quoted next to each case:

* row:    ``printf ("    %016"PRIx64, fre_start_pc_vma)`` then ``"  RA undefined"`` or
          ``printf ("  %-10s", cfa); printf ("%-10s", fp); printf ("%-13s", ra)``
* simple: CFA ``"%s+%d"`` with {"fp", "sp"}; FP ``"c%+d"`` / ``"u"`` (s390x V2 odd word:
          ``"r%d"``); RA ``"f"`` (fixed RA), ``"U"`` (word 0), ``"c%+d"``, ``"u"``; then
          ``"[s]"`` or ``"   "``
* flex:   sframe_format_fre_disp ``"%s%+d"`` / ``"(%s%+d)"``; names "sp"/"fp" else ``"r%u"``;
          "c" when the control word names no register
* func:   ``"\\n    func idx [%d]: pc = 0x%"PRIx64", size = %d bytes"``, ``", attr = \\"%s\\""``,
          ``", pauth = B key"``
* flags:  ``printf ("%11s%s%s\\n", prefix, #x, flags ? "," : "")``, residual ``"%11s%d\\n"``

V1 cases are also run through the installed readelf when it is binutils 2.40.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require
from elf_build import RawFunction, Sec, build_elf, fre_info, sframe_bytes
from pysframe import SFrameSection
from pysframe.errors import SFrameError
from pysframe.tools import dump
from pysframe.tools.dump import header_text, section_chunks, section_json, section_text
from test_dump_json import long_functions

AMD64, AARCH64_BE, AARCH64_LE, S390X = 3, 1, 2, 4
SORTED, FRAME_POINTER, PCREL = 1, 2, 4
COLUMNS = "    STARTPC         CFA       FP        RA           "
COLUMNS_MASK = "    STARTPC[m]      CFA       FP        RA           "


def ctrl(reg: int, deref: bool = False) -> int:
    """FLEX control word: regnum << 3 | deref << 1 | reg_p (docs/format.md, "FLEX FDEs")."""
    return reg << 3 | int(deref) << 1 | 1


def rows_of(data: bytes, address: int = 0) -> list[str]:
    """The row lines of the only function of the section."""
    text = section_text(SFrameSection.from_bytes(data, address))
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("    STARTPC"))
    return [line for line in lines[start + 1 :] if line]


def row(address: int, cfa: str, fp: str, ra: str) -> str:
    return f"    {address:016x}  {cfa:<10}{fp:<10}{ra:<13}"


# -- 2.47: header ------------------------------------------------------------------------------


def test_v2_all_flags_print_one_per_line() -> None:
    data = sframe_bytes(2, AMD64, [], flags=SORTED | FRAME_POINTER | PCREL, fixed_ra=-8)
    assert header_text(SFrameSection.from_bytes(data)) == (
        "\n  Header :\n\n    Version: SFRAME_VERSION_2\n"
        "    Flags: SFRAME_F_FDE_SORTED,\n"
        "           SFRAME_F_FRAME_POINTER,\n"
        "           SFRAME_F_FDE_FUNC_START_PCREL\n"
        "    CFA fixed RA offset: -8\n    Num FDEs: 0\n    Num FREs: 0\n"
    )


def test_v2_frame_pointer_flag_alone() -> None:
    data = sframe_bytes(2, AMD64, [], flags=FRAME_POINTER)
    assert "    Flags: SFRAME_F_FRAME_POINTER\n" in header_text(SFrameSection.from_bytes(data))


def test_cfa_fixed_fp_offset_line_and_cells() -> None:
    """``printf ("    CFA fixed FP offset: %d\\n", ...)``; sframe_fre_get_fp_offset returns the
    fixed offset for every row that has words, so FP prints ``c%+d`` of it."""
    function = RawFunction(0x40, 16, rows=[(0, fre_info(1), (8,)), (4, fre_info(2), (16, 99))])
    data = sframe_bytes(3, AMD64, [function], flags=SORTED, fixed_fp=-16, fixed_ra=-8)
    section = SFrameSection.from_bytes(data)
    assert header_text(section).endswith(
        "    CFA fixed FP offset: -16\n    CFA fixed RA offset: -8\n"
        "    Num FDEs: 1\n    Num FREs: 2\n"
    )
    assert rows_of(data) == [row(0x40, "sp+8", "c-16", "f"), row(0x44, "sp+16", "c-16", "f")]


def test_no_functions_ends_after_the_index_title() -> None:
    data = sframe_bytes(3, AARCH64_LE, [])
    assert section_text(SFrameSection.from_bytes(data)).endswith(
        "    Flags: NONE\n    Num FDEs: 0\n    Num FREs: 0\n\n  Function Index :\n"
    )


# -- 2.47: function line -----------------------------------------------------------------------


def _function_line(data: bytes, address: int = 0) -> str:
    lines = section_text(SFrameSection.from_bytes(data, address)).split("\n")
    return next(line for line in lines if line.startswith("    func idx"))


def test_attr_signal_flex_and_pauth_b_key() -> None:
    """attrs = "S" (info bit 7) then "F" (info2 FDE type FLEX); pauth after attr (aarch64)."""
    flex_row = (0, fre_info(2, 1), (ctrl(31), 16))
    both = RawFunction(0x100, 8, info=0x80 | 0x20, info2=1, rows=[flex_row])
    assert _function_line(sframe_bytes(3, AARCH64_LE, [both])) == (
        '    func idx [0]: pc = 0x100, size = 8 bytes, attr = "SF", pauth = B key'
    )
    signal = RawFunction(0x100, 8, info=0x80, rows=[(0, fre_info(1), (16,))])
    assert _function_line(sframe_bytes(3, AMD64, [signal], fixed_ra=-8)).endswith(
        ', size = 8 bytes, attr = "S"'
    )


def test_pauth_only_on_aarch64() -> None:
    """is_sframe_abi_arch_aarch64 guards the pauth text; the key bit means nothing on AMD64."""
    function = RawFunction(0x10, 4, info=0x20, rows=[(0, fre_info(1), (8,))])
    assert _function_line(sframe_bytes(2, AARCH64_BE, [function], big_endian=True)).endswith(
        "size = 4 bytes, pauth = B key"
    )
    assert _function_line(sframe_bytes(2, AMD64, [function], fixed_ra=-8)).endswith("4 bytes")


def test_v2_signal_bit_prints_s() -> None:
    """The 2.47 dumper tests SFRAME_V3_FDE_SIGNAL_P for V2 too (it never checks the version)."""
    function = RawFunction(0x10, 4, info=0x80, rows=[(0, fre_info(1), (8,))])
    assert _function_line(sframe_bytes(2, AMD64, [function], fixed_ra=-8)).endswith('attr = "S"')


def test_pcrel_pc_adds_the_start_field_offset() -> None:
    """PCREL: pc = start + section address + header size + index * FDE size (16 in V3)."""
    functions = [
        RawFunction(0x1000 - 28, 4, rows=[(0, fre_info(1), (8,))]),
        RawFunction(0x1010 - 44, 4, rows=[(0, fre_info(1), (8,))]),
    ]
    section = SFrameSection.from_bytes(
        sframe_bytes(3, AMD64, functions, flags=PCREL, fixed_ra=-8), 0x5000
    )
    lines = [line for line in section_text(section).split("\n") if line.startswith("    func")]
    assert lines == [
        "    func idx [0]: pc = 0x6000, size = 4 bytes",
        "    func idx [1]: pc = 0x6010, size = 4 bytes",
    ]


def test_negative_pc_wraps_to_64_bits() -> None:
    function = RawFunction(-0x1C, 7, rows=[(0, fre_info(1), (8,))])
    data = sframe_bytes(2, AMD64, [function], fixed_ra=-8)
    assert _function_line(data) == "    func idx [0]: pc = 0xffffffffffffffe4, size = 7 bytes"
    assert rows_of(data) == [row(0xFFFFFFFFFFFFFFE4, "sp+8", "u", "f")]


def test_pcmask_marker_and_raw_row_offsets() -> None:
    """PCMASK (info bit 4): "[m]" and rows print the FRE start offset itself."""
    function = RawFunction(
        0x2000, 64, info=0x10, rep_size=16, rows=[(0, fre_info(1), (8,)), (11, fre_info(1), (16,))]
    )
    data = sframe_bytes(3, AMD64, [function], fixed_ra=-8)
    lines = section_text(SFrameSection.from_bytes(data)).split("\n")
    at = lines.index(COLUMNS_MASK)
    assert lines[at : at + 3] == [
        COLUMNS_MASK,
        row(0, "sp+8", "u", "f"),
        row(11, "sp+16", "u", "f"),
    ]


# -- 2.47: simple rows -------------------------------------------------------------------------


def test_ra_undefined_row_has_no_cells() -> None:
    """``printf ("  RA undefined")`` and no padding, for a row with no data words."""
    function = RawFunction(0x10, 8, rows=[(0, fre_info(1), (8,)), (2, fre_info(0), ())])
    data = sframe_bytes(3, AMD64, [function], fixed_ra=-8)
    assert rows_of(data) == [row(0x10, "sp+8", "u", "f"), "    0000000000000012  RA undefined"]


def test_aarch64_rows_with_mangled_ra_and_padding() -> None:
    """RA word 1, FP word 2 (no fixed RA); a 0 RA word prints "U"; "[s]" when mangled."""
    function = RawFunction(
        0x400,
        32,
        rows=[
            (0, fre_info(1, mangled=True), (0,)),
            (4, fre_info(3, mangled=True), (48, -40, -48)),
            (8, fre_info(3, sp=False), (16, 0, -16)),
        ],
    )
    assert rows_of(sframe_bytes(3, AARCH64_LE, [function])) == [
        row(0x400, "sp+0", "u", "u[s]"),
        row(0x404, "sp+48", "c-48", "c-40[s]"),
        row(0x408, "fp+16", "c-16", "U"),
    ]


def test_negative_cfa_offset_prints_plus_minus() -> None:
    """``"%s+%d"`` gives "sp+-8" for a negative offset."""
    function = RawFunction(0x0, 8, rows=[(0, fre_info(1), (-8,))])
    assert rows_of(sframe_bytes(3, AMD64, [function], fixed_ra=-8)) == [row(0, "sp+-8", "u", "f")]


def test_s390x_v2_register_cells() -> None:
    """s390x V2: CFA stored as (offset - 160) / 8; an odd FP/RA word is ``r%d`` of word >> 1;
    an RA word of 0 is "U" (tested before the register case)."""
    function = RawFunction(
        0x1000,
        64,
        rows=[
            (0, fre_info(1), (0,)),
            (4, fre_info(3), (20, 0x1D, 0x17)),
            (8, fre_info(3), (20, 0, -72)),
            (12, fre_info(3), (20, -48, -72)),
        ],
    )
    data = sframe_bytes(2, S390X, [function], big_endian=True)
    assert rows_of(data) == [
        row(0x1000, "sp+160", "u", "u"),
        row(0x1004, "sp+320", "r11", "r14"),
        row(0x1008, "sp+320", "c-72", "U"),
        row(0x100C, "sp+320", "c-72", "c-48"),
    ]


def test_s390x_v3_odd_words_are_offsets() -> None:
    """sframe_s390x_offset_regnum_p is false for V3: odd words print as offsets."""
    function = RawFunction(0x1000, 16, rows=[(0, fre_info(3), (20, 0x1D, 0x17))])
    data = sframe_bytes(3, S390X, [function], big_endian=True)
    assert rows_of(data) == [row(0x1000, "sp+320", "c+23", "c+29")]


# -- 2.47: flex rows ---------------------------------------------------------------------------


def test_flex_cells() -> None:
    """CFA pair, RA pair (or one 0 padding word), FP pair."""
    w2 = 1  # 2-byte words, so control words above 127 fit
    function = RawFunction(
        0x190,
        64,
        info=0x01,
        info2=1,
        rows=[
            # CFA = r10 + 0; no RA words and fixed RA: "f"; no FP: "u"
            (0, fre_info(2, w2), (ctrl(10), 0)),
            # RA padding, FP = (fp + 0): "U"; FP pair moves to words 3-4
            (2, fre_info(5, w2), (ctrl(10), 0, 0, ctrl(6, True), 0)),
            # CFA = (fp - 8) deref; RA saved at (sp + 8); FP in register r3 + 0
            (4, fre_info(6, w2), (ctrl(6, True), -8, ctrl(7, True), 8, ctrl(3), 0)),
            # CFA-relative control words (reg_p 0) print "c"
            (6, fre_info(6, w2, mangled=True), (ctrl(7), 16, 0x2, -8, 0x0, -16)),
            # an unknown register for the CFA; RA in register r16
            (8, fre_info(4, w2), (ctrl(12), 24, ctrl(16), 0)),
        ],
    )
    data = sframe_bytes(3, AMD64, [function], fixed_ra=-8)
    assert _function_line(data).endswith('size = 64 bytes, attr = "F"')
    assert rows_of(data) == [
        row(0x190, "r10+0", "u", "f"),
        row(0x192, "r10+0", "(fp+0)", "U"),
        row(0x194, "(fp-8)", "r3+0", "(sp+8)"),
        row(0x196, "sp+16", "c-16", "c-8[s]"),
        row(0x198, "r12+24", "u", "r16+0"),
    ]


def test_flex_without_fixed_ra_prints_u() -> None:
    function = RawFunction(0x0, 16, info2=1, rows=[(0, fre_info(2, 1), (ctrl(31), 16))])
    assert rows_of(sframe_bytes(3, AARCH64_LE, [function])) == [row(0, "sp+16", "u", "u")]


def test_flex_s390x_cfa_offset_is_decoded() -> None:
    function = RawFunction(0x0, 16, info2=1, rows=[(0, fre_info(4), (ctrl(15), 0, ctrl(14), 0))])
    data = sframe_bytes(3, S390X, [function], big_endian=True)
    assert rows_of(data) == [row(0, "sp+160", "u", "r14+0")]


def test_flex_row_with_one_word_is_an_error() -> None:
    """objdump 2.47 aborts (sframe_assert) on a FLEX row without its CFA pair."""
    function = RawFunction(0x0, 16, info2=1, rows=[(0, fre_info(1), (ctrl(7),))])
    with pytest.raises(SFrameError):
        section_text(SFrameSection.from_bytes(sframe_bytes(3, AMD64, [function], fixed_ra=-8)))


# -- JSON --------------------------------------------------------------------------------------


def test_json_carries_rules_and_cells() -> None:
    function = RawFunction(0x10, 8, rows=[(0, fre_info(2), (16, -16)), (2, fre_info(0), ())])
    data = sframe_bytes(3, AMD64, [function], flags=SORTED, fixed_ra=-8)
    document = section_json(SFrameSection.from_bytes(data))
    assert document["flags"] == ["FDE_SORTED"]
    first, second = document["functions"][0]["rows"]
    assert first["text"] == ["sp+16", "c-16", "f   "]
    assert first["cfa"] == {"reg": 7, "offset": 16, "deref": False}
    assert first["fp"] == {"kind": "saved", "offset": -16, "reg": None}
    assert second["text"] is None and second["ra"] == {"kind": "undefined"}


# -- V1 (readelf 2.40) -------------------------------------------------------------------------

V1_CASES = {
    # x86-64: FP is word 1 (fixed RA), RA always "u" in 2.40.
    "amd64": (
        sframe_bytes(
            1,
            AMD64,
            [
                RawFunction(0x10, 32, rows=[(0, fre_info(1), (8,)), (1, fre_info(2), (16, -16))]),
                RawFunction(0x40, 64, info=0x10, rows=[(0, fre_info(1), (8,)), (11, 1 | 2, (16,))]),
            ],
            flags=SORTED,
            fixed_ra=-8,
        ),
        [
            row(0x10, "sp+8", "u", "u"),
            row(0x11, "sp+16", "c-16", "u"),
        ],
    ),
    # aarch64: RA word 1, FP word 2; no RA word keeps the FP text ("u") in the buffer.
    "aarch64": (
        sframe_bytes(
            1,
            AARCH64_LE,
            [
                RawFunction(
                    0x100,
                    32,
                    info=0x20,
                    rows=[
                        (0, fre_info(1, mangled=True), (0,)),
                        (4, fre_info(3, mangled=True), (48, -40, -48)),
                    ],
                )
            ],
            flags=SORTED | FRAME_POINTER,
        ),
        [row(0x100, "sp+0", "u", "u[s]"), row(0x104, "sp+48", "c-48", "c-40[s]")],
    ),
}


def test_v1_header_has_no_fixed_offsets_and_one_flag() -> None:
    """2.40 prints no fixed-offset lines, and strcpy leaves only FRAME_POINTER for flags 3."""
    aarch64 = header_text(SFrameSection.from_bytes(V1_CASES["aarch64"][0]))
    assert aarch64 == (
        "\n  Header :\n\n    Version: SFRAME_VERSION_1\n    Flags: SFRAME_F_FRAME_POINTER\n"
        "    Num FDEs: 1\n    Num FREs: 2\n"
    )
    amd64 = header_text(SFrameSection.from_bytes(V1_CASES["amd64"][0]))
    assert "Flags: SFRAME_F_FDE_SORTED\n    Num FDEs: 2\n" in amd64


@pytest.mark.parametrize("name", sorted(V1_CASES))
def test_v1_rows(name: str) -> None:
    data, expected = V1_CASES[name]
    text = section_text(SFrameSection.from_bytes(data))
    assert "\n".join(expected) in text


def test_v1_pauth_and_mask() -> None:
    text = section_text(SFrameSection.from_bytes(V1_CASES["aarch64"][0]))
    assert "    func idx [0]: pc = 0x100, size = 32 bytes, pauth = B key\n" + COLUMNS in text
    text = section_text(SFrameSection.from_bytes(V1_CASES["amd64"][0]))
    assert "    func idx [1]: pc = 0x40, size = 64 bytes\n" + COLUMNS_MASK in text
    assert row(11, "sp+16", "u", "u") in text


def _readelf_2_40() -> str | None:
    readelf = shutil.which("readelf")
    if readelf is None:
        return None
    version = subprocess.run([readelf, "--version"], capture_output=True, text=True).stdout
    return readelf if " 2.40" in version.split("\n")[0] else None


@pytest.mark.parametrize("name", sorted(V1_CASES))
def test_v1_cases_match_real_readelf_2_40(name: str, tmp_path: Path) -> None:
    readelf = _readelf_2_40()
    if readelf is None:
        require("readelf-2.40", "needs GNU readelf 2.40 (readelf --sframe reads V1)")
    data = V1_CASES[name][0]
    machine = 62 if name == "amd64" else 183
    path = tmp_path / f"{name}.o"
    path.write_bytes(build_elf([Sec(".sframe", 1, data, flags=2)], machine=machine))
    gnu = subprocess.run([readelf, "--sframe", str(path)], capture_output=True, text=True)
    assert gnu.returncode == 0, gnu.stderr
    from pysframe.tools.dump import readelf_text

    assert readelf_text(".sframe", SFrameSection.from_bytes(data)) == gnu.stdout


# -- windows of rows ---------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "functions"), [(5, 3), (1, 1), (1 << 16, 1 << 12)])
def test_functions_cut_into_windows_of_rows_give_the_same_text(
    monkeypatch: pytest.MonkeyPatch, rows: int, functions: int
) -> None:
    """The text made functions a window of rows at a time equals the text made in one
    window, whatever the windows; a PCMASK function among them."""
    section = long_functions()
    monkeypatch.setattr(dump, "CHUNK_ROWS", 1 << 40)
    monkeypatch.setattr(dump, "CHUNK_FUNCTIONS", 1 << 40)
    expected = section_text(section)
    assert len(list(section_chunks(section))) == 2  # the header, then every function at once
    monkeypatch.setattr(dump, "CHUNK_ROWS", rows)
    monkeypatch.setattr(dump, "CHUNK_FUNCTIONS", functions)
    assert section_text(section) == expected
    if rows == 5:  # pieces of a few rows each
        assert max(map(len, section_chunks(section))) < 800
