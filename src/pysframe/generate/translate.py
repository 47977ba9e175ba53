"""Generate an SFrame section from DWARF CFI (``.eh_frame`` / ``.debug_frame``).

The translation follows the rules GNU as 2.47 applies while assembling (gas/gen-sframe.c,
summarised in the project's research notes): each FDE's CIE initial instructions and FDE
instructions are read as one stream; rows carry the CFA (SP/FP + offset, or for V3 FLEX FDEs
any register, optionally dereferenced), the FP and the RA (saved on the stack at CFA+offset,
or in a register for FLEX); a row is written at each advance that follows a state change;
AArch64 ``negate_ra_state`` toggles the mangled-RA bit and the CIE's ``B`` augmentation sets
the B key; ``DW_CFA_undefined`` of the RA writes a zero-word FRE (outermost frame); signal
frames whose rows cannot be represented are kept with no rows; a function whose CFI cannot be
represented is skipped with the reason gas would warn with ("no SFrame FDE emitted; ...").

Deliberate differences from gas, where gas' result would not describe the code:

* ``DW_CFA_def_cfa_register`` keeps the current CFA offset (gas takes the offset of the last
  written row, losing a ``def_cfa_offset`` at the same address).
* ``remember_state`` / ``restore_state`` use a stack (gas keeps one slot); ``restore_state``
  without a remembered state skips the function.
* A zero ``advance_loc`` is ignored; rows at or beyond the end of the function are dropped.
* An s390x CFA offset that is not 160 plus a multiple of 8 skips the function (gas would
  truncate it); a row without a CFA rule skips the function.
* SFrame V1/V2 have no FLEX FDEs, no signal-frame bit: such functions are skipped.

x86-64 PLT sections get the FDEs GNU ld 2.47 writes (elfxx-x86 ``sframe`` PLT tables): PLT0
(``sp+16`` then ``sp+24`` after the push), a PCMASK FDE with 16-byte blocks for the lazy
entries (``sp+8``, then ``sp+16`` after the push), ``.plt.sec`` (PCMASK, ``sp+8``) and
``.plt.got`` (PCMASK, one row).  ld writes ``sp+16`` for ``.plt.got`` although its entries are
reached by a call (CFA = sp+8, as ld's own ``.eh_frame`` says); pysframe writes ``sp+8`` unless
``ld_compatible=True``.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise, repeat
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from ..errors import CfiError, ElfError, EncodeError
from ..format.constants import (
    DEFAULT_FIXED_OFFSETS,
    SFRAME_MAGIC,
    Abi,
    Flags,
    Version,
)
from ..format.layout import HEADER_SIZE
from ..format.rules import flex_control_positions, fre_info, stored_words, word_size_for
from ..format.section import SFrameSection
from . import bulk as fastgen
from .cfi import (
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
    CfiFormat,
    Cie,
    FdeSpan,
    Op,
    PointerContext,
    decode_instructions,
    read_sleb,
    scan_fdes,
)

# Register-location kinds of a row (gas' sframe_row_entry fp_loc / ra_loc).
LOC_NONE = 0
LOC_REG = 1
LOC_STACK = 2

_INVALID = -1  # gas' SFRAME_FRE_REG_INVALID
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1

DW_OP_deref = 0x06
DW_OP_breg0 = 0x70


@dataclass(frozen=True, slots=True)
class AbiParams:
    """What the translation needs to know about an ABI (gas tc-*.h hooks)."""

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


ABI_PARAMS: dict[Abi, AbiParams] = {
    Abi.AMD64_ENDIAN_LITTLE: AbiParams(
        Abi.AMD64_ENDIAN_LITTLE, 7, 6, 16, False, -8, True, False, False
    ),
    Abi.AARCH64_ENDIAN_LITTLE: AbiParams(
        Abi.AARCH64_ENDIAN_LITTLE, 31, 29, 30, True, 0, False, False, True
    ),
    Abi.AARCH64_ENDIAN_BIG: AbiParams(
        Abi.AARCH64_ENDIAN_BIG, 31, 29, 30, True, 0, False, False, True
    ),
    Abi.S390X_ENDIAN_BIG: AbiParams(Abi.S390X_ENDIAN_BIG, 15, 11, 14, True, 0, True, True, False),
}

_NO_FDE = "no SFrame FDE emitted; "

# A row's rules, in a tuple so rows hash and compare fast:
# (cfa_reg, cfa_offset, cfa_deref, fp_loc, fp_reg, fp_offset, fp_deref,
#  ra_loc, ra_reg, ra_offset, ra_deref, mangled_ra, ra_undefined)
RowState = tuple[int, int, bool, int, int, int, bool, int, int, int, bool, bool, bool]
_EMPTY_STATE: RowState = (
    _INVALID,
    0,
    False,
    LOC_NONE,
    _INVALID,
    0,
    False,
    LOC_NONE,
    _INVALID,
    0,
    False,
    False,
    False,
)


class Translation(NamedTuple):
    """The rows of one function: (start offset, state) pairs, and whether it needs FLEX."""

    rows: list[tuple[int, RowState]]
    flex: bool


class SkippedFunction(NamedTuple):
    """A function that has no FDE in the generated section, and why."""

    start: int
    size: int
    reason: str


class GeneratedFunction(NamedTuple):
    """One FDE ready to be written: encoded FREs (start fields + info + words), no header."""

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


# ---------------------------------------------------------------------------------------------
# The translator (gas sframe_do_fde / sframe_do_cfi_insn)


def translate(ops: Iterable[Op], size: int, params: AbiParams) -> Translation | str:
    """Translate one function's CFA operations to SFrame rows, or return why it cannot be.

    ``ops`` is the CIE's initial instructions followed by the FDE's (see
    :func:`pysframe.cfi.decode_instructions`); ``size`` is the function size in bytes.
    """
    result = translate_ops(ops, params)
    if isinstance(result, str):
        return result
    return _finish(result.rows, size, result.flex, params)


def translate_ops(ops: Iterable[Op], params: AbiParams) -> Translation | str:
    """The rows of :func:`translate` before the end-of-function checks (any row start)."""
    sp, fp, ra = params.sp, params.fp, params.ra
    ra_tracking = params.ra_tracking
    flex_ok = params.flex
    s390x = params.s390x
    flex = False
    # Scratch row (gas cur_fre); has_row False = no scratch row yet.
    has_row = False
    begin = 0
    dirty = False
    (
        cfa_reg,
        cfa_off,
        cfa_deref,
        fp_loc,
        fp_reg,
        fp_off,
        fp_deref,
        ra_loc,
        ra_reg,
        ra_off,
        ra_deref,
        mangled,
        ra_undef,
    ) = _EMPTY_STATE
    rows: list[tuple[int, RowState]] = []
    stack: list[RowState] = []
    loc = 0
    for code, a, b in ops:
        if code in (OP_ADVANCE, OP_SET_LOC):
            target = loc + a if code == OP_ADVANCE else a
            if target <= loc:
                if target < loc:
                    return "DW_CFA_set_loc moves backwards"
                continue
            loc = target
            if has_row:
                if dirty:
                    rows.append(
                        (
                            begin,
                            (
                                cfa_reg,
                                cfa_off,
                                cfa_deref,
                                fp_loc,
                                fp_reg,
                                fp_off,
                                fp_deref,
                                ra_loc,
                                ra_reg,
                                ra_off,
                                ra_deref,
                                mangled,
                                ra_undef,
                            ),
                        )
                    )
                    dirty = False
                begin = target
            else:
                has_row = True
                begin = target
            continue
        if code == OP_DEF_CFA_OFFSET:
            if not has_row or cfa_reg == _INVALID:
                return _NO_FDE + ".cfi_def_cfa_offset without CFA base register in effect"
            if not _INT32_MIN <= a <= _INT32_MAX:
                return _NO_FDE + ".cfi_def_cfa_offset with unsupported offset value"
            cfa_off = a
            dirty = True
        elif code == OP_OFFSET:
            assert isinstance(b, int)
            if a == fp:
                fp_loc, fp_off, fp_reg, fp_deref = LOC_STACK, b, _INVALID, True
                dirty = True
            elif a == ra:
                if not ra_tracking and b == params.cfa_ra_offset:
                    ra_reg, ra_loc, ra_deref = _INVALID, LOC_NONE, False
                else:
                    ra_loc, ra_off, ra_undef, ra_reg, ra_deref = LOC_STACK, b, False, _INVALID, True
                    if not ra_tracking:
                        if not flex_ok:
                            return f"{_NO_FDE}RA register {ra} in .cfi_offset"
                        flex = True
                dirty = True
            if not has_row and dirty:
                return _NO_FDE + "CFI before any CFA rule"
        elif code == OP_DEF_CFA:
            assert isinstance(b, int)
            if not _offset_ok(b, s390x):
                return _NO_FDE + ".cfi_def_cfa with unsupported offset value"
            if a != sp and a != fp:
                if not flex_ok:
                    return f"{_NO_FDE}non-SP/FP register {a} in .cfi_def_cfa"
                flex = True
            if not has_row:
                has_row, begin = True, 0
            cfa_reg, cfa_off, cfa_deref = a, b, False
            dirty = True
        elif code == OP_DEF_CFA_REGISTER:
            if a != sp and a != fp:
                if not flex_ok:
                    return f"{_NO_FDE}non-SP/FP register {a} in .cfi_def_cfa_register"
                flex = True
            if not has_row:
                return _NO_FDE + ".cfi_def_cfa_register without prior SFrame FRE state"
            cfa_reg, cfa_deref = a, False
            dirty = True
        elif code == OP_RESTORE:
            if not has_row:
                continue
            if a == fp or (ra_tracking and a == ra):
                first = (
                    rows[0][1]
                    if rows
                    else (
                        cfa_reg,
                        cfa_off,
                        cfa_deref,
                        fp_loc,
                        fp_reg,
                        fp_off,
                        fp_deref,
                        ra_loc,
                        ra_reg,
                        ra_off,
                        ra_deref,
                        mangled,
                        ra_undef,
                    )
                )
                if a == fp:
                    fp_loc, fp_off = first[3], first[5]
                else:
                    ra_loc, ra_off, ra_undef = first[7], first[9], first[12]
                dirty = True
        elif code == OP_REMEMBER:
            if not has_row:
                return _NO_FDE + ".cfi_remember_state without prior SFrame FRE state"
            stack.append(
                (
                    cfa_reg,
                    cfa_off,
                    cfa_deref,
                    fp_loc,
                    fp_reg,
                    fp_off,
                    fp_deref,
                    ra_loc,
                    ra_reg,
                    ra_off,
                    ra_deref,
                    mangled,
                    ra_undef,
                )
            )
        elif code == OP_RESTORE_STATE:
            if not stack:
                return _NO_FDE + ".cfi_restore_state without .cfi_remember_state"
            (
                cfa_reg,
                cfa_off,
                cfa_deref,
                fp_loc,
                fp_reg,
                fp_off,
                fp_deref,
                ra_loc,
                ra_reg,
                ra_off,
                ra_deref,
                mangled,
                ra_undef,
            ) = stack.pop()
            dirty = True
        elif code == OP_VAL_OFFSET:
            assert isinstance(b, int)
            what = None
            if a == fp:
                what = "FP"
            elif ra_tracking and a == ra:
                what = "RA"
            elif a == sp and b != (-160 if s390x else 0):
                what = "SP"
            if what is not None:
                return f"{_NO_FDE}.cfi_val_offset with {what} reg {a}"
        elif code == OP_REGISTER:
            assert isinstance(b, int)
            if flex_ok and a == fp:
                fp_loc, fp_reg, fp_off, fp_deref = LOC_REG, b, 0, False
                flex = dirty = True
            elif flex_ok and a == ra:
                ra_loc, ra_reg, ra_off, ra_undef, ra_deref = LOC_REG, b, 0, False, False
                flex = dirty = True
            elif a in (ra, fp) or (a == sp and not s390x):
                name = "SP" if a == sp else "FP" if a == fp else "RA"
                return f"{_NO_FDE}{name} register {a} in .cfi_register"
            if dirty and not has_row:
                return _NO_FDE + "CFI before any CFA rule"
        elif code == OP_UNDEFINED:
            if a in (fp, sp):
                name = "FP" if a == fp else "SP"
                return f"{_NO_FDE}{name} reg {a} in .cfi_undefined"
            if a == ra:
                if not has_row:
                    return _NO_FDE + "CFI before any CFA rule"
                ra_undef = True
                dirty = True
        elif code == OP_SAME_VALUE:
            if ra_tracking and a == ra:
                ra_loc, ra_off, ra_undef = LOC_NONE, 0, False
                dirty = True
            elif a == fp:
                fp_loc, fp_off = LOC_NONE, 0
                dirty = True
            if dirty and not has_row:
                return _NO_FDE + "CFI before any CFA rule"
        elif code == OP_WINDOW_SAVE:
            if not params.aarch64:
                return _NO_FDE + ".cfi_window_save"
            if not has_row:
                return _NO_FDE + "CFI before any CFA rule"
            mangled = not mangled
            dirty = True
        elif code == OP_NEGATE_RA_WITH_PC:
            return _NO_FDE + ".cfi_negate_ra_state_with_pc"
        elif code == OP_ARGS_SIZE:
            if a != 0 and cfa_reg != fp:
                return f"{_NO_FDE}.cfi_escape with op ({OP_ARGS_SIZE:#x})"
        elif code == OP_DEF_CFA_EXPRESSION:
            assert isinstance(b, bytes)
            parsed = _breg_deref(b, params)
            if parsed is None:
                return f"{_NO_FDE}.cfi_escape with op ({OP_DEF_CFA_EXPRESSION:#x})"
            if not has_row:
                return _NO_FDE + "CFI before any CFA rule"
            flex = True
            cfa_reg, cfa_off, cfa_deref = fp, parsed, True
            dirty = True
        elif code == OP_EXPRESSION:
            assert isinstance(b, bytes)
            if a == fp:
                off = _breg_offset(b, params)
                if off is None:
                    return f"{_NO_FDE}.cfi_escape DW_CFA_expression with FP reg {a}"
                if not has_row:
                    return _NO_FDE + "CFI before any CFA rule"
                flex = True
                fp_loc, fp_off, fp_deref, fp_reg = LOC_REG, off, True, fp
                dirty = True
            elif a in (sp, cfa_reg) or (ra_tracking and a == ra):
                name = "SP" if a == sp else "RA" if a == ra else "CFA"
                return f"{_NO_FDE}.cfi_escape DW_CFA_expression with {name} reg {a}"
            elif a == ra:
                return f"{_NO_FDE}.cfi_escape DW_CFA_expression with RA reg {a}"
        elif code == OP_VAL_EXPRESSION:
            return f"{_NO_FDE}.cfi_escape with op ({OP_VAL_EXPRESSION:#x})"
        else:
            return f"{_NO_FDE}CFI insn ({code:#x})"
    if has_row:
        rows.append(
            (
                begin,
                (
                    cfa_reg,
                    cfa_off,
                    cfa_deref,
                    fp_loc,
                    fp_reg,
                    fp_off,
                    fp_deref,
                    ra_loc,
                    ra_reg,
                    ra_off,
                    ra_deref,
                    mangled,
                    ra_undef,
                ),
            )
        )
    return Translation(rows, flex)


def _finish(
    rows: list[tuple[int, RowState]], size: int, flex: bool, params: AbiParams
) -> Translation | str:
    """gas' checks after the last instruction, plus rows that would mislead an unwinder."""
    kept = rows
    if rows and rows[-1][0] >= size:
        kept = [row for row in rows if row[0] < size]
    if len(kept) > 0xFFFF:
        return _NO_FDE + "Number of FREs exceeds UINT16_MAX"
    check_fp = params.ra_tracking and not params.s390x
    for _begin, state in kept:
        if state[12]:
            continue
        if state[0] == _INVALID:
            return _NO_FDE + "a row has no CFA rule"
        if params.s390x and (state[1] - 160) % 8:
            return _NO_FDE + f"s390x CFA offset {state[1]} is not 160 plus a multiple of 8"
        if check_fp and state[7] != LOC_STACK and state[3] == LOC_STACK:
            return _NO_FDE + "FP without RA on stack"
    return Translation(kept, flex)


