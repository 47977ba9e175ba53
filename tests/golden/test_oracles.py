"""conftest.require, the one way a test stops for want of a tool: a skip outside CI, a failure
under CI, and one summary line per missing tool either way.  Small test files run in a pytest
of their own (pytester, in a subprocess), with this directory's conftest.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import require, require_module, require_perf, require_program

CONFTEST = Path(__file__).parent.parent / "conftest.py"

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
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rsf")


@pytest.mark.parametrize(
    ("ci", "outcome", "summary_line"),
    [
        (False, "skipped", "SKIPPED*no frobnicator here"),
        (True, "failed", "FAILED*CI needs frobnicator: no frobnicator here"),
    ],
)
def test_a_missing_tool_skips_outside_ci_and_fails_under_ci(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    ci: bool,
    outcome: str,
    summary_line: str,
) -> None:
    result = _run(pytester, monkeypatch, ci=ci)
    result.assert_outcomes(passed=1, **{outcome: 3})
    result.stdout.fnmatch_lines(
        [
            "*missing tools*",
            f"{outcome} for want of frobnicator: 2 tests",
            f"{outcome} for want of no-such-package: 1 tests",
            "*short test summary info*",
            summary_line,
        ]
    )
    expected = pytest.ExitCode.TESTS_FAILED if ci else pytest.ExitCode.OK
    assert result.ret == expected


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
