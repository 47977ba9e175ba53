"""perf report's table, as ``perf report --stdio`` prints it: perf's hist entries by the sort
keys, with their children and call graphs (:mod:`pysframe.perf.callgraph`).

* :func:`top_table`: the rows (perf's hist entries, util/hist.c and sort.c) of each event, in
  perf's order, with their call graphs' trees;
* :func:`write_top`: their text (ui/stdio/hist.c hists__fprintf), with
  :class:`TopOptions`: perf report's ``--sort``, ``--children``, ``-g``, ``--percent-limit``;
  :func:`perf_defaults` gives a plain ``perf report --stdio``'s.

The writer works in Python once per distinct (event, command, stack) of the samples, in the
order of their first sample (perf's order: what a row shows is its first sample's), never per
sample.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import TextIO

import numpy as np

from ..dataclass import dataclass
from ..names import escape_controls
from .aggregate import FlatStacks, column, group, innermost_real_frames
from .callgraph import ChainNode, ChainOrder, GraphOptions, GraphPrinter, build_tree
from .profile import UNKNOWN, FrameInfo, Profile
from .symtab import rb_order

# -- the top table -----------------------------------------------------------------------------

#: The ``--sort`` keys of perf report that the table has, and the others perf knows (perf
#: 6.1, util/sort.c): a key names the first of these (in this order) it is a prefix of.
SORT_KEYS = ("pid", "comm", "dso", "symbol", "srcline")
PERF_SORT_KEYS = (
    "overhead", "overhead_sys", "overhead_us", "overhead_guest_sys", "overhead_guest_us",
    "overhead_children", "sample", "period", "pid", "comm", "dso", "symbol", "parent", "cpu",
    "socket", "srcline", "srcfile", "local_weight", "weight", "transaction", "trace",
    "symbol_size", "dso_size", "cgroup", "cgroup_id", "ipc_null", "time", "code_page_size",
    "local_ins_lat", "ins_lat", "local_p_stage_cyc", "p_stage_cyc", "addr", "dso_from",
    "dso_to", "symbol_from", "symbol_to", "mispredict", "abort", "in_tx", "cycles",
    "srcline_from", "srcline_to", "ipc_lbr", "addr_from", "addr_to", "symbol_daddr",
    "dso_daddr", "locked", "tlb", "mem", "snoop", "dcacheline", "symbol_iaddr", "phys_daddr",
    "data_page_size", "blocked",
)  # fmt: skip
#: perf report's default sort order.
DEFAULT_SORT = ("comm", "dso", "symbol")
#: Each key's column header (sort.c se_header).
_HEADERS = {
    "pid": "    Pid:Command", "comm": "Command", "dso": "Shared Object", "symbol": "Symbol",
    "srcline": "Source:Line", "ipc_null": "IPC   [IPC Coverage]",
}  # fmt: skip


class SortKeyError(ValueError):
    """A ``--sort`` key perf does not know (``known`` False), or one of perf's that the table
    does not have (``known`` True)."""

    def __init__(self, key: str, known: bool) -> None:
        super().__init__(key)
        self.key, self.known = key, known


def parse_sort(text: str) -> tuple[str, ...]:
    """perf report's ``--sort`` list (sort.c sort_dimension__add): keys separated by commas
    or spaces, each the first of perf's keys it is a prefix of (case ignored); SortKeyError
    for one that names no key, or a key the table does not have."""
    keys: list[str] = []
    for token in re.split(r"[, ]+", text.strip()):
        if not token:
            continue
        name = next((key for key in PERF_SORT_KEYS if key.startswith(token.lower())), None)
        if name is None:
            raise SortKeyError(token, False)
        if name not in SORT_KEYS:
            raise SortKeyError(name, True)
        if name not in keys:
            keys.append(name)
    if not keys:
        raise SortKeyError(text, False)
    # builtin-report.c: a sort order holding "symbol" (spelt whole) gets the ipc_null key,
    # an IPC column of dashes.
    if "symbol" in text:
        keys.append("ipc_null")
    return tuple(keys)


@dataclass(frozen=True, slots=True)
class TopOptions:
    """What ``perf report --stdio`` is asked for: ``sort`` keys (:func:`parse_sort` of
    ``sort_order``, perf's ``--sort`` text when given, which perf's graph looks at),
    ``children`` (a Children column, and rows for callers), ``graph`` (the call graph
    under each row of an event with callchains, :class:`~pysframe.perf.callgraph.GraphOptions`;
    None: none, ``-g none``) and ``percent_limit`` (rows under that share are left out)."""

    sort: tuple[str, ...] = DEFAULT_SORT
    children: bool = False
    graph: GraphOptions | None = None
    percent_limit: float = 0.0
    sort_order: str | None = None


def perf_defaults(profile: Profile) -> TopOptions:
    """The options of a plain ``perf report --stdio`` of ``profile``'s recordings: children
    and the call graph when their samples have callchains (builtin-report.c: cumulate
    unless no event has PERF_SAMPLE_CALLCHAIN)."""
    callchains = profile.has_callchains()
    return TopOptions(children=callchains, graph=GraphOptions() if callchains else None)


@dataclass(frozen=True, slots=True)
class _Key:
    """What tells one of perf's hist entries from another (hist_entry__cmp with the sort
    keys): the command, the thread (``pid``), the module's short name (None: no map), the
    symbol (``(1, dso, start, name of an inlined function)``) or address (``(0, address)``),
    the srcline.  The keys not sorted by are None."""

    comm: str | None
    tid: int | None
    dso: str | None
    symbol: tuple[object, ...] | None
    srcline: str | None


@dataclass(slots=True)
class _Hist:
    """A hist entry being filled: its key, what its first sample gave it, and its sums."""

    key: _Key
    frame: int  # the frame it shows (-1: a sample without frames)
    address: int  # the address shown when the frame has no symbol
    level: str
    first_tid: int
    comm: str
    samples: int = 0
    period: int = 0
    total_samples: int = 0
    total_period: int = 0
    chains: dict[tuple[int, ...], list[int]] | None = None
    #: The longest chain given it (callchain_root.max_depth).
    max_depth: int = 0
    #: Made by a sample's own frame: an inline entry shows the symbol holding it.
    own: bool = False


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
    #: The thread of its first sample (the ``pid`` key's), and that thread's last name
    #: (the ``pid`` column's; its length is perf's thread__comm_len, which cuts the
    #: Command column).
    tid: int = 0
    thread_comm: str = ""
    srcline: str = ""
    #: The call graph of its samples (None: none asked, or no callchains).
    graph: ChainNode | None = None


@dataclass(frozen=True, slots=True)
class TopSection:
    """The table of one event: its samples and their summed period (the 100%), its rows in
    perf's order."""

    event: str
    unit: str
    samples: int
    period: int
    rows: list[TopRow]
    #: The call graphs' printer (None: no graphs).
    graphs: GraphPrinter | None = None