def _offset_ok(offset: int, s390x: bool) -> bool:
    """sframe_fre_stack_offset_bound_p: the stored CFA offset fits 32 bits."""
    if s390x:
        offset = int((offset - 160) / 8)
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
# Rows -> FRE bytes (gas output_sframe_row_entry)

_WORD_FORMATS = ("b", "h", "i")


def encode_row(state: RowState, flex: bool, params: AbiParams, big_endian: bool) -> bytes:
    """The FRE info byte and data words of a row (without its start address)."""
    (
        cfa_reg,
        cfa_off,
        cfa_deref,
        fp_loc,
        fp_reg,
        fp_off,
        fp_deref,
        ra_loc,
        ra_reg,
        ra_off,
        ra_deref,
        mangled,
        ra_undef,
    ) = state
    if ra_undef:
        return b"\x00"
    if params.s390x:
        cfa_off = (cfa_off - 160) // 8
    if flex:
        base = 0
        words = [(cfa_reg << 3) | (cfa_deref << 1) | 1, cfa_off]
        if ra_loc != LOC_NONE:
            reg_p = ra_loc == LOC_REG
            words += [((ra_reg if reg_p else 0) << 3) | (ra_deref << 1) | reg_p, ra_off]
        elif fp_loc != LOC_NONE:
            words.append(0)  # RA padding
        if fp_loc != LOC_NONE:
            reg_p = fp_loc == LOC_REG
            words += [((fp_reg if reg_p else 0) << 3) | (fp_deref << 1) | reg_p, fp_off]
        controls = flex_control_positions(len(words))
    else:
        base = 0 if cfa_reg == params.fp else 1
        words = [cfa_off]
        if params.ra_tracking:
            if ra_loc == LOC_STACK:
                words.append(ra_off)
            elif params.s390x and fp_loc == LOC_STACK:
                words.append(0)  # RA padding
        if fp_loc == LOC_STACK:
            words.append(fp_off)
        controls = ()
    size = word_size_for(tuple(words), controls)
    info = fre_info(base, len(words), size, bool(mangled))
    fmt = (">" if big_endian else "<") + "B" + _WORD_FORMATS[size] * len(words)
    return struct.pack(fmt, info, *stored_words(tuple(words), size))


