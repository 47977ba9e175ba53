"""``generate --report`` agrees with the section it describes and with ``info`` on it: the
functions it counts are the section's FDEs, a function it lists as skipped has no FDE, and its
text bytes are info's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import require
from pysframe.cli import main
from pysframe.elf.reader import ElfReader
from pysframe.sources import load_sframe
from pysframe.tools.info import section_info

#: The machine's C library: hand-written assembly with CFI gas refuses, and __restore_rt, a
#: signal frame whose FDE gas keeps without rows.
LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")


def test_report_agrees_with_the_section_and_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not LIBC.exists():
        require("libc6", f"{LIBC} is not on this machine")
    out = tmp_path / "libc.so.6"
    assert main(["generate", str(LIBC), "--inject", "--report", "-o", str(out)]) == 0
    report = capsys.readouterr().out
    info = section_info(str(out))
    with ElfReader.open(str(out)) as image:
        starts = {f.start for f in load_sframe(image)}
    skipped = [int(m, 16) for m in re.findall(r"^  skipped (0x[0-9a-f]+)", report, re.M)]
    kept = [int(m, 16) for m in re.findall(r"^  kept without rows (0x[0-9a-f]+)", report, re.M)]
    functions = re.search(r"^functions: (\d+) of (\d+) covered", report, re.M)
    text = re.search(r"^text bytes: (\d+) of (\d+) covered", report, re.M)
    assert functions is not None and text is not None
    assert not starts & set(skipped)
    assert set(kept) <= starts
    assert int(functions[1]) == info.functions == len(starts)
    assert int(functions[2]) == int(functions[1]) + len(skipped)
    assert (int(text[1]), int(text[2])) == (info.covered_bytes, info.text_bytes)
