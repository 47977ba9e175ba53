"""perf report's call graphs: the callchains of a row's samples merged into perf's tree and
printed as ``perf report --stdio`` prints them under the row.

The tree (util/callchain.c): each chain (the sample's frames in the cursor's order: callers
first with ``-g caller``, the default with ``--children``; callees first otherwise) goes into
a radix tree whose nodes hold runs of frames (``callchain_node``): a run ends where the
chains part ways or where one of them ends.  Frames are told apart as perf's match_chain
tells them with ``-g function``: by module and symbol start, an inlined function by its name,
a frame without a symbol by its module and address.  A node's ``hit`` is the period of the
chains that end in it, its cumulative hits those of all the chains through it.

The sorting (``sort_chain_graph_abs``, ``_rel``, ``sort_chain_flat``): a node's children with
cumulative hits of at least ``min_hit`` (graph: ``threshold``% of the event's period;
fractal: of the parent's children's hits), by those hits, most first; ties in perf's tree
order, which is by module (the order perf met them) and then by symbol start or address,
both descending.

The printing (ui/stdio/hist.c ``callchain__fprintf_graph``, ``_flat``, ``_folded``): the graph's
``|`` and ``--N.NN%--`` characters, a single root run printed as ``---`` and its frames,
percentages of the event's period (graph) or of the parent's (fractal); flat and folded
chains, one per node with hits.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

from ..dataclass import dataclass
from .symtab import rb_order

#: ``-g`` print types (perf's callchain modes), orders and values.
MODES = ("graph", "flat", "fractal", "folded")
ORDERS = ("caller", "callee")
VALUES = ("percent", "period", "count")
#: callchain__fprintf_left_margin.
_MARGIN = " " * 12


@dataclass(frozen=True, slots=True)
class GraphOptions:
    """perf report's ``-g print_type,threshold[,print_limit],order,sort_key,value``:
    ``mode`` (graph, flat, fractal, folded), ``threshold`` (percent), ``print_limit`` (0:
    none), ``order`` (caller, callee; None: caller with ``--children``, callee without:
    perf's default) and ``value`` (percent, period, count).  perf's default is
    ``graph,0.5,caller,function,percent``, its order applying with ``--children`` only."""

    mode: str = "graph"
    threshold: float = 0.5
    print_limit: int = 0
    order: str | None = None
    value: str = "percent"

    def caller_first(self, children: bool) -> bool:
        """Whether chains go from the outermost caller in (perf: ``-g caller``, or
        ``--children`` without an order given)."""
        return self.order == "caller" or (self.order is None and children)


class ChainNode:
    """A node of perf's radix tree (callchain_node): its run of frames (ids), the period
    and number of the chains ending in it, those of its children, and its children."""

    __slots__ = ("born", "children", "children_count", "children_hit", "count", "frames",
                 "hit", "parent")  # fmt: skip

    def __init__(self, frames: list[int], parent: ChainNode | None, born: int = 0) -> None:
        self.frames = frames
        self.parent = parent
        #: Its place in the order the chains made the nodes (perf links a node's children
        #: into its rb_root_in in that order: append_chain_children, split_add_child).
        self.born = born
        self.hit = self.count = self.children_hit = self.children_count = 0
        self.children: list[ChainNode] = []

    @property
    def cumul_hits(self) -> int:
        return self.hit + self.children_hit

    @property
    def cumul_count(self) -> int:
        return self.count + self.children_count


def build_tree(
    chains: Iterable[tuple[tuple[int, ...], int, int]], keys: Sequence[Hashable]
) -> ChainNode:
    """perf's radix tree of ``chains`` (frames in the cursor's order, period, number of
    samples): the trie of their frames told apart by ``keys`` (each frame's), each run
    without a branch and where no chain ends made one node.  A node keeps the frames of the
    first chain that went through it (perf keeps the first chain's entries)."""
    # The trie, in columns: each node's children by key, frame, and the chains ending there.
    children: list[dict[Hashable, int]] = [{}]
    frame_of, hits, counts = [-1], [0], [0]
    for frames, period, count in chains:
        node = 0
        for frame in frames:
            below = children[node]
            key = keys[frame]
            found = below.get(key)
            if found is None:
                found = below[key] = len(frame_of)
                children.append({})
                frame_of.append(frame)
                hits.append(0)
                counts.append(0)
            node = found
        if node:
            hits[node] += period
            counts[node] += count
    tree = ChainNode([], None)
    # Each trie child of a node starts a run; the run goes on while its last trie node has
    # one child and no chain ends there.
    pending = [(tree, child) for child in children[0].values()]
    while pending:
        parent, start = pending.pop()
        run = ChainNode([frame_of[start]], parent, start)
        parent.children.append(run)
        last = start
        while len(children[last]) == 1 and not hits[last]:
            (last,) = children[last].values()
            run.frames.append(frame_of[last])
        run.hit, run.count = hits[last], counts[last]
        pending.extend((run, child) for child in children[last].values())
    _sum_children(tree)
    return tree


def _sum_children(tree: ChainNode) -> None:
    """Each node's children's cumulative hits and counts (children_hit, children_count)."""
    order: list[ChainNode] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    for node in reversed(order):  # children before their parents
        if node.parent is not None:
            node.parent.children_hit += node.cumul_hits
            node.parent.children_count += node.cumul_count


@dataclass(frozen=True, slots=True)
class ChainOrder:
    """How perf's match_chain orders a frame among its siblings (util/callchain.c, ``-g
    function``): where both frames have a symbol, by the symbols' ``name`` when either is
    an ``inlined`` function (match_chain_strings), else by the module (``rank``: its place
    among the modules perf met, -1 for none) and the symbol's ``start``; else by the module
    and ``address`` (the frame's own, in the module: the same order as perf's)."""

    rank: int
    start: int | None
    name: str | None
    address: int
    inlined: bool = False

    def compare(self, other: ChainOrder) -> int:
        """Negative, 0, positive: this frame before, with, after ``other``."""
        if self.start is not None and other.start is not None:
            if self.inlined or other.inlined:
                mine, theirs = _c_bytes(self.name or ""), _c_bytes(other.name or "")
                return (mine > theirs) - (mine < theirs)
            return _compare((self.rank, self.start), (other.rank, other.start))
        return _compare((self.rank, self.address), (other.rank, other.address))


def _compare(a: tuple[int, int], b: tuple[int, int]) -> int:
    return (a > b) - (a < b)


def _c_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass(slots=True)
class GraphPrinter:
    """Prints the call graph of one row.

    ``names``: each frame's name as perf prints it in a graph (callchain_list__sym_name: the
    symbol, `` (inlined)`` after an inlined function's, else ``%#x`` of the address);
    ``order``: each frame's place in perf's tree order (:class:`ChainOrder`: ties of hits
    are broken by it, highest first); ``total``: the event's period (graph percentages are of it);
    ``min_hit``: graph's threshold in period, ``callchain_total * threshold / 100``;
    ``skip_first``: the first frame of a single root run is not printed (perf, when the
    sort order given starts with ``sym``: it is the row's own symbol)."""

    options: GraphOptions
    names: list[str]
    order: list[ChainOrder]
    total: int
    min_hit: int
    skip_first: bool = False

    # -- sorting --------------------------------------------------------------------------------
    def _tree_order(self, nodes: list[ChainNode]) -> list[ChainNode]:
        """Sibling nodes in perf's rb_root_in order: each linked, in the order the chains
        made them, below the others by its first frame (append_chain_children: left of a
        node whose first frame match_chain finds lower), so that the highest comes first;
        where match_chain is no total order (an inlined function among other symbols goes
        by its name, they by their starts), the tree's shape decides, as in perf."""
        order = self.order
        made = sorted(nodes, key=lambda node: node.born)

        def goes_left(new: int, at: int) -> bool:
            return order[made[at].frames[0]].compare(order[made[new].frames[0]]) < 0

        return [made[at] for at in rb_order(len(made), goes_left)]

    def sorted_children(self, node: ChainNode) -> list[ChainNode]:
        """The children printed, in perf's order (__sort_chain_graph_abs and _rel: those
        with enough hits, most first, ties in tree order)."""
        if self.options.mode == "fractal":
            min_hit = math.ceil(node.children_hit * (self.options.threshold / 100.0))
        else:
            min_hit = self.min_hit
        kept = [child for child in self._tree_order(node.children) if child.cumul_hits >= min_hit]
        return sorted(kept, key=lambda child: -child.cumul_hits)

    def flat_nodes(self, tree: ChainNode) -> list[ChainNode]:
        """sort_chain_flat: every node with hits of its own (at least ``min_hit``), children
        before parents in tree order, then by hits, most first."""
        found: list[ChainNode] = []

        def visit(node: ChainNode) -> None:
            for child in self._tree_order(node.children):
                visit(child)
            if node.hit and node.hit >= self.min_hit:
                found.append(node)

        visit(tree)
        return sorted(found, key=lambda node: -node.hit)

    # -- values ---------------------------------------------------------------------------------
    def value(self, node: ChainNode, total: int) -> str:
        """callchain_node__fprintf_value."""
        period, count = node.cumul_hits, node.cumul_count
        if self.options.mode == "folded":
            period, count = node.hit, node.count
        if self.options.value == "period":
            return str(period)
        if self.options.value == "count":
            return str(count)
        percent = period * 100.0 / total if total else 0.0
        return f"{percent:.2f}%"

    # -- printing -------------------------------------------------------------------------------
    def lines(self, tree: ChainNode, parent_samples: int) -> str:
        """The graph under a row whose period (or, with children, cumulated period) is
        ``parent_samples`` (hist_entry_callchain__fprintf)."""
        mode = self.options.mode
        if mode in ("flat", "folded"):
            return self._flat(tree) if mode == "flat" else self._folded(tree)
        out: list[str] = []
        left = 0
        total = self.total
        children = self.sorted_children(tree)
        if children and not (len(children) > 1 or children[0].cumul_hits != parent_samples):
            single = children[0]
            printed = False
            shown = 0
            for at, frame in enumerate(single.frames):
                if at == 0 and self.skip_first:
                    continue
                if not printed:
                    out.append(f"{_MARGIN}{' ' * left}|\n{_MARGIN}{' ' * left}---")
                    left += 3
                    printed = True
                else:
                    out.append(_MARGIN + " " * left)
                out.append(self.names[frame] + "\n")
                shown += 1
                if shown == self.options.print_limit:
                    break
            children = self.sorted_children(single)
        if mode == "fractal":
            total = parent_samples
        self._graph(out, children, total, 1, 1, left)
        if out:
            out.append("\n")
        return "".join(out)

    def _graph(
        self, out: list[str], children: list[ChainNode], total: int, depth: int, mask: int,
        left: int,
    ) -> None:  # fmt: skip
        """__callchain__fprintf_graph: each child's line of pipes, its run of frames (the
        first with its value), then its children one level in."""
        fractal = self.options.mode == "fractal"
        remaining = total
        new_mask = mask
        cumul_count = 0
        child: ChainNode | None = None
        for at, child in enumerate(children):
            remaining -= child.cumul_hits
            cumul_count += child.cumul_count
            # The last child ends its level's pipe, unless fractal's "[...]" follows.
            if at == len(children) - 1 and (not fractal or not remaining):
                new_mask &= ~_bit(depth - 1)
            out.append(_graph_line(depth, mask, left))
            for position, frame in enumerate(child.frames):
                out.append(self._entry_line(child, self.names[frame], depth, new_mask,
                                            position, total, left))  # fmt: skip
            deeper = child.children_hit if fractal else total
            self._graph(out, self.sorted_children(child), deeper, depth + 1,
                        (new_mask | _bit(depth)) & 0xFFFFFFFF, left)  # fmt: skip
            if at + 1 == self.options.print_limit:
                break
        if fractal and remaining and remaining != total:
            rest = ChainNode([], None)
            rest.hit = remaining
            if self.options.value == "count" and child is not None and child.parent is not None:
                rest.count = child.parent.children_count - cumul_count
                if rest.count <= 0:
                    return
            new_mask &= ~_bit(depth - 1)
            out.append(self._entry_line(rest, "[...]", depth, new_mask, 0, total, left))

    def _entry_line(
        self, node: ChainNode, name: str, depth: int, mask: int, position: int, total: int,
        left: int,
    ) -> str:  # fmt: skip
        """ipchain__fprintf_graph: the pipes of the levels above, the value before a run's
        first frame, the frame's name."""
        parts = [_MARGIN, " " * left]
        for level in range(depth):
            parts.append("|" if mask & _bit(level) else " ")
            if position == 0 and level == depth - 1:
                parts.append(f"--{self.value(node, total)}--")
            else:
                parts.append(" " * 10)
        parts.append(name + "\n")
        return "".join(parts)

    def _path(self, node: ChainNode) -> list[int]:
        """The frames from the root's run down to ``node``'s."""
        runs: list[list[int]] = []
        at: ChainNode | None = node
        while at is not None and at.parent is not None:
            runs.append(at.frames)
            at = at.parent
        return [frame for run in reversed(runs) for frame in run]

    def _flat(self, tree: ChainNode) -> str:
        """callchain__fprintf_flat: per node, its value, then its chain from the root."""
        out: list[str] = []
        for shown, node in enumerate(self.flat_nodes(tree), 1):
            out.append(f"{' ' * 11}{self.value(node, self.total)}\n")
            out.extend(f"{' ' * 16}{self.names[frame]}\n" for frame in self._path(node))
            out.append("\n")
            if shown == self.options.print_limit:
                break
        return "".join(out)

    def _folded(self, tree: ChainNode) -> str:
        """callchain__fprintf_folded: per node, its value and its chain joined with ``;``."""
        out: list[str] = []
        for shown, node in enumerate(self.flat_nodes(tree), 1):
            chain = ";".join(self.names[frame] for frame in self._path(node))
            out.append(f"{self.value(node, self.total)} {chain}\n")
            if shown == self.options.print_limit:
                break
        return "".join(out)


def _bit(level: int) -> int:
    """``1 << level`` as perf's int computes it on x86-64 (the shift count taken modulo 32)."""
    return 1 << (level % 32)


def _graph_line(depth: int, mask: int, left: int) -> str:
    """ipchain__fprintf_graph_line: a line of pipes between a level's children."""
    cells = ["|          " if mask & _bit(level) else " " * 11 for level in range(depth)]
    return _MARGIN + " " * left + "".join(cells) + "\n"


__all__ = [
    "MODES",
    "ORDERS",
    "VALUES",
    "ChainNode",
    "ChainOrder",
    "GraphOptions",
    "GraphPrinter",
    "build_tree",
]
