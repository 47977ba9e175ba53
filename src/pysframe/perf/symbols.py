"""A module's symbols as perf 6.1 reads them, and the symbol it names an address with.

``perf script`` names a user frame from the symbols of its module (a "dso"), loaded once
(util/symbol.c ``dso__load``).  This module follows perf 6.1's rules, checked against the
machine's perf (tests/test_perf_names.py):

Which files (``dso__load``, util/dso.c ``dso__read_binary_type_filename``).  The candidates,
in ``binary_type_symtab`` order: the file its ``.gnu_debuglink`` names (in the current
directory, the module's directory, its ``.debug/``, ``/usr/lib/debug/<its directory>``; no
CRC check); the build-ID cache (``DEBUG_DIR/.build-id/xx/rest/elf``, ``vdso`` for the vDSO,
then ``.../debug``); ``/usr/lib/debug/PATH.debug``; ``/usr/lib/debug/PATH``;
``/usr/lib/debug/.build-id/xx/rest.debug``; the path itself (under ``--symfs``); then
``/usr/lib/debug/DIR/.debug/NAME`` and ``/usr/lib/debug/lib/...`` for ``/usr/lib/...``.
Each must be a regular ELF file with the module's build ID (the recorded one, else the
file's own) when it has one (``symsrc__init``).  The symbols come from the first with a
``.symtab`` (``syms_ss``), the PLT and section and program headers from the first with a
``.dynsym`` (``runtime_ss``); one stands for the other when only one is found.

Which symbols (util/symbol-elf.c ``dso__load_sym``): the ``.symtab`` of ``syms_ss``, then its
``.dynsym``, each pass keeping, in table order, named defined functions (``STT_FUNC``,
``STT_GNU_IFUNC``) and objects, and ``STT_NOTYPE`` labels (not ``SHN_ABS``, not hidden or
internal) in a section whose name holds ``text`` or ``data``; never a symbol of a section
without ``SHF_ALLOC``, nor an ``SHN_ABS`` one, nor an ARM/AArch64 mapping symbol (``$a``,
``$d``, ``$t``, ``$x``, alone or before a dot).  A section that is ``SHT_NOBITS`` in a debug
file is read from ``runtime_ss``.  Names are kept as stored (``memcpy@@GLIBC_2.14``) and
demangled as perf demangles them (:func:`pysframe.unwind.demangle.demangle_like_perf`).
Values become file offsets: less ``p_vaddr - p_offset`` of the ``PT_LOAD`` of
``runtime_ss`` that holds them, else ``sh_addr - sh_offset`` of their section.  A size of 0
leaves a symbol empty (``symbol__new``).

Fixups, after each pass (util/symbol.c): ``symbols__fixup_end`` (an empty symbol ends where
the next one starts; the last at the next page boundary after its start, plus a page), then
``symbols__fixup_duplicate`` (of the symbols of one address only the one
:func:`choose_best_symbol` prefers is kept).  Then ``dso__synthesize_plt_symbols``: one
``NAME@plt`` per relocation of ``.rela.plt`` (``.rel.plt``) linked to ``.dynsym`` of
``runtime_ss``, ``.plt``'s entry size apart from its file offset after a header of one
entry (AArch64: 32, then 16; ARM: 20, then 12), added with no fixup (an ``IRELATIVE``
relocation names its entry ``@plt``).

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

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..elf.image import ElfImage, ElfSection
from ..elf.layout import (
    EM_AARCH64,
    EM_ARM,
    PT_LOAD,
    SHF_ALLOC,
    SHN_ABS,
    SHN_UNDEF,
    SHT_DYNSYM,
    SHT_NOBITS,
    SHT_REL,
    SHT_RELA,
    SHT_SYMTAB,
    STT_FUNC,
    STT_GNU_IFUNC,
)
from ..elf.symbols import SymbolEntries, read_symbol_entries
from ..errors import SFrameError

if TYPE_CHECKING:
    import numpy.typing as npt

#: ELF symbol bindings and types perf tells apart (gABI).
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STT_NOTYPE, STT_OBJECT = 0, 1
STV_INTERNAL, STV_HIDDEN = 1, 2
_MASK = (1 << 64) - 1
#: symbol__new's name buffer for PLT entries (sympltname[1024]).
_PLT_NAME_BYTES = 1023
#: perf's debug directory and the places of dso__read_binary_type_filename.
USR_LIB_DEBUG = "/usr/lib/debug"


# -- choosing among the symbols of one address ---------------------------------------------------


@dataclass(frozen=True, slots=True)
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
            fixed[-1] = ((starts[-1] + np.uint64(4095)) & ~np.uint64(4095)) + np.uint64(4096)
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
        length = _signed(int(self.ends[number] - self.starts[number]))
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
            _Shape(self, numbers),
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
        self.parent[node], self.red[node] = parent, True
        self.child[0][node] = self.child[1][node] = _NIL
        if parent == _NIL:
            self.root = node
        else:
            self.child[side][parent] = node
        self._insert_color(node)

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


@dataclass(slots=True)
class _Shape:
    """What rebuilding perf's tree takes: the symbol set and its living symbols in order
    (the tree is built on the first lookup that needs it)."""

    symbols: SymbolSet
    order: list[int]
    _tree: _RbTree | None = None
    _ends: list[int] = field(default_factory=list)
    #: Table index of each symbol number.
    _index: dict[int, int] = field(default_factory=dict)

    def find(self, address: int) -> int:
        """The table index of the symbol perf's tree walk finds for ``address`` (-1: none)."""
        if self._tree is None:
            symbols = self.symbols
            self._ends = symbols.ends.tolist()
            tree = _RbTree(symbols.starts.tolist(), len(symbols))
            for operation in symbols.operations:
                if operation >= 0:
                    tree.insert(operation)
                else:
                    tree.erase(~operation)
            self._tree = tree
            self._index = {number: at for at, number in enumerate(self.order)}
        found = self._tree.find(address, self._ends)
        return self._index[found] if found >= 0 else -1


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
        self._ends_list: list[int] = ends.tolist()
        self._spans = _tangles(starts, ends)
        self._span_lows: list[int] = self._spans[0].tolist()
        self._span_highs: list[int] = self._spans[1].tolist()

    def __len__(self) -> int:
        return len(self.names)

    @property
    def plain(self) -> bool:
        """No two symbols overlap: the tree's shape decides nothing."""
        return not len(self._spans[0])

    def find(self, address: int) -> int:
        """The index of the symbol perf names ``address`` with (-1: none), one address at a
        time: the reference for :meth:`find_many`."""
        span = _bisect_right(self._span_lows, address) - 1
        if self._shape is not None and span >= 0 and address < self._span_highs[span]:
            return self._shape.find(address)
        at = _bisect_right(self._starts_list, address) - 1
        if at < 0:
            return -1
        start, end = self._starts_list[at], self._ends_list[at]
        return at if address < end or address == start == end else -1

    def find_many(self, addresses: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """:meth:`find` of each address: one search over the starts, and perf's tree walk
        for the addresses among overlapping symbols."""
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


def _bisect_right(values: list[int], value: int) -> int:
    import bisect

    return bisect.bisect_right(values, value)


# -- reading a dso's files as perf reads them ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class SymbolSource:
    """A file a dso's symbols may come from: its name, and its bytes when it is no file
    (this machine's vDSO)."""

    path: str
    data: bytes | None = None

    def open(self) -> ElfImage:
        if self.data is not None:
            return ElfImage.from_bytes(self.path, self.data)
        return ElfImage.open(self.path)


def _regular_file(path: str) -> bool:
    """is_regular_file (util/util.c): stat (following links) says a regular file."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def join_symfs(symfs: str | None, path: str) -> str:
    """__symbol__join_symfs (path__join): ``--symfs`` before a path, a ``/`` between them
    when neither has one."""
    if not symfs:
        return path
    between = "" if symfs.endswith("/") or path.startswith("/") else "/"
    return f"{symfs}{between}{path}"


def candidate_files(
    name: str,
    build_id: bytes | None,
    *,
    debug_dir: str | None,
    symfs: str | None = None,
    vdso: bool = False,
    cwd: str | None = None,
) -> list[str]:
    """The files dso__load tries for the dso ``name`` with ``build_id``, in
    ``binary_type_symtab`` order (dso__read_binary_type_filename), those that exist as
    regular files."""
    out: list[str] = []
    path = join_symfs(symfs, name)
    # DSO_BINARY_TYPE__DEBUGLINK: the first of its places that is a regular file.
    if _regular_file(path):
        link = _debuglink(path)
        if link:
            directory = path[: path.rfind("/")] if "/" in path else ""
            for place in (
                os.path.join(cwd or os.getcwd(), link),
                f"{directory}/{link}",
                f"{directory}/.debug/{link}",
                f"{USR_LIB_DEBUG}{directory}/{link}",
            ):
                if _regular_file(place):
                    out.append(place)
                    break
    if build_id and debug_dir:
        # DSO_BINARY_TYPE__BUILD_ID_CACHE and __BUILD_ID_CACHE_DEBUGINFO (build_id_cache__
        # linkname, build_id_cache__basename): an old-style cache links the file itself.
        hexed = build_id.hex()
        link = str(Path(debug_dir).expanduser() / ".build-id" / hexed[:2] / hexed[2:])
        if _regular_file(link):
            out += [link, link]
        else:
            out += [f"{link}/{'vdso' if vdso else 'elf'}", f"{link}/{'vdso' if vdso else 'debug'}"]
    root = join_symfs(symfs, USR_LIB_DEBUG)
    out += [f"{root}{name}.debug", f"{root}{name}"]  # FEDORA_, UBUNTU_DEBUGINFO
    if build_id:  # BUILDID_DEBUGINFO
        out.append(f"{root}/.build-id/{build_id.hex()[:2]}/{build_id.hex()[2:]}.debug")
    out.append(path)  # SYSTEM_PATH_DSO
    slash = name.rfind("/")
    if slash >= 0:  # OPENEMBEDDED_DEBUGINFO
        out.append(join_symfs(symfs, f"{name[: slash + 1]}.debug{name[slash:]}"))
    if name.startswith("/usr/lib/"):  # MIXEDUP_UBUNTU_DEBUGINFO
        out.append(f"{root}{name[4:]}")
    return [candidate for candidate in out if _regular_file(candidate)]


def _debuglink(path: str) -> str | None:
    """The file name ``.gnu_debuglink`` of the ELF file at ``path`` gives (perf reads the
    name only: filename__read_debuglink)."""
    try:
        with ElfImage.open(path) as image:
            found = image.debuglink()
    except SFrameError:
        return None
    return found[0] if found else None


def same_build_id(recorded: bytes, found: bytes) -> bool:
    """dso__build_id_equal: equal, or the recorded one is the found one padded with zeros
    to 20 bytes."""
    if len(recorded) == 20 and len(recorded) > len(found):
        return recorded[: len(found)] == found and not recorded[len(found) :].strip(b"\0")
    return recorded == found


@dataclass(frozen=True, slots=True)
class DsoFiles:
    """Where perf reads a dso's symbols: ``symbols`` (syms_ss, the first candidate with a
    ``.symtab``) and ``runtime`` (runtime_ss, the first with a ``.dynsym``); each stands for
    the other when it alone is found; None when neither is."""

    symbols: SymbolSource | None
    runtime: SymbolSource | None


def choose_files(sources: Iterable[SymbolSource], build_id: bytes | None) -> DsoFiles:
    """dso__load's choice among its candidates (symsrc__init rejects a file that is no ELF
    file, or whose build ID is not ``build_id``)."""
    symbols: SymbolSource | None = None
    runtime: SymbolSource | None = None
    for source in sources:
        try:
            with source.open() as image:
                if build_id is not None:
                    found = image.build_id_as_perf()
                    if not found or not same_build_id(build_id, found):
                        continue
                has_symtab = _table_type(image, ".symtab") == SHT_SYMTAB
                has_dynsym = _table_type(image, ".dynsym") == SHT_DYNSYM
        except SFrameError:  # unreadable: symsrc__init fails, the next candidate is tried
            continue
        if symbols is None and has_symtab:
            symbols = source
        if runtime is None and has_dynsym:
            runtime = source
        if symbols is not None and runtime is not None:
            break
    return DsoFiles(symbols or runtime, runtime or symbols)


def _table_type(image: ElfImage, name: str) -> int | None:
    section = image.section(name)
    return section.type if section is not None else None


# -- dso__load_sym and dso__synthesize_plt_symbols ----------------------------------------------


def load_symbols(
    files: DsoFiles, rename: Callable[[list[str]], list[str]] | None = None
) -> PerfSymbols | None:
    """The symbols perf loads from ``files`` (dso__load_sym, then dso__synthesize_plt_symbols
    when any were found); None without files.  ElfError when a file cannot be read."""
    if files.symbols is None or files.runtime is None:
        return None
    symbols = SymbolSet(rename)
    with files.symbols.open() as syms, files.runtime.open() as runtime:
        total, failed = 0, False
        for table in (".symtab", ".dynsym"):
            wanted = SHT_SYMTAB if table == ".symtab" else SHT_DYNSYM
            if _table_type(syms, table) != wanted:
                continue
            entries = read_symbol_entries(syms, table)
            if entries is None:
                continue
            added = _load_pass(symbols, entries, syms, runtime)
            if added is None:  # a symbol of a section that is not there: perf gives up
                failed = True
                break
            if added:
                symbols.fix()
            total += added
        if total > 0 and not failed:
            _add_plt(symbols, runtime, rename)
    return symbols.table()


def _load_pass(
    symbols: SymbolSet, entries: SymbolEntries, syms: ElfImage, runtime: ElfImage
) -> int | None:
    """One dso__load_sym_internal pass over ``entries``: the symbols it adds (in table order),
    how many; None when a kept symbol names a section the file lacks (perf stops there,
    with what it added before and no fixups)."""
    named = entries.name_offsets != 0
    defined = entries.shndx != SHN_UNDEF
    types = entries.types
    function = ((types == STT_FUNC) | (types == STT_GNU_IFUNC)) & named & defined
    data = (types == STT_OBJECT) & named & defined
    label = (
        (types == STT_NOTYPE) & named & defined
        & (entries.visibility != STV_HIDDEN) & (entries.visibility != STV_INTERNAL)
    )  # fmt: skip
    kept = np.flatnonzero((function | data | label) & (entries.shndx != SHN_ABS))
    names = entries.names(kept)
    machine = syms.machine
    if machine in (EM_ARM, EM_AARCH64):
        mapping = np.array([_mapping_symbol(name) for name in names], dtype=bool)
        kept = kept[~mapping]
        names = [name for name, skip in zip(names, mapping.tolist(), strict=True) if not skip]
    if not len(kept):
        return 0
    # The section of each symbol: its own, or the runtime file's where a debug file has
    # only its header (SHT_NOBITS).
    headers = _section_table(syms.sections())
    runtime_headers = _section_table(runtime.sections())
    shndx = entries.shndx[kept]
    missing = shndx >= len(headers.alloc)
    index = np.where(missing, 0, shndx)
    alloc = headers.alloc[index] & ~missing
    nobits = headers.nobits[index] & alloc
    missing |= nobits & (shndx >= len(runtime_headers.alloc))
    bad = np.flatnonzero(missing)
    stop = int(bad[0]) if len(bad) else len(kept)
    own = np.where(nobits, 0, index)
    other = np.where(nobits & ~missing, index, 0)
    address = np.where(nobits, runtime_headers.address[other], headers.address[own])
    offset = np.where(nobits, runtime_headers.offset[other], headers.offset[own])
    text_or_data = np.where(nobits, runtime_headers.text_or_data[other],
                            headers.text_or_data[own])  # fmt: skip
    keep = alloc & (~label[kept] | text_or_data)
    keep[stop:] = False
    values = entries.values[kept]
    if machine == EM_ARM:  # a Thumb function's address has bit 0 set
        thumb = (types[kept] == STT_FUNC) & (values & np.uint64(1) != 0)
        values = values - thumb.astype(np.uint64)
    values = values - _file_deltas(runtime, values, address - offset)
    chosen = np.flatnonzero(keep)
    symbols.add(
        values[chosen], entries.sizes[kept][chosen], entries.binds[kept][chosen],
        [names[i] for i in chosen.tolist()],
    )  # fmt: skip
    return None if len(bad) else len(chosen)


@dataclass(frozen=True, slots=True)
class _Sections:
    """Section headers as arrays, by index: SHF_ALLOC, SHT_NOBITS, address, offset, and
    whether the name holds ``text`` or ``data`` (elf_sec__filter)."""

    alloc: npt.NDArray[np.bool_]
    nobits: npt.NDArray[np.bool_]
    address: npt.NDArray[np.uint64]
    offset: npt.NDArray[np.uint64]
    text_or_data: npt.NDArray[np.bool_]


def _section_table(sections: list[ElfSection]) -> _Sections:
    return _Sections(
        np.array([bool(s.flags & SHF_ALLOC) for s in sections], dtype=bool),
        np.array([s.type == SHT_NOBITS for s in sections], dtype=bool),
        np.array([s.address for s in sections], dtype=np.uint64),
        np.array([s.offset for s in sections], dtype=np.uint64),
        np.array([("text" in s.name or "data" in s.name) for s in sections], dtype=bool),
    )


def _file_deltas(
    runtime: ElfImage, values: npt.NDArray[np.uint64], section_deltas: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    """What each value loses to become a file offset: ``p_vaddr - p_offset`` of the first
    PT_LOAD of ``runtime`` holding it (elf_read_program_header), else its section's
    ``sh_addr - sh_offset``."""
    deltas = section_deltas.copy()
    unset = np.ones(len(values), dtype=bool)
    for segment in runtime.segments():
        size = max(segment.memsz, segment.filesz)
        if segment.type != PT_LOAD or not size:
            continue
        low = np.uint64(segment.vaddr)
        inside = unset & (values >= low) & (values - low < np.uint64(size))
        deltas[inside] = np.uint64((segment.vaddr - segment.offset) & _MASK)
        unset &= ~inside
    return deltas


def _mapping_symbol(name: str) -> bool:
    """An ARM or AArch64 mapping symbol: ``$a``, ``$d``, ``$t`` or ``$x``, alone or before
    a dot."""
    return len(name) >= 2 and name[0] == "$" and name[1] in "adtx" and name[2:3] in ("", ".")


#: PLT header and entry sizes perf knows by machine (dso__synthesize_plt_symbols); others:
#: .plt's sh_entsize for both.
_PLT_SIZES = {EM_ARM: (20, 12), EM_AARCH64: (32, 16), 2: (48, 12), 43: (128, 32)}


def _add_plt(
    symbols: SymbolSet, runtime: ElfImage, rename: Callable[[list[str]], list[str]] | None
) -> None:
    """dso__synthesize_plt_symbols (perf 6.1): ``NAME@plt`` for each relocation of
    ``.rela.plt`` (else ``.rel.plt``) when it is linked to ``.dynsym``: the entries of
    ``.plt`` one after another from its file offset, after a header."""
    from ..elf.relocation import relocation_symbols

    dynsym = runtime.section(".dynsym")
    if dynsym is None or dynsym.type != SHT_DYNSYM:
        return
    relocations = runtime.section(".rela.plt") or runtime.section(".rel.plt")
    plt = runtime.section(".plt")
    if relocations is None or relocations.link != dynsym.index or plt is None:
        return
    if relocations.type not in (SHT_RELA, SHT_REL) or not relocations.entsize:
        return
    entries = read_symbol_entries(runtime, ".dynsym")
    if entries is None or not entries.strings:
        return
    indexes = relocation_symbols(runtime, relocations)
    count = min(len(indexes), relocations.size // relocations.entsize)
    header, size = _PLT_SIZES.get(runtime.machine, (plt.entsize, plt.entsize))
    # An index past the table reads nothing: gelf_getsym fails and the entry takes the
    # previous one's name.
    valid = indexes[:count] < len(entries)
    picks = np.maximum.accumulate(np.where(valid, np.arange(count), -1))
    named_at = indexes[:count][np.maximum(picks, 0)].astype(np.int64)
    stored = entries.names(named_at)
    names = rename(stored) if rename is not None else stored
    texts = [
        f"{name if picks[at] >= 0 else ''}@plt".encode()[:_PLT_NAME_BYTES].decode("utf-8", "ignore")
        for at, name in enumerate(names)
    ]
    starts = plt.offset + header + size * np.arange(len(texts), dtype=np.uint64)
    symbols.add(starts, [size] * len(texts), [STB_GLOBAL] * len(texts), texts, named=True)


# -- a dso's table, found and read once --------------------------------------------------------


#: Tables read, per (chosen files' identities, demangling).
_TABLES: dict[tuple[object, ...], PerfSymbols | None] = {}


def _identity(source: SymbolSource | None) -> object:
    if source is None:
        return None
    if source.data is not None:
        return (source.path, hash(source.data), len(source.data))
    try:
        found = os.stat(source.path)
    except OSError:
        return (source.path,)
    return (source.path, found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


def dso_symbols(
    files: DsoFiles, rename: Callable[[list[str]], list[str]] | None, key: object = None
) -> PerfSymbols | None:
    """:func:`load_symbols`, cached per file version (and ``key``: how names are made);
    ElfError when the files cannot be read."""
    cache_key = (_identity(files.symbols), _identity(files.runtime), key)
    if cache_key not in _TABLES:
        if len(_TABLES) >= 64:
            _TABLES.clear()
        _TABLES[cache_key] = load_symbols(files, rename)
    return _TABLES[cache_key]


__all__ = [
    "Candidate",
    "DsoFiles",
    "PerfSymbols",
    "SymbolSet",
    "SymbolSource",
    "candidate_files",
    "choose_best_symbol",
    "choose_files",
    "dso_symbols",
    "join_symfs",
    "load_symbols",
    "same_build_id",
]
