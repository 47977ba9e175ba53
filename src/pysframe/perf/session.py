"""A recording read through in file order: its side-band records applied to the processes'
address spaces, its samples' user stacks walked a chunk at a time.

Samples and side-band records are taken in file order (perf writes them in rounds, each in
time order): the samples before a record that changes which module a mapped PC is in (an exec,
a mapping over mapped addresses: :meth:`AddressSpaces.changes_lookups`) are walked with the
address spaces as they were before it, and each sample gets the name its thread had when it
was taken (perf processes its ordered events so too, util/session.c).  Other records (new
mappings, forks, exits) cannot change what the samples before them ran, so the samples of a
stretch are walked together across them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .data import DEFAULT_CHUNK, PerfData
from .errors import PerfDataError
from .registers import RegisterLayout, register_layout
from .samples import SampleChunk
from .spaces import AddressSpaces
from .walk import MAX_FRAMES, Walks, as_walks, joined, no_walks, walk_sample, walk_samples

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class WalkedChunk:
    """A chunk of samples with their walks (``walks`` answers the chunk's samples in order)
    and each sample's thread's command name at its time (``comms``)."""

    samples: SampleChunk
    walks: Walks
    comms: list[str]


def walk_recording(
    data: PerfData,
    spaces: AddressSpaces,
    *,
    chunk: int = DEFAULT_CHUNK,
    max_frames: int = MAX_FRAMES,
    reference: bool = False,
) -> Iterator[WalkedChunk]:
    """Every sample of ``data`` with its user stack walked (``reference``: one sample at a time
    by the single-stack unwinder, the batch walk's reference)."""
    arch = data.features.arch or ""
    layouts: dict[int, RegisterLayout | None] = {}
    for stretch in data.read(chunk):
        samples = stretch.samples
        if not isinstance(samples, SampleChunk) or not len(samples):
            for event in stretch.events:
                spaces.apply(event)
            continue
        layout = _layout(layouts, arch, samples, data)
        offsets = samples.file_offset
        parts: list[Walks] = []
        comms: list[str] = []
        walked = named = 0
        for event in stretch.events:
            cut = int(np.searchsorted(offsets, event.offset))
            if cut > named:  # the names threads had before the event
                comms += _comms(spaces, samples.tid[named:cut])
                named = cut
            if cut > walked and spaces.changes_lookups(event):
                parts.append(_walk(samples, layout, spaces, walked, cut, max_frames, reference))
                walked = cut
            spaces.apply(event)
        end = len(samples)
        comms += _comms(spaces, samples.tid[named:end])
        if walked < end:
            parts.append(_walk(samples, layout, spaces, walked, end, max_frames, reference))
        yield WalkedChunk(samples, joined(parts), comms)


def _layout(
    layouts: dict[int, RegisterLayout | None], arch: str, samples: SampleChunk, data: PerfData
) -> RegisterLayout | None:
    mask = samples.regs_mask
    if mask not in layouts:
        try:
            layouts[mask] = register_layout(arch, mask, data.header.big_endian) if mask else None
        except PerfDataError as error:
            raise error.at(path=data.path) from None
    return layouts[mask]


def _walk(
    samples: SampleChunk,
    layout: RegisterLayout | None,
    spaces: AddressSpaces,
    start: int,
    end: int,
    max_frames: int,
    reference: bool,
) -> Walks:
    select = np.arange(start, end, dtype=np.int64)
    if layout is None:  # no user registers recorded
        return no_walks(len(select))
    if not reference:
        return walk_samples(samples, layout, spaces, select=select, max_frames=max_frames)
    return as_walks([
        walk_sample(samples, int(i), layout, spaces, max_frames=max_frames) for i in select
    ])


def _comms(spaces: AddressSpaces, tids: npt.NDArray[np.int32]) -> list[str]:
    names = {tid: spaces.comm(tid) for tid in np.unique(tids).tolist()}
    return [names[tid] for tid in tids.tolist()]


__all__ = ["WalkedChunk", "walk_recording"]
