"""Helpers of the report writers' tests: profiles made by hand, and profiles of recordings.

* :func:`profile_of_ips` makes a :class:`~pysframe.perf.profile.Profile` of a recording's
  sample IPs alone (one frame per sample, no unwinding), each named as perf names it: user
  frames by the module perf's MMAP records place them in and that file's symbols
  (:func:`pysframe.unwind.symbolize.symbols_of_file`), kernel frames from /proc/kallsyms.
  That is what ``perf report --no-children`` tabulates (its self entries are the samples'
  IPs), so the top table of such a profile is comparable with perf's.
* :func:`synthetic_profile` makes a big profile of made-up stacks, for the properties and
  the benchmarks.
* :func:`parse_top` reads the rows of ``perf report --stdio`` (and of ``write_top``).
"""

from __future__ import annotations

import bisect
import functools
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path

from pysframe.elf.reader import ElfReader
from pysframe.errors import SFrameError
from pysframe.perf import CommEvent, LostEvent, MmapEvent, PerfData, Sample, TaskEvent
from pysframe.perf.profile import KERNEL_MODULE, UNKNOWN, FrameInfo, Profile
from pysframe.unwind.symbolize import (
    ModuleSymbols,
    SymbolOptions,
    symbols_of_file,
    symbols_of_image,
)

#: PERF_RECORD_MISC_KERNEL (perf_event.h), the CPU mode of a kernel sample.
MISC_KERNEL = 1
#: perf's software event type and its clock events, whose period is in nanoseconds.
TYPE_SOFTWARE, CPU_CLOCK, TASK_CLOCK = 1, 0, 1


# -- the kernel's symbols ----------------------------------------------------------------------


@dataclass(frozen=True)
class KernelSymbols:
    """/proc/kallsyms' text symbols: starts (sorted), names, modules."""

    starts: list[int]
    names: list[str]
    modules: list[str]

    def find(self, address: int) -> tuple[str, str, int] | None:
        """(module, name, offset) of the symbol at or below ``address``."""
        at = bisect.bisect_right(self.starts, address) - 1
        if at < 0:
            return None
        return self.modules[at], self.names[at], address - self.starts[at]


@functools.cache
def kernel_symbols(path: str = "/proc/kallsyms") -> KernelSymbols | None:
    """The text symbols of /proc/kallsyms, one per address: the last one listed there, as perf
    keeps it (symbol.c: symbols__fixup_end leaves the earlier ones of an address empty, and
    choose_best_symbol prefers a symbol with a size); None when the addresses are hidden
    (kptr_restrict) or the file cannot be read."""
    best: dict[int, tuple[str, str]] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as kallsyms:
            for line in kallsyms:
                parts = line.split()
                if len(parts) < 3 or parts[1] not in "tTwW":
                    continue
                module = f"[{parts[3].strip('[]')}]" if len(parts) > 3 else KERNEL_MODULE
                best[int(parts[0], 16)] = (parts[2], module)
    except OSError:
        return None
    if not best or max(best) == 0:
        return None
    starts = sorted(best)
    return KernelSymbols(starts, [best[a][0] for a in starts], [best[a][1] for a in starts])


# -- user modules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Map:
    start: int
    end: int
    pgoff: int
    filename: str


@functools.cache
def _segments(path: str) -> tuple[tuple[int, int, int], ...]:
    """(file offset, size, link address) of the PT_LOAD segments of ``path``."""
    try:
        with ElfReader.open(path) as image:
            return tuple(
                (segment.offset, segment.filesz, segment.vaddr)
                for segment in image.segments()
                if segment.type == 1
            )
    except (SFrameError, OSError):
        return ()


def _link_address(path: str, file_offset: int) -> int | None:
    for offset, size, vaddr in _segments(path):
        if offset <= file_offset < offset + size:
            return file_offset - offset + vaddr
    return None


