"""A corpus of malformed sections, each with the exact error class and message expected.

The base section is test_validate's clean V3 AMD64 section: header (28 bytes), two 16-byte
FDE index entries, then a 20-byte FRE sub-section holding function 0's block [0, 12)
(attribute record 0-4, FRE 5-7, FRE 8-11) and function 1's block [12, 20) (attribute record
12-16, FRE 17-19).
"""

from __future__ import annotations

import struct
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from pysframe import (
    BadMagicError,
    InvalidFieldError,
    OutOfBoundsError,
    SFrameError,
    SFrameSection,
    TruncatedError,
    UnsortedError,
    UnsupportedVersionError,
    Version,
)
from test_validate import F0, F1, Fn, v3

BASE = v3()
FDE_START = 28
FRE_START = 28 + 32
SIZE = len(BASE)  # 80


def decode_everything(data: bytes) -> None:
    """Decode the section, every function's rows, and a batch lookup."""
    section = SFrameSection.from_bytes(data)
    for function in section:
        function.rows  # noqa: B018
    section.find_rows([0x1000, 0x1020])


def expect(data: bytes, error: type[SFrameError], message: str, offset: int | None) -> None:
    """``message``: the error's description, ``function N: `` first when it names the
    function it concerns (its ``function`` field)."""
    with pytest.raises(error) as info:
        decode_everything(data)
    assert type(info.value) is error
    assert info.value.description == message
    assert info.value.offset == offset


# -- truncation at every field boundary ---------------------------------------------------------

#: Where each header field starts (V2 spec 2.1-2.2), then each FDE index field (V3).
HEADER_BOUNDARIES = [0, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24]
FDE_BOUNDARIES = [FDE_START + 16 * i + field for i in (0, 1) for field in (0, 8, 12)]
FRE_BOUNDARIES = [FRE_START + at for at in (0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 17, 18)]


def truncation_error(cut: int) -> tuple[type[SFrameError], str, int | None]:
    """The error cutting the base section to ``cut`` bytes must raise (header unchanged)."""
    if cut < 4:
        return TruncatedError, f"section of {cut} bytes is shorter than the 4-byte preamble", 0
    if cut < 28:
        return TruncatedError, f"section of {cut} bytes is shorter than the 28-byte header", 0
    if cut < FRE_START:
        return (
            OutOfBoundsError,
            f"FDE sub-section (2 FDEs of 16 bytes at offset 0x1c) runs past the end of the "
            f"{cut}-byte section",
            0x14,
        )
    return (
        OutOfBoundsError,
        f"FRE sub-section (20 bytes at offset 0x3c) runs past the end of the {cut}-byte section",
        0x18,
    )


@pytest.mark.parametrize("cut", HEADER_BOUNDARIES + FDE_BOUNDARIES + FRE_BOUNDARIES)
def test_truncated_at_field_boundary(cut: int) -> None:
    expect(BASE[:cut], *truncation_error(cut))


def _shrunk(functions: list[Fn], fre_len: int) -> bytes:
    """The section with sfh_fre_len = ``fre_len`` and the bytes after it cut off."""
    data = v3(functions, fre_len=fre_len)
    return data[: 28 + 16 * len(functions) + fre_len]


#: Function 0 alone: its FRE sub-section truncated at each field boundary (sfh_fre_len too).
SHRUNK_F0: list[tuple[int, type[SFrameError], str, int]] = [
    (
        0,
        OutOfBoundsError,
        "function 0: attribute record at FRE offset 0 runs past the 0-byte FRE sub-section",
        FDE_START + 12,
    ),
    (
        2,
        OutOfBoundsError,
        "function 0: attribute record at FRE offset 0 runs past the 2-byte FRE sub-section",
        FDE_START + 12,
    ),
    (
        4,
        OutOfBoundsError,
        "function 0: attribute record at FRE offset 0 runs past the 4-byte FRE sub-section",
        FDE_START + 12,
    ),
    (
        5,
        OutOfBoundsError,
        "function 0: 2 FREs at FRE offset 0 do not fit in the 5-byte FRE sub-section",
        FDE_START,
    ),
    (
        6,
        OutOfBoundsError,
        "function 0: 2 FREs at FRE offset 0 do not fit in the 6-byte FRE sub-section",
        FDE_START,
    ),
    (
        7,
        OutOfBoundsError,
        "function 0: 2 FREs at FRE offset 0 do not fit in the 7-byte FRE sub-section",
        FDE_START,
    ),
    (
        8,
        OutOfBoundsError,
        "function 0: 2 FREs at FRE offset 0 do not fit in the 8-byte FRE sub-section",
        FDE_START,
    ),
    (9, TruncatedError, "function 0: FRE 1 runs past the FRE sub-section", 44 + 8),
    (10, TruncatedError, "function 0: data words of FRE 1 run past the FRE sub-section", 44 + 8),
    (11, TruncatedError, "function 0: data words of FRE 1 run past the FRE sub-section", 44 + 8),
]


