"""Benchmark: pysframe generate vs ``readelf --debug-dump=frames-interp`` on a large library.

    python benchmarks/bench_generate.py [FILE] [--runs N] [--quick] [--baseline SRC]

Without FILE, the shared library with the largest .eh_frame under /usr/lib (x86-64, AArch64 or
s390x) is used.  Both are timed in the same run (wall clock, median of the runs); readelf's
output goes to /dev/null.  ``--quick`` (for CI) uses one run and a corpus file when no
library is found.

``--baseline SRC`` also times another checkout's ``src`` (an earlier pysframe) on the same
file: each run of either is a fresh process timing one ``generate_from_elf`` call (its lazy
imports included, as the command pays them), the two taken in turn; it prints the ratios of
the medians (wall clock, and CPU time, steadier on a busy machine) and whether both wrote the
same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pysframe.elf.reader import ElfReader
from pysframe.errors import SFrameError
from pysframe.generate import generate_from_elf

SEARCH = ("/usr/lib", "/usr/lib64", "/lib")


def biggest_library() -> str | None:
    best: tuple[int, str] | None = None
    for root in SEARCH:
        for folder, _dirs, files in os.walk(root):
            for name in files:
                if ".so" not in name:
                    continue
                path = os.path.join(folder, name)
                try:
                    if os.path.islink(path) or os.path.getsize(path) < 1 << 20:
                        continue
                    with ElfReader.open(path) as image:
                        if image.abi is None:
                            continue
                        sec = image.section(".eh_frame")
                        size = sec.size if sec is not None else 0
                except (SFrameError, OSError):
                    continue
                if best is None or size > best[0]:
                    best = (size, path)
    return best[1] if best else None


def time_it(fn: object, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


_CHILD = """
import hashlib, json, sys, time
import pysframe
from pysframe.generate import generate_from_elf
start, cpu = time.perf_counter(), time.process_time()
result = generate_from_elf(sys.argv[1])
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu": cpu,
                  "sha256": hashlib.sha256(result.data).hexdigest(),
                  "module": pysframe.__file__}))
"""


def timed_in_process(source: Path, path: str) -> dict[str, object]:
    """One ``generate_from_elf(path)`` in a fresh process running ``source``'s pysframe."""
    env = dict(os.environ, PYTHONPATH=str(source))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, path], env=env, capture_output=True, text=True, check=True
    )
    found: dict[str, object] = json.loads(done.stdout)
    if not str(found["module"]).startswith(str(source)):
        raise SystemExit(f"{source}: pysframe was imported from {found['module']}")
    return found


def against_baseline(path: str, baseline: Path, runs: int) -> None:
    """Time this checkout's ``src`` and ``baseline`` in turn; print the ratio and the bytes."""
    ours_src = (Path(__file__).resolve().parent.parent / "src").resolve()
    times: dict[Path, list[float]] = {ours_src: [], baseline: []}
    cpu: dict[Path, list[float]] = {ours_src: [], baseline: []}
    digests: dict[Path, set[object]] = {ours_src: set(), baseline: set()}
    for _ in range(runs):
        for source in (ours_src, baseline):
            found = timed_in_process(source, path)
            times[source].append(float(str(found["seconds"])))
            cpu[source].append(float(str(found["cpu"])))
            digests[source].add(found["sha256"])
    ours, theirs = (statistics.median(times[s]) for s in (ours_src, baseline))
    print(f"this checkout: {ours:.3f} s, baseline {baseline}: {theirs:.3f} s (medians of {runs})")
    print(f"ratio this checkout / baseline: {ours / theirs:.3f}")
    ours, theirs = (statistics.median(cpu[s]) for s in (ours_src, baseline))
    print(f"CPU: this checkout {ours:.3f} s, baseline {theirs:.3f} s, ratio {ours / theirs:.3f}")
    same = len(digests[ours_src] | digests[baseline]) == 1
    print(f"same bytes as the baseline: {'yes' if same else 'NO'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--baseline", type=Path, help="another checkout's src to compare")
    args = parser.parse_args()
    path = args.file or biggest_library()
    if path is None:
        if not args.quick:
            print("no library found; give FILE", file=sys.stderr)
            return 1
        path = str(Path(__file__).parent.parent / "tests/data/corpus/x86_64/v3/app")
    runs = 1 if args.quick else args.runs
    result = generate_from_elf(path)
    print(f"file: {path}")
    print(
        f"FDEs: {result.functions_total}, generated: {len(result.section)}, "
        f"FREs: {result.section.header.num_fres}, skipped: {len(result.skipped)}"
    )
    ours = time_it(lambda: generate_from_elf(path), runs)
    print(f"pysframe generate: {ours:.3f} s (median of {runs})")
    if args.baseline is not None:
        against_baseline(path, args.baseline.resolve(), runs)
    readelf = shutil.which("readelf")
    if readelf is None:
        print("readelf not found: no ratio")
        return 0

    def run_readelf() -> None:
        with open(os.devnull, "wb") as sink:
            subprocess.run(
                [readelf, "--debug-dump=frames-interp", path],
                stdout=sink,
                stderr=subprocess.DEVNULL,
                check=False,
            )

    theirs = time_it(run_readelf, runs)
    print(f"readelf --debug-dump=frames-interp: {theirs:.3f} s (median of {runs})")
    print(f"ratio pysframe / readelf: {ours / theirs:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
