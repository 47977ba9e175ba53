"""Benchmark: pysframe generate vs ``readelf --debug-dump=frames-interp`` on a large library.

    python benchmarks/bench_generate.py [FILE] [--runs N] [--quick]

Without FILE, the shared library with the largest .eh_frame under /usr/lib (x86-64, AArch64 or
s390x) is used.  Both are timed in the same run (wall clock, median of the runs); readelf's
output goes to /dev/null.  ``--quick`` (for CI) uses one run and a corpus file when no
library is found.
"""

from __future__ import annotations

import argparse
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
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
