"""Inputs that are not regular files: every command refuses them at once, with one line.

A FIFO used to block every command forever (opening it waits for a writer), ``check --raw
/dev/zero`` read until memory ran out, and a directory gave an OS error late.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS
from pysframe.elf.reader import ElfReader
from pysframe.errors import SFrameError
from pysframe.input import InputError, map_up_to, open_input, read_input, read_up_to

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


@pytest.mark.parametrize("length", [0, 5, 9, 10, 11, 4096])
@pytest.mark.parametrize("size", [0, 1, 10, 1 << 30])
def test_read_and_map_up_to_give_what_read_gives(tmp_path: Path, length: int, size: int) -> None:
    """read_up_to gives the bytes ``read(size)`` gives, from where the file stands (the bound
    of 1 GiB is never taken as memory: the file's size sizes the read); map_up_to maps them
    from the start."""
    path = tmp_path / "data"
    path.write_bytes(bytes(range(256)) * (length // 256) + bytes(range(length % 256)))
    for start in (0, 3):
        with open(path, "rb") as plain, open_input(path) as stream:
            plain.seek(start)
            stream.seek(start)
            assert read_up_to(stream, size) == plain.read(size)
    assert read_up_to(io.BytesIO(b"abc"), 2) == b"ab"  # no file behind it: read itself
    with open(path, "rb") as plain, open_input(path) as stream:
        assert map_up_to(stream, size)[:] == plain.read(size)  # a map: its first bytes
    assert map_up_to(io.BytesIO(b"abc"), 2) == b"ab"


def test_read_up_to_reads_a_file_that_grew(tmp_path: Path) -> None:
    """A file longer than ``fstat`` said (it grew in between) is read on, up to ``size``."""
    short, long = tmp_path / "short", tmp_path / "long"
    short.write_bytes(b"abc")
    long.write_bytes(b"abcdefghij")

    class Grown(io.BufferedReader):  # fstat sees the short file, reads give the long one
        def fileno(self) -> int:
            return shown.fileno()

    with open(short, "rb") as shown, Grown(io.FileIO(long)) as stream:
        assert read_up_to(stream, 8) == b"abcdefgh"
        stream.seek(0)
        assert read_up_to(stream, 100) == b"abcdefghij"


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
