"""Many samples' user stacks unwound at once, from their register and stack copies.

perf records with ``--call-graph dwarf`` a copy of each sample's user registers and of the
top of its user stack (``sample_stack_user`` bytes, of which ``dyn_size`` were used).  A walk
reads only that copy, as perf's does (tools/perf/util/unwind-libdw.c memory_read: the stack
copy, from the sampled SP): it ends where a read falls outside it.  Like perf 6.1's
memory_read (``addr + 8 >= end``), a word that ends at the copy's very last byte counts as
outside it; and where a return address cannot be read, perf's walk gives one more frame, at
address 0 (printed one byte back, 0xffffffffffffffff): :attr:`Walks.lost_return` says so.

:func:`walk_samples` walks the samples of a chunk together: one vectorized step per frame
depth.  At each step, the PCs of the walks still going are looked up in their processes'
modules (:class:`~pysframe.perf.spaces.AddressSpaces`), each module's PCs in its SFrame section
in one ``find_fres`` call, and the rows applied to all of them at once: CFA from the SP or
the FP plus an offset, the return address and the FP read from the stack copies (one gather),
or the frame-pointer chain where no row applies.  The rules, checks and their order are those
of the single-stack unwinder (:class:`pysframe.unwind.core.Unwinder`), which stays the
reference: :func:`walk_sample` walks one sample with it, and the tests hold the two equal.
A sample that meets what the vectorized step does not do (a rule that reads another register
or dereferences the CFA, a register-held RA past the first frame, a signal frame) is walked by
the reference instead, from its start.

A walk's frames are its PCs, innermost first: the sampled PC, then return addresses.  Walks go
at most :data:`MAX_FRAMES` frames, as perf's (PERF_MAX_STACK_DEPTH).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SFrameError
from ..format.constants import S390X_SP_VAL_OFFSET, Abi, DwarfReg
from ..format.layout import fde_signal_frame
from ..format.lookup import RULE_KINDS, BatchResult
from ..format.model import RuleKind
from ..format.section import SFrameSection
from ..unwind.core import (
    DEFAULT_VA_BITS,
    Backtrace,
    FrameSource,
    ModuleInfo,
    StopKind,
    Unwinder,
)
from .registers import RegisterLayout
from .samples import WordGather

if TYPE_CHECKING:
    import numpy.typing as npt

    from .modules import Module
    from .samples import SampleChunk
    from .spaces import AddressSpaces

    Rows = npt.NDArray[np.int64]
    Words = npt.NDArray[np.uint64]
    Mask = npt.NDArray[np.bool_]

#: Frames a walk gives at most: perf's PERF_MAX_STACK_DEPTH (perf script's --max-stack).
MAX_FRAMES = 127

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
_UNTRACKED = RULE_KINDS.index(RuleKind.UNTRACKED)
_FIXED = RULE_KINDS.index(RuleKind.FIXED)
_PADDING = RULE_KINDS.index(RuleKind.PADDING)
_UNDEFINED = RULE_KINDS.index(RuleKind.UNDEFINED)
_SAVED = RULE_KINDS.index(RuleKind.SAVED)


class Stop(Enum):
    """Why a walk ended (the categories of ``perf stats``)."""

    #: The outermost frame: the return address is undefined, or 0.
    OUTERMOST = "outermost"
    #: A read fell outside the copied stack: its end, where perf's walk ends too.
    STACK_END = "end of the stack copy"
    #: No SFrame row covers the PC, and the frame-pointer chain does not go on.
    NO_RULE = "no rule"
    #: The PC is in no module of its process (and the frame-pointer chain does not go on).
    OUTSIDE = "outside every module"
    #: A CFA that does not grow or is misaligned, a register whose value is unknown.
    BAD_FRAME = "bad frame"
    #: MAX_FRAMES frames.
    MAX_FRAMES = "max frames"
    #: The sample has no user registers or stack copy (a kernel thread).
    NO_USER_STACK = "no user stack"


STOPS: tuple[Stop, ...] = tuple(Stop)
_CODE = {stop: code for code, stop in enumerate(STOPS)}
#: The reference unwinder's stop kinds in these categories.
_FROM_KIND = {
    StopKind.OUTERMOST: Stop.OUTERMOST,
    StopKind.MAX_FRAMES: Stop.MAX_FRAMES,
    StopKind.NO_UNWIND_INFO: Stop.NO_RULE,
    StopKind.UNKNOWN_REGISTER: Stop.BAD_FRAME,
    StopKind.UNREADABLE: Stop.STACK_END,
    StopKind.CFA_NOT_GROWING: Stop.BAD_FRAME,
    StopKind.CFA_MISALIGNED: Stop.BAD_FRAME,
    StopKind.UNSUPPORTED: Stop.BAD_FRAME,
    StopKind.BAD_SFRAME: Stop.BAD_FRAME,
    StopKind.CALLBACK_FAILED: Stop.BAD_FRAME,
}


@dataclass(frozen=True, slots=True)
class Walks:
    """The walks of a chunk's samples.

    Frames are ragged: sample ``i``'s are ``pc[offsets[i]:offsets[i + 1]]``, innermost first,
    with the module each is in (``module``, an index into the address spaces' modules; -1:
    none), what turns its PC into an address in the module's file (``delta``: perf's map_ip,
    ``pc + delta``) and whether its PC is exact (``exact``: the sampled PC; else a return
    address, looked up one byte back).  ``stop`` is each walk's :class:`Stop` (an index into
    :data:`STOPS`); ``stack_used`` how many bytes of its stack copy it read (from the sampled
    SP to the end of the highest word read); ``reference``: walked by the reference unwinder;
    ``lost_return``: the walk ended because a return address an SFrame row placed was outside
    the stack copy.
    """

    offsets: npt.NDArray[np.int64]
    pc: npt.NDArray[np.uint64]
    module: npt.NDArray[np.int64]
    delta: npt.NDArray[np.uint64]
    exact: npt.NDArray[np.bool_]
    stop: npt.NDArray[np.int8]
    stack_used: npt.NDArray[np.int64]
    reference: npt.NDArray[np.bool_]
    lost_return: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.stop)

    def frames(self, index: int) -> list[int]:
        """Sample ``index``'s frames' PCs, innermost first."""
        return [int(pc) for pc in self.pc[self.offsets[index] : self.offsets[index + 1]]]

    def stop_of(self, index: int) -> Stop:
        return STOPS[int(self.stop[index])]


@dataclass(frozen=True, slots=True)
class _Arch:
    abi: Abi
    sp: int
    fp: int
    cfa_align: int
    sp_at_cfa: int
    #: Whether the frame-pointer chain is followed where no row applies (not on s390x).
    fp_chain: bool


def _arch(abi: Abi) -> _Arch:
    return _Arch(
        abi,
        DwarfReg.SP[abi],
        DwarfReg.FP[abi],
        16 if abi.is_aarch64 else 8,
        S390X_SP_VAL_OFFSET if abi is Abi.S390X_ENDIAN_BIG else 0,
        abi is not Abi.S390X_ENDIAN_BIG,
    )


# ---------------------------------------------------------------------------------------------
# The vectorized walk


class _Memory:
    """The stack copies of a chunk's samples ``select``: word reads at many addresses at once
    (row ``i`` is sample ``select[i]``)."""

    def __init__(self, chunk: SampleChunk, select: Rows, sp0: Words) -> None:
        self.words = WordGather(chunk.buffer)
        self.base = chunk.stack_offset[select].astype(np.int64)
        self.size = chunk.stack_dyn_size[select].astype(np.uint64)
        self.sp0 = sp0
        self.word = np.dtype(">u8" if chunk.big_endian else "<u8")
        self.used = np.zeros(len(sp0), dtype=np.int64)

    def read(self, rows: Rows, address: Words) -> tuple[Words, Mask]:
        """The 8-byte words at ``address`` in the stack copies of samples ``rows``, and which
        could be read (inside the copy)."""
        size = self.size[rows]
        offset = address - self.sp0[rows]  # below the copy it wraps, past its size
        inside = (address >= self.sp0[rows]) & (size > _U64(8))
        inside &= offset < size - _U64(8)  # perf 6.1: addr + 8 >= end is outside
        at = np.flatnonzero(inside)
        values = np.zeros(len(rows), dtype=np.uint64)
        if len(at):
            start = self.base[rows[at]] + offset[at].astype(np.int64)
            values[at] = self.words(start).view(self.word)
        return values, inside

    def mark(self, rows: Rows, end: Words) -> None:
        """The walks of ``rows`` read their stack copies up to address ``end``."""
        if len(rows):
            np.maximum.at(self.used, rows, (end - self.sp0[rows]).astype(np.int64))


class _State:
    """Per sample: the frame being unwound (PC, SP, FP, whether SP and FP are known), the
    previous CFA, whether the PC is exact (the sampled one), whether the walk goes on."""

    def __init__(self, pc: Words, sp: Words, fp: Words, lr: Words | None) -> None:
        count = len(pc)
        self.pc, self.sp, self.fp, self.lr = pc, sp, fp, lr
        self.sp_known = np.ones(count, dtype=bool)
        self.fp_known = np.ones(count, dtype=bool)
        self.prev_cfa = np.zeros(count, dtype=np.uint64)
        self.has_prev = np.zeros(count, dtype=bool)
        self.exact = np.ones(count, dtype=bool)
        self.active = np.ones(count, dtype=bool)
        self.stop = np.full(count, -1, dtype=np.int8)
        #: Samples the vectorized step does not walk: the reference walks them.
        self.reference = np.zeros(count, dtype=bool)
        #: Walks that ended at a return address outside the stack copy.
        self.lost_return = np.zeros(count, dtype=bool)

    def finish(self, rows: Rows, why: Stop) -> None:
        self.active[rows] = False
        self.stop[rows] = _CODE[why]

    def hand_over(self, rows: Rows) -> None:
        self.active[rows] = False
        self.reference[rows] = True

    def advance(self, rows: Rows, cfa: Words, pc: Words, sp: Words, sp_known: Mask,
                fp: Words, fp_known: Mask) -> None:  # fmt: skip
        """The caller's frame of ``rows``: ``pc`` is a return address (0: the outermost)."""
        outermost = pc == 0
        self.finish(rows[outermost], Stop.OUTERMOST)
        go = ~outermost
        rows = rows[go]
        self.pc[rows], self.sp[rows], self.fp[rows] = pc[go], sp[go], fp[go]
        self.sp_known[rows], self.fp_known[rows] = sp_known[go], fp_known[go]
        self.prev_cfa[rows], self.has_prev[rows] = cfa[go], True
        self.exact[rows] = False


