"""Symbols on hand-built ELF files: gdb's choice among aliases, separate debug files by
build ID and by debuglink (CRC checked), MiniDebugInfo, and demangling."""

from __future__ import annotations

import lzma
import random
import struct
import zlib
from pathlib import Path

import pytest

from conftest import require, require_module, require_program
from elf_build import Sec, build_elf
from pysframe.elf.debuginfo import build_id_path, find_debug_file
from pysframe.elf.reader import ElfReader
from pysframe.elf.symbols import (
    FunctionSymbols,
    SymbolRecord,
    find_in_objfiles,
    read_function_symbols,
)
from pysframe.unwind import demangle as demangle_module
from pysframe.unwind.demangle import demangle
from pysframe.unwind.symbolize import ModuleSymbols, SymbolOptions, symbols_of_file

STT_FUNC, STT_OBJECT, STB_LOCAL, STB_GLOBAL, STB_WEAK = 2, 1, 0, 1, 2
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOTE = 1, 2, 3, 7
TEXT = 0x1000


def info(bind: int, kind: int = STT_FUNC) -> int:
    return bind << 4 | kind


def symbol_sections(symbols: list[tuple[str, int, int, int]]) -> list[Sec]:
    """.text (section 1), .symtab (2) and .strtab (3) from (name, st_info, value, size)."""
    strings = b"\0"
    table = bytes(24)
    for name, st_info, value, size in symbols:
        table += struct.pack("<IBBHQQ", len(strings), st_info, 0, 1, value, size)
        strings += name.encode() + b"\0"
    return [
        Sec(".text", SHT_PROGBITS, b"\xc3" * 0x400, flags=6, addr=TEXT),
        Sec(".symtab", SHT_SYMTAB, table, link=3, entsize=24),
        Sec(".strtab", SHT_STRTAB, strings, align=1),
    ]


def build_id_note(build_id: bytes) -> Sec:
    note = struct.pack("<III", 4, len(build_id), 3) + b"GNU\0" + build_id
    return Sec(".note.gnu.build-id", SHT_NOTE, note, flags=2, align=4)


def debuglink(name: str, crc: int) -> Sec:
    data = name.encode() + b"\0"
    data += bytes(-len(data) % 4) + struct.pack("<I", crc)
    return Sec(".gnu_debuglink", SHT_PROGBITS, data, align=4)


def plain_text() -> Sec:
    return Sec(".text", SHT_PROGBITS, b"\xc3" * 0x400, flags=6, addr=TEXT)


# -- gdb's choice of symbol ------------------------------------------------------------------


def table(*records: tuple[int, int, str, bool]) -> FunctionSymbols:
    return FunctionSymbols(SymbolRecord(*r) for r in records)


def test_aliases_pick_as_gdb_does() -> None:
    symbols = table(
        # A local alias gives way to the global symbol just before it, of the same size...
        (0x100, 0x40, "__libc_start_main", True),
        (0x100, 0x40, "__libc_start_main_impl", False),
        # ... and not to one further back (gdb looks one symbol back at a time).
        (0x180, 0x40, "__libc_start_main", True),
        (0x180, 0x40, "__libc_start_main_alias_1", False),
        (0x180, 0x40, "__libc_start_main_impl", False),
        # clone3 / __clone3, both global: the last in name order.
        (0x200, 0x10, "__clone3", True),
        (0x200, 0x10, "clone3", True),
        # A zero-sized label inside a sized function does not name its PCs.
        (0x300, 0x20, "sized", True),
        (0x308, 0, "label", False),
        # Past a sized function's end, a zero-sized symbol above it names the PC...
        (0x400, 0x8, "short", True),
        (0x404, 0, "tail_label", True),
    )
    assert symbols.find(0x110) == ("__libc_start_main", 0x10)
    assert symbols.find(0x190) == ("__libc_start_main_impl", 0x10)
    assert symbols.find(0x406) == ("short", 6)
    assert symbols.find(0x204) == ("clone3", 4)
    assert symbols.find(0x30C) == ("sized", 0xC)
    assert symbols.find(0x40C) == ("tail_label", 8)
    # ... and none is no name.
    assert symbols.find(0x250) is None
    assert symbols.find(0x50) is None


