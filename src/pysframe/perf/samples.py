"""PERF_RECORD_SAMPLE: the decoder of a chunk of samples.

:func:`decode_chunk` decodes many samples at once with numpy: the fixed u64 fields are read
at the same offset from every record's start; the fields after them (READ, CALLCHAIN, RAW,
BRANCH_STACK, REGS_USER, STACK_USER...) lie where the counts before them say, so a cursor per
record advances over them, vectorized, field after field (attrs.py, the layout).  The user
stack copies are not copied: a chunk holds where they lie in the buffer it was read from.

Field values a sample does not have take perf's defaults (util/evsel.c evsel__parse_sample):
pid, tid and cpu -1, time, id and stream_id 2**64 - 1, ip and addr 0, and the period of the
attribute.  A record whose fields run past its end, or whose stack says it used more bytes
than it copied (perf: "user stack dump failure"), is corrupt: PerfDataError at its offset,
naming the first field, in the order of perf_output_sample, that does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np

from ..dataclass import dataclass
from . import layout
from .attrs import AttrTable, SampleFormat
from .errors import PerfDataError
from .layout import BRANCH_COUNTERS, BRANCH_HW_INDEX, Buffer, ReadFormat, SampleType

if TYPE_CHECKING:
    import numpy.typing as npt

U64_MAX = (1 << 64) - 1
#: A flag per row of a group (the rows a check concerns, the rows that pass it).
_Rows: TypeAlias = "npt.NDArray[np.bool_]"
_HEADER = layout.RECORD_HEADER.size
#: A chunk looks its samples' ids up one by one when the attributes have this many times more
#: ids than it has samples, else sorts the ids (once per table) and searches: a chunk costs
#: its own size, not the number of ids, however small the chunks are.
_SORT_WORTH = 8


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample, as :meth:`SampleChunk.sample` gives it.

    ``offset``: the record's start in the buffer read; ``file_offset``: in the file or stream.
    ``regs``: the user registers in the order of the bits of ``regs_mask`` (perf's register
    numbers, registers.py), empty when ``regs_abi`` is PERF_SAMPLE_REGS_ABI_NONE.
    ``stack_offset``: where the user stack copy starts in the buffer; ``stack_size`` bytes were
    reserved for it, of which ``stack_dyn_size`` hold the stack (from its lowest address).
    """

    offset: int
    file_offset: int
    attr: int
    misc: int
    ip: int
    pid: int
    tid: int
    time: int
    addr: int
    id: int
    stream_id: int
    cpu: int
    period: int
    callchain: tuple[int, ...]
    regs_abi: int
    regs_mask: int
    regs: tuple[int, ...]
    stack_offset: int
    stack_size: int
    stack_dyn_size: int


# -- the bulk decoder -------------------------------------------------------------------------

#: Record sizes are u16: a count clamped to this keeps every cursor in int64 and still runs
#: past the end of its record, which the bounds checks catch.
_CLAMP = 1 << 17
I64 = np.int64


