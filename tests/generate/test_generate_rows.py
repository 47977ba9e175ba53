"""The generator's FRE bytes are the format core's, and they are the bytes GNU as writes.

pysframe.generate.rows hands each row's rules (``row_rules``) to the format core's one encoder
(pysframe.format.rules.encode_row).  These tests hold that against GNU as' own way of writing
a row (gas/gen-sframe.c ``output_sframe_row_entry``, ``output_sframe_row_entry_datawords`` and
``sframe_get_fre_dataword_size``, written out below from the C): wherever the core encodes a
row, its bytes are gas' bytes; wherever it refuses one, gas' bytes would not say the row's
rules (a reader decodes something else, or nothing).  Then, end to end: sections generated
from CFI with every row form decode, through the format core, to the translator's rows.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysframe.errors import EncodeError, SFrameError
from pysframe.format.constants import (
    DEFAULT_FIXED_OFFSETS,
    S390X_CFA_OFFSET_ADJUSTMENT,
    S390X_CFA_OFFSET_ALIGNMENT,
    Abi,
    FdeType,
    Version,
)
from pysframe.format.layout import FRE_WORD_CODES, byte_order, fre_word_count, fre_word_size_code
from pysframe.format.model import CfaRule, RegRule, RuleKind
from pysframe.format.rules import RowContext, decode_rules
from pysframe.generate import generate_from_eh_frame
from pysframe.generate.rows import (
    ABI_PARAMS,
    LOC_NONE,
    LOC_REG,
    LOC_STACK,
    REG_INVALID,
    AbiParams,
    RowState,
    encode_row,
    row_rules,
)
from test_cfi_units import sleb, uleb


def record(order: str, body: bytes) -> bytes:
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack(order + "I", len(body)) + body


def eh_frame(
    order: str, cie: tuple[str, int, int, int, bytes], fdes: list[tuple[int, int, bytes]]
) -> bytes:
    """A CIE (augmentation, code and data alignment, RA column, instructions) and FDEs
    (pc, size, instructions) with pcrel|sdata4 pointers, for a section at address 0x1000."""
    aug, caf, daf, ra, insns = cie
    body = b"\0\0\0\0\x01" + aug.encode() + b"\0" + uleb(caf) + sleb(daf) + uleb(ra)
    body += b"\x01\x1b" + insns
    data = bytearray(record(order, body))
    for pc, size, program in fdes:
        at = len(data)
        head = struct.pack(order + "Iii", at + 4, pc - (0x1000 + at + 8), size)
        data += record(order, head + b"\0" + program)
    return bytes(data + b"\0\0\0\0")


def gas_words(state: RowState[int], flex: bool, params: AbiParams) -> tuple[int, list[int]]:
    """(base register bit, data words) as gas' output_sframe_row_entry_datawords writes them."""
    cfa_offset = state.cfa_offset
    if params.s390x:  # SFRAME_V2_S390X_CFA_OFFSET_ENCODE, a C division of int64
        cfa_offset = int((cfa_offset - S390X_CFA_OFFSET_ADJUSTMENT) / S390X_CFA_OFFSET_ALIGNMENT)
    if not flex:
        words = [cfa_offset]
        if params.ra_tracking:
            if state.ra_loc == LOC_STACK:
                words.append(state.ra_offset)
            elif params.s390x and state.fp_loc == LOC_STACK:
                words.append(0)  # SFRAME_FRE_RA_OFFSET_INVALID
        if state.fp_loc == LOC_STACK:
            words.append(state.fp_offset)
        return (0 if state.cfa_reg == params.fp else 1), words
    words = [_control(state.cfa_reg, state.cfa_deref, True), cfa_offset]
    if state.ra_loc != LOC_NONE:
        words += [_control(state.ra_reg, state.ra_deref, state.ra_loc == LOC_REG), state.ra_offset]
    elif state.fp_loc != LOC_NONE:
        words.append(0)
    if state.fp_loc != LOC_NONE:
        words += [_control(state.fp_reg, state.fp_deref, state.fp_loc == LOC_REG), state.fp_offset]
    return 0, words


