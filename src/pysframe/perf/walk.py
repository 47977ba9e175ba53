"""Samples' user frames: their stacks unwound, a chunk at a time, from their register and
stack copies; or the user callchains they carry (:func:`recorded_chains`, ``perf record -g``).

perf records with ``--call-graph dwarf`` a copy of each sample's user registers and of the
top of its user stack (``sample_stack_user`` bytes, of which ``dyn_size`` were used).  A walk
reads only that copy, as perf's does (tools/perf/util/unwind-libdw.c memory_read: the stack
copy, from the sampled SP): it ends where a read falls outside it.  Like perf 6.1's
memory_read (``addr + 8 >= end``), a word that ends at the copy's very last byte counts as
outside it; and where a return address cannot be read, perf's walk gives one more frame, at
address 0 (printed one byte back, 0xffffffffffffffff): ``Walks.lost_return`` says so.

The walks are the unwinder's batch form (:class:`pysframe.unwind.BatchUnwinder`): the samples'
stack copies are its memory, each sample's process its address space
(:class:`~pysframe.perf.spaces.AddressSpaces`).  Walks go at most :data:`MAX_FRAMES` frames, as
perf's (PERF_MAX_STACK_DEPTH).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..dataclass import dataclass
from ..unwind import (
    BatchStart,
    BatchUnwinder,
    Module,
    ModuleInfo,
    Registers,
    Unwinder,
    Walks,
    frames_not_set_up,
)
from ..unwind import no_walks as no_walks
from .layout import CONTEXT_HV, CONTEXT_KERNEL, CONTEXT_MAX, CONTEXT_USER, CONTEXT_USER_DEFERRED
from .registers import RegisterLayout
from .samples import WordGather, range_positions, sorted_distinct

if TYPE_CHECKING:
    import numpy.typing as npt

    from .samples import SampleChunk
    from .spaces import AddressSpaces

    Rows = npt.NDArray[np.int64]
    Words = npt.NDArray[np.uint64]
    Mask = npt.NDArray[np.bool_]

#: Frames a walk gives at most: perf's PERF_MAX_STACK_DEPTH (perf script's --max-stack).
MAX_FRAMES = 127

_U64 = np.uint64
_U64_MAX = (1 << 64) - 1
#: The most bytes a record holds (its size is 16 bits): a stack copy is smaller.
_RECORD_MAX = 1 << 16


def sample_unwinder(layout: RegisterLayout, max_frames: int = MAX_FRAMES) -> BatchUnwinder:
    """The unwinder of a recording's samples with ``layout``'s registers (each walk finds
    its modules in its own process)."""
    return BatchUnwinder(Unwinder(layout.abi, _nowhere, max_frames=max_frames, names=False))


def walk_samples(
    chunk: SampleChunk,
    layout: RegisterLayout,
    spaces: AddressSpaces,
    unwinder: BatchUnwinder,
    *,
    select: Rows | None = None,
    count_used: bool = True,
) -> Walks:
    """Walk the user stacks of the samples ``select`` of ``chunk`` (default: all of them), in
    that order; the address spaces must be as they were at those samples.  ``count_used``
    False: how much of its stack copy each walk read is not counted (``stack_used`` 0)."""
    if select is None:
        select = np.arange(len(chunk), dtype=np.int64)
    count = len(select)
    if layout.pc is None or layout.sp is None or not count:
        return no_walks(count)
    # the registers a walk starts from; all of them only for a first frame the unwinder steps
    starting = [layout.pc, layout.sp, *(c for c in (layout.fp, layout.lr) if c is not None)]
    regs = np.ascontiguousarray(chunk.registers(starting, select).T)  # a row per register
    pc, sp = regs[0], regs[1]
    fp = regs[2] if layout.fp is not None else np.zeros(count, _U64)
    lr = regs[-1] if layout.lr is not None else None
    walkable = (chunk.regs_abi[select] != 0) & (chunk.stack_dyn_size[select] > 0)
    every = range(len(layout.perf))

    def registers(walk: int) -> Registers:
        return layout.registers(chunk.registers(every, select[walk : walk + 1])[0].tolist())

    start = BatchStart(pc, sp, fp, lr, walkable, registers)
    memory = _StackCopies(chunk, select, sp, count_used)
    return unwinder.walk(start, memory, _SampleSpaces(spaces, chunk.pid[select]))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RecordedChains:
    """The user frames the samples' callchains hold (``perf record -g``: the kernel's
    frame-pointer walk, arch/x86/events/core.c perf_callchain_user): sample ``i``'s are
    ``pc[offsets[i]:offsets[i + 1]]``, innermost first (the first is the user PC the sample
    interrupted, the others return addresses), each with its module (-1: none) and its
    mapping's delta (perf's map_ip: ``pc + delta``).

    ``leaf_not_set_up``: per sample, SFrame says the function at its first user PC had no
    frame of its own on the frame pointer there (:func:`pysframe.unwind.frames_not_set_up`):
    the chain then leaves out that function's caller."""

    offsets: Rows
    pc: Words
    module: Rows
    delta: Words
    leaf_not_set_up: Mask

    def __len__(self) -> int:
        return len(self.offsets) - 1