class WordGather:
    """u64 words read at any byte offsets of a buffer, raw (the file's byte order: view them
    with a dtype of that order).  One numpy view of the buffer per offset modulo 8 (records
    are 8-aligned in file mode, but not always in pipe mode), made on first need."""

    __slots__ = ("buffer", "length", "views")

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.length = len(buffer)
        self.views: dict[int, npt.NDArray[np.uint64]] = {}

    def _view(self, phase: int) -> npt.NDArray[np.uint64]:
        view = self.views.get(phase)
        if view is None:
            count = (self.length - phase) // 8
            view = np.ndarray((count,), np.uint64, buffer=self.buffer, offset=phase)
            self.views[phase] = view
        return view

    def __call__(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
        if not len(positions):
            return np.zeros(0, np.uint64)
        if not int(np.bitwise_or.reduce(positions)) & 7:  # (all 8-aligned: a file's)
            aligned: npt.NDArray[np.uint64] = self._view(0)[positions >> 3]
            return aligned
        phases = positions & 7
        first = int(phases[0])
        if not np.count_nonzero(phases != first):
            words: npt.NDArray[np.uint64] = self._view(first)[positions >> 3]
            return words
        out = np.empty(len(positions), np.uint64)
        for phase in np.flatnonzero(np.bincount(phases, minlength=8)):
            chosen = phases == phase
            out[chosen] = self._view(int(phase))[positions[chosen] >> 3]
        return out


@dataclass(eq=False)
class SampleChunk:
    """Samples of one stretch of records, column by column (numpy arrays, one entry per
    sample, in file order); the defaults of absent fields are those of :class:`Sample`.

    ``buffer`` is what ``offset``, ``regs_offset`` and ``stack_offset`` index (the file's
    memory map, or the block of a stream the chunk was read from); ``file_offset`` is in the
    file or stream.  Callchains are ragged: sample ``i``'s entries are
    ``callchain[callchain_offsets[i]:callchain_offsets[i + 1]]``.  A sample's user registers
    are words at ``regs_offset`` (where ``regs_abi`` is not 0), one per bit of its
    attribute's mask (``attr_regs_masks``), read a column at a time where they are wanted
    (:meth:`registers`: of the 17 words an x86-64 sample holds, a walk starts from three).
    A sample's user stack copy is ``buffer[stack_offset : stack_offset + stack_dyn_size]``
    (:meth:`stack`); ``stack_size`` bytes were reserved for it in the record.  ``buffer``
    supports the buffer protocol: ``np.frombuffer(chunk.buffer, np.uint8)`` views every
    stack of the chunk at once, without a copy.
    """

    buffer: Buffer
    big_endian: bool
    offset: npt.NDArray[np.int64]
    file_offset: npt.NDArray[np.int64]
    attr: npt.NDArray[np.int32]
    misc: npt.NDArray[np.uint16]
    ip: npt.NDArray[np.uint64]
    pid: npt.NDArray[np.int32]
    tid: npt.NDArray[np.int32]
    time: npt.NDArray[np.uint64]
    addr: npt.NDArray[np.uint64]
    id: npt.NDArray[np.uint64]
    stream_id: npt.NDArray[np.uint64]
    cpu: npt.NDArray[np.int32]
    period: npt.NDArray[np.uint64]
    callchain_offsets: npt.NDArray[np.int64]
    callchain: npt.NDArray[np.uint64]
    regs_mask: int
    regs_abi: npt.NDArray[np.uint64]
    regs_offset: npt.NDArray[np.int64]
    stack_offset: npt.NDArray[np.int64]
    stack_size: npt.NDArray[np.uint64]
    stack_dyn_size: npt.NDArray[np.uint64]
    #: The user register mask of each attribute (to pick a sample's own registers): the
    #: attribute table's, which only grows.
    attr_regs_masks: Sequence[int] = ()

    def __len__(self) -> int:
        return len(self.offset)

    def stack(self, index: int) -> memoryview:
        """The used bytes of sample ``index``'s user stack copy, without copying them."""
        start = int(self.stack_offset[index])
        return memoryview(self.buffer)[start : start + int(self.stack_dyn_size[index])]

    def registers(
        self, columns: Sequence[int], rows: npt.NDArray[np.int64] | None = None
    ) -> npt.NDArray[np.uint64]:
        """The user registers ``columns`` (each the place of a bit among the bits of
        ``regs_mask``: perf's register numbers in ascending order, registers.py) of the
        samples ``rows`` (default: all), a row per sample: 0 where a sample has none
        (``regs_abi`` 0) or its attribute does not ask for that one."""
        rows = np.arange(len(self), dtype=I64) if rows is None else rows
        out = np.zeros((len(rows), len(columns)), np.uint64)
        bits = [bit for bit in range(64) if self.regs_mask >> bit & 1]
        has = self.regs_abi[rows] != layout.REGS_ABI_NONE
        attrs = self.attr[rows].astype(I64)
        gather = WordGather(self.buffer)
        word = np.dtype(layout.byte_order(self.big_endian) + "u8")
        for attr in np.flatnonzero(np.bincount(attrs[has], minlength=1)).tolist():
            mask = self.attr_regs_masks[attr] if attr < len(self.attr_regs_masks) else 0
            chosen = np.flatnonzero(has & (attrs == attr))
            start = self.regs_offset[rows[chosen]]
            for place, column in enumerate(columns):
                bit = bits[column]
                if mask >> bit & 1:  # its word: after one per bit of the mask below it
                    at = start + 8 * (mask & ((1 << bit) - 1)).bit_count()
                    out[chosen, place] = gather(at).view(word)
        return out

    def callchain_of(self, index: int) -> npt.NDArray[np.uint64]:
        return self.callchain[self.callchain_offsets[index] : self.callchain_offsets[index + 1]]

    def sample(self, index: int) -> Sample:
        """Sample ``index``, its fields as Python values."""
        attr = int(self.attr[index])
        mask = self.attr_regs_masks[attr] if attr < len(self.attr_regs_masks) else 0
        regs: tuple[int, ...] = ()
        if self.regs_abi[index] != layout.REGS_ABI_NONE and mask:
            columns = _columns(mask, self.regs_mask)
            regs = tuple(self.registers(columns, np.array([index]))[0].tolist())
        return Sample(
            offset=int(self.offset[index]), file_offset=int(self.file_offset[index]), attr=attr,
            misc=int(self.misc[index]), ip=int(self.ip[index]), pid=int(self.pid[index]),
            tid=int(self.tid[index]), time=int(self.time[index]), addr=int(self.addr[index]),
            id=int(self.id[index]), stream_id=int(self.stream_id[index]),
            cpu=int(self.cpu[index]), period=int(self.period[index]),
            callchain=tuple(int(v) for v in self.callchain_of(index)),
            regs_abi=int(self.regs_abi[index]), regs_mask=mask, regs=regs,
            stack_offset=int(self.stack_offset[index]), stack_size=int(self.stack_size[index]),
            stack_dyn_size=int(self.stack_dyn_size[index]),
        )  # fmt: skip


def take_samples(
    chunks: Sequence[SampleChunk], which: npt.NDArray[np.int64], index: npt.NDArray[np.int64]
) -> SampleChunk:
    """One chunk of the samples ``chunks[which[i]][index[i]]``, in that order (perf's time
    order puts samples of several stretches together).  The stacks stay where they are when
    every chunk reads one buffer (a file's map); else they are copied into one buffer with
    the user registers, and ``offset`` (the record's place in a buffer that is no longer the
    chunk's) is -1."""
    sizes = np.array([len(chunk) for chunk in chunks], dtype=np.int64)
    rows = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)[which] + index
    first = chunks[0]

    def column(name: str) -> Any:
        if len(chunks) == 1:
            return getattr(first, name)[index]
        return np.concatenate([getattr(chunk, name) for chunk in chunks])[rows]

    # the callchains: each chunk's entries one after the other, then each sample's range
    entries = np.concatenate([chunk.callchain for chunk in chunks])
    chain_bases = np.cumsum([0] + [len(chunk.callchain) for chunk in chunks[:-1]])
    chain_starts = np.concatenate([
        chunk.callchain_offsets[:-1] + base for chunk, base in zip(chunks, chain_bases, strict=True)
    ])[rows]  # fmt: skip
    chain_lengths = np.concatenate([np.diff(chunk.callchain_offsets) for chunk in chunks])[rows]
    union = 0
    for chunk in chunks:
        union |= chunk.regs_mask
    offset, stack_offset = column("offset"), column("stack_offset")
    regs_offset = column("regs_offset")
    buffer = first.buffer
    if any(chunk.buffer is not buffer for chunk in chunks):
        buffer, regs_offset, stack_offset = _copied(chunks, which, index)
        offset = np.full(len(rows), -1, dtype=np.int64)
    return SampleChunk(
        buffer=buffer, big_endian=first.big_endian, offset=offset,
        file_offset=column("file_offset"), attr=column("attr"), misc=column("misc"),
        ip=column("ip"), pid=column("pid"), tid=column("tid"), time=column("time"),
        addr=column("addr"), id=column("id"), stream_id=column("stream_id"),
        cpu=column("cpu"), period=column("period"),
        callchain_offsets=np.concatenate([[0], np.cumsum(chain_lengths)]).astype(np.int64),
        callchain=entries[range_positions(chain_starts, chain_lengths)], regs_mask=union,
        regs_abi=column("regs_abi"), regs_offset=regs_offset, stack_offset=stack_offset,
        stack_size=column("stack_size"), stack_dyn_size=column("stack_dyn_size"),
        attr_regs_masks=max((chunk.attr_regs_masks for chunk in chunks), key=len),
    )  # fmt: skip