@pytest.mark.parametrize(("fre_len", "error", "message", "offset"), SHRUNK_F0)
def test_fre_subsection_truncated_in_function_0(
    fre_len: int, error: type[SFrameError], message: str, offset: int
) -> None:
    expect(_shrunk([F0], fre_len), error, message, offset)


#: Both functions: the FRE sub-section cut inside function 1's block.
SHRUNK_F1: list[tuple[int, type[SFrameError], str, int]] = [
    (
        12,
        OutOfBoundsError,
        "function 1: attribute record at FRE offset 12 runs past the 12-byte FRE sub-section",
        FDE_START + 16 + 12,
    ),
    (
        16,
        OutOfBoundsError,
        "function 1: attribute record at FRE offset 12 runs past the 16-byte FRE sub-section",
        FDE_START + 16 + 12,
    ),
    (
        17,
        OutOfBoundsError,
        "function 1: 1 FREs at FRE offset 12 do not fit in the 17-byte FRE sub-section",
        FDE_START + 16,
    ),
    (
        18,
        OutOfBoundsError,
        "function 1: 1 FREs at FRE offset 12 do not fit in the 18-byte FRE sub-section",
        FDE_START + 16,
    ),
    (
        19,
        TruncatedError,
        "function 1: data words of FRE 0 run past the FRE sub-section",
        FRE_START + 17,
    ),
]


@pytest.mark.parametrize(("fre_len", "error", "message", "offset"), SHRUNK_F1)
def test_fre_subsection_truncated_in_function_1(
    fre_len: int, error: type[SFrameError], message: str, offset: int
) -> None:
    expect(_shrunk([F0, F1], fre_len), error, message, offset)


def test_truncated_v1_at_every_fde_field() -> None:
    # V1 FDE, 17 bytes packed: i32 start, u32 size, u32 fre_off, u32 num_fres, u8 info.
    v1 = SFrameSection.from_bytes(BASE).convert(Version.V1).data
    fde_end = 28 + 2 * 17
    for cut in [28 + 17 * i + field for i in (0, 1) for field in (0, 4, 8, 12, 16)]:
        assert cut < fde_end
        expect(
            bytes(v1[:cut]),
            OutOfBoundsError,
            f"FDE sub-section (2 FDEs of 17 bytes at offset 0x1c) runs past the end of the "
            f"{cut}-byte section",
            0x14,
        )


def test_every_truncation_of_corpus_sections_is_an_sframe_error() -> None:
    corpus = Path(__file__).parent.parent / "data" / "fuzz-seeds"
    for path in sorted(corpus.glob("*.sframe"))[:8]:
        data = path.read_bytes()
        h = SFrameSection.from_bytes(data).header
        for cut in range(h.size + h.fre_offset + h.fre_len):  # every cut inside the section
            with pytest.raises(SFrameError):
                decode_everything(data[:cut])


# -- invalid enum values ------------------------------------------------------------------------


def _with_byte(at: int, value: int, data: bytes = BASE) -> bytes:
    out = bytearray(data)
    out[at] = value
    return bytes(out)


@pytest.mark.parametrize("magic", [b"\x00\x00", b"\xde\xe3", b"\xe2\xdf", b"\xff\xff"])
def test_bad_magic(magic: bytes) -> None:
    expect(
        magic + BASE[2:],
        BadMagicError,
        f"bad SFrame magic {magic.hex()} (expected e2de or dee2)",
        0,
    )