def test_bulk_lookup_equals_one_by_one() -> None:
    rng = random.Random(13)
    records = []
    for _ in range(2000):
        start = rng.randrange(0, 1 << 20)
        records.append((start, rng.choice([0, 0x10, 0x100]), f"f{rng.randrange(500)}",
                        rng.random() < 0.5))
    symbols = table(*records)
    addresses = [rng.randrange(0, (1 << 20) + 0x200) for _ in range(5000)]
    bulk = symbols.find_many(addresses).tolist()
    for address, index in zip(addresses, bulk, strict=True):
        one = symbols.find(address)
        if index < 0:
            assert one is None
        else:
            found = symbols.symbol(index)
            assert one == (found.name, address - found.address)


def test_separate_debug_objfile_wins_only_above() -> None:
    own = table((0x100, 0x40, "__libc_start_main", True))
    debug = table((0x100, 0x40, "__libc_start_main_impl", False), (0x120, 0x10, "inner", False))
    assert find_in_objfiles([own, debug], [0x110, 0x124, 0x50]) == [(0, 0), (1, 1), (-1, -1)]
    symbols = ModuleSymbols("libc.so.6", [own, debug])
    assert [symbols.find(pc) for pc in (0x110, 0x124, 0x50)] == symbols.find_many(
        [0x110, 0x124, 0x50]
    ) == [("__libc_start_main", 0x10), ("inner", 4), None]


# -- files and their debug files -------------------------------------------------------------


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def debug_file(build_id: bytes = b"") -> bytes:
    notes = [build_id_note(build_id)] if build_id else []
    return build_elf([*symbol_sections([("hidden_function", info(STB_LOCAL), TEXT, 0x10)]),
                      *notes], e_type=3)


def stripped(*extra: Sec) -> bytes:
    return build_elf([plain_text(), *extra], e_type=3)


def test_symbols_from_the_symbol_table(tmp_path: Path) -> None:
    path = write(tmp_path / "prog", build_elf(symbol_sections([
        ("main", info(STB_GLOBAL), TEXT, 0x20),
        ("data", info(STB_GLOBAL, STT_OBJECT), TEXT + 0x20, 0x20),
        ("memcpy@@GLIBC_2.14", info(STB_GLOBAL), TEXT + 0x40, 0x20),
    ]), e_type=3))
    symbols = symbols_of_file(str(path), (str(tmp_path / "none"),))
    assert symbols.find(TEXT + 4) == ("main", 4)
    assert symbols.find(TEXT + 0x24) is None  # objects do not name code
    assert symbols.find(TEXT + 0x41) == ("memcpy", 1)
    assert symbols.sources == [".symtab"] and symbols.debug_file is None


def test_debuglink_in_each_place_gdb_looks(tmp_path: Path) -> None:
    debug = debug_file()
    crc = zlib.crc32(debug)
    program = write(tmp_path / "bin" / "prog", stripped(debuglink("prog.debug", crc)))
    root = tmp_path / "debug"
    for place in (
        tmp_path / "bin" / "prog.debug",
        tmp_path / "bin" / ".debug" / "prog.debug",
        root / str(tmp_path / "bin").lstrip("/") / "prog.debug",
    ):
        write(place, debug)
        symbols = symbols_of_file(str(program), (str(root),))
        assert symbols.debug_file == str(place)
        assert symbols.find(TEXT + 1) == ("hidden_function", 1)
        place.unlink()
        program.touch()  # a new file version: not the cached answer
        program.write_bytes(program.read_bytes())


