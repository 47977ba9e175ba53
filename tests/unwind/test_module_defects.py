"""A defect of pysframe's own, met while a module's ELF file is read or its SFrame generated,
is raised as itself: it is not taken for a hostile file, whose module would quietly lose its
frames (a hostile file raises SFrameError, which the hostile sweeps hold the reader and the
generator to)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pysframe.unwind import modules


class Defect(Exception):
    """What a programming error of the reader or the generator would raise."""


def _defect(*_args: object, **_kwargs: object) -> None:
    raise Defect("a defect of the reader")


def test_a_defect_reading_the_facts_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modules, "facts_of_image", _defect)
    with pytest.raises(Defect):
        modules.ElfFiles().facts(sys.executable)


def test_a_defect_generating_sframe_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = modules.ElfFiles().facts(sys.executable)
    assert facts is not None
    monkeypatch.setattr(modules, "generated_sframe", _defect)
    with pytest.raises(Defect):
        modules.generate_for(facts)


def test_a_file_that_cannot_be_read_is_an_os_error(tmp_path: Path) -> None:
    """The other side: a file that is not readable ELF is the module's problem, an OSError
    its caller turns into the module's reason, not a defect."""
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x7fELF" + b"\xff" * 60)
    with pytest.raises(OSError, match="not a readable ELF file"):
        modules.ElfFiles().facts(str(bad))
