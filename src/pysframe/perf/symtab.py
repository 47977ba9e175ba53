"""perf 6.1's symbol table of a dso: the symbols added in passes with perf's fixups, the one
kept of those sharing an address, and the symbol an address is named with.

Fixups, after each pass (util/symbol.c): ``symbols__fixup_end`` (an empty symbol ends where
the next one starts; the last at the next page boundary after its start, plus a page), then
``symbols__fixup_duplicate`` (of the symbols of one address only the one
:func:`choose_best_symbol` prefers is kept).

Lookup (``symbols__find``): perf keeps the symbols in a red-black tree ordered by start
(``__symbols__insert``: equal starts to the right) and walks it down from the root: left
while the address is below a symbol's start, right while it is past its end (or at a
non-empty symbol's end), else that symbol.  Where no two symbols overlap, that is the one
symbol holding the address; where some do (a PLT entry inside a symbol that an earlier fixup
stretched, a sized symbol holding another), the answer depends on the tree's shape, so the
tree is rebuilt as perf builds it (Linux lib/rbtree.c: every insertion and erasure, in
perf's order) and walked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np

from ..dataclass import dataclass

if TYPE_CHECKING:
    import numpy.typing as npt

#: ELF symbol bindings perf tells apart (gABI).
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
_MASK = (1 << 64) - 1
#: The cache's words (PerfSymbols.parts): little-endian, whatever the machine.
_U64, _I64 = np.dtype("<u8"), np.dtype("<i8")


# -- choosing among the symbols of one address ---------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Candidate:
    """What perf's choose_best_symbol weighs of a symbol: its extent (end - start, as a
    signed 64-bit number), its binding and its name."""

    length: int
    binding: int
    name: str


def _underscores(name: str) -> int:
    return len(name) - len(name.lstrip("_"))


def choose_best_symbol(a: Candidate, b: Candidate) -> bool:
    """Whether perf keeps ``a`` over ``b`` (util/symbol.c choose_best_symbol): a non-empty
    symbol over an empty one, a non-weak over a weak one, a global over a non-global one,
    fewer leading underscores, the longer name (in bytes), then ``a`` unless its name starts
    with ``SyS`` or ``compat_SyS`` (arch__choose_best_symbol)."""
    if a.length > 0 and b.length == 0:
        return True
    if a.length == 0 and b.length > 0:
        return False
    weak_a, weak_b = a.binding == STB_WEAK, b.binding == STB_WEAK
    if weak_a != weak_b:
        return weak_b
    global_a, global_b = a.binding == STB_GLOBAL, b.binding == STB_GLOBAL
    if global_a != global_b:
        return global_a
    if _underscores(a.name) != _underscores(b.name):
        return _underscores(a.name) < _underscores(b.name)
    size_a, size_b = len(a.name.encode()), len(b.name.encode())
    if size_a != size_b:
        return size_a > size_b
    return not a.name.startswith(("SyS", "compat_SyS"))


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


# -- the symbol set as perf builds it --------------------------------------------------------------


class SymbolSet:
    """A dso's symbols as perf builds them: symbols added in passes (each followed by perf's
    fixups, :meth:`fix`), every insertion and erasure recorded for the tree's shape.

    ``rename`` gives symbols' names from their stored names, in bulk (perf's demangling;
    none with ``--no-demangle``); it is asked only for the names that matter: those of
    symbols that share an address, and those kept.  ``in_module`` (kallsyms): whether each
    symbol belongs to a kernel module, for the kernel/module boundary of
    symbols__fixup_end."""

    def __init__(self, rename: Callable[[list[str]], list[str]] | None = None) -> None:
        self.rename = rename
        self.starts = np.zeros(0, dtype=np.uint64)
        self.ends = np.zeros(0, dtype=np.uint64)
        self.bindings = np.zeros(0, dtype=np.uint8)
        self.in_module = np.zeros(0, dtype=bool)
        self.alive = np.zeros(0, dtype=bool)
        self.stored: list[str] = []
        self.names: list[str | None] = []
        #: Insertions (symbol number) and erasures (~number), in perf's order.
        self.operations: list[int] = []

    def __len__(self) -> int:
        return len(self.stored)

    def add(
        self,
        starts: Sequence[int] | npt.NDArray[np.uint64],
        sizes: Sequence[int] | npt.NDArray[np.uint64],
        bindings: Sequence[int] | npt.NDArray[np.uint8],
        names: list[str],
        *,
        named: bool = False,
        in_module: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """symbol__new and symbols__insert of each symbol, in order: ``end = start + size``
        (``start`` if 0).  ``named``: ``names`` are the symbols' names already (not to be
        renamed)."""
        first = len(self.stored)
        starts = np.asarray(starts, dtype=np.uint64)
        sizes = np.asarray(sizes, dtype=np.uint64)
        self.starts = np.concatenate([self.starts, starts])
        self.ends = np.concatenate([self.ends, starts + sizes])  # wraps at 2**64, as in C
        self.bindings = np.concatenate([self.bindings, np.asarray(bindings, dtype=np.uint8)])
        extra = np.zeros(len(starts), dtype=bool) if in_module is None else in_module
        self.in_module = np.concatenate([self.in_module, extra])
        self.alive = np.concatenate([self.alive, np.ones(len(starts), dtype=bool)])
        self.stored += names
        self.names += list(names) if named or self.rename is None else [None] * len(names)
        self.operations += range(first, len(self.stored))

    def in_order(self) -> npt.NDArray[np.int64]:
        """The living symbols' numbers in tree order: by start, then as inserted."""
        alive = np.flatnonzero(self.alive)
        return alive[np.argsort(self.starts[alive], kind="stable")]

    def fix(self, *, kallsyms: bool = False) -> None:
        """symbols__fixup_end (``kallsyms``: an empty symbol last before a change between
        kernel and module ends on the page after its end), then symbols__fixup_duplicate
        (util/symbol.c)."""
        order = self.in_order()
        if not len(order):
            return
        starts, ends = self.starts[order], self.ends[order]
        empty = ends == starts
        fixed = ends.copy()
        following = starts[1:]
        if kallsyms:
            module = self.in_module[order]
            boundary = module[:-1] != module[1:]
            page = (ends[:-1] + np.uint64(4096) + np.uint64(4095)) & ~np.uint64(4095)
            following = np.where(boundary, page, following)
        fixed[:-1] = np.where(empty[:-1], following, ends[:-1])
        if empty[-1]:  # the last: to the next page boundary after its start, plus a page
            last = (int(starts[-1]) + 4095) & ~4095
            fixed[-1] = (last + 4096) & _MASK  # wraps at 2**64, as in C
        self.ends[order] = fixed
        same = np.flatnonzero(starts[1:] == starts[:-1])
        if not len(same):
            return
        # Groups of symbols at one address: choose_best_symbol folded over each.
        shared = np.zeros(len(order), dtype=bool)
        shared[same] = shared[same + 1] = True
        self._name_all(order[shared].tolist())
        first = np.flatnonzero(shared & ~np.append(False, starts[1:] == starts[:-1]))
        for at in first.tolist():
            best = int(order[at])
            at += 1
            while at < len(order) and starts[at] == starts[at - 1]:
                other = int(order[at])
                if choose_best_symbol(self.candidate(best), self.candidate(other)):
                    self._erase(other)
                else:
                    self._erase(best)
                    best = other
                at += 1

    def _name_all(self, numbers: list[int]) -> None:
        """Give the symbols ``numbers`` their names (one call of ``rename`` for them all)."""
        unnamed = [number for number in numbers if self.names[number] is None]
        if unnamed:
            assert self.rename is not None
            renamed = self.rename([self.stored[number] for number in unnamed])
            for number, name in zip(unnamed, renamed, strict=True):
                self.names[number] = name

    def name(self, number: int) -> str:
        self._name_all([number])
        found = self.names[number]
        assert found is not None
        return found

    def candidate(self, number: int) -> Candidate:
        length = _signed((int(self.ends[number]) - int(self.starts[number])) & _MASK)
        return Candidate(length, int(self.bindings[number]), self.name(number))

    def _erase(self, number: int) -> None:
        self.alive[number] = False
        self.operations.append(~number)

    def table(self) -> PerfSymbols:
        """The symbols kept, for lookups."""
        order = self.in_order()
        numbers = order.tolist()
        self._name_all(numbers)
        return PerfSymbols(
            self.starts[order],
            self.ends[order],
            [self.names[number] or "" for number in numbers],
            _Shape(self.starts, self.ends, self.operations, numbers),
            order,
        )