def test_debuglink_crc_mismatch_is_not_used(tmp_path: Path) -> None:
    debug = debug_file()
    program = write(tmp_path / "prog", stripped(debuglink("prog.debug", zlib.crc32(debug) ^ 1)))
    write(tmp_path / "prog.debug", debug)
    symbols = symbols_of_file(str(program), ())
    assert symbols.debug_file is None and symbols.find(TEXT + 1) is None
    assert any("CRC mismatch" in problem for problem in symbols.problems)


def test_missing_debug_file_is_no_error(tmp_path: Path) -> None:
    program = write(tmp_path / "prog", stripped(debuglink("gone.debug", 0),
                                                build_id_note(b"\x12\x34\x56")))
    symbols = symbols_of_file(str(program), (str(tmp_path),))
    assert symbols.debug_file is None and symbols.problems == []
    assert symbols.find(TEXT) is None


def test_build_id_layout(tmp_path: Path) -> None:
    build_id = bytes.fromhex("93ac61ec5a8eb1396f9fbd350e3169a558528a40")
    program = write(tmp_path / "prog", stripped(build_id_note(build_id)))
    root = tmp_path / "debug"
    place = Path(build_id_path(str(root), build_id))
    assert place == root / ".build-id" / "93" / "ac61ec5a8eb1396f9fbd350e3169a558528a40.debug"
    # Another build's debug file at that place is passed over, and said so.
    write(place, debug_file(b"\x00" * 20))
    symbols = symbols_of_file(str(program), (str(root),))
    assert symbols.debug_file is None
    assert symbols.problems == [f"{place}: build ID does not match"]
    write(place, debug_file(build_id))
    with ElfReader.open(str(program)) as image:
        found = find_debug_file(str(program), image.build_id(), None, (str(root),))
    assert (found.path, found.how) == (str(place), "build-id")


def test_minidebuginfo(tmp_path: Path) -> None:
    inner = build_elf(symbol_sections([("mini_function", info(STB_LOCAL), TEXT + 0x10, 8)]))
    packed = lzma.compress(inner, format=lzma.FORMAT_XZ)
    program = write(tmp_path / "prog", stripped(Sec(".gnu_debugdata", SHT_PROGBITS, packed)))
    symbols = symbols_of_file(str(program), ())
    assert symbols.sources == [".gnu_debugdata"]
    assert symbols.find(TEXT + 0x12) == ("mini_function", 2)
    # Damaged MiniDebugInfo costs its names only.
    broken = write(tmp_path / "broken", stripped(Sec(".gnu_debugdata", SHT_PROGBITS,
                                                     packed[:40])))
    symbols = symbols_of_file(str(broken), ())
    assert symbols.find(TEXT + 0x12) is None
    assert symbols.problems and ".gnu_debugdata" in symbols.problems[0]


def test_minidebuginfo_not_read_beside_a_symtab(tmp_path: Path) -> None:
    inner = build_elf(symbol_sections([("mini_function", info(STB_LOCAL), TEXT + 0x10, 8)]))
    sections = symbol_sections([("main", info(STB_GLOBAL), TEXT, 8)])
    sections.append(Sec(".gnu_debugdata", SHT_PROGBITS, lzma.compress(inner)))
    program = write(tmp_path / "prog", build_elf(sections, e_type=3))
    symbols = symbols_of_file(str(program), ())
    assert symbols.sources == [".symtab"] and symbols.find(TEXT + 0x12) is None


def test_unreadable_and_hostile_files_have_no_symbols(tmp_path: Path) -> None:
    assert symbols_of_file(str(tmp_path / "missing")).tables == []
    junk = write(tmp_path / "junk", b"\x7fELF" + bytes(10))
    assert symbols_of_file(str(junk)).find(0) is None
    sections = symbol_sections([("main", info(STB_GLOBAL), TEXT, 8)])
    sections[1].link = 99  # the symbol table names no string table
    bad = write(tmp_path / "bad", build_elf(sections, e_type=3))
    symbols = symbols_of_file(str(bad), ())
    assert symbols.find(TEXT) is None and "string table" in symbols.problems[0]


