"""``pysframe repair``: SFrame sections that LLVM lld concatenated, merged into one.

Objects are assembled with ``--gsframe`` and linked twice: by Debian's lld (``ld.lld``, which
concatenates the objects' .sframe sections and leaves their function starts as the objects'
relocations made them) and by GNU ld of the same binutils (which merges them).  After repair,
each function of the lld program has, at every offset, the rule GNU ld's program gives it, for
every version GNU as writes:

* V1 (no FDE_FUNC_START_PCREL): Debian's gas and ld 2.40;
* V2 (no FDE_FUNC_START_PCREL): the corpus' objects from gas 2.44 and its programs linked by
  ld 2.44 from them;
* V3 (FDE_FUNC_START_PCREL): ``$GAS`` (binutils 2.47) and the ld beside it; objdump 2.47 then
  reads every function of the repaired program.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import require, require_program
from libsframe_ref import reference_tool
from pysframe import Abi, CfaRule, SFrameSection, Version
from pysframe.cli import main
from pysframe.elf.reader import ElfReader
from pysframe.elf.symbols import read_function_symbols
from pysframe.errors import EncodeError, InvalidFieldError, SFrameError, UnsupportedVersionError
from pysframe.format.builder import SFrameBuilder
from pysframe.format.findings import Severity
from pysframe.format.merge import merge_sections, split_sections
from pysframe.sources import load_sframe
from pysframe.tools.compact import compact_file, repair_file
from pysframe.tools.validate import validate_elf

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
int twice(int); int thrice(int); int walk(int);
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    printf("%d %d %d\n", twice(n), thrice(n), walk(n));
    return 5;
}
"""
HELPERS = r"""
__attribute__((noinline)) int twice(int x) { volatile int a[8]; a[x & 7] = x; return a[x & 7]; }
__attribute__((noinline)) int thrice(int x) { volatile int a[8]; a[x & 7] = x; return -a[x & 7]; }
"""
WALK = r"""
int twice(int);
__attribute__((noinline)) int walk(int n) { return n <= 0 ? 0 : twice(n) + walk(n - 1); }
"""
HEADER = r"""
struct Acc { int v; __attribute__((noinline)) int add(int x) { v += x * 3; return v; } };
int use1(int); int use2(int);
"""
CXX_ONE = '#include "acc.h"\nint use1(int x) { Acc a{x}; return a.add(x) + 1; }\n'
CXX_TWO = r"""
#include "acc.h"
#include <cstdio>
int use2(int x) { Acc a{x}; return a.add(x + 1) * 2; }
int main(int argc, char **) { std::printf("%d\n", use1(argc) + use2(argc)); return 6; }
"""


def _tools() -> tuple[str, str]:
    gas = reference_tool("GAS")
    if not Path(gas).with_name("ld").exists():
        require("ld-2.47", "no GNU ld beside $GAS")
    require_program("ld.lld", "lld")
    require_program("g++")
    return gas, str(Path(gas).parent)


def _objects(folder: Path, sources: dict[str, str], gas: str) -> list[str]:
    objects = []
    for name, text in sources.items():
        source = folder / name
        source.write_text(text)
        if name.endswith(".h"):
            continue
        compiler = "g++" if name.endswith(".cpp") else "gcc"
        assembly = source.with_suffix(".s")
        subprocess.run([compiler, "-O1", "-S", "-o", str(assembly), str(source)], check=True)
        subprocess.run([gas, "--gsframe", "-o", str(source.with_suffix(".o")), str(assembly)],
                       check=True)  # fmt: skip
        objects.append(str(source.with_suffix(".o")))
    return objects


def _link(
    folder: Path, objects: list[str], bin_dir: str | None, cxx: bool = False
) -> tuple[Path, Path]:
    """The objects linked by lld and by GNU ld (the one in ``bin_dir``; None: the system's)."""
    driver = "g++" if cxx else "gcc"
    lld, gnu = folder / "prog-lld", folder / "prog-gnu"
    extra = ["-Wl,--noinhibit-exec"] if cxx else []  # lld errs on FDEs of discarded COMDATs
    subprocess.run([driver, "-fuse-ld=lld", *extra, "-o", str(lld), *objects],
                   check=True, capture_output=True)  # fmt: skip
    gnu_ld = [f"-B{bin_dir}/"] if bin_dir else ["-fuse-ld=bfd"]
    subprocess.run([driver, *gnu_ld, "-o", str(gnu), *objects], check=True)
    return lld, gnu


