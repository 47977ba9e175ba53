"""GNU as 2.47's rules for turning one function's CFA operations into SFrame rows.

This follows gas/gen-sframe.c: ``sframe_do_fde`` reads the CIE's initial instructions and the
FDE's as one stream, ``sframe_do_cfi_insn`` applies each (``sframe_xlate_do_advance_loc``,
``sframe_xlate_do_def_cfa``, ``..._def_cfa_register``, ``..._def_cfa_offset``,
``..._offset``, ``..._val_offset``, ``..._remember_state``, ``..._restore_state``,
``..._restore``, ``..._gnu_window_save`` (AArch64 ``negate_ra_state``),
``..._aarch64_negate_ra_state_with_pc``, ``..._register``, ``..._cfi_escape`` with
``..._escape_cfa_expr``, ``..._escape_expr``, ``..._escape_gnu_args_size``,
``..._cfi_undefined``, ``..._same_value``), and ``sframe_do_fde``'s checks (at most
UINT16_MAX FREs, no FP on the stack without the RA) follow the last instruction.

Rows carry the CFA (SP/FP + offset, or for V3 FLEX FDEs any register, optionally
dereferenced), the FP and the RA (saved on the stack at CFA+offset, or in a register for
FLEX); a row is written at each advance that follows a state change; AArch64
``negate_ra_state`` toggles the mangled-RA bit; ``DW_CFA_undefined`` of the RA writes a
zero-word FRE (outermost frame).  A function whose CFI cannot be represented is refused with
the reason gas would warn with ("no SFrame FDE emitted; ...").

Deliberate differences from gas, where gas' result would not describe the code:

* ``DW_CFA_def_cfa_register`` keeps the current CFA offset (gas takes the offset of the last
  written row, losing a ``def_cfa_offset`` at the same address).
* ``remember_state`` / ``restore_state`` use a stack (gas keeps one slot); ``restore_state``
  without a remembered state refuses the function.
* A zero ``advance_loc`` is ignored; rows at or beyond the end of the function are dropped.
* An s390x CFA offset that is not 160 plus a multiple of 8 refuses the function (gas would
  truncate it); a row without a CFA rule refuses the function.

:func:`translate_ops` is the hot loop of the per-function path (one Python turn per
instruction, the rules in local variables); :mod:`pysframe.generate.bulk` applies the same
rules to the common programs of a whole section at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ..format.constants import (
    S390X_CFA_OFFSET_ADJUSTMENT,
    S390X_CFA_OFFSET_ALIGNMENT,
    S390X_SP_VAL_OFFSET,
    Abi,
)
from .cfi import read_sleb
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
from .rows import (
    EMPTY_STATE,
    LOC_NONE,
    LOC_REG,
    LOC_STACK,
    MAX_FRES,
    REG_INVALID,
    AbiParams,
    RowState,
    Translation,
)

#: The start of every reason gas gives for leaving a function out.
NO_FDE = "no SFrame FDE emitted; "
#: gas' reason for a function of more rows than an FDE can count (``sframe_do_fde``).
TOO_MANY_FRES = NO_FDE + "Number of FREs exceeds UINT16_MAX"

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1

# DWARF expression opcodes (DWARF 5 7.7.1) of the one CFA expression gas accepts.
DW_OP_deref = 0x06
DW_OP_breg0 = 0x70


def translate(ops: Iterable[Op], size: int, params: AbiParams) -> Translation | str:
    """Translate one function's CFA operations to SFrame rows, or return why it cannot be.

    ``ops`` is the CIE's initial instructions followed by the FDE's (see
    :func:`pysframe.generate.ops.decode_instructions`); ``size`` is the function size in bytes.
    """
    result = translate_ops(ops, params)
    if isinstance(result, str):
        return result
    return finish(result, size, params)


#: Row states by their fields, so that equal rows are one object (see :func:`translate_ops`).
StateTable = dict[tuple[Any, ...], RowState[int]]

# Positions of the RowState fields in the scratch row of translate_ops.
_FIELD = {name: position for position, name in enumerate(RowState._fields)}
CFA_REG = _FIELD["cfa_reg"]
CFA_OFFSET = _FIELD["cfa_offset"]
CFA_DEREF = _FIELD["cfa_deref"]
FP_LOC = _FIELD["fp_loc"]
FP_REG = _FIELD["fp_reg"]
FP_OFFSET = _FIELD["fp_offset"]
FP_DEREF = _FIELD["fp_deref"]
RA_LOC = _FIELD["ra_loc"]
RA_REG = _FIELD["ra_reg"]
RA_OFFSET = _FIELD["ra_offset"]
RA_DEREF = _FIELD["ra_deref"]
MANGLED_RA = _FIELD["mangled_ra"]
RA_UNDEFINED = _FIELD["ra_undefined"]


# About 150 lines on purpose: the per-function path's loop over instructions (DWARF 5 6.4.2), the
# common ones handled inline on a scratch row in local variables.  A call per instruction would
# cost about 13% of the loop (measured on libLLVM-15's 35,000 distinct programs: 163 ns a call,
# 1.2 us an instruction); the rare instructions go to _apply_other's handlers.
def translate_ops(
    ops: Iterable[Op], params: AbiParams, states: StateTable | None = None
) -> Translation | str:
    """The rows of :func:`translate` before the end-of-function checks (any row start).

    ``states`` keeps the distinct row states; give one table to the calls of a section (a
    section has a few hundred distinct rows, repeated in thousands of functions) and each row
    is a look-up, not a new object.

    The loop handles the instructions nearly every program is made of; the others go to
    :func:`_apply_other`.
    """
    sp, fp, ra = params.sp, params.fp, params.ra
    ra_tracking = params.ra_tracking
    flex_ok = params.flex
    s390x = params.s390x
    if states is None:
        states = {}
    known = states.get
    add = states.setdefault
    new = tuple.__new__
    flex = False
    # Only DW_CFA_undefined of the RA makes rows with an undefined RA.
    undefined_seen = False
    # The scratch row (gas cur_fre): its rules by RowState field, and where it starts.
    # has_row False: no scratch row yet; dirty: its rules changed since the last row.
    row = list(EMPTY_STATE)
    has_row = False
    begin = 0
    dirty = False
    rows: list[tuple[int, RowState[int]]] = []
    stack: list[tuple[Any, ...]] = []
    loc = 0
    for code, a, b in ops:
        if code in (OP_ADVANCE, OP_SET_LOC):
            target = loc + a if code == OP_ADVANCE else a
            if target <= loc:
                if target < loc:
                    return "DW_CFA_set_loc moves backwards"
                continue
            loc = target
            if has_row and dirty:
                state = tuple(row)
                rows.append((begin, known(state) or add(state, new(RowState, state))))
                dirty = False
            has_row = True
            begin = target
            continue
        if code == OP_DEF_CFA_OFFSET:
            if not has_row or row[CFA_REG] == REG_INVALID:
                return NO_FDE + ".cfi_def_cfa_offset without CFA base register in effect"
            if not _INT32_MIN <= a <= _INT32_MAX:
                return NO_FDE + ".cfi_def_cfa_offset with unsupported offset value"
            row[CFA_OFFSET] = a
            dirty = True
        elif code == OP_OFFSET:
            assert isinstance(b, int)
            if a == fp:
                row[FP_LOC] = LOC_STACK
                row[FP_OFFSET] = b
                row[FP_REG] = REG_INVALID
                row[FP_DEREF] = True
                dirty = True
            elif a == ra:
                if not ra_tracking and b == params.cfa_ra_offset:
                    row[RA_LOC] = LOC_NONE
                    row[RA_REG] = REG_INVALID
                    row[RA_DEREF] = False
                else:
                    row[RA_LOC] = LOC_STACK
                    row[RA_OFFSET] = b
                    row[RA_REG] = REG_INVALID
                    row[RA_DEREF] = True
                    row[RA_UNDEFINED] = False
                    if not ra_tracking:
                        if not flex_ok:
                            return f"{NO_FDE}RA register {ra} in .cfi_offset"
                        flex = True
                dirty = True
            if not has_row and dirty:
                return NO_FDE + "CFI before any CFA rule"
        elif code == OP_DEF_CFA:
            assert isinstance(b, int)
            if not _offset_ok(b, s390x):
                return NO_FDE + ".cfi_def_cfa with unsupported offset value"
            if a != sp and a != fp:
                if not flex_ok:
                    return f"{NO_FDE}non-SP/FP register {a} in .cfi_def_cfa"
                flex = True
            if not has_row:
                has_row, begin = True, 0
            row[CFA_REG] = a
            row[CFA_OFFSET] = b
            row[CFA_DEREF] = False
            dirty = True
        elif code == OP_DEF_CFA_REGISTER:
            if a != sp and a != fp:
                if not flex_ok:
                    return f"{NO_FDE}non-SP/FP register {a} in .cfi_def_cfa_register"
                flex = True
            if not has_row:
                return NO_FDE + ".cfi_def_cfa_register without prior SFrame FRE state"
            row[CFA_REG] = a
            row[CFA_DEREF] = False
            dirty = True
        elif code == OP_RESTORE:
            if not has_row:
                continue
            if a == fp or (ra_tracking and a == ra):
                # gas copies the location and offset (and the RA's undefined bit) only.
                source = restore_source(rows[0][1] if rows else None, row)
                if a == fp:
                    row[FP_LOC] = source[FP_LOC]
                    row[FP_OFFSET] = source[FP_OFFSET]
                else:
                    row[RA_LOC] = source[RA_LOC]
                    row[RA_OFFSET] = source[RA_OFFSET]
                    row[RA_UNDEFINED] = source[RA_UNDEFINED]
                dirty = True
        elif code == OP_REMEMBER:
            if not has_row:
                return NO_FDE + ".cfi_remember_state without prior SFrame FRE state"
            stack.append(tuple(row))
        elif code == OP_RESTORE_STATE:
            if not stack:
                return NO_FDE + ".cfi_restore_state without .cfi_remember_state"
            row[:] = stack.pop()
            dirty = True
        elif code == OP_WINDOW_SAVE:
            if not params.aarch64:
                return NO_FDE + ".cfi_window_save"
            if not has_row:
                return NO_FDE + "CFI before any CFA rule"
            row[MANGLED_RA] = not row[MANGLED_RA]
            dirty = True
        else:
            applied = _apply_other(row, code, a, b, has_row, params)
            if isinstance(applied, str):
                return applied
            if applied & _CHANGED:
                dirty = True
            if applied & _NEEDS_FLEX:
                flex = True
            if applied & _RA_UNDEFINED:
                undefined_seen = True
    if has_row:
        state = tuple(row)
        rows.append((begin, known(state) or add(state, new(RowState, state))))
    if undefined_seen:
        undefined_seen = any(state.ra_undefined for _begin, state in rows)
    return Translation(rows, flex, undefined_seen)


#: A row of rules, looked up by field (a translator's row, a DWARF interpreter's Rules).
RowT = TypeVar("RowT", bound=Sequence[Any])


def restore_source(first_row: RowT | None, in_effect: RowT) -> RowT:
    """The rules ``.cfi_restore`` (DW_CFA_restore) returns a register to, for GNU as 2.40 to
    2.47 (gas/gen-sframe.c ``sframe_xlate_do_restore``): the function's first row's
    (``xlate_ctx->first_fre``), not those of the CIE's initial instructions as DWARF says; before
    a row is written, the rules in effect (PR gas/33170, ``cie_fre = cur_fre``), which leaves
    the rule as it is.

    The translator writes SFrame rows with it; the DWARF interpreter reads CFI with it for
    ``Quirk.RESTORE_TO_FIRST_ROW`` (:mod:`pysframe.generate.cfa_rules`), so that ``verify``
    notes the difference as GNU as' own.  Rows of either kind: the rules are looked up by field.
    """
    return in_effect if first_row is None else first_row


# What _apply_other did to the scratch row.
_CHANGED = 1
_NEEDS_FLEX = 2
_RA_UNDEFINED = 4


def _apply_other(
    row: list[Any], code: int, a: int, b: int | bytes, has_row: bool, params: AbiParams
) -> int | str:
    """The instructions :func:`translate_ops` leaves out of its loop, applied to its scratch
    ``row``: _CHANGED, _NEEDS_FLEX and _RA_UNDEFINED bits, or why the function cannot be
    represented."""
    apply = _OTHER.get(code)
    if apply is None:
        return f"{NO_FDE}CFI insn ({code:#x})"
    done = apply(row, a, b, params)
    if done and not has_row and not isinstance(done, str):
        return NO_FDE + "CFI before any CFA rule"
    return done


def _val_offset(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """sframe_xlate_do_val_offset: refused for the FP, a tracked RA, and the SP at another
    offset than its own (0; s390x: S390X_SP_VAL_OFFSET)."""
    what = None
    if a == params.fp:
        what = "FP"
    elif params.ra_tracking and a == params.ra:
        what = "RA"
    elif a == params.sp and b != (S390X_SP_VAL_OFFSET if params.s390x else 0):
        what = "SP"
    return 0 if what is None else f"{NO_FDE}.cfi_val_offset with {what} reg {a}"


def _register(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """sframe_xlate_do_register: the FP or RA saved in register ``b`` (FLEX)."""
    assert isinstance(b, int)
    sp, fp, ra = params.sp, params.fp, params.ra
    if params.flex and a == fp:
        row[FP_LOC] = LOC_REG
        row[FP_REG] = b
        row[FP_OFFSET] = 0
        row[FP_DEREF] = False
        return _CHANGED | _NEEDS_FLEX
    if params.flex and a == ra:
        row[RA_LOC] = LOC_REG
        row[RA_REG] = b
        row[RA_OFFSET] = 0
        row[RA_DEREF] = False
        row[RA_UNDEFINED] = False
        return _CHANGED | _NEEDS_FLEX
    if a in (ra, fp) or (a == sp and not params.s390x):
        name = "SP" if a == sp else "FP" if a == fp else "RA"
        return f"{NO_FDE}{name} register {a} in .cfi_register"
    return 0


def _undefined(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """sframe_xlate_do_cfi_undefined: an undefined RA (outermost frame); refused for the FP
    and the SP."""
    if a in (params.fp, params.sp):
        return f"{NO_FDE}{'FP' if a == params.fp else 'SP'} reg {a} in .cfi_undefined"
    if a == params.ra:
        row[RA_UNDEFINED] = True
        return _CHANGED | _RA_UNDEFINED
    return 0


def _same_value(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """sframe_xlate_do_same_value: a tracked RA or the FP no longer saved."""
    if params.ra_tracking and a == params.ra:
        row[RA_LOC] = LOC_NONE
        row[RA_OFFSET] = 0
        row[RA_UNDEFINED] = False
        return _CHANGED
    if a == params.fp:
        row[FP_LOC] = LOC_NONE
        row[FP_OFFSET] = 0
        return _CHANGED
    return 0


def _negate_ra_with_pc(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """sframe_xlate_do_aarch64_negate_ra_state_with_pc: not representable."""
    return NO_FDE + ".cfi_negate_ra_state_with_pc"


def _args_size(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """sframe_xlate_do_escape_gnu_args_size: harmless when 0 or when the CFA is FP-based."""
    if a != 0 and row[CFA_REG] != params.fp:
        return f"{NO_FDE}.cfi_escape with op ({OP_ARGS_SIZE:#x})"
    return 0


def _def_cfa_expression(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """sframe_xlate_do_escape_cfa_expr: CFA = *(FP + N) (AMD64 DRAP), FLEX."""
    assert isinstance(b, bytes)
    parsed = _breg_deref(b, params)
    if parsed is None:
        return f"{NO_FDE}.cfi_escape with op ({OP_DEF_CFA_EXPRESSION:#x})"
    row[CFA_REG] = params.fp
    row[CFA_OFFSET] = parsed
    row[CFA_DEREF] = True
    return _CHANGED | _NEEDS_FLEX


def _expression(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """sframe_xlate_do_escape_expr: the FP saved at *(FP + N), FLEX; refused for the SP, the
    RA and the CFA's register."""
    assert isinstance(b, bytes)
    sp, fp, ra = params.sp, params.fp, params.ra
    if a == fp:
        offset = _breg_offset(b, params)
        if offset is None:
            return f"{NO_FDE}.cfi_escape DW_CFA_expression with FP reg {a}"
        row[FP_LOC] = LOC_REG
        row[FP_REG] = fp
        row[FP_OFFSET] = offset
        row[FP_DEREF] = True
        return _CHANGED | _NEEDS_FLEX
    if a in (sp, row[CFA_REG]) or a == ra:
        name = "SP" if a == sp else "RA" if a == ra else "CFA"
        return f"{NO_FDE}.cfi_escape DW_CFA_expression with {name} reg {a}"
    return 0


