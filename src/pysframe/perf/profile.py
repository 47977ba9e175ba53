"""A profile: samples, each with its stack of named frames, as the writers take it.

The batch unwinder (:mod:`pysframe.perf.unwind`) turns a recording's samples into a
:class:`Profile`; the writers (:mod:`pysframe.perf.report`) turn a profile into what profiler
users open: a top table, folded stacks, speedscope, pprof, a flame graph, JSON.  Several
recordings merge into one profile (:meth:`Profile.merge`).

Frames are interned (:class:`FrameInfo`, one per distinct (module, address)) and stacks too
(one tuple of frame ids per distinct stack, innermost frame first, kernel frames before user
frames, as ``perf script`` prints them).  Samples are columns of equal length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..dataclass import dataclass

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The module name perf gives kernel frames.
KERNEL_MODULE = "[kernel.kallsyms]"
#: What perf prints for a frame without a symbol or a module.
UNKNOWN = "[unknown]"


@dataclass(frozen=True, slots=True)
class FrameInfo:
    """One location: ``address`` in ``module`` (a path, ``[kernel.kallsyms]``, ``[vdso]``, or
    ``[unknown]``), named ``symbol`` (None: no symbol) at ``offset`` from its start.

    ``address`` is the address as the process saw it (for user frames) or the kernel address;
    ``module_address`` is the same address in the module's file (what ``perf script`` prints
    for user frames of position-independent modules)."""

    address: int
    module: str
    symbol: str | None = None
    offset: int = 0
    module_address: int | None = None
    kernel: bool = False
    #: An inlined function at the address (``perf script --inline``): not a frame of its own
    #: on the stack, shown before the function it was inlined into.
    inlined: bool = False
    #: Source file and line, when asked for and known.
    file: str | None = None
    line: int | None = None
    #: Of a user frame without a symbol: its address as the process saw it (perf's
    #: callchain address, which perf report names such a caller by: ``0x6456ee`` in a
    #: non-PIE executable whose ``address`` in the file is ``0x2456ee``).  None elsewhere
    #: (kernel frames, frames without a module and named frames need none: their
    #: ``address`` is it, or their symbol names them).
    runtime_address: int | None = None
    #: Of an inlined function: the symbol that holds the address (perf's base symbol of an
    #: inline frame, util/srcline.c new_inline_sym), which names the sample's own entry
    #: where this is its innermost frame.  perf names the function that holds the inlined
    #: ones by its DWARF name when that is not its symbol's (``init_cpu_features`` in
    #: ``init_cpu_features.constprop.0``), as an inlined function of that symbol.
    base_symbol: str | None = None
    #: The cookie of a deferred user callchain that was not merged into the sample (Linux
    #: 6.19): ``perf script`` prints ``(cookie)`` for its name (util/evsel_fprintf.c
    #: sample__fprintf_callchain); elsewhere it is an unnamed frame.
    cookie: bool = False

    @property
    def name(self) -> str:
        """The function's name, or perf's ``[unknown]``."""
        return self.symbol if self.symbol is not None else UNKNOWN


@dataclass(frozen=True, slots=True)
class DeferredChain:
    """A deferred user callchain shown on its own, as ``perf script --no-merge-callchain``
    shows a CALLCHAIN_DEFERRED record: thread ``tid`` of ``pid`` (``comm``, an index into
    :attr:`Profile.comms`) at ``time``, its ``cookie``, and its frames (``stack``, an index
    into :attr:`Profile.stacks`)."""

    time: int
    pid: int
    tid: int
    comm: int
    cookie: int
    stack: int


_Key = TypeVar("_Key")


def interned(index: dict[_Key, int], items: list[_Key], key: _Key) -> int:
    """The number of ``key`` in ``items`` (``index`` maps each item to its number), appended
    when new: the ids of a profile's tables and of pprof's string table."""
    found = index.get(key)
    if found is None:
        found = index[key] = len(items)
        items.append(key)
    return found


@dataclass(slots=True)
class Profile:
    """Samples with their stacks.

    Per sample (columns of equal length): ``stack`` (an index into :attr:`stacks`), ``pid``,
    ``tid``, ``time`` (ns), ``cpu``, ``period`` (the sample's weight in the event's unit),
    ``comm`` (an index into :attr:`comms`) and ``event`` (an index into :attr:`events`).
    """

    frames: list[FrameInfo] = field(default_factory=list)
    #: Each stack: frame ids, innermost first (kernel frames, then user frames).
    stacks: list[tuple[int, ...]] = field(default_factory=list)
    comms: list[str] = field(default_factory=list)
    #: Event names (``cpu-clock``, ``cycles:u``...) and the unit of their period
    #: (``nanoseconds`` for the software clocks, else ``events``).
    events: list[tuple[str, str]] = field(default_factory=list)
    stack: list[int] = field(default_factory=list)
    pid: list[int] = field(default_factory=list)
    tid: list[int] = field(default_factory=list)
    time: list[int] = field(default_factory=list)
    cpu: list[int] = field(default_factory=list)
    period: list[int] = field(default_factory=list)
    comm: list[int] = field(default_factory=list)
    event: list[int] = field(default_factory=list)
    #: Where the samples came from (the recordings' paths), for the writers' titles.
    sources: list[str] = field(default_factory=list)
    #: The GNU build ID (lowercase hex) of each module that has one, by module name, for the
    #: writers that carry it (pprof's Mapping.build_id).
    build_ids: dict[str, str] = field(default_factory=dict)
    #: Samples the kernel dropped (PERF_RECORD_LOST and LOST_SAMPLES), for the top table's
    #: "Total Lost Samples" line.
    lost_samples: int = 0
    #: Deferred user callchains left apart from their samples (``--no-merge-callchain``).
    deferred: list[DeferredChain] = field(default_factory=list)
    #: Samples perf delivers after their time (their deferred user callchain came later):
    #: sample index -> the time it is delivered at, the place ``perf script`` prints it.
    delivered: dict[int, int] = field(default_factory=dict)
    #: The events whose samples carry no callchain (no PERF_SAMPLE_CALLCHAIN): perf report
    #: shows neither call graphs nor children by default when no event has one, and perf
    #: script prints such a sample's IP on its line.  (Stacks come from callchains: a profile
    #: made otherwise has every event here empty.)
    events_without_callchain: set[str] = field(default_factory=set)

    def has_callchains(self, event: str | None = None) -> bool:
        """Whether the samples of ``event`` (None: of any event) carry callchains."""
        if event is not None:
            return event not in self.events_without_callchain
        return any(name not in self.events_without_callchain for name, _ in self.events)
    _frame_ids: dict[FrameInfo, int] = field(default_factory=dict, repr=False)
    _stack_ids: dict[tuple[int, ...], int] = field(default_factory=dict, repr=False)
    _comm_ids: dict[str, int] = field(default_factory=dict, repr=False)
    _event_ids: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)

    #: The per-sample columns.
    COLUMNS: ClassVar[tuple[str, ...]] = (
        "stack", "pid", "tid", "time", "cpu", "period", "comm", "event",
    )  # fmt: skip

    def __len__(self) -> int:
        return len(self.stack)

    # -- building -------------------------------------------------------------------------------
    def frame_id(self, frame: FrameInfo) -> int:
        """The id of ``frame``, added when new."""
        return interned(self._frame_ids, self.frames, frame)

    def stack_id(self, frames: Sequence[int]) -> int:
        """The id of the stack of frame ids ``frames`` (innermost first), added when new."""
        return interned(self._stack_ids, self.stacks, tuple(frames))

    def comm_id(self, comm: str) -> int:
        return interned(self._comm_ids, self.comms, comm)

    def event_id(self, name: str, unit: str) -> int:
        return interned(self._event_ids, self.events, (name, unit))

    def add(
        self,
        stack: int,
        *,
        pid: int,
        tid: int,
        time: int,
        cpu: int,
        period: int,
        comm: int,
        event: int,
    ) -> None:
        """Add one sample (ids from :meth:`stack_id`, :meth:`comm_id`, :meth:`event_id`)."""
        self.stack.append(stack)
        self.pid.append(pid)
        self.tid.append(tid)
        self.time.append(time)
        self.cpu.append(cpu)
        self.period.append(period)
        self.comm.append(comm)
        self.event.append(event)

    def extend(
        self,
        stack: list[int],
        *,
        pid: list[int],
        tid: list[int],
        time: list[int],
        cpu: list[int],
        period: list[int],
        comm: list[int],
        event: list[int],
    ) -> None:
        """Add many samples, column by column (as :meth:`add` adds one)."""
        self.stack += stack
        self.pid += pid
        self.tid += tid
        self.time += time
        self.cpu += cpu
        self.period += period
        self.comm += comm
        self.event += event

    def merge(self, other: Profile) -> None:
        """Add every sample of ``other`` (another recording) to this profile."""
        empty = not (self.frames or self.stacks or self.comms or self.events)
        indexed = (
            len(other._frame_ids) == len(other.frames)
            and len(other._stack_ids) == len(other.stacks)
            and len(other._comm_ids) == len(other.comms)
            and len(other._event_ids) == len(other.events)
        )
        if empty and indexed:
            # Into empty tables, from tables their indexes cover: every id stays what it is.
            self.frames += other.frames
            self.stacks += other.stacks
            self.comms += other.comms
            self.events += other.events
            self._frame_ids.update(other._frame_ids)
            self._stack_ids.update(other._stack_ids)
            self._comm_ids.update(other._comm_ids)
            self._event_ids.update(other._event_ids)
            self.extend(
                other.stack, pid=other.pid, tid=other.tid, time=other.time, cpu=other.cpu,
                period=other.period, comm=other.comm, event=other.event,
            )  # fmt: skip
            self._merge_rest(other, list(range(len(other.stacks))), list(range(len(other.comms))))
            return
        frame_map = [self.frame_id(frame) for frame in other.frames]
        stack_map = [self.stack_id([frame_map[f] for f in stack]) for stack in other.stacks]
        comm_map = [self.comm_id(comm) for comm in other.comms]
        event_map = [self.event_id(name, unit) for name, unit in other.events]
        self.extend(
            [stack_map[stack] for stack in other.stack], pid=other.pid, tid=other.tid,
            time=other.time, cpu=other.cpu, period=other.period,
            comm=[comm_map[comm] for comm in other.comm],
            event=[event_map[event] for event in other.event],
        )  # fmt: skip
        self._merge_rest(other, stack_map, comm_map)

    def _merge_rest(self, other: Profile, stack_map: list[int], comm_map: list[int]) -> None:
        """What :meth:`merge` adds besides the samples (their ids mapped as given)."""
        self.sources += other.sources
        self.events_without_callchain |= other.events_without_callchain
        for module, build_id in other.build_ids.items():
            self.build_ids.setdefault(module, build_id)
        self.lost_samples += other.lost_samples
        base = len(self) - len(other)
        self.delivered.update({base + row: time for row, time in other.delivered.items()})
        self.deferred += [
            replace(chain, comm=comm_map[chain.comm], stack=stack_map[chain.stack])
            for chain in other.deferred
        ]

    # -- reading --------------------------------------------------------------------------------
    def column(self, name: str, dtype: type[np.integer[Any]] | None = None) -> npt.NDArray[Any]:
        """The per-sample column ``name`` (of :attr:`COLUMNS`) as a numpy array of ``dtype``
        (int64 by default; np.uint64 for times and periods, which may reach 2**64 - 1): the
        writers work on these, never sample by sample."""
        import numpy as np

        values = getattr(self, name)
        if name in ("comm", "event") and len(self.comms if name == "comm" else self.events) == 1:
            # ids into a table of one entry: all 0, not read one by one
            return np.zeros(len(values), dtype=dtype or np.int64)
        return np.fromiter(values, dtype=dtype or np.int64, count=len(values))

    def stack_frames(self, stack: int) -> list[FrameInfo]:
        """The frames of stack ``stack``, innermost first."""
        return [self.frames[f] for f in self.stacks[stack]]

    def samples(self) -> Iterator[int]:
        return iter(range(len(self)))

    def _sharing(self) -> Profile:
        """An empty profile with the same frames, stacks, names and recordings."""
        chosen = Profile(
            self.frames, self.stacks, self.comms, self.events, sources=list(self.sources),
            build_ids=dict(self.build_ids), lost_samples=self.lost_samples,
            deferred=list(self.deferred),
            events_without_callchain=set(self.events_without_callchain),
        )  # fmt: skip
        chosen._frame_ids, chosen._stack_ids = self._frame_ids, self._stack_ids
        chosen._comm_ids, chosen._event_ids = self._comm_ids, self._event_ids
        return chosen

    def take(self, indices: Iterable[int]) -> Profile:
        """A profile of the samples at ``indices``, in that order (the same frames, stacks and
        names): one list comprehension per column, for the filters' bulk selection."""
        chosen = self._sharing()
        order = list(indices)
        for name in self.COLUMNS:
            column = getattr(self, name)
            setattr(chosen, name, [column[index] for index in order])
        if self.delivered:
            chosen.delivered = {
                new: self.delivered[old]
                for new, old in enumerate(order) if old in self.delivered
            }  # fmt: skip
        return chosen

    def where(self, keep: Iterable[bool]) -> Profile:
        """A profile of the samples ``keep`` selects (the same frames, stacks and names)."""
        chosen = self._sharing()
        for index, wanted in enumerate(keep):
            if wanted:
                if index in self.delivered:
                    chosen.delivered[len(chosen)] = self.delivered[index]
                chosen.add(
                    self.stack[index],
                    pid=self.pid[index],
                    tid=self.tid[index],
                    time=self.time[index],
                    cpu=self.cpu[index],
                    period=self.period[index],
                    comm=self.comm[index],
                    event=self.event[index],
                )
        return chosen


__all__ = ["KERNEL_MODULE", "UNKNOWN", "DeferredChain", "FrameInfo", "Profile", "interned"]
