"""The DWARF CFA interpreter (pysframe.generate.cfa_rules; a section's table by
pysframe.generate.interpret) against ``readelf --debug-dump=frames-interp`` (binutils 2.47's,
else the system's), which prints the same table: on the corpus, on system libraries and on
random CFI assembled by GNU as; then the rules of single programs, expressions and the ways
GNU as reads CFI (quirks), on hand-made programs."""

from __future__ import annotations

import os
import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import corpus_files, require
from pysframe.elf.reader import ElfReader
from pysframe.elf.relocation import relocated
from pysframe.format.constants import Abi
from pysframe.generate.cfa_rules import (
    GAS_2_40,
    NO_RULES,
    SIGNED,
    SIGNED_WITH_PC,
    CfaKind,
    CfiAbi,
    Quirk,
    RegKind,
    Rules,
    interpret_program,
)
from pysframe.generate.cfi import Cie
from pysframe.generate.expression import CFA_BASE, evaluate, reads_pc
from pysframe.generate.interpret import PROGRAMS, CfiTable, fde_rows, interpret_cfi
from pysframe.generate.ops import decode_instructions

AMD64 = CfiAbi.of(Abi.AMD64_ENDIAN_LITTLE)
AARCH64 = CfiAbi.of(Abi.AARCH64_ENDIAN_LITTLE)
SP, FP, RA = 7, 6, 16

# -- readelf's table ---------------------------------------------------------------------------

#: readelf's names of the DWARF registers (binutils/dwarf.c dwarf_regnames_*), by ABI.
_NAMES = {
    Abi.AMD64_ENDIAN_LITTLE: ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
                              *(f"r{n}" for n in range(8, 16)), "rip"],
    Abi.AARCH64_ENDIAN_LITTLE: [*(f"x{n}" for n in range(31)), "sp"],
    Abi.S390X_ENDIAN_BIG: [f"r{n}" for n in range(16)],
}  # fmt: skip
_NAMES[Abi.AARCH64_ENDIAN_BIG] = _NAMES[Abi.AARCH64_ENDIAN_LITTLE]

#: One row of readelf's table: its address, the CFA ("exp", or (register, offset)) and the
#: rule of each register column by its header (the RA's is "ra").
ReadelfRow = tuple[int, object, dict[str, str]]


def readelf() -> str:
    for candidate in (os.environ.get("READELF"), shutil.which("readelf")):
        if candidate and Path(candidate).exists():
            return candidate
    require("binutils", "readelf is not installed")


def readelf_tables(path: Path, abi: Abi) -> dict[int, tuple[int, int, list[ReadelfRow]]]:
    """Per FDE of ``.eh_frame`` (by where its record ends): its address range and rows as
    readelf prints them.  An FDE with no instructions has none printed: the CIE's row."""
    text = subprocess.run([readelf(), "--debug-dump=frames-interp", str(path)],
                          capture_output=True, text=True, check=False).stdout  # fmt: skip
    text = text[text.index("Contents of the .eh_frame section"):]
    text = text.split("Contents of the", 2)[1]
    registers = {name: number for number, name in enumerate(_NAMES[abi])}
    tables: dict[int, tuple[int, int, list[ReadelfRow]]] = {}
    cie_rows: dict[int, list[ReadelfRow]] = {}
    current: list[ReadelfRow] = []
    header: list[str] = []
    for line in text.splitlines():
        record = re.match(r"([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+) (CIE|FDE)", line)
        if record:
            offset, length = int(record[1], 16), int(record[2], 16)
            current = []
            if record[4] == "CIE":
                cie_rows[offset] = current
            else:
                cie = int(re.search(r"cie=([0-9a-f]+)", line)[1], 16)  # type: ignore[index]
                lo, hi = (int(v, 16) for v in re.search(r"pc=([0-9a-f]+)\.\.([0-9a-f]+)",
                                                         line).groups())  # type: ignore[union-attr]
                tables[offset + 4 + length] = (lo, hi, current)
                current.extend((lo, *row[1:]) for row in cie_rows.get(cie, [])[-1:])
                current.append((-1, None, {}))  # marks the CIE's row, replaced by the FDE's
            continue
        if line.startswith("   LOC"):
            header = line.split()[2:]
            continue
        # A register's cell, "r9 (r9)": its number and its name.
        fields = re.findall(r"r\d+ \([^)]*\)|\S+", line)
        if len(fields) >= 2 and re.fullmatch(r"[0-9a-f]{16}", fields[0]):
            cfa: object = "exp"
            parsed = re.fullmatch(r"([a-z0-9]+)([+-]\d+)", fields[1])
            if parsed:
                cfa = (registers[parsed[1]], int(parsed[2]))
            row = (int(fields[0], 16), cfa, dict(zip(header, fields[2:], strict=True)))
            if current and current[-1][0] == -1:  # the FDE's own rows: not the CIE's
                current.clear()
            current.append(row)
    for _lo, _hi, rows in tables.values():
        if rows and rows[-1][0] == -1:
            rows.pop()
    return tables


