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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .data import Stretch
from .records import SideBandEvent
from .samples import SampleChunk, take_samples

if TYPE_CHECKING:
    import numpy.typing as npt

U64_MAX = (1 << 64) - 1


@dataclass(eq=False, repr=False)
class Delivery:
    """Records in perf's delivery order: ``samples`` (None: none) with ``events[i]``
    delivered before ``samples[cuts[i]:]``; ``read_to`` is how far the reader has read (a
    file offset, for progress)."""

    samples: SampleChunk | None
    events: list[SideBandEvent] = field(default_factory=list)
    cuts: list[int] = field(default_factory=list)
    read_to: int = 0
    #: Samples delivered after their time (deferred.py: when their deferred user callchain
    #: came, or at the end): sample index -> the time perf delivers it at.
    late: dict[int, int] = field(default_factory=dict)


def _timed(time: int | None) -> bool:
    """Whether perf queues a record of this time (else it is delivered at once)."""
    return time is not None and 0 < time < U64_MAX


class _Records:
    """The records read and not yet delivered, by id: sample ``i`` of the ``k``-th chunk
    read is ``bases[k] + i``; event ``n`` is ``-1 - n``."""

    def __init__(self) -> None:
        self.chunks: list[SampleChunk] = []
        self.bases: list[int] = []
        self.next_sample = 0
        self.events: dict[int, SideBandEvent] = {}
        self.next_event = 0

    def add_chunk(self, chunk: SampleChunk) -> npt.NDArray[np.int64]:
        ids = np.arange(self.next_sample, self.next_sample + len(chunk), dtype=np.int64)
        self.chunks.append(chunk)
        self.bases.append(self.next_sample)
        self.next_sample += len(chunk)
        return ids

    def add_event(self, event: SideBandEvent) -> int:
        ident = -1 - self.next_event
        self.events[ident] = event
        self.next_event += 1
        return ident

    def delivery(self, order: npt.NDArray[np.int64], read_to: int) -> Delivery | None:
        """The records ``order`` (ids, in delivery order), taken out of the registry."""
        if not len(order):
            return None
        at_events = np.flatnonzero(order < 0)
        events = [self.events.pop(ident) for ident in order[at_events].tolist()]
        cuts = (at_events - np.arange(len(at_events))).tolist()
        ids = order[order >= 0]
        samples = None
        if len(ids):
            which = np.searchsorted(np.array(self.bases), ids, side="right") - 1
            first = int(which.min())
            used = self.chunks[first : int(which.max()) + 1]
            index = ids - np.array(self.bases)[which]
            if len(used) == 1 and len(ids) == len(used[0]) and (index[1:] > index[:-1]).all():
                samples = used[0]  # a whole chunk, in its order
            else:
                samples = take_samples(used, which - first, index)
        return Delivery(samples, events, cuts, read_to)

    def forget_before(self, oldest: int) -> None:
        """Drop the chunks whose samples all have ids below ``oldest`` (all delivered)."""
        while len(self.chunks) > 1 and self.bases[1] <= oldest:
            del self.chunks[0], self.bases[0]


