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
from itertools import repeat
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..bounded import BoundedCache, SlotTable
from ..dataclass import dataclass
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
    #: What the plain step found for its frames: which walks go on, and each caller's PC
    #: (the return address), SP, FP, whether its FP is known, and the least CFA it may have
    #: (the CFA found, plus one).
    _Callers = tuple[Mask, Words, Words, Words, Mask, Words]

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
#: The codes the plain step sets (an enum member hashes slowly).
_OUTERMOST, _UNKNOWN_REGISTER = _CODE[StopKind.OUTERMOST], _CODE[StopKind.UNKNOWN_REGISTER]
_CFA_MISALIGNED, _CFA_NOT_GROWING = _CODE[StopKind.CFA_MISALIGNED], _CODE[StopKind.CFA_NOT_GROWING]
_UNREADABLE = _CODE[StopKind.UNREADABLE]


class BatchMemory(Protocol):
    """The memory of a batch's walks."""

    def read(self, walks: Rows, addresses: Words) -> tuple[Words, Mask]:
        """The 8-byte words at ``addresses``, one in each walk of ``walks``, and which could be
        read."""

    @property
    def counts_used(self) -> bool:
        """Whether :attr:`used` is wanted (else the walks do not :meth:`mark` what they
        read)."""

    def mark(self, walks: Rows, ends: Words) -> None:
        """The walks ``walks`` used their memory up to ``ends`` (a walk may come more than
        once: its greatest end counts)."""

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
    trampoline functions are, and what each frame met is (:class:`_Codes`): the step of a PC
    seen before costs no lookup."""

    SIGNAL_CACHE_SIZE = 1024

    def __init__(self, unwinder: Unwinder) -> None:
        self.unwinder = unwinder
        self._signal_ranges: BoundedCache[SectionLookup, tuple[Words, Words]] = BoundedCache(
            self.SIGNAL_CACHE_SIZE
        )
        self._forms = _Forms(unwinder)
        self._codes = _Codes()

    def walk(self, start: BatchStart, memory: BatchMemory, spaces: BatchSpaces) -> Walks:
        """Walk every stack of the batch (see the module's docstring)."""
        state = _State(start)
        self._codes.meet(spaces.modules)
        forms = self._forms
        frames: list[tuple[Rows, Words, Rows, Words, Mask]] = []
        for depth in range(self.unwinder.max_frames):
            rows, pcs = state.rows, state.pc
            if not len(rows):
                break
            # a return address is looked up at its call, one byte back
            exact = state.exact if state.some_exact else None
            lookup = pcs - (~state.exact).astype(_U64) if exact is not None else pcs - _U64(1)
            modules, deltas = spaces.mappings_at(rows, lookup)
            frames.append((rows, pcs, modules, deltas, state.exact))
            codes = self._codes.find(modules, lookup, exact, self._find_codes, spaces.modules)
            plain = forms.plain(depth).take(codes)
            if state.full_state:  # walks at a frame restored from a signal context
                plain &= ~np.isin(rows, list(state.full_state))
            if np.count_nonzero(plain) == len(rows):  # (the usual case) all stepped at once
                state.advance(_apply(state, _ALL, codes, forms, memory, depth))
                continue
            at = plain.nonzero()[0]
            state.edit()
            if len(at):
                state.advance_some(at, _apply(state, at, codes[at], forms, memory, depth))
            for position in (~plain).nonzero()[0].tolist():
                self._step_one(state, position, depth, start, memory, spaces)
            state.keep_going()
        state.stop[state.rows] = _CODE[StopKind.MAX_FRAMES]
        return _assembled(frames, state, len(start.pc), memory)

    # -- the plain step, vectorized ----------------------------------------------------------
    def _find_codes(
        self, modules: Rows, lookup: Words, exact: Mask, known: Sequence[Module]
    ) -> Rows:
        """The form code of each frame (:class:`_Forms`): that of its row where the
        vectorized step may apply it, else 0 (the unwinder's step: no module, no row, what may
        be a signal trampoline)."""
        codes = np.zeros(len(lookup), dtype=np.int64)
        for number in _distinct(modules):
            module = known[number] if number >= 0 else None
            if module is None or module.section is None:
                continue  # no row: the frame-pointer chain, or no module at all
            chosen = np.flatnonzero(modules == number)
            sections = _with_fallback(module)
            maybe = self._maybe_trampoline(module, sections, lookup[chosen], exact[chosen])
            for section, result, positions in _rows_in(sections, lookup[chosen]):
                found = self._forms.codes(result, section.header.cfa_fixed_ra_offset)
                found[maybe[positions]] = _HANDED
                if len(self._signal_ranges.get(section, _signal_ranges, section)[0]):
                    found[_signal(section, result)] = _HANDED  # a signal trampoline's rows
                codes[chosen[positions]] = found
        return codes

    def _maybe_trampoline(
        self, module: Module, sections: list[SectionLookup], lookup: Words, exact: Mask
    ) -> Mask:
        """Frames that may be signal trampolines (the unwinder decides): a return address at a
        signal trampoline function's start, or code that is the trampoline's."""
        pcs = lookup + (~exact).astype(_U64)
        maybe = np.zeros(len(pcs), dtype=bool)
        for address in module.trampolines():  # none, or a few
            maybe |= pcs == _U64(address)
        later = ~exact
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
        position: int,
        depth: int,
        start: BatchStart,
        memory: BatchMemory,
        spaces: BatchSpaces,
    ) -> None:
        """One frame of the walk at ``position`` among those going on, by the unwinder's step,
        from where the walk is."""
        unwinder = self.unwinder
        walk = int(state.rows[position])
        if depth == 0:
            here = unwinder.start(start.registers(walk))
        else:
            full = state.full_state.pop(walk, None)
            here = full if full is not None else state.walk_state(position, depth, unwinder)
        step = unwinder.step(here, memory.reader(walk), spaces.find_module(walk))
        state.stepped[walk] += 1
        if step.caller is None:
            assert step.stop is not None
            state.end(position, step.stop)
            if step.stop is StopKind.UNREADABLE and step.frame.covered:
                state.lost_return[walk] = True
            return
        state.take(position, step.caller, unwinder)


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
    next; each piece with the positions of the PCs it answers.  A module's sections passed
    the checks or were generated (modules._open_lookup): the few PCs of a short recording are
    answered without the table of every row (SectionLookup.find_rows_of_checked)."""
    missing = np.arange(len(pcs))
    for section in sections:
        if not len(missing):
            return
        try:
            result = section.find_rows_of_checked(pcs[missing])
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


def _plain(result: BatchResult, fixed_ra: Rows, arch: Arch, depth: int) -> Mask:
    """Rows whose rules the vectorized step applies: the RA undefined (the outermost frame),
    or a CFA from the SP or the FP, not dereferenced; the RA at the CFA plus an offset (or, in
    the first frame, in its register); the FP at the CFA plus an offset, or unchanged, or
    undefined.  ``fixed_ra``: each row's section's fixed RA offset (0: none)."""
    ra_kind = result.ra_kind
    in_register = (ra_kind == _UNTRACKED) | (ra_kind == _PADDING)
    ra_memory = ((ra_kind == _FIXED) | (ra_kind == _SAVED)) & (result.ra_reg < 0)
    in_register &= (fixed_ra != 0) | (depth == 0)
    ra_plain = ra_memory | (ra_kind == _UNDEFINED) | in_register
    fp_kind = result.fp_kind
    fp_memory = ((fp_kind == _FIXED) | (fp_kind == _SAVED)) & (result.fp_reg < 0)
    fp_plain = fp_memory | (fp_kind == _UNTRACKED) | (fp_kind == _PADDING)
    fp_plain |= fp_kind == _UNDEFINED
    undefined = ra_kind == _UNDEFINED
    cfa_plain = ~result.cfa_deref & ((result.cfa_reg == arch.sp) | (result.cfa_reg == arch.fp))
    plain: Mask = ra_plain & (undefined | (fp_plain & cfa_plain))
    return plain


#: The form code of frames the unwinder steps (:class:`_Forms`).
_HANDED = 0


class _Forms:
    """The distinct rules of the rows the batches met (the rule columns of
    :class:`~pysframe.format.lookup.BatchResult` and the section's fixed RA offset), numbered
    from 1: their form codes.  Per code, as columns: whether the vectorized step applies it
    (:func:`_plain`, in the first frame and in the others), and what :func:`_apply` reads of
    it.  Code 0 (:data:`_HANDED`) is applied nowhere: its frames go to the unwinder."""

    _KEYS = (
        "cfa_reg", "cfa_offset", "cfa_deref", "fp_kind", "fp_offset", "fp_reg", "ra_kind",
        "ra_offset", "ra_reg", "mangled_ra",
    )  # fmt: skip
    _FLAGS = frozenset({"cfa_deref", "mangled_ra"})

    def __init__(self, unwinder: Unwinder) -> None:
        self.arch = unwinder.arch
        self.va_bits = unwinder.va_bits
        #: Each form's rules and fixed RA offset, by code (code 0's are never read).
        self._forms: list[tuple[int, ...]] = [(0,) * (len(self._KEYS) + 1)]
        self._index: dict[tuple[int, ...], int] = {}
        self._columns(self._forms)

    def codes(self, result: BatchResult, fixed_ra: int) -> Rows:
        """The code of each row of ``result`` (rows of a section whose fixed RA offset is
        ``fixed_ra``), new forms numbered as they come.  Each row is looked up as a tuple
        (the rows of a batch are those no table held: a few, after the first batches)."""
        index, forms = self._index, self._forms
        columns = [getattr(result, name).tolist() for name in self._KEYS]
        codes = []
        for key in zip(*columns, repeat(fixed_ra, len(columns[0])), strict=True):
            code = index.get(key)
            if code is None:
                code = index[key] = len(forms)
                forms.append(key)
            codes.append(code)
        if len(forms) != len(self._plain_first):
            self._columns(forms)
        return np.array(codes, dtype=np.int64)

    def plain(self, depth: int) -> Mask:
        """Per code, whether the vectorized step applies it at ``depth``."""
        return self._plain_first if depth == 0 else self._plain_later

    def _columns(self, forms: list[tuple[int, ...]]) -> None:
        table = np.array(forms, dtype=np.int64)
        rules = BatchResult(
            np.zeros(len(forms), np.int64), np.zeros(len(forms), np.int64),
            **{name: table[:, at].astype(bool if name in self._FLAGS else np.int64)
               for at, name in enumerate(self._KEYS)},
        )  # fmt: skip
        fixed_ra = table[:, -1]
        arch = self.arch
        self._plain_first = _plain(rules, fixed_ra, arch, 0)
        self._plain_later = _plain(rules, fixed_ra, arch, 1)
        self._plain_first[_HANDED] = self._plain_later[_HANDED] = False
        ra_kind, fp_kind = rules.ra_kind, rules.fp_kind
        in_register = (ra_kind == _UNTRACKED) | (ra_kind == _PADDING)
        has_fixed = fixed_ra != 0
        # FLEX rows with only an FP pair: the RA stays at the header's fixed offset
        ra_offset = np.where(in_register & has_fixed, fixed_ra, rules.ra_offset)
        #: The CFA's offset from its base register, and where the RA and the FP are saved:
        #: the CFA plus these offsets (a row of each).
        self.offsets = np.stack([rules.cfa_offset, ra_offset, rules.fp_offset]).astype(np.uint64)
        #: The RA in its register (the first frame only).
        self.ra_in_register = in_register & ~has_fixed
        self.mangled_ra = rules.mangled_ra
        #: A row each: the CFA from the FP (else from the SP); the RA undefined (the
        #: outermost frame); the FP saved at the CFA plus an offset; the FP unchanged.
        self.flags = np.stack([
            rules.cfa_reg == arch.fp, ra_kind == _UNDEFINED,
            (fp_kind == _FIXED) | (fp_kind == _SAVED),
            (fp_kind == _UNTRACKED) | (fp_kind == _PADDING),
        ])  # fmt: skip
        #: Whether a plain form keeps the RA in its register, or mangles it: the step looks
        #: at neither where none does.
        self.ra_in_registers = bool((self.ra_in_register & self._plain_first).any())
        self.mangles = bool((self.mangled_ra & (self._plain_first | self._plain_later)).any())


class _Codes:
    """The form code (:class:`_Forms`) of each frame met, by its module, its lookup PC and
    whether that PC is exact, kept in a :class:`~pysframe.bounded.SlotTable`.  A code is a
    function of that key alone: of the module's SFrame (its sections, its trampolines), which
    a module number keeps while the modules met are the same (:meth:`meet`).  Keys hold the
    PC in 48 bits and the module number in 14: frames beyond are looked up every time.  The
    table has 2**16 slots (a MiB, written where keys fall): a recording's few thousand
    frames seldom evict each other, and a frame evicted is looked up again."""

    BITS = 16

    def __init__(self) -> None:
        self.table = SlotTable(self.BITS)
        self._modules: list[Module] = []

    def meet(self, modules: Sequence[Module]) -> None:
        """Keep the codes only while module numbers name the modules they named."""
        seen = self._modules
        if len(modules) < len(seen) or any(
            a is not b for a, b in zip(seen, modules[: len(seen)], strict=True)
        ):
            self.table.clear()
        self._modules = list(modules)

    def find(
        self,
        modules: Rows,
        lookup: Words,
        exact: Mask | None,
        find: Callable[[Rows, Words, Mask, Sequence[Module]], Rows],
        known: Sequence[Module],
    ) -> Rows:
        """The codes of the frames, those not in the table from ``find(modules, lookup,
        exact, known)`` (and kept); ``exact`` None: no PC is exact."""
        key = (modules + 1).astype(np.uint64) << _U64(49)
        if exact is not None:
            key |= exact.astype(np.uint64) << _U64(48)
        key |= lookup
        codes, hit = self.table.find(key)
        fits = None
        # (a module's number is below the number of modules)
        if len(key) and (int(lookup.max()) >> 48 or len(known) >= (1 << 14) - 1):
            # keys that hold neither fully: never kept, and no kept key is theirs
            fits = (lookup >> _U64(48) == 0) & (modules + 1 < 1 << 14)
            hit &= fits
        if np.count_nonzero(hit) == len(key):
            return codes
        missed = (~hit).nonzero()[0]
        if exact is None:
            exact = np.zeros(len(key), dtype=bool)
        if fits is None:  # each distinct key found once
            _, first, inverse = np.unique(key[missed], return_index=True, return_inverse=True)
            once = missed[first]
            codes[missed] = find(modules[once], lookup[once], exact[once], known)[inverse]
            kept = once
        else:
            codes[missed] = find(modules[missed], lookup[missed], exact[missed], known)
            kept = missed[fits[missed]]
        self.table.put(key[kept], codes[kept])
        return codes


#: Every walk going on (an index that takes them all).
_ALL = slice(None)


class _State:
    """The walks going on, in walk order: their numbers (``rows``) and, a column each, where
    each is: the frame being unwound (PC, SP, FP, whether SP and FP are known, whether the PC
    is exact) and the least CFA it may have (``floor``: the previous CFA plus one, 0 where
    there is none); an unknown SP is 0.  Per walk of the batch: why it stopped
    (``stop``, -1 while it goes on), how many frames the unwinder stepped, whether it lost a
    return address.  For a walk at a frame restored from a signal context, its whole state
    (all registers); the walks whose frame at hand was found through a frame record (the
    unwinder's frame-pointer fallback: the chain ends where its FP is 0, Unwinder.step)."""

    #: The columns of the walks going on.
    _COLUMNS = ("rows", "pc", "sp", "fp", "floor", "sp_known", "fp_known", "exact")

    def __init__(self, start: BatchStart) -> None:
        count = len(start.pc)
        self.stop = np.full(count, -1, dtype=np.int8)
        self.stop[~start.walkable] = _CODE[StopKind.NO_STACK]
        self.stepped = np.zeros(count, dtype=np.int64)
        self.lost_return = np.zeros(count, dtype=bool)
        self.lr = start.lr
        rows: Rows = start.walkable.nonzero()[0]
        going = len(rows)
        self.rows = rows
        self.pc, self.sp, self.fp = start.pc[rows], start.sp[rows], start.fp[rows]
        self.floor = np.zeros(going, dtype=np.uint64)
        self.sp_known = np.ones(going, dtype=bool)
        self.fp_known = np.ones(going, dtype=bool)
        self.exact = np.ones(going, dtype=bool)
        #: Whether any PC is exact (else every one is a return address).
        self.some_exact = True
        self.full_state: dict[int, WalkState] = {}
        self.by_frame_pointer: set[int] = set()
        #: While some walks step one at a time: which go on.
        self._keep = np.zeros(0, dtype=bool)
        #: Trues and falses for the columns a plain step sets (views of them; a column is
        #: copied before it is written, :meth:`edit`).
        self._true, self._false = np.ones(going, dtype=bool), np.zeros(going, dtype=bool)

    def advance(self, callers: _Callers) -> None:
        """Every walk going on took the plain step: those that go on are at their callers."""
        live, pc, sp, fp, fp_known, floor = callers
        if np.count_nonzero(live) < len(live):
            self.rows = self.rows[live]
            pc, sp, fp, floor, fp_known = pc[live], sp[live], fp[live], floor[live], fp_known[live]
        self.pc, self.sp, self.fp, self.floor, self.fp_known = pc, sp, fp, floor, fp_known
        going = len(self.rows)
        self.sp_known, self.exact = self._true[:going], self._false[:going]
        self.some_exact = False
        self.by_frame_pointer.clear()

    # -- a step where some walks step one at a time ----------------------------------------------
    def edit(self) -> None:
        """Columns of their own to write (those of the frames met stay as they are), and
        every walk going on so far."""
        for name in self._COLUMNS[1:]:
            setattr(self, name, getattr(self, name).copy())
        self._keep = np.ones(len(self.rows), dtype=bool)

    def advance_some(self, at: Rows, callers: _Callers) -> None:
        """The walks at positions ``at`` took the plain step."""
        self._keep[at], self.pc[at], self.sp[at], self.fp[at], self.fp_known[at] = callers[:5]
        self.floor[at] = callers[5]
        self.sp_known[at] = True
        self.exact[at] = False
        if self.by_frame_pointer:
            self.by_frame_pointer.difference_update(self.rows[at].tolist())

    def walk_state(self, position: int, depth: int, unwinder: Unwinder) -> WalkState:
        """The state of the walk at ``position``, from the columns."""
        arch = unwinder.arch
        regs = {}
        if self.sp_known[position]:
            regs[arch.sp] = int(self.sp[position])
        if self.fp_known[position]:
            regs[arch.fp] = int(self.fp[position])
        floor = int(self.floor[position])
        prev = floor - 1 if floor else None
        walk = int(self.rows[position])
        source = FrameSource.FRAME_POINTER if walk in self.by_frame_pointer else FrameSource.SFRAME
        return WalkState(int(self.pc[position]), regs, bool(self.exact[position]), False, depth,
                         prev, source)  # fmt: skip

    def take(self, position: int, caller: WalkState, unwinder: Unwinder) -> None:
        """The walk at ``position`` goes on from ``caller`` (the unwinder's step)."""
        arch = unwinder.arch
        walk = int(self.rows[position])
        self.pc[position] = caller.pc
        self.exact[position] = caller.exact_pc
        # (a CFA the unwinder checked is aligned: it is below 2**64 - 1)
        self.floor[position] = 0 if caller.prev_cfa is None else caller.prev_cfa + 1
        sp, fp = caller.regs.get(arch.sp), caller.regs.get(arch.fp)
        self.sp_known[position], self.sp[position] = sp is not None, sp or 0
        self.fp_known[position], self.fp[position] = fp is not None, fp or 0
        if caller.all_registers:
            self.full_state[walk] = caller
        if caller.source is FrameSource.FRAME_POINTER:
            self.by_frame_pointer.add(walk)
        else:
            self.by_frame_pointer.discard(walk)

    def end(self, position: int, why: StopKind) -> None:
        """The walk at ``position`` ends, for ``why``."""
        self._keep[position] = False
        self.stop[self.rows[position]] = _CODE[why]

    def keep_going(self) -> None:
        """The walks that go on, after the step."""
        keep = self._keep
        for name in self._COLUMNS:
            setattr(self, name, getattr(self, name)[keep])
        self.some_exact = bool(self.exact.any())


def _apply(
    state: _State,
    at: Rows | slice,
    codes: Rows,
    forms: _Forms,
    memory: BatchMemory,
    depth: int,
) -> _Callers:
    """Unwinder._step_sframe for many plain frames, those of the walks at positions ``at``
    (:data:`_ALL`: every walk going on), of the forms ``codes`` (:class:`_Forms`): each check
    in its order, a frame that fails one stopping there."""
    arch = forms.arch
    rows = state.rows[at]
    sp, sp_known = state.sp[at], state.sp_known[at]
    fp, fp_known = state.fp[at], state.fp_known[at]
    # The CFA, the RA's address and the FP's: the CFA's base register plus an offset, the
    # CFA plus theirs.  Both words are read at once (those of a frame that stops first are
    # not used).
    on_fp, outermost, saved, unchanged = forms.flags.take(codes, axis=1)
    offsets = forms.offsets.take(codes, axis=1)
    cfa: Words = np.where(on_fp, fp, sp) + offsets[0]
    count = len(rows)
    walks = np.concatenate((rows, rows))
    addresses: Words = (offsets[1:] + cfa).ravel()
    words, readable = memory.read(walks, addresses)
    ra, ra_read = words[:count], readable[:count]
    # 1. The RA undefined: the outermost frame.  2. The CFA's base register must be known.
    # 3. The CFA aligned, growing, not below SP (an unknown SP is 0).
    unknown = ~np.where(on_fp, fp_known, sp_known)
    align = arch.cfa_align
    misaligned = (cfa & _U64(align - 1) if (align & (align - 1)) == 0 else cfa % _U64(align)) != 0
    below = (cfa < state.floor[at]) | (cfa < sp)
    failed = unknown | misaligned | below
    live = ~(outermost | failed)
    # 4. The RA: read at CFA + offset, or (the first frame only: plain forms of later frames
    # read it) in its register.
    in_register = None
    read = live
    if depth == 0 and forms.ra_in_registers:
        in_register = forms.ra_in_register.take(codes)
        read = live & ~in_register
    lost = read & ~ra_read
    marked_ra = read & ra_read
    no_register = None
    if in_register is None:
        live = marked_ra
    else:
        live &= ~lost
        if state.lr is None:
            no_register = live & in_register
            live &= ~in_register
        else:
            ra = np.where(in_register, state.lr[rows], ra)
    if forms.mangles:
        ra = np.where(forms.mangled_ra.take(codes), ra & _U64((1 << forms.va_bits) - 1), ra)
    # 5. The FP: saved (read for the frames going on), unchanged, or unknown.  A saved FP that
    # cannot be read is unknown from here on (not the end of the walk).
    fp_read = readable[count:]
    fp = np.where(saved, words[count:], fp)
    fp_known = np.where(saved, fp_read, unchanged & fp_known)
    if memory.counts_used:
        marked = np.concatenate((marked_ra, live & saved & fp_read))
        memory.mark(walks[marked], addresses[marked] + _U64(8))
    # The caller: a return address of 0 ends the walk (Unwinder._caller).  Each frame's
    # first failed check is set last.
    why = np.full(count, -1, dtype=np.int8)
    zero = ra == 0
    if np.count_nonzero(zero):
        why[zero] = _OUTERMOST
    if no_register is not None:
        why[no_register] = _UNKNOWN_REGISTER
    if np.count_nonzero(lost):
        why[lost] = _UNREADABLE
        state.lost_return[rows] = lost
    if np.count_nonzero(failed):
        why[below] = _CFA_NOT_GROWING
        why[misaligned] = _CFA_MISALIGNED
        why[unknown] = _UNKNOWN_REGISTER
    why[outermost] = _OUTERMOST
    state.stop[rows] = why
    sp_after: Words = cfa + _U64(arch.sp_at_cfa & _MASK64)
    return why < 0, ra, sp_after, fp, fp_known, cfa + _U64(1)


def _assembled(
    frames: list[tuple[Rows, Words, Rows, Words, Mask]],
    state: _State,
    count: int,
    memory: BatchMemory,
) -> Walks:
    """The frames recorded depth by depth, as ragged columns in walk order: a walk's frame
    at depth ``d`` goes to its ``d``-th place (a walk going on at a depth went on at every
    one before), each depth's placed in turn, without a sort or a copy of them all."""
    offsets = np.zeros(count + 1, dtype=np.int64)
    last = offsets[1:]  # each walk's frames: its last depth, plus one
    for depth, (rows, *_) in enumerate(frames):
        last[rows] = depth + 1
    np.cumsum(offsets, out=offsets)
    total = int(offsets[-1])
    pcs, modules = np.empty(total, np.uint64), np.empty(total, np.int64)
    deltas, exact = np.empty(total, np.uint64), np.empty(total, bool)
    for depth, (rows, *parts) in enumerate(frames):
        place = offsets[rows] + depth
        for column, part in zip((pcs, modules, deltas, exact), parts, strict=True):
            column[place] = part
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