#: A perf map's name, as util/dsos.c dso__set_basename reads it (sscanf ``/tmp/perf-%d``).
_PERF_MAP = re.compile(r"/tmp/perf-\s*([-+]?\d+)")


def module_short_name(module: str) -> str:
    """perf's short name of a module (``dso->short_name``, util/dsos.c dso__set_basename): a
    file's base name; ``[JIT] tid PID`` for JIT code (``/tmp/perf-PID.map``);
    ``[kernel.kallsyms]``, ``[vdso]``, ``[unknown]`` as they are."""
    if module.startswith("["):
        return module
    jit = _PERF_MAP.match(module)
    if jit is not None:
        return f"[JIT] tid {int(jit.group(1))}"
    return os.path.basename(module) or module


def _symbol_text(level: str, symbol: str | None, inlined: bool, address: int) -> str:
    # sort.c _hist_entry__sym_snprintf: "[level] name", " (inlined)" after an inlined
    # function's name, "%-#.*llx" (16 digits) of the address when there is no symbol.
    if symbol is None:
        return f"[{level}] {address:#018x}"
    return f"[{level}] {symbol}" + (" (inlined)" if inlined else "")


def _srcline(frame: FrameInfo, dso: str) -> str:
    """The srcline perf sorts a frame's entry by (util/srcline.c get_srcline): ``FILE:LINE``
    as addr2line answers for a file (the frame's ``file`` and ``line``; ``??:0`` where it
    knows nothing); for a module perf asks no addr2line about (the kernel's, ``[vdso]``, a
    perf map: srcline_dso_name), ``SYMBOL+OFFSET`` (in decimal), else ``DSO[ADDRESS]``."""
    if frame.file is not None:
        return f"{frame.file}:{frame.line or 0}"
    if not (frame.kernel or frame.module.startswith(("[", "/tmp/perf-"))):
        return "??:0"
    if frame.symbol is not None:
        return f"{frame.symbol}+{frame.offset}"
    address = frame.address if frame.kernel or frame.module_address is None else (
        frame.module_address
    )
    return f"{dso}[{address:x}]"


