"""``generate -o``: written atomically, never over its input, ``-`` for standard output."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pysframe import SFrameSection
from pysframe.cli import main

from conftest import CORPUS

FRAMES = CORPUS / "x86_64/v3/frames"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_input_is_never_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "program"
    shutil.copy(FRAMES, program)
    link = tmp_path / "link"
    link.symlink_to(program)
    before = _digest(program)
    for output in (program, link):
        for extra in ([], ["--inject"]):
            assert main(["generate", str(program), *extra, "-o", str(output)]) == 1
            err = capsys.readouterr().err
            assert err == f"pysframe: {output}: is the input file; refusing to write over it\n"
            assert _digest(program) == before


def test_dash_writes_the_section_to_standard_output(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pysframe", "generate", str(FRAMES), "-o", "-"],
        capture_output=True,
        cwd=tmp_path,
        check=True,
    )
    assert len(SFrameSection.from_bytes(done.stdout)) > 10
    assert not (tmp_path / "-").exists()


def test_errors_of_injection_name_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", str(FRAMES), "--inject", "-o", "/nonexistent/out"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pysframe: {FRAMES}: the file already has an SFrame section")
