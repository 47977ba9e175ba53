"""The one DWARF reader (:mod:`pysframe.elf.dwarf_info`, :mod:`pysframe.elf.dwarf_ranges`)
on units built here byte by byte:

* DWARF 5's indexed forms as clang writes them (``DW_FORM_strx1``, ``DW_FORM_addrx``,
  ``DW_FORM_rnglistx``, the bases in the unit's own DIE after a name that needs one, range
  lists of ``DW_RLE_base_addressx``, ``offset_pair`` and ``startx_length``): the values
  against pyelftools', the frames of gdb's rules against gdb, BFD's against ``addr2line``;
* damage: sibling pointers back, a DIE reached twice, forms and lists that run past their
  section, counts far larger than their section, nesting a million deep.  Each costs an
  ``ElfError`` or a shorter walk, quickly, never an exception of another kind, an endless walk
  or an allocation the size of a count.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import require_program
from elf_build import Sec, build_elf
from pysframe.elf.addr2line import Addr2Line
from pysframe.elf.dwarf_info import DebugSections, DieReader, DieTree, Units
from pysframe.elf.dwarf_lines import source_lines
from pysframe.elf.dwarf_ranges import range_list
from pysframe.elf.reader import ElfReader
from pysframe.errors import ElfError
from test_hostile_inputs import ABBREVS, function_die
from test_hostile_inputs import TEXT as HOSTILE_TEXT
from test_hostile_inputs import debug_info as dwarf4_info

TEXT = 0x401000
#: PCs in: outer's first range (line 10); inner, inlined into outer at a.c:42 (line 20);
#: the gap between outer's ranges (line 30, no function); outer's second range (line 30).
PCS = [TEXT + 0x04, TEXT + 0x14, TEXT + 0x24, TEXT + 0x34]
DW_FORM_SEC_OFFSET, DW_FORM_RNGLISTX = 0x17, 0x23


def uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def unit(body: bytes) -> bytes:
    """``body`` after its 32-bit unit_length (DWARF 5 7.4)."""
    return struct.pack("<I", len(body)) + body


def abbreviations(ranges_form: int) -> bytes:
    """.debug_abbrev (DWARF 5 7.5.3): code, tag, children, then (attribute, form) pairs."""
    return bytes([
        # 1: DW_TAG_compile_unit, children: DW_AT_language data2, DW_AT_name strx1 (before
        # the base it needs), DW_AT_str_offsets_base sec_offset, DW_AT_stmt_list sec_offset,
        # DW_AT_low_pc addrx, DW_AT_high_pc data4, DW_AT_addr_base and DW_AT_rnglists_base
        # sec_offset.
        1, 0x11, 1, 0x13, 0x05, 0x03, 0x25, 0x72, 0x17, 0x10, 0x17, 0x11, 0x1B, 0x12, 0x06,
        0x73, 0x17, 0x74, 0x17, 0, 0,
        # 2: DW_TAG_subprogram, children: DW_AT_name strx1, DW_AT_ranges (rnglistx or
        # sec_offset).
        2, 0x2E, 1, 0x03, 0x25, 0x55, ranges_form, 0, 0,
        # 3: DW_TAG_inlined_subroutine: DW_AT_abstract_origin ref4, DW_AT_low_pc addrx,
        # DW_AT_high_pc data1, DW_AT_call_file data1, DW_AT_call_line data1.
        3, 0x1D, 0, 0x31, 0x13, 0x11, 0x1B, 0x12, 0x0B, 0x58, 0x0B, 0x59, 0x0B, 0, 0,
        # 4: DW_TAG_subprogram: DW_AT_name strx1, DW_AT_inline data1.
        4, 0x2E, 0, 0x03, 0x25, 0x20, 0x0B, 0, 0,
        0,
    ])  # fmt: skip


def debug_info(ranges_form: int) -> bytes:
    """One DWARF 5 unit: outer (ranges from the list), inner inlined into it at a.c:42 over
    [TEXT + 0x10, TEXT + 0x20), and inner's abstract instance."""
    header = struct.pack("<HBBI", 5, 1, 8, 0)  # version 5, DW_UT_compile, 8-byte addresses
    cu = (bytes([1]) + struct.pack("<H", 0x1D)  # C11
          + bytes([0])  # name: string 0 ("a.c")
          + struct.pack("<II", 8, 0)  # str_offsets_base 8 (after its header), stmt_list 0
          + uleb(0)  # low_pc: address 0 (TEXT)
          + struct.pack("<III", 0x40, 8, 12))  # high_pc 0x40, addr_base 8, rnglists_base 12
    ranges = uleb(0) if ranges_form == DW_FORM_RNGLISTX else struct.pack("<I", 16)
    outer = bytes([2, 1]) + ranges  # name: string 1 ("outer")
    inner_at = 12 + len(cu) + len(outer) + 9 + 1  # after the inlined call and a null
    inlined = (bytes([3]) + struct.pack("<I", inner_at)
               + uleb(1) + bytes([0x10, 1, 42]))  # low_pc: address 1; size; a.c; line 42
    inner = bytes([4, 2, 1])  # name: string 2 ("inner"), DW_INL_inlined
    return unit(header + cu + outer + inlined + b"\0" + inner + b"\0")


