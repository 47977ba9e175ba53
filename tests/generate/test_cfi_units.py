"""CFI parsing and interpretation on hand-built .eh_frame / .debug_frame bytes."""

from __future__ import annotations

import random
import struct

import pytest

from cfi_tables import RuleType, parse_cfi, run_program
from pysframe.errors import CfiError
from pysframe.format.constants import Abi
from pysframe.generate import cfi, ops
from pysframe.generate.cfi import CfiFormat, PointerContext, scan_fdes
from pysframe.generate.interpret import interpret_cfi
from pysframe.generate.ops import decode_instructions


def uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def cie(
    aug: str = "zR",
    caf: int = 1,
    daf: int = -8,
    ra: int = 16,
    aug_data: bytes = b"\x1b",
    insns: bytes = b"\x0c\x07\x08\x90\x01",
) -> bytes:
    body = b"\0\0\0\0\x01" + aug.encode() + b"\0" + uleb(caf) + sleb(daf) + uleb(ra)
    if aug.startswith("z"):
        body += uleb(len(aug_data)) + aug_data
    body += insns
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack("<I", len(body)) + body


def fde(
    at: int, cie_at: int, pc: int, size: int, insns: bytes, aug: bytes = b"\0", address: int = 0
) -> bytes:
    """An FDE at section offset ``at`` with pcrel|sdata4 addresses."""
    pc_field = at + 8
    body = struct.pack("<Iii", at + 4 - cie_at, pc - (address + pc_field), size) + aug + insns
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack("<I", len(body)) + body


def section(
    *fdes: tuple[int, int, bytes], cie_bytes: bytes | None = None, address: int = 0x1000
) -> bytes:
    data = bytearray(cie_bytes if cie_bytes is not None else cie())
    for pc, size, insns in fdes:
        data += fde(len(data), 0, pc, size, insns, address=address)
    return bytes(data + b"\0\0\0\0")


def test_parse_cie_and_fde_pcrel() -> None:
    data = section((0x2000, 0x40, b"\x41\x0e\x10"))
    table = parse_cfi(data, 0x1000)
    (c,) = table.cies.values()
    assert (c.augmentation, c.code_alignment, c.data_alignment, c.return_column) == (
        "zR",
        1,
        -8,
        16,
    )
    assert c.fde_encoding == 0x1B
    (f,) = table.fdes
    assert (f.pc_begin, f.pc_range) == (0x2000, 0x40)
    assert table.instructions(f) == [
        (ops.OP_DEF_CFA, 7, 8),
        (ops.OP_OFFSET, 16, -8),
        (ops.OP_ADVANCE, 1, 0),
        (ops.OP_DEF_CFA_OFFSET, 16, 0),
    ]
    _cies, spans = scan_fdes(data, 0x1000)
    assert spans == [(0, 0x2000, 0x40, f.instructions_start, f.instructions_end)]


def test_augmentations_p_l_s_b_g() -> None:
    # P: personality udata4 (absolute); L: lsda pcrel|sdata4; R: udata8 absolute FDE pointers.
    aug_data = bytes([0x03]) + struct.pack("<I", 0xCAFE) + bytes([0x1B, 0x04])
    c = cie("zPLRSBG", caf=4, daf=-8, ra=30, aug_data=aug_data, insns=b"\x0c\x1f\x00")
    body = struct.pack("<IQQ", len(c) + 4, 0x4000, 0x20) + uleb(4) + struct.pack("<i", 0x100)
    body += b"\x2d"
    data = c + struct.pack("<I", len(body)) + body
    table = parse_cfi(data, 0)
    (parsed,) = table.cies.values()
    assert parsed.personality == 0xCAFE
    assert parsed.signal_frame and parsed.b_key and parsed.mte_tagged
    (f,) = table.fdes
    assert (f.pc_begin, f.pc_range) == (0x4000, 0x20)
    lsda_field = len(c) + 4 + 4 + 16 + 1
    assert f.lsda == lsda_field + 0x100
    assert table.instructions(f)[-1] == (ops.OP_WINDOW_SAVE, 0, 0)


