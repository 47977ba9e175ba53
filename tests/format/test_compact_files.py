"""``pysframe compact`` on ELF files: the section rewritten in place and nothing else, the
program still runs and unwinds, and GNU's readers (objdump and libsframe 2.47, the kernel's
rules) see the same rules as before.

Programs are built with gcc: given SFrame by ``generate --inject`` (always), and assembled by
``$GAS --gsframe`` and linked by the GNU ld 2.47 beside it when ``$GAS`` is set.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from compact_support import assert_same_rules, every_pc
from conftest import CORPUS, require, require_program
from libsframe_ref import libsframe, reference_tool
from pysframe import SFrameSection, Version
from pysframe.cli import main
from pysframe.elf.reader import ElfReader
from pysframe.errors import ElfError
from pysframe.format.constants import PT_GNU_SFRAME
from pysframe.format.findings import Severity
from pysframe.output import OutputError
from pysframe.sources import load_sframe
from pysframe.tools.compact import compact_file
from pysframe.tools.stats import file_stats
from pysframe.tools.validate import validate_elf

_SHAPES = "\n".join(
    f"__attribute__((noinline)) int leaf{n}(int x) {{ return x * {n} + 1; }}\n"
    f"__attribute__((noinline)) int frame{n}(int x) {{\n"
    f"    volatile int buf[16]; int s = 0;\n"
    f"    for (int i = 0; i < 16; i++) buf[i] = leaf{n}(x + i);\n"
    f"    for (int i = 0; i < 16; i++) s += buf[i] * (i ^ {n});\n"
    f"    return s;\n}}"
    for n in range(1, 13)
)
SOURCE = f"""
#include <stdio.h>
#include <stdlib.h>
{_SHAPES}
int main(int argc, char **argv) {{
    int n = argc > 1 ? atoi(argv[1]) : 3;
    long s = 0;
{"".join(f"    s += frame{n}(n);{chr(10)}" for n in range(1, 13))}
    printf("%ld\\n", s);
    return 7;
}}
"""


def _gcc() -> str:
    return require_program("gcc")


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Programs carrying SFrame V3: ``generated`` (pysframe generate --inject) and, with
    ``$GAS``, ``gnu-ld`` (gas 2.47 --gsframe and GNU ld 2.47)."""
    gcc = _gcc()
    folder = tmp_path_factory.mktemp("compact")
    (folder / "shapes.c").write_text(SOURCE)
    plain = folder / "plain"
    subprocess.run([gcc, "-O2", "-o", str(plain), str(folder / "shapes.c")], check=True)
    built = {"generated": folder / "generated" / "prog"}
    built["generated"].parent.mkdir()
    assert main(["generate", str(plain), "--inject", "-o", str(built["generated"])]) == 0
    gas = os.environ.get("GAS")
    if gas and Path(gas).with_name("ld").exists():
        target = folder / "gnu-ld" / "prog"
        target.parent.mkdir()
        assembly = folder / "shapes.s"
        subprocess.run(
            [gcc, "-O2", "-S", "-o", str(assembly), str(folder / "shapes.c")], check=True
        )
        subprocess.run(
            [gas, "--gsframe", "-o", str(folder / "shapes.o"), str(assembly)], check=True
        )
        subprocess.run(
            [gcc, f"-B{Path(gas).parent}/", "-o", str(target), str(folder / "shapes.o")],
            check=True,
        )
        built["gnu-ld"] = target
    return built


@pytest.fixture(params=["generated", "gnu-ld"])
def program(request: pytest.FixtureRequest, programs: dict[str, Path]) -> Path:
    if request.param not in programs:
        require("gas-2.47", "$GAS does not name a binutils 2.47 as with ld beside it")
    return programs[request.param]


@pytest.fixture()
def compacted(program: Path, tmp_path: Path) -> Iterator[Path]:
    out = tmp_path / "compacted" / program.name
    out.parent.mkdir()
    before = hashlib.sha256(program.read_bytes()).hexdigest()
    report = compact_file(str(program), str(out))
    assert report.new_size < report.old_size and report.compacted is not None
    assert report.compacted.shared > 0
    yield out
    assert hashlib.sha256(program.read_bytes()).hexdigest() == before, "the input changed"


