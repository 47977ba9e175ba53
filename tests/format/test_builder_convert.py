"""The builder's encoding choices (as GNU as makes them) and conversion between versions."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from conftest import CORPUS
from convert_oracle import convert_one_by_one
from pysframe import (
    Abi,
    CfaRule,
    ConversionError,
    EncodeError,
    FdeType,
    Flags,
    FreType,
    PcType,
    RegRule,
    RuleKind,
    SFrameError,
    SFrameSection,
    Version,
    WordSize,
)
from pysframe.format.builder import (
    SFrameBuilder,
    fre_type_for,
    fre_type_for_size,
    fre_types_for_sizes,
    row_spec,
)
from pysframe.format.layout import V3_MAX_FRES

AMD64 = Abi.AMD64_ENDIAN_LITTLE


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (1, FreType.ADDR1),
        (0xFF, FreType.ADDR1),
        (0x100, FreType.ADDR2),
        (0xFFFF, FreType.ADDR2),
        (0x10000, FreType.ADDR4),
    ],
)
def test_fre_type_follows_function_size(size: int, expected: FreType) -> None:
    # gas: size < 0x100 -> ADDR1, < 0x10000 -> ADDR2, else ADDR4 (sframe_calc_fre_type).
    assert fre_type_for(size) is expected
    assert fre_type_for_size(size) is expected
    assert fre_types_for_sizes(np.array([size], dtype=np.int64)).tolist() == [int(expected)]


def test_fre_types_for_sizes_match_the_scalar_rule_around_every_limit() -> None:
    # The bulk rule (generate's bulk path, compact) and the scalar one (builder, generate's
    # row path, PLT) give one answer on each side of 0x100 and 0x10000 and at the ends.
    sizes = [0, 1, 0xFF, 0x100, 0x101, 0xFFFF, 0x10000, 0x10001, 0xFFFFFFFF]
    bulk = fre_types_for_sizes(np.array(sizes, dtype=np.int64)).tolist()
    assert bulk == [int(fre_type_for_size(size)) for size in sizes]
    assert bulk == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_fre_type_takes_the_last_row_offset_and_stops_at_32_bits() -> None:
    # A row past the function's end widens the type (FreType.ADDR2 for a row at +0x100 of a
    # 16-byte function); one at 2**32 fits no FRE start address.
    assert fre_type_for(16, 0x100) is FreType.ADDR2
    assert fre_type_for(0xFFFFFFFF) is FreType.ADDR4
    with pytest.raises(EncodeError, match="32-bit FRE start address"):
        fre_type_for(16, 1 << 32)


@pytest.mark.parametrize(
    ("offset", "size"),
    [
        (127, WordSize.B1),
        (-128, WordSize.B1),
        (128, WordSize.B2),
        (-32769, WordSize.B4),
        (70016, WordSize.B4),
    ],
)
def test_word_size_is_the_smallest_signed_fit(offset: int, size: WordSize) -> None:
    builder = SFrameBuilder(AMD64)
    builder.add_function(0, 16).add_row(0, CfaRule(7, offset))
    assert builder.build()[0].rows[0].word_size is size


def test_functions_are_sorted_and_flags_set() -> None:
    builder = SFrameBuilder(AMD64, Version.V3)
    builder.add_function(0x2000, 16).add_row(0, CfaRule(7, 8))
    builder.add_function(0x1000, 16).add_row(0, CfaRule(7, 8))
    section = builder.build()
    assert [f.start for f in section] == [0x1000, 0x2000]
    assert section.flags == Flags.FDE_SORTED | Flags.FDE_FUNC_START_PCREL
    assert SFrameBuilder(AMD64, Version.V2).build().flags == Flags.FDE_SORTED
    with pytest.raises(EncodeError, match="V1 has no FDE_FUNC_START_PCREL"):
        SFrameBuilder(AMD64, Version.V1, pcrel=True)


def test_flex_is_chosen_only_when_needed() -> None:
    builder = SFrameBuilder(AMD64, Version.V3)
    builder.add_function(0x1000, 16).add_row(0, CfaRule(7, 8))
    drap = builder.add_function(0x2000, 16)
    drap.add_row(0, CfaRule(10, 0))
    section = builder.build()
    assert [f.fde_type for f in section] == [FdeType.DEFAULT, FdeType.FLEX]
    v2 = SFrameBuilder(AMD64, Version.V2)
    v2.add_function(0x2000, 16).add_row(0, CfaRule(10, 0))
    with pytest.raises(EncodeError, match="need a FLEX FDE, which SFrame V2 does not have"):
        v2.to_bytes()


def test_rows_must_increase() -> None:
    function = SFrameBuilder(AMD64).add_function(0, 16)
    function.add_row(4, CfaRule(7, 8))
    with pytest.raises(EncodeError, match="does not follow"):
        function.add_row(4, CfaRule(7, 16))


def test_pcmask_function() -> None:
    builder = SFrameBuilder(AMD64, Version.V2)
    plt = builder.add_function(0x1030, 0x60, pc_type=PcType.MASK, rep_size=16)
    plt.add_row(0, CfaRule(7, 8)).add_row(11, CfaRule(7, 16))
    section = builder.build()
    assert section.find_row(0x1030 + 0x20 + 12).row.cfa == CfaRule(7, 16)  # type: ignore[union-attr]


def test_s390x_needs_cfa_offsets_of_160_plus_eight_k() -> None:
    builder = SFrameBuilder(Abi.S390X_ENDIAN_BIG, Version.V3)
    builder.add_function(0, 16).add_row(0, CfaRule(15, 161))
    with pytest.raises(EncodeError, match="not 160 plus a multiple of 8"):
        builder.to_bytes()


def _sections() -> list[tuple[Path, SFrameSection]]:
    out = []
    for path in sorted(CORPUS.glob("*/v*/*")):
        if path.suffix == ".txt":
            continue
        with path.open("rb") as stream:
            sec = ELFFile(stream).get_section_by_name(".sframe")
            out.append((path, SFrameSection.from_bytes(sec.data(), sec["sh_addr"])))
    return out


def test_builder_reproduces_gnu_bytes() -> None:
    """Rebuilding every corpus section from its rules gives GNU's exact FRE info bytes and
    data words (as 2.40, 2.44, 2.47; x86-64, AArch64 with PAC, s390x, both byte orders), and,
    for the objects GNU as wrote, its FDE info bytes (ld gives its own PLT FDEs another FRE
    type than the function size asks for)."""
    for path, original in _sections():
        header = original.header
        builder = SFrameBuilder(
            header.abi,
            header.version,
            big_endian=header.big_endian,
            cfa_fixed_fp_offset=header.cfa_fixed_fp_offset,
            cfa_fixed_ra_offset=header.cfa_fixed_ra_offset,
            sort=False,
        )
        v3 = header.version is Version.V3
        for function in original:
            rebuilt = builder.add_function(
                function.start,
                function.size,
                pc_type=function.pc_type,
                rep_size=function.rep_size,
                pauth_key=function.pauth_key,
                signal_frame=function.signal_frame if v3 else False,
                fde_type=function.fde_type if v3 else None,
            )
            for row in function.rows:
                spec = row_spec(row)
                rebuilt.add_row(spec.offset, spec.cfa, spec.fp, spec.ra, mangled_ra=spec.mangled_ra)
        section = builder.build()
        for before, after in zip(original, section, strict=True):
            assert [(r.info, r.words) for r in before.rows] == [
                (r.info, r.words) for r in after.rows
            ], (path, before.index)
            if path.suffix == ".o":
                assert (before.info, before.info2) == (after.info, after.info2), path


@pytest.mark.parametrize("target", list(Version))
def test_convert_corpus_keeps_rules(target: Version) -> None:
    converted = 0
    for path, section in _sections():
        try:
            result = section.convert(target, pcmask_rep_size=16)
        except ConversionError as error:
            # Only FLEX functions (x86-64 V3 DRAP) or V1's missing rep_size may refuse.
            assert "FLEX" in str(error) or "rep_size" in str(error), path
            continue
        converted += 1
        for before, after in zip(section, result, strict=True):
            assert (before.start, before.size, before.pc_type) == (
                after.start,
                after.size,
                after.pc_type,
            )
            assert [(r.start_offset, r.cfa, r.fp, r.ra, r.mangled_ra) for r in before.rows] == [
                (r.start_offset, r.cfa, r.fp, r.ra, r.mangled_ra) for r in after.rows
            ]
    assert converted >= 20


def test_convert_names_the_function() -> None:
    for path, section in _sections():
        if (
            path.name == "frames.o"
            and path.parent.name == "v3"
            and path.parent.parent.name == "x86_64"
        ):
            with pytest.raises(ConversionError, match=r"function 7 at 0x8c has a FLEX FDE"):
                section.convert(Version.V2)
            return
    pytest.fail("corpus file missing")


def test_convert_v1_pcmask_needs_rep_size() -> None:
    section = next(s for p, s in _sections() if p.parent.name == "v1" and p.name == "frames")
    with pytest.raises(ConversionError, match="PCMASK FDE; V1 stores no rep_size"):
        section.convert(Version.V3)
    converted = section.convert(Version.V3, pcmask_rep_size=16)
    plt = next(f for f in converted if f.pc_type is PcType.MASK)
    assert plt.rep_size == 16


def test_convert_byte_order_round_trip() -> None:
    for _, section in _sections():
        if any(f.fde_type is FdeType.FLEX for f in section):
            continue
        swapped = section.convert(
            section.version, big_endian=not section.big_endian, pcmask_rep_size=16
        )
        assert swapped.big_endian != section.big_endian
        back = swapped.convert(section.version, big_endian=section.big_endian, pcmask_rep_size=16)
        assert back.to_bytes() == section.to_bytes()[: len(back.to_bytes())]


def test_undefined_ra_row() -> None:
    builder = SFrameBuilder(Abi.AARCH64_ENDIAN_LITTLE)
    builder.add_function(0, 8).add_row(0, CfaRule(31, 0)).add_undefined_ra_row(4)
    row = builder.build()[0].rows[1]
    assert row.ra.kind is RuleKind.UNDEFINED and row.words == () and row.info == 0
    assert RegRule.undefined() == row.ra


# -- PCMASK functions and V1's lookup (libsframe 2.40 matches the address's low four bits) -----


def _pcmask_section(start: int, size: int, rep_size: int, offsets: list[int]) -> SFrameSection:
    from pysframe.format.constants import PcType
    from pysframe.format.model import CfaRule

    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V2, pcrel=False)
    function = builder.add_function(start, size, pc_type=PcType.MASK, rep_size=rep_size)
    for number, offset in enumerate(offsets):
        function.add_row(offset, CfaRule(7, 8 * (number + 1)))
    return builder.build()


def test_pcmask_rows_that_v1_would_match_differently_refuse() -> None:
    # 8-byte blocks, rows at 0 and 4: at 0x1008 V2 matches row 0 ((pc - start) % 8 = 0),
    # V1 row 1 (0x1008 & 0xf = 8 lies in row 1's [4, 15]).
    section = _pcmask_section(0x1000, 0x20, 8, [0, 4])
    assert section.find_row(0x1008) is not None
    assert section.find_row(0x1008).row.cfa.offset == 8  # type: ignore[union-attr]
    with pytest.raises(ConversionError, match=r"function 0 at 0x1000 .* at 0x1008 row 0 becomes 1"):
        section.convert(Version.V1)


def test_pcmask_rows_v1_matches_alike_convert_and_keep_every_pc() -> None:
    # 16-byte aligned PLT entries (rows at 0 and 11, as GNU ld writes .plt), and one 8-byte
    # .plt.got entry: V1 finds the same row at every PC.
    for start, size, rep_size, offsets in ((0x1030, 0x60, 16, [0, 11]), (0x1090, 8, 8, [0])):
        section = _pcmask_section(start, size, rep_size, offsets)
        converted = section.convert(Version.V1)
        for pc in range(start - 1, start + size + 1):
            before, after = section.find_row(pc), converted.find_row(pc)
            assert (before and before.row.cfa) == (after and after.row.cfa), hex(pc)


def test_v1_pcmask_to_v2_with_another_rep_size_refuses() -> None:
    section = _pcmask_section(0x1000, 0x20, 16, [0, 11]).convert(Version.V1)
    assert section.convert(Version.V2, pcmask_rep_size=16).find_row(0x101B) is not None
    with pytest.raises(ConversionError, match="would match differently"):
        section.convert(Version.V2, pcmask_rep_size=8)


def bulk_and_oracle(
    section: SFrameSection, target: Version, **options: Any
) -> tuple[object, object]:
    """SFrameSection.convert (rows in bulk) and the oracle (one function and row at a time,
    tests/support/convert_oracle.py) of a fresh copy of ``section`` each: the converted
    bytes, or the error's type and fields."""

    def outcome(convert: Callable[[SFrameSection], bytes]) -> object:
        try:
            return convert(SFrameSection.from_bytes(section.data, section.section_address))
        except SFrameError as error:
            return type(error), error.message, error.offset, error.function

    def oracle(copy: SFrameSection) -> bytes:
        return convert_one_by_one(copy, target, **options)

    return outcome(lambda copy: bytes(copy.convert(target, **options).data)), outcome(oracle)


