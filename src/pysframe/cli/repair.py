"""``pysframe repair FILE``: merge the SFrame sections a linker left unmerged
(:func:`pysframe.tools.compact.repair_file`).

pysframe repair FILE -o OUT          # a repaired copy of FILE
pysframe repair FILE --in-place      # FILE itself, rewritten atomically
pysframe repair FILE --dry-run       # only say what was found
"""

from __future__ import annotations

import argparse
from typing import Any

from .compact import print_report
from .options import add_rewrite_options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "repair",
        help="merge the .sframe sections lld or mold concatenated into one sorted section",
        description="When FILE's SFrame section holds several SFrame sections back to back "
        "(what LLVM lld and mold write), or one per-object section never merged (unsorted), "
        "merge them into one sorted section, compact it, and write it back in place.",
    )
    parser.add_argument("file", metavar="FILE", help="ELF executable or shared object")
    add_rewrite_options(parser)
    parser.add_argument(
        "--no-compact", action="store_true", help="write the merged section without compacting it"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.compact import repair_file
    report = repair_file(
        args.file,
        None if args.dry_run else args.output,
        in_place=args.in_place,
        share=args.share,
        compact_result=not args.no_compact,
    )
    print_report(report)
    return 0
