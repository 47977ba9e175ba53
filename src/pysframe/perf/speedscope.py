"""A profile in speedscope's file format (https://www.speedscope.app/file-format-schema.json).

The format is speedscope's src/lib/file-format-spec.ts: ``shared.frames`` (``{name, file,
line}``) and a list of profiles; these are "sampled" ones (``samples``: stacks of frame
indices, outermost first; ``weights``: one per stack).

One profile per thread, named as speedscope names the threads of a ``perf script`` import
(src/import/linux-tools-perf.ts): ``COMMAND pid: PID tid: TID``, in the order of their first
sample (a thread whose command changes, by exec, gives one profile per command); with several
events, one per thread and event, the event's name after it.  Each profile's samples are in
time order, consecutive samples of the same stack merged into one with their summed weight
(what speedscope's time-order view draws the same way); weights are the samples' periods, in
``nanoseconds`` for the software clocks (cpu-clock, task-clock), else unitless (``none``).
The profile opened first (``activeProfileIndex``) is the heaviest.
"""

from __future__ import annotations

import json
from typing import TextIO

import numpy as np

from .. import __version__
from .profile import FrameInfo, Profile

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def _frame_key(frame: FrameInfo) -> tuple[str, str, int | None]:
    """A speedscope frame: the function's name, its source file (else its module) and line;
    frames of the same function at different addresses share it."""
    return frame.name, frame.file if frame.file is not None else frame.module, frame.line


def write_speedscope(profile: Profile, out: TextIO) -> None:
    """Write ``profile`` as a speedscope JSON file (see the module's docstring)."""
    out.write(_speedscope_text(profile))


def _speedscope_text(profile: Profile) -> str:
    frame_ids: dict[tuple[str, str, int | None], int] = {}
    speedscope_frame = [frame_ids.setdefault(_frame_key(f), len(frame_ids)) for f in profile.frames]
    frames = [
        {"name": name, "file": file} | ({"line": line} if line is not None else {})
        for name, file, line in frame_ids
    ]
    frame_texts = [str(index) for index in speedscope_frame]
    stack_texts: dict[int, str] = {}

    def stack_text(stack: int) -> str:
        text = stack_texts.get(stack)
        if text is None:
            ids = [frame_texts[frame] for frame in profile.stacks[stack][::-1]]
            text = stack_texts[stack] = "[" + ",".join(ids) + "]"
        return text

    keys = [profile.column(name) for name in ("event", "pid", "tid", "comm")]
    stack, period, time = (profile.column(name) for name in ("stack", "period", "time"))
    profiles: list[tuple[int, str, int]] = []  # (first sample, text, total weight)
    several_events = len(profile.events) > 1
    if len(profile):
        order = np.lexsort((np.arange(len(profile)), time, *reversed(keys)))
        ordered_keys = [key[order] for key in keys]
        new_profile = np.zeros(len(order), dtype=bool)
        new_profile[0] = True
        for key in ordered_keys:
            new_profile[1:] |= key[1:] != key[:-1]
        ordered_stack = stack[order]
        new_run = new_profile.copy()
        new_run[1:] |= ordered_stack[1:] != ordered_stack[:-1]
        run_starts = np.flatnonzero(new_run)
        run_weights = np.add.reduceat(period[order], run_starts)
        run_profile = np.cumsum(new_profile)[run_starts] - 1
        profile_starts = np.flatnonzero(new_profile)
        bounds = np.searchsorted(run_profile, np.arange(len(profile_starts) + 1))
        for index, start in enumerate(profile_starts.tolist()):
            event, pid, tid, comm = (int(key[start]) for key in ordered_keys)
            runs = slice(int(bounds[index]), int(bounds[index + 1]))
            weights = run_weights[runs]
            name = f"{profile.comms[comm]} pid: {pid} tid: {tid}"
            event_name, unit = profile.events[event]
            if several_events:
                name += f" [{event_name}]"
            total = int(weights.sum())
            stacks = ",".join(map(stack_text, ordered_stack[run_starts[runs]].tolist()))
            text = (
                '{"type":"sampled","name":' + json.dumps(name)
                + ',"unit":' + json.dumps("nanoseconds" if unit == "nanoseconds" else "none")
                + ',"startValue":0,"endValue":' + str(total)
                + ',"samples":[' + stacks
                + '],"weights":[' + ",".join(map(str, weights.tolist())) + "]}"
            )  # fmt: skip
            profiles.append((int(order[start]), text, total))
    profiles.sort(key=lambda entry: entry[0])
    heaviest = max(range(len(profiles)), key=lambda at: profiles[at][2], default=0)
    head = {
        "$schema": SCHEMA,
        "name": ", ".join(profile.sources) or "profile",
        "activeProfileIndex": heaviest,
        "exporter": f"pysframe {__version__}",
        "shared": {"frames": frames},
    }
    return (
        json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1]
        + ',"profiles":[' + ",".join(text for _, text, _ in profiles) + "]}\n"
    )  # fmt: skip


__all__ = ["SCHEMA", "write_speedscope"]
