"""The one DWARF CFA interpreter: the frame rules a CIE's initial instructions and an FDE's
instructions give at each PC (DWARF 5 6.4.1-6.4.2), for the three columns a stack walk needs.

DWARF 5 6.4.1 describes the call-frame information as a table: one row per code location,
one column for the CFA and one per register.  :func:`interpret_program` executes the CIE's
initial instructions, then the FDE's (DWARF 5 6.4.2), and gives the table's rows for the CFA,
the frame pointer and the return address, as :class:`Rules`:

* the CFA: a register plus an offset (``DW_CFA_def_cfa`` and friends), that address
  dereferenced (an expression ``DW_OP_bregN off; DW_OP_deref``), or another expression;
* the FP and the RA: not saved (``DW_CFA_same_value``, or no rule at all: the register still
  holds the caller's value; on AArch64 and s390x the return address then is in the link
  register), saved at CFA+N (``DW_CFA_offset``), saved at register+N (``DW_CFA_expression``
  ``DW_OP_bregR N``), the value CFA+N (``DW_CFA_val_offset``), the value register+N
  (``DW_CFA_register``: N = 0, or ``DW_CFA_val_expression``), undefined, or another
  expression (:mod:`pysframe.generate.expression` reduces them);
* AArch64: whether the return address is signed (``DW_CFA_AARCH64_negate_ra_state`` toggles
  RA_SIGN_STATE; ``..._with_pc`` signs it with the PC as well).

``DW_CFA_restore`` returns to the rule the CIE's initial instructions set;
``DW_CFA_remember_state`` / ``DW_CFA_restore_state`` save and restore every rule, the CFA's
included (as libgcc's and GDB's unwinders do).  Each row also says whether an instruction set
one of its rules since the row began (``changed``): GNU as writes an SFrame row at each advance
that follows such an instruction.

The rules are read the DWARF way, or as a producer reads them (:class:`Quirk`), and a reader
may judge each instruction before it is applied (``check``): GNU as' translation to SFrame
(:mod:`pysframe.generate.translator`) refuses what SFrame cannot say and skips what it
ignores.  Whether SFrame can hold the rows is that module's business, not this one's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import IntEnum, IntFlag
from typing import NamedTuple

from ..dataclass import dataclass
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
    #: :func:`pysframe.generate.expression.evaluate`).
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
    #: (GNU as 2.40 to 2.47, gas/gen-sframe.c ``sframe_xlate_do_restore``) ``.cfi_restore``
    #: returns to the rule of the function's first row GNU as writes (``first_fre``), not to
    #: the CIE's; before that row, the rule in effect stays (PR gas/33170).
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
    """A row of one program: its first PC (offset from the FDE's start), its rules, for a CFA
    of kind PER_PC the expression to evaluate at each PC, and whether an instruction set one
    of its rules since the row began (for the first row: since the CIE's first instruction)."""

    begin: int
    rules: Rules
    cfa_expression: bytes | None = None
    changed: bool = True


class Program(NamedTuple):
    """What one FDE's program gives: its rows, and whether they depend on where the FDE is
    (DW_CFA_set_loc, or a CFA expression that reads the PC)."""

    rows: list[Row]
    position_dependent: bool


#: What a reader's ``check`` of an instruction may say (or a string: why the whole program is
#: refused): apply it; skip it; skip it, yet count it as a change of the row's rules.
APPLY, SKIP, SKIP_AS_CHANGE = 0, 1, 3

#: ``check(op, a, b, cfa_kind, cfa_reg, ra_kind, has_row, remembered)``: the reader's
#: judgement of an instruction that sets rules before it is applied (advances are always
#: applied), seeing the interpreter's state: the CFA's kind and register, the RA's kind,
#: whether a row has begun (a CFA rule given, or the location moved) and how many states are
#: remembered.
Check = Callable[[int, int, "int | bytes", int, int, int, bool, int], "int | str"]


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


#: Marks the end of the CIE's initial instructions in the stream the interpreter runs.
_CIE_END = -1
_NO_CFA = int(CfaKind.NONE)
#: The instructions that set the CFA rule (but DW_CFA_def_cfa_offset), or an FP or RA rule.
_SETS_CFA = frozenset((OP_DEF_CFA, OP_DEF_CFA_REGISTER, OP_DEF_CFA_EXPRESSION))
_REGISTER_RULES = frozenset((OP_OFFSET, OP_VAL_OFFSET, OP_REGISTER, OP_EXPRESSION,
                             OP_VAL_EXPRESSION))  # fmt: skip


# About 150 lines on purpose: one branch per CFA operation (DWARF 5 6.4.2) over the rules of
# the row being built, held in local variables; split into a function per operation, each
# would take and give back those values.
def interpret_program(
    ops: Sequence[Op],
    cfi_abi: CfiAbi,
    *,
    initial_ops: Sequence[Op] = (),
    pc_begin: int = 0,
    big_endian: bool = False,
    quirks: Quirk = Quirk.NONE,
    check: Check | None = None,
) -> Program | str:
    """The rows of an FDE's program ``ops`` after its CIE's ``initial_ops`` (DWARF 5 6.4.2):
    DW_CFA_restore returns to the rules in effect after ``initial_ops``.  ``pc_begin`` is
    the FDE's start (DW_CFA_set_loc gives addresses).  ``quirks`` reads the program the way a
    producer did instead; ``check`` judges each instruction first.  Returns why the program
    cannot be read as a table instead (a string)."""
    fp, ra = cfi_abi.fp, cfi_abi.ra
    cfa_kind: int = CfaKind.NONE
    cfa_reg, cfa_offset = -1, 0
    fp_rule: RegRule = _SAME
    ra_rule: RegRule = _SAME
    mangled = NOT_SIGNED
    cfa_expression: bytes | None = None
    restore: Rules = NO_RULES
    dependent = False
    changed = False
    in_cie = True
    stack: list[tuple[int, int, int, RegRule, RegRule, int, bytes | None]] = []
    rows: list[Row] = []
    first_written: Rules | None = None
    loc = 0
    new = tuple.__new__  # Rules and Row without their constructors' Python frames
    for code, a, b in (*initial_ops, (_CIE_END, 0, 0), *ops):
        if code in (OP_ADVANCE, OP_SET_LOC):  # DWARF 5 6.4.2.1
            target = loc + a if code == OP_ADVANCE else a - pc_begin
            if code == OP_SET_LOC:
                dependent = True
                if target < loc:
                    return "DW_CFA_set_loc moves backwards"
            if target > loc:
                if in_cie:
                    return "the CIE's initial instructions advance the location"
                rules = new(Rules, (cfa_kind, cfa_reg, cfa_offset, *fp_rule, *ra_rule, mangled))
                if first_written is None and changed and (rows or cfa_kind != _NO_CFA):
                    first_written = rules
                rows.append(new(Row, (loc, rules, cfa_expression, changed)))
                changed = False
                loc = target
            continue
        if code == _CIE_END:
            in_cie = False
            restore = Rules(cfa_kind, cfa_reg, cfa_offset, *fp_rule, *ra_rule, mangled)
            continue
        if check is not None:
            has_row = loc > 0 or cfa_kind != _NO_CFA
            verdict = check(code, a, b, cfa_kind, cfa_reg, ra_rule[0], has_row, len(stack))
            if verdict:
                if isinstance(verdict, str):
                    return verdict
                changed = changed or verdict == SKIP_AS_CHANGE
                continue
        if code == OP_DEF_CFA_OFFSET:  # the most frequent, with advances
            cfa_offset = a  # the kind stays (libgcc: "cfa_how deliberately not set")
            changed = True
            continue
        if code in _SETS_CFA:
            if code == OP_DEF_CFA:
                assert isinstance(b, int)
                cfa_kind, cfa_reg, cfa_offset, cfa_expression = CfaKind.REG, a, b, None
            elif code == OP_DEF_CFA_REGISTER:
                cfa_kind, cfa_reg, cfa_expression = CfaKind.REG, a, None
            else:
                assert isinstance(b, bytes)
                cfa_kind, cfa_reg, cfa_offset = cfa_expression_rule(b, cfi_abi, big_endian)
                cfa_expression = b if cfa_kind == CfaKind.PER_PC else None
                dependent = dependent or cfa_expression is not None
            changed = True
        elif code in _REGISTER_RULES:
            if a in (fp, ra):
                rule = register_rule(code, b, cfi_abi, big_endian)
                if a == fp:
                    fp_rule = rule
                else:
                    ra_rule = rule
                changed = True
        elif code in (OP_RESTORE, OP_SAME_VALUE, OP_UNDEFINED):
            if a != fp and a != ra:
                continue
            if code == OP_RESTORE:
                source = restore
                if quirks & Quirk.RESTORE_TO_FIRST_ROW:
                    source = first_written or Rules(
                        cfa_kind, cfa_reg, cfa_offset, *fp_rule, *ra_rule, mangled
                    )
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
            else:
                ra_rule = ra_value
            changed = True
        elif code == OP_REMEMBER:
            if quirks & Quirk.REMEMBER_LAST_ROW and rows:
                last, written = rows[-1].rules, rows[-1].cfa_expression
                stack.append((*last[0:3], last[3:6], last[6:9], last.mangled, written))
            else:
                stack.append(
                    (cfa_kind, cfa_reg, cfa_offset, fp_rule, ra_rule, mangled, cfa_expression)
                )
        elif code == OP_RESTORE_STATE:
            if not stack:
                return "DW_CFA_restore_state without DW_CFA_remember_state"
            cfa_kind, cfa_reg, cfa_offset, fp_rule, ra_rule, mangled, cfa_expression = stack.pop()
            changed = True
        elif code in (OP_WINDOW_SAVE, OP_NEGATE_RA_WITH_PC):
            if not cfi_abi.aarch64:
                if code == OP_WINDOW_SAVE:
                    return "DW_CFA_GNU_window_save (SPARC) outside SPARC"
                return "DW_CFA_AARCH64_negate_ra_state_with_pc outside AArch64"
            # DW_CFA_AARCH64_negate_ra_state; ..._with_pc signs with the PC as well.
            signed = SIGNED if code == OP_WINDOW_SAVE else SIGNED_WITH_PC
            mangled = NOT_SIGNED if mangled else signed
            changed = True
        elif code != OP_ARGS_SIZE:  # the size of outgoing arguments changes no rule
            return f"CFA instruction {code:#x} is not understood"
    rows.append(
        Row(
            loc,
            Rules(cfa_kind, cfa_reg, cfa_offset, *fp_rule, *ra_rule, mangled),
            cfa_expression,
            changed,
        )
    )
    return Program(rows, dependent)


def decode_error(error: CfiError) -> str:
    """The reason an unreadable program gives."""
    return f"unreadable CFI: {error}"


__all__ = [
    "APPLY",
    "GAS_2_40",
    "NOT_SIGNED",
    "NO_RULES",
    "SIGNED",
    "SIGNED_WITH_PC",
    "SKIP",
    "SKIP_AS_CHANGE",
    "CfaKind",
    "CfiAbi",
    "Check",
    "Program",
    "Quirk",
    "RegKind",
    "Row",
    "Rules",
    "cfa_expression_rule",
    "decode_error",
    "interpret_program",
    "register_rule",
]
