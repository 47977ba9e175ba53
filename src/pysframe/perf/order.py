"""Records in the order perf delivers them: by time, as far as ``perf record`` says is safe.

``perf record`` empties each CPU's ring buffer in turn, so within one round the records of
one CPU come after those of another whatever their times: a thread's first samples on one
CPU can be written before the exec and the mappings it made on another.  perf's readers
(perf script, perf report) put them back in time order (util/ordered-events.c, driven by
util/session.c):

* a record with a timestamp is queued; ties keep the file's order (queue_event);
* one without (no TIME in its sample_type, or a time of 0 or 2**64 - 1) is delivered at
  once, ahead of everything queued (perf_session__queue_event's -ETIME);
* at a FINISHED_ROUND record, the queued records up to the latest time seen when the
  previous round ended are delivered, in time order (process_finished_round,
  OE_FLUSH__ROUND: ``next_flush`` is then the latest time seen so far);
* at the end, all of them (OE_FLUSH__FINAL).

:func:`time_ordered` does this over the reader's stretches, in bulk: each delivery gathers
the samples delivered while a stretch was read, in perf's order, with the side-band records
between them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .data import Stretch
from .records import SideBandEvent
from .samples import SampleChunk, gather_samples

if TYPE_CHECKING:
    import numpy.typing as npt

U64_MAX = (1 << 64) - 1


@dataclass(eq=False)
class Delivery:
    """Records in perf's delivery order: ``samples`` (None: none) with ``events[i]``
    delivered before ``samples[cuts[i]:]``; ``read_to`` is how far the reader has read (a
    file offset, for progress)."""

    samples: SampleChunk | None
    events: list[SideBandEvent] = field(default_factory=list)
    cuts: list[int] = field(default_factory=list)
    read_to: int = 0


def _timed(time: int | None) -> bool:
    """Whether perf queues a record of this time (else it is delivered at once)."""
    return time is not None and 0 < time < U64_MAX


class _Out:
    """What one stretch's reading delivers, collected in order."""

    def __init__(self) -> None:
        self.pieces: list[tuple[SampleChunk, npt.NDArray[np.int64]]] = []
        self.count = 0
        self.events: list[SideBandEvent] = []
        self.cuts: list[int] = []

    def samples(self, chunk: SampleChunk, index: npt.NDArray[np.int64]) -> None:
        if len(index):
            self.pieces.append((chunk, index))
            self.count += len(index)

    def event(self, event: SideBandEvent) -> None:
        self.events.append(event)
        self.cuts.append(self.count)

    def delivery(self, read_to: int) -> Delivery | None:
        if not self.pieces and not self.events:
            return None
        samples = None
        if self.pieces:
            if len(self.pieces) == 1 and _is_whole(*self.pieces[0]):
                samples = self.pieces[0][0]
            else:
                samples = gather_samples(self.pieces)
        return Delivery(samples, self.events, self.cuts, read_to)


def _is_whole(chunk: SampleChunk, index: npt.NDArray[np.int64]) -> bool:
    return len(index) == len(chunk) and bool((index == np.arange(len(chunk))).all())


class _Queue:
    """perf's ordered-events queue: samples (by chunk) and events with their times."""

    def __init__(self) -> None:
        self.samples: list[tuple[SampleChunk, npt.NDArray[np.int64]]] = []
        self.events: list[SideBandEvent] = []
        self.latest = 0  # max_timestamp
        self.next_flush = 0

    def __bool__(self) -> bool:
        return bool(self.samples or self.events)

    def _saw(self, time: int) -> None:
        """The latest time queued since the queue was last empty (queue_event sets it
        afresh when the queue had nothing)."""
        self.latest = max(self.latest, time) if self else time

    def add_samples(self, chunk: SampleChunk, index: npt.NDArray[np.int64]) -> None:
        if len(index):
            self._saw(int(chunk.time[index].max()))
            self.samples.append((chunk, index))

    def add_event(self, event: SideBandEvent) -> None:
        self._saw(event.time or 0)
        self.events.append(event)

    def end_round(self, out: _Out) -> None:
        """FINISHED_ROUND: deliver up to the latest time of the round before; an empty
        queue changes nothing (ordered_events__flush returns first)."""
        if self:
            self.flush(self.next_flush, out)
            self.next_flush = self.latest

    def flush(self, limit: int, out: _Out) -> None:
        """Deliver the queued records of time ``limit`` or less, in (time, file) order."""
        if not limit or not self:
            return
        chosen: list[tuple[SampleChunk, npt.NDArray[np.int64]]] = []
        kept: list[tuple[SampleChunk, npt.NDArray[np.int64]]] = []
        for chunk, index in self.samples:
            due = chunk.time[index] <= limit
            if due.any():
                chosen.append((chunk, index[due]))
            if not due.all():
                kept.append((chunk, index[~due]))
        self.samples = kept
        events = sorted(
            (event for event in self.events if (event.time or 0) <= limit),
            key=lambda event: (event.time or 0, event.offset),
        )
        self.events = [event for event in self.events if (event.time or 0) > limit]
        if not chosen:
            for event in events:
                out.event(event)
            return
        times = np.concatenate([chunk.time[index] for chunk, index in chosen])
        offsets = np.concatenate([chunk.file_offset[index] for chunk, index in chosen])
        order = np.lexsort((offsets, times))
        times, offsets = times[order], offsets[order]
        owner = np.repeat(np.arange(len(chosen)), [len(index) for _, index in chosen])[order]
        positions = np.concatenate([index for _, index in chosen])[order]
        # the events fall between the sorted samples: before those later than them
        cuts = [_place(times, offsets, event.time or 0, event.offset) for event in events]
        done = 0
        for event, cut in zip(events, cuts, strict=True):
            _runs(chosen, owner[done:cut], positions[done:cut], out)
            out.event(event)
            done = cut
        _runs(chosen, owner[done:], positions[done:], out)


