"""Malformed input: each kind of damage raises its SFrameError subclass, naming the offset."""

from __future__ import annotations

import struct
import time
import tracemalloc
from collections.abc import Callable

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
)
from test_decode_units import header, v1_amd64, v3_section


def test_short_preamble() -> None:
    with pytest.raises(TruncatedError, match="shorter than the 4-byte preamble") as info:
        SFrameSection.from_bytes(b"\xe2\xde")
    assert info.value.offset == 0


def test_bad_magic() -> None:
    with pytest.raises(BadMagicError, match="bad SFrame magic 1234"):
        SFrameSection.from_bytes(b"\x12\x34\x02\x00" + bytes(24))


def test_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError, match="unsupported SFrame version 9") as info:
        SFrameSection.from_bytes(b"\xe2\xde\x09\x00" + bytes(24))
    assert info.value.offset == 2


def test_truncated_header() -> None:
    with pytest.raises(TruncatedError, match="shorter than the 28-byte header"):
        SFrameSection.from_bytes(v1_amd64()[:20])


def test_truncated_auxiliary_header() -> None:
    data = header("<", 3, 5, 3, 0, -8, 0, 0, 0, 0, 0, aux=b"")
    data = data[:7] + b"\x10" + data[8:]  # sfh_auxhdr_len = 16, but nothing follows
    with pytest.raises(TruncatedError, match="auxiliary header of 16 bytes"):
        SFrameSection.from_bytes(data)


def test_unknown_abi() -> None:
    data = bytearray(v1_amd64())
    data[4] = 9  # sfh_abi_arch
    with pytest.raises(InvalidFieldError, match="unknown ABI/arch identifier 9"):
        SFrameSection.from_bytes(bytes(data))


def test_fde_table_past_the_end() -> None:
    with pytest.raises(OutOfBoundsError, match="FDE sub-section") as info:
        SFrameSection.from_bytes(v1_amd64()[:40])
    assert info.value.offset == 0x14


def test_fre_subsection_past_the_end() -> None:
    with pytest.raises(OutOfBoundsError, match="FRE sub-section"):
        SFrameSection.from_bytes(v1_amd64()[:-1])


def test_billions_of_fdes_fail_fast_without_allocating() -> None:
    data = header("<", 3, 5, 3, 0, -8, 4_000_000_000, 4_000_000_000, 0xFFFFFFF0, 0, 0)
    tracemalloc.start()
    began = time.perf_counter()
    with pytest.raises(OutOfBoundsError, match="4000000000 FDEs"):
        SFrameSection.from_bytes(data + bytes(64))
    elapsed = time.perf_counter() - began
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # Generous bound: the machine may be busy; a loop over the claimed count would take minutes.
    assert elapsed < 2.0 and peak < 1 << 20


def expect_function_error(
    data: bytes, error: type[SFrameError], match: str, offset: int | None
) -> None:
    """Opening reads only the lookup index; the bad function fails when it is read, by index
    or by a lookup, and every whole-table operation fails on it."""
    section = SFrameSection.from_bytes(data)
    pc = int(section.starts[0])
    readers: list[Callable[[], object]] = [
        lambda: section[0],
        lambda: section.find_function(pc),
        lambda: list(section),
        lambda: section.table,
        lambda: section.find_rows([pc]),
    ]
    for read in readers:
        with pytest.raises(error, match=match) as info:
            read()
        assert info.value.offset == offset


def test_fre_count_that_does_not_fit() -> None:
    data = bytearray(v1_amd64())
    struct.pack_into("<I", data, 28 + 12, 1000)  # sfde_func_num_fres = 1000
    expect_function_error(bytes(data), OutOfBoundsError, "1000 FREs at FRE offset 0 do not fit", 28)


def test_invalid_fre_type() -> None:
    data = bytearray(v1_amd64())
    data[28 + 16] = 0x03  # sfde_func_info: FRE type 3
    expect_function_error(bytes(data), InvalidFieldError, "invalid FRE type 3", None)


def test_invalid_word_size_is_found_when_rows_are_decoded() -> None:
    data = bytearray(v1_amd64())
    data[28 + 17 + 1] = 0x63  # FRE0 info: word size code 3
    section = SFrameSection.from_bytes(bytes(data))
    with pytest.raises(InvalidFieldError, match="invalid data-word size code 3") as info:
        section[0].rows  # noqa: B018
    assert info.value.offset == 28 + 17 + 1
    with pytest.raises(InvalidFieldError):
        section.find_rows([0x1000])


def test_truncated_fre_words() -> None:
    data = bytearray(v1_amd64())
    data[28 + 17 + 1] = 0x1F  # FRE0 info: 15 words of 1 byte, more than the sub-section holds
    section = SFrameSection.from_bytes(bytes(data))
    with pytest.raises(TruncatedError, match="data words of FRE"):
        section[0].rows  # noqa: B018


def test_unsorted_table_flagged_sorted() -> None:
    fres = bytes([0x00, 0x03, 0x08])
    fdes = struct.pack("<iIIIB", 0x2000, 16, 0, 1, 0) + struct.pack("<iIIIB", 0x1000, 16, 0, 1, 0)
    data = header("<", 1, 1, 3, 0, -8, 2, 2, len(fres), 0, len(fdes)) + fdes + fres
    with pytest.raises(UnsortedError, match="function 1 starts at 0x1000") as info:
        SFrameSection.from_bytes(data)
    assert info.value.offset == 28 + 17


def test_v3_attribute_record_outside() -> None:
    data = bytearray(v3_section(bytes([0, 3, 8]), num_fres=1))
    struct.pack_into("<I", data, 28 + 12, 500)  # func_start_fre_off past the FRE sub-section
    expect_function_error(
        bytes(data), OutOfBoundsError, "attribute record at FRE offset 500", 28 + 12
    )


def test_invalid_flex_words() -> None:
    # A FLEX row whose third word (the RA padding) is not zero, one with a zero RA control
    # word in an RA pair, and one whose CFA control word names no register.
    for words in (
        bytes([0x06, 0x39, 0x08, 0x07]),
        bytes([0x08, 0x39, 0x08, 0x00, 0x10]),
        bytes([0x04, 0x38, 0x08]),
    ):
        data = v3_section(bytes([0x00]) + words, info2=1, num_fres=1)
        section = SFrameSection.from_bytes(data)
        with pytest.raises(InvalidFieldError, match="FLEX FRE"):
            section[0].rows  # noqa: B018


def test_every_error_is_an_sframe_error() -> None:
    for cls in (BadMagicError, TruncatedError, OutOfBoundsError, InvalidFieldError, UnsortedError):
        assert issubclass(cls, SFrameError)
