"""Symbol tables, kallsyms and addr2line's answers kept in the cache (pysframe.sources.cache
``cached_tables``): a second report of the same programs reads no symbol table, parses no
kallsyms and reads no DWARF, and writes the same bytes as a report without a cache; an entry
made from other files (a stale one), damaged, or something other than a regular file is
refused, warned about and made again.

A real recording of tests/data/perf/perfprog.c (perf record --call-graph dwarf) is reported
three times: without a cache (the reference), with an empty one, and with the entries the
first made, the readers of symbol tables and of kallsyms then made to fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import unavailable
from perf_support import Unavailable, build_program, record
from pysframe.cli import main
from pysframe.elf import addr2line
from pysframe.perf import kernel, symbols
from pysframe.perf.symbols import SymbolSource, choose_files, load_symbols_kept
from pysframe.sources import cache

OPTIONS = ("-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,4096")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("perf-tables")
    try:
        program = build_program(out, "perfprog")
        return record(out / "perf.data", [str(program), "2"], options=OPTIONS)
    except Unavailable as why:
        unavailable(why)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    cache.take_warnings()
    return tmp_path / "cache"


#: What the last report wrote on stderr (the cache's warnings among it).
_stderr: list[str] = [""]


def _script(recording: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["perf", "script", *extra, str(recording)]) == 0
    captured = capsys.readouterr()
    _stderr[0] = captured.err
    return captured.out


def _warnings() -> list[str]:
    """The cache's warnings the last report gave (the command line prints them)."""
    return [line for line in _stderr[0].splitlines() if "cache" in line] + cache.take_warnings()


def _entries(cache_dir: Path, suffix: str) -> list[Path]:
    return sorted(cache_dir.glob(f"generated-*/*.{suffix}"))