def _control(reg: int, deref: int, reg_p: bool) -> int:
    """SFRAME_V3_FLEX_FDE_CTRLWORD_ENCODE (reg, deref_p, reg_p), of C unsigned ints."""
    return (((reg if reg_p else 0) << 3) | (int(deref) << 1) | int(reg_p)) & 0xFFFFFFFF


def gas_word_size(state: RowState[int], flex: bool, params: AbiParams) -> int | None:
    """Bytes per data word, as sframe_get_fre_dataword_size chooses them: from the CFA offset,
    an FP or RA saved on the stack (the RA only where the ABI tracks it), s390x RA padding and,
    in FLEX FREs, the control words of the CFA and of an FP or RA in a register; the other
    words are not looked at.  None: 8 bytes, which gas refuses (gas_assert)."""

    def signed(value: int) -> int:  # get_offset_size_in_bytes
        return next(
            (size for size in (1, 2, 4) if -(1 << (8 * size - 1)) <= value < 1 << (8 * size - 1)), 8
        )

    def unsigned(value: int) -> int:  # get_udata_size_in_bytes
        return 1 if value <= 0xFF else 2 if value <= 0xFFFF else 4

    sizes = [signed(gas_words(state, flex, params)[1][1 if flex else 0])]
    if state.fp_loc == LOC_STACK:
        sizes.append(signed(state.fp_offset))
    if params.ra_tracking:
        if state.ra_loc == LOC_STACK:
            sizes.append(signed(state.ra_offset))
        elif params.s390x and state.fp_loc == LOC_STACK:
            sizes.append(1)
    if flex:
        reg_p = state.cfa_reg != REG_INVALID
        sizes.append(unsigned(_control(state.cfa_reg, state.cfa_deref, reg_p)))
        if state.ra_loc == LOC_REG:
            sizes.append(unsigned(_control(state.ra_reg, state.ra_deref, True)))
        if state.fp_loc == LOC_REG:
            sizes.append(unsigned(_control(state.fp_reg, state.fp_deref, True)))
    size = max(sizes)
    return None if size == 8 else size


def gas_bytes(
    state: RowState[int], flex: bool, params: AbiParams, big_endian: bool
) -> bytes | None:
    """The info byte and data words gas writes for a row, each word cut to the word size
    (md_number_to_chars keeps the low bytes); None where gas stops with an error."""
    if state.ra_undefined:
        return bytes([0])  # "all FRE info word fields zeroed"
    size = gas_word_size(state, flex, params)
    if size is None:
        return None
    base, words = gas_words(state, flex, params)
    code = size.bit_length() - 1
    bits = 8 * size
    low = [word & ((1 << bits) - 1) for word in words]
    stored = [word - (1 << bits) if word >= 1 << (bits - 1) else word for word in low]
    info = (int(bool(state.mangled_ra)) << 7) | (code << 5) | (len(words) << 1) | base
    letter = FRE_WORD_CODES[code]
    return bytes([info]) + struct.pack(f"{byte_order(big_endian)}{len(words)}{letter}", *stored)


def decoded(data: bytes, abi: Abi, version: Version, flex: bool) -> tuple[object, ...] | None:
    """The rules a reader of a ``version`` section decodes from a row's bytes (see
    :func:`same_meaning`); None when it cannot."""
    info = data[0]
    size = 1 << fre_word_size_code(info)
    count = fre_word_count(info)
    letter = FRE_WORD_CODES[fre_word_size_code(info)]
    words = struct.unpack(f"{byte_order(abi.big_endian)}{count}{letter}", data[1:])
    fixed_fp, fixed_ra = DEFAULT_FIXED_OFFSETS[abi]
    fde_type = FdeType.FLEX if flex else FdeType.DEFAULT
    try:
        rules = decode_rules(
            RowContext(abi, version, fde_type, fixed_fp, fixed_ra), info, words, size
        )
    except SFrameError:
        return None
    return same_meaning(abi, *rules)


