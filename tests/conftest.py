"""Shared fixtures: the corpus of real SFrame sections made by GNU as/ld (tests/data/corpus), and
the reference GNU tools (binutils 2.47) when scripts/build-reference-binutils.sh has built them."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus"

#: Where scripts/build-reference-binutils.sh leaves its env.sh (PYSFRAME_REFERENCE overrides).
REFERENCE_ENV = Path(
    os.environ.get("PYSFRAME_REFERENCE", Path.home() / ".cache" / "sframe-ref")
) / "env.sh"


def _reference_environment(env_file: Path) -> dict[str, str]:
    """The ``export NAME=VALUE ...`` assignments of the reference build's env.sh."""
    try:
        text = env_file.read_text()
    except OSError:
        return {}
    return dict(re.findall(r"(\w+)=(\S+)", "\n".join(
        line.removeprefix("export ") for line in text.splitlines() if line.startswith("export ")
    )))


# Tests read OBJDUMP, READELF, GAS, LIBSFRAME, PATH_AARCH64 and PATH_S390X from the environment;
# the reference build's values apply unless the caller set their own.
for _name, _value in _reference_environment(REFERENCE_ENV).items():
    os.environ.setdefault(_name, _value)


def corpus_files() -> list[Path]:
    """Every ELF file of the corpus (those with a GNU dump text beside them)."""
    return sorted(p for p in CORPUS.glob("*/v*/*") if p.is_file() and p.suffix != ".txt")


@pytest.fixture(scope="session")
def corpus() -> list[Path]:
    return corpus_files()
