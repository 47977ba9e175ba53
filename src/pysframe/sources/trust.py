"""Whether a file's own SFrame section can be trusted for unwinding, and which SFrame to use.

A wrong section must never turn into a wrong backtrace.  Linkers that do not know the format
(lld, mold) concatenate their inputs' sections, and the first piece then describes other code
than the one at its addresses; a damaged section can still decode.  Before a module's own
section is used, :func:`trust_problems` runs cheap structural checks over its FDE table, in
bulk (no row is decoded, so the cost grows with the number of functions only):

* the section opens, and every FDE and its FRE block are well formed (the checks of
  :attr:`pysframe.format.section.SFrameSection.table`);
* it holds one SFrame section, not several back to back (:mod:`pysframe.format.merge`);
* function start addresses, in address order, do not overlap;
* every function lies inside the module's code (its executable ``PT_LOAD`` segments).

The :class:`Policy` says what a consumer (``stack``, ``perf``) uses: ``own`` the file's own
section as it is; ``generated`` SFrame generated from the file's CFI, whatever the file has;
``auto`` (the default) the own section when it passes the checks, else one generated from its
``.eh_frame``, with the reason, for one warning line.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from ..errors import SFrameError
from ..format.merge import piece_offsets
from .resolve import ResolvedSFrame


class Policy(enum.StrEnum):
    """Which SFrame a consumer unwinds a module with."""

    #: The file's own section, as it is (nothing generated).
    OWN = "own"
    #: SFrame generated from the file's CFI, whatever the file has.
    GENERATED = "generated"
    #: The own section when it passes :func:`trust_problems`, else generated.
    AUTO = "auto"


def trust_problems(found: ResolvedSFrame, code: Sequence[tuple[int, int]]) -> list[str]:
    """Why the own section ``found`` must not be used to unwind the file whose executable
    ranges (link-time ``[start, end)``) are ``code``: an empty list when it passes every check.
    ``code`` empty: the file's segments are unknown and that check is left out."""
    import numpy as np

    pieces = piece_offsets(found.stored)
    if len(pieces) > 1:
        more = ", ".join(f"{offset:#x}" for offset in pieces[1:])
        return [
            f"it holds {len(pieces)} SFrame sections back to back (more at byte {more}): a "
            "linker concatenated its inputs' sections"
        ]
    section = found.section
    try:
        table = section.table
    except SFrameError as error:
        return [f"it is malformed: {error.detail}"]
    count = len(table)
    if not count:
        return []
    starts = table.start.astype(np.uint64)
    ends = starts + table.size.astype(np.uint64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    problems = []
    overlapping = np.flatnonzero(starts[1:] < ends[:-1])
    if len(overlapping):
        first = int(overlapping[0])
        problems.append(
            f"{len(overlapping)} of its {count} functions overlap the one before them (the "
            f"first at {int(starts[first + 1]):#x}, inside [{int(starts[first]):#x}, "
            f"{int(ends[first]):#x}))"
        )
    if code:
        ranges = np.array(sorted(code), dtype=np.uint64).reshape(-1, 2)
        holder = np.searchsorted(ranges[:, 0], starts, side="right").astype(np.int64) - 1
        safe = np.maximum(holder, 0)
        inside = (holder >= 0) & (ends <= ranges[safe, 1]) & (starts >= ranges[safe, 0])
        outside = np.flatnonzero(~inside)
        if len(outside):
            first = int(outside[0])
            problems.append(
                f"{len(outside)} of its {count} functions lie outside the file's code (the "
                f"first [{int(starts[first]):#x}, {int(ends[first]):#x}))"
            )
    return problems


__all__ = ["Policy", "trust_problems"]