# -- the red-black tree, for lookups among overlapping symbols ---------------------------------


_NIL = -1


class _RbTree:
    """perf's rb_root of symbols, rebuilt by the insertions and erasures that built it (Linux
    lib/rbtree.c ``__rb_insert``, ``__rb_erase_augmented``, ``____rb_erase_color``: the same
    rotations and recolourings, so the same shape).  ``child[0]`` and ``child[1]`` are the
    left and right links: lib/rbtree.c's two mirror-image halves are one here, for a
    direction ``side`` and its opposite."""

    def __init__(self, starts: Sequence[int], count: int) -> None:
        self.starts = starts
        self.child = ([_NIL] * count, [_NIL] * count)
        self.parent = [_NIL] * count
        self.red = [False] * count
        self.root = _NIL
        self.rotations = 0
        #: When asked for (RbEntries): per node, the rotation that last changed its links
        #: (0: none), and the rotation that last changed the root.
        self.turned: list[int] | None = None
        self.root_turned = 0

    @property
    def left(self) -> list[int]:
        return self.child[0]

    @property
    def right(self) -> list[int]:
        return self.child[1]

    def _change_child(self, old: int, new: int, parent: int) -> None:
        if parent == _NIL:
            self.root = new
        elif self.child[0][parent] == old:
            self.child[0][parent] = new
        else:
            self.child[1][parent] = new

    def _rotate_set_parents(self, old: int, new: int, red: bool) -> None:
        """``new`` takes ``old``'s place and colour; ``old`` becomes its child, coloured."""
        parent = self.parent[old]
        self.parent[new], self.red[new] = parent, self.red[old]
        self.parent[old], self.red[old] = new, red
        self._change_child(old, new, parent)

    def insert(self, node: int) -> None:
        """__symbols__insert: down from the root, left while the start is below the node's,
        else right; then rb_insert_color."""
        parent, side = _NIL, 0
        at = self.root
        start = self.starts[node]
        while at != _NIL:
            parent = at
            side = 0 if start < self.starts[at] else 1
            at = self.child[side][at]
        self._link(node, parent, side)

    def insert_where(self, node: int, goes_left: Callable[[int, int], bool]) -> None:
        """An insertion down from the root by another order: left of each node ``at`` where
        ``goes_left(node, at)``, else right (perf's other rb_roots: hists' entries); then
        rb_insert_color."""
        parent, side = _NIL, 0
        at = self.root
        while at != _NIL:
            parent = at
            side = 0 if goes_left(node, at) else 1
            at = self.child[side][at]
        self._link(node, parent, side)

    def add(self, parent: int, side: int) -> int:
        """A new node (the next number) linked as ``parent``'s child on ``side``."""
        node = len(self.parent)
        self.child[0].append(_NIL)
        self.child[1].append(_NIL)
        self.parent.append(_NIL)
        self.red.append(False)
        if self.turned is not None:
            self.turned.append(0)
        self._link(node, parent, side)
        return node

    def _link(self, node: int, parent: int, side: int) -> None:
        """rb_link_node: ``node`` becomes ``parent``'s child on ``side`` (the root without a
        parent); then rb_insert_color."""
        self.parent[node], self.red[node] = parent, True
        self.child[0][node] = self.child[1][node] = _NIL
        if parent == _NIL:
            self.root = node
        else:
            self.child[side][parent] = node
        self._insert_color(node)

    def in_order(self) -> list[int]:
        """The nodes from the leftmost (rb_first, rb_next)."""
        out: list[int] = []
        stack: list[int] = []
        at = self.root
        while stack or at != _NIL:
            while at != _NIL:
                stack.append(at)
                at = self.child[0][at]
            at = stack.pop()
            out.append(at)
            at = self.child[1][at]
        return out

    def _insert_color(self, node: int) -> None:
        red, parents = self.red, self.parent
        parent = parents[node]
        while True:
            if parent == _NIL:
                red[node] = False
                return
            if not red[parent]:
                return
            grandparent = parents[parent]
            # side: where parent hangs from grandparent; the uncle hangs on the other side.
            side = 0 if parent != self.child[1][grandparent] else 1
            near, far = self.child[side], self.child[1 - side]
            uncle = far[grandparent]
            if uncle != _NIL and red[uncle]:  # case 1: colour flips, go up
                red[uncle] = red[parent] = False
                node = grandparent
                parent = parents[node]
                red[node] = True
                continue
            self.rotations += 1
            if self.turned is not None:  # the nodes whose links change below
                self._turned(parent, node, grandparent)
            if node == far[parent]:  # case 2: rotate at parent, towards side
                inner = near[node]
                far[parent], near[node] = inner, parent
                if inner != _NIL:
                    parents[inner] = parent
                parents[parent], parents[node] = node, grandparent
                parent = node
            inner = far[parent]  # case 3: rotate at grandparent, away from side
            near[grandparent], far[parent] = inner, grandparent
            if inner != _NIL:
                parents[inner], red[inner] = grandparent, False
            self._rotate_set_parents(grandparent, parent, True)
            return

    def _turned(self, parent: int, node: int, grandparent: int) -> None:
        """Mark the nodes an insertion's rotation at ``grandparent`` (and at ``parent``
        first, where ``node`` is its inner child) relinks: those three and the
        grandparent's parent (the root where it has none)."""
        turned, count = self.turned, self.rotations
        assert turned is not None
        turned[parent] = turned[node] = turned[grandparent] = count
        above = self.parent[grandparent]
        if above == _NIL:
            self.root_turned = count
        else:
            turned[above] = count

    def erase(self, node: int) -> None:
        """rb_erase: a node with two children is replaced by its successor."""
        left, right = self.child
        red, parents = self.red, self.parent
        child, only_left = right[node], left[node]
        if only_left == _NIL:
            parent, node_red = parents[node], red[node]
            self._change_child(node, child, parent)
            if child != _NIL:
                parents[child], red[child] = parent, node_red
                rebalance = _NIL
            else:
                rebalance = parent if not node_red else _NIL
        elif child == _NIL:
            parents[only_left], red[only_left] = parents[node], red[node]
            self._change_child(node, only_left, parents[node])
            rebalance = _NIL
        else:
            successor = child
            below = left[child]
            if below == _NIL:
                parent = successor
                child2 = right[successor]
            else:
                while below != _NIL:
                    parent, successor = successor, below
                    below = left[below]
                child2 = right[successor]
                left[parent] = child2
                right[successor] = child
                parents[child] = successor
            left[successor] = only_left
            parents[only_left] = successor
            node_parent, node_red = parents[node], red[node]
            self._change_child(node, successor, node_parent)
            if child2 != _NIL:
                parents[child2], red[child2] = parent, False
                rebalance = _NIL
            else:
                rebalance = parent if not red[successor] else _NIL
            parents[successor], red[successor] = node_parent, node_red
        if rebalance != _NIL:
            self._erase_color(rebalance)

    def _erase_color(self, parent: int) -> None:
        """____rb_erase_color: restore the black heights above an erased black leaf."""
        red, parents = self.red, self.parent
        node = _NIL
        while True:
            # side: where node hangs from parent (0: left, also when the node is gone).
            side = 0 if node != self.child[1][parent] else 1
            near, far = self.child[side], self.child[1 - side]
            sibling = far[parent]
            if red[sibling]:  # case 1: rotate at parent, towards side
                inner = near[sibling]
                far[parent], near[sibling] = inner, parent
                parents[inner], red[inner] = parent, False
                self._rotate_set_parents(parent, sibling, True)
                sibling = inner
            outer = far[sibling]
            if outer == _NIL or not red[outer]:
                inner = near[sibling]
                if inner == _NIL or not red[inner]:  # case 2: sibling colour flip
                    parents[sibling], red[sibling] = parent, True
                    if red[parent]:
                        red[parent] = False
                    else:
                        node, parent = parent, parents[parent]
                        if parent != _NIL:
                            continue
                    return
                outer = far[inner]  # case 3: rotate at sibling, away from side
                near[sibling], far[inner], far[parent] = outer, sibling, inner
                if outer != _NIL:
                    parents[outer], red[outer] = sibling, False
                outer, sibling = sibling, inner
            inner = near[sibling]  # case 4: rotate at parent, towards side; colour flips
            far[parent], near[sibling] = inner, parent
            parents[outer], red[outer] = sibling, False
            if inner != _NIL:
                parents[inner] = parent
            self._rotate_set_parents(parent, sibling, False)
            return

    def find(self, address: int, ends: Sequence[int]) -> int:
        """symbols__find: the symbol the walk down from the root stops at (-1: none)."""
        at = self.root
        starts, (left, right) = self.starts, self.child
        while at != _NIL:
            start, end = starts[at], ends[at]
            if address < start:
                at = left[at]
            elif address > end or (address == end and address != start):
                at = right[at]
            else:
                return at
        return -1


