"""A recording read through in perf's order: its side-band records applied to the processes'
address spaces, its samples' user stacks walked a chunk at a time.

Samples and side-band records are taken in the order perf delivers them (by time, order.py):
the samples before a record that changes which module a mapped PC is in (an exec, a mapping
over mapped addresses: :meth:`AddressSpaces.changes_lookups`) are walked with the address
spaces as they were before it, and each sample gets the name its thread had when it was taken
(perf processes its ordered events so too, util/session.c).  Other records (new mappings,
forks, exits) cannot change what the samples before them ran, so the samples of a delivery
are walked together across them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..unwind import BatchUnwinder, Walks, joined, no_walks
from .data import DEFAULT_CHUNK, PerfData
from .errors import PerfDataError
from .order import time_ordered
from .records import SideBandEvent
from .registers import RegisterLayout, register_layout
from .samples import SampleChunk
from .spaces import AddressSpaces
from .walk import MAX_FRAMES, sample_unwinder, walk_samples

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class WalkedChunk:
    """A chunk of samples, in perf's order, with their walks (``walks`` answers the chunk's
    samples in order) and each sample's thread's command name at its time (``comms``);
    ``read_to``: how far the file has been read (for progress)."""

    samples: SampleChunk
    walks: Walks
    comms: list[str]
    read_to: int = 0


def walk_recording(
    data: PerfData,
    spaces: AddressSpaces,
    *,
    chunk: int = DEFAULT_CHUNK,
    max_frames: int = MAX_FRAMES,
    on_event: Callable[[SideBandEvent], None] | None = None,
) -> Iterator[WalkedChunk]:
    """Every sample of ``data`` with its user stack walked; ``on_event`` is shown every
    side-band record as it is applied."""

    def apply(event: SideBandEvent) -> None:
        spaces.apply(event)
        if on_event is not None:
            on_event(event)

    arch = data.features.arch or ""
    layouts: dict[int, tuple[RegisterLayout, BatchUnwinder] | None] = {}
    for delivery in time_ordered(data.read(chunk)):
        samples = delivery.samples
        if samples is None or not len(samples):
            for event in delivery.events:
                apply(event)
            continue
        layout = _layout(layouts, arch, samples, data, max_frames)
        parts: list[Walks] = []
        comms: list[str] = []
        walked = named = 0
        for event, cut in zip(delivery.events, delivery.cuts, strict=True):
            if cut > named:  # the names threads had before the event
                comms += _comms(spaces, samples.tid[named:cut])
                named = cut
            if cut > walked and spaces.changes_lookups(event):
                parts.append(_walk(samples, layout, spaces, walked, cut))
                walked = cut
            apply(event)
        end = len(samples)
        comms += _comms(spaces, samples.tid[named:end])
        if walked < end:
            parts.append(_walk(samples, layout, spaces, walked, end))
        yield WalkedChunk(samples, joined(parts), comms, delivery.read_to)


def _layout(
    layouts: dict[int, tuple[RegisterLayout, BatchUnwinder] | None],
    arch: str,
    samples: SampleChunk,
    data: PerfData,
    max_frames: int,
) -> tuple[RegisterLayout, BatchUnwinder] | None:
    """The registers of the samples' layout, and the unwinder of its samples (one for the
    recording, so that what it caches serves every chunk)."""
    mask = samples.regs_mask
    if mask not in layouts:
        try:
            layout = register_layout(arch, mask, data.header.big_endian) if mask else None
        except PerfDataError as error:
            raise error.at(path=data.path) from None
        layouts[mask] = None if layout is None else (layout, sample_unwinder(layout, max_frames))
    return layouts[mask]


def _walk(
    samples: SampleChunk,
    layout: tuple[RegisterLayout, BatchUnwinder] | None,
    spaces: AddressSpaces,
    start: int,
    end: int,
) -> Walks:
    select = np.arange(start, end, dtype=np.int64)
    if layout is None:  # no user registers recorded
        return no_walks(len(select))
    return walk_samples(samples, layout[0], spaces, layout[1], select=select)


def _comms(spaces: AddressSpaces, tids: npt.NDArray[np.int32]) -> list[str]:
    names = {tid: spaces.comm(tid) for tid in set(tids.tolist())}
    return [names[tid] for tid in tids.tolist()]


__all__ = ["WalkedChunk", "walk_recording"]
