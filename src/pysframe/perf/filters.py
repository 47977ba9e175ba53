"""Choosing samples of a profile, as perf report's filters choose them.

:func:`filter_profile` keeps the samples of given processes (``--pid``), threads (``--tid``),
commands (``--comm``), modules (``--dsos``) and time ranges (``--time``, whose syntax
:func:`parse_time_ranges` reads).  Percentages of what is written from the result are of the
samples kept (perf's ``--percentage relative``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from typing import Literal

import numpy as np

from ..errors import SFrameError
from .aggregate import FlatStacks, innermost_real_frames
from .profile import DeferredChain, FrameInfo, Profile

#: A time range in nanoseconds, either end None for open.
TimeRange = tuple[int | None, int | None]

_NS_PER_SECOND = 1_000_000_000
_TIME = re.compile(r"(\d+)(?:\.(\d{0,9}))?")


class FilterError(SFrameError):
    """A filter that cannot be read (a time range perf's --time would refuse, a frame test
    that is not known)."""


def parse_time(text: str) -> int:
    """``SECONDS[.FRACTION]`` (at most 9 digits of fraction) in nanoseconds, as perf's
    parse_nsec_time (tools/perf/util/time-utils.c) reads it."""
    match = _TIME.fullmatch(text)
    if match is None:
        raise FilterError(f"{text!r} is not a time in seconds (SECONDS or SECONDS.FRACTION)")
    fraction = (match[2] or "").ljust(9, "0")
    return int(match[1]) * _NS_PER_SECOND + int(fraction or "0")


def parse_time_ranges(text: str) -> list[TimeRange]:
    """perf's ``--time`` argument: ``START,END`` with either side empty for open
    (``1234.5,``, ``,1234.6``; a time without a comma is a start), several ranges separated by
    spaces (a sample in any of them is kept).  Times are the samples' (seconds since boot, as
    ``perf script`` prints them).  perf's percentage forms (``10%/2``) are not read.

    As perf_time__parse_str: the end may not be before the start."""
    ranges: list[TimeRange] = []
    for part in text.split():
        if "%" in part:
            raise FilterError(f"time range {part!r}: percentages of the recording are not read")
        start_text, comma, end_text = part.partition(",")
        start = parse_time(start_text) if start_text else None
        # perf takes a time of 0 for "not given" (perf_time__skip_sample).
        end = (parse_time(end_text) or None) if comma and end_text else None
        if start is not None and end is not None and end < start:
            raise FilterError(f"time range {part!r} ends before it starts")
        ranges.append((start, end))
    if not ranges:
        raise FilterError("empty time range")
    return ranges


def _ranges(time_range: str | TimeRange | Sequence[TimeRange]) -> list[TimeRange]:
    if isinstance(time_range, str):
        return parse_time_ranges(time_range)
    if len(time_range) == 2 and not isinstance(time_range[0], tuple | list):
        return [time_range]  # type: ignore[list-item]
    return list(time_range)  # type: ignore[arg-type]


def in_dsos(frame: FrameInfo, dsos: Collection[str]) -> bool:
    """Whether ``frame``'s module is one of ``dsos``: named by its short name (a file's base
    name, ``[kernel.kallsyms]``) or its whole path, as perf's --dsos matches a dso's
    short_name or long_name (util/event.c machine__resolve)."""
    module = frame.module
    return module in dsos or os.path.basename(module) in dsos


#: Which frames of a sample :func:`filter_profile` tests against ``dsos``: any frame of its
#: stack, or only its own frame (the innermost that is not an inlined function, or an inline
#: entry of the symbol holding it: perf's self entry, whose dso perf report --dsos tests).
DsoFrames = Literal["any", "own"]


def filter_profile(
    profile: Profile,
    *,
    pids: Collection[int] | None = None,
    tids: Collection[int] | None = None,
    comms: Collection[str] | None = None,
    dsos: Collection[str] | None = None,
    time_range: str | TimeRange | Sequence[TimeRange] | None = None,
    dso_frames: DsoFrames = "any",
) -> Profile:
    """The samples of ``profile`` that pass every filter given (None: no filter).

    ``pids``, ``tids``: the sample's process or thread is one of them.  ``comms``: its command
    name is one of them.  ``dsos``: a frame of its stack (``dso_frames="own"``: its own frame)
    is in one of these modules (:func:`in_dsos`); a sample without frames has no module and
    is dropped, as perf drops a sample without a map.  ``time_range``: perf's ``--time``
    text (:func:`parse_time_ranges`), or (start, end) nanosecond pairs, either end None for
    open; both ends are in the range (perf_time__skip_sample).
    """
    keep = np.ones(len(profile), dtype=bool)
    if pids is not None:
        keep &= np.isin(profile.column("pid"), np.fromiter(pids, dtype=np.int64))
    if tids is not None:
        keep &= np.isin(profile.column("tid"), np.fromiter(tids, dtype=np.int64))
    if comms is not None:
        wanted = [index for index, name in enumerate(profile.comms) if name in set(comms)]
        keep &= np.isin(profile.column("comm"), np.array(wanted, dtype=np.int64))
    if dsos is not None:
        keep &= _stacks_in_dsos(profile, set(dsos), dso_frames)[profile.column("stack")]
    if time_range is not None:
        times = profile.column("time")
        within = np.zeros(len(profile), dtype=bool)
        for start, end in _ranges(time_range):
            inside = np.ones(len(profile), dtype=bool)
            if start is not None:
                inside &= times >= start
            if end is not None:
                inside &= times <= end
            within |= inside
        keep &= within
    chosen = profile.take(np.flatnonzero(keep).tolist())
    chosen.deferred = _deferred_kept(profile, pids, tids, comms, dsos, time_range)
    return chosen


def _deferred_kept(
    profile: Profile,
    pids: Collection[int] | None,
    tids: Collection[int] | None,
    comms: Collection[str] | None,
    dsos: Collection[str] | None,
    time_range: str | TimeRange | Sequence[TimeRange] | None,
) -> list[DeferredChain]:
    """The deferred user callchains shown apart that pass the filters, as perf script
    filters a CALLCHAIN_DEFERRED record (builtin-script.c process_deferred_sample_event):
    by its thread and time; with ``dsos`` none (the record has no sampled address, hence no
    module: machine__resolve filters it out)."""
    if dsos is not None:
        return []
    ranges = _ranges(time_range) if time_range is not None else None

    def passes(chain: DeferredChain) -> bool:
        if pids is not None and chain.pid not in pids:
            return False
        if tids is not None and chain.tid not in tids:
            return False
        if comms is not None and profile.comms[chain.comm] not in comms:
            return False
        return ranges is None or any(
            (start is None or chain.time >= start) and (end is None or chain.time <= end)
            for start, end in ranges
        )

    return [chain for chain in profile.deferred if passes(chain)]


def _stacks_in_dsos(profile: Profile, dsos: set[str], dso_frames: DsoFrames) -> np.ndarray:
    """Per stack, whether it passes the dso filter."""
    frame_in = np.fromiter((in_dsos(frame, dsos) for frame in profile.frames), dtype=bool,
                           count=len(profile.frames))  # fmt: skip
    flat = FlatStacks.of(profile)
    if dso_frames == "own":
        own = innermost_real_frames(profile, flat)
        passing: np.ndarray = (own >= 0) & frame_in[np.maximum(own, 0)]
        return passing
    if dso_frames != "any":
        raise FilterError(f"unknown frame choice {dso_frames!r} (any, own)")
    # Per stack: how many of its frames are in the modules, by a cumulative count.
    hits = np.zeros(len(flat.frames) + 1, dtype=np.int64)
    np.cumsum(frame_in[flat.frames], out=hits[1:])
    within: np.ndarray = hits[flat.offsets[1:]] > hits[flat.offsets[:-1]]
    return within


__all__ = [
    "DsoFrames",
    "FilterError",
    "TimeRange",
    "filter_profile",
    "in_dsos",
    "parse_time",
    "parse_time_ranges",
]
