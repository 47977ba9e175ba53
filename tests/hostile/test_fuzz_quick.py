"""A short fuzz pass (the long one: ``python -m pysframe.tools.fuzz --runs N``).

Invariants: only SFrameError escapes any reader, no input takes long, and the peak traced
memory stays within a small multiple of the input size.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pysframe import SFrameSection
from pysframe.tools import fuzz

SEEDS_DIR = Path(__file__).parent.parent / "data" / "fuzz-seeds"
#: Mutated inputs the quick pass tries (each seed is tried first, unmutated).
QUICK_RUNS = 2000


def test_seeds_are_the_corpus_sections() -> None:
    seeds = sorted(SEEDS_DIR.glob("*.sframe"))
    assert len(seeds) >= 20
    for path in seeds:
        SFrameSection.from_bytes(path.read_bytes())  # every seed decodes


def test_every_seed_keeps_the_invariants() -> None:
    for data in fuzz.load_seeds(SEEDS_DIR):
        fuzz.check_input(data, memory=True)


def test_quick_fuzz_pass() -> None:
    report = fuzz.run(QUICK_RUNS, seed=20260501, seeds=fuzz.load_seeds(SEEDS_DIR), memory_every=5)
    assert report.inputs == QUICK_RUNS
    assert report.failures == [], report.failures[0][1]


def test_mutations_are_deterministic_and_varied() -> None:
    seeds = fuzz.load_seeds(SEEDS_DIR)
    first = [fuzz.mutate(seeds[0], random.Random(5), seeds) for _ in range(3)]
    again = [fuzz.mutate(seeds[0], random.Random(5), seeds) for _ in range(3)]
    assert first == again
    rng = random.Random(6)
    assert len({fuzz.mutate(seeds[0], rng, seeds) for _ in range(50)}) > 40


def test_a_crash_breaks_the_invariant() -> None:
    def crash(data: bytes) -> None:
        SFrameSection.from_bytes(data)
        raise IndexError("boom")

    with pytest.raises(fuzz.InvariantError, match="IndexError: boom"):
        fuzz.check_input(fuzz.builtin_seeds()[0], target=crash)


def test_memory_limit_is_enforced() -> None:
    seed = fuzz.builtin_seeds()[0]
    with pytest.raises(fuzz.InvariantError, match="peak memory"):
        fuzz.check_input(seed, memory=True, memory_factor=0, memory_slack=0)
    fuzz.check_input(seed, memory=True)  # the default limits hold


def test_time_limit_is_enforced() -> None:
    with pytest.raises(fuzz.InvariantError, match="took"):
        fuzz.check_input(fuzz.builtin_seeds()[0], time_limit=0.0, memory=False)


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = fuzz.main(["--runs", "30", "--seeds", str(SEEDS_DIR), "--failures", str(tmp_path)])
    assert status == 0
    assert "30 inputs in" in capsys.readouterr().out


def test_extract_seeds(tmp_path: Path) -> None:
    corpus = Path(__file__).parent.parent / "data" / "corpus" / "x86_64" / "v3"
    assert fuzz.extract_seeds(corpus, tmp_path) >= 5
    extracted = (tmp_path / "frames.sframe").read_bytes()
    assert extracted == (SEEDS_DIR / "x86_64-v3-frames.sframe").read_bytes()


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).parent.parent / "data" / "fuzz-regressions").glob("*.bin")),
    ids=lambda p: p.stem,
)
def test_fuzz_regressions(path: Path) -> None:
    """Inputs that once broke an invariant (kept in tests/data/fuzz-regressions)."""
    fuzz.check_input(path.read_bytes())
