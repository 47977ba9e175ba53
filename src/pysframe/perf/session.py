"""A recording read through in perf's order: its side-band records applied to the processes'
address spaces, its samples' user stacks walked a chunk at a time.

Samples and side-band records are taken in the order perf delivers them (by time, order.py):
the samples before a record that changes which module a mapped PC is in (a mapping over
mapped addresses: :meth:`AddressSpaces.changes_lookups`) are walked with the address spaces
as they were before it, and each sample gets the name its thread had when it was taken
(perf processes its ordered events so too, util/session.c).  Other records (new mappings,
forks, exits, execs) cannot change what the samples before them ran, so the samples of a delivery
are walked together across them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np

from ..dataclass import dataclass
from ..unwind import BatchUnwinder, Walks, joined, no_walks
from .data import DEFAULT_CHUNK, PerfData
from .deferred import DeferredTally, stitch_deferred
from .errors import PerfDataError
from .order import time_ordered
from .records import SideBandEvent
from .registers import RegisterLayout, architecture_of, register_layout
from .samples import SampleChunk
from .spaces import AddressSpaces
from .walk import (
    MAX_FRAMES,
    RecordedChains,
    joined_chains,
    recorded_chains,
    sample_unwinder,
    walk_samples,
)

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class WalkedChunk:
    """A chunk of samples, in perf's order, with their walks (``walks`` answers the chunk's
    samples in order), the user frames their callchains hold (``recorded``) and each
    sample's thread's command name at its time (``comms[comm[i]]`` for sample ``i``);
    ``read_to``: how far the file has been read (for progress)."""

    samples: SampleChunk
    walks: Walks
    recorded: RecordedChains
    comms: list[str]
    comm: npt.NDArray[np.int64]
    read_to: int = 0
    #: Samples delivered after their time (order.Delivery.late).
    late: dict[int, int] = field(default_factory=dict)


def walk_recording(
    data: PerfData,
    spaces: AddressSpaces,
    *,
    chunk: int = DEFAULT_CHUNK,
    max_frames: int = MAX_FRAMES,
    on_event: Callable[[SideBandEvent], None] | None = None,
    merge_deferred: bool = True,
    deferred: DeferredTally | None = None,
    within: tuple[int, int] | None = None,
    cut: bool = False,
    count_used: bool = True,
) -> Iterator[WalkedChunk]:
    """Every sample of ``data`` with its user stack walked; ``on_event`` is shown every
    side-band record as it is applied.  Samples whose user callchain was deferred are
    delivered with it, merged, where it comes (deferred.py; ``merge_deferred`` False: as
    they are, perf's ``--no-merge-callchain``); ``deferred`` counts what stitching did.
    ``within`` (``(low, high)``, file offsets): only the samples of the deliveries read up
    to an offset above ``low`` and at most ``high`` (a time slice of the recording, walked
    with the address spaces as they were at its start): the samples delivered before are
    not gathered (their side-band records are applied all the same), and the reading stops
    after the slice.  A recording whose user callchains are deferred is read whole (a
    sample waiting for its chain may be delivered in a later slice).  ``cut``: the slice's
    bounds cut the stretches read (:meth:`PerfData.read`), the reading stops at its end:
    the slices are theirs to the record, where without it they are made of the stretches
    a reading of the whole has, the same chunks (so that frames and stacks are numbered as
    that reading numbers them).  ``count_used`` False: the walks do not count how much of
    their stack copies they read (``Walks.stack_used`` 0)."""

    def apply(event: SideBandEvent) -> None:
        spaces.apply(event)
        if on_event is not None:
            on_event(event)

    layouts: dict[int, tuple[RegisterLayout, BatchUnwinder] | None] = {}
    def defers() -> list[bool]:
        return [attr.defer_callchain for attr in data.attrs]

    tally = DeferredTally() if deferred is None else deferred
    low, high = (-1, 1 << 64) if within is None else within
    sliced = within is not None and not any(defers())
    cuts = [low] if sliced and cut and low >= 0 else []
    stop = high if sliced and cut and high < 1 << 64 else None
    ordered = time_ordered(
        data.read(chunk, cuts, stop), (lambda read_to: read_to > low) if sliced else None
    )
    for delivery in stitch_deferred(ordered, defers, tally, merge=merge_deferred):
        if sliced and (delivery.read_to > high or data.stopped):
            # the slice is over: what comes later is the next one's (read up to its stop,
            # the reader says so once its last stretch is delivered, before the records
            # still queued are delivered at the end: after the slice)
            break
        samples = delivery.samples
        skipped = not low < delivery.read_to <= high
        if samples is None or not len(samples) or skipped:
            for event in delivery.events:
                apply(event)
            continue
        layout = _Layout(layouts, samples, data, spaces, max_frames)
        parts: list[tuple[Walks, RecordedChains]] = []
        comms = _Comms(spaces)
        walked = named = 0
        for event, at in zip(delivery.events, delivery.cuts, strict=True):
            if at > named:  # the names threads had before the event
                comms.add(samples.tid[named:at])
                named = at
            if at > walked and spaces.changes_lookups(event):
                parts.append(_walk(samples, layout, spaces, walked, at, count_used))
                walked = at
            apply(event)
        end = len(samples)
        comms.add(samples.tid[named:end])
        if walked < end:
            parts.append(_walk(samples, layout, spaces, walked, end, count_used))
        yield WalkedChunk(
            samples, joined([walks for walks, _ in parts]),
            joined_chains([chains for _, chains in parts]), comms.names, comms.joined(),
            delivery.read_to,
            delivery.late,
        )  # fmt: skip


@dataclass(slots=True, eq=False, repr=False)
class _Layout:
    """The register layout of a chunk's samples and the unwinder of its samples (one per
    layout for the recording, so that what it caches serves every chunk), found when first
    needed: by then the mappings of the samples walked are applied, for
    :func:`recorded_architecture`."""

    layouts: dict[int, tuple[RegisterLayout, BatchUnwinder] | None]
    samples: SampleChunk
    data: PerfData
    spaces: AddressSpaces
    max_frames: int

    def get(self) -> tuple[RegisterLayout, BatchUnwinder] | None:
        mask = self.samples.regs_mask
        if mask not in self.layouts:
            arch = self.data.features.arch or recorded_architecture(self.spaces)
            try:
                layout = register_layout(arch, mask, self.data.header.big_endian) if mask else None
            except PerfDataError as error:
                raise error.at(path=self.data.path) from None
            self.layouts[mask] = (
                None if layout is None else (layout, sample_unwinder(layout, self.max_frames))
            )
        return self.layouts[mask]


def recorded_architecture(spaces: AddressSpaces) -> str:
    """The architecture of a recording without the ARCH feature (perf record killed, a file
    cut short: the features come after the data): the machine of the first mapped file that
    has one SFrame knows (its ELF e_machine and byte order), else this machine's (perf
    itself takes this machine's)."""
    for module in spaces.modules:
        if module.facts is not None and module.facts.abi is not None:
            found = architecture_of(module.facts.abi)
            if found is not None:
                return found
    return os.uname().machine


