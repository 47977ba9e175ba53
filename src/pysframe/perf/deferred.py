"""Deferred user callchains (Linux 6.19, ``perf record --call-graph fp,defer``): each sample
stitched to the user callchain its thread recorded later, as perf stitches them.

With ``defer_callchain`` set in its attribute, a sample taken in a task does not hold its user
callchain: its callchain ends with PERF_CONTEXT_USER_DEFERRED and a cookie, and the kernel
writes the user callchain when the task goes back to user space, in a CALLCHAIN_DEFERRED record
(``cookie``, ``nr``, ``ips[nr]``, the sample_id trailer).  perf merges them (tools/perf of
Linux 6.19, the series "perf tools: Merge deferred user callchains", v6 of November 2025:
util/evsel.c evsel__parse_sample, util/session.c machines__deliver_event,
evlist__deliver_deferred_callchain and session__flush_deferred_samples, util/callchain.c
sample__merge_deferred_callchain), in the order it delivers records (by time, order.py):

* a sample whose attribute has ``defer_callchain`` and whose callchain has at least two entries,
  the one before last PERF_CONTEXT_USER_DEFERRED, waits (its cookie is the last entry);
* at a CALLCHAIN_DEFERRED record, every waiting sample of the record's thread (``tid``) is
  delivered there, in the order they came: with the record's addresses in place of its cookie
  when the cookies are equal, else as it is, its cookie an ordinary user address (perf clears
  the sample's ``deferred_callchain``); samples of other threads wait on;
* at the end of the data, the samples still waiting are delivered as they are: no chain came.

A sample delivered so keeps its own time; ``Delivery.late`` says when it was delivered (the
record's time, or 2**64 - 1 at the end), so that ``perf script``'s text follows perf's order.

A merged callchain is the sample's own up to its cookie, then the record's addresses: perf keeps
PERF_CONTEXT_USER_DEFERRED before them, which its callchain walk takes as PERF_CONTEXT_USER
(util/machine.c add_callchain_ip); here the marker is written PERF_CONTEXT_USER, so that a
merged callchain reads as a recorded (frame-pointer) one.  Without merging
(``--no-merge-callchain``) nothing waits: samples and records are delivered as they come.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..dataclass import dataclass
from .layout import CONTEXT_USER, CONTEXT_USER_DEFERRED
from .order import Delivery
from .records import DeferredCallchainEvent, SideBandEvent
from .samples import U64_MAX, SampleChunk, take_samples

if TYPE_CHECKING:
    import numpy.typing as npt


def deferred_cookie(chain: Sequence[int]) -> int | None:
    """The cookie of a callchain that waits for a CALLCHAIN_DEFERRED record (its last entry,
    after PERF_CONTEXT_USER_DEFERRED), None for any other (util/evsel.c
    evsel__parse_sample)."""
    if len(chain) >= 2 and int(chain[-2]) == CONTEXT_USER_DEFERRED:
        return int(chain[-1])
    return None


def merged_callchain(chain: Sequence[int], ips: Sequence[int]) -> tuple[int, ...]:
    """A waiting sample's callchain with a deferred record's addresses in place of its cookie
    (util/callchain.c sample__merge_deferred_callchain), the marker before them written
    PERF_CONTEXT_USER."""
    return (*(int(v) for v in chain[:-2]), CONTEXT_USER, *ips)


def _released(chain: Sequence[int]) -> tuple[int, ...]:
    """A waiting sample's callchain as perf delivers it when a record of its thread came with
    another cookie: the cookie is then an ordinary user address."""
    return (*(int(v) for v in chain[:-2]), CONTEXT_USER, int(chain[-1]))


@dataclass(slots=True, eq=False, repr=False)
class DeferredTally:
    """What stitching found: samples that waited, those merged, those whose chain never came
    (delivered with their kernel frames alone), and the CALLCHAIN_DEFERRED records read."""

    waited: int = 0
    merged: int = 0
    unmatched: int = 0
    records: int = 0


@dataclass(slots=True, eq=False, repr=False)
class _Waiting:
    """A sample waiting for its thread's deferred callchain; ``number`` its place in perf's
    list of waiting samples."""

    chunk: SampleChunk
    row: int
    cookie: int
    number: int


class _Queue:
    """perf's list of waiting samples (evlist->deferred_samples), kept per thread: a record
    takes its thread's samples without walking the others' (perf walks the whole list at
    each record, a cost a hostile file could make quadratic)."""

    def __init__(self) -> None:
        self.by_tid: dict[int, list[_Waiting]] = {}
        self.count = 0

    def add(self, tid: int, entry: _Waiting) -> None:
        self.by_tid.setdefault(tid, []).append(entry)
        self.count += 1

    def take(self, tid: int) -> list[_Waiting]:
        taken = self.by_tid.pop(tid, [])
        self.count -= len(taken)
        return taken

    def take_all(self) -> list[_Waiting]:
        """Every waiting sample, in the order they came."""
        everything = sorted(
            (entry for entries in self.by_tid.values() for entry in entries),
            key=lambda entry: entry.number,
        )  # fmt: skip
        self.by_tid.clear()
        self.count = 0
        return everything


@dataclass(slots=True, eq=False, repr=False)
class _Out:
    """A delivery being built: rows (chunk, row, callchain in place of the row's or None) and
    the events with the number of rows before each."""

    rows: list[tuple[SampleChunk, int, tuple[int, ...] | None]] = field(default_factory=list)
    events: list[SideBandEvent] = field(default_factory=list)
    cuts: list[int] = field(default_factory=list)
    late: dict[int, int] = field(default_factory=dict)

    def released(self, entry: _Waiting, chain: tuple[int, ...] | None, time: int) -> None:
        """A waiting sample delivered at ``time``, with ``chain`` in place of its own."""
        self.late[len(self.rows)] = time
        self.rows.append((entry.chunk, entry.row, chain))

    def event(self, event: SideBandEvent) -> None:
        self.events.append(event)
        self.cuts.append(len(self.rows))

    def delivery(self, read_to: int) -> Delivery:
        return Delivery(_chunk_of(self.rows), self.events, self.cuts, read_to, self.late)


def stitch_deferred(
    deliveries: Iterable[Delivery],
    defers: Callable[[], Sequence[bool]],
    tally: DeferredTally,
    *,
    merge: bool = True,
) -> Iterator[Delivery]:
    """``deliveries`` (order.py) with each waiting sample moved to the CALLCHAIN_DEFERRED
    record of its thread, merged with it (see the module's documentation); ``defers()``
    says, per attribute index, whether its samples' user callchains are deferred (asked per
    delivery: a stream adds attributes as it goes).  ``merge`` False: the deliveries as
    they are (perf's ``--no-merge-callchain``)."""
    waiting = _Queue()
    read_to = 0
    for delivery in deliveries:
        read_to = delivery.read_to
        for event in delivery.events:
            tally.records += isinstance(event, DeferredCallchainEvent)
        flags = defers()
        samples = delivery.samples
        chosen = _waiting_rows(samples, flags) if merge and samples is not None else None
        if not waiting.count and chosen is None:  # nothing waits, nothing starts to wait
            yield delivery
            continue
        out = _Out()
        done = 0
        for event, cut in zip(delivery.events, delivery.cuts, strict=True):
            _take(out, samples, done, cut, chosen, waiting, tally)
            done = cut
            out.event(event)
            if isinstance(event, DeferredCallchainEvent):
                _release(out, event, waiting, tally)
        if samples is not None:
            _take(out, samples, done, len(samples), chosen, waiting, tally)
        yield out.delivery(read_to)
    if waiting.count:  # session__flush_deferred_samples: no chain will come
        tally.unmatched += waiting.count
        out = _Out()
        for entry in waiting.take_all():
            out.released(entry, None, U64_MAX)
        yield out.delivery(read_to)


def _waiting_rows(samples: SampleChunk, flags: Sequence[bool]) -> npt.NDArray[np.bool_] | None:
    """Which samples of a chunk wait for a deferred record; None when none does."""
    if not any(flags) or not len(samples):
        return None
    defer = np.array([*flags, False], dtype=bool)
    attrs = np.minimum(samples.attr.astype(np.int64), len(flags))
    ends = samples.callchain_offsets
    lengths = np.diff(ends)
    long_enough = lengths >= 2
    before_last = np.where(long_enough, ends[1:] - 2, 0)
    marked = samples.callchain[before_last] == np.uint64(CONTEXT_USER_DEFERRED)
    chosen: npt.NDArray[np.bool_] = defer[attrs] & long_enough & marked
    return chosen if chosen.any() else None


def _take(
    out: _Out,
    samples: SampleChunk | None,
    start: int,
    end: int,
    chosen: npt.NDArray[np.bool_] | None,
    waiting: _Queue,
    tally: DeferredTally,
) -> None:
    """Rows ``start:end`` of ``samples`` delivered, those ``chosen`` set waiting."""
    if samples is None:
        return
    for row in range(start, end):
        if chosen is not None and chosen[row]:
            chain = samples.callchain_of(row)
            entry = _Waiting(samples, row, int(chain[-1]), tally.waited)
            waiting.add(int(samples.tid[row]), entry)
            tally.waited += 1
        else:
            out.rows.append((samples, row, None))


def _release(
    out: _Out, event: DeferredCallchainEvent, waiting: _Queue, tally: DeferredTally
) -> None:
    """Deliver the samples waiting for a record of ``event``'s thread (util/session.c
    evlist__deliver_deferred_callchain): merged where the cookies agree."""
    tid = -1 if event.sample_id.tid is None else event.sample_id.tid
    time = U64_MAX if event.time is None else event.time
    for entry in waiting.take(tid):
        chain = entry.chunk.callchain_of(entry.row).tolist()
        if entry.cookie == event.cookie:
            out.released(entry, merged_callchain(chain, event.ips), time)
            tally.merged += 1
        else:
            out.released(entry, _released(chain), time)
            tally.unmatched += 1


def _chunk_of(rows: list[tuple[SampleChunk, int, tuple[int, ...] | None]]) -> SampleChunk | None:
    """One chunk of the rows, in order, with the callchains given in place of theirs."""
    if not rows:
        return None
    chunks: list[SampleChunk] = []
    numbers: dict[int, int] = {}
    which, index = [], []
    for chunk, row, _ in rows:
        number = numbers.get(id(chunk))
        if number is None:
            number = numbers[id(chunk)] = len(chunks)
            chunks.append(chunk)
        which.append(number)
        index.append(row)
    taken = take_samples(chunks, np.array(which, np.int64), np.array(index, np.int64))
    if all(chain is None for _, _, chain in rows):
        return taken
    chains = [
        taken.callchain_of(position) if chain is None else np.array(chain, np.uint64)
        for position, (_, _, chain) in enumerate(rows)
    ]
    lengths = np.array([len(chain) for chain in chains], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return replace(
        taken, callchain=np.concatenate(chains).astype(np.uint64), callchain_offsets=offsets
    )


__all__ = [
    "DeferredTally", "deferred_cookie", "merged_callchain", "stitch_deferred",
]  # fmt: skip
