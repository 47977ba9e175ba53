"""Validation on the fuzz seeds and on thousands of mutations of them: it never fails, every
finding names a known rule at a place in the section (its end for what runs past it), and the
mutations reach every row and block rule (so the columns that pick the functions to look at do
pick them).  And ``pysframe info``'s covered bytes are those of
the ranges merged."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysframe import Abi, CfaRule, SFrameBuilder, SFrameError, SFrameSection, Version
from pysframe.format import lookup
from pysframe.format.findings import RULES
from pysframe.format.validate import check_structure, validate_section
from pysframe.tools import fuzz
from pysframe.tools.info import covered_bytes

SEEDS_DIR = Path(__file__).parent.parent / "data" / "fuzz-seeds"
MUTATIONS = 1500

#: Option sets: the format's rules, and everything on (text ranges around the seeds' code).
PROFILES: list[dict[str, object]] = [
    {},
    {
        "kernel": True,
        "address_gaps": True,
        "foreign_endian": True,
        "text_ranges": [(0, 0x2000), (0x4000, 0x400000)],
        "sframe_segment_address": 0,
    },
    {"relocatable": True},
]


def _compare(data: bytes, rules: Counter[str]) -> None:
    structure = check_structure(data)
    try:
        section = SFrameSection.from_bytes(data)
    except SFrameError:
        rules.update(f.rule for f in structure)
        return
    if structure:
        rules.update(f.rule for f in structure)
        return
    for profile in PROFILES:
        findings = validate_section(section, **profile)  # type: ignore[arg-type]
        for finding in findings:
            assert finding.rule in RULES, finding
            assert finding.offset is None or 0 <= finding.offset <= len(data), finding
        rules.update(f.rule for f in findings)


def test_validation_of_the_seeds_finds_nothing_unknown() -> None:
    for data in fuzz.load_seeds(SEEDS_DIR):
        _compare(data, Counter())


def test_validation_of_mutations_reaches_every_rule() -> None:
    seeds = fuzz.load_seeds(SEEDS_DIR)
    rng = random.Random(20260525)
    rules: Counter[str] = Counter()
    for _ in range(MUTATIONS):
        _compare(fuzz.mutate(rng.choice(seeds), rng, seeds), rules)
    # The mutations reach the row and block checks the bulk path looks at (not vacuous).
    for rule in ("fre-order", "fre-start", "fre-words", "fre-bounds", "fre-len", "fre-gap",
                 "fre-block-overlap", "fde-sorted", "fde-overlap", "fde-gap", "fde-text",
                 "reserved-bits", "fre-type", "fde-type", "attribute-bounds", "word-size",
                 "flex-control", "mangled-ra", "num-fres"):
        assert rules[rule] > 0, (rule, rules)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 0x300), st.integers(0, 0x40)), min_size=0, max_size=12
    ),
    st.booleans(),
)
def test_covered_bytes_are_the_ranges_merged(
    functions: list[tuple[int, int]], relocatable: bool
) -> None:
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3, sort=False)
    for start, size in functions:
        builder.add_function(0x1000 + start, size).add_row(0, CfaRule(7, 8))
    section = builder.build()
    if relocatable:
        expected = sum(size for _, size in functions)
    else:
        expected = len({pc for start, size in functions for pc in range(start, start + size)})
    assert covered_bytes(section, relocatable) == expected


def test_covered_bytes_past_the_top_of_the_address_space() -> None:
    """A function whose end is past 2**64 counts its whole size, as Python integers do."""
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3)
    top = (1 << 64) - 0x10
    builder.add_function(top - 0x40, 0x20).add_row(0, CfaRule(7, 8))
    builder.add_function(top, 0x20).add_row(0, CfaRule(7, 8))
    assert covered_bytes(builder.build(), False) == 0x40


_TOP = (1 << 64) - 1


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 0x300), st.integers(0, 0x40)), min_size=0, max_size=12),
    st.lists(st.tuples(st.integers(-0x20, 0x360), st.integers(0, 0x80)), max_size=3),
    st.booleans(),
)
def test_covered_bytes_counts_each_byte_once(
    functions: list[tuple[int, int]], within: list[tuple[int, int]], near_top: bool
) -> None:
    # Functions at 0x1000 + start, or just below 2**64 (ends up to the top itself); ``within``
    # ranges of text made not to overlap (each from the end of the one before), some starting
    # below the functions.
    base = _TOP - 0x400 if near_top else 0x1000
    starts = np.array([base + start for start, _ in functions], dtype=np.uint64)
    sizes = np.array([size for _, size in functions], dtype=np.uint64)
    text, at = [], base - 0x20
    for gap, length in within:
        low = at + max(gap, 0)
        text.append((low, min(low + length, _TOP)))
        at = text[-1][1]
    pcs = {base + start + k for start, size in functions for k in range(size)}
    inside = {pc for pc in pcs if any(low <= pc < high for low, high in text)}
    for ranges, want in ((None, len(pcs)), (text, len(inside))):
        assert lookup.covered_bytes(starts, sizes, ranges) == want


def test_covered_bytes_past_the_top_of_the_address_space_within_text() -> None:
    """Past 2**64 the exact path counts the bytes up there with no text given, none with."""
    starts = np.array([_TOP - 0x10], dtype=np.uint64)
    sizes = np.array([0x20], dtype=np.uint64)
    assert lookup.covered_bytes(starts, sizes) == 0x20
    assert lookup.covered_bytes(starts, sizes, [(_TOP - 0x8, _TOP + 0x100)]) == 0x8
