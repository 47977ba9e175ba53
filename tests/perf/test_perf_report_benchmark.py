"""benchmarks/bench_perf_report.py runs in --quick mode (its figures mean nothing then), so
that it cannot rot unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "bench_perf_report.py"


def test_perf_report_benchmark_runs_quick(tmp_path: Path) -> None:
    env = dict(os.environ, PYSFRAME_BENCH_CACHE=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, env=env,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    for writer in ("top", "folded", "json", "speedscope", "pprof", "flamegraph"):
        assert f"\n{writer} " in done.stdout
