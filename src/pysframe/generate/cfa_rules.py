"""The frame rules DWARF CFI gives at each PC, read with DWARF's own semantics (not gas').

DWARF 5 6.4.1 describes the call-frame information as a table: one row per code location,
one column for the CFA and one per register.  :func:`interpret_program` executes a CIE's
initial instructions and an FDE's instructions (DWARF 5 6.4.2) and gives the table's rows for
the three columns a stack walk needs, the CFA, the frame pointer and the return address, as
:class:`Rules`:

* the CFA: a register plus an offset (``DW_CFA_def_cfa`` and friends), that address
  dereferenced (an expression ``DW_OP_bregN off; DW_OP_deref``), or another expression;
* the FP and the RA: not saved (``DW_CFA_same_value``, or no rule at all: the register still
  holds the caller's value; on AArch64 and s390x the return address then is in the link
  register), saved at CFA+N (``DW_CFA_offset``), saved at register+N (``DW_CFA_expression``
  ``DW_OP_bregR N``), the value CFA+N (``DW_CFA_val_offset``), the value register+N
  (``DW_CFA_register``: N = 0, or ``DW_CFA_val_expression``), undefined, or another
  expression;
* AArch64: whether the return address is signed (``DW_CFA_AARCH64_negate_ra_state`` toggles
  RA_SIGN_STATE; ``..._with_pc`` signs it with the PC as well).

``DW_CFA_restore`` returns to the rule the CIE's initial instructions set;
``DW_CFA_remember_state`` / ``DW_CFA_restore_state`` save and restore every rule, the CFA's
included (as libgcc's and GDB's unwinders do).  The rows are what the CFI says and nothing
else: whether SFrame can hold them is the business of :mod:`pysframe.generate.translator`.

:mod:`pysframe.generate.interpret_bulk` gives the same rows for the common programs of a whole
section with numpy; this module is its reference and handles everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import NamedTuple

from ..errors import CfiError
from ..format.constants import Abi, DwarfReg
from .expression import CFA_BASE, evaluate, reads_pc
from .ops import (
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
)
from .translator import restore_source


class CfaKind(IntEnum):
    """How the CFA is computed."""

    #: No CFA rule has been given.
    NONE = 0
    #: register + offset.
    REG = 1
    #: The word at register + offset.
    DEREF = 2
    #: An expression that is neither.
    OTHER = 3
    #: An expression that reads the program counter: the rows are per PC (see
    #: :func:`pysframe.generate.expression.evaluate`); only inside the interpreter.
    PER_PC = 4


class RegKind(IntEnum):
    """How the caller's value of a register (the FP or the RA) is recovered."""

    #: Not saved: the register still holds it (DW_CFA_same_value, or no rule).
    SAME = 0
    #: Saved at CFA + offset.
    AT_CFA = 1
    #: Saved at register + offset.
    AT_REG = 2
    #: The value is CFA + offset.
    VAL_CFA = 3
    #: The value is register + offset (offset 0: it is in that register).
    VAL_REG = 4
    #: Undefined (for the RA: this is the outermost frame).
    UNDEFINED = 5
    #: An expression that is none of the above.
    OTHER = 6


#: Values of the mangled column: the RA is not signed, signed (AArch64 PAC), signed with the
#: PC as a diversifier as well (DW_CFA_AARCH64_negate_ra_state_with_pc).
NOT_SIGNED, SIGNED, SIGNED_WITH_PC = 0, 1, 2


class Quirk(IntFlag):
    """Ways a producer reads CFI other than DWARF does, to tell its sections' differences
    apart from errors.  GNU as 2.40 (the SFrame V1 writer), found by assembling the same
    directives with it and with 2.47 (``GAS_2_40``), and the rules of every GNU as since:"""

    NONE = 0
    #: ``.cfi_same_value`` of the FP is ignored (the FP stays saved).
    FP_SAME_VALUE_IGNORED = 1
    #: ``.cfi_undefined`` of the RA is ignored (V1 cannot say it; the RA stays where it was).
    RA_UNDEFINED_IGNORED = 2
    #: ``.cfi_remember_state`` remembers the last row written, not the rules in effect.
    REMEMBER_LAST_ROW = 4
    #: (GNU as 2.40 to 2.47) ``.cfi_restore`` returns to the function's first row's rule (the
    #: rules in effect when no row is written yet), not to the CIE's: the translator's rule,
    #: :func:`pysframe.generate.translator.restore_source`.
    RESTORE_TO_FIRST_ROW = 8


