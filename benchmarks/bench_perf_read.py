"""Reading a big perf.data: samples per second and peak memory, beside ``perf script``.

The input is a recording of tests/data/perf/perfprog.c with DWARF call graphs (perf's default
8 KB user stack copies: a few hundred MB for 30,000 samples; ``--quick``: a small one), made
once and kept under the benchmark cache.  Each side runs in a fresh process, on the same file:

* pysframe: open it, then decode every chunk of samples (``PerfData.samples``) and take
  every sample's stack view, callchain and registers: what an unwinder needs;
* perf: ``perf script --no-inline -F ip`` (each sample's IP and callchain, perf unwinding the
  user part from the same registers and stacks), output to /dev/null.

For each process: wall time, CPU time (user + system) and peak resident set, as the kernel
accounts them (wait4), and the ratios.
The targets later work must meet on the whole report (``pysframe perf report``): CPU time at
most a fifth of perf script's, at most 300 MB resident on a 1 GB file.

    python benchmarks/bench_perf_read.py [--quick] [--samples N] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "data" / "perf" / "perfprog.c"


def child(path: str, chunk: int) -> None:
    """The pysframe side, in its own process: JSON of what it read on stdout."""
    from pysframe.perf import PerfData

    samples = frames = stack_bytes = 0
    began, cpu = time.perf_counter(), time.process_time()
    with PerfData.open(path) as data:
        for batch in data.samples(chunk):
            samples += len(batch)
            frames += len(batch.callchain)
            stack_bytes += int(batch.stack_dyn_size.sum())
            for index in range(len(batch)):
                view = batch.stack(index)
                view.release()
            batch.registers(range(batch.regs_mask.bit_count())).sum()  # the registers too
    print(json.dumps({
        "samples": samples, "frames": frames, "stack_bytes": stack_bytes,
        "read_wall": time.perf_counter() - began, "read_cpu": time.process_time() - cpu,
    }))  # fmt: skip


def measured(
    command: list[str], env: dict[str, str] | None = None
) -> tuple[dict[str, float], str]:
    """Run ``command``; its wall time, CPU time (user + system) and peak resident set, from
    the kernel's account of that one process (wait4), and its output."""
    run = common.run_process(command, env=env, output=True)
    return {"wall": run.wall, "cpu": run.cpu, "rss": run.peak_bytes}, run.output


def run_pysframe(path: Path, chunk: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    figures, output = measured(
        [sys.executable, __file__, "--child", str(path), "--chunk", str(chunk)], env
    )
    figures.update(json.loads(output))
    return figures


def run_perf(perf: str, path: Path) -> dict[str, float]:
    figures, _ = measured([perf, "script", "--no-inline", "-F", "ip", "-i", str(path)])
    return figures


def recording(perf: str, samples: int, quick: bool) -> Path | None:
    """The cached recording of about ``samples`` samples; None where perf cannot record."""
    path = common.cache_dir() / f"perfprog-dwarf-{samples}.data"
    if path.exists():
        return path
    gcc = shutil.which("gcc")
    if gcc is None:
        print("gcc is not installed: no recording")
        return None
    with tempfile.TemporaryDirectory() as work:
        program = Path(work) / "perfprog"
        subprocess.run([gcc, "-O2", "-pthread", "-o", str(program), str(PROGRAM)], check=True)
        # cpu-clock every 20 us of CPU time; measured here: 150 million iterations per
        # thread give about 20,000 samples.
        millions = max(0.2, samples / 130)
        period = 100_000 if quick else 20_000
        partial = path.with_suffix(".partial")
        if not common.perf_record(perf, [str(program), f"{millions:g}"], partial, period):
            return None
        partial.replace(path)
    return path


def mib(size: float) -> str:
    return f"{size / 2**20:7.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small recording, one run")
    parser.add_argument("--samples", type=int, default=None, help="samples to record (30,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side; medians")
    parser.add_argument("--chunk", type=int, default=4096, help="samples per chunk")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.chunk)
        return 0
    perf = shutil.which("perf")
    common.heading("perf.data reading: pysframe.perf against perf script --no-inline -F ip")
    if perf is None:
        print("perf is not installed: nothing to measure")
        return 0
    samples = args.samples or (2_000 if args.quick else 30_000)
    path = recording(perf, samples, args.quick)
    if path is None:
        return 0
    runs = 1 if args.quick else max(1, args.runs)
    ours = [run_pysframe(path, args.chunk) for _ in range(runs)]
    theirs = [run_perf(perf, path) for _ in range(runs)]
    first = ours[0]
    print(f"input: {path.name}, {mib(path.stat().st_size)}, {first['samples']:,} samples, "
          f"{first['frames']:,} kernel callchain entries, "
          f"{mib(first['stack_bytes'])} of stacks")  # fmt: skip
    wall = statistics.median(r["wall"] for r in ours)
    cpu = statistics.median(r["cpu"] for r in ours)
    perf_wall = statistics.median(r["wall"] for r in theirs)
    perf_cpu = statistics.median(r["cpu"] for r in theirs)
    common.print_ratio("wall time, whole process", wall, perf_wall, "perf script")
    common.print_ratio("CPU time, whole process", cpu, perf_cpu, "perf script")
    read_cpu = statistics.median(r["read_cpu"] for r in ours)
    print(f"{'CPU time of the reading alone (no start-up)':<44} pysframe "
          f"{common.fmt_seconds(read_cpu)}")  # fmt: skip
    print(f"{'samples per CPU second, whole process':<44} pysframe {first['samples'] / cpu:12,.0f}"
          f"   perf script {first['samples'] / perf_cpu:12,.0f}")  # fmt: skip
    print(f"{'samples per CPU second, reading alone':<44} pysframe "
          f"{first['samples'] / read_cpu:12,.0f}")  # fmt: skip
    print(f"{'peak resident set':<44} pysframe {mib(max(r['rss'] for r in ours))}   "
          f"perf script {mib(max(r['rss'] for r in theirs))}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
