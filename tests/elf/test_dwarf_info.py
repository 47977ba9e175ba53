"""The DWARF readers of :mod:`pysframe.elf.dwarf_info` and
:func:`pysframe.elf.line_program.read_line_program` against pyelftools' (an independent
reader), on programs built here with ``gcc -g`` (DWARF 5, and DWARF 4 with ``-gdwarf-4``,
C and C++) and on libc's separate debug file where it is installed (compressed sections):

* every unit's header, every DIE's offset, tag, end and attribute values;
* ``.debug_aranges``, and the range list of every DIE with ``DW_AT_ranges``;
* every line program's header (directories and files) and rows, decoded in bulk and one
  opcode at a time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from elftools.dwarf.enums import ENUM_DW_AT, ENUM_DW_TAG
from elftools.elf.elffile import ELFFile

from conftest import require
from pysframe.elf.dwarf_info import DebugSections, DieReader, Units
from pysframe.elf.dwarf_ranges import address_ranges, range_list
from pysframe.elf.line_program import (
    line_rows,
    read_line_program,
    read_uleb,
)
from pysframe.elf.reader import ElfReader

DATA = Path(__file__).parent.parent / "data" / "perf"
#: pyelftools' names of tags and attributes, by number.
_TAGS = {number: name for name, number in ENUM_DW_TAG.items() if isinstance(name, str)}
_ATTRIBUTES = {number: name for name, number in ENUM_DW_AT.items() if isinstance(name, str)}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Programs built with -g (DWARF 5 and 4, C and C++), and libc's debug file if any."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        require("gcc", "gcc is not installed")
    out = tmp_path_factory.mktemp("dwarf")
    built = []
    for name, compiler, sources, flags in (
        ("c5", "gcc", ["inlined.c", "inlinedlib.c"], ["-g"]),
        ("c4", "gcc", ["inlinedlib.c"], ["-gdwarf-4", "-fPIC", "-shared"]),
        ("cxx5", "g++", ["profiledcxx.cc"], ["-g", "-pthread"]),
    ):
        target = out / name
        done = subprocess.run(
            [compiler, "-O2", *flags, "-o", str(target), *(str(DATA / s) for s in sources)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[:300]
        built.append(target)
    with ElfReader.open("/lib/x86_64-linux-gnu/libc.so.6") as libc:
        build_id = libc.build_id()
    if build_id:
        hexed = build_id.hex()
        debug = Path(f"/usr/lib/debug/.build-id/{hexed[:2]}/{hexed[2:]}.debug")
        if debug.exists():
            built.append(debug)
    return built


def _plain(value: object, cu_offset: int, form: str) -> object:
    """A pyelftools attribute value as :class:`DieReader` gives it."""
    if form in ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8",
                "DW_FORM_ref_udata"):  # fmt: skip
        assert isinstance(value, int)
        return cu_offset + value
    if isinstance(value, bytes) and form not in ("DW_FORM_block1", "DW_FORM_block2",
                                                 "DW_FORM_block4", "DW_FORM_block",
                                                 "DW_FORM_exprloc", "DW_FORM_data16"):  # fmt: skip
        return os.fsdecode(value)
    if isinstance(value, list):  # blocks as lists of bytes
        return bytes(value)
    if isinstance(value, bool):
        return int(value)
    return value


def test_dies_are_pyelftools(files: list[Path]) -> None:
    for path in files:
        with open(path, "rb") as stream, ElfReader.open(str(path)) as reader:
            dwarf = ELFFile(stream).get_dwarf_info()
            sections = DebugSections(reader)
            units = Units(sections)
            headers = {header.offset: header for header in units.headers}
            assert units.error is None, path
            compared = 0
            for number, cu in enumerate(dwarf.iter_CUs()):
                if number >= 40 and "debug" in path.name:  # libc: its first 40 units
                    break
                header = headers[cu.cu_offset]
                assert header.version == cu.header["version"]
                assert header.end == cu.cu_offset + cu.size
                assert header.die_offset == cu.get_top_DIE().offset
                dies = DieReader(sections, header)
                top, values, _ = dies.attributes(header.die_offset)
                assert top is not None
                dies.read_bases(values)
                for die in cu.iter_DIEs():
                    abbrev, values, after = dies.attributes(die.offset)
                    if die.is_null():
                        assert abbrev is None and after == die.offset + 1
                        continue
                    assert abbrev is not None
                    assert (_TAGS.get(abbrev.tag), after) == (die.tag, die.offset + die.size)
                    _, first = read_uleb(dies.info, die.offset, len(dies.info))
                    assert dies.skip(abbrev, first) == after
                    for name, attribute in die.attributes.items():
                        if attribute.form.startswith("DW_FORM_GNU"):  # dwz's: not followed
                            continue
                        found = [v for key, v in values.items() if _ATTRIBUTES.get(key) == name]
                        assert found, (path, hex(die.offset), name)
                        expected = _plain(attribute.value, cu.cu_offset, attribute.form)
                        assert found[0][1] == expected, (path, hex(die.offset), name)
                    compared += 1
            assert compared > 30, path


def test_aranges_are_pyelftools(files: list[Path]) -> None:
    for path in files:
        with open(path, "rb") as stream, ElfReader.open(str(path)) as reader:
            aranges = ELFFile(stream).get_dwarf_info().get_aranges()
            ours = address_ranges(DebugSections(reader).get(".debug_aranges"))
            if aranges is None:
                assert ours == []
                continue
            theirs = [(entry.begin_addr, entry.begin_addr + entry.length, entry.info_offset)
                      for entry in aranges.entries if entry.length]  # fmt: skip
            assert sorted(ours) == sorted(theirs)


def test_range_lists_are_pyelftools(files: list[Path]) -> None:
    """Each DIE's DW_AT_ranges (DWARF 4 .debug_ranges, DWARF 5 .debug_rnglists), from the
    unit's DW_AT_low_pc, as pyelftools reads the list."""
    for path in files:
        with open(path, "rb") as stream, ElfReader.open(str(path)) as reader:
            dwarf = ELFFile(stream).get_dwarf_info()
            lists = dwarf.range_lists()
            sections = DebugSections(reader)
            units = Units(sections)
            headers = {header.offset: header for header in units.headers}
            assert units.error is None, path
            compared = 0
            for number, cu in enumerate(dwarf.iter_CUs()):
                if number >= 40 and "debug" in path.name:
                    break
                dies = DieReader(sections, headers[cu.cu_offset])
                low = cu.get_top_DIE().attributes.get("DW_AT_low_pc")
                base = 0 if low is None else low.value
                for die in cu.iter_DIEs():
                    if "DW_AT_ranges" not in die.attributes:
                        continue
                    offset = die.attributes["DW_AT_ranges"].value
                    expected, current = [], base
                    for entry in lists.get_range_list_at_offset(offset, cu=cu):
                        if hasattr(entry, "base_address"):
                            current = entry.base_address
                        else:
                            add = 0 if entry.is_absolute else current
                            expected.append((add + entry.begin_offset, add + entry.end_offset))
                    assert range_list(dies, offset, base) == expected, (path, hex(die.offset))
                    compared += 1
            assert compared > 3, path


