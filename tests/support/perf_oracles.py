"""Oracles of the perf subsystem's bulk paths: each one the plain way to get the same answer,
one sample, one stack or one line at a time, written apart from the product so that a defect
cannot hide in code both share.  They call no private helper of ``pysframe``, but for the
red-black tree :func:`symbols_find` rebuilds perf's tree with (its shape is what perf's
lookups depend on; the tests check it on its own).

* :func:`grouped`: rows grouped by their keys with a dict (``perf.aggregate.group``).
* :func:`innermost_real_frames`: per stack, the frame of the sample's own entry
  (``perf.aggregate.innermost_real_frames``).
* :func:`flame_nodes`: the flame graph's tree with nested dicts (``perf.flamegraph.flame_tree``).
* :func:`filtered`: the samples passing perf report's filters (``perf.filters.filter_profile``).
* :func:`time_order_reference`: perf's ordered-events queue, one record at a time
  (``perf.order.time_ordered``).
* :func:`kallsyms_text_symbols`: the text-symbol lines of a kallsyms file, a regular
  expression per line (``perf.kernel.parse_kallsyms``).
* :func:`symbols_find`: the symbol perf names each address with, by walking its tree down
  from the root for every address (``perf.symtab.PerfSymbols.find_many``), the tree rebuilt
  by :func:`replayed_tree`.
* :func:`script_frame_line`, :func:`script_sample_lines`: one frame, one sample as perf
  script prints them by default (``perf.script.script_text``).
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from pysframe.names import escape_controls
from pysframe.perf.filters import TimeRange, parse_time_ranges
from pysframe.perf.flamegraph import INLINED, KERNEL, PROCESS, ROOT, UNNAMED, USER
from pysframe.perf.profile import FrameInfo, Profile
from pysframe.perf.symtab import SymbolSet, _RbTree

U64_MAX = (1 << 64) - 1


# -- aggregate ----------------------------------------------------------------------------------


def grouped(
    keys: Sequence[Sequence[int]], period: Sequence[int], samples: Sequence[int] | None = None
) -> tuple[list[tuple[int, ...]], list[int], list[int], list[int], list[int]]:
    """The rows grouped by their key tuples (``keys``: one sequence per key, the first the
    most significant), the groups in ascending key order: each group's key tuple, its count
    (of rows, or of ``samples``' weights), its summed period and its first row; then each
    row's group."""
    rows = [tuple(int(value) for value in row) for row in zip(*keys, strict=True)]
    found: dict[tuple[int, ...], list[int]] = {}
    for index, row in enumerate(rows):
        entry = found.setdefault(row, [0, 0, index])
        entry[0] += 1 if samples is None else int(samples[index])
        entry[1] += int(period[index])
    ordered = sorted(found)
    number = {row: at for at, row in enumerate(ordered)}
    return (
        ordered,
        [found[row][0] for row in ordered],
        [found[row][1] for row in ordered],
        [found[row][2] for row in ordered],
        [number[row] for row in rows],
    )


def _is_own_entry(frame: FrameInfo) -> bool:
    """Whether perf's self entry may name this frame: not an inlined function, or one that
    names the symbol holding it (an inline entry)."""
    return not frame.inlined or frame.base_symbol is not None


def innermost_real_frames(profile: Profile) -> list[int]:
    """Per stack, the id of its innermost frame that stands for the sample's own entry; -1
    when none does."""
    return [
        next((frame for frame in stack if _is_own_entry(profile.frames[frame])), -1)
        for stack in profile.stacks
    ]


# -- flame graph ----------------------------------------------------------------------------------

#: A flame graph node's name: (name, module, kind).
NodeName = tuple[str, str, int]


def _frame_kind(frame: FrameInfo) -> int:
    if frame.symbol is None:
        return UNNAMED
    if frame.inlined:
        return INLINED
    return KERNEL if frame.kernel else USER


@dataclass
class _Node:
    period: int = 0
    samples: int = 0
    below: dict[NodeName, _Node] = field(default_factory=dict)


def flame_nodes(profile: Profile) -> list[tuple[NodeName, int, int, int]]:
    """The flame graph tree of ``profile``: ``all``, then the command, then the functions
    from the outermost frame in; frames of one (name, module, kind) merged.  Per node, in
    breadth-first order with each node's children sorted by name: its name, how many
    children it has, the summed period and the number of its samples."""
    root = _Node()
    for index in range(len(profile)):
        frames = [profile.frames[f] for f in profile.stacks[profile.stack[index]]]
        path = [(profile.comms[profile.comm[index]], "", PROCESS)]
        path += [(frame.name, frame.module, _frame_kind(frame)) for frame in reversed(frames)]
        node = root
        node.period += profile.period[index]
        node.samples += 1
        for name in path:
            node = node.below.setdefault(name, _Node())
            node.period += profile.period[index]
            node.samples += 1
    nodes = []
    level = [(("all", "", ROOT), root)]
    while level:
        following = []
        for name, node in level:
            nodes.append((name, len(node.below), node.period, node.samples))
            following += sorted(node.below.items(), key=lambda item: item[0])
        level = following
    return nodes


# -- filters -------------------------------------------------------------------------------------


def _in_time(time: int, ranges: list[TimeRange]) -> bool:
    return any(
        (start is None or time >= start) and (end is None or time <= end) for start, end in ranges
    )


def filtered(
    profile: Profile,
    *,
    pids: Collection[int] | None = None,
    tids: Collection[int] | None = None,
    comms: Collection[str] | None = None,
    dsos: Collection[str] | None = None,
    time_range: str | TimeRange | None = None,
    dso_frames: str = "any",
) -> Profile:
    """The samples of ``profile`` that pass perf report's filters, one sample at a time: its
    process, thread and command among those given; a frame of its stack (``dso_frames``
    "own": its own entry's frame) in a module named by its base name or path; its time in a
    range, both ends in.  Deferred callchains shown apart pass by thread and time, none
    under a module filter."""
    if time_range is None:
        ranges = None
    elif isinstance(time_range, str):
        ranges = parse_time_ranges(time_range)
    else:
        ranges = [time_range]

    def in_modules(frame: FrameInfo) -> bool:
        assert dsos is not None
        return frame.module in dsos or os.path.basename(frame.module) in dsos

    def passes(index: int) -> bool:
        if pids is not None and profile.pid[index] not in pids:
            return False
        if tids is not None and profile.tid[index] not in tids:
            return False
        if comms is not None and profile.comms[profile.comm[index]] not in comms:
            return False
        if dsos is not None:
            frames = [profile.frames[f] for f in profile.stacks[profile.stack[index]]]
            if dso_frames == "own":
                frames = [frame for frame in frames if _is_own_entry(frame)][:1]
            if not any(in_modules(frame) for frame in frames):
                return False
        return ranges is None or _in_time(profile.time[index], ranges)

    chosen = profile.where(passes(index) for index in range(len(profile)))
    chosen.deferred = [
        chain
        for chain in profile.deferred
        if dsos is None
        and (pids is None or chain.pid in pids)
        and (tids is None or chain.tid in tids)
        and (comms is None or profile.comms[chain.comm] in comms)
        and (ranges is None or _in_time(chain.time, ranges))
    ]
    return chosen


# -- time order ----------------------------------------------------------------------------------


def time_order_reference(records: Iterable[tuple[int, int | None, bool]]) -> list[int]:
    """The delivery order of ``records`` (each ``(key, time, round_end)`` in file order; a
    round end has no key of its own), one record at a time as util/ordered-events.c keeps
    its queue: a record without a time (None, 0 or 2**64 - 1) delivered at once; a timed
    one queued, ties in file order; at a round end, the queued records up to the latest
    time seen when the round before ended; at the end, all of them."""
    queue: list[tuple[int, int, int]] = []  # (time, arrival, key), sorted
    latest = next_flush = 0
    delivered: list[int] = []
    for arrival, (key, time, round_end) in enumerate(records):
        if round_end:
            if queue:
                while queue and next_flush and queue[0][0] <= next_flush:
                    delivered.append(queue.pop(0)[2])
                next_flush = latest
        elif time is None or not 0 < time < U64_MAX:
            delivered.append(key)
        else:
            latest = max(latest, time) if queue else time
            bisect.insort(queue, (time, arrival, key))
    delivered += [key for _, _, key in queue]
    return delivered


# -- kallsyms ------------------------------------------------------------------------------------

#: A line of a text symbol (util/symbol.c __dso__load_kallsyms keeps types t, T, w, W): the
#: address (1 to 16 hex digits), the type, the name (up to a blank), then the rest of the
#: line, which names the module in brackets.
_TEXT_LINE = re.compile(r"([0-9a-fA-F]{1,16}) ([tTwW]) ([^\x00-\x20\[][^\x00-\x20]*)(.*)")


def kallsyms_text_symbols(text: bytes) -> list[tuple[int, str, str, str]]:
    """The text symbols of a kallsyms file, in file order: (address, type, name, module;
    "" for the kernel's own), names decoded as UTF-8 with other bytes as ``\\xNN``."""
    found = []
    for line in text.decode("utf-8", "backslashreplace").split("\n"):
        match = _TEXT_LINE.fullmatch(line)
        if match is None:
            continue
        address, kind, name, rest = match.groups()
        rest = rest.strip()
        module = rest[1:-1] if rest.startswith("[") and rest.endswith("]") else ""
        found.append((int(address, 16), kind, name, module))
    return found


# -- symbol lookup -------------------------------------------------------------------------------


def replayed_tree(
    symbols: SymbolSet, after_each: Callable[[_RbTree, list[int]], None] | None = None
) -> tuple[_RbTree, list[int]]:
    """perf's tree of ``symbols`` rebuilt by the insertions and erasures that built it, and
    the symbols living in it; ``after_each(tree, living)`` is called after every one."""
    tree = _RbTree(symbols.starts.tolist(), len(symbols))
    living: list[int] = []
    for operation in symbols.operations:
        if operation >= 0:
            tree.insert(operation)
            living.append(operation)
        else:
            tree.erase(~operation)
            living.remove(~operation)
        if after_each is not None:
            after_each(tree, living)
    return tree, living


def symbols_find(symbols: SymbolSet, addresses: Sequence[int]) -> list[int]:
    """The index in ``symbols.table()`` of the symbol perf names each address with (-1:
    none): util/symbol.c symbols__find walks the red-black tree down from the root, left
    while the address is below a symbol's start, right while it is past its end (or at the
    end of a non-empty symbol), else that symbol.  The tree is rebuilt by the insertions and
    erasures that built it (:func:`replayed_tree`; its shape is checked on its own by the
    tests of the tree); the walk and the table's order are this function's own."""
    tree, living = replayed_tree(symbols)
    starts, ends = symbols.starts.tolist(), symbols.ends.tolist()
    # The table: the living symbols by start, those of one start in the order they came.
    table = sorted(living, key=lambda number: (starts[number], number))
    out = []
    for address in addresses:
        found, at = -1, tree.root
        while at >= 0:
            if address < starts[at]:
                at = tree.left[at]
            elif address > ends[at] or (address == ends[at] and address != starts[at]):
                at = tree.right[at]
            else:
                found = at
                break
        out.append(-1 if found < 0 else table.index(found))
    return out


# -- perf script ----------------------------------------------------------------------------------


def script_frame_line(frame: FrameInfo) -> str:
    """One frame of a callchain as perf script prints it by default: a tab, the address as
    ``%16lx``, ``SYMBOL+0xOFFSET`` (``[unknown]`` without a symbol), the module in
    parentheses, or ``(inlined)`` after an inlined function; then a newline."""
    symbol = "[unknown]" if frame.symbol is None else (
        f"{escape_controls(frame.symbol)}+{frame.offset:#x}"
    )  # fmt: skip
    where = "(inlined)" if frame.inlined else f"({escape_controls(frame.module)})"
    return f"\t{frame.address:16x} {symbol} {where}\n"


def script_sample_lines(profile: Profile, index: int, frames: list[str]) -> str:
    """Sample ``index`` of an event with callchains as perf script prints it by default
    (``frames``: its frames' lines): the command, the thread as ``%5d``, the CPU as
    ``[%03d]`` where every sample has one, the time in seconds with microseconds as
    ``%12s``, the period as ``%10d``, the event's name right-aligned as wide as the longest
    of the recording's, then the frames and an empty line."""
    time = profile.time[index]
    stamp = f"{time // 1_000_000_000}.{time % 1_000_000_000 // 1000:06d}"
    width = max(len(escape_controls(name)) for name, _unit in profile.events)
    event = escape_controls(profile.events[profile.event[index]][0])
    comm = escape_controls(profile.comms[profile.comm[index]])
    cpu = f"[{profile.cpu[index]:03d}] " if all(cpu >= 0 for cpu in profile.cpu) else ""
    header = (
        f"{comm} {profile.tid[index]:5d} {cpu}{stamp:>12}: {profile.period[index]:10d} "
        f"{event:>{width}}: \n"
    )
    return header + "".join(frames) + "\n"
