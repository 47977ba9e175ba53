"""What the walks of recordings did, in words and as JSON (``pysframe perf stats``).

* how deep walks went (user frames: the distribution, and its quantiles);
* where and why they stopped (:class:`~pysframe.unwind.StopKind`: the outermost frame, memory
  past the end of the copied stack, no rule, a bad frame, the frame limit...), with the modules
  of the last frames;
* how many bytes of each stack copy a walk read: the question the kernel's deferred-unwinding
  work asks of a user stack dump (how large must it be?) answered as the share of walks that
  a copy of 1, 2, 4... KiB would have been enough for;
* which modules had no SFrame of their own (and why), and the share of samples with a frame
  in each;
* how each event recorded user stacks (dwarf: a stack copy walked; fp: the kernel's
  frame-pointer chain; deferred; none) and the share of its samples with walked frames,
  recorded frames, and both;
* where SFrame knows better than a recorded chain: the samples whose frame-pointer chain left
  out the caller of the function at their PC (that function had not set up its frame), by
  module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..names import escape_controls
from ..unwind import StopKind
from .analyze import EventStats, WalkStats

#: Stack copy sizes the "enough for" table asks about.
COPY_SIZES = (1024, 2048, 4096, 8192, 16384, 32768, 65504)


def merged(parts: list[WalkStats]) -> WalkStats:
    """The statistics of several recordings as one."""
    total = WalkStats()
    for part in parts:
        total.samples += part.samples
        total.walked += part.walked
        total.frames += part.frames
        total.depths.update(part.depths)
        total.stops.update(part.stops)
        total.stack_used += part.stack_used
        total.stack_copied += part.stack_copied
        total.stepped += part.stepped
        total.module_samples.update(part.module_samples)
        total.stop_modules.update(part.stop_modules)
        for name, why in part.without_own_sframe.items():
            total.without_own_sframe.setdefault(name, why)
        total.origins.update(part.origins)
        total.problems += part.problems
        total.recorded += part.recorded
        total.both += part.both
        total.chain_missed_caller.update(part.chain_missed_caller)
        for name, event in part.events.items():
            into = total.events.setdefault(name, EventStats(event.kind))
            if into.kind != event.kind:
                into.kind = "mixed"
            into.samples += event.samples
            into.walked += event.walked
            into.recorded += event.recorded
            into.both += event.both
    return total


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def _quantiles(values: list[int]) -> dict[str, int]:
    if not values:
        return {}
    array = np.asarray(values)
    names = ("min", "median", "p90", "p99", "max")
    points = (0, 50, 90, 99, 100)
    return {
        name: int(np.percentile(array, point, method="lower"))
        for name, point in zip(names, points, strict=True)
    }


def stats_json(stats: WalkStats) -> dict[str, Any]:
    """The statistics as a JSON-ready document."""
    depths = [d for d, count in stats.depths.items() for _ in range(count)]
    used = np.asarray(stats.stack_used, dtype=np.int64)
    return {
        "samples": stats.samples,
        "walked": stats.walked,
        "frames": stats.frames,
        "frames_stepped_alone": stats.stepped,
        "depth": _quantiles(depths),
        "stops": {stop.value: stats.stops.get(stop, 0) for stop in StopKind},
        "stops_by_module": [
            {"stop": stop.value, "module": module, "walks": count}
            for (stop, module), count in stats.stop_modules.most_common()
        ],
        "stack_bytes_read": _quantiles(stats.stack_used),
        "stack_bytes_copied": _quantiles(stats.stack_copied),
        "copy_enough": {
            str(size): int((used <= size).sum()) for size in COPY_SIZES
        },
        "modules": [
            {
                "module": name,
                "samples": count,
                "sframe": stats.origins.get(name, "none"),
                "without_own_sframe": stats.without_own_sframe.get(name),
            }
            for name, count in stats.module_samples.most_common()
        ],
        "recorded": stats.recorded,
        "walked_and_recorded": stats.both,
        "events": {
            name: {"kind": event.kind, "samples": event.samples, "walked": event.walked,
                   "recorded": event.recorded, "both": event.both}
            for name, event in stats.events.items()
        },
        "chain_missed_caller": dict(stats.chain_missed_caller.most_common()),
        "problems": list(stats.problems),
    }  # fmt: skip


def stats_text(stats: WalkStats, limit: int = 20) -> str:
    """The statistics as ``pysframe perf stats`` prints them."""
    walked = stats.walked
    lines = [
        f"samples: {stats.samples:,}, with a user stack: {walked:,}; user frames: "
        f"{stats.frames:,} ({stats.frames / walked:.1f} a walk)" if walked else
        f"samples: {stats.samples:,}, none with a user stack",
    ]  # fmt: skip
    if stats.recorded:
        lines.append(
            f"with a recorded user callchain: {stats.recorded:,}; with both: {stats.both:,}"
        )
    if stats.events:
        lines.append("events (how user stacks were recorded; samples with walked, recorded, "
                     "both frames):")  # fmt: skip
        for name, event in stats.events.items():
            shares = ", ".join(
                f"{what} {_share(count, event.samples).strip()}"
                for what, count in (("walked", event.walked), ("recorded", event.recorded),
                                    ("both", event.both))
            )  # fmt: skip
            lines.append(f"  {escape_controls(name)}: {event.kind}; {event.samples:,} samples: "
                         f"{shares}")  # fmt: skip
    depth = stats_json(stats)["depth"]
    if depth:
        lines.append("depth: " + ", ".join(f"{k} {v}" for k, v in depth.items()))
    lines.append("walks stopped:")
    for stop in StopKind:
        count = stats.stops.get(stop, 0)
        if count:
            lines.append(f"  {_share(count, stats.samples)} {count:>9,}  {stop.value}")
    ends = [(key, count) for key, count in stats.stop_modules.most_common()
            if key[0] is not StopKind.OUTERMOST]  # fmt: skip
    if ends:
        lines.append("where walks stopped early (last frame's module):")
        for (stop, module), count in ends[:limit]:
            lines.append(f"  {count:>9,}  {stop.value}: {escape_controls(module)}")
    if stats.stack_used:
        used = np.asarray(stats.stack_used)
        read = stats_json(stats)["stack_bytes_read"]
        lines.append("stack copy bytes read: " + ", ".join(f"{k} {v}" for k, v in read.items()))
        enough = ", ".join(
            f"{size // 1024 if size % 1024 == 0 else size} {'KiB' if size % 1024 == 0 else 'B'}"
            f" {_share(int((used <= size).sum()), len(used)).strip()}"
            for size in COPY_SIZES
        )
        lines.append(f"walks a copy of N bytes is enough for: {enough}")
    lines.append("modules (samples with a frame in them, SFrame used):")
    for name, count in stats.module_samples.most_common(limit):
        why = stats.without_own_sframe.get(name)
        origin = stats.origins.get(name, "none")
        note = f" ({why})" if why else ""
        shown = escape_controls(name)  # one line whatever the path holds
        lines.append(f"  {_share(count, walked)} {count:>9,}  {shown}: {origin}{note}")
    if stats.chain_missed_caller:
        missed = sum(stats.chain_missed_caller.values())
        lines.append(
            f"recorded chains that left out a caller: {missed:,} of {stats.recorded:,} (SFrame: "
            "the function at the sample's PC had not set up its frame), by module:"
        )
        for name, count in stats.chain_missed_caller.most_common(limit):
            lines.append(f"  {_share(count, stats.recorded)} {count:>9,}  {escape_controls(name)}")
    if stats.stepped:
        lines.append(f"frames stepped one at a time: {stats.stepped:,} of {stats.frames:,}")
    lines += [f"problem: {problem}" for problem in stats.problems]
    return "\n".join(lines) + "\n"


__all__ = ["COPY_SIZES", "merged", "stats_json", "stats_text"]