def _val_expression(row: list[Any], a: int, b: int | bytes, params: AbiParams) -> int | str:
    """DW_CFA_val_expression, in sframe_xlate_do_cfi_escape's default case: not representable."""
    return f"{NO_FDE}.cfi_escape with op ({OP_VAL_EXPRESSION:#x})"


#: The instructions of :func:`_apply_other`, by operation.
_OTHER: dict[int, Callable[[list[Any], int, int | bytes, AbiParams], int | str]] = {
    OP_VAL_OFFSET: _val_offset,
    OP_REGISTER: _register,
    OP_UNDEFINED: _undefined,
    OP_SAME_VALUE: _same_value,
    OP_NEGATE_RA_WITH_PC: _negate_ra_with_pc,
    OP_ARGS_SIZE: _args_size,
    OP_DEF_CFA_EXPRESSION: _def_cfa_expression,
    OP_EXPRESSION: _expression,
    OP_VAL_EXPRESSION: _val_expression,
}


def rows_before_end(
    rows: list[tuple[int, RowState[int]]], size: int
) -> list[tuple[int, RowState[int]]]:
    """The rows that start before the function's end, ``size`` bytes in (gas drops rows at or
    past the end of the function); ``rows`` itself when it drops none.  The bulk path's rule
    is :func:`pysframe.generate.fres_bulk.function_rows`."""
    if not rows or rows[-1][0] < size:
        return rows
    return [row for row in rows if row[0] < size]