def _agrees(token: str | None, kind: int, reg: int, offset: int) -> bool:
    """Whether readelf's rule of a column (None: the column is not printed) is the rule
    (kind, register, offset): "u" undefined or no rule, "s" same value, "c-8" saved at
    CFA-8, "v-8" the value CFA-8, "r12 (r12)" in register 12, "exp" and "vexp"
    expressions."""
    if token is None or token == "s":
        return kind == RegKind.SAME
    if token == "u":
        return kind in (RegKind.SAME, RegKind.UNDEFINED)
    if token[0] in "cv" and token[1:2] in ("+", "-"):
        return (kind, offset) == (RegKind.AT_CFA if token[0] == "c" else RegKind.VAL_CFA,
                                  int(token[1:]))  # fmt: skip
    if token == "exp":
        return kind in (RegKind.AT_REG, RegKind.AT_CFA, RegKind.OTHER)
    if token == "vexp":
        return kind != RegKind.SAME and kind != RegKind.UNDEFINED
    number = re.match(r"r(\d+) \(", token)  # DW_CFA_register
    return (kind, offset) == (RegKind.VAL_REG, 0) and number is not None and reg == int(
        number[1]
    )


def check_against_readelf(path: Path) -> int:
    """Every FDE of ``path``'s ``.eh_frame``: its rows (CFA, FP, RA) as readelf's at every
    address where either side's change; how many FDEs were compared."""
    with ElfReader.open(str(path)) as image:
        abi = image.abi
        section = image.section(".eh_frame")
        assert abi is not None and section is not None
        data = relocated(image, section, section.data())
        table = interpret_cfi(data, section.address, abi, address_size=image.elfclass // 8)
    names = _NAMES[abi]
    cfi_abi = CfiAbi.of(abi)
    theirs = readelf_tables(path, abi)
    compared = 0
    for fde, span in enumerate(table.spans):
        lo, hi, rows = theirs[span[4]]
        assert (lo, hi - lo) == (span[1], span[2]), path
        if fde in table.problems or not rows:
            continue
        ours = table.rows_of(fde)
        points = sorted({at for at, *_ in rows} | {at for at, _rules in ours} | {lo})
        for at in (p for p in points if lo <= p < hi):
            mine = [rules for begin, rules in ours if begin <= at][-1]
            row = [r for r in rows if r[0] <= at][-1]
            where = (path.name, hex(span[1]), hex(at), row, mine)
            if row[1] == "exp":
                assert mine.cfa_kind != CfaKind.NONE, where
            else:
                assert (mine.cfa_kind, mine.cfa_reg, mine.cfa_offset) == (CfaKind.REG,
                                                                          *row[1]), where  # type: ignore[misc]
            columns = row[2]
            assert _agrees(columns.get(names[cfi_abi.fp]), *mine[3:6]), where
            assert _agrees(columns.get("ra"), *mine[6:9]), where
        compared += 1
    return compared


def _corpus_id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", corpus_files(), ids=_corpus_id)
def test_the_corpus_rows_are_readelfs(path: Path) -> None:
    with ElfReader.open(str(path)) as image:
        if image.section(".eh_frame") is None:
            pytest.skip("no .eh_frame")
    assert check_against_readelf(path) > 0


@pytest.mark.parametrize("name", ["libstdc++.so.6", "libc.so.6", "libm.so.6"])
def test_system_library_rows_are_readelfs(name: str) -> None:
    path = Path("/usr/lib/x86_64-linux-gnu") / name
    if not path.exists():
        require(name, f"{path} is not on this machine")
    assert check_against_readelf(path) > 500


#: Directives of random functions (x86-64): rules of the CFA, the FP, the RA and others,
#: remember/restore, expressions; each followed by some instructions.
_DIRECTIVES = [
    ".cfi_def_cfa_offset 16", ".cfi_def_cfa_offset 48", ".cfi_adjust_cfa_offset 8",
    ".cfi_offset %rbp, -16", ".cfi_offset %rbx, -24", ".cfi_offset %rip, -16",
    ".cfi_def_cfa_register %rbp", ".cfi_def_cfa_register %rsp", ".cfi_def_cfa %rsp, 8",
    ".cfi_def_cfa %r10, 0", ".cfi_restore %rbp", ".cfi_restore %rip", ".cfi_remember_state",
    ".cfi_restore_state", ".cfi_same_value %rbp", ".cfi_undefined %rip",
    ".cfi_register %rbp, %r12", ".cfi_val_offset %rbp, -16", ".cfi_rel_offset %rbp, 8",
    ".cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06", ".cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00",
    ".cfi_escape 0x16, 0x10, 0x03, 0x77, 0x08, 0x06", ".cfi_escape 0x2e, 0x10",
]  # fmt: skip


#: The directives valid only while the CFA is a register and an offset.
_REGISTER_AND_OFFSET = (".cfi_def_cfa_register", ".cfi_def_cfa_offset", ".cfi_adjust_cfa_offset",
                        ".cfi_restore_state")  # fmt: skip


def test_random_cfi_rows_are_readelfs(tmp_path: Path) -> None:
    """Random functions of CFI directives, assembled by GNU as (``$GAS``, else ``as``).
    DWARF 5 6.4.2.2 allows DW_CFA_def_cfa_register and DW_CFA_def_cfa_offset only while the
    CFA is a register and an offset: after a CFA expression, none until a DW_CFA_def_cfa
    (readers differ on what they do)."""
    assembler = os.environ.get("GAS") or shutil.which("as")
    if assembler is None:
        require("binutils", "as is not installed")
    rng = random.Random(17)
    compared = 0
    for seed in range(20):
        lines = [".text"]
        for k in range(30):
            lines += [f"f{k}:", ".cfi_startproc", "nop"]
            remembered = 0
            expression = False
            for _ in range(rng.randint(0, 12)):
                directive = rng.choice(_DIRECTIVES)
                if directive == ".cfi_restore_state":
                    if not remembered:
                        continue
                    remembered -= 1
                if expression and directive.startswith(_REGISTER_AND_OFFSET):
                    continue
                if directive.startswith((".cfi_def_cfa ", ".cfi_escape 0x0f")):
                    expression = directive.startswith(".cfi_escape")
                remembered += directive == ".cfi_remember_state"
                lines += [directive, *["nop"] * rng.choice([1, 2, 5])]
            lines.append(".cfi_endproc")
        source = tmp_path / f"random{seed}.s"
        source.write_text("\n".join(lines) + "\n")
        obj = source.with_suffix(".o")
        subprocess.run([assembler, "-o", str(obj), str(source)], check=True)
        compared += check_against_readelf(obj)
    assert compared == 20 * 30


# -- single programs ---------------------------------------------------------------------------


def _cie(code_alignment: int = 1, data_alignment: int = -8, ra: int = RA) -> Cie:
    return Cie(0, 1, "zR", code_alignment, data_alignment, ra, 8, 0x1B, 0xFF, None, False,
               False, False, False, 0, 0)  # fmt: skip


#: The x86-64 CIE's program: CFA rsp+8, RA at CFA-8.
_X86_CIE = decode_instructions(b"\x0c\x07\x08\x90\x01", 0, 5, _cie())


def _run(
    code: bytes, cfi_abi: CfiAbi = AMD64, quirks: Quirk = Quirk.NONE
) -> list[tuple[int, Rules]]:
    """Rows of the x86-64 CIE program, then ``code``."""
    ops = decode_instructions(code, 0, len(code), _cie())
    program = interpret_program(ops, cfi_abi, initial_ops=_X86_CIE, quirks=quirks)
    assert not isinstance(program, str), program
    return [(row.begin, row.rules) for row in program.rows]


def _rules(
    cfa: tuple[int, int, int],
    fp: tuple[int, int, int] = (RegKind.SAME, -1, 0),
    ra: tuple[int, int, int] = (RegKind.AT_CFA, -1, -8),
) -> Rules:
    return Rules(*cfa, *fp, *ra, 0)


def test_push_frame_pointer_prologue() -> None:
    # advance 1; def_cfa_offset 16; offset rbp at cfa-16; advance 3; def_cfa_register rbp
    rows = _run(bytes([0x41, 0x0E, 16, 0x86, 2, 0x43, 0x0D, FP]))
    assert rows == [
        (0, _rules((CfaKind.REG, SP, 8))),
        (1, _rules((CfaKind.REG, SP, 16), (RegKind.AT_CFA, -1, -16))),
        (4, _rules((CfaKind.REG, FP, 16), (RegKind.AT_CFA, -1, -16))),
    ]


def test_def_cfa_register_keeps_the_offset_just_set() -> None:
    """DWARF 5 6.4.2.2: the offset in effect, 24, not the last row's 16 (gas' reading)."""
    rows = _run(bytes([0x41, 0x0E, 16, 0x41, 0x0E, 24, 0x0D, FP, 0x41]))
    assert rows[-2][1][:3] == (CfaKind.REG, FP, 24)


def test_restore_returns_to_the_cie_rule() -> None:
    """DW_CFA_offset before the first advance, then DW_CFA_restore: the CIE's rule (not
    saved), not the function's first row's."""
    rows = _run(bytes([0x86, 2, 0x41, 0x0E, 16, 0x41, 0xC6, 0x41]))
    assert rows[0][1].fp_kind == RegKind.AT_CFA
    assert rows[-1][1].fp_kind == RegKind.SAME


def test_remember_and_restore_state_include_the_cfa() -> None:
    code = bytes([0x41, 0x0E, 16, 0x86, 2, 0x0A, 0x41, 0xC6, 0x0E, 8, 0x41, 0x0B, 0x41])
    rows = _run(code)
    assert rows[2][1][:6] == (CfaKind.REG, SP, 8, RegKind.SAME, -1, 0)
    assert rows[3][1][:6] == (CfaKind.REG, SP, 16, RegKind.AT_CFA, -1, -16)


def test_register_rules_of_every_kind() -> None:
    same = _run(bytes([0x86, 2, 0x08, FP, 0x41]))[0][1]
    assert same.fp_kind == RegKind.SAME
    undefined = _run(bytes([0x07, RA, 0x41]))[0][1]
    assert undefined.ra_kind == RegKind.UNDEFINED
    moved = _run(bytes([0x09, FP, 3, 0x41]))[0][1]
    assert (moved.fp_kind, moved.fp_reg, moved.fp_offset) == (RegKind.VAL_REG, 3, 0)
    value = _run(bytes([0x14, FP, 2, 0x41]))[0][1]
    assert (value.fp_kind, value.fp_offset) == (RegKind.VAL_CFA, -16)
    # DW_CFA_expression rbp: DW_OP_breg6 0 -> saved at rbp+0 (the AMD64 DRAP layout)
    at_register = _run(bytes([0x10, FP, 2, 0x76, 0x00, 0x41]))[0][1]
    assert (at_register.fp_kind, at_register.fp_reg, at_register.fp_offset) == (
        RegKind.AT_REG, FP, 0,
    )  # fmt: skip
    # DW_CFA_val_expression rbp: DW_OP_breg7 8; DW_OP_deref -> saved at rsp+8
    deref = _run(bytes([0x16, FP, 3, 0x77, 0x08, 0x06, 0x41]))[0][1]
    assert (deref.fp_kind, deref.fp_reg, deref.fp_offset) == (RegKind.AT_REG, SP, 8)
    # DW_CFA_expression with a memory read: neither form
    other = _run(bytes([0x10, FP, 3, 0x77, 0x08, 0x06, 0x41]))[0][1]
    assert other.fp_kind == RegKind.OTHER


def test_cfa_expressions() -> None:
    drap = _run(bytes([0x0F, 3, 0x76, 0x78, 0x06, 0x41]))[0][1]
    assert drap[:3] == (CfaKind.DEREF, FP, -8)
    plain = _run(bytes([0x0F, 2, 0x77, 0x10, 0x41]))[0][1]
    assert plain[:3] == (CfaKind.REG, SP, 16)
    odd = _run(bytes([0x0F, 3, 0x77, 0x77, 0x22, 0x41]))[0][1]  # rsp + rsp
    assert odd.cfa_kind == CfaKind.OTHER


def test_aarch64_signing_state_toggles() -> None:
    cie = _cie(4, -8, 30)
    code = bytes([0x0C, 31, 0, 0x41, 0x2D, 0x41, 0x2D, 0x41, 0x2C])
    program = interpret_program(decode_instructions(code, 0, len(code), cie), AARCH64)
    assert not isinstance(program, str)
    assert [row.rules.mangled for row in program.rows] == [0, SIGNED, 0, SIGNED_WITH_PC]
    assert [row.begin for row in program.rows] == [0, 4, 8, 12]


def test_programs_that_cannot_be_read() -> None:
    cie = _cie()
    window = decode_instructions(b"\x2d", 0, 1, cie)
    assert "SPARC" in str(interpret_program(window, AMD64))
    restore = decode_instructions(b"\x0b", 0, 1, cie)
    assert "remember" in str(interpret_program(restore, AMD64))
    backwards = decode_instructions(b"\x41\x01" + struct.pack("<Q", 0), 0, 10, cie)
    assert "backwards" in str(interpret_program(backwards, AMD64, pc_begin=0x1000))
    advance = decode_instructions(b"\x41", 0, 1, cie)
    assert "CIE" in str(interpret_program([], AMD64, initial_ops=advance))


def test_args_size_changes_no_rule_and_set_loc_moves() -> None:
    rows = _run(bytes([0x2E, 0x10, 0x01]) + struct.pack("<Q", 4) + bytes([0x0E, 16]))
    assert [begin for begin, _ in rows] == [0, 4]
    assert rows[1][1].cfa_offset == 16


def test_rows_say_where_a_rule_changed() -> None:
    """A row's ``changed``: an instruction set one of its rules (the same value again
    included) since it began; the first row's count the CIE's."""
    cie = _cie()
    code = b"\x41\x83\x02\x41\x0e\x08\x41"  # rbx saved (no rule of the three); CFA offset 8
    program = interpret_program(decode_instructions(code, 0, len(code), cie), AMD64,
                                initial_ops=_X86_CIE)  # fmt: skip
    assert not isinstance(program, str)
    assert [row.changed for row in program.rows] == [True, False, True, False]


def test_gas_2_40_quirks() -> None:
    same = bytes([0x41, 0x0E, 16, 0x86, 2, 0x41, 0x08, FP, 0x41])
    assert _run(same)[-1][1].fp_kind == RegKind.SAME
    assert _run(same, quirks=Quirk.FP_SAME_VALUE_IGNORED)[-1][1].fp_kind == RegKind.AT_CFA
    undefined = bytes([0x07, RA, 0x41])
    assert _run(undefined, quirks=GAS_2_40)[0][1].ra_kind == RegKind.AT_CFA
    # remember after a change not yet written as a row: 2.40 remembers the row before it
    remember = bytes([0x41, 0x0E, 16, 0x0A, 0x41, 0x0E, 8, 0x41, 0x0B, 0x41])
    assert _run(remember)[-1][1].cfa_offset == 16
    assert _run(remember, quirks=Quirk.REMEMBER_LAST_ROW)[-1][1].cfa_offset == 8


def test_gas_restore_to_the_first_row() -> None:
    """Registers saved before the first row (a cold part of a split function): DWARF's
    DW_CFA_restore returns to the CIE's rule, GNU as' to the first row's."""
    code = bytes([0x0E, 48, 0x86, 5, 0x41, 0xC6, 0x0E, 8, 0x41])
    assert _run(code)[1][1].fp_kind == RegKind.SAME
    first_row = _run(code, quirks=Quirk.RESTORE_TO_FIRST_ROW)[1][1]
    assert (first_row.fp_kind, first_row.fp_offset) == (RegKind.AT_CFA, -40)
    # Before any row is written, the rule in effect stays.
    assert _run(bytes([0x86, 2, 0xC6, 0x41]), quirks=Quirk.RESTORE_TO_FIRST_ROW)[0][1].fp_kind == (
        RegKind.AT_CFA
    )


def test_expression_evaluation() -> None:
    plt = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])
    assert reads_pc(plt, 16) and not reads_pc(plt, None)
    assert evaluate(plt, push_cfa=False, pc_register=16) is None  # needs the PCs
    pcs = np.arange(0x1030, 0x1050, dtype=np.int64)
    reduced = evaluate(plt, push_cfa=False, pc_register=16, pcs=pcs)
    assert reduced is not None and reduced.base == SP and not reduced.deref
    expected = [8 + (8 if pc & 15 >= 11 else 0) for pc in pcs.tolist()]
    assert list(reduced.offset) == expected
    at_cfa = evaluate(bytes([0x23, 16]), push_cfa=True)  # CFA; plus_uconst 16
    assert at_cfa is not None and (at_cfa.base, at_cfa.offset) == (CFA_BASE, 16)
    constant = evaluate(bytes([0x0B, 0x34, 0x12, 0x31, 0x1C]), push_cfa=False)
    assert constant is not None and (constant.base, constant.offset) == (None, 0x1233)
    # A second memory read, a read before another operation, a product of registers, a branch.
    for irreducible in (b"\x06\x06", b"\x06\x23\x01", b"\x77\x00\x1e", b"\x2f\x00\x00"):
        assert evaluate(b"\x77\x00" + irreducible, push_cfa=False) is None
    assert evaluate(b"\x77\x00\x96", push_cfa=False) is not None  # DW_OP_nop


