"""Writing a profile in each format: CPU time per writer, beside ``perf script``'s.

Two profiles:

* a synthetic one (tests/support/perf_report_support.py ``synthetic_profile``: by default 100,000
  samples over 50,000 distinct stacks 4 to 60 frames deep): each writer's CPU time alone;
* the stacks perf unwound of DWARF recordings: of tests/data/perf/perfprog.c (the recording
  bench_perf_read.py makes and caches: shallow stacks) and of a Python workload (deep stacks,
  many of them inlined functions), with ``perf script --no-inline`` on the same file as the
  reference: each writer's CPU time beside perf script's (and perf report's table with its
  call graphs beside the whole ``perf report --stdio``).  The whole ``pysframe perf report``
  must take at most a fifth of perf script's CPU time, and the unwinding most of that.

    python benchmarks/bench_perf_report.py [--quick] [--samples N] [--stacks N] [--runs N]
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import common
from bench_perf_read import measured, recording

ROOT = Path(__file__).resolve().parent.parent
# the profile makers of the tests, and the conftest they import
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from perf_report_support import (  # noqa: E402
    SCRIPT_FIELDS,
    profile_of_perf_script,
    synthetic_profile,
)
from pysframe.perf.callgraph import GraphOptions  # noqa: E402
from pysframe.perf.filters import filter_profile  # noqa: E402
from pysframe.perf.flamegraph import write_flamegraph  # noqa: E402
from pysframe.perf.pprof import write_pprof  # noqa: E402
from pysframe.perf.profile import Profile  # noqa: E402
from pysframe.perf.report import write_folded, write_json, write_top  # noqa: E402
from pysframe.perf.speedscope import write_speedscope  # noqa: E402
from pysframe.perf.top import TopOptions  # noqa: E402

#: The table as a plain perf report --stdio prints it: children, call graphs.
PERF_DEFAULT = "top --children -g (perf report's default)"


def _writers() -> dict[str, Callable[[Profile], object]]:
    def text(write: Callable[..., None], **options: object) -> Callable[[Profile], object]:
        return lambda profile: write(profile, io.StringIO(), **options)

    return {
        "top": text(write_top),
        "top --children": text(write_top, children=True),
        PERF_DEFAULT: text(write_top, options=TopOptions(children=True, graph=GraphOptions())),
        "folded": text(write_folded),
        "json": text(write_json),
        "speedscope": text(write_speedscope),
        "pprof": lambda profile: write_pprof(profile, io.BytesIO()),
        "flamegraph": text(write_flamegraph),
        "filter (pids, time)": lambda profile: filter_profile(
            profile, pids=profile.pid[:1], time_range=(profile.time[len(profile) // 2], None)
        ),
    }


def cpu_seconds(action: Callable[[], object], runs: int) -> float:
    """The median CPU time of ``action`` over ``runs`` runs (after one untimed run)."""
    return common.median_seconds(action, runs, clock=time.process_time)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small profiles, one run")
    parser.add_argument("--samples", type=int, default=None, help="synthetic samples (100,000)")
    parser.add_argument("--stacks", type=int, default=None, help="synthetic stacks (50,000)")
    parser.add_argument("--recorded", type=int, default=None, help="samples to record (30,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each; medians")
    args = parser.parse_args()
    runs = 1 if args.quick else max(1, args.runs)
    samples = args.samples or (2_000 if args.quick else 100_000)
    stacks = args.stacks or (1_000 if args.quick else 50_000)

    common.heading(f"writers on a synthetic profile: {samples:,} samples, {stacks:,} stacks")
    profile = synthetic_profile(samples, stacks)
    for name, write in _writers().items():
        seconds = cpu_seconds(lambda write=write: write(profile), runs)  # type: ignore[misc]
        print(f"{name:<44} pysframe {common.fmt_seconds(seconds)}")

    perf = shutil.which("perf")
    common.heading("writers on a recording's stacks, against perf script --no-inline")
    if perf is None:
        print("perf is not installed: no recording")
        return 0
    paths = [
        recording(perf, args.recorded or (2_000 if args.quick else 30_000), args.quick),
        python_recording(perf, args.quick),
    ]
    for path in paths:
        if path is not None:
            against_perf(perf, path, runs)
    return 0


#: The Python workload: json.dumps in a loop (deep interpreter stacks).
WORKLOAD = (
    "import json\nfor i in range({count}):\n    json.dumps({{'a': i, 'b': [i, str(i)]}})\n"
)


def python_recording(perf: str, quick: bool) -> Path | None:
    """The cached recording of the Python workload (about 30,000 samples; 2,000 quick)."""
    path = common.cache_dir() / f"python-dwarf-{'quick' if quick else 'full'}.data"
    if path.exists():
        return path
    partial = path.with_suffix(".partial")
    count = 20_000 if quick else 240_000
    command = [sys.executable, "-c", WORKLOAD.format(count=count)]
    if not common.perf_record(perf, command, partial, 100_000 if quick else 50_000):
        return None
    partial.replace(path)
    return path


def against_perf(perf: str, path: Path, runs: int) -> None:
    """Each writer on the stacks perf unwound of ``path``, beside perf script's CPU time."""
    _, text = measured([perf, "script", "-i", str(path), "-F", SCRIPT_FIELDS, "--ns"])
    stacks_of_perf = profile_of_perf_script(text, str(path))
    reference = statistics.median(
        measured([perf, "script", "--no-inline", "-i", str(path)])[0]["cpu"] for _ in range(runs)
    )
    print(f"input: {path.name}, {len(stacks_of_perf):,} samples, "
          f"{len(stacks_of_perf.stacks):,} distinct stacks")  # fmt: skip
    report = statistics.median(
        measured([perf, "report", "--stdio", "--no-inline", "-i", str(path)])[0]["cpu"]
        for _ in range(runs)
    )
    for name, write in _writers().items():
        seconds = cpu_seconds(lambda write=write: write(stacks_of_perf), runs)  # type: ignore[misc]
        common.print_ratio(name, seconds, reference, "perf script --no-inline")
        if name == PERF_DEFAULT:  # beside the whole perf report, its unwinding included
            common.print_ratio(name, seconds, report, "perf report --stdio --no-inline")


if __name__ == "__main__":
    sys.exit(main())
