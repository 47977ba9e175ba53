"""``pysframe verify``: check each file's SFrame section against its CFI at every PC.

Exit status: 0 every file consistent; 1 a disagreement, a file where nothing could be
compared (``not-compared``: SFrame and CFI, but no CFI function with SFrame), a file the kernel
rejects (``--kernel``), one that cannot be read, or a file named on the command line without
SFrame or without CFI (``no-sframe``, ``no-cfi``; in a ``--dir`` run those are counted, not
failures); 2 usage error.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import TYPE_CHECKING, Any

from .options import (
    add_batch_options,
    add_generate_option,
    add_section_option,
    batch_jobs,
    batch_paths,
    batch_progress,
    positive_int,
    progress_callback,
)
from .report import GENERATE_HINT, line

if TYPE_CHECKING:
    from ..tools.verify_report import FileReport


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "verify",
        help="check SFrame sections against their CFI at every PC",
        description="For each ELF file: compare the CFA, FP and RA rules of its SFrame section "
        "with those its .eh_frame (or .debug_frame) gives, at every PC; report where they "
        "disagree, the functions without SFrame (and why) or without CFI, and how much was "
        "compared.",
    )
    add_batch_options(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON output")
    out.add_argument("--csv", action="store_true", help="CSV output, one row per file")
    p.add_argument(
        "--kernel", action="store_true", help="also require what the Linux kernel requires"
    )
    add_generate_option(p)
    add_section_option(p)
    p.add_argument("--details", action="store_true", help="with --dir, every file's report as well")
    p.add_argument(
        "--limit", type=positive_int, default=20, metavar="N", help="items of each list shown"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.verify import collect
    from ..tools.verify_report import (
        CSV_FIELDS,
        FAILING_WHEN_NAMED,
        Options,
        csv_rows,
        json_document,
        report_text,
        summarize,
        summary_table,
    )

    paths = batch_paths(args, "verify")
    options = Options(generate=args.generate, kernel=args.kernel, section=args.section)
    progress = batch_progress(args, len(paths))
    reports = collect(
        paths, options, jobs=batch_jobs(args), dask=args.dask, on_done=progress_callback(progress)
    )
    if progress is not None:
        progress.finish()
    groups, total = summarize(reports, args.dir)
    # Named files must have SFrame and CFI; files found in a directory may not.
    named = set(args.files)
    failed = [
        r for r in reports if r.failed or (r.status in FAILING_WHEN_NAMED and r.path in named)
    ]
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
            line(_error_text(report))
    return status


def _error_text(report: FileReport) -> str:
    from ..tools.verify_report import NO_SFRAME

    message = report.error or ""
    if report.status == NO_SFRAME and report.abi:  # with no ABI, generating cannot help
        message += f" ({GENERATE_HINT})"
    return message
