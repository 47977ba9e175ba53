"""benchmarks/bench_perf_read.py and bench_perf_symbols.py run in --quick mode (their figures
mean nothing then), so that they cannot rot unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import unavailable
from perf_support import Unavailable, check_perf

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"


def run_quick(tmp_path: Path, script: str, timeout: int) -> str:
    """The output of ``benchmarks/SCRIPT --quick`` (its recordings cached in ``tmp_path``),
    which must end well and print no traceback."""
    try:
        check_perf()
    except Unavailable as why:
        unavailable(why)
    env = dict(os.environ, PYSFRAME_BENCH_CACHE=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick"], capture_output=True, text=True,
        env=env, timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


@pytest.mark.parametrize(("script", "expected"), [
    ("bench_perf_read.py", ("CPU time, whole process", "peak resident set")),
    ("bench_perf_symbols.py", ("CPU time, the symbols alone",)),
])  # fmt: skip
def test_perf_benchmarks_run_quick(tmp_path: Path, script: str, expected: tuple[str, ...]) -> None:
    output = run_quick(tmp_path, script, 300)
    assert all(text in output for text in expected), output


def test_perf_benchmark_runs_quick(tmp_path: Path) -> None:
    """benchmarks/bench_perf.py: the five workloads recorded small, every command timed
    (perf script with and without inline frames, pysframe with -j 1 and -j 2, its outputs
    the same), the walk rate and the agreement with perf script printed."""
    output = run_quick(tmp_path, "bench_perf.py", 900)
    for workload in ("c", "c++", "python", "inline", "small"):
        assert f"== {workload}: " in output
    assert output.count("CPU ratio") == 15 and output.count("agreement over") == 5
    assert output.count("perf script's text with inline frames") == 5
    assert output.count("output identical to -j 1") == 5 and "load average after" in output