@pytest.mark.parametrize("target", list(Version))
def test_bulk_conversion_of_the_corpus_equals_one_function_at_a_time(target: Version) -> None:
    """The same bytes, or the same error, on every section of the corpus."""
    for _, section in _sections():
        for rep_size in (None, 16):
            bulk, oracle = bulk_and_oracle(section, target, pcmask_rep_size=rep_size)
            assert bulk == oracle


def _mixed_functions() -> SFrameSection:
    """V2, functions added out of address order: rows of the same form in several functions,
    FP saved, RA undefined (no words), 1-, 2- and 4-byte words, a function without rows and
    one of 2-byte row starts."""
    builder = SFrameBuilder(AMD64, Version.V2)
    builder.add_function(0x3000, 0x40).add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16))
    builder.add_function(0x1000, 0x20)
    long = builder.add_function(0x2000, 0x400)
    long.add_row(0, CfaRule(7, 8)).add_row(0x104, CfaRule(6, 16), RegRule.at_cfa(-16))
    long.add_row(0x200, CfaRule(7, 0x1000)).add_row(0x300, CfaRule(7, 70_000))
    builder.add_function(0x4000, 8).add_row(0, CfaRule(7, 8)).add_undefined_ra_row(4)
    return builder.build()


def _v1_pcmask() -> SFrameSection:
    """V1, a PLT-like PCMASK function (rows at 0 and 11) after a plain one: V1 stores no
    rep_size."""
    builder = SFrameBuilder(AMD64, Version.V1)
    builder.add_function(0x1000, 0x20).add_row(0, CfaRule(7, 8))
    plt = builder.add_function(0x1030, 0x60, pc_type=PcType.MASK)
    plt.add_row(0, CfaRule(7, 8)).add_row(11, CfaRule(7, 16))
    return builder.build()


