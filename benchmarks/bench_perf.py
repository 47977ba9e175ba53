"""``pysframe perf`` against ``perf script``: CPU time, memory and agreement.

Four workloads are recorded once with ``perf record -e cpu-clock -c 100000 --call-graph
dwarf`` (at least 50,000 samples each, the size the goals are set for; ``--quick``: a few
hundred) and kept, with their programs, under the benchmark cache:

* ``c``: tests/data/perf/profiled.c and its shared library (threads, callbacks from libc's
  qsort, 40 frames of 512 bytes), built with -O2 -fomit-frame-pointer;
* ``c++``: tests/data/perf/profiledcxx.cc (std::sort with lambdas, virtual calls,
  std::function, exceptions, templates, threads), built the same way;
* ``python``: python3 running a JSON loop (deep interpreter stacks);
* ``inline``: tests/data/perf/inlined.c and its library inlinedlib.c, built with -O2 -g
  (hot chains of inlined functions, the DWARF perf's inline frames come from);
* ``small``: the ``c`` workload, a few hundred samples (the fixed cost: start-up, symbols,
  kallsyms; goal: at most 0.25 s of CPU).

For each recording, each command runs in a fresh process with its output to /dev/null, and
the kernel's account of it (wait4) gives its CPU time (user + system), wall time and peak
resident set; medians of ``--runs`` rounds, each of which runs every command once, in
turn (a ratio is the median of the rounds' ratios).  perf's default ``perf script`` (inline
frames) is counted with the addr2line processes it starts and never waits for.  pysframe runs
once first, so that the SFrame it generates for modules without their own, and the symbol tables
and kallsyms it parses, are in its cache (what a second report sees).  pysframe runs with
``-j 1`` for its CPU time (every process it starts counted); then with ``-j 2``, for its wall
time, its output checked to be ``-j 1``'s.  The ratios printed are pysframe's over perf's:
the goals are at most 1.0 for ``perf script --no-inline``, 0.5 for ``perf script`` (inline
frames, against perf's default with them), 0.8 for ``perf report --format folded`` (against
``perf script --no-inline``, both without inline frames), and a wall time of 0.6 with ``-j
2``.  The machine's load average is printed before and after: on a loaded machine read the
ratios, not the times.

Then, in this process: the walk alone (:func:`pysframe.perf.session.walk_recording`), in
frames per second of CPU time (goal: 1M); and the agreement of the two texts, sample by
sample: the share of samples whose user frames (address and module) are perf's, and of the
frames perf names whose names are perf's.

``--big``: also a recording of about 1 GB (the ``c`` workload) and the peak resident set of
``pysframe perf report --format folded`` on it (goal: at most 300 MB).

The installed package is measured as users have it, its modules compiled (``compileall``).

    python benchmarks/bench_perf.py [--quick] [--runs N] [--samples N] [--big] [--workloads W,...]
        [--ratios-only]
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parent.parent
#: Samples of the ``small`` workload.
SMALL_SAMPLES = 300
DATA = ROOT / "tests" / "data" / "perf"
FLAGS = ["-O2", "-fomit-frame-pointer"]
PYTHON_WORKLOAD = (
    "import json, sys, time\n"
    "end = time.monotonic() + float(sys.argv[1])\n"
    "total = 0\n"
    "while time.monotonic() < end:\n"
    "    for i in range(2000):\n"
    "        total += len(json.dumps({'a': i, 'b': [i, str(i)], 'c': {'d': i / 3}}))\n"
    "print(total)\n"
)


def build(workload: str, out: Path) -> list[str]:
    """The command that runs ``workload`` for a given number of seconds (the last
    argument), its program built in ``out``."""
    if workload == "python":
        script = out / "workload.py"
        script.write_text(PYTHON_WORKLOAD)
        return [sys.executable, str(script)]
    if workload == "c":
        library = out / "libprofiled.so"
        subprocess.run(["gcc", *FLAGS, "-fPIC", "-shared", "-o", str(library),
                        str(DATA / "profiledlib.c")], check=True)  # fmt: skip
        program = out / "profiled"
        subprocess.run(["gcc", *FLAGS, "-pthread", "-o", str(program), str(DATA / "profiled.c"),
                        f"-L{out}", "-lprofiled", "-Wl,-rpath,$ORIGIN"], check=True)  # fmt: skip
        return [str(program)]
    if workload == "inline":
        library = out / "libinlined.so"
        subprocess.run(["gcc", *FLAGS, "-g", "-fPIC", "-shared", "-o", str(library),
                        str(DATA / "inlinedlib.c")], check=True)  # fmt: skip
        program = out / "inlined"
        subprocess.run(["gcc", *FLAGS, "-g", "-o", str(program), str(DATA / "inlined.c"),
                        f"-L{out}", "-linlined", "-Wl,-rpath,$ORIGIN"], check=True)  # fmt: skip
        return [str(program)]
    program = out / "profiledcxx"
    subprocess.run(["g++", *FLAGS, "-pthread", "-o", str(program),
                    str(DATA / "profiledcxx.cc")], check=True)  # fmt: skip
    return [str(program)]


def record(perf: str, workload: str, samples: int, period: int = 100_000) -> Path | None:
    """A cached recording of ``workload`` with at least ``samples`` samples (recorded again,
    longer, until it has them); None where perf cannot record here."""
    out = common.cache_dir() / f"perf-{workload}-{samples}-{period}"
    path = out / "perf.data"
    if path.exists():
        return path
    out.mkdir(parents=True, exist_ok=True)
    command = build(workload, out)
    threads = 1 if workload in ("python", "inline") else 3
    seconds = samples / (1e9 / period) / min(threads, os.cpu_count() or 1) * 1.3
    for _ in range(4):
        partial = out / "perf.partial"
        if not common.perf_record(perf, [*command, f"{seconds:.2f}"], partial, period):
            return None
        got = count_samples(perf, partial)
        if got >= samples:
            partial.replace(path)
            return path
        seconds *= 1.5 * samples / max(got, 1)
    partial.replace(path)
    return path


def count_samples(perf: str, path: Path) -> int:
    text = subprocess.run([perf, "script", "-F", "tid", "-i", str(path)], capture_output=True,
                          text=True, check=False).stdout  # fmt: skip
    return text.count("\n")


def measured(command: list[str], descendants: bool = False) -> dict[str, float]:
    """Wall time, CPU time (user + system) and peak resident set of ``command``, its output
    thrown away, from the kernel's account of that one process (``descendants``: and of every
    process it started)."""
    run = common.run_process(command, descendants=descendants)
    return {"wall": run.wall, "cpu": run.cpu, "rss": run.peak_bytes}


def rounds(
    commands: dict[str, tuple[list[str], bool]], runs: int
) -> dict[str, list[dict[str, float]]]:
    """Each of ``commands`` (name -> (command, whether its descendants count)) measured
    ``runs`` times, in rounds: each round runs every command once, in turn, so that a load
    that comes and goes weighs on each alike (a command timed in a block of its own runs
    would take the whole of a busy spell)."""
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (command, descendants) in commands.items():
            figures[name].append(measured(command, descendants))
    return figures


def median(figures: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(f[key] for f in figures) for key in figures[0]}


def ratio(ours: list[dict[str, float]], theirs: list[dict[str, float]], key: str) -> float:
    """The median of the rounds' ratios (each of two runs side by side in time)."""
    return statistics.median(a[key] / b[key] for a, b in zip(ours, theirs, strict=True))


