"""A lookup finds a function's row by binary search (pysframe.format.lookup.RowSearch); the
oracle is libsframe's scan, sframe_find_fre (tests/support/sframe_scan.py).  They must agree on any
function, rows in order or not, PCINC or PCMASK, in every version; and a lookup in a damaged
function must raise what decoding its rows raises."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysframe import Abi, SFrameError, SFrameSection, Version
from pysframe.format.builder import SFrameBuilder
from pysframe.format.constants import Flags, FreType, PcType
from pysframe.format.encode import SectionSpec, encode_section
from pysframe.format.layout import fde_info
from pysframe.format.model import CfaRule, FrameRow, Function, RegRule
from sframe_scan import find_row_index
from test_properties import sections

#: A DEFAULT FRE with one 1-byte word (the CFA offset): info 0x02 (bit 0 base register FP,
#: bits 1-4 one word, bits 5-6 size code 0).
ONE_WORD = 0x02


def _function(
    start: int, size: int, offsets: list[int], cfa_offsets: list[int], info: int, rep_size: int
) -> Function:
    """Function 0 at ``start`` with a row at each of ``offsets`` (a DEFAULT FRE: CFA from FP
    at its entry of ``cfa_offsets``, one 1-byte word), its FDE info byte ``info``."""
    rows = tuple(
        FrameRow(
            offset,
            start + offset,
            ONE_WORD,
            (cfa,),
            CfaRule(6, cfa),
            RegRule.untracked(),
            RegRule.untracked(),
        )
        for offset, cfa in zip(offsets, cfa_offsets, strict=True)
    )
    return Function(
        index=0,
        start=start,
        size=size,
        start_field=0,
        fre_offset=0,
        num_rows=len(rows),
        info=info,
        info2=0,
        rep_size=rep_size,
        _rows=rows,
    )


@st.composite
def functions(draw: st.DrawFn) -> tuple[Version, Function]:
    """One function with any start offsets: in order, repeated, out of order, past its end."""
    version = draw(st.sampled_from(list(Version)))
    pc_type = draw(st.sampled_from(list(PcType)))
    size = draw(st.integers(0, 300))
    rep_size = 0 if version is Version.V1 else draw(st.integers(0, 40))
    offsets = draw(st.lists(st.integers(0, 320), max_size=12))
    if draw(st.booleans()):
        offsets.sort()
    fre_type = FreType.ADDR1 if max(offsets, default=0) < 0x100 else FreType.ADDR2
    start = 0x1000 + draw(st.integers(0, 31))  # V1 PCMASK rows match the address's low bits
    cfa_offsets = [8 + n % 50 for n in range(len(offsets))]
    function = _function(
        start, size, offsets, cfa_offsets, fde_info(fre_type, pc_type, 0), rep_size
    )
    return version, function


def _section(version: Version, function: Function) -> SFrameSection:
    spec = SectionSpec(version, Abi.AMD64_ENDIAN_LITTLE, Flags.FDE_SORTED, 0, -8, False)
    return SFrameSection.from_bytes(encode_section(spec, [function]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(functions())
def test_binary_search_equals_the_scan(case: tuple[Version, Function]) -> None:
    version, function = case
    section = _section(version, function)
    stored = section[0]
    rows = stored.rows
    assert [r.start_offset for r in rows] == [r.start_offset for r in function.rows]
    for pc in [*range(stored.start - 2, stored.start + 340), 0, (1 << 64) - 1]:
        inside = stored.start <= pc < stored.end  # else no function: no row
        want = find_row_index(stored, rows, version, pc) if inside else None
        found = section.find_row(pc)
        assert (None if found is None else found.row_index) == want, hex(pc)
        if found is not None and want is not None:
            assert found.row == rows[want]


def _error(read: Callable[[], object]) -> tuple[type, str, int | None] | None:
    try:
        read()
    except SFrameError as error:
        return type(error), str(error), error.offset
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4))
def test_lookup_in_a_damaged_function_raises_what_decoding_raises(
    case: tuple[SFrameBuilder, object], edits: list[tuple[int, int]]
) -> None:
    """A lookup steps through its function's FREs without decoding them: it must still fail
    when decoding the rows fails, with the same error, and else give the decoded row."""
    data = bytearray(case[0].to_bytes())
    for position, value in edits:
        if data:
            data[position % len(data)] = value
    try:
        section = SFrameSection.from_bytes(bytes(data), 0x1000)
        count = len(section)
    except SFrameError:
        return
    for index in range(count):
        try:
            function = section[index]
        except SFrameError:
            continue
        pcs = [function.start, function.start + function.size // 2, function.end - 1]
        decoded = _error(partial(getattr, function, "rows"))
        for pc in pcs:
            fresh = SFrameSection.from_bytes(bytes(data), 0x1000)  # no cached rows
            try:
                landed = fresh.find_function(pc)
            except SFrameError:  # another function's FDE is damaged
                continue
            if landed is None or landed.index != index:
                continue
            assert _error(partial(fresh.find_row, pc)) == decoded
            if decoded is None:
                found = fresh.find_row(pc)
                want = find_row_index(function, function.rows, section.version, pc)
                assert (None if found is None else found.row_index) == want
                assert found is None or found.row == function.rows[found.row_index]


#: (start offsets, function size, the row at each offset 0 .. size - 1).  A row covers
#: [its start, the next row's start - 1] (the last: to size - 1), and the scan takes the first
#: row covering the offset, unless a row before it starts past the offset (it stops there).
HAND_MADE = [
    # In order with a repeat: row 1 covers nothing.
    ([0, 4, 4, 9], 12, [0] * 4 + [2] * 5 + [3] * 3),
    # Out of order: row 0 starts past offsets 0-3, where the scan stops before row 1.
    ([4, 0, 10], 16, [None] * 4 + [1] * 6 + [2] * 6),
    # Out of order: row 1 [8, 1] covers nothing, row 2 [2, 5] is hidden by row 0 [0, 7].
    ([0, 8, 2, 6, 12], 16, [0] * 8 + [3] * 4 + [4] * 4),
]


@pytest.mark.parametrize("fre_type", list(FreType))
@pytest.mark.parametrize(("offsets", "size", "expected"), HAND_MADE)
def test_rows_in_order_and_not(
    fre_type: FreType, offsets: list[int], size: int, expected: list[int | None]
) -> None:
    start = 0x2000
    function = _function(start, size, offsets, [8] * len(offsets), fde_info(fre_type, 0, 0), 0)
    section = _section(Version.V2, function)
    found = [section.find_row(start + offset) for offset in range(size)]
    assert [None if f is None else f.row_index for f in found] == expected
    assert section.find_row(start - 1) is None and section.find_row(start + size) is None