def _v3_flex_then_signal_frame() -> SFrameSection:
    """V3: a plain function, a FLEX one (CFA from r10, DRAP), a signal frame."""
    builder = SFrameBuilder(AMD64, Version.V3)
    builder.add_function(0x1000, 0x40).add_row(0, CfaRule(7, 8))
    builder.add_function(0x2000, 0x40).add_row(0, CfaRule(7, 8)).add_row(4, CfaRule(10, 0))
    builder.add_function(0x3000, 0x40, signal_frame=True).add_row(0, CfaRule(7, 8))
    return builder.build()


def _v3_pcmask_then_signal_frame() -> SFrameSection:
    """V3: a plain function, a PCMASK one of 8-byte blocks with rows at 0 and 4 (at 8 into a
    block V1 would match row 1, by the address's low four bits), a signal frame."""
    builder = SFrameBuilder(AMD64, Version.V3)
    builder.add_function(0x1000, 0x40).add_row(0, CfaRule(7, 8))
    masked = builder.add_function(0x2000, 0x20, pc_type=PcType.MASK, rep_size=8)
    masked.add_row(0, CfaRule(7, 8)).add_row(4, CfaRule(7, 16))
    builder.add_function(0x3000, 0x40, signal_frame=True).add_row(0, CfaRule(7, 8))
    return builder.build()


