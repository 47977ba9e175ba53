"""Memory used to open a section, as a multiple of the section's own size.

Each input is opened in a fresh process: ``tracemalloc`` gives the peak and the retained
Python and numpy allocations of ``SFrameSection.from_bytes`` (the bytes are already in memory
and are not copied), and the peak resident set (``VmHWM`` of /proc/self/status, which starts
afresh at exec, unlike ``ru_maxrss``) its growth.  Opening reads the lookup index only; the
FDE table (every FDE as columns, checked: what iteration, dump and validation use) and the
batch row table of ``find_rows`` are measured after it, each separately.  Target: opening
uses at most a few (here: 4) times the section's size.

    python benchmarks/bench_memory.py [--quick] [--functions N] [--libraries N]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import common

from pysframe import SFrameSection, Version

LIMIT = 4.0


def peak_rss() -> int:
    """Peak resident set of this process in bytes."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(path: str) -> None:
    data = Path(path).read_bytes()
    rss_before = peak_rss()
    tracemalloc.start()
    section = SFrameSection.from_bytes(data)
    open_retained, open_peak = tracemalloc.get_traced_memory()
    rss_open = peak_rss()
    tracemalloc.reset_peak()
    section.table  # noqa: B018
    table_retained, table_peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    section.find_rows([])
    index_retained, index_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        json.dumps(
            {
                "size": len(data),
                "open_peak": open_peak,
                "open_retained": open_retained,
                "open_rss": max(0, rss_open - rss_before),
                "table_peak": table_peak,
                "table_retained": table_retained - open_retained,
                "index_peak": index_peak,
                "index_retained": index_retained - table_retained,
            }
        )
    )


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return 0
    config = common.settings(common.parser(__doc__ or "").parse_args())
    failures = 0
    with tempfile.TemporaryDirectory(prefix="pysframe-bench-") as scratch:
        for number, item in enumerate(common.inputs(config, (Version.V3, Version.V2))):
            path = Path(scratch) / f"input{number}.sframe"
            path.write_bytes(item.data)
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(path)],
                capture_output=True,
                text=True,
                check=True,
            )
            m = json.loads(done.stdout)
            size = m["size"]
            common.heading(f"{item.label}: section of {size:,} bytes")
            ratio = m["open_peak"] / size
            verdict = "within" if ratio <= LIMIT else "EXCEEDS"
            print(
                f"  open: peak {m['open_peak']:,} B = {ratio:.2f}x the section "
                f"({verdict} {LIMIT:g}x); retained {m['open_retained'] / size:.2f}x; "
                f"peak RSS growth {m['open_rss'] / size:.2f}x"
            )
            print(
                f"  FDE table: peak {m['table_peak'] / size:.2f}x, "
                f"retained {m['table_retained'] / size:.2f}x the section"
            )
            print(
                f"  batch row table: peak {m['index_peak'] / size:.2f}x, "
                f"retained {m['index_retained'] / size:.2f}x the section"
            )
            if ratio > LIMIT and not config.quick:
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