class _Frames:
    """Per frame of a profile, what the table keys and shows it by: the part of an entry's
    key that the frame gives (:class:`_Key` but the command and thread), as a number, for the
    sample's own entry and for a caller's."""

    def __init__(self, profile: Profile, keys: tuple[str, ...]) -> None:
        self.profile = profile
        frames = profile.frames
        self.dso = [None if f.module == UNKNOWN else module_short_name(f.module) for f in frames]
        self.kernel = [f.kernel for f in frames]
        # The level a frame with a map gives the entries after it (None: no map).
        self.level = [
            None if f.module == UNKNOWN else "k" if f.kernel else "." for f in frames
        ]
        # perf's addresses: an entry of a sample's own frame names the address in the module
        # (al->addr, which map__map_ip made); a caller the address in the chain (the
        # process's: add_callchain_ip keeps the raw address).
        self.own_address = [
            f.address if f.kernel or f.module_address is None else f.module_address
            for f in frames
        ]
        self.chain_address = [
            f.runtime_address if f.runtime_address is not None else f.address for f in frames
        ]
        with_dso, with_symbol = "dso" in keys or "symbol" in keys, "symbol" in keys
        srclines = [_srcline(f, dso or UNKNOWN) for f, dso in zip(frames, self.dso, strict=True)
                    ] if "srcline" in keys else [None] * len(frames)  # fmt: skip
        #: The distinct parts, (dso, symbol, srcline), by number.
        self.parts: list[tuple[str | None, tuple[object, ...] | None, str | None]] = []
        numbers: dict[tuple[str | None, tuple[object, ...] | None, str | None], int] = {}

        def part(number: int, own: bool) -> int:
            info = self.own_info[number] if own else frames[number]
            symbol: tuple[object, ...] | None = None
            if with_symbol:
                if info.symbol is None:
                    address = self.own_address[number] if own else self.chain_address[number]
                    symbol = (0, address)
                else:
                    start = self.own_address[number] - info.offset
                    symbol = (1, self.dso[number], start, info.symbol if info.inlined else "")
            key = (self.dso[number] if with_dso else None, symbol, srclines[number])
            found = numbers.get(key)
            if found is None:
                found = numbers[key] = len(self.parts)
                self.parts.append(key)
            return found

        # A sample's own entry is its IP's symbol, also where an inline entry stands first
        # (util/hist.c iter_add_single_cumulative_entry): the frame as that symbol's.
        self.own_info = [
            replace(f, symbol=f.base_symbol, inlined=False)
            if f.inlined and f.base_symbol is not None else f
            for f in frames
        ]  # fmt: skip
        self.own_part = [part(number, True) for number in range(len(frames))]
        self.chain_part = [part(number, False) for number in range(len(frames))]
        # A sample without frames: no map, no symbol.
        nothing = (None, (0, 0) if with_symbol else None,
                   f"{UNKNOWN}[0]" if "srcline" in keys else None)  # fmt: skip
        self.no_frame_part = numbers.setdefault(nothing, len(self.parts))
        if self.no_frame_part == len(self.parts):
            self.parts.append(nothing)


