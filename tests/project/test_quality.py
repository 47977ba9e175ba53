"""The code stays lint- and type-clean: ruff over src and tests, mypy --strict over src."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import require_module, require_program

ROOT = Path(__file__).parent.parent.parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_is_clean() -> None:
    result = _run(require_program("ruff"), "check", "src", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    require_module("mypy")
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