@dataclass(slots=True, eq=False, repr=False)
class _Shape:
    """What rebuilding perf's tree takes: every symbol's start and end (by number), the
    insertions and erasures in perf's order, and the living symbols in order (the tree is
    built on the first lookup that needs it)."""

    starts: npt.NDArray[np.uint64]
    ends: npt.NDArray[np.uint64]
    operations: list[int]
    order: list[int]
    _tree: _RbTree | None = None
    _ends: list[int] = field(default_factory=list)
    #: Table index of each symbol number.
    _index: dict[int, int] = field(default_factory=dict)

    def find(self, address: int) -> int:
        """The table index of the symbol perf's tree walk finds for ``address`` (-1: none)."""
        if self._tree is None:
            self._ends = self.ends.tolist()
            tree = _RbTree(self.starts.tolist(), len(self.starts))
            for operation in self.operations:
                if operation >= 0:
                    tree.insert(operation)
                else:
                    tree.erase(~operation)
            self._tree = tree
            self._index = {number: at for at, number in enumerate(self.order)}
        found = self._tree.find(address, self._ends)
        return self._index[found] if found >= 0 else -1


class RbEntries:
    """A Linux red-black tree of numbered keys, added one at a time by a three-way
    comparison, as perf keeps its hist entries (util/hist.c hists__findnew_entry and
    hists__collapse_insert_entry): down from the root, ``compare(at's key, key)`` (perf's
    ``hist_entry__cmp(iter, he)``) below zero goes left, above zero right; zero finds
    ``at``.  Where the comparison is no total order, the tree's shape decides what is found
    and where a key goes, as it does in perf."""

    def __init__(self, compare: Callable[[int, int], int]) -> None:
        self._tree = _RbTree([], 0)
        self._tree.turned = []
        self._compare = compare
        #: The key of each node, by number (the order they were added in).
        self.keys: list[int] = []
        #: The nodes the last walk met, the node it found or added last.
        self.way: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def rotations(self) -> int:
        """How many rotations its insertions made: while they make none, a walk down from
        the root to a node takes the same way (a node added hangs below the ways that end
        at other nodes), so that a key found is found again."""
        return self._tree.rotations

    def find_or_add(self, key: int) -> tuple[int, bool]:
        """The node whose key is found equal to ``key`` (and False), else a node of ``key``
        added where the walk ended (and True); :attr:`way` is the walk's."""
        tree, keys, compare = self._tree, self.keys, self._compare
        left, right = tree.child
        parent, side = _NIL, 0
        at = tree.root
        way = []
        while at != _NIL:
            way.append(at)
            order = compare(keys[at], key)
            if not order:
                self.way = tuple(way)
                return at, False
            parent = at
            if order < 0:
                side, at = 0, left[at]
            else:
                side, at = 1, right[at]
        keys.append(key)
        node = tree.add(parent, side)
        way.append(node)
        self.way = tuple(way)
        return node, True

    def unturned(self, way: tuple[int, ...], since: int) -> bool:
        """Whether no rotation after the ``since``-th relinked a node of ``way`` (nor the
        root): a walk that took it then takes it again (a node added since hangs below the
        ways that end at other nodes)."""
        tree = self._tree
        assert tree.turned is not None
        if tree.root_turned > since:
            return False
        return not way or max(map(tree.turned.__getitem__, way)) <= since

    def in_order(self) -> list[int]:
        """The nodes from the leftmost (rb_first, rb_next)."""
        return self._tree.in_order()