def top_table(
    profile: Profile, *, children: bool = False, options: TopOptions | None = None
) -> list[TopSection]:
    """The rows of perf report's table, per event in the profile's order.

    Rows are perf's hist entries (util/hist.c hist_entry_iter__add), by the sort keys
    (``comm,dso,sym`` by default; one per symbol, per address without one): each sample
    makes its own frame's entry (its IP's: self and children), and with ``children`` the
    entry of each frame on its stack, in the chain's order, that it has not made yet
    (children only: perf's he_cache).  A caller without a symbol is named by its address in
    the process (perf's callchain address), a sample's own frame by its address in the
    module.  Sorted as perf sorts them (hists__output_resort): by total period with
    ``children``, then by period, both descending; then by each sort key, ascending (no
    module, no symbol last), then by address.  With a graph (``options.graph``), each row
    also has its samples' chains merged into perf's tree (:mod:`pysframe.perf.callgraph`).
    """
    options = options or TopOptions(children=children)
    children = options.children
    keys = options.sort
    frames = _Frames(profile, keys)
    time = column(profile, "time")
    order = np.argsort(time, kind="stable")
    tids = column(profile, "tid")[order]
    columns = [column(profile, name)[order] for name in ("event", "comm")]
    if "pid" in keys:
        columns.append(tids)
    columns.append(column(profile, "stack")[order])
    groups = group(columns, column(profile, "period")[order])
    # Processed in the order of their first sample, as perf processes samples (in time).
    sequence = np.argsort(groups.first, kind="stable").tolist()
    flat = FlatStacks.of(profile)
    own_frames = innermost_real_frames(profile, flat).tolist()
    # Each thread's command name at the end (its last sample's): perf's thread__comm_len.
    last_comm: dict[int, str] = dict(zip(
        tids.tolist(), (profile.comms[c] for c in columns[1].tolist()), strict=True
    ))  # fmt: skip
    event_of, comm_of, stack_of = (
        groups.keys[0].tolist(), groups.keys[1].tolist(), groups.keys[-1].tolist()
    )
    tid_of = groups.keys[2].tolist() if "pid" in keys else None
    first_tid = tids[groups.first].tolist()
    counts, periods = groups.count.tolist(), groups.period.tolist()
    with_comm = "comm" in keys
    parts, own_part, chain_part, levels = (
        frames.parts, frames.own_part, frames.chain_part, frames.level
    )
    graphs = [
        options.graph is not None and profile.has_callchains(name) for name, _ in profile.events
    ]
    sections: dict[int, dict[tuple[int, int, int], _Hist]] = {}
    # The chain's order: callers first with -g caller, or with children unless -g callee.
    order_given = options.graph.order if options.graph is not None else None
    caller_first = order_given == "caller" or (order_given is None and children)

    def new_hist(
        part: int, frame: int, address: int, level: str, index: int, own: bool = False
    ) -> _Hist:
        comm = profile.comms[comm_of[index]]
        tid = tid_of[index] if tid_of is not None else None
        key = _Key(comm if with_comm else None, tid, *parts[part])
        return _Hist(key, frame, address, level, first_tid[index], comm, own=own)

    for index in sequence:
        event = event_of[index]
        hists = sections.setdefault(event, {})
        prefix = (comm_of[index] if with_comm else -1, tid_of[index] if tid_of else -1)
        stack = profile.stacks[stack_of[index]]
        graph = graphs[event]
        cursor = stack[::-1] if caller_first else stack
        sample_level = "k" if stack and frames.kernel[stack[0]] else "."
        own = own_frames[stack_of[index]] if stack else -1
        count, period = counts[index], periods[index]
        part = own_part[own] if own >= 0 else frames.no_frame_part
        own_hist = hists.get((*prefix, part))
        if own_hist is None:
            own_hist = hists[(*prefix, part)] = new_hist(
                part, own, frames.own_address[own] if own >= 0 else 0,
                "k" if own >= 0 and frames.kernel[own] else sample_level, index, own=True,
            )  # fmt: skip
        own_hist.samples += count
        own_hist.period += period
        own_hist.total_samples += count
        own_hist.total_period += period
        if graph:
            _add_chain(own_hist, tuple(cursor), period, count)
        if not children:
            continue
        seen = {part}
        level = sample_level
        for position, frame in enumerate(cursor):
            # fill_callchain_info: a frame without a map keeps the level of the frame
            # before it in the chain (the sample's own, for the first).
            level = levels[frame] or level
            part = chain_part[frame]
            if part in seen:
                continue
            seen.add(part)
            hist = hists.get((*prefix, part))
            if hist is None:
                hist = hists[(*prefix, part)] = new_hist(
                    part, frame, frames.chain_address[frame], level, index
                )
            hist.total_samples += count
            hist.total_period += period
            if graph:
                _add_chain(hist, tuple(cursor[position:]), period, count)
    return [
        _section(profile, number, list(sections.get(number, {}).values()), options, frames,
                 last_comm)
        for number in range(len(profile.events))
    ]  # fmt: skip


