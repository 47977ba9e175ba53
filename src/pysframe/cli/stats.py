"""``pysframe stats``: what SFrame costs next to .eh_frame, per ELF file and in total."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from ..errors import ElfError, SFrameError
from ..tools.stats import (
    FRE_TYPE_NAMES,
    WORD_SIZE_NAMES,
    FileStats,
    collect,
    find_elf_files,
    plot_stats,
    total,
)

#: Files above which a run counts as long enough for a progress bar.
_PROGRESS_MIN_FILES = 2


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "stats",
        help="sizes of .sframe (V2, V3) against .eh_frame, counts and distributions",
        description="For each ELF file: sizes of .eh_frame, .eh_frame_hdr and .sframe in V2 "
        "and V3 (converted, or generated from .eh_frame when the file has no .sframe), their "
        "ratios, function and row counts, FRE start-address types, data-word sizes, skipped "
        "functions and coverage; then a total line.",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="ELF files")
    p.add_argument("--dir", action="append", default=[], metavar="DIR", help="ELF files in DIR")
    p.add_argument("--recursive", "-r", action="store_true", help="descend into DIR")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON output")
    out.add_argument("--csv", action="store_true", help="CSV output")
    p.add_argument(
        "--jobs",
        "-j",
        type=_positive,
        default=None,
        metavar="N",
        help="processes (default: the CPU count for several files)",
    )
    p.add_argument(
        "--no-generate",
        action="store_true",
        help="do not generate SFrame for files without .sframe",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    p.add_argument("--plot", metavar="PNG", help="draw sizes and distributions (matplotlib)")
    p.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def run(args: argparse.Namespace) -> int:
    paths = list(args.files)
    for directory in args.dir:
        paths += find_elf_files(directory, args.recursive)
    if not paths:
        raise ElfError("no ELF files given (name FILEs or --dir DIR)")
    if args.plot:
        _check_matplotlib()
    jobs = args.jobs or (os.cpu_count() or 1)
    show_progress = args.progress
    if show_progress is None:
        show_progress = sys.stderr.isatty() and len(paths) >= _PROGRESS_MIN_FILES
    progress = Progress(len(paths), sys.stderr) if show_progress else None
    results = collect(
        paths,
        jobs=jobs,
        generate=not args.no_generate,
        on_done=progress.update if progress else None,
    )
    if progress:
        progress.finish()
    summary = total(results)
    if args.json:
        _write_json(results, summary, sys.stdout)
    elif args.csv:
        _write_csv(results, summary, sys.stdout)
    else:
        _write_text(results, summary, sys.stdout)
    if args.plot:
        plot_stats(results, summary, args.plot)
    failed = [r for r in results if r.error is not None]
    for r in failed:
        print(f"pysframe: {r.error}", file=sys.stderr)
    return 1 if failed else 0


def _check_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SFrameError("--plot needs matplotlib: pip install 'pysframe[plot]'") from None


class Progress:
    """A one-line progress bar, redrawn at most ten times a second."""

    def __init__(self, count: int, stream: TextIO, width: int = 30) -> None:
        self.count, self.stream, self.width = count, stream, width
        self.began = time.monotonic()
        self.drawn = 0.0

    def update(self, done: int, stats: FileStats) -> None:
        now = time.monotonic()
        if done < self.count and now - self.drawn < 0.1:
            return
        self.drawn = now
        filled = self.width * done // max(self.count, 1)
        bar = "#" * filled + "." * (self.width - filled)
        name = os.path.basename(stats.path)[:30]
        elapsed = now - self.began
        self.stream.write(f"\r[{bar}] {done}/{self.count} {elapsed:6.1f}s {name:<30}")
        self.stream.flush()

    def finish(self) -> None:
        self.stream.write("\r" + " " * (self.width + 60) + "\r")
        self.stream.flush()


# -- output ----------------------------------------------------------------------------------
def _write_json(results: Sequence[FileStats], summary: FileStats, out: TextIO) -> None:
    document = {"files": [r.as_dict() for r in results], "total": summary.as_dict()}
    json.dump(document, out, indent=2)
    out.write("\n")


CSV_FIELDS = (
    "path",
    "machine",
    "source",
    "eh_frame",
    "eh_frame_hdr",
    "sframe",
    "sframe_version",
    "sframe_v2",
    "sframe_v3",
    "ratio_v2",
    "ratio_v3",
    "ratio_v3_unwind",
    "functions",
    "rows",
    *(f"fre_{name}" for name in FRE_TYPE_NAMES),
    *(f"words_{name}" for name in WORD_SIZE_NAMES),
    "skipped",
    "functions_total",
    "text_bytes",
    "covered_bytes",
    "coverage",
    "error",
)


def _csv_row(stats: FileStats) -> dict[str, Any]:
    flat = stats.as_dict()
    for name in FRE_TYPE_NAMES:
        flat[f"fre_{name}"] = flat["fre_types"][name]
    for name in WORD_SIZE_NAMES:
        flat[f"words_{name}"] = flat["word_sizes"][name]
    return {key: "" if flat[key] is None else flat[key] for key in CSV_FIELDS}


def _write_csv(results: Sequence[FileStats], summary: FileStats, out: TextIO) -> None:
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for stats in [*results, summary]:
        writer.writerow(_csv_row(stats))


def _size(value: int | None) -> str:
    return "-" if value is None else str(value)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _write_text(results: Sequence[FileStats], summary: FileStats, out: TextIO) -> None:
    columns = (
        ("eh_frame", 10),
        ("eh_hdr", 8),
        ("sframe", 10),
        ("V2", 10),
        ("V3", 10),
        ("V2/eh", 6),
        ("V3/eh", 6),
        ("funcs", 8),
        ("rows", 9),
        ("skipped", 7),
        ("cover", 6),
    )
    name_width = min(max([len(r.path) for r in results] + [5]), 48)
    out.write(f"{'FILE':<{name_width}}" + "".join(f" {t:>{w}}" for t, w in columns) + "\n")
    for stats in [*results, summary]:
        name = stats.path
        if len(name) > name_width:
            name = "..." + name[len(name) - name_width + 3 :]
        if stats.error is not None:
            out.write(f"{name:<{name_width}} error: {stats.error}\n")
            continue
        sframe = "-" if not stats.sframe else f"{stats.sframe}"
        if stats.sframe_version:
            sframe = f"{sframe}/v{stats.sframe_version}"
        cells = (
            str(stats.eh_frame),
            str(stats.eh_frame_hdr),
            sframe,
            _size(stats.sframe_v2),
            _size(stats.sframe_v3),
            _ratio(stats.ratio(2)),
            _ratio(stats.ratio(3)),
            str(stats.functions),
            str(stats.rows),
            _size(stats.skipped),
            "-" if stats.coverage is None else f"{100 * stats.coverage:.0f}%",
        )
        out.write(
            f"{name:<{name_width}}"
            + "".join(f" {c:>{w}}" for c, (_, w) in zip(cells, columns, strict=True))
            + "\n"
        )
        for note in stats.notes:
            out.write(f"{'':<{name_width}}   note: {note}\n")
    functions, rows = summary.functions, summary.rows
    types = ", ".join(
        f"{n} {c} ({_percent(c, functions)})"
        for n, c in zip(FRE_TYPE_NAMES, summary.fre_types, strict=True)
    )
    words = ", ".join(
        f"{n if n == 'none' else n + '-byte'} {c} ({_percent(c, rows)})"
        for n, c in zip(WORD_SIZE_NAMES, summary.word_sizes, strict=True)
    )
    out.write(f"FRE start-address types (functions): {types}\n")
    out.write(f"data-word sizes (rows): {words}\n")
