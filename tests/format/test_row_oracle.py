"""The bulk FRE readers word their own problems: cut or damaged anywhere, a section's first
row error (``scan_rows``, and so the dump, the batch lookup and conversion), its first walk
error (``locate_fres``), each function's own (``Function.rows``, the one-function path) and
the validator's row findings equal those of the oracle, which reads one FRE after the other
(tests/support/sframe_row_oracle.py)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from pysframe import SFrameError, SFrameSection
from pysframe.format.layout import HEADER_FRE_LEN_AT
from pysframe.format.validate import check_rows
from pysframe.format.walk import locate_fres, scan_rows, scan_stored_rows
from sframe_row_oracle import (
    Outcome,
    first_row_error,
    first_walk_error,
    function_row_error,
    row_findings,
)
from test_walk import _many_short_and_a_few_long

SEEDS = Path(__file__).parent.parent / "data" / "fuzz-seeds"
#: One section per architecture, version, byte order and FDE type (FLEX in the V3 x86-64).
SECTIONS = [
    "x86_64-v1-frames.sframe",
    "x86_64-v2-lib.so.sframe",
    "x86_64-v3-frames.o.sframe",
    "x86_64-v3-frames-ibt.sframe",
    "aarch64-v3-nolibc-be.o.sframe",
    "s390x-v3-frames.o.sframe",
]
#: What each byte of the FRE sub-section is damaged with: its bits flipped (data-word size
#: code, word count, reg_p and base register, mangled RA, the sign) or replaced.
DAMAGE = (
    lambda b: b ^ 0x60,
    lambda b: b ^ 0x1E,
    lambda b: b ^ 0x01,
    lambda b: b ^ 0x80,
    lambda b: 0x00,
)
#: The rules of the row checks (the others are about FDEs and FRE blocks).
ROW_RULES = {"fre-order", "fre-start", "fre-words", "flex-control", "mangled-ra", "fre-bounds",
             "word-size"}  # fmt: skip


def _outcome(action: object) -> Outcome | None:
    try:
        action()  # type: ignore[operator]
    except SFrameError as error:
        return type(error).__name__, error.message, error.offset, error.function
    return None


def _opened(data: bytes) -> SFrameSection | None:
    """The section, its FDE table read; None where the FDEs already do not decode."""
    try:
        section = SFrameSection.from_bytes(data)
        section.table  # noqa: B018
    except SFrameError:
        return None
    return section


def check_against_oracle(data: bytes, kernel: bool, each_function: bool = True) -> bool:
    """Assert that the product words every row problem of ``data`` as the oracle does (the
    validator's with the kernel's rules or the format's); whether the section opened."""
    section = _opened(data)
    if section is None:
        return False
    assert _outcome(lambda: scan_rows(section)) == first_row_error(section)
    assert _outcome(lambda: locate_fres(section)) == first_walk_error(section)
    for index in range(len(section) if each_function else 0):
        assert _outcome(lambda i=index: section[i].rows) == function_row_error(section, index)
    found = [
        (str(f.severity), f.rule, f.function, f.offset, f.message)
        for f in check_rows(section, kernel)
        if f.rule in ROW_RULES
    ]
    want, ends = row_findings(section, kernel)
    assert found == want
    assert scan_stored_rows(section).end.tolist() == ends
    return True


def _cut(data: bytes, fre_end: int, position: int) -> bytes:
    """The section cut at ``position`` of its FRE sub-section (the last), sfh_fre_len as much
    shorter."""
    damaged = bytearray(data[:position])
    at = HEADER_FRE_LEN_AT
    order = "big" if data[0] == 0xDE else "little"  # the magic 0xdee2, as stored
    fre_len = int.from_bytes(data[at : at + 4], order) - (fre_end - position)
    damaged[at : at + 4] = fre_len.to_bytes(4, order)
    return bytes(damaged)


def _flex_row_broken(data: bytes) -> bytes | None:
    """``data`` with the CFA control word of the first FLEX row naming no register (reg_p
    clear), so that its rows do not decode; None without FLEX rows."""
    section = SFrameSection.from_bytes(data)
    for function in section:
        if function.fde_type.name == "FLEX" and function.rows and function.rows[0].words:
            info_at = int(section.table.fre_data[function.index]) + function.fre_type.size
            damaged = bytearray(data)
            damaged[info_at + 1] &= ~1
            return bytes(damaged)
    return None


def _adjacent_walks_stopped(data: bytes) -> list[bytes]:
    """``data`` with the first FRE of two functions next to each other in the FDE table given
    data-word size code 3: each walk stops, one finding each."""
    section = SFrameSection.from_bytes(data)
    firsts = [
        int(section.table.fre_data[f.index]) + f.fre_type.size if f.num_rows else None
        for f in section
    ]
    out = []
    for one, other in pairwise(firsts):
        if one is not None and other is not None:
            damaged = bytearray(data)
            damaged[one] |= 0x60
            damaged[other] |= 0x60
            out.append(bytes(damaged))
    return out


def _damaged(data: bytes, positions: range) -> list[bytes]:
    """``data`` cut at each byte of ``positions`` on, and each byte there damaged; with FLEX
    rows, also cut at each byte with the first FLEX row broken (two problems: the first in
    function and FRE order is raised, whichever kind it is)."""
    fre_end = SFrameSection.from_bytes(data).header.fre_end
    out = [_cut(data, fre_end, position) for position in positions]
    broken = _flex_row_broken(data)
    if broken is not None:
        out += [_cut(broken, fre_end, position) for position in positions]
    out += _adjacent_walks_stopped(data)
    for position in positions:
        for damage in DAMAGE:
            damaged = bytearray(data)
            damaged[position] = damage(data[position])
            out.append(bytes(damaged))
    return out


@pytest.mark.parametrize("name", SECTIONS)
def test_damage_anywhere_in_the_rows_is_worded_as_the_oracle_words_it(name: str) -> None:
    data = (SEEDS / name).read_bytes()
    section = SFrameSection.from_bytes(data)
    positions = range(section.header.fre_start, section.header.fre_end)
    damaged = _damaged(data, positions)
    opened = [check_against_oracle(d, bool(n % 2)) for n, d in enumerate(damaged)]
    assert sum(opened) > len(opened) // 2


def test_damage_where_the_bulk_walk_finishes_functions_alone_is_worded_alike() -> None:
    """Forty short functions stepped together, then a long one walked alone: damage in both
    parts, every 17th byte."""
    data = _many_short_and_a_few_long([2] * 40 + [300]).data
    section = SFrameSection.from_bytes(data)
    positions = range(section.header.fre_start, len(data), 17)
    damaged = _damaged(bytes(data), positions)
    opened = [check_against_oracle(d, bool(n % 2), False) for n, d in enumerate(damaged)]
    assert sum(opened) > len(opened) // 2


@pytest.mark.parametrize("name", SECTIONS)
def test_the_oracle_finds_nothing_in_a_sound_section(name: str) -> None:
    """The oracle reads the sections it is held against: nothing wrong in the seeds, and the
    product agrees row by row."""
    data = (SEEDS / name).read_bytes()
    section = SFrameSection.from_bytes(data)
    assert first_row_error(section) is None
    assert check_against_oracle(data, False) and check_against_oracle(data, True)