_ADDR_FORMATS = ("B", "H", "I")


def fre_type_for_size(size: int) -> int:
    """gas and libsframe: ADDR1 below 0x100 bytes, ADDR2 below 0x10000, else ADDR4."""
    return 0 if size < 0x100 else 1 if size < 0x10000 else 2


# ---------------------------------------------------------------------------------------------
# Sections


@dataclass(slots=True)
class GenerateResult:
    """What :func:`generate_from_elf` / :func:`generate_from_eh_frame` made."""

    section: SFrameSection
    data: bytes
    skipped: list[SkippedFunction]
    functions_total: int
    text_bytes_total: int
    text_bytes_covered: int
    functions: list[GeneratedFunction] = field(default_factory=list)
    abi: Abi = Abi.AMD64_ENDIAN_LITTLE
    version: Version = Version.V3
    section_address: int = 0

    @property
    def functions_covered(self) -> int:
        return len(self.section)

    def encode(self, section_address: int, version: Version | int | None = None) -> bytes:
        """The section bytes for another address (PCREL starts depend on it) or version."""
        return encode_functions(
            self.functions,
            self.abi,
            Version(version) if version is not None else self.version,
            section_address,
        )


def encode_functions(
    functions: Sequence[GeneratedFunction],
    abi: Abi,
    version: Version | int = Version.V3,
    section_address: int = 0,
) -> bytes:
    """Write an SFrame section: header, FDEs sorted by start address, FREs in the same order.

    V3 and V2 sections carry SORTED; V3 also FDE_FUNC_START_PCREL (as GNU ld writes them).  V2
    and V1 starts are relative to the section (readable by binutils 2.40-2.47).
    """
    version = Version(version)
    if functions:
        data = _encode_bulk(functions, abi, version, section_address)
        if data is not None:
            return data
    order = ">" if abi.big_endian else "<"
    ordered = sorted(functions, key=lambda f: f.start)
    if version is not Version.V3:
        bad = [f for f in ordered if f.v3_only]
        if bad:
            raise EncodeError(
                f"function at {bad[0].start:#x} needs SFrame V3 (FLEX FDE, signal frame or "
                "undefined RA)"
            )
    fixed_fp, fixed_ra = DEFAULT_FIXED_OFFSETS[abi]
    count = len(ordered)
    blob = bytearray()
    fde_parts: list[bytes] = []
    num_fres = 0
    if version is Version.V3:
        flags = Flags.FDE_SORTED | Flags.FDE_FUNC_START_PCREL
        fde = struct.Struct(order + "qII")
        attr = struct.Struct(order + "HBBB")
        for index, f in enumerate(ordered):
            field_at = section_address + HEADER_SIZE + 16 * index
            fde_parts.append(fde.pack(f.start - field_at, f.size, len(blob)))
            blob += attr.pack(f.num_fres, f.info, f.info2, f.rep_size)
            blob += f.fres
            num_fres += f.num_fres
        fde_size = 16
    else:
        flags = Flags.FDE_SORTED
        fde_size = 20 if version is Version.V2 else 17
        fde = struct.Struct(order + ("iIIIBBH" if version is Version.V2 else "iIIIB"))
        for f in ordered:
            rel = f.start - section_address
            if not _INT32_MIN <= rel <= _INT32_MAX:
                raise EncodeError(f"function at {f.start:#x} is beyond the 32-bit start field")
            if version is Version.V2:
                fde_parts.append(
                    fde.pack(rel, f.size, len(blob), f.num_fres, f.info, f.rep_size, 0)
                )
            else:
                fde_parts.append(fde.pack(rel, f.size, len(blob), f.num_fres, f.info & 0x3F))
            blob += f.fres
            num_fres += f.num_fres
    header = struct.pack(
        order + "HBBBbbBIIIII",
        SFRAME_MAGIC,
        int(version),
        int(flags),
        int(abi),
        fixed_fp,
        fixed_ra,
        0,
        count,
        num_fres,
        len(blob),
        0,
        fde_size * count,
    )
    return b"".join((header, *fde_parts, bytes(blob)))


