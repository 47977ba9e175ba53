"""Shared fixtures: the corpus of real SFrame sections made by GNU as/ld (tests/data/corpus), the
reference GNU tools (binutils 2.47) when scripts/build-reference-binutils.sh has built them, and
the one way a test says it cannot run for want of a tool or a permission (:func:`require`).

Oracles.  Many tests compare with another program (objdump, readelf and libsframe 2.47, gdb,
gcc, qemu, perf...) or need a permission (ptrace, perf_event_open).  When one is missing the
test calls :func:`require` (or :func:`require_program`, :func:`require_module`,
:func:`require_perf`, :func:`unavailable`), which skips it outside CI and fails it under CI
(the ``CI`` environment variable set, as ``.ci/run`` sets it), so that CI cannot pass with its
oracles gone.  The summary at the end of a run counts the tests each missing tool skipped.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from types import ModuleType
from typing import NoReturn, Protocol

import pytest

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus"

#: Where scripts/build-reference-binutils.sh leaves its env.sh (PYSFRAME_REFERENCE overrides).
REFERENCE_ENV = Path(
    os.environ.get("PYSFRAME_REFERENCE", Path.home() / ".cache" / "sframe-ref")
) / "env.sh"


def _reference_environment(env_file: Path) -> dict[str, str]:
    """The ``export NAME=VALUE ...`` assignments of the reference build's env.sh."""
    try:
        text = env_file.read_text()
    except OSError:
        return {}
    return dict(re.findall(r"(\w+)=(\S+)", "\n".join(
        line.removeprefix("export ") for line in text.splitlines() if line.startswith("export ")
    )))


# Programs installed beside the Python running the tests (a virtual environment's pysframe and
# ruff, as .venv/bin/python -m pytest runs them) come first on PATH, as if it were activated.
_BIN = str(Path(sys.executable).parent)
_PATH = [entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry]
os.environ["PATH"] = os.pathsep.join([_BIN, *(entry for entry in _PATH if entry != _BIN)])

# Tests read OBJDUMP, READELF, GAS, LIBSFRAME, PATH_AARCH64 and PATH_S390X from the environment;
# the reference build's values apply unless the caller set their own.
for _name, _value in _reference_environment(REFERENCE_ENV).items():
    os.environ.setdefault(_name, _value)


def corpus_files() -> list[Path]:
    """Every ELF file of the corpus (those with a GNU dump text beside them)."""
    return sorted(p for p in CORPUS.glob("*/v*/*") if p.is_file() and p.suffix != ".txt")


@pytest.fixture(scope="session")
def corpus() -> list[Path]:
    return corpus_files()


# -- oracles: tools and permissions the tests need ---------------------------------------------

pytest_plugins = ["pytester"]  # tests/test_oracles.py runs pytest on small test files


def in_ci() -> bool:
    """Whether this run is CI's, where a missing oracle fails the test instead of skipping it
    (``CI`` set and not empty, as .ci/run and CI services set it)."""
    return bool(os.environ.get("CI"))


class Missing(Protocol):
    """An exception that says which tool is missing (stack_support.Unavailable)."""

    tool: str


def require(tool: str, reason: str) -> NoReturn:
    """Stop the running test (or fixture) for want of ``tool``: skip it outside CI, fail it
    under CI.  ``reason`` says what is missing and why the test needs it."""
    __tracebackhide__ = True  # a skip or failure points at the test
    outcome: pytest.skip.Exception | pytest.fail.Exception
    if in_ci():
        outcome = pytest.fail.Exception(f"CI needs {tool}: {reason}", pytrace=False)
    else:
        outcome = pytest.skip.Exception(reason)
    outcome.missing_tool = tool
    raise outcome


def unavailable(why: BaseException) -> NoReturn:
    """:func:`require` for an exception naming its missing tool (``why.tool``)."""
    __tracebackhide__ = True  # a skip or failure points at the test
    require(getattr(why, "tool", "unknown"), str(why))


def require_program(name: str, tool: str | None = None) -> str:
    """The path of the program ``name`` on $PATH; without it, :func:`require` ``tool`` (the
    program's name unless given, e.g. the package that has it)."""
    __tracebackhide__ = True  # a skip or failure points at the test
    path = shutil.which(name)
    if path is None:
        require(tool or name, f"{name} is not installed")
    return path


def require_module(name: str, tool: str | None = None, reason: str | None = None) -> ModuleType:
    """The Python module ``name``; without it, :func:`require` ``tool`` (default ``name``)."""
    __tracebackhide__ = True  # a skip or failure points at the test
    try:
        return importlib.import_module(name)
    except ImportError:
        require(tool or name, reason or f"the Python module {name} is not installed")


@functools.cache
def _perf_problem() -> str | None:
    """Why ``perf record`` cannot sample here, or None (tried once per run)."""
    perf = shutil.which("perf")
    if perf is None:
        return "perf is not installed (Debian package linux-perf)"
    with tempfile.TemporaryDirectory() as folder:
        command = [perf, "record", "-q", "-o", str(Path(folder, "perf.data")), "--", "true"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"perf record did not run: {error}"
    if done.returncode:
        paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
        level = paranoid.read_text().strip() if paranoid.exists() else "?"
        return (
            f"perf record cannot sample (perf_event_open refused? kernel.perf_event_paranoid = "
            f"{level}): {done.stderr.strip()[:200]}"
        )
    return None


def require_perf() -> str:
    """The ``perf`` program, once ``perf record`` has been seen to work (perf_event_open
    allowed); else :func:`require` "perf"."""
    __tracebackhide__ = True  # a skip or failure points at the test
    problem = _perf_problem()
    if problem is not None:
        require("perf", problem)
    return shutil.which("perf") or "perf"


@pytest.fixture(scope="session")
def perf() -> str:
    """:func:`require_perf` as a fixture."""
    return require_perf()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """Mark a report whose test :func:`require` stopped with the tool it missed."""
    outcome = yield
    tool = getattr(call.excinfo.value, "missing_tool", None) if call.excinfo else None
    if tool is not None:
        outcome.get_result().missing_tool = tool


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per missing tool: how many tests it skipped (or, under CI, failed)."""
    counts: Counter[tuple[str, str]] = Counter()
    for outcome in ("skipped", "failed", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            tool = getattr(report, "missing_tool", None)
            if tool is not None:
                counts[("skipped" if outcome == "skipped" else "failed", tool)] += 1
    if not counts:
        return
    terminalreporter.section("missing tools")
    for (what, tool), count in sorted(counts.items()):
        terminalreporter.write_line(f"{what} for want of {tool}: {count} tests")