# -- demangling ------------------------------------------------------------------------------


def test_demangle_cxx_and_rust() -> None:
    require_module("cxxfilt")
    assert demangle("_ZN6shapes3BoxIiE11spin_insideEi") == "shapes::Box<int>::spin_inside(int)"
    assert demangle("_ZZ4mainENKUlvE_clEv") == "main::{lambda()#1}::operator()() const"
    assert demangle("_ZN4core3ptr13drop_in_place17h1234567890abcdefE") == (
        "core::ptr::drop_in_place"
    )
    assert demangle("main") == "main"
    assert demangle("_ZN6shapes3BoxIiE11spin_insideEi@plt") == (  # a PLT entry, as gdb says
        "shapes::Box<int>::spin_inside(int)@plt"
    )
    assert demangle("_Znot_mangled") == "_Znot_mangled"
    assert SymbolOptions(demangle=False).name("_Z3foov") == "_Z3foov"
    if demangle_module._rust is not None:
        assert demangle("_RNvCs15kBYyAo9fc_7mycrate7example") == "mycrate::example"


def test_missing_demangler_leaves_names_mangled(monkeypatch: pytest.MonkeyPatch) -> None:
    demangle.cache_clear()
    monkeypatch.setattr(demangle_module, "_loaded", True)
    monkeypatch.setattr(demangle_module, "_cxx", None)
    monkeypatch.setattr(demangle_module, "_rust", None)
    try:
        assert demangle("_Z3foov") == "_Z3foov"
        assert demangle("_RNvCs15kBYyAo9fc_7mycrate7example") == (
            "_RNvCs15kBYyAo9fc_7mycrate7example"
        )
    finally:
        demangle.cache_clear()


# -- source lines ----------------------------------------------------------------------------


def test_damaged_dwarf_gives_no_lines_and_no_error(tmp_path: Path) -> None:
    from pysframe.elf.dwarf_lines import source_lines

    sections = symbol_sections([("main", info(STB_GLOBAL), TEXT, 8)])
    assert source_lines(str(write(tmp_path / "plain", build_elf(sections, e_type=3)))) is None
    rng = random.Random(7)
    for attempt in range(20):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        damaged = [*sections, Sec(".debug_info", SHT_PROGBITS, junk),
                   Sec(".debug_abbrev", SHT_PROGBITS, junk[::-1])]
        path = write(tmp_path / f"damaged{attempt}", build_elf(damaged, e_type=3))
        lines = source_lines(str(path))
        if lines is not None:
            assert lines.frames(TEXT + 2) == []
            assert lines.starts_line(TEXT) in (True, False)
        symbols = symbols_of_file(str(path), ())
        assert symbols.source(TEXT + 2) == [] and symbols.find(TEXT + 2) == ("main", 2)


