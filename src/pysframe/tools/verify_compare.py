"""An SFrame section against the CFI it should describe, at every PC.

Both sides are tables of rows: the CFI's (:func:`pysframe.generate.interpret.interpret_cfi`,
DWARF semantics) and the section's (answered by the batch lookup
:meth:`~pysframe.format.section.SFrameSection.find_rows`, libsframe semantics).  Between two
consecutive row boundaries of either side, neither changes, so comparing the rules at every
boundary inside each CFI function (its rows' starts, and the starts and ends of the SFrame
functions and rows that fall in it) compares them at every PC.

Rules are compared in one vocabulary, :class:`~pysframe.generate.cfa_rules.RegKind` and
:class:`~pysframe.generate.cfa_rules.CfaKind`, so that what SFrame leaves implicit compares
equal to what the CFI states: an untracked FP or AArch64/s390x RA is DWARF's "same value"
(SFrame's ``u``), the AMD64 RA fixed in the header is ``DW_CFA_offset`` at CFA-8, and both
sides saying the RA is undefined (outermost frame) agree whatever the CFA.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..dataclass import dataclass
from ..format.constants import Abi, DwarfReg, PcType, Version
from ..format.layout import fde_pc_type, fde_signal_frame
from ..format.lookup import RULE_KIND_CODES, BatchResult
from ..format.model import RuleKind
from ..format.section import SFrameSection
from ..generate.cfa_rules import CfaKind, RegKind
from ..generate.interpret import CfiTable, RuleColumns

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_KEY_SHIFT = 33
_KEY_LIMIT = (1 << _KEY_SHIFT) - 1
#: PCMASK functions are compared at every block's row starts up to this many points.
MAX_PCMASK_POINTS = 1 << 20
#: The FP/RA kind of a PC no SFrame row covers.
NO_ROW = 7
#: Points looked up and compared at a time.
CHUNK = 1 << 17
#: CFI functions whose points are found together (libLLVM-15: about 10 points a function).
FDE_CHUNK = 1 << 13


@dataclass(frozen=True, slots=True)
class Segments:
    """The compared PC ranges of every CFI function that SFrame covers at least in part.

    Element i is ``[start[i], end[i])`` (offsets) in CFI function ``fde[i]`` (a number of the
    combined CFI tables); ``agree[i]`` says whether the CFI's and SFrame's rules agree there.
    The ranges where they do not are ``differ``; for each of those (in that order), ``cfi`` and
    ``sframe`` hold both sides' rules (canonical columns) and ``function`` the SFrame function
    covering the range's start (-1: none)."""

    fde: IntArray
    start: IntArray
    end: IntArray
    #: The address of ``start``.
    pc: IntArray
    agree: BoolArray
    differ: IntArray
    cfi: RuleColumns
    sframe: RuleColumns
    function: IntArray


@dataclass(frozen=True, slots=True)
class Coverage:
    """Which CFI functions SFrame covers, and which SFrame functions the CFI covers."""

    #: Per CFI function: covered by at least one SFrame function.
    compared: BoolArray
    #: Per SFrame function: overlaps no CFI function.
    without_cfi: BoolArray


@dataclass(frozen=True, slots=True)
class CombinedCfi:
    """Several CFI tables (``.eh_frame``, then ``.debug_frame`` for what it does not describe)
    numbered as one: CFI function ``k`` is ``tables[table[k]]``'s FDE ``local[k]``; row ``r``
    has the rules ``rules.row(row_rule[r])``."""

    tables: list[CfiTable]
    table: IntArray
    local: IntArray
    begin: IntArray
    size: IntArray
    usable: BoolArray
    row_fde: IntArray
    row_begin: IntArray
    row_rule: IntArray
    rules: RuleColumns

    def __len__(self) -> int:
        return len(self.begin)


