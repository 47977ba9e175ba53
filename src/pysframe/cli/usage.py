"""Usage errors of the command line: arguments that do not go together.

A sub-command raises :class:`UsageError` for a combination argparse cannot check (``--replace``
without ``--inject``...); ``pysframe`` prints it as one ``pysframe: COMMAND: message`` line and
exits with status 2, as argparse does for its own checks.
"""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """Arguments that do not go together (exit status 2)."""


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


def add_source_options(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--raw``, ``--address`` and ``--generate``: where ``dump``, ``info`` and ``lookup`` take
    a section from besides an ELF file's own (:mod:`pysframe.tools.source`)."""
    parser.add_argument(
        "--raw",
        action="store_true",
        help="FILEs hold bare SFrame sections (as generate -o writes them); a file that starts "
        "with the SFrame magic is read so without it",
    )
    parser.add_argument(
        "--address",
        type=parse_address,
        metavar="ADDR",
        help="a bare section's address (default 0), which PC-relative starts need",
    )
    parser.add_argument(
        "--generate",
        action="store_true",
        help=f"for an ELF file without .sframe, {verb} a section generated from its CFI",
    )


__all__ = ["UsageError", "add_source_options", "parse_address", "positive_int"]
