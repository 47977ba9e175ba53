"""conftest.require, the one way a test stops for want of a tool: a skip outside CI, a failure
under CI, and one summary line per missing tool either way.  Small test files run in a pytest
of their own (pytester, in a subprocess), with this directory's conftest.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import require, require_module, require_perf, require_program

CONFTEST = Path(__file__).with_name("conftest.py")

TESTS = """
from conftest import require, require_program

def test_needs_a_frobnicator():
    require("frobnicator", "no frobnicator here")

def test_needs_another_frobnicator():
    require("frobnicator", "still none")

def test_needs_a_program():
    require_program("pysframe-no-such-program", "no-such-package")

def test_needs_nothing():
    pass
"""


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: bool) -> pytest.RunResult:
    shutil.copy(CONFTEST, pytester.path / "conftest.py")
    pytester.makepyfile(test_tools=TESTS)
    if ci:
        monkeypatch.setenv("CI", "1")
    else:
        monkeypatch.delenv("CI", raising=False)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider")


def test_outside_ci_a_missing_tool_skips(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run(pytester, monkeypatch, ci=False)
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*missing tools*",
            "skipped for want of frobnicator: 2 tests",
            "skipped for want of no-such-package: 1 tests",
        ]
    )


def test_under_ci_a_missing_tool_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _run(pytester, monkeypatch, ci=True)
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*CI needs frobnicator: no frobnicator here*",
            "failed for want of frobnicator: 2 tests",
            "failed for want of no-such-package: 1 tests",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_require_raises_the_outcome_with_its_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require("frobnicator", "none")
    assert skipped.value.missing_tool == "frobnicator"  # type: ignore[attr-defined]
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_module("pysframe_no_such_module", "no-such-package")
    assert failed.value.missing_tool == "no-such-package"  # type: ignore[attr-defined]
    assert require_program("sh").endswith("/sh")


def test_perf_can_record() -> None:
    """perf, the oracle of the profiling tests: ``perf record`` works here (perf_event_open
    allowed), or the test stops for want of "perf"."""
    perf = require_perf()
    assert Path(perf).exists()
