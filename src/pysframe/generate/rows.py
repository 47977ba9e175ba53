"""The rows the generator makes (one row type), the rules the format core encodes for them, and
the FREs of functions written from them.

A row is a :class:`RowState`, the rules of GNU as' ``struct sframe_row_entry``
(gas/gen-sframe.c) without its addresses: the CFA (register, offset, dereferenced or not),
where the FP and the RA are (``LOC_NONE``: not saved; ``LOC_REG``: in a register, or at
register + offset when dereferenced; ``LOC_STACK``: at CFA + offset), the mangled-RA bit
(AArch64 ``negate_ra_state``) and an undefined RA (``DW_CFA_undefined``: outermost frame).

The format core (:func:`pysframe.format.rules.encode_row`) is the one encoder of FRE info bytes
and data words; :func:`encode_row` gives it a row's rules (:func:`row_rules`: what gas'
``output_sframe_row_entry_datawords`` writes for the row's fields).  :func:`write_fres` writes
the FREs of many functions at once, with numpy: the start address field of each function's FRE
type (libsframe ``sframe_calc_fre_type``: the smallest that holds the function size), then
the encoded row.  :class:`FunctionEncoder` encodes each distinct row once and writes one
function's FREs with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from ..dataclass import dataclass
from ..format import rules
from ..format.builder import fre_type_for_size
from ..format.constants import (
    DEFAULT_FIXED_OFFSETS,
    Abi,
    DwarfReg,
    FdeType,
    FreType,
    PcType,
    Version,
)
from ..format.layout import (
    FRE_ADDRESS_CODES,
    byte_order,
    fde_info,
    fre_address_size,
    fre_words_struct,
)
from ..format.model import CfaRule, RegRule, RuleKind

# Where a row says the FP or RA is (gas' sframe_row_entry fp_loc / ra_loc).
LOC_NONE = 0
LOC_REG = 1
LOC_STACK = 2

#: No register (gas' SFRAME_FRE_REG_INVALID).
REG_INVALID = -1

#: The most FREs one function may have (the V3 num_fres field; gas' UINT16_MAX check).
MAX_FRES = 0xFFFF

Field = TypeVar("Field")


class RowState(NamedTuple, Generic[Field]):
    """The rules of one row."""

    cfa_reg: Field
    cfa_offset: Field
    cfa_deref: Field
    fp_loc: Field
    fp_reg: Field
    fp_offset: Field
    fp_deref: Field
    ra_loc: Field
    ra_reg: Field
    ra_offset: Field
    ra_deref: Field
    mangled_ra: Field
    ra_undefined: Field


#: gas' state before a CIE's first instruction: no CFA rule, FP and RA not saved.
EMPTY_STATE: RowState[int] = RowState(
    cfa_reg=REG_INVALID,
    cfa_offset=0,
    cfa_deref=False,
    fp_loc=LOC_NONE,
    fp_reg=REG_INVALID,
    fp_offset=0,
    fp_deref=False,
    ra_loc=LOC_NONE,
    ra_reg=REG_INVALID,
    ra_offset=0,
    ra_deref=False,
    mangled_ra=False,
    ra_undefined=False,
)


def sp_based_row(sp: int, cfa_offset: int) -> RowState[int]:
    """CFA = SP + ``cfa_offset``, FP and RA where the ABI keeps them by default."""
    return EMPTY_STATE._replace(cfa_reg=sp, cfa_offset=cfa_offset)


@dataclass(frozen=True, slots=True)
class AbiParams:
    """What the translation needs to know about an ABI (gas' tc-*.h ``sframe_*`` hooks)."""

    abi: Abi
    sp: int
    fp: int
    ra: int
    #: sframe_ra_tracking_p: the RA has a word of its own in DEFAULT FREs.
    ra_tracking: bool
    #: sframe_cfa_ra_offset: where an untracked RA is saved (AMD64 -8).
    cfa_ra_offset: int
    #: sframe_support_flex_fde_p.
    flex: bool
    s390x: bool
    aarch64: bool


def _abi_params(abi: Abi, *, ra_tracking: bool, flex: bool) -> AbiParams:
    return AbiParams(
        abi,
        DwarfReg.SP[abi],
        DwarfReg.FP[abi],
        DwarfReg.RA[abi],
        ra_tracking,
        DEFAULT_FIXED_OFFSETS[abi][1],
        flex,
        abi is Abi.S390X_ENDIAN_BIG,
        abi.is_aarch64,
    )


ABI_PARAMS: dict[Abi, AbiParams] = {
    Abi.AMD64_ENDIAN_LITTLE: _abi_params(Abi.AMD64_ENDIAN_LITTLE, ra_tracking=False, flex=True),
    Abi.AARCH64_ENDIAN_LITTLE: _abi_params(Abi.AARCH64_ENDIAN_LITTLE, ra_tracking=True, flex=False),
    Abi.AARCH64_ENDIAN_BIG: _abi_params(Abi.AARCH64_ENDIAN_BIG, ra_tracking=True, flex=False),
    Abi.S390X_ENDIAN_BIG: _abi_params(Abi.S390X_ENDIAN_BIG, ra_tracking=True, flex=True),
}


class Translation(NamedTuple):
    """The rows of one function: (start offset, rules) pairs in address order."""

    rows: list[tuple[int, RowState[int]]]
    #: The rows need a FLEX FDE (SFrame V3).
    flex: bool
    #: A row says the RA is undefined (outermost frame), which only SFrame V3 can say.
    ra_undefined: bool


class SkippedFunction(NamedTuple):
    """A function that has no FDE in the generated section, and why; or, when
    ``kept_without_rows``, a signal frame whose FDE gas keeps without rows when its CFI fails."""

    start: int
    size: int
    reason: str
    kept_without_rows: bool = False


class GeneratedFunction(NamedTuple):
    """One FDE ready to be written: its fields and its FREs (start fields, info, words)."""

    start: int
    size: int
    info: int
    info2: int
    rep_size: int
    num_fres: int
    #: The FREs as written, for the function's FRE type.
    fres: bytes
    #: True when the rows need SFrame V3 (FLEX FDE, signal frame, undefined RA).
    v3_only: bool = False


def row_rules(
    state: RowState[int], flex: bool, params: AbiParams
) -> tuple[CfaRule | None, RegRule, RegRule]:
    """The CFA, FP and RA rules of a row in the format core's terms, as gas writes them
    (``output_sframe_row_entry_datawords``).

    DEFAULT FREs have a word only for a register on the stack (``LOC_STACK``: saved at
    CFA+offset).  FLEX FREs write each tracked register's control word from the row's fields,
    ``SFRAME_V3_FLEX_FDE_CTRLWORD_ENCODE (reg_p ? reg : 0, deref_p, reg_p)`` with ``reg_p`` for
    ``LOC_REG``: a dereferenced value is saved there, the others are the value itself.  A
    register not saved has the ABI's rule (AMD64 RA: the header's fixed offset).  An undefined
    RA: no CFA rule.
    """
    if state.ra_undefined:
        return None, _UNTRACKED, _UNDEFINED
    cfa = CfaRule(state.cfa_reg, state.cfa_offset, bool(state.cfa_deref))
    ra_default = RegRule.fixed(params.cfa_ra_offset) if params.cfa_ra_offset else _UNTRACKED
    fp = _register_rule(state.fp_loc, state.fp_reg, state.fp_offset, state.fp_deref, flex)
    ra = _register_rule(state.ra_loc, state.ra_reg, state.ra_offset, state.ra_deref, flex)
    return cfa, fp or _UNTRACKED, ra or ra_default


def _register_rule(loc: int, reg: int, offset: int, deref: int, flex: bool) -> RegRule | None:
    """The FP or RA rule a row's fields give (see :func:`row_rules`); None: not saved."""
    if loc == LOC_STACK and not flex:
        return RegRule.at_cfa(offset)
    if loc == LOC_NONE or not flex:
        return None
    kind = RuleKind.SAVED if deref else RuleKind.VALUE
    return RegRule(kind, offset, reg if loc == LOC_REG else None)


def encode_row(state: RowState[int], flex: bool, params: AbiParams, big_endian: bool) -> bytes:
    """The FRE info byte and data words of a row (without its start address), written by the
    format core's encoder (:func:`pysframe.format.rules.encode_row`) from :func:`row_rules`.

    An undefined RA: no words and every info field zero, the mangled-RA bit included (gas
    ``output_sframe_row_entry``).  Raises EncodeError when the rules have no encoding (an
    offset beyond 32 bits, an s390x RA saved at CFA+0, which reads as padding...).
    """
    cfa, fp, ra = row_rules(state, flex, params)
    mangled_ra = bool(state.mangled_ra) and not state.ra_undefined
    info, size, words = rules.encode_row(_CONTEXTS[params.abi][flex], cfa, fp, ra, mangled_ra)
    return bytes([info]) + fre_words_struct(size, len(words), big_endian).pack(*words)


def _contexts(abi: Abi) -> tuple[rules.RowContext, rules.RowContext]:
    """The DEFAULT and FLEX row contexts of the sections the generator writes for ``abi``: the
    header's fixed offsets, and V3 (a DEFAULT row's words are the same in every version: the
    generator writes no s390x V2 register words)."""
    fixed_fp, fixed_ra = DEFAULT_FIXED_OFFSETS[abi]
    return (
        rules.RowContext(abi, Version.V3, FdeType.DEFAULT, fixed_fp, fixed_ra),
        rules.RowContext(abi, Version.V3, FdeType.FLEX, fixed_fp, fixed_ra),
    )


_CONTEXTS = {abi: _contexts(abi) for abi in ABI_PARAMS}
_UNTRACKED = RegRule.untracked()
_UNDEFINED = RegRule.undefined()


class FunctionEncoder:
    """Writes functions for one ABI and byte order, encoding each distinct row once."""

    def __init__(self, params: AbiParams, big_endian: bool) -> None:
        self.params = params
        self.big_endian = big_endian
        #: Encoded rows by state: DEFAULT rows, then FLEX rows.
        self._encoded: tuple[dict[RowState[int], bytes], dict[RowState[int], bytes]] = ({}, {})

    def row(self, state: RowState[int], flex: bool) -> bytes:
        """The row's info byte and data words (:func:`encode_row`, cached)."""
        encoded = self._encoded[flex]
        got = encoded.get(state)
        if got is None:
            got = encoded[state] = encode_row(state, flex, self.params, self.big_endian)
        return got

    def function(
        self,
        start: int,
        size: int,
        translation: Translation | None,
        *,
        signal: bool = False,
        b_key: bool = False,
        pc_mask: bool = False,
        rep_size: int = 0,
        fre_type: FreType | None = None,
    ) -> GeneratedFunction:
        """The FDE fields and FREs of a function; ``translation`` None: no rows."""
        if fre_type is None:
            fre_type = fre_type_for_size(size)
        pc_type = PcType.MASK if pc_mask else PcType.INC
        info = fde_info(fre_type, pc_type, int(b_key), signal)
        if translation is None:
            return GeneratedFunction(start, size, info, 0, rep_size, 0, b"", signal)
        flex = translation.flex
        rows = translation.rows
        encoded = [self.row(state, flex) for _begin, state in rows]
        count = len(rows)
        fres, _ = write_fres(
            np.array([begin for begin, _state in rows], dtype=np.int64),
            np.arange(count, dtype=np.int64),
            encoded,
            np.zeros(1, dtype=np.int64),
            np.full(1, count, dtype=np.int64),
            np.full(1, fre_type, dtype=np.int64),
            self.big_endian,
        )
        fde_type = FdeType.FLEX if flex else FdeType.DEFAULT
        v3_only = flex or signal or translation.ra_undefined
        return GeneratedFunction(start, size, info, int(fde_type), rep_size, count, fres, v3_only)


IntArray = npt.NDArray[np.int64]


def write_fres(
    row_begin: IntArray,
    row_code: IntArray,
    encoded: Sequence[bytes],
    first: IntArray,
    end: IntArray,
    fre_types: IntArray,
    big_endian: bool,
) -> tuple[bytes, IntArray]:
    """The FREs of many functions, one after the other, and where each function's start (one
    more offset than functions): function ``i`` has the rows ``[first[i], end[i])``, each
    beginning ``row_begin`` bytes in and written as ``encoded[row_code]`` (info byte and data
    words), after its start address field (1, 2 or 4 bytes by the function's FRE type, in the
    section's byte order)."""
    counts = end - first
    total = int(counts.sum())
    function_of = np.repeat(np.arange(len(first)), counts)
    before = np.cumsum(counts) - counts
    row = np.repeat(first - before, counts) + np.arange(total, dtype=np.int64)
    width = fre_address_size(fre_types[function_of])
    code = row_code[row]
    longest = max(max(map(len, encoded), default=0), 1)
    table = np.frombuffer(
        b"".join(raw.ljust(longest, b"\0") for raw in encoded) or bytes(longest), dtype=np.uint8
    ).reshape(-1, longest)
    length = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    row_length = length[code] if len(encoded) else np.zeros(total, dtype=np.int64)
    # Each FRE in a slot: the widest start address field, then the longest encoded row.
    address = np.dtype(byte_order(big_endian) + FRE_ADDRESS_CODES[FreType.ADDR4])
    field = address.itemsize
    slots = np.empty((total, field + longest), dtype=np.uint8)
    slots[:, :field] = row_begin[row].astype(address).view(np.uint8).reshape(total, field)
    slots[:, field:] = table[code]
    present = np.empty(slots.shape, dtype=bool)
    k = np.arange(field)
    # The address's low bytes: at the field's end in big-endian order.
    if big_endian:
        present[:, :field] = k[None, :] >= field - width[:, None]
    else:
        present[:, :field] = k[None, :] < width[:, None]
    present[:, field:] = np.arange(longest)[None, :] < row_length[:, None]
    data = slots[present].tobytes()
    offsets = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(width + row_length, out=offsets[1:])
    bounds = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    return data, offsets[bounds]


__all__ = [
    "ABI_PARAMS",
    "EMPTY_STATE",
    "LOC_NONE",
    "LOC_REG",
    "LOC_STACK",
    "MAX_FRES",
    "REG_INVALID",
    "AbiParams",
    "FunctionEncoder",
    "GeneratedFunction",
    "RowState",
    "SkippedFunction",
    "Translation",
    "encode_row",
    "row_rules",
    "sp_based_row",
    "write_fres",
]
