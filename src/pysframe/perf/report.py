"""A profile as text: perf report's table, folded stacks, and a JSON document.

* :func:`write_top`: the table of ``perf report --stdio --no-children --sort comm,dso,sym``
  (``children=True``: of ``perf report --children``), one section per event;
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

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TextIO

import numpy as np

from ..names import escape_controls
from .aggregate import FlatStacks, Groups, column, group, innermost_real_frames
from .profile import UNKNOWN, FrameInfo, Profile

# -- the top table -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    """What tells one row of perf's table from another besides the command (a hist_entry's
    map and symbol, tools/perf/util/sort.c sort__dso_cmp and sort__sym_cmp): the module, and
    the symbol by its start address, or the address itself when there is no symbol."""

    module: str
    symbol: str | None
    address: int
    kernel: bool
    inlined: bool


def _entry(frame: FrameInfo) -> _Entry:
    # perf names the address of an unresolved user frame in its module (al->addr, which
    # map__map_ip made), a kernel one as it is.
    address = frame.address if frame.kernel or frame.module_address is None else (
        frame.module_address
    )
    if frame.symbol is not None:
        address -= frame.offset
    return _Entry(frame.module, frame.symbol, address, frame.kernel, frame.inlined)


def _own_entry(frame: FrameInfo) -> _Entry:
    """The entry of the sample whose innermost frame is ``frame``: the frame's, or for an
    inline entry, the symbol holding it (perf's self entry names the sample's IP's symbol,
    util/hist.c iter_add_single_cumulative_entry)."""
    if frame.inlined and frame.base_symbol is not None:
        return replace(_entry(frame), symbol=frame.base_symbol, inlined=False)
    return _entry(frame)


#: The row of a sample that has no frame at all.
_NO_FRAME = _Entry(UNKNOWN, None, 0, False, False)


def module_short_name(module: str) -> str:
    """perf's short name of a module (``dso->short_name``): a file's base name;
    ``[kernel.kallsyms]``, ``[vdso]``, ``[unknown]`` as they are."""
    if module.startswith("["):
        return module
    return os.path.basename(module) or module


def _symbol_text(entry: _Entry) -> str:
    # sort.c _hist_entry__sym_snprintf: "[level] name", " (inlined)" after an inlined
    # function's name, "%-#.*llx" (16 digits) of the address when there is no symbol.
    level = "k" if entry.kernel else "."
    if entry.symbol is None:
        return f"[{level}] {entry.address:#018x}"
    return f"[{level}] {entry.symbol}" + (" (inlined)" if entry.inlined else "")


@dataclass(frozen=True, slots=True)
class TopRow:
    """One row of the table: ``samples`` and ``period`` of the samples whose own frame (the
    innermost one that is not an inlined function) it is; ``total_*`` of the samples with it
    anywhere on their stack (counted once per sample), perf's "Children"."""

    comm: str
    module: str
    symbol: str | None
    address: int
    kernel: bool
    inlined: bool
    samples: int
    period: int
    total_samples: int
    total_period: int
    #: The Shared Object column: the module's short name (:func:`module_short_name`).
    dso: str
    #: The Symbol column: ``[.] name``, ``[k] name``, ``[.] 0x00000000000012ab``.
    symbol_text: str


@dataclass(frozen=True, slots=True)
class TopSection:
    """The table of one event: its samples and their summed period (the 100%), its rows in
    perf's order."""

    event: str
    unit: str
    samples: int
    period: int
    rows: list[TopRow]


