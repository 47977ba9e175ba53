"""Agreement of pysframe's CFI -> SFrame translation with GNU as 2.47 (and ld 2.47) on the corpus.

The corpus objects were assembled by GNU as with both .eh_frame and .sframe from the same CFI.
For every function and every PC, the generated V3 section must give the same CFA, FP, RA rule
and mangled-RA bit as GNU as' own section.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import pytest

from pysframe.elf.reader import ElfReader
from pysframe.format.model import Function
from pysframe.format.section import SFrameSection
from pysframe.generate import generate_from_elf
from pysframe.sources import load_sframe

CORPUS = Path(__file__).parent.parent / "data" / "corpus"
V3_OBJECTS = sorted(CORPUS.glob("*/v3/*.o"))
OLD_OBJECTS = sorted(CORPUS.glob("*/v[12]/*.o"))
LINKED = sorted(p for p in CORPUS.glob("*/v3/*") if p.suffix not in (".o", ".txt") and p.is_file())


def _rules_per_pc(function: Function) -> list[tuple[object, ...] | None]:
    rows = function.rows
    starts = [row.start_offset for row in rows]
    out: list[tuple[object, ...] | None] = []
    for pc in range(function.size):
        index = bisect.bisect_right(starts, pc) - 1
        row = rows[index] if index >= 0 else None
        out.append(None if row is None else (row.cfa, row.fp, row.ra, row.mangled_ra))
    return out


def _compare(reference: Function, generated: Function) -> tuple[int, int]:
    want = _rules_per_pc(reference)
    got = _rules_per_pc(generated)
    same = sum(1 for a, b in zip(want, got, strict=True) if a == b)
    return same, len(want)


def _pair_by_start(gas: SFrameSection, gen: SFrameSection) -> list[tuple[Function, Function]]:
    pool: dict[tuple[int, int], list[Function]] = {}
    for function in gen:
        pool.setdefault((function.start, function.size), []).append(function)
    pairs = []
    for function in gas:
        candidates = pool.get((function.start, function.size))
        assert candidates, f"no generated FDE for gas FDE at {function.start:#x}"
        pairs.append((function, candidates.pop(0)))
    return pairs


def test_agreement_with_gnu_as_v3_objects() -> None:
    """Every PC of every function of every V3 object: 100% agreement."""
    assert V3_OBJECTS, "corpus V3 objects missing"
    same = total = functions = 0
    for path in V3_OBJECTS:
        with ElfReader.open(str(path)) as image:
            gas = load_sframe(image)
        result = generate_from_elf(str(path))
        assert not result.skipped, (path, result.skipped)
        assert len(result.section) == len(gas), path
        for reference, generated in _pair_by_start(gas, result.section):
            s, t = _compare(reference, generated)
            same += s
            total += t
            functions += 1
            assert (reference.info, reference.info2) == (generated.info, generated.info2)
    rate = 100.0 * same / total
    print(
        f"\nagreement with GNU as 2.47: {same}/{total} PCs in {functions} functions "
        f"of {len(V3_OBJECTS)} objects = {rate:.2f}%"
    )
    assert rate == 100.0


@pytest.mark.parametrize("path", V3_OBJECTS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_fres_are_byte_identical_to_gnu_as(path: Path) -> None:
    """Beyond the rules: the same FREs (start, info byte, words) as GNU as writes."""
    with ElfReader.open(str(path)) as image:
        gas = load_sframe(image)
    gen = generate_from_elf(str(path)).section
    for reference, generated in _pair_by_start(gas, gen):
        assert [(r.start_offset, r.info, r.words) for r in reference.rows] == [
            (r.start_offset, r.info, r.words) for r in generated.rows
        ]
        assert reference.rep_size == generated.rep_size


def test_flex_drap_function_matches() -> None:
    """x86_64 frames.o: the DRAP-realigned function is a FLEX FDE with the CFA behind a deref."""
    path = CORPUS / "x86_64" / "v3" / "frames.o"
    with ElfReader.open(str(path)) as image:
        gas = load_sframe(image)
    gen = generate_from_elf(str(path)).section
    flex = [f for f in gas if f.info2 == 1]
    assert len(flex) == 1
    mine = [f for f in gen if f.info2 == 1]
    assert len(mine) == 1
    assert _compare(flex[0], mine[0]) == (flex[0].size, flex[0].size)
    derefs = [row.cfa for row in mine[0].rows if row.cfa is not None and row.cfa.deref]
    assert derefs and derefs[0].reg == 6 and derefs[0].offset == -8


@pytest.mark.parametrize("path", OLD_OBJECTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rules_agree_with_gnu_as_v1_v2_objects(path: Path) -> None:
    """GNU as 2.40/2.44 wrote V1/V2 from the same kind of CFI: the DEFAULT rules agree.

    Their function starts are not PC-relative in .o files, so functions are paired in
    .cfi_startproc order (which is .eh_frame order), by size; functions the old assembler
    skipped (FLEX) are passed over.
    """
    with ElfReader.open(str(path)) as image:
        old = list(load_sframe(image))
    result = generate_from_elf(str(path))
    by_key = {(f.start, f.size): f for f in result.section}
    in_cfi_order = [by_key[(g.start, g.size)] for g in result.functions]
    index = 0
    for reference in old:
        while in_cfi_order[index].size != reference.size or in_cfi_order[index].info2:
            index += 1
        same, total = _compare(reference, in_cfi_order[index])
        assert same == total, (path, reference.index)
        index += 1


@pytest.mark.parametrize("path", LINKED, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_linked_files_match_ld(path: Path) -> None:
    """Linked executables and libraries: every FDE GNU ld wrote (PLT ones included) is
    generated with the same rules at every PC, and the same FRE type, PC type and rep size."""
    with ElfReader.open(str(path)) as image:
        ld = load_sframe(image)
    gen = generate_from_elf(str(path), ld_compatible=True).section
    for reference in ld:
        generated = gen.find_function(reference.start)
        assert generated is not None and generated.start == reference.start
        assert (generated.size, generated.info, generated.rep_size) == (
            reference.size,
            reference.info,
            reference.rep_size,
        )
        assert _compare(reference, generated) == (reference.size, reference.size)


def test_plt_got_default_is_what_eh_frame_says() -> None:
    """Without ld_compatible, .plt.got entries get CFA = sp+8 (they are entered by a call),
    which is what ld's own .eh_frame says; ld 2.47's .sframe says sp+16."""
    path = CORPUS / "x86_64" / "v3" / "frames"
    with ElfReader.open(str(path)) as image:
        plt_got = image.section(".plt.got")
    assert plt_got is not None
    gen = generate_from_elf(str(path)).section
    function = gen.find_function(plt_got.address)
    assert function is not None and function.rep_size == 8
    row = function.rows[0]
    assert row.cfa is not None and (row.cfa.reg, row.cfa.offset) == (7, 8)
