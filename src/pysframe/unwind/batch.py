"""Many stacks walked together: the unwinder's batch form, with numpy.

A batch walks its stacks one frame of each per step.  At each step, the PCs of the walks still
going are looked up in their address spaces (:class:`BatchSpaces`), each module's PCs in its
SFrame at once (:meth:`~pysframe.format.lookup.SectionLookup.find_rows`), and the frames whose
row is *plain* are stepped together: the CFA is the SP or the FP plus an offset, the return
address is read at the CFA plus an offset (in the first frame, it may be in the link
register), the FP is read at the CFA plus an offset or unchanged; each check the unwinder makes,
in its order.  Every other frame (no row: the frame-pointer chain; what may be a signal
trampoline; a rule that dereferences the CFA or reads another register; a frame restored from
a signal context) is stepped by :meth:`Unwinder.step <pysframe.unwind.core.Unwinder.step>`,
the code ``stack`` runs, and its caller goes on in the batch.

Memory is read through :class:`BatchMemory` (a recording's stack copies: many words at once, or
one walk's bytes for a step).  A walk's frames are its PCs, innermost first: the walk's first
PC, then return addresses (or PCs restored from signal contexts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..bounded import BoundedCache
from ..errors import SFrameError
from ..format.layout import fde_signal_frame
from ..format.lookup import RULE_KINDS, BatchResult, SectionLookup
from ..format.model import RuleKind
from .core import (
    Arch,
    FindModule,
    FrameSource,
    ReadMemory,
    Registers,
    StopKind,
    Unwinder,
    WalkState,
)

if TYPE_CHECKING:
    import numpy.typing as npt

    from .modules import Module

    Rows = npt.NDArray[np.int64]
    Words = npt.NDArray[np.uint64]
    Mask = npt.NDArray[np.bool_]

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
_UNTRACKED = RULE_KINDS.index(RuleKind.UNTRACKED)
_FIXED = RULE_KINDS.index(RuleKind.FIXED)
_PADDING = RULE_KINDS.index(RuleKind.PADDING)
_UNDEFINED = RULE_KINDS.index(RuleKind.UNDEFINED)
_SAVED = RULE_KINDS.index(RuleKind.SAVED)

#: Stop kinds by their code in :attr:`Walks.stop`.
STOPS: tuple[StopKind, ...] = tuple(StopKind)
_CODE = {stop: code for code, stop in enumerate(STOPS)}


class BatchMemory(Protocol):
    """The memory of a batch's walks."""

    def read(self, walks: Rows, addresses: Words) -> tuple[Words, Mask]:
        """The 8-byte words at ``addresses``, one in each walk of ``walks``, and which could be
        read."""

    def mark(self, walks: Rows, ends: Words) -> None:
        """The walks ``walks`` used their memory up to ``ends``."""

    def reader(self, walk: int) -> ReadMemory:
        """Walk ``walk``'s memory as the unwinder reads it (marked as used, as :meth:`mark`)."""

    @property
    def used(self) -> Rows:
        """How many bytes of its memory each walk used."""


class BatchSpaces(Protocol):
    """The address spaces of a batch's walks; modules are numbered in :attr:`modules`."""

    @property
    def modules(self) -> Sequence[Module]: ...

    def mappings_at(self, walks: Rows, pcs: Words) -> tuple[Rows, Words]:
        """For each PC (one in each walk of ``walks``): the number of the module holding it
        (-1: none) and its mapping's delta (an address in the module's file is ``pc +
        delta``)."""

    def find_module(self, walk: int) -> FindModule:
        """The unwinder's ``find_module`` in walk ``walk``'s address space."""


@dataclass(frozen=True, slots=True)
class BatchStart:
    """Where each walk starts: its PC, SP, FP and link register (None: the ABI has none);
    ``walkable``: it has registers and memory; ``registers(walk)``: all its registers, for
    the unwinder's step in the first frame."""

    pc: Words
    sp: Words
    fp: Words
    lr: Words | None
    walkable: Mask
    registers: Callable[[int], Registers]


