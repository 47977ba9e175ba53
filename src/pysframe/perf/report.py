"""A profile as text: perf report's table, folded stacks, and a JSON document.

* :func:`write_top`: the table of ``perf report --stdio`` (:mod:`pysframe.perf.top`, whose
  names this module gives too), one section per event;
* :func:`write_folded`: what Brendan Gregg's ``stackcollapse-perf.pl`` writes from
  ``perf script``, the input of ``flamegraph.pl`` and of most flame graph tools;
* :func:`write_json`: the profile as one JSON document (:data:`JSON_FORMAT`, described in
  :func:`write_json`).

The other writers have modules of their own: :mod:`pysframe.perf.speedscope`,
:mod:`pysframe.perf.pprof`, :mod:`pysframe.perf.flamegraph`.  Every writer aggregates with
numpy over the sample columns and works in Python once per distinct stack, never per sample
(:mod:`pysframe.perf.aggregate`).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Sequence
from operator import itemgetter
from typing import TextIO

import numpy as np

from ..dataclass import dataclass
from ..names import escape_controls
from .aggregate import group
from .profile import UNKNOWN, FrameInfo, Profile
from .top import (
    TopOptions,
    TopRow,
    TopSection,
    module_short_name,
    parse_sort,
    perf_defaults,
    top_table,
    write_top,
)

# -- folded stacks -----------------------------------------------------------------------------

#: stackcollapse-perf.pl's test for a module it annotates with _[k]: "[...]" or "...vmlinux",
#: never one that says "unknown"; and for _[j]: a perf map or a jitdump library.
_KERNEL_MODULE = re.compile(r"^\[|vmlinux$")
_JIT_MODULE = re.compile(r"/tmp/perf-\d+\.map|/jitted-\d+-\d+\.so")
#: Its test for a Go method name ("net/http.(*Client).Do"), whose parentheses stay.
_GO_METHOD = re.compile(r"\.\(.*\)\.")
#: What any of its rules for names looks for: a parenthesis, a separator, a quote, "->".
_TIDIED = re.compile(r"[(;\"']|->")
#: What it removes from other names: from the first "(" that does not open
#: "(anonymous namespace)".
_ARGUMENTS = re.compile(r"\((?!anonymous namespace\)).*")


@dataclass(frozen=True, slots=True)
class FoldOptions:
    """stackcollapse-perf.pl's options: ``--pid`` (``comm-PID``), ``--tid``
    (``comm-PID/TID``), ``--kernel`` (``_[k]`` after kernel functions), ``--jit`` (``_[j]``
    after JIT functions), ``--addrs`` (``[module <address>]`` for unnamed frames)."""

    pid: bool = False
    tid: bool = False
    annotate_kernel: bool = False
    annotate_jit: bool = False
    addresses: bool = False


def _perl_split(text: str, separator: str) -> list[str]:
    # Perl's split drops trailing empty fields.
    pieces = text.split(separator)
    while pieces and pieces[-1] == "":
        pieces.pop()
    return pieces


def _folded_name(name: str) -> str:
    """``name`` made one element of a folded line, the process name and every frame's alike:
    its control characters and line separators escaped as perf script's text has them
    (:func:`pysframe.names.escape_controls`), ``;`` (the separator) made ``:``, and
    ``[unknown]`` for a name left empty, so that a line is always ``NAME;NAME;... COUNT``."""
    return escape_controls(name).replace(";", ":") or UNKNOWN


def fold_frame(frame: FrameInfo, options: FoldOptions, java: bool = False) -> str | None:
    """The folded name of one frame, as stackcollapse-perf.pl makes it of the line
    ``perf script`` prints for it (``ADDRESS NAME+0xOFF (MODULE)``, ``(inlined)`` as the module
    of an inlined function); None when the script skips the frame.  ``java``: the process
    name is exactly ``java`` (the script then drops a leading ``L`` of names with a ``/``).

    One frame can give several names (a name with ``->`` in it is split there, the pieces
    after the first annotated ``_[i]``): they are joined with ``;``, outermost first.  Each is
    made one element of the line (:func:`_folded_name`) before its annotation.
    """
    raw = escape_controls(frame.name)  # the name as perf script's text has it
    if raw.startswith("("):
        return None
    module = "inlined" if frame.inlined else frame.module
    if not _TIDIED.search(raw) and not java and not (
        options.annotate_kernel or options.annotate_jit or raw == UNKNOWN
    ):
        return _folded_name(raw)  # nothing of the rules below applies
    names = []
    for index, piece in enumerate(_perl_split(raw, "->") or [""]):
        name = piece
        if name == UNKNOWN:
            known = os.path.basename(module) if module != UNKNOWN else "unknown"
            name = f"[{known} <{_script_address(frame):x}>]" if options.addresses else (
                f"[{known}]"
            )
        if not _GO_METHOD.search(name):
            name = _ARGUMENTS.sub("", name, count=1)
        name = name.replace('"', "").replace("'", "")
        if java and "/" in name and name.startswith("L"):
            name = name[1:]
        name = _folded_name(name)
        if index > 0:
            name += "_[i]"
        elif options.annotate_kernel and _KERNEL_MODULE.search(module) and "unknown" not in module:
            name += "_[k]"
        elif options.annotate_jit and _JIT_MODULE.search(module):
            name += "_[j]"
        names.append(name)
    return ";".join(names)


def _script_address(frame: FrameInfo) -> int:
    # perf script prints a user frame's address in its module (sample__fprintf_callchain:
    # "Show binary offset for userspace addr"), a kernel one as it is.
    if frame.kernel or frame.module_address is None:
        return frame.address
    return frame.module_address


def folded_stacks(
    profile: Profile, options: FoldOptions = FoldOptions(), event: str | None = None
) -> dict[str, int]:
    """The folded stacks of the samples of ``event`` (by default, as the script does, the
    event of the first sample): ``comm;outermost;...;innermost`` → number of samples.
    Stacks that fold to the same text add up."""
    if not len(profile):
        return {}
    event_id = profile.event[0] if event is None else _event_index(profile, event)
    # the samples of the event (every sample, where the recording has no other event)
    chosen = None if len(profile.events) == 1 and event_id == 0 else (
        np.flatnonzero(profile.column("event") == event_id)
    )  # fmt: skip
    names = ["comm", *(["pid"] if options.pid or options.tid else []),
             *(["tid"] if options.tid else []), "stack"]  # fmt: skip
    keys = [profile.column(name) if chosen is None else profile.column(name)[chosen]
            for name in names]  # fmt: skip
    groups = group(keys, np.zeros(len(keys[0]), dtype=np.int64))
    if not len(groups):  # no sample of the event
        return {}
    # Each frame's name, ";" before it (:func:`_folded_frames`; a process named "java" has
    # its own, made when first needed); then each stack's text once (None: not made yet),
    # its names outermost first, taken by one itemgetter call.
    frame_names: dict[bool, list[str]] = {}
    texts: dict[bool, list[str | None]] = {}
    # The groups are in the order of their keys, the process's first: a run of groups for
    # each process, its name made once.
    runs = np.zeros(len(groups), dtype=bool)
    runs[0] = True
    for key in groups.keys[:-1]:
        runs[1:] |= key[1:] != key[:-1]
    starts = [*np.flatnonzero(runs).tolist(), len(groups)]
    columns = [key.tolist() for key in groups.keys]
    stacks, counts = columns.pop(), groups.count.tolist()
    folded: dict[str, int] = {}
    for start, stop in itertools.pairwise(starts):
        comm = _folded_name(profile.comms[columns[0][start]])
        if options.tid:
            process = f"{comm}-{columns[1][start]}/{columns[2][start]}"
        elif options.pid:
            process = f"{comm}-{columns[1][start]}"
        else:
            process = comm
        process = process.replace(" ", "_")
        java = process == "java"
        known = frame_names.get(java)
        if known is None:
            known = frame_names[java] = _folded_frames(profile.frames, options, java)
            texts[java] = [None] * len(profile.stacks)
        made, blank = texts[java], len(known) - 1
        for stack, count in zip(stacks[start:stop], counts[start:stop], strict=True):
            text = made[stack]
            if text is None:
                text = made[stack] = "".join(
                    itemgetter(*profile.stacks[stack][::-1], blank)(known)
                )
            line = process + text
            folded[line] = folded.get(line, 0) + count
    return folded


def _folded_frames(frames: Sequence[FrameInfo], options: FoldOptions, java: bool) -> list[str]:
    """Each frame's folded name (:func:`fold_frame`) with the ";" before it, "" for a frame
    the script skips, then "" (a stack's names end with it): each name once per module (and
    per address, where the script shows unnamed frames' addresses)."""
    names: dict[tuple[str, bool, str, int], str] = {}
    folded = []
    for frame in frames:
        name = frame.name
        address = _script_address(frame) if options.addresses and UNKNOWN in name else 0
        key = (name, frame.inlined, frame.module, address)
        text = names.get(key)
        if text is None:
            found = fold_frame(frame, options, java)
            text = names[key] = "" if found is None else ";" + found
        folded.append(text)
    folded.append("")
    return folded


def _event_index(profile: Profile, event: str) -> int:
    for index, (name, _) in enumerate(profile.events):
        if name == event:
            return index
    return -1


def write_folded(
    profile: Profile, out: TextIO, options: FoldOptions = FoldOptions(), event: str | None = None
) -> None:
    """Write :func:`folded_stacks` as stackcollapse-perf.pl does: ``STACK COUNT`` lines, sorted
    by the stack's text.

    The rules are the script's (FlameGraph's stackcollapse-perf.pl): the process name first
    (spaces made ``_``), then one name per frame, outermost first: the function's name with
    everything from its first ``(`` removed (unless it looks like a Go method or the ``(`` opens
    ``(anonymous namespace)``), ``;`` made ``:``, quotes dropped; ``[MODULE]`` (its base name)
    for a frame without a symbol, ``[unknown]`` without a module either; inlined functions as
    frames of their own (``perf script --inline`` prints them on lines of their own).  Counts
    are numbers of samples, not periods, of one event only.  Whatever the names hold, every
    line is ``NAME;NAME;... COUNT`` (:func:`_folded_name`, for the process name as for the
    frames': control characters escaped, ``;`` made ``:``, an empty name ``[unknown]``), where
    the script would split a process name with a ``;`` or a newline over two lines.
    """
    write_folded_stacks(folded_stacks(profile, options, event), out)


def write_folded_stacks(folded: dict[str, int], out: TextIO) -> None:
    """Write folded stacks (:func:`folded_stacks`, :func:`joined_folded`) as
    :func:`write_folded` does."""
    out.writelines(f"{line} {folded[line]}\n" for line in sorted(folded))


#: The folded stacks of a time slice of a recording (:func:`folded_slice`): the event of its
#: first sample (name, unit; None: no sample) and its folded stacks of that event.
FoldedSlice = tuple[tuple[str, str] | None, dict[str, int]]


def folded_slice(profile: Profile) -> FoldedSlice:
    """:func:`folded_stacks` of ``profile``, the profile of a time slice of a recording, and
    the event they are of."""
    event = profile.events[profile.event[0]] if len(profile) else None
    return event, folded_stacks(profile)


def joined_folded(slices: Sequence[FoldedSlice | None]) -> dict[str, int] | None:
    """The folded stacks of a recording from those of its time slices, in order (None: one
    that could not be made): their sums, where the slices with samples have the same event
    first (that of the recording's first sample, the one counted); else None (the whole
    profile's are then made)."""
    if not slices or any(piece is None for piece in slices):
        return None
    chosen = [piece for piece in slices if piece is not None]
    if len({event for event, _folded in chosen if event is not None}) > 1:
        return None
    total: dict[str, int] = {}
    for _event, folded in chosen:
        for line, count in folded.items():
            total[line] = total.get(line, 0) + count
    return total


# -- JSON --------------------------------------------------------------------------------------

#: The ``format`` of :func:`write_json`'s document, and its version.
JSON_FORMAT = "pysframe-profile"
JSON_VERSION = 1


def profile_document(profile: Profile) -> dict[str, object]:
    """The document :func:`write_json` writes, as Python objects."""
    keys = [profile.column(name) for name in ("event", "comm", "pid", "tid", "stack")]
    groups = group(keys, profile.column("period"))
    times = profile.column("time")
    names = ("event", "comm", "pid", "tid", "stack")
    samples: dict[str, list[int]] = {
        name: key.tolist() for name, key in zip(names, groups.keys, strict=True)
    }
    samples["count"] = groups.count.tolist()
    samples["period"] = groups.period.tolist()
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "sources": list(profile.sources),
        "events": [{"name": name, "unit": unit} for name, unit in profile.events],
        "comms": list(profile.comms),
        "build_ids": dict(sorted(profile.build_ids.items())),
        "lost_samples": profile.lost_samples,
        "sample_count": len(profile),
        "time_range": [int(times.min()), int(times.max())] if len(times) else None,
        "frames": [_frame_document(frame) for frame in profile.frames],
        "stacks": [list(stack) for stack in profile.stacks],
        "samples": samples,
    }