def same_meaning(abi: Abi, cfa: object, fp: RegRule, ra: RegRule) -> tuple[object, ...]:
    """Rules in one spelling of what they tell an unwinder: RA padding is the ABI's default RA
    rule, and (AMD64) an RA saved at CFA + the header's fixed offset is the fixed rule."""
    fixed_ra = DEFAULT_FIXED_OFFSETS[abi][1]
    default_ra = RegRule.fixed(fixed_ra) if fixed_ra else RegRule.untracked()
    if ra.kind is RuleKind.PADDING or (fixed_ra and ra == RegRule.at_cfa(fixed_ra)):
        ra = default_ra
    return cfa, fp, ra


_OFFSETS = st.one_of(
    st.sampled_from([0, 8, -8, -16, 16, 160, 168, 320, 7, -1, 1 << 12, -(1 << 20)]),
    st.integers(-(1 << 33), 1 << 33),
)
_LOCS = st.sampled_from([LOC_NONE, LOC_REG, LOC_STACK])


@st.composite
def rows_to_encode(draw: st.DrawFn) -> tuple[Abi, RowState[int], bool]:
    """Any row of any ABI (rows the translator makes, and rows it does not), DEFAULT or FLEX."""
    abi = draw(st.sampled_from(list(ABI_PARAMS)))
    params = ABI_PARAMS[abi]
    flex = params.flex and draw(st.booleans())
    registers = st.sampled_from([params.sp, params.fp, params.ra, 3, 40, REG_INVALID])
    state = RowState(
        cfa_reg=draw(registers),
        cfa_offset=draw(_OFFSETS),
        cfa_deref=draw(st.booleans()),
        fp_loc=draw(_LOCS),
        fp_reg=draw(registers),
        fp_offset=draw(_OFFSETS),
        fp_deref=draw(st.booleans()),
        ra_loc=draw(_LOCS),
        ra_reg=draw(registers),
        ra_offset=draw(_OFFSETS),
        ra_deref=draw(st.booleans()),
        mangled_ra=draw(st.booleans()),
        ra_undefined=draw(st.integers(0, 9)) == 0,
    )
    return abi, state, flex


@settings(max_examples=1000, deadline=None)
@given(rows_to_encode())
def test_the_core_encodes_a_row_as_gas_does_where_gas_bytes_say_the_row(
    case: tuple[Abi, RowState[int], bool],
) -> None:
    abi, state, flex = case
    params = ABI_PARAMS[abi]
    meant = same_meaning(abi, *row_rules(state, flex, params))
    # DEFAULT rows go to V1, V2 and V3 sections alike (V1 reads words as V2 does).
    versions = (Version.V3,) if flex else (Version.V2, Version.V3)
    theirs = gas_bytes(state, flex, params, abi.big_endian)
    gas_says_it = theirs is not None and all(
        decoded(theirs, abi, version, flex) == meant for version in versions
    )
    try:
        ours = encode_row(state, flex, params, abi.big_endian)
    except EncodeError:
        # Refused: gas' bytes, if any, say other rules (or cannot be read).
        assert not gas_says_it
        return
    for version in versions:
        assert decoded(ours, abi, version, flex) == meant
    if gas_says_it:
        assert ours == theirs


# ---------------------------------------------------------------------------------------------
# End to end: every row form through generate and the section reader

U = RegRule.untracked()
AMD64_RA = RegRule.fixed(-8)
AMD64_CIE = ("zR", 1, -8, 16, b"\x0c\x07\x08\x90\x01")  # CFA rsp+8, RA at CFA-8
A64_CIE = ("zR", 4, -8, 30, b"\x0c\x1f\x00")  # CFA sp+0
S390X_CIE = ("zR", 1, -8, 14, b"\x0c\x0f\xa0\x01")  # CFA r15+160


def saved(offset: int, reg: int | None = None) -> RegRule:
    return RegRule(RuleKind.SAVED, offset, reg)


def in_register(reg: int) -> RegRule:
    return RegRule.in_register(reg)