def _add_chain(hist: _Hist, chain: tuple[int, ...], period: int, count: int) -> None:
    if hist.chains is None:
        hist.chains = {}
    hist.max_depth = max(hist.max_depth, len(chain))
    sums = hist.chains.get(chain)
    if sums is None:
        hist.chains[chain] = [period, count]
    else:
        sums[0] += period
        sums[1] += count


def _section(
    profile: Profile,
    event: int,
    hists: list[_Hist],
    options: TopOptions,
    frames: _Frames,
    last_comm: dict[int, str],
) -> TopSection:
    name, unit = profile.events[event]
    chosen = np.flatnonzero(column(profile, "event") == event)
    period = int(column(profile, "period")[chosen].sum())
    graphs = None
    chain_key: list[int] | None = None
    if options.graph is not None and profile.has_callchains(name):
        graphs = _printer(profile, options, frames, period)
        chain_key = _chain_keys(profile, frames)
    rows = []
    # The rows in perf's order: in the order of its collapsed tree, each put where
    # hist_entry__sort puts it (hists__output_resort).
    collapsed = sorted(hists, key=lambda hist: _collapse_order(hist, options.sort))
    made: list[tuple[_Hist, TopRow]] = []
    caller_first = options.graph is not None and options.graph.caller_first(options.children)
    for hist in collapsed:
        shown = frames.own_info if hist.own else profile.frames
        info = shown[hist.frame] if hist.frame >= 0 else FrameInfo(0, UNKNOWN)
        dso = frames.dso[hist.frame] if hist.frame >= 0 else None
        thread_comm = last_comm.get(hist.first_tid, hist.comm)
        tree = None
        if chain_key is not None and hist.chains:
            tree = build_tree(
                ((chain, sums[0], sums[1]) for chain, sums in hist.chains.items()), chain_key
            )
        row = TopRow(
            hist.comm, info.module, info.symbol, hist.address, info.kernel, info.inlined,
            hist.samples, hist.period, hist.total_samples, hist.total_period,
            dso if dso is not None else UNKNOWN,
            _symbol_text(hist.level, info.symbol, info.inlined, hist.address),
            hist.first_tid, thread_comm, hist.key.srcline or "", tree,
        )  # fmt: skip
        made.append((hist, row))

    def goes_left(item: int, at: int) -> bool:
        return _sorts_before(*made[item], *made[at], options, caller_first)

    rows = [made[item][1] for item in rb_order(len(made), goes_left)]
    return TopSection(name, unit, len(chosen), period, rows, graphs)


def _collapse_order(hist: _Hist, keys: tuple[str, ...]) -> tuple[object, ...]:
    """The order of perf's collapsed entries (hist_entry__collapse with the sort keys'
    cmp): commands, threads, modules ascending (no module last); named symbols before
    addresses, by start or address ascending; srclines ascending."""
    key = hist.key
    order: list[object] = []
    for name in keys:
        if name == "comm":
            order.append(key.comm)
        elif name == "pid":
            order.append(key.tid)
        elif name == "dso":
            order += [key.dso is None, key.dso or ""]
        elif name == "symbol":
            symbol = key.symbol or (0, 0)
            if symbol[0]:
                order += [0, key.dso is None, key.dso or "", symbol[2]]
            else:
                order += [1, False, "", symbol[1]]
        elif name == "srcline":
            order.append(key.srcline)
    return tuple(order)


def _sorts_before(
    hist: _Hist, row: TopRow, other_hist: _Hist, other: TopRow, options: TopOptions,
    caller_first: bool,
) -> bool:  # fmt: skip
    """hist_entry__sort(he, iter) > 0: whether perf puts ``row`` before ``other``: the
    larger total (children), then, between rows of one thread, the caller first (the one
    given longer chains with -g caller, shorter with callee: __hpp__sort_acc), the larger
    period, then each sort key ascending (no module, no symbol last)."""
    if options.children:
        if row.total_period != other.total_period:
            return row.total_period > other.total_period
        if row.tid == other.tid and "symbol" in options.sort:
            depth = hist.max_depth - other_hist.max_depth
            if depth:
                return depth > 0 if caller_first else depth < 0
    if row.period != other.period:
        return row.period > other.period
    for key in options.sort:
        if key == "comm":
            mine, theirs = row.comm, other.comm
        elif key == "pid":
            mine, theirs = str(row.tid).zfill(20), str(other.tid).zfill(20)
        elif key == "dso":
            if (row.module == UNKNOWN) != (other.module == UNKNOWN):
                return other.module == UNKNOWN
            mine, theirs = row.dso, other.dso
        elif key == "symbol":
            if (row.symbol is None) != (other.symbol is None):
                return other.symbol is None
            mine, theirs = row.symbol or "", other.symbol or ""
        elif key == "srcline":
            mine, theirs = row.srcline, other.srcline
        else:
            continue
        if mine != theirs:
            return _c_order(mine) < _c_order(theirs)
    return False