@dataclass(frozen=True, slots=True)
class Walks:
    """The walks of a batch.

    Frames are ragged: walk ``i``'s are ``pc[offsets[i]:offsets[i + 1]]``, innermost first,
    with the module each is in (``module``, a module number; -1: none), its mapping's delta
    (``delta``: an address in the module's file is ``pc + delta``, perf's map_ip) and whether
    its PC is exact (``exact``: where execution stopped; else a return address, looked up one
    byte back).  ``stop`` is why each walk ended (an index into :data:`STOPS`); ``stack_used``
    how many bytes of its memory it read (from its first SP to the end of the highest word
    read); ``stepped`` how many of its frames the unwinder stepped one at a time;
    ``lost_return``: the walk ended because a return address an SFrame row placed could not
    be read.
    """

    offsets: npt.NDArray[np.int64]
    pc: npt.NDArray[np.uint64]
    module: npt.NDArray[np.int64]
    delta: npt.NDArray[np.uint64]
    exact: npt.NDArray[np.bool_]
    stop: npt.NDArray[np.int8]
    stack_used: npt.NDArray[np.int64]
    stepped: npt.NDArray[np.int64]
    lost_return: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.stop)

    def frames(self, index: int) -> list[int]:
        """Walk ``index``'s frames' PCs, innermost first."""
        return [int(pc) for pc in self.pc[self.offsets[index] : self.offsets[index + 1]]]

    def stop_of(self, index: int) -> StopKind:
        return STOPS[int(self.stop[index])]


def no_walks(count: int) -> Walks:
    """``count`` walks that could not start (:attr:`StopKind.NO_STACK`)."""
    return Walks(
        np.zeros(count + 1, dtype=np.int64), np.zeros(0, dtype=np.uint64),
        np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool),
        np.full(count, _CODE[StopKind.NO_STACK], dtype=np.int8),
        np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64),
        np.zeros(count, dtype=bool),
    )  # fmt: skip


