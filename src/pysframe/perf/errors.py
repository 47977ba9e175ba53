"""The error of the perf.data reader."""

from __future__ import annotations

from ..errors import FormatError


class PerfDataError(FormatError):
    """A perf.data file (or stream) that cannot be read: not perf.data, a layout this reader
    does not know, or corrupt.  ``path`` names the file (``-`` for standard input) and
    ``offset`` the byte offset of the problem in it.

    The reader also keeps the problems it reads past as instances of this class (a data
    section cut short, a feature section it cannot parse): see ``PerfData.problems``.
    """


__all__ = ["PerfDataError"]
