"""Benchmark: ``pysframe verify`` against ``readelf --debug-dump=frames-interp`` on a large library.

    python benchmarks/bench_verify.py [FILE] [--runs N] [--quick]

``readelf --debug-dump=frames-interp`` interprets every FDE of ``.eh_frame`` into its table of
rows; ``pysframe verify`` interprets the same CFI and also reads the SFrame section, asks it at
every row boundary (batch lookup) and compares the two.  FILE defaults to libLLVM-15 (else the
shared library with the largest .eh_frame).  A file without SFrame gets a V3 section generated
and injected into a copy (``pysframe generate --inject``), cached under
``$PYSFRAME_BENCH_CACHE``; that copy is what both tools read.  Timed in the same run: pysframe
in this process (``verify_file``), the ``pysframe verify`` command end to end (interpreter
start-up included), and readelf (binutils 2.47's: ``$READELF``, or
``~/.cache/sframe-ref/binutils-2.47/bin/readelf``, else the one on PATH), output to /dev/null;
medians of the runs.  ``--quick`` uses a corpus file and one run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from common import cache_dir, fmt_seconds, median_seconds, parser, print_ratio

from pysframe.elf.inject import inject_file
from pysframe.elf.reader import ElfReader
from pysframe.generate import generate_from_elf
from pysframe.tools.verify import verify_file

LLVM = Path("/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1")
CORPUS_FILE = Path(__file__).resolve().parent.parent / "tests/data/corpus/x86_64/v3/frames"
REFERENCE_READELF = Path.home() / ".cache" / "sframe-ref" / "binutils-2.47" / "bin" / "readelf"


def readelf() -> tuple[str | None, str]:
    """The readelf to compare with, and its version line."""
    for candidate in (os.environ.get("READELF"), str(REFERENCE_READELF), shutil.which("readelf")):
        if candidate and Path(candidate).exists():
            done = subprocess.run([candidate, "--version"], capture_output=True, text=True)
            return candidate, done.stdout.splitlines()[0] if done.stdout else "readelf"
    return None, ""


def with_sframe(path: Path) -> Path:
    """``path`` if it has an SFrame section, else a cached copy with one injected."""
    with ElfReader.open(str(path)) as image:
        if image.find_sframe() is not None:
            return path
    stat = path.stat()
    copy = cache_dir() / f"{path.name}-{stat.st_size}-{int(stat.st_mtime)}.sframe-v3"
    if not copy.exists():
        result = generate_from_elf(str(path))
        inject_file(str(path), str(copy), result)
    return copy


def main() -> int:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("file", nargs="?", help="the ELF file (default: libLLVM-15)")
    args = arguments.parse_args()
    runs = 1 if args.quick else max(1, args.runs)
    if args.file:
        source = Path(args.file)
    elif args.quick or not LLVM.exists():
        source = CORPUS_FILE
    else:
        source = LLVM
    path = with_sframe(source)
    report = verify_file(path)
    print(f"file: {source}" + (f" (verified: {path})" if path != source else ""))
    print(
        f"status: {report.status}; {report.compared_functions:,} of {report.cfi_functions:,} "
        f"CFI functions, {report.compared_bytes:,} bytes compared: {report.agreeing_bytes:,} "
        f"agree, {report.noted_bytes:,} noted, {report.disagreeing_bytes:,} disagree"
    )
    ours = median_seconds(lambda: verify_file(path), runs)
    command = [sys.executable, "-m", "pysframe", "verify", str(path)]

    def run_command() -> None:
        subprocess.run(command, stdout=subprocess.DEVNULL, check=False)

    end_to_end = median_seconds(run_command, runs)
    tool, version = readelf()
    reference = None
    if tool is not None:

        def run_readelf() -> None:
            with open(os.devnull, "wb") as sink:
                subprocess.run([tool, "--debug-dump=frames-interp", str(path)], stdout=sink,
                               stderr=subprocess.DEVNULL, check=False)  # fmt: skip

        reference = median_seconds(run_readelf, runs)
        print(f"reference: {version}")
    print(f"median of {runs} runs")
    print_ratio("verify_file (in this process)", ours, reference, "readelf")
    print_ratio("pysframe verify (command, end to end)", end_to_end, reference, "readelf")
    if reference is not None:
        print(f"time ratio pysframe / readelf: in process {ours / reference:.2f}, "
              f"command {end_to_end / reference:.2f}")  # fmt: skip
    else:
        print(f"readelf not found; pysframe in process {fmt_seconds(ours)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
