"""A DWARF CFI reader for the tests: every CIE and FDE of a section, and the DWARF row table of
an FDE (DWARF 5 6.4.1-6.4.2), built on the records of :mod:`pysframe.generate.cfi` and the
operations of :mod:`pysframe.generate.ops`.

The generator itself needs neither (it reads :func:`pysframe.generate.cfi.scan_fdes` and
translates operations with GNU as' rules); the tests use them to check the CFI parser and to
compare generated rows with what the CFI says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from pysframe.errors import CfiError
from pysframe.generate import cfi
from pysframe.generate.cfi import CfiFormat, Cie, Fde, PointerContext
from pysframe.generate.ops import (
    CFA_NAMES,
    OP_ADVANCE,
    OP_ARGS_SIZE,
    OP_DEF_CFA,
    OP_DEF_CFA_EXPRESSION,
    OP_DEF_CFA_OFFSET,
    OP_DEF_CFA_REGISTER,
    OP_EXPRESSION,
    OP_NEGATE_RA_WITH_PC,
    OP_OFFSET,
    OP_REGISTER,
    OP_REMEMBER,
    OP_RESTORE,
    OP_RESTORE_STATE,
    OP_SAME_VALUE,
    OP_SET_LOC,
    OP_UNDEFINED,
    OP_VAL_EXPRESSION,
    OP_VAL_OFFSET,
    OP_WINDOW_SAVE,
    Op,
    decode_instructions,
)


@dataclass(slots=True)
class CfiTable:
    """Every CIE and FDE of one section, in section order, with the bytes they point into."""

    data: bytes
    format: CfiFormat
    big_endian: bool
    address_size: int
    cies: dict[int, Cie] = field(default_factory=dict)
    fdes: list[Fde] = field(default_factory=list)

    def instructions(self, fde: Fde) -> list[Op]:
        """The CIE's initial instructions followed by the FDE's, decoded."""
        cie = fde.cie
        return decode_instructions(
            self.data,
            cie.instructions_start,
            cie.instructions_end,
            cie,
            self.big_endian,
        ) + decode_instructions(
            self.data, fde.instructions_start, fde.instructions_end, cie, self.big_endian
        )

    def rows(self, fde: Fde) -> list[CfiRow]:
        """The FDE's row table (DWARF 5 6.4.2)."""
        cie = fde.cie
        initial = decode_instructions(
            self.data, cie.instructions_start, cie.instructions_end, cie, self.big_endian
        )
        body = decode_instructions(
            self.data, fde.instructions_start, fde.instructions_end, cie, self.big_endian
        )
        return run_program(initial, body, fde.pc_begin, fde.pc_end)


def parse_cfi(
    data: bytes,
    section_address: int = 0,
    *,
    big_endian: bool = False,
    address_size: int = 8,
    cfi_format: CfiFormat = CfiFormat.EH_FRAME,
    pointers: PointerContext | None = None,
) -> CfiTable:
    """Parse every CIE and FDE of an ``.eh_frame`` or ``.debug_frame`` section.

    Raises CfiError (with the byte offset) for malformed records.  A zero length ends an
    ``.eh_frame`` section (LSB 10.6.1).
    """
    data = bytes(data)
    ctx = pointers or PointerContext(section_address)
    if ctx.section_address != section_address:
        ctx = PointerContext(section_address, ctx.text_base, ctx.data_base, ctx.read_memory)
    table = CfiTable(data, cfi_format, big_endian, address_size)
    r = cfi.Reader(data, big_endian)
    walked, failure = cfi.records(r, cfi_format)
    for kind, offset, body, end, cie_ref in zip(*walked, strict=True):
        if kind == 0:
            table.cies[offset] = cfi.parse_cie(r, offset, body, end, address_size, cfi_format, ctx)
        else:
            cie = table.cies.get(cie_ref)
            if cie is None:
                cie = cfi.cie_at(r, table.cies, cie_ref, address_size, cfi_format, ctx, offset)
            table.fdes.append(cfi.parse_fde(r, offset, body, end, cie, cfi_format, ctx))
    if failure is not None:
        raise failure
    return table


# ---------------------------------------------------------------------------------------------
# Row tables (DWARF 5 6.4.1 "Structure of Call Frame Information")


class RuleType(Enum):
    """Register rules of DWARF 5 6.4.1."""

    UNDEFINED = "undefined"
    SAME_VALUE = "same_value"
    OFFSET = "offset"  # saved at CFA + N
    VAL_OFFSET = "val_offset"  # value is CFA + N
    REGISTER = "register"  # saved in another register
    EXPRESSION = "expression"  # saved at the address the expression computes
    VAL_EXPRESSION = "val_expression"


@dataclass(frozen=True, slots=True)
class RegisterRule:
    type: RuleType
    #: Offset (OFFSET, VAL_OFFSET) or register number (REGISTER).
    value: int = 0
    expression: bytes = b""