def _s390x_registers_in_registers() -> SFrameSection:
    """s390x V2: a plain function, then two whose second row keeps FP and RA in registers
    (V2's low-bit form; V1 and V3 need a FLEX FDE for them)."""
    builder = SFrameBuilder(Abi.S390X_ENDIAN_BIG, Version.V2)
    builder.add_function(0x1000, 0x40).add_row(0, CfaRule(15, 160))
    for start in (0x2000, 0x3000):
        function = builder.add_function(start, 0x40).add_row(0, CfaRule(15, 160))
        function.add_row(4, CfaRule(15, 168), RegRule.in_register(0), RegRule.in_register(1))
    return builder.build()


def _undecodable_row() -> SFrameSection:
    """V2, two functions of two rows; the second row of the second function has the
    data-word size code 3, which no version defines."""
    builder = SFrameBuilder(AMD64, Version.V2)
    builder.add_function(0x1000, 0x40).add_row(0, CfaRule(7, 8)).add_row(4, CfaRule(7, 16))
    second = builder.add_function(0x2000, 0x40).add_row(0, CfaRule(7, 8))
    second.add_row(4, CfaRule(6, 16), RegRule.at_cfa(-16))
    data = bytearray(builder.to_bytes())
    # FRE sub-section (ADDR1 FREs, 1-byte words): function 0's rows at 0 and 3 (start, info,
    # one word), function 1's at 6 and 9 (start, info, two words): the info byte at 10.
    info = len(data) - 13 + 10
    assert data[info] == 0x04  # CFA from FP, 2 words of 1 byte
    data[info] |= 0x60  # data-word size code 3
    return SFrameSection.from_bytes(bytes(data))


