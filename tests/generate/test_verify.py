"""pysframe verify: the corpus verifies clean, damaged copies are caught at the right function
and PC, GNU as 2.40's V1 rules are noted, and many files give the same results in one process,
in a process pool and on a Dask cluster."""

from __future__ import annotations

import csv
import io
import json
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import require, require_module, require_program
from pysframe.cli import main
from pysframe.elf.reader import ElfReader
from pysframe.elf.sframe import find_sframe
from pysframe.elf.symbols import read_function_symbols
from pysframe.errors import SFrameError
from pysframe.format.encode import encode_section
from pysframe.format.model import FrameRow, Function
from pysframe.format.section import SFrameSection
from pysframe.sources import load_sframe
from pysframe.tools.verify import collect, verify_file
from pysframe.tools.verify_report import (
    CONSISTENT,
    DISAGREEMENT,
    NO_SFRAME,
    NOT_COMPARED,
    REJECTED,
    Difference,
    FileReport,
    Options,
    package_of,
    summarize,
)
from pysframe.tools.verify_rules import GAS_2_40_ESCAPE, REASONS, REPRESENTABLE

DATA = Path(__file__).parent.parent / "data"
CORPUS = DATA / "corpus"
CORPUS_FILES = sorted(
    p for p in CORPUS.glob("*/v*/*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"
)
FRAMES = CORPUS / "x86_64" / "v3" / "frames"


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: "/".join(p.parts[-3:]))
def test_corpus_verifies_clean(path: Path) -> None:
    report = verify_file(path)
    assert report.status == CONSISTENT, report.disagreements
    assert report.disagreement_count == 0 and report.disagreeing_bytes == 0
    assert report.compared_functions > 0
    assert report.agreeing_bytes + report.noted_bytes == report.compared_bytes
    assert report.without_cfi_count == 0
    # Everything left out has a reason; notes are only the linker's .plt.got.
    assert all(item.reason for item in report.without_sframe)
    assert all(note.reason == REASONS[2] for note in report.notes)


def test_corpus_functions_without_sframe_are_start_up_code_or_v3_only() -> None:
    """The only CFI functions without SFrame in the corpus: the C library's start-up code
    (assembled without --gsframe) and, in V1/V2 sections, the one function needing FLEX."""
    reasons = set()
    for path in CORPUS_FILES:
        for item in verify_file(path).without_sframe:
            reasons.add(item.reason)
            if item.reason == REPRESENTABLE:
                assert item.function in ("_start", "", "_dl_relocate_static_pie",
                                         "deregister_tm_clones", "register_tm_clones",
                                         "__do_global_dtors_aux", "frame_dummy", "_init",
                                         "_fini", "call_weak_fn")  # fmt: skip
    assert any("no FLEX FDEs" in reason for reason in reasons)
    assert "the linker wrote no SFrame for its .plt.got section" in reasons  # ld 2.40
    assert any("cannot say that the RA is undefined" in reason for reason in reasons)


# -- damaged copies ---------------------------------------------------------------------------


def _damaged(
    source: Path, target: Path, damage: Callable[[list[Function]], list[Function]]
) -> SFrameSection:
    """A copy of ``source`` whose .sframe section is re-encoded, through the format package,
    from ``damage(functions)`` (zero-padded to its old size); returns the damaged section."""
    with ElfReader.open(str(source)) as image:
        found = find_sframe(image)
        assert found is not None
        section = found.decode()
        offset, size = found.section.offset, found.section.size
    functions = [replace(f, _rows=f.rows, _loader=None) for f in section]
    spec = section.spec()
    data = encode_section(spec, damage(functions))
    assert len(data) <= size
    data += bytes(size - len(data))
    copy = bytearray(source.read_bytes())
    copy[offset : offset + size] = data
    target.write_bytes(bytes(copy))
    return SFrameSection.from_bytes(data, section.section_address)


