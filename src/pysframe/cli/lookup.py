"""``pysframe lookup FILE PC...``: the CFA, FP and RA rules that apply at each PC.

PCs are addresses as the section shows them (``pysframe dump``), in hex (``0x...``) or decimal,
or a function symbol of the file with an optional offset (``main``, ``main+0x10``; C++ and Rust
names mangled or demangled), given on the command line or, any number of them, in a file
(``--pcs FILE``, ``-`` for standard input; words separated by white space).  Each result names
the function symbol holding the PC, as ``stack`` names frames (separate debug files included).
The lookup follows libsframe's ``sframe_find_fre``.  A PC that names no symbol of the file
gets an error line and the others are still looked up; the exit status is 1 if any PC could
not be resolved or has no row.

In a relocatable object a PC is an offset in its code section, given as a number, a symbol,
or ``SECTION+OFFSET``, and printed as ``SECTION+OFFSET`` (:mod:`pysframe.tools.lookup`).

FILE may also be a bare section file (``--raw``, or recognised by the SFrame magic; at
``--address``), which has no symbols, and ``--generate`` uses a section generated from the
file's CFI when it has none (:func:`pysframe.sources.resolve_sframe`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InputError, SFrameError
from .options import (
    add_source_options,
    add_symbol_options,
    check_source_options,
    parse_address,
    symbol_options,
)
from .report import report_error, warn
from .usage import UsageError

if TYPE_CHECKING:
    from ..tools.lookup import Location


def parse_location(text: str) -> Location:
    """An address (:func:`~pysframe.cli.options.parse_address`: anything that starts with a
    digit or a sign), or a symbol name (in an object, or a code section's) with an optional
    ``+OFFSET`` (hex or decimal): (name, offset)."""
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
        nargs="*",
        metavar="PC",
        type=parse_location,
        help="addresses, or function symbols with an optional +OFFSET",
    )
    parser.add_argument(
        "--pcs",
        dest="pcs_file",
        metavar="PCFILE",
        help="read more PCs from PCFILE (- for standard input), separated by white space",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_source_options(parser)
    add_symbol_options(parser)
    parser.set_defaults(func=run)


def _pcs_from_file(name: str) -> Iterator[Location]:
    """The locations listed in ``name`` (``-``: standard input)."""
    from ..input import read_input

    text = sys.stdin.read() if name == "-" else read_input(name).decode("utf-8", "replace")
    for word in text.split():
        try:
            yield parse_location(word)
        except argparse.ArgumentTypeError as error:
            raise InputError(str(error), path=name) from None


def run(args: argparse.Namespace) -> int:
    from ..sources import resolve_sframe
    from ..tools.lookup import FileLookup, Target, result_json, result_text

    path: str = args.file
    check_source_options(args, "lookup", [path])
    locations: list[Location] = list(args.pcs)
    if args.pcs_file is not None:
        locations += _pcs_from_file(args.pcs_file)
    if not locations:
        raise UsageError("lookup: no PC given (name PCs, or --pcs PCFILE)")
    options = symbol_options(args)
    found = resolve_sframe(
        path, section=args.section, raw=args.raw, address=args.address, generate=args.generate
    )
    if found.note:
        warn(found.note, path)
    lookup = FileLookup(found, options.debug_dirs)
    status = 0
    targets: list[Target] = []
    for location in locations:
        try:
            targets.append(lookup.target(location))
        except SFrameError as error:
            report_error(error, args)
            status = 1
    answers = lookup.answers(targets, options.name)
    section = lookup.section
    if args.json:
        json.dump([result_json(section, answer) for answer in answers], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.writelines(result_text(section, answer) + "\n" for answer in answers)
    problems = lookup.symbols.problems if lookup.symbols is not None else []
    for problem in [*problems, *options.warnings]:
        warn(problem)
    if any(answer.found is None for answer in answers):
        status = 1
    return status