def walk_samples(
    chunk: SampleChunk,
    layout: RegisterLayout,
    spaces: AddressSpaces,
    *,
    select: Rows | None = None,
    max_frames: int = MAX_FRAMES,
    va_bits: int = DEFAULT_VA_BITS,
) -> Walks:
    """Walk the user stacks of the samples ``select`` of ``chunk`` (default: all of them), in
    that order (see the module's docstring); the address spaces must be as they were at those
    samples."""
    if select is None:
        select = np.arange(len(chunk), dtype=np.int64)
    count = len(select)
    if layout.pc is None or layout.sp is None or not count:
        return no_walks(count)
    arch = _arch(layout.abi)
    regs = chunk.regs[select]
    pc = regs[:, layout.pc].astype(np.uint64)
    sp = regs[:, layout.sp].astype(np.uint64)
    fp = regs[:, layout.fp].astype(np.uint64) if layout.fp is not None else np.zeros(count, _U64)
    lr = regs[:, layout.lr].astype(np.uint64) if layout.lr is not None else None
    state = _State(pc.copy(), sp.copy(), fp, lr)
    has_user = (chunk.regs_abi[select] != 0) & (chunk.stack_dyn_size[select] > 0)
    state.finish(np.flatnonzero(~has_user), Stop.NO_USER_STACK)
    memory = _Memory(chunk, select, sp)
    pids = chunk.pid[select].astype(np.int64)
    frames: list[tuple[Rows, Words, Rows, Words, Mask]] = []
    for _depth in range(max_frames):
        rows = np.flatnonzero(state.active)
        if not len(rows):
            break
        exact = state.exact[rows]
        lookup = state.pc[rows] - np.where(exact, _U64(0), _U64(1))
        modules, deltas = _mappings_at(spaces, pids[rows], lookup)
        frames.append((rows, state.pc[rows].copy(), modules, deltas, exact))
        _step(state, rows, lookup, modules, spaces, memory, arch, va_bits)
    state.finish(np.flatnonzero(state.active), Stop.MAX_FRAMES)
    walks = _assemble(frames, state, memory.used, count)
    references = np.flatnonzero(state.reference)
    if not len(references):
        return walks
    walked = {
        int(i): walk_sample(
            chunk, int(select[i]), layout, spaces, max_frames=max_frames, va_bits=va_bits
        )
        for i in references
    }
    return _spliced(walks, walked)


