"""Costs linear in every count an input controls: each count is doubled twice, and the time and
the memory (peak of Python's allocations, numpy's included) of reading it must not grow more
than about twice each time (a ratio under 3; a quadratic cost gives 4), nor the time more
than eight times over the two doublings (a linear cost gives 4, a quadratic one 16).

Counts: a core's PT_LOAD segments (the executable placed among them, no NT_FILE), its NT_FILE
mappings, the dynamic linker's link_map entries, function symbols, DWARF line rows (special
opcodes, and DW_LNS_copy decoded one by one), DIEs, the DW_CFA_advance_loc instructions of
one FDE (generated from, and interpreted as verify reads CFI), and the rows of one SFrame
function (lookups of one PC and of many, the dumps, stats, info, compact and check).  Sizes are
small: the sweep takes seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import struct
import time
import tracemalloc
from collections.abc import Callable, Iterator
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from elf_build import Sec, Seg, build_elf
from pysframe import Abi, CfaRule, RegRule, SFrameSection, Version
from pysframe.elf.dwarf_lines import source_lines
from pysframe.elf.reader import ElfReader
from pysframe.elf.symbols import FunctionSymbols, read_function_symbols
from pysframe.format.builder import SFrameBuilder
from pysframe.format.lookup import SectionLookup
from pysframe.generate import generate_from_eh_frame
from pysframe.generate.interpret import interpret_cfi
from pysframe.generate.translator import TOO_MANY_FRES
from pysframe.tools.compact import compact_file
from pysframe.tools.dump import function_json_pieces, section_chunks, section_json_chunks
from pysframe.tools.info import section_info
from pysframe.tools.stats import file_stats
from pysframe.tools.validate import validate_elf
from pysframe.unwind.corefile import CoreFile
from pysframe.unwind.loadmap import (
    AddressSpace,
    ElfLayout,
    ExecutableMismatchError,
    shared_object_mappings,
)
from test_cfi_units import section
from test_hostile_inputs import (
    ABBREVS,
    TEXT,
    debug_info,
    dwarf_program,
    function_die,
    line_program,
)
from test_loadmap import AUXV, DT_DEBUG, PT_LOAD, PT_NOTE, R, X, note, program, prstatus
from test_symbolize import STB_GLOBAL, info, write

NT_FILE = 0x46494C45


@contextlib.contextmanager
def _allocator_keeps_memory() -> Iterator[None]:
    """glibc's malloc maps large blocks afresh and gives freed memory back to the kernel, so
    the largest run of a sweep, which alone needs more than the others freed, pays page faults
    on every round (measured: 21 ms at 1M DWARF line rows, 58 ms at 2M; 42 ms with this).
    While timing, blocks come from the heap and stay there (mallopt M_MMAP_THRESHOLD and
    M_TRIM_THRESHOLD); glibc's starting values (128 KiB) are put back after, as fixed values."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: time as it is
        yield
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 1 << 30)
    mallopt(m_trim_threshold, 1 << 30)
    try:
        yield
    finally:
        mallopt(m_mmap_threshold, 128 * 1024)
        mallopt(m_trim_threshold, 128 * 1024)


def _seconds(runs: list[Callable[[], object]], rounds: int = 5) -> list[float]:
    """The best CPU time of each run over ``rounds`` rounds, the runs taken in turn within a
    round (a busy spell of the machine then lands on every size alike), each after a collection
    and without the cyclic collector (its passes land on one run or another: noise, not the
    cost being measured), the allocator keeping the memory it got."""
    with _allocator_keeps_memory():
        return _best_seconds(runs, rounds)


def _best_seconds(runs: list[Callable[[], object]], rounds: int) -> list[float]:
    best = [float("inf")] * len(runs)
    for _ in range(rounds):
        for at, run in enumerate(runs):
            gc.collect()
            gc.disable()
            try:
                started = time.process_time()
                run()
                best[at] = min(best[at], time.process_time() - started)
            finally:
                gc.enable()
    return best


