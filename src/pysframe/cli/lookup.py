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


def parse_pc(text: str) -> int:
    """An address: ``0x`` hex, or decimal; argparse reports anything else as a usage error."""
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an address: {text!r}") from None
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"address out of range: {text!r}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lookup",
        help="show the frame rules at PCs",
        description="Print the CFA, FP and RA rules that apply at each PC (hex 0x... or "
        "decimal), found as libsframe's sframe_find_fre finds them.",
    )
    parser.add_argument("file", metavar="FILE", help="ELF file")
    parser.add_argument("pcs", nargs="+", metavar="PC", type=parse_pc, help="addresses")
    parser.add_argument("--section", metavar="NAME", help="section to read (default: .sframe)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..elf.image import ElfImage
    from ..elf.sframe import require_sframe
    from ..tools.lookup_text import result_json, result_text
    path: str = args.file
    with ElfImage.open(path) as image:
        found = require_sframe(image, args.section)
        try:
            section = found.decode()
            results = [(pc, section.lookup(pc)) for pc in args.pcs]
        except SFrameError as error:
            raise SFrameError(f"{path}: {found.name}: {error}") from None
    if args.json:
        json.dump([result_json(section, pc, r) for pc, r in results], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for pc, r in results:
            sys.stdout.write(result_text(section, pc, r) + "\n")
    return 0 if all(r is not None for _, r in results) else 1
