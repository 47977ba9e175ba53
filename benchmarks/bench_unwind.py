"""Frames unwound per second on a deep stack: pysframe against gdb's batch backtrace.

Builds tests/data/stack/stack_prog, runs it with the main thread DEPTH calls deep (recursion
through a shared library) and stops it with SIGSTOP.  Then, each run:

* pysframe unwind: the main thread's stack unwound from a ptrace snapshot (modules loaded once,
  as a profiler attached to a process would);
* pysframe end to end: ``stack_of_process`` (read the mappings, load modules from the warm
  per-file cache, attach, unwind every thread, detach);
* pysframe ``--format gdb``: end to end, with every frame's source line and inlined
  functions looked up in DWARF (libc's from its separate debug file, when installed);
* gdb: ``gdb -batch -p PID -ex bt`` (wall time of the whole command).

Frames per second are frames / seconds; the median of the runs is printed with the ratios.

Naming frames is measured apart: every module's symbols read cold (symbol tables, separate
debug files found by build ID or debuglink, MiniDebugInfo), as the first ``stack`` of a
process pays for them, and names looked up in libc's symbols in bulk (one numpy search for
all PCs) and one at a time, with and without demangling.

So are the trust checks a module's own SFrame section passes before it is used
(:func:`pysframe.sources.trust.trust_problems`), on the program's own section, on libc's
generated one and on a large one (``--large FILE``, default libLLVM-15's, generated), beside
the time of one walk of the deep stack.

usage: python benchmarks/bench_unwind.py [--quick] [--depth N] [--runs N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from pysframe.unwind import symbolize
from pysframe.unwind.core import Unwinder
from pysframe.unwind.demangle import demangle
from pysframe.unwind.mappings import process_mappings
from pysframe.unwind.modules import Module, load_modules
from pysframe.unwind.ptrace import attach
from pysframe.unwind.stack import report_lines_gdb, stack_of_process
from stack_support import (
    Unavailable,
    build_programs,
    check_ptrace,
    gdb_command,
    parse_gdb_bt,
    run_program,
)


def median_rate(frames: int, seconds: list[float]) -> tuple[float, float]:
    middle = statistics.median(seconds)
    return middle, frames / middle


def bench(depth: int, runs: int, inner: int, large: str | None = None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            program = build_programs(Path(tmp))
            check_ptrace()
        except Unavailable as why:
            print(f"benchmark skipped: {why}")
            return 0
        with run_program(program, depth, 0) as running:
            pid = running.pid
            modules = load_modules(process_mappings(pid))
            unwind_times: list[float] = []
            with attach(pid) as process:
                registers = process.registers(pid)
                unwinder = Unwinder(process.abi, modules, max_frames=depth + 1000)
                trace = unwinder.unwind(registers, process.read_memory)
                frames = len(trace.frames)
                for _ in range(runs):
                    # a fresh unwinder each run: no row cache carried over
                    start = time.perf_counter()
                    for _ in range(inner):
                        Unwinder(process.abi, modules, max_frames=depth + 1000).unwind(
                            registers, process.read_memory
                        )
                    unwind_times.append((time.perf_counter() - start) / inner)
            end_to_end: list[float] = []
            for _ in range(runs):
                start = time.perf_counter()
                report = stack_of_process(pid, max_frames=depth + 1000)
                end_to_end.append(time.perf_counter() - start)
            with_lines: list[float] = []
            for _ in range(runs):
                start = time.perf_counter()
                lined = list(report_lines_gdb(stack_of_process(pid, max_frames=depth + 1000)))
                with_lines.append(time.perf_counter() - start)
            main_frames = next(len(t.backtrace.frames) for t in report.threads if t.tid == pid)
            trust = _trust_times(modules.modules, runs, large)
            gdb_times: list[float] = []
            gdb_frames = 0
            for _ in range(runs):
                command = gdb_command("-p", str(pid))
                command[-1] = "bt -frame-info location-and-address"
                start = time.perf_counter()
                result = subprocess.run(command, capture_output=True, text=True, check=False)
                gdb_times.append(time.perf_counter() - start)
                parsed = parse_gdb_bt("Thread 1 (LWP 1)\n" + result.stdout)
                gdb_frames = sum(len(frames) for frames in parsed.values())
    t_unwind, r_unwind = median_rate(frames, unwind_times)
    t_e2e, r_e2e = median_rate(main_frames, end_to_end)
    t_gdb, r_gdb = median_rate(max(gdb_frames, 1), gdb_times)
    print(f"deep stack: recursion depth {depth}, {frames} frames (gdb: {gdb_frames}), "
          f"median of {runs} runs")
    print(f"pysframe unwind      {t_unwind * 1e3:9.2f} ms  {r_unwind:12.0f} frames/s")
    print(f"pysframe end to end  {t_e2e * 1e3:9.2f} ms  {r_e2e:12.0f} frames/s")
    t_lines = statistics.median(with_lines)
    print(f"  --format gdb (source lines, inlined frames: {len(lined)} lines)"
          f"  {t_lines * 1e3:9.2f} ms")
    print(f"gdb -batch bt        {t_gdb * 1e3:9.2f} ms  {r_gdb:12.0f} frames/s")
    print(f"ratio pysframe unwind / gdb:      {r_unwind / r_gdb:8.1f}x")
    print(f"ratio pysframe end to end / gdb:  {r_e2e / r_gdb:8.1f}x")
    bench_names(modules.modules, runs)
    print(f"trust checks beside one walk of the deep stack ({t_unwind * 1e3:.2f} ms):")
    for name, count, origin, seconds, problems in trust:
        print(f"  {name}: {count:,} functions ({origin}), {seconds * 1e3:.2f} ms "
              f"({seconds / t_unwind:.2f} walks), "
              f"{'passes' if not problems else 'fails: ' + problems[0]}")
    return 0


def _trust_times(
    modules: list[Module], runs: int, large: str | None
) -> list[tuple[str, int, str, float, list[str]]]:
    """The trust checks' cost on the program's and libc's sections and a large one: (name,
    functions, origin, median seconds, problems) each."""
    from pysframe.elf.reader import ElfReader
    from pysframe.sources import generated_sframe, resolve_image
    from pysframe.sources.trust import trust_problems

    paths = [m.path for m in modules if m.path.startswith("/")]
    chosen = [p for p in paths if p.endswith("stack_prog") or "/libc.so" in p]
    if large and Path(large).exists():
        chosen.append(large)
    out = []
    for path in chosen:
        with ElfReader.open(path) as image:
            try:
                found = resolve_image(image, relocate=False)
            except Exception:
                found = generated_sframe(image, cached=True)
            code = [(s.vaddr, s.vaddr + s.memsz) for s in image.load_segments() if s.flags & 1]
        found.section.table  # noqa: B018  (read once, as the unwinder reads it anyway)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            problems = trust_problems(found, code)
            times.append(time.perf_counter() - start)
        out.append((Path(path).name, len(found.section), str(found.origin),
                    statistics.median(times), problems))  # fmt: skip
    return out


def bench_names(modules: list[Module], runs: int) -> None:
    """Cold symbol loading for every module, then name lookups in libc's symbols."""
    paths = [m.path for m in modules if m.path.startswith("/")]
    cold: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        loaded = [symbolize.symbols_of_file(path) for path in paths]
        cold.append(time.perf_counter() - start)
    count = sum(len(table) for symbols in loaded for table in symbols.tables)
    debug = sum(1 for symbols in loaded if symbols.debug_file)
    print(f"symbols, cold: {len(paths)} modules ({debug} with a separate debug file), "
          f"{count} symbols: {statistics.median(cold) * 1e3:.1f} ms")
    libc = next((s for s in loaded if "/libc.so" in s.path), None)
    if libc is None or not libc.tables:
        return
    rng = random.Random(13)
    table = libc.tables[-1]
    starts = [table.symbol(i).address for i in range(len(table))]
    pcs = [rng.choice(starts) + rng.randrange(0, 64) for _ in range(100_000)]
    bulk: list[float] = []
    single: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        libc.find_many(pcs)
        bulk.append(time.perf_counter() - start)
        start = time.perf_counter()
        for pc in pcs[:10_000]:
            libc.find(pc)
        single.append((time.perf_counter() - start) * 10)
    named = [found[0] for found in libc.find_many(pcs) if found is not None]
    start = time.perf_counter()
    demangle.cache_clear()
    for name in named:
        demangle(name)
    demangling = time.perf_counter() - start
    rate = len(pcs) / statistics.median(bulk)
    print(f"names in {libc.path} ({', '.join(libc.sources)}): 100,000 PCs in bulk "
          f"{statistics.median(bulk) * 1e3:.1f} ms ({rate:,.0f}/s), one at a time "
          f"{statistics.median(single) * 1e3:.0f} ms; demangling them {demangling * 1e3:.1f} ms")
    bench_lines(libc.path, pcs[:1000], runs)


