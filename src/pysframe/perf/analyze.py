"""A recording made into a profile: every sample's stack walked, its frames named.

:func:`profile_recording` reads a perf.data file through (:mod:`pysframe.perf.session`):
each sample's kernel frames are its recorded callchain's, named from kallsyms
(:mod:`pysframe.perf.kernel`); its user frames are those its walk found
(:mod:`pysframe.perf.walk`), named from each module's symbols.  Frames are printed as
``perf script`` prints them: kernel frames at their address, user frames at their address in
the module's file (perf's map_ip), each return address one byte back (the call instruction,
as perf's libdw walk reports it), with ``symbol+offset`` and the module.

The result is a :class:`~pysframe.perf.profile.Profile` and :class:`WalkStats`, what the walks
did (for ``perf stats``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..sources.trust import Policy
from ..unwind.symbolize import SymbolOptions
from .data import DEFAULT_CHUNK, PerfData
from .kernel import PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, KernelSymbols, kernel_symbols
from .layout import MISC_CPUMODE_MASK, MISC_KERNEL
from .modules import DEFAULT_DEBUG_DIR, ModuleFinder
from .profile import KERNEL_MODULE, UNKNOWN, FrameInfo, Profile
from .session import WalkedChunk, walk_recording
from .spaces import AddressSpaces
from .walk import MAX_FRAMES, STOPS, Stop

if TYPE_CHECKING:
    import numpy.typing as npt

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


@dataclass(slots=True)
class WalkStats:
    """What the walks of a recording did."""

    samples: int = 0
    #: Samples with a user stack copy (walked).
    walked: int = 0
    frames: int = 0
    #: Walks by depth (user frames), and by why they stopped.
    depths: Counter[int] = field(default_factory=Counter)
    stops: Counter[Stop] = field(default_factory=Counter)
    #: Bytes of its stack copy each walk read, and how many were copied.
    stack_used: list[int] = field(default_factory=list)
    stack_copied: list[int] = field(default_factory=list)
    #: Samples walked by the reference unwinder.
    reference: int = 0
    #: Samples whose innermost user frame is in each module (by name).
    module_samples: Counter[str] = field(default_factory=Counter)
    #: Modules without SFrame of their own, and why.
    without_own_sframe: dict[str, str] = field(default_factory=dict)
    #: Where each module's SFrame came from.
    origins: dict[str, str] = field(default_factory=dict)
    #: Problems met (a file cut short...), one line each.
    problems: list[str] = field(default_factory=list)


def profile_recording(
    path: str,
    options: Options | None = None,
    *,
    on_chunk: Callable[[int, int], None] | None = None,
) -> tuple[Profile, WalkStats]:
    """The profile of the recording at ``path`` and what its walks did; ``on_chunk(done,
    total)`` is told the bytes read so far (for a progress bar)."""
    options = options or Options()
    with PerfData.open(path) as data:
        finder = ModuleFinder(
            build_ids={entry.filename: entry.build_id for entry in data.features.build_ids},
            debug_dir=options.debug_dir,
            symfs=options.symfs,
            policy=options.policy,
            symbols=options.symbols,
        )
        spaces = AddressSpaces(finder)
        kernel = kernel_symbols(data.features.build_id(KERNEL_MODULE), options.debug_dir)
        namer = _Namer(finder, spaces, kernel, options.symbols)
        profile = Profile(sources=[path])
        stats = WalkStats()
        events = [
            profile.event_id(attr.name or f"event{number}", _unit(attr.name))
            for number, attr in enumerate(data.attrs)
        ]
        for walked in walk_recording(data, spaces, chunk=options.chunk,
                                     max_frames=options.max_frames):  # fmt: skip
            _add_chunk(profile, stats, walked, namer, events)
            if on_chunk is not None:
                header = data.header
                end = header.data_offset + header.data_size if not header.pipe else 0
                on_chunk(int(walked.samples.file_offset[-1]), end)
        stats.problems += [str(problem) for problem in data.problems]
        stats.without_own_sframe = dict(finder.problems)
        stats.origins = {module.name: module.origin for module in spaces.modules}
    return profile, stats


def _unit(name: str | None) -> str:
    return "nanoseconds" if (name or "").split(":")[0] in _CLOCK_EVENTS else "events"


class _Namer:
    """Frame ids for the frames of a chunk: each distinct frame named once."""

    def __init__(
        self,
        finder: ModuleFinder,
        spaces: AddressSpaces,
        kernel: KernelSymbols | None,
        symbols: SymbolOptions,
    ) -> None:
        self.finder, self.spaces, self.kernel, self.symbols = finder, spaces, kernel, symbols
        #: (module id, address in the module) -> frame id; kernel frames: (-2, address).
        self.ids: dict[tuple[int, int], int] = {}

    def user(
        self,
        profile: Profile,
        modules: npt.NDArray[np.int64],
        lookup: npt.NDArray[np.uint64],
        printed: npt.NDArray[np.uint64],
    ) -> npt.NDArray[np.int64]:
        """Frame ids of user frames: module ids, lookup PCs, printed addresses."""
        keys = np.stack([modules.astype(np.uint64), printed]).T
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        ids = np.empty(len(unique), dtype=np.int64)
        missing: dict[int, list[int]] = {}
        for position, (module, address) in enumerate(unique.tolist()):
            found = self.ids.get((int(np.int64(np.uint64(module))), int(address)))
            if found is None:
                missing.setdefault(int(np.int64(np.uint64(module))), []).append(position)
            else:
                ids[position] = found
        if missing:
            first = np.zeros(len(unique), dtype=np.int64)
            first[inverse.reshape(-1)[::-1]] = np.arange(len(inverse))[::-1]
            for module_id, positions in missing.items():
                at = first[positions]
                named = self._user_names(module_id, lookup[at])
                for position, name in zip(positions, named, strict=True):
                    address = int(unique[position][1])
                    frame = FrameInfo(address, name[0], name[1], name[2], address)
                    ids[position] = self.ids[(module_id, address)] = profile.frame_id(frame)
        return ids[inverse.reshape(-1)]

    def _user_names(
        self, module_id: int, lookup: npt.NDArray[np.uint64]
    ) -> list[tuple[str, str | None, int]]:
        if module_id < 0:
            return [(UNKNOWN, None, 0)] * len(lookup)
        module = self.spaces.modules[module_id]
        symbols = self.finder.symbols(module)
        if symbols is None:
            return [(module.name, None, 0)] * len(lookup)
        link = (lookup - np.uint64(module.bias & ((1 << 64) - 1))).astype(np.uint64)
        out: list[tuple[str, str | None, int]] = []
        for found in symbols.find_many(link):
            if found is None:
                out.append((module.name, None, 0))
            else:
                out.append((module.name, self.symbols.name(found[0]), found[1]))
        return out

    def kernel_frames(self, profile: Profile, addresses: npt.NDArray[np.uint64]) -> list[int]:
        """Frame ids of kernel frames at ``addresses``."""
        out: list[int] = []
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
                found = self.ids[key] = profile.frame_id(frame)
            out.append(found)
        return out


def _add_chunk(
    profile: Profile, stats: WalkStats, walked: WalkedChunk, namer: _Namer, events: list[int]
) -> None:
    """Name the frames of a chunk's samples and add the samples to ``profile``."""
    samples, walks = walked.samples, walked.walks
    # User frames: a return address is printed and looked up one byte back.
    lookup = walks.pc - np.where(walks.exact, np.uint64(0), np.uint64(1))
    printed = lookup + walks.delta  # perf's map_ip: pc - start + pgoff
    user_ids = namer.user(profile, walks.module, lookup, printed)
    chain = samples.callchain
    offsets = samples.callchain_offsets
    for index in range(len(samples)):
        kernel = _kernel_part(chain[offsets[index] : offsets[index + 1]])
        frames = namer.kernel_frames(profile, kernel) if len(kernel) else []
        frames += user_ids[walks.offsets[index] : walks.offsets[index + 1]].tolist()
        if not frames and samples.misc[index] & MISC_CPUMODE_MASK != MISC_KERNEL:
            frames = namer.user(
                profile, np.array([-1]), samples.ip[index : index + 1],
                samples.ip[index : index + 1],
            ).tolist()  # fmt: skip
        attr = int(samples.attr[index])
        profile.add(
            profile.stack_id(frames),
            pid=int(samples.pid[index]),
            tid=int(samples.tid[index]),
            time=int(samples.time[index]),
            cpu=int(samples.cpu[index]),
            period=int(samples.period[index]),
            comm=profile.comm_id(walked.comms[index]),
            event=events[attr] if attr < len(events) else profile.event_id("event", "events"),
        )
    _count(stats, walked)