class _Queue:
    """perf's ordered-events queue (util/ordered-events.c): the ids of the queued records,
    with their times and file offsets."""

    def __init__(self) -> None:
        self.time = np.zeros(0, dtype=np.uint64)
        self.offset = np.zeros(0, dtype=np.int64)
        self.ident = np.zeros(0, dtype=np.int64)
        self.latest = 0  # max_timestamp
        self.next_flush = 0

    def add(
        self,
        times: npt.NDArray[np.uint64],
        offsets: npt.NDArray[np.int64],
        idents: npt.NDArray[np.int64],
    ) -> None:
        """Queue records; the latest time is the greatest queued since the queue was last
        empty (queue_event sets max_timestamp afresh when the queue had nothing)."""
        if not len(times):
            return
        top = int(times.max())
        self.latest = max(self.latest, top) if len(self.time) else top
        self.time = np.concatenate([self.time, times])
        self.offset = np.concatenate([self.offset, offsets])
        self.ident = np.concatenate([self.ident, idents])

    def end_round(self) -> npt.NDArray[np.int64]:
        """FINISHED_ROUND: deliver up to the latest time of the round before; an empty
        queue changes nothing (ordered_events__flush returns first)."""
        if not len(self.time):
            return self.ident
        delivered = self.flush(self.next_flush)
        self.next_flush = self.latest
        return delivered

    def flush(self, limit: int) -> npt.NDArray[np.int64]:
        """The ids of the queued records of time ``limit`` or less, in (time, file) order,
        taken off the queue (do_flush; nothing for a limit of 0)."""
        due = self.time <= np.uint64(limit) if limit else np.zeros(len(self.time), dtype=bool)
        chosen = np.flatnonzero(due)
        order = chosen[np.lexsort((self.offset[chosen], self.time[chosen]))]
        delivered = self.ident[order]
        if len(chosen):
            kept = ~due
            self.time, self.offset, self.ident = (
                self.time[kept], self.offset[kept], self.ident[kept]
            )
        return delivered


def time_ordered(
    stretches: Iterable[Stretch], gathered: Callable[[int], bool] | None = None
) -> Iterator[Delivery]:
    """The records of ``stretches`` (the reader's, in file order) in perf's delivery order,
    one delivery per stretch read.  ``gathered(read_to)`` False: that delivery's samples are
    not wanted (a time slice after them: analyze.py), and it holds its side-band records
    alone (``samples`` None), without its samples gathered."""
    records, queue = _Records(), _Queue()
    read_to = 0
    for stretch in stretches:
        read_to = stretch.end
        order = _read_stretch(stretch, records, queue)
        if gathered is not None and not gathered(read_to):
            order = order[order < 0]
        delivery = records.delivery(order, read_to)
        if delivery is not None:
            yield delivery
        pending = queue.ident[queue.ident >= 0]
        records.forget_before(int(pending.min()) if len(pending) else records.next_sample)
    delivery = records.delivery(queue.flush(U64_MAX), read_to)
    if delivery is not None:
        yield delivery


def _read_stretch(stretch: Stretch, records: _Records, queue: _Queue) -> npt.NDArray[np.int64]:
    """Queue or deliver a stretch's records in file order, flushing at its round ends; the
    ids delivered meanwhile, in order."""
    chunk = stretch.samples if isinstance(stretch.samples, SampleChunk) else None
    if chunk is not None and len(chunk):
        ids, times, offsets = records.add_chunk(chunk), chunk.time, chunk.file_offset
    else:
        ids, times = np.zeros(0, np.int64), np.zeros(0, np.uint64)
        offsets = np.zeros(0, np.int64)
    timed = (times > 0) & (times < np.uint64(U64_MAX))
    # the side-band records and the round ends, in file order, split the samples in runs
    marks: list[tuple[int, SideBandEvent | None]] = [(e.offset, e) for e in stretch.events]
    marks += [(offset, None) for offset in stretch.round_ends]
    marks.sort(key=lambda mark: mark[0])
    cuts = np.searchsorted(offsets, [offset for offset, _ in marks]).tolist()
    delivered: list[npt.NDArray[np.int64]] = []

    def take(run: slice) -> None:  # samples: untimed ones delivered, timed ones queued
        delivered.append(ids[run][~timed[run]])
        queue.add(times[run][timed[run]], offsets[run][timed[run]], ids[run][timed[run]])

    done = 0
    for (offset, event), cut in zip(marks, cuts, strict=True):
        take(slice(done, cut))
        done = cut
        if event is None:  # FINISHED_ROUND
            delivered.append(queue.end_round())
            continue
        ident = np.array([records.add_event(event)], dtype=np.int64)
        if _timed(event.time):
            queue.add(np.array([event.time], np.uint64), np.array([offset], np.int64), ident)
        else:
            delivered.append(ident)
    take(slice(done, len(ids)))
    return np.concatenate(delivered) if delivered else np.zeros(0, np.int64)


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
