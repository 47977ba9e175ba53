"""Batch lookup: PCs per second through ``SFrameSection.find_rows`` on big sections.

The PCs are drawn at random over the covered address range (a few fall in gaps between
functions and find nothing).  The row table that ``find_rows`` builds on first use is built
before timing and its cost printed separately (bench_open.py compares it).  A sample of the
answers is checked against ``find_row`` (one PC at a time).  Target: at least 1,000,000 PCs/s
on a section with 100k+ functions (and the aim: 10,000,000 PCs/s, sorted or random).  The row
table's memory is measured with tracemalloc (numpy reports its buffers there): what it keeps,
and the peak while it is built, against the section's size (aim: at most 2x).

    python benchmarks/bench_lookup.py [--quick] [--runs N] [--pcs N] [--functions N]
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from functools import partial

import common
import numpy as np

from pysframe import SFrameSection, Version

TARGET_PCS_PER_SECOND = 1_000_000
AIM_PCS_PER_SECOND = 10_000_000
CHECKED_SAMPLE = 2_000


def main() -> int:
    p = common.parser(__doc__ or "")
    p.add_argument("--pcs", type=int, default=None, help="PCs per batch (default 1,000,000)")
    config = common.settings(args := p.parse_args())
    count = args.pcs or (20_000 if config.quick else 1_000_000)
    failures = 0
    print(f"{count:,} random PCs per batch; median of {config.runs} runs")
    for item in common.inputs(config, (Version.V3,)):
        section = item.section()
        common.heading(f"{item.label}: {len(section):,} functions, {section.num_rows:,} rows")
        tracemalloc.start()
        began = time.perf_counter()
        section.find_rows([])
        built = time.perf_counter() - began
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        size = len(section.data)
        print(
            f"  row table built in {common.fmt_seconds(built).strip()}; keeps "
            f"{kept / size:.1f}x the section's size, peak {peak / size:.1f}x (aim: 2x)"
        )
        pcs = random_pcs(section, count, seed=1)
        seconds = common.median_seconds(partial(section.find_rows, pcs), config.runs)
        rate = count / seconds
        result = section.find_rows(pcs)
        hits = int(np.count_nonzero(result.found))
        verdict = "meets" if rate >= TARGET_PCS_PER_SECOND else "BELOW"
        print(
            f"  find_rows: {common.fmt_seconds(seconds).strip()} for {count:,} PCs = "
            f"{rate / 1e6:.2f} M PCs/s ({verdict} the 1 M/s target); {hits:,} found"
        )
        ordered = np.sort(pcs)
        ordered_seconds = common.median_seconds(partial(section.find_rows, ordered), config.runs)
        for what, took in (("random", seconds), ("sorted", ordered_seconds)):
            reached = "reaches" if count / took >= AIM_PCS_PER_SECOND else "below"
            print(f"  {what} PCs: {count / took / 1e6:.2f} M PCs/s ({reached} the 10 M/s aim)")
        mismatches = check_sample(section, pcs, result)
        print(
            f"  {min(CHECKED_SAMPLE, count):,} answers checked against find_row(): "
            f"{mismatches} mismatches"
        )
        scalar_pcs = pcs[:2_000]
        scalar = common.median_seconds(
            partial(scalar_lookups, section, scalar_pcs),
            max(1, config.runs // 3),
        )
        one_rate = len(scalar_pcs) / scalar / 1e3
        print(f"  find_row() one PC at a time, for comparison: {one_rate:.1f} k PCs/s")
        if mismatches or (rate < TARGET_PCS_PER_SECOND and not config.quick):
            failures += 1
    return 1 if failures else 0


def scalar_lookups(section: SFrameSection, pcs: np.ndarray) -> None:
    for pc in pcs:
        section.find_row(int(pc))


def random_pcs(section: SFrameSection, count: int, seed: int) -> np.ndarray:
    table = section.table
    low = int(table.start.min())
    high = int((table.start + table.size.astype(np.uint64)).max())
    rng = np.random.default_rng(seed)
    return rng.integers(low, high, size=count, dtype=np.uint64)


def check_sample(section: SFrameSection, pcs: np.ndarray, result: object) -> int:
    from pysframe.format.lookup import BatchResult

    assert isinstance(result, BatchResult)
    mismatches = 0
    for at in range(0, len(pcs), max(1, len(pcs) // CHECKED_SAMPLE)):
        answer = section.find_row(int(pcs[at]))
        function = -1 if answer is None else answer.function.index
        row = -1 if answer is None else answer.row_index
        if (function, row) != (int(result.function_index[at]), int(result.row_index[at])):
            mismatches += 1
    return mismatches


if __name__ == "__main__":
    sys.exit(main())
