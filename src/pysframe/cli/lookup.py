"""``pysframe lookup FILE PC...``: the CFA, FP and RA rules that apply at each PC.

PCs are addresses as the section shows them (``pysframe dump``), in hex (``0x...``) or decimal,
or a function symbol of the file with an optional offset (``main``, ``main+0x10``; C++ and Rust
names mangled or demangled).  Each result names the function symbol holding the PC, as ``stack``
names frames (separate debug files included).  The lookup follows libsframe's
``sframe_find_fre``.  Exit status 1 if any PC has no row.

FILE may also be a bare section file (``--raw``, or recognised by the SFrame magic; at
``--address``), which has no symbols, and ``--generate`` uses a section generated from the
file's CFI when it has none (:mod:`pysframe.tools.source`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import SFrameError
from .symbol_args import add_symbol_options, symbol_options
from .usage import UsageError, add_source_options, parse_address


def parse_location(text: str) -> int | tuple[str, int]:
    """An address (:func:`~pysframe.cli.usage.parse_address`: anything that starts with a
    digit or a sign), or a symbol name with an optional ``+OFFSET`` (hex or decimal):
    (name, offset)."""
    if not text or text[0].isdigit() or text[0] in "+-":
        return parse_address(text)
    name, plus, offset = text.rpartition("+")
    if plus and name and offset and offset[0].isdigit():
        return name, parse_address(offset)
    return text, 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lookup",
        help="show the frame rules at PCs",
        description="Print the CFA, FP and RA rules that apply at each PC (hex 0x... or "
        "decimal, or SYMBOL[+OFFSET]), found as libsframe's sframe_find_fre finds them, and "
        "the function symbol that holds it.",
    )
    parser.add_argument("file", metavar="FILE", help="ELF file (or a bare SFrame section)")
    parser.add_argument(
        "pcs",
        nargs="+",
        metavar="PC",
        type=parse_location,
        help="addresses, or function symbols with an optional +OFFSET",
    )
    parser.add_argument("--section", metavar="NAME", help="section to read (default: .sframe)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_source_options(parser, "use")
    add_symbol_options(parser)
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
    from ..unwind.symbolize import symbols_of_file

    path: str = args.file
    options = symbol_options(args)
    if args.address is not None and not args.raw and is_elf_file(path):
        raise UsageError("lookup: --address goes with a bare section (--raw)")
    symbols = None
    if args.raw or is_bare_section(path):
        name, section = ".sframe", bare_section(path, args.address or 0).section
        pcs = [_address(path, None, location, "a bare section") for location in args.pcs]
    else:
        with ElfImage.open(path) as image:
            # An object's symbols are offsets in their own sections, not the section's PCs.
            if not image.is_relocatable:
                symbols = symbols_of_file(path, options.debug_dirs)
            why = "a relocatable object"
            pcs = [_address(path, symbols, location, why) for location in args.pcs]
            found = find_sframe(image, args.section)
            if found is None and args.generate:
                print(f"pysframe: {generated_note(path)}", file=sys.stderr)
                name, section = ".sframe", generated_section(image).section
            else:
                found = require_sframe(image, args.section)
                name = found.name
                try:
                    section = found.decode()
                except SFrameError as error:
                    raise SFrameError(f"{path}: {name}: {error}") from None
    try:
        results = [(pc, section.lookup(pc)) for pc in pcs]
    except SFrameError as error:
        raise SFrameError(f"{path}: {name}: {error}") from None
    names = symbols.find_many(pcs) if symbols is not None else [None] * len(pcs)
    named = [None if n is None else (options.name(n[0]), n[1]) for n in names]
    if args.json:
        pairs = zip(results, named, strict=True)
        answers = [result_json(section, pc, r, function) for (pc, r), function in pairs]
        json.dump(answers, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for (pc, r), function in zip(results, named, strict=True):
            sys.stdout.write(result_text(section, pc, r, function) + "\n")
    return 0 if all(r is not None for _, r in results) else 1


def _address(path: str, symbols: Any, location: int | tuple[str, int], why: str) -> int:
    """The address ``location`` names; ``why`` says why a file has no symbols to look in."""
    if isinstance(location, int):
        return location
    name, offset = location
    if symbols is None:
        raise SFrameError(f"{path}: {why}: give addresses, not symbols ({name})")
    found = symbols.by_name(name)
    if not found:
        raise SFrameError(f"{path}: no function symbol {name}")
    starts = sorted({s.address for s in found})
    if len(starts) > 1:
        raise SFrameError(
            f"{path}: {len(starts)} functions are called {name} (at "
            + ", ".join(f"{s:#x}" for s in starts)
            + "): give an address"
        )
    symbol = found[0]
    if offset and symbol.size and offset >= symbol.size:
        raise SFrameError(
            f"{path}: {name}+{offset:#x} is past the end of {name} ({symbol.size:#x} bytes)"
        )
    return int(starts[0] + offset)