def _function_at(functions: list[Function], start: int) -> int:
    return next(i for i, f in enumerate(functions) if f.start == start)


def _with_rows(function: Function, rows: list[FrameRow]) -> Function:
    return replace(function, _rows=tuple(rows), num_rows=len(rows))


# The function damaged: frames' "small_frame" (four rows: sp+8, sp+48, sp+8 ...).
def _victim() -> tuple[int, str, list[FrameRow]]:
    with ElfReader.open(str(FRAMES)) as image:
        section = load_sframe(image)
        symbols = {s.address: s.name for s in read_function_symbols(image, ".symtab")}
    for function in section:
        if len(function.rows) >= 3 and symbols.get(function.start):
            return function.start, symbols[function.start], list(function.rows)
    raise AssertionError("no function with three rows")


def test_changed_cfa_offset_is_reported_at_its_row(tmp_path: Path) -> None:
    start, name, rows = _victim()

    def damage(functions: list[Function]) -> list[Function]:
        index = _function_at(functions, start)
        row = rows[1]
        changed = replace(row, words=(row.words[0] + 8, *row.words[1:]))
        functions[index] = _with_rows(functions[index], [rows[0], changed, *rows[2:]])
        return functions

    target = tmp_path / "frames"
    _damaged(FRAMES, target, damage)
    report = verify_file(target)
    assert report.status == DISAGREEMENT
    assert report.disagreement_count == 1
    (found,) = report.disagreements
    assert (found.function, found.function_start) == (name, start)
    assert (found.start, found.end) == (start + rows[1].start_offset, start + rows[2].start_offset)
    assert rows[1].cfa is not None
    assert f"CFA sp{rows[1].cfa.offset:+d}" in found.cfi
    assert f"CFA sp{rows[1].cfa.offset + 8:+d}" in found.sframe
    assert main(["verify", str(target)]) == 1


def test_dropped_fre_is_reported_where_the_previous_row_now_applies(tmp_path: Path) -> None:
    start, name, rows = _victim()

    def damage(functions: list[Function]) -> list[Function]:
        index = _function_at(functions, start)
        functions[index] = _with_rows(functions[index], [rows[0], *rows[2:]])
        return functions

    target = tmp_path / "frames"
    _damaged(FRAMES, target, damage)
    report = verify_file(target)
    assert report.status == DISAGREEMENT
    (found,) = report.disagreements
    assert found.function == name
    assert (found.start, found.end) == (start + rows[1].start_offset, start + rows[2].start_offset)
    assert rows[0].cfa is not None
    assert f"CFA sp{rows[0].cfa.offset:+d}" in found.sframe


def test_dropped_first_fre_leaves_pcs_without_a_row(tmp_path: Path) -> None:
    start, name, rows = _victim()

    def damage(functions: list[Function]) -> list[Function]:
        index = _function_at(functions, start)
        functions[index] = _with_rows(functions[index], rows[1:])
        return functions

    target = tmp_path / "frames"
    _damaged(FRAMES, target, damage)
    (found,) = verify_file(target).disagreements
    assert (found.function, found.start, found.end) == (name, start, start + rows[1].start_offset)
    assert found.sframe == "no row" and found.reason == "no SFrame row covers these PCs"


def test_cut_function_size_is_reported_at_its_end(tmp_path: Path) -> None:
    start, name, _rows = _victim()
    cut = 5
    sizes = {}

    def damage(functions: list[Function]) -> list[Function]:
        index = _function_at(functions, start)
        sizes["old"] = functions[index].size
        functions[index] = replace(functions[index], size=functions[index].size - cut)
        return functions

    target = tmp_path / "frames"
    _damaged(FRAMES, target, damage)
    report = verify_file(target)
    (found,) = report.disagreements
    end = start + sizes["old"]
    assert (found.function, found.start, found.end) == (name, end - cut, end)
    assert found.sframe == "no row"
    assert report.disagreeing_bytes == cut