def line_program() -> bytes:
    """A DWARF 5 line program (6.2.4): directory 0 "/src", files 0 and 1 "a.c" in it; rows
    at TEXT (line 10), + 0x10 (20), + 0x20 (30), the sequence ending at + 0x40."""
    header = bytes([1, 1, 1, 0xFB, 14, 13])  # min_inst_length, max_ops, is_stmt, -5, 14, 13
    header += bytes([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])  # standard_opcode_lengths
    header += bytes([1, 1, 0x08, 1]) + b"/src\0"  # (DW_LNCT_path, string); one directory
    header += bytes([2, 1, 0x08, 2, 0x0F, 2])  # (path, string), (directory_index, udata); 2
    header += b"a.c\0" + uleb(0) + b"a.c\0" + uleb(0)
    code = (b"\0\x09\x02" + struct.pack("<Q", TEXT)  # DW_LNE_set_address
            + b"\x03" + uleb(9) + b"\x01"  # advance_line 9 (to 10), copy
            + b"\x02" + uleb(0x10) + b"\x03" + uleb(10) + b"\x01"  # advance_pc, line 20
            + b"\x02" + uleb(0x10) + b"\x03" + uleb(10) + b"\x01"  # line 30
            + b"\x02" + uleb(0x20) + b"\0\x01\x01")  # DW_LNE_end_sequence at + 0x40
    return unit(struct.pack("<HBBI", 5, 8, 0, len(header)) + header + code)


def clang_style(tmp_path: Path, ranges_form: int) -> Path:
    """An executable with the unit above and the tables its indexed forms read."""
    strings = b"\0a.c\0outer\0inner\0"
    str_offsets = unit(struct.pack("<HH", 5, 0) + struct.pack("<III", 1, 5, 11))
    addresses = unit(struct.pack("<HBB", 5, 8, 0)  # version, address_size, segment size
                     + struct.pack("<QQQ", TEXT, TEXT + 0x10, TEXT + 0x30))
    rnglists = unit(struct.pack("<HBBI", 5, 8, 0, 1)  # one offset in the table
                    + struct.pack("<I", 4)  # list 0 at 12 + 4 (the offset table's end)
                    + bytes([1]) + uleb(0)  # DW_RLE_base_addressx: address 0 (TEXT)
                    + bytes([4]) + uleb(0) + uleb(0x20)  # DW_RLE_offset_pair
                    + bytes([3]) + uleb(2) + uleb(0x10)  # DW_RLE_startx_length: address 2
                    + bytes([0]))  # DW_RLE_end_of_list
    path = tmp_path / f"clang-style-{ranges_form:#x}"
    path.write_bytes(build_elf([
        Sec(".text", 1, b"\x90" * 0x40, flags=6, addr=TEXT),
        Sec(".debug_info", 1, debug_info(ranges_form), align=1),
        Sec(".debug_abbrev", 1, abbreviations(ranges_form), align=1),
        Sec(".debug_str", 1, strings, align=1),
        Sec(".debug_str_offsets", 1, str_offsets, align=1),
        Sec(".debug_addr", 1, addresses, align=1),
        Sec(".debug_rnglists", 1, rnglists, align=1),
        Sec(".debug_line", 1, line_program(), align=1),
    ], e_type=2))  # fmt: skip
    return path