def _peak(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def sweep(make: Callable[[int], Callable[[], object]], sizes: list[int]) -> None:
    """``make(n)`` gives the run for count ``n``; each doubling of ``n`` may not cost more
    than three times the memory of the one before, and the time of the largest count may not
    be more than span ** 1.5 times the smallest's (span: the ratio of the counts; a linear
    cost gives span, a quadratic one span ** 2, so noise of a factor two on one run does not
    fail a linear cost and does not pass a quadratic one).  Times of a few milliseconds on a
    loaded machine are noisy: a sweep that fails is timed once more, with twice the rounds,
    and judged on that."""
    runs = [make(n) for n in sizes]
    peaks = [_peak(run) for run in runs]
    for (small, large), (n_small, n_large) in zip(pairwise(peaks), pairwise(sizes), strict=True):
        assert large / small < 3, f"memory {small} for {n_small}, {large} for {n_large}"
    bound = (sizes[-1] / sizes[0]) ** 1.5
    seconds = _seconds(runs)
    if seconds[-1] / seconds[0] >= bound:
        seconds = _seconds(runs, rounds=10)
    assert seconds[-1] / seconds[0] < bound, (
        f"time {seconds[0]:.3f} s for {sizes[0]}, {seconds[-1]:.3f} s for {sizes[-1]}"
    )


# -- cores ---------------------------------------------------------------------------------------


def _core(path: Path, notes: bytes, loads: list[tuple[int, int, int]]) -> Path:
    """A core (ELF64 AArch64 ET_CORE) with ``notes`` and a PT_LOAD (not dumped) per (address,
    size, flags)."""
    segments = [Seg(PT_NOTE, ".notes", flags=0)]
    segments += [Seg(PT_LOAD, flags=flags, extra={"vaddr": address, "memsz": size})
                 for address, size, flags in loads]
    path.write_bytes(build_elf([Sec(".notes", 7, notes, align=4)], machine=183, e_type=4,
                               segments=segments, strip_section_headers=True))
    return path


def test_core_pt_loads(tmp_path: Path) -> None:
    """A core without NT_FILE nor AT_ENTRY: a position-independent executable is tried at
    each of its PT_LOADs (read-only: none fits its code)."""
    exe = str(program(tmp_path / "pie", base=0, e_type=3))
    notes = note(b"CORE", 1, prstatus(1, [0] * 34)) + note(b"CORE", 6, AUXV[16:])

    def make(count: int) -> Callable[[], object]:
        loads = [(0x10000000 + 0x2000 * i, 0x1000, R) for i in range(count)]
        core = str(_core(tmp_path / f"core{count}", notes, loads))

        def run() -> None:
            with pytest.raises(ExecutableMismatchError):
                CoreFile(core, exe)

        return run

    sweep(make, [1000, 2000, 4000])


def test_core_nt_file_mappings(tmp_path: Path) -> None:
    """NT_FILE mappings of one file, every one read through (the core holds none of them)."""
    backing = write(tmp_path / "backing", bytes(range(256)) * 16)

    def make(count: int) -> Callable[[], object]:
        starts = [0x10000000 + 0x2000 * i for i in range(count)]
        nt_file = struct.pack("<QQ", count, 4096)
        nt_file += b"".join(struct.pack("<QQQ", s, s + 0x1000, 0) for s in starts)
        nt_file += (str(backing).encode() + b"\0") * count
        notes = note(b"CORE", 1, prstatus(1, [0] * 34)) + note(b"CORE", NT_FILE, nt_file)
        loads = [(s, 0x1000, R | X) for s in starts]
        core = str(_core(tmp_path / f"core{count}", notes, loads))

        def run() -> None:
            with CoreFile(core) as opened:
                for start in starts:
                    assert opened.read_memory(start + 1, 2) == b"\x01\x02"

        return run

    sweep(make, [1000, 2000, 4000])


def test_link_map_entries(tmp_path: Path) -> None:
    """link_map entries naming files that do not exist (each looked for, and mapped as
    missing)."""
    exe = ElfLayout.read(str(program(tmp_path / "prog", interp=True)))
    dynamic = struct.pack("<qQqQqQ", 1, 5, DT_DEBUG, 0x420000, 0, 0).ljust(0x40, b"\0")

    def make(count: int) -> Callable[[], object]:
        chain = bytearray()
        names = bytearray()
        for index in range(count):
            following = 0x1000000 + 40 * (index + 1) if index + 1 < count else 0
            name_at = 0x2000000 + len(names)
            base = 0x5500000000 + 0x100000 * index
            chain += struct.pack("<QQQQQ", base, name_at, base + 0x800, following, 0)
            names += f"/missing/lib{index}.so\0".encode()
        r_debug = struct.pack("<i4xQQi4xQ", 1, 0x1000000, 0, 0, 0)
        blocks = [(0x410800, dynamic), (0x420000, r_debug), (0x1000000, bytes(chain)),
                  (0x2000000, bytes(names) + bytes(4096))]

        def memory(address: int, size: int) -> bytes:
            for start, data in blocks:
                if start <= address and address + size <= start + len(data):
                    return data[address - start : address - start + size]
            raise OSError(f"nothing at {address:#x}")

        from pysframe.format.constants import Abi

        space = AddressSpace("core", Abi.AARCH64_ENDIAN_LITTLE, memory, memory, {9: 0x400100})

        def run() -> None:
            assert len(shared_object_mappings(space, exe, 0)) == count

        return run

    sweep(make, [1000, 2000, 4000])


# -- symbols and DWARF ---------------------------------------------------------------------------


def test_function_symbols(tmp_path: Path) -> None:
    def make(count: int) -> Callable[[], object]:
        strings = bytearray(b"\0")
        table = bytearray(24)
        for index in range(count):
            table += struct.pack("<IBBHQQ", len(strings), info(STB_GLOBAL), 0, 1,
                                 TEXT + 16 * index, 16)
            strings += f"function_{index}\0".encode()
        path = str(write(tmp_path / f"symbols{count}", build_elf([
            Sec(".text", 1, b"\xc3" * 16, flags=6, addr=TEXT),
            Sec(".symtab", 2, bytes(table), link=3, entsize=24),
            Sec(".strtab", 3, bytes(strings), align=1),
        ], e_type=3)))

        def run() -> None:
            with ElfReader.open(path) as image:
                table = FunctionSymbols(read_function_symbols(image, ".symtab"))
            assert table.find(TEXT + 16 * (count - 1) + 3) == (f"function_{count - 1}", 3)

        return run

    sweep(make, [5_000, 10_000, 20_000])


@pytest.mark.parametrize(("opcode", "sizes"), [
    (32, [500_000, 1_000_000, 2_000_000]),  # special opcodes: in bulk
    (1, [20_000, 40_000, 80_000]),  # DW_LNS_copy: one by one
    (0, [10_000, 20_000, 40_000]),  # file switches at one address that are not statements
])
def test_line_rows(tmp_path: Path, opcode: int, sizes: list[int]) -> None:
    # DW_LNS_copy (a statement), DW_LNS_negate_stmt, then rows of files 2 and 1 in turn
    # (DW_LNS_set_file, DW_LNS_copy), each a row gdb decides on in order.
    switches = bytes([1, 6, 4, 2, 1, 4, 1, 1, 6])

    def make(count: int) -> Callable[[], object]:
        program = line_program(count, repeated=switches) if opcode == 0 else line_program(
            count, opcode
        )
        path = str(write(tmp_path / f"lines{opcode}-{count}", build_elf([
            Sec(".text", 1, b"\xc3" * 0x400, flags=6, addr=TEXT),
            Sec(".debug_info", 1, debug_info(function_die("f", TEXT, 1 << 21)), align=1),
            Sec(".debug_abbrev", 1, ABBREVS, align=1),
            Sec(".debug_line", 1, program, align=1),
        ], e_type=2)))

        def run() -> None:
            lines: Any = source_lines(path)
            # A special opcode 32 moves one byte on before its row; the others do not.
            assert lines.starts_line(TEXT + count if opcode == 32 else TEXT)

        return run

    sweep(make, sizes)


def test_dies(tmp_path: Path) -> None:
    def make(count: int) -> Callable[[], object]:
        dies = b"".join(function_die(f"f{i}", TEXT + 16 * i, 16) for i in range(count))
        path = str(dwarf_program(tmp_path, dies, name=f"dies{count}"))

        def run() -> None:
            lines: Any = source_lines(path)
            assert [f.function for f in lines.frames(TEXT + 16 * (count - 1))] == [
                f"f{count - 1}"
            ]

        return run

    sweep(make, [1000, 2000, 4000])


# -- the rows of one function ----------------------------------------------------------------------


@cache
def _one_function(version: Version, rows: int) -> bytes:
    """A section of one function with ``rows`` rows, 4 bytes apart, their rules taking turns:
    CFA from SP at 8 or 16, from FP at 16 with FP saved at CFA-16 (2 data words)."""
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, version, section_address=SFRAME)
    function = builder.add_function(TEXT, 4 * rows + 4)
    saved = RegRule.at_cfa(-16)
    for row in range(rows):
        rule = row % 3
        function.add_row(
            4 * row, CfaRule(6 if rule == 2 else 7, 8 << (rule > 0)), saved if rule == 2 else None
        )
    return builder.to_bytes()


