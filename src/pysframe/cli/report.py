"""Every line the command line writes on stderr is made here.

* An error: ``pysframe: PATH: SECTION: what (at byte offset 0xOFF)`` -- the fields of the
  :class:`~pysframe.errors.SFrameError` joined as ``str(error)`` joins them.  A file without
  an SFrame section of its own, of a machine SFrame has an ABI for, gets a hint when the
  command can use a generated one instead (its ``--generate`` option).
* A warning: ``pysframe: warning: PATH: what``.
* A note: ``pysframe: PATH: note: what``.

A command that goes through several files reports each file's error here and goes on; the last
error that stops a command reaches :func:`pysframe.cli.main`, which reports it here too.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import NoSFrameError, SFrameError

PROGRAM = "pysframe"
#: What the hint says a file without SFrame could be given.
GENERATE_HINT = "--generate uses SFrame generated from its CFI"


def error_text(error: SFrameError, args: argparse.Namespace | None = None) -> str:
    """The text of ``error``'s line, without the program's name; with the ``--generate`` hint
    when ``args`` are of a command that takes ``--generate`` and did not get it."""
    text = str(error)
    offers_generate = args is not None and getattr(args, "generate", None) is False
    if isinstance(error, NoSFrameError) and error.generable and offers_generate:
        text += f" ({GENERATE_HINT})"
    return text


def report_error(error: SFrameError, args: argparse.Namespace | None = None) -> None:
    """Write ``error``'s line on stderr (after what is pending on stdout)."""
    line(error_text(error, args))


def warn(message: str, path: str | None = None) -> None:
    """Write ``pysframe: warning: PATH: message`` on stderr."""
    line("warning: " + (f"{path}: {message}" if path else message))


def note(message: str, path: str | None = None) -> None:
    """Write ``pysframe: PATH: note: message`` on stderr."""
    line((f"{path}: " if path else "") + f"note: {message}")


def line(text: str) -> None:
    """Write ``pysframe: text`` on stderr, after what is pending on stdout."""
    sys.stdout.flush()
    print(f"{PROGRAM}: {text}", file=sys.stderr)


__all__ = ["GENERATE_HINT", "PROGRAM", "error_text", "line", "note", "report_error", "warn"]
