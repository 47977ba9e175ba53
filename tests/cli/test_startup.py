"""Start-up: the command line imports only what the command it runs needs.

``pysframe --version`` and ``--help`` build every sub-command's parser; none of them may pull
in numpy, pyelftools or the tools behind the commands, which are imported when a command runs.
``pysframe stack PID`` of programs seen before imports no pyelftools and generates nothing.
(Timings belong to ``benchmarks/``; these tests check what is imported, which is what makes
start-up slow.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

HEAVY = ("numpy", "elftools", "pysframe.format.section", "pysframe.tools.dump", "pysframe.generate")

PROBE = """
import json, sys
from pysframe.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as exit:
    status = exit.code
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_by(*arguments: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *arguments], capture_output=True, text=True, check=False
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("arguments", [("--version",), ("--help",), ("dump", "--help")])
def test_parsers_alone_import_nothing_heavy(arguments: tuple[str, ...]) -> None:
    modules = imported_by(*arguments)
    assert "pysframe.cli.dump" in modules  # the parsers were built
    assert not [name for name in HEAVY if name in modules]


def test_a_command_imports_its_tools_when_it_runs() -> None:
    from conftest import DATA

    modules = imported_by("info", str(DATA / "corpus" / "x86_64" / "v3" / "frames"))
    assert "pysframe.tools.info" in modules
    assert "pysframe.tools.verify" not in modules and "pysframe.generate.interpret" not in modules


STACK_HEAVY = ("elftools", "pysframe.format.section", "pysframe.generate")


@pytest.fixture(scope="module")
def stack_targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """PIDs of sleep and of the live tests' program (its own .sframe and a library's)."""
    from conftest import unavailable
    from stack_support import Unavailable, build_programs, check_ptrace, run_program

    try:
        check_ptrace()
        program = build_programs(tmp_path_factory.mktemp("startup"))
    except Unavailable as why:
        unavailable(why)
    sleeping = subprocess.Popen(["sleep", "120"])
    try:
        with run_program(program, 3, 1) as running:
            yield [sleeping.pid, running.pid]
    finally:
        sleeping.kill()
        sleeping.wait()


def test_a_second_stack_of_a_process_needs_no_pyelftools_nor_generation(
    stack_targets: list[int],
) -> None:
    """``pysframe stack PID`` of programs seen before (SFrame generated for their libraries
    and the checks' verdicts kept in the cache, which the tests' session has of its own):
    single-PC lookups, nothing generated, no pyelftools."""
    for pid in stack_targets:
        first = imported_by("stack", str(pid))
        assert "pysframe.unwind.stack" in first
        second = imported_by("stack", str(pid))
        assert "pysframe.format.lookup" in second, "the stack was not unwound"
        assert not [name for name in STACK_HEAVY if name in second], pid


THREADS = """
import os, sys
from pysframe.cli import main
status = main(sys.argv[1:])
print(status, len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_a_command_starts_no_blas_threads() -> None:
    """numpy's OpenBLAS starts a thread per CPU when numpy is imported, which spin a while:
    a command asks for none (pysframe does no linear algebra), unless the user chose."""
    from conftest import DATA

    program = str(DATA / "corpus" / "x86_64" / "v3" / "frames")
    environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def run(**extra: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", THREADS, "info", program], capture_output=True, text=True,
            env={**environment, **extra}, check=True,
        )  # fmt: skip
        return done.stdout.splitlines()[-1].split()

    assert run() == ["0", "1", "1"]  # one thread: the main one
    if (os.cpu_count() or 1) > 1:  # the user's choice is kept: BLAS threads, as numpy makes
        status, threads, chosen = run(OPENBLAS_NUM_THREADS="2")
        assert (status, chosen) == ("0", "2") and int(threads) > 1


def test_a_command_runs_the_cyclic_collector_less_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a command runs, Python's cyclic collector waits for GC_THRESHOLD new objects
    (not 700); a program that calls main() gets its own thresholds back, also after an
    error."""
    import gc

    from pysframe import cli

    before = gc.get_threshold()
    seen: list[tuple[int, ...]] = []

    def command(argv: object) -> int:
        seen.append(gc.get_threshold())
        raise RuntimeError("a defect")

    monkeypatch.setattr(cli, "_main", command)
    assert cli.main([]) == 1  # the internal error's status
    assert seen == [(cli.GC_THRESHOLD, *before[1:])]
    assert gc.get_threshold() == before
