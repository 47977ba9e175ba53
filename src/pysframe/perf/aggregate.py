"""What the writers of a profile count: samples grouped by their keys, stacks laid out flat.

The writers never do Python work per sample: the per-sample columns of a
:class:`~pysframe.perf.profile.Profile` become numpy arrays, samples are grouped by sorting
(:func:`group`: the distinct key tuples, with each group's sample count and summed period),
and what depends on a stack is computed once per distinct stack, on the stacks laid out flat
(:class:`FlatStacks`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..dataclass import dataclass
from .profile import Profile


@dataclass(frozen=True, slots=True)
class Groups:
    """Samples grouped by a tuple of keys: per group (in ascending key order), the key values,
    the number of samples (or the summed sample weights given), the summed period and the
    index of the group's first sample; per sample, its group (``labels``)."""

    keys: tuple[np.ndarray, ...]
    count: np.ndarray
    period: np.ndarray
    first: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.count)


def group(
    keys: Sequence[np.ndarray], period: np.ndarray, samples: np.ndarray | None = None
) -> Groups:
    """Group the rows by ``keys`` (equal-length int arrays, the first the most significant):
    one stable sort, then the runs of equal keys.  ``samples``: what each row counts for in
    :attr:`Groups.count` (one sample when not given)."""
    size = len(period)
    if size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Groups(tuple(empty for _ in keys), empty, empty, empty, empty)
    order = _stable_order(keys)
    ordered = [key[order] for key in keys]
    starts_run = np.zeros(size, dtype=bool)
    starts_run[0] = True
    for key in ordered:
        starts_run[1:] |= key[1:] != key[:-1]
    starts = np.flatnonzero(starts_run)
    if samples is None:
        count = np.diff(np.append(starts, size))
    else:
        count = np.add.reduceat(samples[order].astype(np.int64), starts)
    summed = np.add.reduceat(period[order].astype(np.int64), starts)
    labels = np.empty(size, dtype=np.int64)
    labels[order] = np.cumsum(starts_run) - 1
    # lexsort is stable: a run's first element is its group's earliest sample.
    return Groups(tuple(key[starts] for key in ordered), count, summed, order[starts], labels)


def _stable_order(keys: Sequence[np.ndarray]) -> np.ndarray:
    """The stable sorting order of the rows by ``keys``: one argsort of the keys packed into
    one int64 when their ranges allow (much faster than a lexsort), else a lexsort."""
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    room = 1
    for key in keys:
        low, high = (int(key.min()), int(key.max())) if len(key) else (0, 0)
        span = high - low + 1
        room *= span
        if room >= 1 << 62:
            return np.lexsort(tuple(reversed(keys)))  # lexsort's last key is its primary one
        packed = packed * span + (key - low)
    if room <= 1 << 16:  # numpy sorts 16-bit integers stably by radix, in linear time
        return np.argsort(packed.astype(np.uint16), kind="stable")
    return np.argsort(packed, kind="stable")


@dataclass(frozen=True, slots=True)
class FlatStacks:
    """Every distinct stack's frame ids end to end (innermost first, as stored): stack ``s`` is
    ``frames[offsets[s]:offsets[s + 1]]``."""

    frames: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of(cls, profile: Profile) -> FlatStacks:
        lengths = np.fromiter(map(len, profile.stacks), dtype=np.int64, count=len(profile.stacks))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        frames = np.fromiter(
            itertools.chain.from_iterable(profile.stacks), dtype=np.int64, count=int(offsets[-1])
        )
        return cls(frames, offsets)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def expand(self, stacks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each of ``stacks`` (stack ids, repeats allowed), each of its frames: (the index
        in ``stacks`` it belongs to, its depth from the innermost frame, its frame id)."""
        lengths = self.lengths[stacks]
        owner = np.repeat(np.arange(len(stacks), dtype=np.int64), lengths)
        run_start = np.repeat(np.cumsum(lengths) - lengths, lengths)
        depth = np.arange(len(owner), dtype=np.int64) - run_start
        return owner, depth, self.frames[np.repeat(self.offsets[:-1][stacks], lengths) + depth]


def innermost_real_frames(profile: Profile, flat: FlatStacks) -> np.ndarray:
    """Per stack, the id of its innermost frame that stands for the sample's own entry (the
    frame holding the sample's IP, which perf's self entries name): the innermost that is
    not an inlined function, or an inlined one that names the symbol holding it
    (``base_symbol``, perf's inline entries); -1 when it has none."""
    inlined = _inlined_only(profile)
    result = np.full(len(profile.stacks), -1, dtype=np.int64)
    if len(flat.frames) == 0:
        return result
    position = np.arange(len(flat.frames), dtype=np.int64)
    candidate = np.where(inlined[flat.frames], len(flat.frames), position)
    nonempty = np.flatnonzero(flat.lengths > 0)
    first = np.minimum.reduceat(candidate, flat.offsets[nonempty])
    found = first < flat.offsets[nonempty + 1]
    result[nonempty[found]] = flat.frames[first[found]]
    return result


def _inlined_only(profile: Profile) -> np.ndarray:
    """Per frame: an inlined function that does not name the symbol holding it."""
    return np.fromiter(
        (frame.inlined and frame.base_symbol is None for frame in profile.frames), dtype=bool,
        count=len(profile.frames),
    )  # fmt: skip


__all__ = [
    "FlatStacks",
    "Groups",
    "group",
    "innermost_real_frames",
]