def finish(translation: Translation, size: int, params: AbiParams) -> Translation | str:
    """gas' checks after the last instruction (``sframe_do_fde``), plus rows that would
    mislead an unwinder: the rows before ``size``, or why the function is left out."""
    kept = rows_before_end(translation.rows, size)
    if len(kept) > MAX_FRES:
        return TOO_MANY_FRES
    undefined = False
    for _begin, state in kept:
        if state.ra_undefined:
            undefined = True
            continue
        problem = row_problem(state, params)
        if problem:
            return NO_FDE + problem
    return Translation(kept, translation.flex, undefined)


def row_problem(state: RowState[int], params: AbiParams) -> str:
    """Why gas (or pysframe, see the module notes) refuses a row with a defined RA; "" when
    the row can be written."""
    if state.cfa_reg == REG_INVALID:
        return "a row has no CFA rule"
    if params.s390x and (state.cfa_offset - S390X_CFA_OFFSET_ADJUSTMENT) % (
        S390X_CFA_OFFSET_ALIGNMENT
    ):
        return f"s390x CFA offset {state.cfa_offset} is not 160 plus a multiple of 8"
    if (
        params.ra_tracking
        and not params.s390x
        and state.ra_loc != LOC_STACK
        and state.fp_loc == LOC_STACK
    ):
        return "FP without RA on stack"
    return ""


