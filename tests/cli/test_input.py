"""Inputs that are not regular files: every command refuses them at once, with one line.

A FIFO used to block every command forever (opening it waits for a writer), ``check --raw
/dev/zero`` read until memory ran out, and a directory gave an OS error late.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS
from pysframe.elf.reader import ElfReader
from pysframe.errors import SFrameError
from pysframe.input import InputError, open_input, read_input

FRAMES = CORPUS / "x86_64/v3/frames"


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_regular_files_open(tmp_path: Path) -> None:
    with open_input(FRAMES) as stream:
        assert stream.read(4) == b"\x7fELF"
    assert read_input(FRAMES) == FRAMES.read_bytes()


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda tmp: tmp / "fifo", "a FIFO"),
        (lambda tmp: Path("/dev/zero"), "a character device"),
        (lambda tmp: tmp, "a directory"),
    ],
)
def test_other_files_are_refused_at_open(tmp_path: Path, make: object, kind: str) -> None:
    os.mkfifo(tmp_path / "fifo")
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(InputError, match=f"^{path}: {kind}, not a regular file$"):
        open_input(path)
    with pytest.raises(InputError, match=f"^{path}: {kind}, not a regular file$"):
        ElfReader.open(str(path))
    assert issubclass(InputError, SFrameError)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="No such file or directory"):
        read_input(tmp_path / "missing")


COMMANDS = [
    ["dump"],
    ["dump", "--json"],
    ["info"],
    ["lookup", "FILE", "0x1000"],
    ["check"],
    ["check", "--raw"],
    ["stats"],
    ["verify"],
    ["compact", "--dry-run"],
    ["repair", "--dry-run"],
    ["generate", "-o", "{out}"],
    ["stack", "--core"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_commands_refuse_a_fifo_at_once(fifo: Path, tmp_path: Path, command: list[str]) -> None:
    arguments = [word.format(out=tmp_path / "out") for word in command]
    if "FILE" in arguments:
        arguments[arguments.index("FILE")] = str(fifo)
    else:
        arguments.append(str(fifo))
    done = subprocess.run(
        [sys.executable, "-m", "pysframe", *arguments],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode in (1, 2)
    assert "Traceback" not in done.stderr
    assert f"{fifo}: a FIFO, not a regular file" in done.stderr
    assert not (tmp_path / "out").exists()