def test_changed_plt_row_is_reported_in_every_entry(tmp_path: Path) -> None:
    """The .plt's PCMASK rows against ld's CFI expression, evaluated at every PC: a wrong CFA
    after the push is caught in each 16-byte entry."""
    with ElfReader.open(str(FRAMES)) as image:
        section = load_sframe(image)
    masked = next(f for f in section if f.pc_type == 1)
    rows = list(masked.rows)

    def damage(functions: list[Function]) -> list[Function]:
        index = _function_at(functions, masked.start)
        row = rows[1]
        changed = replace(row, words=(row.words[0] + 8, *row.words[1:]))
        functions[index] = _with_rows(functions[index], [rows[0], changed])
        return functions

    target = tmp_path / "frames"
    _damaged(FRAMES, target, damage)
    report = verify_file(target)
    assert report.status == DISAGREEMENT
    entries = masked.size // masked.rep_size
    assert report.disagreement_count == entries
    first = report.disagreements[0]
    assert first.function == ".plt"
    block = masked.start + rows[1].start_offset
    assert (first.start, first.end) == (block, masked.start + masked.rep_size)
    assert (first.cfi, first.sframe) == ("CFA sp+16, FP u, RA c-8", "CFA sp+24, FP u, RA c-8")
    assert report.disagreeing_bytes == entries * (masked.rep_size - rows[1].start_offset)


@pytest.mark.parametrize("arch", ["aarch64", "s390x"])
def test_changed_cfa_offset_on_other_abis(arch: str, tmp_path: Path) -> None:
    source = CORPUS / arch / "v3" / ("frames" if arch == "aarch64" else "frames-nopie")
    with ElfReader.open(str(source)) as image:
        section = load_sframe(image)
    victim = next(f for f in section if len(f.rows) >= 2 and f.rows[1].words)
    rows = list(victim.rows)

    def damage(functions: list[Function]) -> list[Function]:
        index = _function_at(functions, victim.start)
        row = rows[1]
        changed = replace(row, words=(row.words[0] + 1, *row.words[1:]))
        functions[index] = _with_rows(functions[index], [rows[0], changed, *rows[2:]])
        return functions

    target = tmp_path / source.name
    damaged = _damaged(source, target, damage)
    report = verify_file(target)
    assert report.status == DISAGREEMENT
    (found,) = report.disagreements
    end = victim.start + (rows[2].start_offset if len(rows) > 2 else victim.size)
    assert (found.start, found.end) == (victim.start + rows[1].start_offset, end)
    wrong = damaged.find_row(found.start)
    assert wrong is not None and wrong.row.cfa is not None
    assert f"{wrong.row.cfa.offset:+d}," in found.sframe


# -- GNU as' own differences ------------------------------------------------------------------


def test_v1_from_gas_2_40_verifies_with_its_rules_noted() -> None:
    """gas240-quirks.o was assembled by GNU as 2.40 (V1): where its rows differ from the CFI,
    GNU as 2.40's reading explains them, and each is noted with the rule."""
    report = verify_file(DATA / "verify" / "gas240-quirks.o")
    assert report.sframe_version == 1
    assert report.status == CONSISTENT and report.disagreement_count == 0
    notes = {(note.function, note.reason) for note in report.notes}
    assert notes == {
        ("undef_ra", REASONS[4]),
        ("remember", REASONS[8]),
        ("same_fp", REASONS[6]),
    }
    (left_out,) = report.without_sframe
    assert left_out.function == "args_size"
    assert left_out.reason == GAS_2_40_ESCAPE.format("DW_CFA_GNU_args_size")
    assert main(["verify", str(DATA / "verify" / "gas240-quirks.o")]) == 0


