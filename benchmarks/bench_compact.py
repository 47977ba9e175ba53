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

4. With ``--check``, for each of those inputs that is a file: objdump's ``--sframe`` text
   (``$OBJDUMP``, binutils 2.47) of the compacted file against the original's, libsframe's
   (``$LIBSFRAME``) ``sframe_find_fre`` answers at ``--pcs`` random PCs (default 200,000) in
   both, pysframe's rules at every PC of every function, and the kernel's loader rules
   (``pysframe check --kernel``) on the compacted file.

Where a compacted section's bytes go (header, FDE index, V3 attribute records, FRE start
addresses, FRE info bytes, data words) is printed beside the sizes: all but the records and
the rows of blocks that no other function shares are fixed by the functions and their rows.

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
import numpy as np

from pysframe import SFrameSection, Version
from pysframe.elf.inject import inject_file
from pysframe.elf.reader import ElfReader
from pysframe.elf.sframe import find_sframe
from pysframe.errors import SFrameError
from pysframe.format.compact import NO_TRICKS, CompactOptions, compact_section
from pysframe.format.findings import Severity
from pysframe.format.layout import fde_fre_type, fre_word_count, fre_word_size_code
from pysframe.format.walk import scan_rows
from pysframe.generate import generate_from_elf
from pysframe.tools.compact import compact_file
from pysframe.tools.files import find_elf_files
from pysframe.tools.validate import validate_elf

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
    p.add_argument(
        "--check",
        action="store_true",
        help="compare objdump's text, libsframe's lookups and every PC's rules before and after",
    )
    p.add_argument("--pcs", type=int, default=200_000, help="random PCs for libsframe (--check)")
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
        with ElfReader.open(str(library)) as image:
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
        if args.check and path is not None:
            check(section, path, args.pcs)
    return 0


# -- sizes -----------------------------------------------------------------------------------------


def file_sizes(path: str) -> tuple[Sizes, SFrameSection] | None:
    """One file's sizes and its V3 section (own or generated); None without one."""
    with ElfReader.open(path) as image:
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


def breakdown(section: SFrameSection) -> dict[str, int]:
    """Where the bytes of ``section`` go.  Each block is counted once: the longest of the
    blocks that start at one offset (the others share it)."""
    header, table = section.header, section.table
    scan = scan_rows(section)
    # Per offset, the function with the most FREs there.
    order = np.lexsort((-table.num_rows, table.fre_offset))
    firsts = np.flatnonzero(np.diff(table.fre_offset[order], prepend=-1) != 0)
    kept = order[firsts]
    counts = table.num_rows[kept]
    rows = np.repeat(scan.row_base[kept] - np.cumsum(counts) + counts, counts) + np.arange(
        int(counts.sum())
    )
    form_words = np.array(
        [fre_word_count(f.info) << fre_word_size_code(f.info) for f in scan.forms] or [0],
        dtype=np.int64,
    )
    starts = int((counts << fde_fre_type(table.info[kept])).sum())
    words = int(form_words[scan.form[rows]].sum())
    fre_rows = starts + len(rows) + words
    return {
        "header": header.size + header.fde_offset,
        "FDE index": header.fre_offset - header.fde_offset,
        "attribute records (V3)": header.fre_len - fre_rows,
        "FRE start addresses": starts,
        "FRE info bytes": len(rows),
        "data words": words,
        "after the FREs": len(section.data) - header.fre_end,
    }


def directory_sizes(files: Iterable[str]) -> None:
    total = Sizes()
    alone = dict.fromkeys(TRICKS, 0)
    where: dict[str, int] = {}
    for path in files:
        try:
            found = file_sizes(path)
            if found is None:
                continue
            sizes, section = found
            compacted = compact_section(section)
            sizes.compacted = compacted.size
            for part, size in breakdown(
                SFrameSection.from_bytes(compacted.data, section.section_address)
            ).items():
                where[part] = where.get(part, 0) + size
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
    print("  where the compacted bytes go:")
    for part, size in where.items():
        print(
            f"    {part:<26} {size:>11,} bytes ({100 * size / max(total.compacted, 1):.1f}%, "
            f"{size / total.unwind:.3f}x .eh_frame + hdr)"
        )


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
        carrier = carrier_file(path, Path(scratch))
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


