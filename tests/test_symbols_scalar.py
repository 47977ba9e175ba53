"""The symbol readers without numpy, held to the bulk ones they mirror:

* :func:`read_function_entries` to :func:`read_function_symbols` (the same symbols, the same
  refusals) on real files and damaged copies;
* :func:`check_name_bytes` and :func:`name_end` to :func:`symbol_names` (names and bound);
* ``plt_symbols(scalar=True)`` to ``plt_symbols()``;
* :class:`LazyFunctionSymbols` to :class:`FunctionSymbols` (gdb's choice among aliases,
  zero-sized symbols, the same symbol in two tables), on real files and on random tables.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysframe.elf.plt import plt_symbols
from pysframe.elf.reader import ElfReader
from pysframe.elf.symbols import (
    FunctionEntries,
    FunctionSymbols,
    LazyFunctionSymbols,
    SymbolRecord,
    check_name_bytes,
    name_between,
    name_end,
    read_function_entries,
    read_function_symbols,
    symbol_names,
)
from pysframe.errors import ElfError, SFrameError

from conftest import corpus_files
from test_damaged_sweep import PROGRAMS, _damaged


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


def _records(entries: FunctionEntries | None) -> list[SymbolRecord]:
    if entries is None:
        return []
    found = (
        SymbolRecord(entries.addresses[i], entries.sizes[i], entries.name(i), entries.is_global[i])
        for i in range(len(entries))
    )
    return [record for record in found if record.name]


def _outcome(call: object) -> object:
    try:
        return call()  # type: ignore[operator]
    except ElfError:
        return "refused"


def _tables(image: ElfReader, scalar: bool) -> object:
    out = []
    for table in (".symtab", ".dynsym"):
        if scalar:
            out.append(_outcome(lambda t=table: _records(read_function_entries(image, t))))
        else:
            out.append(_outcome(lambda t=table: read_function_symbols(image, t)))
    out.append(_outcome(lambda: plt_symbols(image, scalar=scalar)))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: "/".join(p.parts[-2:]))
def test_real_tables_read_alike(path: Path) -> None:
    with ElfReader.open(str(path)) as image:
        assert _tables(image, True) == _tables(image, False)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_damaged_tables_read_alike(program: Path) -> None:
    for label, data in _damaged(program):
        try:
            image = ElfReader.from_bytes("damaged", data)
            image.sections()
        except SFrameError:
            continue
        assert _tables(image, True) == _tables(image, False), label


def _strings_and_offsets() -> st.SearchStrategy[tuple[bytes, list[int]]]:
    strings = st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\1", b"\0"))
    return strings.flatmap(
        lambda data: st.tuples(
            st.just(data), st.lists(st.integers(0, len(data) + 3), max_size=30)
        )
    )


@given(_strings_and_offsets())
@settings(max_examples=300, deadline=None)
def test_names_alike(case: tuple[bytes, list[int]]) -> None:
    strings, offsets = case
    check_name_bytes(strings, offsets)
    names = [name_between(strings, start, name_end(strings, start)) for start in offsets]
    assert names == symbol_names(strings, offsets)


def test_names_laid_over_each_other_are_refused_alike() -> None:
    strings = b"x" * 1000 + b"\0"
    offsets = [0] * 5000  # 5,000,000 bytes of names from a 1,001-byte table
    with pytest.raises(ElfError):
        symbol_names(strings, offsets)
    with pytest.raises(ElfError):
        check_name_bytes(strings, offsets)
    check_name_bytes(strings, offsets[:1000])  # 1,000,000 bytes: within the bound
    symbol_names(strings, offsets[:1000])


# -- finding the symbol that names an address ------------------------------------------------


def _addresses(records: list[SymbolRecord]) -> Iterator[int]:
    for record in records:
        start, end = record.address, record.address + record.size
        yield from {start - 1, start, start + 1, (start + end) // 2, end - 1, end, end + 1}


def _assert_find_alike(parts: list[FunctionEntries | list[SymbolRecord]]) -> int:
    records = [r for part in parts for r in (part if isinstance(part, list) else _records(part))]
    bulk = FunctionSymbols(records)
    lazy = LazyFunctionSymbols(parts)
    compared = 0
    for address in sorted(set(_addresses(records))):
        if address < 0:
            continue
        expected, found = bulk.find_index(address), lazy.find_index(address)
        if expected < 0:
            assert found < 0, hex(address)
        else:
            assert found >= 0, hex(address)
            assert (lazy.start_of(found), lazy.name_of(found)) == (
                bulk.start_of(expected),
                bulk.name_of(expected),
            ), hex(address)
        compared += 1
    return compared


@pytest.mark.parametrize("path", FILES, ids=lambda p: "/".join(p.parts[-2:]))
def test_real_files_name_addresses_alike(path: Path) -> None:
    with ElfReader.open(str(path)) as image:
        parts: list[FunctionEntries | list[SymbolRecord]] = []
        for table in (".symtab", ".dynsym"):
            entries = read_function_entries(image, table)
            if entries is not None:
                parts.append(entries)
        parts.append(plt_symbols(image, scalar=True))
    if not any(len(part) for part in parts):
        pytest.skip("no function symbols")
    assert _assert_find_alike(parts) > 0


_RECORD = st.builds(
    SymbolRecord,
    st.integers(0x1000, 0x1040),
    st.sampled_from([0, 0, 4, 8, 0x20]),
    st.sampled_from(["a", "b", "c", "main", "__libc_start_main", "x_impl"]),
    st.booleans(),
)


@given(st.lists(st.lists(_RECORD, max_size=12), min_size=1, max_size=3))
@settings(max_examples=400, deadline=None)
def test_random_tables_name_addresses_alike(tables: list[list[SymbolRecord]]) -> None:
    """Aliases, zero-sized symbols and the same symbol in several tables, packed together."""
    _assert_find_alike(list(tables))