def _columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """The columns of equal-length tuples (faster than ``zip(*rows)`` for many rows)."""
    return [list(map(itemgetter(k), rows)) for k in range(width)]


def _encode_bulk(
    functions: Sequence[GeneratedFunction], abi: Abi, version: Version, section_address: int
) -> bytes | None:
    """:func:`encode_functions` with numpy columns (same bytes, same errors); None when a
    field does not fit its column (the per-function writer then raises as struct does)."""
    order = ">" if abi.big_endian else "<"
    start, size, info, info2, rep_size, num_fres, fres, v3_only = _columns(functions, 8)
    fre_lengths = list(map(len, fres))
    if not (
        min(start) >= 0
        and max(start) < 1 << 62
        and 0 <= section_address < 1 << 62
        and min(size) >= 0
        and max(size) <= 0xFFFFFFFF
        and min(num_fres) >= 0
        and max(num_fres) <= 0xFFFF
        and sum(fre_lengths) + 5 * len(functions) <= 0xFFFFFFFF
        and all(min(column) >= 0 and max(column) <= 0xFF for column in (info, info2, rep_size))
    ):
        return None
    starts = np.array(start, dtype=np.int64)
    ranked = np.argsort(starts, kind="stable")
    rank_list = ranked.tolist()
    if version is not Version.V3 and any(v3_only):
        bad = [i for i in rank_list if v3_only[i]]
        raise EncodeError(
            f"function at {start[bad[0]]:#x} needs SFrame V3 (FLEX FDE, signal frame or "
            "undefined RA)"
        )
    count = len(functions)
    starts = starts[ranked]
    sizes = np.array(size, dtype=np.int64)[ranked]
    counts = np.array(num_fres, dtype=np.int64)[ranked]
    infos = np.array(info, dtype=np.int64)[ranked]
    reps = np.array(rep_size, dtype=np.int64)[ranked]
    fre_parts = [fres[i] for i in rank_list]
    lengths = np.array(fre_lengths, dtype=np.int64)[ranked]
    fixed_fp, fixed_ra = DEFAULT_FIXED_OFFSETS[abi]
    if version is Version.V3:
        flags = Flags.FDE_SORTED | Flags.FDE_FUNC_START_PCREL
        fde_size = 16
        # Each function's FREs follow its 5-byte attribute record (num_fres, info, info2, rep).
        spans = lengths + 5
        offsets = np.cumsum(spans) - spans
        attr = np.zeros(
            count,
            dtype=np.dtype([("n", order + "u2"), ("i", "u1"), ("i2", "u1"), ("r", "u1")]),
        )
        attr["n"] = counts
        attr["i"] = infos
        attr["i2"] = np.array(info2, dtype=np.int64)[ranked]
        attr["r"] = reps
        attr_bytes = attr.tobytes()
        pieces: list[bytes] = [b""] * (2 * count)
        pieces[0::2] = [attr_bytes[at : at + 5] for at in range(0, 5 * count, 5)]
        pieces[1::2] = fre_parts
        table = np.zeros(
            count, dtype=np.dtype([("s", order + "i8"), ("z", order + "u4"), ("o", order + "u4")])
        )
        field_at = section_address + HEADER_SIZE + 16 * np.arange(count, dtype=np.int64)
        table["s"] = starts - field_at
        table["z"] = sizes
        table["o"] = offsets
        blob_bytes = b"".join(pieces)
    else:
        flags = Flags.FDE_SORTED
        rel = starts - section_address
        outside = np.flatnonzero((rel < _INT32_MIN) | (rel > _INT32_MAX))
        if len(outside):
            raise EncodeError(
                f"function at {int(starts[outside[0]]):#x} is beyond the 32-bit start field"
            )
        offsets = np.cumsum(lengths) - lengths
        fields = [("s", order + "i4"), ("z", order + "u4"), ("o", order + "u4")]
        fields.append(("n", order + "u4"))
        if version is Version.V2:
            fields += [("i", "u1"), ("r", "u1"), ("p", order + "u2")]
        else:
            fields.append(("i", "u1"))
        table = np.zeros(count, dtype=np.dtype(fields))
        table["s"] = rel
        table["z"] = sizes
        table["o"] = offsets
        table["n"] = counts
        if version is Version.V2:
            table["i"] = infos
            table["r"] = reps
        else:
            table["i"] = infos & 0x3F
        fde_size = table.dtype.itemsize
        blob_bytes = b"".join(fre_parts)
    header = struct.pack(
        order + "HBBBbbBIIIII",
        SFRAME_MAGIC,
        int(version),
        int(flags),
        int(abi),
        fixed_fp,
        fixed_ra,
        0,
        count,
        int(counts.sum()),
        len(blob_bytes),
        0,
        fde_size * count,
    )
    return b"".join((header, table.tobytes(), blob_bytes))


