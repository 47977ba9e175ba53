"""``generate -o``: written atomically, never over its input, ``-`` for standard output."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS
from pysframe import SFrameSection
from pysframe.cli import main
from pysframe.elf.reader import ElfReader
from pysframe.generate import GenerateResult, generate_from_elf

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


#: Functions of the linker's PLT sections: without section headers nothing names them.
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got")


def _rows_outside(result: GenerateResult, plt: list[tuple[int, int]]) -> dict[int, object]:
    """Per function start, outside the ``plt`` ranges: its size and rows (start, rules)."""
    return {
        function.start: (
            function.size,
            [(row.start_address, row.cfa, row.fp, row.ra, row.mangled_ra) for row in function.rows],
        )
        for function in result.section
        if not any(low <= function.start < high for low, high in plt)
    }


@pytest.mark.parametrize(
    "name", ["x86_64/v3/frames", "x86_64/v3/lib.so", "aarch64/v3/frames", "s390x/v3/frames-nopie"]
)
def test_generated_without_section_headers(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Section headers stripped (e_shoff, e_shnum and e_shstrndx zeroed, ELF64 header offsets
    0x28, 0x3c, 0x3e, as sstrip leaves a file): .eh_frame is found through PT_GNU_EH_FRAME and
    every function gets the rows it gets with the headers, but for the PLT entries, which only
    section names tell apart; ``dump`` reads the section written."""
    program = CORPUS / name
    data = bytearray(program.read_bytes())
    data[0x28:0x30] = bytes(8)
    data[0x3C:0x40] = bytes(4)
    stripped = tmp_path / "stripped"
    stripped.write_bytes(bytes(data))
    with ElfReader.open(str(program)) as image:
        plt = [(s.address, s.address + s.size) for s in image.sections() if s.name in PLT_SECTIONS]
    with ElfReader.open(str(stripped)) as image:
        assert not image.has_section_headers()
    full, headerless = generate_from_elf(str(program)), generate_from_elf(str(stripped))
    rows = _rows_outside(headerless, plt)
    assert rows == _rows_outside(full, plt)
    assert len(rows) >= 2
    assert headerless.text_bytes_total >= full.text_bytes_total  # the executable segments
    out = tmp_path / "out.sframe"
    assert main(["generate", str(stripped), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["dump", "--address", hex(headerless.section_address), str(out)]) == 0
    starts = re.findall(r"func idx \[\d+\]: pc = (0x[0-9a-f]+)", capsys.readouterr().out)
    assert [int(start, 16) for start in starts] == [f.start for f in headerless.section]
