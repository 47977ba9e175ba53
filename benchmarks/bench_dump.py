"""``pysframe dump`` against ``objdump --sframe`` on the same ELF file.

Each input section is wrapped in a minimal ELF file; both commands run as processes with their
output sent to a pipe that is read and thrown away, so start-up costs count for both.  The
objdump is ``$OBJDUMP``, else the system's; binutils 2.40's reads SFrame V1 only, so every
input is also measured in V1.  A tool that cannot read an input is reported and skipped.

    python benchmarks/bench_dump.py [--quick] [--runs N] [--timeout S] [--functions N]
                                    [--libraries N]
"""

from __future__ import annotations

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

from pysframe import Version


def run_tool(command: list[str], timeout: float) -> tuple[bool, int, str, float]:
    """(succeeded, lines of output, first error line, seconds taken)."""
    began = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, 0, f"did not finish within {timeout:g} s", time.perf_counter() - began
    seconds = time.perf_counter() - began
    lines = done.stdout.count(b"\n")
    error = done.stderr.decode(errors="replace").strip().splitlines()
    ok = done.returncode == 0 and not error and b"SFrame" in done.stdout
    return ok, lines, error[0] if error else f"exit status {done.returncode}", seconds


def timed(command: list[str], runs: int, timeout: float) -> tuple[float | None, int, str]:
    """(median seconds or None on failure, lines of output, error)."""
    times = []
    lines, error = 0, ""
    for _ in range(runs):
        ok, lines, error, seconds = run_tool(command, timeout)
        if not ok:
            return None, lines, error
        times.append(seconds)
        if seconds * runs > timeout:  # slow: fewer runs rather than a benchmark of hours
            break
    return statistics.median(times), lines, error


def main() -> int:
    p = common.parser(__doc__ or "")
    p.add_argument("--timeout", type=float, default=300, help="seconds per dump (default 300)")
    config = common.settings(args := p.parse_args())
    objdump = common.objdump_path()
    have_dump = importlib.util.find_spec("pysframe.cli.dump") is not None
    print(f"objdump: {objdump or 'none'}; median of up to {config.runs} runs")
    if not have_dump:
        print("pysframe dump is not available in this installation: objdump figures only")
    runs = max(1, min(config.runs, 5))
    with tempfile.TemporaryDirectory(prefix="pysframe-bench-") as scratch:
        for number, item in enumerate(common.inputs(config, (Version.V3, Version.V1))):
            section = item.section()
            elf = common.write_elf(Path(scratch) / f"input{number}", item.data, section.abi)
            common.heading(f"{item.label}: {len(section):,} functions, {section.num_rows:,} rows")
            reference = None
            if objdump:
                reference, lines, error = timed([objdump, "--sframe", str(elf)], runs, args.timeout)
                if reference is None:
                    print(f"  objdump cannot read SFrame V{int(item.version)}: {error}")
                else:
                    print(f"  objdump: {lines:,} lines")
            if not have_dump:
                if reference is not None:
                    print(f"  objdump --sframe: {common.fmt_seconds(reference).strip()}")
                continue
            command = [sys.executable, "-m", "pysframe", "dump", str(elf)]
            ours, lines, error = timed(command, runs, args.timeout)
            if ours is None:
                print(f"  pysframe dump failed: {error}")
                continue
            print(f"  pysframe dump: {lines:,} lines")
            common.print_ratio("  dump", ours, reference, "objdump")
    return 0


if __name__ == "__main__":
    sys.exit(main())
