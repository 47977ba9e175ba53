"""A profile as ``perf script`` prints it, so that what reads perf's text (FlameGraph's
stackcollapse-perf.pl, speedscope, the Firefox Profiler) reads this too.

Each sample, in time order as perf orders them (stable for equal times): a header line with
the fields perf prints by default for a sampling event with callchains (builtin-script.c
perf_sample__fprintf_start: the command name, the thread id as ``%5d``, the CPU as
``[%03d]`` where samples record it (PERF_SAMPLE_CPU: ``-a``, ``--sample-cpu``), the time in seconds
with microseconds as ``%12s``, the period as ``%10lu``, the event name), then one line per
frame, innermost first (``\\t%16lx SYMBOL+0xOFFSET (MODULE)``, ``[unknown]`` without a name;
an inline entry, perf's default, says ``(inlined)`` instead of its module), then an empty
line.

One difference from perf, on purpose: control characters and line separators in a command,
function, module or event name are escaped (``\\x0a`` for a newline:
:func:`pysframe.names.escape_controls`), so that every sample stays one header line and its
frame lines; perf prints them as they are, and a newline in a name breaks its text into lines
no reader can parse.  Other names are printed as perf prints them, byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

from ..names import escape_controls
from .profile import UNKNOWN, FrameInfo, Profile


def frame_line(frame: FrameInfo, srcline: bool = False) -> str:
    """One frame as perf script prints it (with a tab before, a newline after); an inline
    entry says ``(inlined)`` where the module stands.  ``srcline`` (``-F +srcline``): the
    frame's source line on a line of its own, two spaces in, before ``(inlined)``
    (util/evsel_fprintf.c sample__fprintf_callchain)."""
    name = UNKNOWN if frame.symbol is None else f"{escape_controls(frame.symbol)}+{frame.offset:#x}"
    text = f"\t{frame.address:16x} {name}"
    text += "" if frame.inlined else f" ({escape_controls(frame.module)})"
    if srcline and frame.file is not None:
        line = "" if frame.line is None else f":{frame.line}"
        text += f"\n  {escape_controls(frame.file)}{line}"
    return text + (" (inlined)\n" if frame.inlined else "\n")


def _event_width(profile: Profile) -> int:
    """The width perf prints event names in: the longest name of the recording's events
    (builtin-script.c process_event: ``%*s``, evlist__max_name_len), each right-aligned."""
    return max((len(escape_controls(name)) for name, _unit in profile.events), default=0)


def sample_lines(profile: Profile, index: int, frames: list[str]) -> str:
    """Sample ``index`` as perf script prints it (``frames``: its frames' lines)."""
    time = profile.time[index]
    stamp = f"{time // 1_000_000_000}.{time % 1_000_000_000 // 1000:06d}"
    event = escape_controls(profile.events[profile.event[index]][0]).rjust(_event_width(profile))
    comm = escape_controls(profile.comms[profile.comm[index]])
    cpu = profile.cpu[index]
    where = f"[{cpu:03d}] " if cpu >= 0 else ""
    header = (
        f"{comm} {profile.tid[index]:5d} {where}{stamp:>12}: {profile.period[index]:10d} "
        f"{event}: \n"
    )
    return header + "".join(frames) + "\n"


def script_text(profile: Profile, batch: int = 4096, *, srcline: bool = False) -> Iterator[str]:
    """The text of every sample, in time order, ``batch`` samples at a time: each frame and
    each distinct stack is formatted once, each header from a template per (command, event)
    (the same text as :func:`sample_lines`: ``%5d.%06d`` is ``%12s`` of the time stamp).
    ``srcline``: with each frame's source line (:func:`frame_line`)."""
    import numpy as np

    frame_text = [frame_line(frame, srcline) for frame in profile.frames]
    stacks: dict[int, str] = {}
    templates: dict[int, str] = {}
    kinds = len(profile.events) or 1
    width = _event_width(profile)

    def stack_text(stack: int) -> str:
        text = stacks.get(stack)
        if text is None:
            text = stacks[stack] = "".join([frame_text[f] for f in profile.stacks[stack]]) + "\n"
        return text

    def template(key: int) -> str:
        found = templates.get(key)
        if found is None:
            cpu, key = key & 1, key >> 1
            name = escape_controls(profile.comms[key // kinds]).replace("%", "%%")
            event = escape_controls(profile.events[key % kinds][0]).rjust(width)
            event = event.replace("%", "%%")
            where = "[%03d] " if cpu else ""
            found = templates[key << 1 | cpu] = (
                f"{name} %5d {where}%5d.%06d: %10d {event}: \n"
            )
        return found

    times = np.array(profile.time, dtype=np.uint64)
    cpus = np.array(profile.cpu, dtype=np.int64)
    keys = np.array(profile.comm, dtype=np.int64) * kinds + np.array(profile.event, np.int64)
    keys = keys << 1 | (cpus >= 0)
    columns = (keys, np.array(profile.tid, np.int64), cpus, times // np.uint64(10**9),
               times % np.uint64(10**9) // np.uint64(1000),
               np.array(profile.period, np.uint64), np.array(profile.stack, np.int64))  # fmt: skip
    order = np.argsort(times, kind="stable")
    for start in range(0, len(order), batch):
        chosen = order[start : start + batch]
        key, tid, cpu, second, micro, period, stack = (
            column[chosen].tolist() for column in columns
        )
        yield "".join([
            template(k) % ((t, c, s, u, p) if k & 1 else (t, s, u, p)) + stack_text(x)
            for k, t, c, s, u, p, x in zip(key, tid, cpu, second, micro, period, stack,
                                           strict=True)
        ])  # fmt: skip


def write_script(profile: Profile, out: TextIO, *, srcline: bool = False) -> None:
    """Write the profile as ``perf script`` text (``srcline``: ``perf script -F +srcline``),
    in batches."""
    for piece in script_text(profile, srcline=srcline):
        out.write(piece)


__all__ = ["frame_line", "sample_lines", "script_text", "write_script"]