def test_pointer_encodings() -> None:
    reader = cfi.Reader(struct.pack("<Q", 0x1234) + struct.pack("<i", -4) + b"\x7f", False)
    ctx = PointerContext(
        0x500,
        text_base=0x10000,
        data_base=0x20000,
        read_memory=lambda address, size: struct.pack("<Q", address * 2),
    )
    assert cfi.read_encoded(reader, 0, 13, 0x00, 8, ctx)[0] == 0x1234
    assert cfi.read_encoded(reader, 8, 13, 0x1B, 8, ctx)[0] == 0x500 + 8 - 4
    assert cfi.read_encoded(reader, 8, 13, 0x3B, 8, ctx)[0] == 0x20000 - 4
    assert cfi.read_encoded(reader, 8, 13, 0x2B, 8, ctx)[0] == 0x10000 - 4
    assert cfi.read_encoded(reader, 12, 13, 0x01, 8, ctx)[0] == 0x7F
    assert cfi.read_encoded(reader, 12, 13, 0x09, 8, ctx)[0] == (-1) & (2**64 - 1)
    value, _, unresolved = cfi.read_encoded(reader, 8, 13, 0x9B, 8, ctx)
    assert (value, unresolved) == ((0x500 + 4) * 2, False)
    _, _, unresolved = cfi.read_encoded(reader, 8, 13, 0x9B, 8, PointerContext(0))
    assert unresolved
    with pytest.raises(CfiError, match="datarel"):
        cfi.read_encoded(reader, 8, 13, 0x3B, 8, PointerContext(0))
    with pytest.raises(CfiError, match="unknown pointer encoding"):
        cfi.read_encoded(reader, 8, 13, 0x0F, 8, ctx)


def test_debug_frame() -> None:
    cie_body = struct.pack("<I", 0xFFFFFFFF) + b"\x04\0\x08\x00" + uleb(1) + sleb(-8) + uleb(16)
    cie_body += b"\x0c\x07\x08"
    cie_body += b"\0" * (-(len(cie_body) + 4) % 8)
    data = struct.pack("<I", len(cie_body)) + cie_body
    fde_body = struct.pack("<IQQ", 0, 0x7000, 0x10) + b"\x44\x0e\x10"
    data += struct.pack("<I", len(fde_body)) + fde_body
    table = parse_cfi(data, cfi_format=CfiFormat.DEBUG_FRAME)
    (f,) = table.fdes
    assert (f.pc_begin, f.pc_range, f.cie.version) == (0x7000, 0x10, 4)
    rows = table.rows(f)
    assert [(r.address, r.cfa_register, r.cfa_offset) for r in rows] == [
        (0x7000, 7, 8),
        (0x7004, 7, 16),
    ]



def _dwarf64(body: bytes) -> bytes:
    """A record with a 64-bit length (DWARF 5 7.4: 0xffffffff, then the 8-byte length)."""
    return struct.pack("<IQ", 0xFFFFFFFF, len(body)) + body