def combine(tables: list[CfiTable]) -> CombinedCfi:
    """One numbering of the FDEs of ``tables``, in address order; FDEs of later tables that
    start where an FDE of an earlier one does are left out (as the generator leaves them
    out)."""
    parts = []
    seen: set[int] = set()
    fde_base = 0
    rule_base = 0
    for number, table in enumerate(tables):
        usable = np.ones(len(table), dtype=bool)
        if table.problems:
            usable[list(table.problems)] = False
        usable &= table.size > 0
        if seen:
            keep = np.array([int(b) not in seen for b in table.begin.tolist()], dtype=bool)
            local = np.flatnonzero(keep)
            renumber = np.full(len(table), -1, dtype=np.int64)
            renumber[local] = np.arange(len(local), dtype=np.int64) + fde_base
            row_keep = keep[table.row_fde]
            row_fde = renumber[table.row_fde[row_keep]]
            row_begin, row_rule = table.row_begin[row_keep], table.row_rule[row_keep]
        else:
            keep = np.ones(len(table), dtype=bool)
            local = np.arange(len(table), dtype=np.int64)
            row_fde, row_begin, row_rule = table.row_fde + fde_base, table.row_begin, table.row_rule
        seen.update(table.begin[keep & (table.size > 0)].tolist())
        parts.append(
            (
                np.full(len(local), number, dtype=np.int64),
                local,
                table.begin[local],
                table.size[local],
                usable[local],
                row_fde,
                row_begin,
                row_rule + rule_base,
            )
        )
        fde_base += len(local)
        rule_base += len(table.rules.cfa_kind)
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return CombinedCfi(
            [], empty, empty, empty, empty, np.zeros(0, bool), empty, empty, empty,
            RuleColumns.of([]),
        )  # fmt: skip
    columns: tuple[npt.NDArray[Any], ...]
    if len(parts) == 1:
        columns = parts[0]
        rules = tables[0].rules
    else:
        columns = tuple(np.concatenate([part[k] for part in parts]) for k in range(8))
        rules = RuleColumns._make(
            np.concatenate(column) for column in zip(*(t.rules for t in tables), strict=True)
        )
    table_of, local, begin, size, usable, row_fde, row_begin, row_rule = _by_address(*columns)
    return CombinedCfi(
        tables, table_of, local, begin, size, usable, row_fde, row_begin, row_rule, rules
    )


def _by_address(
    table_of: IntArray,
    local: IntArray,
    begin: IntArray,
    size: IntArray,
    usable: BoolArray,
    row_fde: IntArray,
    row_begin: IntArray,
    row_rule: IntArray,
) -> tuple[npt.NDArray[Any], ...]:
    """The FDEs numbered in address order (their rows with them), so that the PCs the
    comparison asks about come in increasing order, as the batch lookup likes them best."""
    order = np.argsort(begin, kind="stable")
    if (order == np.arange(len(order))).all():
        return table_of, local, begin, size, usable, row_fde, row_begin, row_rule
    first = np.searchsorted(row_fde, np.arange(len(order) + 1))
    counts = (first[1:] - first[:-1])[order]
    before = np.cumsum(counts) - counts
    rows = np.repeat(first[:-1][order] - before, counts) + np.arange(int(counts.sum()))
    new_fde = np.repeat(np.arange(len(order), dtype=np.int64), counts)
    return (
        table_of[order], local[order], begin[order], size[order], usable[order], new_fde,
        row_begin[rows], row_rule[rows],
    )  # fmt: skip


def coverage(section: SFrameSection, cfi: CombinedCfi) -> Coverage:
    """Which CFI functions overlap an SFrame function, and which SFrame functions overlap no
    CFI function (every range half-open; empty ones overlap nothing)."""
    table = section.table
    s_lo = table.start.astype(np.int64)
    s_hi = s_lo + table.size
    compared = _overlaps(cfi.begin, cfi.begin + cfi.size, s_lo, s_hi) & cfi.usable
    known = cfi.size > 0
    without = ~_overlaps(s_lo, s_hi, cfi.begin[known], (cfi.begin + cfi.size)[known])
    return Coverage(compared, without & (table.size > 0))


def _overlaps(lo: IntArray, hi: IntArray, other_lo: IntArray, other_hi: IntArray) -> BoolArray:
    """Per range [lo, hi): whether it overlaps one of the ranges [other_lo, other_hi)."""
    if not len(other_lo) or not len(lo):
        return np.zeros(len(lo), dtype=bool)
    order = np.argsort(other_lo, kind="stable")
    starts = other_lo[order]
    # The furthest end among the ranges starting at or before each start.
    reach = np.maximum.accumulate(other_hi[order])
    # The last range starting before hi: it, or one before it, reaches past lo.
    last = np.searchsorted(starts, hi, side="left") - 1
    return (last >= 0) & (reach[np.maximum(last, 0)] > lo) & (hi > lo)


