"""``pysframe stats``: what SFrame costs next to .eh_frame, per ELF file and in total."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from .progress import Progress
from .usage import UsageError, positive_int

if TYPE_CHECKING:
    pass

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
        type=positive_int,
        default=None,
        metavar="N",
        help="processes (default: the CPU count for several files)",
    )
    p.add_argument(
        "--dask",
        metavar="SCHEDULER_ADDRESS",
        help="run on the Dask cluster of this scheduler (needs pysframe[dask])",
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


def run(args: argparse.Namespace) -> int:
    from ..tools.stats import collect, find_elf_files, plot_stats, total
    from ..tools.stats_text import CSV_FIELDS, stats_csv_rows, stats_json, stats_table
    paths = list(args.files)
    for directory in args.dir:
        paths += find_elf_files(directory, args.recursive)
    if not paths:
        raise UsageError("stats: no ELF files given (name FILEs or --dir DIR)")
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
        on_done=(lambda done, stats: progress.update(done, stats.path)) if progress else None,
        dask=args.dask,
    )
    if progress:
        progress.finish()
    summary = total(results)
    if args.json:
        json.dump(stats_json(results, summary), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(stats_csv_rows(results))
    else:
        sys.stdout.write(stats_table(results, summary))
    if args.plot:
        plot_stats(results, summary, args.plot)
    failed = [r for r in results if r.error is not None]
    for r in failed:
        named = r.error if str(r.error).startswith(f"{r.path}:") else f"{r.path}: {r.error}"
        print(f"pysframe: {named}", file=sys.stderr)
    return 1 if failed else 0


def _check_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        # Before any file is read; the option cannot work here, whatever the files hold.
        raise UsageError("stats: --plot needs matplotlib: pip install 'pysframe[plot]'") from None
