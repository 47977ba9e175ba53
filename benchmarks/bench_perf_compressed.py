"""``pysframe perf script`` on a compressed recording (``perf record -z``) against the same
workload recorded without ``-z``: CPU time, with perf's own ratio in the same run.

The ``c`` workload of bench_perf.py (tests/data/perf/profiled.c and its library) is recorded
twice with ``perf record -e cpu-clock -c 100000 --call-graph dwarf``, once with ``-z``, for the
same time, and kept under the benchmark cache; each command runs in a fresh process with its
output to /dev/null (the kernel's account of its CPU time, medians of ``--runs`` rounds, each
running every command once).  Printed: how many lines of ``perf script --no-inline``'s text
pysframe's differs by on each (samples walked otherwise, as without -z), pysframe's CPU time
on each and the ratio -z / plain, and perf's, so that the cost of decompressing is read
against perf's.

    python benchmarks/bench_perf_compressed.py [--seconds S] [--runs N]
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import subprocess
import sys
from pathlib import Path

import bench_perf
import common


def record(perf: str, command: list[str], output: Path, compressed: bool) -> None:
    subprocess.run(
        [perf, "record", "-q", *(["-z"] if compressed else []), "-e", "cpu-clock", "-c",
         "100000", "--call-graph", "dwarf", "-o", str(output), "--", *command],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
    )  # fmt: skip


def differing_lines(ours: list[str], theirs: list[str]) -> int:
    """Lines of one text not in the other, in order (0: the same text)."""
    a = subprocess.run(ours, capture_output=True, check=True).stdout.splitlines()
    b = subprocess.run(theirs, capture_output=True, check=True).stdout.splitlines()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return max(len(a), len(b)) - sum(block.size for block in matcher.get_matching_blocks())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="how long the workload runs")
    parser.add_argument("--runs", type=int, default=5, help="rounds of every command; medians")
    args = parser.parse_args()
    perf = shutil.which("perf")
    if perf is None:
        print("perf is not installed")
        return 0
    out = common.cache_dir() / "perf-compressed"  # kept: a difference can be looked into
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    command = [*bench_perf.build("c", out), f"{args.seconds}"]
    plain, packed = out / "plain.data", out / "z.data"
    record(perf, command, plain, False)
    record(perf, command, packed, True)
    pysframe = [sys.executable, "-m", "pysframe", "perf", "script", "--no-inline", "-j", "1"]
    for path in (plain, packed):
        bench_perf.measured([*pysframe, str(path)])  # fills the cache
        differing = differing_lines(
            [*pysframe, str(path)], [perf, "script", "--no-inline", "-i", str(path)]
        )
        print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB, "
              f"{bench_perf.count_samples(perf, path):,} samples, "
              f"{differing} lines of perf script's text differ")  # fmt: skip
    figures = bench_perf.rounds({
        "ours-plain": ([*pysframe, str(plain)], True),
        "ours-z": ([*pysframe, str(packed)], True),
        "perf-plain": ([perf, "script", "--no-inline", "-i", str(plain)], False),
        "perf-z": ([perf, "script", "--no-inline", "-i", str(packed)], False),
    }, args.runs)  # fmt: skip
    common.heading("CPU time of perf script --no-inline (median)")
    for who in ("ours", "perf"):
        a, b = (bench_perf.median(figures[f"{who}-{kind}"])["cpu"] for kind in ("plain", "z"))
        name = "pysframe" if who == "ours" else "perf"
        print(f"  {name:<9} plain {a:.3f} s, -z {b:.3f} s, -z / plain "
              f"{bench_perf.ratio(figures[f'{who}-z'], figures[f'{who}-plain'], 'cpu'):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