#: GNU as 2.40's ways.
GAS_2_40 = (
    Quirk.FP_SAME_VALUE_IGNORED
    | Quirk.RA_UNDEFINED_IGNORED
    | Quirk.REMEMBER_LAST_ROW
    | Quirk.RESTORE_TO_FIRST_ROW
)

#: A register rule: (RegKind, register or -1, offset).
RegRule = tuple[int, int, int]

_SAME: RegRule = (RegKind.SAME, -1, 0)
_UNDEFINED_RULE: RegRule = (RegKind.UNDEFINED, -1, 0)
_OTHER_RULE: RegRule = (RegKind.OTHER, -1, 0)


class Rules(NamedTuple):
    """One row's rules: CFA, FP and RA (registers -1 where the kind has none)."""

    cfa_kind: int
    cfa_reg: int
    cfa_offset: int
    fp_kind: int
    fp_reg: int
    fp_offset: int
    ra_kind: int
    ra_reg: int
    ra_offset: int
    mangled: int


#: Before a CIE's first instruction: no CFA, FP and RA not saved.
NO_RULES = Rules(CfaKind.NONE, -1, 0, *_SAME, *_SAME, NOT_SIGNED)


@dataclass(frozen=True, slots=True)
class CfiAbi:
    """The registers the rules are about, for one ABI (docs/format.md, "DWARF register
    numbers")."""

    fp: int
    ra: int
    #: The program counter's DWARF number, where expressions may read it (x86-64 RIP, 16).
    pc: int | None
    aarch64: bool

    @classmethod
    def of(cls, abi: Abi) -> CfiAbi:
        pc = DwarfReg.RA[abi] if abi is Abi.AMD64_ENDIAN_LITTLE else None
        return cls(DwarfReg.FP[abi], DwarfReg.RA[abi], pc, abi.is_aarch64)


class Row(NamedTuple):
    """A row of one program: its first PC (offset from the FDE's start), its rules and, for a
    CFA of kind PER_PC, the expression to evaluate at each PC."""

    begin: int
    rules: Rules
    cfa_expression: bytes | None = None


class Program(NamedTuple):
    """What one FDE's program gives: its rows, and whether they depend on where the FDE is
    (DW_CFA_set_loc, or a CFA expression that reads the PC)."""

    rows: list[Row]
    position_dependent: bool


def register_rule(code: int, b: int | bytes, cfi_abi: CfiAbi, big_endian: bool) -> RegRule:
    """The rule DW_CFA_offset / val_offset / register / expression / val_expression give."""
    if code == OP_OFFSET:
        assert isinstance(b, int)
        return (RegKind.AT_CFA, -1, b)
    if code == OP_VAL_OFFSET:
        assert isinstance(b, int)
        return (RegKind.VAL_CFA, -1, b)
    if code == OP_REGISTER:
        assert isinstance(b, int)
        return (RegKind.VAL_REG, b, 0)
    assert isinstance(b, bytes)
    reduced = evaluate(b, push_cfa=True, big_endian=big_endian, pc_register=cfi_abi.pc)
    if reduced is None or reduced.base is None:
        return _OTHER_RULE
    # DW_CFA_expression gives the address the value is saved at; DW_CFA_val_expression the
    # value, which is a saved one when the expression ends by reading memory.
    saved = code == OP_EXPRESSION or reduced.deref
    if code == OP_EXPRESSION and reduced.deref:
        return _OTHER_RULE
    if reduced.base == CFA_BASE:
        return (RegKind.AT_CFA if saved else RegKind.VAL_CFA, -1, int(reduced.offset))
    return (RegKind.AT_REG if saved else RegKind.VAL_REG, reduced.base, int(reduced.offset))