def joined(parts: list[Walks]) -> Walks:
    """The walks of consecutive groups of samples as one (their samples in order)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return no_walks(0)
    offsets = [np.zeros(1, dtype=np.int64)]
    base = 0
    for part in parts:
        offsets.append(part.offsets[1:] + base)
        base += int(part.offsets[-1])
    return Walks(
        np.concatenate(offsets),
        np.concatenate([p.pc for p in parts]),
        np.concatenate([p.module for p in parts]),
        np.concatenate([p.delta for p in parts]),
        np.concatenate([p.exact for p in parts]),
        np.concatenate([p.stop for p in parts]),
        np.concatenate([p.stack_used for p in parts]),
        np.concatenate([p.reference for p in parts]),
        np.concatenate([p.lost_return for p in parts]),
    )


def _mappings_at(spaces: AddressSpaces, pids: Rows, pcs: Words) -> tuple[Rows, Words]:
    modules = np.full(len(pcs), -1, dtype=np.int64)
    deltas = np.zeros(len(pcs), dtype=np.uint64)
    for pid in _distinct(pids):
        chosen = pids == pid
        modules[chosen], deltas[chosen] = spaces.mappings_at(int(pid), pcs[chosen])
    return modules, deltas


def _distinct(values: Rows) -> list[int]:
    """The distinct values, sorted (most chunks hold one process: no sort then)."""
    if not len(values) or (values == values[0]).all():
        first: list[int] = values[:1].tolist()
        return first
    distinct: list[int] = np.unique(values).tolist()
    return distinct


def _small_ids(ids: Rows) -> list[int]:
    """The distinct ids (-1 and up, a few hundred at most: module numbers), sorted."""
    if not len(ids):
        return []
    present: list[int] = (np.flatnonzero(np.bincount(ids + 1)) - 1).tolist()
    return present


def _step(
    state: _State,
    rows: Rows,
    lookup: Words,
    modules: Rows,
    spaces: AddressSpaces,
    memory: _Memory,
    arch: _Arch,
    va_bits: int,
) -> None:
    """One frame of every walk in ``rows``: by its SFrame row, else the frame-pointer chain
    (Unwinder.unwind: a module whose data cannot be used has no rows)."""
    covered = np.zeros(len(rows), dtype=bool)
    for module_id in _small_ids(modules):
        if module_id < 0:
            continue
        module = spaces.modules[module_id]
        if module.facts is None:
            continue
        chosen = np.flatnonzero(modules == module_id)
        for section, result, positions in _rows_in(module, lookup[chosen]):
            at = chosen[positions]
            covered[at] = True
            signal = _signal(section, result) | _restores_signal(module, state, rows[at])
            _apply_rows(state, rows[at], section, result, signal, memory, arch, va_bits)
    # No row covers these: a return address at a signal trampoline's start still makes the
    # frame a signal frame (Unwinder._is_trampoline), else the frame-pointer chain.
    for module_id in _small_ids(modules[~covered]):
        if module_id >= 0 and spaces.modules[module_id].facts is not None:
            chosen = np.flatnonzero(~covered & (modules == module_id))
            signal = _restores_signal(spaces.modules[module_id], state, rows[chosen])
            state.hand_over(rows[chosen[signal]])
            covered[chosen[signal]] = True
    rest = rows[~covered]
    if len(rest):
        _frame_pointer(state, rest, memory, arch, va_bits)


def _rows_in(
    module: Module, pcs: Words
) -> Iterator[tuple[SFrameSection, BatchResult, Rows]]:
    """The rows covering ``pcs``: in the module's section, and for the PCs it leaves out in
    its fallback (Unwinder._row); each piece with the positions of the PCs it answers."""
    missing = np.arange(len(pcs))
    for section in (module.section, module.fallback() if module.with_fallback else None):
        if section is None or not len(missing):
            continue
        try:
            result = section.find_fres(pcs[missing])
        except SFrameError:  # a section the lookup rejects answers nothing (Unwinder._row_in)
            continue
        found = result.row_index >= 0
        if found.any():
            yield section, _subset(result, found), missing[found]
        missing = missing[~found]


def _subset(result: BatchResult, keep: Mask) -> BatchResult:
    names = result.__dataclass_fields__
    return BatchResult(**{name: getattr(result, name)[keep] for name in names})


def _signal(section: SFrameSection, result: BatchResult) -> Mask:
    """Whether each row's function is a signal trampoline (V3 info bit 7)."""
    info = section.table.info[result.function_index]
    signal: Mask = fde_signal_frame(info).astype(bool)
    return signal


