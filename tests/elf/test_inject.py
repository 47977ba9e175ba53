"""Injection: a program built without SFrame gets one, runs exactly as before, and tools read it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require, require_program
from pysframe.cli import main
from pysframe.elf.inject import inject_sframe, plan_injection
from pysframe.elf.reader import ElfReader
from pysframe.elf.symbols import read_function_symbols
from pysframe.generate import generate_from_elf
from pysframe.sources import load_sframe

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20;
    printf("fib(%d) = %d\n", n, fib(n));
    return 3;
}
"""



@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_program("gcc")
    folder = tmp_path_factory.mktemp("inject")
    (folder / "fib.c").write_text(SOURCE)
    exe = folder / "fib"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(folder / "fib.c")], check=True)
    return exe


def _run(path: Path) -> tuple[int, str]:
    done = subprocess.run([str(path), "22"], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout


def test_injected_v3_runs_and_decodes(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = program.with_name("fib.sframe3")
    assert main(["generate", str(program), "--inject", "-o", str(out), "--report"]) == 0
    report = capsys.readouterr().out
    assert "functions:" in report and "text bytes:" in report
    assert _run(out) == _run(program) == (3, "fib(22) = 17711\n")
    with ElfReader.open(str(out)) as image:
        sec = image.find_sframe()
        assert sec is not None and sec.type == 0x6FFFFFF4
        seg = image.segment(0x6474E554)
        assert seg is not None and seg.vaddr == sec.address
        assert any(
            s.type == 1 and s.vaddr <= sec.address and sec.address + sec.size <= s.vaddr + s.filesz
            for s in image.segments()
        )
        section = load_sframe(image)
        symbols = {s.name: s for s in read_function_symbols(image, ".symtab")}
    main_fn = section.find_function(symbols["main"].address)
    assert main_fn is not None and main_fn.start == symbols["main"].address
    expected = generate_from_elf(str(program)).section
    assert [(f.start, f.size) for f in section] == [(f.start, f.size) for f in expected]
    # The injected section dumps like any other: one function line per FDE.
    assert main(["dump", str(out)]) == 0
    dumped = capsys.readouterr().out
    assert "Contents of the SFrame section .sframe:" in dumped
    assert "Version: SFRAME_VERSION_3" in dumped
    assert dumped.count("func idx [") == len(section) > 0


def test_injected_v1_is_read_by_readelf(program: Path) -> None:
    out = program.with_name("fib.sframe1")
    assert main(["generate", str(program), "--inject", "-o", str(out), "--version", "1"]) == 0
    assert _run(out) == _run(program)
    require_program("readelf", "binutils")
    text = subprocess.run(
        ["readelf", "--sframe", str(out)], capture_output=True, text=True, check=True
    ).stdout
    assert "SFRAME_VERSION_1" in text
    with ElfReader.open(str(out)) as image:
        section = load_sframe(image)
    assert f"Num FDEs: {len(section)}" in text
    for function in section:
        assert f"pc = {function.start:#x}, size = {function.size} bytes" in text


def test_write_section_file(program: Path) -> None:
    out = program.with_name("fib.sframe")
    assert main(["generate", str(program), "-o", str(out), "--version", "2"]) == 0
    data = out.read_bytes()
    assert data[:2] == b"\xe2\xde" and data[2] == 2


def test_plan_refuses_objects_and_existing_sframe() -> None:
    corpus = Path(__file__).parent.parent / "data" / "corpus" / "x86_64" / "v3"
    from pysframe.errors import ElfError

    with pytest.raises(ElfError, match="executables and shared objects"):
        plan_injection((corpus / "frames.o").read_bytes())
    with pytest.raises(ElfError, match="already has"):
        inject_sframe((corpus / "frames").read_bytes(), b"")


def test_generate_for_an_object_warns_that_it_cannot_be_linked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = Path(__file__).parent.parent / "data" / "corpus" / "x86_64" / "v3" / "frames.o"
    out = tmp_path / "frames.sframe"
    assert main(["generate", str(obj), "-o", str(out)]) == 0
    error = capsys.readouterr().err
    assert error.startswith(f"pysframe: warning: {obj}: a relocatable object") and error.count(
        "\n"
    ) == 1
    assert out.stat().st_size > 0
    executable = Path(__file__).parent.parent / "data" / "corpus" / "x86_64" / "v3" / "frames"
    assert main(["generate", str(executable), "-o", str(tmp_path / "exe.sframe")]) == 0
    assert capsys.readouterr().err == ""


def test_replace_the_files_own_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A program linked with SFrame (gas --gsframe, ld's PT_GNU_SFRAME) gets its section
    replaced: one PT_GNU_SFRAME and one .sframe header, pointing at the new section; the
    program runs as before; GNU readelf reads the replacement."""
    require_program("gcc")
    (tmp_path / "fib.c").write_text(SOURCE)
    exe = tmp_path / "fib"
    subprocess.run(
        ["gcc", "-O1", "-Wa,--gsframe", "-o", str(exe), str(tmp_path / "fib.c")], check=True
    )
    with ElfReader.open(str(exe)) as image:
        if image.segment(0x6474E554) is None:
            require("ld --gsframe", "this toolchain does not link SFrame sections")
        old = load_sframe(image)
        old_address = image.find_sframe().address  # type: ignore[union-attr]
    out = tmp_path / "fib.replaced"
    assert main(["generate", str(exe), "--inject", "-o", str(out)]) == 1
    assert "already has an SFrame section (--replace replaces it)" in capsys.readouterr().err
    assert main(["generate", str(exe), "--replace", "-o", str(out)]) == 2  # usage error
    assert "--replace goes with --inject" in capsys.readouterr().err
    replace = ["generate", str(exe), "--inject", "--replace", "-o", str(out), "--version", "1"]
    assert main(replace) == 0
    assert _run(out) == _run(exe) == (3, "fib(22) = 17711\n")
    with ElfReader.open(str(out)) as image:
        segments = [s for s in image.segments() if s.type == 0x6474E554]
        headers = [s for s in image.sections() if s.type == 0x6FFFFFF4 or s.name == ".sframe"]
        assert len(segments) == 1 and len(headers) == 1
        assert segments[0].vaddr == headers[0].address != old_address
        assert segments[0].filesz == headers[0].size
        new = load_sframe(image)
    expected = generate_from_elf(str(exe), version=1).section
    assert [(f.start, f.size) for f in new] == [(f.start, f.size) for f in expected]
    assert new.version == old.version == 1
    assert main(["check", str(out)]) == 0
    if shutil.which("readelf") is None:
        return
    text = subprocess.run(
        ["readelf", "--sframe", str(out)], capture_output=True, text=True, check=True
    ).stdout
    assert f"Num FDEs: {len(new)}" in text
    for function in new:
        assert f"pc = {function.start:#x}, size = {function.size} bytes" in text