FORMS = pytest.mark.parametrize("ranges_form", [DW_FORM_RNGLISTX, DW_FORM_SEC_OFFSET],
                                ids=["rnglistx", "sec_offset"])  # fmt: skip


def _pyelftools(path: Path) -> Any:
    from elftools.elf.elffile import ELFFile

    return ELFFile(io.BytesIO(path.read_bytes())).get_dwarf_info()


@FORMS
def test_indexed_forms_are_pyelftools(tmp_path: Path, ranges_form: int) -> None:
    """Every attribute value, and each DIE's range list, as pyelftools reads them."""
    from elftools.dwarf.enums import ENUM_DW_AT

    path = clang_style(tmp_path, ranges_form)
    names = {number: name for name, number in ENUM_DW_AT.items() if isinstance(name, str)}
    dwarf = _pyelftools(path)
    [cu] = dwarf.iter_CUs()
    with ElfReader.open(str(path)) as image:
        units = Units(DebugSections.read(image))
    [header] = units.headers
    reader = units.reader(header)
    ranges_seen = 0
    for die in cu.iter_DIEs():
        if die.is_null():
            continue
        _, values, _ = reader.attributes(die.offset)
        if die.offset == header.die_offset:
            values = reader.unit_die()[1]
        ours = {names[key]: value for key, (_, value) in values.items()}
        theirs = {key: (die.cu.cu_offset + a.value if a.form == "DW_FORM_ref4" else
                        a.value.decode() if isinstance(a.value, bytes) else a.value)
                  for key, a in die.attributes.items()}  # fmt: skip
        assert ours == theirs
        if "DW_AT_ranges" in theirs:
            entries = dwarf.range_lists().get_range_list_at_offset(theirs["DW_AT_ranges"], cu)
            expected, base = [], TEXT  # the unit's DW_AT_low_pc
            for entry in entries:
                if hasattr(entry, "base_address"):
                    base = entry.base_address
                else:
                    add = 0 if entry.is_absolute else base
                    expected.append((add + entry.begin_offset, add + entry.end_offset))
            assert range_list(reader, ours["DW_AT_ranges"], TEXT) == expected
            assert expected == [(TEXT, TEXT + 0x20), (TEXT + 0x30, TEXT + 0x40)]
            ranges_seen += 1
    assert ranges_seen == 1


def _gdb(
    gdb: str, path: Path, pcs: list[int] = PCS
) -> list[tuple[list[str], str | None, int | None]]:
    """For each of ``pcs``: the functions of gdb's blocks there, innermost first, and its line."""
    script = path.parent / "blocks.py"
    script.write_text(
        "import gdb\n"
        f"for pc in {pcs!r}:\n"
        "    names, block = [], gdb.block_for_pc(pc)\n"
        "    while block is not None:\n"
        "        if block.function is not None:\n"
        "            names.append(block.function.name)\n"
        "        block = block.superblock\n"
        "    sal = gdb.find_pc_line(pc)\n"
        "    where = f'{sal.symtab.fullname()}\\t{sal.line}' if sal.symtab else '-\\t-'\n"
        "    print('PC', ','.join(names) or '-', where, sep='\\t')\n"
    )
    output = subprocess.run([gdb, "-q", "-batch", "-nx", str(path), "-x", str(script)],
                            capture_output=True, text=True, check=True, timeout=120).stdout
    out = []
    for line in output.splitlines():
        if line.startswith("PC\t"):
            _, names, file, number = line.split("\t")
            out.append(([] if names == "-" else names.split(","),
                        None if file == "-" else file, None if number == "-" else int(number)))
    assert len(out) == len(pcs), output
    return out


