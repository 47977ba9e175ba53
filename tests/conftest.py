"""Shared fixtures: the corpus of real SFrame sections made by GNU as/ld (tests/data/corpus)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus"


def corpus_files() -> list[Path]:
    """Every ELF file of the corpus (those with a GNU dump text beside them)."""
    return sorted(p for p in CORPUS.glob("*/v*/*") if p.is_file() and p.suffix != ".txt")


@pytest.fixture(scope="session")
def corpus() -> list[Path]:
    return corpus_files()
