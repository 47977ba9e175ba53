"""Files an input points at, made hostile: each costs one clear error or warning, at once.

A core's ``NT_FILE`` note, the dynamic linker's ``link_map`` list, a ``--sysroot``, a
``.gnu_debuglink`` or a debug directory name files that are then opened; they may name a FIFO
(opening it would wait for a writer forever), ``/dev/stdin`` with a pipe behind it, a huge
sparse file, or a path that leaves the sysroot.  The files themselves may hold string tables
without NUL, DWARF whose DIEs point back at themselves, a mangled name that doubles at each
step, a PLT entry that jumps below address 0, or a layout that asks for a gigabyte of padding.

Each case runs under a deadline (``within``): a hang fails the test instead of blocking it.
"""

from __future__ import annotations

import contextlib
import lzma
import os
import resource
import signal
import struct
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from conftest import require_module
from elf_build import Sec, build_elf
from pysframe.elf.debuginfo import build_id_path, find_debug_file, minidebuginfo
from pysframe.elf.reader import ElfReader, is_elf_file
from pysframe.errors import InputError
from pysframe.input import open_input, read_proc, sysroot_path
from pysframe.unwind.corefile import CoreFile, CoreFileError
from pysframe.unwind.loadmap import ElfLayout, lookup_paths, shared_object_mappings
from pysframe.unwind.symbolize import symbols_of_file
from test_loadmap import (
    AUXV,
    LIB_BASE,
    core_file,
    linked_memory,
    note,
    program,
    prstatus,
    space,
)
from test_symbolize import (
    SHT_PROGBITS,
    STB_GLOBAL,
    TEXT,
    build_id_note,
    debug_file,
    debuglink,
    info,
    stripped,
    symbol_sections,
    write,
)

NT_FILE = 0x46494C45


class Hung(Exception):
    """The deadline of :func:`within` passed."""


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail with Hung when the block runs longer than ``seconds`` (a blocking open() is
    interrupted too: the signal handler raises)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


# -- the one open ------------------------------------------------------------------------------


def test_open_input_refuses_nul_fifo_stdin_pipe_and_oversized_files(
    tmp_path: Path, fifo: Path
) -> None:
    with within(5), pytest.raises(InputError, match="NUL byte"):
        open_input(str(tmp_path / "a\0b"))
    with within(5), pytest.raises(InputError, match="a FIFO, not a regular file"):
        open_input(fifo)
    big = tmp_path / "sparse"
    with big.open("wb") as stream:
        stream.truncate(1 << 30)
    with pytest.raises(InputError, match=f"^{big}: 1073741824 bytes, more than the 4096 "):
        open_input(big, max_size=4096)
    open_input(big, max_size=1 << 30).close()
    # /dev/stdin when standard input is a pipe (a child whose stdin is one).
    child = subprocess.run(
        [sys.executable, "-c", "from pysframe.elf.reader import is_elf_file\n"
         "from pysframe.input import open_input\n"
         "print(is_elf_file('/dev/stdin'))\n"
         "open_input('/dev/stdin')"],
        stdin=subprocess.PIPE, capture_output=True, text=True, timeout=30, check=False,
    )
    assert child.stdout == "False\n"
    assert "InputError: /dev/stdin: a FIFO, not a regular file" in child.stderr


def test_proc_files_are_read_bounded() -> None:
    maps = read_proc(f"/proc/{os.getpid()}/maps", 1 << 24)
    assert b"[stack]" in maps
    with pytest.raises(InputError, match="holds more than the 16 bytes"):
        read_proc(f"/proc/{os.getpid()}/maps", 16)


def test_sysroot_paths_stay_inside(tmp_path: Path) -> None:
    root = tmp_path / "sysroot"
    (root / "lib").mkdir(parents=True)
    (root / "lib/escape.so").symlink_to("/etc/passwd")
    (root / "lib/inside.so").symlink_to("../lib/real.so")
    assert sysroot_path(str(root), "/lib/inside.so") == str(root / "lib/inside.so")
    assert sysroot_path(str(root), "lib/x.so") == str(root / "lib/x.so")
    with pytest.raises(InputError, match="leaves the sysroot"):
        sysroot_path(str(root), "/../../etc/passwd")
    with pytest.raises(InputError, match="leaves the sysroot") as caught:
        sysroot_path(str(root), "/lib/escape.so")
    assert caught.value.path == str(root / "lib/escape.so")
    with pytest.raises(InputError, match="NUL byte"):
        sysroot_path(str(root), "/lib/a\0b")
    # lookup_paths warns and goes on to the name as it is.
    warnings: list[str] = []
    assert lookup_paths("/lib/escape.so", str(root), warnings) == ["/lib/escape.so"]
    assert warnings == [f"{root}/lib/escape.so: leaves the sysroot {root} (it is /etc/passwd)"]


