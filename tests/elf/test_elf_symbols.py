"""Symbol tables read by :mod:`pysframe.elf.symbols` and :mod:`pysframe.elf.plt`, held to
independent truths:

* the function symbols of ``.symtab`` and ``.dynsym`` against ``readelf -sW`` (binutils) on the
  corpus and this machine's libc, dynamic linker and programs;
* ``NAME@plt`` against the synthetic symbols ``objdump -d`` labels PLT entries with (the same
  BFD code gdb's minimal symbols come from);
* names against a plain reading of the string table;
* the symbol that names an address against gdb's scan (``lookup_minimal_symbol_by_pc_section``,
  gdb/minsyms.c) written out below, on random tables of aliases and zero-sized symbols.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import corpus_files, require_program
from pysframe.elf.plt import PLT_SECTIONS, plt_symbols
from pysframe.elf.reader import ElfReader
from pysframe.elf.symbols import FunctionSymbols, SymbolRecord, read_function_symbols, symbol_names
from pysframe.errors import ElfError


def _system_files() -> list[Path]:
    candidates = [
        Path("/usr/lib/x86_64-linux-gnu/libc.so.6"),
        Path("/lib64/ld-linux-x86-64.so.2"),
        Path("/usr/bin/sleep"),
        Path("/usr/bin/python3"),
        Path(sys.executable),
    ]
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip()
            if ".so" in path and path.startswith("/"):
                candidates.append(Path(path))
    return sorted({p.resolve() for p in candidates if p.is_file()})


FILES = corpus_files() + _system_files()

#: A readelf -sW symbol line: Num: Value Size Type Bind Vis Ndx Name [(version index)].
_READELF_SYMBOL = re.compile(
    r"^\s*\d+: ([0-9a-f]+)\s+(\S+) (\S+)\s+(\S+)\s+\S+\s+(\S+) ?(\S*)"
)


def _readelf_functions(path: Path) -> dict[str, list[SymbolRecord]]:
    """The defined, named FUNC and IFUNC symbols of each symbol table, as readelf lists them
    (names cut at their version, as gdb records them)."""
    readelf = require_program("readelf", "binutils")
    text = subprocess.run(
        [readelf, "-sW", str(path)], capture_output=True, text=True, check=True
    ).stdout
    tables: dict[str, list[SymbolRecord]] = {}
    current: list[SymbolRecord] = []
    for line in text.splitlines():
        if line.startswith("Symbol table '"):
            current = tables.setdefault(line.split("'")[1], [])
            continue
        found = _READELF_SYMBOL.match(line)
        if found is None:
            continue
        value, size, kind, bind, index, name = found.groups()
        name = name.split("@", 1)[0]
        if kind in ("FUNC", "IFUNC") and index != "UND" and name:
            number = int(size, 16) if size.startswith("0x") else int(size)
            is_global = bind != "LOCAL" and kind == "FUNC"
            current.append(SymbolRecord(int(value, 16), number, name, is_global))
    return tables


@pytest.mark.parametrize("path", FILES, ids=lambda p: "/".join(p.parts[-2:]))
def test_function_symbols_are_readelfs(path: Path) -> None:
    expected = _readelf_functions(path)
    with ElfReader.open(str(path)) as image:
        for table in (".symtab", ".dynsym"):
            assert read_function_symbols(image, table) == expected.get(table, []), table


def _objdump_plt_labels(path: Path) -> dict[int, str]:
    objdump = require_program("objdump", "binutils")
    command = [objdump, "-d", "--no-show-raw-insn"]
    for name in PLT_SECTIONS:
        command += ["-j", name]
    text = subprocess.run([*command, str(path)], capture_output=True, text=True).stdout
    labels = re.findall(r"^([0-9a-f]+) <(\S+@plt)>:$", text, re.MULTILINE)
    return {int(address, 16): name for address, name in labels}


X86_64 = [p for p in FILES if "x86_64" in p.parts or p in _system_files()]


@pytest.mark.parametrize("path", X86_64, ids=lambda p: "/".join(p.parts[-2:]))
def test_plt_names_are_objdumps(path: Path) -> None:
    with ElfReader.open(str(path)) as image:
        ours = {record.address: record.name for record in plt_symbols(image)}
    assert ours == _objdump_plt_labels(path)


def test_some_plt_names_are_compared() -> None:
    assert sum(bool(_objdump_plt_labels(p)) for p in X86_64) >= 2


# -- names -------------------------------------------------------------------------------------


def _plain_name(strings: bytes, at: int, versions: bool) -> str:
    """The name at ``at``: up to its NUL or the table's end, without its version; bytes that
    are not UTF-8 written ``\\xNN`` (the rule of pysframe.names)."""
    end = strings.find(b"\0", at)
    name = strings[at : end if end >= 0 else len(strings)].decode("utf-8", "backslashreplace")
    return name if versions else name.split("@", 1)[0]


def _strings_and_offsets() -> st.SearchStrategy[tuple[bytes, list[int]]]:
    strings = st.binary(min_size=1, max_size=40).map(
        lambda b: b.replace(b"\1", b"\0").replace(b"\2", b"@")
    )
    return strings.flatmap(
        lambda data: st.tuples(st.just(data), st.lists(st.integers(0, len(data) + 3), max_size=30))
    )


@given(_strings_and_offsets(), st.booleans())
@settings(max_examples=300, deadline=None)
def test_names_are_the_table_read_plainly(case: tuple[bytes, list[int]], versions: bool) -> None:
    strings, offsets = case
    expected = [_plain_name(strings, at, versions) for at in offsets]
    assert symbol_names(strings, offsets, versions=versions) == expected


def test_names_laid_over_each_other_are_refused() -> None:
    strings = b"x" * 1000 + b"\0"
    with pytest.raises(ElfError, match="names laid over each other"):
        symbol_names(strings, [0] * 5000)  # 5,000,000 bytes of names from a 1,001-byte table
    assert len(symbol_names(strings, [0] * 1000)) == 1000  # 1,000,000 bytes: within the bound


# -- the symbol that names an address, against gdb's scan ---------------------------------------


def _gdb_pick(records: list[SymbolRecord], pc: int) -> SymbolRecord | None:
    """lookup_minimal_symbol_by_pc_section (gdb/minsyms.c), one objfile of text symbols: the
    symbols sorted by address and name, duplicates merged (compact_minimal_symbols; here the
    size that is not zero and global if either is, as .symtab and .dynsym are merged); then a
    scan down from the last symbol at or below ``pc``."""
    merged: dict[tuple[int, str], SymbolRecord] = {}
    for r in records:
        seen = merged.get((r.address, r.name))
        if seen is not None:
            r = SymbolRecord(r.address, seen.size or r.size, r.name, seen.is_global or r.is_global)
        merged[r.address, r.name] = r
    table = [merged[key] for key in sorted(merged)]
    hi = max((i for i, r in enumerate(table) if r.address <= pc), default=-1)
    best_zero_sized = -1
    while hi >= 0:
        here, before = table[hi], table[hi - 1] if hi > 0 else None
        # "prefer mst_text over mst_file_text" at the same address and size.
        if (
            before is not None
            and not here.is_global
            and before.is_global
            and before.address == here.address
            and before.size == here.size
        ):
            hi -= 1
            continue
        if here.size == 0:  # kept aside; the scan goes on for a sized symbol
            if best_zero_sized == -1:
                best_zero_sized = hi
            hi -= 1
            continue
        break
    if hi < 0 or pc >= table[hi].address + table[hi].size:  # none, or it ends before pc
        hi = best_zero_sized
    return table[hi] if hi >= 0 else None


_RECORD = st.builds(
    SymbolRecord,
    st.integers(0x1000, 0x1040),
    st.sampled_from([0, 0, 4, 8, 0x20]),
    st.sampled_from(["a", "b", "c", "main", "__libc_start_main", "x_impl"]),
    st.booleans(),
)


@given(st.lists(_RECORD, max_size=24), st.randoms(use_true_random=False))
@settings(max_examples=500, deadline=None)
def test_addresses_are_named_as_gdb_scans(records: list[SymbolRecord], rng: Random) -> None:
    """Aliases, zero-sized symbols and the same symbol twice, packed together: one address at
    a time (in any order: what a scan works out is kept for the next) and all at once."""
    pcs = list(range(0xFF0, 0x1070))
    many = FunctionSymbols(records).find_many(pcs).tolist()
    symbols = FunctionSymbols(records)
    shuffled = rng.sample(pcs, len(pcs))
    found_one = dict(zip(shuffled, map(symbols.find, shuffled), strict=True))
    for pc, index in zip(pcs, many, strict=True):
        expected = _gdb_pick(records, pc)
        found = found_one[pc]
        if expected is None:
            assert found is None and index == -1, hex(pc)
        else:
            assert found == (expected.name, pc - expected.address), hex(pc)
            assert symbols.symbol(index).name == expected.name, hex(pc)