class _FunctionEncoder:
    """Turns translations into GeneratedFunction values, caching each distinct row's bytes."""

    def __init__(self, params: AbiParams, big_endian: bool) -> None:
        self.params = params
        self.big_endian = big_endian
        self.cache: dict[tuple[RowState, bool], bytes] = {}
        order = ">" if big_endian else "<"
        self.addr = [struct.Struct(order + code).pack for code in _ADDR_FORMATS]

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
        fre_type: int | None = None,
    ) -> GeneratedFunction:
        if fre_type is None:
            fre_type = fre_type_for_size(size)
        info = fre_type | (pc_mask << 4) | (b_key << 5) | (signal << 7)
        if translation is None:
            return GeneratedFunction(start, size, info, 0, rep_size, 0, b"", signal)
        flex = translation.flex
        cache = self.cache
        pack = self.addr[fre_type]
        rows = translation.rows
        for _begin, state in rows:
            if (state, flex) not in cache:
                cache[(state, flex)] = encode_row(state, flex, self.params, self.big_endian)
        undefined = any(state[12] for _begin, state in rows)
        fres = b"".join([pack(begin) + cache[(state, flex)] for begin, state in rows])
        return GeneratedFunction(
            start, size, info, int(flex), rep_size, len(rows), fres, flex or signal or undefined
        )


def _translate_fdes(
    data: bytes,
    cies: dict[int, Cie],
    spans: Sequence[FdeSpan],
    params: AbiParams,
    encoder: _FunctionEncoder,
    version: Version,
    exclude: Sequence[tuple[int, int]] = (),
) -> tuple[list[GeneratedFunction], list[SkippedFunction], int]:
    """Translate every FDE; returns (functions, skipped, FDEs considered).

    Functions often share their CFA program byte for byte, so translations are cached by
    (CIE, instruction bytes) and encoded FREs by (CIE, bytes, FRE type).
    """
    out: list[GeneratedFunction] = []
    skipped: list[SkippedFunction] = []
    cie_ops: dict[int, list[Op] | str] = {}
    ops_cache: dict[tuple[int, bytes], Translation | str] = {}
    fre_cache: dict[tuple[int, bytes, int], GeneratedFunction | str] = {}
    big = encoder.big_endian
    v3 = version is Version.V3
    low_excluded = min((lo for lo, _ in exclude), default=0)
    high_excluded = max((hi for _, hi in exclude), default=0)
    todo = [
        span
        for span in spans
        if span[2] != 0
        and not (
            low_excluded <= span[1] < high_excluded
            and any(lo <= span[1] < hi for lo, hi in exclude)
        )
    ]
    considered = len(todo)
    bulk = _bulk_translate(data, cies, todo, params, big)
    for (cie_offset, start, size, ins_start, ins_end), done in zip(todo, bulk, strict=True):
        if done is not None:
            out.append(done)
            continue
        key = (cie_offset, data[ins_start:ins_end])
        result = ops_cache.get(key)
        cie = cies[cie_offset]
        if result is None:
            initial = cie_ops.get(cie_offset)
            if initial is None:
                initial = _cie_initial(data, cie, params, big)
                cie_ops[cie_offset] = initial
            if isinstance(initial, str):
                result = initial
            else:
                try:
                    body = decode_instructions(data, ins_start, ins_end, cie, big)
                    result = translate_ops(initial + body, params)
                except CfiError as error:
                    result = f"{_NO_FDE}unreadable CFI: {error}"
            ops_cache[key] = result
        if not isinstance(result, str):
            fre_type = fre_type_for_size(size)
            if result.rows and result.rows[-1][0] >= size:
                made = _make_function(result, size, cie, params, encoder, version, fre_type)
            else:
                fkey = (cie_offset, key[1], fre_type)
                cached = fre_cache.get(fkey)
                if cached is None:
                    cached = _make_function(result, size, cie, params, encoder, version, fre_type)
                    fre_cache[fkey] = cached
                made = cached
            if isinstance(made, str):
                result = made
            else:
                out.append(GeneratedFunction(start, size, *made[2:]))
                continue
        b_key = cie.b_key and params.aarch64
        if cie.signal_frame and v3 and not result.startswith(_V3_ONLY):
            # gas keeps a signal frame's FDE, without rows, when its CFI fails.
            out.append(encoder.function(start, size, None, signal=True, b_key=b_key))
        skipped.append(SkippedFunction(start, size, result))
    return out, skipped, considered


_V3_ONLY = _NO_FDE + "SFrame V"


