"""A profile as ``perf script --no-inline`` prints it, so that what reads perf's text
(FlameGraph's stackcollapse-perf.pl, speedscope, the Firefox Profiler) reads this too.

Each sample, in time order as perf orders them (stable for equal times): a header line with
the fields perf prints by default for a sampling event with callchains (builtin-script.c
perf_sample__fprintf_start: the command name, the thread id as ``%5d``, the time in seconds
with microseconds as ``%12s``, the period as ``%10lu``, the event name), then one line per
frame, innermost first (``\\t%16lx SYMBOL+0xOFFSET (MODULE)``, ``[unknown]`` without a name),
then an empty line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

from .profile import UNKNOWN, FrameInfo, Profile


def frame_line(frame: FrameInfo) -> str:
    """One frame as perf script prints it (with a tab before, a newline after)."""
    name = UNKNOWN if frame.symbol is None else f"{frame.symbol}+{frame.offset:#x}"
    return f"\t{frame.address:16x} {name} ({frame.module})\n"


def sample_lines(profile: Profile, index: int, frames: list[str]) -> str:
    """Sample ``index`` as perf script prints it (``frames``: its frames' lines)."""
    time = profile.time[index]
    stamp = f"{time // 1_000_000_000}.{time % 1_000_000_000 // 1000:06d}"
    event = profile.events[profile.event[index]][0]
    header = (
        f"{profile.comms[profile.comm[index]]} {profile.tid[index]:5d} {stamp:>12}: "
        f"{profile.period[index]:10d} {event}: \n"
    )
    return header + "".join(frames) + "\n"


def script_text(profile: Profile) -> Iterator[str]:
    """The text of every sample, in time order, a sample at a time."""
    lines: dict[int, str] = {}
    stacks: dict[int, str] = {}
    for index in sorted(range(len(profile)), key=profile.time.__getitem__):
        stack = profile.stack[index]
        text = stacks.get(stack)
        if text is None:
            parts = []
            for frame_id in profile.stacks[stack]:
                line = lines.get(frame_id)
                if line is None:
                    line = lines[frame_id] = frame_line(profile.frames[frame_id])
                parts.append(line)
            text = stacks[stack] = "".join(parts)
        yield sample_lines(profile, index, [text])


def write_script(profile: Profile, out: TextIO) -> None:
    """Write the profile as ``perf script --no-inline`` text, in batches."""
    batch: list[str] = []
    for piece in script_text(profile):
        batch.append(piece)
        if len(batch) >= 1024:
            out.write("".join(batch))
            batch.clear()
    out.write("".join(batch))


__all__ = ["frame_line", "sample_lines", "script_text", "write_script"]