def _c_order(text: str) -> bytes:
    """A name as strcmp orders it: by its bytes."""
    return text.encode("utf-8", "surrogateescape")


def _chain_keys(profile: Profile, frames: _Frames) -> list[int]:
    """What tells frames apart in a call graph (util/callchain.c match_chain with ``-g
    function``): an inlined function by its name alone, whatever its module (two modules'
    inlined ``mix`` are one node); else the module and the symbol's start, or the module and
    the address in the chain when there is no symbol."""
    ids: dict[tuple[str, int, int, str], int] = {}
    keys: list[int] = []
    for number, info in enumerate(profile.frames):
        if info.symbol is None:
            key = (info.module, 0, frames.chain_address[number], "")
        elif info.inlined:
            key = ("", 2, 0, info.symbol)
        else:
            key = (info.module, 1, frames.own_address[number] - info.offset, "")
        keys.append(ids.setdefault(key, len(ids)))
    return keys


def _printer(profile: Profile, options: TopOptions, frames: _Frames, total: int) -> GraphPrinter:
    assert options.graph is not None
    # The order perf met the modules in (its dso list, whose order the build-ID table
    # keeps): its tree compares dsos by their place in memory.
    ranks = {module: at for at, module in enumerate(profile.build_ids)}
    names, order = [], []
    for number, info in enumerate(profile.frames):
        own = frames.own_address[number]
        if info.symbol is None:
            names.append(f"{frames.chain_address[number]:#x}")
        else:
            names.append(escape_controls(info.symbol) + (" (inlined)" if info.inlined else ""))
        rank = -1 if info.module == UNKNOWN else ranks.get(info.module, len(ranks))
        order.append(ChainOrder(
            rank, None if info.symbol is None else own - info.offset,
            info.symbol if info.inlined else None, own,
        ))  # fmt: skip
    threshold = options.graph.threshold
    return GraphPrinter(
        options.graph, names, order, total, int(total * (threshold / 100)),
        # callchain__fprintf_graph: a sort order given that starts with "sym".
        skip_first=(options.sort_order or "").startswith("sym"),
    )


def _convert_unit(value: int) -> tuple[int, str]:
    """perf's convert_unit (tools/perf/util/util.c): thousands while over a thousand."""
    unit = " "
    for letter in "KMG":
        if value > 1000:
            value //= 1000
            unit = letter
    return value, unit


def write_top(
    profile: Profile, out: TextIO, *, children: bool = False, options: TopOptions | None = None
) -> None:
    """Write the table of ``perf report --stdio`` with ``options`` (by default, as
    ``--no-children --sort comm,dso,sym -g none``; with ``children``: ``--children``, a
    Children column of the total before Self).

    As perf lays it out (builtin-report.c hists__fprintf_nr_sample_events and
    ui/stdio/hist.c hists__fprintf): a ``#`` header with the lost samples, then per event
    ``# Samples: 16K of event 'cpu-clock'``, ``# Event count (approx.): N``, the column
    headers and dots, and the rows: percentages of the event's summed period (``%.2f%%``),
    then the sort keys' columns (sort.c): ``Command`` (cut to the longest name its rows'
    threads ended with, thread__comm_len), ``Pid:Command`` (``%7d:`` and the name),
    ``Shared Object`` (the module's short name), ``Symbol`` (``[.]``/``[k]`` and the
    symbol), ``Source:Line``.  Column widths are perf's (hists__calc_col_len): the longest
    value or header, 22 for the symbol and 16 for the module when a row has no symbol.  Rows
    under ``percent_limit`` are left out (their widths still count); each row's call graph
    follows it (:class:`~pysframe.perf.callgraph.GraphPrinter`).  An event without samples
    has no table, as perf skips it.
    """
    options = options or TopOptions(children=children)
    out.write(f"#\n# Total Lost Samples: {profile.lost_samples}\n#\n")
    for section in top_table(profile, options=options):
        # An event without samples has no table (builtin-report.c evlist__tty_browse_hists,
        # --skip-empty by default): the dummy event of perf record -a, say.
        if section.samples:
            out.writelines(_section_lines(section, options))