def _copied(
    chunks: Sequence[SampleChunk], which: npt.NDArray[np.int64], index: npt.NDArray[np.int64]
) -> tuple[bytes, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The user registers and stacks of the samples chosen from chunks of several buffers,
    copied one sample after the other into one buffer; and where each sample's registers
    and stack start in it.  A slice copied per piece: stacks are copies of kilobytes, which
    a position per byte would cost some ten times more."""
    registers = np.zeros(len(which), dtype=np.int64)
    stacks = np.zeros(len(which), dtype=np.int64)
    for number, chunk in enumerate(chunks):
        mine = which == number
        rows = index[mine]
        words = np.array([mask.bit_count() for mask in (*chunk.attr_regs_masks, 0)], I64)
        attrs = np.minimum(chunk.attr[rows].astype(I64), len(words) - 1)
        has = chunk.regs_abi[rows] != layout.REGS_ABI_NONE
        registers[mine] = np.where(has, 8 * words[attrs], 0)
        stacks[mine] = chunk.stack_dyn_size[rows].astype(I64)
    regs_at = np.concatenate([[0], np.cumsum(registers + stacks)[:-1]]).astype(I64)
    stack_at = regs_at + registers
    out = bytearray(int((registers + stacks).sum()))
    for number, chunk in enumerate(chunks):
        source = memoryview(chunk.buffer).cast("B")
        for to, sizes, starts in ((regs_at, registers, chunk.regs_offset),
                                  (stack_at, stacks, chunk.stack_offset)):  # fmt: skip
            mine = np.flatnonzero((which == number) & (sizes > 0))
            for start, at, size in zip(
                to[mine].tolist(), starts[index[mine]].tolist(), sizes[mine].tolist(),
                strict=True,
            ):  # fmt: skip
                out[start : start + size] = source[at : at + size]
    return bytes(out), regs_at, stack_at


def range_positions(
    starts: npt.NDArray[Any], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The positions ``start, start + 1, ... start + length - 1`` of every range, one after
    the other."""
    lengths = lengths.astype(np.int64)
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    shift = np.repeat(starts.astype(np.int64) - (ends - lengths), lengths)
    positions: npt.NDArray[np.int64] = np.arange(total, dtype=np.int64) + shift
    return positions


def sorted_distinct(values: npt.NDArray[Any]) -> list[int]:
    """The distinct values, in increasing order.  np.unique with its counts: plain
    ``np.unique(values)`` checks for a masked array and so imports numpy.ma on first use
    (lib/_arraysetops_impl.py, _unique1d: some 15 ms of each run's start)."""
    distinct: list[int] = np.unique(values, return_counts=True)[0].tolist()
    return distinct


def _columns(mask: int, union: int) -> list[int]:
    """The columns, among the bits of ``union``, of the bits of ``mask``."""
    bits = [bit for bit in range(64) if union >> bit & 1]
    return [bits.index(bit) for bit in range(64) if mask >> bit & 1]


@dataclass(frozen=True, eq=False, repr=False)
class ChunkResult:
    """What :func:`decode_chunk` gives: the samples it read, how many it skipped for an id no
    attribute has, and the error that stopped it (the samples before it are in ``chunk``)."""

    chunk: SampleChunk
    unknown_ids: int
    error: PerfDataError | None


#: The failure of a row whose user stack says it used more bytes than it copied (its words
#: are made with the two sizes: :func:`_corrupt`); other failures name a field.
_STACK_OVERUSED = "user stack overused"


class _Group:
    """The bulk walk down the records of one attribute (rows ``rows`` of the chunk).

    ``ok``: the rows whose fields fit so far.  ``failures``: for each check some rows failed,
    the rows that failed it first, and the field checked (perf_output_sample's order: the
    first field of a record that does not fit); kept only when a check fails."""

    def __init__(
        self, gather: WordGather, start: npt.NDArray[np.int64], size: npt.NDArray[np.int64],
        big_endian: bool,
    ) -> None:
        self.gather, self.start, self.end = gather, start, start + size
        self.ok = np.ones(len(start), bool)
        self.failures: list[tuple[npt.NDArray[np.bool_], str]] = []
        self.u64 = np.dtype(layout.byte_order(big_endian) + "u8")
        self.pair = layout.U32_PAIR.dtype(big_endian)

    def require(self, holds: _Rows, what: str, active: _Rows | None = None) -> None:
        """The rows that need ``what`` (``active``; None: all) and where ``holds`` is false
        become not ok, ``what`` their failure if they were ok."""
        passes = holds if active is None else holds | ~active
        if np.count_nonzero(passes) < len(passes):  # rare: the rows failing found only then
            self.failures.append((self.ok & ~passes, what))
            self.ok &= passes

    def failure(self, index: int) -> str:
        """What made row ``index`` not ok."""
        return next(what for rows, what in self.failures if rows[index])

    def raw(
        self, at: npt.NDArray[np.int64], width: int, what: str, active: _Rows | None = None
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Raw words at ``at`` for the rows that need them (``active``) and whose record holds
        ``width`` bytes there; the others become not ok, or read their record's start."""
        self.require(at + width <= self.end, what, active)
        usable = self.ok.copy() if active is None else self.ok & active
        return self.gather(np.where(usable, at, self.start)), usable

    def word(
        self, at: npt.NDArray[np.int64], what: str, active: _Rows | None = None
    ) -> npt.NDArray[np.uint64]:
        raw, usable = self.raw(at, 8, what, active)
        values: npt.NDArray[np.uint64] = raw.view(self.u64).astype(np.uint64)
        values[~usable] = 0
        return values

    def count(
        self, at: npt.NDArray[np.int64], what: str, active: _Rows | None = None
    ) -> npt.NDArray[np.int64]:
        words = self.word(at, what, active)
        counts: npt.NDArray[np.int64] = np.minimum(words, _CLAMP).astype(I64)
        return counts

    def half(self, at: npt.NDArray[np.int64], what: str) -> npt.NDArray[np.int64]:
        """The u32 at ``at`` (RAW's size), read in the u64 at ``at`` or the one ending 4 bytes
        after it (a u32 may end its record)."""
        whole = at + 8 <= self.end
        raw, usable = self.raw(np.where(whole, at, at - 4), 8, what)
        pair = raw.view(self.pair)
        values = np.where(whole, pair["first"], pair["second"]).astype(I64) & 0xFFFFFFFF
        return np.where(usable, values, 0)


def _lookup_attrs(
    gather: WordGather, start: npt.NDArray[np.int64], size: npt.NDArray[np.int64],
    table: AttrTable, big_endian: bool,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
    """Each sample's attribute index (-1: unknown id), and which are too short for their id."""
    count = len(start)
    if not len(table):
        return np.full(count, -1, np.int32), np.ones(count, bool)
    if table.single:
        return np.zeros(count, np.int32), np.zeros(count, bool)
    assert table.id_position is not None
    at = _HEADER + 8 * table.id_position
    short = size < at + 8
    raw = gather(np.where(short, start, start + at))
    ids = raw.view(np.dtype(layout.byte_order(big_endian) + "u8")).astype(np.uint64)
    if count * _SORT_WORTH < len(table.by_id):  # a few samples among many ids
        by_id = table.by_id
        attrs = np.array([by_id.get(i, -1) for i in ids.tolist()], np.int32)
    else:  # the ids sorted once per table, a search per sample
        if table.id_lookup is None:
            ordered = sorted(table.by_id)
            table.id_lookup = (
                np.array(ordered, np.uint64),
                np.array([table.by_id[k] for k in ordered], np.int32),
            )
        keys, values = cast("tuple[npt.NDArray[np.uint64], npt.NDArray[np.int32]]",
                            table.id_lookup)  # fmt: skip
        where = np.searchsorted(keys, ids).clip(0, max(len(keys) - 1, 0))
        found = (keys[where] == ids) if len(keys) else np.zeros(count, bool)
        attrs = np.where(found, values[where] if len(values) else -1, -1).astype(np.int32)
    attrs[ids == 0] = 0
    return attrs, short


def _walk_group(group: _Group, sample: SampleFormat) -> dict[str, Any]:
    """The variable fields of one attribute's samples, vectorized in the order of
    perf_output_sample (kernel/events/core.c): where callchains, registers and stacks lie,
    and the ok rows.  Each count is checked where it is read, and the callchain and the user
    registers where they end; the other stretches a count gives (READ's members, RAW's bytes,
    the branch stack, the interrupt registers, AUX's bytes) are checked by the field after
    them."""
    kind, start = sample.sample_type, group.start
    cursor = start + sample.variable
    found: dict[str, Any] = {}
    if kind & SampleType.READ:
        if sample.read_format & ReadFormat.GROUP:
            members = group.count(cursor, "read")
            times = (sample.read_size // 8) - sample.read_group_words
            cursor = cursor + 8 * (1 + times) + 8 * sample.read_group_words * members
        else:
            cursor = cursor + sample.read_size
    if kind & SampleType.CALLCHAIN:
        found["callchain_count"] = group.count(cursor, "callchain")
        found["callchain_start"] = cursor + 8
        cursor = cursor + 8 + 8 * found["callchain_count"]
        group.require(cursor <= group.end, "callchain")
    if kind & SampleType.RAW:
        cursor = cursor + 4 + group.half(cursor, "raw")
    if kind & SampleType.BRANCH_STACK:
        entries = group.count(cursor, "branch stack")
        cursor = cursor + 8 + 8 * bool(sample.branch_sample_type & BRANCH_HW_INDEX)
        cursor = cursor + entries * (layout.BRANCH_ENTRY_SIZE + 8 * bool(
            sample.branch_sample_type & BRANCH_COUNTERS
        ))  # fmt: skip
    if kind & SampleType.REGS_USER:
        found["regs_abi"] = group.word(cursor, "user registers")
        found["regs_start"] = cursor + 8
        has = found["regs_abi"] != layout.REGS_ABI_NONE
        cursor = cursor + 8 + 8 * sample.user_regs * has
        if sample.user_regs:
            group.require(cursor <= group.end, "user registers")
    if kind & SampleType.STACK_USER:
        size = group.count(cursor, "user stack")
        cursor = cursor + 8
        has = size > 0
        dyn = group.word(cursor + size, "user stack", has)  # the copy and its used size
        group.require(dyn <= size.astype(np.uint64), _STACK_OVERUSED, has)
        found.update(stack_offset=cursor, stack_size=size, stack_dyn_size=np.where(has, dyn, 0))
        cursor = cursor + np.where(has, size + 8, 0)
    cursor = cursor + 8 * sum(bool(kind & bit) for bit in layout.SAMPLE_TAIL_WORDS)
    if kind & SampleType.REGS_INTR:
        has = group.word(cursor, "interrupt registers") != layout.REGS_ABI_NONE
        cursor = cursor + 8 + 8 * sample.intr_regs * has
    cursor = cursor + 8 * sum(bool(kind & bit) for bit in layout.SAMPLE_LATE_WORDS)
    if kind & SampleType.AUX:
        cursor = cursor + 8 + group.count(cursor, "aux")
    group.require(cursor <= group.end, "data")
    return found


def _empty_columns(count: int) -> dict[str, Any]:
    """Every column of a chunk of ``count`` samples, at the defaults of absent fields."""
    return {
        "ip": np.zeros(count, np.uint64), "pid": np.full(count, -1, np.int32),
        "tid": np.full(count, -1, np.int32), "time": np.full(count, U64_MAX, np.uint64),
        "addr": np.zeros(count, np.uint64), "id": np.full(count, U64_MAX, np.uint64),
        "stream_id": np.full(count, U64_MAX, np.uint64), "cpu": np.full(count, -1, np.int32),
        "period": np.zeros(count, np.uint64), "callchain_count": np.zeros(count, I64),
        "callchain_start": np.zeros(count, I64), "regs_abi": np.zeros(count, np.uint64),
        "regs_start": np.zeros(count, I64), "stack_offset": np.zeros(count, I64),
        "stack_size": np.zeros(count, np.uint64), "stack_dyn_size": np.zeros(count, np.uint64),
    }  # fmt: skip


def decode_chunk(
    buffer: Buffer, offsets: Any, table: AttrTable, big_endian: bool, base: int = 0
) -> ChunkResult:
    """The sample records at ``buffer[offsets[i]:]`` (whole records: their sizes were
    checked), decoded together; ``base`` is the file offset of ``buffer[0]``.  Samples of an
    unknown id are left out; a corrupt record ends the chunk, and the error comes with the
    samples before it."""
    start = np.asarray(offsets, I64)
    count = len(start)
    gather = WordGather(buffer)
    head = gather(start).view(layout.RECORD_HEADER.dtype(big_endian))
    size = head["size"].astype(I64)
    attrs, short = _lookup_attrs(gather, start, size, table, big_endian)
    bad = short.copy()
    groups: dict[int, tuple[npt.NDArray[np.int64], _Group]] = {}
    columns = _empty_columns(count)
    pair = layout.U32_PAIR.dtype(big_endian)
    u64 = np.dtype(layout.byte_order(big_endian) + "u8")
    # np.bincount, not np.unique: the attribute indexes are small, and np.unique imports
    # numpy.ma on first use (a tenth of a second).
    for attr in np.flatnonzero(np.bincount(attrs[(attrs >= 0) & ~bad], minlength=1)):
        rows = np.flatnonzero((attrs == attr) & ~bad)
        sample = table.formats[int(attr)]
        group = _Group(gather, start[rows], size[rows], big_endian)
        groups[int(attr)] = rows, group
        columns["period"][rows] = sample.default_period
        for name, rel in sample.fixed.items():
            raw, _ = group.raw(group.start + rel, 8, name)
            if name in ("tid", "cpu"):
                halves = raw.view(pair)
                if name == "tid":
                    columns["pid"][rows], columns["tid"][rows] = halves["first"], halves["second"]
                else:
                    columns["cpu"][rows] = halves["first"]
            else:
                columns["id" if name == "identifier" else name][rows] = raw.view(u64)
        for name, values in _walk_group(group, sample).items():
            columns[name][rows] = values
        bad[rows] |= ~group.ok
    error, read = None, count
    if bad.any():
        read = int(np.argmax(bad))
        error = _corrupt(read, short, attrs, groups, columns, table, base + int(start[read]))
    keep = (attrs >= 0) & (np.arange(count) < read)
    unknown = int((attrs[:read] < 0).sum())
    chosen = np.flatnonzero(keep)
    lengths = columns["callchain_count"][chosen]
    bounds = np.zeros(len(chosen) + 1, I64)
    np.cumsum(lengths, out=bounds[1:])
    within = np.arange(bounds[-1], dtype=I64) - np.repeat(bounds[:-1], lengths)
    at = np.repeat(columns["callchain_start"][chosen], lengths) + 8 * within
    chunk = SampleChunk(
        buffer=buffer, big_endian=big_endian, offset=start[chosen],
        file_offset=start[chosen] + base, attr=attrs[chosen],
        misc=head["misc"][chosen].astype(np.uint16),
        ip=columns["ip"][chosen], pid=columns["pid"][chosen], tid=columns["tid"][chosen],
        time=columns["time"][chosen], addr=columns["addr"][chosen], id=columns["id"][chosen],
        stream_id=columns["stream_id"][chosen], cpu=columns["cpu"][chosen],
        period=columns["period"][chosen], callchain_offsets=bounds,
        callchain=gather(at).view(u64).astype(np.uint64), regs_mask=table.regs_user_mask,
        regs_abi=columns["regs_abi"][chosen], regs_offset=columns["regs_start"][chosen],
        stack_offset=columns["stack_offset"][chosen], stack_size=columns["stack_size"][chosen],
        stack_dyn_size=columns["stack_dyn_size"][chosen],
        attr_regs_masks=table.regs_user_masks,
    )  # fmt: skip
    return ChunkResult(chunk, unknown, error)


def _corrupt(
    read: int, short: npt.NDArray[np.bool_], attrs: npt.NDArray[np.int32],
    groups: dict[int, tuple[npt.NDArray[np.int64], _Group]], columns: dict[str, Any],
    table: AttrTable, at: int,
) -> PerfDataError:
    """What is wrong with sample ``read`` of a chunk, whose record is at file offset ``at``."""
    if short[read]:
        if not len(table):
            return PerfDataError("sample record before any event attribute", at)
        return PerfDataError("sample too short to hold its id", at)
    rows, group = groups[int(attrs[read])]
    failure = group.failure(int(np.searchsorted(rows, read)))
    if failure == _STACK_OVERUSED:
        size, used = int(columns["stack_size"][read]), int(columns["stack_dyn_size"][read])
        return PerfDataError(f"user stack of {size} bytes says {used} were used", at)
    return PerfDataError(f"sample field {failure} runs past the end of its record", at)


__all__ = [
    "ChunkResult", "Sample", "SampleChunk", "WordGather", "decode_chunk", "range_positions",
    "sorted_distinct", "take_samples",
]
