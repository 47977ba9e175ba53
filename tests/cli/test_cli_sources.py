"""``dump``, ``info`` and ``lookup`` on bare section files (what ``generate -o`` writes) and, with
``--generate``, on ELF files without .sframe: the same text as for the section injected into
the file (checked against objdump 2.47 when the reference build is present)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import require_program
from libsframe_ref import reference_tool_if_present
from pysframe.cli import main
from pysframe.cli.report import GENERATE_HINT

SOURCE = r"""
#include <stdio.h>
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(void) { printf("%d\n", fib(20)); return 0; }
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_program("gcc")
    work = tmp_path_factory.mktemp("sources")
    (work / "fib.c").write_text(SOURCE)
    subprocess.run(["gcc", "-O1", "-o", str(work / "fib"), str(work / "fib.c")], check=True)
    return work / "fib"


def _run(arguments: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(arguments)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _body(text: str) -> str:
    """A dump from its ``Contents of the SFrame section`` line on (the file line differs)."""
    return text[text.index("Contents of the SFrame section") :]


@pytest.fixture(scope="module")
def written(program: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """The bare section ``generate -o`` writes, the injected program, and the address."""
    work = tmp_path_factory.mktemp("written")
    bare, injected = work / "fib.sframe", work / "fib.injected"
    assert main(["generate", str(program), "-o", str(bare)]) == 0
    assert main(["generate", str(program), "--inject", "-o", str(injected)]) == 0
    report = subprocess.run(
        ["pysframe", "generate", str(program), "-o", str(work / "again.sframe"), "--report"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"for address (0x[0-9a-f]+)", report.stdout)
    assert found is not None
    return bare, injected, int(found[1], 16)


def test_bare_section_dumps_as_the_injected_one(
    written: tuple[Path, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    bare, injected, address = written
    code, bare_text, err = _run(["dump", str(bare), "--address", hex(address)], capsys)
    assert code == 0 and err == ""
    assert bare_text.startswith(f"\n{bare}:     file format sframe\n\n")
    reference = reference_tool_if_present("OBJDUMP")
    if reference is not None:
        expected = subprocess.run(
            [reference, "--sframe", str(injected)], capture_output=True, text=True, check=True
        ).stdout
    else:
        expected = _run(["dump", str(injected)], capsys)[1]
    assert _body(bare_text) == _body(expected)
    # --raw says the same of a file pysframe would recognise anyway.
    raw = _run(["dump", "--raw", str(bare), "--address", hex(address)], capsys)
    assert raw == (0, bare_text, "")


def test_bare_section_info_and_lookup(
    written: tuple[Path, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    bare, injected, address = written
    code, info, _ = _run(["info", str(bare), "--address", hex(address)], capsys)
    assert code == 0 and "(bare section file)" in info
    injected_info = _run(["info", str(injected)], capsys)[1]
    field = re.compile(r"^(functions|rows|version|abi|flags):.*$", re.M)
    assert field.findall(info) == field.findall(injected_info)
    assert [m[0] for m in field.finditer(info)] == [m[0] for m in field.finditer(injected_info)]
    pcs = ["0x1040", "0x1139", "0x1150", "0x10"]
    bare_lookup = _run(["lookup", str(bare), *pcs, "--address", hex(address)], capsys)
    code, text, _ = _run(["lookup", str(injected), *pcs], capsys)
    # The injected file also names each PC's function (a bare section has no symbols).
    assert bare_lookup[:2] == (code, re.sub(r" <[^>]*>:", ":", text))


def test_generate_option_shows_what_injection_writes(
    program: Path, written: tuple[Path, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    _, injected, _ = written
    code, out, err = _run(["dump", str(program)], capsys)
    assert code == 1 and err == f"pysframe: {program}: no .sframe section ({GENERATE_HINT})\n"
    code, out, err = _run(["dump", "--generate", str(program)], capsys)
    assert code == 0
    assert (
        err
        == f"pysframe: warning: {program}: no .sframe section; using one generated from its CFI\n"
    )
    assert _body(out) == _body(_run(["dump", str(injected)], capsys)[1])
    code, out, _ = _run(["info", "--generate", str(program)], capsys)
    assert code == 0 and "(generated from the file's CFI)" in out
    code, out, _ = _run(["lookup", "--generate", str(program), "0x1139"], capsys)
    assert (code, out) == _run(["lookup", str(injected), "0x1139"], capsys)[:2]
    code, out, _ = _run(["dump", "--generate", "--jsonl", str(program)], capsys)
    assert code == 0 and '"origin": "generated"' in out.splitlines()[0]


def test_address_goes_with_bare_sections(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["dump"], ["info"], ["lookup", str(program), "0x10"]):
        arguments = [*command, "--address", "0x1000"]
        if command[0] != "lookup":
            arguments.append(str(program))
        code, _, err = _run(arguments, capsys)
        assert code == 2 and err.startswith(f"pysframe: {command[0]}: --address goes with")


def test_raw_file_that_is_no_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "text"
    path.write_bytes(b"hello, world\n")
    for command in (["dump", "--raw"], ["info", "--raw"], ["lookup", "--raw"]):
        arguments = [*command, str(path)] + (["0x10"] if command[0] == "lookup" else [])
        code, _, err = _run(arguments, capsys)
        assert code == 1 and err.startswith(f"pysframe: {path}: bad SFrame magic"), err
        assert len(err.splitlines()) == 1
