"""The processes of a recording, as its side-band records build them: each process's mapped
modules and each thread's command name, at any point of the recording.

perf's own bookkeeping (util/machine.c) is followed where it matters for user stacks:

* MMAP and MMAP2 of user code map a file into the process: a later mapping replaces what it
  covers of earlier ones.  Mappings without execute permission (MMAP2 ``prot``, MMAP's
  PERF_RECORD_MISC_MMAP_DATA) hold no code and are left out.  Executable anonymous memory is
  JIT code, the module ``/tmp/perf-PID.map`` (:func:`pysframe.perf.symbols.perf_map_dso`);
* COMM with PERF_RECORD_MISC_COMM_EXEC is an exec: the process's mappings are gone;
* FORK of a new process (pid other than the parent's) gives it a copy of the parent's
  mappings and command name (machine__process_fork_event); a new thread shares its process's;
* a thread's command name is its last COMM (a new thread's, its parent thread's).

Lookups are in bulk: :meth:`AddressSpaces.modules_at` gives, for many PCs of one process, the
index of the module holding each (numpy ``searchsorted`` over the process's sorted mappings).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .layout import MISC_MMAP_DATA, MISC_USER
from .modules import Module, ModuleFinder
from .records import CommEvent, MmapEvent, SideBandEvent, TaskEvent
from .symbols import perf_map_dso

if TYPE_CHECKING:
    import numpy as np

#: mmap(2) PROT_EXEC.
PROT_EXEC = 0x4


@dataclass(slots=True)
class _Space:
    """One process's mappings: [start, end) -> module id and the mapping's file offset less
    its start (perf's map_ip: an address in the file is ``pc + delta``), sorted and not
    overlapping."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    modules: list[int] = field(default_factory=list)
    deltas: list[int] = field(default_factory=list)
    #: numpy copies of the lists, made when first looked up after a change.
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def copy(self) -> _Space:
        return _Space(list(self.starts), list(self.ends), list(self.modules), list(self.deltas))

    def insert(self, start: int, end: int, module: int, delta: int) -> None:
        """Map ``[start, end)`` to ``module``, cutting what it covers of older mappings."""
        self.arrays = None
        starts, ends = self.starts, self.ends
        at = bisect.bisect_left(ends, start + 1)  # the first mapping that ends after start
        kept: list[tuple[int, int, int, int]] = []
        stop = at
        while stop < len(starts) and starts[stop] < end:
            old = (self.modules[stop], self.deltas[stop])
            if starts[stop] < start:
                kept.append((starts[stop], start, *old))
            if ends[stop] > end:
                kept.append((end, ends[stop], *old))
            stop += 1
        pieces = sorted([*kept, (start, end, module, delta)])
        starts[at:stop] = [p[0] for p in pieces]
        ends[at:stop] = [p[1] for p in pieces]
        self.modules[at:stop] = [p[2] for p in pieces]
        self.deltas[at:stop] = [p[3] for p in pieces]

    def lookup(self, pcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The module id holding each PC (-1 for none) and its mapping's delta."""
        import numpy as np

        if self.arrays is None:
            self.arrays = (
                np.array(self.starts, dtype=np.uint64),
                np.array(self.ends, dtype=np.uint64),
                np.array(self.modules, dtype=np.int64),
                np.array([d & ((1 << 64) - 1) for d in self.deltas], dtype=np.uint64),
            )
        starts, ends, modules, deltas = self.arrays
        if not len(starts):
            return np.full(len(pcs), -1, dtype=np.int64), np.zeros(len(pcs), dtype=np.uint64)
        at = np.searchsorted(starts, pcs, side="right").astype(np.int64) - 1
        safe = np.maximum(at, 0)
        found = (at >= 0) & (pcs < ends[safe])
        return np.where(found, modules[safe], -1), np.where(found, deltas[safe], 0)

    def module_at(self, pc: int) -> int:
        """:meth:`lookup` of one PC, without numpy."""
        at = bisect.bisect_right(self.starts, pc) - 1
        return self.modules[at] if at >= 0 and pc < self.ends[at] else -1

    def mapping_at(self, pc: int) -> tuple[int, int, int] | None:
        """(start, module id, delta) of the mapping holding ``pc``, or None."""
        at = bisect.bisect_right(self.starts, pc) - 1
        if at < 0 or pc >= self.ends[at]:
            return None
        return self.starts[at], self.modules[at], self.deltas[at]


class AddressSpaces:
    """Every process of a recording, updated record by record (:meth:`apply`)."""

    def __init__(self, finder: ModuleFinder) -> None:
        self.finder = finder
        #: Every module met, by id.
        self.modules: list[Module] = []
        self._module_ids: dict[int, int] = {}
        self._spaces: dict[int, _Space] = {}
        self._comms: dict[int, str] = {}

    def apply(self, event: SideBandEvent) -> None:
        """Take one side-band record into account."""
        if isinstance(event, MmapEvent):
            self._mmap(event)
        elif isinstance(event, CommEvent):
            if event.exec:
                self._spaces[event.pid] = _Space()
            self._comms[event.tid] = event.comm
        elif isinstance(event, TaskEvent) and event.fork:
            if event.pid != event.ppid and event.ppid in self._spaces:
                self._spaces[event.pid] = self._spaces[event.ppid].copy()
            parent = self._comms.get(event.ptid)
            if parent is not None:
                self._comms.setdefault(event.tid, parent)

    def changes_lookups(self, event: SideBandEvent) -> bool:
        """Whether ``event`` can change which module a PC already mapped is in: an exec, or a
        mapping over addresses the process maps already.  Other records (new mappings of
        unmapped addresses, forks of new processes, exits, names) change nothing for code
        that ran before them."""
        if isinstance(event, CommEvent):
            return event.exec
        if not isinstance(event, MmapEvent):
            return False
        space = self._spaces.get(event.pid)
        if space is None or not space.starts:
            return False
        at = bisect.bisect_right(space.starts, event.start + event.length - 1) - 1
        return at >= 0 and space.ends[at] > event.start

    def _mmap(self, event: MmapEvent) -> None:
        if event.cpumode != MISC_USER or event.pid < 0:
            return
        if event.prot is not None:
            if not event.prot & PROT_EXEC:
                return
        elif event.misc & MISC_MMAP_DATA:
            return
        start, end = event.start, event.start + event.length
        # JIT code: the dso /tmp/perf-PID.map, at its own addresses (perf's map__new).
        jit = perf_map_dso(event.filename, event.pid, event.prot, event.flags or 0)
        filename, pgoff = (event.filename, event.pgoff) if jit is None else (jit, start)
        module = self.finder.module(filename, start, end, pgoff, event.build_id)
        space = self._spaces.setdefault(event.pid, _Space())
        if module is None:
            return
        key = id(module)
        number = self._module_ids.get(key)
        if number is None:
            number = self._module_ids[key] = len(self.modules)
            self.modules.append(module)
        space.insert(start, end, number, pgoff - start)

    # -- lookups ----------------------------------------------------------------------------------
    def modules_at(self, pid: int, pcs: np.ndarray) -> np.ndarray:
        """The id of the module holding each PC of process ``pid`` (-1: none)."""
        return self.mappings_at(pid, pcs)[0]

    def mappings_at(self, pid: int, pcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each PC of process ``pid``: the id of the module holding it (-1: none), and
        what turns it into an address in the file (perf's map_ip: ``pc + delta``)."""
        import numpy as np

        space = self._spaces.get(pid)
        if space is None:
            return np.full(len(pcs), -1, dtype=np.int64), np.zeros(len(pcs), dtype=np.uint64)
        return space.lookup(pcs)

    def module_at(self, pid: int, pc: int) -> Module | None:
        """The module holding ``pc`` in process ``pid``, or None."""
        space = self._spaces.get(pid)
        number = -1 if space is None else space.module_at(pc)
        return self.modules[number] if number >= 0 else None

    def mapping_start(self, pid: int, pc: int, module: int, delta: int) -> int | None:
        """Where the mapping of ``module`` holding ``pc`` in process ``pid`` starts (perf's
        map start, a piece's own once a later mapping cut it), when it is still the one
        with ``delta``; else None."""
        space = self._spaces.get(pid)
        found = None if space is None else space.mapping_at(pc)
        if found is None or found[1] != module or (found[2] - delta) % (1 << 64):
            return None
        return found[0]

    def comm(self, tid: int) -> str:
        """The thread's command name (perf's ``:TID`` for a thread it never named)."""
        return self._comms.get(tid, f":{tid}")


__all__ = ["PROT_EXEC", "AddressSpaces"]