def _restores_signal(module: Module, state: _State, rows: Rows) -> Mask:
    """Whether a return address is the first byte of a signal trampoline function (the
    reference looks it up at the exact PC too: Unwinder._is_trampoline)."""
    out = np.zeros(len(rows), dtype=bool)
    later = ~state.exact[rows]
    if not later.any():
        return out
    for section in (module.section, module.fallback() if module.with_fallback else None):
        if section is None:
            continue
        starts, ends = _signal_ranges(section)
        if len(starts):
            pcs = state.pc[rows]
            at = np.searchsorted(starts, pcs, side="right").astype(np.int64) - 1
            safe = np.maximum(at, 0)
            out |= later & (at >= 0) & (pcs < ends[safe])
    return out


_SIGNAL_RANGES: dict[int, tuple[Words, Words]] = {}


def _signal_ranges(section: SFrameSection) -> tuple[Words, Words]:
    """The [start, end) ranges of a section's signal trampoline functions, sorted."""
    key = id(section)
    if key not in _SIGNAL_RANGES:
        table = section.table
        chosen = np.flatnonzero(fde_signal_frame(table.info).astype(bool))
        starts = table.start[chosen].astype(np.uint64)
        order = np.argsort(starts)
        ends = starts + table.size[chosen].astype(np.uint64)
        if len(_SIGNAL_RANGES) > 4096:
            _SIGNAL_RANGES.clear()
        _SIGNAL_RANGES[key] = (starts[order], ends[order])
    return _SIGNAL_RANGES[key]


