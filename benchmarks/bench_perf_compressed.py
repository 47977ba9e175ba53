"""``pysframe perf script`` on a compressed recording (``perf record -z``) against the same
workload recorded without ``-z``: CPU time, with perf's own ratio in the same run.

The ``c`` workload of bench_perf.py (tests/data/perf/profiled.c and its library) is recorded
twice with ``perf record -e cpu-clock -c 100000 --call-graph dwarf``, once with ``-z``, for the
same time; each command runs in a fresh process with its output to /dev/null (the kernel's
account of its CPU time, medians of ``--runs`` rounds, each running every command once).
Printed: pysframe's CPU time on each and the ratio -z / plain, and perf's, so that the cost of
decompressing is read against perf's.  Both outputs are also checked against perf's text.

    python benchmarks/bench_perf_compressed.py [--seconds S] [--runs N]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_perf
import common


def record(perf: str, command: list[str], output: Path, compressed: bool) -> None:
    subprocess.run(
        [perf, "record", "-q", *(["-z"] if compressed else []), "-e", "cpu-clock", "-c",
         "100000", "--call-graph", "dwarf", "-o", str(output), "--", *command],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
    )  # fmt: skip


def digest(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, check=True)
    return hashlib.sha256(done.stdout).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="how long the workload runs")
    parser.add_argument("--runs", type=int, default=5, help="rounds of every command; medians")
    args = parser.parse_args()
    perf = shutil.which("perf")
    if perf is None:
        print("perf is not installed")
        return 0
    with tempfile.TemporaryDirectory() as temporary:
        out = Path(temporary)
        command = [*bench_perf.build("c", out), f"{args.seconds}"]
        plain, packed = out / "plain.data", out / "z.data"
        record(perf, command, plain, False)
        record(perf, command, packed, True)
        pysframe = [sys.executable, "-m", "pysframe", "perf", "script", "--no-inline", "-j", "1"]
        for path in (plain, packed):
            bench_perf.measured([*pysframe, str(path)])  # fills the cache
            same = digest([*pysframe, str(path)]) == digest(
                [perf, "script", "--no-inline", "-i", str(path)]
            )
            print(f"{path.name}: {path.stat().st_size / 2**20:.1f} MiB, "
                  f"{bench_perf.count_samples(perf, path):,} samples, text "
                  f"{'identical to' if same else 'DIFFERENT from'} perf's")  # fmt: skip
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
