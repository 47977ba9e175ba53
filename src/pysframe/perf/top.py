"""perf report's table, as ``perf report --stdio`` prints it: perf's hist entries by the sort
keys, with their children and call graphs (:mod:`pysframe.perf.callgraph`).

* :func:`top_table`: the rows (perf's hist entries, util/hist.c and sort.c) of each event, in
  perf's order, with their call graphs' trees;
* :func:`write_top`: their text (ui/stdio/hist.c hists__fprintf), with
  :class:`TopOptions`: perf report's ``--sort``, ``--children``, ``-g``, ``--percent-limit``;
  :func:`perf_defaults` gives a plain ``perf report --stdio``'s.

The writer works in Python once per distinct (event, command, stack) of the samples, and
per sample only to look up its entries as perf does (in time order: what a row shows is its
first sample's), which is a list lookup while perf's tree of entries has not turned since.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TextIO

import numpy as np

from ..dataclass import dataclass
from ..names import escape_controls
from .aggregate import FlatStacks, group, innermost_real_frames
from .callgraph import ChainNode, ChainOrder, GraphOptions, GraphPrinter, build_tree
from .profile import UNKNOWN, FrameInfo, Profile
from .symtab import RbEntries, rb_order

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
    None: none, ``-g none``), ``percent_limit`` (rows under that share are left out) and
    ``time_slices`` (perf's ``--time`` text, which the samples were chosen by)."""

    sort: tuple[str, ...] = DEFAULT_SORT
    children: bool = False
    graph: GraphOptions | None = None
    percent_limit: float = 0.0
    sort_order: str | None = None
    time_slices: str | None = None


def perf_defaults(profile: Profile) -> TopOptions:
    """The options of a plain ``perf report --stdio`` of ``profile``'s recordings: children
    and the call graph when their samples have callchains (builtin-report.c: cumulate
    unless no event has PERF_SAMPLE_CALLCHAIN)."""
    callchains = profile.has_callchains()
    return TopOptions(children=callchains, graph=GraphOptions() if callchains else None)


#: What perf's comparisons of hist entries (util/sort.c) look at of an entry: its command's
#: name, its thread (with the ``pid`` key), its module's short name (None: no map), whether
#: it has a symbol, the symbol's name, whether that is an inlined function's, the symbol's
#: start (the address where there is no symbol), the srcline; names as bytes, as strcmp
#: orders them.
_Probe = tuple[bytes | None, int | None, bytes | None, bool, bytes | None, bool, int,
               bytes | None]  # fmt: skip
#: Of a probe, what the frame gives (all but the command and thread).
_PartProbe = tuple[bytes | None, bool, bytes | None, bool, int, bytes | None]
#: Where in a probe each sort key but ``symbol`` (whose fields are 3 to 6) finds its value.
_PROBE_FIELD = {"comm": 0, "pid": 1, "dso": 2, "srcline": 7}


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
    #: What perf's comparisons see of it (:func:`_entry_order`).
    probe: _Probe = (None, None, None, False, None, False, 0, None)


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