@FORMS
def test_functions_and_lines_are_gdbs(tmp_path: Path, ranges_form: int) -> None:
    """gdb's rules (pysframe.elf.dwarf_lines) name the functions gdb's blocks name at each
    PC, with the line gdb finds there (where a function holds it: no frames without one)."""
    gdb = require_program("gdb")
    path = clang_style(tmp_path, ranges_form)
    lines = source_lines(str(path))
    assert lines is not None
    theirs = _gdb(gdb, path)
    for pc, (names, file, line) in zip(PCS, theirs, strict=True):
        frames = lines.frames(pc)
        assert [frame.function for frame in frames] == names
        if frames:
            assert (frames[0].file, frames[0].line) == (file, line)
    assert [frame.line for frame in lines.frames(PCS[1])] == [20, 42]  # inner, its call
    assert theirs[2] == ([], "/src/a.c", 30) and lines.problems == []


@FORMS
def test_answers_are_addr2lines(tmp_path: Path, ranges_form: int) -> None:
    """BFD's rules (pysframe.elf.addr2line) answer as binutils' ``addr2line -f -i``: BFD 2.40
    reads no DW_FORM_rnglistx (outer has no ranges: its PCs have a line, no function), and a
    range list with an entry that indexes ``.debug_addr`` fails the whole unit (nothing)."""
    require_program("addr2line", "binutils")
    from test_perf_inline import _addr2line

    path = clang_style(tmp_path, ranges_form)
    with Addr2Line(str(path)) as ours:
        answers = [[record.text() for record in ours.records(pc)] for pc in PCS]
        problems = ours.problems
    assert answers == _addr2line(str(path), PCS)
    if ranges_form == DW_FORM_SEC_OFFSET:
        assert answers == [[], [], [], []] and len(problems) == 1
    else:
        assert answers[1] == ["inner\n/src/a.c:20\n", "outer\n/src/a.c:42\n"]


# -- damage ----------------------------------------------------------------------------------

#: .debug_abbrev for the trees below: 1 a unit (DW_TAG_compile_unit, children, no attribute);
#: 2 a subprogram with children and DW_AT_sibling ref4; 3 a subprogram without children or
#: attributes; 4 a lexical block with children; 5 a variable with DW_AT_location block4.
TREE_ABBREVS = bytes([
    1, 0x11, 1, 0, 0,
    2, 0x2E, 1, 0x01, 0x13, 0, 0,
    3, 0x2E, 0, 0, 0,
    4, 0x0B, 1, 0, 0,
    5, 0x34, 0, 0x02, 0x04, 0, 0,
    0,
])  # fmt: skip
#: The first DIE after the unit DIE: an 11-byte DWARF 4 header, then the unit's 1-byte DIE.
FIRST = 12


def tree_of(dies: bytes) -> tuple[DieTree, list[tuple[str, int]]]:
    """A DieTree over one DWARF 4 unit holding the unit DIE, then ``dies``, then a null;
    and the warnings it gives."""
    body = struct.pack("<HIB", 4, 0, 8) + bytes([1]) + dies + b"\0"
    path_data = build_elf([
        Sec(".debug_info", 1, unit(body), align=1),
        Sec(".debug_abbrev", 1, TREE_ABBREVS, align=1),
    ])  # fmt: skip
    with ElfReader.from_bytes("tree", path_data) as image:
        sections = DebugSections.read(image)
    units = Units(sections)
    [header] = units.headers
    warnings: list[tuple[str, int]] = []
    tree = DieTree(units.reader(header), lambda message, at: warnings.append((message, at)))
    return tree, warnings


@pytest.mark.parametrize("target", ["itself", "back", "out"])
def test_a_sibling_that_does_not_move_forward_is_not_followed(target: str) -> None:
    sibling = {"itself": FIRST, "back": 11, "out": 1 << 20}[target]
    # A subprogram whose sibling points there, its child, its null; then a subprogram.
    dies = bytes([2]) + struct.pack("<I", sibling) + bytes([3, 0]) + bytes([3])
    tree, warnings = tree_of(dies)
    assert tree.children(11) == [FIRST, FIRST + 7]
    assert tree.children(FIRST) == [FIRST + 5]
    assert tree.parents[FIRST + 5] == FIRST
    assert warnings == [(f"DW_AT_sibling points to {sibling:#x}, not after the DIE", FIRST)]