def _run(path: Path) -> tuple[int, str]:
    done = subprocess.run([str(path), "5"], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout


def _sections(path: Path) -> tuple[ElfReader, SFrameSection]:
    image = ElfReader.open(str(path))
    return image, load_sframe(image)


def test_the_compacted_program_runs(program: Path, compacted: Path) -> None:
    assert _run(compacted) == _run(program)
    assert _run(program)[0] == 7


def test_only_the_section_and_its_sizes_change(program: Path, compacted: Path) -> None:
    old, new = program.read_bytes(), compacted.read_bytes()
    assert len(old) == len(new)
    with ElfReader.open(str(program)) as image:
        section = image.find_sframe()
        header = image.header
        segments = image.segments()
    with ElfReader.open(str(compacted)) as image:
        after = image.find_sframe()
        after_segments = image.segments()
    assert section is not None and after is not None
    assert (after.offset, after.address, after.index) == (
        section.offset,
        section.address,
        section.index,
    )
    size = after.size
    # The new section, then zeros where the old one ended.
    assert new[after.offset + size : section.offset + section.size] == bytes(section.size - size)
    # Every other byte is the same, but for the section header and PT_GNU_SFRAME.
    changed = {range(section.offset, section.offset + section.size)}
    entry = header.shoff + section.index * header.shentsize
    changed.add(range(entry, entry + header.shentsize))
    for index, segment in enumerate(segments):
        if segment.type == PT_GNU_SFRAME:
            at = header.phoff + index * header.phentsize
            changed.add(range(at, at + header.phentsize))
            assert (after_segments[index].filesz, after_segments[index].memsz) == (size, size)
    differs = [i for i in range(len(old)) if old[i] != new[i]]
    assert all(any(i in r for r in changed) for i in differs)
    assert [s for s in after_segments if s.type != PT_GNU_SFRAME] == [
        s for s in segments if s.type != PT_GNU_SFRAME
    ]


def test_every_pc_keeps_its_rules(program: Path, compacted: Path) -> None:
    with ElfReader.open(str(program)) as image:
        before = load_sframe(image)
    with ElfReader.open(str(compacted)) as image:
        after = load_sframe(image)
    assert assert_same_rules(before, after) > 1000
    assert after.version is Version.V3


def test_kernel_rules_still_pass(program: Path, compacted: Path) -> None:
    for path in (program, compacted):
        with ElfReader.open(str(path)) as image:
            findings = validate_elf(image, kernel=True)
        assert not [f for f in findings if f.severity is Severity.ERROR], [str(f) for f in findings]


def _objdump(path: Path) -> str:
    objdump = reference_tool("OBJDUMP")
    done = subprocess.run(
        [objdump, "--sframe", path.name], capture_output=True, text=True, cwd=path.parent,
        check=True,
    )  # fmt: skip
    return done.stdout


def test_objdump_text_is_byte_identical(program: Path, compacted: Path) -> None:
    text = _objdump(compacted)
    assert text == _objdump(program)
    assert text.count("func idx [") > 20


def test_libsframe_decodes_and_finds_alike(program: Path, compacted: Path) -> None:
    lib = libsframe()
    _, before = _sections(program)
    _, after = _sections(compacted)
    pcs = every_pc(before).tolist()
    with lib.decode(bytes(before.data)) as old, lib.decode(bytes(after.data)) as new:  # type: ignore[union-attr]
        for pc in pcs:
            function = before.find_function(pc)
            fde_type = 0 if function is None else function.fde_type
            relative = pc - before.section_address
            assert new.find(relative, fde_type) == old.find(relative, fde_type), hex(pc)


def test_corpus_objdump_and_libsframe(tmp_path: Path) -> None:
    # The linked corpus files: x86-64 and AArch64 V2/V3 share blocks; s390x (big-endian)
    # does not by default.
    lib = libsframe()
    files = [p for p in CORPUS.glob("*/v[23]/*") if p.suffix == "" and "." not in p.name]
    assert len(files) >= 5
    for path in files:
        out = tmp_path / path.parent.parent.name / path.parent.name / path.name
        out.parent.mkdir(parents=True, exist_ok=True)
        copy = tmp_path / "orig" / path.parent.parent.name / path.parent.name / path.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
        compact_file(str(copy), str(out))
        assert _objdump(out) == _objdump(copy), path
        _, before = _sections(copy)
        _, after = _sections(out)
        with lib.decode(bytes(before.data)) as old, lib.decode(bytes(after.data)) as new:  # type: ignore[union-attr]
            for pc in every_pc(before).tolist():
                function = before.find_function(pc)
                fde_type = 0 if function is None else function.fde_type
                relative = pc - before.section_address
                assert new.find(relative, fde_type) == old.find(relative, fde_type)


def test_big_endian_sections_share_only_when_asked(tmp_path: Path) -> None:
    path = CORPUS / "s390x" / "v3" / "frames-nopie"
    auto = compact_file(str(path), str(tmp_path / "auto"))
    assert auto.compacted is not None and auto.compacted.shared == 0
    assert any("not shared" in note for note in auto.notes)
    always = compact_file(str(path), str(tmp_path / "always"), share="always")
    assert always.compacted is not None and always.compacted.shared > 0
    assert any("rejects shared FRE blocks" in note for note in always.notes)
    # pysframe reads both alike; check --foreign-endian warns about the shared one.
    _, original = _sections(path)
    _, shared = _sections(tmp_path / "always")
    assert_same_rules(original, shared)
    with ElfReader.open(str(tmp_path / "always")) as image:
        rules = {f.rule for f in validate_elf(image, foreign_endian=True)}
    assert rules == {"fre-block-shared"}
    # libsframe on this little-endian host swaps the section in place and rejects shared blocks.
    lib = libsframe()
    assert lib.decode(bytes(original.data)) is not None
    assert lib.decode(bytes(shared.data)) is None
    _, unshared = _sections(tmp_path / "auto")
    assert lib.decode(bytes(unshared.data)) is not None


# -- the command ----------------------------------------------------------------------------------


def test_cli_in_place_and_dry_run(
    program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "prog"
    shutil.copy2(program, copy)
    data = copy.read_bytes()
    assert main(["compact", str(copy), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{copy}: .sframe V3: " in out and "smaller" in out and "written" not in out
    assert copy.read_bytes() == data
    assert main(["compact", str(copy), "--in-place"]) == 0
    assert f"{copy}: written to {copy}" in capsys.readouterr().out
    assert len(copy.read_bytes()) == len(data) and copy.read_bytes() != data
    assert _run(copy) == _run(program)
    # Compacting again gains nothing, and says so.
    assert main(["compact", str(copy), "--dry-run"]) == 0
    assert "gains nothing" in capsys.readouterr().out
    assert main(["check", "--kernel", str(copy)]) == 0


def test_cli_errors(program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["compact", str(program)])  # no -o, --in-place or --dry-run
    assert exited.value.code == 2
    capsys.readouterr()
    assert main(["compact", str(program), "-o", str(program)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "is the input file" in error
    with pytest.raises(OutputError):
        compact_file(str(program), str(program))
    obj = CORPUS / "x86_64" / "v3" / "frames.o"
    assert main(["compact", str(obj), "-o", str(tmp_path / "x.o")]) == 1
    assert "relocatable object" in capsys.readouterr().err
    with pytest.raises(ElfError, match=r"no \.sframe"):
        compact_file(shutil.which("true") or "/bin/true", str(tmp_path / "t"))


def test_generate_compact(
    program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "section.sframe"
    small = tmp_path / "compact.sframe"
    assert main(["generate", str(program), "-o", str(plain)]) == 0
    assert main(["generate", str(program), "-o", str(small), "--compact", "--report"]) == 0
    report = capsys.readouterr().out
    assert f"compacted: {small.stat().st_size} bytes" in report
    before = SFrameSection.from_bytes(plain.read_bytes())
    after = SFrameSection.from_bytes(small.read_bytes())
    assert len(after.data) < len(before.data)
    assert_same_rules(before, after)
    injected = tmp_path / "injected"
    assert (
        main(["generate", str(program), "--inject", "--replace", "--compact", "-o", str(injected)])
        == 0
    )
    assert _run(injected) == _run(program)
    with ElfReader.open(str(injected)) as image:
        section = load_sframe(image)
        assert len(section.data) == len(after.data)
        assert not [f for f in validate_elf(image, kernel=True) if f.severity is Severity.ERROR]


def test_stats_reports_the_compacted_size(program: Path) -> None:
    stats = file_stats(str(program))
    assert stats.sframe_v3 is not None and stats.sframe_v3_compact is not None
    assert stats.sframe_v3_compact < stats.sframe_v3
    assert "sframe_v3_compact" in stats.as_dict()
