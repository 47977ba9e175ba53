"""Usage errors of the command line: arguments that do not go together.

A sub-command raises :class:`UsageError` for a combination argparse cannot check (``--replace``
without ``--inject``...); ``pysframe`` prints it as one ``pysframe: COMMAND: message`` line and
exits with status 2, as argparse does for its own checks.  :class:`CommandParser` is the
parser of the command and its sub-commands.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


class UsageError(Exception):
    """Arguments that do not go together (exit status 2)."""


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, its help as wide as argparse makes it (the terminal's width less 2)
    without importing :mod:`shutil` for it: argparse's help formatter asks
    ``shutil.get_terminal_size`` when given no width, and shutil imports zlib, bz2 and lzma
    (some 4 ms of every command's start, for a width no command needs unless it prints
    help)."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        make: Any = self.formatter_class  # HelpFormatter and its kinds take a width
        formatter: argparse.HelpFormatter = make(prog=self.prog, width=terminal_columns() - 2)
        return formatter


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: ``$COLUMNS`` when a positive number, else the
    width of the terminal standard output is (0 or none: 80)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


__all__ = ["CommandParser", "UsageError", "terminal_columns"]