def walk_rate(path: Path) -> tuple[int, float]:
    """Frames walked, and frames per second of CPU time, by the batch walk alone."""
    from pysframe.perf import PerfData
    from pysframe.perf.modules import ModuleFinder
    from pysframe.perf.session import walk_recording
    from pysframe.perf.spaces import AddressSpaces

    def walk() -> int:
        with PerfData.open(path) as data:
            builds = {entry.filename: entry.build_id for entry in data.features.build_ids}
            spaces = AddressSpaces(ModuleFinder(build_ids=builds))
            return sum(len(walked.walks.pc) for walked in walk_recording(data, spaces))

    walk()  # modules read, SFrame generated or taken from the cache
    started = time.process_time()
    frames = walk()
    return frames, frames / max(time.process_time() - started, 1e-9)


_SAMPLE = re.compile(r"^(?!\t)(?:.*\s)?(\d+)\s+(\d+\.\d+):")
_FRAME = re.compile(r"^\s+([0-9a-f]+) (.*) \((.*)\)$")
Frames = list[tuple[int, str, str]]


def script_samples(text: str) -> dict[tuple[int, str], Frames]:
    """The frames (address, name, module) of each sample of perf script's text, by (thread,
    time)."""
    samples: dict[tuple[int, str], Frames] = {}
    frames: Frames = []
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        if sample:
            frames = samples.setdefault((int(sample.group(1)), sample.group(2)), [])
            continue
        frame = _FRAME.match(line)
        if frame:
            name = re.sub(r"\+0x[0-9a-f]+$", "", frame.group(2))
            frames.append((int(frame.group(1), 16), name, frame.group(3)))
    return samples


