"""Samples lost when a recording is piped into its reader: ``perf record -o - | READER -``.

perf record writes a pipe-mode recording into a pipe; when the pipe is full, perf record waits,
stops emptying the kernel's ring buffers, and the kernel drops the samples that do not fit
(LOST and LOST_SAMPLES records count them).  So how fast and how steadily the reader empties
the pipe decides how many samples a piped recording loses.

The workload is ``gzip -c FILE > /dev/null`` on a file of random bytes (``--megabytes``),
recorded with ``perf record --call-graph dwarf`` (perf's default event and frequency; 8 KiB
stack copies: tens of MB a second).  Each run pipes one recording into one reader:

* ``cat``: a reader that only copies the stream into a file (what a reader can do at best);
* ``perf report -i - --stdio``;
* ``pysframe perf report -`` (the checkout's ``src``, or ``--source DIR``'s).

The runs are taken in turn, ``--runs`` times.  Each reader's samples lost (``# Total Lost
Samples``, from the LOST_SAMPLES records perf record ends the stream with; for ``cat``, of
the copy) and its share of the samples, medians, and pysframe's count over perf's.

    python benchmarks/bench_perf_pipe.py [--quick] [--runs N] [--megabytes N] [--source DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_LOST = re.compile(r"^# Total Lost Samples: (\d+)$", re.MULTILINE)
_SAMPLES = re.compile(r"^# Samples: (\S+) of event", re.MULTILINE)


def _count(text: str) -> int:
    """perf's ``# Samples: 11K`` (rounded as perf rounds: K, M)."""
    scale = {"K": 1000, "M": 1000000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * scale)


def piped(
    record: list[str], reader: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``record | reader``; the reader's run."""
    producer = subprocess.Popen(record, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert producer.stdout is not None
    try:
        done = subprocess.run(
            reader, stdin=producer.stdout, capture_output=True, text=True, env=env,
            errors="replace", check=False,
        )  # fmt: skip
    finally:
        producer.stdout.close()
        producer.wait()
    return done


def lost_and_samples(report: str) -> tuple[int, int] | None:
    """(samples lost, samples kept) from a top report (perf's or pysframe's)."""
    lost = _LOST.search(report)
    samples = _SAMPLES.findall(report)
    if lost is None:
        return None
    return int(lost[1]), sum(_count(found) for found in samples)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small workload, one run")
    p.add_argument("--runs", type=int, default=5, help="runs of each reader (default 5)")
    p.add_argument("--megabytes", type=int, default=60, help="the workload's input (MB)")
    p.add_argument("--source", type=Path, default=ROOT / "src", help="pysframe's src to run")
    args = p.parse_args()
    perf = shutil.which("perf")
    if perf is None:
        raise SystemExit("perf is not installed")
    runs = 1 if args.quick else args.runs
    megabytes = 8 if args.quick else args.megabytes
    env = dict(os.environ, PYTHONPATH=str(args.source.resolve()))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        data = work / "input.bin"
        data.write_bytes(os.urandom(megabytes << 20))
        record = [perf, "record", "-q", "--call-graph", "dwarf", "-o", "-", "--", "sh", "-c",
                  f"gzip -c {data} > /dev/null"]  # fmt: skip
        copy = work / "copy.data"
        readers = {
            "cat": ["sh", "-c", f"cat > {copy} && {perf} report -i {copy} --stdio 2>/dev/null"],
            "perf report -i -": [perf, "report", "-i", "-", "--stdio"],
            "pysframe perf report -": [sys.executable, "-m", "pysframe", "perf", "report", "-"],
        }
        results: dict[str, list[tuple[int, int]]] = {name: [] for name in readers}
        failures: dict[str, list[str]] = {name: [] for name in readers}
        for _ in range(runs):
            for name, reader in readers.items():
                done = piped(record, reader, env)
                found = lost_and_samples(done.stdout)
                if found is None:  # a run without a report: its first line of error
                    failures[name].append((done.stderr.strip() or "no output").splitlines()[0])
                else:
                    results[name].append(found)
    print(f"perf record --call-graph dwarf of gzip on {megabytes} MB, {runs} run(s) each")
    print(f"{'reader':<26}{'lost (median)':>14}{'share':>9}   each run")
    medians = {}
    for name, errors in failures.items():
        for error in errors:
            print(f"{name}: a run without a report: {error}")
    if not all(results.values()):
        raise SystemExit("a reader never gave a report (can perf record here?)")
    for name, found in results.items():
        lost = statistics.median(n for n, _ in found)
        share = statistics.median(100 * n / (n + k) if n + k else 0 for n, k in found)
        medians[name] = lost
        runs_text = " ".join(str(n) for n, _ in found)
        print(f"{name:<26}{lost:>14,.0f}{share:>8.2f}%   {runs_text}")
    ours, theirs = medians["pysframe perf report -"], medians["perf report -i -"]
    if theirs:
        print(f"pysframe loses {ours / theirs:.2f}x the samples perf report loses")
    else:
        print(f"perf report lost none; pysframe lost {ours:,.0f}")


if __name__ == "__main__":
    main()
