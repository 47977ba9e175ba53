"""``pysframe lookup FILE PC...``: the CFA, FP and RA rules that apply at each PC.

PCs are addresses as the section shows them (``pysframe dump``), in hex (``0x...``) or decimal.
The lookup follows libsframe's ``sframe_find_fre``.  Exit status 1 if any PC has no row.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import SFrameError
from .usage import UsageError, add_source_options, parse_address


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lookup",
        help="show the frame rules at PCs",
        description="Print the CFA, FP and RA rules that apply at each PC (hex 0x... or "
        "decimal), found as libsframe's sframe_find_fre finds them.",
    )
    parser.add_argument("file", metavar="FILE", help="ELF file (or a bare SFrame section)")
    parser.add_argument("pcs", nargs="+", metavar="PC", type=parse_address, help="addresses")
    parser.add_argument("--section", metavar="NAME", help="section to read (default: .sframe)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_source_options(parser, "use")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..elf.image import ElfImage
    from ..elf.sframe import find_sframe, require_sframe
    from ..tools.lookup_text import result_json, result_text
    from ..tools.source import (
        bare_section,
        generated_note,
        generated_section,
        is_bare_section,
        is_elf_file,
    )

    path: str = args.file
    if args.address is not None and not args.raw and is_elf_file(path):
        raise UsageError("lookup: --address goes with a bare section (--raw)")
    if args.raw or is_bare_section(path):
        name, section = ".sframe", bare_section(path, args.address or 0).section
    else:
        with ElfImage.open(path) as image:
            found = find_sframe(image, args.section)
            if found is None and args.generate:
                print(f"pysframe: {generated_note(path)}", file=sys.stderr)
                name, section = ".sframe", generated_section(image).section
            else:
                found = require_sframe(image, args.section)
                name, section = found.name, found.decode()
    try:
        results = [(pc, section.lookup(pc)) for pc in args.pcs]
    except SFrameError as error:
        raise SFrameError(f"{path}: {name}: {error}") from None
    if args.json:
        json.dump([result_json(section, pc, r) for pc, r in results], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for pc, r in results:
            sys.stdout.write(result_text(section, pc, r) + "\n")
    return 0 if all(r is not None for _, r in results) else 1
