"""A wrong .sframe never turns into a wrong backtrace: the trust policy of
:mod:`pysframe.sources.trust`, on programs whose own section is wrong.

* The stack test program linked by lld (Debian's lld 14) from objects GNU as 2.40 assembled
  with ``--gsframe`` (V1): lld concatenates the objects' sections, so the program's section
  describes other code than the one at its addresses (its functions overlap).  ``stack``
  (``--sframe auto``, the default) must give gdb's frames, with one warning line naming the
  program and why its section is not used; ``--sframe own`` uses it anyway and says so.
* A copy of a program with a section pysframe injected, 64 FDE bytes then damaged.
* Hand-built sections for each check: functions that overlap, lie outside the code, sections
  back to back, an FDE whose FRE block runs past the end.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require_program, unavailable
from elf_build import RawFunction, fre_info, sframe_bytes
from pysframe.cli import main
from pysframe.elf.reader import ElfReader
from pysframe.sources import ResolvedSFrame, resolve_sframe
from pysframe.sources.trust import Policy, trust_problems
from pysframe.unwind.modules import facts_of_image
from pysframe.unwind.stack import StackReport, module_warnings, stack_of_process
from stack_support import (
    SOURCES,
    GdbFrame,
    Running,
    Unavailable,
    check_ptrace,
    gdb_backtraces,
    run_program,
)

DEPTH, THREADS = 6, 2


def _build_with_lld(out: Path) -> Path:
    """The stack test program and its library, -O2 without frame pointers, SFrame by the
    machine's gas (--gsframe), linked by lld."""
    if shutil.which("gcc") is None or shutil.which("ld.lld") is None:
        raise Unavailable("lld", "gcc or ld.lld is not installed")
    flags = ["-O2", "-fomit-frame-pointer", "-Wa,--gsframe", "-fuse-ld=lld"]
    commands = [
        ["gcc", *flags, "-fPIC", "-shared", "-o", str(out / "libstacklib.so"),
         str(SOURCES / "stacklib.c")],
        ["gcc", *flags, "-pthread", "-o", str(out / "stack_prog"), str(SOURCES / "stack_prog.c"),
         f"-L{out}", "-lstacklib", "-Wl,-rpath,$ORIGIN"],
    ]  # fmt: skip
    for command in commands:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode:
            raise Unavailable("lld", f"cannot build with lld: {result.stderr.strip()[:200]}")
    return out / "stack_prog"


@pytest.fixture(scope="module")
def lld_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        program = _build_with_lld(tmp_path_factory.mktemp("lld"))
        check_ptrace()
        if shutil.which("gdb") is None:
            raise Unavailable("gdb", "gdb is not installed")
    except Unavailable as why:
        unavailable(why)
    return program


@pytest.fixture(scope="module")
def stopped(lld_program: Path) -> Iterator[Running]:
    with run_program(lld_program, DEPTH, THREADS) as running:
        yield running


def _frames(report: StackReport) -> dict[int, list[GdbFrame]]:
    return {
        thread.tid: [None if f.signal_trampoline else f.pc for f in thread.backtrace.frames]
        for thread in report.threads
    }


def test_lld_section_fails_the_checks(lld_program: Path) -> None:
    # The premise: GNU tools and pysframe's validator both find the section wrong.
    found = resolve_sframe(str(lld_program))
    with ElfReader.open(str(lld_program)) as image:
        code = [(s.vaddr, s.vaddr + s.memsz) for s in image.load_segments() if s.flags & 1]
    problems = trust_problems(found, code)
    assert problems, "the lld-linked program's section passed the checks"
    assert main(["check", str(lld_program)]) == 1


def test_stack_matches_gdb_despite_the_wrong_section(stopped: Running) -> None:
    gdb = gdb_backtraces("-p", str(stopped.pid))
    report = stack_of_process(stopped.pid)
    assert _frames(report) == gdb
    program = next(m for m in report.modules.modules if m.path.endswith("/stack_prog"))
    assert program.origin == "generated"
    assert program.reason is not None and program.reason.startswith("its .sframe is not used: ")
    warnings = [w for w in module_warnings(report) if w.startswith(program.path)]
    assert len(warnings) == 1, warnings


