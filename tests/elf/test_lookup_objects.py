"""``pysframe lookup`` in relocatable objects, through the command line, against
``objdump --sframe`` 2.47 of the object.

An object's PCs are offsets in its code sections (each at address 0), as ``nm`` gives its
symbols and objdump 2.47 the function starts of GNU as' V3 sections.  Checked at every byte of
every function, by symbol (``NAME+OFFSET``) and, where one code section holds the offset, by
number:

* V3 objects of GNU as 2.47: the row objdump 2.47 prints for the byte;
* V1 objects of the system's ``gcc -c -Wa,--gsframe`` (GNU as 2.40): objdump 2.47 reads no V1,
  so the truth is its dump of the V3 object GNU as 2.47 makes of the same assembly, whose code
  is checked to be the same bytes;
* V2 objects of GNU as 2.44 (the corpus): objdump 2.47 shows each start as relocated, relative
  to its own FDE field (GNU as up to 2.44 writes ``func - .`` without FDE_FUNC_START_PCREL), so
  the truth is its dump with each start plus its field's offset (a 28-byte header, then 20
  bytes per FDE), which the object's function symbols confirm.

A number that functions of several code sections hold is refused with one line naming the
sections (exit 1); the section's name then tells them apart (``.text.f+0x4``).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile

from conftest import CORPUS, require_program
from libsframe_ref import reference_tool
from pysframe.cli import main
from sframe_text import TextFunction, TextRow, cfa_cell, parse_dump, reg_cell

#: Functions of different sizes (told apart by size where all start at 0), with frames.
SOURCE = r"""
int lib_counter;
int lib_add(int a, int b) { return a + b + lib_counter; }
static int helper(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }
int lib_mul(int a, int b) { return helper(a) * b + 1; }
unsigned lib_hash(const char *s) {
    unsigned h = 5381;
    while (*s) h = h * 33 + (unsigned char)*s++;
    return h ^ (h >> 7);
}
int lib_frame(int n) {
    volatile char buf[200];
    buf[n & 7] = (char)n;
    return buf[3] + lib_add(n, 2);
}
"""


def _version(path: Path) -> int:
    with open(path, "rb") as file:
        section = ELFFile(file).get_section_by_name(".sframe")
        assert section is not None, path
        return int(section.data()[2])


def _text(path: Path) -> dict[str, bytes]:
    """The contents of the object's code sections, by name."""
    with open(path, "rb") as file:
        elf = ELFFile(file)
        return {
            s.name: s.data()
            for s in elf.iter_sections()
            if s["sh_flags"] & 0x4 and s["sh_type"] == "SHT_PROGBITS"
        }


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """V1 (system gcc and as) and V3 (GNU as 2.47) objects of the same assembly, with one
    .text and with a section per function; the V3 ones' objdump 2.47 dumps beside them."""
    gcc = require_program("gcc")
    gas = reference_tool("GAS")
    objdump = reference_tool("OBJDUMP")
    work = tmp_path_factory.mktemp("lookup-objects")
    (work / "lib.c").write_text(SOURCE)
    built = {}
    for name, options in (("lib", []), ("sections", ["-ffunction-sections"])):
        v1, v3, assembly = work / f"{name}-v1.o", work / f"{name}-v3.o", work / f"{name}.s"
        flags = ["-O0", *options]
        subprocess.run([gcc, *flags, "-c", "-Wa,--gsframe", str(work / "lib.c"), "-o", str(v1)],
                       check=True)  # fmt: skip
        subprocess.run([gcc, *flags, "-S", str(work / "lib.c"), "-o", str(assembly)], check=True)
        subprocess.run([gas, "--gsframe", str(assembly), "-o", str(v3)], check=True)
        if _version(v1) != 1:
            pytest.skip("the system's assembler does not write SFrame V1")
        assert _version(v3) == 3
        assert _text(v1) == _text(v3)  # the same code: the V3 dump is the V1 object's truth
        dump = subprocess.run([objdump, "--sframe", str(v3)], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
        v3.with_suffix(".o.objdump-2.47.txt").write_text(dump)
        built[f"{name}-v1"], built[f"{name}-v3"] = v1, v3
    return built


# -- the truth --------------------------------------------------------------------------------


def _symbols(path: Path) -> list[tuple[str, int, int, str]]:
    """(name, value, size, section name) of the object's defined function symbols
    (readelf)."""
    readelf = require_program("readelf", "binutils")
    sections = {}
    for line in subprocess.run([readelf, "-SW", str(path)], capture_output=True, text=True,
                               check=True).stdout.splitlines():  # fmt: skip
        if m := re.match(r"\s*\[\s*(\d+)\] (\S+)", line):
            sections[m[1]] = m[2]
    out = []
    for line in subprocess.run([readelf, "-sW", str(path)], capture_output=True, text=True,
                               check=True).stdout.splitlines():  # fmt: skip
        fields = line.split()
        if len(fields) == 8 and fields[3] == "FUNC" and fields[6].isdigit():
            out.append((fields[7], int(fields[1], 16), int(fields[2]), sections[fields[6]]))
    return out


#: The truth: the functions objdump 2.47 prints, each with the code section it is in.
Truth = list[tuple[TextFunction, str | None]]


def _truth(dump: Path, path: Path | None = None) -> Truth:
    """The functions objdump 2.47 prints.  With the object ``path`` (V2): each start and row
    read relative to its FDE field (a 28-byte header, then 20 bytes per FDE), and in the code
    section the field's relocation names (readelf)."""
    functions = parse_dump(dump).functions
    if path is None:
        return [(f, None) for f in functions]
    readelf = require_program("readelf", "binutils")
    text = subprocess.run([readelf, "-rW", str(path)], capture_output=True, text=True,
                          check=True).stdout.split("Relocation section '.rela.sframe'")[1]
    targets = {
        int(at, 16): (name, int(addend, 16))
        for at, name, addend in re.findall(
            r"^([0-9a-f]{16}) .* (\S+) \+ ([0-9a-f]+)$", text, re.MULTILINE
        )
    }
    out: Truth = []
    for f in functions:
        field = 28 + 20 * f.index
        f.pc = (f.pc + field) % (1 << 64)
        for row in f.rows:
            row.start = (row.start + field) % (1 << 64)
        section, addend = targets[field]
        assert f.pc == addend  # S + A, the section symbol's value 0
        out.append((f, section))
    return out


def _function(truth: Truth, value: int, size: int, section: str) -> TextFunction | None:
    """The function of the dump at ``value`` of ``size`` bytes in ``section`` (None: GNU as
    wrote none for the symbol)."""
    found = [f for f, s in truth if (f.pc, f.size) == (value, size) and s in (None, section)]
    assert len(found) <= 1
    return found[0] if found else None


def _row(function: TextFunction, pc: int) -> TextRow | None:
    rows = [row for row in function.rows if row.start <= pc]
    return rows[-1] if rows else None


def _expected(function: TextFunction | None, pc: int, fixed_ra: int) -> dict[str, Any] | None:
    """What lookup --json says of ``pc`` in ``function`` (x86-64), from objdump's cells; None
    where no row holds it."""
    row = None if function is None else _row(function, pc)
    if function is None or row is None:
        return None
    assert row.cfa is not None and row.fp is not None and row.ra is not None
    reg, offset, deref = cfa_cell(row.cfa, "x86_64")
    fp_kind, fp_offset, _, _ = reg_cell(row.fp, "x86_64")
    ra_kind, ra_offset, _, _ = reg_cell(row.ra, "x86_64")
    if ra_kind == "fixed":  # "f": at the header's fixed offset from the CFA
        ra_kind, ra_offset = "saved", fixed_ra
    return {
        "function": {"start": function.pc, "size": function.size},
        "row": row.start,
        "cfa": (reg, offset, deref),
        "fp": (fp_kind, fp_offset),
        "ra": (ra_kind, ra_offset),
    }


def _seen(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The same of one answer of lookup --json (a RA at a fixed offset is saved there)."""
    if not answer["found"]:
        return None
    ra = answer["ra"]
    kind = "saved" if ra["kind"] == "fixed" else ra["kind"]
    fp = answer["fp"]
    return {
        "function": {k: answer["function"][k] for k in ("start", "size")},
        "row": answer["row"]["start"],
        "cfa": (answer["cfa"]["reg"], answer["cfa"]["offset"], answer["cfa"]["deref"]),
        "fp": ("untracked" if fp["kind"] == "untracked" else fp["kind"], fp["offset"]),
        "ra": (kind, ra["offset"]),
    }


def _lookup(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, Any, str]:
    status = main(["lookup", "--json", *arguments])
    captured = capsys.readouterr()
    return status, json.loads(captured.out), captured.err


def _check_every_byte(
    capsys: pytest.CaptureFixture[str], path: Path, truth: Truth, *, by_number: bool
) -> int:
    """Every byte of every function symbol of ``path``, by symbol (and ``by_number``): the
    answers objdump's rows give.  The number of PCs compared."""
    symbols = _symbols(path)
    pcs = [(name, value, size, section, k) for name, value, size, section in symbols
           for k in range(size)]  # fmt: skip
    expected = [
        _expected(_function(truth, value, size, section), value + k, -8)
        for _, value, size, section, k in pcs
    ]
    missing = None in expected
    status, answers, err = _lookup(capsys, str(path), *(f"{n}+{k}" for n, _, _, _, k in pcs))
    assert (status, err) == (int(missing), "")
    for (name, value, _, section, k), answer, want in zip(pcs, answers, expected, strict=True):
        assert (answer["pc"], answer["section"]) == (value + k, section), (name, k)
        assert answer["symbol"]["offset"] == k, (name, k)
        assert _seen(answer) == want, (name, k)
    if by_number:  # each offset as a number: in every section that has a function there
        status, numbered, err = _lookup(capsys, str(path), *(hex(v + k) for _, v, _, _, k in pcs))
        wanted, refused = [], []
        for (_, value, _, _, k), answer in zip(pcs, answers, strict=True):
            pc = value + k
            holders = {s for f, s in truth if f.pc <= pc < f.pc + f.size}
            if len(holders) > 1:
                refused.append(f"pysframe: {path}: {pc:#x} is in functions of {len(holders)} code")
            elif holders:
                wanted.append(answer)
            else:  # no function there: the number names no section
                wanted.append({"pc": pc, "symbol": None, "found": False})
        assert numbered == wanted
        assert [line.split(" sections (")[0] for line in err.splitlines()] == refused
        assert status == int(missing or bool(refused) or len(wanted) < len(answers))
    return sum(want is not None for want in expected)


# -- the objects ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v3", "v1"])
def test_every_byte_of_an_object(
    objects: dict[str, Path], version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = _truth(objects["lib-v3"].with_suffix(".o.objdump-2.47.txt"))
    assert _check_every_byte(capsys, objects[f"lib-{version}"], truth, by_number=True) > 200


@pytest.mark.parametrize("version", ["v3", "v1"])
def test_every_byte_of_an_object_with_a_section_per_function(
    objects: dict[str, Path], version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = _truth(objects["sections-v3"].with_suffix(".o.objdump-2.47.txt"))
    path = objects[f"sections-{version}"]
    assert _check_every_byte(capsys, path, truth, by_number=False) > 200
    # A number that functions of several sections hold is refused, naming them.
    status, answers, err = _lookup(capsys, str(path), "0x4", "lib_mul+0x4")
    assert status == 1 and [a["symbol"]["name"] for a in answers] == ["lib_mul"]
    assert err == (
        f"pysframe: {path}: 0x4 is in functions of 5 code sections (.text.lib_add, "
        ".text.helper, .text.lib_mul, .text.lib_hash, .text.lib_frame): give a symbol "
        "(NAME+OFFSET) or a section (SECTION+OFFSET)\n"
    )
    # ... and the section's name tells them apart.
    status, by_section, err = _lookup(capsys, str(path), ".text.lib_mul+0x4")
    assert (status, err) == (0, "") and by_section == answers


def test_v1_object_numbers_name_the_function_holding_them(
    objects: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's cases: lib_hash+4 as a number (was "no SFrame row": every V1 function
    read at 0), and a PC in the second function (was answered from the first)."""
    path = objects["lib-v1"]
    place = {name: value for name, value, _, _ in _symbols(path)}
    status = main(["lookup", str(path), hex(place["lib_hash"] + 4), hex(place["lib_add"] + 0x1a)])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    hashing, adding = out.splitlines()
    assert hashing.startswith(f".text+{place['lib_hash'] + 4:#x} <lib_hash+0x4>: function 3 ")
    assert adding.startswith(f".text+{place['lib_add'] + 0x1a:#x} <lib_add+0x1a>: function 0 ")
    past = sum(map(len, _text(path).values()))
    status = main(["lookup", str(path), hex(past)])
    assert (status, capsys.readouterr().out) == (1, f"{past:#x}: no SFrame row\n")


@pytest.mark.parametrize("name", ["frames.o", "frames-fp.o", "app.o"])
def test_v2_objects_of_gas_2_44(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = CORPUS / "x86_64/v2" / name
    truth = _truth(path.with_name(f"{name}.objdump-2.47.txt"), path)
    # The truth: each start read relative to its field is a function symbol's place.
    symbols = {(value, size, section) for _, value, size, section in _symbols(path)}
    assert all((f.pc, f.size, section) in symbols for f, section in truth)
    assert _check_every_byte(capsys, path, truth, by_number=True) > 100


def test_a_section_generated_for_an_object_is_not_guessed_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--generate`` reads an object's CFI with every section at 0 and keeps no record of
    which function is in which section: a number several functions hold, and symbols, are
    refused with the reason."""
    gcc = require_program("gcc")
    (tmp_path / "lib.c").write_text(SOURCE)
    path = tmp_path / "plain.o"
    subprocess.run([gcc, "-O0", "-c", "-ffunction-sections", str(tmp_path / "lib.c"), "-o",
                    str(path)], check=True)  # fmt: skip
    status = main(["lookup", "--generate", str(path), "0x4", "lib_mul"])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert err.splitlines()[1:] == [
        f"pysframe: {path}: 0x4 is in 5 functions (0, 1, 2, 3, 4): every section of an object "
        "is at 0, and a section generated from its CFI does not say which function is in which",
        f"pysframe: {path}: a section generated for a relocatable object: give addresses, not "
        "symbols (lib_mul)",
    ]