#: (ABI, CIE (augmentation, code and data alignment, RA column, instructions), FDE program,
#: FLEX FDE, rows (start, CFA, FP, RA (padding as the ABI's default), mangled RA)): each row
#: form the translator makes.
ROW_FORMS = [
    # adv 1; CFA offset 16; rbp at CFA-16; adv 4; CFA register rbp: DEFAULT, base SP then FP.
    (Abi.AMD64_ENDIAN_LITTLE, AMD64_CIE, b"\x41\x0e\x10\x86\x02\x44\x0d\x06", False, [
        (0, CfaRule(7, 8), U, AMD64_RA, False),
        (1, CfaRule(7, 16), saved(-16), AMD64_RA, False),
        (5, CfaRule(6, 16), saved(-16), AMD64_RA, False),
    ]),
    # adv 1; RA at CFA-24, not CFA-8 (FLEX: RA pair); adv 1; rbp in r3 (FP pair).
    (Abi.AMD64_ENDIAN_LITTLE, AMD64_CIE, b"\x41\x90\x03\x41\x09\x06\x03", True, [
        (0, CfaRule(7, 8), U, AMD64_RA, False),
        (1, CfaRule(7, 8), U, saved(-24), False),
        (2, CfaRule(7, 8), in_register(3), saved(-24), False),
    ]),
    # adv 1; CFA r10+0; adv 1; CFA *(rbp-8) (DW_OP_breg6 -8; DW_OP_deref), rbp saved at
    # *(rbp+0) (DW_CFA_expression DW_OP_breg6 0): FLEX, RA padding before the FP pair.
    (Abi.AMD64_ENDIAN_LITTLE, AMD64_CIE,
     b"\x41\x0c\x0a\x00\x41\x0f\x03\x76\x78\x06\x10\x06\x02\x76\x00", True, [
        (0, CfaRule(7, 8), U, AMD64_RA, False),
        (1, CfaRule(10, 0), U, AMD64_RA, False),
        (2, CfaRule(6, -8, True), saved(0, 6), AMD64_RA, False),
    ]),
    # adv 1; RA undefined (outermost frame): an FRE without words.
    (Abi.AMD64_ENDIAN_LITTLE, AMD64_CIE, b"\x41\x07\x10", False, [
        (0, CfaRule(7, 8), U, AMD64_RA, False),
        (1, None, U, RegRule.undefined(), False),
    ]),
    # RA signed; adv 4; CFA sp+16, x29 at CFA-16, x30 at CFA-8; adv 4; CFA x29+16.
    (Abi.AARCH64_ENDIAN_LITTLE, A64_CIE,
     b"\x2d\x41\x0e\x10\x9d\x02\x9e\x01\x41\x0c\x1d\x10", False, [
        (0, CfaRule(31, 0), U, U, True),
        (4, CfaRule(31, 16), saved(-16), saved(-8), True),
        (8, CfaRule(29, 16), saved(-16), saved(-8), True),
    ]),
    # Big-endian, B key: RA signed; adv 4; CFA sp+32, x29 at CFA-32, x30 at CFA-24.
    (Abi.AARCH64_ENDIAN_BIG, ("zRB", *A64_CIE[1:]), b"\x2d\x41\x0e\x20\x9d\x04\x9e\x03",
     False, [
        (0, CfaRule(31, 0), U, U, True),
        (4, CfaRule(31, 32), saved(-32), saved(-24), True),
    ]),
    # adv 1; r11 at CFA-40, CFA offset 288 (stored (288-160)/8); the RA padded; adv 1; r14 at
    # CFA-32.
    (Abi.S390X_ENDIAN_BIG, S390X_CIE, b"\x41\x8b\x05\x0e\xa0\x02\x41\x8e\x04", False, [
        (0, CfaRule(15, 160), U, U, False),
        (1, CfaRule(15, 288), saved(-40), U, False),
        (2, CfaRule(15, 288), saved(-40), saved(-32), False),
    ]),
    # adv 1; r14 in r5 (FLEX); adv 1; r11 in r7; adv 1; CFA r11+168.
    (Abi.S390X_ENDIAN_BIG, S390X_CIE,
     b"\x41\x09\x0e\x05\x41\x09\x0b\x07\x41\x0c\x0b\xa8\x01", True, [
        (0, CfaRule(15, 160), U, U, False),
        (1, CfaRule(15, 160), U, in_register(5), False),
        (2, CfaRule(15, 160), in_register(7), in_register(5), False),
        (3, CfaRule(11, 168), in_register(7), in_register(5), False),
    ]),
]  # fmt: skip