def test_a_die_reached_twice_stops_the_walk() -> None:
    """The first subprogram's sibling skips into the second one's subtree: its child is
    listed among the unit's children, and reached again below the second subprogram."""
    second = FIRST + 6
    dies = (bytes([2]) + struct.pack("<I", second + 5)  # sibling: the second one's child
            + bytes([0])  # no child: its null
            + bytes([2]) + struct.pack("<I", second + 7)  # sibling: after its subtree
            + bytes([3, 0]))  # its child, its null
    tree, warnings = tree_of(dies)
    walked = list(tree.walk(tree.children(11), lambda offset: True))
    assert walked == [FIRST, second + 5]
    walked = list(tree.walk([second, second + 5], lambda offset: True))
    assert walked == [second, second + 5]
    assert warnings == [("DIE reached twice: the walk stops there", second + 5)]


def test_deep_nesting_is_walked_without_recursion() -> None:
    """300,000 lexical blocks each inside the last, never closed: the subtree scan of the
    first ends at the unit's end, in one pass (no recursion, no scan twice)."""
    depth = 300_000
    tree, warnings = tree_of(bytes([4]) * depth + bytes([3]))
    start = time.monotonic()
    assert tree.children(11) == [FIRST]
    for level in (depth - 1, 1, depth // 2):
        below = tree.children(FIRST + level)
        assert below == [FIRST + level + 1]
    assert time.monotonic() - start < 20 and warnings == []


@pytest.mark.parametrize(
    "die",
    [
        bytes([5]) + struct.pack("<I", 0xFFFF_FFF0),  # a block of 4 GB
        bytes([5]) + b"\x01",  # a block length cut by the section's end
        bytes([9]),  # an abbreviation code the table has not
        b"\x80" * 100_000,  # a code of 100,000 bytes, never ended
    ],
    ids=["huge-block", "cut-length", "unknown-code", "endless-leb"],
)
def test_forms_past_the_end_raise_elf_errors(die: bytes) -> None:
    """The DIE after the unit DIE reads past its section: ElfError from each way in, and
    no allocation of the size the data claims."""
    import tracemalloc

    body = struct.pack("<HIB", 4, 0, 8) + bytes([1]) + die
    data = build_elf([Sec(".debug_info", 1, unit(body)[: 4 + len(body)], align=1),
                      Sec(".debug_abbrev", 1, TREE_ABBREVS, align=1)])  # fmt: skip
    with ElfReader.from_bytes("damaged", data) as image:
        sections = DebugSections.read(image)
    header = Units(sections).headers[0]
    reader = DieReader(sections, header)
    tree = DieTree(reader, lambda message, at: None)
    tracemalloc.start()
    try:
        for read in (lambda: reader.attributes(FIRST), lambda: tree.children(11)):
            with pytest.raises(ElfError):
                read()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_range_lists_that_do_not_end_raise_elf_errors(tmp_path: Path) -> None:
    """A list of 100,000 offset pairs with no end, an entry of an unknown kind, a list past
    its section, a DWARF 4 list without its (0, 0): ElfError, never a read past."""
    header = Units(_sections(tmp_path, {})).headers[0]
    for rnglists in (bytes([4, 0, 1]) * 100_000, bytes([8, 0]), b""):
        reader = DieReader(_sections(tmp_path, {".debug_rnglists": rnglists}), header)
        for offset in (0, len(rnglists) + 5):
            with pytest.raises(ElfError):
                range_list(reader, offset, TEXT)
    version4 = dataclasses.replace(header, version=4)
    pairs = struct.pack("<QQ", 0x10, 0x20) * 1000
    with pytest.raises(ElfError):
        range_list(DieReader(_sections(tmp_path, {".debug_ranges": pairs}), version4), 0, TEXT)
    ended = DieReader(_sections(tmp_path, {".debug_ranges": pairs + bytes(16)}), version4)
    assert range_list(ended, 0, TEXT)[-1] == (TEXT + 0x10, TEXT + 0x20)


def _sections(tmp_path: Path, replaced: dict[str, bytes]) -> DebugSections:
    """The sections of the rnglistx program, some ``replaced``."""
    with ElfReader.open(str(clang_style(tmp_path, DW_FORM_RNGLISTX))) as image:
        original = {name: image.section_data(section) for name in (".debug_info",
                    ".debug_abbrev", ".debug_addr") if (section := image.section(name))}
    data = build_elf([Sec(name, 1, content, align=1)
                      for name, content in {**original, **replaced}.items()])  # fmt: skip
    with ElfReader.from_bytes("replaced", data) as image:
        return DebugSections.read(image)


# -- which rows gdb records --------------------------------------------------------------------


def statement_switches() -> bytes:
    """A DWARF 4 line program (6.2.4: min_inst_length 1, max_ops 1, default_is_stmt 1,
    line_base -5, line_range 14, opcode_base 13; files 1 "a.c" and 2 "b.h"): libc's
    ``new_do_write`` has the first pattern, an inlined header's statement row and, at the same
    address, a row of the caller's file that is not a statement."""
    header = bytes([1, 1, 1, 0xFB, 14, 13, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])
    header += b"\0" + b"a.c\0\0\0\0" + b"b.h\0\0\0\0" + b"\0"  # no directory; two files
    set_file, advance_pc, advance_line, copy, negate = 4, 2, 3, 1, 6

    def row(line: int, *before: int) -> bytes:  # opcodes, then the line, then DW_LNS_copy
        return bytes(before) + bytes([advance_line]) + sleb(line) + bytes([copy])

    code = (b"\0\x09\x02" + struct.pack("<Q", HOSTILE_TEXT)  # DW_LNE_set_address
            + row(9)  # +0x00 a.c:10, statement
            + bytes([advance_pc, 0x10]) + row(937, set_file, 2)  # +0x10 b.h:947, statement
            + row(-499, negate, set_file, 1)  # +0x10 a.c:448, not: gdb drops it
            + bytes([advance_pc, 0x10]) + row(1)  # +0x20 a.c:449, not, at a new address
            + bytes([advance_pc, 0x08]) + row(1)  # +0x28 a.c:450, not
            + row(-445, set_file, 2)  # +0x28 b.h:5, not, no statement at the address: kept
            + bytes([advance_pc, 0x08]) + row(1, negate)  # +0x30 b.h:6, statement
            + row(1, negate)  # +0x30 b.h:7, not: gives way to the statement row
            + bytes([advance_pc, 0x08]) + row(-7)  # +0x38 line 0: b.h:6 goes on
            + bytes([advance_pc, 0x08]) + b"\0\x01\x01")  # DW_LNE_end_sequence at +0x40
    return unit(struct.pack("<HI", 4, len(header)) + header + code)


def sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40):
            return bytes(out + bytes([byte]))
        out.append(byte | 0x80)


