"""pysframe stats on the corpus, checked against the ELF section headers read here on their own."""

from __future__ import annotations

import csv
import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_module, require_program
from pysframe.cli import main
from pysframe.tools.files import find_elf_files
from pysframe.tools.info import section_info
from pysframe.tools.stats import FileStats, collect, file_stats, total

CORPUS = Path(__file__).parent.parent / "data" / "corpus"
ELF_FILES = sorted(
    p for p in CORPUS.glob("*/v*/*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"
)
SHF_ALLOC, SHF_EXECINSTR, SHT_NOBITS = 0x2, 0x4, 8


def raw_sections(path: Path) -> dict[str, tuple[int, int, int, int]]:
    """name -> (type, flags, offset, size) from the Elf32/Elf64 section header table."""
    data = path.read_bytes()
    is64 = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    if is64:
        shoff, shentsize, shnum, shstrndx = (
            struct.unpack_from(order + "Q", data, 0x28)[0],
            *struct.unpack_from(order + "HHH", data, 0x3A),
        )
        layout = order + "IIQQQQIIQQ"
    else:
        shoff, shentsize, shnum, shstrndx = (
            struct.unpack_from(order + "I", data, 0x20)[0],
            *struct.unpack_from(order + "HHH", data, 0x2E),
        )
        layout = order + "IIIIIIIIII"
    headers = [struct.unpack_from(layout, data, shoff + i * shentsize) for i in range(shnum)]
    strtab_offset = headers[shstrndx][4]
    out = {}
    for name, type_, flags, _addr, offset, size, *_ in headers:
        start = strtab_offset + name
        label = data[start : data.index(b"\0", start)].decode()
        out[label] = (type_, flags, offset, size)
    return out


def sframe_counts(path: Path, sections: dict[str, tuple[int, int, int, int]]) -> tuple[int, int]:
    """(num_fdes, num_fres) straight from the .sframe header bytes (V2 spec 2.2)."""
    _, _, offset, _ = sections[".sframe"]
    data = path.read_bytes()[offset : offset + 28]
    order = "<" if data[:2] == b"\xe2\xde" else ">"
    num_fdes, num_fres = struct.unpack_from(order + "II", data, 8)
    return num_fdes, num_fres


def test_corpus_has_elf_files() -> None:
    assert len(ELF_FILES) >= 20


@pytest.mark.parametrize("path", ELF_FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_sizes_match_section_headers(path: Path) -> None:
    sections = raw_sections(path)
    stats = file_stats(path, generate=False)
    assert stats.error is None
    assert stats.eh_frame == sections.get(".eh_frame", (0, 0, 0, 0))[3]
    assert stats.eh_frame_hdr == sections.get(".eh_frame_hdr", (0, 0, 0, 0))[3]
    assert stats.sframe == sections[".sframe"][3]
    text = sum(
        size
        for type_, flags, _, size in sections.values()
        if flags & (SHF_ALLOC | SHF_EXECINSTR) == SHF_ALLOC | SHF_EXECINSTR and type_ != SHT_NOBITS
    )
    assert stats.text_bytes == text
    assert 0 < stats.covered_bytes <= text
    # The bytes ``pysframe info`` counts (functions merged where they overlap).
    assert stats.covered_bytes == min(section_info(str(path)).covered_bytes, text)
    num_fdes, num_fres = sframe_counts(path, sections)
    assert (stats.functions, stats.rows) == (num_fdes, num_fres)
    assert sum(stats.fre_types) == stats.functions
    assert sum(stats.word_sizes) == stats.rows
    # The file's own version has the file's own size.
    version = int(path.parent.name[1:])
    assert stats.sframe_version == version
    own = {2: stats.sframe_v2, 3: stats.sframe_v3}.get(version)
    if own is not None:
        assert own == stats.sframe


def readelf_sizes(path: Path) -> dict[str, int]:
    """Section sizes from ``readelf -S -W`` (name and size columns)."""
    text = subprocess.run(
        ["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True
    ).stdout
    sizes = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("[") or "]" not in line or "Nr]" in line:
            continue
        fields = line.split("]", 1)[1].split()
        if len(fields) >= 5 and fields[0].startswith("."):
            sizes[fields[0]] = int(fields[4], 16)
    return sizes


@pytest.mark.parametrize("path", ELF_FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_sizes_match_readelf(path: Path) -> None:
    require_program("readelf", "binutils")
    sizes = readelf_sizes(path)
    stats = file_stats(path, generate=False)
    assert stats.eh_frame == sizes.get(".eh_frame", 0)
    assert stats.eh_frame_hdr == sizes.get(".eh_frame_hdr", 0)
    assert stats.sframe == sizes[".sframe"]


def test_v1_sections_convert_to_v2_and_v3() -> None:
    stats = file_stats(CORPUS / "x86_64" / "v1" / "app", generate=False)
    # V1 17-byte FDEs become 20-byte V2 FDEs; V3 has 16-byte FDEs plus 5-byte attributes.
    assert stats.sframe_v2 == stats.sframe + 3 * stats.functions
    assert stats.sframe_v3 == stats.sframe + 4 * stats.functions
    assert stats.notes == ()


def test_flex_functions_have_no_v2_size() -> None:
    stats = file_stats(CORPUS / "x86_64" / "v3" / "frames", generate=False)
    assert stats.sframe_v2 is None and stats.sframe_v3 == stats.sframe
    assert any("FLEX" in note for note in stats.notes)


def test_total_sums_files() -> None:
    results = collect([str(p) for p in ELF_FILES], jobs=1, generate=False)
    summary = total(results)
    assert summary.eh_frame == sum(r.eh_frame for r in results)
    assert summary.functions == sum(r.functions for r in results)
    assert summary.word_sizes == tuple(sum(r.word_sizes[i] for r in results) for i in range(4))
    with_v2 = [r for r in results if r.sframe_v2 is not None]
    expected = sum(r.sframe_v2 or 0 for r in with_v2) / sum(r.eh_frame for r in with_v2)
    assert summary.ratio(2) == pytest.approx(expected)


def test_jobs_give_the_same_figures() -> None:
    paths = [str(p) for p in ELF_FILES[:6]]
    assert collect(paths, jobs=2, generate=False) == collect(paths, jobs=1, generate=False)


def test_find_elf_files_skips_other_files() -> None:
    found = find_elf_files(CORPUS, recursive=True)
    assert sorted(found) == sorted(str(p) for p in CORPUS.rglob("*") if p in set(ELF_FILES))
    assert find_elf_files(CORPUS / "x86_64" / "v1", recursive=False) == sorted(
        str(p) for p in ELF_FILES if p.parent == CORPUS / "x86_64" / "v1"
    )


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["stats", "--no-progress", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = CORPUS / "x86_64" / "v2" / "lib.so"
    status, out, _ = run_cli(["--json", "--no-generate", str(path)], capsys)
    assert status == 0
    document = json.loads(out)
    (entry,) = document["files"]
    assert entry["sframe"] == raw_sections(path)[".sframe"][3]
    assert entry["ratio_v2"] == round(entry["sframe_v2"] / entry["eh_frame"], 4)
    assert document["total"]["functions"] == entry["functions"]


def test_cli_csv_has_one_row_per_file(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in ELF_FILES[:3]]
    status, out, _ = run_cli(["--csv", "--jobs", "1", *paths], capsys)
    assert status == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["path"] for r in rows] == paths
    status, out, _ = run_cli(["--json", "--jobs", "1", *paths], capsys)
    total = json.loads(out)["total"]
    assert total["eh_frame"] == sum(int(r["eh_frame"]) for r in rows)


def test_cli_text_and_dir(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(["--dir", str(CORPUS / "x86_64"), "--recursive", "-j", "2"], capsys)
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("FILE")
    assert any(line.startswith("TOTAL") for line in lines)
    assert "FRE start-address types" in out and "data-word sizes" in out


def test_cli_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "not-elf"
    bogus.write_bytes(b"hello")
    status, _, err = run_cli([str(bogus)], capsys)
    assert status == 1
    assert "not an ELF file" in err and "Traceback" not in err
    status, _, err = run_cli([], capsys)
    assert status == 2 and "no ELF files" in err  # a usage error (README: exit 2)


def test_cli_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in ELF_FILES[:3]]
    status = main(["stats", "--progress", "-j", "1", *paths])
    err = capsys.readouterr().err
    assert status == 0 and "3/3" in err


def test_cli_plot_without_matplotlib(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, _, err = run_cli(["--plot", str(tmp_path / "x.png"), str(ELF_FILES[0])], capsys)
    assert status == 2  # the option cannot work here: a usage error, before any file is read
    assert err == "pysframe: stats: --plot needs matplotlib: pip install 'pysframe[plot]'\n"


def test_cli_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_module("matplotlib", reason="matplotlib is not installed (pysframe[plot])")
    png = tmp_path / "stats.png"
    status, _, _ = run_cli(["--plot", str(png), "-j", "1", *map(str, ELF_FILES[:4])], capsys)
    assert status == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_file_without_sframe(tmp_path: Path) -> None:
    objcopy = require_program("objcopy", "binutils")
    stripped = tmp_path / "app"
    source = CORPUS / "x86_64" / "v1" / "app"
    subprocess.run([objcopy, "--remove-section=.sframe", str(source), str(stripped)], check=True)
    assert file_stats(stripped).origin == "none"  # generated only when asked for
    stats = file_stats(stripped, generate=True)
    assert stats.sframe == 0 and stats.eh_frame == raw_sections(source)[".eh_frame"][3]
    assert stats.origin == "generated"
    assert stats.sframe_v3 and stats.functions and stats.skipped is not None
    assert sum(stats.word_sizes) == stats.rows


def test_as_dict_round_trips_through_json() -> None:
    stats = FileStats(path="x", eh_frame=100, sframe_v3=50)
    assert json.loads(json.dumps(stats.as_dict()))["ratio_v3"] == 0.5