def _apply_rows(
    state: _State,
    rows: Rows,
    section: SFrameSection,
    result: BatchResult,
    signal: Mask,
    memory: _Memory,
    arch: _Arch,
    va_bits: int,
) -> None:
    """Unwinder._step_sframe for many frames: each check in the reference's order, a frame
    that fails one stopping there (``live`` holds the frames still going)."""
    ra_kind, ra_offset, ra_reg = _ra_rules(section, result)
    fp_kind = result.fp_kind.astype(np.int64)
    handed = _not_vectorized(result, signal, ra_kind, ra_reg, fp_kind, arch)
    state.hand_over(rows[handed])
    live = ~handed
    # 1. The RA undefined: the outermost frame.
    live &= ~_stopped(state, rows, live & (ra_kind == _UNDEFINED), Stop.OUTERMOST)
    # 2. The CFA's base register must be known; 3. the CFA aligned, growing, not below SP.
    on_sp = result.cfa_reg == arch.sp
    known = np.where(on_sp, state.sp_known[rows], state.fp_known[rows])
    live &= ~_stopped(state, rows, live & ~known, Stop.BAD_FRAME)
    base = np.where(on_sp, state.sp[rows], state.fp[rows])
    cfa: Words = base + result.cfa_offset.astype(np.uint64)
    bad = live & _bad_cfa(state, rows, cfa, arch.cfa_align)
    live &= ~_stopped(state, rows, bad, Stop.BAD_FRAME)
    # 4. The RA: read at CFA + offset, or (the first frame only) in its register.
    in_register = (ra_kind == _UNTRACKED) | (ra_kind == _PADDING)
    ra_at: Words = cfa + ra_offset.astype(np.uint64)
    ra, readable = memory.read(rows, ra_at)
    read = live & ~in_register
    memory.mark(rows[read & readable], ra_at[read & readable] + _U64(8))
    state.lost_return[rows[read & ~readable]] = True
    live &= ~_stopped(state, rows, read & ~readable, Stop.STACK_END)
    first = state.exact[rows] & ~state.has_prev[rows]
    if state.lr is not None:
        ra = np.where(in_register, state.lr[rows], ra)
        known = ~in_register | first
    else:
        known = ~in_register
    live &= ~_stopped(state, rows, live & ~known, Stop.BAD_FRAME)
    ra = np.where(result.mangled_ra, ra & _U64((1 << va_bits) - 1), ra)
    # 5. The FP: saved, unchanged, or unknown.
    saved = (fp_kind == _FIXED) | (fp_kind == _SAVED)
    fp_at: Words = cfa + result.fp_offset.astype(np.uint64)
    fp, readable = memory.read(rows, fp_at)
    memory.mark(rows[live & saved & readable], fp_at[live & saved & readable] + _U64(8))
    unchanged = (fp_kind == _UNTRACKED) | (fp_kind == _PADDING)
    fp = np.where(saved, fp, state.fp[rows])
    # A saved FP outside the stack copy is unknown from here on (not the end of the walk).
    fp_known = (saved & readable) | (unchanged & state.fp_known[rows])
    sp: Words = cfa + _U64(arch.sp_at_cfa & ((1 << 64) - 1))
    at = np.flatnonzero(live)
    state.advance(
        rows[at], cfa[at], ra[at], sp[at], np.ones(len(at), bool), fp[at], fp_known[at]
    )