def test_gas_2_47_rows_that_differ_from_the_cfi() -> None:
    """gas-cfi-bugs.o (GNU as 2.47): DW_CFA_def_cfa_register read with the offset of the last
    row written is a disagreement (the CFA is wrong); DW_CFA_restore read as "back to the first
    row" is noted (the FP is read from a slot that still holds it)."""
    report = verify_file(DATA / "verify" / "gas-cfi-bugs.o")
    assert report.status == DISAGREEMENT

    def rows(items: tuple[Difference, ...]) -> list[tuple[str, int, int, str, str]]:
        return [
            (d.function, d.start - d.function_start, d.end - d.function_start, d.cfi, d.sframe)
            for d in items
        ]

    assert rows(report.disagreements) == [
        ("defreg_stale", 4, 6, "CFA fp+24, FP c-16, RA c-8", "CFA fp+16, FP c-16, RA c-8"),
    ]
    assert rows(report.notes) == [
        ("restore_to_cie", 2, 3, "CFA sp+16, FP u, RA c-8", "CFA sp+16, FP c-16, RA c-8"),
        ("restore_to_cie", 3, 4, "CFA sp+8, FP u, RA c-8", "CFA sp+8, FP c-16, RA c-8"),
    ]
    assert {note.reason for note in report.notes} == {REASONS[10]}


def test_damage_past_the_first_thousands_of_functions(tmp_path: Path) -> None:
    """A program of 9,000 functions (more than verify_compare.FDE_CHUNK, whose points are
    found together) with SFrame generated and injected: clean, and a CFA offset changed in its
    last function is reported there and only there."""
    require_program("gcc")
    count = 9_000
    source = tmp_path / "many.c"
    source.write_text(
        "int sink(int);\n"
        + "".join(f"int f{i}(int x) {{ return sink(x) + {i}; }}\n" for i in range(count))
        + "int sink(int x) { return x; }\n"
        + f"int main(void) {{ return f0(0) + f{count - 1}(0); }}\n"
    )
    program = tmp_path / "many"
    subprocess.run(["gcc", "-O0", "-o", str(program), str(source)], check=True)
    injected = tmp_path / "many.sframe"
    assert main(["generate", str(program), "--inject", "-o", str(injected)]) == 0
    clean = verify_file(injected)
    assert clean.status == CONSISTENT and clean.compared_functions > count
    with ElfReader.open(str(injected)) as image:
        start = next(
            s.address for s in read_function_symbols(image, ".symtab") if s.name == f"f{count - 1}"
        )
        rows = list(next(f for f in load_sframe(image) if f.start == start).rows)
    assert len(rows) >= 3

    def damage(functions: list[Function]) -> list[Function]:
        index = _function_at(functions, start)
        assert index > count - 10
        changed = replace(rows[1], words=(rows[1].words[0] + 8, *rows[1].words[1:]))
        functions[index] = _with_rows(functions[index], [rows[0], changed, *rows[2:]])
        return functions

    target = tmp_path / "many.damaged"
    _damaged(injected, target, damage)
    report = verify_file(target)
    assert report.status == DISAGREEMENT and report.disagreement_count == 1
    (found,) = report.disagreements
    assert (found.function, found.function_start) == (f"f{count - 1}", start)
    assert (found.start, found.end) == (start + rows[1].start_offset, start + rows[2].start_offset)

def test_libbfd_built_with_gas_2_47_verifies_clean() -> None:
    """libbfd (all targets) compiled with GNU as 2.47 --gsframe and linked by ld 2.47: every PC
    of every function agrees with the CFI; the only note is ld's .plt.got."""
    import os

    import libbfd_gsframe

    library = libbfd_gsframe.built()
    if library is None and os.environ.get("PYSFRAME_BUILD_LIBBFD"):
        library = libbfd_gsframe.build()
    if library is None:
        require(
            "libbfd-gsframe",
            "no libbfd built with GNU as 2.47 --gsframe: python tests/support/libbfd_gsframe.py "
            "builds it (about 5 minutes), or PYSFRAME_BUILD_LIBBFD=1 here",
        )
    report = verify_file(library)
    assert report.sframe_version == 3 and report.origin == "section"
    assert report.status == CONSISTENT and report.disagreement_count == 0
    assert report.compared_functions > 8_000 and report.compared_bytes > 3_000_000
    assert all(note.function == ".plt.got" for note in report.notes)
    assert report.without_cfi_count == 0


