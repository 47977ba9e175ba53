"""GNU as 2.47's rules for turning DWARF CFI into SFrame rows (gas/gen-sframe.c).

The CFI is read by the one DWARF interpreter (:func:`pysframe.generate.cfa_rules.
interpret_program`) the way GNU as reads its ``.cfi_*`` directives, and its rows are then
written as SFrame rows:

* Which CFI SFrame can hold, and which GNU as ignores: :class:`GasCheck` judges each
  instruction before it is applied, as ``sframe_do_cfi_insn`` does with
  ``sframe_xlate_do_def_cfa``, ``..._def_cfa_register``, ``..._def_cfa_offset``,
  ``..._offset``, ``..._val_offset``, ``..._remember_state``, ``..._restore_state``,
  ``..._restore``, ``..._gnu_window_save`` (AArch64 ``negate_ra_state``),
  ``..._aarch64_negate_ra_state_with_pc``, ``..._register``, ``..._cfi_escape`` with
  ``..._escape_cfa_expr``, ``..._escape_expr``, ``..._escape_gnu_args_size``,
  ``..._cfi_undefined`` and ``..._same_value``: a function whose CFI cannot be represented is
  refused with the reason gas would warn with ("no SFrame FDE emitted; ..."), and a FLEX FDE
  (SFrame V3) is asked for where gas sets ``flex_p``.
* ``.cfi_restore`` returns to the function's first row (``Quirk.RESTORE_TO_FIRST_ROW``).
* A row is written at each advance that follows a change of the rules (gas' ``merge_candidate``
  rows: the interpreter's ``changed``), and the last row always.
* :func:`sframe_row`: a DWARF row's rules as an SFrame row (:class:`~pysframe.generate.rows.
  RowState`): the CFA (SP/FP + offset, or for FLEX FDEs any register, optionally
  dereferenced), the FP and the RA (saved on the stack at CFA+offset, or in a register for
  FLEX), the AArch64 mangled-RA bit and an undefined RA (a zero-word FRE: outermost frame).
* :func:`translate_fdes`: a section's functions, with ``sframe_do_fde``'s checks after the
  last instruction (at most UINT16_MAX FREs, no FP on the stack without the RA:
  :func:`row_problem`) on the rows before each function's end, then what the SFrame version
  cannot say.

Deliberate differences from gas, where gas' result would not describe the code:

* ``DW_CFA_def_cfa_register`` keeps the current CFA offset (gas takes the offset of the last
  written row, losing a ``def_cfa_offset`` at the same address).
* ``remember_state`` / ``restore_state`` use a stack (gas keeps one slot); ``restore_state``
  without a remembered state refuses the function.
* ``.cfi_restore`` returns the register to the first row's rule as a whole (gas copies its
  location and offset, and keeps the register and dereference of the rule it replaces, which
  then describe neither: a FLEX FP in a register restored to a stack slot becomes the value
  at that slot's address).
* ``DW_CFA_set_loc`` moves to an address of the function (gas' directives never write it).
* A zero ``advance_loc`` is ignored; rows at or beyond the end of the function are dropped.
* An s390x CFA offset that is not 160 plus a multiple of 8 refuses the function (gas would
  truncate it); a row without a CFA rule refuses the function.
* A row whose RA is undefined (written without data words: the outermost frame) does not
  refuse the function for an FP saved on the stack while the RA is not (gas refuses "FP
  without RA on stack" there too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from itertools import islice, pairwise, repeat
from operator import itemgetter
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ..errors import EncodeError
from ..format.builder import fre_types_for_sizes
from ..format.constants import (
    S390X_CFA_OFFSET_ADJUSTMENT,
    S390X_CFA_OFFSET_ALIGNMENT,
    S390X_SP_VAL_OFFSET,
    Abi,
    FdeType,
    FreType,
    PcType,
    Version,
)
from ..format.layout import fde_info
from .cfa_rules import (
    APPLY,
    NOT_SIGNED,
    SKIP,
    SKIP_AS_CHANGE,
    CfaKind,
    CfiAbi,
    Quirk,
    RegKind,
    Rules,
    interpret_program,
)
from .cfi import Cie, FdeSpan, read_sleb
from .interpret import Programs, Shapes, fde_rows_before, read_programs
from .ops import (
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
    FunctionEncoder,
    GeneratedFunction,
    RowState,
    Translation,
    write_fres,
)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: The start of every reason gas gives for leaving a function out.
NO_FDE = "no SFrame FDE emitted; "
#: gas' reason for a function of more rows than an FDE can count (``sframe_do_fde``).
TOO_MANY_FRES = NO_FDE + "Number of FREs exceeds UINT16_MAX"

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1

# DWARF expression opcodes (DWARF 5 7.7.1) of the one CFA expression gas accepts.
DW_OP_deref = 0x06
DW_OP_breg0 = 0x70


class GasCheck:
    """GNU as' judgement of each CFA instruction of one function (a ``check`` for
    :func:`~pysframe.generate.cfa_rules.interpret_program`): the reason it refuses the
    function, or whether it ignores the instruction; :attr:`flex` once one needs a FLEX FDE."""

    __slots__ = ("flex", "params")

    def __init__(self, params: AbiParams) -> None:
        self.params = params
        self.flex = False

    # One branch per sframe_xlate_do_* function, in the order of its checks.
    def __call__(
        self, code: int, a: int, b: int | bytes, cfa_kind: int, cfa_reg: int, ra_kind: int,
        has_row: bool, remembered: int,
    ) -> int | str:  # fmt: skip
        params = self.params
        if code == OP_DEF_CFA_OFFSET:
            if not cfa_kind:  # CfaKind.NONE
                return NO_FDE + ".cfi_def_cfa_offset without CFA base register in effect"
            if not _INT32_MIN <= a <= _INT32_MAX:
                return NO_FDE + ".cfi_def_cfa_offset with unsupported offset value"
            return APPLY
        sp, fp, ra = params.sp, params.fp, params.ra
        if code == OP_OFFSET:
            if a == ra:
                if not params.ra_tracking and b == params.cfa_ra_offset:
                    # Back to the RA's fixed slot; an undefined RA stays undefined.
                    if ra_kind == RegKind.UNDEFINED:
                        return SKIP_AS_CHANGE if has_row else _BEFORE_CFA
                elif not params.ra_tracking:
                    if not params.flex:
                        return f"{NO_FDE}RA register {ra} in .cfi_offset"
                    self.flex = True
            return _BEFORE_CFA if (a in (fp, ra)) and not has_row else APPLY
        if code == OP_DEF_CFA:
            assert isinstance(b, int)
            if not _offset_ok(b, params.s390x):
                return NO_FDE + ".cfi_def_cfa with unsupported offset value"
            if a != sp and a != fp:
                if not params.flex:
                    return f"{NO_FDE}non-SP/FP register {a} in .cfi_def_cfa"
                self.flex = True
            return APPLY
        if code == OP_DEF_CFA_REGISTER:
            if a != sp and a != fp:
                if not params.flex:
                    return f"{NO_FDE}non-SP/FP register {a} in .cfi_def_cfa_register"
                self.flex = True
            if not has_row:
                return NO_FDE + ".cfi_def_cfa_register without prior SFrame FRE state"
            return APPLY
        if code == OP_RESTORE:
            # gas restores the FP and a tracked RA; the others' rules are not in its rows.
            if not has_row or (a == ra and not params.ra_tracking):
                return SKIP
            return APPLY
        if code == OP_REMEMBER:
            if not has_row:
                return NO_FDE + ".cfi_remember_state without prior SFrame FRE state"
            return APPLY
        if code == OP_RESTORE_STATE:
            if not remembered:
                return NO_FDE + ".cfi_restore_state without .cfi_remember_state"
            return APPLY
        if code == OP_WINDOW_SAVE:
            if not params.aarch64:
                return NO_FDE + ".cfi_window_save"
            return APPLY if has_row else _BEFORE_CFA
        changes = _OTHER.get(code)
        if changes is None:
            return f"{NO_FDE}CFI insn ({code:#x})"
        verdict = changes(self, a, b, cfa_reg)
        if verdict == APPLY and not has_row and _CHANGES_ROWS.get(code, _never)(self, a):
            return _BEFORE_CFA
        return verdict

    def _val_offset(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """sframe_xlate_do_val_offset: refused for the FP, a tracked RA, and the SP at another
        offset than its own (0; s390x: S390X_SP_VAL_OFFSET); an untracked RA's is ignored."""
        params = self.params
        what = None
        if a == params.fp:
            what = "FP"
        elif params.ra_tracking and a == params.ra:
            what = "RA"
        elif a == params.sp and b != (S390X_SP_VAL_OFFSET if params.s390x else 0):
            what = "SP"
        if what is not None:
            return f"{NO_FDE}.cfi_val_offset with {what} reg {a}"
        return SKIP if a == params.ra else APPLY

    def _register(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """sframe_xlate_do_register: the FP or RA saved in register ``b`` (FLEX)."""
        params = self.params
        sp, fp, ra = params.sp, params.fp, params.ra
        if params.flex and (a in (fp, ra)):
            self.flex = True
            return APPLY
        if a in (ra, fp) or (a == sp and not params.s390x):
            name = "SP" if a == sp else "FP" if a == fp else "RA"
            return f"{NO_FDE}{name} register {a} in .cfi_register"
        return APPLY

    def _undefined(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """sframe_xlate_do_cfi_undefined: an undefined RA (outermost frame); refused for the FP
        and the SP."""
        params = self.params
        if a in (params.fp, params.sp):
            return f"{NO_FDE}{'FP' if a == params.fp else 'SP'} reg {a} in .cfi_undefined"
        return APPLY

    def _same_value(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """sframe_xlate_do_same_value: a tracked RA or the FP no longer saved; an untracked
        RA's is ignored."""
        return SKIP if a == self.params.ra and not self.params.ra_tracking else APPLY

    def _negate_ra_with_pc(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """sframe_xlate_do_aarch64_negate_ra_state_with_pc: not representable."""
        return NO_FDE + ".cfi_negate_ra_state_with_pc"

    def _args_size(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """sframe_xlate_do_escape_gnu_args_size: harmless when 0 or when the CFA is
        FP-based."""
        if a != 0 and cfa_reg != self.params.fp:
            return f"{NO_FDE}.cfi_escape with op ({OP_ARGS_SIZE:#x})"
        return APPLY

    def _def_cfa_expression(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """sframe_xlate_do_escape_cfa_expr: CFA = *(FP + N) (AMD64 DRAP), FLEX."""
        assert isinstance(b, bytes)
        if _breg_deref(b, self.params) is None:
            return f"{NO_FDE}.cfi_escape with op ({OP_DEF_CFA_EXPRESSION:#x})"
        self.flex = True
        return APPLY

    def _expression(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """sframe_xlate_do_escape_expr: the FP saved at *(FP + N), FLEX; refused for the SP,
        the RA and the CFA's register."""
        assert isinstance(b, bytes)
        params = self.params
        sp, fp, ra = params.sp, params.fp, params.ra
        if a == fp:
            if _breg_offset(b, params) is None:
                return f"{NO_FDE}.cfi_escape DW_CFA_expression with FP reg {a}"
            self.flex = True
            return APPLY
        if a in (sp, cfa_reg) or a == ra:
            name = "SP" if a == sp else "RA" if a == ra else "CFA"
            return f"{NO_FDE}.cfi_escape DW_CFA_expression with {name} reg {a}"
        return APPLY

    def _val_expression(self, a: int, b: int | bytes, cfa_reg: int) -> int | str:
        """DW_CFA_val_expression, in sframe_xlate_do_cfi_escape's default case: not
        representable."""
        return f"{NO_FDE}.cfi_escape with op ({OP_VAL_EXPRESSION:#x})"


_BEFORE_CFA = NO_FDE + "CFI before any CFA rule"

#: The instructions :meth:`GasCheck.__call__` leaves to a method each, by operation.
_OTHER: dict[int, Callable[[GasCheck, int, int | bytes, int], int | str]] = {
    OP_VAL_OFFSET: GasCheck._val_offset,
    OP_REGISTER: GasCheck._register,
    OP_UNDEFINED: GasCheck._undefined,
    OP_SAME_VALUE: GasCheck._same_value,
    OP_NEGATE_RA_WITH_PC: GasCheck._negate_ra_with_pc,
    OP_ARGS_SIZE: GasCheck._args_size,
    OP_DEF_CFA_EXPRESSION: GasCheck._def_cfa_expression,
    OP_EXPRESSION: GasCheck._expression,
    OP_VAL_EXPRESSION: GasCheck._val_expression,
}


def _never(check: GasCheck, a: int) -> bool:
    return False


def _fp_or_ra(check: GasCheck, a: int) -> bool:
    return a == check.params.fp or a == check.params.ra


#: Of those, the ones that change a rule of gas' rows, which cannot come before a CFA rule.
_CHANGES_ROWS: dict[int, Callable[[GasCheck, int], bool]] = {
    OP_REGISTER: _fp_or_ra,
    OP_UNDEFINED: lambda check, a: a == check.params.ra,
    OP_SAME_VALUE: _fp_or_ra,
    OP_DEF_CFA_EXPRESSION: lambda check, a: True,
    OP_EXPRESSION: lambda check, a: a == check.params.fp,
}


def gas_rows(
    initial_ops: Sequence[Op], ops: Sequence[Op], params: AbiParams, pc_begin: int = 0
) -> tuple[list[tuple[int, Rules]], bool] | str:
    """The rows GNU as writes for a CIE's ``initial_ops`` and an FDE's ``ops`` (from offset
    0, none cut at the function's end), with their DWARF rules, and whether they need a FLEX
    FDE; or why it writes none."""
    check = GasCheck(params)
    program = interpret_program(
        ops,
        _CFI_ABIS[params.abi],
        initial_ops=initial_ops,
        pc_begin=pc_begin,
        big_endian=params.abi.big_endian,
        quirks=Quirk.RESTORE_TO_FIRST_ROW,
        check=check,
    )
    if isinstance(program, str):
        return program
    found = program.rows
    # Rows where a rule changed (gas' rows that are not merge candidates), and the last; the
    # first only once it has a CFA rule (gas has no row before).
    rows = [(row[0], row[1]) for row in found if row[3]]
    if not found[-1][3]:
        rows.append((found[-1][0], found[-1][1]))
    if rows and rows[0][0] == 0 and rows[0][1][0] == CfaKind.NONE:
        del rows[0]
    return rows, check.flex


def translate(ops: Sequence[Op], size: int, params: AbiParams) -> Translation | str:
    """One function's SFrame rows, or why GNU as writes none: ``ops`` is the CIE's initial
    instructions followed by the FDE's (:func:`pysframe.generate.ops.decode_instructions`),
    ``size`` the function's size in bytes.  :func:`gas_rows`, then the checks at its end
    (``sframe_do_fde``, as :func:`translate_fdes` makes them for a section's functions)."""
    found = gas_rows((), ops, params)
    if isinstance(found, str):
        return found
    rows = [(begin, sframe_row(rules, params)) for begin, rules in found[0] if begin < size]
    if len(rows) > MAX_FRES:
        return TOO_MANY_FRES
    for _begin, state in rows:
        problem = "" if state.ra_undefined else row_problem(state, params)
        if problem:
            return NO_FDE + problem
    return Translation(rows, found[1], any(state.ra_undefined for _at, state in rows))


def sframe_row(rules: Rules, params: AbiParams) -> RowState[int]:
    """A row's rules (that :class:`GasCheck` let through) as GNU as' row: the CFA register,
    offset and dereference; the FP and the RA at ``LOC_STACK`` (CFA+offset), ``LOC_REG``
    (in a register, or at register + offset when dereferenced) or ``LOC_NONE`` (not saved, or,
    for an untracked RA, at its fixed slot); the mangled-RA bit; an undefined RA."""
    cfa_kind = rules.cfa_kind
    fp = _LOCATIONS[rules.fp_kind]
    ra_kind = rules.ra_kind
    ra_location = _LOCATIONS[ra_kind]
    if ra_kind == RegKind.AT_CFA and not params.ra_tracking and rules.ra_offset == (
        params.cfa_ra_offset
    ):
        ra_location = (LOC_NONE, False)
    return RowState(
        rules.cfa_reg if cfa_kind != CfaKind.NONE else REG_INVALID,
        rules.cfa_offset,
        cfa_kind == CfaKind.DEREF,
        fp[0],
        rules.fp_reg if fp[0] == LOC_REG else REG_INVALID,
        rules.fp_offset if fp[0] != LOC_NONE else 0,
        fp[1],
        ra_location[0],
        rules.ra_reg if ra_location[0] == LOC_REG else REG_INVALID,
        rules.ra_offset if ra_location[0] != LOC_NONE else 0,
        ra_location[1],
        rules.mangled != NOT_SIGNED,
        ra_kind == RegKind.UNDEFINED,
    )


#: Per RegKind of a rule GasCheck lets through: gas' location, and whether the value is
#: read at it (``deref_p``).
_LOCATIONS: dict[int, tuple[int, bool]] = {
    RegKind.SAME: (LOC_NONE, False),
    RegKind.AT_CFA: (LOC_STACK, True),
    RegKind.AT_REG: (LOC_REG, True),
    RegKind.VAL_REG: (LOC_REG, False),
    RegKind.UNDEFINED: (LOC_NONE, False),
    # Not let through (refused, or ignored by the check): as gas' empty row.
    RegKind.VAL_CFA: (EMPTY_STATE.fp_loc, False),
    RegKind.OTHER: (EMPTY_STATE.fp_loc, False),
}

_CFI_ABIS = {abi: CfiAbi.of(abi) for abi in Abi}


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


# ---------------------------------------------------------------------------------------------
# A section's FDEs (gas' create_sframe_all)


def translate_fdes(
    data: bytes,
    cies: dict[int, Cie],
    spans: Sequence[FdeSpan],
    encoder: FunctionEncoder,
    version: Version,
) -> list[GeneratedFunction | str]:
    """The function GNU as writes for each FDE of ``spans`` (with code, as the driver chooses
    them), or why it writes none: their programs are read
    (:func:`pysframe.generate.interpret.read_programs`), each shape once with gas' rules
    (:func:`gas_rows`), its rows placed at each FDE's PCs and cut at its end, checked
    (gas' checks at the end of a function, then what SFrame ``version`` cannot say) and written
    (:func:`pysframe.generate.rows.write_fres`)."""
    params = encoder.params
    out: list[GeneratedFunction | str] = [""] * len(spans)
    wrong_column = {o for o, cie in cies.items() if cie.return_column != params.ra}
    readable = [i for i, span in enumerate(spans) if span[0] not in wrong_column]
    for index in sorted(set(range(len(spans))) - set(readable)):
        out[index] = f"{NO_FDE}non-default RA register {cies[spans[index][0]].return_column}"
    shapes = Shapes(lambda cie_ops, ops: gas_rows(cie_ops, ops, params))
    chunk = [spans[i] for i in readable]
    programs = read_programs(data, cies, chunk, encoder.big_endian, shapes)
    rows = _SectionRows(programs, shapes, encoder)
    fde_program = programs.fde_program.copy()
    for k in np.flatnonzero(~rows.placed[fde_program]).tolist():
        program = int(fde_program[k])
        reason = rows.reason(program)
        if reason is None:  # its rows depend on where it is
            span = chunk[k]
            (ops,) = programs.operations([program])
            found = gas_rows(programs.cie_ops[span[0]], ops, params, span[1])
            if isinstance(found, str):
                reason = found
            else:
                fde_program[k] = rows.add(*found)
        if reason is not None:
            out[readable[k]] = reason
            fde_program[k] = -1
    wanted = np.flatnonzero(fde_program >= 0)
    where = np.array(readable, dtype=np.int64)[wanted]
    for lo in range(0, len(wanted), WRITTEN):  # a bounded working set
        part = wanted[lo : lo + WRITTEN]
        _write(rows, [chunk[k] for k in part.tolist()], fde_program[part], cies, encoder,
               version, where[lo : lo + WRITTEN], out)  # fmt: skip
    return out


class _Rows(NamedTuple):
    """Rows of some programs (grouped by program, each program's in address order): per row
    its program, where it begins, and its code (its rules' number, times 2, plus 1 in a FLEX
    function); per program, whether it needs a FLEX FDE."""

    program: IntArray
    begin: IntArray
    code: IntArray
    flex: BoolArray


class _SectionRows:
    """The rows of a section's programs: their shapes' rows (:func:`gas_rows`) placed at each
    program's locations, programs read at their FDE's place after them; their rules checked
    and encoded (each once)."""

    def __init__(self, programs: Programs, shapes: Shapes, encoder: FunctionEncoder) -> None:
        self.programs = programs
        self.shapes = shapes
        self.encoder = encoder
        good = [not isinstance(r, str) for r in shapes.results]
        flex = [r is True for r in shapes.results]
        shape = programs.shape
        self.placed = np.array([*good, False], dtype=bool)[shape]
        self.flex = np.array([*flex, False], dtype=bool)[shape]
        self.extra: list[tuple[list[tuple[int, Rules]], bool]] = []
        #: Per rules' number: the row, why gas refuses it ("": it does not), whether the RA
        #: is undefined; per code: the FRE's bytes (None: not made yet), or why the format
        #: refuses them.
        self.states: list[RowState[int]] = []
        self.problems: list[str] = []
        self.undefined: list[bool] = []
        self.encoded: list[bytes | None] = []
        self.refusals: dict[int, str] = {}

    def reason(self, program: int) -> str | None:
        """Why gas writes no rows for ``program`` (None: it does, or it must be read at its
        place)."""
        programs = self.programs
        cie_error = programs.cie_errors.get(programs.keys[program][0])
        error = programs.errors.get(program)
        shape = int(programs.shape[program])
        if cie_error is not None:
            return f"{NO_FDE}unreadable CIE instructions: {cie_error}"
        if error is not None:
            return f"{NO_FDE}unreadable CFI: {error}"
        found = self.shapes.results[shape] if shape >= 0 else None
        return found if isinstance(found, str) else None

    def add(self, rows: list[tuple[int, Rules]], flex: bool) -> int:
        """A program read at its FDE's place: its number among the rows' programs."""
        self.extra.append((rows, flex))
        return len(self.programs.keys) + len(self.extra) - 1

    def rows(self, programs: IntArray) -> _Rows:
        """The rows of ``programs`` (increasing), their rules checked and encoded."""
        count = len(self.programs.keys)
        placed = programs[programs < count]
        program, value, begin = self.programs.place(self.shapes, placed)
        flex = self.flex[placed]
        extra = programs[programs >= count].tolist()
        if extra:
            number = self.shapes.rules.setdefault
            read = [self.extra[p - count] for p in extra]
            lengths = [len(rows) for rows, _flex in read]
            program = np.concatenate([program, np.repeat(extra, lengths)])
            begin = np.concatenate([begin, np.array(
                [min(b, _FAR) for rows, _f in read for b, _r in rows], dtype=np.int64)])
            value = np.concatenate([value, np.array(
                [number(r, len(self.shapes.rules)) for rows, _f in read for _b, r in rows],
                dtype=np.int64)])  # fmt: skip
            flex = np.concatenate([flex, [f for _rows, f in read]]).astype(bool)
        self._check()
        code = value * 2 + flex[np.searchsorted(programs, program)]
        for new in np.unique(code).tolist():
            if self.encoded[new] is None:
                self._encode(new)
        return _Rows(program, begin, code, flex)

    def _check(self) -> None:
        """Check the rules not checked yet (gas' checks of a row)."""
        params = self.encoder.params
        for rules in islice(self.shapes.rules, len(self.states), None):
            state = sframe_row(rules, params)
            self.states.append(state)
            self.problems.append(row_problem(state, params) if not state.ra_undefined else "")
            self.undefined.append(bool(state.ra_undefined))
            self.encoded += [None, None]

    def _encode(self, code: int) -> None:
        """The FRE of rules code ``code``, or why the format refuses it."""
        try:
            self.encoded[code] = self.encoder.row(self.states[code // 2], bool(code % 2))
        except EncodeError as error:  # rules the format cannot hold (an offset beyond 32 bits)
            self.refusals[code] = f"{NO_FDE}{error.detail}"
            self.encoded[code] = b""


#: Functions larger than this are cut to it where their rows are placed (no int64 overflow);
#: the section writer refuses them.
_FAR = 1 << 40


def _write(
    table: _SectionRows,
    spans: list[FdeSpan],
    fde_program: IntArray,
    cies: dict[int, Cie],
    encoder: FunctionEncoder,
    version: Version,
    where: IntArray,
    out: list[GeneratedFunction | str],
) -> None:
    """The functions of ``spans`` (their programs ``fde_program`` among the table's), or why
    they are left out, into ``out`` at ``where``: gas' checks at the end of a function
    (``sframe_do_fde``: the rows before its end, at most UINT16_MAX of them, each one
    :func:`row_problem` lets through), then what SFrame ``version`` cannot say, then the
    format's limits."""
    cie_offsets, starts, sizes = (list(map(itemgetter(k), spans)) for k in range(3))
    try:
        size = np.minimum(np.array(sizes, dtype=np.int64), _FAR)
    except OverflowError:  # a hostile FDE's size beyond int64
        size = np.array([min(s, _FAR) for s in sizes], dtype=np.int64)
    programs, local = np.unique(fde_program, return_inverse=True)
    rows = table.rows(programs)
    first, end = fde_rows_before(np.searchsorted(programs, rows.program), rows.begin,
                                 local.ravel(), size)  # fmt: skip
    count = end - first
    flex = rows.flex[local.ravel()]
    # Per row, how many rows before it gas refuses, say the RA is undefined, or the format
    # cannot hold.
    value = rows.code // 2
    has_problem = _row_sums(np.array([bool(p) for p in table.problems], dtype=bool)[value])
    undefined = _row_sums(np.array(table.undefined, dtype=bool)[value])
    refused = np.zeros(len(table.encoded), dtype=bool)
    refused[list(table.refusals)] = True
    is_refused = _row_sums(refused[rows.code])
    cie_list = sorted(set(cie_offsets))
    cie_of = np.searchsorted(cie_list, cie_offsets)
    signal = np.array([cies[c].signal_frame for c in cie_list], dtype=bool)[cie_of]
    aarch64 = encoder.params.aarch64
    b_key = np.array([cies[c].b_key and aarch64 for c in cie_list], dtype=bool)[cie_of]
    any_undefined = undefined[end] > undefined[first]
    v3 = version is Version.V3
    bad = (count > MAX_FRES) | (has_problem[end] > has_problem[first])
    bad |= is_refused[end] > is_refused[first]
    if not v3:
        bad |= flex | signal | any_undefined
    # Why, in the order gas and the writer check: too many rows, a row gas refuses, what
    # SFrame ``version`` cannot say, a row the format cannot hold.
    for k in np.flatnonzero(bad).tolist():
        lo = int(first[k])
        if count[k] > MAX_FRES:
            reason = TOO_MANY_FRES
        elif has_problem[end[k]] > has_problem[lo]:
            row = int(np.searchsorted(has_problem, has_problem[lo] + 1)) - 1
            reason = NO_FDE + table.problems[int(value[row])]
        elif not v3 and (flex[k] or signal[k] or any_undefined[k]):
            reason = _version_reason(bool(flex[k]), bool(signal[k]), version)
        else:
            row = int(np.searchsorted(is_refused, is_refused[lo] + 1)) - 1
            reason = table.refusals[int(rows.code[row])]
        out[int(where[k])] = reason
    chosen = np.flatnonzero(~bad)
    fre_types = fre_types_for_sizes(size[chosen])
    counts = count[chosen]
    # Functions of one program, FRE type and row count have the same FREs: written once.
    _, shown, same_as = np.unique(
        ((fde_program[chosen] << 2 | fre_types) << 17) | counts, return_index=True,
        return_inverse=True,
    )  # fmt: skip
    encoded = [b"" if fre is None else fre for fre in table.encoded]
    fres, bounds = write_fres(rows.begin, rows.code, encoded, first[chosen][shown],
                              end[chosen][shown], fre_types[shown], encoder.big_endian)  # fmt: skip
    shared = [fres[lo:hi] for lo, hi in pairwise(bounds.tolist())]
    chosen_signal = signal[chosen] & v3
    chosen_flex = flex[chosen]
    info = _INFO[fre_types, b_key[chosen].astype(np.int64), chosen_signal.astype(np.int64)]
    picked = chosen.tolist()
    made = map(
        partial(tuple.__new__, GeneratedFunction),
        zip(
            [starts[i] for i in picked],
            [sizes[i] for i in picked],
            info.tolist(),
            np.where(chosen_flex, int(FdeType.FLEX), int(FdeType.DEFAULT)).tolist(),
            repeat(0),
            counts.tolist(),
            [shared[k] for k in same_as.ravel().tolist()],
            (chosen_flex | chosen_signal | any_undefined[chosen]).tolist(),
        ),
    )
    for index, function in zip(where[chosen].tolist(), made, strict=True):
        out[index] = function


#: Functions written together (their per-row columns stay small).
WRITTEN = 4096

#: sfde_func_info by FRE type, AArch64 pauth key (the CIE's 'B') and signal frame ('S').
_INFO = np.array(
    [[[fde_info(t, PcType.INC, key, bool(signal)) for signal in (0, 1)] for key in (0, 1)]
     for t in FreType],
    dtype=np.int64,
)  # fmt: skip


def _row_sums(flags: BoolArray) -> IntArray:
    """How many of the rows before each row (and before the end) have ``flags`` set."""
    sums = np.zeros(len(flags) + 1, dtype=np.int64)
    np.cumsum(flags, out=sums[1:])
    return sums


def _version_reason(flex: bool, signal: bool, version: Version) -> str:
    """What SFrame ``version`` (V1, V2) cannot say of a function: that it needs a FLEX FDE,
    that it is a signal frame, that the RA is undefined (outermost frame)."""
    if flex:
        return f"{V3_ONLY}{int(version)} has no FLEX FDEs, which this CFI needs"
    if signal:
        return f"{V3_ONLY}{int(version)} cannot mark signal frames"
    return f"{V3_ONLY}{int(version)} cannot say that the RA is undefined (outermost frame)"


#: The start of the reasons a function is left out of a V1/V2 section.
V3_ONLY = NO_FDE + "SFrame V"


__all__ = [
    "NO_FDE",
    "TOO_MANY_FRES",
    "V3_ONLY",
    "GasCheck",
    "gas_rows",
    "row_problem",
    "sframe_row",
    "translate",
    "translate_fdes",
]
