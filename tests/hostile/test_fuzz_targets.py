"""Fuzzing ELF files and DWARF CFI (``python -m pysframe.tools.fuzz --target elf|cfi``): a
short pass of each, and every ELF input that once broke an invariant, replayed (the CFI
target has found none so far; its floods are tests of their own in test_cfi_floods.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pysframe.tools import fuzz
from pysframe.tools.fuzz_targets import (
    cfi_seeds,
    elf_seeds,
    exercise_elf,
    mutate_cfi,
    mutate_elf,
)

REGRESSIONS = Path(__file__).parent.parent / "data" / "fuzz-regressions"


def test_seeds_come_from_the_corpus() -> None:
    elves, programs = elf_seeds(), cfi_seeds()
    assert len(elves) >= 15 and all(seed[:4] == b"\x7fELF" for seed in elves)
    assert len(programs) >= 8


@pytest.mark.parametrize(("target", "runs"), [("elf", 120), ("cfi", 600)])
def test_quick_pass(target: str, runs: int) -> None:
    report = fuzz.run(runs, seed=20261123, target=target, memory_every=4)
    assert report.inputs == runs
    assert not report.failures, report.failures[0][1]


def test_mutations_are_deterministic_and_varied() -> None:
    for seeds, mutate in ((elf_seeds(), mutate_elf), (cfi_seeds(), mutate_cfi)):
        first = [mutate(seeds[0], random.Random(9), seeds) for _ in range(3)]
        again = [mutate(seeds[0], random.Random(9), seeds) for _ in range(3)]
        assert first == again
        rng = random.Random(10)
        assert len({mutate(seeds[0], rng, seeds) for _ in range(40)}) > 30


@pytest.mark.parametrize(
    "path", sorted((REGRESSIONS / "elf").glob("*.bin")), ids=lambda p: p.stem
)
def test_elf_regressions(path: Path) -> None:
    fuzz.check_input(path.read_bytes(), target=exercise_elf)