def _ra_rules(section: SFrameSection, result: BatchResult) -> tuple[Rows, Rows, Rows]:
    """The RA rules (kind, offset, register) of the rows, with the header's fixed offset
    standing in where a FLEX row of an AMD64 section has only an FP pair (its RA word is
    padding or untracked, Unwinder._step_sframe)."""
    ra_kind = result.ra_kind.astype(np.int64)
    ra_offset, ra_reg = result.ra_offset.copy(), result.ra_reg.copy()
    fixed_ra = section.header.cfa_fixed_ra_offset
    if fixed_ra:
        padded = (ra_kind == _UNTRACKED) | (ra_kind == _PADDING)
        ra_kind[padded], ra_offset[padded], ra_reg[padded] = _FIXED, fixed_ra, -1
    return ra_kind, ra_offset, ra_reg


def _not_vectorized(
    result: BatchResult, signal: Mask, ra_kind: Rows, ra_reg: Rows, fp_kind: Rows, arch: _Arch
) -> Mask:
    """Rows whose rules the vectorized step does not apply (the reference walks them): signal
    frames, a dereferenced CFA or one based on another register than the SP and the FP,
    register-relative RA and FP rules, and VALUE rules."""
    defined = ra_kind != _UNDEFINED
    ra_memory = (ra_kind == _FIXED) | (ra_kind == _SAVED)
    ra_simple = ra_memory | (ra_kind == _UNTRACKED) | (ra_kind == _PADDING) | ~defined
    fp_memory = (fp_kind == _FIXED) | (fp_kind == _SAVED)
    fp_simple = fp_memory | np.isin(fp_kind, (_UNTRACKED, _PADDING, _UNDEFINED))
    cfa_simple = (result.cfa_reg == arch.sp) | (result.cfa_reg == arch.fp) | ~defined
    handed: Mask = (
        signal
        | (result.cfa_deref & defined)
        | ~cfa_simple
        | ~ra_simple
        | (ra_memory & (ra_reg >= 0))
        | ~fp_simple
        | (fp_memory & (result.fp_reg >= 0))
    )
    return handed


def _frame_pointer(
    state: _State, rows: Rows, memory: _Memory, arch: _Arch, va_bits: int
) -> None:
    """Unwinder._step_frame_pointer for many frames: the frame record at FP holds the caller's
    FP and the RA; the CFA is FP + 16."""
    if not arch.fp_chain:
        state.finish(rows, Stop.NO_RULE)
        return
    fp = state.fp[rows]
    go = ~_stopped(state, rows, ~state.fp_known[rows] | (fp == 0), Stop.NO_RULE)
    rows, fp = rows[go], fp[go]
    misaligned = (fp % _U64(8)) != 0
    below = state.sp_known[rows] & (fp < state.sp[rows])
    go = ~_stopped(state, rows, misaligned | below, Stop.BAD_FRAME)
    rows, fp = rows[go], fp[go]
    cfa = fp + _U64(16)
    go = ~_stopped(state, rows, _bad_cfa(state, rows, cfa, 8), Stop.BAD_FRAME)
    rows, fp, cfa = rows[go], fp[go], cfa[go]
    caller_fp, readable = memory.read(rows, fp)
    ra, readable_ra = memory.read(rows, fp + _U64(8))
    both = readable & readable_ra  # one 16-byte read in the reference
    memory.mark(rows[both], fp[both] + _U64(16))
    go = ~_stopped(state, rows, ~both, Stop.STACK_END)
    rows, cfa, caller_fp, ra = rows[go], cfa[go], caller_fp[go], ra[go]
    if arch.abi.is_aarch64:
        ra = ra & _U64((1 << va_bits) - 1)
    # AMD64's record is right below the CFA: the caller's SP is the CFA; elsewhere unknown.
    sp_known = np.full(len(rows), arch.abi is Abi.AMD64_ENDIAN_LITTLE)
    state.advance(rows, cfa, ra, cfa, sp_known, caller_fp, np.ones(len(rows), bool))