def joined_chains(parts: list[RecordedChains]) -> RecordedChains:
    """The recorded chains of consecutive pieces of a chunk as one."""
    if len(parts) == 1:
        return parts[0]
    offsets, base = [np.zeros(1, np.int64)], 0
    for part in parts:
        offsets.append(part.offsets[1:] + base)
        base += int(part.offsets[-1])
    return RecordedChains(
        np.concatenate(offsets), *(np.concatenate([getattr(part, name) for part in parts])
                                   for name in ("pc", "module", "delta", "leaf_not_set_up")),
    )  # fmt: skip


def discarded_chains(chain: Words, offsets: Rows) -> Mask:
    """Which samples' callchains perf 6.1 throws away whole: those holding a context marker
    other than PERF_CONTEXT_HV, _KERNEL and _USER (util/machine.c add_callchain_ip: "invalid
    callchain context", the cursor reset), such as the -1 a frame-pointer walk of the kernel
    may end with.  perf then prints none of their recorded frames (a walk of a stack copy
    still gives its own)."""
    count = len(offsets) - 1
    owner = np.repeat(np.arange(count), np.diff(offsets))
    marker = chain >= np.uint64(CONTEXT_MAX)
    # Linux 6.19's PERF_CONTEXT_USER_DEFERRED is valid too (its perf takes it as
    # PERF_CONTEXT_USER): an unmerged deferred chain keeps its kernel part (deferred.py).
    for valid in (CONTEXT_HV, CONTEXT_KERNEL, CONTEXT_USER, CONTEXT_USER_DEFERRED):
        marker &= chain != np.uint64(valid)
    out = np.zeros(count, bool)
    out[owner[marker]] = True
    return out


def context_parts(chain: Words, offsets: Rows, marker: int) -> tuple[Rows, Rows]:
    """Where each sample's addresses of one context lie in the recorded callchains (positions,
    one sample after the other) and how many each has: those after its ``marker``
    (PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER...), up to the next context marker or the end of
    its chain (util/machine.c thread__resolve_callchain_sample skips the markers, and takes
    each address in the context the last one set); none where perf throws the chain away
    (:func:`discarded_chains`)."""
    count = len(offsets) - 1
    owner = np.repeat(np.arange(count), np.diff(offsets))
    at_marker = np.flatnonzero(chain == np.uint64(marker))
    first = np.full(count, -1, dtype=np.int64)
    first[owner[at_marker][::-1]] = at_marker[::-1]  # the first marker of each sample
    has = first >= 0
    start = np.where(has, first + 1, offsets[:-1])
    markers = np.flatnonzero(chain >= np.uint64(CONTEXT_MAX))
    following = np.append(markers, np.iinfo(np.int64).max)[np.searchsorted(markers, start)]
    end = np.minimum(following, offsets[1:])
    lengths = np.where(has & ~discarded_chains(chain, offsets), end - start, 0).astype(np.int64)
    return range_positions(start, lengths), lengths