def _place(
    times: npt.NDArray[np.uint64], offsets: npt.NDArray[np.int64], time: int, offset: int
) -> int:
    """How many of the samples, sorted by (time, offset), come before (time, offset)."""
    low = int(np.searchsorted(times, np.uint64(time), side="left"))
    high = int(np.searchsorted(times, np.uint64(time), side="right"))
    return low + int(np.searchsorted(offsets[low:high], offset))


def _runs(
    chosen: list[tuple[SampleChunk, npt.NDArray[np.int64]]],
    owner: npt.NDArray[np.int64],
    positions: npt.NDArray[np.int64],
    out: _Out,
) -> None:
    """Deliver the samples ``chosen[owner[i]][0][positions[i]]`` in order, a run of one
    chunk at a time."""
    if not len(owner):
        return
    starts = np.flatnonzero(np.append(True, owner[1:] != owner[:-1]))
    ends = np.append(starts[1:], len(owner))
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        out.samples(chosen[int(owner[start])][0], positions[start:end])


def time_ordered(stretches: Iterable[Stretch]) -> Iterator[Delivery]:
    """The records of ``stretches`` (the reader's, in file order) in perf's delivery order,
    one delivery per stretch read."""
    queue = _Queue()
    read_to = 0
    for stretch in stretches:
        read_to = stretch.end
        out = _Out()
        _read_stretch(stretch, queue, out)
        delivery = out.delivery(read_to)
        if delivery is not None:
            yield delivery
    out = _Out()
    queue.flush(U64_MAX, out)
    delivery = out.delivery(read_to)
    if delivery is not None:
        yield delivery


def _read_stretch(stretch: Stretch, queue: _Queue, out: _Out) -> None:
    """Queue or deliver a stretch's records in file order; flush at its round ends."""
    chunk = stretch.samples if isinstance(stretch.samples, SampleChunk) else None
    count = len(chunk) if chunk is not None else 0
    offsets = chunk.file_offset if chunk is not None else np.zeros(0, np.int64)
    timed = (chunk.time > 0) & (chunk.time < U64_MAX) if chunk is not None else None
    # the side-band records and the round ends, in file order, split the samples in runs
    marks: list[tuple[int, SideBandEvent | None]] = [
        (event.offset, event) for event in stretch.events
    ]
    marks += [(offset, None) for offset in stretch.round_ends]
    marks.sort(key=lambda mark: mark[0])
    done = 0
    for offset, event in [*marks, (None, None)]:
        cut = count if offset is None else int(np.searchsorted(offsets, offset))
        if chunk is not None and cut > done:
            run = np.arange(done, cut, dtype=np.int64)
            assert timed is not None
            out.samples(chunk, run[~timed[done:cut]])
            queue.add_samples(chunk, run[timed[done:cut]])
            done = cut
        if offset is None:
            break
        if event is None:  # FINISHED_ROUND
            queue.end_round(out)
        elif _timed(event.time):
            queue.add_event(event)
        else:
            out.event(event)


def time_order_reference(records: Iterable[tuple[int, int | None, bool]]) -> list[int]:
    """The delivery order of ``records`` (each ``(key, time, round_end)`` in file order; a
    round end has no key of its own), one record at a time as util/ordered-events.c keeps
    its queue: the reference :func:`time_ordered` is held equal to."""
    queue: list[tuple[int, int, int]] = []  # (time, arrival, key), sorted
    latest = next_flush = 0
    delivered: list[int] = []
    for arrival, (key, time, round_end) in enumerate(records):
        if round_end:
            if queue:
                while queue and next_flush and queue[0][0] <= next_flush:
                    delivered.append(queue.pop(0)[2])
                next_flush = latest
        elif not _timed(time):
            delivered.append(key)
        else:
            assert time is not None
            latest = max(latest, time) if queue else time
            bisect.insort(queue, (time, arrival, key))
    delivered += [key for _, _, key in queue]
    return delivered


__all__ = ["Delivery", "time_order_reference", "time_ordered"]