def carrier_file(path: Path, scratch: Path) -> Path:
    """A copy of ``path`` with an SFrame section: its own, or one generated and injected."""
    carrier = scratch / "input"
    with ElfReader.open(str(path)) as image:
        has_own = find_sframe(image) is not None
    if has_own:
        shutil.copyfile(path, carrier)
    else:
        inject_file(str(path), str(carrier), generate_from_elf(str(path)))
    return carrier


# -- equality checks -------------------------------------------------------------------------------


def check(section: SFrameSection, path: Path, pcs: int) -> None:
    """The compacted file against the original: objdump's text, libsframe's lookups at ``pcs``
    random PCs, pysframe's rules at every PC of every function, the kernel's rules."""
    with tempfile.TemporaryDirectory(prefix="pysframe-bench-") as scratch:
        carrier = carrier_file(path, Path(scratch))
        out = Path(scratch) / "compacted"
        report = compact_file(str(carrier), str(out))
        print(f"  check: {path.name} compacted in its file, {report.old_size:,} -> "
              f"{report.new_size:,} bytes")  # fmt: skip
        with ElfReader.open(str(carrier)) as image:
            found = find_sframe(image)
            assert found is not None
            before = found.decode()
        with ElfReader.open(str(out)) as image:
            found = find_sframe(image)
            assert found is not None
            after = found.decode()
            kernel = [f for f in validate_elf(image, kernel=True) if f.severity is Severity.ERROR]
        print(f"    kernel loader rules (check --kernel) on the compacted file: "
              f"{len(kernel)} errors")  # fmt: skip
        every_pc_rules(before, after)
        objdump_text(carrier, out)
        libsframe_lookups(before, after, pcs)


def every_pc_rules(before: SFrameSection, after: SFrameSection, chunk: int = 1 << 22) -> None:
    """Every PC of every function, looked up in both (batch lookups, ``chunk`` PCs at a time)."""
    table = before.table
    starts, sizes = table.start.tolist(), table.size.tolist()
    compared = differing = 0
    first = 0
    while first < len(starts):
        last, total = first, 0
        while last < len(starts) and (total == 0 or total + sizes[last] <= chunk):
            total += sizes[last]
            last += 1
        size = np.asarray(sizes[first:last], dtype=np.int64)
        within = np.arange(int(size.sum()), dtype=np.int64) - np.repeat(
            np.cumsum(size) - size, size
        )
        pcs = np.repeat(np.asarray(starts[first:last], dtype=np.int64), size) + within
        old, new = before.find_rows(pcs), after.find_rows(pcs)
        differing += sum(int(np.count_nonzero(getattr(old, f) != getattr(new, f)))
                         for f in old.__dataclass_fields__)  # fmt: skip
        compared += len(pcs)
        first = last
    print(f"    pysframe rules at every PC of every function: {compared:,} PCs, "
          f"{differing} differences")  # fmt: skip


def objdump_text(original: Path, compacted: Path) -> None:
    objdump = common.objdump_path()
    if objdump is None:
        print("    objdump: n/a")
        return
    texts = []
    for path in (original, compacted):
        done = subprocess.run([objdump, "--sframe", str(path)], capture_output=True, check=False)
        texts.append(done.stdout.replace(str(path).encode(), b"FILE"))
    same = "byte-identical" if texts[0] == texts[1] else "DIFFERENT"
    print(f"    {objdump} --sframe: {len(texts[0]):,} bytes, "
          f"{texts[0].count(b'func idx ['):,} functions, {same}")  # fmt: skip


def libsframe_lookups(before: SFrameSection, after: SFrameSection, count: int) -> None:
    lib = common.load_libsframe()
    if lib is None:
        print("    libsframe: n/a")
        return
    table = before.table
    low = int(table.start.min()) - 16
    high = int((table.start + table.size).max()) + 16
    rng = np.random.default_rng(14)
    pcs = rng.integers(low, high, size=count).tolist()
    types = []
    for pc in pcs:
        function = before.find_function(pc)
        types.append(0 if function is None else int(function.fde_type))
    old = lib.find_rows(bytes(before.data), [pc - before.section_address for pc in pcs], types)
    new = lib.find_rows(bytes(after.data), [pc - after.section_address for pc in pcs], types)
    found = sum(1 for answer in old if answer != (-1,))
    differing = sum(1 for a, b in zip(old, new, strict=True) if a != b)
    print(f"    libsframe {lib.path} sframe_find_fre: {count:,} random PCs ({found:,} in a "
          f"function), {differing} different answers")  # fmt: skip


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