@functools.cache
def _vdso_symbols() -> ModuleSymbols | None:
    """The symbols of this process's vDSO (the kernel's: every process maps the same one)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            line = next(line for line in maps if line.rstrip().endswith("[vdso]"))
        start, end = (int(part, 16) for part in line.split()[0].split("-"))
        with open("/proc/self/mem", "rb") as memory:
            memory.seek(start)
            image = memory.read(end - start)
        with ElfReader.from_bytes("[vdso]", image) as elf:
            return symbols_of_image(elf, search=False)
    except (OSError, StopIteration, SFrameError):
        return None


@functools.cache
def _file_symbols(path: str) -> ModuleSymbols:
    """The symbols of the file at ``path``, read once for the whole test session."""
    return symbols_of_file(path)


def _user_frame(found: _Map | None, ip: int) -> FrameInfo:
    if found is None:
        return FrameInfo(ip, UNKNOWN, module_address=ip)
    module_address = ip - found.start + found.pgoff  # map__map_ip
    if found.filename == "[vdso]":
        symbols = _vdso_symbols()
        named = symbols.find(module_address) if symbols is not None else None
        if named is not None:
            return FrameInfo(ip, "[vdso]", named[0], named[1], module_address=module_address)
        return FrameInfo(ip, "[vdso]", module_address=module_address)
    link = _link_address(found.filename, module_address)
    if link is not None:
        named = _file_symbols(found.filename).find(link)
        if named is not None:
            return FrameInfo(
                ip, found.filename, SymbolOptions().name(named[0]), named[1],
                module_address=module_address,
            )  # fmt: skip
    return FrameInfo(ip, found.filename, module_address=module_address)


def _kernel_frame(ip: int) -> FrameInfo:
    symbols = kernel_symbols()
    found = symbols.find(ip) if symbols is not None else None
    if found is None:
        return FrameInfo(ip, KERNEL_MODULE, kernel=True)
    module, name, offset = found
    return FrameInfo(ip, module, name, offset, kernel=True)


def _event_of(attr: object) -> tuple[str, str]:
    name = getattr(attr, "name", None) or "cpu-clock"
    clock = getattr(attr, "type", None) == TYPE_SOFTWARE and getattr(attr, "config", None) in (
        CPU_CLOCK, TASK_CLOCK,
    )  # fmt: skip
    return name, "nanoseconds" if clock else "events"


def profile_of_ips(path: Path) -> Profile:
    """A profile of ``path``'s samples with one frame each: the sample's IP (see the module's
    docstring).  Threads' names follow COMM and FORK records, processes' maps their MMAP
    records (a later map over an earlier one wins, as perf's maps__fixup_overlappings makes
    it), read in file order; the samples as the oracle of the sample decoder reads them."""
    from perf_sample_oracle import oracle_samples

    profile = Profile(sources=[str(path)])
    maps: dict[int, list[_Map]] = {}
    comms: dict[int, str] = {0: "swapper"}  # the idle task, named before any record
    with PerfData.open(path) as data:
        events = [_event_of(attr) for attr in data.attrs]
        for build_id in data.features.build_ids:
            profile.build_ids.setdefault(build_id.filename, build_id.hex)
        # perf processes records in time order (ordered_events), not in file order.
        records: list[tuple[int, int, object]] = [
            (event.time or 0, event.offset, event) for event in data.events()
        ]
        samples, error = oracle_samples(path)
        if error is not None:
            raise error
        records += [(sample.time, sample.file_offset, sample) for sample in samples]
        for _, _, record in sorted(records, key=lambda entry: (entry[0], entry[1])):
            if isinstance(record, LostEvent):
                # perf report's "Total Lost Samples" counts LOST_SAMPLES records (session.c).
                profile.lost_samples += record.lost if record.id is None else 0
                continue
            if not isinstance(record, Sample):
                _side_band(record, maps, comms)
                continue
            if record.misc & 7 == MISC_KERNEL:
                frame = _kernel_frame(record.ip)
            else:
                frame = _user_frame(_find_map(maps.get(record.pid, []), record.ip), record.ip)
            name, unit = events[record.attr]
            profile.add(
                profile.stack_id([profile.frame_id(frame)]),
                pid=record.pid, tid=record.tid, time=record.time, cpu=record.cpu or 0,
                period=record.period, comm=profile.comm_id(comms.get(record.tid, f":{record.tid}")),
                event=profile.event_id(name, unit),
            )  # fmt: skip
    return profile


def _find_map(maps: list[_Map], ip: int) -> _Map | None:
    for mapping in reversed(maps):
        if mapping.start <= ip < mapping.end:
            return mapping
    return None


def _side_band(event: object, maps: dict[int, list[_Map]], comms: dict[int, str]) -> None:
    if isinstance(event, MmapEvent):
        if event.executable and event.filename.startswith("/"):
            maps.setdefault(event.pid, []).append(
                _Map(event.start, event.start + event.length, event.pgoff, event.filename)
            )
        elif event.executable and event.filename == "[vdso]":
            maps.setdefault(event.pid, []).append(
                _Map(event.start, event.start + event.length, event.pgoff, "[vdso]")
            )
    elif isinstance(event, CommEvent):
        comms[event.tid] = event.comm
    elif isinstance(event, TaskEvent) and event.fork:
        if event.ptid in comms:
            comms[event.tid] = comms[event.ptid]
        else:  # a thread made anew, of a parent nothing named
            comms.pop(event.tid, None)
        if event.pid != event.ppid:  # a new process: it starts with its parent's maps
            maps[event.pid] = list(maps.get(event.ppid, []))


# -- profiles of perf's own stacks -------------------------------------------------------------

#: The fields asked of perf script for :func:`profile_of_perf_script`.
SCRIPT_FIELDS = "comm,pid,tid,time,period,event,ip,sym,symoff,dso"
_SCRIPT_HEAD = re.compile(
    r"^(?P<comm>\S.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<time>\d+)\.(?P<ns>\d{9}):"
    r"\s+(?P<period>\d+)\s+(?P<event>\S+?):\s*$"
)
_SCRIPT_FRAME = re.compile(
    r"^\s+(?P<address>[0-9a-f]+)\s(?P<symbol>.*?)(?:\+0x(?P<offset>[0-9a-f]+))?"
    r"\s\((?P<module>[^()]*)\)$"
)


def profile_of_perf_script(text: str, source: str = "perf script") -> Profile:
    """A profile of the stacks perf itself unwound: ``perf script -F`` :data:`SCRIPT_FIELDS`
    ``--ns`` output (inlined functions on lines of their own, ``(inlined)`` for their
    module).  User addresses are the ones perf prints (in their module)."""
    profile = Profile(sources=[source])
    head: re.Match[str] | None = None
    frames: list[tuple[int, str, str | None, int, bool]] = []

    def finish() -> None:
        if head is None:
            return
        ids = []
        module_of_inlined = UNKNOWN
        for address, module, symbol, offset, inlined in reversed(frames):
            if not inlined:
                module_of_inlined = module
            kernel = module.startswith("[kernel") or address >= 0xFFFF800000000000
            ids.append(
                profile.frame_id(
                    FrameInfo(
                        address, module_of_inlined if inlined else module, symbol, offset,
                        module_address=None if kernel else address, kernel=kernel,
                        inlined=inlined,
                    )
                )
            )
        name = head["event"]
        unit = "nanoseconds" if name in ("cpu-clock", "task-clock") else "events"
        profile.add(
            profile.stack_id(ids[::-1]), pid=int(head["pid"]), tid=int(head["tid"]),
            time=int(head["time"]) * 10**9 + int(head["ns"]), cpu=0,
            period=int(head["period"]), comm=profile.comm_id(head["comm"]),
            event=profile.event_id(name, unit),
        )  # fmt: skip

    for line in text.splitlines():
        match = _SCRIPT_HEAD.match(line)
        if match:
            finish()
            head, frames = match, []
            continue
        frame = _SCRIPT_FRAME.match(line)
        if frame and head is not None:
            symbol = frame["symbol"]
            frames.append(
                (
                    int(frame["address"], 16), frame["module"],
                    None if symbol == UNKNOWN else symbol, int(frame["offset"] or "0", 16),
                    frame["module"] == "inlined",
                )
            )
    finish()
    return profile


def profile_of_perf_stacks(path: Path) -> Profile:
    """A profile of the stacks perf itself unwinds for ``perf report``: those of ``perf script
    --no-inline`` (:func:`profile_of_perf_script`), each user frame without a symbol also at
    the address the process saw it at (perf report names such callers by it), worked out
    from the recording's MMAP records (``printed - pgoff + start`` of the process's mapping
    of that module); with the recording's build IDs (in its order), lost samples and events
    with callchains, as :func:`pysframe.perf.analyze.profile_recording` gives them."""
    import subprocess

    from perf_support import PERF

    text = subprocess.run(
        [PERF, "script", "--no-inline", "-i", str(path), "-F", SCRIPT_FIELDS, "--ns"],
        capture_output=True, text=True, timeout=300, check=True, errors="replace",
    ).stdout  # fmt: skip
    stacks = profile_of_perf_script(text, str(path))
    maps: dict[int, list[_Map]] = {}
    with PerfData.open(path) as data:
        for build_id in data.features.build_ids:
            stacks.build_ids.setdefault(build_id.filename, build_id.hex)
        stacks.events_without_callchain = {
            attr.name or "cpu-clock" for attr in data.attrs if not attr.sample_type & (1 << 5)
        }
        for event in data.events():
            if isinstance(event, LostEvent):
                stacks.lost_samples += event.lost if event.id is None else 0
            elif isinstance(event, MmapEvent) and event.filename.startswith("/"):
                maps.setdefault(event.pid, []).append(_Map(
                    event.start, event.start + event.length, event.pgoff, event.filename
                ))  # fmt: skip
    profile = Profile(sources=stacks.sources, build_ids=stacks.build_ids,
                      lost_samples=stacks.lost_samples,
                      events_without_callchain=stacks.events_without_callchain)  # fmt: skip
    for index in range(len(stacks)):
        pid = stacks.pid[index]
        frames = []
        for frame in stacks.stack_frames(stacks.stack[index]):
            if frame.symbol is None and not frame.kernel and frame.module != UNKNOWN:
                for mapping in reversed(maps.get(pid, [])):
                    size = mapping.end - mapping.start
                    if mapping.filename == frame.module and (
                        mapping.pgoff <= frame.address < mapping.pgoff + size
                    ):
                        runtime = frame.address - mapping.pgoff + mapping.start
                        frame = replace(frame, runtime_address=runtime)
                        break
            frames.append(profile.frame_id(frame))
        name, unit = stacks.events[stacks.event[index]]
        profile.add(
            profile.stack_id(frames), pid=pid, tid=stacks.tid[index], time=stacks.time[index],
            cpu=0, period=stacks.period[index],
            comm=profile.comm_id(stacks.comms[stacks.comm[index]]),
            event=profile.event_id(name, unit),
        )  # fmt: skip
    return profile


# -- made-up profiles --------------------------------------------------------------------------


def synthetic_profile(samples: int, stacks: int, seed: int = 1) -> Profile:
    """``samples`` samples over about ``stacks`` distinct stacks, 4 to 60 frames deep, of
    2,000 functions in 40 modules (a tenth of the frames kernel ones, a few unnamed or
    inlined), 8 threads of 3 processes, two events."""
    rng = random.Random(seed)
    profile = Profile(sources=["synthetic"])
    modules = [f"/usr/lib/lib{m}.so" for m in range(38)] + [KERNEL_MODULE, "[vdso]"]
    functions = []
    for index in range(2000):
        module = modules[index % len(modules)]
        kernel = module == KERNEL_MODULE
        symbol = None if index % 97 == 0 else f"function_{index}"
        base = 0xFFFFFFFF81000000 if kernel else 0x7F0000000000 + (index % 38) * 0x1000000
        frame = FrameInfo(
            base + index * 0x100, module, symbol, 0x10, kernel=kernel,
            module_address=None if kernel else index * 0x100,
            inlined=index % 53 == 0,
        )  # fmt: skip
        functions.append(profile.frame_id(frame))
    stack_ids = []
    for _ in range(stacks):
        depth = rng.randint(4, 60)
        stack_ids.append(profile.stack_id([rng.choice(functions) for _ in range(depth)]))
    comms = [profile.comm_id(name) for name in ("main", "worker one", "java")]
    events = [profile.event_id("cpu-clock", "nanoseconds"), profile.event_id("cycles", "events")]
    time = 10**12
    for index in range(samples):
        thread = rng.randrange(8)
        time += rng.randint(1, 200000)
        profile.add(
            stack_ids[min(int(rng.paretovariate(1.2)) - 1, len(stack_ids) - 1)
                      if index % 2 else rng.randrange(len(stack_ids))],
            pid=1000 + thread % 3, tid=1000 + thread, time=time, cpu=thread % 4,
            period=100000 if index % 5 else 250000, comm=comms[thread % 3],
            event=events[0] if index % 10 else events[1],
        )  # fmt: skip
    return profile


# -- perf report's table -----------------------------------------------------------------------

_ROW = re.compile(
    r"^\s+(?P<percents>(?:\d+\.\d\d%\s+)+)(?P<comm>.*?)\s\s+(?P<dso>\S.*?)\s\s+"
    r"(?P<symbol>\[.\] .*)$"
)


@dataclass(frozen=True)
class ParsedRow:
    percents: tuple[str, ...]
    comm: str
    dso: str
    symbol: str


def parse_top(text: str) -> list[list[ParsedRow]]:
    """The rows of each event's table in ``perf report --stdio`` text, in order."""
    sections: list[list[ParsedRow]] = []
    for line in text.splitlines():
        if line.startswith("# Samples:"):
            sections.append([])
            continue
        match = _ROW.match(line)
        if match and sections:
            sections[-1].append(
                ParsedRow(
                    tuple(match["percents"].split()), match["comm"].rstrip(),
                    match["dso"].rstrip(), match["symbol"],
                )
            )
    return sections


def header_lines(text: str) -> list[str]:
    """The ``#`` lines of each section's head (Samples, Event count, columns, dots)."""
    return [line for line in text.splitlines() if line.startswith("# ") and "Tip:" not in line]


__all__ = [
    "SCRIPT_FIELDS",
    "KernelSymbols",
    "ParsedRow",
    "header_lines",
    "kernel_symbols",
    "parse_top",
    "profile_of_ips",
    "profile_of_perf_script",
    "profile_of_perf_stacks",
    "synthetic_profile",
]

