"""Samples' user stacks unwound, a chunk at a time, from their register and stack copies.

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

from ..unwind import BatchStart, BatchUnwinder, Module, ModuleInfo, Registers, Unwinder, Walks
from ..unwind import no_walks as no_walks
from .registers import RegisterLayout
from .samples import WordGather

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
) -> Walks:
    """Walk the user stacks of the samples ``select`` of ``chunk`` (default: all of them), in
    that order; the address spaces must be as they were at those samples."""
    if select is None:
        select = np.arange(len(chunk), dtype=np.int64)
    count = len(select)
    if layout.pc is None or layout.sp is None or not count:
        return no_walks(count)
    regs = chunk.regs[select]
    pc = regs[:, layout.pc].astype(np.uint64)
    sp = regs[:, layout.sp].astype(np.uint64)
    fp = regs[:, layout.fp].astype(np.uint64) if layout.fp is not None else np.zeros(count, _U64)
    lr = regs[:, layout.lr].astype(np.uint64) if layout.lr is not None else None
    walkable = (chunk.regs_abi[select] != 0) & (chunk.stack_dyn_size[select] > 0)

    def registers(walk: int) -> Registers:
        return layout.registers([int(value) for value in regs[walk]])

    start = BatchStart(pc, sp, fp, lr, walkable, registers)
    memory = _StackCopies(chunk, select, sp)
    return unwinder.walk(start, memory, _SampleSpaces(spaces, chunk.pid[select]))


class _StackCopies:
    """The stack copies of a chunk's samples ``select``: word reads at many addresses at once
    (walk ``i`` is sample ``select[i]``), or one walk's bytes."""

    def __init__(self, chunk: SampleChunk, select: Rows, sp0: Words) -> None:
        self.chunk = chunk
        self.words = WordGather(chunk.buffer)
        self.select = select
        self.base = chunk.stack_offset[select].astype(np.int64)
        self.size = chunk.stack_dyn_size[select].astype(np.uint64)
        self.sp0 = sp0
        self.word = np.dtype(">u8" if chunk.big_endian else "<u8")
        self.used = np.zeros(len(sp0), dtype=np.int64)

    def read(self, walks: Rows, addresses: Words) -> tuple[Words, Mask]:
        size = self.size[walks]
        offset = addresses - self.sp0[walks]  # below the copy it wraps, past its size
        inside = (addresses >= self.sp0[walks]) & (size > _U64(8))
        inside &= offset < size - _U64(8)  # perf 6.1: addr + 8 >= end is outside
        at = np.flatnonzero(inside)
        values = np.zeros(len(walks), dtype=np.uint64)
        if len(at):
            start = self.base[walks[at]] + offset[at].astype(np.int64)
            values[at] = self.words(start).view(self.word)
        return values, inside

    def mark(self, walks: Rows, ends: Words) -> None:
        if len(walks):
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

    @property
    def modules(self) -> Sequence[Module]:
        return self.spaces.modules

    def mappings_at(self, walks: Rows, pcs: Words) -> tuple[Rows, Words]:
        pids = self.pids[walks]
        modules = np.full(len(pcs), -1, dtype=np.int64)
        deltas = np.zeros(len(pcs), dtype=np.uint64)
        for pid in _distinct(pids):
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
    distinct: list[int] = np.unique(values).tolist()
    return distinct


def _nowhere(pc: int) -> ModuleInfo | None:
    return None


__all__ = ["MAX_FRAMES", "no_walks", "sample_unwinder", "walk_samples"]