def joined(parts: list[Walks]) -> Walks:
    """The walks of consecutive batches as one."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return no_walks(0)
    offsets = [np.zeros(1, dtype=np.int64)]
    base = 0
    for part in parts:
        offsets.append(part.offsets[1:] + base)
        base += int(part.offsets[-1])
    columns = [np.concatenate([getattr(p, name) for p in parts]) for name in _COLUMNS[1:]]
    return Walks(np.concatenate(offsets), *columns)


#: The fields of Walks, in order.
_COLUMNS = tuple(Walks.__dataclass_fields__)


class BatchUnwinder:
    """Walks batches of stacks with ``unwinder``'s rules (and its caches of rows and
    trampolines), keeping what the batches look up again: where each section's signal
    trampoline functions are."""

    SIGNAL_CACHE_SIZE = 1024

    def __init__(self, unwinder: Unwinder) -> None:
        self.unwinder = unwinder
        self._signal_ranges: BoundedCache[SectionLookup, tuple[Words, Words]] = BoundedCache(
            self.SIGNAL_CACHE_SIZE
        )

    def walk(self, start: BatchStart, memory: BatchMemory, spaces: BatchSpaces) -> Walks:
        """Walk every stack of the batch (see the module's docstring)."""
        count = len(start.pc)
        state = _State(start.pc.copy(), start.sp.copy(), start.fp.copy(), start.lr)
        state.finish(np.flatnonzero(~start.walkable), StopKind.NO_STACK)
        frames: list[tuple[Rows, Words, Rows, Words, Mask]] = []
        for depth in range(self.unwinder.max_frames):
            rows = np.flatnonzero(state.active)
            if not len(rows):
                break
            exact = state.exact[rows]
            lookup = state.pc[rows] - np.where(exact, _U64(0), _U64(1))
            modules, deltas = spaces.mappings_at(rows, lookup)
            frames.append((rows, state.pc[rows].copy(), modules, deltas, exact))
            handed = self._step(state, rows, lookup, modules, spaces.modules, memory, depth)
            for walk in rows[handed].tolist():
                self._step_one(state, walk, depth, start, memory, spaces)
        state.finish(np.flatnonzero(state.active), StopKind.MAX_FRAMES)
        return _assembled(frames, state, count, memory)

    # -- the plain step, vectorized ----------------------------------------------------------
    def _step(
        self,
        state: _State,
        rows: Rows,
        lookup: Words,
        modules: Rows,
        known: Sequence[Module],
        memory: BatchMemory,
        depth: int,
    ) -> Mask:
        """Step the frames of ``rows`` whose row is plain; the others (True) are for the
        unwinder's step."""
        handed = np.ones(len(rows), dtype=bool)
        # The plain frames of every module, stepped together once all are found (each walk
        # has one frame here: the pieces do not touch each other's walks).
        plain_at: list[Rows] = []
        plain_results: list[BatchResult] = []
        fixed_ra: list[int] = []
        for number in _distinct(modules):
            module = known[number] if number >= 0 else None
            if module is None or module.section is None:
                continue  # no row: the frame-pointer chain, or no module at all
            chosen = np.flatnonzero(modules == number)
            sections = _with_fallback(module)
            maybe = self._maybe_trampoline(module, sections, state, rows[chosen])
            for section, result, positions in _rows_in(sections, lookup[chosen]):
                at = chosen[positions]
                plain = _plain(result, section, self.unwinder, depth) & ~maybe[positions]
                plain &= ~state.full[rows[at]]
                if len(self._signal_ranges.get(section, _signal_ranges, section)[0]):
                    plain &= ~_signal(section, result)  # the section has signal trampolines
                if not plain.all():
                    if not plain.any():
                        continue
                    at, result = at[plain], result.subset(plain)
                plain_at.append(at)
                plain_results.append(result)
                fixed_ra.append(section.header.cfa_fixed_ra_offset)
        if plain_at:
            at = np.concatenate(plain_at)
            fixed = np.repeat(np.array(fixed_ra, np.int64), [len(part) for part in plain_at])
            _apply(state, rows[at], fixed, _joined_results(plain_results), memory,
                   self.unwinder)  # fmt: skip
            handed[at] = False
        return handed

    def _maybe_trampoline(
        self, module: Module, sections: list[SectionLookup], state: _State, rows: Rows
    ) -> Mask:
        """Frames that may be signal trampolines (the unwinder decides): a return address at a
        signal trampoline function's start, or code that is the trampoline's."""
        pcs = state.pc[rows]
        maybe = np.zeros(len(rows), dtype=bool)
        for address in module.trampolines():  # none, or a few
            maybe |= pcs == _U64(address)
        later = ~state.exact[rows]
        if later.any():
            for section in sections:
                starts, ends = self._signal_ranges.get(section, _signal_ranges, section)
                if len(starts):
                    at = np.searchsorted(starts, pcs, side="right").astype(np.int64) - 1
                    maybe |= later & (at >= 0) & (pcs < ends[np.maximum(at, 0)])
        return maybe

    # -- every other step --------------------------------------------------------------------
    def _step_one(
        self,
        state: _State,
        walk: int,
        depth: int,
        start: BatchStart,
        memory: BatchMemory,
        spaces: BatchSpaces,
    ) -> None:
        """One frame of ``walk`` by the unwinder's step, from where the walk is."""
        unwinder = self.unwinder
        if depth == 0:
            here = unwinder.start(start.registers(walk))
        else:
            full = state.full_state.pop(walk, None)
            here = full if full is not None else state.walk_state(walk, depth, unwinder)
        step = unwinder.step(here, memory.reader(walk), spaces.find_module(walk))
        state.stepped[walk] += 1
        if step.caller is None:
            assert step.stop is not None
            state.finish(np.array([walk]), step.stop)
            if step.stop is StopKind.UNREADABLE and step.frame.covered:
                state.lost_return[walk] = True
            return
        state.take(walk, step.caller, unwinder)


def frames_not_set_up(modules: Sequence[Module], module: Rows, pcs: Words) -> Mask:
    """Whether, at each exact PC ``pcs[i]`` (in module ``modules[module[i]]``; -1: none),
    SFrame says its function has no frame of its own on the frame pointer: a row (of the
    module's section, else of the SFrame generated beside it) covers the PC and takes the CFA
    from the SP, not the FP.  Before its prologue sets the FP (and after its epilogue
    restores it), or in a function that keeps no frame pointer, the FP still holds a caller's
    frame: a frame-pointer chain started there leaves out the function's caller."""
    out = np.zeros(len(pcs), dtype=bool)
    for number in _distinct(module):
        if number < 0:
            continue
        chosen = np.flatnonzero(module == number)
        for section, result, positions in _rows_in(_with_fallback(modules[number]), pcs[chosen]):
            sp = Arch.of(section.header.abi).sp
            out[chosen[positions]] = ~result.cfa_deref & (result.cfa_reg == sp)
    return out


def _distinct(values: Rows) -> list[int]:
    """The distinct module numbers (-1 and up, a few hundred at most), sorted."""
    if not len(values):
        return []
    present: list[int] = (np.flatnonzero(np.bincount(values + 1)) - 1).tolist()
    return present


def _with_fallback(module: Module) -> list[SectionLookup]:
    """The module's section, then SFrame generated beside it (Unwinder._row's order)."""
    sections = [module.section]
    fallback = module.fallback()
    if fallback is not None:
        sections.append(fallback)
    return [section for section in sections if section is not None]


def _rows_in(
    sections: list[SectionLookup], pcs: Words
) -> Iterator[tuple[SectionLookup, BatchResult, Rows]]:
    """The rows covering ``pcs``: in the first section, and for the PCs it leaves out in the
    next; each piece with the positions of the PCs it answers."""
    missing = np.arange(len(pcs))
    for section in sections:
        if not len(missing):
            return
        try:
            result = section.find_rows(pcs[missing])
        except SFrameError:  # a section the lookup rejects answers nothing (Unwinder._row_in)
            continue
        found = result.row_index >= 0
        if found.any():
            yield section, result.subset(found), missing[found]
        missing = missing[~found]


def _signal(section: SectionLookup, result: BatchResult) -> Mask:
    """Whether each row's function is a signal trampoline (V3 info bit 7)."""
    signal: Mask = fde_signal_frame(section.table.info[result.function_index]).astype(bool)
    return signal


def _signal_ranges(section: SectionLookup) -> tuple[Words, Words]:
    """The [start, end) ranges of a section's signal trampoline functions, sorted."""
    table = section.table
    chosen = np.flatnonzero(fde_signal_frame(table.info).astype(bool))
    starts = table.start[chosen].astype(np.uint64)
    order = np.argsort(starts)
    ends = starts + table.size[chosen].astype(np.uint64)
    return starts[order], ends[order]


def _plain(result: BatchResult, section: SectionLookup, unwinder: Unwinder, depth: int) -> Mask:
    """Rows whose rules the vectorized step applies: the RA undefined (the outermost frame),
    or a CFA from the SP or the FP, not dereferenced; the RA at the CFA plus an offset (or, in
    the first frame, in its register); the FP at the CFA plus an offset, or unchanged, or
    undefined."""
    arch = unwinder.arch
    ra_kind = result.ra_kind
    fixed_ra = section.header.cfa_fixed_ra_offset
    in_register = (ra_kind == _UNTRACKED) | (ra_kind == _PADDING)
    ra_memory = ((ra_kind == _FIXED) | (ra_kind == _SAVED)) & (result.ra_reg < 0)
    ra_plain = ra_memory | (ra_kind == _UNDEFINED) | (in_register & (fixed_ra != 0 or depth == 0))
    fp_kind = result.fp_kind
    fp_memory = ((fp_kind == _FIXED) | (fp_kind == _SAVED)) & (result.fp_reg < 0)
    fp_plain = fp_memory | (fp_kind == _UNTRACKED) | (fp_kind == _PADDING)
    fp_plain |= fp_kind == _UNDEFINED
    undefined = ra_kind == _UNDEFINED
    cfa_plain = ~result.cfa_deref & ((result.cfa_reg == arch.sp) | (result.cfa_reg == arch.fp))
    plain: Mask = ra_plain & (undefined | (fp_plain & cfa_plain))
    return plain


class _State:
    """Per walk: the frame being unwound (PC, SP, FP, whether SP and FP are known), the
    previous CFA, whether the PC is exact, whether the walk goes on and why it stopped; and,
    for a walk at a frame restored from a signal context, its whole state (all registers)."""

    def __init__(self, pc: Words, sp: Words, fp: Words, lr: Words | None) -> None:
        count = len(pc)
        self.pc, self.sp, self.fp, self.lr = pc, sp, fp, lr
        self.sp_known = np.ones(count, dtype=bool)
        self.fp_known = np.ones(count, dtype=bool)
        self.prev_cfa = np.zeros(count, dtype=np.uint64)
        self.has_prev = np.zeros(count, dtype=bool)
        self.exact = np.ones(count, dtype=bool)
        self.active = np.ones(count, dtype=bool)
        self.first = np.ones(count, dtype=bool)
        self.stop = np.full(count, -1, dtype=np.int8)
        self.stepped = np.zeros(count, dtype=np.int64)
        self.lost_return = np.zeros(count, dtype=bool)
        #: Walks whose state the columns do not hold, and that state.
        self.full = np.zeros(count, dtype=bool)
        self.full_state: dict[int, WalkState] = {}

    def finish(self, rows: Rows, why: StopKind) -> None:
        self.active[rows] = False
        self.stop[rows] = _CODE[why]

    def advance(self, rows: Rows, cfa: Words, pc: Words, sp: Words, fp: Words,
                fp_known: Mask) -> None:  # fmt: skip
        """The caller's frame of ``rows``: ``pc`` is a return address (0: the outermost)."""
        outermost = pc == 0
        self.finish(rows[outermost], StopKind.OUTERMOST)
        go = ~outermost
        rows = rows[go]
        self.pc[rows], self.sp[rows], self.fp[rows] = pc[go], sp[go], fp[go]
        self.sp_known[rows], self.fp_known[rows] = True, fp_known[go]
        self.prev_cfa[rows], self.has_prev[rows] = cfa[go], True
        self.exact[rows] = self.first[rows] = False

    def walk_state(self, walk: int, depth: int, unwinder: Unwinder) -> WalkState:
        """Walk ``walk``'s state from the columns."""
        arch = unwinder.arch
        regs = {}
        if self.sp_known[walk]:
            regs[arch.sp] = int(self.sp[walk])
        if self.fp_known[walk]:
            regs[arch.fp] = int(self.fp[walk])
        prev = int(self.prev_cfa[walk]) if self.has_prev[walk] else None
        return WalkState(int(self.pc[walk]), regs, bool(self.exact[walk]), False, depth, prev,
                         FrameSource.SFRAME)  # fmt: skip

    def take(self, walk: int, caller: WalkState, unwinder: Unwinder) -> None:
        """Walk ``walk`` goes on from ``caller`` (the unwinder's step)."""
        arch = unwinder.arch
        self.pc[walk] = caller.pc
        self.exact[walk] = caller.exact_pc
        self.first[walk] = False
        self.has_prev[walk] = caller.prev_cfa is not None
        self.prev_cfa[walk] = caller.prev_cfa or 0
        sp, fp = caller.regs.get(arch.sp), caller.regs.get(arch.fp)
        self.sp_known[walk], self.sp[walk] = sp is not None, sp or 0
        self.fp_known[walk], self.fp[walk] = fp is not None, fp or 0
        self.full[walk] = caller.all_registers
        if caller.all_registers:
            self.full_state[walk] = caller


def _joined_results(results: list[BatchResult]) -> BatchResult:
    """The answers of several lookups, one after the other."""
    if len(results) == 1:
        return results[0]
    fields = BatchResult.__dataclass_fields__
    return BatchResult(**{name: np.concatenate([getattr(r, name) for r in results])
                          for name in fields})  # fmt: skip


def _apply(
    state: _State,
    rows: Rows,
    fixed_ra: Rows,
    result: BatchResult,
    memory: BatchMemory,
    unwinder: Unwinder,
) -> None:
    """Unwinder._step_sframe for many plain frames: each check in its order, a frame that fails
    one stopping there (``live`` holds the frames still going).  ``fixed_ra``: the header's
    fixed RA offset of each frame's section (0: none)."""
    arch, va_bits = unwinder.arch, unwinder.va_bits
    ra_kind = result.ra_kind.astype(np.int64)
    in_register = (ra_kind == _UNTRACKED) | (ra_kind == _PADDING)
    # FLEX rows with only an FP pair: the RA stays at the header's fixed offset
    has_fixed = fixed_ra != 0
    ra_offset = np.where(in_register & has_fixed, fixed_ra, result.ra_offset)
    in_register &= ~has_fixed
    live = np.ones(len(rows), dtype=bool)
    # 1. The RA undefined: the outermost frame.
    live &= ~_stopped(state, rows, ra_kind == _UNDEFINED, StopKind.OUTERMOST)
    # 2. The CFA's base register must be known; 3. the CFA aligned, growing, not below SP.
    on_sp = result.cfa_reg == arch.sp
    on_fp = result.cfa_reg == arch.fp
    known = np.where(on_sp, state.sp_known[rows], on_fp & state.fp_known[rows])
    live &= ~_stopped(state, rows, live & ~known, StopKind.UNKNOWN_REGISTER)
    base = np.where(on_sp, state.sp[rows], state.fp[rows])
    cfa: Words = base + result.cfa_offset.astype(np.uint64)
    misaligned = (cfa % _U64(arch.cfa_align)) != 0
    live &= ~_stopped(state, rows, live & misaligned, StopKind.CFA_MISALIGNED)
    below = state.has_prev[rows] & (cfa <= state.prev_cfa[rows])
    below |= state.sp_known[rows] & (cfa < state.sp[rows])
    live &= ~_stopped(state, rows, live & below, StopKind.CFA_NOT_GROWING)
    # 4. The RA: read at CFA + offset, or (the first frame only) in its register.
    ra_at: Words = cfa + ra_offset.astype(np.uint64)
    ra, readable = memory.read(rows, ra_at)
    read = live & ~in_register
    memory.mark(rows[read & readable], ra_at[read & readable] + _U64(8))
    state.lost_return[rows[read & ~readable]] = True
    live &= ~_stopped(state, rows, read & ~readable, StopKind.UNREADABLE)
    if in_register.any():
        first = state.first[rows]
        lr = state.lr[rows] if state.lr is not None else np.zeros(len(rows), np.uint64)
        ra = np.where(in_register, lr, ra)
        known = ~in_register | (first & (state.lr is not None))
        live &= ~_stopped(state, rows, live & ~known, StopKind.UNKNOWN_REGISTER)
    ra = np.where(result.mangled_ra, ra & _U64((1 << va_bits) - 1), ra)
    # 5. The FP: saved, unchanged, or unknown.
    fp_kind = result.fp_kind
    saved = (fp_kind == _FIXED) | (fp_kind == _SAVED)
    fp_at: Words = cfa + result.fp_offset.astype(np.uint64)
    fp, readable = memory.read(rows, fp_at)
    memory.mark(rows[live & saved & readable], fp_at[live & saved & readable] + _U64(8))
    unchanged = (fp_kind == _UNTRACKED) | (fp_kind == _PADDING)
    fp = np.where(saved, fp, state.fp[rows])
    # A saved FP that cannot be read is unknown from here on (not the end of the walk).
    fp_known = (saved & readable) | (unchanged & state.fp_known[rows])
    sp: Words = cfa + _U64(arch.sp_at_cfa & _MASK64)
    at = np.flatnonzero(live)
    state.advance(rows[at], cfa[at], ra[at], sp[at], fp[at], fp_known[at])


def _stopped(state: _State, rows: Rows, failing: Mask, why: StopKind) -> Mask:
    """End the walks of ``rows[failing]`` with ``why``; returns ``failing``."""
    if failing.any():
        state.finish(rows[failing], why)
    return failing


def _assembled(
    frames: list[tuple[Rows, Words, Rows, Words, Mask]],
    state: _State,
    count: int,
    memory: BatchMemory,
) -> Walks:
    """The frames recorded depth by depth, as ragged columns in walk order."""
    if frames:
        rows = np.concatenate([f[0] for f in frames])
        order = np.argsort(rows, kind="stable")  # depth order kept within a walk
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
    return Walks(
        offsets, pcs, modules, deltas, exact, state.stop.copy(), memory.used.copy(),
        state.stepped.copy(), state.lost_return.copy(),
    )  # fmt: skip


__all__ = [
    "STOPS",
    "BatchMemory",
    "BatchSpaces",
    "BatchStart",
    "BatchUnwinder",
    "Walks",
    "frames_not_set_up",
    "joined",
    "no_walks",
]