def top_table(profile: Profile, *, children: bool = False) -> list[TopSection]:
    """The rows of perf report's table, per event in the profile's order.

    Rows are per (command, module, symbol), with no symbol per address.  Without
    ``children`` only the rows of samples' own frames; with it, also those of the frames
    that are only callers (self 0).  Sorted as perf sorts them (hists__output_resort with the
    keys of --sort comm,dso,sym behind the overhead columns): by total period with
    ``children``, then by period, both descending; then by command, module short name (no
    module last) and symbol name (no symbol last), ascending; then by address.
    """
    entry_ids: dict[_Entry, int] = {}
    frame_entry = np.fromiter(
        (entry_ids.setdefault(_entry(frame), len(entry_ids)) for frame in profile.frames),
        dtype=np.int64, count=len(profile.frames),
    )  # fmt: skip
    # A sample's own entry is its IP's symbol, also where an inline entry stands first.
    self_entry = np.fromiter(
        (entry_ids.setdefault(_own_entry(frame), len(entry_ids)) for frame in profile.frames),
        dtype=np.int64, count=len(profile.frames),
    )  # fmt: skip
    no_frame = entry_ids.setdefault(_NO_FRAME, len(entry_ids))
    entries = list(entry_ids)
    dsos = [module_short_name(entry.module) for entry in entries]
    symbol_texts = [_symbol_text(entry) for entry in entries]
    flat = FlatStacks.of(profile)
    own = innermost_real_frames(profile, flat)
    own_entry = np.where(own >= 0, self_entry[np.maximum(own, 0)], no_frame)
    stack, comm, event = (column(profile, name) for name in ("stack", "comm", "event"))
    period = column(profile, "period")
    selfs = group([event, comm, own_entry[stack]], period)
    totals = _children(flat, frame_entry, own_entry, (stack, comm, event, period)) if children \
        else None  # fmt: skip

    sections = []
    for event_id, (name, unit) in enumerate(profile.events):
        in_event = event == event_id
        rows: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        for groups, at in ((selfs, 0),) + (((totals, 2),) if totals is not None else ()):
            chosen = np.flatnonzero(groups.keys[0] == event_id)
            for comm_id, entry_id, samples, summed in zip(
                groups.keys[1][chosen].tolist(), groups.keys[2][chosen].tolist(),
                groups.count[chosen].tolist(), groups.period[chosen].tolist(), strict=True,
            ):  # fmt: skip
                row = list(rows.get((comm_id, entry_id), (0, 0, 0, 0)))
                row[at], row[at + 1] = samples, summed
                rows[comm_id, entry_id] = (row[0], row[1], row[2], row[3])
        table = [
            TopRow(
                profile.comms[comm_id], entries[entry_id].module, entries[entry_id].symbol,
                entries[entry_id].address, entries[entry_id].kernel, entries[entry_id].inlined,
                *values, dsos[entry_id], symbol_texts[entry_id],
            )
            for (comm_id, entry_id), values in rows.items()
        ]
        table.sort(key=_perf_order)
        sections.append(
            TopSection(name, unit, int(in_event.sum()), int(period[in_event].sum()), table)
        )
    return sections