def _fail(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("read again although kept in the cache")


@pytest.mark.parametrize("inline", ["--no-inline", "--inline"])
def test_second_report_reads_no_symbol_table(
    recording: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, inline: str,
) -> None:  # fmt: skip
    with monkeypatch.context() as off:
        off.setenv(cache.CACHE_ENVIRONMENT, "")
        reference = _script(recording, capsys, inline)
    first = _script(recording, capsys, inline)
    assert _entries(cache_dir, "perf-symbols"), "no symbol table kept"
    kernel_named = "[kernel.kallsyms]" in reference and "unknown] ([kernel" not in reference
    if kernel_named:
        assert _entries(cache_dir, "kallsyms"), "kallsyms not kept"
    if inline == "--inline":
        assert _entries(cache_dir, "addr2line"), "no answers of addr2line kept"
        monkeypatch.setattr(addr2line, "Addr2Line", _fail)  # no DWARF read
    monkeypatch.setattr(symbols, "load_symbols", _fail)
    monkeypatch.setattr(kernel, "parse_kallsyms", _fail)
    second = _script(recording, capsys, inline)
    assert first == reference
    assert second == reference
    assert _warnings() == []


def _rebind(entry: Path, change: dict[str, str], names: tuple[str, str] | None = None) -> None:
    """Rewrite the header of a kept table as one made from other inputs would have it (its
    checksum right), its names replaced when ``names`` is given."""
    data = entry.read_bytes()
    magic, header, body = data.split(b"\n", 2)
    record_ = json.loads(header)
    record_["binding"].update(change)
    if names is not None:
        body = body.replace(names[0].encode(), names[1].encode())
        record_["parts"][3] += len(names[1]) - len(names[0])
        record_["sha256"] = hashlib.sha256(body).hexdigest()
    entry.write_bytes(magic + b"\n" + json.dumps(record_).encode() + b"\n" + body)


def test_stale_and_damaged_entries_are_refused(
    recording: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reference = _script(recording, capsys, "--no-inline")
    tables = _entries(cache_dir, "perf-symbols")
    # Made from another file with the same build ID, and saying other names.
    program = next(e for e in tables if b'"spin' in e.read_bytes() or b'"main"' in e.read_bytes())
    _rebind(program, {"symbols": "0" * 64}, ('"main"', '"planted"'))
    # Damaged: a byte of its body changed.
    others = [e for e in tables if e != program]
    if others:
        damaged = bytearray(others[0].read_bytes())
        damaged[-2] ^= 0x55
        others[0].write_bytes(bytes(damaged))
    for entry in _entries(cache_dir, "kallsyms"):
        _rebind(entry, {"code": "planted"})
    assert _script(recording, capsys, "--no-inline") == reference
    warnings = _warnings()
    assert any(str(program) in line and "other files" in line for line in warnings), warnings
    if others:
        assert any(str(others[0]) in line and "damaged" in line for line in warnings), warnings
    # Made again: the next report uses them, silently.
    assert b"planted" not in program.read_bytes()
    assert _script(recording, capsys, "--no-inline") == reference
    assert _warnings() == []


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_entries_that_are_not_files(
    recording: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    kind: str,
) -> None:  # fmt: skip
    reference = _script(recording, capsys, "--no-inline")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"not to be read or written")
    for entry in _entries(cache_dir, "perf-symbols") + _entries(cache_dir, "kallsyms"):
        entry.unlink()
        if kind == "symlink":
            entry.symlink_to(target)
        else:
            os.mkfifo(entry)
    assert _script(recording, capsys, "--no-inline") == reference  # no hang on a FIFO
    assert target.read_bytes() == b"not to be read or written"
    assert _warnings()
    for entry in _entries(cache_dir, "perf-symbols"):
        assert entry.is_file() and not entry.is_symlink()


def test_a_table_of_changed_symbols_with_the_same_build_id(
    cache_dir: Path, tmp_path: Path
) -> None:
    """objcopy --redefine-sym keeps the build ID and changes the symbol names: the kept table
    of the first file is not used for the second (its content digest differs)."""
    if shutil.which("objcopy") is None:
        pytest.skip("objcopy is not installed")
    try:
        program = build_program(tmp_path, "perfprog")
    except Unavailable as why:
        unavailable(why)
    renamed = tmp_path / "renamed"
    subprocess.run(["objcopy", "--redefine-sym", "main=renamed_main", str(program),
                    str(renamed)], check=True)  # fmt: skip
    from pysframe.elf.reader import ElfReader

    with ElfReader.open(str(program)) as image:
        build_id = image.build_id_as_perf()
    with ElfReader.open(str(renamed)) as image:
        assert image.build_id_as_perf() == build_id
    assert build_id

    def names(path: Path) -> list[str]:
        files = choose_files([SymbolSource(str(path))], build_id)
        table = load_symbols_kept(files, build_id)
        assert table is not None
        return table.names

    first = names(program)
    assert "main" in first and _entries(cache_dir, "perf-symbols")
    second = names(renamed)
    assert "renamed_main" in second and "main" not in second
    assert any("other files" in line for line in cache.take_warnings())


#: A kallsyms text with the names a kept table must give back as they are: not UTF-8,
#: not ASCII, aliases of one address, modules, a symbol of the kernel after a module's.
ODD_KALLSYMS = (
    b"ffffffff81000000 T _text\n"
    b"ffffffff81000010 t bad\xff\xfe\n"
    b"ffffffff81000020 T caf\xc3\xa9\n"
    b"ffffffff81000020 W caf\xc3\xa9_alias\n"
    b"ffffffff81000030 d data_is_not_text\n"
    b"ffffffffc0000000 t in_module\t[mod\xff]\n"
    b"ffffffffc0000040 T other_module\t[other]\n"
    b"ffffffff81000040 t after_modules\n"
)


def test_kept_kallsyms_is_the_parsed_table(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel's symbols read back from the cache are the ones parsed: every extent, name
    and module, by index and by slice."""
    build_id = bytes(range(20))
    found = tmp_path / "debug" / "[kernel.kallsyms]" / build_id.hex()
    found.mkdir(parents=True)
    (found / "kallsyms").write_bytes(ODD_KALLSYMS)
    parsed = kernel.parse_kallsyms(ODD_KALLSYMS)
    first = kernel.kernel_symbols(build_id, str(tmp_path / "debug"))
    assert _entries(cache_dir, "kallsyms")
    monkeypatch.setattr(kernel, "parse_kallsyms", _fail)
    kept = kernel.kernel_symbols(build_id, str(tmp_path / "debug"))
    assert first is not None and kept is not None and len(kept) == len(parsed) == 6
    assert kept.starts.tolist() == parsed.starts.tolist()
    assert kept.ends.tolist() == parsed.ends.tolist()
    assert [kept.names[at] for at in range(len(kept))] == list(parsed.names)
    assert [kept.modules[at] for at in range(len(kept))] == list(parsed.modules)
    assert kept.names[1:4] == list(parsed.names[1:4]) and kept.names[-1] == parsed.names[-1]
    assert kept.modules[::2] == list(parsed.modules[::2])
    assert "caf\u00e9_alias" in kept.names and "[mod\\xff]" in kept.modules
    with pytest.raises(IndexError):
        kept.names[len(kept)]
    assert cache.take_warnings() == []


def test_tables_of_two_versions_live_side_by_side(cache_dir: Path) -> None:
    """Tables made by code of another digest (another version of pysframe sharing the cache)
    are another entry: neither version reads, warns about or replaces the other's."""
    key = "ab" * 20
    mine, theirs = {"code": "1" * 16, "file": "f"}, {"code": "2" * 16, "file": "f"}
    cache.keep_tables(key, "perf-symbols", theirs, [b"their table"])
    assert cache.cached_tables(key, "perf-symbols", mine) is None
    cache.keep_tables(key, "perf-symbols", mine, [b"my table"])
    assert cache.cached_tables(key, "perf-symbols", theirs) == [b"their table"]
    assert cache.cached_tables(key, "perf-symbols", mine) == [b"my table"]
    assert cache.take_warnings() == []
    # The same code made from another file: the one entry is refused and made again.
    assert cache.cached_tables(key, "perf-symbols", {**mine, "file": "g"}) is None
    assert len(cache.take_warnings()) == 1
