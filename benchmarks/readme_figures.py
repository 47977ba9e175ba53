"""Every figure the documentation (the README and docs/) states about runs on this machine,
printed with a label that matches the sentence, and the transcripts of its console examples
that tests/project/test_docs_examples.py cannot run (a PID, what perf sampled, inputs not shipped).

Each section runs what the documentation describes (the commands as a user types them, in a fresh
process, or the library functions they call) and prints what the README quotes: counts of
files, byte totals, ratios, the lines of the examples.  Performance tables (medians against a
reference tool) are the other benchmarks' job and are not repeated here; the wall times and
peaks printed here are single runs, for orders of magnitude.

    python benchmarks/readme_figures.py                 # every section
    python benchmarks/readme_figures.py --only stats,verify
    python benchmarks/readme_figures.py --list
    python benchmarks/readme_figures.py --only perf --picture docs/flamegraph.png

Sections need what the README's examples need: gcc, g++, lld, strip (trust); perf (perf,
agreement); aarch64/s390x cross compilers and qemu-user (cross); c++filt (demangle);
objdump 2.47 and libsframe 2.47 through ``~/.cache/sframe-ref/env.sh``'s variables
(compact); node with ``npm ci --prefix tests/node`` and Chromium (the picture).  A section
whose tools are missing says so and the others go on.  Scratch files go to ``--work``
(default /tmp/pysframe-readme, made afresh; the examples' paths name it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
CORPUS = TESTS / "data" / "corpus"
LIBRARIES = "/usr/lib/x86_64-linux-gnu"
LIBBFD = Path.home() / ".cache" / "pysframe-verify" / "libbfd-gsframe.so"
LIBLLVM = Path(LIBRARIES) / "libLLVM-15.so.1"
#: The program and its second source file of the README's trust example.
NEST_C = """\
#include <stdio.h>
#include <unistd.h>

int middle(int n);

__attribute__((noinline)) int leaf(int n) { pause(); return n; }
__attribute__((noinline)) int outer(int n) { return middle(n * 2) * 3; }

int main(void)
{
    printf("%d\\n", getpid());
    fflush(stdout);
    return outer(1);
}
"""
MIDDLE_C = """\
int leaf(int n);

__attribute__((noinline)) int middle(int n) { return leaf(n + 1) + 1; }
"""


class Missing(Exception):
    """A tool a section needs is not here."""


# -- running commands --------------------------------------------------------------------------


def environment() -> dict[str, str]:
    """The environment of the commands run: this process's, with the pysframe it imports first
    on the path (so that ``python -m pysframe`` runs the same sources)."""
    import pysframe

    source = str(Path(pysframe.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=source + (os.pathsep + path if path else ""))


def need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            raise Missing(tool)


def pysframe(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "pysframe", *arguments]


def shown(command: Sequence[str]) -> str:
    """A command as the README writes it (``pysframe`` for ``python -m pysframe``)."""
    words = list(command)
    if words[:3] == [sys.executable, "-m", "pysframe"]:
        words = ["pysframe", *words[3:]]
    return " ".join(word.replace(f"{ROOT}/", "") for word in words)


def run(
    command: Sequence[str], cwd: Path | None = None, *, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``command``'s exit status and its output, stdout and stderr merged in the order a
    terminal shows them."""
    return subprocess.run(
        list(command), cwd=cwd, env=environment(), input=stdin, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors="replace", check=False, timeout=1800,
    )  # fmt: skip


