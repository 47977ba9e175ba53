"""Whole processes, side by side with binutils: start-up, ``dump`` (text, ``--json``,
``--jsonl``) and ``generate``, with wall-time medians and peak memory.

Every command runs as a process with its output sent to /dev/null; the commands of one row run
one after the other, alternating, ``--runs`` times, and each one's median wall time and largest
peak resident size (``wait4``) are printed with the ratios the targets are stated in:

* start-up: ``pysframe --version`` and ``--help`` against ``python -c pass`` (ms above it);
* dump: ``pysframe dump FILE`` against ``$OBJDUMP --sframe FILE`` (time and memory ratios),
  and ``dump --json``/``--jsonl`` against the text dump;
* generate: ``pysframe generate LIB -o OUT`` against ``$READELF --debug-dump=frames-interp
  LIB``, and its peak memory against the size of the section it writes.

Inputs: ``--dump FILE`` (ELF files with an SFrame section) and ``--generate LIB`` (ELF files
with .eh_frame), repeatable; by default the libbfd built by ``tests/support/libbfd_gsframe.py``
(``~/.cache/pysframe-verify/libbfd-gsframe.so``) when it exists, and the biggest library on the
machine with a V3 section generated and injected (cached).  ``--quick`` (the test suite) uses a
small synthetic section and one run.  Python byte code is written on the first (untimed) run,
as an installed package has it.

    source ~/.cache/sframe-ref/env.sh    # OBJDUMP, READELF of binutils 2.47
    python benchmarks/bench_cli.py [--quick] [--runs N] [--dump FILE]... [--generate LIB]...
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import common

from pysframe import Version

PYSFRAME = [sys.executable, "-m", "pysframe"]


@dataclass(frozen=True)
class Measured:
    seconds: float
    peak_mb: float
    ok: bool


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its byte code
    return env


def run_once(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak resident MB and exit status of one process."""
    run = common.run_process(command, env=_environment(), check=False)
    return run.wall, run.peak_bytes / 2**20, run.status


def measure(commands: dict[str, list[str]], runs: int) -> dict[str, Measured]:
    """Run every command once untimed, then ``runs`` times each, alternating."""
    for command in commands.values():
        run_once(command)
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    peak: dict[str, float] = dict.fromkeys(commands, 0.0)
    ok: dict[str, bool] = dict.fromkeys(commands, True)
    for _ in range(runs):
        for name, command in commands.items():
            wall, mb, status = run_once(command)
            seconds[name].append(wall)
            peak[name] = max(peak[name], mb)
            ok[name] = ok[name] and status == 0
    return {
        name: Measured(statistics.median(seconds[name]), peak[name], ok[name])
        for name in commands
    }


def line(what: str, ours: Measured, reference: Measured | None, name: str) -> None:
    text = f"  {what:<34} {ours.seconds * 1e3:9.1f} ms {ours.peak_mb:7.1f} MB"
    if not ours.ok:
        text += "  (failed)"
    if reference is not None:
        time_ratio = ours.seconds / reference.seconds
        memory_ratio = ours.peak_mb / reference.peak_mb
        text += (
            f"   {name} {reference.seconds * 1e3:9.1f} ms {reference.peak_mb:7.1f} MB"
            f"   time {time_ratio:5.2f}x  memory {memory_ratio:5.2f}x"
        )
    print(text)


def bench_start_up(runs: int) -> None:
    common.heading("start-up")
    found = measure(
        {
            "python": [sys.executable, "-c", "pass"],
            "version": [*PYSFRAME, "--version"],
            "help": [*PYSFRAME, "--help"],
        },
        runs,
    )
    bare = found["python"]
    line("python -c pass", bare, None, "")
    for name in ("version", "help"):
        above = (found[name].seconds - bare.seconds) * 1e3
        line(f"pysframe --{name}", found[name], None, "")
        print(f"    --{name}: {above:.1f} ms above bare Python (target 30 ms)")


def bench_dump(path: Path, runs: int, objdump: str | None) -> None:
    common.heading(f"dump {path.name} ({path.stat().st_size:,} bytes)")
    commands = {
        "text": [*PYSFRAME, "dump", str(path)],
        "json": [*PYSFRAME, "dump", "--json", str(path)],
        "jsonl": [*PYSFRAME, "dump", "--jsonl", str(path)],
    }
    if objdump:
        commands["objdump"] = [objdump, "--sframe", str(path)]
    found = measure(commands, runs)
    reference = found.get("objdump")
    line("pysframe dump", found["text"], reference, "objdump")
    line("pysframe dump --json", found["json"], found["text"], "text dump")
    line("pysframe dump --jsonl", found["jsonl"], found["text"], "text dump")


def bench_generate(path: Path, runs: int, readelf: str | None, scratch: Path) -> None:
    common.heading(f"generate {path.name} ({path.stat().st_size:,} bytes)")
    output = scratch / f"{path.name}.sframe"
    commands = {"generate": [*PYSFRAME, "generate", str(path), "-o", str(output)]}
    if readelf:
        commands["readelf"] = [readelf, "--debug-dump=frames-interp", str(path)]
    found = measure(commands, runs)
    line("pysframe generate", found["generate"], found.get("readelf"), "readelf")
    if output.exists():
        written = output.stat().st_size / 2**20
        print(
            f"    peak {found['generate'].peak_mb:.1f} MB for a {written:.2f} MB section: "
            f"{found['generate'].peak_mb / max(written, 1e-9):.1f}x its size"
        )


def _default_inputs(scratch: Path, quick: bool) -> tuple[list[Path], list[Path]]:
    if quick:
        item = common.synthetic_section(common.QUICK_FUNCTIONS, Version.V3)
        elf = common.write_elf(scratch / "synthetic", item.data, item.section().abi)
        return [elf], []
    dumps: list[Path] = []
    libbfd = Path.home() / ".cache" / "pysframe-verify" / "libbfd-gsframe.so"
    if libbfd.exists():
        dumps.append(libbfd)
    libraries = common.biggest_libraries(1)
    for library in libraries:
        injected = common.cache_dir() / f"{library.name}-{library.stat().st_size}.v3-injected"
        if not injected.exists():
            print(f"(generating V3 into a copy of {library}; cached)", file=sys.stderr)
            subprocess.run(
                [*PYSFRAME, "generate", str(library), "-o", str(injected), "--inject"], check=True
            )
        dumps.append(injected)
    return dumps, libraries


def main() -> int:
    p = common.parser(__doc__ or "")
    p.add_argument("--dump", action="append", default=[], type=Path, help="ELF file to dump")
    p.add_argument(
        "--generate", action="append", default=[], type=Path, help="ELF file to generate from"
    )
    args = p.parse_args()
    runs = 1 if args.quick else max(1, args.runs)
    objdump = os.environ.get("OBJDUMP") or shutil.which("objdump")
    readelf = os.environ.get("READELF") or shutil.which("readelf")
    print(f"objdump: {objdump or 'none'}; readelf: {readelf or 'none'}; medians of {runs} runs")
    with tempfile.TemporaryDirectory(prefix="pysframe-bench-") as name:
        scratch = Path(name)
        dumps, generates = args.dump, args.generate
        if not dumps and not generates:
            dumps, generates = _default_inputs(scratch, args.quick)
        true = shutil.which("true")
        if args.quick and not args.generate and true:
            generates = [Path(true)]
        bench_start_up(runs)
        for path in dumps:
            bench_dump(path, runs, objdump)
        for path in generates:
            bench_generate(path, runs, readelf, scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
