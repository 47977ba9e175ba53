"""The FRE walker: the scalar and the bulk walk agree with each other and with decoding, and
a problem is reported where decoding reports it first."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysframe import (
    Abi,
    CfaRule,
    InvalidFieldError,
    RegRule,
    SFrameError,
    SFrameSection,
    TruncatedError,
    Version,
)
from pysframe.format.builder import SFrameBuilder
from pysframe.format.decode import fre_data_position
from pysframe.format.layout import HEADER_FRE_LEN_AT
from pysframe.format.walk import FreWalk, fre_ends, fre_infos, locate_fres, scan_rows, walk_fres
from pysframe.tools.stats import word_size_counts
from pysframe.tools.validate import validate_bytes
from test_validate import F0, F1, Fn, v3

SEEDS = sorted((Path(__file__).parent.parent / "data" / "fuzz-seeds").glob("*.sframe"))


def _walk(section: SFrameSection, index: int) -> FreWalk:
    """The checked scalar walk of every FRE of function ``index``."""
    function = section[index]
    position = fre_data_position(section.header, function.fre_offset)
    return walk_fres(section.data, section.header, function.fre_type, position, function.num_rows)


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.stem)
def test_scalar_and_bulk_walks_agree_with_decoding(path: Path) -> None:
    section = SFrameSection.from_bytes(path.read_bytes())
    located = locate_fres(section)
    infos = fre_infos(section).tolist()
    scan = scan_rows(section)
    ends = fre_ends(section, located).tolist()
    assert located.row_base.tolist() == scan.row_base.tolist()
    for function in section:
        walk = _walk(section, function.index)
        assert walk.problem is None and walk.end == ends[function.index]
        rows = function.rows
        assert [fre[1:] for fre in walk.fres] == [(r.start_offset, r.info, r.words) for r in rows]
        first, end = located.row_base[function.index : function.index + 2].tolist()
        assert located.position[first:end].tolist() == [fre[0] for fre in walk.fres]
        assert infos[first:end] == [r.info for r in rows]
        assert scan.start_offset[first:end].tolist() == [r.start_offset for r in rows]
        forms = [scan.forms[form] for form in scan.form[first:end].tolist()]
        assert [(f.info, f.words) for f in forms] == [(r.info, r.words) for r in rows]


def _error_of(action: object) -> SFrameError:
    with pytest.raises(SFrameError) as caught:
        action()  # type: ignore[operator]
    return caught.value


def _same(a: SFrameError, b: SFrameError) -> bool:
    return (type(a), a.message, a.offset, a.function) == (type(b), b.message, b.offset, b.function)


#: 0x63: one 1-byte word, data-word size code 3.
BAD_SIZE = replace(F1, fres=bytes([0x00, 0x63, 0x08]))
#: 0x05: two 1-byte words, but the FRE sub-section ends after the first.
CUT_WORDS = Fn(0x1030, 0x10, bytes([0x00, 0x05, 0x10]), 1)
#: A FLEX function whose row has a single data word (the CFA needs a pair).
FLEX_ONE_WORD = replace(F0, info2=0x01, fres=bytes([0x00, 0x03, 0x08]), num_fres=1)


@pytest.mark.parametrize(
    ("functions", "kind"),
    [([F0, BAD_SIZE], InvalidFieldError), ([F0, F1, CUT_WORDS], TruncatedError)],
    ids=["word-size", "words-past-the-end"],
)
def test_a_walk_problem_is_reported_alike(functions: list[Fn], kind: type) -> None:
    section = SFrameSection.from_bytes(v3(functions))
    bad = len(functions) - 1
    decoded = _error_of(lambda: section[bad].rows)
    assert isinstance(decoded, kind) and decoded.function == bad
    for bulk in (locate_fres, fre_infos, scan_rows, word_size_counts):
        assert _same(_error_of(lambda bulk=bulk: bulk(section)), decoded), bulk.__name__
    (finding,) = [f for f in validate_bytes(v3(functions)) if f.offset == decoded.offset]
    assert finding.function == bad and decoded.message == finding.message
    assert finding.rule == ("word-size" if kind is InvalidFieldError else "fre-bounds")


def test_bulk_row_reading_raises_the_first_decoding_error() -> None:
    """A bad FLEX row in function 0 comes before a bad word size in function 1: the row scan
    decodes rows, so it raises the first; locating FREs only walks them, so the second."""
    section = SFrameSection.from_bytes(v3([FLEX_ONE_WORD, BAD_SIZE]))
    first = _error_of(lambda: section[0].rows)
    assert isinstance(first, InvalidFieldError) and "FLEX FRE with 1 data words" in first.message
    assert _same(_error_of(lambda: scan_rows(section)), first)
    assert _same(_error_of(lambda: locate_fres(section)), _error_of(lambda: section[1].rows))


def _many_short_and_a_few_long(counts: list[int]) -> SFrameSection:
    """Functions with ``counts`` rows each, in that order; the rows' CFA offsets vary so that
    their data words take 1, 2 or 4 bytes and the FREs differ in length."""
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V2)
    start = 0x10000
    for number, count in enumerate(counts):
        size = 4 * count + 4
        function = builder.add_function(start, size)
        for row in range(count):
            offset = (8, 300, 70_000)[(row + number) % 3]
            fp = RegRule.at_cfa(-16) if row % 2 else RegRule.untracked()
            function.add_row(4 * row, CfaRule(7, offset), fp)
        start += size
    return builder.build()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, 12), min_size=30, max_size=90),
    st.lists(st.integers(50, 400), max_size=4),
)
def test_bulk_walk_hands_the_last_functions_to_the_scalar_walk(
    short: list[int], long: list[int]
) -> None:
    """Enough functions for the bulk walk to step them together, then a few long ones that it
    finishes one at a time: every FRE where the checked walk finds it."""
    section = _many_short_and_a_few_long(short + long)
    located = locate_fres(section)
    for function in section:
        walk = _walk(section, function.index)
        first, end = located.row_base[function.index : function.index + 2].tolist()
        assert located.position[first:end].tolist() == [fre[0] for fre in walk.fres]


@pytest.mark.parametrize("where", ["info", "words", "address"])
def test_a_problem_in_a_function_walked_alone_is_reported_alike(where: str) -> None:
    """The bulk walk hands the long last function to the scalar walk: a bad FRE there raises
    what decoding that function raises."""
    section = _many_short_and_a_few_long([2] * 40 + [300])
    long = len(section) - 1
    fres = _walk(section, long).fres
    data = bytearray(section.data)
    if where == "info":  # FRE 250: data-word size code 3
        position = fres[250][0] + section[long].fre_type.size
        data[position] |= 0x60
    else:  # the section ends inside the last FRE's data words, or its start address
        cut = 1 if where == "words" else len(data) - fres[-1][0] - 1
        at = HEADER_FRE_LEN_AT  # sfh_fre_len
        fre_len = int.from_bytes(data[at : at + 4], "little") - cut
        data[at : at + 4] = fre_len.to_bytes(4, "little")
        data = data[:-cut]
    damaged = SFrameSection.from_bytes(bytes(data))
    decoded = _error_of(lambda: damaged[long].rows)
    assert decoded.function == long
    for bulk in (locate_fres, scan_rows):
        assert _same(_error_of(lambda bulk=bulk: bulk(damaged)), decoded), bulk.__name__
