"""Which differences between a section and its CFI matter, and how rules are written.

A compared range where SFrame and the CFI differ is a *disagreement* (an unwinder using the
section goes wrong there) unless it is one of the differences every producer makes on
purpose, which are *notes*:

* GNU ld 2.47's ``.plt.got``: ld writes the SFrame of its PLT sections itself, beside CFI of
  its own (x86-64 ``.plt``: an expression of the PC, which
  :mod:`pysframe.generate.expression` evaluates at every PC, and which must agree); for
  ``.plt.got`` entries ld 2.47 writes CFA ``sp+16`` where its CFI says ``sp+8``;
* signal frames GNU as keeps without rows when it cannot describe them (gas/gen-sframe.c);
* what an SFrame V1 or V2 section cannot say: that the RA is undefined (outermost frame), before
  binutils 2.46;
* GNU as' own reading of ``.cfi_restore`` (every version from 2.40 to 2.47): back to the
  function's first row's rule, not the CIE's.  In the cold part of a split function the
  registers are saved before the first row, so after the epilogue restores the FP (or the
  AArch64 RA), SFrame still says it is saved at its slot; the slot, just below the stack
  pointer, still holds the value then, so an unwinder reads the right one;
* in V1 sections, GNU as 2.40's own reading of some directives
  (:data:`~pysframe.generate.cfa_rules.GAS_2_40`).

For these, the function is read again with the producer's rule
(:class:`~pysframe.generate.cfa_rules.Quirk`): where the section then says what the CFI says,
the difference is noted with the rule that explains it.

Equal rules need no rule here: what SFrame leaves implicit is mapped to the CFI's vocabulary
before the comparison (:mod:`pysframe.tools.verify_compare`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..format.constants import Abi, DwarfReg, Version
from ..format.section import SFrameSection
from ..generate.cfa_rules import (
    GAS_2_40,
    SIGNED,
    SIGNED_WITH_PC,
    CfaKind,
    Quirk,
    RegKind,
    Rules,
)
from ..generate.interpret import CfiTable, RuleColumns, fde_rows
from ..generate.ops import (
    OP_ARGS_SIZE,
    OP_DEF_CFA_EXPRESSION,
    OP_EXPRESSION,
    OP_VAL_EXPRESSION,
)
from .verify_compare import NO_ROW, CombinedCfi, Segments, register_names, rules_agree

AGREE, NOTE, DISAGREE = 0, 1, 2

#: Why a difference is a note (or, for NO_SFRAME_ROW, what a disagreement is).
REASONS = (
    "",
    "",
    "GNU ld 2.47 gives .plt.got entries CFA sp+16; they are entered by a call (CFA sp+8, as "
    "ld's CFI says)",
    "a signal frame GNU as keeps without rows, as it cannot describe it",
    "SFrame V1/V2 cannot say that the RA is undefined (outermost frame)",
    "no SFrame row covers these PCs",
    "GNU as 2.40 (SFrame V1) ignores .cfi_same_value of the FP",
    "GNU as 2.40 (SFrame V1) ignores .cfi_undefined of the RA",
    "GNU as 2.40 (SFrame V1) remembers the last row written at .cfi_remember_state, not the "
    "rules in effect",
    "GNU as 2.40 (SFrame V1) reads these directives its own way (.cfi_same_value of the FP and "
    ".cfi_undefined of the RA ignored, .cfi_remember_state remembering the last row written, "
    ".cfi_restore returning to the first row's rule)",
    "GNU as returns .cfi_restore to the function's first row's rule, not the CIE's: the "
    "register stays saved after the epilogue restored it (its slot still holds the value)",
)
_PLT_GOT, _SIGNAL, _OLD_OUTERMOST, _NO_SFRAME_ROW = 2, 3, 4, 5
#: GNU as' rules, each alone and (GNU as 2.40's) all together, with their reasons: those of
#: every version, then those of V1 sections.
_GAS_REASONS = ((Quirk.RESTORE_TO_FIRST_ROW, 10),)
_GAS_2_40_REASONS = (
    *_GAS_REASONS,
    (Quirk.FP_SAME_VALUE_IGNORED, 6),
    (Quirk.RA_UNDEFINED_IGNORED, 7),
    (Quirk.REMEMBER_LAST_ROW, 8),
    (GAS_2_40, 9),
)
#: Functions with disagreements that are read again with GNU as' rules, at most.
MAX_REREAD = 10_000


def classify(
    found: Segments,
    cfi: CombinedCfi,
    section: SFrameSection,
    abi: Abi,
    plt: list[tuple[int, int, str]],
    signal_no_rows: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]]:
    """Per segment: AGREE, NOTE or DISAGREE, and the index of its reason in REASONS."""
    count = len(found.fde)
    kind = np.where(found.agree, AGREE, DISAGREE).astype(np.int8)
    reason = np.zeros(count, dtype=np.int8)
    differ = found.differ
    if not len(differ):
        return kind, reason
    # Work on the differing ranges: position k is range differ[k].
    their_kind = np.full(len(differ), DISAGREE, dtype=np.int8)
    their_reason = np.zeros(len(differ), dtype=np.int8)
    no_row = found.sframe.ra_kind == NO_ROW
    their_reason[no_row] = _NO_SFRAME_ROW
    # Signal frames gas keeps without rows.
    function = found.function
    kept = (function >= 0) & signal_no_rows[np.maximum(function, 0)] & no_row
    their_reason[kept] = _SIGNAL
    their_kind[kept] = NOTE
    # V1/V2 cannot say that the RA is undefined.
    if section.version is not Version.V3:
        outermost = (found.cfi.ra_kind == RegKind.UNDEFINED) & ~no_row
        their_reason[outermost] = _OLD_OUTERMOST
        their_kind[outermost] = NOTE
    rules = _GAS_2_40_REASONS if section.version is Version.V1 else _GAS_REASONS
    _gas_notes(found, cfi, abi, their_kind, their_reason, rules)
    # GNU ld 2.47's .plt.got: CFA sp+16 where its CFI says sp+8, the rest the same.
    sp = DwarfReg.SP[abi]
    for lo, hi, name in plt:
        if name != ".plt.got":
            continue
        pc = found.pc[differ]
        ld = (pc >= lo) & (pc < hi) & (found.cfi.cfa_reg == sp) & (found.sframe.cfa_reg == sp)
        ld &= (found.cfi.cfa_offset == 8) & (found.sframe.cfa_offset == 16)
        ld &= rules_agree(found.cfi._replace(cfa_offset=found.sframe.cfa_offset), found.sframe, abi)
        their_reason[ld] = _PLT_GOT
        their_kind[ld] = NOTE
    kind[differ] = their_kind
    reason[differ] = their_reason
    return kind, reason


def _gas_notes(
    found: Segments,
    cfi: CombinedCfi,
    abi: Abi,
    kind: npt.NDArray[np.int8],
    reason: npt.NDArray[np.int8],
    rules: tuple[tuple[Quirk, int], ...],
) -> None:
    """Note the disagreements that GNU as' reading of the CFI (``rules``) explains (``kind``
    and ``reason`` are per differing range)."""
    fdes = found.fde[found.differ]
    open_ = np.flatnonzero(kind == DISAGREE)
    for fde in np.unique(fdes[open_])[:MAX_REREAD].tolist():
        here = open_[fdes[open_] == fde]
        table = cfi.tables[int(cfi.table[fde])]
        local = int(cfi.local[fde])
        for quirks, code in rules:
            rows = fde_rows(table, local, quirks)
            if isinstance(rows, str) or not len(here):
                continue
            begins = [row.begin for row in rows]
            offsets = found.start[found.differ[here]].tolist()
            read = [rows[max(bisect.bisect_right(begins, at) - 1, 0)].rules for at in offsets]
            explained = rules_agree(RuleColumns.of(read), found.sframe.take(here), abi)
            kind[here[explained]] = NOTE
            reason[here[explained]] = code
            here = here[~explained]


#: Why a CFI function that GNU as 2.47 would describe has no SFrame function.
REPRESENTABLE = (
    "SFrame can describe it, but the section has no function here (was the code assembled "
    "without --gsframe?)"
)
#: Why linker-made PLT code with CFI has no SFrame function.
PLT_NOT_DESCRIBED = "the linker wrote no SFrame for its {} section"
#: ... in a V1 section, when the function has CFI that ``.cfi_escape`` writes.
GAS_2_40_ESCAPE = "GNU as 2.40 (SFrame V1) leaves out functions with .cfi_escape CFI (here {})"
#: The CFA instructions only ``.cfi_escape`` writes.
_ESCAPED = {
    OP_ARGS_SIZE: "DW_CFA_GNU_args_size",
    OP_DEF_CFA_EXPRESSION: "DW_CFA_def_cfa_expression",
    OP_EXPRESSION: "DW_CFA_expression",
    OP_VAL_EXPRESSION: "DW_CFA_val_expression",
}


def without_sframe_reasons(
    gas_reasons: Sequence[str | None], table: CfiTable, fdes: Sequence[int], version: Version
) -> list[str]:
    """Why CFI functions (FDEs ``fdes`` of ``table``) have no SFrame: gas' reason (the
    generator's translation rules), else that SFrame could describe it, or, in a V1 section,
    GNU as 2.40's refusal of ``.cfi_escape``."""
    out = [REPRESENTABLE if reason is None else reason for reason in gas_reasons]
    if version is Version.V1:
        described = [k for k, reason in enumerate(gas_reasons) if reason is None]
        for k, ops in zip(described, table.operations([fdes[k] for k in described]),
                          strict=True):  # fmt: skip
            escaped = [_ESCAPED[op[0]] for op in ops if op[0] in _ESCAPED]
            if escaped:
                out[k] = GAS_2_40_ESCAPE.format(escaped[0])
    return out


