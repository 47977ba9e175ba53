"""A profile as ``perf script`` prints it, so that what reads perf's text (FlameGraph's
stackcollapse-perf.pl, speedscope, the Firefox Profiler) reads this too.

Each sample, in time order as perf orders them (stable for equal times): a header line with
the fields perf prints by default for a sampling event with callchains (builtin-script.c
perf_sample__fprintf_start: the command name, the thread id as ``%5d``, the time in seconds
with microseconds as ``%12s``, the period as ``%10lu``, the event name), then one line per
frame, innermost first (``\\t%16lx SYMBOL+0xOFFSET (MODULE)``, ``[unknown]`` without a name;
an inline entry, perf's default, says ``(inlined)`` instead of its module), then an empty
line.  Deferred user callchains (Linux 6.19, deferred.py): a merged sample is printed when
perf delivers it, once its chain came; an unmerged one shows its cookie as perf does
(``(cookie)``), and ``--no-merge-callchain`` prints each CALLCHAIN_DEFERRED record apart.

One difference from perf, on purpose: control characters and line separators in a command,
function, module or event name are escaped (``\\x0a`` for a newline:
:func:`pysframe.names.escape_controls`), so that every sample stays one header line and its
frame lines; perf prints them as they are, and a newline in a name breaks its text into lines
no reader can parse.  Other names are printed as perf prints them, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from ..names import escape_controls
from .profile import UNKNOWN, DeferredChain, FrameInfo, Profile

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def frame_line(frame: FrameInfo, srcline: bool = False) -> str:
    """One frame as perf script prints it (with a tab before, a newline after); an inline
    entry says ``(inlined)`` where the module stands.  ``srcline`` (``-F +srcline``): the
    frame's source line on a line of its own, two spaces in, before ``(inlined)``
    (util/evsel_fprintf.c sample__fprintf_callchain)."""
    name = UNKNOWN if frame.symbol is None else f"{escape_controls(frame.symbol)}+{frame.offset:#x}"
    if frame.cookie:
        name = "(cookie)"
    text = f"\t{frame.address:16x} {name}"
    text += "" if frame.inlined else f" ({escape_controls(frame.module)})"
    if srcline and frame.file is not None:
        line = "" if frame.line is None else f":{frame.line}"
        text += f"\n  {escape_controls(frame.file)}{line}"
    return text + (" (inlined)\n" if frame.inlined else "\n")


def sample_lines(profile: Profile, index: int, frames: list[str]) -> str:
    """Sample ``index`` as perf script prints it (``frames``: its frames' lines)."""
    time = profile.time[index]
    stamp = f"{time // 1_000_000_000}.{time % 1_000_000_000 // 1000:06d}"
    event = escape_controls(profile.events[profile.event[index]][0])
    comm = escape_controls(profile.comms[profile.comm[index]])
    header = f"{comm} {profile.tid[index]:5d} {stamp:>12}: {profile.period[index]:10d} {event}: \n"
    return header + "".join(frames) + "\n"


def deferred_lines(profile: Profile, chain: DeferredChain, frames: list[str]) -> str:
    """A deferred user callchain as ``perf script --no-merge-callchain`` prints a
    CALLCHAIN_DEFERRED record (builtin-script.c process_deferred_sample_event, Linux 6.19):
    the command, thread and time as a sample's header has them, ``DEFERRED CALLCHAIN
    [cookie: HEX]``, then its frames (``frames``: their lines) and an empty line."""
    stamp = f"{chain.time // 1_000_000_000}.{chain.time % 1_000_000_000 // 1000:06d}"
    comm = escape_controls(profile.comms[chain.comm])
    header = f"{comm} {chain.tid:5d} {stamp:>12}: DEFERRED CALLCHAIN [cookie: {chain.cookie:x}]\n"
    return header + "".join(frames) + "\n"


def script_text(profile: Profile, batch: int = 4096, *, srcline: bool = False) -> Iterator[str]:
    """The text of every sample, in time order (a sample whose deferred user callchain came
    later where perf prints it, when it came), ``batch`` samples at a time: each frame and
    each distinct stack is formatted once, each header from a template per (command, event)
    (the same text as :func:`sample_lines`: ``%5d.%06d`` is ``%12s`` of the time stamp).
    ``srcline``: with each frame's source line (:func:`frame_line`)."""
    import numpy as np

    frame_text = [frame_line(frame, srcline) for frame in profile.frames]
    stacks: dict[int, str] = {}
    templates: dict[int, str] = {}
    kinds = len(profile.events) or 1

    def stack_text(stack: int) -> str:
        text = stacks.get(stack)
        if text is None:
            text = stacks[stack] = "".join([frame_text[f] for f in profile.stacks[stack]]) + "\n"
        return text

    def template(key: int) -> str:
        found = templates.get(key)
        if found is None:
            name = escape_controls(profile.comms[key // kinds]).replace("%", "%%")
            event = escape_controls(profile.events[key % kinds][0]).replace("%", "%%")
            found = templates[key] = f"{name} %5d %5d.%06d: %10d {event}: \n"
        return found

    times = np.array(profile.time, dtype=np.uint64)
    keys = np.array(profile.comm, dtype=np.int64) * kinds + np.array(profile.event, np.int64)
    columns = (keys, np.array(profile.tid, np.int64), times // np.uint64(10**9),
               times % np.uint64(10**9) // np.uint64(1000),
               np.array(profile.period, np.uint64), np.array(profile.stack, np.int64))  # fmt: skip
    delivered = times.copy()  # perf prints a sample when it delivers it
    for index, time in profile.delivered.items():
        delivered[index] = time
    order = np.argsort(delivered, kind="stable")
    if profile.deferred:  # records shown apart, each after the samples up to its time
        yield from _with_deferred(profile, order.tolist(), delivered, stack_text)
        return
    for start in range(0, len(order), batch):
        chosen = order[start : start + batch]
        key, tid, second, micro, period, stack = (column[chosen].tolist() for column in columns)
        yield "".join([
            template(k) % (t, s, u, p) + stack_text(x)
            for k, t, s, u, p, x in zip(key, tid, second, micro, period, stack, strict=True)
        ])  # fmt: skip


def _with_deferred(
    profile: Profile,
    order: list[int],
    times: npt.NDArray[np.uint64],
    stack_text: Callable[[int], str],
) -> Iterator[str]:
    """The samples in ``order`` (by the time perf delivers them, ``times``) with the
    deferred records shown apart among them, each after the samples of its time or before
    (perf delivers both by time, a record after the samples it follows in the file)."""
    chains = sorted(profile.deferred, key=lambda chain: chain.time)
    taken = 0
    for index in order:
        while taken < len(chains) and chains[taken].time < int(times[index]):
            yield deferred_lines(profile, chains[taken], [stack_text(chains[taken].stack)[:-1]])
            taken += 1
        yield sample_lines(profile, index, [stack_text(profile.stack[index])[:-1]])
    for chain in chains[taken:]:
        yield deferred_lines(profile, chain, [stack_text(chain.stack)[:-1]])


def write_script(profile: Profile, out: TextIO, *, srcline: bool = False) -> None:
    """Write the profile as ``perf script`` text (``srcline``: ``perf script -F +srcline``),
    in batches."""
    for piece in script_text(profile, srcline=srcline):
        out.write(piece)


__all__ = ["deferred_lines", "frame_line", "sample_lines", "script_text", "write_script"]
