"""Property tests: random valid sections round-trip; arbitrary bytes raise only SFrameError."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysframe import Abi, CfaRule, RegRule, RuleKind, SFrameError, SFrameSection, Version
from pysframe.format.builder import RowSpec, SFrameBuilder
from pysframe.format.constants import DwarfReg
from pysframe.format.lookup import RULE_KINDS, SectionLookup
from sframe_scan import scan
from test_builder_convert import bulk_and_oracle

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
SMALL = st.integers(-300, 300)
OFFSET = st.one_of(SMALL, INT32)


def _s390x_cfa_offset() -> st.SearchStrategy[int]:
    return st.integers(-(1 << 20), 1 << 20).map(lambda k: 160 + 8 * k)


@st.composite
def default_rules(draw: st.DrawFn, abi: Abi, version: Version) -> RowSpec:
    """Rules with a DEFAULT encoding for ``abi`` (V2 spec 2.4, errata 1 for s390x)."""
    s390x = abi is Abi.S390X_ENDIAN_BIG
    reg = draw(st.sampled_from([DwarfReg.SP[abi], DwarfReg.FP[abi]]))
    cfa = CfaRule(reg, draw(_s390x_cfa_offset() if s390x else OFFSET))
    mangled = draw(st.booleans())
    if draw(st.integers(0, 9)) == 0:
        return RowSpec(0, None, RegRule.untracked(), RegRule.undefined(), False)
    saved = OFFSET.filter(lambda v: v != 0).map(lambda v: v & ~1 if s390x else v).filter(bool)
    if abi is Abi.AMD64_ENDIAN_LITTLE:
        fp = draw(st.one_of(st.just(RegRule.untracked()), saved.map(RegRule.at_cfa)))
        return RowSpec(0, cfa, fp, RegRule.fixed(-8), mangled)
    if abi.is_aarch64:
        if draw(st.booleans()):
            ra, fp = draw(saved.map(RegRule.at_cfa)), draw(saved.map(RegRule.at_cfa))
            if draw(st.booleans()):
                fp = RegRule.untracked()
            return RowSpec(0, cfa, fp, ra, mangled)
        return RowSpec(0, cfa, RegRule.untracked(), RegRule.untracked(), mangled)
    register = st.integers(0, 15).map(RegRule.in_register)
    options = [saved.map(RegRule.at_cfa)] + ([register] if version is Version.V2 else [])
    fp = draw(st.one_of(st.just(RegRule.untracked()), *options))
    ra_options = [st.just(RegRule.untracked()), *options]
    if fp.kind is not RuleKind.UNTRACKED:
        ra_options.append(st.just(RegRule.padding()))
    ra = draw(st.one_of(*ra_options))
    if ra.kind is RuleKind.UNTRACKED and fp.kind is not RuleKind.UNTRACKED:
        ra = RegRule.padding()
    return RowSpec(0, cfa, fp, ra, mangled)


@st.composite
def flex_rules(draw: st.DrawFn, abi: Abi) -> RowSpec:
    """Rules only a V3 FLEX FDE can hold: CFA from any register or dereferenced, pairs."""
    s390x = abi is Abi.S390X_ENDIAN_BIG
    cfa = CfaRule(
        draw(st.integers(0, 40)),
        draw(_s390x_cfa_offset() if s390x else OFFSET),
        draw(st.booleans()),
    )
    pair = st.builds(
        RegRule,
        st.sampled_from([RuleKind.SAVED, RuleKind.VALUE]),
        OFFSET,
        st.one_of(st.none(), st.integers(0, 40)),
    )
    ra_pair = pair.filter(lambda r: not (r.kind is RuleKind.VALUE and r.reg is None))
    fixed_ra = RegRule.fixed(-8) if abi is Abi.AMD64_ENDIAN_LITTLE else RegRule.untracked()
    fp = draw(st.one_of(st.just(RegRule.untracked()), pair))
    ra_choices = [st.just(fixed_ra), ra_pair]
    if fp.kind is not RuleKind.UNTRACKED:
        ra_choices.append(st.just(RegRule.padding()))
    ra = draw(st.one_of(*ra_choices))
    if ra.kind is not RuleKind.PADDING and ra == fixed_ra and fp.kind is not RuleKind.UNTRACKED:
        ra = RegRule.padding()
    return RowSpec(0, cfa, fp, ra, draw(st.booleans()))


@st.composite
def sections(draw: st.DrawFn) -> tuple[SFrameBuilder, list[list[RowSpec]]]:
    abi = draw(st.sampled_from(list(Abi)))
    version = draw(st.sampled_from(list(Version)))
    big_endian = draw(st.booleans())
    # V1/V2 store starts in 32 bits: keep code and section within 2 GiB of each other.
    section_address = draw(st.integers(0, 1 << 30))
    builder = SFrameBuilder(abi, version, big_endian=big_endian, section_address=section_address)
    expected: list[list[RowSpec]] = []
    address = draw(st.integers(0, 1 << 30))
    for _ in range(draw(st.integers(0, 6))):
        size = draw(st.sampled_from([1, 0x40, 0xFF, 0x100, 0x1234, 0x10000, 0x20000]))
        function = builder.add_function(address, size)
        address += size + draw(st.integers(0, 64))
        use_flex = version is Version.V3 and draw(st.booleans())
        offsets = sorted(draw(st.sets(st.integers(0, size - 1), max_size=5)))
        rows = []
        for offset in offsets:
            spec = draw(flex_rules(abi) if use_flex else default_rules(abi, version))
            if spec.ra.kind is RuleKind.UNDEFINED:
                function.add_undefined_ra_row(offset)
            else:
                function.add_row(offset, spec.cfa, spec.fp, spec.ra, mangled_ra=spec.mangled_ra)
            rows.append(RowSpec(offset, spec.cfa, spec.fp, spec.ra, spec.mangled_ra))
        expected.append(rows)
    return builder, expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections())
def test_decode_of_encode_gives_the_rules_back(
    case: tuple[SFrameBuilder, list[list[RowSpec]]],
) -> None:
    builder, expected = case
    data = builder.to_bytes()
    section = SFrameSection.from_bytes(data, builder.section_address)
    assert section.version is builder.version and section.big_endian == builder.big_endian
    assert len(section) == len(expected)
    for function, rows in zip(section, expected, strict=True):
        got = [
            RowSpec(r.start_offset, r.cfa, r.fp, r.ra, r.mangled_ra and not r.ra_undefined)
            for r in function.rows
        ]
        want = [
            RowSpec(
                r.offset, r.cfa, r.fp, r.ra, r.mangled_ra and r.ra.kind is not RuleKind.UNDEFINED
            )
            for r in rows
        ]
        assert got == want
    assert section.to_bytes() == data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections(), st.data())
def test_lookups_are_libsframes(
    case: tuple[SFrameBuilder, list[list[RowSpec]]], data: st.DataObject
) -> None:
    """One PC and many: the function and row libsframe's scan finds (tests/support/sframe_scan.py),
    and the row's rules as decoding gives them."""
    builder, _ = case
    section = builder.build()
    if len(section) == 0:
        return
    start, end = int(section.table.start[0]), int(section[len(section) - 1].end)
    pcs = data.draw(st.lists(st.integers(max(start - 4, 0), end + 4), min_size=1, max_size=40))
    batch = section.find_rows(np.array(pcs, dtype=np.uint64))
    for i, pc in enumerate(pcs):
        want = scan(section, pc)
        found = section.find_row(pc)
        assert (None if found is None else (found.function.index, found.row_index)) == want
        if want is None:
            assert batch.row_index[i] == -1
            continue
        assert (batch.function_index[i], batch.row_index[i]) == want
        row = section[want[0]].rows[want[1]]
        assert found is not None and found.row == row
        assert RULE_KINDS[batch.ra_kind[i]] is row.ra.kind and batch.ra_offset[i] == row.ra.offset
        assert RULE_KINDS[batch.fp_kind[i]] is row.fp.kind and batch.fp_offset[i] == row.fp.offset
        if row.cfa is not None:
            assert (batch.cfa_reg[i], batch.cfa_offset[i]) == (row.cfa.reg, row.cfa.offset)
            assert bool(batch.cfa_deref[i]) == row.cfa.deref


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections(), st.integers(0, 2**32))
def test_batch_lookup_of_many_unordered_pcs_is_libsframes(
    case: tuple[SFrameBuilder, list[list[RowSpec]]], seed: int
) -> None:
    """Enough unordered PCs (inside, around and far outside the section) for find_rows to
    sort them first; every answer is the one libsframe's scan finds, with its row's rules."""
    rng = random.Random(seed)
    section = case[0].build()
    if len(section) == 0:
        return
    start, end = int(section.table.start[0]), int(section[len(section) - 1].end)
    near = [rng.randint(max(start - 8, 0), end + 8) for _ in range(1500)]
    far = [0, 1, (1 << 64) - 1, (1 << 63) + 5, end + (1 << 40)]
    pcs = near + far + near[:50]
    rng.shuffle(pcs)
    batch = section.find_rows(np.array(pcs, dtype=np.uint64))
    for one in sorted(set(pcs)):
        want = scan(section, one)
        where = [i for i, pc in enumerate(pcs) if pc == one]
        assert (batch.row_index[where] == (-1 if want is None else want[1])).all()
        assert (batch.function_index[where] == (-1 if want is None else want[0])).all()
        if want is None:
            continue
        row = section[want[0]].rows[want[1]]
        assert (RULE_KINDS[batch.ra_kind[where[0]]], batch.ra_offset[where[0]]) == (
            row.ra.kind, row.ra.offset)
        assert (RULE_KINDS[batch.fp_kind[where[0]]], batch.fp_offset[where[0]]) == (
            row.fp.kind, row.fp.offset)
        if row.cfa is not None:
            assert batch.cfa_offset[where[0]] == row.cfa.offset


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections(), st.sampled_from(list(Version)), st.booleans())
def test_conversion_keeps_every_rule_or_says_why(
    case: tuple[SFrameBuilder, list[list[RowSpec]]], version: Version, big_endian: bool
) -> None:
    section = case[0].build()
    try:
        converted = section.convert(version, big_endian=big_endian, pcmask_rep_size=16)
    except SFrameError as error:
        assert "function" in str(error) or "V1" in str(error)
        return
    assert converted.version is version
    for before, after in zip(section, converted, strict=True):
        assert (before.start, before.size) == (after.start, after.size)
        assert [(r.start_offset, r.cfa, r.fp, r.ra) for r in before.rows] == [
            (r.start_offset, r.cfa, r.fp, r.ra) for r in after.rows
        ]