def _kernel_part(chain: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The kernel addresses of a recorded callchain: those after PERF_CONTEXT_KERNEL, up to
    the next context marker."""
    if not len(chain):
        return chain
    markers = np.flatnonzero(chain >= np.uint64(PERF_CONTEXT_MAX))
    kernel_at = np.flatnonzero(chain == np.uint64(PERF_CONTEXT_KERNEL))
    if not len(kernel_at):
        return chain[:0]
    start = int(kernel_at[0]) + 1
    later = markers[markers >= start]
    end = int(later[0]) if len(later) else len(chain)
    return chain[start:end]


def _count(stats: WalkStats, walked: WalkedChunk) -> None:
    walks = walked.walks
    depth = np.diff(walks.offsets)
    stats.samples += len(walks)
    has_stack = walks.stop != STOPS.index(Stop.NO_USER_STACK)
    stats.walked += int(has_stack.sum())
    stats.frames += int(depth.sum())
    stats.depths.update(depth[has_stack].tolist())
    stats.stops.update(STOPS[code] for code in walks.stop.tolist())
    stats.stack_used += walks.stack_used[has_stack].tolist()
    stats.stack_copied += walked.samples.stack_dyn_size[has_stack].astype(np.int64).tolist()
    stats.reference += int(walks.reference.sum())


__all__ = ["Options", "WalkStats", "profile_recording"]
