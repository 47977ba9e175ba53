"""No command writes over one of its inputs: an output that is the same file as any input --
the same name, a symbolic link or a hard link to it (the same device and inode) -- is refused
with exit 1, one ``pysframe: FILE: ...`` line, and every file as it was.  One function decides
it for every writer (:func:`pysframe.output.refuse_inputs`).

* ``-o`` outputs: ``perf report -o`` (it wrote the profile over the recording it read, also
  through a link), over one recording or the second of several, and ``stats --plot``.
  (``compact``, ``repair`` and ``generate`` are held to the same in
  tests/hostile/test_writers_sweep.py.)
* Standard output redirected onto an input (``pysframe dump prog >> prog``): ``dump``,
  ``info``, ``perf script``, ``perf report``.  Like ``cat``, a command refuses to write its
  text into a file it reads.
* ``--in-place`` still rewrites its input, hard links included.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pysframe
from conftest import CORPUS
from perf_support import one_sample_recording
from pysframe.cli import main
from pysframe.elf.reader import ElfReader

PROGRAM = CORPUS / "x86_64" / "v3" / "frames"
#: big_frame+4, in the executable segment (file offset, address, size) of PROGRAM.
PC, TEXT = 0x1274, (0x1000, 0x1000, 0x1E09)
ALIASES = ("same name", "symbolic link", "hard link")


def _recording() -> bytes:
    with ElfReader.open(str(PROGRAM)) as image:
        build_id = image.build_id()
    assert build_id is not None
    return one_sample_recording(PROGRAM, build_id, TEXT, PC)


@pytest.fixture()
def inputs(tmp_path: Path) -> Path:
    """A folder with two recordings of one sample in PROGRAM and a copy of PROGRAM."""
    folder = tmp_path / "in"
    folder.mkdir()
    data = _recording()
    (folder / "first.data").write_bytes(data)
    (folder / "second.data").write_bytes(data + b"")
    shutil.copy(PROGRAM, folder / "prog")
    return folder


def contents(folder: Path) -> dict[str, str]:
    """Every name in ``folder``: the SHA-256 of its bytes (through a link)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def alias(target: Path, how: str) -> Path:
    """``target`` itself, or a symbolic or hard link to it beside it."""
    if how == "same name":
        return target
    link = target.with_name(f"{target.name}-{how.replace(' ', '-')}")
    if how == "symbolic link":
        link.symlink_to(target.name)
    else:
        os.link(target, link)
    return link


#: Writers with ``-o``: their arguments (IN/ names a file of the inputs' folder, OUT the output)
#: and the input the output is made the same file as.
WRITERS = {
    "perf report -o": (["perf", "report", "--format", "folded", "IN/first.data", "-o", "OUT"],
                       "first.data"),
    "perf report of two -o": (["perf", "report", "--format", "folded", "IN/first.data",
                               "IN/second.data", "-o", "OUT"], "second.data"),
    "perf report --format pprof -o": (["perf", "report", "--format", "pprof", "IN/first.data",
                                       "-o", "OUT"], "first.data"),
    "stats --plot": (["stats", "IN/prog", "--plot", "OUT"], "prog"),
}  # fmt: skip


def _argv(words: list[str], folder: Path, out: Path | None = None) -> list[str]:
    return [
        str(folder / w[3:]) if w.startswith("IN/") else str(out) if w == "OUT" else w
        for w in words
    ]


@pytest.mark.parametrize("how", ALIASES)
@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_output_that_is_an_input_is_refused(
    writer: str, how: str, inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words, victim = WRITERS[writer]
    out = alias(inputs / victim, how)
    before = contents(inputs)
    code = main(_argv(words, inputs, out))
    captured = capsys.readouterr()
    assert code == 1, captured
    assert captured.err == f"pysframe: {out}: is the input file; refusing to write over it\n"
    assert contents(inputs) == before


def test_an_output_beside_the_inputs_is_written(
    inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same commands onto a new file: written (the refusal is about the inputs only).
    before = contents(inputs)
    for writer in ("perf report -o", "perf report of two -o"):
        out = inputs.parent / "profile.folded"
        assert main(_argv(WRITERS[writer][0], inputs, out)) == 0, capsys.readouterr()
        assert "big_frame" in out.read_text()
        out.unlink()
    assert contents(inputs) == before


#: Commands writing their text to standard output, and the input it is redirected onto.
TEXT_WRITERS = {
    "dump": (["dump", "IN/prog"], "prog"),
    "info": (["info", "IN/prog"], "prog"),
    "perf script": (["perf", "script", "IN/first.data"], "first.data"),
    "perf report": (["perf", "report", "--format", "folded", "IN/second.data",
                     "IN/first.data"], "first.data"),
}  # fmt: skip


@pytest.mark.parametrize("how", ALIASES)
@pytest.mark.parametrize("writer", list(TEXT_WRITERS))
def test_standard_output_onto_an_input_is_refused(
    writer: str, how: str, inputs: Path
) -> None:
    # pysframe ... >> INPUT (appending: the shell leaves the input's bytes, for now).
    words, victim = TEXT_WRITERS[writer]
    target = alias(inputs / victim, how)
    before = contents(inputs)
    sources = [str(Path(pysframe.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sources))
    with open(target, "ab") as out:
        done = subprocess.run(
            [sys.executable, "-m", "pysframe", *_argv(words, inputs)], stdout=out,
            stderr=subprocess.PIPE, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"pysframe: {inputs / victim}: standard output is this input file; refusing to write "
        "over it\n"
    )
    assert contents(inputs) == before


def test_in_place_rewrites_still_write_their_input(
    inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --in-place is the one way to write over the input, and a hard link sees the new bytes.
    program = inputs / "prog"
    other = alias(program, "hard link")
    old = program.read_bytes()
    assert main(["compact", str(program), "--in-place"]) == 0, capsys.readouterr()
    assert program.read_bytes() == other.read_bytes() != old
    assert os.path.samefile(program, other)