def _children(
    flat: FlatStacks,
    frame_entry: np.ndarray,
    own_entry: np.ndarray,
    samples: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> Groups:
    """Per (event, command, entry): the samples with the entry anywhere on their stack, each
    counted once (perf's he_cache in hist_entry_iter__add for cumulative entries)."""
    stack, comm, event, period = samples
    stacks = group([event, comm, stack], period)
    owner, _, frames = flat.expand(stacks.keys[2])
    # Every entry of each (event, command, stack), its own entry included (a stack without
    # any frame has only that), each once.
    owners = np.concatenate([owner, np.arange(len(stacks), dtype=np.int64)])
    entry = np.concatenate([frame_entry[frames], own_entry[stacks.keys[2]]])
    pairs = group([owners, entry], np.zeros(len(owners), dtype=np.int64))
    holder, entry = pairs.keys
    return group(
        [stacks.keys[0][holder], stacks.keys[1][holder], entry],
        stacks.period[holder],
        stacks.count[holder],
    )


def _perf_order(row: TopRow) -> tuple[object, ...]:
    return (
        -row.total_period, -row.period, row.comm,
        row.module == UNKNOWN, row.dso, row.symbol is None, row.symbol or "", row.address,
    )  # fmt: skip


def _convert_unit(value: int) -> tuple[int, str]:
    """perf's convert_unit (tools/perf/util/util.c): thousands while over a thousand."""
    unit = " "
    for letter in "KMG":
        if value > 1000:
            value //= 1000
            unit = letter
    return value, unit


def write_top(profile: Profile, out: TextIO, *, children: bool = False) -> None:
    """Write the table of ``perf report --stdio --no-children --sort comm,dso,sym -g none``
    (with ``children``: ``--children``, a Children column of the total before Self).

    As perf lays it out (builtin-report.c hists__fprintf_nr_sample_events and
    ui/stdio/hist.c hists__fprintf): a ``#`` header with the lost samples, then per event
    ``# Samples: 16K of event 'cpu-clock'``, ``# Event count (approx.): N``, the column
    headers and dots, and the rows: percentages of the event's summed period (``%.2f%%``),
    the command, the module's short name, ``[.]``/``[k]`` and the symbol.  Column widths are
    perf's (hists__calc_col_len): the longest value or header, 22 for the symbol and 16 for
    the module when a row has no symbol; but commands are written whole, where perf cuts them
    to the longest name its threads had when it measured them (thread__comm_len).
    """
    out.write(f"#\n# Total Lost Samples: {profile.lost_samples}\n#\n")
    for section in top_table(profile, children=children):
        out.writelines(_section_lines(section, children))


def _section_lines(section: TopSection, children: bool) -> Iterator[str]:
    count, unit = _convert_unit(section.samples)
    yield f"# Samples: {count}{unit} of event '{escape_controls(section.event)}'\n"
    yield f"# Event count (approx.): {section.period}\n#\n"
    rows = section.rows
    # Names with their control characters escaped, as perf script's text has them, so that
    # each row stays one line.
    comms = [escape_controls(row.comm) for row in rows]
    dsos = [escape_controls(row.dso) for row in rows]
    comm_width = max([len("Command"), *map(len, comms)])
    known = [len(dso) for row, dso in zip(rows, dsos, strict=True) if row.module != UNKNOWN]
    dso_width = max([len("Shared Object"), *known])
    symbol_width = max([
        len("Symbol"), *(len(escape_controls(row.symbol)) + 4 for row in rows if row.symbol)
    ])  # fmt: skip
    if any(row.symbol is None for row in rows):
        dso_width, symbol_width = max(dso_width, 16), max(symbol_width, 22)
    percents = ["Children", "Self"] if children else ["Overhead"]
    headers = [f"{name:>8}" if at else f"{name:<8}" for at, name in enumerate(percents)]
    widths = [8] * len(percents) + [comm_width, dso_width, symbol_width]
    names = [*headers, f"{'Command':<{comm_width}}", f"{'Shared Object':<{dso_width}}"]
    yield "# " + "  ".join([*names, f"{'Symbol':<{symbol_width}}"]) + "\n"
    yield "# " + "  ".join("." * width for width in widths) + "\n#\n"
    total = section.period
    for row, comm, dso in zip(rows, comms, dsos, strict=True):
        shares = [row.total_period, row.period] if children else [row.period]
        cells = [f"{100.0 * share / total if total else 0.0:7.2f}%" for share in shares]
        symbol = escape_controls(row.symbol_text)
        yield "  " + "  ".join(
            [*cells, f"{comm:<{comm_width}}", f"{dso:<{dso_width}}", symbol]
        ) + "\n"
    yield "\n\n"


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
    events = column(profile, "event")
    chosen = np.flatnonzero(events == event_id)
    keys = [column(profile, "comm")[chosen]]
    if options.pid or options.tid:
        keys.append(column(profile, "pid")[chosen])
    if options.tid:
        keys.append(column(profile, "tid")[chosen])
    keys.append(column(profile, "stack")[chosen])
    groups = group(keys, np.zeros(len(chosen), dtype=np.int64))
    # Each frame's name once (a process named "java" has its own, made when first needed),
    # then each stack's text once: a join of the names, outermost first.
    names: dict[bool, list[str | None]] = {}
    stack_texts: dict[tuple[int, bool], str] = {}

    def stack_text(stack: int, java: bool) -> str:
        text = stack_texts.get((stack, java))
        if text is None:
            known = names.get(java)
            if known is None:
                known = names[java] = [fold_frame(f, options, java) for f in profile.frames]
            parts = list(map(known.__getitem__, profile.stacks[stack][::-1]))
            if None in parts:
                parts = [part for part in parts if part is not None]
            text = stack_texts[stack, java] = ";".join(parts)  # type: ignore[arg-type]
        return text

    folded: dict[str, int] = {}
    for values in zip(*(key.tolist() for key in groups.keys), groups.count.tolist(), strict=True):
        comm, stack, count = _folded_name(profile.comms[values[0]]), values[-2], values[-1]
        process = comm
        if options.tid:
            process = f"{comm}-{values[1]}/{values[2]}"
        elif options.pid:
            process = f"{comm}-{values[1]}"
        process = process.replace(" ", "_")
        text = stack_text(stack, process == "java")
        line = f"{process};{text}" if text else process
        folded[line] = folded.get(line, 0) + count
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
    folded = folded_stacks(profile, options, event)
    out.writelines(f"{line} {folded[line]}\n" for line in sorted(folded))


# -- JSON --------------------------------------------------------------------------------------

#: The ``format`` of :func:`write_json`'s document, and its version.
JSON_FORMAT = "pysframe-profile"
JSON_VERSION = 1


def profile_document(profile: Profile) -> dict[str, object]:
    """The document :func:`write_json` writes, as Python objects."""
    keys = [column(profile, name) for name in ("event", "comm", "pid", "tid", "stack")]
    groups = group(keys, column(profile, "period"))
    times = column(profile, "time")
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
    "TopRow",
    "TopSection",
    "fold_frame",
    "folded_stacks",
    "module_short_name",
    "profile_document",
    "top_table",
    "write_folded",
    "write_json",
    "write_top",
]