def _walk(
    samples: SampleChunk,
    layout_of: _Layout,
    spaces: AddressSpaces,
    start: int,
    end: int,
    count_used: bool,
) -> tuple[Walks, RecordedChains]:
    """The walks of samples ``start`` to ``end``, and the user frames their callchains hold,
    with the address spaces as they are now."""
    select = np.arange(start, end, dtype=np.int64)
    chains = recorded_chains(samples, spaces, select=select)
    layout = layout_of.get()
    if layout is None:  # no user registers recorded
        return no_walks(len(select)), chains
    walks = walk_samples(samples, layout[0], spaces, layout[1], select=select,
                         count_used=count_used)  # fmt: skip
    return walks, chains


class _Comms:
    """The command names of a chunk's threads, piece by piece (the names they had at each
    piece's time): each distinct name once, in the order they come, and each sample's."""

    def __init__(self, spaces: AddressSpaces) -> None:
        self.spaces = spaces
        self._index: dict[str, int] = {}
        self._numbers: list[npt.NDArray[np.int64]] = []

    def add(self, tids: npt.NDArray[np.int32]) -> None:
        """The names of threads ``tids`` now: each distinct thread's looked up once, in the
        order the threads first come (a piece most often holds one thread)."""
        if not len(tids):
            return
        distinct, first, inverse = np.unique(tids, return_index=True, return_inverse=True)
        number = np.empty(len(distinct), dtype=np.int64)
        for position in np.argsort(first).tolist():
            name = self.spaces.comm(int(distinct[position]))
            number[position] = self._index.setdefault(name, len(self._index))
        self._numbers.append(number[inverse.reshape(-1)])

    @property
    def names(self) -> list[str]:
        return list(self._index)

    def joined(self) -> npt.NDArray[np.int64]:
        if not self._numbers:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(self._numbers)


__all__ = ["WalkedChunk", "walk_recording"]
