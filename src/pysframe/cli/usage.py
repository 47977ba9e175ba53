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


__all__ = ["UsageError", "positive_int"]