# -- FIFOs named by inputs -----------------------------------------------------------------------


def test_is_elf_file_does_not_wait_on_a_fifo(fifo: Path) -> None:
    with within(5):
        assert not is_elf_file(fifo)


def test_debug_files_that_are_fifos(tmp_path: Path, fifo: Path) -> None:
    build_id = bytes.fromhex("aabbccdd")
    program_path = write(
        tmp_path / "prog", stripped(build_id_note(build_id), debuglink(str(fifo), 0))
    )
    root = tmp_path / "debug"
    place = Path(build_id_path(str(root), build_id))
    place.parent.mkdir(parents=True)
    place.symlink_to(fifo)  # a FIFO through a symbolic link in the debug directory
    os.mkfifo(root / "prog.debug")
    with within(5):
        found = find_debug_file(str(program_path), build_id, (str(fifo), 0), (str(root),))
        assert found.path is None
        symbols = symbols_of_file(str(program_path), (str(root),))
    assert symbols.debug_file is None


def test_link_map_and_sysroot_entries_that_are_fifos(tmp_path: Path, fifo: Path) -> None:
    exe = ElfLayout.read(str(program(tmp_path / "prog", interp=True)))
    sysroot = tmp_path / "sysroot"
    (sysroot / "lib").mkdir(parents=True)
    os.mkfifo(sysroot / "lib/libfifo.so")
    entries = [(0, 0x430000, 0x410800), (LIB_BASE, 0x430100, LIB_BASE + 0x10800),
               (LIB_BASE + 0x100000, 0x430200, LIB_BASE + 0x110800)]
    names = {0x430000: b"", 0x430100: str(fifo).encode(), 0x430200: b"/lib/libfifo.so"}
    with within(5):
        mappings = shared_object_mappings(space(linked_memory(entries, names)), exe, 0,
                                          str(sysroot))
    # Neither FIFO is read as the library; the first, not under the sysroot, is shown as a
    # missing file there (frames in it unresolved).
    assert [m.path for m in mappings] == [str(sysroot) + str(fifo)]


def _nt_file(files: list[tuple[int, int, int, bytes]]) -> bytes:
    data = struct.pack("<QQ", len(files), 4096)
    data += b"".join(struct.pack("<QQQ", *entry[:3]) for entry in files)
    return data + b"".join(entry[3] + b"\0" for entry in files)


def test_core_nt_file_naming_a_fifo(tmp_path: Path, fifo: Path) -> None:
    files = [(0x400000, 0x401000, 0, str(fifo).encode())]
    notes = (note(b"CORE", 1, prstatus(1, [0] * 34)) + note(b"CORE", 6, AUXV)
             + note(b"CORE", NT_FILE, _nt_file(files)))
    core = core_file(tmp_path / "core", notes)
    # The code segment is not dumped: its bytes would come from the FIFO.
    with within(5), CoreFile(str(core)) as opened, pytest.raises(OSError):
        opened.read_memory(0x400000, 4)


# -- debug files ---------------------------------------------------------------------------------


def test_debuglink_to_a_huge_sparse_file_is_not_read(tmp_path: Path) -> None:
    """The debuglink names a 40 GB sparse file starting like an ELF debug file: its CRC would
    read all 40 GB; it is passed over, with its size as the reason."""
    program_path = write(tmp_path / "prog", stripped(debuglink("prog.debug", 0x1234)))
    huge = tmp_path / "prog.debug"
    huge.write_bytes(debug_file())
    with huge.open("r+b") as stream:
        stream.truncate(40 << 30)
    started = time.perf_counter()
    with within(10):
        symbols = symbols_of_file(str(program_path), ())
    assert time.perf_counter() - started < 5
    assert symbols.debug_file is None
    assert symbols.problems == [
        f"{huge}: {40 << 30} bytes, more than the {2 << 30} that are read of it"
    ]