def _frame_document(frame: FrameInfo) -> dict[str, object]:
    document: dict[str, object] = {
        "address": frame.address,
        "module": frame.module,
        "symbol": frame.symbol,
        "offset": frame.offset,
    }
    if frame.module_address is not None:
        document["module_address"] = frame.module_address
    document["kernel"] = frame.kernel
    document["inlined"] = frame.inlined
    if frame.file is not None:
        document["file"] = frame.file
    if frame.line is not None:
        document["line"] = frame.line
    return document


def write_json(profile: Profile, out: TextIO) -> None:
    """Write the profile as one JSON document (UTF-8, compact, one line):

    ``format`` (``"pysframe-profile"``) and ``version`` (1); ``sources`` (the recordings);
    ``events`` (``{"name", "unit"}``: ``nanoseconds`` for the software clocks, else
    ``events``); ``comms`` (command names); ``build_ids`` (module → hex); ``lost_samples``;
    ``sample_count``; ``time_range`` ([first, last] sample time in ns, null when empty);
    ``frames`` (``{"address", "module", "symbol" (null: none), "offset", "module_address"
    (when known), "kernel", "inlined", "file", "line" (when known)}``); ``stacks`` (lists of
    frame indices, innermost first); ``samples``: the samples aggregated by (event, comm,
    pid, tid, stack), as columns of equal length: ``{"event", "comm", "pid", "tid", "stack",
    "count", "period"}``, ``event``, ``comm`` and ``stack`` indices into ``events``, ``comms``
    and ``stacks``, ``count`` samples and their summed ``period`` (in the event's unit); rows
    sorted by (event, comm, pid, tid, stack).
    """
    out.write(json.dumps(profile_document(profile), separators=(",", ":"), ensure_ascii=False))
    out.write("\n")


__all__ = [
    "JSON_FORMAT",
    "JSON_VERSION",
    "FoldOptions",
    "FoldedSlice",
    "TopOptions",
    "TopRow",
    "TopSection",
    "fold_frame",
    "folded_slice",
    "folded_stacks",
    "joined_folded",
    "module_short_name",
    "parse_sort",
    "perf_defaults",
    "profile_document",
    "top_table",
    "write_folded",
    "write_folded_stacks",
    "write_json",
    "write_top",
]