def _offset_ok(offset: int, s390x: bool) -> bool:
    """sframe_fre_stack_offset_bound_p: the stored CFA offset fits 32 bits."""
    if s390x:
        offset = int((offset - S390X_CFA_OFFSET_ADJUSTMENT) / S390X_CFA_OFFSET_ALIGNMENT)
    return _INT32_MIN <= offset <= _INT32_MAX


def _breg_deref(expr: bytes, params: AbiParams) -> int | None:
    """Offset N of ``DW_OP_breg<FP> N; DW_OP_deref`` in 3 bytes, the only CFA expression gas
    accepts (AMD64 DRAP: CFA = *(rbp + N)); None for anything else."""
    if params.abi is not Abi.AMD64_ENDIAN_LITTLE or len(expr) != 3:
        return None
    if expr[0] != DW_OP_breg0 + params.fp or expr[2] != DW_OP_deref or expr[1] >= 0x80:
        return None
    value, _ = read_sleb(expr, 1, 2)
    return value


def _breg_offset(expr: bytes, params: AbiParams) -> int | None:
    """Offset N of ``DW_OP_breg<FP> N`` in 2 bytes: the register is saved at *(FP + N)."""
    if params.abi is not Abi.AMD64_ENDIAN_LITTLE or len(expr) != 2:
        return None
    if expr[0] != DW_OP_breg0 + params.fp or expr[1] >= 0x80:
        return None
    value, _ = read_sleb(expr, 1, 2)
    return value


__all__ = [
    "NO_FDE",
    "TOO_MANY_FRES",
    "StateTable",
    "finish",
    "restore_source",
    "row_problem",
    "rows_before_end",
    "translate",
    "translate_ops",
]
