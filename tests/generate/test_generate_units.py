"""The CFI -> SFrame translator on hand-made operations and bytes: every op, every skip."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pysframe.errors import EncodeError
from pysframe.format.constants import Abi, Version
from pysframe.format.model import RuleKind
from pysframe.generate import (
    generate_from_eh_frame,
    generate_from_elf,
    ops,
    plt_functions,
    translate,
)
from pysframe.generate.ops import Op
from pysframe.generate.rows import (
    ABI_PARAMS,
    LOC_NONE,
    LOC_REG,
    LOC_STACK,
    FunctionEncoder,
    Translation,
    encode_row,
)
from test_cfi_units import cie, section

AMD64 = ABI_PARAMS[Abi.AMD64_ENDIAN_LITTLE]
A64 = ABI_PARAMS[Abi.AARCH64_ENDIAN_LITTLE]
S390X = ABI_PARAMS[Abi.S390X_ENDIAN_BIG]
X86_CIE: list[Op] = [(ops.OP_DEF_CFA, 7, 8), (ops.OP_OFFSET, 16, -8)]
A64_CIE: list[Op] = [(ops.OP_DEF_CFA, 31, 0)]
S390X_CIE: list[Op] = [(ops.OP_DEF_CFA, 15, 160)]


def rows(ops: list[Op], params=AMD64, size: int = 64) -> Translation:  # type: ignore[no-untyped-def]
    result = translate(ops, size, params)
    assert isinstance(result, Translation), result
    return result


def cfa(t: Translation) -> list[tuple[int, int, int]]:
    return [(begin, state[0], state[1]) for begin, state in t.rows]


def test_advance_def_cfa_offset_and_merging() -> None:
    t = rows(
        [
            *X86_CIE,
            (ops.OP_ADVANCE, 1, 0),
            (ops.OP_DEF_CFA_OFFSET, 16, 0),
            (ops.OP_ADVANCE, 4, 0),
            (ops.OP_OFFSET, 3, -24),  # ignored reg
            (ops.OP_ADVANCE, 2, 0),
            (ops.OP_DEF_CFA_OFFSET, 8, 0),
        ]
    )
    # The advance after an ignored op extends the previous row (gas merge rule).
    assert cfa(t) == [(0, 7, 8), (1, 7, 16), (7, 7, 8)]
    assert not t.flex


def test_set_loc_zero_advance_and_rows_past_the_end() -> None:
    t = rows(
        [
            *X86_CIE,
            (ops.OP_ADVANCE, 0, 0),
            (ops.OP_SET_LOC, 4, 0),
            (ops.OP_DEF_CFA_OFFSET, 16, 0),
            (ops.OP_ADVANCE, 100, 0),
            (ops.OP_DEF_CFA_OFFSET, 8, 0),
        ],
        size=10,
    )
    assert cfa(t) == [(0, 7, 8), (4, 7, 16)]
    assert (
        translate([*X86_CIE, (ops.OP_ADVANCE, 5, 0), (ops.OP_SET_LOC, 2, 0)], 8, AMD64)
        == "DW_CFA_set_loc moves backwards"
    )


def test_fp_saved_and_cfa_register_and_restore() -> None:
    t = rows(
        [
            *X86_CIE,
            (ops.OP_ADVANCE, 1, 0),
            (ops.OP_DEF_CFA_OFFSET, 16, 0),
            (ops.OP_OFFSET, 6, -16),
            (ops.OP_ADVANCE, 3, 0),
            (ops.OP_DEF_CFA_REGISTER, 6, 0),
            (ops.OP_ADVANCE, 9, 0),
            (ops.OP_DEF_CFA, 7, 8),
            (ops.OP_RESTORE, 6, 0),
        ]
    )
    states = [s for _, s in t.rows]
    assert [(s[0], s[1], s[3], s[5]) for s in states] == [
        (7, 8, LOC_NONE, 0),
        (7, 16, LOC_STACK, -16),
        (6, 16, LOC_STACK, -16),
        (7, 8, LOC_NONE, 0),
    ]


def test_remember_restore_state_stack() -> None:
    t = rows(
        [
            *X86_CIE,
            (ops.OP_ADVANCE, 1, 0),
            (ops.OP_DEF_CFA_OFFSET, 16, 0),
            (ops.OP_REMEMBER, 0, 0),
            (ops.OP_ADVANCE, 1, 0),
            (ops.OP_DEF_CFA_OFFSET, 8, 0),
            (ops.OP_ADVANCE, 1, 0),
            (ops.OP_RESTORE_STATE, 0, 0),
        ]
    )
    assert cfa(t) == [(0, 7, 8), (1, 7, 16), (2, 7, 8), (3, 7, 16)]


def test_amd64_rip_offset_and_undefined_ra() -> None:
    t = rows([*X86_CIE, (ops.OP_UNDEFINED, 16, 0), (ops.OP_UNDEFINED, 12, 0)])
    assert t.rows[0][1][12] is True
    body = encode_row(t.rows[0][1], False, AMD64, False)
    assert body == b"\x00"
    # RA at a non-default slot: FLEX.
    flex = rows([*X86_CIE, (ops.OP_ADVANCE, 1, 0), (ops.OP_OFFSET, 16, -16)])
    assert flex.flex and flex.rows[1][1][7] == LOC_STACK


def test_val_offset_same_value_register_args_size() -> None:
    t = rows(
        [
            *X86_CIE,
            (ops.OP_VAL_OFFSET, 7, 0),
            (ops.OP_VAL_OFFSET, 3, 8),
            (ops.OP_SAME_VALUE, 6, 0),
            (ops.OP_ARGS_SIZE, 0, 0),
            (ops.OP_REGISTER, 3, 5),
            (ops.OP_ADVANCE, 2, 0),
            (ops.OP_REGISTER, 6, 12),
        ]
    )
    assert t.flex and t.rows[-1][1][3] == LOC_REG and t.rows[-1][1][4] == 12
    ra_reg = rows([*S390X_CIE, (ops.OP_REGISTER, 14, 0), (ops.OP_REGISTER, 15, 1)], S390X)
    assert ra_reg.flex and ra_reg.rows[0][1][7] == LOC_REG


def test_drap_expressions_amd64() -> None:
    t = rows(
        [
            *X86_CIE,
            (ops.OP_ADVANCE, 5, 0),
            (ops.OP_DEF_CFA, 10, 0),
            (ops.OP_ADVANCE, 4, 0),
            (ops.OP_EXPRESSION, 6, b"v\x00"),
            (ops.OP_ADVANCE, 2, 0),
            (ops.OP_DEF_CFA_EXPRESSION, 0, b"vx\x06"),
        ]
    )
    assert t.flex
    last = t.rows[-1][1]
    assert (last[0], last[1], last[2]) == (6, -8, True)
    assert (last[3], last[4], last[5], last[6]) == (LOC_REG, 6, 0, True)
    words = encode_row(last, True, AMD64, False)
    assert words == bytes([0x0A, 0x33, 0xF8, 0x00, 0x33, 0x00])


def test_aarch64_mangled_ra_and_ra_on_stack() -> None:
    t = rows(
        [
            *A64_CIE,
            (ops.OP_WINDOW_SAVE, 0, 0),
            (ops.OP_ADVANCE, 4, 0),
            (ops.OP_DEF_CFA_OFFSET, 16, 0),
            (ops.OP_OFFSET, 29, -16),
            (ops.OP_OFFSET, 30, -8),
            (ops.OP_ADVANCE, 8, 0),
            (ops.OP_RESTORE, 30, 0),
            (ops.OP_RESTORE, 29, 0),
            (ops.OP_WINDOW_SAVE, 0, 0),
        ],
        A64,
    )
    assert [s[11] for _, s in t.rows] == [True, True, False]
    assert encode_row(t.rows[1][1], False, A64, False) == bytes([0x87, 0x10, 0xF8, 0xF0])
    assert rows([*A64_CIE, (ops.OP_SAME_VALUE, 30, 0)], A64).rows


def test_s390x_cfa_encoding_and_padding() -> None:
    t = rows(
        [
            *S390X_CIE,
            (ops.OP_ADVANCE, 6, 0),
            (ops.OP_OFFSET, 11, -72),
            (ops.OP_DEF_CFA_OFFSET, 320, 0),
        ],
        S390X,
    )
    body = encode_row(t.rows[-1][1], False, S390X, True)
    # CFA (320-160)/8 = 20, RA padding 0, FP -72.
    assert body == bytes([(3 << 1) | 1, 20, 0, 0xB8])


SKIPS: list[tuple[list[Op], object, str]] = [
    ([*A64_CIE, (ops.OP_DEF_CFA, 10, 0)], A64, "non-SP/FP register 10 in .cfi_def_cfa"),
    (
        [*A64_CIE, (ops.OP_DEF_CFA_REGISTER, 10, 0)],
        A64,
        "non-SP/FP register 10 in .cfi_def_cfa_register",
    ),
    (
        [(ops.OP_ADVANCE, 2, 0), (ops.OP_DEF_CFA_OFFSET, 8, 0)],
        AMD64,
        ".cfi_def_cfa_offset without CFA base register in effect",
    ),
    (
        [*X86_CIE, (ops.OP_DEF_CFA_OFFSET, 1 << 32, 0)],
        AMD64,
        ".cfi_def_cfa_offset with unsupported offset value",
    ),
    ([*X86_CIE, (ops.OP_DEF_CFA, 7, 1 << 32)], AMD64, ".cfi_def_cfa with unsupported offset"),
    ([(ops.OP_REMEMBER, 0, 0)], AMD64, ".cfi_remember_state without prior SFrame FRE state"),
    ([*X86_CIE, (ops.OP_RESTORE_STATE, 0, 0)], AMD64, "without .cfi_remember_state"),
    ([*X86_CIE, (ops.OP_VAL_OFFSET, 6, 8)], AMD64, ".cfi_val_offset with FP reg 6"),
    ([*X86_CIE, (ops.OP_VAL_OFFSET, 7, 8)], AMD64, ".cfi_val_offset with SP reg 7"),
    ([*A64_CIE, (ops.OP_VAL_OFFSET, 30, 8)], A64, ".cfi_val_offset with RA reg 30"),
    ([*A64_CIE, (ops.OP_REGISTER, 30, 9)], A64, "RA register 30 in .cfi_register"),
    ([*X86_CIE, (ops.OP_REGISTER, 7, 9)], AMD64, "SP register 7 in .cfi_register"),
    ([*X86_CIE, (ops.OP_UNDEFINED, 6, 0)], AMD64, "FP reg 6 in .cfi_undefined"),
    ([*X86_CIE, (ops.OP_UNDEFINED, 7, 0)], AMD64, "SP reg 7 in .cfi_undefined"),
    ([*X86_CIE, (ops.OP_WINDOW_SAVE, 0, 0)], AMD64, ".cfi_window_save"),
    ([*A64_CIE, (ops.OP_NEGATE_RA_WITH_PC, 0, 0)], A64, ".cfi_negate_ra_state_with_pc"),
    ([*X86_CIE, (ops.OP_ARGS_SIZE, 16, 0)], AMD64, ".cfi_escape with op (0x2e)"),
    ([*X86_CIE, (ops.OP_DEF_CFA_EXPRESSION, 0, b"w\x08\x06")], AMD64, ".cfi_escape with op (0xf)"),
    ([*A64_CIE, (ops.OP_DEF_CFA_EXPRESSION, 0, b"\x8dx\x06")], A64, ".cfi_escape with op (0xf)"),
    (
        [*X86_CIE, (ops.OP_EXPRESSION, 6, b"w\x00")],
        AMD64,
        ".cfi_escape DW_CFA_expression with FP reg 6",
    ),
    (
        [*X86_CIE, (ops.OP_EXPRESSION, 7, b"w\x00")],
        AMD64,
        ".cfi_escape DW_CFA_expression with SP reg 7",
    ),
    ([*X86_CIE, (ops.OP_VAL_EXPRESSION, 16, b"\x9c")], AMD64, ".cfi_escape with op (0x16)"),
    ([*A64_CIE, (ops.OP_ADVANCE, 4, 0), (ops.OP_OFFSET, 29, -16)], A64, "FP without RA on stack"),
    ([*S390X_CIE, (ops.OP_DEF_CFA_OFFSET, 164, 0)], S390X, "not 160 plus a multiple of 8"),
    (
        [(ops.OP_ADVANCE, 1, 0), (ops.OP_UNDEFINED, 3, 0)] * 1 + [(ops.OP_ADVANCE, 1, 0)],
        AMD64,
        "a row has no CFA rule",
    ),
    (
        X86_CIE + [(ops.OP_ADVANCE, 1, 0), (ops.OP_DEF_CFA_OFFSET, 8, 0)] * 70000,
        AMD64,
        "Number of FREs exceeds UINT16_MAX",
    ),
    ([(0x99, 0, 0)], AMD64, "CFI insn (0x99)"),
]


@pytest.mark.parametrize(("ops", "params", "reason"), SKIPS, ids=[s[2][:40] for s in SKIPS])
def test_skip_reasons(ops: list[Op], params: object, reason: str) -> None:
    result = translate(ops, 1 << 20, params)  # type: ignore[arg-type]
    assert isinstance(result, str)
    assert result.startswith("no SFrame FDE emitted; ")
    assert reason in result


def test_non_default_return_column_and_signal_frame() -> None:
    data = section((0x2000, 0x10, b""), cie_bytes=cie(ra=15))
    result = generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    assert [s.reason for s in result.skipped] == [
        "no SFrame FDE emitted; non-default RA register 15"
    ]
    # A signal frame whose CFI fails is kept with no rows (gas), marked as a signal frame.
    data = section((0x2000, 0x10, b"\x16\x10\x01\x9c"), cie_bytes=cie("zRS"))
    result = generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    (function,) = result.section
    assert function.signal_frame and function.num_rows == 0
    assert result.skipped and "0x16" in result.skipped[0].reason


def test_versions_1_and_2_skip_what_they_cannot_say() -> None:
    data = section(
        (0x2000, 0x10, b"\x41\x0c\x0a\x00"),
        (0x2100, 0x10, b"\x07\x10"),
        (0x2200, 0x10, b"\x41\x0e\x10"),
    )
    for version in (Version.V1, Version.V2):
        result = generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE, version=version)
        assert [f.start for f in result.section] == [0x2200]
        reasons = [s.reason for s in result.skipped]
        assert "FLEX" in reasons[0] and "undefined" in reasons[1]
    v3 = generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    assert len(v3.section) == 3 and not v3.skipped
    undefined = v3.section.find_row(0x2100)
    assert undefined is not None and undefined.row.ra.kind is RuleKind.UNDEFINED


def test_plt_functions_as_ld_writes_them() -> None:
    encoder = FunctionEncoder(AMD64, False)
    plt0 = b"\xff\x35" + bytes(14)
    entry = b"\xff\x25" + bytes(4) + b"\x68" + bytes(9)
    made, skipped = plt_functions(
        (0x1020, plt0 + entry * 3),
        (0x1100, bytes(32)),
        (0x1090, bytes(8), 8),
        encoder,
        ld_compatible=True,
    )
    assert not skipped
    assert [(f.start, f.size, f.info, f.rep_size, f.num_fres) for f in made] == [
        (0x1020, 16, 0, 0, 2),
        (0x1030, 48, 0x10, 16, 2),
        (0x1100, 32, 0x10, 16, 1),
        (0x1090, 8, 0x10, 8, 1),
    ]
    assert made[1].fres == bytes([0, 3, 8, 11, 3, 16])
    assert made[3].fres == bytes([0, 3, 16])
    ibt = _ENDBR = b"\xf3\x0f\x1e\xfa\x68" + bytes(11)
    made, _ = plt_functions((0x1020, plt0 + ibt), None, None, encoder)
    assert made[1].fres == bytes([0, 3, 8, 9, 3, 16])
    del _ENDBR
    made, skipped = plt_functions((0x1020, b"\x90" * 32), None, None, encoder)
    assert not made and skipped


def test_a_function_beyond_the_size_field_is_an_encode_error() -> None:
    """An FDE range of 2**33 bytes (udata8 pointers) cannot be an SFrame function size."""
    c = cie("zR", aug_data=bytes([0x04]))
    body = struct.pack("<IQQ", len(c) + 4, 0x4000, 1 << 33) + b"\x00"
    data = c + struct.pack("<I", len(body)) + body + b"\0\0\0\0"
    with pytest.raises(EncodeError, match="function 0: size 8589934592 out of range"):
        generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE)


def test_the_package_names_each_of_its_modules_and_its_job() -> None:
    """pysframe.generate's docstring lists every module of the package, with its job."""
    import pkgutil

    import pysframe.generate as package

    doc = package.__doc__ or ""
    for module in pkgutil.iter_modules(package.__path__):
        assert f":mod:`~pysframe.generate.{module.name}`: " in doc, module.name


def test_an_unreadable_eh_frame_is_an_error_naming_file_and_section(tmp_path: Path) -> None:
    """The CfiError of a damaged .eh_frame carries the file and the section as fields."""
    from pysframe.elf.reader import ElfReader
    from pysframe.errors import CfiError

    program = Path(__file__).parent.parent / "data" / "corpus" / "x86_64" / "v3" / "app"
    with ElfReader.open(str(program)) as image:
        section = image.section(".eh_frame")
        assert section is not None
        at = section.offset
    data = bytearray(program.read_bytes())
    data[at : at + 4] = struct.pack("<I", 0xFFFFFF00)  # the first record's length: past the end
    damaged = tmp_path / "damaged"
    damaged.write_bytes(bytes(data))
    with pytest.raises(CfiError) as raised:
        generate_from_elf(str(damaged))
    error = raised.value
    assert (error.path, error.section, error.offset) == (str(damaged), ".eh_frame", 0)
    assert error.message == "record of 4294967040 bytes runs past the section end"
