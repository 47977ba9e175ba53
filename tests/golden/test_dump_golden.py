"""Golden test: ``pysframe dump`` on every file of the corpus, byte for byte against GNU text.

* ``*.objdump-2.47.txt``: objdump --sframe of binutils 2.47 (V2/V3 files).
* ``*.readelf-2.40.txt``: readelf --sframe of binutils 2.40 (V1 files).
* ``*.objdump-2.44.txt``: objdump 2.44, which did not relocate .sframe in relocatable objects:
  for those ``--no-relocate`` reproduces it; for executables and libraries 2.44 printed the
  same text as 2.47, so the default run must match it too.

The tools were run in the file's own folder with a relative file name, so the test does too.
No file of the corpus is excluded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS, corpus_files
from pysframe.cli import main

GOLDEN = sorted(CORPUS.glob("*/v*/*.txt"))
GOLDEN = [p for p in GOLDEN if p.name != "TOOLCHAINS.txt"]
_SUFFIXES = (".objdump-2.47.txt", ".readelf-2.40.txt", ".objdump-2.44.txt")


def _binary_of(text: Path) -> Path:
    for suffix in _SUFFIXES:
        if text.name.endswith(suffix):
            return text.with_name(text.name[: -len(suffix)])
    raise AssertionError(f"unknown golden file {text}")


def _args(text: Path) -> list[str]:
    binary = _binary_of(text)
    args = ["dump", binary.name]
    if text.name.endswith(".objdump-2.44.txt") and binary.suffix == ".o":
        args.insert(1, "--no-relocate")
    return args


def test_every_corpus_file_has_golden_text() -> None:
    """Each ELF file of the corpus has at least one GNU dump beside it, and vice versa."""
    binaries = {_binary_of(t) for t in GOLDEN}
    assert binaries == set(corpus_files())
    assert len(GOLDEN) >= 33


@pytest.mark.parametrize("text", GOLDEN, ids=lambda p: str(p.relative_to(CORPUS)))
def test_dump_matches_gnu_text(
    text: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(text.parent)
    status = main(_args(text))
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    assert out == text.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "text",
    [p for p in GOLDEN if p.name.endswith(".objdump-2.44.txt") and _binary_of(p).suffix != ".o"],
    ids=lambda p: str(p.relative_to(CORPUS)),
)
def test_linked_files_print_alike_in_2_44_and_2_47(
    text: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Relocations only matter in objects: default output matches objdump 2.44 for the rest."""
    monkeypatch.chdir(text.parent)
    assert main(["dump", _binary_of(text).name]) == 0
    assert capsys.readouterr().out == text.read_text(encoding="utf-8")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pysframe", *args], cwd=cwd, capture_output=True, check=False
    )


@pytest.mark.parametrize(
    "name",
    [
        "x86_64/v3/frames.objdump-2.47.txt",
        "x86_64/v2/frames.o.objdump-2.47.txt",
        "x86_64/v1/app.readelf-2.40.txt",
        "aarch64/v3/nolibc-be.o.objdump-2.47.txt",
        "s390x/v3/frames-nopie.objdump-2.47.txt",
    ],
)
def test_dump_in_a_real_process(name: str) -> None:
    text = CORPUS / name
    result = _run(_args(text), text.parent)
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout == text.read_bytes()


def test_several_files_in_one_objdump_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """objdump prints each file's framing and dump one after the other."""
    folder = CORPUS / "x86_64" / "v3"
    monkeypatch.chdir(folder)
    assert main(["dump", "frames", "lib.so", "app.o"]) == 0
    expected = "".join(
        (folder / f"{n}.objdump-2.47.txt").read_text() for n in ("frames", "lib.so", "app.o")
    )
    assert capsys.readouterr().out == expected


def test_several_v1_files_in_one_readelf_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """readelf 2.40 prints ``\\nFile: NAME\\n`` before each of several files (checked with it)."""
    folder = CORPUS / "x86_64" / "v1"
    monkeypatch.chdir(folder)
    assert main(["dump", "frames.o", "app"]) == 0
    expected = "".join(
        f"\nFile: {n}\n" + (folder / f"{n}.readelf-2.40.txt").read_text()
        for n in ("frames.o", "app")
    )
    assert capsys.readouterr().out == expected