def _gdb_info_symbol(gdb: str, program: Path, pcs: list[int]) -> list[str | None]:
    """gdb's ``info symbol`` name for each PC (without `` + OFFSET``), None for none."""
    import subprocess

    commands = [
        word for pc in pcs for word in ("-ex", f"info symbol {pc:#x}", "-ex", "echo @@\\n")
    ]
    output = subprocess.run(
        [gdb, "-q", "-batch", "-nx", str(program), *commands],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    # One answer per PC; an address in two sections (.tbss) gets a line for each: the first.
    answers = [block.strip().splitlines()[0] for block in output.split("@@\n")[:-1]]
    assert len(answers) == len(pcs)
    names: list[str | None] = []
    for answer in answers:
        name = None if answer.startswith("No symbol") else answer.split(" in section ")[0]
        names.append(None if name is None else name.rsplit(" + ", 1)[0])
    return names


def _static_program(tmp_path: Path) -> Path:
    """A static x86-64 program: its PLT jumps through IRELATIVE slots, which gdb leaves
    unnamed (BFD names PLT entries from dynamic relocations only)."""
    import subprocess

    require_program("gcc")
    source = tmp_path / "static.c"
    source.write_text(
        "#include <string.h>\n#include <stdio.h>\n"
        "int main(int c, char **v) { return (int)strlen(v[0]) + (strchr(v[0], 'x') != 0) "
        "+ printf(\"%d\", c); }\n"
    )
    program = tmp_path / "static"
    subprocess.run(["gcc", "-O1", "-static", "-o", str(program), str(source)], check=True)
    return program


@pytest.mark.parametrize(
    "name",
    [
        "x86_64/v3/frames", "x86_64/v3/frames-ibt", "x86_64/v3/frames-nopie", "static",
        "aarch64/v3/frames", "s390x/v3/frames-nopie",
    ],
)  # fmt: skip
def test_pcs_named_as_gdb_at_section_edges_and_plt_entries(name: str, tmp_path: Path) -> None:
    """At every section's edges and at the first and last byte of every PLT entry of a real
    program, each function name (or none) is gdb's ``info symbol`` one: no name outside the
    allocated sections (lookup of an address past the end of the program said
    ``_fini+0x5f5b2ff``), none from a symbol of another section, and ``NAME@plt`` (BFD's
    synthetic symbols) for the entries that jump through a GOT slot, on x86-64 (lazy, IBT,
    non-PIE and static PLTs), AArch64 and s390x."""

    gdb = "gdb" if name.startswith(("x86_64", "static")) else "gdb-multiarch"
    require_program(gdb)
    corpus = Path(__file__).parent.parent / "data" / "corpus"
    program = _static_program(tmp_path) if name == "static" else corpus / name
    with ElfReader.open(str(program)) as image:
        ranges = [(s.address, s.size, s.entsize, s.name) for s in image.sections() if s.address]
    pcs = {pc for a, size, _e, _n in ranges for pc in (a, a + size - 1, a + size, a + size + 16)}
    for address, size, entsize, section in ranges:
        if section.startswith(".plt"):
            step = entsize or 16
            for at in range(address, address + size, step):
                pcs.update((at, at + step - 1))
    ordered = [*sorted(pcs), 99_999_999]
    symbols = symbols_of_file(str(program))
    named = plt = 0
    for pc, theirs in zip(ordered, _gdb_info_symbol(gdb, program, ordered), strict=True):
        ours = symbols.find(pc)
        if ours is not None:  # ours names functions only; gdb names data objects too
            assert ours[0] == theirs, hex(pc)
            named += 1
            plt += ours[0].endswith("@plt")
        elif theirs is not None:
            assert not symbols.by_name(theirs) and not theirs.endswith("@plt"), (hex(pc), theirs)
    assert symbols.find(99_999_999) is None and named >= 5
    assert plt >= 2 or name == "static"


def test_demangled_as_cxxfilt_on_libstdcxx() -> None:
    """Every C++ function name of libstdc++'s dynamic symbol table demangles to binutils'
    c++filt text (gdb's too: both demangle verbosely, ``std::basic_string<char, ...>``
    where the C++ runtime says ``std::string``)."""
    import subprocess

    require_module("cxxfilt")
    library = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    require_program("c++filt", "binutils")
    if not library.exists():
        require("libstdc++6", f"{library} is not on this machine")
    with ElfReader.open(str(library)) as image:
        records = read_function_symbols(image, ".dynsym")
    names = sorted({r.name for r in records if r.name.startswith("_Z")})
    theirs = subprocess.run(
        ["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(names) > 3000 and len(theirs) == len(names)
    assert [demangle(n) for n in names] == theirs
    assert demangle("_ZNSo5writeEPKcl") == (
        "std::basic_ostream<char, std::char_traits<char> >::write(char const*, long)"
    )