def test_no_rules_before_the_cie() -> None:
    assert NO_RULES.cfa_kind == CfaKind.NONE and NO_RULES.fp_kind == RegKind.SAME


# -- a section's table ---------------------------------------------------------------------------


def _eh_frame(programs: list[bytes], size: int = 64) -> bytes:
    """An .eh_frame: the x86-64 CIE, then one FDE per program (pcrel|sdata4, ``size`` bytes
    each, from 0x1000)."""
    cie_body = b"\x00\x00\x00\x00\x01zR\x00\x01\x78\x10\x01\x1b\x0c\x07\x08\x90\x01"
    cie_body += b"\x00" * (-(len(cie_body) + 4) % 8)
    out = struct.pack("<I", len(cie_body)) + cie_body
    for number, program in enumerate(programs):
        body_at = len(out) + 4
        body = struct.pack("<Ii", body_at, 0x1000 + size * number - (body_at + 4))
        body += struct.pack("<I", size) + b"\x00" + program
        body += b"\x00" * (-(len(body) + 4) % 8)
        out += struct.pack("<I", len(body)) + body
    return out + b"\x00" * 4


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_a_table_of_more_programs_than_are_decoded_together() -> None:
    """More distinct programs than interpret.PROGRAMS (decoded together), shared by several
    FDEs, of advances of every size: each FDE's rows are its program's, known by
    construction (the CIE's row, then the CFA offset 16 + n at the advance's end)."""
    count = 2 * PROGRAMS + 123
    advances = [b"\x45", b"\x02\x05", b"\x03\x05\x00", b"\x04\x05\x00\x00\x00"]
    programs = [advances[n % 4] + b"\x0e" + _uleb(16 + n) + (b"\x86\x02" if n % 3 else b"")
                for n in range(count)]  # fmt: skip
    programs += programs[:500]  # the same programs again
    table = interpret_cfi(_eh_frame(programs), 0, Abi.AMD64_ENDIAN_LITTLE)
    assert len(table) == len(programs) and not table.problems
    for fde in (0, 1, PROGRAMS - 1, PROGRAMS, PROGRAMS + 1, count - 1, count, len(programs) - 1):
        n = fde % count
        saved = (RegKind.AT_CFA, -1, -16) if n % 3 else (RegKind.SAME, -1, 0)
        begin = 0x1000 + 64 * fde
        assert table.rows_of(fde) == [
            (begin, _rules((CfaKind.REG, SP, 8))),
            (begin + 5, _rules((CfaKind.REG, SP, 16 + n), saved)),
        ]


