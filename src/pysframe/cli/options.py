"""The options several sub-commands share, each declared once (with one metavariable each:
``FILE``, ``SECTION``, ``ADDRESS``, ``DIR``, ``N``, ``OUT``, ``SCHEDULER``).

* where a section comes from (:func:`add_source_options`): ``--section``, ``--raw``,
  ``--address``, ``--generate``/``--no-generate`` -- the arguments of
  :func:`pysframe.sources.resolve_sframe`;
* many files (:func:`add_batch_options`): FILEs, ``--dir``, ``--recursive``, ``--jobs``,
  ``--dask``, ``--progress``;
* naming functions (:func:`add_symbol_options`): ``--debug-dir``, ``--no-demangle``;
* rewriting a file (:func:`add_rewrite_options`): ``-o``, ``--in-place``, ``--dry-run``,
  ``--share``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .usage import UsageError

if TYPE_CHECKING:
    from ..unwind.symbolize import SymbolOptions
    from .progress import Progress


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (jobs, limits)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def parse_address(text: str) -> int:
    """An argparse type: an address, ``0x`` hex or decimal, in [0, 2**64)."""
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an address: {text!r}") from None
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"address out of range: {text!r}")
    return value


# -- where a section comes from ------------------------------------------------------------------
def add_section_option(parser: argparse.ArgumentParser) -> None:
    """``--section SECTION``."""
    parser.add_argument(
        "--section",
        metavar="SECTION",
        help="the SFrame section to read (default: .sframe, found by name, section type or "
        "PT_GNU_SFRAME)",
    )


def add_generate_option(parser: argparse.ArgumentParser) -> None:
    """``--generate``/``--no-generate`` (default: no)."""
    parser.add_argument(
        "--generate",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="for an ELF file without an SFrame section, use one generated from its CFI "
        "(.eh_frame, .debug_frame), with a warning line (default: no)",
    )


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """``--section``, ``--raw``, ``--address`` and ``--generate``: where a command takes a
    section from (:func:`pysframe.sources.resolve_sframe`)."""
    add_section_option(parser)
    parser.add_argument(
        "--raw",
        action="store_true",
        help="FILEs hold bare SFrame sections (as generate -o writes them); a file that starts "
        "with the SFrame magic is read so without it",
    )
    parser.add_argument(
        "--address",
        type=parse_address,
        metavar="ADDRESS",
        help="a bare section's address (default 0), which PC-relative starts need",
    )
    add_generate_option(parser)


def check_source_options(args: argparse.Namespace, command: str, paths: list[str]) -> None:
    """UsageError when ``--address`` is given for an ELF file without ``--raw`` (an ELF file
    gives its own section's address)."""
    from ..elf.reader import is_elf_file

    if args.address is not None and not args.raw and any(is_elf_file(p) for p in paths):
        raise UsageError(f"{command}: --address goes with bare sections (--raw)")


# -- many files ----------------------------------------------------------------------------------
def add_batch_options(parser: argparse.ArgumentParser) -> None:
    """FILEs, ``--dir``, ``--recursive``, ``--jobs``, ``--dask`` and ``--progress``: a command
    that goes through many files (:func:`pysframe.tools.parallel.map_files`)."""
    parser.add_argument("files", nargs="*", metavar="FILE", help="ELF files")
    parser.add_argument(
        "--dir", action="append", default=[], metavar="DIR", help="the ELF files in DIR"
    )
    parser.add_argument("--recursive", "-r", action="store_true", help="descend into each DIR")
    parser.add_argument(
        "--jobs", "-j", type=positive_int, default=None, metavar="N",
        help="processes (default: the CPU count for several files)",
    )  # fmt: skip
    parser.add_argument(
        "--dask",
        metavar="SCHEDULER",
        help="run on the Dask cluster of the scheduler at this address (needs pysframe[dask])",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal and there are "
        "several files)",
    )


def batch_paths(args: argparse.Namespace, command: str) -> list[str]:
    """The FILEs and the ELF files of each ``--dir``; UsageError when there are none."""
    from ..tools.files import find_elf_files

    paths = list(args.files)
    for directory in args.dir:
        paths += find_elf_files(directory, args.recursive)
    if not paths:
        raise UsageError(f"{command}: no ELF files given (name FILEs or --dir DIR)")
    return paths


def batch_jobs(args: argparse.Namespace) -> int:
    """``--jobs``, by default the CPU count."""
    return int(args.jobs or (os.cpu_count() or 1))


def batch_progress(args: argparse.Namespace, count: int) -> Progress | None:
    """The progress bar ``--progress`` asks for (by default: stderr is a terminal and there
    are several files), or None."""
    from .progress import Progress

    shown = args.progress
    if shown is None:
        shown = sys.stderr.isatty() and count > 1
    return Progress(count, sys.stderr) if shown else None


def progress_callback(progress: Progress | None) -> Callable[[int, Any], None] | None:
    """``on_done(count, result)`` drawing ``progress`` with each result's ``path``."""
    if progress is None:
        return None

    def done(count: int, result: Any) -> None:
        progress.update(count, str(getattr(result, "path", "")))

    return done


# -- naming functions ----------------------------------------------------------------------------
def add_symbol_options(parser: argparse.ArgumentParser) -> None:
    """``--debug-dir`` and ``--no-demangle``: how ``stack`` and ``lookup`` name functions."""
    parser.add_argument(
        "--debug-dir", metavar="DIR", action="append", dest="debug_dirs",
        help="look for separate debug files under DIR (by build ID in DIR/.build-id/, and by "
        "debuglink in DIR/<the file's directory>/), like gdb's debug-file-directory; may be "
        "repeated (default: /usr/lib/debug)",
    )  # fmt: skip
    parser.add_argument(
        "--no-demangle", dest="demangle", action="store_false",
        help="print C++ and Rust function names as they are stored (mangled)",
    )  # fmt: skip


def symbol_options(args: argparse.Namespace) -> SymbolOptions:
    """The :class:`pysframe.unwind.symbolize.SymbolOptions` the arguments ask for."""
    from ..unwind.symbolize import DEFAULT_DEBUG_DIRS, SymbolOptions

    dirs = tuple(args.debug_dirs) if args.debug_dirs else DEFAULT_DEBUG_DIRS
    return SymbolOptions(debug_dirs=dirs, demangle=args.demangle)


# -- rewriting a file ----------------------------------------------------------------------------
def add_rewrite_options(parser: argparse.ArgumentParser) -> None:
    """``-o``, ``--in-place``, ``--dry-run`` (one is needed) and ``--share``: what ``compact``
    and ``repair`` take."""
    from ..tools import SHARE_CHOICES

    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("-o", "--output", metavar="OUT", help="write the new file to OUT")
    where.add_argument("--in-place", action="store_true", help="rewrite FILE itself (atomically)")
    where.add_argument("--dry-run", action="store_true", help="write nothing, only report")
    parser.add_argument(
        "--share",
        choices=SHARE_CHOICES,
        default="auto",
        help="share identical FRE blocks between functions: auto (default) unless the section "
        "is big-endian, whose readers on little-endian hosts reject shared blocks",
    )


__all__ = [
    "add_batch_options",
    "add_generate_option",
    "add_rewrite_options",
    "add_section_option",
    "add_source_options",
    "add_symbol_options",
    "batch_jobs",
    "batch_paths",
    "batch_progress",
    "check_source_options",
    "parse_address",
    "positive_int",
    "progress_callback",
    "symbol_options",
]