def _widths(section: TopSection, keys: tuple[str, ...]) -> dict[str, int]:
    """hists__calc_col_len over every row, then the headers (perf_hpp__reset_sort_width)."""
    rows = section.rows
    comm = max((len(escape_controls(row.thread_comm)) for row in rows), default=0)
    symbol = max((len(escape_controls(row.symbol)) + 4 for row in rows if row.symbol), default=0)
    dso = max((len(escape_controls(row.dso)) for row in rows if row.module != UNKNOWN),
              default=0)  # fmt: skip
    if any(row.symbol is None for row in rows):
        symbol, dso = max(symbol, 22), max(dso, 16)
    srcline = max((len(row.srcline) for row in rows), default=0)
    widths = {
        "comm": comm, "pid": comm + 8, "dso": dso, "symbol": symbol, "srcline": srcline,
        "ipc_null": 0,
    }  # fmt: skip
    return {key: max(widths[key], len(_HEADERS[key])) for key in keys}


def _cell(row: TopRow, key: str, width: int, last: bool) -> str:
    """One sort key's cell (sort.c hist_entry__*_snprintf), padded unless last
    (hist_entry__snprintf_alignment)."""
    if key == "comm":
        text = f"{escape_controls(row.comm)[:width]:<{width}}"
    elif key == "pid":
        name_width = max(7, width) - 8
        text = f"{row.tid:7d}:{escape_controls(row.thread_comm)[:name_width]:<{name_width}}"
    elif key == "dso":
        text = f"{escape_controls(row.dso)[:width]:<{width}}"
    elif key == "symbol":
        text = escape_controls(row.symbol_text)
    elif key == "ipc_null":  # hist_entry__sym_ipc_null_snprintf
        text = f"{'-      -':<{width}}"
    else:
        text = row.srcline[:width]
    return text if last else f"{text:<{width}}"


def _section_lines(section: TopSection, options: TopOptions) -> Iterator[str]:
    count, unit = _convert_unit(section.samples)
    yield f"# Samples: {count}{unit} of event '{escape_controls(section.event)}'\n"
    yield f"# Event count (approx.): {section.period}\n#\n"
    keys = options.sort
    widths = _widths(section, keys)
    percents = ["Children", "Self"] if options.children else ["Overhead"]
    headers = [f"{name:>8}" if at else f"{name:<8}" for at, name in enumerate(percents)]
    headers += [f"{_HEADERS[key][:widths[key]]:<{widths[key]}}" for key in keys]
    yield "# " + "  ".join(headers) + "\n"
    yield "# " + "  ".join("." * width for width in [8] * len(percents) + [
        widths[key] for key in keys
    ]) + "\n#\n"  # fmt: skip
    total = section.period
    limit = np.float32(options.percent_limit)
    graphs = section.graphs
    for row in section.rows:
        shares = [row.total_period, row.period] if options.children else [row.period]
        # hist_entry__get_percent_limit: a float of the share the row is sorted by.
        if options.percent_limit and np.float32(
            shares[0] * 100.0 / total if total else 0.0
        ) < limit:
            continue
        cells = [f"{100.0 * share / total if total else 0.0:7.2f}%" for share in shares]
        cells += [
            _cell(row, key, widths[key], at == len(keys) - 1) for at, key in enumerate(keys)
        ]
        yield "  " + "  ".join(cells) + "\n"
        if graphs is not None and row.graph is not None:
            yield graphs.lines(row.graph, shares[0])
    yield "\n\n"


__all__ = [
    "DEFAULT_SORT",
    "PERF_SORT_KEYS",
    "SORT_KEYS",
    "SortKeyError",
    "TopOptions",
    "TopRow",
    "TopSection",
    "module_short_name",
    "parse_sort",
    "perf_defaults",
    "top_table",
    "write_top",
]