@pytest.mark.parametrize("cfi_format", [CfiFormat.DEBUG_FRAME, CfiFormat.EH_FRAME])
def test_64_bit_records(cfi_format: CfiFormat) -> None:
    debug = cfi_format is CfiFormat.DEBUG_FRAME
    # A 64-bit CIE: id (8 bytes: all ones in .debug_frame, 0 in .eh_frame), version 1, no
    # augmentation, code alignment 1, data alignment -8, RA column 16 (one byte in
    # version 1); DW_CFA_def_cfa rsp+8; DW_CFA_offset r16 at CFA-8.
    data = _dwarf64(struct.pack("<Q", 2**64 - 1 if debug else 0) + b"\x01\0" + uleb(1)
                    + sleb(-8) + b"\x10" + b"\x0c\x07\x08\x90\x01")  # fmt: skip
    # A 64-bit FDE: its CIE pointer (8 bytes: the CIE's offset, or in .eh_frame the distance
    # back from the pointer), 8-byte start and size (no augmentation: absolute addresses);
    # DW_CFA_advance_loc 4, DW_CFA_def_cfa_offset 16.
    pointer = 0 if debug else len(data) + 12
    data += _dwarf64(struct.pack("<QQQ", pointer, 0x7000, 0x20) + b"\x44\x0e\x10")
    # A 32-bit FDE of the same CIE: DW_CFA_advance_loc 2, DW_CFA_def_cfa_offset 32.
    pointer = 0 if debug else len(data) + 4
    body = struct.pack("<IQQ", pointer, 0x8000, 0x10) + b"\x42\x0e\x20"
    data += struct.pack("<I", len(body)) + body
    cies, spans = scan_fdes(data, cfi_format=cfi_format)
    assert list(cies) == [0]
    assert [span[:3] for span in spans] == [(0, 0x7000, 0x20), (0, 0x8000, 0x10)]
    table = interpret_cfi(data, 0, Abi.AMD64_ENDIAN_LITTLE, debug_frame=debug)
    assert not table.problems
    cfa = [[(at, rules.cfa_reg, rules.cfa_offset) for at, rules in table.rows_of(k)]
           for k in range(2)]  # fmt: skip
    assert cfa == [[(0x7000, 7, 8), (0x7004, 7, 16)], [(0x8000, 7, 8), (0x8002, 7, 32)]]
    # Cut short: in the 8-byte length, past the section, before the CIE id ends.
    with pytest.raises(CfiError, match="64-bit record length runs past"):
        scan_fdes(data[:4] + b"\0" * 6, cfi_format=cfi_format)
    with pytest.raises(CfiError, match="record of 27 bytes runs past the section end"):
        scan_fdes(data[:50], cfi_format=cfi_format)
    with pytest.raises(CfiError, match="too short for its CIE id"):
        scan_fdes(struct.pack("<IQ", 0xFFFFFFFF, 4) + b"\0" * 4, cfi_format=cfi_format)


ALL_OPS = [
    (b"\x45", (ops.OP_ADVANCE, 5, 0)),
    (b"\x02\x10", (ops.OP_ADVANCE, 16, 0)),
    (b"\x03\x00\x01", (ops.OP_ADVANCE, 256, 0)),
    (b"\x04\x00\x00\x01\x00", (ops.OP_ADVANCE, 65536, 0)),
    (b"\x1d" + struct.pack("<Q", 3), (ops.OP_ADVANCE, 3, 0)),
    (b"\x01" + struct.pack("<Q", 0x1234), (ops.OP_SET_LOC, 0x1234, 0)),
    (b"\x86\x02", (ops.OP_OFFSET, 6, -16)),
    (b"\x05\x06\x02", (ops.OP_OFFSET, 6, -16)),
    (b"\x11\x06\x7e", (ops.OP_OFFSET, 6, 16)),
    (b"\x2f\x06\x02", (ops.OP_OFFSET, 6, 16)),
    (b"\xc6", (ops.OP_RESTORE, 6, 0)),
    (b"\x06\x46", (ops.OP_RESTORE, 70, 0)),
    (b"\x07\x10", (ops.OP_UNDEFINED, 16, 0)),
    (b"\x08\x06", (ops.OP_SAME_VALUE, 6, 0)),
    (b"\x09\x06\x03", (ops.OP_REGISTER, 6, 3)),
    (b"\x0a", (ops.OP_REMEMBER, 0, 0)),
    (b"\x0b", (ops.OP_RESTORE_STATE, 0, 0)),
    (b"\x0c\x07\x10", (ops.OP_DEF_CFA, 7, 16)),
    (b"\x12\x07\x7e", (ops.OP_DEF_CFA, 7, 16)),
    (b"\x0d\x06", (ops.OP_DEF_CFA_REGISTER, 6, 0)),
    (b"\x0e\x90\x01", (ops.OP_DEF_CFA_OFFSET, 144, 0)),
    (b"\x13\x7e", (ops.OP_DEF_CFA_OFFSET, 16, 0)),
    (b"\x0f\x03\x76\x78\x06", (ops.OP_DEF_CFA_EXPRESSION, 0, b"\x76\x78\x06")),
    (b"\x10\x06\x02\x76\x00", (ops.OP_EXPRESSION, 6, b"\x76\x00")),
    (b"\x16\x10\x01\x9c", (ops.OP_VAL_EXPRESSION, 16, b"\x9c")),
    (b"\x14\x07\x01", (ops.OP_VAL_OFFSET, 7, -8)),
    (b"\x15\x07\x7f", (ops.OP_VAL_OFFSET, 7, 8)),
    (b"\x2c", (ops.OP_NEGATE_RA_WITH_PC, 0, 0)),
    (b"\x2d", (ops.OP_WINDOW_SAVE, 0, 0)),
    (b"\x2e\x20", (ops.OP_ARGS_SIZE, 32, 0)),
    (b"\x00", None),
]


