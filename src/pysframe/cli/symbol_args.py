"""Options shared by the commands that name functions (``stack``, ``lookup``): where separate
debug files are looked for, and whether names are demangled."""

from __future__ import annotations

import argparse
from typing import Any


def add_symbol_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--debug-dir`` and ``--no-demangle``."""
    parser.add_argument(
        "--debug-dir", metavar="DIR", action="append", dest="debug_dirs",
        help="look for separate debug files under DIR (by build ID in DIR/.build-id/, and by "
        "debuglink in DIR/<the file's directory>/), like gdb's debug-file-directory; may be "
        "repeated (default: /usr/lib/debug)",
    )
    parser.add_argument(
        "--no-demangle", dest="demangle", action="store_false",
        help="print C++ and Rust function names as they are stored (mangled)",
    )


def symbol_options(args: argparse.Namespace) -> Any:
    """The :class:`pysframe.unwind.symbolize.SymbolOptions` the arguments ask for."""
    from ..unwind.symbolize import DEFAULT_DEBUG_DIRS, SymbolOptions

    dirs = tuple(args.debug_dirs) if args.debug_dirs else DEFAULT_DEBUG_DIRS
    return SymbolOptions(debug_dirs=dirs, demangle=args.demangle)