def cfa_expression_rule(
    expression: bytes, cfi_abi: CfiAbi, big_endian: bool
) -> tuple[int, int, int]:
    """(CfaKind, register, offset) of DW_CFA_def_cfa_expression (PER_PC: evaluate per PC)."""
    if reads_pc(expression, cfi_abi.pc):
        return (CfaKind.PER_PC, -1, 0)
    reduced = evaluate(expression, push_cfa=False, big_endian=big_endian, pc_register=cfi_abi.pc)
    if reduced is None or reduced.base is None or reduced.base == CFA_BASE:
        return (CfaKind.OTHER, -1, 0)
    return (CfaKind.DEREF if reduced.deref else CfaKind.REG, reduced.base, int(reduced.offset))


# About 120 lines on purpose: one branch per CFA operation (DWARF 5 6.4.2) over the ten rules
# of the row being built, held in local variables; split into a function per operation, each
# would take and give back those ten values (and a call per instruction costs about 7% of the
# loop, measured on libLLVM-15).
def interpret_program(
    ops: Sequence[Op],
    cfi_abi: CfiAbi,
    initial: Rules = NO_RULES,
    *,
    initial_expression: bytes | None = None,
    restore_to: Rules | None = None,
    pc_begin: int = 0,
    big_endian: bool = False,
    quirks: Quirk = Quirk.NONE,
) -> Program | str:
    """The rows of a CFA program (DWARF 5 6.4.2), starting from ``initial`` (the state after
    the CIE's initial instructions; ``restore_to`` is where DW_CFA_restore returns to, the same
    by default; ``initial_expression`` the expression of a PER_PC CFA in ``initial``).
    ``pc_begin`` is the FDE's start (DW_CFA_set_loc gives addresses).  ``quirks`` reads it
    the way a producer did instead.  Returns why the program cannot be read as a table
    instead (a string)."""
    restore = initial if restore_to is None else restore_to
    fp, ra = cfi_abi.fp, cfi_abi.ra
    cfa_kind, cfa_reg, cfa_offset = initial[0:3]
    fp_rule: RegRule = initial[3:6]
    ra_rule: RegRule = initial[6:9]
    mangled = initial.mangled
    cfa_expression = initial_expression if cfa_kind == CfaKind.PER_PC else None
    dependent = cfa_expression is not None
    stack: list[tuple[int, int, int, RegRule, RegRule, int, bytes | None]] = []
    rows: list[Row] = []
    loc = 0
    for code, a, b in ops:
        if code in (OP_ADVANCE, OP_SET_LOC):
            target = loc + a if code == OP_ADVANCE else a - pc_begin
            if code == OP_SET_LOC:
                dependent = True
                if target < loc:
                    return "DW_CFA_set_loc moves backwards"
            if target > loc:
                rows.append(
                    Row(
                        loc,
                        Rules(cfa_kind, cfa_reg, cfa_offset, *fp_rule, *ra_rule, mangled),
                        cfa_expression,
                    )
                )
                loc = target
        elif code == OP_DEF_CFA_OFFSET:
            cfa_offset = a  # the kind stays (libgcc: "cfa_how deliberately not set")
        elif code == OP_DEF_CFA:
            assert isinstance(b, int)
            cfa_kind, cfa_reg, cfa_offset, cfa_expression = CfaKind.REG, a, b, None
        elif code == OP_DEF_CFA_REGISTER:
            cfa_kind, cfa_reg, cfa_expression = CfaKind.REG, a, None
        elif code == OP_DEF_CFA_EXPRESSION:
            assert isinstance(b, bytes)
            cfa_kind, cfa_reg, cfa_offset = cfa_expression_rule(b, cfi_abi, big_endian)
            cfa_expression = b if cfa_kind == CfaKind.PER_PC else None
            dependent = dependent or cfa_expression is not None
        elif code in (OP_OFFSET, OP_VAL_OFFSET, OP_REGISTER, OP_EXPRESSION, OP_VAL_EXPRESSION):
            if a in (fp, ra):
                rule = register_rule(code, b, cfi_abi, big_endian)
                if code == OP_REGISTER and b == a:
                    rule = _SAME  # "saved in itself"
                if a == fp:
                    fp_rule = rule
                if a == ra:
                    ra_rule = rule
        elif code in (OP_RESTORE, OP_SAME_VALUE, OP_UNDEFINED):
            if code == OP_RESTORE:
                source = restore
                if quirks & Quirk.RESTORE_TO_FIRST_ROW:
                    in_effect = Rules(cfa_kind, cfa_reg, cfa_offset, *fp_rule, *ra_rule, mangled)
                    source = restore_source(rows[0].rules if rows else None, in_effect)
                fp_value, ra_value = source[3:6], source[6:9]
            elif code == OP_SAME_VALUE:
                fp_value = ra_value = _SAME
                if quirks & Quirk.FP_SAME_VALUE_IGNORED:
                    fp_value = fp_rule
            else:
                fp_value = ra_value = _UNDEFINED_RULE
                if quirks & Quirk.RA_UNDEFINED_IGNORED:
                    ra_value = ra_rule
            if a == fp:
                fp_rule = fp_value
            if a == ra:
                ra_rule = ra_value
        elif code == OP_REMEMBER:
            if quirks & Quirk.REMEMBER_LAST_ROW and rows:
                last, written = rows[-1].rules, rows[-1].cfa_expression
                stack.append(
                    (
                        last.cfa_kind,
                        last.cfa_reg,
                        last.cfa_offset,
                        (last.fp_kind, last.fp_reg, last.fp_offset),
                        (last.ra_kind, last.ra_reg, last.ra_offset),
                        last.mangled,
                        written,
                    )
                )
            else:
                stack.append(
                    (cfa_kind, cfa_reg, cfa_offset, fp_rule, ra_rule, mangled, cfa_expression)
                )
        elif code == OP_RESTORE_STATE:
            if not stack:
                return "DW_CFA_restore_state without DW_CFA_remember_state"
            cfa_kind, cfa_reg, cfa_offset, fp_rule, ra_rule, mangled, cfa_expression = stack.pop()
        elif code == OP_WINDOW_SAVE:
            if not cfi_abi.aarch64:
                return "DW_CFA_GNU_window_save (SPARC) outside SPARC"
            mangled = NOT_SIGNED if mangled else SIGNED  # DW_CFA_AARCH64_negate_ra_state
        elif code == OP_NEGATE_RA_WITH_PC:
            if not cfi_abi.aarch64:
                return "DW_CFA_AARCH64_negate_ra_state_with_pc outside AArch64"
            mangled = NOT_SIGNED if mangled else SIGNED_WITH_PC
        elif code == OP_ARGS_SIZE:
            continue  # the size of outgoing arguments changes no rule
        else:
            return f"CFA instruction {code:#x} is not understood"
    rows.append(
        Row(loc, Rules(cfa_kind, cfa_reg, cfa_offset, *fp_rule, *ra_rule, mangled), cfa_expression)
    )
    return Program(rows, dependent)


def initial_rules(
    ops: Sequence[Op], cfi_abi: CfiAbi, big_endian: bool = False, quirks: Quirk = Quirk.NONE
) -> tuple[Rules, bytes | None] | str:
    """The rules after a CIE's initial instructions (and a PER_PC CFA's expression), or why
    they cannot be had (an initial instruction that advances, or any other problem)."""
    program = interpret_program(ops, cfi_abi, big_endian=big_endian, quirks=quirks)
    if isinstance(program, str):
        return program
    if len(program.rows) != 1:
        return "the CIE's initial instructions advance the location"
    row = program.rows[0]
    return row.rules, row.cfa_expression


def decode_error(error: CfiError) -> str:
    """The reason an unreadable program gives."""
    return f"unreadable CFI: {error}"


__all__ = [
    "GAS_2_40",
    "NOT_SIGNED",
    "NO_RULES",
    "SIGNED",
    "SIGNED_WITH_PC",
    "CfaKind",
    "CfiAbi",
    "Program",
    "Quirk",
    "RegKind",
    "Row",
    "Rules",
    "cfa_expression_rule",
    "decode_error",
    "initial_rules",
    "interpret_program",
    "register_rule",
]