def test_rows_gdb_drops_when_a_file_switch_is_not_a_statement(tmp_path: Path) -> None:
    """At each PC of a function over the program above, the line gdb's ``find_pc_line``
    gives: gdb records rows as ``lnp_state_machine::record_line`` decides (no line 0, no file
    switch that is not a statement after a statement at one address), takes the last at or
    below the PC, and prefers a statement row at its address (``find_pc_sect_line``)."""
    gdb = require_program("gdb")
    path = tmp_path / "switches"
    path.write_bytes(build_elf([
        Sec(".text", 1, b"\x90" * 0x40, flags=6, addr=HOSTILE_TEXT),
        Sec(".debug_info", 1, dwarf4_info(function_die("f", HOSTILE_TEXT, 0x40)), align=1),
        Sec(".debug_abbrev", 1, ABBREVS, align=1),
        Sec(".debug_line", 1, statement_switches(), align=1),
    ], e_type=2))  # fmt: skip
    pcs = [HOSTILE_TEXT + offset for offset in (0x04, 0x14, 0x24, 0x2C, 0x34, 0x3C)]
    lines = source_lines(str(path))
    assert lines is not None
    ours = [(frames[0].file, frames[0].line) for frames in map(lines.frames, pcs)]
    theirs = [(file and Path(file).name, line) for _, file, line in _gdb(gdb, path, pcs)]
    assert ours == theirs
    assert ours == [("a.c", 10), ("b.h", 947), ("a.c", 449), ("b.h", 5), ("b.h", 6), ("b.h", 6)]