def _exercise(data: bytes) -> None:
    try:
        section = SFrameSection.from_bytes(data, 0x1000)
        for function in section:
            function.rows  # noqa: B018
        for pc in (0, 0x1000, 0x1010, 1 << 40):
            section.find_row(pc)
        section.find_rows(np.arange(0x1000, 0x1100, 7, dtype=np.uint64))
        section.to_bytes()
    except SFrameError:
        pass


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_sframe_error(data: bytes) -> None:
    _exercise(data)


@settings(max_examples=1000, deadline=None)
@given(st.binary(min_size=4, max_size=160), st.sampled_from([1, 2, 3]), st.booleans())
def test_arbitrary_bodies_behind_a_valid_preamble(body: bytes, version: int, big: bool) -> None:
    magic = b"\xde\xe2" if big else b"\xe2\xde"
    _exercise(magic + bytes([version]) + body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6))
def test_corrupted_valid_sections_raise_only_sframe_error(
    case: tuple[SFrameBuilder, list[list[RowSpec]]], edits: list[tuple[int, int]]
) -> None:
    data = bytearray(case[0].to_bytes())
    for position, value in edits:
        if data:
            data[position % len(data)] = value
    _exercise(bytes(data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sections(),
    st.sampled_from(list(Version)),
    st.booleans(),
    st.sampled_from([None, 8, 16]),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
)
def test_bulk_conversion_equals_one_function_at_a_time(
    case: tuple[SFrameBuilder, list[list[RowSpec]]],
    version: Version,
    big_endian: bool,
    rep_size: int | None,
    edits: list[tuple[int, int]],
) -> None:
    """SFrameSection.convert (rows in bulk, format.convert.convert_rows) gives the bytes, or
    the error, of the oracle (tests/support/convert_oracle.py), on valid and damaged
    sections alike."""
    data = bytearray(case[0].to_bytes())
    for position, value in edits:
        data[position % len(data)] = value
    try:
        section = SFrameSection.from_bytes(bytes(data))
    except SFrameError:
        return
    bulk, oracle = bulk_and_oracle(
        section, version, big_endian=big_endian, pcmask_rep_size=rep_size
    )
    assert bulk == oracle


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections(), st.data())
def test_lookups_of_a_checked_section_are_find_rows(
    case: tuple[SFrameBuilder, list[list[RowSpec]]], data: st.DataObject
) -> None:
    """find_rows_of_checked answers as find_rows does, column by column and type by type:
    the first PCs one by one (find_row), then, past its threshold, from the table; PCs
    beyond 64 bits too."""
    section = case[0].build()
    if len(section) == 0:
        return
    start, end = int(section.table.start[0]), int(section[len(section) - 1].end)
    near = st.integers(max(start - 4, 0), end + 4)
    checked = SectionLookup(section.lookup.data, section.lookup.section_address)
    for size in (1, 20, 80):  # 64 one by one, then the table (ONE_BY_ONE_PCS)
        pcs = data.draw(st.lists(st.one_of(near, st.sampled_from([-1, 1 << 64, 1 << 70])),
                                 min_size=size, max_size=size))  # fmt: skip
        got, want = checked.find_rows_of_checked(pcs), section.find_rows(pcs)
        for name in type(want).__dataclass_fields__:
            mine, theirs = getattr(got, name), getattr(want, name)
            assert mine.dtype == theirs.dtype and mine.tolist() == theirs.tolist(), name