@pytest.mark.parametrize("version", [0, *range(4, 256)])
def test_invalid_version(version: int) -> None:
    expect(
        _with_byte(2, version), UnsupportedVersionError, f"unsupported SFrame version {version}", 2
    )


@pytest.mark.parametrize("abi", [0, *range(5, 256)])
def test_invalid_abi(abi: int) -> None:
    expect(_with_byte(4, abi), InvalidFieldError, f"unknown ABI/arch identifier {abi}", 4)


@pytest.mark.parametrize("fre_type", range(3, 16))
def test_invalid_fre_type(fre_type: int) -> None:
    data = v3([F0, replace(F1, info=fre_type)])
    expect(data, InvalidFieldError, f"function 1: invalid FRE type {fre_type}", None)


@pytest.mark.parametrize("fde_type", range(2, 32))
def test_invalid_fde_type(fde_type: int) -> None:
    data = v3([F0, replace(F1, info2=fde_type)])
    expect(data, InvalidFieldError, f"function 1: invalid FDE type {fde_type}", None)


def test_invalid_word_size() -> None:
    data = v3([F0, replace(F1, fres=bytes([0x00, 0x63, 0x08]))])  # info: size code 3
    expect(
        data,
        InvalidFieldError,
        "function 1: FRE 0 has invalid data-word size code 3",
        FRE_START + 17 + 1,
    )


@pytest.mark.parametrize("count", [1, 7, 8, 15])
def test_invalid_flex_word_count(count: int) -> None:
    fres = bytes([0x00, count << 1]) + bytes([0x39] + [0x08] * (count - 1))
    data = v3([F0, replace(F1, info2=0x01, fres=fres)])
    expect(
        data,
        InvalidFieldError,
        f"FLEX FRE with {count} data words (expected 2 to 6)",
        FRE_START + 17,
    )


def test_flex_cfa_without_register() -> None:
    data = v3([F0, replace(F1, info2=0x01, fres=bytes([0x00, 0x04, 0x38, 0x08]))])
    expect(data, InvalidFieldError, "FLEX FRE CFA control word names no register", FRE_START + 17)


def test_flex_nonzero_padding() -> None:
    fres = bytes([0x00, 0x0A, 0x39, 0x08, 0x05, 0x02, 0xF0])
    data = v3([F0, replace(F1, info2=0x01, fres=fres)])
    expect(data, InvalidFieldError, "FLEX FRE RA padding word is not zero", FRE_START + 17)


# -- offsets pointing outside -------------------------------------------------------------------


def _with_u32(at: int, value: int, data: bytes = BASE) -> bytes:
    out = bytearray(data)
    struct.pack_into("<I", out, at, value)
    return bytes(out)


@pytest.mark.parametrize("fde_off", [21, 0x100, 0xFFFF, 0xFFFFFFFF])
def test_fde_offset_outside(fde_off: int) -> None:
    start = 28 + fde_off
    expect(
        _with_u32(20, fde_off),
        OutOfBoundsError,
        f"FDE sub-section (2 FDEs of 16 bytes at offset {start:#x}) runs past the end of the "
        f"{SIZE}-byte section",
        0x14,
    )


@pytest.mark.parametrize("fre_off", [33, 0xFFFF, 0xFFFFFFFF])
def test_fre_offset_outside(fre_off: int) -> None:
    start = 28 + fre_off
    expect(
        _with_u32(24, fre_off),
        OutOfBoundsError,
        f"FRE sub-section (20 bytes at offset {start:#x}) runs past the end of the "
        f"{SIZE}-byte section",
        0x18,
    )


@pytest.mark.parametrize("fre_off", [16, 20, 1000, 0xFFFFFFFF])
def test_attribute_record_outside(fre_off: int) -> None:
    expect(
        _with_u32(FDE_START + 16 + 12, fre_off),
        OutOfBoundsError,
        f"function 1: attribute record at FRE offset {fre_off} runs past the 20-byte FRE "
        "sub-section",
        FDE_START + 16 + 12,
    )


