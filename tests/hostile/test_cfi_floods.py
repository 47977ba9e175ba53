"""CFI made to exhaust: long LEB128 operands and floods of rows are refused in time linear
in their size, as the smallest reproducers of each."""

from __future__ import annotations

import re
import time

import pytest

from pysframe.errors import CfiError
from pysframe.format.constants import Abi
from pysframe.generate import generate_from_eh_frame
from pysframe.generate.cfi import read_sleb, read_uleb
from test_cfi_units import section


@pytest.mark.parametrize("length", [200_000, 1_600_000])
def test_overlong_leb128_is_refused_at_once(length: int) -> None:
    # 0xff groups: a number of 7 * length bits (decoding it whole was quadratic).
    data = b"\xff" * length + b"\x00"
    began = time.perf_counter()
    with pytest.raises(CfiError, match="does not fit in 64 bits"):
        read_uleb(data, 0, len(data))
    assert time.perf_counter() - began < 0.5


def test_padded_leb128_stays_linear_and_exact() -> None:
    # Redundant padding groups are legal: zeros after an unsigned, ones after a negative value.
    zeros = b"\x85" + b"\x80" * 400_000 + b"\x00"
    ones = b"\xff" * 400_000 + b"\x7f"
    began = time.perf_counter()
    assert read_uleb(zeros, 0, len(zeros)) == (5, len(zeros))
    assert read_sleb(ones, 0, len(ones)) == (-1, len(ones))
    assert time.perf_counter() - began < 2.0
    top = b"\xff" * 9 + b"\x01"
    assert read_uleb(top, 0, len(top)) == ((1 << 64) - 1, 10)
    assert read_sleb(b"\x80" * 9 + b"\x7f", 0, 10) == (-(1 << 63), 10)
    with pytest.raises(CfiError):
        read_uleb(b"\xff" * 9 + b"\x03", 0, 10)  # 2**65 - 1


def test_a_flood_of_rows_is_skipped_quickly() -> None:
    # One 64-byte function whose CFA program advances 500,000 times (DW_CFA_advance_loc 1,
    # then DW_CFA_def_cfa_offset 16 each time): more rows than bytes of code.
    flood = b"\x41\x0e\x10" * 500_000
    eh_frame = section((0x2000, 64, flood), (0x3000, 16, b"\x41\x0e\x10"))
    began = time.perf_counter()
    result = generate_from_eh_frame(eh_frame, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    assert time.perf_counter() - began < 2.0
    assert [f.start for f in result.skipped] == [0x2000]
    # The program's bytes: the flood and the record's padding (DW_CFA_nop).
    assert re.search(r"CFI program of 150000\d bytes for 64 bytes of code \(malformed\)$",
                     result.skipped[0].reason)  # fmt: skip
    assert [f.start for f in result.section] == [0x3000]


def test_the_verifier_refuses_the_flood_as_quickly() -> None:
    from pysframe.generate.interpret import interpret_cfi

    flood = b"\x41\x0e\x10" * 500_000
    eh_frame = section((0x2000, 64, flood), (0x3000, 16, b"\x41\x0e\x10"))
    began = time.perf_counter()
    table = interpret_cfi(eh_frame, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    assert time.perf_counter() - began < 2.0
    assert list(table.problems) == [0]
    assert table.problems[0].endswith("bytes for 64 bytes of code (malformed)")
