"""``pysframe info FILE...``: a short summary of each file's SFrame section
(:mod:`pysframe.tools.info`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import SFrameError

if TYPE_CHECKING:
    from ..tools.info import SectionInfo


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "info",
        help="summarise the SFrame section of ELF files",
        description="Print version, ABI, flags, functions, rows, size and text coverage of the "
        "SFrame section of each FILE.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="ELF files")
    parser.add_argument("--section", metavar="NAME", help="section to read (default: .sframe)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.info import info_text, section_info
    status = 0
    found: list[SectionInfo] = []
    for number, path in enumerate(args.files):
        try:
            info = section_info(path, args.section)
        except SFrameError as error:
            sys.stdout.flush()
            print(f"pysframe: {error}", file=sys.stderr)
            status = 1
            continue
        found.append(info)
        if not args.json:
            sys.stdout.write(("\n" if number else "") + info_text(info))
    if args.json:
        json.dump([i.as_dict() for i in found], sys.stdout, indent=1)
        sys.stdout.write("\n")
    return status