def test_v1_fre_offset_outside() -> None:
    v1 = bytes(SFrameSection.from_bytes(BASE).convert(Version.V1).data)
    data = _with_u32(28 + 17 + 8, 0xFFFFFF00, v1)  # function 1's sfde_func_start_fre_off
    expect(
        data,
        OutOfBoundsError,
        "function 1: 1 FREs at FRE offset 4294967040 do not fit in the 10-byte FRE sub-section",
        28 + 17,
    )


# -- counts too large ---------------------------------------------------------------------------


def _fails_fast(data: bytes, error: type[SFrameError], message: str) -> None:
    tracemalloc.start()
    began = time.perf_counter()
    try:
        expect(data, error, message, 0x14)
    finally:
        elapsed = time.perf_counter() - began
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < 0.5 and peak < 256 << 10


def test_billions_of_fdes() -> None:
    data = _with_u32(8, 4_000_000_000)  # sfh_num_fdes
    _fails_fast(
        data,
        OutOfBoundsError,
        "FDE sub-section (4000000000 FDEs of 16 bytes at offset "
        f"0x1c) runs past the end of the {SIZE}-byte section",
    )


def test_maximum_counts_everywhere() -> None:
    data = _with_u32(8, 0xFFFFFFFF, _with_u32(12, 0xFFFFFFFF, _with_u32(16, 0xFFFFFFFF)))
    _fails_fast(
        data,
        OutOfBoundsError,
        "FDE sub-section (4294967295 FDEs of 16 bytes at offset "
        f"0x1c) runs past the end of the {SIZE}-byte section",
    )


def test_fre_count_too_large() -> None:
    data = v3([F0, replace(F1, num_fres=0xFFFF)])
    expect(
        data,
        OutOfBoundsError,
        "function 1: 65535 FREs at FRE offset 12 do not fit in the 20-byte FRE sub-section",
        FDE_START + 16,
    )


def test_fre_len_too_large() -> None:
    expect(
        _with_u32(16, 0xFFFFFFFF),
        OutOfBoundsError,
        f"FRE sub-section (4294967295 bytes at offset 0x3c) runs past the end of the "
        f"{SIZE}-byte section",
        0x18,
    )


# -- overlapping FREs ---------------------------------------------------------------------------


def test_functions_sharing_one_fre_block_decode_alike() -> None:
    # Both FDEs name function 0's block, attribute record and FREs (V3): a shared block.
    data = v3([F0, replace(F1, num_fres=2)], fre_offsets=[0, 0], fre_len=12)[: FRE_START + 12]
    decode_everything(data)
    section = SFrameSection.from_bytes(data)
    first, second = section[0].rows, section[1].rows
    assert [(r.start_offset, r.cfa, r.fp, r.ra) for r in second] == [
        (r.start_offset, r.cfa, r.fp, r.ra) for r in first
    ]
    assert [r.start_address - 0x20 for r in second] == [r.start_address for r in first]


def test_blocks_at_different_offsets_that_overlap() -> None:
    # Function 1's attribute record is read from function 0's FREs (bytes 5-9: 1 FRE, ADDR1,
    # DEFAULT) and its FRE from bytes 10-11: at different offsets, the two blocks need 18
    # bytes of the 12-byte FRE sub-section.
    f0 = Fn(0x1000, 0x20, bytes([0x01, 0x00, 0x00, 0x00, 0x00, 0x00]), 3)
    data = v3([f0, Fn(0x1020, 0x10, b"", 1)], fre_offsets=[0, 5], fre_len=12)
    expect(
        data,
        OutOfBoundsError,
        "the 2 functions' FREs need at least 18 bytes but the FRE "
        "sub-section has 12: FRE blocks overlap",
        0x10,
    )


def test_many_functions_sharing_a_large_block_fail_fast() -> None:
    # 2000 FDEs all naming one block of 8000 FREs (a shared block, legal in itself): without
    # the bound on FREs per byte the row table would hold 16 million rows for a 56 KB input.
    count, rows = 2000, 8000
    block = struct.pack("<HBBB", rows, 0, 0, 0) + bytes([0x00, 0x03, 0x08]) * rows
    functions = [Fn(0x1000 + 0x10000 * i, 0x10000, b"", rows) for i in range(count)]
    data = v3(functions, fre_offsets=[0] * count, fre_len=len(block))
    data = data[: 28 + 16 * count] + block
    tracemalloc.start()
    began = time.perf_counter()
    with pytest.raises(OutOfBoundsError, match="too many FDEs share FRE blocks"):
        decode_everything(data)
    elapsed = time.perf_counter() - began
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 1.0 and peak < 16 * len(data)