# -- the command line -------------------------------------------------------------------------


def test_cli_exit_codes_and_messages(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["verify", str(FRAMES)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{FRAMES}: consistent\n")
    assert "7,299 agree, 8 noted, 0 disagree" in out
    plain = tmp_path / "plain"
    shutil.copy(DATA.parent / "data" / "corpus" / "x86_64" / "v3" / "frames.o", plain)
    assert main(["verify", str(plain)]) == 0
    not_elf = tmp_path / "not-elf"
    not_elf.write_bytes(b"hello")
    assert main(["verify", str(not_elf)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pysframe: {not_elf}") and err.count("\n") == 1
    with pytest.raises(SystemExit) as usage:
        main(["verify", "--jobs", "0", str(FRAMES)])
    assert usage.value.code == 2


def test_machine_without_an_sframe_abi(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 32-bit x86 file (perf ships two in /usr/lib/perf-core) has nothing to verify: on its
    own it fails with the reason and no --generate hint; in a directory it counts as a file
    without SFrame, not as an error."""
    folder = tmp_path / "tree"
    folder.mkdir()
    i386 = folder / "helper32"
    i386.write_bytes(
        b"\x7fELF\x01\x01\x01" + bytes(9)  # ELFCLASS32, little-endian, version 1
        # e_type EXEC, e_machine EM_386, e_version, entry, phoff, shoff, flags, ehsize 52,
        # phentsize 32, phnum 0, shentsize 40, shnum 0, shstrndx 0
        + struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, 0, 0, 0, 0, 52, 32, 0, 40, 0, 0)
    )
    report = verify_file(i386)
    assert report.status == NO_SFRAME
    assert report.error == f"{i386}: SFrame defines no ABI for elf32-i386"
    assert main(["verify", str(i386)]) == 1
    assert capsys.readouterr().err == f"pysframe: {i386}: SFrame defines no ABI for elf32-i386\n"
    assert main(["verify", "--dir", str(folder), "--csv"]) == 0
    (row,) = csv.DictReader(io.StringIO(capsys.readouterr().out))
    assert row["status"] == "no-sframe"

def test_cli_file_without_sframe(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    require_program("objcopy", "binutils")
    target = tmp_path / "no-sframe"
    subprocess.run(["objcopy", "--remove-section=.sframe", str(FRAMES), str(target)], check=True)
    assert main(["verify", str(target)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"pysframe: {target}: no .sframe section (--generate uses SFrame generated from its "
        "CFI)\n"
    )
    assert main(["verify", "--generate", str(target)]) == 0
    assert "SFrame V3 (generated)" in capsys.readouterr().out
    report = verify_file(target, Options(generate=True))
    assert report.status == CONSISTENT and report.origin == "generated"
    assert report.disagreement_count == 0
    # The generator describes every function, the PLT included (ld's CFA for .plt.got).
    assert report.without_sframe_count == 0 and report.note_count == 0
    assert verify_file(target).status == NO_SFRAME


def test_cli_kernel_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--kernel", str(FRAMES)]) == 0
    v2 = CORPUS / "x86_64" / "v2" / "frames"
    assert main(["verify", "--kernel", str(v2)]) == 1
    out = capsys.readouterr().out
    assert f"{v2}: {REJECTED}" in out and "[version]" in out
    assert verify_file(v2, Options(kernel=True)).kernel_findings


def _tree(tmp_path: Path) -> Path:
    """Two package directories and a loose file."""
    root = tmp_path / "tree"
    (root / "pkg-a" / "usr" / "lib").mkdir(parents=True)
    (root / "pkg-b").mkdir()
    shutil.copy(FRAMES, root / "pkg-a" / "usr" / "lib" / "frames")
    shutil.copy(CORPUS / "x86_64" / "v3" / "lib.so", root / "pkg-a" / "usr" / "lib" / "lib.so")
    shutil.copy(CORPUS / "x86_64" / "v1" / "app", root / "pkg-b" / "app")
    shutil.copy(DATA / "verify" / "gas-cfi-bugs.o", root / "pkg-b" / "bugs.o")
    shutil.copy(CORPUS / "aarch64" / "v3" / "frames.o", root / "loose.o")
    (root / "README").write_text("not ELF\n")
    return root


def test_cli_directory_table_csv_and_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = _tree(tmp_path)
    assert main(["verify", "--dir", str(root), "-r", "-j", "1", "--no-progress"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["package", "files", "ok"]
    rows = {line.split()[0]: line.split() for line in lines[1 : lines.index("")]}
    assert [line.split()[0] for line in lines[1:4]] == [".", "pkg-a", "pkg-b"]
    # files, ok, noSF, none (nothing compared), bad, err
    assert rows["TOTAL"][1:7] == ["5", "4", "0", "0", "1", "0"]
    assert rows["pkg-a"][1:7] == ["2", "2", "0", "0", "0", "0"]
    assert rows["pkg-b"][1:7] == ["2", "1", "0", "0", "1", "0"]
    assert f"{root / 'pkg-b' / 'bugs.o'}: disagreement" in out  # failing files in full
    assert main(["verify", "--dir", str(root), "-r", "--csv"]) == 1
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [Path(r["path"]).name for r in table] == ["loose.o", "frames", "lib.so", "app", "bugs.o"]
    assert [r["status"] for r in table] == ["consistent"] * 4 + ["disagreement"]
    assert main(["verify", "--dir", str(root), "-r", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["status"] == 1
    assert [p["name"] for p in document["packages"]] == [".", "pkg-a", "pkg-b"]
    assert document["total"]["disagreements"] == 1
    bugs = document["files"][-1]
    assert bugs["disagreements"][0]["function"] == "defreg_stale"


def test_package_directories() -> None:
    assert package_of("/r/pkg/usr/lib/x.so", ["/r"]) == "pkg"
    assert package_of("/r/x.so", ["/r"]) == "."
    assert package_of("/elsewhere/x.so", ["/r"]) == "/elsewhere"


def _comparable(reports: list[FileReport]) -> list[dict[str, object]]:
    return [{k: v for k, v in r.as_dict().items() if k != "seconds"} for r in reports]


def test_process_pool_gives_the_same_reports(tmp_path: Path) -> None:
    paths = [str(p) for p in CORPUS_FILES[:8]] + [str(DATA / "verify" / "gas-cfi-bugs.o")]
    alone = collect(paths)
    pooled = collect(paths, jobs=2)
    assert _comparable(alone) == _comparable(pooled)
    groups, total = summarize(pooled)
    assert total.files == len(paths) and total.disagreements == 1
    assert sum(g.files for g in groups) == len(paths)


def test_dask_cluster_gives_the_same_reports(capsys: pytest.CaptureFixture[str]) -> None:
    distributed = require_module("distributed", "dask", "Dask is not installed (pysframe[dask])")
    paths = [str(p) for p in CORPUS_FILES[:6]] + [str(DATA / "verify" / "gas-cfi-bugs.o")]
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        on_dask = collect(paths, dask=cluster.scheduler_address)
        assert _comparable(on_dask) == _comparable(collect(paths, jobs=2))
        assert main(["verify", "--dask", cluster.scheduler_address, "--json", *paths]) == 1
        document = json.loads(capsys.readouterr().out)
        assert [f["status"] for f in document["files"]] == [r.status for r in on_dask]


def test_dask_scheduler_that_does_not_answer() -> None:
    require_module("distributed", "dask", "Dask is not installed (pysframe[dask])")
    with pytest.raises(
        SFrameError, match=r"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9"
    ):
        collect([str(FRAMES)], dask="tcp://127.0.0.1:9", dask_timeout=1)


# -- .debug_frame ------------------------------------------------------------------------------


def test_debug_frame_when_there_is_no_eh_frame(tmp_path: Path) -> None:
    """A program whose CFI is only in .debug_frame, assembled by GNU as 2.47 with --gsframe."""
    import os

    env = Path.home() / ".cache" / "sframe-ref" / "binutils-2.47" / "bin" / "as"
    gas = os.environ.get("GAS") or (str(env) if env.exists() else None)
    require_program("gcc")
    if gas is None:
        require("gas-2.47", "needs GNU as 2.47 ($GAS or ~/.cache/sframe-ref)")
    source = CORPUS / "src" / "frames.c"
    assembly = tmp_path / "frames.s"
    subprocess.run(
        ["gcc", "-O2", "-S", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-g",
         "-o", str(assembly), str(source)],
        check=True,
    )  # fmt: skip
    assert ".cfi_sections\t.debug_frame" in assembly.read_text()
    obj = tmp_path / "frames.o"
    subprocess.run([gas, "--gsframe", "-o", str(obj), str(assembly)], check=True)
    report = verify_file(obj)
    assert report.cfi_sources == (".debug_frame",)
    assert report.status == CONSISTENT and report.compared_functions > 5
    assert report.disagreement_count == 0


def test_without_section_headers_eh_frame_is_found_through_pt_gnu_eh_frame(
    tmp_path: Path,
) -> None:
    # e_shoff, e_shnum and e_shstrndx zeroed (ELF64 header offsets 0x28, 0x3c, 0x3e): the file
    # still loads, dump finds .sframe through PT_GNU_SFRAME and verify .eh_frame through
    # PT_GNU_EH_FRAME.
    data = bytearray(FRAMES.read_bytes())
    data[0x28:0x30] = bytes(8)
    data[0x3C:0x40] = bytes(4)
    stripped = tmp_path / "frames"
    stripped.write_bytes(bytes(data))
    full, headerless = verify_file(FRAMES), verify_file(stripped)
    assert full.status == CONSISTENT
    assert headerless.cfi_sources == (".eh_frame",)
    assert headerless.origin == "segment" and full.origin == "section"
    for field in ("cfi_functions", "compared_functions", "compared_bytes"):
        assert getattr(headerless, field) == getattr(full, field), field
    assert headerless.text_bytes >= full.text_bytes  # the executable segments, padding too
    # Without section names the linker's PLT sections are not known: GNU ld's known .plt.got
    # difference, a note with the headers, is a disagreement at the same PCs without them.
    assert [(n.start, n.end) for n in full.notes] == [
        (d.start, d.end) for d in headerless.disagreements
    ]
    assert headerless.agreeing_bytes == full.agreeing_bytes


def test_nothing_compared_is_not_consistent(tmp_path: Path) -> None:
    # A section describing other code (every function moved past the CFI's): nothing compares.
    target = tmp_path / "moved"
    _damaged(FRAMES, target, lambda found: [replace(f, start=f.start + 0x100000) for f in found])
    report = verify_file(target)
    assert report.status == NOT_COMPARED and report.compared_functions == 0
    assert report.failed


def test_benchmark_runs_quick(tmp_path: Path) -> None:
    import os
    import sys

    script = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "bench_verify.py"
    if not script.exists():
        pytest.skip("benchmarks/ not present")
    done = subprocess.run(
        [sys.executable, str(script), "--quick"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYSFRAME_BENCH_CACHE=str(tmp_path)),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "status: consistent" in done.stdout
    assert "verify_file (in this process)" in done.stdout
