"""benchmarks/bench_perf_read.py runs in --quick mode (its figures mean nothing then), so that
it cannot rot unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from perf_support import Unavailable, check_perf

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_perf_read.py"


def test_perf_read_benchmark_runs_quick(tmp_path: Path) -> None:
    try:
        check_perf()
    except Unavailable as why:
        pytest.skip(str(why))
    env = dict(os.environ, PYSFRAME_BENCH_CACHE=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, env=env,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "CPU time, whole process" in done.stdout and "peak resident set" in done.stdout
