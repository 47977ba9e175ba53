"""Loading a module's symbols as perf does: pysframe.perf.symbols beside perf script.

For each module (libc, named from its separate debug file; libstdc++, thousands of C++ names
to demangle; ld.so; ``--quick``: ld.so only), each side runs in a fresh process:

* pysframe: find the module's symbol files and read its table (``dso__load``'s choice of
  files, both symbol tables, the fixups, the PLT, perf's demangling), timed alone;
* perf: ``perf script`` of a hand-built recording with one sample in the module (perf loads
  the module's symbols to name it), less the same run with the sample outside the module
  (perf's start-up): what perf spends on the module's symbols.

For each: CPU time, and the ratio.

    python benchmarks/bench_perf_symbols.py [--quick] [--runs N]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "support"))
LIBRARIES = "/usr/lib/x86_64-linux-gnu"
MODULES = ("libc.so.6", "libstdc++.so.6", "ld-linux-x86-64.so.2")
#: Where the hand-built recordings map the module.
BASE = 0x7F0000000000


def child(path: str) -> None:
    """The pysframe side, in its own process: JSON of its load time and table size."""
    from pysframe.perf.modules import ModuleFinder

    began = time.process_time()
    finder = ModuleFinder()
    size = os.path.getsize(path)
    module = finder.module(path, BASE, BASE + size, 0, None)
    table = finder.perf_symbols(module) if module is not None else None
    cpu = time.process_time() - began
    print(json.dumps({"cpu": cpu, "symbols": len(table) if table is not None else 0}))


def recording(out: Path, path: str, inside: bool) -> Path:
    """A recording of one sample: in ``path``'s first page of code, or outside it."""
    from perf_support import IP, PERIOD, TID, TIME, Attr, PerfFile

    perf = PerfFile()
    attr = perf.add_attr(Attr(IP | TID | TIME | PERIOD, size=120))  # perf 6.1 reads VER7
    perf.comm(attr, 42, 42, "prog", time=1)
    size = (os.path.getsize(path) + 0xFFF) & ~0xFFF
    perf.mmap2(attr, 42, 42, BASE, size, 0, path, prot=5, time=2)
    perf.sample(attr, ip=BASE + 0x1000 if inside else 0x1000, pid=42, tid=42, time=3, period=1)
    target = out / ("inside.data" if inside else "outside.data")
    target.write_bytes(perf.build())
    return target


def cpu_of(command: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    """CPU time (user + system) of one process running ``command``, and its output."""
    run = common.run_process(command, env=env, output=True)
    return run.cpu, run.output


def main() -> int:
    parser = common.parser(__doc__.splitlines()[0])
    parser.add_argument("--child", help="(internal)")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    common.heading("perf's symbols of a module: pysframe.perf.symbols against perf script")
    perf = shutil.which("perf")
    if perf is None:
        print("perf is not installed: nothing to measure")
        return 0
    runs = 1 if args.quick else max(1, args.runs)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for name in MODULES[2:] if args.quick else MODULES:
        path = f"{LIBRARIES}/{name}"
        if not os.path.exists(path):
            print(f"{path} is not here")
            continue
        ours, theirs = [], []
        with tempfile.TemporaryDirectory() as work:
            inside = recording(Path(work), path, True)
            outside = recording(Path(work), path, False)
            for _ in range(runs):
                _, output = cpu_of([sys.executable, __file__, "--child", path], env)
                ours.append(json.loads(output))
                full, _ = cpu_of([perf, "script", "-i", str(inside)])
                start, _ = cpu_of([perf, "script", "-i", str(outside)])
                theirs.append(max(full - start, 1e-6))
        print(f"{name}: {ours[0]['symbols']:,} symbols")
        common.print_ratio(
            "CPU time, the symbols alone", statistics.median(r["cpu"] for r in ours),
            statistics.median(theirs), "perf script",
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
