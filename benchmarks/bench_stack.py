"""``pysframe stack PID`` against ``eu-stack -p PID``, whole processes, in the same run.

The target: a second ``pysframe stack PID`` of the same programs generates nothing and takes at
most 10 times what ``eu-stack -p PID`` takes.  Three programs are started and left waiting:

* ``sleep``;
* the live tests' C program with its shared library (tests/support/stack_support.py builds it: -O2,
  no frame pointers, SFrame from gas), its threads parked in libc;
* Python (this interpreter) in ``time.sleep``.

For each, ``pysframe stack PID`` runs once untimed (it fills a private cache of generated
SFrame, ``$PYSFRAME_CACHE_DIR`` set to a temporary directory), then ``pysframe stack PID`` and
``eu-stack -p PID`` run one after the other, ``--runs`` times.  Each run is a child process,
measured by ``common.run_process``: its CPU time (user + system) from the kernel's account of
it (wait4), its wall time from its start to its end.  Medians are printed with the ratios, and
``python -c pass`` and ``python -c "import numpy"`` as the floor any Python command stands on.

Python's byte code is compiled first (``compileall`` of the package, with
PYTHONDONTWRITEBYTECODE left out of the children's environment), as an installed package has
it: without it every run would compile the sources again.

    python benchmarks/bench_stack.py [--quick] [--runs N]

``--quick`` (the test suite) runs once; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import compileall
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import common

TESTS = Path(__file__).resolve().parent.parent / "tests"
PYSFRAME = [sys.executable, "-m", "pysframe"]
#: The target: pysframe at most this many times eu-stack's time.
TARGET_RATIO = 10.0


@dataclass(frozen=True)
class Run:
    cpu: float
    wall: float
    status: int


def _environment(cache: Path) -> dict[str, str]:
    env = dict(os.environ, PYSFRAME_CACHE_DIR=str(cache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its byte code
    return env


def run_once(command: list[str], env: dict[str, str]) -> Run:
    """One child process: its CPU seconds (user + system), wall seconds and exit status."""
    run = common.run_process(command, env=env, check=False)
    return Run(run.cpu, run.wall, run.status)


def measure(commands: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, Run]:
    """Each command ``runs`` times, alternating; the median CPU and wall time of each (status:
    the first failure's, else 0)."""
    found: dict[str, list[Run]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            found[name].append(run_once(command, env))
    return {
        name: Run(
            statistics.median(r.cpu for r in results),
            statistics.median(r.wall for r in results),
            next((r.status for r in results if r.status), 0),
        )
        for name, results in found.items()
    }


def _shown(run: Run) -> str:
    failed = "" if run.status == 0 else f" (exit {run.status})"
    return f"CPU {run.cpu * 1e3:8.1f} ms  wall {run.wall * 1e3:8.1f} ms{failed}"


def _ratio(ours: float, reference: float) -> str:
    return f"{ours / reference:6.1f}x" if reference > 0 else "   inf"


def report(name: str, ours: Run, reference: Run | None) -> None:
    print(f"  pysframe stack   {_shown(ours)}")
    if reference is None:
        print("  eu-stack -p      n/a (eu-stack is not installed)")
        return
    print(f"  eu-stack -p      {_shown(reference)}")
    cpu, wall = _ratio(ours.cpu, reference.cpu), _ratio(ours.wall, reference.wall)
    print(f"  {name}: pysframe/eu-stack CPU {cpu}  wall {wall}  (target {TARGET_RATIO:g}x)")


# -- the programs ------------------------------------------------------------------------------


def _wait_for_line(process: subprocess.Popen[bytes], prefix: bytes) -> None:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 30)
    line = process.stdout.readline() if ready else b""
    if not line.startswith(prefix):
        raise RuntimeError(f"{process.args!r} did not get ready: {line!r}")


def _wait_sleeping(pid: int) -> None:
    """Until the process has mapped its libraries and sleeps in the kernel."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/maps") as maps:
            mapped = "libc" in maps.read()
        if state == "S" and mapped:
            return
        time.sleep(0.01)
    raise RuntimeError(f"process {pid} did not go to sleep")


@contextmanager
def started(command: list[str], ready: bytes | None) -> Iterator[int]:
    """Start ``command``, wait until it is ready (its line ``ready``, else asleep), yield its
    PID; kill and reap it on leaving."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        if ready is not None:
            _wait_for_line(process, ready)
        _wait_sleeping(process.pid)
        yield process.pid
    finally:
        process.kill()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


def programs(scratch: Path) -> dict[str, tuple[list[str], bytes | None]]:
    """The programs to stack: name -> (command, the line it prints once ready, or None)."""
    found: dict[str, tuple[list[str], bytes | None]] = {}
    sleep = shutil.which("sleep")
    if sleep:
        found["sleep"] = ([sleep, "1000"], None)
    sys.path[:0] = [str(TESTS / "support"), str(TESTS)]
    try:
        from stack_support import Unavailable, build_programs
    finally:
        sys.path.remove(str(TESTS / "support"))
        sys.path.remove(str(TESTS))
    try:
        program = build_programs(scratch)
    except Unavailable as error:
        print(f"(no C program: {error})", file=sys.stderr)
    else:
        found["C program + shared library"] = ([str(program), "4", "2"], b"READY")
    python = "import sys, time; print('READY', flush=True); time.sleep(1000)"
    found["python3"] = ([sys.executable, "-c", python], b"READY")
    return found


# -- main ----------------------------------------------------------------------------------------


def bench_floor(runs: int, env: dict[str, str]) -> None:
    print("\n== Python's own start-up (the floor of any Python command)")
    found = measure(
        {"pass": [sys.executable, "-c", "pass"], "numpy": [sys.executable, "-c", "import numpy"]},
        runs,
        env,
    )
    print(f"  python -c pass          {_shown(found['pass'])}")
    print(f"  python -c 'import numpy' {_shown(found['numpy'])}")


def bench_program(
    name: str, pid: int, runs: int, env: dict[str, str], eu_stack: str | None
) -> None:
    print(f"\n== {name} (PID {pid})")
    stack = [*PYSFRAME, "stack", str(pid)]
    first = run_once(stack, env)  # fills the cache of generated SFrame
    print(f"  first run (fills the cache): {_shown(first)}")
    commands = {"pysframe": stack}
    if eu_stack:
        commands["eu-stack"] = [eu_stack, "-p", str(pid)]
    found = measure(commands, runs, env)
    report(name, found["pysframe"], found.get("eu-stack"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="one run (CI smoke test)")
    parser.add_argument("--runs", type=int, default=9, help="timed runs; medians are printed")
    args = parser.parse_args()
    runs = 1 if args.quick else max(1, args.runs)
    import pysframe

    package = Path(pysframe.__file__).resolve().parent
    compileall.compile_dir(str(package), quiet=1)
    eu_stack = shutil.which("eu-stack")
    print(f"pysframe: {package}; eu-stack: {eu_stack or 'none'}; medians of {runs} runs")
    with tempfile.TemporaryDirectory(prefix="pysframe-bench-stack-") as name:
        scratch = Path(name)
        env = _environment(scratch / "cache")
        bench_floor(runs, env)
        for title, (command, ready) in programs(scratch).items():
            with ExitStack() as stack:
                pid = stack.enter_context(started(command, ready))
                bench_program(title, pid, runs, env, eu_stack)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
