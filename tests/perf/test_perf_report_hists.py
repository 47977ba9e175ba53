"""perf report's rows against a plain model of perf 6.1's hist entries, on made-up profiles.

The model does what util/hist.c does, the slow way: every sample in time order asks the
tree of entries (hists__findnew_entry) for its own entry and, with children, for each
frame's of its chain not given yet (hist_entry_iter__add, its he_cache), each by a walk
down from the root with hist_entry__cmp as util/sort.c writes it, compared on tuples;
hists__collapse_resort adds the entries again to a new tree (merging those found equal);
hists__output_resort adds them to a third by hist_entry__sort.  The trees are Linux's
red-black trees (:class:`pysframe.perf.symtab.RbEntries`, held to the kernel's rules by
tests/perf/test_perf_names.py).  :func:`pysframe.perf.top.top_table` must give the same
rows in the same order: it looks again only when a walk could end elsewhere, compares by
ranks, and finds some entries by a dictionary; those shortcuts must change nothing, where
the comparison is no total order too (inlined functions among other symbols, addresses of
several modules).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from pysframe.perf.callgraph import GraphOptions
from pysframe.perf.profile import UNKNOWN, FrameInfo, Profile
from pysframe.perf.symtab import RbEntries, rb_order
from pysframe.perf.top import TopOptions, module_short_name, top_table

MODULES = ("/opt/app/bin/app", "/usr/lib/libz.so.1", "/usr/lib/liba.so")
#: Named symbols per module: (name, start in the module).
SYMBOLS = (("main", 0x1000), ("bz", 0x1800), ("by", 0x2000), ("bx", 0x3000), ("k", 0x3800),
           ("d", 0x4000))  # fmt: skip
INLINED = ("a", "b", "c", "bz", "m", "z")


@dataclass(eq=False)
class _Entry:
    key: tuple[object, ...]
    name: str | None
    inlined: bool
    comm: str
    dso: str | None
    tid: int
    self_period: int = 0
    total: int = 0
    depth: int = 0
    chains: list[int] = field(default_factory=list)


def _strcmp(left: str | None, right: str | None) -> int:
    mine, theirs = (left or "").encode(), (right or "").encode()
    return (mine > theirs) - (mine < theirs)


def _signed(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _cmp_null(left: object, right: object) -> int:
    return 0 if left is None and right is None else -1 if left is None else 1


def _hist_entry_cmp(keys: tuple[str, ...], left: _Entry, right: _Entry) -> int:
    """hist_entry__cmp(left, right): the keys' cmp (util/sort.c)."""
    for key in keys:
        if key == "comm":  # sort__comm_cmp
            order = _strcmp(right.comm, left.comm)
        elif key == "pid":  # sort__thread_cmp
            order = right.tid - left.tid
        elif key == "dso":  # sort__dso_cmp: _sort__dso_cmp(right's, left's)
            order = _dso_cmp(left, right)
        elif key == "symbol":
            order = _sym_cmp(left, right)
        else:
            continue
        if order:
            return order
    return 0


def _dso_cmp(left: _Entry, right: _Entry) -> int:
    if left.dso is None or right.dso is None:
        return _cmp_null(left.dso, right.dso)
    return _strcmp(right.dso, left.dso)


def _sym_cmp(left: _Entry, right: _Entry) -> int:
    """sort__sym_cmp and _sort__sym_cmp."""
    if left.name is None and right.name is None:
        return _signed(int(right.key[-1]) - int(left.key[-1]))  # type: ignore[call-overload]
    order = _dso_cmp(left, right)
    if order:
        return order
    if left.name is None or right.name is None:
        return _cmp_null(left.name, right.name)
    if left.inlined or right.inlined:
        order = _strcmp(left.name, right.name)
        if order or left.key[-1] == right.key[-1]:
            return order
    return _signed(int(right.key[-1]) - int(left.key[-1]))  # type: ignore[call-overload]


def _entry_of(info: FrameInfo, own: bool, comm: str, tid: int) -> _Entry:
    """What a frame gives an entry: a sample's own frame its address in the module and an
    inline frame's symbol holding it; a caller its address in the process."""
    name: str | None = info.symbol
    inlined = info.inlined
    if own and info.inlined and info.base_symbol is not None:
        name, inlined = info.base_symbol, False
    module_address = info.module_address if info.module_address is not None else info.address
    if name is not None:
        where = module_address - info.offset
    else:
        where = module_address if own else info.address
    dso = None if info.module == UNKNOWN else module_short_name(info.module)
    return _Entry((name if inlined else None, name is not None, where), name, inlined, comm,
                  dso, tid)  # fmt: skip


