"""The processes of a recording, as its side-band records build them: each process's mapped
modules and each thread's command name, at any point of the recording.

perf's own bookkeeping (util/machine.c) is followed where it matters for user stacks:

* MMAP and MMAP2 of user code map a file into the process: a later mapping replaces what it
  covers of earlier ones.  Mappings without execute permission (MMAP2 ``prot``, MMAP's
  PERF_RECORD_MISC_MMAP_DATA) hold no code and are left out.  Executable anonymous memory is
  JIT code, the module ``/tmp/perf-PID.map`` (:func:`pysframe.perf.symbols.perf_map_dso`);
* COMM with PERF_RECORD_MISC_COMM_EXEC is an exec: perf 6.1 keeps the process's mappings
  (util/thread.c __thread__set_comm only flushes its unwinding caches), and the new
  program's MMAP records replace what they cover: a sample taken in the execve call itself
  is still found in the old program's libc;
* FORK of a new process (pid other than the parent's) gives it a copy of the parent's
  mappings and command name (machine__process_fork_event); a new thread shares its process's;
* a thread's command name is its last COMM (a new thread's, its parent thread's at the FORK,
  whatever an earlier thread of the same number was named); the idle
  task (pid and tid 0, one per CPU, which no COMM names) is ``swapper`` from the start
  (util/machine.c machine__idle_thread, which perf_session__process_events calls before the
  first record), and a thread nothing named is ``:TID`` (util/thread.c thread__new).

Each process's mappings are an :class:`~pysframe.unwind.AddressSpace` (one PC, or many at
once); the modules are numbered across processes (:attr:`AddressSpaces.modules`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..unwind import AddressSpace, Module, ModuleInfo
from .layout import MISC_MMAP_DATA, MISC_USER
from .modules import ModuleFinder
from .records import CommEvent, MmapEvent, SideBandEvent, TaskEvent
from .symbols import perf_map_dso

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: mmap(2) PROT_EXEC.
PROT_EXEC = 0x4
#: The idle task's thread ID and the command name perf gives it (util/machine.c
#: machine__idle_thread).
IDLE_TID = 0
IDLE_COMM = "swapper"


class AddressSpaces:
    """Every process of a recording, updated record by record (:meth:`apply`)."""

    def __init__(self, finder: ModuleFinder) -> None:
        self.finder = finder
        #: Numbers the modules of every process alike.
        self._numbering = AddressSpace()
        self._spaces: dict[int, AddressSpace] = {}
        #: Each thread's command name: the idle task's named by perf before any record.
        self._comms: dict[int, str] = {IDLE_TID: IDLE_COMM}

    @property
    def modules(self) -> list[Module]:
        """Every module met, by number."""
        return self._numbering.modules

    def apply(self, event: SideBandEvent) -> None:
        """Take one side-band record into account."""
        if isinstance(event, MmapEvent):
            self._mmap(event)
        elif isinstance(event, CommEvent):
            self._comms[event.tid] = event.comm
        elif isinstance(event, TaskEvent) and event.fork:
            if event.pid != event.ppid and event.ppid in self._spaces:
                self._spaces[event.pid] = self._spaces[event.ppid].copy()
            # A new thread, whatever had its number before (machine__process_fork_event
            # removes it): its parent thread's name where it has one (thread__fork), else
            # none (``:TID``).
            parent = self._comms.get(event.ptid)
            if parent is not None:
                self._comms[event.tid] = parent
            else:
                self._comms.pop(event.tid, None)

    def changes_lookups(self, event: SideBandEvent) -> bool:
        """Whether ``event`` can change which module a PC already mapped is in: a mapping
        over addresses the process maps already.  Other records (new mappings of unmapped
        addresses, forks of new processes, exits, names, execs) change nothing for code that
        ran before them."""
        if not isinstance(event, MmapEvent):
            return False
        space = self._spaces.get(event.pid)
        return space is not None and space.overlaps(event.start, event.start + event.length)

    def _mmap(self, event: MmapEvent) -> None:
        if event.cpumode != MISC_USER or event.pid < 0:
            return
        if event.prot is not None:
            if not event.prot & PROT_EXEC:
                return
        elif event.misc & MISC_MMAP_DATA:
            return
        start, end = event.start, event.start + event.length
        if end >= 1 << 64:
            # perf's map__new: the end wraps (u64) to at most the start, and no address is
            # ever found in the map (maps__find: start <= ip < end); nor is one here
            return
        # JIT code: the dso /tmp/perf-PID.map, at its own addresses (perf's map__new).
        jit = perf_map_dso(event.filename, event.pid, event.prot, event.flags or 0)
        filename, pgoff = (event.filename, event.pgoff) if jit is None else (jit, start)
        module = self.finder.module(filename, start, end, pgoff, event.build_id)
        space = self._spaces.get(event.pid)
        if space is None:
            space = self._spaces[event.pid] = AddressSpace(sharing=self._numbering)
        if module is not None:
            space.map(start, end, module, pgoff - start)

    # -- lookups ----------------------------------------------------------------------------------
    def mappings_at(
        self, pid: int, pcs: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
        """For each PC of process ``pid``: the number of the module holding it (-1: none), and
        what turns it into an address in the file (perf's map_ip: ``pc + delta``)."""
        import numpy as np

        space = self._spaces.get(pid)
        if space is None:
            return np.full(len(pcs), -1, dtype=np.int64), np.zeros(len(pcs), dtype=np.uint64)
        return space.mappings_at(pcs)

    def find_module(self, pid: int) -> Callable[[int], ModuleInfo | None]:
        """The unwinder's ``find_module`` in process ``pid``."""
        space = self._spaces.get(pid)
        if space is None:
            return _nowhere
        return space

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
        """The thread's command name (perf's ``:TID`` for a thread it never named, util/thread.c
        thread__new)."""
        return self._comms.get(tid, f":{tid}")


def _nowhere(pc: int) -> ModuleInfo | None:
    return None


__all__ = ["PROT_EXEC", "AddressSpaces"]
