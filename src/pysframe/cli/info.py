"""``pysframe info FILE...``: a short summary of each file's SFrame section
(:mod:`pysframe.tools.info`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import SFrameError
from .options import add_source_options, check_source_options
from .report import report_error, warn

if TYPE_CHECKING:
    from ..tools.info import SectionInfo


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "info",
        help="summarise the SFrame section of ELF files",
        description="Print version, ABI, flags, functions, rows, size and text coverage of the "
        "SFrame section of each FILE.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="ELF files (or bare sections)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_source_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.info import info_text, section_info

    check_source_options(args, "info", args.files)
    status = 0
    found: list[SectionInfo] = []
    for number, path in enumerate(args.files):
        try:
            info = section_info(
                path, args.section, raw=args.raw, address=args.address, generate=args.generate
            )
        except SFrameError as error:
            report_error(error, args)
            status = 1
            continue
        found.append(info)
        if info.note:
            warn(info.note, path)
        if not args.json:
            sys.stdout.write(("\n" if number else "") + info_text(info))
    if args.json:
        json.dump([i.as_dict() for i in found], sys.stdout, indent=1)
        sys.stdout.write("\n")
    return status