def test_fre_starts_out_of_order_still_decode() -> None:
    # Decreasing FRE starts are a validation finding (fre-order), not a decoding error.
    f0 = replace(F0, fres=bytes([0x05, 0x03, 0x08, 0x01, 0x05, 0x10, 0xF0]))
    section = SFrameSection.from_bytes(v3([f0, F1]))
    assert [row.start_offset for row in section[0].rows] == [5, 1]
    assert {f.rule for f in section.validate()} == {"fre-order"}


def test_unsorted_fdes_flagged_sorted() -> None:
    expect(
        v3([F1, F0]),
        UnsortedError,
        "FDEs flagged sorted but function 1 starts at 0x1000, before function 0 at 0x1020",
        FDE_START + 16,
    )


# -- every malformed input above is rejected by the validator too -------------------------------

MALFORMED: list[Callable[[], bytes]] = [
    lambda: BASE[:20],
    lambda: _with_byte(2, 9),
    lambda: _with_byte(4, 9),
    lambda: _with_u32(8, 4_000_000_000),
    lambda: _shrunk([F0], 9),
    # FRE blocks at different offsets that overlap (identical shared blocks are legal).
    lambda: v3(
        [
            Fn(0x1000, 0x20, bytes([0x01, 0x00, 0x00, 0x00, 0x00, 0x00]), 3),
            Fn(0x1020, 0x10, b"", 1),
        ],
        fre_offsets=[0, 5],
        fre_len=12,
    ),
]


@pytest.mark.parametrize("make", MALFORMED)
def test_validator_reports_malformed_input(make: Callable[[], bytes]) -> None:
    from pysframe.tools.validate import Severity, validate_bytes

    findings = validate_bytes(make())
    assert findings and any(f.severity is Severity.ERROR for f in findings)


# -- regressions found by fuzzing ---------------------------------------------------------------


def test_batch_lookup_in_pcmask_function_without_rows() -> None:
    # One PCMASK function (info 0x10, rep_size 16) and no FRE at all: the batch search marks
    # it for the scalar path; that marker (-2) was used as an index into a 1-entry array.
    data = v3([Fn(0x1000, 0x10, b"", 0, info=0x10, rep_size=16)])
    result = SFrameSection.from_bytes(data).find_rows([0x0FFF, 0x1004, 0x1010])
    assert list(result.function_index) == [-1, -1, -1]
    assert list(result.row_index) == [-1, -1, -1]


# -- what opening reads, and what a lookup reads ------------------------------------------------


def test_open_and_lookup_read_only_the_function_they_need() -> None:
    """Opening reads the lookup index (start addresses); a lookup reads and checks the one
    function it lands in; iteration and the FDE table check every function first."""
    data = bytearray(BASE)
    data[FRE_START + 12 + 2] = 0x03  # function 1's attribute record: info byte, FRE type 3
    section = SFrameSection.from_bytes(bytes(data))
    assert section.starts.tolist() == [F0.start, F1.start]
    found = section.find_row(F0.start + 4)
    assert found is not None and found.function.index == 0 and found.row_index == 1
    message = "function 1: invalid FRE type 3"
    for read in (lambda: section[1], lambda: section.find_row(F1.start), lambda: list(section),
                 lambda: section.table, lambda: section.find_rows([F0.start])):
        with pytest.raises(InvalidFieldError) as info:
            read()
        assert info.value.function == 1 and info.value.description == message


def test_unsorted_flagged_sorted_fails_at_open() -> None:
    """The binary search relies on the order, so opening checks it."""
    data = v3([replace(F0, start=F1.start + 0x10), F1])
    with pytest.raises(UnsortedError) as info:
        SFrameSection.from_bytes(data)
    assert info.value.offset == FDE_START + 16