def agreement(perf: str, path: Path) -> tuple[int, float, float]:
    """Samples compared; the share whose user frames (address, module) are perf's; the share
    of user frames perf names that pysframe names alike."""
    theirs = script_samples(subprocess.run(
        [perf, "script", "--no-inline", "-F", "tid,time,ip,sym,dso", "-i", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout)  # fmt: skip
    ours = script_samples(subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", "script", "--no-inline", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout)  # fmt: skip

    def user(frames: Frames) -> Frames:
        return [frame for frame in frames if frame[2] != "[kernel.kallsyms]"]

    same = named = same_names = 0
    for key, frames in theirs.items():
        mine = user(ours.get(key, []))
        frames = user(frames)
        same += [(a, m) for a, _, m in mine] == [(a, m) for a, _, m in frames]
        by_place = {(a, m): name for a, name, m in mine}
        for address, name, module in frames:
            if name != "[unknown]":
                named += 1
                same_names += by_place.get((address, module)) == name
    return len(theirs), same / max(len(theirs), 1), same_names / max(named, 1)


def _figures(figures: dict[str, float]) -> str:
    return (f"CPU {figures['cpu']:6.2f} s   wall {figures['wall']:6.2f} s   "
            f"peak {figures['rss'] / 2**20:6.0f} MiB")  # fmt: skip


def inline_agreement(perf: str, path: Path) -> tuple[int, float]:
    """Samples compared, and the share whose text ``pysframe perf script`` gives as perf's
    default ``perf script`` does (inline frames included), byte for byte."""

    def samples(command: list[str]) -> list[str]:
        text = subprocess.run(command, capture_output=True, text=True, check=True,
                              errors="replace").stdout  # fmt: skip
        return [block for block in text.split("\n\n") if block.strip()]

    theirs = samples([perf, "script", "-i", str(path)])
    ours = samples([sys.executable, "-m", "pysframe", "perf", "script", str(path)])
    same = sum(a == b for a, b in zip(ours, theirs, strict=False))
    return len(theirs), same / max(len(theirs), 1)


def output_digest(command: list[str]) -> str:
    """The SHA-256 of what ``command`` writes on standard output."""
    digest = hashlib.sha256()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as process:
        assert process.stdout is not None
        while block := process.stdout.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def compare(perf: str, name: str, path: Path, runs: int, ratios_only: bool = False) -> None:
    common.heading(f"{name}: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    pysframe = [sys.executable, "-m", "pysframe", "perf"]
    measured([*pysframe, "script", str(path)])  # fills the cache (SFrame, symbols, kallsyms)
    script = [*pysframe, "script", "--no-inline", str(path)]
    figures = rounds({
        "plain": ([perf, "script", "--no-inline", "-i", str(path)], False),
        "inline": ([perf, "script", "-i", str(path)], True),
        "script": ([*script, "-j", "1"], True),
        "script-inline": ([*pysframe, "script", "-j", "1", str(path)], True),
        "folded": ([*pysframe, "report", "--format", "folded", "--no-inline", "-j", "1",
                    str(path)], True),
        "parallel": ([*script, "-j", "2"], True),
    }, runs)  # fmt: skip
    print(f"  {'perf script --no-inline':<34} {_figures(median(figures['plain']))}")
    print(f"  {'perf script (inline, addr2line)':<34} {_figures(median(figures['inline']))}")
    for label, key, reference, goal in (
        ("pysframe perf script --no-inline", "script", "plain", 1.0),
        ("pysframe perf script (inline)", "script-inline", "inline", 0.5),
        ("pysframe perf report folded", "folded", "plain", 0.8),
    ):
        print(f"  {label:<34} {_figures(median(figures[key]))}   CPU ratio "
              f"{ratio(figures[key], figures[reference], 'cpu'):.2f} (goal {goal})")  # fmt: skip
    parallel = median(figures["parallel"])
    identical = output_digest([*script, "-j", "2"]) == output_digest([*script, "-j", "1"])
    # The slices' texts are written as they come: the largest peak of the processes is no
    # more than -j 1's, however large the text.
    print(f"  {'pysframe perf script -j 2':<34} {_figures(parallel)}   wall ratio "
          f"{ratio(figures['parallel'], figures['plain'], 'wall'):.2f} (goal 0.6), peak "
          f"{parallel['rss'] / median(figures['script'])['rss']:.2f} of -j 1's (goal 1), "
          f"output {'identical to' if identical else 'DIFFERENT from'} -j 1")  # fmt: skip
    if ratios_only:
        return
    frames, rate = walk_rate(path)
    print(f"  the walk alone: {frames:,} frames, {rate / 1e6:.2f} M frames/s of CPU (goal 1)")
    compared, frames_same, names_same = agreement(perf, path)
    print(f"  agreement over {compared:,} samples: user frames {100 * frames_same:.2f}% of "
          f"samples, names {100 * names_same:.2f}% of the frames perf names")  # fmt: skip
    compared, same = inline_agreement(perf, path)
    print(f"  perf script's text with inline frames: {100 * same:.2f}% of {compared:,} samples")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small recordings, one run")
    parser.add_argument("--runs", type=int, default=3, help="rounds of every command; medians")
    parser.add_argument("--samples", type=int, default=None, help="samples per recording")
    parser.add_argument("--big", action="store_true", help="also a 1 GB recording's memory")
    parser.add_argument(
        "--workloads", default="c,c++,python,inline,small",
        help="the workloads to measure, comma-separated (default c,c++,python,inline,small)",
    )  # fmt: skip
    parser.add_argument(
        "--ratios-only", action="store_true",
        help="the times and ratios only (not the walk's rate nor the agreement with perf)",
    )  # fmt: skip
    args = parser.parse_args()
    perf = shutil.which("perf")
    if perf is None or shutil.which("gcc") is None or shutil.which("g++") is None:
        print("perf, gcc and g++ are needed")
        return 1
    compileall.compile_dir(str(ROOT / "src" / "pysframe"), quiet=1)
    samples = args.samples or (300 if args.quick else 50_000)
    runs = 1 if args.quick else args.runs
    workloads: list[tuple[str, Callable[[], Path | None]]] = [
        (name, lambda name=name: record(perf, name, samples))  # type: ignore[misc]
        if name != "small" else (name, lambda: record(perf, "c", SMALL_SAMPLES))
        for name in args.workloads.split(",")
    ]  # fmt: skip
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} CPUs)")  # fmt: skip
    for name, make in workloads:
        path = make()
        if path is None:
            return 1
        compare(perf, name, path, runs, args.ratios_only)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.big:
        path = record(perf, "c", 120_000, period=20_000)
        if path is None:
            return 1
        common.heading(f"memory: {path} ({path.stat().st_size / 2**30:.2f} GiB)")
        folded = [sys.executable, "-m", "pysframe", "perf", "report", "--format", "folded"]
        ours = measured([*folded, str(path)])
        print(f"  pysframe perf report folded: peak {ours['rss'] / 2**20:.0f} MiB (goal 300), "
              f"CPU {ours['cpu']:.2f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
