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

A section generated from the CFI is checked too when it comes from the cache (which is no
proof): it must decode, its table pass the decoder's checks, and every function lie inside the
module's code (:func:`outside_code`).

The checks read every FDE, with numpy.  :func:`checked` keeps what they found (a
:class:`Verdict`) in the cache (:mod:`pysframe.sources.cache`) per build ID, section address
and a digest of the build ID, the bytes checked and the code ranges, so that the next command
on the same files finds it there and needs neither numpy nor the work: a section whose verdict
is kept is looked up one PC at a time without them
(:class:`~pysframe.format.lookup.SectionLookup`).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from ..dataclass import dataclass
from ..errors import SFrameError

if TYPE_CHECKING:
    from ..format.section import SFrameSection


class Policy(enum.StrEnum):
    """Which SFrame a consumer unwinds a module with."""

    #: The file's own section, as it is (nothing generated).
    OWN = "own"
    #: SFrame generated from the file's CFI, whatever the file has.
    GENERATED = "generated"
    #: The own section when it passes :func:`trust_problems`, else generated.
    AUTO = "auto"


class Checked(Protocol):
    """A section as the checks read it (a :class:`~pysframe.sources.resolve.ResolvedSFrame`):
    its bytes as stored, its address, and decoded."""

    @property
    def stored(self) -> bytes: ...

    @property
    def address(self) -> int: ...

    @property
    def section(self) -> SFrameSection: ...


def trust_problems(found: Checked, code: Sequence[tuple[int, int]]) -> list[str]:
    """Why the own section ``found`` must not be used to unwind the file whose executable
    ranges (link-time ``[start, end)``) are ``code``: an empty list when it passes every check.
    ``code`` empty: the file's segments are unknown and that check is left out."""
    import numpy as np

    from ..format.merge import piece_offsets

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
    return problems + outside_code(found, code)


def outside_code(found: Checked, code: Sequence[tuple[int, int]]) -> list[str]:
    """Why the functions of ``found`` do not all lie inside the executable ranges ``code``
    (link-time ``[start, end)``): one line, or none when they do, ``code`` is empty (unknown)
    or the section has no readable FDE table (the caller finds that out)."""
    import numpy as np

    if not code:
        return []
    try:
        table = found.section.table
    except SFrameError:
        return []
    count = len(table)
    if not count:
        return []
    starts = table.start.astype(np.uint64)
    order = np.argsort(starts, kind="stable")  # in address order: the first is named
    ends = (starts + table.size.astype(np.uint64))[order]
    starts = starts[order]
    ranges = np.array(sorted(code), dtype=np.uint64).reshape(-1, 2)
    holder = np.searchsorted(ranges[:, 0], starts, side="right").astype(np.int64) - 1
    safe = np.maximum(holder, 0)
    inside = (holder >= 0) & (ends <= ranges[safe, 1]) & (starts >= ranges[safe, 0])
    outside = np.flatnonzero(~inside)
    if not len(outside):
        return []
    first = int(outside[0])
    return [
        f"{len(outside)} of its {count} functions lie outside the file's code (the first "
        f"[{int(starts[first]):#x}, {int(ends[first]):#x}))"
    ]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the checks found in a section at its address."""

    #: Why the section cannot be decoded (the decoder's error), None when it can.
    malformed: str | None = None
    #: Why its FDE table fails the decoder's checks (SFrameSection.table), None when it passes.
    table: str | None = None
    #: Why an own section must not be used (:func:`trust_problems`; with ``malformed``, that it
    #: is malformed), or why a generated one must not (:func:`outside_code` alone: a cache
    #: entry is checked with it); empty for a section that passes.
    problems: tuple[str, ...] = ()


def checked(
    found: Checked,
    code: Sequence[tuple[int, int]],
    build_id: bytes | None,
    *,
    trust: bool,
) -> Verdict:
    """The verdict on ``found`` at its address: decoded, its table checked, and against the
    executable ranges ``code`` its :func:`trust_problems` with ``trust`` (an own section),
    else :func:`outside_code` (a generated one); kept in the cache for ``build_id`` (and taken
    from it when it holds the verdict for the same file, bytes, address and code)."""
    kind = "trusted" if trust else "checked"
    digest = hashlib.sha256(found.stored)
    bound = build_id.hex() if build_id else ""
    digest.update(f"{kind} {bound} {found.address:#x} {sorted(code)}".encode())
    name = digest.hexdigest()[:32]
    if build_id:
        from .cache import cached_verdict

        kept = cached_verdict(build_id, found.address, kind, name)
        if kept is not None and _well_formed(kept):
            return Verdict(kept["malformed"], kept["table"], tuple(kept["problems"]))
    verdict = _check(found, code, trust)
    if build_id:
        from .cache import keep_verdict

        keep_verdict(build_id, found.address, kind, name, asdict(verdict))
    return verdict


def _well_formed(kept: dict[str, Any]) -> bool:
    """Whether a verdict read from the cache has every field, of its type (a cache is no
    proof: anything else counts as absent)."""
    texts = (kept.get("malformed"), kept.get("table"))
    problems = kept.get("problems")
    return (
        all(text is None or isinstance(text, str) for text in texts)
        and isinstance(problems, list)
        and all(isinstance(problem, str) for problem in problems)
    )


def _check(found: Checked, code: Sequence[tuple[int, int]], trust: bool) -> Verdict:
    try:
        section = found.section
    except SFrameError as error:
        problems: tuple[str, ...] = (f"it is malformed: {error.detail}",) if trust else ()
        return Verdict(error.detail, None, problems)
    try:
        section.table  # noqa: B018  (read and checked)
    except SFrameError as error:
        table: str | None = error.detail
    else:
        table = None
    if trust:
        problems = tuple(trust_problems(found, code))
    else:
        problems = tuple(outside_code(found, code)) if table is None else ()
    return Verdict(None, table, problems)


__all__ = ["Checked", "Policy", "Verdict", "checked", "outside_code", "trust_problems"]
