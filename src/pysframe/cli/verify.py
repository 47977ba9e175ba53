"""``pysframe verify``: check each file's SFrame section against its CFI at every PC.

Exit status: 0 every file consistent, 1 a disagreement (or a file the kernel rejects with
``--kernel``, or one that cannot be read), 2 usage error.
"""

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
    from ..tools.verify import FileReport


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "verify",
        help="check SFrame sections against their CFI at every PC",
        description="For each ELF file: compare the CFA, FP and RA rules of its SFrame section "
        "with those its .eh_frame (or .debug_frame) gives, at every PC; report where they "
        "disagree, the functions without SFrame (and why) or without CFI, and how much was "
        "compared.",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="ELF files")
    p.add_argument("--dir", action="append", default=[], metavar="DIR", help="ELF files in DIR")
    p.add_argument("--recursive", "-r", action="store_true", help="descend into DIR")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON output")
    out.add_argument("--csv", action="store_true", help="CSV output, one row per file")
    p.add_argument(
        "--kernel", action="store_true", help="also require what the Linux kernel requires"
    )
    p.add_argument(
        "--generate",
        action="store_true",
        help="verify SFrame generated in memory for files without a section",
    )
    p.add_argument("--section", default=None, help="SFrame section name (default .sframe)")
    p.add_argument(
        "--jobs", "-j", type=positive_int, default=None, metavar="N",
        help="processes (default: the CPU count for several files)",
    )  # fmt: skip
    p.add_argument(
        "--dask",
        metavar="SCHEDULER_ADDRESS",
        help="run on the Dask cluster of this scheduler (needs pysframe[dask])",
    )
    p.add_argument("--details", action="store_true", help="with --dir, every file's report as well")
    p.add_argument(
        "--limit", type=positive_int, default=20, metavar="N", help="items of each list shown"
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.verify import NO_SFRAME, Options, collect, summarize
    from ..tools.verify_text import CSV_FIELDS, csv_rows, json_document, report_text, summary_table
    paths = list(args.files)
    if args.dir:
        from ..tools.stats import find_elf_files

        for directory in args.dir:
            paths += find_elf_files(directory, args.recursive)
    if not paths:
        raise UsageError("verify: no ELF files given (name FILEs or --dir DIR)")
    options = Options(generate=args.generate, kernel=args.kernel, section=args.section)
    show_progress = args.progress
    if show_progress is None:
        show_progress = sys.stderr.isatty() and len(paths) > 1
    progress = Progress(len(paths), sys.stderr) if show_progress else None

    def done(count: int, report: FileReport) -> None:
        if progress is not None:
            progress.update(count, report.path)

    jobs = args.jobs or (os.cpu_count() or 1)
    reports = collect(paths, options, jobs=jobs, dask=args.dask, on_done=done)
    if progress is not None:
        progress.finish()
    groups, total = summarize(reports, args.dir)
    # Named files must have SFrame; files found in a directory may not.
    named = set(args.files)
    failed = [r for r in reports if r.failed or (r.status == NO_SFRAME and r.path in named)]
    status = 1 if failed else 0
    if args.json:
        json.dump(json_document(reports, groups, total, status), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(csv_rows(reports))
    elif args.dir:
        sys.stdout.write(summary_table(groups, total))
        for report in reports:
            if args.details or report.failed:
                sys.stdout.write("\n" + report_text(report, args.limit))
    else:
        for report in reports:
            if report.error is None:
                sys.stdout.write(report_text(report, args.limit))
    for report in failed:
        if report.error is not None:
            print(f"pysframe: {_located(report)}", file=sys.stderr)
    return status


def _located(report: FileReport) -> str:
    from ..tools.verify import NO_SFRAME
    message = report.error or ""
    if report.status == NO_SFRAME and report.abi:  # with no ABI, generating cannot help
        message += " (--generate verifies SFrame generated from its CFI)"
    return message if message.startswith(report.path) else f"{report.path}: {message}"