def transcript(
    command: Sequence[str],
    cwd: Path | None = None,
    *,
    keep: Callable[[list[str]], list[str]] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` and print it as a console example: ``$ command``, its output (``keep``
    chooses lines), and its exit status when it is not 0."""
    done = run(command, cwd)
    print(f"$ {shown(command)}")
    lines = done.stdout.splitlines()
    for line in keep(lines) if keep else lines:
        print(line)
    if done.returncode:
        print(f"[exit {done.returncode}]")
    return done


def timed(command: Sequence[str], cwd: Path | None = None) -> tuple[str, float, float]:
    """Output, wall seconds and peak resident MB (the kernel's account of the process and the
    processes it waited for: wait4) of ``command``."""
    run = common.run_process(list(command), env=environment(), cwd=cwd, output=True, check=False)
    return run.output, run.wall, run.peak_bytes / 2**20


def heading(name: str) -> None:
    print(f"\n== {name}", flush=True)


def figure(label: str, value: object) -> None:
    print(f"{label}: {value}", flush=True)


def share(part: int, whole: int, digits: int = 1) -> str:
    return f"{100 * part / whole:.{digits}f}%" if whole else "-"


# -- sections ------------------------------------------------------------------------------------


def section_corpus(work: Path) -> None:
    """'On the corpus objects, the generated V3 section gives the same rule as GNU as' own
    section at every PC' (tests/golden/test_generate_corpus.py makes the same comparison)."""
    sys.path[:0] = [str(TESTS / "support"), str(TESTS)]
    from pysframe import generate_from_elf, load_sframe
    from test_generate_corpus import V3_OBJECTS, _compare, _pair_by_start

    same = total = functions = 0
    for path in V3_OBJECTS:
        gas = load_sframe(str(path))
        for reference, generated in _pair_by_start(gas, generate_from_elf(str(path)).section):
            agreeing, pcs = _compare(reference, generated)
            same, total, functions = same + agreeing, total + pcs, functions + 1
    figure("corpus V3 objects", len(V3_OBJECTS))
    figure("PCs compared", f"{total:,} in {functions} functions")
    figure("PCs where the generated rule is gas' own", f"{same:,} ({share(same, total)})")


def section_damaged(work: Path) -> None:
    """'tests/hostile/test_damaged_sweep.py runs every sub-command ... on N damaged copies of a
    program and M of an object'."""
    sys.path[:0] = [str(TESTS / "support"), str(TESTS)]
    from test_damaged_sweep import COMMANDS, PROGRAMS, _damaged

    for program in PROGRAMS:
        figure(f"damaged copies of {program.relative_to(ROOT)}", sum(1 for _ in _damaged(program)))
    figure("sub-commands run on each", len(COMMANDS))
    # The README's error example: the FRE sub-section's length (header byte 16) made 15.
    from pysframe.elf.reader import ElfReader

    source = CORPUS / "x86_64" / "v3" / "frames"
    data = bytearray(source.read_bytes())
    with ElfReader.open(str(source)) as image:
        found = image.section(".sframe")
        assert found is not None
        data[found.offset + 16] = 0x0F
    (work / "damaged").write_bytes(data)
    transcript(pysframe("info", "damaged"), work)


def section_demangle(work: Path) -> None:
    """'libstdc++'s N C++ names all read as c++filt 2.40 reads them, libLLVM-15's M all but K'."""
    need("c++filt")
    from pysframe.elf.reader import ElfReader
    from pysframe.elf.symbols import read_function_symbols
    from pysframe.unwind.demangle import demangle_many

    for library in (Path(LIBRARIES) / "libstdc++.so.6", LIBLLVM):
        if not library.exists():
            figure(str(library), "not on this machine")
            continue
        with ElfReader.open(str(library)) as image:
            records = read_function_symbols(image, ".dynsym")
        names = sorted({r.name for r in records if r.name.startswith("_Z")})
        theirs = subprocess.run(
            ["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True, check=True
        ).stdout.splitlines()
        ours = demangle_many(names)
        differing = [n for n, a, b in zip(names, ours, theirs, strict=True) if a != b]
        figure(f"{library.name}: C++ function names in .dynsym", f"{len(names):,}")
        figure(f"{library.name}: names read otherwise than c++filt reads them", len(differing))
        for name in differing[:10]:
            print(f"    {name}")


def section_trust(work: Path) -> None:
    """The trust example: a program linked by lld from two objects gas assembled with
    --gsframe (Debian's gas 2.40 writes V1); check, info, stack's warning, repair, and repair's
    refusal on a copy without symbols."""
    need("gcc", "ld.lld", "strip")
    folder = work / "nest"
    folder.mkdir()
    (folder / "nest.c").write_text(NEST_C)
    (folder / "middle.c").write_text(MIDDLE_C)
    build = ["gcc", "-O2", "-fomit-frame-pointer", "-Wa,--gsframe", "-fuse-ld=lld", "-o",
             "nest", "nest.c", "middle.c"]  # fmt: skip
    transcript(build, folder)
    transcript(pysframe("check", "nest"), folder)
    transcript(pysframe("info", "nest"), folder)
    transcript(pysframe("dump", "nest"), folder, keep=lambda lines: lines[:2])
    with running(folder / "nest") as pid:
        transcript(pysframe("stack", str(pid)), folder)
        transcript(pysframe("stack", "--sframe", "own", str(pid)), folder)
        done = run(pysframe("stack", "--json", str(pid)), folder)
        modules = json.loads(done.stdout[done.stdout.index("{") :])["modules"]
        print(f"$ pysframe stack --json {pid}   # the module's entry")
        print(json.dumps({k: modules[0][k] for k in ("path", "origin", "reason")}, indent=1))
    transcript(pysframe("verify", "nest"), folder, keep=lambda lines: lines[:4])
    transcript(pysframe("repair", "nest", "-o", "nest-fixed"), folder)
    transcript(pysframe("check", "nest-fixed"), folder)
    transcript(pysframe("verify", "nest-fixed"), folder, keep=lambda lines: lines[:4])
    with running(folder / "nest-fixed") as pid:
        transcript(pysframe("stack", str(pid)), folder)
    transcript(["strip", "-o", "nest-stripped", "nest"], folder)
    transcript(pysframe("repair", "nest-stripped", "-o", "out"), folder)


class running:
    """A program started in the background that prints its PID (shown as a console line
    would show it), stopped at the end."""

    def __init__(self, program: Path) -> None:
        self.process = subprocess.Popen(
            [str(program)], cwd=program.parent, stdout=subprocess.PIPE, text=True
        )

    def __enter__(self) -> int:
        assert self.process.stdout is not None
        pid = int(self.process.stdout.readline())
        print(f"$ ./{Path(str(self.process.args[0])).name} &")
        print(pid)
        time.sleep(0.3)  # into pause()
        return pid

    def __exit__(self, *_: object) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def section_stats(work: Path) -> None:
    """'Sizes across /usr/lib/x86_64-linux-gnu (pysframe stats --dir ... --generate)'."""
    output, wall, peak = timed(pysframe("stats", "--dir", LIBRARIES, "--generate", "-j", "2",
                                        "--json"))  # fmt: skip
    document = json.loads(output)
    files, total = document["files"], document["total"]
    with_sframe = [f for f in files if f["sframe_v3"] is not None]
    own = [f for f in files if f["sframe"]]
    figure("ELF files stats --dir lists", len(files))
    figure("files with SFrame (own or generated from .eh_frame)", len(with_sframe))
    figure("files with an SFrame section of their own", len(own))
    figure("V3 / .eh_frame", f"{total['ratio_v3']:.2f}")
    figure("V3 / (.eh_frame + .eh_frame_hdr)", f"{total['ratio_v3_unwind']:.2f}")
    figure("V2 / .eh_frame", f"{total['ratio_v2']:.2f}")
    functions = sum(total["fre_types"].values())
    figure("functions with 1-byte FRE start addresses", share(total["fre_types"]["addr1"],
                                                                   functions))  # fmt: skip
    figure("rows with 1-byte data words", share(total["word_sizes"]["1"], total["rows"]))
    figure("functions, rows", f"{functions:,}, {total['rows']:,}")
    figure("run (single, -j 2)", f"{wall:.0f} s wall, {peak:.0f} MB peak")


def section_verify(work: Path) -> None:
    """'A real run over this machine's libraries, with SFrame generated for each', and the same
    on a local Dask cluster."""
    command = pysframe("verify", "--dir", LIBRARIES, "--generate", "-j", "2")
    output, wall, peak = timed(command)
    print(f"$ {shown(command)}")
    print(output.split("\n\n", 1)[0])
    figure("run (single, -j 2)", f"{wall:.0f} s wall, {peak:.0f} MB peak")
    try:
        from distributed import LocalCluster
    except ImportError:
        figure("Dask", "distributed is not installed")
        return
    csv_command = pysframe("verify", "--dir", LIBRARIES, "--generate", "--csv")
    alone = run([*csv_command, "-j", "2"]).stdout
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        began = time.perf_counter()
        on_dask = run([*csv_command, "--dask", cluster.scheduler_address]).stdout
        seconds = time.perf_counter() - began

    def rows(text: str) -> list[str]:  # without the seconds column (the last)
        return [line.rsplit(",", 1)[0] for line in text.splitlines()]

    figure("Dask (LocalCluster, 2 workers): files", len(rows(on_dask)) - 1)
    figure("Dask CSV equal to the process pool's", rows(on_dask) == rows(alone))
    figure("Dask run", f"{seconds:.0f} s wall")


def section_libbfd(work: Path) -> None:
    """'On libbfd built by gas 2.47 --gsframe and ld 2.47' (tests/support/libbfd_gsframe.py)."""
    if not LIBBFD.exists():
        raise Missing(f"{LIBBFD} (python tests/support/libbfd_gsframe.py builds it)")
    transcript(pysframe("verify", str(LIBBFD)), work)


def fresh_bench_cache(section: Callable[[Path], None]) -> Callable[[Path], None]:
    """``section`` run with benchmarks/common.py's input cache in the work folder, so that the
    sections it generates are this pysframe's (the cache is keyed by the library alone)."""

    def run_section(work: Path) -> None:
        before = os.environ.get("PYSFRAME_BENCH_CACHE")
        os.environ["PYSFRAME_BENCH_CACHE"] = str(work / "bench-cache")
        try:
            section(work)
        finally:
            if before is None:
                del os.environ["PYSFRAME_BENCH_CACHE"]
            else:
                os.environ["PYSFRAME_BENCH_CACHE"] = before

    return run_section


@fresh_bench_cache
def section_compact(work: Path) -> None:
    """The compaction table's directory column: each trick alone over the files of
    /usr/lib/x86_64-linux-gnu (their V3 generated afresh), as benchmarks/bench_compact.py
    measures it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_compact

    from pysframe import SFrameSection
    from pysframe.format.compact import compact_section
    from pysframe.tools.files import find_elf_files

    files = find_elf_files(LIBRARIES, recursive=False)
    total = bench_compact.Sizes()
    alone = dict.fromkeys(bench_compact.TRICKS, 0)
    index = 0
    for path in files:
        found = bench_compact.file_sizes(path)
        if found is None:
            continue
        sizes, section = found
        compacted = compact_section(section)
        sizes.compacted = compacted.size
        total.add(sizes)
        after = SFrameSection.from_bytes(compacted.data, section.section_address)
        index += bench_compact.breakdown(after)["FDE index"]
        for name, options in bench_compact.TRICKS.items():
            alone[name] += len(section.data) - compact_section(section, options).size
    figure(f"{LIBRARIES}: files with V3 (own or generated)", total.files)
    figure("V3 bytes against .eh_frame + .eh_frame_hdr",
           f"{total.sframe:,} against {total.unwind:,} ({total.sframe / total.unwind:.3f}x)")
    figure("compacted V3 bytes", f"{total.compacted:,} ({total.compacted / total.unwind:.3f}x "
           f".eh_frame + hdr, {share(total.sframe - total.compacted, total.sframe)} smaller)")
    figure("FDE index share of the compacted size", share(index, total.compacted, 0))
    for name, gain in alone.items():
        figure(f"  {name} alone", share(gain, total.sframe))


@fresh_bench_cache
def section_compact_check(work: Path) -> None:
    """The compaction table's libbfd and libLLVM-15 columns, and the checks of the compacted
    files: objdump 2.47's text, libsframe 2.47's lookups, every PC's rules, the kernel's rules
    (bench_compact.py --check; OBJDUMP and LIBSFRAME from ~/.cache/sframe-ref/env.sh)."""
    for variable in ("OBJDUMP", "LIBSFRAME"):
        if not os.environ.get(variable):
            raise Missing(f"${variable} (source ~/.cache/sframe-ref/env.sh)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_compact
    import common

    from pysframe import SFrameSection, Version, load_sframe
    from pysframe.format.compact import compact_section

    inputs: list[tuple[str, SFrameSection, Path]] = []
    if LIBBFD.exists():
        inputs.append(("libbfd-gsframe.so (its own .sframe)", load_sframe(str(LIBBFD)), LIBBFD))
    generated = common.generated_section(LIBLLVM, Version.V3) if LIBLLVM.exists() else None
    if generated is not None:
        inputs.append(("libLLVM-15 (generated V3)", generated.section(), LIBLLVM))
    for label, section, path in inputs:
        print(f"-- {label}: {len(section):,} functions, {section.num_rows:,} rows")
        size = len(section.data)
        for name, options in bench_compact.TRICKS.items():
            figure(f"  {name} alone", share(size - compact_section(section, options).size, size))
        compacted = compact_section(section)
        figure("  all together", f"{share(compacted.saved, size)} ({size:,} -> {compacted.size:,})")
        bench_compact.check(section, path, 200_000)


def section_cross(work: Path) -> None:
    """The cross-architecture examples: an AArch64 core from qemu-user, and an s390x program
    under qemu's gdbstub."""
    need("aarch64-linux-gnu-gcc", "s390x-linux-gnu-gcc", "qemu-aarch64", "qemu-s390x")
    folder = work / "cross"
    folder.mkdir()
    source = str(TESTS / "data" / "stack" / "cross_prog.c")
    transcript(["aarch64-linux-gnu-gcc", "-O2", "-fomit-frame-pointer", "-no-pie", "-o", "prog",
                source], folder)  # fmt: skip
    subprocess.run(
        "ulimit -c unlimited; qemu-aarch64 -L /usr/aarch64-linux-gnu ./prog", shell=True,
        cwd=folder, capture_output=True, check=False,
    )  # fmt: skip
    cores = sorted(folder.glob("qemu_prog_*.core"))
    if not cores:
        raise Missing("a qemu-aarch64 core (is the core size limited?)")
    transcript(pysframe("stack", "--core", cores[0].name, "--exe", "prog", "--sysroot",
                        "/usr/aarch64-linux-gnu"), folder)  # fmt: skip
    transcript(["s390x-linux-gnu-gcc", "-O2", "-fomit-frame-pointer", "-no-pie", "-o",
                "prog-s390x", source], folder)  # fmt: skip
    stub = subprocess.Popen(
        ["qemu-s390x", "-L", "/usr/s390x-linux-gnu", "-g", "1234", "./prog-s390x"], cwd=folder,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(0.5)
        transcript(pysframe("stack", "--remote", "localhost:1234", "--exe", "prog-s390x",
                            "--sysroot", "/usr/s390x-linux-gnu", "--continue"), folder)  # fmt: skip
    finally:
        stub.kill()
        stub.wait()


def section_perf(work: Path, picture: Path | None) -> None:
    """The perf walkthrough: the C program and its library built without frame pointers,
    recorded with DWARF call graphs, then pysframe perf script against perf script, the top
    table, folded stacks, filters, stats, several recordings; the C++ program's flame graph
    and, with --picture, its picture."""
    need("perf", "gcc", "g++")
    folder = work / "perf"
    folder.mkdir()
    data = TESTS / "data" / "perf"
    flags = ["-O2", "-fomit-frame-pointer"]
    transcript(["gcc", *flags, "-fPIC", "-shared", "-o", "libprofiled.so",
                str(data / "profiledlib.c")], folder)  # fmt: skip
    transcript(["gcc", *flags, "-pthread", "-o", "profiled", str(data / "profiled.c"), "-L.",
                "-lprofiled", "-Wl,-rpath,$ORIGIN"], folder)  # fmt: skip
    record = ["perf", "record", "-e", "cpu-clock", "--call-graph", "dwarf"]
    transcript([*record, "-o", "perf.data", "./profiled", "2"], folder)
    ours, theirs = (
        subprocess.run(command, cwd=folder, env=environment(), capture_output=True, text=True,
                       errors="replace", check=False).stdout
        for command in (pysframe("perf", "script", "--no-inline"),
                        ["perf", "script", "--no-inline"])
    )  # fmt: skip
    ours_lines, theirs_lines = ours.splitlines(), theirs.splitlines()
    differing = sum(a != b for a, b in zip(ours_lines, theirs_lines, strict=False))
    differing += abs(len(ours_lines) - len(theirs_lines))
    figure("perf script lines", f"{len(theirs_lines):,}; pysframe perf script: "
           f"{len(ours_lines):,}, {differing} lines different")  # fmt: skip
    figure("perf script text byte-identical", ours == theirs)
    table = ("perf", "report", "--no-children", "-g", "none")
    transcript(pysframe(*table), folder, keep=lambda lines: lines[:18])
    top = subprocess.run(
        ["perf", "report", "--stdio", "--no-children", "--sort", "comm,dso,sym", "-g", "none"],
        cwd=folder, capture_output=True, text=True, errors="replace", check=False,
    ).stdout  # fmt: skip
    mine = run(pysframe(*table), folder).stdout

    def rows(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]

    figure("top table rows equal to perf report's", f"{rows(mine) == rows(top)} "
           f"({len(rows(mine))} rows against {len(rows(top))})")  # fmt: skip
    transcript(pysframe("perf", "report", "-g", "none"), folder, keep=lambda lines: lines[:14])
    transcript(pysframe("perf", "report"), folder, keep=lambda lines: lines[6:30])
    folded = run(pysframe("perf", "report", "--format", "folded"), folder).stdout.splitlines()
    print("$ pysframe perf report --format folded | sort -k2 -nr | head -3")
    for line in sorted(folded, key=lambda line: -int(line.rsplit(" ", 1)[1]))[:3]:
        print(line)
    transcript(pysframe("perf", "stats"), folder)
    transcript(pysframe(*table, "--dso", "libprofiled.so"), folder,
               keep=lambda lines: lines[:14])  # fmt: skip
    first = float(re.search(r" (\d+\.\d+): ", ours).group(1))  # type: ignore[union-attr]
    window = f"{first + 1:.1f},{first + 1.5:.1f}"
    transcript(pysframe("perf", "report", "--time", window), folder, keep=lambda lines: lines[:6])
    transcript([*record, "-o", "second.data", "./profiled", "1"], folder)
    transcript(pysframe("perf", "report", "-j", "2", "perf.data", "second.data"), folder,
               keep=lambda lines: lines[:6])  # fmt: skip
    for fmt, out in (("speedscope", "profile.speedscope.json"), ("pprof", "profile.pb.gz"),
                     ("flamegraph", "graph.html"), ("json", "profile.json")):  # fmt: skip
        transcript(pysframe("perf", "report", "--format", fmt, "-o", out), folder)
        figure(f"  {out}", f"{(folder / out).stat().st_size:,} bytes")
    # The C++ program's flame graph, and its picture.
    transcript(["g++", *flags, "-pthread", "-o", "profiledcxx", str(data / "profiledcxx.cc")],
               folder)  # fmt: skip
    transcript([*record, "-o", "cxx.data", "./profiledcxx", "3"], folder)
    transcript(pysframe("perf", "report", "--format", "flamegraph", "-o", "graph.html",
                        "cxx.data"), folder)  # fmt: skip
    if picture is not None:
        check = TESTS / "node" / "flamegraph_check.mjs"
        if not (TESTS / "node" / "node_modules").is_dir():
            raise Missing("tests/node/node_modules (npm ci --prefix tests/node)")
        done = transcript(["node", str(check), "graph.html", "introsort", "graph.png"], folder,
                          keep=lambda lines: [])  # fmt: skip
        if done.returncode:
            raise Missing(f"a flame graph picture: {done.stdout[:300]}")
        picture.write_bytes(crop_blank_bottom((folder / "graph.png").read_bytes()))
        figure(f"picture {picture}", f"{picture.stat().st_size:,} bytes")


def crop_blank_bottom(png: bytes, margin: int = 12) -> bytes:
    """``png`` (8-bit RGB or RGBA, not interlaced) without the white rows at its bottom, less
    ``margin``.  Rows are dropped whole from the end, so the ones kept decode as they did
    (a row's filter refers to the row above only)."""
    chunks: list[tuple[bytes, bytes]] = []
    at = 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        chunks.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + length]))
        at += 12 + length
    header = chunks[0][1]
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in (2, 6) or interlace:
        return png
    channels = 3 if colour == 2 else 4
    stride = 1 + width * channels
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    pixels = unfiltered(raw, width * channels, channels, height)
    white = bytes([255]) * (width * channels)
    last = height
    while last > 1 and pixels[last - 1] == white:
        last -= 1
    keep = min(height, last + margin)
    data = zlib.compress(raw[: keep * stride], 9)
    new_header = struct.pack(">II", width, keep) + header[8:]

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body)
        )

    return png[:8] + chunk(b"IHDR", new_header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


def unfiltered(raw: bytes, row_bytes: int, step: int, height: int) -> list[bytes]:
    """The rows of a PNG image's pixels (PNG spec 9.2: filters None, Sub, Up, Average, Paeth)."""
    rows: list[bytes] = []
    previous = bytearray(row_bytes)
    for number in range(height):
        start = number * (row_bytes + 1)
        kind, row = raw[start], bytearray(raw[start + 1 : start + 1 + row_bytes])
        for i in range(row_bytes):
            left = row[i - step] if i >= step else 0
            up = previous[i]
            corner = previous[i - step] if i >= step else 0
            if kind == 1:
                row[i] = (row[i] + left) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + up) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                guess = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[i] = (row[i] + guess) & 0xFF
        rows.append(bytes(row))
        previous = row
    return rows


def section_agreement(work: Path) -> None:
    """How pysframe's frames and names compare with perf's on the three workloads of
    benchmarks/bench_perf.py (its recordings, cached; its agreement measure)."""
    need("perf", "gcc", "g++")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_perf

    perf = shutil.which("perf")
    assert perf is not None
    for workload in ("c", "c++", "python"):
        path = bench_perf.record(perf, workload, 30_000)
        if path is None:
            raise Missing("perf record")
        compared, frames, names = bench_perf.agreement(perf, path)
        figure(f"{workload}: samples compared", f"{compared:,}")
        figure(f"{workload}: samples whose user frames are perf's", f"{100 * frames:.2f}%")
        figure(f"{workload}: frames perf names that pysframe names alike", f"{100 * names:.2f}%")


def section_inject(work: Path) -> None:
    """'Over the machine's ELF files in /usr/bin and /usr/lib/x86_64-linux-gnu, injection
    refused none, every injected file passed pysframe check before and after strip, and
    eu-elflint found nothing new' (slow: every file is generated for, injected, checked,
    stripped, checked again, and given to eu-elflint before and after; the unknown SFrame
    types aside, as tests/elf/test_inject_strip.py reads eu-elflint)."""
    need("strip", "eu-elflint")
    sys.path[:0] = [str(TESTS / "support"), str(TESTS)]
    # eu-elflint's lines about a file, without those about the SFrame types elfutils 0.188
    # does not know (the injection test's reading).
    from pysframe.elf.inject import inject_file
    from pysframe.elf.reader import ElfReader
    from pysframe.errors import SFrameError
    from pysframe.format.findings import Severity
    from pysframe.generate import generate_from_elf
    from pysframe.tools.files import find_elf_files
    from pysframe.tools.validate import validate_elf
    from test_inject_strip import _elflint as elflint

    def errors(path: Path) -> int:
        with ElfReader.open(str(path)) as image:
            found = validate_elf(image)
        return sum(1 for finding in found if finding.severity is Severity.ERROR)

    files = [*find_elf_files("/usr/bin", recursive=False),
             *find_elf_files(LIBRARIES, recursive=False)]  # fmt: skip
    refused: list[str] = []
    failing: list[str] = []
    lint_new: list[str] = []
    no_cfi = 0
    out, stripped = work / "injected", work / "stripped"
    for path in files:
        with ElfReader.open(path) as image:
            if image.is_relocatable or image.section(".eh_frame") is None:
                no_cfi += 1
                continue
        try:
            inject_file(path, str(out), generate_from_elf(path))
        except SFrameError as error:
            refused.append(f"{path}: {error}")
            continue
        subprocess.run(["strip", "-o", str(stripped), str(out)], capture_output=True, check=True)
        if errors(out) or errors(stripped):
            failing.append(path)
        if set(elflint(out)) - set(elflint(Path(path))):
            lint_new.append(path)
    figure("ELF files in /usr/bin and " + LIBRARIES, f"{len(files):,}")
    figure("objects, or files without .eh_frame (not injected)", no_cfi)
    figure("injected", len(files) - no_cfi - len(refused))
    figure("injection refused", len(refused))
    figure("injected files with a pysframe check error before or after strip", len(failing))
    figure("files where eu-elflint finds something new once injected", len(lint_new))
    for line in [*refused, *failing, *lint_new][:20]:
        print(f"    {line}")


SECTIONS: dict[str, Callable[[Path], None]] = {
    "corpus": section_corpus,
    "damaged": section_damaged,
    "demangle": section_demangle,
    "trust": section_trust,
    "stats": section_stats,
    "verify": section_verify,
    "libbfd": section_libbfd,
    "compact": section_compact,
    "compact-check": section_compact_check,
    "cross": section_cross,
    "agreement": section_agreement,
}
#: Sections run only when named (--only): they take long.
SLOW = {"inject": section_inject}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated sections (--list shows them)")
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    parser.add_argument("--work", type=Path, default=Path("/tmp/pysframe-readme"),
                        help="scratch folder, made afresh (default /tmp/pysframe-readme)")
    parser.add_argument("--picture", type=Path, help="perf: write the flame graph's picture here")
    args = parser.parse_args()
    every = [*SECTIONS, "perf", *SLOW]
    if args.list:
        for name in every:
            print(name + (" (slow: only with --only)" if name in SLOW else ""))
        return 0
    chosen = args.only.split(",") if args.only else [*SECTIONS, "perf"]
    unknown = [name for name in chosen if name not in every]
    if unknown:
        parser.error(f"unknown sections: {', '.join(unknown)}")
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    missing = 0
    for name in chosen:
        heading(name)
        began = time.perf_counter()
        try:
            if name == "perf":
                section_perf(args.work, args.picture)
            else:
                {**SECTIONS, **SLOW}[name](args.work)
        except Missing as what:
            print(f"(skipped: {what} is missing)")
            missing += 1
        print(f"({name}: {time.perf_counter() - began:.0f} s)", flush=True)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
