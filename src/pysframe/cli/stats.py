"""``pysframe stats``: what SFrame costs next to .eh_frame, per ELF file and in total."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from .options import (
    add_batch_options,
    add_generate_option,
    batch_jobs,
    batch_paths,
    batch_progress,
    progress_callback,
)
from .report import line
from .usage import UsageError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "stats",
        help="sizes of .sframe (V2, V3) against .eh_frame, counts and distributions",
        description="For each ELF file: sizes of .eh_frame, .eh_frame_hdr and .sframe in V2 "
        "and V3 (converted, or with --generate generated from .eh_frame when the file has no "
        ".sframe), their ratios, function and row counts, FRE start-address types, data-word "
        "sizes, skipped functions and coverage; then a total line.",
    )
    add_batch_options(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON output")
    out.add_argument("--csv", action="store_true", help="CSV output")
    add_generate_option(p)
    p.add_argument("--plot", metavar="PNG", help="draw sizes and distributions (matplotlib)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.stats import (
        CSV_FIELDS,
        collect,
        plot_stats,
        stats_csv_rows,
        stats_json,
        stats_table,
        total,
    )

    paths = batch_paths(args, "stats")
    if args.plot:
        from ..output import refuse_inputs

        refuse_inputs(args.plot, paths)  # before the work, not only when writing
        _check_matplotlib()
    progress = batch_progress(args, len(paths))
    results = collect(
        paths,
        jobs=batch_jobs(args),
        generate=args.generate,
        on_done=progress_callback(progress),
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
        line(str(r.error))
    return 1 if failed else 0


def _check_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        # Before any file is read; the option cannot work here, whatever the files hold.
        raise UsageError("stats: --plot needs matplotlib: pip install 'pysframe[plot]'") from None