def rb_order(count: int, goes_left: Callable[[int, int], bool]) -> list[int]:
    """The order of ``count`` items inserted one after the other (0 first) into a Linux
    red-black tree, each left of a node ``at`` it meets where ``goes_left(item, at)``, else
    right: their order after rb_first and rb_next.  Where ``goes_left`` is no total order
    (perf's comparisons of hist entries that give up between threads), the tree's shape
    decides it, as it does in perf."""
    tree = _RbTree([], count)
    for item in range(count):
        tree.insert_where(item, goes_left)
    return tree.in_order()


# -- the table and its lookups -------------------------------------------------------------------


class PerfSymbols:
    """A dso's symbols as perf has them once loaded: ``starts``, ``ends`` (file offsets) and
    ``names``, in start order; :meth:`find_many` gives the symbol perf names each address
    with (perf's map_ip address: ``pc - map start + pgoff``)."""

    def __init__(
        self,
        starts: npt.NDArray[np.uint64],
        ends: npt.NDArray[np.uint64],
        names: list[str],
        shape: _Shape | None = None,
        numbers: npt.NDArray[np.int64] | None = None,
    ) -> None:
        self.starts, self.ends, self.names = starts, ends, names
        self._shape = shape
        #: Each symbol's number in the order perf added them (its place in its table).
        self.numbers = numbers if numbers is not None else np.arange(len(names))
        self._starts_list: list[int] = starts.tolist()
        self._spans = _tangles(starts, ends)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def plain(self) -> bool:
        """No two symbols overlap: the tree's shape decides nothing."""
        return not len(self._spans[0])

    def find_many(self, addresses: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """The index of the symbol perf names each address with (-1: none): one search over
        the starts, and perf's tree walk for the addresses among overlapping symbols."""
        addresses = np.asarray(addresses, dtype=np.uint64)
        if not len(self.starts):
            return np.full(len(addresses), -1, dtype=np.int64)
        at = np.searchsorted(self.starts, addresses, side="right").astype(np.int64) - 1
        safe = np.maximum(at, 0)
        start, end = self.starts[safe], self.ends[safe]
        inside = (at >= 0) & ((addresses < end) | ((addresses == start) & (start == end)))
        out = np.where(inside, at, -1)
        lows, highs = self._spans
        if self._shape is not None and len(lows):
            span = np.searchsorted(lows, addresses, side="right").astype(np.int64) - 1
            held = (span >= 0) & (addresses < highs[np.maximum(span, 0)])
            for position in np.flatnonzero(held).tolist():
                out[position] = self._shape.find(int(addresses[position]))
        return out

    def name_of(self, index: int) -> str:
        return self.names[index]

    def parts(self) -> list[bytes]:
        """The table as bytes, for the cache (:meth:`from_parts` reads them back): starts,
        ends and numbers (little-endian 64-bit words), the names (a JSON list), and what
        rebuilding perf's tree takes where symbols overlap (every symbol's start and end,
        the operations), empty where none do."""
        shape = self._shape if not self.plain else None
        return [
            self.starts.astype(_U64).tobytes(),
            self.ends.astype(_U64).tobytes(),
            np.asarray(self.numbers, dtype=_I64).tobytes(),
            json.dumps(self.names).encode(),
            shape.starts.astype(_U64).tobytes() if shape is not None else b"",
            shape.ends.astype(_U64).tobytes() if shape is not None else b"",
            np.asarray(shape.operations, dtype=_I64).tobytes() if shape is not None else b"",
        ]

    @classmethod
    def from_parts(cls, parts: Sequence[bytes | memoryview]) -> PerfSymbols:
        """The table :meth:`parts` gave (or views of them: the table keeps none); ValueError
        when the parts do not make one."""
        if len(parts) != 7 or any(len(part) % 8 for i, part in enumerate(parts) if i != 3):
            raise ValueError("not the parts of a symbol table")
        starts, ends = np.frombuffer(parts[0], _U64), np.frombuffer(parts[1], _U64)
        numbers = np.frombuffer(parts[2], _I64)
        names = json.loads(bytes(parts[3]))
        count = len(starts)
        if (
            len(ends) != count or len(numbers) != count
            or not isinstance(names, list) or len(names) != count
            or not set(map(type, names)) <= {str}
        ):  # fmt: skip
            raise ValueError("not the parts of a symbol table")
        shape = None
        all_starts, all_ends = np.frombuffer(parts[4], _U64), np.frombuffer(parts[5], _U64)
        operations = np.frombuffer(parts[6], _I64)
        if len(all_starts):
            total = len(all_starts)
            if (
                len(all_ends) != total
                or bool(((operations < -total) | (operations >= total)).any())
                or (count and not 0 <= int(numbers.min()) <= int(numbers.max()) < total)
            ):  # fmt: skip
                raise ValueError("not the parts of a symbol table")
            shape = _Shape(all_starts.astype(np.uint64), all_ends.astype(np.uint64),
                           operations.tolist(), numbers.tolist())  # fmt: skip
        return cls(starts.astype(np.uint64), ends.astype(np.uint64), names, shape,
                   numbers.astype(np.int64))  # fmt: skip

    def start_of(self, index: int) -> int:
        return self._starts_list[index]


def _tangles(
    starts: npt.NDArray[np.uint64], ends: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """The address ranges where symbols overlap, [low, high): runs of symbols (in start
    order) each of which starts below the furthest end of those before it, an empty symbol
    holding its own start.  Outside them an address has at most one symbol that holds it,
    which perf's tree walk finds whatever the tree's shape."""
    empty = np.zeros(0, dtype=np.uint64)
    if len(starts) < 2:
        return empty, empty
    held = np.maximum(ends, starts + np.uint64(1))  # an empty symbol holds its start
    reach = np.maximum.accumulate(held)
    new = np.append(True, starts[1:] >= reach[:-1])
    firsts = np.flatnonzero(new)
    lasts = np.append(firsts[1:], len(starts)) - 1
    runs = lasts > firsts
    return starts[firsts[runs]], reach[lasts[runs]]


__all__ = [
    "STB_GLOBAL",
    "STB_LOCAL",
    "STB_WEAK",
    "Candidate",
    "PerfSymbols",
    "RbEntries",
    "SymbolSet",
    "choose_best_symbol",
    "rb_order",
]