# -- string tables -------------------------------------------------------------------------------


def _symbols_without_nul(count: int, table_size: int) -> list[Sec]:
    """.text, a .symtab of ``count`` function symbols whose names start ``table_size //
    count`` bytes apart in a .strtab of ``table_size`` bytes with no NUL at all: each name runs
    to the table's end (half a MiB on average for 3,000 names in 1.1 MB)."""
    step = table_size // count
    entries = bytes(24) + b"".join(
        # Elf64_Sym: st_name, st_info (global function), st_other, st_shndx 1, value, size.
        struct.pack("<IBBHQQ", index * step, info(STB_GLOBAL), 0, 1, TEXT + index, 1)
        for index in range(count)
    )
    return [
        Sec(".text", SHT_PROGBITS, b"\xc3" * 0x400, flags=6, addr=TEXT),
        Sec(".symtab", 2, entries, link=3, entsize=24),
        Sec(".strtab", 3, b"a" * table_size, align=1),
    ]


def _traced(function: object) -> tuple[object, float, int]:
    """``function()``, the seconds it took and the peak bytes Python allocated meanwhile."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = function()  # type: ignore[operator]
        return result, time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_string_table_without_nul(tmp_path: Path) -> None:
    path = write(tmp_path / "prog", build_elf(_symbols_without_nul(3000, 1_100_000), e_type=3))
    assert path.stat().st_size < 1_300_000
    with within(20):
        symbols, seconds, peak = _traced(lambda: symbols_of_file(str(path), ()))
    assert seconds < 5 and peak < 100 << 20
    assert symbols.find(TEXT) is None  # type: ignore[attr-defined]
    [problem] = symbols.problems  # type: ignore[attr-defined]
    assert problem.startswith(f"{path}: .symtab: 2999 names of ")  # name 0 is no name
    assert problem.endswith("names laid over each other, not read")


def test_names_end_at_their_nul_or_the_tables_end() -> None:
    from pysframe.elf.symbols import symbol_names

    strings = b"\0main\0memcpy@@GLIBC_2.14\0caf\xc3\xa9\0tail-without-nul"
    # A name in the middle of another (a linker's suffix merging), one cut inside a UTF-8
    # sequence (its stray byte shown as \xNN, as names are everywhere), one without a NUL
    # before the table's end, and offsets at and past that end.
    assert symbol_names(strings, [0, 1, 3, 6, 25, 29, 31, 40, 47, 99]) == [
        "", "main", "in", "memcpy", "caf\u00e9", "\\xa9", "tail-without-nul", "out-nul", "", "",
    ]  # fmt: skip
    assert symbol_names(b"", [0, 3]) == ["", ""]


def _minidebuginfo_program(tmp_path: Path, inner: bytes) -> Path:
    packed = lzma.compress(inner, format=lzma.FORMAT_XZ, preset=0)
    return write(tmp_path / "prog", stripped(Sec(".gnu_debugdata", SHT_PROGBITS, packed)))


def test_minidebuginfo_string_table_without_nul(tmp_path: Path) -> None:
    inner = build_elf(_symbols_without_nul(3000, 1_100_000))
    path = _minidebuginfo_program(tmp_path, inner)
    assert path.stat().st_size < 64_000
    with within(20):
        symbols, seconds, peak = _traced(lambda: symbols_of_file(str(path), ()))
    assert seconds < 5 and peak < 100 << 20
    [problem] = symbols.problems  # type: ignore[attr-defined]
    assert "names laid over each other" in problem


def test_minidebuginfo_of_a_million_symbols(tmp_path: Path) -> None:
    """A million identical symbols (24 MB) compress to a few KB: decompressing them is
    refused past 64 times the compressed size."""
    import numpy as np

    from pysframe.elf.layout import sym_dtype

    entries = np.zeros(1 << 20, dtype=sym_dtype(64, False))
    entries["name"], entries["info"], entries["shndx"] = 1, info(STB_GLOBAL), 1
    entries["value"], entries["size"] = TEXT, 16
    inner = build_elf([
        Sec(".text", SHT_PROGBITS, b"\xc3" * 0x400, flags=6, addr=TEXT),
        Sec(".symtab", 2, entries.tobytes(), link=3, entsize=24),
        Sec(".strtab", 3, b"\0f\0", align=1),
    ])
    path = _minidebuginfo_program(tmp_path, inner)
    with ElfReader.open(str(path)) as image, pytest.raises(
        Exception, match=r"\.gnu_debugdata: more than \d+ bytes once decompressed from \d+"
    ):
        minidebuginfo(image)
    with within(20):
        symbols, seconds, peak = _traced(lambda: symbols_of_file(str(path), ()))
    assert seconds < 5 and peak < 100 << 20
    [problem] = symbols.problems  # type: ignore[attr-defined]
    assert problem.startswith(f"{path}: .gnu_debugdata: more than ")


# -- PLT -----------------------------------------------------------------------------------------


def test_plt_entry_jumping_below_address_zero(tmp_path: Path) -> None:
    """A 6-byte .plt entry ``jmp *-0x2000(%rip)`` at address 0x100 (its slot would be below
    address 0), beside a dynamic symbol table and its .rela.plt."""
    from pysframe.elf.plt import plt_symbols

    jump = b"\xff\x25" + struct.pack("<i", -0x2000)
    # Elf64_Sym: the null symbol, then "puts" (st_name 1, global function, undefined).
    dynsym = bytes(24) + struct.pack("<IBBHQQ", 1, info(STB_GLOBAL), 0, 0, 0, 0)
    # Elf64_Rela: r_offset 0x3000 (a GOT slot), symbol 1, R_X86_64_JUMP_SLOT (7), addend 0.
    relocations = struct.pack("<QQq", 0x3000, 1 << 32 | 7, 0)
    path = write(tmp_path / "prog", build_elf([
        Sec(".plt", SHT_PROGBITS, jump + bytes(10), flags=6, addr=0x100, entsize=16),
        Sec(".dynsym", 11, dynsym, flags=2, link=3, entsize=24),
        Sec(".dynstr", 3, b"\0puts\0", flags=2, align=1),
        Sec(".rela.plt", 4, relocations, flags=2, link=2, entsize=24),
    ], e_type=3))
    with ElfReader.open(str(path)) as image:
        assert plt_symbols(image) == []
    symbols = symbols_of_file(str(path), ())
    assert symbols.problems == [] and symbols.find(0x100) is None


# -- DWARF ---------------------------------------------------------------------------------------

#: .debug_abbrev codes: 1 the unit (DW_TAG_compile_unit 0x11, with children; DW_AT_stmt_list
#: 0x10 sec_offset 0x17, DW_AT_low_pc 0x11 addr 0x01, DW_AT_high_pc 0x12 data8 0x07); 2 a
#: function without children (DW_TAG_subprogram 0x2e; DW_AT_name 0x03 string 0x08, low and
#: high pc); 3 a function with children and DW_AT_sibling (0x01, ref4 0x13).
ABBREVS = bytes([
    1, 0x11, 1, 0x10, 0x17, 0x11, 0x01, 0x12, 0x07, 0, 0,
    2, 0x2E, 0, 0x03, 0x08, 0x11, 0x01, 0x12, 0x07, 0, 0,
    3, 0x2E, 1, 0x01, 0x13, 0x03, 0x08, 0x11, 0x01, 0x12, 0x07, 0, 0,
    0,
])


def debug_info(dies: bytes) -> bytes:
    """A DWARF 4 unit (unit_length, version 4, abbrev offset 0, address size 8) holding the
    unit DIE (line program at 0, code TEXT to TEXT + 4 MiB) and ``dies``, then a null."""
    body = struct.pack("<HIB", 4, 0, 8) + bytes([1]) + struct.pack("<IQQ", 0, TEXT, 1 << 22)
    body += dies + b"\0"
    return struct.pack("<I", len(body)) + body


def function_die(name: str, low: int, size: int) -> bytes:
    return bytes([2]) + name.encode() + b"\0" + struct.pack("<QQ", low, size)


def line_program(specials: int, opcode: int = 32, repeated: bytes = b"") -> bytes:
    """A DWARF 4 line program (min_inst_length 1, max_ops 1, default_is_stmt 1, line_base -5,
    line_range 14, opcode_base 13, one file "a.c"): DW_LNE_set_address TEXT, ``specials``
    times ``repeated`` or else the opcode (32: a special one, one byte and no line further
    each), DW_LNE_end_sequence."""
    header = bytes([1, 1, 1, 0xFB, 14, 13, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])
    header += b"\0" + b"a.c\0\0\0\0" + b"\0"
    code = (b"\0\x09\x02" + struct.pack("<Q", TEXT) + (repeated or bytes([opcode])) * specials
            + b"\0\x01\x01")
    body = struct.pack("<HI", 4, len(header)) + header + code
    return struct.pack("<I", len(body)) + body


def dwarf_program(tmp_path: Path, dies: bytes, specials: int = 16, name: str = "dwarf",
                  abbrevs: bytes = ABBREVS) -> Path:
    return write(tmp_path / name, build_elf([
        Sec(".text", SHT_PROGBITS, b"\xc3" * 0x400, flags=6, addr=TEXT),
        Sec(".debug_info", SHT_PROGBITS, debug_info(dies), align=1),
        Sec(".debug_abbrev", SHT_PROGBITS, abbrevs, align=1),
        Sec(".debug_line", SHT_PROGBITS, line_program(specials), align=1),
    ], e_type=2))


#: The unit DIE takes 11 bytes of header then 21 of DIE: the first DIE after it is at 32.
FIRST_DIE = 32


@pytest.mark.parametrize("target", ["itself", "back", "out"])
def test_sibling_pointing_at_its_own_die_or_back(tmp_path: Path, target: str) -> None:
    """A function DIE whose DW_AT_sibling points at itself (the walk would list it forever),
    back to the unit DIE, or past the unit; then a function after it."""
    from pysframe.elf.dwarf_lines import source_lines

    sibling = {"itself": FIRST_DIE, "back": 11, "out": 1 << 20}[target]
    looping = (bytes([3]) + struct.pack("<I", sibling) + b"loop\0"
               + struct.pack("<QQ", TEXT, 0x10) + b"\0")  # no child: the null at once
    path = dwarf_program(tmp_path, looping + function_die("after", TEXT + 0x10, 0x10))
    lines = source_lines(str(path))
    assert lines is not None
    with within(5):
        assert [f.function for f in lines.frames(TEXT + 4)] == ["loop"]
        assert [f.function for f in lines.frames(TEXT + 0x14)] == ["after"]
    assert lines.problems == [
        f"{path}: .debug_info: DW_AT_sibling points to {sibling:#x}, not after the DIE "
        f"(at byte offset {FIRST_DIE:#x})"
    ]


def test_a_die_reached_twice_stops_the_walk(tmp_path: Path) -> None:
    """Two functions with children whose siblings both point at a third: the third is listed
    once."""
    from pysframe.elf.dwarf_lines import source_lines

    def with_sibling(name: str, sibling: int, low: int) -> bytes:
        return (bytes([3]) + struct.pack("<I", sibling) + name.encode() + b"\0"
                + struct.pack("<QQ", low, 0x10) + b"\0")

    first = with_sibling("a", 0, TEXT)
    third_at = FIRST_DIE + 2 * len(first)
    dies = with_sibling("a", third_at, TEXT) + with_sibling("b", third_at, TEXT + 0x10)
    path = dwarf_program(tmp_path, dies + function_die("c", TEXT + 0x20, 0x10))
    lines = source_lines(str(path))
    assert lines is not None
    with within(5):
        assert [f.function for f in lines.frames(TEXT + 0x24)] == ["c"]
    assert lines.problems == []  # a sibling may skip a subtree: "b" is simply not listed


def test_random_damage_to_debug_abbrev(tmp_path: Path) -> None:
    import random

    from pysframe.elf.dwarf_lines import source_lines

    rng = random.Random(11)
    looping = (bytes([3]) + struct.pack("<I", 0x40) + b"f\0" + struct.pack("<QQ", TEXT, 0x10)
               + function_die("g", TEXT + 0x10, 0x10) + b"\0")
    dies = looping + function_die("h", TEXT + 0x20, 0x10) * 3
    for attempt in range(60):
        damaged = bytearray(ABBREVS)
        for _ in range(rng.randrange(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        path = dwarf_program(tmp_path, dies, name=f"d{attempt}", abbrevs=bytes(damaged))
        with within(5):
            lines = source_lines(str(path))
            if lines is not None:
                for address in (TEXT, TEXT + 0x14, TEXT + 0x24):
                    lines.frames(address)
                    lines.starts_line(address)


def test_line_table_of_two_million_rows(tmp_path: Path) -> None:
    """2M one-byte special opcodes (a 2 MB file): 26 s and 1 GB with an object per row."""
    from pysframe.elf.dwarf_lines import source_lines

    path = dwarf_program(tmp_path, function_die("f", TEXT, 1 << 21), specials=2_000_000)
    assert path.stat().st_size < 2_100_000
    lines = source_lines(str(path))
    assert lines is not None
    with within(20):
        starts, seconds, peak = _traced(lambda: lines.starts_line(TEXT + 1_234_567))
    assert starts and seconds < 5 and peak < 150 << 20
    [frame] = lines.frames(TEXT + 1_999_999)
    assert (frame.function, frame.file, frame.line) == ("f", "a.c", 1)


# -- injection layouts ---------------------------------------------------------------------------

APP = Path(__file__).parent.parent / "data/corpus/x86_64/v3/app"


def _with_alignment(tmp_path: Path, align: int) -> Path:
    """The corpus program (28 KB, with its own .sframe) with every PT_LOAD's p_align set to
    ``align`` (Elf64_Phdr: p_type at 0, p_align at 48, 56 bytes each)."""
    data = bytearray(APP.read_bytes())
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    for index in range(phnum):
        entry = phoff + 56 * index
        if struct.unpack_from("<I", data, entry)[0] == 1:
            struct.pack_into("<Q", data, entry + 48, align)
    return write(tmp_path / f"aligned-{align:#x}", bytes(data))


@pytest.mark.parametrize("align", [1 << 30, 1 << 33, 1 << 63])
def test_injection_refuses_a_layout_of_gigabytes(tmp_path: Path, align: int) -> None:
    from pysframe.elf.inject import plan_injection
    from pysframe.errors import ElfError

    path = _with_alignment(tmp_path, align)
    with pytest.raises(ElfError, match=f"alignment {align:#x} would add .* layout refused"):
        plan_injection(path.read_bytes(), replace=True)

    def limit() -> None:  # 1 GiB of address space: the padding asked for is as much or more
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pysframe", "generate", str(path), "--inject", "--replace",
         "-o", str(out)],
        capture_output=True, text=True, timeout=60, check=False, preexec_fn=limit,
    )
    assert done.returncode == 1 and not out.exists()
    assert done.stderr.startswith(f"pysframe: {path}")
    assert "layout refused" in done.stderr and "out of memory" not in done.stderr
    assert len(done.stderr.splitlines()) == 1


# -- names ---------------------------------------------------------------------------------------


def _substitution(index: int) -> str:
    """The Itanium substitution for candidate ``index``: S_, S0_, S1_... (seq-ids in base
    36)."""
    if not index:
        return "S_"
    digits, number, text = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", index - 1, ""
    while True:
        text = digits[number % 36] + text
        number //= 36
        if not number:
            return f"S{text}_"


def doubling_name(levels: int) -> str:
    """``f<A<A, A>, A<A<A, A>, A<A, A> >, ...>()``: each template argument is A of the one
    before, twice (S_ is f, S0_ is A, S1_ the first argument...), so each level doubles the
    demangled name: 25 levels, 282 bytes, demangle to 450 MB."""
    arguments = "1AIS0_S0_E" + "".join(
        f"S0_I{_substitution(level)}{_substitution(level)}E" for level in range(2, levels + 1)
    )
    return f"_Z1fI{arguments}Evv"


def test_doubling_mangled_name_stays_mangled() -> None:
    require_module("cxxfilt")
    from pysframe.unwind.demangle import demangle, demangle_checked, length_bound
    from pysframe.unwind.symbolize import SymbolOptions

    small = doubling_name(3)
    assert demangle(small) == (
        "void f<A<A, A>, A<A<A, A>, A<A, A> >, A<A<A<A, A>, A<A, A> >, A<A<A, A>, A<A, A> > > >()"
    )
    assert length_bound(small) is not None and length_bound(doubling_name(25)) is None
    name = doubling_name(25)
    assert len(name) == 282
    options = SymbolOptions()
    started = time.perf_counter()
    with within(10):
        assert options.name(name) == name
        assert options.name(name + "@plt") == name + "@plt"
    assert time.perf_counter() - started < 5
    assert options.warnings == [f"{name[:80]}...: left mangled (its demangling takes more than "
                                "0.5 s or 512 MiB)"]
    assert demangle_checked("main") == ("main", None)
    # Long but within the bound: demangled in the worker (53 Ki characters).
    text, why = demangle_checked(doubling_name(12))
    assert why is None and len(text) == 53196


def test_lookup_of_a_doubling_name_in_a_file(tmp_path: Path) -> None:
    """``lookup FILE PC`` on a function whose name is the doubling one: one line, at once."""
    require_module("cxxfilt")
    path = write(tmp_path / "prog", build_elf(symbol_sections([
        (doubling_name(25), info(STB_GLOBAL), TEXT, 0x20)]), e_type=3))
    symbols = symbols_of_file(str(path), ())
    from pysframe.unwind.symbolize import SymbolOptions

    options = SymbolOptions()
    found = symbols.find(TEXT + 4)
    assert found is not None
    with within(10):
        assert options.name(found[0]) == doubling_name(25)
    assert len(options.warnings) == 1


# -- cores ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [112, 150, 200])
def test_core_prstatus_too_short_names_the_core(tmp_path: Path, size: int) -> None:
    notes = note(b"CORE", 1, bytes(size)) + note(b"CORE", 6, AUXV)
    core = core_file(tmp_path / "core", notes)
    with pytest.raises(CoreFileError) as caught:
        CoreFile(str(core))
    assert caught.value.path == str(core)
    assert str(caught.value) == (
        f"{core}: NT_PRSTATUS note of {size} bytes: register block of {size - 112} bytes is "
        "too short for AARCH64_ENDIAN_LITTLE (272 bytes); 32-bit processes are not supported"
    )


def test_core_nt_file_paths_leaving_the_sysroot(tmp_path: Path) -> None:
    sysroot = tmp_path / "sysroot"
    (sysroot / "lib").mkdir(parents=True)
    (sysroot / "lib/libescape.so").symlink_to("/etc/hostname")
    files = [(0x400000, 0x401000, 0, b"/lib/libescape.so"),
             (0x500000, 0x501000, 0, b"/" + b"../" * 32 + b"etc/passwd")]
    notes = (note(b"CORE", 1, prstatus(1, [0] * 34)) + note(b"CORE", 6, AUXV)
             + note(b"CORE", NT_FILE, _nt_file(files)))
    core = core_file(tmp_path / "core", notes)
    with CoreFile(str(core), sysroot=str(sysroot)) as opened:
        # Not looked for under the sysroot: as named (a file of this machine, as without one).
        assert [m.path for m in opened.mappings] == ["/lib/libescape.so",
                                                     "/" + "../" * 32 + "etc/passwd"]
        assert [w.split(": ", 1)[1] for w in opened.warnings] == [
            f"leaves the sysroot {sysroot} (it is /etc/hostname)",
            f"leaves the sysroot {sysroot} (it is /etc/passwd)",
        ]


def test_names_demangled_together_equal_one_by_one() -> None:
    """demangle_many (the worker's names sent together) against demangle, name by name: C++
    names whose bound sends them to the worker, one too long to finish, a PLT name, a C name."""
    require_module("cxxfilt")
    from pysframe.unwind import demangle as module

    names = [doubling_name(levels) for levels in (3, 8, 10, 12, 25)]
    names += [doubling_name(9) + "@plt", "main", "_ZN6shapes3BoxIiE11spin_insideEi"]
    module.demangle(names[4])  # left mangled, remembered: never demangled here after
    with within(10):
        together = module.demangle_many(names)
        module.demangle.cache_clear()
        module._bounded.cache_clear()
        assert together == [module.demangle(name) for name in names]
    assert together[4] == names[4] and together[0].startswith("void f<A<A, A>")