@pytest.mark.parametrize(
    ("raw", "expected"), ALL_OPS, ids=lambda v: v.hex() if isinstance(v, bytes) else ""
)
def test_every_cfa_op_decodes(raw: bytes, expected: tuple[int, int, object] | None) -> None:
    c = parse_cfi(section()).cies[0]
    assert decode_instructions(raw, 0, len(raw), c) == ([] if expected is None else [expected])


def cfa_instruction(opcode: int, rng: random.Random, leb_bytes: int = 0) -> bytes:
    """An instruction of ``opcode`` with random operands as ops.CFA_INSTRUCTIONS declares them:
    LEB128 numbers of ``leb_bytes`` bytes (any of 1 to 3 when 0), constants, a block, an
    8-byte address."""
    _name, operands = ops.CFA_INSTRUCTIONS[opcode & ops.HIGH_2_BITS or opcode]
    out = bytearray([opcode])
    for operand in operands:
        if operand in (ops.Operand.ULEB, ops.Operand.SLEB):
            size = leb_bytes or rng.randint(1, 3)
            low = 1 << (7 * (size - 1)) if size > 1 else 0
            value = rng.randrange(low, 1 << (7 * size))
            # A SLEB128 of this many bytes: the same groups of 7 bits, read as signed.
            out += uleb(value) if operand is ops.Operand.ULEB else sleb_of_size(value, size)
        elif operand is ops.Operand.BLOCK:
            block = bytes(rng.randrange(256) for _ in range(rng.randint(0, 4)))
            out += uleb(len(block)) + block
        elif operand is ops.Operand.ADDRESS:
            out += rng.randbytes(8)
        else:
            assert operand.size is not None
            out += rng.randbytes(operand.size)
    return bytes(out)


def sleb_of_size(value: int, size: int) -> bytes:
    """``size`` LEB128 bytes holding the 7-bit groups of ``value`` (a valid SLEB128)."""
    groups = [(value >> (7 * k)) & 0x7F for k in range(size)]
    return bytes(group | (0x80 if k < size - 1 else 0) for k, group in enumerate(groups))


def test_the_decoder_reads_the_operands_the_table_declares() -> None:
    """decode_instructions consumes exactly the operands ops.CFA_INSTRUCTIONS gives each
    opcode (every opcode byte), and needs all of them; undeclared opcodes are refused."""
    rng = random.Random(7)
    c = parse_cfi(section()).cies[0]
    for opcode in range(256):
        if (opcode & ops.HIGH_2_BITS or opcode) not in ops.CFA_INSTRUCTIONS:
            with pytest.raises(CfiError, match="unknown DW_CFA opcode"):
                decode_instructions(bytes([opcode]), 0, 1, c)
            continue
        for _ in range(8):
            raw = cfa_instruction(opcode, rng)
            decoded = decode_instructions(raw + b"\x0a", 0, len(raw) + 1, c)
            assert decoded[-1] == (ops.OP_REMEMBER, 0, 0)
            assert len(decoded) == (1 if opcode == ops.DW_CFA_nop else 2)
            if len(raw) > 1:
                with pytest.raises(CfiError):
                    decode_instructions(raw, 0, len(raw) - 1, c)