def _bulk_translate(
    data: bytes,
    cies: dict[int, Cie],
    spans: Sequence[FdeSpan],
    params: AbiParams,
    big_endian: bool,
) -> list[GeneratedFunction | None]:
    """The functions :mod:`pysframe.fastgen` translates in bulk (None for the others).

    Its rows are those :func:`translate_ops` gives, and its FREs those the per-function
    path writes; everything it does not handle (other instructions, CIEs with another RA
    column or the signal-frame augmentation, functions that gas' checks refuse) is left to
    the per-function path.
    """
    done: list[GeneratedFunction | None] = [None] * len(spans)
    usable = [
        offset
        for offset in sorted({span[0] for span in spans})
        if cies[offset].return_column == params.ra
        and not cies[offset].signal_frame
        and 0 <= cies[offset].code_alignment < 1 << 16
        and abs(cies[offset].data_alignment) < 1 << 16
    ]
    if not usable:
        return done
    buf = np.concatenate(
        [np.frombuffer(data, dtype=np.uint8), np.zeros(fastgen.PAD, dtype=np.uint8)]
    )
    lengths = fastgen.instruction_lengths(buf)
    cie_list = [cies[offset] for offset in usable]
    code_alignment = np.array([c.code_alignment for c in cie_list], dtype=np.int64)
    data_alignment = np.array([c.data_alignment for c in cie_list], dtype=np.int64)
    initial = fastgen.interpret(
        buf,
        lengths,
        np.array([c.instructions_start for c in cie_list], dtype=np.int64),
        np.array([c.instructions_end for c in cie_list], dtype=np.int64),
        code_alignment,
        data_alignment,
        fastgen.empty_start(len(cie_list)),
        params,
        big_endian,
    )
    cie_ok = (initial.ok & ~initial.has_advance).tolist()
    cie_index = {offset: i for i, offset in enumerate(usable) if cie_ok[i]}
    # Distinct (CIE, instructions) programs, and the program of each function.
    if all(span[0] in cie_index for span in spans):
        picked = list(range(len(spans)))
        usable_spans = spans
    else:
        picked = [i for i, span in enumerate(spans) if span[0] in cie_index]
        usable_spans = [spans[i] for i in picked]
    if not usable_spans:
        return done
    cie_column, start_column, size_column, lo_column, hi_column = _columns(usable_spans, 5)
    programs: dict[object, int] = {}
    number = programs.setdefault
    if len(cie_index) == 1:
        program_list = [
            number(data[lo:hi], len(programs)) for lo, hi in zip(lo_column, hi_column, strict=True)
        ]
        cie_of_span = np.full(len(usable_spans), next(iter(cie_index.values())), dtype=np.int64)
    else:
        program_list = [
            number((c, data[lo:hi]), len(programs))
            for c, lo, hi in zip(cie_column, lo_column, hi_column, strict=True)
        ]
        cie_of_span = np.array([cie_index[c] for c in cie_column], dtype=np.int64)
    program = np.array(program_list, dtype=np.int64)
    _, first_use = np.unique(program, return_index=True)
    cie_of = cie_of_span[first_use]
    found = fastgen.interpret(
        buf,
        lengths,
        np.array(lo_column, dtype=np.int64)[first_use],
        np.array(hi_column, dtype=np.int64)[first_use],
        code_alignment[cie_of],
        data_alignment[cie_of],
        fastgen.Start(
            initial.end.has_row[cie_of],
            initial.end.dirty[cie_of],
            initial.end.state.take(cie_of),
        ),
        params,
        big_endian,
    )
    if max(size_column) >> 40:
        size_column = [min(size, 1 << 40) for size in size_column]
    sizes = np.array(size_column, dtype=np.int64)
    chosen = np.flatnonzero(found.ok[program])
    program, sizes = program[chosen], sizes[chosen]
    first, end = fastgen.function_rows(found.row_program, found.row_begin, program, sizes)
    encoded = fastgen.encode_rows(found.rows, params, big_endian)
    refused = np.zeros(len(encoded.refused) + 1, dtype=np.int64)
    np.cumsum(encoded.refused, out=refused[1:])
    # gas' end-of-function checks refuse these: the per-function path says why.
    good = (refused[end] == refused[first]) & (end - first <= 0xFFFF)
    chosen, program, first, end, sizes = (
        chosen[good],
        program[good],
        first[good],
        end[good],
        sizes[good],
    )
    fre_types = np.where(sizes < 0x100, 0, np.where(sizes < 0x10000, 1, 2))
    counts = end - first
    # Functions with the same program, FRE type and row count have the same FREs: write
    # each such set once and share its bytes.
    _, shown, same_as = np.unique(
        (((program << 2) | fre_types) << 17) | counts, return_index=True, return_inverse=True
    )
    fres, bounds = fastgen.write_fres(
        found.row_begin, encoded, first[shown], end[shown], fre_types[shown], big_endian
    )
    bounds_list = bounds.tolist()
    shared = [fres[lo:hi] for lo, hi in pairwise(bounds_list)]
    info = fre_types
    if params.aarch64:
        b_key = np.array([int(cies[c].b_key) << 5 for c in usable], dtype=np.int64)
        info = info | b_key[cie_of_span[chosen]]
    chosen_list = chosen.tolist()
    starts = [start_column[i] for i in chosen_list]
    sizes_list = [size_column[i] for i in chosen_list]
    blobs = [shared[k] for k in same_as.ravel().tolist()]
    zeros = repeat(0)
    made = map(
        partial(tuple.__new__, GeneratedFunction),
        zip(
            starts,
            sizes_list,
            info.tolist(),
            zeros,
            zeros,
            counts.tolist(),
            blobs,
            repeat(False),
        ),
    )
    for i, function in zip(chosen_list, made, strict=True):
        done[picked[i]] = function
    return done


def _make_function(
    result: Translation,
    size: int,
    cie: Cie,
    params: AbiParams,
    encoder: _FunctionEncoder,
    version: Version,
    fre_type: int,
) -> GeneratedFunction | str:
    """Checks, then the encoded function (start 0: the caller sets it)."""
    finished = _finish(result.rows, size, result.flex, params)
    if isinstance(finished, str):
        return finished
    v3 = version is Version.V3
    if not v3:
        why = _needs_v3(finished, cie, version)
        if why:
            return why
    made = encoder.function(
        0,
        size,
        finished,
        signal=cie.signal_frame and v3,
        b_key=cie.b_key and params.aarch64,
        fre_type=fre_type,
    )
    if not v3 and made.v3_only:
        return f"{_V3_ONLY}{int(version)} cannot say that the RA is undefined (outermost frame)"
    return made


def _needs_v3(result: Translation, cie: Cie, version: Version) -> str:
    if result.flex:
        return f"{_V3_ONLY}{int(version)} has no FLEX FDEs, which this CFI needs"
    if cie.signal_frame:
        return f"{_V3_ONLY}{int(version)} cannot mark signal frames"
    return ""


def _cie_initial(data: bytes, cie: Cie, params: AbiParams, big_endian: bool) -> list[Op] | str:
    if cie.return_column != params.ra:
        return f"{_NO_FDE}non-default RA register {cie.return_column}"
    try:
        return decode_instructions(
            data, cie.instructions_start, cie.instructions_end, cie, big_endian
        )
    except CfiError as error:
        return f"{_NO_FDE}unreadable CIE instructions: {error}"


