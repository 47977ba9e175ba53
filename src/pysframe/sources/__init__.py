"""Where SFrame comes from: one resolver for every command and for the unwinder's modules.

* :mod:`~pysframe.sources.resolve`: a file's SFrame section -- its own (by section header or
  program header), a bare section file, or generated from its CFI -- with its
  :class:`~pysframe.sources.resolve.Origin`;
* :mod:`~pysframe.sources.trust`: whether a file's own section can be trusted for unwinding
  (the checks, the policy), and which SFrame to use;
* :mod:`~pysframe.sources.cache`: generated SFrame and the checks' verdicts kept on disk,
  each entry bound to the exact file it was made from.
"""

from __future__ import annotations

from .resolve import (
    BARE_FORMAT,
    Origin,
    ResolvedSFrame,
    bare_sframe,
    generated_sframe,
    is_bare_section,
    load_sframe,
    locate_sframe,
    own_sframe,
    resolve_image,
    resolve_sframe,
)

__all__ = [
    "BARE_FORMAT",
    "Origin",
    "ResolvedSFrame",
    "bare_sframe",
    "generated_sframe",
    "is_bare_section",
    "load_sframe",
    "locate_sframe",
    "own_sframe",
    "resolve_image",
    "resolve_sframe",
]