@pytest.mark.parametrize(
    "form", ROW_FORMS, ids=[f"{f[0].name}-{k}" for k, f in enumerate(ROW_FORMS)]
)
def test_generated_rows_decode_to_the_rows_of_the_cfi(form: tuple) -> None:  # type: ignore[type-arg]
    """Generated, then read."""
    abi, cie, program, flex, want = form
    data = eh_frame(">" if abi.big_endian else "<", cie, [(0x4000, 0x40, program)])
    result = generate_from_eh_frame(data, 0x1000, abi)
    assert not result.skipped
    (function,) = result.section
    assert function.fde_type is (FdeType.FLEX if flex else FdeType.DEFAULT)
    assert function.pauth_key == int("B" in cie[0])
    got = [
        (row.start_offset, *same_meaning(abi, row.cfa, row.fp, row.ra), row.mangled_ra)
        for row in function.rows
    ]
    assert got == want


def test_a_row_the_format_cannot_hold_leaves_its_function_out() -> None:
    """An s390x RA saved at CFA+0: gas writes the word 0, which every reader takes for RA
    padding (the RA still in r14).  The function is left out with the reason, the others
    kept."""
    cie = ("zR", 1, -8, 14, b"\x0c\x0f\xa0\x01")
    fdes = [(0x4000, 0x40, b"\x41\x8e\x00"), (0x4100, 0x40, b"\x41\x8e\x04")]
    data = eh_frame(">", cie, fdes)
    result = generate_from_eh_frame(data, 0x1000, Abi.S390X_ENDIAN_BIG)
    assert [f.start for f in result.section] == [0x4100]
    (skipped,) = result.skipped
    assert skipped.start == 0x4000
    assert skipped.reason == "no SFrame FDE emitted; s390x RA saved at CFA+0 reads as padding"
    # An FP saved beyond 32 bits from the CFA has no data word at all.
    data = eh_frame("<", ("zR", 1, -8, 16, b"\x0c\x07\x08\x90\x01"),
                    [(0x4000, 0x40, b"\x41\x86\x80\x80\x80\x80\x02")])  # fmt: skip
    (skipped,) = generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE).skipped
    assert "do not fit 32 bits" in skipped.reason


def test_rows_at_or_past_the_end_of_a_function_are_dropped() -> None:
    """One program (rows at +0, +4, +8, +12) shared by FDEs of sizes 16, 8 and 9: each keeps
    the rows that start before its end, the program read once."""
    cie = ("zR", 1, -8, 16, b"\x0c\x07\x08")  # DW_CFA_def_cfa rsp+8
    # advance_loc 4, def_cfa_offset 16, advance_loc 4, def_cfa_offset 24, advance_loc 4,
    # def_cfa_offset 8
    program = b"\x44\x0e\x10\x44\x0e\x18\x44\x0e\x08"
    fdes = [(0x4000, 16, program), (0x4100, 8, program), (0x4200, 9, program)]
    data = eh_frame("<", cie, fdes)
    want = {
        0x4000: [(0, 8), (4, 16), (8, 24), (12, 8)],
        0x4100: [(0, 8), (4, 16)],
        0x4200: [(0, 8), (4, 16), (8, 24)],
    }
    result = generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    assert not result.skipped
    got = {
        f.start: [(r.start_offset, r.cfa.offset) for r in f.rows if r.cfa is not None]
        for f in result.section
    }
    assert got == want