def _system_objects(folder: Path, sources: dict[str, str]) -> list[str]:
    """The sources compiled by the system's gcc, assembled by its gas 2.40 (SFrame V1)."""
    require_program("ld.lld", "lld")
    require_program("g++")
    version = subprocess.run(["as", "--version"], capture_output=True, text=True).stdout
    if "2.40" not in version.splitlines()[0]:
        require("gas-2.40", "the system's gas is not 2.40 (it writes SFrame V1)")
    objects = []
    for name, text in sources.items():
        source = folder / name
        source.write_text(text)
        if name.endswith(".h"):
            continue
        compiler = "g++" if name.endswith(".cpp") else "gcc"
        target = source.with_suffix(".o")
        subprocess.run([compiler, "-O1", "-Wa,--gsframe", "-c", "-o", str(target), str(source)],
                       check=True)  # fmt: skip
        objects.append(str(target))
    return objects


@pytest.fixture(scope="module")
def c_programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    gas, bin_dir = _tools()
    folder = tmp_path_factory.mktemp("lld-c")
    objects = _objects(folder, {"main.c": MAIN, "helpers.c": HELPERS, "walk.c": WALK}, gas)
    return _link(folder, objects, bin_dir)


@pytest.fixture(scope="module")
def cxx_programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    gas, bin_dir = _tools()
    folder = tmp_path_factory.mktemp("lld-cxx")
    objects = _objects(folder, {"acc.h": HEADER, "one.cpp": CXX_ONE, "two.cpp": CXX_TWO}, gas)
    return _link(folder, objects, bin_dir, cxx=True)


@pytest.fixture(scope="module")
def v1_programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("lld-v1")
    objects = _system_objects(folder, {"main.c": MAIN, "helpers.c": HELPERS, "walk.c": WALK})
    return _link(folder, objects, None)


@pytest.fixture(scope="module")
def v1_cxx_programs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("lld-v1-cxx")
    objects = _system_objects(folder, {"acc.h": HEADER, "one.cpp": CXX_ONE, "two.cpp": CXX_TWO})
    return _link(folder, objects, None, cxx=True)


