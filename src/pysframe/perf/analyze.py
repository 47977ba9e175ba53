"""A recording made into a profile: every sample's stack walked, its frames named.

:func:`profile_recording` reads a perf.data file through (:mod:`pysframe.perf.session`):
each sample's kernel frames are its recorded callchain's, named from kallsyms
(:mod:`pysframe.perf.kernel`); its user frames are those its walk found
(:mod:`pysframe.perf.walk`), named as perf names them (:mod:`pysframe.perf.symbols`: its
symbol files, its choice among aliases, its demangling).  Frames are printed as
``perf script`` prints them: kernel frames at their address, user frames at their address in
the module's file (perf's map_ip), each return address one byte back (the call instruction,
as perf's libdw walk reports it), with ``symbol+offset`` and the module.

The result is a :class:`~pysframe.perf.profile.Profile` and :class:`WalkStats`, what the walks
did (for ``perf stats``).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import field, replace
from itertools import pairwise
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import numpy as np

from ..bounded import SlotTable
from ..dataclass import dataclass
from ..errors import SFrameError
from ..names import shown_name
from ..sources.cache import take_warnings
from ..sources.trust import Policy
from ..unwind import STOPS, StopKind, SymbolOptions, Walks
from .data import DEFAULT_CHUNK, PerfData
from .deferred import DeferredTally, deferred_cookie
from .kernel import KernelSymbols, kernel_symbols
from .layout import (
    CONTEXT_USER_DEFERRED,
    FLAG_EXCLUDE_CALLCHAIN_USER,
    MISC_CPUMODE_MASK,
    MISC_KERNEL,
    RecordType,
    SampleType,
)
from .modules import DEFAULT_DEBUG_DIR, ModuleFinder
from .profile import KERNEL_MODULE, UNKNOWN, DeferredChain, FrameInfo, Profile
from .records import DeferredCallchainEvent, LostEvent, SideBandEvent
from .samples import range_positions
from .session import WalkedChunk, walk_recording
from .spaces import AddressSpaces
from .walk import MAX_FRAMES, RecordedChains, discarded_chains, kernel_parts

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..elf.addr2line import Addr2Line, KeptSymbol
    from ..elf.addr2line_record import Record
    from .header import EventAttr

#: The unit of the period of the software clock events (cpu-clock, task-clock).
_CLOCK_EVENTS = frozenset({"cpu-clock", "task-clock"})


@dataclass(frozen=True, slots=True)
class Options:
    """How a recording is read: where its modules' files are (``debug_dir``, perf's build-ID
    cache; ``symfs``), which SFrame unwinds them, how names are written."""

    debug_dir: str | None = DEFAULT_DEBUG_DIR
    symfs: str | None = None
    policy: Policy = Policy.AUTO
    symbols: SymbolOptions = field(default_factory=SymbolOptions)
    chunk: int = DEFAULT_CHUNK
    max_frames: int = MAX_FRAMES
    #: Put perf's inline entries in place of each user frame, from DWARF (``perf script``'s
    #: default, ``--inline``).
    inline: bool = False
    #: Give each frame the srcline ``perf script -F +srcline`` prints under it (its
    #: ``file`` and ``line``; a ``file`` alone where perf prints no line).
    srcline: bool = False
    #: Stitch deferred user callchains to their samples (perf's default); False: keep them
    #: apart, as ``perf script --no-merge-callchain`` does (deferred.py).
    merge_callchains: bool = True
    #: Insert the caller a recorded frame-pointer chain left out where the recording proves
    #: it (``--fix-leaf``); says in one line what it could not insert.
    fix_leaf: bool = False
    #: Count what the walks did (:class:`WalkStats`' samples, depths, stops, stack bytes and
    #: modules: what ``perf stats`` prints); False: the commands that print the samples
    #: leave those counts at zero, and their cost out.
    count_walks: bool = True


@dataclass(slots=True)
class WalkStats:
    """What the walks of a recording did."""

    samples: int = 0
    #: Samples with a user stack copy (walked).
    walked: int = 0
    frames: int = 0
    #: Walks by depth (user frames), and by why they stopped.
    depths: Counter[int] = field(default_factory=Counter)
    stops: Counter[StopKind] = field(default_factory=Counter)
    #: Bytes of its stack copy each walk read, and how many were copied.
    stack_used: list[int] = field(default_factory=list)
    stack_copied: list[int] = field(default_factory=list)
    #: Frames the unwinder stepped one at a time (the others were stepped in bulk).
    stepped: int = 0
    #: Samples with a user frame in each module (by name).
    module_samples: Counter[str] = field(default_factory=Counter)
    #: Walks by why they stopped and the module of their last frame (``[unknown]``: none).
    stop_modules: Counter[tuple[StopKind, str]] = field(default_factory=Counter)
    #: Modules without SFrame of their own, and why.
    without_own_sframe: dict[str, str] = field(default_factory=dict)
    #: Where each module's SFrame came from.
    origins: dict[str, str] = field(default_factory=dict)
    #: Problems met (a file cut short...), one line each.
    problems: list[str] = field(default_factory=list)
    #: Samples with user frames from their recorded callchain (``perf record -g``), and
    #: samples with both a stack copy walked and a recorded user callchain.
    recorded: int = 0
    both: int = 0
    #: Per event (by name): how its user stacks were recorded, and its samples' counts.
    events: dict[str, EventStats] = field(default_factory=dict)
    #: Samples whose recorded frame-pointer chain leaves out the caller of the function at
    #: their PC (SFrame: that function had no frame of its own on the FP there), by the
    #: module of that PC.
    chain_missed_caller: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class EventStats:
    """How one event's user stacks were recorded (``kind``: "dwarf", a stack copy to walk;
    "fp", a user callchain the kernel's frame-pointer walk recorded; "deferred", one the kernel
    sends later in its own record; "none") and how many of its samples have walked frames,
    recorded frames, and both."""

    kind: str
    samples: int = 0
    walked: int = 0
    recorded: int = 0
    both: int = 0


def callchain_kind(attr: EventAttr) -> str:
    """How the event of ``attr`` records user stacks: "dwarf" (PERF_SAMPLE_STACK_USER with a
    size: ``--call-graph dwarf``), "fp" (PERF_SAMPLE_CALLCHAIN with its user part:
    ``-g``), else "none" (a sample's PC alone).  A deferred chain shows in the samples
    (:data:`~pysframe.perf.layout.CONTEXT_USER_DEFERRED`), not here."""
    if attr.sample_type & SampleType.STACK_USER and attr.sample_stack_user:
        return "dwarf"
    if attr.sample_type & SampleType.CALLCHAIN and not (
        attr.flags & FLAG_EXCLUDE_CALLCHAIN_USER
    ):
        return "fp"
    return "none"


def profile_recording(
    path: str,
    options: Options | None = None,
    *,
    on_chunk: Callable[[int, int], None] | None = None,
    part: tuple[int, int] | None = None,
    cut: bool = False,
) -> tuple[Profile, WalkStats]:
    """The profile of the recording at ``path`` and what its walks did; ``on_chunk(done,
    total)`` is told the bytes read so far (for a progress bar).

    ``part`` (``(index, count)``): only the samples of the index-th of ``count`` time slices
    (perf's deliveries, by how far into the data they are read), the recording read up to
    the slice's end, its side-band records from the start, for the address spaces at the
    slice's start (session.py): the profiles of a file's parts, merged in order
    (:meth:`Profile.merge`), are its profile (:func:`profile_parts`).  The recording's name
    is the first part's; what its whole reading finds (lost samples, deferred chains that
    never came, a file cut short) the last part's, which reads it to the end.  ``cut``: the
    slices are cut at their bounds, to the record (:func:`walk_recording`), of sizes that
    take the reading before each into account: the parts merged then number the frames
    and stacks in another order than the whole (what they hold is the same)."""
    options = options or Options()
    with PerfData.open(path) as data:
        within = None if part is None else _slice(data, *part, cut=cut)
        finder = ModuleFinder(
            build_ids={entry.filename: entry.build_id for entry in data.features.build_ids},
            debug_dir=options.debug_dir,
            symfs=options.symfs,
            policy=options.policy,
            symbols=options.symbols,
        )
        spaces = AddressSpaces(finder)
        kernel_build_id = data.features.build_id(KERNEL_MODULE)
        namer = _Namer(
            finder, spaces, lambda: kernel_symbols(kernel_build_id, options.debug_dir),
            options.symbols, options.inline, options.srcline,
        )  # fmt: skip
        profile = Profile(sources=[shown_name(str(path))])
        stats = WalkStats()
        # The profile's event of each attribute known now, then of those that come later
        # (pipe mode): the last entry, made when first needed.
        events = np.array([
            *(profile.event_id(attr.name or f"event{number}", _unit(attr.name))
              for number, attr in enumerate(data.attrs)), -1,
        ], dtype=np.int64)  # fmt: skip
        profile.events_without_callchain.update(
            attr.name or f"event{number}" for number, attr in enumerate(data.attrs)
            if not attr.sample_type & SampleType.CALLCHAIN
        )  # fmt: skip
        lost = Counter[bool]()  # LOST_SAMPLES (True) and LOST (False) records' counts
        # Per attribute: its samples' user callchains are deferred (Linux 6.19); the last
        # entry stands for attributes that come later.
        defers = np.array([*(attr.defer_callchain for attr in data.attrs), False], dtype=bool)
        tally = DeferredTally()
        stack_ids = _StackIds(profile, namer.expanded_all)

        def count_lost(event: SideBandEvent) -> None:
            if isinstance(event, LostEvent):
                lost[event.id is None] += event.lost
                if event.id is None:  # LOST_SAMPLES
                    profile.lost_samples += event.lost
            elif isinstance(event, DeferredCallchainEvent) and not options.merge_callchains:
                _add_deferred(profile, namer, event)  # named in the address space of its time

        try:
            for walked in walk_recording(data, spaces, chunk=options.chunk,
                                         max_frames=options.max_frames,
                                         on_event=count_lost,
                                         merge_deferred=options.merge_callchains,
                                         deferred=tally, within=within,
                                         cut=cut, count_used=options.count_walks):  # fmt: skip
                _add_chunk(profile, walked, namer, events, defers, stack_ids)
                if options.count_walks:
                    _count(stats, walked, namer.spaces)
                _count_events(stats, walked, data.attrs, spaces)
                if on_chunk is not None:
                    header = data.header
                    end = header.data_offset + header.data_size if not header.pipe else 0
                    on_chunk(walked.read_to, end)
        finally:
            namer.close()
        for reader in namer.readers_used:
            stats.problems += reader.problems
        profile.build_ids = {
            shown_name(entry.filename): entry.build_id.hex() for entry in data.features.build_ids
        }
        # What the whole recording says is said by the last part alone, which reads it to
        # the end (the others stop after their slice).
        last = part is None or part[0] == part[1] - 1
        if last:
            stats.problems += [str(problem) for problem in data.problems]
        if options.fix_leaf:
            stats.problems.append(_fix_leaf_note(path, stats))
        if lost and last:
            stats.problems.append(_lost_problem(path, lost, data.record_counts[RecordType.SAMPLE]))
        if tally.unmatched and last:
            stats.problems.append(_unmatched_problem(path, tally))
        stats.problems += finder.symbol_problems
        # What the cache of generated SFrame found wrong, with the rest (the warnings of a
        # worker process come back this way).
        stats.problems += take_warnings()
        stats.without_own_sframe = {shown_name(path): why for path, why in finder.problems.items()}
        stats.origins = {shown_name(module.path): module.origin for module in spaces.modules}
    if part is not None and part[0] > 0:  # named once, by the first part
        # (a recording with deferred chains is read whole by every part: session.py)
        profile.sources, profile.deferred = [], []
    if part is not None and not last:  # counted once, by the last part
        profile.lost_samples = 0
    return profile, stats


def _slice(data: PerfData, index: int, count: int, cut: bool = False) -> tuple[int, int]:
    """The deliveries of the index-th of ``count`` slices of the data, by bytes read: those
    read up to an offset above the first bound and at most the second (deliveries come with
    ``read_to`` never decreasing: each slice is a run of them, the first and last
    open-ended).  Slices of equal sizes; with ``cut``, of sizes that make each slice's
    work the same, the reading of the data before it (:data:`SKIP_COST` of a byte's
    walk) and its own: later slices are shorter."""
    header = data.header
    if header.pipe:
        raise ValueError("a pipe-mode recording is not read in parts")
    start, size = header.data_offset, header.data_size
    if cut:
        bounds = [start + int(size * share) for share in _bounds(count, SKIP_COST)]
    else:
        bounds = [start + size * number // count for number in range(count + 1)]
    low = bounds[index] if index > 0 else -1
    high = bounds[index + 1] if index < count - 1 else 1 << 64
    return low, high


#: The cost of reading a byte of a recording before a slice (its records decoded and
#: ordered, its side-band records applied, its samples not walked), as a share of the cost
#: of a byte of the slice (walked, named, its text made): measured on recordings of
#: ``--call-graph dwarf`` (benchmarks/bench_perf.py).
SKIP_COST = 0.2


def _bounds(count: int, skip: float) -> list[float]:
    """Where ``count`` slices begin and end, as shares of the data (0 to 1), each slice's
    work the same: ``skip * b[k] + (b[k + 1] - b[k])`` for slice ``k`` beginning at share
    ``b[k]``: ``b[k + 1] = b[k] * (1 - skip) + w``, ``w`` such that ``b[count] = 1``."""
    keep = 1.0 - skip
    # b[k] = w * (1 + keep + ... + keep ** (k - 1))
    sums = [sum(keep**j for j in range(k)) for k in range(count + 1)]
    work = 1.0 / sums[count]
    return [work * total for total in sums]


#: What :func:`profile_parts` makes of each slice's profile.
Finished = TypeVar("Finished")


def profile_parts(
    path: str,
    options: Options | None,
    jobs: int,
    on_chunk: Callable[[int, int], None] | None = None,
    *,
    finish: Callable[[Profile], Finished],
    cut: bool = False,
) -> tuple[Callable[[], Profile], list[WalkStats], list[Finished]]:
    """The profile of one recording read in ``jobs`` time slices (:func:`profile_recording`
    with ``part``), merged in order when first asked for (the first item): the same profile
    as read in one process.  This process reads the last slice (the longest to read: the
    data before it is read too, for its side-band records) while a worker process forked
    from it reads each other one (:mod:`pysframe.perf.forked`: what this process has loaded,
    a worker has without loading it), and sends it back meanwhile.  ``finish`` is called on
    each slice's profile in the process that read it, and what it gives, slice by slice,
    comes back too: what can be made of a slice alone (its text...) is made in parallel,
    and where that is all that is wanted, the slices' profiles are never merged.  What
    ``finish`` gives may hold a :class:`~pysframe.perf.forked.Spooled` text (a slice's):
    a worker writes it to a temporary file as it makes it, and it is copied from there when
    written.  Fewer slices for a small recording (a slice of less than
    :data:`MIN_PART_BYTES` is not worth a process); one: the recording is read in this
    process (``on_chunk`` told the bytes read, as by :func:`profile_recording`), and
    ``finish`` is not called (no results).  ``cut``: the slices cut to the record, so
    that each process has as much to do (:func:`profile_recording`), where what is made of
    the profile does not depend on how frames and stacks are numbered (perf script's
    text, folded stacks: not the merged profile's JSON).  With inline frames or srclines
    (addr2line's answers), or a compressed recording (``perf record -z``), the recording is
    read in one process."""
    size = os.stat(path).st_size
    count = max(1, min(jobs, size // MIN_PART_BYTES))
    if options is not None and (options.inline or options.srcline):
        # addr2line's answers depend on what it was asked before (BFD names a function by
        # its symbol when first asked about it, by its DWARF name after: elf/addr2line.py),
        # and perf asks one addr2line process per file, sample after sample: slices asking
        # apart could name an inline frame or a srcline otherwise than one reading does.
        count = 1
    if count > 1:
        with PerfData.open(path) as data:
            if data.compressed:
                # Slices are cut at file offsets, and a compressed recording's records are
                # one zstd stream that can only be decompressed from its start (compressed.py).
                count = 1
    if count == 1:
        profile, stats = profile_recording(path, options, on_chunk=on_chunk)
        return lambda: profile, [stats], []
    import pickle
    from functools import cache, partial

    from .forked import Forked, spooling

    workers: list[Forked[tuple[bytes, WalkStats, Finished]]] = []
    try:
        for index in range(count - 1):
            part = (index, count)
            workers.append(Forked(partial(_pickled_part, path, options, part, finish, cut)))
        with spooling():  # this slice's text made now, as the workers make theirs
            last, stats, finished = _profile_part(path, options, (count - 1, count), finish, cut)
        others = [worker.result() for worker in workers]
    finally:
        for worker in workers:  # those whose results were not read (an error)
            worker.close()

    @cache
    def merged() -> Profile:
        whole: Profile = pickle.loads(others[0][0])
        for pickled, _stats, _finished in others[1:]:
            whole.merge(pickle.loads(pickled))
        whole.merge(last)
        return whole

    return (
        merged, [*(part[1] for part in others), stats], [*(part[2] for part in others), finished]
    )


#: The least of a recording's bytes worth a worker process of its own (some 3,000 samples of
#: 8 KB stack copies).
MIN_PART_BYTES = 24 << 20


def _profile_part(
    path: str,
    options: Options | None,
    part: tuple[int, int],
    finish: Callable[[Profile], Finished],
    cut: bool,
) -> tuple[Profile, WalkStats, Finished]:
    profile, stats = profile_recording(path, options, part=part, cut=cut)
    return profile, stats, finish(profile)


def _pickled_part(
    path: str,
    options: Options | None,
    part: tuple[int, int],
    finish: Callable[[Profile], Finished],
    cut: bool,
) -> tuple[bytes, WalkStats, Finished]:
    """A slice read in a worker process, its profile pickled there: the process that merges
    the slices unpickles it only when the merged profile is wanted."""
    import pickle

    profile, stats, finished = _profile_part(path, options, part, finish, cut)
    return pickle.dumps(profile, pickle.HIGHEST_PROTOCOL), stats, finished


def _fix_leaf_note(path: str, stats: WalkStats) -> str:
    """What ``--fix-leaf`` did.  A recorded frame-pointer chain leaves out the caller of a
    function that had not set up its frame at the sample's PC (``perf stats`` counts them);
    SFrame then says where that caller's return address is: in the stack, at the CFA less
    8 on x86-64.  A recording with ``--user-regs`` holds the sample's SP, FP and PC, but not
    the stack: only a stack copy proves the address, and a sample with one is walked (its
    frames are the walk's, not the chain's).  So nothing is inserted, and this line says
    why."""
    missed = sum(stats.chain_missed_caller.values())
    if not missed:
        return f"{path}: --fix-leaf: no recorded callchain left out a caller; nothing to insert"
    return (
        f"{path}: --fix-leaf: {missed:,} recorded callchains left out the caller of the "
        "function at the sample's PC, and nothing recorded proves which it is: its return "
        "address is in stack memory, and these samples have no stack copy (record with "
        "--call-graph dwarf to have them walked); their frames are left as recorded"
    )


def _lost_problem(path: str, lost: Counter[bool], samples: int) -> str:
    """The one line on the samples the kernel dropped: perf record did not empty its buffers
    in time (util/session.c perf_session__warn_about_errors warns of LOST records, and of the
    share of samples LOST_SAMPLES give when over 5%).  perf 6 ends a recording with
    LOST_SAMPLES records that count again what its LOST records counted: the larger count is
    the number lost; the share is of the samples taken (those recorded and those lost)."""
    count = max(lost[True], lost[False])
    share = 100 * count / (samples + count) if samples + count else 0.0
    return (
        f"{path}: {count:,} samples were lost ({share:.2f}% of {samples + count:,}): the kernel "
        "dropped them when perf record did not keep up (LOST records); check the I/O and CPU "
        "load, or record at a lower frequency"
    )


def _unmatched_problem(path: str, tally: DeferredTally) -> str:
    """The one line on the samples whose deferred user callchain never came (perf delivers
    them as they are, without a word: util/session.c session__flush_deferred_samples)."""
    return (
        f"{path}: {tally.unmatched:,} of {tally.waited:,} samples waiting for a deferred user "
        "callchain got none (no CALLCHAIN_DEFERRED record of their thread and cookie came): "
        "they have their kernel frames alone"
    )


def _add_deferred(profile: Profile, namer: _Namer, event: DeferredCallchainEvent) -> None:
    """A CALLCHAIN_DEFERRED record kept apart from its samples (``--no-merge-callchain``),
    its addresses named as recorded user frames of its thread's process."""
    pid = -1 if event.sample_id.pid is None else event.sample_id.pid
    tid = -1 if event.sample_id.tid is None else event.sample_id.tid
    frames = namer.recorded(profile, pid, list(event.ips))
    profile.deferred.append(DeferredChain(
        event.time or 0, pid, tid, profile.comm_id(namer.spaces.comm(tid)), event.cookie,
        profile.stack_id(frames),
    ))  # fmt: skip


def _unit(name: str | None) -> str:
    return "nanoseconds" if (name or "").split(":")[0] in _CLOCK_EVENTS else "events"


_MASK = (1 << 64) - 1
#: perf reads at most this many inliners of an address (util/srcline.c MAX_INLINE_NEST).
MAX_INLINE_NEST = 1024


#: The code whose answers a kept entry holds (:class:`KeptAddr2Line`).
ANSWER_CODE = (
    "elf/addr2line.py", "elf/addr2line_record.py", "elf/addr2line_tables.py", "elf/dwarf_info.py",
    "elf/dwarf_lines.py",
    "elf/line_program.py", "elf/debuginfo.py", "elf/reader.py", "elf/relocation.py",
    "elf/symbols.py", "elf/layout.py",
)  # fmt: skip
#: A file larger than this is not digested (its answers are not kept).
_MAX_DIGESTED = 4 << 30


class KeptAddr2Line:
    """:class:`pysframe.elf.addr2line.Addr2Line`'s answers, kept in the cache
    (:mod:`pysframe.sources.cache`) under the SHA-256 of the file's bytes, with the digest of
    the code that gave them: the addresses asked before are answered without reading any
    DWARF; the file is opened (and read as Addr2Line reads it) for the others, whose answers
    are added to the entry on :meth:`close`.  Only answers that no earlier question could
    change are kept (:attr:`pysframe.elf.addr2line.Answer.fixed`: BFD renames a function
    named by a DW_AT_name of a mangling language once it looked it up, so perf's names
    depend on the order it asks in); the others are asked of the DWARF on each run, in the
    order of the run, the reader told the symbol BFD would keep from the kept answers given
    since its last question.  Answers found while a unit could not be read (``problems``)
    are not kept, so that the problem is told again."""

    def __init__(self, path: str, digest: str, kept: dict[int, _Kept],
                 reader: Addr2Line | None) -> None:  # fmt: skip
        self.path = path
        self._digest = digest
        self._kept = kept
        self._new: dict[int, _Kept] = {}
        self._reader = reader
        #: ``(symbol,)``: the symbol BFD keeps after the kept answers given since the
        #: reader's last question, where one of them looked one up (None: none did).
        self._pending: tuple[KeptSymbol | None] | None = None

    @classmethod
    def open(cls, path: str) -> KeptAddr2Line | Addr2Line:
        """The answers of the file at ``path``: from the cache when it has them, else an
        :class:`Addr2Line` of the file (OSError, SFrameError as it raises them)."""
        from ..sources.cache import cache_directory, cached_tables, code_digest

        digest = _file_digest(path) if cache_directory() is not None else None
        kept: dict[int, _Kept] = {}
        if digest is not None:
            binding = _binding(digest, code_digest(*ANSWER_CODE))
            parts = cached_tables(digest, "addr2line", binding)
            kept = _answers(parts) if parts is not None else {}
        if kept:  # the DWARF reader is imported when an address is not among them
            assert digest is not None
            return cls(path, digest, kept, None)
        from ..elf.addr2line import Addr2Line

        reader = Addr2Line(path)
        return reader if digest is None else cls(path, digest, kept, reader)

    @property
    def problems(self) -> list[str]:
        return self._reader.problems if self._reader is not None else []

    def records(self, address: int) -> list[Record]:
        found = self._kept.get(address)
        if found is not None:
            records, looked_up, symbol = found
            if looked_up:
                self._pending = (symbol,)
            return records
        if self._reader is None:
            from ..elf.addr2line import Addr2Line

            self._reader = Addr2Line(self.path)
        if self._pending is not None:
            self._reader.remember(self._pending[0])
            self._pending = None
        answer = self._reader.answer(address)
        if answer.fixed:
            self._new[address] = (answer.records, answer.looked_up, answer.symbol)
        return answer.records

    def close(self) -> None:
        from ..sources.cache import code_digest, keep_tables

        if self._reader is None:
            return
        self._reader.close()
        if self._new and not self._reader.problems:
            answers = {**self._kept, **self._new}
            text = json.dumps([
                [address, [[r.function, r.file, r.line] for r in records],
                 *([list(symbol) if symbol is not None else None] if looked_up else [])]
                for address, (records, looked_up, symbol) in sorted(answers.items())
            ])  # fmt: skip
            binding = _binding(self._digest, code_digest(*ANSWER_CODE))
            keep_tables(self._digest, "addr2line", binding, [text.encode()])


#: A kept answer: its records, whether it looked a symbol up, and the symbol BFD keeps
#: after it (:class:`pysframe.elf.addr2line.Answer`).
_Kept: TypeAlias = "tuple[list[Record], bool, KeptSymbol | None]"


def _binding(digest: str, code: str) -> dict[str, str]:
    return {"code": code, "file": digest, "answers": "fixed"}


def _file_digest(path: str) -> str | None:
    """The SHA-256 of the regular file at ``path`` (None: not one, unreadable, too large)."""
    try:
        with open(path, "rb") as stream:
            info = os.fstat(stream.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_DIGESTED:
                return None
            return hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError:
        return None


def _answers(parts: list[memoryview]) -> dict[int, _Kept]:
    """The answers a kept entry holds (none when its parts are not an entry's): rows of
    ``[address, [[function, file, line]...]]``, and a third item where the answer looked a
    symbol up: the symbol kept after it (``[section, name, file, value, end]``, or null)."""
    from ..elf.addr2line_record import Record

    texts = (str, type(None))
    try:
        rows = json.loads(bytes(parts[0])) if len(parts) == 1 else []
        answers: dict[int, _Kept] = {}
        for address, records, *after in rows:
            if len(after) > 1:  # a row is two items, or three
                return {}
            symbol = after[0] if after else None
            if symbol is not None:
                section, name, file, value, end = symbol
                if not (isinstance(name, str) and isinstance(file, texts)):
                    return {}
                symbol = (int(section), name, file, int(value), int(end))
            answers[int(address)] = (
                [Record(function, file, int(line)) for function, file, line in records],
                bool(after), symbol,
            )  # fmt: skip
    except (TypeError, ValueError, RecursionError):
        return {}
    if all(
        isinstance(r.function, texts) and isinstance(r.file, texts)
        for records, _, _ in answers.values() for r in records
    ):  # fmt: skip
        return answers
    return {}


#: addr2line's answers for one file: read from its DWARF, or kept in the cache.
Answers: TypeAlias = "Addr2Line | KeptAddr2Line"


def _open_addr2line(path: str) -> Answers | None:
    """The file at ``path`` read as addr2line reads it; None where addr2line cannot read it
    (perf 6.1 asks about every file, with DWARF or not: util/srcline.c addr2line)."""
    try:
        return KeptAddr2Line.open(path)
    except (OSError, SFrameError):
        return None


def _srcline(answer: Record) -> tuple[str | None, int]:
    """The srcline perf keeps for an answer of addr2line (util/srcline.c
    read_addr2line_record, filename_split, srcline_from_fileline): the text after the name's
    last ``/`` up to its first ``:``, and the number after that (0 for addr2line's ``?``)."""
    text = f"{'??' if answer.file is None else shown_name(answer.file)}:{answer.line or '?'}"
    name, _, number = text.partition(":")
    digits = len(number) - len(number.lstrip("0123456789"))
    return name[name.rfind("/") + 1 :], int(number[:digits] or 0)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _AtEnd:
    """A frame perf names with a symbol that does not hold it (an empty symbol at its
    address): ``module``, ``symbol`` and the symbol's ``start``."""

    module: str
    symbol: str
    start: int


class _Namer:
    """Frame ids for the frames of a chunk: each distinct frame named once."""

    KNOWN_BITS = 16

    def __init__(
        self,
        finder: ModuleFinder,
        spaces: AddressSpaces,
        kernel: Callable[[], KernelSymbols | None],
        symbols: SymbolOptions,
        inline: bool = False,
        srcline: bool = False,
    ) -> None:
        self.finder, self.spaces, self.symbols = finder, spaces, symbols
        #: Reads the kallsyms, when a first kernel frame is named (a few MB of text to parse,
        #: that a recording of user frames alone does without).
        self._read_kernel: Callable[[], KernelSymbols | None] | None = kernel
        self._kernel: KernelSymbols | None = None
        self.inline, self.srcline = inline, srcline
        #: (module id, address in the module) -> frame id; kernel frames: (-2, address).
        self.ids: dict[tuple[int, int], int] = {}
        #: With ``inline``: a user frame's id -> the ids of the entries perf prints in its
        #: place (the functions inlined there, innermost first, and the one holding them).
        self.expanded: dict[int, tuple[int, ...]] = {}
        #: :attr:`expanded` as arrays (its ids, their numbers of entries and the entries one
        #: after the other; empty: to be made again).
        self._expansions: tuple[npt.NDArray[np.int64], ...] = ()
        #: Per module id: the file perf asks addr2line about (None: none) and the module's
        #: text offset.
        self.srcline_files: dict[int, tuple[Answers | None, int]] = {}
        self.readers: dict[str, Answers | None] = {}
        #: addr2line's answers by (file, link-time address).
        self.answers: dict[tuple[str, int], list[Record]] = {}
        #: Frames whose text depends on their map's start (:meth:`_name_at_end`).
        self.at_end: dict[tuple[int, int], _AtEnd] = {}
        #: The ids of :attr:`ids`'s user frames by :func:`_pair_keys`, and of its kernel
        #: frames by address, for arrays of them.
        self.known = SlotTable(self.KNOWN_BITS)
        self.known_kernel = SlotTable(self.KNOWN_BITS)
        #: Per frame id of the profile: whether it has no symbol (:meth:`_at_runtime_addresses`).
        self.unnamed = np.zeros(0, dtype=bool)
        #: (frame id, runtime address) -> the id of that frame at that address.
        self.at_runtime: dict[tuple[int, int], int] = {}

    def user(
        self,
        profile: Profile,
        modules: npt.NDArray[np.int64],
        lookup: npt.NDArray[np.uint64],
        printed: npt.NDArray[np.uint64],
        pids: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int64]:
        """Frame ids of user frames: module ids, lookup PCs, printed addresses (perf's
        map_ip) and the processes they are in.  Frames named before are found in
        :attr:`known` (by module and printed address); the others are named."""
        keys = _pair_keys(modules, printed)
        if keys is None:
            out, _ = self._named(profile, modules, lookup, printed, pids)
        else:
            out, known = self.known.find(keys)
            missed = np.flatnonzero(~known)
            if len(missed):
                named, kept = self._named(
                    profile, modules[missed], lookup[missed], printed[missed], pids[missed]
                )
                out[missed] = named
                self.known.put(keys[missed][kept], named[kept])
        return self._at_runtime_addresses(profile, out, modules, lookup)

    def _named(
        self,
        profile: Profile,
        modules: npt.NDArray[np.int64],
        lookup: npt.NDArray[np.uint64],
        printed: npt.NDArray[np.uint64],
        pids: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Frame ids of user frames (as :meth:`user`, each distinct frame named once), and
        which are named by their module and address alone (not those at the end of their
        symbol, whose text depends on where the process mapped it)."""
        unique, inverse = _distinct_pairs(modules, printed)
        ids = np.empty(len(unique), dtype=np.int64)
        missing: dict[int, list[int]] = {}
        at_end: list[int] = []
        # The module column back to signed ids (-1: none), as the walk gave them.
        pairs = list(zip(unique[:, 0].astype(np.int64).tolist(), unique[:, 1].tolist(),
                         strict=True))  # fmt: skip
        for position, key in enumerate(pairs):
            found = self.ids.get(key)
            if found is not None:
                ids[position] = found
            elif key in self.at_end:
                at_end.append(position)
            else:
                missing.setdefault(key[0], []).append(position)
        named_frames: list[tuple[int, int, FrameInfo]] = []
        for module_id, positions in missing.items():
            addresses = [pairs[position][1] for position in positions]
            named = self._user_names(module_id, addresses)
            for position, address, name in zip(positions, addresses, named, strict=True):
                if isinstance(name, _AtEnd):
                    self.at_end[(module_id, address)] = name
                    at_end.append(position)
                    continue
                frame = FrameInfo(address, name[0], name[1], name[2], address)
                named_frames.append((position, module_id, frame))
        if (self.inline or self.srcline) and named_frames:
            # In the order perf asks addr2line: as the frames first come, sample by sample.
            first = np.full(len(unique), len(inverse), dtype=np.int64)
            np.minimum.at(first, inverse, np.arange(len(inverse)))
            named_frames.sort(key=lambda entry: int(first[entry[0]]))
        for position, module_id, frame in named_frames:
            entries = self._inlined(profile, module_id, frame) if self.inline else ()
            if self.srcline and not entries and module_id >= 0:
                file, line = self._plain_srcline(module_id, frame.address)
                frame = replace(frame, file=file, line=line)
            frame_id = profile.frame_id(frame)
            ids[position] = self.ids[(module_id, frame.address)] = frame_id
            if entries:
                self.expanded[frame_id] = entries
                self._expansions = ()  # made again when next needed
        out = ids[inverse]
        by_address = np.ones(len(unique), dtype=bool)
        if at_end:
            self._name_at_end(profile, out, pairs, inverse, at_end, lookup, pids)
            by_address[at_end] = False
        return out, by_address[inverse]

    def _at_runtime_addresses(
        self,
        profile: Profile,
        out: npt.NDArray[np.int64],
        modules: npt.NDArray[np.int64],
        lookup: npt.NDArray[np.uint64],
    ) -> npt.NDArray[np.int64]:
        """``out`` with each frame of a module that has no symbol there made the frame with its
        runtime address (:attr:`FrameInfo.runtime_address`, perf's callchain address, which
        perf report names such a caller by): one frame per distinct runtime address."""
        if not len(out):
            return out
        frames = profile.frames
        if len(self.unnamed) < len(frames):  # each frame id's, once
            added = [frame.symbol is None for frame in frames[len(self.unnamed) :]]
            self.unnamed = np.append(self.unnamed, np.array(added, dtype=bool))
        chosen = np.flatnonzero(self.unnamed[out] & (modules >= 0))
        if not len(chosen):
            return out
        pairs, inverse = _distinct_pairs(out[chosen], lookup[chosen])
        renamed = np.array(
            [self._at_runtime(profile, frame, address) for frame, address in pairs.tolist()],
            dtype=np.int64,
        )
        out = out.copy()
        out[chosen] = renamed[inverse]
        return out

    def _at_runtime(self, profile: Profile, frame: int, address: int) -> int:
        """The id of frame ``frame`` at runtime address ``address`` (each made once)."""
        found = self.at_runtime.get((frame, address))
        if found is None:
            found = profile.frame_id(replace(profile.frames[frame], runtime_address=address))
            self.at_runtime[(frame, address)] = found
        return found

    def _name_at_end(
        self,
        profile: Profile,
        out: npt.NDArray[np.int64],
        pairs: list[tuple[int, int]],
        inverse: npt.NDArray[np.intp],
        positions: list[int],
        lookup: npt.NDArray[np.uint64],
        pids: npt.NDArray[np.int64],
    ) -> None:
        """Frames at the end of their (empty) symbol: perf prints their offset from the
        symbol's start less the map's start (util/symbol.c __symbol__fprintf_symname_offs),
        so it depends on where the process mapped the module."""
        for position in positions:
            module_id, address = pairs[position]
            name = self.at_end[(module_id, address)]
            for frame in np.flatnonzero(inverse == position).tolist():
                pc = int(lookup[frame])
                start = self.spaces.mapping_start(
                    int(pids[frame]), pc, module_id, (address - pc) & _MASK
                )
                offset = (address - (start or 0) - name.start) & _MASK
                info = FrameInfo(address, name.module, name.symbol, offset, address)
                out[frame] = profile.frame_id(info)

    def _user_names(
        self, module_id: int, addresses: list[int]
    ) -> list[tuple[str, str | None, int] | _AtEnd]:
        """(module, symbol, offset) of each address of a module (perf's map_ip), as perf
        names it (:mod:`pysframe.perf.symbols`)."""
        if module_id < 0:
            return [(UNKNOWN, None, 0)] * len(addresses)
        module = self.spaces.modules[module_id]
        shown = shown_name(module.path)  # a path: its bytes that are not UTF-8 as \xNN
        symbols = self.finder.perf_symbols(module)
        if symbols is None:
            return [(shown, None, 0)] * len(addresses)
        out: list[tuple[str, str | None, int] | _AtEnd] = []
        found = symbols.find_many(np.array(addresses, dtype=np.uint64))
        for address, index in zip(addresses, found.tolist(), strict=True):
            if index < 0:
                out.append((shown, None, 0))
                continue
            start = symbols.start_of(index)
            if address < int(symbols.ends[index]):
                out.append((shown, symbols.name_of(index), address - start))
            else:
                out.append(_AtEnd(shown, symbols.name_of(index), start))
        return out

    def _inlined(self, profile: Profile, module_id: int, frame: FrameInfo) -> tuple[int, ...]:
        """The ids of the entries perf 6.1 puts in place of a named user frame
        (util/machine.c append_inlines): one per answer of ``addr2line -f -i`` for its
        address (:class:`pysframe.elf.addr2line.Addr2Line`), innermost first, each the
        frame's own symbol where the answer's name, demangled as perf demangles, is its
        name, else an inlined function of that symbol (util/srcline.c new_inline_sym); none
        for a frame without a symbol, where addr2line knows nothing of the address or where
        perf does not ask (``[vdso]``, JIT maps)."""
        if frame.symbol is None:
            return ()
        answers = self._addr2line(module_id, frame.address)
        if not answers:
            return ()
        names = self.symbols.perf_names(
            [shown_name(answer.function or "??") for answer in answers]
        )
        entries = []
        for answer, name in zip(answers[: 1 + MAX_INLINE_NEST], names, strict=False):
            file, line = _srcline(answer)
            if name == frame.symbol:
                entry = replace(frame, file=file, line=line)
            else:
                entry = replace(frame, symbol=name, inlined=True, file=file, line=line,
                                base_symbol=frame.symbol)  # fmt: skip
            entries.append(profile.frame_id(entry))
        return tuple(entries)

    def _plain_srcline(self, module_id: int, address: int) -> tuple[str | None, int | None]:
        """The srcline ``perf script -F +srcline`` prints under a frame perf does not replace
        with inline entries (util/map.c map__fprintf_srcline, util/srcline.c
        __get_srcline): addr2line's first answer's, none when that is ``??:0``; without an
        answer the module's short name and the link-time address, ``libc.so.6[27249]`` (the
        line then None)."""
        answers = self._addr2line(module_id, address)
        if answers:
            file, line = _srcline(answers[0])
            return (None, None) if f"{file}:{line}".startswith("??:0") else (file, line)
        module = self.spaces.modules[module_id]
        _, text_offset = self._srcline_file(module_id)
        short = module.path if module.path.startswith("[") else os.path.basename(module.path)
        return f"{short}[{(address + text_offset) & _MASK:x}]", None

    def _addr2line(self, module_id: int, address: int) -> list[Record]:
        """addr2line's answers for the module's printed ``address`` (perf's map_ip), asked of
        the file perf asks (:meth:`pysframe.perf.modules.ModuleFinder.srcline_file`) at its
        link-time address (map__rip_2objdump); each address once."""
        reader, text_offset = self._srcline_file(module_id)
        if reader is None:
            return []
        objdump = (address + text_offset) & _MASK
        answers = self.answers.get((reader.path, objdump))
        if answers is None:  # perf asks once per dso and address (util/machine.c inlines__tree)
            answers = self.answers[(reader.path, objdump)] = reader.records(objdump)
        return answers

    def _srcline_file(self, module_id: int) -> tuple[Answers | None, int]:
        """The reader of the file perf asks addr2line about for module ``module_id`` (None
        when it asks nothing) and the module's text offset."""
        found = self.srcline_files.get(module_id)
        if found is None:
            path, text_offset = self.finder.srcline_file(self.spaces.modules[module_id])
            reader = None
            if path is not None:
                if path not in self.readers:
                    self.readers[path] = _open_addr2line(path)
                reader = self.readers[path]
            found = self.srcline_files[module_id] = (reader, text_offset)
        return found

    @property
    def readers_used(self) -> list[Answers]:
        return [reader for reader in self.readers.values() if reader is not None]

    def close(self) -> None:
        """Close the files read for inline frames."""
        for reader in self.readers_used:
            reader.close()

    def expanded_all(
        self, frames: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``frames`` (``lengths[i]`` of them for stack ``i``: frame ids, or ``~id`` for a
        frame that stays as it is) with the functions inlined at each before it
        (``inline``), and how many each stack then has.  (perf 6.1 adds no inline entries to
        a recorded callchain's frames, util/machine.c add_callchain_ip, unlike
        unwind_entry: :func:`_add_chunk` marks them so.)"""
        plain = frames < 0
        if plain.any():
            frames = np.where(plain, ~frames, frames)
        if not self.expanded or not len(frames):
            return frames, lengths
        # A table by frame id, below the greatest here: each id itself (at its own place in
        # ``flat``), or its expansion (after them); gathers, not a sort of the frames.
        top = int(frames.max()) + 1
        if not self._expansions:
            self._expansions = (
                np.array(list(self.expanded), dtype=np.int64),
                np.array([len(entries) for entries in self.expanded.values()], dtype=np.int64),
                np.array([f for entries in self.expanded.values() for f in entries], np.int64),
            )
        ids, sizes, entries = self._expansions
        below = ids < top
        starts = np.arange(top, dtype=np.int64)
        size = np.ones(top, dtype=np.int64)
        starts[ids[below]] = top + (np.cumsum(sizes) - sizes)[below]
        size[ids[below]] = sizes[below]
        flat = np.concatenate([np.arange(top, dtype=np.int64), entries])
        start_of, size_of = starts[frames], size[frames]
        if plain.any():  # the frame itself
            start_of = np.where(plain, frames, start_of)
            size_of = np.where(plain, 1, size_of)
        out = flat[range_positions(start_of, size_of)]
        owner = np.repeat(np.arange(len(lengths)), lengths)
        return out, np.bincount(owner, weights=size_of, minlength=len(lengths)).astype(
            np.int64
        )

    def recorded(self, profile: Profile, pid: int, ips: list[int]) -> list[int]:
        """Frame ids of user addresses a callchain recorded in process ``pid``, as perf 6.1
        prints a recorded (frame-pointer) callchain's entries: each looked up at its own
        address (a return address as it is, not one byte back), printed at map_ip."""
        if not ips:
            return []
        pcs = np.array(ips, dtype=np.uint64)
        module, delta = self.spaces.mappings_at(pid, pcs)
        ids = self.user(profile, module, pcs, pcs + delta, np.full(len(ips), pid, np.int64))
        found: list[int] = ids.tolist()
        return found

    def lost_return(self, profile: Profile) -> int:
        """The frame perf's walk adds where a return address is outside the stack copy: at
        address 0, printed one byte back."""
        return profile.frame_id(FrameInfo((1 << 64) - 1, UNKNOWN))

    @property
    def kernel(self) -> KernelSymbols | None:
        """The kernel's symbols (read when first asked for)."""
        if self._read_kernel is not None:
            self._kernel, self._read_kernel = self._read_kernel(), None
        return self._kernel

    def kernel_ids(
        self, profile: Profile, addresses: npt.NDArray[np.uint64]
    ) -> npt.NDArray[np.int64]:
        """Frame ids of kernel frames at ``addresses`` (each any number of times): those
        named before found in :attr:`known_kernel`, the others named (:meth:`kernel_frames`)
        in the order of their addresses."""
        ids, known = self.known_kernel.find(addresses)
        missed = (~known).nonzero()[0]
        if len(missed):
            distinct, inverse = np.unique(addresses[missed], return_inverse=True)
            named = np.array(self.kernel_frames(profile, distinct), dtype=np.int64)
            ids[missed] = named[inverse.reshape(-1)]
            self.known_kernel.put(distinct, named)
        return ids

    def kernel_frames(self, profile: Profile, addresses: npt.NDArray[np.uint64]) -> list[int]:
        """Frame ids of kernel frames at ``addresses``."""
        out: list[int] = []
        if not len(addresses):
            return out
        index = self.kernel.find_many(addresses) if self.kernel is not None else None
        for position, address in enumerate(addresses.tolist()):
            key = (-2, address)
            found = self.ids.get(key)
            if found is None:
                frame = FrameInfo(address, KERNEL_MODULE, kernel=True)
                if index is not None and index[position] >= 0:
                    number = int(index[position])
                    assert self.kernel is not None
                    frame = FrameInfo(
                        address,
                        self.kernel.modules[number],
                        self.kernel.names[number],
                        address - int(self.kernel.starts[number]),
                        kernel=True,
                    )
                if self.srcline:  # __get_srcline without a file: "[kernel.kallsyms][ADDRESS]"
                    frame = replace(frame, file=f"{frame.module}[{address:x}]")
                found = self.ids[key] = profile.frame_id(frame)
            out.append(found)
        return out


def _add_chunk(
    profile: Profile,
    walked: WalkedChunk,
    namer: _Namer,
    events: npt.NDArray[np.int64],
    defers: npt.NDArray[np.bool_],
    stack_ids: _StackIds,
) -> None:
    """Name the frames of a chunk's samples and add the samples to ``profile``: each sample's
    stack is its recorded kernel frames, its walked user frames (with the functions inlined
    there, ``--inline``), and perf's frame at 0 where its walk lost a return address.  A
    sample of an attribute with deferred user callchains (``defers``) that was not walked
    has the user frames its callchain recorded (merged from a CALLCHAIN_DEFERRED record:
    deferred.py), or the cookie of the one that never came."""
    samples, walks = walked.samples, walked.walks
    count = len(samples)
    user = _user_frames(walks, walked.recorded)
    # A return address a walk found is printed and looked up one byte back; the frames of a
    # recorded callchain at their own address (perf 6.1's add_callchain_ip).
    lookup = user.pc - np.where(user.exact, np.uint64(0), np.uint64(1))
    printed = lookup + user.delta  # perf's map_ip: pc - start + pgoff
    pids = np.repeat(samples.pid.astype(np.int64), user.lengths)
    user_ids = namer.user(profile, user.module, lookup, printed, pids)
    user_lengths = user.lengths
    if namer.inline:  # the frames of a recorded callchain stay as they are (expanded_all)
        user_ids = np.where(user.walked, user_ids, ~user_ids)
    kernel_at, kernel_lengths = kernel_parts(samples.callchain, samples.callchain_offsets)
    kernel_ids = namer.kernel_ids(profile, samples.callchain[kernel_at])
    lost = walks.lost_return.astype(np.int64)
    lengths = kernel_lengths + user_lengths + lost
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    frames = np.empty(int(lengths.sum()), dtype=np.int64)
    frames[range_positions(starts, kernel_lengths)] = kernel_ids
    frames[range_positions(starts + kernel_lengths, user_lengths)] = user_ids
    frames[(starts + kernel_lengths + user_lengths)[lost > 0]] = namer.lost_return(profile)
    stacks = stack_ids(frames, starts, lengths)  # with their inline entries
    # A sample whose deferred user callchain never came (or was kept apart): its kernel part,
    # then the cookie, as perf prints it.  (A merged one has its user frames recorded after
    # PERF_CONTEXT_USER, named above as any recorded callchain's.)
    deferring = defers[np.minimum(samples.attr.astype(np.int64), len(defers) - 1)]
    for index in np.flatnonzero(deferring & (user_lengths == 0)).tolist():
        cookie = deferred_cookie(samples.callchain_of(index).tolist())
        if cookie is not None:
            extra = profile.frame_id(FrameInfo(cookie, UNKNOWN, cookie=True))
            stacks[index] = profile.stack_id([*profile.stacks[stacks[index]], extra])
            lengths[index] += 1
    # A user-mode sample without frames: its IP alone, in the map holding it, as perf
    # prints it (thread__find_map of the sample's IP)
    kernel_mode = (samples.misc & MISC_CPUMODE_MASK) == MISC_KERNEL
    # A kernel-mode sample without a callchain: its IP alone, as perf names it.
    for index in np.flatnonzero((lengths == 0) & kernel_mode).tolist():
        (frame,) = namer.kernel_frames(profile, samples.ip[index : index + 1])
        stacks[index] = profile.stack_id([frame])
    # (not where perf threw the recorded chain away: it prints no frame then)
    without = np.flatnonzero((lengths == 0) & ~kernel_mode)
    if len(without):
        without = without[~discarded_chains(samples.callchain, samples.callchain_offsets)[without]]
    for index in without.tolist():
        ip, pid = samples.ip[index : index + 1], np.array([samples.pid[index]], np.int64)
        module, delta = namer.spaces.mappings_at(int(pid[0]), ip)
        (frame,) = namer.user(profile, module, ip, ip + delta, pid).tolist()
        info = profile.frames[frame]
        if info.runtime_address is None and info.module != UNKNOWN:
            # perf script prints a sample without a callchain at its IP as it is
            frame = profile.frame_id(replace(info, runtime_address=int(ip[0])))
        stacks[index] = profile.stack_id([frame])
    later = len(events) - 1
    attrs = np.minimum(samples.attr.astype(np.int64), later)
    if events[later] < 0 and (attrs == later).any():
        events[later] = profile.event_id("event", "events")
    comm_ids = np.array([profile.comm_id(comm) for comm in walked.comms], dtype=np.int64)
    profile.extend(
        stacks, pid=samples.pid.tolist(), tid=samples.tid.tolist(),
        time=samples.time.tolist(), cpu=samples.cpu.tolist(), period=samples.period.tolist(),
        comm=comm_ids[walked.comm].tolist(),
        event=events[attrs].tolist(),
    )  # fmt: skip
    assert len(stacks) == count
    first = len(profile) - count
    for row, time in walked.late.items():
        profile.delivered[first + row] = time


class _StackIds:
    """The stack ids of a recording's samples, chunk after chunk, as :meth:`Profile.stack_id`
    of each stack in turn, expanded (``expand``: the inline entries put in place of its
    frames, :meth:`_Namer.expanded_all`), gives them.  Each stack has a 64-bit hash (its
    frames before expansion, each at its position).  The stacks of earlier chunks are kept
    by hash (a :class:`~pysframe.bounded.SlotTable` of stack ids) with their frames, so
    that a stack seen before is found, and checked, with array operations; in a chunk, each
    new hash's first stack is expanded and interned, in the order the stacks first come (so
    that the ids are those one at a time would give).  Every stack is checked against the
    one it was taken for (one at a time where any differs).  A stack is thus expanded once,
    not once per sample: a recording has some 6 samples per distinct stack."""

    BITS = 16

    def __init__(self, profile: Profile, expand: Expansion) -> None:
        self.profile = profile
        self.expand = expand
        self.table = SlotTable(self.BITS)
        #: The frames of the stacks kept, before expansion (a stack id expanded from two
        #: stacks, which the expansion never gives, keeps the first's: the second is then
        #: interned one at a time), one after the other, and where each stack id's are (-1:
        #: not kept): views of buffers that grow by doubling (a chunk's new stacks are
        #: added without a copy of those kept).
        self.frames = self._frames = np.zeros(0, dtype=np.int64)
        self.starts = self._starts = np.zeros(0, dtype=np.int64)
        self.lengths = self._lengths = np.zeros(0, dtype=np.int64)

    def __call__(
        self,
        frames: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
    ) -> list[int]:
        """The stack ids of the stacks ``frames[starts[i] : starts[i] + lengths[i]]``."""
        key = _stack_hashes(frames, starts, lengths)
        ids, known = self.table.find(key)
        missed = np.flatnonzero(~known)
        _, first, inverse = np.unique(key[missed], return_index=True, return_inverse=True)
        # The chunk's first stack of each new hash, in the order they come.
        order = np.argsort(first)
        taken = missed[first[order]]
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        inverse = rank[inverse.reshape(-1)]
        # Each stack's reference: a kept stack's frames, or (after them) the chunk's first
        # stack of its hash.
        reference_start = np.empty(len(key), dtype=np.int64)
        reference_length = np.empty(len(key), dtype=np.int64)
        reference_start[known] = self.starts[ids[known]]
        reference_length[known] = self.lengths[ids[known]]
        reference_start[missed] = len(self.frames) + starts[taken][inverse]
        reference_length[missed] = lengths[taken][inverse]
        if not (reference_length == lengths).all() or (
            len(frames) and (self._references(frames, reference_start, lengths) != frames).any()
        ):  # two stacks of one hash: one at a time
            one_by_one: list[int] = self._interned(
                frames[range_positions(starts, lengths)], lengths
            ).tolist()
            return one_by_one
        if len(taken):
            ids[missed] = self._intern(key[taken], frames, starts[taken], lengths[taken])[inverse]
        stack_ids: list[int] = ids.tolist()
        return stack_ids

    def _references(
        self,
        frames: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int64]:
        """The frames of stacks ``lengths[i]`` long at ``starts[i]`` in the kept frames
        followed by ``frames``: ``frames`` put in the room after the kept frames (which are
        not copied), and gathered from there."""
        kept = len(self.frames)
        self._frames = _with_room(self._frames, kept, kept + len(frames), 0)
        self.frames = self._frames[:kept]
        self._frames[kept : kept + len(frames)] = frames
        references: npt.NDArray[np.int64] = self._frames[range_positions(starts, lengths)]
        return references

    def _intern(
        self,
        keys: npt.NDArray[np.uint64],
        frames: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int64]:
        """The ids of new hashes' stacks (in the order they come), interned and kept."""
        ids = self._interned(frames[range_positions(starts, lengths)], lengths)
        count, known = len(self.profile.stacks), len(self.starts)
        if count > known:
            self._starts = _with_room(self._starts, known, count, -1)
            self._lengths = _with_room(self._lengths, known, count, 0)
            self.starts, self.lengths = self._starts[:count], self._lengths[:count]
        new = np.flatnonzero(self.starts[ids] < 0)  # (a stack id once, though hashes evict)
        new = new[np.unique(ids[new], return_index=True)[1]]
        if len(new):
            kept = len(self.frames)
            self.starts[ids[new]] = kept + np.concatenate(
                [[0], np.cumsum(lengths[new])[:-1]]
            ).astype(np.int64)
            self.lengths[ids[new]] = lengths[new]
            added = frames[range_positions(starts[new], lengths[new])]
            self._frames = _with_room(self._frames, kept, kept + len(added), 0)
            self._frames[kept : kept + len(added)] = added
            self.frames = self._frames[: kept + len(added)]
        self.table.put(keys, ids)
        return ids

    def _interned(
        self, frames: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """The ids of the stacks ``frames`` holds one after the other (``lengths[i]`` frames
        for stack ``i``), each expanded and interned in turn."""
        profile = self.profile
        expanded, counts = self.expand(frames, lengths)
        flat = expanded.tolist()  # their frames, one list
        bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        return np.array([
            profile.stack_id(flat[start:end]) for start, end in pairwise(bounds)
        ], dtype=np.int64)  # fmt: skip


def _with_room(
    buffer: npt.NDArray[np.int64], used: int, needed: int, fill: int
) -> npt.NDArray[np.int64]:
    """``buffer`` (its first ``used`` entries kept) where it holds ``needed`` entries, else
    a buffer twice as large (at least ``needed``) with those entries, then ``fill``."""
    if needed <= len(buffer):
        return buffer
    out = np.full(max(needed, 2 * len(buffer)), fill, dtype=np.int64)
    out[:used] = buffer[:used]
    return out


#: What expands a chunk's stacks (:meth:`_Namer.expanded_all`): their frames one after the
#: other and how many each has, to the same with the inline entries.
Expansion: TypeAlias = (
    "Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]],"
    " tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]"
)


#: The constants of splitmix64 (a stack's hash: each frame id mixed with its position).
_GOLDEN, _MIX = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _stack_hashes(
    frames: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each stack ``frames[starts[i] : starts[i] + lengths[i]]``."""
    with np.errstate(over="ignore"):
        position = np.arange(len(frames), dtype=np.int64) - np.repeat(starts, lengths)
        # splitmix64's finalizer of (frame id, position): sums of them do not cancel out
        # where frames trade places, as sums of products with the position would
        mixed = frames.astype(np.uint64) * _GOLDEN + (position.astype(np.uint64) << np.uint64(32))
        mixed ^= mixed >> np.uint64(30)
        mixed *= _MIX
        mixed ^= mixed >> np.uint64(27)
        mixed *= _MIX2
        mixed ^= mixed >> np.uint64(31)
        key = lengths.astype(np.uint64) * _GOLDEN
        filled = np.flatnonzero(lengths > 0)
        if len(filled):
            key[filled] += np.add.reduceat(mixed, starts[filled])
    return key


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _UserFrames:
    """Each sample's user frames: those its walk found where it was walked, else those its
    callchain holds (``lengths[i]`` for sample ``i``, one sample after the other)."""

    lengths: npt.NDArray[np.int64]
    pc: npt.NDArray[np.uint64]
    module: npt.NDArray[np.int64]
    delta: npt.NDArray[np.uint64]
    exact: npt.NDArray[np.bool_]
    #: Which frames a walk found (the others: a recorded callchain's).
    walked: npt.NDArray[np.bool_]


def _user_frames(walks: Walks, recorded: RecordedChains) -> _UserFrames:
    """The user frames of a chunk's samples: a sample walked from its stack copy has the
    frames of its walk; one without (``perf record -g``) the frames its callchain holds."""
    walked = np.diff(walks.offsets)
    chained = np.where(walks.stop == STOPS.index(StopKind.NO_STACK), np.diff(recorded.offsets), 0)
    if not chained.any():
        return _UserFrames(walked, walks.pc, walks.module, walks.delta, walks.exact,
                           np.ones(len(walks.pc), bool))  # fmt: skip
    lengths = walked + chained
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    into_walked = range_positions(starts, walked)
    into_chained = range_positions(starts + walked, chained)
    from_chained = range_positions(recorded.offsets[:-1], chained)
    total = int(lengths.sum())
    pc, module = np.empty(total, np.uint64), np.empty(total, np.int64)
    delta, exact = np.empty(total, np.uint64), np.ones(total, bool)
    pc[into_walked], pc[into_chained] = walks.pc, recorded.pc[from_chained]
    module[into_walked], module[into_chained] = walks.module, recorded.module[from_chained]
    delta[into_walked], delta[into_chained] = walks.delta, recorded.delta[from_chained]
    exact[into_walked] = walks.exact
    from_walk = np.zeros(total, bool)
    from_walk[into_walked] = True
    return _UserFrames(lengths, pc, module, delta, exact, from_walk)


def _pair_keys(
    modules: npt.NDArray[np.int64], addresses: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64] | None:
    """One 64-bit key per (module, address) pair, the module above 48 bits of address; None
    where the addresses or the modules do not fit."""
    if len(addresses) and (int(addresses.max()) >= 1 << 48 or int(modules.max()) >= 1 << 15):
        return None
    keys: npt.NDArray[np.uint64] = (modules.astype(np.uint64) + np.uint64(1)) << np.uint64(48)
    return keys | addresses


def _distinct_pairs(
    modules: npt.NDArray[np.int64], addresses: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.intp]]:
    """The distinct (module, address) pairs (rows of two words), and which one each pair is:
    one 64-bit key per pair where they fit (:func:`_pair_keys`: a sort of words, not of
    rows)."""
    keys = _pair_keys(modules, addresses)
    if keys is not None:
        distinct, inverse = np.unique(keys, return_inverse=True)
        pairs = np.stack([(distinct >> np.uint64(48)) - np.uint64(1),
                          distinct & np.uint64((1 << 48) - 1)], axis=1)  # fmt: skip
        return pairs, inverse.reshape(-1)
    keys2 = np.stack([modules.astype(np.uint64), addresses]).T
    unique, inverse = np.unique(keys2, axis=0, return_inverse=True)
    return unique, inverse.reshape(-1)


def _count(stats: WalkStats, walked: WalkedChunk, spaces: AddressSpaces) -> None:
    """Add what the walks of a chunk did to ``stats`` (counted with numpy, then added to the
    counters once per distinct value)."""
    walks = walked.walks
    depth = np.diff(walks.offsets)
    stats.samples += len(walks)
    has_stack = walks.stop != STOPS.index(StopKind.NO_STACK)
    stats.walked += int(has_stack.sum())
    stats.frames += int(depth.sum())
    stats.depths.update(_tally(depth[has_stack]))
    stats.stops.update({STOPS[code]: n for code, n in _tally(walks.stop).items()})
    stats.stack_used += walks.stack_used[has_stack].tolist()
    stats.stack_copied += walked.samples.stack_dyn_size[has_stack].astype(np.int64).tolist()
    stats.stepped += int(walks.stepped.sum())
    names = [shown_name(module.path) for module in spaces.modules] + [UNKNOWN]
    ended = depth > 0
    last_module = walks.module[walks.offsets[1:][ended] - 1]  # -1: [unknown], names[-1]
    pairs = walks.stop[ended].astype(np.int64) * (len(names) + 1) + (last_module + 1)
    for pair, n in _tally(pairs).items():
        stop, module = divmod(pair, len(names) + 1)
        stats.stop_modules[(STOPS[stop], names[module - 1])] += n
    if len(walks.module):
        sample_of = np.repeat(np.arange(len(walks)), depth)
        # each (sample, module) once: the samples each module holds a frame of (a run of
        # frames of one module counted once before the sort)
        key = sample_of * (len(names) + 1) + (walks.module + 1)
        key = key[np.append(True, key[1:] != key[:-1])]
        distinct = np.unique(key, return_counts=True)[0]  # no numpy.ma: see sorted_distinct
        held = distinct % (len(names) + 1) - 1
        stats.module_samples.update({names[m]: n for m, n in _tally(held).items()})


def _count_events(
    stats: WalkStats, walked: WalkedChunk, attrs: list[EventAttr], spaces: AddressSpaces
) -> None:
    """Add to ``stats`` each event's kind and its samples with walked frames, recorded
    frames and both; and the samples whose recorded chain left out the caller of the
    function at their PC, by module."""
    samples, walks, recorded = walked.samples, walked.walks, walked.recorded
    has_walk = walks.stop != STOPS.index(StopKind.NO_STACK)
    has_chain = np.diff(recorded.offsets) > 0
    owner = np.repeat(np.arange(len(samples)), np.diff(samples.callchain_offsets))
    deferred = np.zeros(len(samples), bool)
    deferred[owner[samples.callchain == np.uint64(CONTEXT_USER_DEFERRED)]] = True
    stats.recorded += int(has_chain.sum())
    stats.both += int((has_chain & has_walk).sum())
    for attr in _tally(samples.attr.astype(np.int64)):
        chosen = samples.attr == attr
        known = attr < len(attrs)
        name = (attrs[attr].name if known else None) or f"event{attr}"
        kind = callchain_kind(attrs[attr]) if known else "none"
        event = stats.events.setdefault(name, EventStats(kind))
        if deferred[chosen].any():
            event.kind = "deferred"
        event.samples += int(chosen.sum())
        event.walked += int((chosen & has_walk).sum())
        event.recorded += int((chosen & has_chain).sum())
        event.both += int((chosen & has_walk & has_chain).sum())
    missed = np.flatnonzero(recorded.leaf_not_set_up & has_chain & ~has_walk)
    if len(missed):
        names = [shown_name(module.path) for module in spaces.modules] + [UNKNOWN]
        modules = recorded.module[recorded.offsets[missed]]
        stats.chain_missed_caller.update({names[m]: n for m, n in _tally(modules).items()})


def _tally(values: npt.NDArray[np.int64] | npt.NDArray[np.int8]) -> dict[int, int]:
    """How many times each value occurs."""
    distinct, counts = np.unique(values, return_counts=True)
    return dict(zip(distinct.tolist(), counts.tolist(), strict=True))


__all__ = [
    "MIN_PART_BYTES",
    "EventStats",
    "Options",
    "WalkStats",
    "callchain_kind",
    "profile_parts",
    "profile_recording",
]