def test_cli_warns_once_and_json_says_why(
    stopped: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stack", "--json", str(stopped.pid)]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "stack_prog:" in line]
    assert len(lines) == 1 and lines[0].startswith("pysframe: warning: ")
    assert "its .sframe is not used" in lines[0]
    modules = json.loads(captured.out)["modules"]
    program = next(m for m in modules if m["path"].endswith("/stack_prog"))
    assert program["origin"] == "generated" and "overlap" in program["reason"]


def test_own_uses_the_section_as_asked(stopped: Running) -> None:
    report = stack_of_process(stopped.pid, policy=Policy.OWN)
    program = next(m for m in report.modules.modules if m.path.endswith("/stack_prog"))
    assert program.origin in ("section", "segment")
    assert program.reason is not None and "used as asked" in program.reason


# -- a damaged injected section --------------------------------------------------------------


def test_damaged_section_is_not_used(tmp_path: Path) -> None:
    require_program("gcc")
    source = tmp_path / "prog.c"
    source.write_text(
        "int f(int x) { return x * 3; }\nint g(int x) { return f(x) + 1; }\n"
        "int main(int argc, char **argv) { (void)argv; return g(argc); }\n"
    )
    program = tmp_path / "prog"
    subprocess.run(["gcc", "-O2", "-o", str(program), str(source)], check=True)
    injected = tmp_path / "injected"
    assert main(["generate", str(program), "--inject", "-o", str(injected)]) == 0
    found = resolve_sframe(str(injected))
    assert found.elf_section is not None
    header = found.section.header
    fdes = found.elf_section.offset + header.size + header.fde_offset
    data = bytearray(injected.read_bytes())
    for at in range(fdes, fdes + 64):
        data[at] ^= 0xFF
    damaged = tmp_path / "damaged"
    damaged.write_bytes(bytes(data))
    with ElfReader.open(str(damaged)) as image:
        facts = facts_of_image(image)
    # Either the section no longer opens, or it opens and fails the checks: never used.
    assert facts.own_problems(), "the damaged section passed the checks"


# -- hand-built sections ---------------------------------------------------------------------

TEXT = (0x1000, 0x2000)


def _resolved(tmp_path: Path, functions: list[RawFunction], tail: bytes = b"") -> ResolvedSFrame:
    path = tmp_path / "section.sframe"
    path.write_bytes(sframe_bytes(3, 3, functions, flags=1, fixed_ra=-8) + tail)
    return resolve_sframe(str(path), raw=True)


def _function(start: int, size: int) -> RawFunction:
    # V3 without FDE_FUNC_START_PCREL (flags=1: FDE_SORTED only): the start field is relative
    # to the section, read at address 0.  One row: CFA = SP + 8 (info: SP-based, one word).
    return RawFunction(start, size, rows=[(0, fre_info(1), (8,))])


def test_a_good_section_passes(tmp_path: Path) -> None:
    found = _resolved(tmp_path, [_function(0x1000, 0x10), _function(0x1010, 0x20)])
    assert trust_problems(found, [TEXT]) == []


def test_overlapping_functions(tmp_path: Path) -> None:
    found = _resolved(tmp_path, [_function(0x1000, 0x20), _function(0x1010, 0x20)])
    problems = trust_problems(found, [TEXT])
    assert len(problems) == 1 and "1 of its 2 functions overlap" in problems[0]


def test_functions_outside_the_code(tmp_path: Path) -> None:
    found = _resolved(tmp_path, [_function(0x1000, 0x10), _function(0x1ff8, 0x10)])
    problems = trust_problems(found, [TEXT])
    assert len(problems) == 1 and "1 of its 2 functions lie outside the file's code" in problems[0]
    assert trust_problems(found, []) == []  # no code known: not checked


def test_sections_back_to_back(tmp_path: Path) -> None:
    second = sframe_bytes(3, 3, [_function(0x1800, 0x10)], flags=1, fixed_ra=-8)
    padding = bytes(-len(second) % 8)
    found = _resolved(tmp_path, [_function(0x1000, 0x10)], padding + second)
    problems = trust_problems(found, [TEXT])
    assert len(problems) == 1 and "2 SFrame sections back to back" in problems[0]
