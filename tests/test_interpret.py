"""The CFI row interpreter (DWARF semantics): rules of single programs, expressions, and the
bulk path against the per-program one on real sections and random programs."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysframe.elf.reader import ElfReader
from pysframe.elf.relocation import relocated
from pysframe.errors import CfiError
from pysframe.format.constants import Abi
from pysframe.generate import ops
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
from pysframe.generate.interpret import CHUNK, CfiTable, fde_rows, interpret_cfi
from pysframe.generate.interpret_bulk import PAD, RuleColumns, interpret_programs
from pysframe.generate.ops import decode_instructions
from pysframe.generate.rows import ABI_PARAMS, LOC_STACK, RowState, Translation
from pysframe.generate.translator import translate_ops

from conftest import require
from test_cfi_units import cfa_instruction

CORPUS = Path(__file__).parent / "data" / "corpus"
AMD64 = CfiAbi.of(Abi.AMD64_ENDIAN_LITTLE)
AARCH64 = CfiAbi.of(Abi.AARCH64_ENDIAN_LITTLE)
SP, FP, RA = 7, 6, 16


def _cie(code_alignment: int = 1, data_alignment: int = -8, ra: int = RA) -> Cie:
    return Cie(0, 1, "zR", code_alignment, data_alignment, ra, 8, 0x1B, 0xFF, None, False,
               False, False, False, 0, 0)  # fmt: skip


def _run(
    code: bytes, cfi_abi: CfiAbi = AMD64, quirks: Quirk = Quirk.NONE
) -> list[tuple[int, Rules]]:
    """Rows of the x86-64 CIE program (CFA rsp+8, RA at CFA-8) then ``code``."""
    cie = _cie()
    initial = interpret_program(decode_instructions(b"\x0c\x07\x08\x90\x01", 0, 5, cie), cfi_abi)
    assert not isinstance(initial, str)
    start = initial.rows[0].rules
    program = interpret_program(decode_instructions(code, 0, len(code), cie), cfi_abi, start,
                                quirks=quirks)  # fmt: skip
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
    itself = _run(bytes([0x09, FP, FP, 0x41]))[0][1]
    assert itself.fp_kind == RegKind.SAME
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
    with pytest.raises(CfiError):
        decode_instructions(b"\x3f", 0, 1, cie)


def test_args_size_changes_no_rule_and_set_loc_moves() -> None:
    rows = _run(bytes([0x2E, 0x10, 0x01]) + struct.pack("<Q", 4) + bytes([0x0E, 16]))
    assert [begin for begin, _ in rows] == [0, 4]
    assert rows[1][1].cfa_offset == 16


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


#: AArch64 pieces of programs: advance 4, CFA offset 16 / 32, x29 (FP) at CFA-16 / CFA-32, x30
#: (RA) at CFA-8, DW_CFA_restore of x29 and of x30.
_RESTORE_PIECES = [b"\x41", b"\x0e\x10", b"\x0e\x20", b"\x9d\x02", b"\x9d\x04", b"\x9e\x01",
                   b"\xdd", b"\xde"]  # fmt: skip


def _fp_ra_at_each_row(code: bytes, quirks: Quirk) -> tuple[list[object], list[object]]:
    """The FP and RA rules at every row start of an AArch64 function (CIE: CFA sp+0) running
    ``code``, from the translator and from the DWARF interpreter read with ``quirks``."""
    cie = _cie(code_alignment=4, ra=30)
    cie_ops = decode_instructions(b"\x0c\x1f\x00", 0, 3, cie)
    ops = decode_instructions(code, 0, len(code), cie)
    translation = translate_ops(cie_ops + ops, ABI_PARAMS[Abi.AARCH64_ENDIAN_LITTLE])
    assert isinstance(translation, Translation)
    initial = interpret_program(cie_ops, AARCH64)
    assert not isinstance(initial, str)
    program = interpret_program(ops, AARCH64, initial.rows[0].rules, quirks=quirks)
    assert not isinstance(program, str)
    starts = sorted({b for b, _ in translation.rows} | {row.begin for row in program.rows})

    def at(rows: list[tuple[int, object]], pc: int) -> object:
        return [rule for begin, rule in rows if begin <= pc][-1]

    def from_translator(state: RowState[int]) -> tuple[tuple[int, int], tuple[int, int]]:
        fp = (RegKind.AT_CFA, state.fp_offset) if state.fp_loc == LOC_STACK else (RegKind.SAME, 0)
        ra = (RegKind.AT_CFA, state.ra_offset) if state.ra_loc == LOC_STACK else (RegKind.SAME, 0)
        return fp, ra

    theirs = [(b, from_translator(state)) for b, state in translation.rows]
    ours = [
        (
            row.begin,
            ((row.rules.fp_kind, row.rules.fp_offset), (row.rules.ra_kind, row.rules.ra_offset)),
        )
        for row in program.rows
    ]
    return [at(theirs, pc) for pc in starts], [at(ours, pc) for pc in starts]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_RESTORE_PIECES), max_size=16))
def test_gas_restore_rule_is_the_translators(pieces: list[bytes]) -> None:
    """Read with GNU as' .cfi_restore, the DWARF interpreter gives the FP and RA rules the
    translator writes into SFrame rows, at every row (one rule: translator.restore_source)."""
    translated, interpreted = _fp_ra_at_each_row(b"".join(pieces), Quirk.RESTORE_TO_FIRST_ROW)
    assert translated == interpreted


def test_gas_restore_rule_differs_from_dwarfs() -> None:
    """The same program read with DWARF's DW_CFA_restore (the CIE's rule) differs, so the
    property above tells the two rules apart: x29 saved before the first row, restored after."""
    code = b"\x0e\x20\x9d\x04\x9e\x03\x41\xdd\x41"
    translated, dwarf = _fp_ra_at_each_row(code, Quirk.NONE)
    assert translated != dwarf
    assert translated == _fp_ra_at_each_row(code, Quirk.RESTORE_TO_FIRST_ROW)[1]


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


def _corpus_cfi() -> list[tuple[str, bytes, int, Abi]]:
    out = []
    for path in sorted(CORPUS.glob("*/v*/*")):
        if path.suffix == ".txt" or not path.is_file():
            continue
        with ElfReader.open(str(path)) as image:
            sec = image.section(".eh_frame")
            if sec is None or image.abi is None:
                continue
            out.append((path.name, relocated(image, sec, sec.data()), sec.address, image.abi))
    return out


def _same_tables(bulk: CfiTable, scalar: CfiTable) -> None:
    assert bulk.problems == scalar.problems
    assert np.array_equal(bulk.row_fde, scalar.row_fde)
    assert np.array_equal(bulk.row_begin, scalar.row_begin)
    for ours, theirs in zip(bulk.rules.take(bulk.row_rule), scalar.rules.take(scalar.row_rule),
                            strict=True):  # fmt: skip
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("name, data, address, abi", _corpus_cfi(), ids=lambda v: str(v)[:20])
def test_bulk_rows_equal_per_program_rows_on_the_corpus(
    name: str, data: bytes, address: int, abi: Abi
) -> None:
    bulk = interpret_cfi(data, address, abi)
    scalar = interpret_cfi(data, address, abi, bulk=False)
    _same_tables(bulk, scalar)
    # Every FDE's rows, interpreted on its own, are the table's.
    for fde in range(len(bulk)):
        if fde in bulk.problems or not bulk.size[fde]:
            continue
        alone = fde_rows(bulk, fde)
        assert not isinstance(alone, str)
        start = int(bulk.begin[fde])
        assert [(start + row.begin, row.rules) for row in alone] == bulk.rows_of(fde)


def test_bulk_rows_on_a_large_library() -> None:
    library = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not library.exists():
        require("libstdc++6", f"{library} is not on this machine")
    with ElfReader.open(str(library)) as image:
        sec = image.section(".eh_frame")
        assert sec is not None and image.abi is not None
        data = relocated(image, sec, sec.data())
        _same_tables(
            interpret_cfi(data, sec.address, image.abi),
            interpret_cfi(data, sec.address, image.abi, bulk=False),
        )


# Instructions the bulk path handles (and a few it leaves to the per-program path).
_INSTRUCTIONS = st.sampled_from(
    [
        b"\x41", b"\x42", b"\x02\x30", b"\x03\x10\x01", b"\x04\x01\x00\x00\x00", b"\x00",
        b"\x0e\x10", b"\x0e\x18", b"\x0e\x90\x01", b"\x13\x7e", b"\x0c\x07\x08", b"\x0c\x06\x10",
        b"\x12\x07\x7e", b"\x0d\x06", b"\x0d\x07", b"\x86\x02", b"\x86\x83\x01", b"\x90\x01",
        b"\xc6", b"\xd0", b"\x05\x06\x03", b"\x11\x06\x7d", b"\x06\x06", b"\x07\x06", b"\x08\x06",
        b"\x07\x10", b"\x09\x06\x03", b"\x09\x06\x06", b"\x14\x06\x02", b"\x15\x10\x7f",
        b"\x2e\x10", b"\x83\x03", b"\x0a", b"\x0b", b"\x0f\x02\x77\x08",
    ]
)  # fmt: skip


def _eh_frame(programs: list[bytes]) -> bytes:
    """An .eh_frame: the x86-64 CIE, then one FDE per program (pcrel|sdata4, 64 bytes each)."""
    cie_body = b"\x00\x00\x00\x00\x01zR\x00\x01\x78\x10\x01\x1b\x0c\x07\x08\x90\x01"
    cie_body += b"\x00" * (-(len(cie_body) + 4) % 8)
    out = struct.pack("<I", len(cie_body)) + cie_body
    for number, program in enumerate(programs):
        body_at = len(out) + 4
        body = struct.pack("<Ii", body_at, 0x1000 + 64 * number - (body_at + 4))
        body += struct.pack("<I", 64) + b"\x00" + program
        body += b"\x00" * (-(len(body) + 4) % 8)
        out += struct.pack("<I", len(body)) + body
    return out + b"\x00" * 4


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_INSTRUCTIONS, max_size=12).map(b"".join), min_size=1, max_size=8))
def test_bulk_rows_equal_per_program_rows_on_random_programs(programs: list[bytes]) -> None:
    data = _eh_frame(programs)
    bulk = interpret_cfi(data, 0, Abi.AMD64_ENDIAN_LITTLE)
    scalar = interpret_cfi(data, 0, Abi.AMD64_ENDIAN_LITTLE, bulk=False)
    _same_tables(bulk, scalar)


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_bulk_rows_across_chunks() -> None:
    """More distinct programs than one chunk of the bulk path (interpret.CHUNK) holds, some
    left to the per-program path: the same table as interpreting each program alone."""
    programs = []
    for number in range(2 * CHUNK + 123):
        # DW_CFA_advance_loc 1, DW_CFA_def_cfa_offset 16 + number: every program distinct.
        program = b"\x41\x0e" + _uleb(16 + number)
        if number % 3 == 0:
            program += b"\x86\x02"  # DW_CFA_offset r6 (rbp), 2 * data alignment (-8)
        if number % 1000 == 7:
            program += b"\x0f\x02\x77\x08"  # DW_CFA_def_cfa_expression: the per-program path
        programs.append(program)
    data = _eh_frame(programs)
    bulk = interpret_cfi(data, 0, Abi.AMD64_ENDIAN_LITTLE)
    _same_tables(bulk, interpret_cfi(data, 0, Abi.AMD64_ENDIAN_LITTLE, bulk=False))
    assert len(bulk) == len(programs) and not bulk.problems
    last = bulk.rows_of(len(programs) - 1)
    assert last[1][1].cfa_offset == 16 + len(programs) - 1


#: The instructions the DWARF interpreter's bulk path handles, as its documentation lists them
#: (and DW_CFA_AARCH64_negate_ra_state on AArch64), with LEB128 operands of up to 4 bytes.
INTERPRETER_BULK = {
    ops.DW_CFA_nop,
    *range(ops.DW_CFA_advance_loc, 0x100),  # advance_loc, offset, restore: all 64 of each
    ops.DW_CFA_advance_loc1,
    ops.DW_CFA_advance_loc2,
    ops.DW_CFA_advance_loc4,
    ops.DW_CFA_def_cfa,
    ops.DW_CFA_def_cfa_sf,
    ops.DW_CFA_def_cfa_register,
    ops.DW_CFA_def_cfa_offset,
    ops.DW_CFA_def_cfa_offset_sf,
    ops.DW_CFA_offset_extended,
    ops.DW_CFA_offset_extended_sf,
    ops.DW_CFA_val_offset,
    ops.DW_CFA_val_offset_sf,
    ops.DW_CFA_register,
    ops.DW_CFA_restore_extended,
    ops.DW_CFA_undefined,
    ops.DW_CFA_same_value,
    ops.DW_CFA_GNU_args_size,
}


@pytest.mark.parametrize("cfi_abi", [AMD64, AARCH64], ids=["amd64", "aarch64"])
def test_bulk_instruction_lengths_are_the_declared_ones(cfi_abi: CfiAbi) -> None:
    """Every opcode byte, in an instruction laid out as the one operand table
    (ops.CFA_INSTRUCTIONS) declares it, then an advance and a CFA offset: the bulk path handles
    exactly the instructions it lists, and walks them to the rows the per-program interpreter
    gives (a wrong length would read an operand as the next instruction)."""
    rng = random.Random(13)
    cie = _cie()
    handled = INTERPRETER_BULK | ({ops.DW_CFA_GNU_window_save} if cfi_abi.aarch64 else set())
    programs, expected = [], []
    for opcode in range(256):
        if (opcode & ops.HIGH_2_BITS or opcode) in ops.CFA_INSTRUCTIONS:
            for leb_bytes in (1, 2, 4, 5):
                programs.append(cfa_instruction(opcode, rng, leb_bytes) + b"\x41\x0e\x10\x41")
                operands = ops.CFA_INSTRUCTIONS[opcode & ops.HIGH_2_BITS or opcode][1]
                has_leb = ops.Operand.ULEB in operands or ops.Operand.SLEB in operands
                expected.append(opcode in handled and (leb_bytes < 5 or not has_leb))
    lengths = np.array([len(program) for program in programs], dtype=np.int64)
    ends = np.cumsum(lengths)
    buf = np.frombuffer(b"".join(programs) + bytes(PAD), dtype=np.uint8)
    initial = RuleColumns.of([NO_RULES._replace(cfa_kind=CfaKind.REG, cfa_reg=SP, cfa_offset=8)])
    count = len(programs)
    found = interpret_programs(
        buf, ends - lengths, ends, np.ones(count, dtype=np.int64),
        np.full(count, -8, dtype=np.int64), initial.take(np.zeros(count, dtype=np.int64)),
        cfi_abi, False,
    )  # fmt: skip
    assert found.ok.tolist() == expected
    for number in np.flatnonzero(found.ok).tolist():
        program = programs[number]
        scalar = interpret_program(
            decode_instructions(program, 0, len(program), cie), cfi_abi, initial.row(0)
        )
        assert not isinstance(scalar, str)
        rows = np.flatnonzero(found.row_program == number).tolist()
        bulk_rows = [(int(found.row_begin[k]), found.rules.row(k)) for k in rows]
        assert bulk_rows == [(row.begin, row.rules) for row in scalar.rows], program.hex()


def test_no_rules_before_the_cie() -> None:
    assert NO_RULES.cfa_kind == CfaKind.NONE and NO_RULES.fp_kind == RegKind.SAME