#: Where the section is, past the function's code.
SFRAME = 0x100000
#: Rows of the one function (V3 counts at most 65,535 FREs per function).
ROWS = [10_000, 20_000, 40_000]
VERSIONS = pytest.mark.parametrize("version", [Version.V2, Version.V3])


@VERSIONS
def test_lookup_of_one_pc_among_the_rows_of_one_function(version: Version) -> None:
    """The section opened and one PC looked up (``pysframe lookup PC``); a scan of the rows
    for each PC shows in the next test, where the PCs are as many as the rows over 40."""

    def make(count: int) -> Callable[[], object]:
        data = _one_function(version, count)

        def run() -> None:
            found = SFrameSection.from_bytes(data, SFRAME).find_row(TEXT + 4 * (count // 2) + 1)
            assert found is not None and found.row_index == count // 2

        return run

    sweep(make, ROWS)


@VERSIONS
def test_lookup_of_many_pcs_among_the_rows_of_one_function(version: Version) -> None:
    """A PC every 40 rows, one at a time (``pysframe lookup --pcs``; and in a section opened
    for a few lookups, as ``pysframe stack`` opens them) and in a batch."""

    def make(count: int) -> Callable[[], object]:
        data = _one_function(version, count)
        pcs = range(TEXT + 1, TEXT + 4 * count, 160)

        def run() -> None:
            section = SFrameSection.from_bytes(data, SFRAME)
            rows = [found.row_index for pc in pcs if (found := section.find_row(pc)) is not None]
            assert rows == list(range(0, count, 40))
            single = SectionLookup(data, SFRAME)
            found_once = [single.find_row(pc) for pc in pcs]
            assert [found.row_index for found in found_once if found is not None] == rows
            batch = SFrameSection.from_bytes(data, SFRAME).find_rows(list(pcs))
            assert batch.row_index.tolist() == rows

        return run

    sweep(make, ROWS)


@VERSIONS
@pytest.mark.parametrize("form", ["text", "json", "jsonl"])
def test_dump_of_the_rows_of_one_function(version: Version, form: str) -> None:
    """The dump's pieces, made and dropped as the command line writes them."""
    dumps: dict[str, Callable[[SFrameSection], Iterator[str | bytes]]] = {
        "text": section_chunks,
        "json": section_json_chunks,
        "jsonl": lambda section: (piece for _, piece in function_json_pieces(section)),
    }

    def make(count: int) -> Callable[[], object]:
        data = _one_function(version, count)

        def run() -> None:
            pieces = dumps[form](SFrameSection.from_bytes(data, SFRAME))
            assert sum(len(piece) for piece in pieces) > 50 * count

        return run

    sweep(make, ROWS)


@VERSIONS
@pytest.mark.parametrize("command", ["stats", "info", "compact", "check"])
def test_whole_file_commands_on_the_rows_of_one_function(
    tmp_path: Path, version: Version, command: str
) -> None:
    """stats (V2 and V3 sizes, the compacted size, word sizes), info, compact --dry-run,
    check."""

    def make(count: int) -> Callable[[], object]:
        sframe = _one_function(version, count)
        elf = build_elf(
            [
                Sec(".text", 1, b"\xc3" * (4 * count + 4), flags=6, addr=TEXT, align=16),
                Sec(".sframe", 1, sframe, flags=2, addr=SFRAME),
            ],
            e_type=3,
            segments=[Seg(1, ".sframe"), Seg(1, ".text", flags=5)],
        )
        path = str(write(tmp_path / f"rows{count}", elf))

        def run() -> None:
            if command == "stats":
                assert file_stats(path).rows == count
            elif command == "info":
                assert section_info(path).rows == count
            elif command == "compact":  # compact --dry-run
                compacted = compact_file(path).compacted
                assert compacted is not None and compacted.functions == 1
            else:
                with ElfReader.open(path) as image:
                    assert validate_elf(image) == []

        return run

    sweep(make, ROWS)


# -- CFI -----------------------------------------------------------------------------------------


def _one_long_fde(count: int, every: int = 1) -> bytes:
    """``.eh_frame`` (at 0x1000) of one FDE whose program advances ``count`` times by one byte
    (DW_CFA_advance_loc 1), the CFA offset changing at every ``every``-th (DW_CFA_def_cfa_offset
    24 or 16): a row every ``every`` bytes of its ``count + 16`` bytes of code."""
    program = b"".join(
        b"\x41\x0e" + (b"\x10" if k // every % 2 else b"\x18") if k % every == 0 else b"\x41"
        for k in range(count)
    )
    return section((0x2000, count + 16, program))


@pytest.mark.parametrize(("every", "sizes"), [
    (1, [80_000, 160_000, 320_000]),  # more rows than an FDE counts: left out
    (4, [40_000, 80_000, 160_000]),  # 10,000 to 40,000 rows: written
])
def test_advances_in_one_fde_generated(every: int, sizes: list[int]) -> None:
    """The function is written, or left out after every instruction is read (an unreadable
    one further on would be the reason)."""

    def make(count: int) -> Callable[[], object]:
        data = _one_long_fde(count, every)

        def run() -> None:
            result = generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
            if every == 1:
                assert [s.reason for s in result.skipped] == [TOO_MANY_FRES]
            else:
                # The CIE's row, one after each change, and the last from the last advance.
                assert result.section.num_rows == count // every + 2

        return run

    sweep(make, sizes)


def test_advances_in_one_fde_interpreted() -> None:
    def make(count: int) -> Callable[[], object]:
        data = _one_long_fde(count)

        def run() -> None:
            table = interpret_cfi(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
            # The CIE's row at 0, then one at each byte the advances reach.
            assert table.row_begin.tolist() == list(range(count + 1))

        return run

    sweep(make, [50_000, 100_000, 200_000])
