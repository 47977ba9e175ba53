"""``pysframe compact FILE``: rewrite an ELF file's SFrame section smaller
(:func:`pysframe.tools.compact.compact_file`).

pysframe compact FILE -o OUT         # a compacted copy of FILE
pysframe compact FILE --in-place     # FILE itself, rewritten atomically
pysframe compact FILE --dry-run      # only say what compaction would do
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import add_rewrite_options

if TYPE_CHECKING:
    from ..tools.compact import CompactReport


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "compact",
        help="rewrite an ELF file's .sframe smaller (same rules at every PC)",
        description="Rewrite the SFrame section of FILE smaller, in place of the old one: "
        "functions with identical FRE blocks share one copy, and every FRE gets the smallest "
        "start-address and data-word widths it allows.  Every PC keeps the same rules.",
    )
    parser.add_argument("file", metavar="FILE", help="ELF executable or shared object")
    add_rewrite_options(parser)
    parser.set_defaults(func=run)


def print_report(report: CompactReport) -> None:
    for line in report.lines():
        print(line)


def run(args: argparse.Namespace) -> int:
    from ..tools.compact import compact_file
    report = compact_file(
        args.file,
        None if args.dry_run else args.output,
        in_place=args.in_place,
        share=args.share,
    )
    print_report(report)
    return 0