def _bad_cfa(state: _State, rows: Rows, cfa: Words, align: int) -> Mask:
    """_check_cfa: misaligned, not above the previous CFA, or below the SP."""
    bad: Mask = (cfa % _U64(align)) != 0
    bad |= state.has_prev[rows] & (cfa <= state.prev_cfa[rows])
    bad |= state.sp_known[rows] & (cfa < state.sp[rows])
    return bad


def _stopped(state: _State, rows: Rows, failing: Mask, why: Stop) -> Mask:
    """End the walks of ``rows[failing]`` with ``why``; returns ``failing``."""
    if failing.any():
        state.finish(rows[failing], why)
    return failing


def _assemble(
    frames: list[tuple[Rows, Words, Rows, Words, Mask]], state: _State, used: Rows, count: int
) -> Walks:
    """The frames recorded depth by depth, as ragged columns in sample order."""
    if frames:
        rows = np.concatenate([f[0] for f in frames])
        order = np.argsort(rows, kind="stable")  # depth order kept within a sample
        pcs = np.concatenate([f[1] for f in frames])[order]
        modules = np.concatenate([f[2] for f in frames])[order]
        deltas = np.concatenate([f[3] for f in frames])[order]
        exact = np.concatenate([f[4] for f in frames])[order]
        counts = np.bincount(rows, minlength=count)
    else:
        pcs, modules, deltas = np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, _U64)
        exact, counts = np.zeros(0, bool), np.zeros(count, np.int64)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    stop = _classified(state.stop, modules, offsets)
    return Walks(
        offsets, pcs, modules, deltas, exact, stop, used.copy(), state.reference.copy(),
        state.lost_return.copy(),
    )  # fmt: skip


def _classified(stop: npt.NDArray[np.int8], modules: Rows, offsets: Rows) -> npt.NDArray[np.int8]:
    """A walk that could not go on from a PC outside every module stopped there."""
    stop = stop.copy()
    ends = offsets[1:] - 1
    has = offsets[1:] > offsets[:-1]
    outside = np.zeros(len(stop), dtype=bool)
    outside[has] = modules[ends[has]] < 0
    failed = np.isin(stop, [_CODE[Stop.NO_RULE], _CODE[Stop.BAD_FRAME], _CODE[Stop.STACK_END]])
    stop[outside & failed] = _CODE[Stop.OUTSIDE]
    return stop


def _spliced(walks: Walks, walked: dict[int, OneWalk]) -> Walks:
    """``walks`` with the walks of some samples replaced by the reference's."""
    parts: list[Walks] = []
    start = 0
    for index in sorted(walked):
        if index > start:
            parts.append(_slice(walks, start, index))
        parts.append(as_walks([walked[index]]))
        start = index + 1
    if start < len(walks):
        parts.append(_slice(walks, start, len(walks)))
    return joined(parts)


def _slice(walks: Walks, start: int, end: int) -> Walks:
    """The walks of samples ``start`` to ``end``."""
    first, last = int(walks.offsets[start]), int(walks.offsets[end])
    return Walks(
        walks.offsets[start : end + 1] - first,
        walks.pc[first:last],
        walks.module[first:last],
        walks.delta[first:last],
        walks.exact[first:last],
        walks.stop[start:end],
        walks.stack_used[start:end],
        walks.reference[start:end],
        walks.lost_return[start:end],
    )


def no_walks(count: int) -> Walks:
    return Walks(
        np.zeros(count + 1, dtype=np.int64),
        np.zeros(0, dtype=np.uint64),
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.uint64),
        np.zeros(0, dtype=bool),
        np.full(count, _CODE[Stop.NO_USER_STACK], dtype=np.int8),
        np.zeros(count, dtype=np.int64),
        np.zeros(count, dtype=bool),
        np.zeros(count, dtype=bool),
    )


# ---------------------------------------------------------------------------------------------
# The reference: one sample at a time, with the single-stack unwinder


@dataclass(frozen=True, slots=True)
class OneWalk:
    """One sample's walk by the reference (the fields of :class:`Walks` for one sample)."""

    pcs: list[int]
    modules: list[int]
    deltas: list[int]
    exact: list[bool]
    stop: Stop
    stack_used: int
    lost_return: bool = False