def _model_rows(profile: Profile, keys: tuple[str, ...], graph: bool) -> list[tuple[object, ...]]:
    entries: list[_Entry] = []
    tree = RbEntries(lambda at, new: _hist_entry_cmp(keys, entries[at], entries[new]))
    order = sorted(range(len(profile)), key=lambda index: profile.time[index])
    for index in order:
        stack = profile.stacks[profile.stack[index]]
        comm, tid, period = profile.comms[profile.comm[index]], profile.tid[index], (
            profile.period[index])  # fmt: skip
        own_frame = next(f for f in stack if not (profile.frames[f].inlined
                                                   and profile.frames[f].base_symbol is None))
        wanted = [(_entry_of(profile.frames[own_frame], True, comm, tid), 0)]
        cursor = stack[::-1]  # callers first (--children's default order)
        wanted += [(_entry_of(profile.frames[f], False, comm, tid), position)
                   for position, f in enumerate(cursor)]  # fmt: skip
        given: list[_Entry] = []
        for at, (probe, position) in enumerate(wanted):
            if at and any(not _hist_entry_cmp(keys, earlier, probe) for earlier in given):
                continue  # the he_cache
            entries.append(probe)
            node, added = tree.find_or_add(len(entries) - 1)
            if not added:
                entries.pop()
            entry = entries[node] if added else _found(tree, entries, node)
            given.append(entry)
            if not at:
                entry.self_period += period
            entry.total += period
            if graph:
                entry.depth = max(entry.depth, len(cursor) - position)
    in_tree = [_found(tree, entries, node) for node in tree.in_order()]
    # hists__collapse_resort (the comm key has a collapse)
    if "comm" in keys:
        kept: list[_Entry] = []
        collapsed = RbEntries(lambda at, new: _hist_entry_cmp(keys, kept[at], kept[new]))
        for entry in in_tree:
            kept.append(entry)
            node, added = collapsed.find_or_add(len(kept) - 1)
            if not added:
                kept.pop()
                into = _found(collapsed, kept, node)
                into.self_period += entry.self_period
                into.total += entry.total
        in_tree = [_found(collapsed, kept, node) for node in collapsed.in_order()]

    def goes_left(new: int, at: int) -> bool:  # hist_entry__sort(new, at) > 0
        he, iter_ = in_tree[new], in_tree[at]
        if he.total != iter_.total:
            return he.total > iter_.total
        if graph and he.tid == iter_.tid and "symbol" in keys and he.depth != iter_.depth:
            return he.depth > iter_.depth  # the caller first (__hpp__sort_acc)
        if he.self_period != iter_.self_period:
            return he.self_period > iter_.self_period
        for key in keys:
            if key == "comm":
                order = _strcmp(iter_.comm, he.comm)
            elif key == "pid":
                order = iter_.tid - he.tid
            elif key == "dso":  # sort__dso_cmp(he, iter)
                order = _dso_cmp(he, iter_)
            elif key == "symbol":  # sort__sym_sort
                if he.name is None or iter_.name is None:
                    order = _cmp_null(he.name, iter_.name)
                else:
                    order = _strcmp(iter_.name, he.name)
            else:
                continue
            if order:
                return order > 0
        return False

    return [(in_tree[item].name, in_tree[item].inlined, in_tree[item].total,
             in_tree[item].self_period) for item in rb_order(len(in_tree), goes_left)]  # fmt: skip


def _found(tree: RbEntries, entries: list[_Entry], node: int) -> _Entry:
    return entries[tree.keys[node]]


def _frame(draw: st.DrawFn) -> list[FrameInfo]:
    """A frame of the made-up profiles, with the inlined functions a call in it stands in."""
    module = draw(st.sampled_from(MODULES))
    base = 0x555500000000 if module == MODULES[0] else 0x7F0000000000
    if draw(st.integers(0, 5)) == 0:  # no symbol: its address
        address = draw(st.sampled_from([0x4100, 0x4200, 0x4300]))
        return [FrameInfo(base + address, module, None, 0, module_address=address)]
    name, start = draw(st.sampled_from(SYMBOLS))
    address = start + 0x10
    frame = FrameInfo(base + address, module, name, 0x10, module_address=address)
    inlined = draw(st.lists(st.sampled_from([n for n in INLINED if n != name]), max_size=2,
                            unique=True))  # fmt: skip
    return [FrameInfo(base + address, module, inline_name, 0x10, module_address=address,
                      inlined=True, base_symbol=name) for inline_name in inlined] + [frame]


@st.composite
def _profiles(draw: st.DrawFn) -> Profile:
    profile = Profile(sources=["made-up"])
    event = profile.event_id("cpu-clock", "nanoseconds")
    stacks = [
        [frame for _ in range(draw(st.integers(1, 4))) for frame in _frame(draw)]
        for _ in range(draw(st.integers(1, 12)))
    ]
    for index in range(draw(st.integers(1, 60))):
        stack = draw(st.sampled_from(stacks))
        tid = draw(st.sampled_from([1, 2]))
        profile.add(profile.stack_id([profile.frame_id(f) for f in stack]), pid=1, tid=tid,
                    time=1000 * index, cpu=0, period=draw(st.sampled_from([100, 200])),
                    comm=profile.comm_id(draw(st.sampled_from(["app", "", "été"]))),
                    event=event)  # fmt: skip
    return profile


@settings(max_examples=300, deadline=None)
@given(
    _profiles(),
    st.sampled_from([
        ("comm", "dso", "symbol"), ("symbol",), ("dso", "symbol"), ("pid", "symbol"),
        ("symbol", "comm"),
    ]),
    st.booleans(),
)
def test_rows_are_those_of_perfs_trees(
    profile: Profile, keys: tuple[str, ...], graph: bool
) -> None:
    options = TopOptions(sort=keys, children=True, graph=GraphOptions() if graph else None)
    rows = top_table(profile, options=options)[0].rows
    ours = [(row.symbol, row.inlined, row.total_period, row.period) for row in rows]
    assert ours == _model_rows(profile, keys, graph)
