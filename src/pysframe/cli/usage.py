"""Usage errors of the command line: arguments that do not go together.

A sub-command raises :class:`UsageError` for a combination argparse cannot check (``--replace``
without ``--inject``...); ``pysframe`` prints it as one ``pysframe: COMMAND: message`` line and
exits with status 2, as argparse does for its own checks.
"""

from __future__ import annotations


class UsageError(Exception):
    """Arguments that do not go together (exit status 2)."""


__all__ = ["UsageError"]