def _part_probe(
    dso: str | None, symbol: tuple[object, ...] | None, srcline: str | None,
    info: FrameInfo | None,
) -> _PartProbe:  # fmt: skip
    """A part's (:class:`_Frames`) share of a probe: ``symbol`` is its key's, ``info`` the
    frame it shows."""
    name = info.symbol if info is not None and symbol is not None and symbol[0] == 1 else None
    address = symbol[2 if name is not None else 1] if symbol is not None else 0
    assert isinstance(address, int)
    return (
        None if dso is None else _c_order(dso), name is not None,
        None if name is None else _c_order(name), bool(name is not None and info and info.inlined),
        address, None if srcline is None else _c_order(srcline),
    )  # fmt: skip


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
        # What each part's probe is made of (:meth:`probe`), and the probes made.
        self._probe_of: list[tuple[str | None, tuple[object, ...] | None, str | None,
                                   FrameInfo | None]] = []
        self._probes: list[_PartProbe | None] = []
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
                self._probe_of.append((self.dso[number], symbol, srclines[number], info))
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
            self._probe_of.append((None, nothing[1], nothing[2], None))
        self._probes = [None] * len(self.parts)

    def probe(self, part: int) -> _PartProbe:
        """The part as perf's comparisons of hist entries see it (made once, when asked)."""
        made = self._probes[part]
        if made is None:
            made = self._probes[part] = _part_probe(*self._probe_of[part])
        return made


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
    module.  The entries are found and added sample by sample in perf's trees
    (hists__findnew_entry, then hists__collapse_resort: :func:`_entry_order`, which is no
    total order where inlined functions meet other symbols, so that the trees' shapes decide
    their order and a walk can miss an entry and add another).  Sorted as perf sorts them
    (hists__output_resort, in the collapsed tree's order): by total period with
    ``children``, then by period, both descending; then by each sort key, ascending (no
    module, no symbol last), then by address.  With a graph (``options.graph``), each row
    also has its samples' chains merged into perf's tree (:mod:`pysframe.perf.callgraph`).
    """
    options = options or TopOptions(children=children)
    children = options.children
    keys = options.sort
    frames = _Frames(profile, keys)
    time = profile.column("time")
    order = np.argsort(time, kind="stable")
    tids = profile.column("tid")[order]
    event_column, period_column = profile.column("event"), profile.column("period")
    ordered_periods = period_column[order]
    columns = [event_column[order], profile.column("comm")[order]]
    if "pid" in keys:
        columns.append(tids)
    columns.append(profile.column("stack")[order])
    groups = group(columns, ordered_periods)
    flat = FlatStacks.of(profile)
    own_frames = innermost_real_frames(profile, flat).tolist()
    # Each thread's command name at the end (its last sample's): perf's thread__comm_len.
    tid_list = tids.tolist()
    last_comm: dict[int, str] = dict(zip(
        tid_list, (profile.comms[c] for c in columns[1].tolist()), strict=True
    ))  # fmt: skip
    event_of, comm_of, stack_of = (
        groups.keys[0].tolist(), groups.keys[1].tolist(), groups.keys[-1].tolist()
    )
    tid_of = groups.keys[2].tolist() if "pid" in keys else None
    graphs = [
        options.graph is not None and profile.has_callchains(name) for name, _ in profile.events
    ]
    # The chain's order: callers first with -g caller, or with children unless -g callee.
    order_given = options.graph.order if options.graph is not None else None
    caller_first = order_given == "caller" or (order_given is None and children)
    comm_names = [_c_order(comm) for comm in profile.comms]
    sections: dict[int, _Entries] = {}
    # The samples by (group, entries found), in the order first met: what they add.
    given: dict[tuple[int, tuple[int, ...]], list[int]] = {}

    def wants(number: int) -> _Wanted:
        """What a sample of group ``number`` asks perf's tree for (hist_entry_iter__add):
        its own frame's entry (iter_add_single_cumulative_entry), then with children each
        frame's of its chain, in the chain's order, but those of a part given already (one
        entry: the he_cache, :meth:`_Entries.once` drops the others equal to one given)."""
        stack = profile.stacks[stack_of[number]]
        cursor = tuple(stack[::-1] if caller_first else stack)
        sample_level = "k" if stack and frames.kernel[stack[0]] else "."
        prefix = (comm_names[comm_of[number]] if "comm" in keys else None,
                  tid_of[number] if tid_of is not None else None)  # fmt: skip
        own = own_frames[stack_of[number]] if stack else -1
        part = frames.own_part[own] if own >= 0 else frames.no_frame_part
        own_level = "k" if own >= 0 and frames.kernel[own] else sample_level
        made: list[_Made] = [
            (part, own, frames.own_address[own] if own >= 0 else 0, own_level, 0, True)
        ]
        if children:
            seen = {part}
            level = sample_level
            for position, frame in enumerate(cursor):
                # fill_callchain_info: a frame without a map keeps the level of the frame
                # before it in the chain (the sample's own, for the first).
                level = frames.level[frame] or level
                part = frames.chain_part[frame]
                if part not in seen:
                    seen.add(part)
                    made.append((part, frame, frames.chain_address[frame], level, position,
                                 False))  # fmt: skip
        entries = sections.get(event_of[number])
        if entries is None:
            entries = sections[event_of[number]] = _Entries(keys, frames.parts)
        probes = [entries.number(prefix + frames.probe(entry[0])) for entry in made]
        return _Wanted(made, probes, cursor)

    wanted = [wants(number) for number in range(len(groups))]
    for entries in sections.values():
        entries.prepare()
    for number, want in enumerate(wanted):
        kept = sections[event_of[number]].once(want.probes)
        if len(kept) < len(want.probes):
            wanted[number] = _Wanted([want.made[at] for at in kept],
                                     [want.probes[at] for at in kept], want.cursor)  # fmt: skip
    # Each group's entries as its last sample found them, while the tree has not turned
    # since (None: it turned while that sample looked).
    group_found: list[tuple[int, tuple[int, ...]] | None] = [None] * len(groups)
    # Sample by sample in time, as perf reads them (hists__findnew_entry: a walk by a
    # comparison that is no total order can miss an entry and add another, as perf's does).
    periods = ordered_periods.tolist()
    always = _Entries.ALWAYS
    for sample, number in enumerate(groups.labels.tolist()):
        entries = sections[event_of[number]]
        # While the tree has not turned since the last walk for a probe, that walk is the
        # one a new walk takes (a node added hangs below the ways to the others).
        turns = entries.tree.rotations
        last = group_found[number]
        if last is not None and last[0] == turns:
            nodes = last[1]
        else:
            want = wanted[number]
            found, start = entries.found, turns
            looked = []
            for probe, entry in zip(want.probes, want.made, strict=True):
                node, then, way = found[probe]
                if then != turns and then != always and not (
                    then >= 0 and entries.tree.unturned(way, then)
                ):
                    node = entries.findnew(probe, entry, profile.comms[comm_of[number]],
                                           tid_list[sample])  # fmt: skip
                    turns = entries.tree.rotations
                looked.append(node)
            nodes = tuple(looked)
            group_found[number] = (start, nodes) if turns == start else None
        sums = given.get((number, nodes))
        if sums is None:
            given[(number, nodes)] = [1, periods[sample]]
        else:
            sums[0] += 1
            sums[1] += periods[sample]
    for (number, nodes), (count, period) in given.items():
        hists = sections[event_of[number]].hists
        want = wanted[number]
        graph = graphs[event_of[number]]
        for at, (node, entry) in enumerate(zip(nodes, want.made, strict=True)):
            hist = hists[node]
            if not at:
                hist.samples += count
                hist.period += period
            hist.total_samples += count
            hist.total_period += period
            if graph:
                _add_chain(hist, want.cursor[entry[4]:], period, count)
    sections_made = []
    for number in range(len(profile.events)):
        chosen = event_column == number
        samples, period = int(np.count_nonzero(chosen)), int(period_column[chosen].sum())
        sections_made.append(_section(
            profile, number, samples, period, sections.get(number), options, frames, last_comm
        ))  # fmt: skip
    return sections_made


#: An entry a sample asks for: its part, the frame it shows, the address shown without a
#: symbol, its level, where its chain starts in the sample's, whether it is the sample's own.
_Made = tuple[int, int, int, str, int, bool]


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What the samples of one group ask for: the entries, their probes, the chain."""

    made: list[_Made]
    probes: list[int]  # their numbers (_Entries.number)
    cursor: tuple[int, ...]


class _Entries:
    """One event's hist entries as perf keeps them while it reads the samples (util/hist.c
    hists->entries_in): each found, or added where its walk ends, by hist_entry__cmp
    (hists__findnew_entry)."""

    def __init__(
        self, keys: tuple[str, ...],
        parts: list[tuple[str | None, tuple[object, ...] | None, str | None]],
    ) -> None:  # fmt: skip
        self._keys = keys
        self._parts = parts
        self._numbers: dict[_Probe, int] = {}
        self.probes: list[_Probe] = []
        # The tree holds the probes' numbers (made by prepare, once every probe is known).
        self._compare: Callable[[int, int], int] = lambda left, right: 0
        self.tree = RbEntries(self._compare)
        self.hists: list[_Hist] = []
        #: Each probe's entry as its last walk found it, the tree's rotations before
        #: (ALWAYS: a walk finds it whatever the tree's shape) and the walk's way.
        self.found: list[tuple[int, int, tuple[int, ...]]] = []
        # The probes whose walks find their entry whatever the tree's shape
        # (:func:`_exact_keys`), by what makes two of them one entry.
        self._exact: dict[int, tuple[object, ...]] = {}
        self._exact_nodes: dict[tuple[object, ...], int] = {}
        self._signature: list[tuple[object, ...]] = []

    #: The rotations of a walk that any tree takes.
    ALWAYS = -2

    def number(self, probe: _Probe) -> int:
        """The number of ``probe`` (one per distinct probe)."""
        number = self._numbers.get(probe)
        if number is None:
            number = self._numbers[probe] = len(self.probes)
            self.probes.append(probe)
            self.found.append((-1, -1, ()))
        return number

    def collapsing(self) -> RbEntries:
        """A new tree of these probes, by the same comparison (hists__collapse_resort's)."""
        return RbEntries(self._compare)

    def prepare(self) -> None:
        """Made once every probe is numbered: the comparison (:func:`_entry_order`), and
        the probes whose walks find their entry, or none, whatever the tree's shape, with
        what makes two of them one entry (:func:`_exact_keys`)."""
        self._compare = _entry_order(self._keys, self.probes)
        self.tree = RbEntries(self._compare)
        self._exact = _exact_keys(self.probes, self._keys)
        fields = [_PROBE_FIELD[key] for key in self._keys if key in _PROBE_FIELD]
        symbol = "symbol" in self._keys
        self._signature = [
            (*(probe[field] for field in fields),
             *((probe[3], probe[6], probe[2] if probe[3] else None, probe[4]) if symbol
               else ()))
            for probe in self.probes
        ]  # fmt: skip

    def once(self, numbers: list[int]) -> list[int]:
        """Of a sample's probes (the first its own entry's), the places of those perf adds
        (iter_add_next_cumulative_entry: not one equal by hist_entry__cmp to one it gave
        already, its he_cache).  Two probes are equal only where their keys' fields, their
        having a symbol, its start or their address (and their module and the symbol's name,
        with a symbol) are: other symbols of one start are one part (one probe) already."""
        signature, compare = self._signature, self._compare
        given: dict[tuple[object, ...], list[int]] = {}
        kept = []
        for at, number in enumerate(numbers):
            same = given.get(signature[number])
            if same is None:
                given[signature[number]] = [number]
            elif any(not compare(earlier, number) for earlier in same):
                continue
            else:
                same.append(number)
            kept.append(at)
        return kept

    def findnew(self, number: int, made: _Made, comm: str, tid: int) -> int:
        """The number of the entry perf's walk finds for probe ``number``, else of one made
        of ``made`` for a sample of ``comm`` and thread ``tid`` (what the entry shows is its
        first sample's)."""
        exact = self._exact.get(number)
        if exact is not None:
            node = self._exact_nodes.get(exact, -1)
            if node >= 0:
                self.found[number] = (node, self.ALWAYS, ())
                return node
        turns = self.tree.rotations
        node, added = self.tree.find_or_add(number)
        if exact is not None:
            self._exact_nodes[exact] = node
            self.found[number] = (node, self.ALWAYS, ())
        else:
            self.found[number] = (node, turns, self.tree.way)
        if added:
            probe = self.probes[number]
            key = _Key(comm if probe[0] is not None else None, probe[1],
                       *self._parts[made[0]])  # fmt: skip
            self.hists.append(_Hist(key, made[1], made[2], made[3], tid, comm, own=made[5],
                                    probe=probe))  # fmt: skip
        return node

    def in_order(self) -> list[_Hist]:
        """The entries from the leftmost (rb_first, rb_next)."""
        return [self.hists[node] for node in self.tree.in_order()]


def _entry_order(keys: tuple[str, ...], probes: list[_Probe]) -> Callable[[int, int], int]:
    """perf's hist_entry__cmp(left, right) with the sort keys (util/hist.c; the keys' cmp of
    util/sort.c, which are also their collapse: the ``comm`` key's sort__comm_collapse is its
    cmp), of two of ``probes`` by number: below zero, ``right`` goes left of ``left`` in
    perf's trees; zero, they are one entry.

    Commands, modules, srclines by strcmp ascending (no module last: cmp_null), threads
    ascending (sort__thread_cmp); the symbol key by sort__sym_cmp: where neither has a
    symbol, by address (_sort__addr_cmp); else by module (sort__dso_cmp), then no symbol
    last, then (_sort__sym_cmp) where either is an inlined function, by name *descending*
    (strcmp of left's and right's names), one entry where the names are equal and the ranges
    meet (here: the same symbol holds both); else by start.  That is no total order (an
    inlined function among other symbols is placed by its name, they by their starts): the
    trees' shapes decide, as in perf.  (The keys before the symbol key are compared as one
    rank, names and modules by their ranks; starts of one module differ by less than
    2**63, so that perf's (int64_t) differences order them as they are.)"""
    at_symbol = keys.index("symbol") if "symbol" in keys else len(keys)
    head_fields = [_PROBE_FIELD[key] for key in keys[:at_symbol] if key in _PROBE_FIELD]
    tail_fields = [_PROBE_FIELD[key] for key in keys[at_symbol + 1 :] if key in _PROBE_FIELD]

    def head_order(probe: _Probe) -> tuple[object, ...]:
        # commands and srclines as bytes (an empty name too), threads as numbers, modules
        # as bytes with none last
        return tuple(
            (probe[2] is None, probe[2] or b"") if field == 2
            else probe[1] or 0 if field == 1 else probe[field] or b""
            for field in head_fields
        )  # fmt: skip

    heads = {head_order(probe) for probe in probes}
    head_rank = {head: rank for rank, head in enumerate(sorted(heads))}
    head = [head_rank[head_order(probe)] for probe in probes]
    dsos = sorted({(probe[2] is None, probe[2] or b"") for probe in probes})
    dso_rank = {dso: rank for rank, dso in enumerate(dsos)}
    dso = [dso_rank[probe[2] is None, probe[2] or b""] for probe in probes]
    named = [probe[3] for probe in probes]
    inlined = [probe[5] for probe in probes]
    names = sorted({probe[4] or b"" for probe in probes})
    name_rank = {name: rank for rank, name in enumerate(names)}
    name = [name_rank[probe[4] or b""] for probe in probes]
    address = [probe[6] for probe in probes]
    with_symbol = at_symbol < len(keys)

    def tail(left: _Probe, right: _Probe) -> int:
        # the keys after the symbol key: strcmp(right, left), threads ascending
        for field in tail_fields:
            mine, theirs = left[field], right[field]
            if mine != theirs:
                if field == 1:
                    return (theirs or 0) - (mine or 0)  # type: ignore[operator]
                if field == 2 and (mine is None or theirs is None):
                    return -1 if mine is None else 1
                return 1 if (theirs or b"") > (mine or b"") else -1  # type: ignore[operator]
        return 0

    def compare(left: int, right: int) -> int:
        order = head[right] - head[left]
        if order or not with_symbol:
            return order or (tail(probes[left], probes[right]) if tail_fields else 0)
        if named[left] or named[right]:  # sort__sym_cmp's sort__dso_cmp first
            order = dso[right] - dso[left]
            if order:
                return order
        if named[left] and named[right]:
            if inlined[left] or inlined[right]:
                order = name[left] - name[right]
                if not order and address[left] == address[right]:
                    return tail(probes[left], probes[right]) if tail_fields else 0
            order = order or address[right] - address[left]
        elif named[left] or named[right]:
            return 1 if named[left] else -1
        else:  # _sort__addr_cmp, whatever the modules: (int64_t) of the difference
            order = _signed(address[right] - address[left])
        return order or (tail(probes[left], probes[right]) if tail_fields else 0)

    return compare


def _exact_keys(probes: list[_Probe], keys: tuple[str, ...]) -> dict[int, tuple[object, ...]]:
    """Of ``probes`` (by number), those whose walk down perf's tree of entries finds the
    entry equal to them, or none, whatever the tree's shape, each with what makes two of
    them one entry.

    Where the ``dso`` key comes before the symbol key, :func:`_entry_order` is no total
    order only among the named probes of one *mixed block* (of one module and equal keys
    before the symbol key, inlined functions and other symbols both) and among addresses
    without a module (perf's (int64_t) differences of addresses more than 2**63 apart).
    Elsewhere it is one (strcmp, addresses of one module, starts, an inlined function's
    name then start), blocks are ordered by it too, and each insertion keeps the tree's
    order consistent with it, so that every comparison met on the way down agrees with the
    place of the entry sought.  Without the ``dso`` key first, addresses are compared
    whatever their modules and named symbols by module: none is such a probe."""
    if "symbol" not in keys:
        return {number: (*probe[:2], probe[2] if "dso" in keys else None, probe[7])
                for number, probe in enumerate(probes)}  # fmt: skip
    before = keys[: keys.index("symbol")]
    if "dso" not in before:
        return {}
    fields = [_PROBE_FIELD[key] for key in before if key in ("comm", "pid")]

    def block(probe: _Probe) -> tuple[object, ...]:
        return (*(probe[field] for field in fields), probe[2])

    kinds: dict[tuple[object, ...], set[bool]] = {}
    for probe in probes:
        if probe[3]:
            kinds.setdefault(block(probe), set()).add(probe[5])
    exact: dict[int, tuple[object, ...]] = {}
    for number, probe in enumerate(probes):
        if len(kinds.get(block(probe), ())) > 1 if probe[3] else probe[2] is None:
            continue
        # one module, then one address (no symbol), or one start (and an inlined
        # function's name)
        exact[number] = (*probe[:4], probe[4] if probe[5] else None, probe[6], probe[7])
    return exact


def _signed(value: int) -> int:
    """A difference of two u64 as perf's (int64_t) cast of it."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _collapsed(made: _Entries | None, keys: tuple[str, ...]) -> list[_Hist]:
    """The entries ``made`` (perf's entries_in) in the order of perf's collapsed tree
    (util/hist.c hists__collapse_resort, which runs where a sort key has a collapse:
    ``comm``): taken in entries_in's order, each added by hist_entry__collapse (the cmp of
    these keys) or merged into the one found equal (hists__collapse_insert_entry: the sums
    added, the chains merged, that one's longest chain kept, as callchain_merge leaves
    max_depth)."""
    if made is None:
        return []
    entries = made.in_order()
    if "comm" not in keys:
        return entries
    tree = made.collapsing()
    kept: list[_Hist] = []
    for hist in entries:
        node, added = tree.find_or_add(made.number(hist.probe))
        if added:
            kept.append(hist)
            continue
        into = kept[node]
        into.samples += hist.samples
        into.period += hist.period
        into.total_samples += hist.total_samples
        into.total_period += hist.total_period
        for chain, (period, count) in (hist.chains or {}).items():
            if into.chains is None:
                into.chains = {}
            sums = into.chains.setdefault(chain, [0, 0])
            sums[0] += period
            sums[1] += count
    return [kept[node] for node in tree.in_order()]


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
    samples: int,
    period: int,
    entries: _Entries | None,
    options: TopOptions,
    frames: _Frames,
    last_comm: dict[int, str],
) -> TopSection:
    name, unit = profile.events[event]
    graphs = None
    chain_key: list[int] | None = None
    if options.graph is not None and profile.has_callchains(name):
        graphs = _printer(profile, options, frames, period)
        chain_key = _chain_keys(profile, frames)
    rows = []
    # The rows in perf's order: in the order of its collapsed tree, each put where
    # hist_entry__sort puts it (hists__output_resort).
    collapsed = _collapsed(entries, options.sort)
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
    return TopSection(name, unit, samples, period, rows, graphs)


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
            rank, None if info.symbol is None else own - info.offset, info.symbol, own,
            info.inlined,
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
    ``# Samples: 16K of event 'cpu-clock'`` (and `` (time slices: …)`` with ``--time``),
    ``# Event count (approx.): N``, the column
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
    # builtin-report.c hists__fprintf_nr_sample_events: `` (time slices: %s)`` of --time
    slices = "" if options.time_slices is None else f" (time slices: {options.time_slices})"
    yield f"# Samples: {count}{unit} of event '{escape_controls(section.event)}'{slices}\n"
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