def walk_sample(
    chunk: SampleChunk,
    index: int,
    layout: RegisterLayout,
    spaces: AddressSpaces,
    *,
    max_frames: int = MAX_FRAMES,
    va_bits: int = DEFAULT_VA_BITS,
) -> OneWalk:
    """Walk sample ``index`` of ``chunk`` with :class:`pysframe.unwind.core.Unwinder`, reading
    its stack copy only, its modules from ``spaces``."""
    if (
        layout.pc is None or layout.sp is None or chunk.regs_abi[index] == 0
        or chunk.stack_dyn_size[index] == 0
    ):  # fmt: skip
        return OneWalk([], [], [], [], Stop.NO_USER_STACK, 0)
    registers = layout.registers([int(v) for v in chunk.regs[index]])
    stack = chunk.stack(index)
    base = registers.sp
    used = [0]

    def read_memory(address: int, size: int) -> bytes:
        offset = address - base
        if offset < 0 or offset + size >= len(stack):  # perf 6.1's memory_read
            raise OSError(f"{address:#x} is outside the stack copy")
        used[0] = max(used[0], offset + size)
        return bytes(stack[offset : offset + size])

    pid = int(chunk.pid[index])
    infos = _module_infos(spaces)

    def find_module(pc: int) -> ModuleInfo | None:
        module = spaces.module_at(pid, pc)
        return None if module is None else infos(module)

    unwinder = Unwinder(layout.abi, find_module, max_frames=max_frames, va_bits=va_bits)
    trace: Backtrace = unwinder.unwind(registers, read_memory)
    pcs = [frame.pc for frame in trace.frames]
    exact = [frame.source in (FrameSource.REGISTERS, FrameSource.SIGNAL) for frame in trace.frames]
    lookups = [
        (pc if is_exact else pc - 1) & _MASK64 for pc, is_exact in zip(pcs, exact, strict=True)
    ]
    found = spaces.mappings_at(pid, np.array(lookups, dtype=np.uint64))
    modules, deltas = found[0].tolist(), found[1].tolist()
    stop = _FROM_KIND[trace.stop]
    if stop in (Stop.NO_RULE, Stop.BAD_FRAME, Stop.STACK_END) and modules and modules[-1] < 0:
        stop = Stop.OUTSIDE
    lost = trace.stop is StopKind.UNREADABLE and bool(trace.frames) and trace.frames[-1].covered
    return OneWalk(pcs, modules, deltas, exact, stop, used[0], lost)


def as_walks(walked: list[OneWalk]) -> Walks:
    """Walks of the reference, sample after sample, as one :class:`Walks`."""
    offsets = np.zeros(len(walked) + 1, dtype=np.int64)
    np.cumsum([len(w.pcs) for w in walked], out=offsets[1:])
    return Walks(
        offsets,
        np.array([pc for w in walked for pc in w.pcs], dtype=np.uint64),
        np.array([m for w in walked for m in w.modules], dtype=np.int64),
        np.array([d for w in walked for d in w.deltas], dtype=np.uint64),
        np.array([e for w in walked for e in w.exact], dtype=bool),
        np.array([_CODE[w.stop] for w in walked], dtype=np.int8),
        np.array([w.stack_used for w in walked], dtype=np.int64),
        np.ones(len(walked), dtype=bool),
        np.array([w.lost_return for w in walked], dtype=bool),
    )


_INFOS: dict[int, tuple[AddressSpaces, dict[int, ModuleInfo]]] = {}


def _module_infos(spaces: AddressSpaces) -> Callable[[Module], ModuleInfo]:
    """What the reference is told of each module (kept per module, so that its row cache
    serves many samples)."""
    kept = _INFOS.get(id(spaces))
    if kept is None or kept[0] is not spaces:
        kept = (spaces, {})
        _INFOS.clear()
        _INFOS[id(spaces)] = kept
    cache = kept[1]

    def info(module: Module) -> ModuleInfo:
        found = cache.get(id(module))
        if found is None:
            if module.facts is None:
                found = ModuleInfo(module.name, module.bias, problem=module.reason or "no file")
            else:
                fallback = module.fallback if module.with_fallback else None
                found = ModuleInfo(module.name, module.bias, module.section, fallback=fallback)
            cache[id(module)] = found
        return found

    return info


__all__ = [
    "MAX_FRAMES",
    "STOPS",
    "OneWalk",
    "Stop",
    "Walks",
    "as_walks",
    "joined",
    "no_walks",
    "walk_sample",
    "walk_samples",
]