def segments(section: SFrameSection, cfi: CombinedCfi, compared: BoolArray, abi: Abi) -> Segments:
    """Compare the rules at every boundary of the CFI functions in ``compared``: the points of
    :data:`FDE_CHUNK` functions at a time, looked up and compared :data:`CHUNK` points at a
    time (a bounded working set)."""
    bounds = _sframe_boundaries(section)
    fdes = np.flatnonzero(compared)
    pieces: list[tuple[IntArray, IntArray, IntArray, IntArray, BoolArray, IntArray]] = []
    for low in range(0, max(len(fdes), 1), FDE_CHUNK):  # once at least: empty columns
        fde, start, end, pc, rule = _points(cfi, compared, bounds, fdes[low : low + FDE_CHUNK])
        agree = np.empty(len(pc), dtype=bool)
        for first_point in range(0, len(pc), CHUNK):
            part = slice(first_point, first_point + CHUNK)
            found = section.find_rows(pc[part].astype(np.uint64))
            theirs_rules = sframe_columns(found, section, abi)
            agree[part] = rules_agree(cfi.rules.take(rule[part]), theirs_rules, abi)
        pieces.append((fde, start, end, pc, agree, rule))
    fde, start, end, pc, agree, rule = (np.concatenate(c) for c in zip(*pieces, strict=True))
    differ = np.flatnonzero(~agree)
    found = section.find_rows(pc[differ].astype(np.uint64))
    return Segments(
        fde,
        start,
        end,
        pc,
        agree,
        differ,
        cfi.rules.take(rule[differ]),
        sframe_columns(found, section, abi),
        _covering_function(section, pc[differ]),
    )