@dataclass(frozen=True, slots=True)
class CfiRow:
    """One row of the table: from ``address`` (inclusive) to ``end`` (exclusive)."""

    address: int
    end: int
    #: CFA = cfa_register + cfa_offset; cfa_expression is set instead for def_cfa_expression.
    cfa_register: int | None
    cfa_offset: int
    cfa_expression: bytes | None
    #: Rules of registers that have one (others follow the ABI's default, usually same value).
    registers: dict[int, RegisterRule]
    #: AArch64 RA-signing state, toggled by DW_CFA_AARCH64_negate_ra_state.
    ra_signed: bool = False
    args_size: int = 0


def _rule_for(op: Op) -> RegisterRule | None:
    code, _a, b = op
    if code == OP_OFFSET:
        return RegisterRule(RuleType.OFFSET, int(b) if isinstance(b, int) else 0)
    if code == OP_VAL_OFFSET:
        return RegisterRule(RuleType.VAL_OFFSET, int(b) if isinstance(b, int) else 0)
    if code == OP_REGISTER:
        return RegisterRule(RuleType.REGISTER, int(b) if isinstance(b, int) else 0)
    if code == OP_UNDEFINED:
        return RegisterRule(RuleType.UNDEFINED)
    if code == OP_SAME_VALUE:
        return RegisterRule(RuleType.SAME_VALUE)
    if code == OP_EXPRESSION:
        return RegisterRule(RuleType.EXPRESSION, 0, bytes(b) if isinstance(b, bytes) else b"")
    if code == OP_VAL_EXPRESSION:
        return RegisterRule(RuleType.VAL_EXPRESSION, 0, bytes(b) if isinstance(b, bytes) else b"")
    return None


@dataclass(slots=True)
class _State:
    cfa_register: int | None = None
    cfa_offset: int = 0
    cfa_expression: bytes | None = None
    registers: dict[int, RegisterRule] = field(default_factory=dict)
    ra_signed: bool = False
    args_size: int = 0

    def copy(self) -> _State:
        return _State(
            self.cfa_register,
            self.cfa_offset,
            self.cfa_expression,
            dict(self.registers),
            self.ra_signed,
            self.args_size,
        )


def run_program(
    initial: Sequence[Op], body: Sequence[Op], pc_begin: int, pc_end: int
) -> list[CfiRow]:
    """Interpret CIE initial instructions then FDE instructions (DWARF 5 6.4.2).

    ``DW_CFA_restore`` returns a register to its rule after the initial instructions;
    ``remember_state`` / ``restore_state`` use a stack (the CFA is part of the saved state, as
    GCC's unwinder and the DWARF 5 text say).  Rows with an empty range are dropped.
    """
    state = _State()
    for op in initial:
        _apply(state, op, None, [])
    cie_rules = dict(state.registers)
    stack: list[_State] = []
    rows: list[CfiRow] = []
    loc = pc_begin

    def close(until: int) -> None:
        if until > loc:
            rows.append(
                CfiRow(
                    loc,
                    until,
                    state.cfa_register,
                    state.cfa_offset,
                    state.cfa_expression,
                    dict(state.registers),
                    state.ra_signed,
                    state.args_size,
                )
            )

    for op in body:
        code = op[0]
        if code in (OP_ADVANCE, OP_SET_LOC):
            target = loc + op[1] if code == OP_ADVANCE else op[1]
            if target < loc:
                raise CfiError(f"DW_CFA_set_loc moves backwards to {target:#x}")
            target = min(target, pc_end)
            close(target)
            loc = target
            continue
        if code == OP_REMEMBER:
            stack.append(state.copy())
        elif code == OP_RESTORE_STATE:
            if not stack:
                raise CfiError("DW_CFA_restore_state without DW_CFA_remember_state")
            state = stack.pop()
        else:
            _apply(state, op, cie_rules, stack)
    close(pc_end)
    return rows


def _apply(
    state: _State, op: Op, cie_rules: dict[int, RegisterRule] | None, stack: list[_State]
) -> None:
    code, a, b = op
    if code == OP_DEF_CFA:
        state.cfa_register, state.cfa_offset = a, int(b) if isinstance(b, int) else 0
        state.cfa_expression = None
    elif code == OP_DEF_CFA_REGISTER:
        state.cfa_register = a
        state.cfa_expression = None
    elif code == OP_DEF_CFA_OFFSET:
        state.cfa_offset = a
    elif code == OP_DEF_CFA_EXPRESSION:
        state.cfa_register = None
        state.cfa_expression = bytes(b) if isinstance(b, bytes) else b""
    elif code == OP_RESTORE:
        if cie_rules is not None and a in cie_rules:
            state.registers[a] = cie_rules[a]
        else:
            state.registers.pop(a, None)
    elif code == OP_WINDOW_SAVE:
        state.ra_signed = not state.ra_signed
    elif code == OP_ARGS_SIZE:
        state.args_size = a
    elif code in (OP_REMEMBER, OP_RESTORE_STATE, OP_NEGATE_RA_WITH_PC):
        if code == OP_REMEMBER:
            stack.append(state.copy())
    elif code in (OP_ADVANCE, OP_SET_LOC):
        pass  # location changes in the CIE's initial instructions have no effect
    else:
        rule = _rule_for(op)
        if rule is None:
            raise CfiError(f"operation {CFA_NAMES.get(code, hex(code))} has no register rule")
        state.registers[a] = rule