def test_truncated_and_unknown_ops() -> None:
    c = parse_cfi(section()).cies[0]
    with pytest.raises(CfiError, match="unknown DW_CFA opcode 0x3f"):
        decode_instructions(b"\x3f", 0, 1, c)
    with pytest.raises(CfiError, match="runs past"):
        decode_instructions(b"\x03\x01", 0, 2, c)
    with pytest.raises(CfiError, match="LEB128"):
        decode_instructions(b"\x0e\x80", 0, 2, c)


def test_malformed_records() -> None:
    with pytest.raises(CfiError, match="runs past the section end"):
        parse_cfi(struct.pack("<I", 100) + b"\0" * 8)
    bad_version = bytearray(cie())
    bad_version[8] = 9
    with pytest.raises(CfiError, match="CIE version 9"):
        parse_cfi(bytes(bad_version))
    # An FDE whose CIE pointer leads to another FDE.
    data = section((0x10, 4, b""), (0x20, 4, b""))
    first_fde = len(cie())
    second = first_fde + len(fde(0, 0, 0, 4, b""))
    bad = bytearray(data)
    struct.pack_into("<I", bad, second + 4, second + 4 - first_fde)
    with pytest.raises(CfiError, match="not a CIE"):
        parse_cfi(bytes(bad))


def test_run_program_rules_and_states() -> None:
    initial = [(ops.OP_DEF_CFA, 7, 8), (ops.OP_OFFSET, 16, -8)]
    body = [
        (ops.OP_ADVANCE, 1, 0),
        (ops.OP_DEF_CFA_OFFSET, 16, 0),
        (ops.OP_OFFSET, 6, -16),
        (ops.OP_ADVANCE, 3, 0),
        (ops.OP_DEF_CFA_REGISTER, 6, 0),
        (ops.OP_REMEMBER, 0, 0),
        (ops.OP_ADVANCE, 4, 0),
        (ops.OP_DEF_CFA, 7, 8),
        (ops.OP_RESTORE, 6, 0),
        (ops.OP_ADVANCE, 1, 0),
        (ops.OP_RESTORE_STATE, 0, 0),
        (ops.OP_REGISTER, 3, 5),
        (ops.OP_UNDEFINED, 12, 0),
        (ops.OP_SAME_VALUE, 13, 0),
        (ops.OP_VAL_OFFSET, 14, 8),
        (ops.OP_EXPRESSION, 15, b"\x76\x00"),
        (ops.OP_WINDOW_SAVE, 0, 0),
        (ops.OP_ARGS_SIZE, 16, 0),
        (ops.OP_ADVANCE, 2, 0),
        (ops.OP_DEF_CFA_EXPRESSION, 0, b"\x76\x78\x06"),
    ]
    rows = run_program(initial, body, 0x100, 0x120)
    assert [(r.address, r.end, r.cfa_register, r.cfa_offset) for r in rows] == [
        (0x100, 0x101, 7, 8),
        (0x101, 0x104, 7, 16),
        (0x104, 0x108, 6, 16),
        (0x108, 0x109, 7, 8),
        (0x109, 0x10B, 6, 16),
        (0x10B, 0x120, None, 16),
    ]
    assert rows[1].registers[6].type is RuleType.OFFSET
    assert 6 not in rows[3].registers
    assert rows[4].registers[6].value == -16
    last = rows[-1]
    assert last.cfa_expression == b"\x76\x78\x06"
    assert last.registers[3].type is RuleType.REGISTER and last.registers[3].value == 5
    assert last.registers[12].type is RuleType.UNDEFINED
    assert last.registers[13].type is RuleType.SAME_VALUE
    assert last.registers[14].type is RuleType.VAL_OFFSET
    assert last.registers[15].type is RuleType.EXPRESSION
    assert last.ra_signed and last.args_size == 16
    with pytest.raises(CfiError, match="restore_state"):
        run_program(initial, [(ops.OP_RESTORE_STATE, 0, 0)], 0, 4)
