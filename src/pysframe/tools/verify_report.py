"""What ``pysframe verify`` finds, as values: a :class:`FileReport` per file with its
:class:`Difference` and :class:`Unmatched` items and its status, and the totals of many files
(:class:`Summary`, :func:`summarize`).  :mod:`pysframe.tools.verify` fills them in,
:mod:`pysframe.tools.verify_text` writes them out."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

#: Items of each list a report keeps (the counts cover them all).
MAX_LISTED = 200
#: Linker-made PLT sections (GNU ld writes their SFrame and their CFI itself).
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got", ".plt.bnd")

# File statuses, worst last.
#: Functions were compared, and their SFrame says what their CFI says.
CONSISTENT = "consistent"
#: The file has no SFrame section (nothing to verify).
NO_SFRAME = "no-sframe"
#: The file has SFrame but no CFI to compare it with.
NO_CFI = "no-cfi"
#: The file has SFrame and CFI, but not one function of the CFI has SFrame to compare (the
#: section describes other code: a linker concatenated sections, or it is not this file's).
NOT_COMPARED = "not-compared"
DISAGREEMENT = "disagreement"
REJECTED = "rejected"
ERROR = "error"
#: Statuses that make ``pysframe verify`` exit 1.
FAILING = (NOT_COMPARED, DISAGREEMENT, REJECTED, ERROR)
#: Statuses that make ``pysframe verify`` exit 1 for a file named on the command line (a
#: file found in a directory may lack SFrame or CFI).
FAILING_WHEN_NAMED = (NO_SFRAME, NO_CFI)


@dataclass(frozen=True, slots=True)
class Options:
    """How files are verified."""

    #: Files without an SFrame section get one generated in memory (V3) to verify.
    generate: bool = False
    #: Also apply the kernel's acceptance rules to the section.
    kernel: bool = False
    #: The SFrame section's name (default: .sframe, or by type).
    section: str | None = None


@dataclass(frozen=True, slots=True)
class Difference:
    """A PC range of one CFI function where SFrame says something else."""

    #: "disagreement", or "note" for a difference that is expected (``reason`` says why).
    kind: str
    function: str
    function_start: int
    function_end: int
    start: int
    end: int
    cfi: str
    sframe: str
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class Unmatched:
    """A function on one side only (or whose CFI cannot be read), and why."""

    function: str
    start: int
    end: int
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class FileReport:
    """What verifying one file found (bytes are bytes of code)."""

    path: str
    status: str = CONSISTENT
    error: str | None = None
    abi: str = ""
    #: Where the SFrame section came from (:class:`pysframe.sources.Origin`): "section" or
    #: "segment" (the file's own) or "generated" (from its CFI, in memory).
    origin: str = ""
    sframe_version: int | None = None
    cfi_sources: tuple[str, ...] = ()
    text_bytes: int = 0
    cfi_functions: int = 0
    cfi_bytes: int = 0
    sframe_functions: int = 0
    sframe_bytes: int = 0
    compared_functions: int = 0
    compared_bytes: int = 0
    agreeing_bytes: int = 0
    noted_bytes: int = 0
    disagreeing_bytes: int = 0
    disagreement_count: int = 0
    note_count: int = 0
    without_sframe_count: int = 0
    without_sframe_bytes: int = 0
    without_cfi_count: int = 0
    without_cfi_bytes: int = 0
    unreadable_count: int = 0
    disagreements: tuple[Difference, ...] = ()
    notes: tuple[Difference, ...] = ()
    without_sframe: tuple[Unmatched, ...] = ()
    #: (reason, functions) for every reason a CFI function has no SFrame, most frequent first.
    without_sframe_reasons: tuple[tuple[str, int], ...] = ()
    without_cfi: tuple[Unmatched, ...] = ()
    unreadable: tuple[Unmatched, ...] = ()
    kernel_findings: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "without_sframe_reasons":
                out[f.name] = [{"reason": r, "functions": n} for r, n in value]
            elif isinstance(value, tuple) and value and hasattr(value[0], "as_dict"):
                out[f.name] = [item.as_dict() for item in value]
            elif isinstance(value, tuple):
                out[f.name] = list(value)
            else:
                out[f.name] = value
        out["seconds"] = round(self.seconds, 3)
        return out


@dataclass(slots=True)
class Summary:
    """The totals of a set of reports (one package directory, or all)."""

    name: str
    files: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    cfi_functions: int = 0
    compared_functions: int = 0
    without_sframe: int = 0
    without_cfi: int = 0
    compared_bytes: int = 0
    agreeing_bytes: int = 0
    noted_bytes: int = 0
    disagreeing_bytes: int = 0
    disagreements: int = 0
    notes: int = 0
    text_bytes: int = 0
    cfi_bytes: int = 0

    def add(self, report: FileReport) -> None:
        self.files += 1
        self.statuses[report.status] += 1
        for name in (
            "cfi_functions", "compared_functions", "compared_bytes", "agreeing_bytes",
            "noted_bytes", "disagreeing_bytes", "text_bytes", "cfi_bytes",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(report, name))
        self.without_sframe += report.without_sframe_count
        self.without_cfi += report.without_cfi_count
        self.disagreements += report.disagreement_count
        self.notes += report.note_count

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["statuses"] = dict(sorted(self.statuses.items()))
        return out


def package_of(path: str, roots: Sequence[str]) -> str:
    """The package directory of ``path``: the first directory level under the ``--dir`` root
    it was found in ("." for files directly in it), else its own directory."""
    for root in roots:
        relative = os.path.relpath(path, root)
        if not relative.startswith(".."):
            head = relative.split(os.sep, 1)
            return head[0] if len(head) > 1 else "."
    return os.path.dirname(path) or "."


def summarize(
    reports: Sequence[FileReport], roots: Sequence[str] = ()
) -> tuple[list[Summary], Summary]:
    """Totals per package directory (sorted by name) and over everything."""
    groups: dict[str, Summary] = {}
    whole = Summary("TOTAL")
    for report in reports:
        name = package_of(report.path, roots)
        groups.setdefault(name, Summary(name)).add(report)
        whole.add(report)
    return [groups[name] for name in sorted(groups)], whole


__all__ = [
    "CONSISTENT",
    "DISAGREEMENT",
    "ERROR",
    "FAILING",
    "FAILING_WHEN_NAMED",
    "MAX_LISTED",
    "NOT_COMPARED",
    "NO_CFI",
    "NO_SFRAME",
    "PLT_SECTIONS",
    "REJECTED",
    "Difference",
    "FileReport",
    "Options",
    "Summary",
    "Unmatched",
    "package_of",
    "summarize",
]
