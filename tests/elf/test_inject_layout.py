"""Injection appends what it needs after the file's last byte: no .bss written out, appended
payloads left where they are, the program unchanged otherwise."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import require_program
from pysframe.cli import main
from pysframe.elf.reader import ElfReader

#: 256 MiB of .bss; prints a byte of it and its own file's size.
PROGRAM = r"""
#include <stdio.h>
static char big[256 << 20];
int main(int argc, char **argv) {
    big[argc] = 7;
    FILE *self = fopen(argv[0], "rb");
    fseek(self, 0, SEEK_END);
    printf("%d %ld\n", big[1], ftell(self) > 0);
    return 3;
}
"""
PAYLOAD = b"PAYLOAD-0123456789"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_program("gcc")
    work = tmp_path_factory.mktemp("bss")
    (work / "big.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O2", "-o", str(work / "big"), str(work / "big.c")], check=True)
    with (work / "big").open("ab") as out:
        out.write(PAYLOAD)
    return work / "big"


def _run(path: Path) -> tuple[int, str]:
    done = subprocess.run([str(path)], capture_output=True, text=True, check=False, timeout=30)
    return done.returncode, done.stdout


def test_bss_is_not_written_out_and_payloads_stay(program: Path, tmp_path: Path) -> None:
    out = tmp_path / "big.sf"
    assert main(["generate", str(program), "--inject", "-o", str(out)]) == 0
    before, after = program.read_bytes(), out.read_bytes()
    assert len(after) < len(before) + 64 * 1024  # was 268 MB: the .bss written out as zeros
    assert after[len(before) - len(PAYLOAD) : len(before)] == PAYLOAD
    with ElfReader.open(str(program)) as image:
        # The table grows in place over the sections after it (moved to the new segment);
        # .dynamic and .symtab point at them again.  Every other original byte is unchanged.
        table_page = image.load_segments()[1].offset
        patched = [
            (s.offset, s.offset + s.size)
            for s in image.sections()
            if s.name in (".dynamic", ".symtab")
        ]
    text = next(s for s in ElfReader.open(str(program)).sections() if s.name == ".text")
    assert table_page <= text.offset
    kept = [(table_page, len(before))]
    for start, end in sorted(patched):
        last_start, _ = kept.pop()
        kept += [(last_start, start), (end, len(before))]
    for start, end in kept:
        assert after[start:end] == before[start:end], (start, end)
    assert _run(out) == _run(program) == (3, "7 1\n")
    with ElfReader.open(str(out)) as image:
        loads = image.load_segments()
        new = max(loads, key=lambda s: s.vaddr)
        old_end = max(s.vaddr + s.memsz for s in loads if s is not new)
        assert new.vaddr >= old_end and new.offset >= len(before)
        assert new.offset % new.align == new.vaddr % new.align
