"""DWARF expressions of call-frame rules, reduced to the forms a frame rule can take.

DWARF 5 2.5 ("DWARF Expressions") defines a stack machine; call-frame rules use it in
``DW_CFA_def_cfa_expression`` (the value is the CFA), ``DW_CFA_expression`` (the CFA is pushed
first; the value is the address the register is saved at) and ``DW_CFA_val_expression`` (the
CFA is pushed first; the value is the register's value), DWARF 5 6.4.2.2-6.4.2.3.

The expressions compilers and linkers write for these are small: a register plus an offset,
optionally dereferenced (AMD64 DRAP: ``DW_OP_breg6 -8; DW_OP_deref``), and, for x86-64 PLT
entries, an offset that depends on the PC (GNU ld: ``DW_OP_breg7 8; DW_OP_breg16 0;
DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus``).
:func:`evaluate` runs the stack machine over *affine* values, a base (nothing, the CFA or one
register) plus an offset, and gives the base, the offset and whether the last operation
dereferenced it.  The offset may be a numpy array with one value per PC, when the program
counter (``pc_register``, RIP on x86-64) is read; anything else (memory reads in the middle,
products of registers, branches...) makes the expression irreducible: None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..dataclass import dataclass
from ..errors import CfiError
from .cfi import read_sleb, read_uleb

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# DWARF 5 7.7.1 operation codes.
DW_OP_deref = 0x06
DW_OP_const1u = 0x08
DW_OP_const1s = 0x09
DW_OP_const2u = 0x0A
DW_OP_const2s = 0x0B
DW_OP_const4u = 0x0C
DW_OP_const4s = 0x0D
DW_OP_const8u = 0x0E
DW_OP_const8s = 0x0F
DW_OP_constu = 0x10
DW_OP_consts = 0x11
DW_OP_dup = 0x12
DW_OP_drop = 0x13
DW_OP_over = 0x14
DW_OP_swap = 0x16
DW_OP_and = 0x1A
DW_OP_minus = 0x1C
DW_OP_mul = 0x1E
DW_OP_neg = 0x1F
DW_OP_not = 0x20
DW_OP_or = 0x21
DW_OP_plus = 0x22
DW_OP_plus_uconst = 0x23
DW_OP_shl = 0x24
DW_OP_shr = 0x25
DW_OP_shra = 0x26
DW_OP_xor = 0x27
DW_OP_eq = 0x29
DW_OP_ge = 0x2A
DW_OP_gt = 0x2B
DW_OP_le = 0x2C
DW_OP_lt = 0x2D
DW_OP_ne = 0x2E
DW_OP_lit0 = 0x30
DW_OP_lit31 = 0x4F
DW_OP_breg0 = 0x70
DW_OP_breg31 = 0x8F
DW_OP_bregx = 0x92
DW_OP_nop = 0x96

#: The base of an affine value that is the CFA (DWARF register numbers are never negative).
CFA_BASE = -1


@dataclass(frozen=True, slots=True)
class Reduced:
    """``[*](base + offset)``: ``base`` None for a constant, :data:`CFA_BASE` for the CFA, else a
    DWARF register number; ``deref`` when the last operation reads memory there."""

    base: int | None
    offset: Any  # int, or an int64 array with one offset per PC
    deref: bool = False


class _Irreducible(Exception):
    """The expression is not a (dereferenced) register or CFA plus an offset."""


_FIXED_CONSTANTS: dict[int, tuple[int, bool]] = {
    DW_OP_const1u: (1, False),
    DW_OP_const1s: (1, True),
    DW_OP_const2u: (2, False),
    DW_OP_const2s: (2, True),
    DW_OP_const4u: (4, False),
    DW_OP_const4s: (4, True),
    DW_OP_const8u: (8, False),
    DW_OP_const8s: (8, True),
}


def _both_constant(op: Callable[[Any, Any], Any]) -> Callable[[Reduced, Reduced], Reduced]:
    def apply(left: Reduced, right: Reduced) -> Reduced:
        if left.base is not None or right.base is not None:
            raise _Irreducible
        return Reduced(None, _as_int(op(left.offset, right.offset)))

    return apply


def _as_int(value: Any) -> Any:
    """Comparisons give booleans (numpy: bool arrays): DWARF pushes 1 or 0."""
    if isinstance(value, bool):
        return int(value)
    dtype = getattr(value, "dtype", None)
    if dtype is not None and dtype.kind == "b":
        return value.astype("int64")
    return value


def _plus(left: Reduced, right: Reduced) -> Reduced:
    if left.base is not None and right.base is not None:
        raise _Irreducible
    return Reduced(left.base if left.base is not None else right.base, left.offset + right.offset)


def _minus(left: Reduced, right: Reduced) -> Reduced:
    if right.base is not None:
        if left.base != right.base:
            raise _Irreducible
        return Reduced(None, left.offset - right.offset)
    return Reduced(left.base, left.offset - right.offset)


_BINARY: dict[int, Callable[[Reduced, Reduced], Reduced]] = {
    DW_OP_plus: _plus,
    DW_OP_minus: _minus,
    DW_OP_and: _both_constant(lambda a, b: a & b),
    DW_OP_or: _both_constant(lambda a, b: a | b),
    DW_OP_xor: _both_constant(lambda a, b: a ^ b),
    DW_OP_mul: _both_constant(lambda a, b: a * b),
    DW_OP_shl: _both_constant(lambda a, b: a << b),
    DW_OP_shr: _both_constant(lambda a, b: a >> b),
    DW_OP_shra: _both_constant(lambda a, b: a >> b),
    DW_OP_eq: _both_constant(lambda a, b: a == b),
    DW_OP_ge: _both_constant(lambda a, b: a >= b),
    DW_OP_gt: _both_constant(lambda a, b: a > b),
    DW_OP_le: _both_constant(lambda a, b: a <= b),
    DW_OP_lt: _both_constant(lambda a, b: a < b),
    DW_OP_ne: _both_constant(lambda a, b: a != b),
}


def evaluate(
    expression: bytes,
    *,
    push_cfa: bool,
    big_endian: bool = False,
    pc_register: int | None = None,
    pcs: npt.NDArray[np.int64] | None = None,
) -> Reduced | None:
    """Reduce ``expression`` (DWARF 5 2.5) to a :class:`Reduced` value, or None.

    ``push_cfa``: the CFA is on the stack before the first operation (``DW_CFA_expression``,
    ``DW_CFA_val_expression``).  ``pc_register`` is the DWARF number of the program counter;
    reading it needs ``pcs``, the PCs to evaluate at (the offset is then an array), and is
    irreducible without them.
    """
    try:
        return _run(expression, push_cfa, big_endian, pc_register, pcs)
    except (_Irreducible, CfiError, IndexError):
        return None


def reads_pc(expression: bytes, pc_register: int | None) -> bool:
    """Whether ``expression`` reads the program counter (its value then depends on the PC)."""
    if pc_register is None:
        return False
    try:
        _run(expression, True, False, pc_register, None)
    except _NeedsPc:
        return True
    except (_Irreducible, CfiError, IndexError):
        return False
    return False


class _NeedsPc(_Irreducible):
    """The program counter was read without PCs to evaluate at."""


def _run(
    expression: bytes,
    push_cfa: bool,
    big_endian: bool,
    pc_register: int | None,
    pcs: npt.NDArray[np.int64] | None,
) -> Reduced:
    stack: list[Reduced] = [Reduced(CFA_BASE, 0)] if push_cfa else []
    pos = 0
    end = len(expression)
    deref = False
    while pos < end:
        if deref:
            raise _Irreducible  # a memory read before the last operation
        op = expression[pos]
        pos += 1
        if DW_OP_lit0 <= op <= DW_OP_lit31:
            stack.append(Reduced(None, op - DW_OP_lit0))
        elif DW_OP_breg0 <= op <= DW_OP_breg31 or op == DW_OP_bregx:
            if op == DW_OP_bregx:
                reg, pos = read_uleb(expression, pos, end)
            else:
                reg = op - DW_OP_breg0
            offset, pos = read_sleb(expression, pos, end)
            if reg == pc_register:
                if pcs is None:
                    raise _NeedsPc
                stack.append(Reduced(None, pcs + offset))
            else:
                stack.append(Reduced(reg, offset))
        elif op in _FIXED_CONSTANTS:
            size, signed = _FIXED_CONSTANTS[op]
            if pos + size > end:
                raise _Irreducible
            value = int.from_bytes(
                expression[pos : pos + size], "big" if big_endian else "little", signed=signed
            )
            pos += size
            stack.append(Reduced(None, value))
        elif op in (DW_OP_constu, DW_OP_consts, DW_OP_plus_uconst):
            reader = read_sleb if op == DW_OP_consts else read_uleb
            value, pos = reader(expression, pos, end)
            if op == DW_OP_plus_uconst:
                stack.append(_plus(stack.pop(), Reduced(None, value)))
            else:
                stack.append(Reduced(None, value))
        elif op in _BINARY:
            right = stack.pop()
            left = stack.pop()
            stack.append(_BINARY[op](left, right))
        elif op == DW_OP_neg:
            top = stack.pop()
            if top.base is not None:
                raise _Irreducible
            stack.append(Reduced(None, -top.offset))
        elif op == DW_OP_not:
            top = stack.pop()
            if top.base is not None:
                raise _Irreducible
            stack.append(Reduced(None, ~top.offset))
        elif op == DW_OP_dup:
            stack.append(stack[-1])
        elif op == DW_OP_drop:
            stack.pop()
        elif op == DW_OP_over:
            stack.append(stack[-2])
        elif op == DW_OP_swap:
            stack[-1], stack[-2] = stack[-2], stack[-1]
        elif op == DW_OP_deref:
            top = stack.pop()
            stack.append(Reduced(top.base, top.offset, True))
            deref = True
        elif op == DW_OP_nop:
            continue
        else:
            raise _Irreducible
    if not stack:
        raise _Irreducible
    return stack[-1]


__all__ = ["CFA_BASE", "Reduced", "evaluate", "reads_pc"]