def recorded_chains(
    chunk: SampleChunk, spaces: AddressSpaces, *, select: Rows | None = None
) -> RecordedChains:
    """The user frames the callchains of the samples ``select`` of ``chunk`` hold, found in
    their processes' address spaces (as they must be at those samples).  perf 6.1 takes them
    as recorded (util/machine.c add_callchain_ip): the PC and every return address looked up
    at its own address, printed at map_ip."""
    if select is None:
        select = np.arange(len(chunk), dtype=np.int64)
    bounds = chunk.callchain_offsets
    lengths = (bounds[select + 1] - bounds[select]).astype(np.int64)
    positions = range_positions(bounds[select], lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    at, count = context_parts(chunk.callchain[positions], offsets, CONTEXT_USER)
    pcs = chunk.callchain[positions][at]
    frame_offsets = np.concatenate([[0], np.cumsum(count)]).astype(np.int64)
    owners = np.repeat(np.arange(len(select)), count)
    sample_spaces = _SampleSpaces(spaces, chunk.pid[select])
    module, delta = sample_spaces.mappings_at(owners, pcs)
    leaf = np.zeros(len(select), bool)
    with_leaf = np.flatnonzero(count > 0)
    if len(with_leaf):
        first = frame_offsets[with_leaf]
        leaf[with_leaf] = frames_not_set_up(spaces.modules, module[first], pcs[first])
    return RecordedChains(frame_offsets, pcs, module, delta, leaf)


def kernel_parts(chain: Words, offsets: Rows) -> tuple[Rows, Rows]:
    """Where each sample's kernel addresses lie in the recorded callchains, and how many."""
    return context_parts(chain, offsets, CONTEXT_KERNEL)


class _StackCopies:
    """The stack copies of a chunk's samples ``select``: word reads at many addresses at once
    (walk ``i`` is sample ``select[i]``), or one walk's bytes."""

    def __init__(self, chunk: SampleChunk, select: Rows, sp0: Words, count_used: bool) -> None:
        self.chunk = chunk
        self.counts_used = count_used
        self.words = WordGather(chunk.buffer)
        self.select = select
        base = chunk.stack_offset[select].astype(np.uint64)
        size = chunk.stack_dyn_size[select].astype(np.uint64)
        # perf 6.1: a word with addr + 8 >= end is outside (none in a copy of 8 bytes or less)
        self.limit = np.where(size > _U64(8), size - _U64(8), _U64(0))
        self.sp0 = sp0
        #: What turns an address into its place in the buffer (wrapping).
        self.shift = base - sp0
        #: Whether an address below a walk's first SP may wrap to an offset inside its copy
        #: (an SP within a record's size of 2**64): else that offset alone says it is outside.
        self.wraps = bool(len(sp0)) and int(sp0.max()) > _U64_MAX - _RECORD_MAX
        self.word = np.dtype(">u8" if chunk.big_endian else "<u8")
        self.used = np.zeros(len(sp0), dtype=np.int64)

    def read(self, walks: Rows, addresses: Words) -> tuple[Words, Mask]:
        offset = addresses - self.sp0[walks]  # below the copy it wraps, past its size
        inside = offset < self.limit[walks]
        if self.wraps:
            inside &= addresses >= self.sp0[walks]
        start = (addresses + self.shift[walks]).view(np.int64)
        if np.count_nonzero(inside) == len(inside):  # (the usual case)
            return self.words(start).view(self.word), inside
        values = np.zeros(len(walks), dtype=np.uint64)
        values[inside] = self.words(start[inside]).view(self.word)
        return values, inside

    def mark(self, walks: Rows, ends: Words) -> None:
        np.maximum.at(self.used, walks, (ends - self.sp0[walks]).astype(np.int64))

    def reader(self, walk: int) -> Callable[[int, int], bytes]:
        stack = self.chunk.stack(int(self.select[walk]))
        base = int(self.sp0[walk])
        used = self.used

        def read_memory(address: int, size: int) -> bytes:
            offset = address - base
            if offset < 0 or offset + size >= len(stack):  # perf 6.1's memory_read
                raise OSError(f"{address:#x} is outside the stack copy")
            used[walk] = max(int(used[walk]), offset + size)
            return bytes(stack[offset : offset + size])

        return read_memory


class _SampleSpaces:
    """Each walk's process, among the recording's address spaces."""

    def __init__(self, spaces: AddressSpaces, pids: npt.NDArray[np.int32]) -> None:
        self.spaces = spaces
        self.pids = pids.astype(np.int64)
        #: The one process of every walk, where they are all of one (most chunks): the walks
        #: asked about are then found in it without looking at theirs.
        distinct = _distinct(self.pids)
        self.only = distinct[0] if len(distinct) == 1 else None

    @property
    def modules(self) -> Sequence[Module]:
        return self.spaces.modules

    def mappings_at(self, walks: Rows, pcs: Words) -> tuple[Rows, Words]:
        if self.only is not None:
            return self.spaces.mappings_at(self.only, pcs)
        pids = self.pids[walks]
        distinct = _distinct(pids)
        if len(distinct) == 1:  # (most chunks hold one process)
            return self.spaces.mappings_at(distinct[0], pcs)
        modules = np.full(len(pcs), -1, dtype=np.int64)
        deltas = np.zeros(len(pcs), dtype=np.uint64)
        for pid in distinct:
            chosen = pids == pid
            modules[chosen], deltas[chosen] = self.spaces.mappings_at(pid, pcs[chosen])
        return modules, deltas

    def find_module(self, walk: int) -> Callable[[int], ModuleInfo | None]:
        return self.spaces.find_module(int(self.pids[walk]))


def _distinct(values: Rows) -> list[int]:
    """The distinct values, sorted (most chunks hold one process: no sort then)."""
    if not len(values) or (values == values[0]).all():
        first: list[int] = values[:1].tolist()
        return first
    return sorted_distinct(values)


def _nowhere(pc: int) -> ModuleInfo | None:
    return None


__all__ = [
    "MAX_FRAMES", "RecordedChains", "context_parts", "discarded_chains", "joined_chains",
    "kernel_parts", "no_walks", "recorded_chains", "sample_unwinder", "walk_samples",
]  # fmt: skip
