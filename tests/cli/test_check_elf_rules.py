"""ELF-level findings of ``pysframe check``: what a file's loader would trip on."""

from __future__ import annotations

import pytest

from conftest import CORPUS, DATA
from pysframe.cli import main

#: A small PIE given SFrame by ``pysframe generate --inject`` (0.1.0) and then stripped by
#: binutils 2.40's strip, which laid the new segment out again over the RW segment's last
#: page ("section .sframe lma 0x5348 adjusted to 0x6330"); the program crashes when run.
STRIPPED = DATA / "elf-damaged" / "injected-then-stripped-by-2.40"


def test_overlapping_loads_are_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(STRIPPED)]) == 1
    out = capsys.readouterr().out
    assert out == (
        f"{STRIPPED}: error: [load-overlap] section: PT_LOAD [0x4018, 0x53e7) overlaps "
        "PT_LOAD [0x3dd0, 0x4020)\n"
    )


def test_programs_from_linkers_have_no_overlap(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("x86_64/v3/app", "x86_64/v3/frames", "x86_64/v2/lib.so"):
        path = CORPUS / name
        assert main(["check", str(path)]) == 0, path
    assert "load-overlap" not in capsys.readouterr().out


def test_the_rule_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--list-rules"]) == 0
    assert "load-overlap" in capsys.readouterr().out

