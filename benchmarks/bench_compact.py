"""Compaction: how much smaller SFrame gets against .eh_frame + .eh_frame_hdr, and how fast.

    python benchmarks/bench_compact.py [--quick] [--dir DIR] [--runs N] [--libraries N]
        [--with-sframe FILE]... [--binutils-src DIR]

1. Sizes over DIR (default /usr/lib/x86_64-linux-gnu; its ELF files with an .eh_frame, not
   descending, as ``pysframe stats --dir`` lists them): each file's SFrame V3 generated from
   .eh_frame (cached, see common.py) or its own V3 section, then compacted; the sums against
   .eh_frame + .eh_frame_hdr (the section headers' sizes), and what each trick gains alone.
2. Single inputs, each with the gain of every trick alone and of all of them: the files given
   with ``--with-sframe`` (their own .sframe, e.g. written by GNU ld 2.47 from gas 2.47
   ``--gsframe`` objects), a libbfd built that way from the binutils sources in
   ``--binutils-src`` (configured for all targets, compiled with ``$GAS --gsframe`` and linked
   by the ld beside it; built once into the cache), and the sections generated from the
   ``--libraries`` biggest libraries on the machine (default 1: libLLVM-15 here).
3. The time to compact each of those inputs' sections (open, compact, check the rows) and to
   compact the file carrying it (``pysframe compact``: read, compact, rewrite in place, write),
   against ``objcopy`` copying the same file (``$OBJCOPY``, else the one beside ``$GAS``, else
   the system's): the reference for reading and writing a file of that size.

``--quick`` (the test suite) measures the corpus files and a synthetic section only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import common

from pysframe import SFrameSection, Version
from pysframe.elf.image import ElfImage
from pysframe.elf.inject import inject_file
from pysframe.elf.sframe import find_sframe
from pysframe.errors import SFrameError
from pysframe.format.compact import NO_TRICKS, CompactOptions, compact_section
from pysframe.generate import generate_from_elf
from pysframe.tools.compact import compact_file
from pysframe.tools.stats import find_elf_files

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "corpus"
#: Each trick alone, by its option name (shared prefixes go with shared blocks).
TRICKS = {
    "shared blocks": CompactOptions(True, False, False, False, False),
    "shared blocks + prefixes (V1/V2)": CompactOptions(True, True, False, False, False),
    "narrow start addresses": CompactOptions(False, False, True, False, False),
    "narrow data words": CompactOptions(False, False, False, True, False),
    "no trailing bytes": CompactOptions(False, False, False, False, True),
}


@dataclass
class Sizes:
    """Byte counts summed over inputs."""

    eh_frame: int = 0
    eh_frame_hdr: int = 0
    sframe: int = 0
    compacted: int = 0
    files: int = 0

    def add(self, other: Sizes) -> None:
        self.eh_frame += other.eh_frame
        self.eh_frame_hdr += other.eh_frame_hdr
        self.sframe += other.sframe
        self.compacted += other.compacted
        self.files += other.files

    @property
    def unwind(self) -> int:
        return self.eh_frame + self.eh_frame_hdr


def main() -> int:
    p = common.parser(__doc__ or "")
    p.add_argument("--dir", default="/usr/lib/x86_64-linux-gnu", help="directory of ELF files")
    p.add_argument("--binutils-src", help="binutils source tree to build a --gsframe libbfd from")
    p.add_argument(
        "--with-sframe",
        action="append",
        default=[],
        metavar="FILE",
        help="an ELF file whose own .sframe to measure (repeatable)",
    )
    args = p.parse_args()
    if args.libraries is None:
        args.libraries = 0 if args.quick else 1
    config = common.settings(args)
    if config.quick:
        files = sorted(str(f) for f in CORPUS.glob("x86_64/v3/*") if f.suffix != ".txt")
    else:
        files = find_elf_files(args.dir, recursive=False)
    common.heading(f"sizes over {'the x86-64 V3 corpus' if config.quick else args.dir}")
    directory_sizes(files)

    single: list[tuple[str, SFrameSection, Path | None]] = []
    libraries = [Path(p) for p in args.with_sframe]
    if args.binutils_src and not config.quick:
        built = build_gsframe_libbfd(Path(args.binutils_src))
        if built is not None:
            libraries.append(built)
    for library in libraries:
        with ElfImage.open(str(library)) as image:
            found = find_sframe(image)
            if found is None:
                print(f"({library} has no .sframe: skipped)", file=sys.stderr)
                continue
            single.append((f"{library.name} (its own .sframe)", found.decode(), library))
    if config.quick:
        synthetic = common.synthetic_section(config.functions, Version.V3)
        single.append((synthetic.label, synthetic.section(), None))
    else:
        for library in config.libraries:
            generated = common.generated_section(library, Version.V3)
            if generated is not None:
                single.append((f"{library.name} (generated V3)", generated.section(), library))
    for label, section, path in single:
        common.heading(f"{label}: {len(section):,} functions, {section.num_rows:,} rows")
        tricks(section)
        timing(section, path, config.runs)
    return 0


# -- sizes -----------------------------------------------------------------------------------------


def file_sizes(path: str) -> tuple[Sizes, SFrameSection] | None:
    """One file's sizes and its V3 section (own or generated); None without one."""
    with ElfImage.open(path) as image:
        eh = image.section(".eh_frame")
        hdr = image.section(".eh_frame_hdr")
        found = find_sframe(image)
        own = found.decode() if found is not None and found.version is Version.V3 else None
    if own is None:
        if eh is None:
            return None
        generated = common.generated_section(Path(path), Version.V3)
        if generated is None:
            return None
        own = generated.section()
    sizes = Sizes(eh.size if eh else 0, hdr.size if hdr else 0, len(own.data), 0, 1)
    return sizes, own