#: Each case and, converted to V1, V2, V3 (no pcmask_rep_size, byte order kept), what its
#: error says (a pattern), or None when it converts.
CONVERSION_CASES: dict[str, tuple[Callable[[], SFrameSection], tuple[str | None, ...]]] = {
    "mixed functions": (_mixed_functions, (None, None, None)),
    "V1 PCMASK": (_v1_pcmask, (None, "function 1 .* give pcmask_rep_size", "give pcmask_rep")),
    "FLEX, signal frame": (
        _v3_flex_then_signal_frame,
        ("function 1 .* FLEX FDE", "function 1 .* FLEX FDE", None),
    ),
    "PCMASK, signal frame": (
        _v3_pcmask_then_signal_frame,
        ("function 1 .* would match differently", "function 2 .* signal frame", None),
    ),
    "s390x registers in registers": (
        _s390x_registers_in_registers,
        ("row at 0x2004: FP rule", None, "row at 0x2004: FP rule"),
    ),
    "undecodable row": (_undecodable_row, ("FRE 1 has invalid data-word size code 3",) * 3),
}


@pytest.mark.parametrize("case", list(CONVERSION_CASES))
def test_bulk_conversion_of_hand_built_sections_equals_one_function_at_a_time(case: str) -> None:
    """Every target, both byte orders, with and without (right and wrong) pcmask_rep_size:
    the same bytes, or the same error (the first in function order); what is expected
    without options is checked too, so that the cases are what they say."""
    make, expected = CONVERSION_CASES[case]
    section = make()
    for target, error in zip(Version, expected, strict=True):
        for big_endian in (None, not section.big_endian):
            for rep_size in (None, 8, 16):
                bulk, oracle = bulk_and_oracle(
                    section, target, big_endian=big_endian, pcmask_rep_size=rep_size
                )
                assert bulk == oracle, (target, big_endian, rep_size)
        bulk, _ = bulk_and_oracle(section, target)
        if error is None:
            assert isinstance(bulk, bytes), bulk
        else:
            assert isinstance(bulk, tuple) and issubclass(bulk[0], SFrameError), bulk
            assert re.search(error, bulk[1]), bulk


