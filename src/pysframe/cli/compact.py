"""``pysframe compact FILE``: rewrite an ELF file's SFrame section smaller
(:func:`pysframe.tools.compact.compact_file`).

pysframe compact FILE -o OUT         # a compacted copy of FILE
pysframe compact FILE --in-place     # FILE itself, rewritten atomically
pysframe compact FILE --dry-run      # only say what compaction would do
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..tools import SHARE_CHOICES

if TYPE_CHECKING:
    from ..tools.compact import CompactReport



def add_output_options(parser: argparse.ArgumentParser) -> None:
    """-o / --in-place / --dry-run (one is needed) and --share: what compact and repair take."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("-o", "--output", metavar="OUT", help="write the new file here")
    where.add_argument("--in-place", action="store_true", help="rewrite FILE itself (atomically)")
    where.add_argument("--dry-run", action="store_true", help="write nothing, only report")
    parser.add_argument(
        "--share",
        choices=SHARE_CHOICES,
        default="auto",
        help="share identical FRE blocks between functions: auto (default) unless the section "
        "is big-endian, whose readers on little-endian hosts reject shared blocks",
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "compact",
        help="rewrite an ELF file's .sframe smaller (same rules at every PC)",
        description="Rewrite the SFrame section of FILE smaller, in place of the old one: "
        "functions with identical FRE blocks share one copy, and every FRE gets the smallest "
        "start-address and data-word widths it allows.  Every PC keeps the same rules.",
    )
    parser.add_argument("file", metavar="FILE", help="ELF executable or shared object")
    add_output_options(parser)
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