def directory_sizes(files: Iterable[str]) -> None:
    total = Sizes()
    alone = dict.fromkeys(TRICKS, 0)
    for path in files:
        try:
            found = file_sizes(path)
            if found is None:
                continue
            sizes, section = found
            sizes.compacted = compact_section(section).size
            gains = {
                name: len(section.data) - compact_section(section, options, verify=False).size
                for name, options in TRICKS.items()
            }
        except SFrameError as error:
            print(f"({path}: {error}; skipped)", file=sys.stderr)
            continue
        total.add(sizes)
        for name, gain in gains.items():
            alone[name] += gain
    if not total.files:
        print("  no file with SFrame or .eh_frame")
        return
    print(
        f"  {total.files} files: .eh_frame {total.eh_frame:,} + .eh_frame_hdr "
        f"{total.eh_frame_hdr:,} = {total.unwind:,} bytes"
    )
    print(f"  V3 {total.sframe:,} bytes: {total.sframe / total.unwind:.3f}x .eh_frame + hdr")
    print(
        f"  V3 compacted {total.compacted:,} bytes: {total.compacted / total.unwind:.3f}x "
        f".eh_frame + hdr, {100 * (1 - total.compacted / total.sframe):.1f}% smaller than V3"
    )
    for name, gain in alone.items():
        print(f"    {name:<26} alone: {gain:>11,} bytes ({100 * gain / total.sframe:.2f}%)")


def tricks(section: SFrameSection) -> None:
    size = len(section.data)
    base = compact_section(section, NO_TRICKS).size
    print(f"  section {size:,} bytes (laid out again without tricks: {base:,})")
    for name, options in TRICKS.items():
        gain = size - compact_section(section, options).size
        print(f"    {name:<26} alone: {gain:>11,} bytes ({100 * gain / size:.2f}%)")
    compacted = compact_section(section)
    print(
        f"  compacted: {compacted.size:,} bytes, {100 * compacted.saved / size:.1f}% smaller; "
        f"{compacted.functions:,} functions name {compacted.blocks:,} blocks"
    )


# -- timing ----------------------------------------------------------------------------------------


def objcopy_path() -> str | None:
    found = os.environ.get("OBJCOPY")
    gas = os.environ.get("GAS")
    if not found and gas and Path(gas).with_name("objcopy").exists():
        found = str(Path(gas).with_name("objcopy"))
    return found or shutil.which("objcopy")


def timing(section: SFrameSection, path: Path | None, runs: int) -> None:
    data = bytes(section.data)

    def open_and_compact() -> None:
        compact_section(SFrameSection.from_bytes(data, section.section_address))

    seconds = common.median_seconds(open_and_compact, runs)
    print(f"  compact the section (open, compact, check rows): {common.fmt_seconds(seconds)}")
    if path is None:
        return
    objcopy = objcopy_path()
    with tempfile.TemporaryDirectory(prefix="pysframe-bench-") as scratch:
        carrier = Path(scratch) / "input"
        with ElfImage.open(str(path)) as image:
            has_own = find_sframe(image) is not None
        if has_own:
            shutil.copyfile(path, carrier)
        else:  # a copy carrying the generated section
            inject_file(str(path), str(carrier), generate_from_elf(str(path)))
        out = str(Path(scratch) / "output")
        ours = common.median_seconds(partial(compact_file, str(carrier), out), runs)
        reference = None
        if objcopy:
            command = [objcopy, str(carrier), str(Path(scratch) / "copy")]
            if subprocess.run(command, capture_output=True, check=False).returncode == 0:
                reference = common.median_seconds(
                    partial(subprocess.run, command, capture_output=True, check=True), runs
                )
        size = carrier.stat().st_size
        common.print_ratio(
            f"  pysframe compact FILE ({size / 1e6:.0f} MB)", ours, reference, "objcopy"
        )


# -- a libbfd built by gas 2.47 --gsframe and ld 2.47 -----------------------------------------


def build_gsframe_libbfd(source: Path) -> Path | None:
    """libbfd configured for all targets, every object assembled by ``$GAS --gsframe`` and the
    library linked by the ld beside it (gcc -B); built once into the cache."""
    gas = os.environ.get("GAS")
    if not gas or not Path(gas).with_name("ld").exists():
        print("(set GAS to a binutils 2.47 as with ld beside it to build libbfd)", file=sys.stderr)
        return None
    key = hashlib.sha256(f"{source.resolve()}:{gas}".encode()).hexdigest()[:12]
    build = common.cache_dir() / f"libbfd-gsframe-{key}"
    built = sorted(build.glob("bfd/.libs/libbfd-*.so"))
    if built:
        return built[0]
    print(f"(building libbfd with {gas} --gsframe into {build}; cached)", file=sys.stderr)
    build.mkdir(parents=True, exist_ok=True)
    compiler = f"gcc -B{Path(gas).parent}/"
    configure = [
        str(source / "configure"), f"CC={compiler}", "CFLAGS=-g -O2 -Wa,--gsframe",
        "--enable-targets=all", "--enable-shared", "--disable-static", "--disable-gdb",
        "--disable-gdbserver", "--disable-sim", "--disable-gprof", "--disable-gprofng",
        "--disable-nls", "--disable-werror",
    ]  # fmt: skip
    for command in (configure, ["make", f"-j{os.cpu_count() or 1}", "all-bfd"]):
        done = subprocess.run(command, cwd=build, capture_output=True, text=True, check=False)
        if done.returncode:
            print(f"(building libbfd failed: {done.stderr[-500:]})", file=sys.stderr)
            return None
    built = sorted(build.glob("bfd/.libs/libbfd-*.so"))
    return built[0] if built else None


if __name__ == "__main__":
    sys.exit(main())