def _strings(sections: DebugSections) -> Callable[[int, int], str]:
    def string(form: int, offset: int) -> str:
        data = sections.get(".debug_line_str" if form == 0x1F else ".debug_str")
        return os.fsdecode(data[offset : data.index(b"\0", offset)])

    return string


def test_line_programs_are_pyelftools(files: list[Path]) -> None:
    for path in files:
        with open(path, "rb") as stream, ElfReader.open(str(path)) as reader:
            dwarf = ELFFile(stream).get_dwarf_info()
            sections = DebugSections(reader)
            string = _strings(sections)
            for number, cu in enumerate(dwarf.iter_CUs()):
                if number >= 40:
                    break
                program = dwarf.line_program_for_CU(cu)
                if program is None:
                    continue
                offset = cu.get_top_DIE().attributes["DW_AT_stmt_list"].value
                ours = read_line_program(
                    sections.get(".debug_line"), offset, address_size=cu.header["address_size"],
                    big_endian=False, string=string,
                )
                header = program.header
                assert ours.version == header["version"]
                assert ours.directories == [os.fsdecode(d) for d in header["include_directory"]]
                assert ours.files == [(os.fsdecode(f.name), f.dir_index)
                                      for f in header["file_entry"]]  # fmt: skip
                states = [entry.state for entry in program.get_entries() if entry.state]
                rows = line_rows(ours.code, ours.header)
                assert rows.addresses.tolist() == [state.address for state in states]
                assert rows.files.tolist() == [state.file for state in states]
                assert rows.lines.tolist() == [state.line for state in states]
                assert rows.ends.tolist() == [state.end_sequence for state in states]