def generate_from_eh_frame(
    eh_frame: bytes,
    eh_frame_address: int,
    abi: Abi | int,
    *,
    version: Version | int = Version.V3,
    section_address: int = 0,
    debug_frame: bool = False,
    pointers: PointerContext | None = None,
    text_ranges: Sequence[tuple[int, int]] = (),
) -> GenerateResult:
    """Generate an SFrame section from raw ``.eh_frame`` (or ``.debug_frame``) bytes.

    ``eh_frame_address`` is the section's address (PC-relative pointers depend on it);
    ``section_address`` the address the SFrame section will have.  ``text_ranges`` ([start,
    end) pairs) are the code the coverage figures count.
    """
    abi = Abi(abi)
    version = Version(version)
    params = ABI_PARAMS[abi]
    data = bytes(eh_frame)
    cies, spans = scan_fdes(
        data,
        eh_frame_address,
        big_endian=abi.big_endian,
        cfi_format=CfiFormat.DEBUG_FRAME if debug_frame else CfiFormat.EH_FRAME,
        pointers=pointers,
    )
    encoder = _FunctionEncoder(params, abi.big_endian)
    with _gc_paused():
        functions, skipped, considered = _translate_fdes(
            data, cies, spans, params, encoder, version
        )
        return _result(functions, skipped, considered, abi, version, section_address, text_ranges)


def _result(
    functions: list[GeneratedFunction],
    skipped: list[SkippedFunction],
    considered: int,
    abi: Abi,
    version: Version,
    section_address: int,
    text_ranges: Sequence[tuple[int, int]],
) -> GenerateResult:
    data = encode_functions(functions, abi, version, section_address)
    section = SFrameSection.from_bytes(data, section_address)
    total = sum(max(0, hi - lo) for lo, hi in text_ranges)
    covered = _covered_bytes(
        [(f[0], f[0] + f[1]) for f in functions if f[5]] if text_ranges else [], text_ranges
    )
    skipped.sort(key=lambda s: s.start)
    return GenerateResult(
        section, data, skipped, considered, total, covered, functions, abi, version, section_address
    )


def _covered_bytes(spans: list[tuple[int, int]], text_ranges: Sequence[tuple[int, int]]) -> int:
    """Bytes of ``text_ranges`` inside the union of ``spans``."""
    if not text_ranges or not spans:
        return 0
    bounds = np.array(spans, dtype=np.uint64)
    order = np.argsort(bounds[:, 0], kind="stable")
    lo = bounds[order, 0]
    hi = np.maximum.accumulate(bounds[order, 1])
    # A new merged interval starts where a span begins after every earlier span ended.
    starts = np.ones(len(lo), dtype=bool)
    starts[1:] = lo[1:] > hi[:-1]
    first = np.flatnonzero(starts)
    last = np.append(first[1:], len(lo)) - 1
    merged_lo = lo[first].astype(np.int64)
    merged_hi = hi[last].astype(np.int64)
    total = 0
    for t_lo, t_hi in text_ranges:
        overlap = np.minimum(merged_hi, t_hi) - np.maximum(merged_lo, t_lo)
        total += int(overlap[overlap > 0].sum())
    return total


# ---------------------------------------------------------------------------------------------
# x86-64 PLTs as GNU ld 2.47 describes them

_ENDBR64 = b"\xf3\x0f\x1e\xfa"


def _sp_row(offset: int, cfa: int) -> tuple[int, RowState]:
    return offset, (
        7,
        cfa,
        False,
        LOC_NONE,
        _INVALID,
        0,
        False,
        LOC_NONE,
        _INVALID,
        0,
        False,
        False,
        False,
    )


def plt_functions(
    plt: tuple[int, bytes] | None,
    plt_sec: tuple[int, bytes] | None,
    plt_got: tuple[int, bytes, int] | None,
    encoder: _FunctionEncoder,
    *,
    ld_compatible: bool = False,
) -> tuple[list[GeneratedFunction], list[SkippedFunction]]:
    """FDEs for x86-64 ``.plt`` (address, bytes), ``.plt.sec`` and ``.plt.got`` (address,
    bytes, entry size), laid out as GNU ld 2.47 writes them."""
    out: list[GeneratedFunction] = []
    skipped: list[SkippedFunction] = []
    if plt is not None and len(plt[1]) >= 16:
        address, data = plt
        if data[:2] != b"\xff\x35":
            skipped.append(
                SkippedFunction(
                    address,
                    len(data),
                    "PLT0 is not the lazy-binding PLT0 (push GOT+8; jmp *GOT+16)",
                )
            )
        else:
            plt0 = Translation([_sp_row(0, 16), _sp_row(6, 24)], False)
            # ld picks PLT0's FRE type from the size of the whole .plt.
            out.append(encoder.function(address, 16, plt0, fre_type=fre_type_for_size(len(data))))
            if len(data) > 16:
                entry = data[16:32]
                if entry.startswith(_ENDBR64) and entry[4:5] == b"\x68":
                    push_end = 9
                elif entry.startswith(b"\xff\x25") and entry[6:7] == b"\x68":
                    push_end = 11
                elif entry.startswith(b"\xf2\xff\x25") and entry[7:8] == b"\x68":
                    push_end = 12
                else:
                    push_end = 0
                if push_end:
                    rows = Translation([_sp_row(0, 8), _sp_row(push_end, 16)], False)
                    out.append(
                        encoder.function(
                            address + 16, len(data) - 16, rows, pc_mask=True, rep_size=16
                        )
                    )
                else:
                    skipped.append(
                        SkippedFunction(
                            address + 16, len(data) - 16, "PLT entries of an unknown layout"
                        )
                    )
    if plt_sec is not None and plt_sec[1]:
        address, data = plt_sec
        rows = Translation([_sp_row(0, 8)], False)
        out.append(encoder.function(address, len(data), rows, pc_mask=True, rep_size=16))
    if plt_got is not None and plt_got[1]:
        address, data, entsize = plt_got
        rows = Translation([_sp_row(0, 16 if ld_compatible else 8)], False)
        out.append(encoder.function(address, len(data), rows, pc_mask=True, rep_size=entsize or 8))
    return out, skipped


def s390x_plt_functions(
    address: int, size: int, entry_size: int, encoder: _FunctionEncoder
) -> list[GeneratedFunction]:
    """s390x ``.plt`` as GNU ld 2.47 describes it: PLT0 and a PCMASK FDE over the entries,
    CFA = sp+160 throughout (the PLT does not touch the stack)."""
    rows = Translation(
        [
            (
                0,
                (
                    15,
                    160,
                    False,
                    LOC_NONE,
                    _INVALID,
                    0,
                    False,
                    LOC_NONE,
                    _INVALID,
                    0,
                    False,
                    False,
                    False,
                ),
            )
        ],
        False,
    )
    if size <= entry_size:
        return [encoder.function(address, size, rows)]
    return [
        encoder.function(address, entry_size, rows),
        encoder.function(
            address + entry_size, size - entry_size, rows, pc_mask=True, rep_size=entry_size
        ),
    ]


