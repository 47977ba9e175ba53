"""``pysframe info FILE...``: a short summary of each file's SFrame section
(:mod:`pysframe.tools.info`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import SFrameError
from .usage import UsageError, add_source_options

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
    add_source_options(parser, "summarise")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.info import info_text, section_info
    from ..tools.source import generated_note, is_elf_file

    if args.address is not None and not args.raw and any(is_elf_file(p) for p in args.files):
        raise UsageError("info: --address goes with bare sections (--raw)")
    status = 0
    found: list[SectionInfo] = []
    for number, path in enumerate(args.files):
        try:
            info = section_info(
                path, args.section, raw=args.raw, address=args.address, generate=args.generate
            )
        except SFrameError as error:
            sys.stdout.flush()
            print(f"pysframe: {error}", file=sys.stderr)
            status = 1
            continue
        found.append(info)
        if info.origin == "generated":
            print(f"pysframe: {generated_note(path)}", file=sys.stderr)
        if not args.json:
            sys.stdout.write(("\n" if number else "") + info_text(info))
    if args.json:
        json.dump([i.as_dict() for i in found], sys.stdout, indent=1)
        sys.stdout.write("\n")
    return status