def describe(rules: Rules, abi: Abi) -> str:
    """The rules as text: ``CFA sp+16, FP c-16, RA c-8`` (``objdump --sframe``'s notation:
    ``u`` not saved, ``c-16`` at CFA-16, ``(fp+8)`` at fp+8, ``=r12`` in r12)."""
    names = register_names(abi)
    if rules.ra_kind == NO_ROW:
        return "no row"
    if rules.cfa_kind == CfaKind.NONE:
        cfa = "none"
    elif rules.cfa_kind == CfaKind.OTHER:
        cfa = "expression"
    else:
        cfa = _register(names, rules.cfa_reg, rules.cfa_offset)
        if rules.cfa_kind == CfaKind.DEREF:
            cfa = f"({cfa})"
    fp = _rule(names, rules.fp_kind, rules.fp_reg, rules.fp_offset)
    ra = _rule(names, rules.ra_kind, rules.ra_reg, rules.ra_offset)
    if rules.mangled == SIGNED:
        ra += "[s]"
    elif rules.mangled == SIGNED_WITH_PC:
        ra += "[s+pc]"
    return f"CFA {cfa}, FP {fp}, RA {ra}"


def _register(names: dict[int, str], reg: int, offset: int) -> str:
    return f"{names.get(reg, f'r{reg}')}{offset:+d}"


def _rule(names: dict[int, str], kind: int, reg: int, offset: int) -> str:
    if kind == RegKind.SAME:
        return "u"
    if kind == RegKind.AT_CFA:
        return f"c{offset:+d}"
    if kind == RegKind.AT_REG:
        return f"({_register(names, reg, offset)})"
    if kind == RegKind.VAL_CFA:
        return f"=c{offset:+d}"
    if kind == RegKind.VAL_REG:
        return f"={_register(names, reg, offset)}" if offset else f"={names.get(reg, f'r{reg}')}"
    if kind == RegKind.UNDEFINED:
        return "undefined"
    return "expression"


__all__ = [
    "AGREE",
    "DISAGREE",
    "GAS_2_40_ESCAPE",
    "NOTE",
    "PLT_NOT_DESCRIBED",
    "REASONS",
    "REPRESENTABLE",
    "classify",
    "describe",
    "without_sframe_reasons",
]