def _run(path: Path) -> tuple[int, str]:
    done = subprocess.run([str(path), "6"], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout


def _objdump(path: Path) -> str:
    objdump = reference_tool("OBJDUMP")
    return subprocess.run(
        [objdump, "--sframe", str(path)], capture_output=True, text=True, check=True
    ).stdout


def _functions(path: Path) -> tuple[SFrameSection, dict[str, int]]:
    with ElfReader.open(str(path)) as image:
        section = load_sframe(image)
        symbols = {s.name: s.address for s in read_function_symbols(image, ".symtab") if s.size}
    return section, symbols


def _same_rules_as_gnu_ld(repaired: Path, gnu: Path) -> int:
    """Each function of GNU ld's section (by its symbol) has, at every offset, the rules the
    repaired section gives the same function; returns how many functions were compared."""
    ours, our_symbols = _functions(repaired)
    theirs, their_symbols = _functions(gnu)
    by_address = {address: name for name, address in their_symbols.items()}
    compared = 0
    for function in theirs:
        name = by_address.get(function.start)
        if name is None:  # GNU ld's own PLT FDEs: lld has no such entries
            continue
        offsets = np.arange(function.size, dtype=np.uint64)
        expected = theirs.find_rows(np.uint64(function.start) + offsets)
        found = ours.find_rows(np.uint64(our_symbols[name]) + offsets)
        for field in ("row_index", "cfa_reg", "cfa_offset", "cfa_deref", "fp_kind", "fp_offset",
                      "fp_reg", "ra_kind", "ra_offset", "ra_reg", "mangled_ra"):  # fmt: skip
            assert np.array_equal(getattr(found, field), getattr(expected, field)), (name, field)
        assert bool((found.row_index >= 0).all()), name
        compared += 1
    assert compared == len(ours), "the repaired section has functions GNU ld's has not"
    return compared


def test_lld_leaves_the_sections_concatenated(c_programs: tuple[Path, Path]) -> None:
    lld, _ = c_programs
    report = repair_file(str(lld))  # nothing written
    assert report.output is None
    assert report.found is not None and report.found.startswith("3 SFrame sections back to back")
    assert "Num FDEs: 1\n" in _objdump(lld)  # objdump sees the first object's only


def test_repaired_program_reads_in_objdump_and_runs(
    c_programs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lld, gnu = c_programs
    out = tmp_path / "prog"
    assert main(["repair", str(lld), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "found 3 SFrame sections back to back (V3, AMD64_ENDIAN_LITTLE), 4 functions" in said
    assert "merged into one sorted section" in said and "no PT_GNU_SFRAME segment" in said
    assert _run(out) == _run(lld) == _run(gnu) == (5, "6 -6 21\n")
    text = _objdump(out)
    assert "Num FDEs: 4\n" in text and "SFRAME_F_FDE_SORTED" in text
    assert _same_rules_as_gnu_ld(out, gnu) == 4
    with ElfReader.open(str(out)) as image:
        assert validate_elf(image) == []
        kernel = {f.rule for f in validate_elf(image, kernel=True) if f.severity is Severity.ERROR}
    assert kernel == {"elf-segment"}  # lld 14 writes no PT_GNU_SFRAME
    # Repairing again finds nothing to do.
    assert main(["repair", str(out), "--dry-run"]) == 0
    assert "nothing to repair" in capsys.readouterr().out


def test_discarded_comdat_functions_are_dropped(
    cxx_programs: tuple[Path, Path], tmp_path: Path
) -> None:
    lld, gnu = cxx_programs
    out = tmp_path / "prog"
    report = repair_file(str(lld), str(out))
    assert report.dropped == 1  # the second object's copy of Acc::add
    assert _run(out) == _run(gnu) == (6, "31\n")
    assert _same_rules_as_gnu_ld(out, gnu) == 4
    assert "Num FDEs: 4\n" in _objdump(out)


def test_one_unmerged_section_is_sorted(tmp_path: Path) -> None:
    gas, _ = _tools()
    objects = _objects(tmp_path, {"all.c": MAIN + HELPERS + WALK}, gas)
    lld = tmp_path / "one"
    subprocess.run(["gcc", "-fuse-ld=lld", "-o", str(lld), *objects], check=True)
    before, _ = _functions(lld)
    assert not before.header.sorted
    report = repair_file(str(lld), str(tmp_path / "fixed"))
    assert report.found == (
        "one SFrame section (V3, AMD64_ENDIAN_LITTLE), 4 functions, not flagged sorted"
    )
    after, _ = _functions(tmp_path / "fixed")
    assert after.header.sorted and list(after.starts) == sorted(before.starts)
    assert _run(tmp_path / "fixed") == _run(lld)


def test_compact_refuses_concatenated_sections(
    c_programs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lld, _ = c_programs
    with pytest.raises(SFrameError, match="pysframe repair merges them"):
        compact_file(str(lld), str(tmp_path / "x"))
    assert main(["compact", str(lld), "-o", str(tmp_path / "x")]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"pysframe: {lld}: .sframe: holds 3")
    assert not (tmp_path / "x").exists()


# -- V1 and V2: function starts without FDE_FUNC_START_PCREL ---------------------------------------


def test_v1_repaired_as_gnu_ld_merges(v1_programs: tuple[Path, Path], tmp_path: Path) -> None:
    lld, gnu = v1_programs
    report = repair_file(str(lld), str(tmp_path / "prog"))
    assert report.found is not None and report.found.startswith("3 SFrame sections back to back")
    assert "(V1, AMD64_ENDIAN_LITTLE)" in report.found
    assert _same_rules_as_gnu_ld(tmp_path / "prog", gnu) == 4
    assert _run(tmp_path / "prog") == _run(gnu) == (5, "6 -6 21\n")
    with ElfReader.open(str(tmp_path / "prog")) as image:
        assert [f for f in validate_elf(image) if f.severity is Severity.ERROR] == []


def test_v1_discarded_comdat_functions_are_dropped(
    v1_cxx_programs: tuple[Path, Path], tmp_path: Path
) -> None:
    lld, gnu = v1_cxx_programs
    report = repair_file(str(lld), str(tmp_path / "prog"))
    assert report.dropped == 1
    assert _same_rules_as_gnu_ld(tmp_path / "prog", gnu) == 4
    assert _run(tmp_path / "prog") == _run(gnu) == (6, "31\n")


V2 = Path(__file__).parent.parent / "data" / "corpus" / "x86_64" / "v2"


@pytest.mark.parametrize("name", ["frames", "app"])
def test_v2_repaired_as_gnu_ld_merges(name: str, tmp_path: Path) -> None:
    # The corpus' V2 programs were linked by GNU ld 2.44 from these objects alone.
    require_program("ld.lld", "lld")
    require_program("g++")
    lld = tmp_path / f"{name}-lld"
    subprocess.run(["g++", "-fuse-ld=lld", "-o", str(lld), str(V2 / f"{name}.o")], check=True)
    repaired = tmp_path / name
    report = repair_file(str(lld), str(repaired))
    assert report.found is not None and "(V2, AMD64_ENDIAN_LITTLE)" in report.found
    compared = _same_rules_as_gnu_ld(repaired, V2 / name)
    assert compared == len(load_sframe(str(repaired))) > 3


def test_starts_that_fit_no_symbol_are_refused(
    v1_programs: tuple[Path, Path], tmp_path: Path
) -> None:
    # Without symbols, nothing tells which reading of a V1 piece's starts is right.
    lld, _ = v1_programs
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(lld)], check=True)
    with pytest.raises(SFrameError, match=r"cannot place SFrame section 1 .* with certainty"):
        repair_file(str(stripped), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


# -- the format level, without tools --------------------------------------------------------------


def _piece(start: int, abi: Abi = Abi.AMD64_ENDIAN_LITTLE) -> bytes:
    builder = SFrameBuilder(abi, Version.V3, sort=False)
    builder.add_function(start, 0x10).add_row(
        0, CfaRule(7 if abi is Abi.AMD64_ENDIAN_LITTLE else 31, 8)
    )
    return builder.to_bytes()


def test_split_and_merge_back_to_back_sections() -> None:
    first, second = _piece(0x2000), _piece(0x1000)
    padding = bytes(-len(first) % 8)
    data = first + padding + second
    pieces = split_sections(data)
    assert [(p.offset, p.end) for p in pieces] == [
        (0, len(first)), (len(first) + len(padding), len(data))
    ]  # fmt: skip
    merged, dropped = merge_sections(pieces, 0)
    section = SFrameSection.from_bytes(merged)
    # Each piece's starts were relative to the piece: at address 0 and len(first)+padding.
    assert dropped == 0 and section.header.sorted
    assert [int(s) for s in section.starts] == sorted([0x2000, 0x1000 + len(first) + len(padding)])


def test_split_refuses_bytes_that_are_no_section() -> None:
    data = _piece(0x1000) + b"\x01\x02"
    with pytest.raises(InvalidFieldError, match="neither zero padding nor the start"):
        split_sections(data)


def test_a_bad_later_piece_is_located_in_the_bytes_searched() -> None:
    """The error about the second piece is the decoder's, its offset counted from the start
    of the whole section (here: the second piece's version byte)."""
    first = _piece(0x2000)
    at = len(first) + (-len(first) % 8)
    data = bytearray(first + bytes(at - len(first)) + _piece(0x1000))
    data[at + 2] = 9  # sfp_version
    with pytest.raises(UnsupportedVersionError) as raised:
        split_sections(bytes(data))
    assert raised.value.message == "unsupported SFrame version 9"
    assert raised.value.offset == at + 2


def test_merge_refuses_pieces_of_other_abis() -> None:
    data = (
        _piece(0x1000)
        + bytes(8 - len(_piece(0x1000)) % 8)
        + _piece(0x2000, Abi.AARCH64_ENDIAN_LITTLE)
    )
    pieces = split_sections(data)
    with pytest.raises(EncodeError, match="differs from the first in its ABI"):
        merge_sections(pieces, 0)


def test_merge_drops_functions_outside_the_text_ranges() -> None:
    data = _piece(0x1000)
    merged, dropped = merge_sections(split_sections(data), 0, [(0x5000, 0x6000)])
    assert dropped == 1 and len(SFrameSection.from_bytes(merged)) == 0