def test_bulk_conversion_refuses_more_rows_than_v3_counts_as_the_reference_does() -> None:
    """A V2 function of 65,536 rows, one more than a V3 FDE counts: V1 and V2 take it, V3
    refuses it, in bulk as one row at a time."""
    builder = SFrameBuilder(AMD64, Version.V2)
    function = builder.add_function(0x1000, 4 * V3_MAX_FRES + 8)
    for row in range(V3_MAX_FRES + 1):
        function.add_row(4 * row, CfaRule(7, 8 + 8 * (row % 2)))
    section = builder.build()
    for target in Version:
        bulk, oracle = bulk_and_oracle(section, target)
        assert bulk == oracle
        assert isinstance(bulk, bytes) == (target is not Version.V3), bulk


@pytest.mark.parametrize("target", [Version.V1, Version.V3])
def test_convert_refuses_s390x_v2_register_words_at_their_row(target: Version) -> None:
    # s390x V2 names a register in an RA/FP word with its low bit set (errata 1; words in
    # the order CFA, RA, FP: 51 is the RA in r25, 49 the FP in r24); V1 and V3 read such
    # words as CFA offsets and a DEFAULT FDE has no other way to say "in a register", so the
    # row is encoded again for the target and refused there.
    builder = SFrameBuilder(Abi.S390X_ENDIAN_BIG, Version.V2)
    function = builder.add_function(0x1000, 64).add_row(0, CfaRule(15, 160))
    function.add_row(4, CfaRule(15, 160), RegRule.in_register(24), RegRule.in_register(25))
    section = builder.build()
    assert section[0].rows[1].words == (0, 51, 49)
    with pytest.raises(ConversionError, match=r"row at 0x1004: FP rule .* needs a FLEX FDE"):
        section.convert(target)


@pytest.mark.parametrize(
    ("name", "target"),
    [("x86_64-v3-frames.o.sframe", Version.V2), ("x86_64-v1-frames.sframe", Version.V3)],
)
def test_conversion_of_rows_damaged_anywhere_fails_as_the_oracle_does(
    name: str, target: Version
) -> None:
    """Every byte of the FRE sub-section damaged, and the section cut there: the same bytes,
    or the same first error (a FLEX function V2 lacks before or after the damaged row, rows
    that do not decode, rows the target cannot encode)."""
    from test_row_oracle import SEEDS, _damaged

    data = (SEEDS / name).read_bytes()
    section = SFrameSection.from_bytes(data)
    outcomes = set()
    for damaged in _damaged(data, range(section.header.fre_start, section.header.fre_end)):
        try:
            opened = SFrameSection.from_bytes(damaged)
            opened.table  # noqa: B018
        except SFrameError:
            continue
        bulk, oracle = bulk_and_oracle(opened, target, big_endian=True)
        assert bulk == oracle
        outcomes.add(bulk[0] if isinstance(bulk, tuple) else bytes)
    assert len(outcomes) >= 3, outcomes