def bench_lines(path: str, pcs: list[int], runs: int) -> None:
    """Source lines and inlined frames (--lines, --format gdb) from libc's DWARF: the first
    look at each compilation unit reads it, later looks reuse it."""
    symbols = symbolize.symbols_of_file(path)
    if symbols.debug_file is None:
        print(f"source lines: {path} has no separate debug file here, not measured")
        return
    start = time.perf_counter()
    found = sum(1 for pc in pcs if symbols.source(pc))
    cold = time.perf_counter() - start
    warm: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        for pc in pcs:
            symbols.source(pc)
        warm.append(time.perf_counter() - start)
    print(f"source lines in {symbols.debug_file}: {len(pcs)} PCs in functions ({found} with "
          f"lines): first look {cold * 1e3:.0f} ms (reading their units), then "
          f"{statistics.median(warm) / len(pcs) * 1e6:.0f} us a PC")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small and fast (CI)")
    parser.add_argument("--depth", type=int, help="recursion depth (default 2000, quick 1000)")
    parser.add_argument("--runs", type=int, help="runs (default 5, quick 3)")
    parser.add_argument(
        "--large", default="/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
        help="a large file whose section the trust checks are timed on (quick: none)",
    )  # fmt: skip
    args = parser.parse_args()
    depth = args.depth or (1000 if args.quick else 2000)
    runs = args.runs or (3 if args.quick else 5)
    return bench(depth, runs, 2 if args.quick else 5, None if args.quick else args.large)


if __name__ == "__main__":
    raise SystemExit(main())