def test_rows_at_or_past_an_fdes_end_and_fdes_read_alone() -> None:
    """A program of rows at +0, +4, +8, +12 under FDEs of 64 and 9 bytes: the second keeps
    three; each FDE read on its own (fde_rows) gives its table's rows."""
    table: CfiTable = interpret_cfi(_eh_frame([b"\x44\x0e\x10" * 3] * 2, 9), 0,
                                    Abi.AMD64_ENDIAN_LITTLE)  # fmt: skip
    assert [at - 0x1009 for at, _rules in table.rows_of(1)] == [0, 4, 8]
    for fde in range(len(table)):
        alone = fde_rows(table, fde)
        assert not isinstance(alone, str)
        start = int(table.begin[fde])
        assert [(start + row.begin, row.rules) for row in alone] == table.rows_of(fde)


def test_huge_offsets_do_not_break_the_table() -> None:
    """A CFA offset of 2**64 - 1 (a ten-byte ULEB128): the table holds it, clamped."""
    table = interpret_cfi(_eh_frame([b"\x41\x0e" + b"\xff" * 9 + b"\x01"]), 0,
                          Abi.AMD64_ENDIAN_LITTLE)  # fmt: skip
    assert not table.problems
    assert table.rows_of(0)[1][1].cfa_offset == 1 << 62
