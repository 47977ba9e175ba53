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

from collections.abc import Callable, Iterable, Iterator
from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np

from ..dataclass import dataclass
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
    """perf's ordered-events queue (util/ordered-events.c) across stretches: the records
    queued and not yet delivered (their times, file offsets and ids), the latest time queued
    since the queue was last empty (max_timestamp) and the limit of the next round's flush."""

    def __init__(self) -> None:
        self.time = np.zeros(0, dtype=np.uint64)
        self.offset = np.zeros(0, dtype=np.int64)
        self.ident = np.zeros(0, dtype=np.int64)
        self.latest = 0  # max_timestamp
        self.next_flush = 0

    def limits(self, latest: list[int], marks: list[int | None]) -> list[int]:
        """Each round's flush limit (0: it flushes nothing), the queue's state followed
        record by record with each run of samples as one: ``latest[i]``, the latest time of
        the run before ``marks[i]`` (0: none queued; the last one after the last mark), and
        ``marks[i]`` a round's end (None) or the time of a side-band record (0: none, it is
        delivered at once).  A queue that a flush empties forgets its latest time
        (queue_event sets max_timestamp afresh); a round that finds it empty changes nothing
        (ordered_events__flush); ``greatest`` (the greatest time waiting) says whether a
        flush empties it."""
        limits = []
        waiting = len(self.time) > 0
        greatest = int(self.time.max()) if waiting else 0
        for top, mark in zip(latest, [*marks, 0], strict=True):
            for time in (top, mark or 0):  # the run's samples queued, then the record
                if time:
                    self.latest = max(self.latest, time) if waiting else time
                    greatest = max(greatest, time) if waiting else time
                    waiting = True
            if mark is None:  # FINISHED_ROUND
                limits.append(self.next_flush if waiting else 0)
                if waiting:
                    waiting = not (self.next_flush and greatest <= self.next_flush)
                    self.next_flush = self.latest
        return limits

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
    ids delivered meanwhile, in order.

    The queue's state is followed across the side-band records and round ends alone (a few
    hundred), each run of samples between them one number (:meth:`_Queue.limits`): that
    gives each round's flush limit.  A record queued is delivered at the first round at or
    after the one it was queued before whose limit reaches its time (while it waits, each
    of those rounds flushes: the queue is not empty), found for all of them at once
    (:func:`_first_reaching`); a delivery is in (time, file) order.  A record without a
    time is delivered where it is read."""
    chunk = stretch.samples
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
    cuts = np.searchsorted(offsets, [offset for offset, _ in marks]).astype(np.int64)
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    run_latest = np.maximum.reduceat(  # each run's latest time queued (0: none)
        np.append(np.where(timed, times, np.uint64(0)), np.uint64(0)), starts
    )
    run_latest[starts == np.append(cuts, len(ids))] = 0  # empty runs
    events = [(offset, event) for offset, event in marks if event is not None]
    event_time = np.array(
        [event.time if _timed(event.time) else 0 for _, event in events], dtype=np.uint64
    )
    event_ident = np.array([records.add_event(event) for _, event in events], dtype=np.int64)
    event_offset = np.array([offset for offset, _ in events], dtype=np.int64)
    event_times = iter(event_time.tolist())
    limits = queue.limits(
        run_latest.tolist(), [None if event is None else next(event_times) for _, event in marks]
    )
    round_at = np.array([offset for offset, event in marks if event is None], dtype=np.int64)
    # Queued: those waiting from before, then this stretch's timed samples and records.
    event_timed = event_time > 0
    time = np.concatenate([queue.time, times[timed], event_time[event_timed]])
    offset = np.concatenate([queue.offset, offsets[timed], event_offset[event_timed]])
    ident = np.concatenate([queue.ident, ids[timed], event_ident[event_timed]])
    after = np.concatenate([
        np.zeros(len(queue.time), np.int64), np.searchsorted(round_at, offsets[timed]),
        np.searchsorted(round_at, event_offset[event_timed]),
    ])  # fmt: skip
    at = _first_reaching(np.array(limits, dtype=np.uint64), after, time)
    delivered = at < len(limits)
    queue.time, queue.offset, queue.ident = time[~delivered], offset[~delivered], ident[~delivered]
    # Delivered: at its round's end (in time, file order), or where it is read (no time).
    at_once = np.concatenate([offsets[~timed], event_offset[~event_timed]])
    place = np.concatenate([round_at[at[delivered]], at_once])
    order = np.concatenate([time[delivered], np.zeros(len(at_once), np.uint64)])
    within = np.concatenate([offset[delivered], at_once])
    out = np.concatenate([ident[delivered], ids[~timed], event_ident[~event_timed]])
    return out[np.lexsort((within, order, place))]


def _first_reaching(
    limit: npt.NDArray[np.uint64], after: npt.NDArray[np.int64], time: npt.NDArray[np.uint64]
) -> npt.NDArray[np.int64]:
    """For each record queued before round ``after[i]`` with ``time[i]``: the round that
    delivers it, the first at or after that one whose ``limit`` reaches its time
    (``len(limit)``: none of this stretch).  It is that round or the next: a record still
    waiting after a round is among the times of the queue's latest (the queue has not been
    empty since it came), which is the next round's limit."""
    count = len(limit)
    padded = np.append(limit, [np.uint64(0), np.uint64(0)])  # rounds to come: none yet
    at = np.where(padded[np.minimum(after, count)] >= time, after, after + 1)
    return np.where((at < count) & (padded[np.minimum(at, count)] >= time), at, count)


__all__ = ["Delivery", "time_ordered"]
