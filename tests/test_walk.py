"""The FRE walker: the scalar and the bulk walk agree with each other and with decoding, and
a problem is reported where decoding reports it first."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pysframe import InvalidFieldError, SFrameError, SFrameSection, TruncatedError
from pysframe.format.decode import fre_data_position
from pysframe.format.walk import fre_ends, fre_infos, locate_fres, scan_rows, walk_fres
from pysframe.tools.stats import word_size_counts
from pysframe.tools.validate import validate_bytes
from test_validate import F0, F1, Fn, v3

SEEDS = sorted((Path(__file__).parent / "data" / "fuzz-seeds").glob("*.sframe"))


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.stem)
def test_scalar_and_bulk_walks_agree_with_decoding(path: Path) -> None:
    section = SFrameSection.from_bytes(path.read_bytes())
    located = locate_fres(section)
    infos = fre_infos(section).tolist()
    scan = scan_rows(section)
    ends = fre_ends(section, located).tolist()
    assert located.row_base.tolist() == scan.row_base.tolist()
    for function in section:
        walk = walk_fres(
            section.data,
            section.header,
            function.fre_type,
            fre_data_position(section.header, function.fre_offset),
            function.num_rows,
        )
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
