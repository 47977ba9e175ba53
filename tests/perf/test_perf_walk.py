"""``pysframe perf``'s walks against perf's own, sample by sample.

A program (tests/data/perf/profiled.c and its shared library: threads, callbacks from libc's
qsort, 40 frames of 512 bytes) built with -O2 -fomit-frame-pointer is recorded by ``perf
record --call-graph dwarf``.  Then:

* every sample's user frames (the address perf prints and the module) are perf script's;
* with a small stack copy (``dwarf,1024``) walks end where the copy ends, as perf's do.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import unavailable
from perf_support import PERF, Unavailable, build_profiled, check_perf
from pysframe.perf import PerfData
from pysframe.perf.analyze import Options, profile_recording
from pysframe.perf.modules import ModuleFinder
from pysframe.perf.session import walk_recording
from pysframe.perf.spaces import AddressSpaces
from pysframe.unwind import StopKind

#: A frame as compared: (the address perf prints, the module).
Frame = tuple[int, str]


def _record(program: Path, out: Path, stack: int, seconds: float) -> Path:
    check_perf()
    data = out / f"perf-{stack}.data"
    done = subprocess.run(
        [PERF, "record", "-q", "-e", "cpu-clock", "-c", "100000", "--call-graph",
         f"dwarf,{stack}", "-o", str(data), "--", str(program), str(seconds)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode:
        raise Unavailable("perf", f"perf record failed: {done.stderr[:200]}")
    return data


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    out = tmp_path_factory.mktemp("perf-walk")
    try:
        program = build_profiled(out)
        return {size: _record(program, out, size, 0.6) for size in (8192, 1024)}
    except Unavailable as why:
        unavailable(why)


def _user_frames(path: Path) -> dict[tuple[int, int], tuple[list[Frame], StopKind]]:
    """Each sample's user frames as perf prints them, by (thread, time)."""
    frames: dict[tuple[int, int], tuple[list[Frame], StopKind]] = {}
    with PerfData.open(path) as data:
        builds = {entry.filename: entry.build_id for entry in data.features.build_ids}
        spaces = AddressSpaces(ModuleFinder(build_ids=builds))
        for walked in walk_recording(data, spaces):
            walks = walked.walks
            names = [module.path for module in spaces.modules]
            for index in range(len(walks)):
                listed = []
                for k in range(walks.offsets[index], walks.offsets[index + 1]):
                    address = int(walks.pc[k]) - (0 if walks.exact[k] else 1)
                    module = int(walks.module[k])
                    if module < 0:
                        listed.append((address, "[unknown]"))
                    else:
                        listed.append(((address + int(walks.delta[k])) % (1 << 64), names[module]))
                if walks.lost_return[index]:  # perf's walk gives a frame at 0 there
                    listed.append(((1 << 64) - 1, "[unknown]"))
                key = (int(walked.samples.tid[index]), int(walked.samples.time[index]))
                frames[key] = (listed, walks.stop_of(index))
    return frames


def _perf_frames(path: Path) -> dict[tuple[int, int], list[Frame]]:
    """Each sample's user frames as ``perf script --no-inline`` prints them."""
    text = subprocess.run(
        [PERF, "script", "--no-inline", "-F", "tid,time,ip,dso", "--ns", "-i", str(path)],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    frames: dict[tuple[int, int], list[Frame]] = {}
    current: list[Frame] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith("\t"):  # a sample's line; its frames' start with a tab
            tid, stamp = line.split()[:2]
            seconds, nanoseconds = stamp.rstrip(":").split(".")
            current = frames.setdefault((int(tid), int(seconds) * 10**9 + int(nanoseconds)), [])
            continue
        match = re.match(r"\s*([0-9a-f]+) \((.*)\)$", line)
        assert match is not None, line
        if match.group(2) != "[kernel.kallsyms]":
            current.append((int(match.group(1), 16), match.group(2)))
    return frames


def test_user_frames_are_perfs(recordings: dict[int, Path]) -> None:
    path = recordings[8192]
    ours, theirs = _user_frames(path), _perf_frames(path)
    assert list(ours) == list(theirs)  # the same samples, in perf's (time) order
    different = [key for key, (frames, _stop) in ours.items() if frames != theirs[key]]
    assert len(ours) > 1000
    assert len(different) <= len(ours) // 100, different[:5]


def test_walks_end_where_the_stack_copy_ends(recordings: dict[int, Path]) -> None:
    # A 1 KiB copy holds the few innermost frames of a 40-deep recursion of 512-byte frames.
    path = recordings[1024]
    ours, theirs = _user_frames(path), _perf_frames(path)
    assert list(ours) == list(theirs)
    ended = [key for key, (_frames, stop) in ours.items() if stop is StopKind.UNREADABLE]
    assert len(ended) > len(ours) // 4
    different = [key for key, (frames, _stop) in ours.items() if frames != theirs[key]]
    assert len(different) <= len(ours) // 100, different[:5]


def test_profile_and_stats(recordings: dict[int, Path]) -> None:
    profile, stats = profile_recording(str(recordings[8192]))
    assert len(profile) == stats.samples > 1000
    assert stats.walked == stats.samples - stats.stops[StopKind.NO_STACK]
    assert stats.stops[StopKind.OUTERMOST] > stats.walked * 0.95
    names = {frame.symbol for frame in profile.frames}
    assert {"deep", "lib_sort", "cmp", "hashing", "lib_hash", "worker"} <= names
    assert any(module.endswith("/profiled") for module in stats.module_samples)
    # without the counts (the commands that print samples): the same profile, nothing counted
    uncounted, bare = profile_recording(str(recordings[8192]), Options(count_walks=False))
    assert (uncounted.frames, uncounted.stacks, uncounted.stack, uncounted.time) == (
        profile.frames, profile.stacks, profile.stack, profile.time
    )
    assert (bare.samples, bare.frames, bare.depths, bare.stack_used) == (0, 0, {}, [])
    assert not bare.module_samples and not bare.stops