def _points(
    cfi: CombinedCfi, compared: BoolArray, bounds: IntArray, fdes: IntArray
) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    """The points of the CFI functions ``fdes`` (increasing, all compared) where either
    side's rules may change: per point its function, the range [start, end) of offsets it
    begins, its address and the CFI's rule there."""
    begin = cfi.begin
    size = cfi.size
    # The CFI side's boundaries: its rows' starts (tagged 0: they sort before SFrame's).
    if len(fdes):
        first_row, last_row = np.searchsorted(cfi.row_fde, [fdes[0], fdes[-1] + 1])
    else:
        first_row = last_row = 0
    rows = np.arange(first_row, last_row, dtype=np.int64)
    rows = rows[compared[cfi.row_fde[rows]]]
    own = ((cfi.row_fde[rows] << _KEY_SHIFT) | np.minimum(cfi.row_begin[rows], _KEY_LIMIT)) << 1
    # SFrame's, inside each compared CFI function (tagged 1).
    lo = np.searchsorted(bounds, begin[fdes], side="left")
    hi = np.searchsorted(bounds, begin[fdes] + size[fdes], side="left")
    counts = hi - lo
    inside_fde = np.repeat(fdes, counts)
    before = np.cumsum(counts) - counts
    pick = np.repeat(lo - before, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    theirs = (((inside_fde << _KEY_SHIFT) | (bounds[pick] - begin[inside_fde])) << 1) | 1
    # Both are in order: one stable sort merges them; each point's CFI row is the last CFI
    # boundary at or before it.
    tagged = np.concatenate([own, theirs])
    tagged.sort(kind="stable")
    cfi_row = np.cumsum((tagged & 1) == 0) - 1
    keys = tagged >> 1
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    keys, cfi_row = keys[first], cfi_row[first]
    fde = keys >> _KEY_SHIFT
    start = keys & _KEY_LIMIT
    following = np.append(fde[1:] == fde[:-1], False)
    end = np.where(following, np.append(start[1:], 0), size[fde])
    rule = cfi.row_rule[rows[np.maximum(cfi_row, 0)]]
    return fde, start, end, begin[fde] + start, rule


def _sframe_boundaries(section: SFrameSection) -> IntArray:
    """Every address where SFrame's answer may change, sorted: function starts and ends, row
    starts (every block's, in PCMASK functions: blocks of rep_size bytes from the function's
    start; in V1, 16-byte blocks aligned on 16, as libsframe 2.40 matches the PC's low four
    bits)."""
    table = section.table
    start = table.start.astype(np.int64)
    end = start + table.size
    row_function, row_offset = section.row_starts()
    masked = fde_pc_type(table.info) == PcType.MASK
    plain = ~masked[row_function] & (row_offset < table.size[row_function])
    parts = [start, end, start[row_function[plain]] + row_offset[plain]]
    v1 = section.version is Version.V1
    for index in np.flatnonzero(masked).tolist():
        rep = _V1_BLOCK if v1 else int(table.rep_size[index])
        if rep <= 0:
            continue
        first, last = int(start[index]), int(end[index])
        base = first - first % rep if v1 else first
        offsets = row_offset[row_function == index] % rep
        blocks = -(-(last - base) // rep)
        if blocks * max(len(offsets), 1) > MAX_PCMASK_POINTS:
            continue
        grid = base + (np.arange(blocks, dtype=np.int64)[:, None] * rep + offsets[None, :]).ravel()
        parts.append(grid[(grid >= first) & (grid < last)])
    bounds = np.concatenate(parts)
    bounds.sort(kind="stable")  # sorted runs: a merge
    return bounds


#: libsframe 2.40 matches V1 PCMASK rows on the PC's low four bits.
_V1_BLOCK = 16


def _covering_function(section: SFrameSection, pcs: IntArray) -> IntArray:
    """The SFrame function whose range holds each PC (-1: none)."""
    table = section.table
    if not len(table):
        return np.full(len(pcs), -1, dtype=np.int64)
    start = table.start.astype(np.int64)
    order = np.argsort(start, kind="stable")
    at = np.searchsorted(start[order], pcs, side="right") - 1
    index = order[np.maximum(at, 0)]
    inside = (at >= 0) & (pcs < start[index] + table.size[index])
    return np.where(inside, index, -1)


def sframe_columns(found: BatchResult, section: SFrameSection, abi: Abi) -> RuleColumns:
    """The batch lookup's answers in the canonical vocabulary (NO_ROW where none applies)."""
    ok = found.row_index >= 0
    cfa_kind = np.where(found.cfa_deref, int(CfaKind.DEREF), int(CfaKind.REG))
    cfa_kind = np.where(ok & (found.cfa_reg >= 0), cfa_kind, int(CfaKind.NONE))
    cfa_reg = np.where(cfa_kind != CfaKind.NONE, found.cfa_reg, -1)
    cfa_offset = np.where(cfa_kind != CfaKind.NONE, found.cfa_offset, 0)
    fixed_ra = section.header.cfa_fixed_ra_offset
    fp = _register_columns(found.fp_kind, found.fp_reg, found.fp_offset, ok, None)
    ra = _register_columns(found.ra_kind, found.ra_reg, found.ra_offset, ok, fixed_ra or None)
    mangled = np.where(ok, found.mangled_ra.astype(np.int64), 0)
    return RuleColumns(cfa_kind, cfa_reg, cfa_offset, *fp, *ra, mangled)


def _register_columns(
    kind: npt.NDArray[np.int8],
    reg: IntArray,
    offset: IntArray,
    ok: BoolArray,
    padding_at_cfa: int | None,
) -> tuple[IntArray, IntArray, IntArray]:
    """SFrame's rule kinds (format.model.RuleKind) as RegKind columns."""
    relative_kind, register_kind, keeps_offset = _KIND_TABLES[padding_at_cfa is not None]
    code = np.where(ok, kind, _NO_ROW_CODE)
    relative = reg < 0
    out = np.where(relative, relative_kind[code], register_kind[code])
    with_register = (out == RegKind.AT_REG) | (out == RegKind.VAL_REG)
    out_reg = np.where(with_register, reg, -1)
    out_offset = np.where(keeps_offset[code], offset, 0)
    if padding_at_cfa is not None:
        padding = code == RULE_KIND_CODES[RuleKind.PADDING]
        if padding.any():
            out_offset = np.where(padding, padding_at_cfa, out_offset)
    return out, out_reg, out_offset


def _kind_tables(padding_at_cfa: bool) -> tuple[IntArray, IntArray, BoolArray]:
    """Per RuleKind code (and one more for "no row"): the RegKind of a rule relative to the
    CFA, of one relative to a register, and whether its offset is kept."""
    count = len(RULE_KIND_CODES) + 1
    relative = np.full(count, int(RegKind.SAME), dtype=np.int64)
    register = np.full(count, int(RegKind.SAME), dtype=np.int64)
    keeps = np.zeros(count, dtype=bool)
    for rule_kind, code in RULE_KIND_CODES.items():
        if rule_kind is RuleKind.SAVED:
            relative[code], register[code], keeps[code] = RegKind.AT_CFA, RegKind.AT_REG, True
        elif rule_kind is RuleKind.VALUE:
            relative[code], register[code], keeps[code] = RegKind.VAL_CFA, RegKind.VAL_REG, True
        elif rule_kind is RuleKind.FIXED:
            relative[code] = register[code] = RegKind.AT_CFA
            keeps[code] = True
        elif rule_kind is RuleKind.UNDEFINED:
            relative[code] = register[code] = RegKind.UNDEFINED
        elif rule_kind is RuleKind.PADDING and padding_at_cfa:
            # A padding word: the ABI's default, the header's fixed RA offset.
            relative[code] = register[code] = RegKind.AT_CFA
    relative[-1] = register[-1] = NO_ROW
    return relative, register, keeps


#: The RuleKind code standing for "no row".
_NO_ROW_CODE = len(RULE_KIND_CODES)
_KIND_TABLES = {False: _kind_tables(False), True: _kind_tables(True)}


def rules_agree(cfi: RuleColumns, sframe: RuleColumns, abi: Abi) -> BoolArray:
    """Where the CFI's and SFrame's rules say the same: the same CFA, FP and RA (and signing
    state on AArch64), or both saying the RA is undefined."""
    same = (
        (cfi.cfa_kind == sframe.cfa_kind)
        & (cfi.cfa_reg == sframe.cfa_reg)
        & (cfi.cfa_offset == sframe.cfa_offset)
        & (cfi.cfa_kind != CfaKind.OTHER)
        & (cfi.cfa_kind != CfaKind.NONE)
    )
    for kind, reg, offset, other_kind, other_reg, other_offset in (
        (cfi.fp_kind, cfi.fp_reg, cfi.fp_offset, sframe.fp_kind, sframe.fp_reg, sframe.fp_offset),
        (cfi.ra_kind, cfi.ra_reg, cfi.ra_offset, sframe.ra_kind, sframe.ra_reg, sframe.ra_offset),
    ):
        same &= (kind == other_kind) & (reg == other_reg) & (offset == other_offset)
        same &= kind != RegKind.OTHER
    if abi.is_aarch64:
        same &= cfi.mangled == sframe.mangled
    outermost = (cfi.ra_kind == RegKind.UNDEFINED) & (sframe.ra_kind == RegKind.UNDEFINED)
    agree: BoolArray = same | outermost
    return agree


def signal_frames_without_rows(section: SFrameSection) -> BoolArray:
    """Per SFrame function: a signal frame with no rows (what gas keeps when it cannot
    describe one)."""
    table = section.table
    kept: BoolArray = (fde_signal_frame(table.info) != 0) & (table.num_rows == 0)
    return kept


def register_names(abi: Abi) -> dict[int, str]:
    """Short names of the registers the rules name most (as ``objdump --sframe`` shows them)."""
    return {DwarfReg.SP[abi]: "sp", DwarfReg.FP[abi]: "fp", DwarfReg.RA[abi]: "ra"}


__all__ = [
    "MAX_PCMASK_POINTS",
    "NO_ROW",
    "CombinedCfi",
    "Coverage",
    "Segments",
    "combine",
    "coverage",
    "register_names",
    "rules_agree",
    "segments",
    "sframe_columns",
    "signal_frames_without_rows",
]