# ---------------------------------------------------------------------------------------------
# ELF files

_PLT_NAMES = (".plt", ".plt.sec", ".plt.got")
SHF_EXECINSTR = 0x4


def generate_from_elf(
    path_or_image: object,
    version: Version | int = Version.V3,
    *,
    section_address: int | None = None,
    ld_compatible: bool = False,
    use_debug_frame: bool = True,
) -> GenerateResult:
    """Generate an SFrame section for an ELF file (a path or an open :class:`ElfImage`).

    Uses ``.eh_frame`` (relocated in relocatable objects, where every section sits at address
    0) and, for functions it does not describe, ``.debug_frame``; adds x86-64 PLT FDEs.
    ``section_address`` defaults to where :mod:`pysframe.inject` would place the section.
    """
    from ..elf.image import ElfImage

    if isinstance(path_or_image, ElfImage):
        return _generate_image(
            path_or_image, Version(version), section_address, ld_compatible, use_debug_frame
        )
    if not isinstance(path_or_image, str):
        raise TypeError("generate_from_elf needs a path or an ElfImage")
    with ElfImage.open(path_or_image) as image:
        return _generate_image(
            image, Version(version), section_address, ld_compatible, use_debug_frame
        )


def _generate_image(
    image: object,
    version: Version,
    section_address: int | None,
    ld_compatible: bool,
    use_debug_frame: bool,
) -> GenerateResult:
    with _gc_paused():
        return _generate_image_body(image, version, section_address, ld_compatible, use_debug_frame)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a section is generated: it makes only acyclic
    objects (tuples, bytes), and the collector's passes over them cost more than the rest of
    the Python-level work on a large library."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _generate_image_body(
    image: object,
    version: Version,
    section_address: int | None,
    ld_compatible: bool,
    use_debug_frame: bool,
) -> GenerateResult:
    from ..elf.image import ElfImage

    assert isinstance(image, ElfImage)
    abi = image.abi
    if abi is None:
        raise ElfError(f"{image.path}: SFrame defines no ABI for this machine")
    params = ABI_PARAMS[abi]
    encoder = _FunctionEncoder(params, abi.big_endian)
    if section_address is None:
        if image.is_relocatable:
            section_address = 0
        else:
            from ..elf.inject import new_section_address

            section_address = new_section_address(image)
    text_ranges = [
        (s.address, s.address + s.size)
        for s in image.sections()
        if s.flags & SHF_EXECINSTR and s.size and (s.flags & 0x2)
    ]
    plts: dict[str, tuple[int, bytes, int]] = {}
    if abi is Abi.AMD64_ENDIAN_LITTLE and not image.is_relocatable:
        for name in _PLT_NAMES:
            sec = image.section(name)
            if sec is not None and sec.size and sec.type != 8:
                plts[name] = (sec.address, sec.data(), sec.entsize)
    s390x_plt = None
    if abi is Abi.S390X_ENDIAN_BIG and not image.is_relocatable:
        sec = image.section(".plt")
        if sec is not None and sec.size and sec.entsize in (32,):
            s390x_plt = (sec.address, sec.size, sec.entsize)
    exclude = [(a, a + len(d)) for a, d, _ in plts.values()]
    if s390x_plt is not None:
        exclude.append((s390x_plt[0], s390x_plt[0] + s390x_plt[1]))
    functions: list[GeneratedFunction] = []
    skipped: list[SkippedFunction] = []
    considered = 0
    ptr = _pointer_context(image)
    sources = [(".eh_frame", CfiFormat.EH_FRAME)]
    if use_debug_frame:
        sources.append((".debug_frame", CfiFormat.DEBUG_FRAME))
    covered_starts: set[int] = set()
    for name, cfi_format in sources:
        sec = image.section(name)
        if sec is None or not sec.size or sec.type == 8:
            continue
        data = image.section_contents(sec)
        cies, spans = scan_fdes(
            data,
            sec.address,
            big_endian=abi.big_endian,
            address_size=image.elfclass // 8,
            cfi_format=cfi_format,
            pointers=PointerContext(sec.address, ptr.text_base, ptr.data_base, ptr.read_memory),
        )
        if covered_starts:
            spans = [f for f in spans if f[1] not in covered_starts]
        made, lost, count = _translate_fdes(data, cies, spans, params, encoder, version, exclude)
        functions += made
        skipped += lost
        considered += count
        covered_starts.update(f[1] for f in spans)
    if plts:
        plt = plts.get(".plt")
        sec_ = plts.get(".plt.sec")
        made, lost = plt_functions(
            (plt[0], plt[1]) if plt else None,
            (sec_[0], sec_[1]) if sec_ else None,
            plts.get(".plt.got"),
            encoder,
            ld_compatible=ld_compatible,
        )
        if version is Version.V1:
            made = [f for f in made if f.rep_size in (0, 16)]
        functions += made
        skipped += lost
        considered += len(made) + len(lost)
    if s390x_plt is not None:
        made = s390x_plt_functions(*s390x_plt, encoder)
        functions += made
        considered += len(made)
    return _result(functions, skipped, considered, abi, version, section_address, text_ranges)


def _pointer_context(image: object) -> PointerContext:
    """Bases for .eh_frame pointer encodings: .text (textrel), .got (datarel, i386 style), and a
    memory reader over the file's loadable segments (indirect pointers)."""
    from ..elf.image import ElfImage

    assert isinstance(image, ElfImage)
    text = image.section(".text")
    got = image.section(".got")
    segments = [s for s in image.load_segments() if s.filesz]

    def read_memory(address: int, size: int) -> bytes:
        for seg in segments:
            if seg.vaddr <= address and address + size <= seg.vaddr + seg.filesz:
                return image.read(seg.offset + address - seg.vaddr, size)
        return b""

    return PointerContext(
        0,
        text.address if text is not None else None,
        got.address if got is not None else None,
        read_memory if segments else None,
    )


__all__ = [
    "ABI_PARAMS",
    "AbiParams",
    "GenerateResult",
    "GeneratedFunction",
    "SkippedFunction",
    "Translation",
    "encode_functions",
    "encode_row",
    "generate_from_eh_frame",
    "generate_from_elf",
    "plt_functions",
    "translate",
]
