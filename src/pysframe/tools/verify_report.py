"""What ``pysframe verify`` finds, as values and as text: a :class:`FileReport` per file with
its :class:`Difference` and :class:`Unmatched` items and its status, the totals of many files
(:class:`Summary`, :func:`summarize`), and how they are written: a block of text per file, a
table per package directory, CSV rows and a JSON document.  :mod:`pysframe.tools.verify`
fills them in."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import field, fields
from typing import Any

from ..dataclass import dataclass

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


#: CSV columns: one row per file.
CSV_FIELDS = (
    "path", "status", "abi", "origin", "sframe_version", "cfi_sources", "text_bytes",
    "cfi_functions", "cfi_bytes", "sframe_functions", "sframe_bytes", "compared_functions",
    "compared_bytes", "agreeing_bytes", "noted_bytes", "disagreeing_bytes", "disagreement_count",
    "note_count", "without_sframe_count", "without_sframe_bytes", "without_cfi_count",
    "without_cfi_bytes", "unreadable_count", "kernel_findings", "error", "seconds",
)  # fmt: skip


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _where(name: str, start: int, end: int) -> str:
    span = f"[{start:#x}, {end:#x})"
    return f"{name} {span}" if name else span


def report_text(report: FileReport, limit: int = 20) -> str:
    """One file's report: what was compared, then every list (``limit`` items of each)."""
    lines = [f"{report.path}: {report.status}"]
    if report.error:
        lines.append(f"  {report.error}")
        return "\n".join(lines) + "\n"
    version = f"V{report.sframe_version}" if report.sframe_version else "-"
    sources = ", ".join(report.cfi_sources) or "none"
    lines.append(f"  SFrame {version} ({report.origin}), {report.abi}; CFI from {sources}")
    lines.append(
        f"  functions: {report.compared_functions:,} of {report.cfi_functions:,} CFI functions "
        f"compared ({_percent(report.compared_functions, report.cfi_functions)}); "
        f"{report.without_sframe_count:,} without SFrame, {report.without_cfi_count:,} SFrame "
        f"functions without CFI"
    )
    lines.append(
        f"  bytes: {report.compared_bytes:,} compared of {report.text_bytes:,} bytes of text "
        f"({_percent(report.compared_bytes, report.text_bytes)}): "
        f"{report.agreeing_bytes:,} agree, {report.noted_bytes:,} noted, "
        f"{report.disagreeing_bytes:,} disagree"
    )
    for title, items, count in (
        ("disagreements", report.disagreements, report.disagreement_count),
        ("notes", report.notes, report.note_count),
    ):
        if not count:
            continue
        lines.append(f"  {title}: {count:,}")
        for difference in items[:limit]:
            at = _where(difference.function, difference.function_start, difference.function_end)
            lines.append(f"    {at} at [{difference.start:#x}, {difference.end:#x})")
            lines.append(f"      CFI:    {difference.cfi}")
            lines.append(f"      SFrame: {difference.sframe}")
            if difference.reason:
                lines.append(f"      ({difference.reason})")
        if count > min(limit, len(items)):
            lines.append(f"    ... and {count - min(limit, len(items)):,} more")
    if report.without_sframe_count:
        lines.append(
            f"  CFI functions without SFrame: {report.without_sframe_count:,} "
            f"({report.without_sframe_bytes:,} bytes)"
        )
        for reason, count in report.without_sframe_reasons[:limit]:
            lines.append(f"    {count:,} x {reason}")
        for missing in report.without_sframe[:limit]:
            lines.append(
                f"    {_where(missing.function, missing.start, missing.end)}: {missing.reason}"
            )
        _more(lines, report.without_sframe_count, limit, len(report.without_sframe))
    for title, unmatched, count, size in (
        (
            "SFrame functions without CFI",
            report.without_cfi,
            report.without_cfi_count,
            report.without_cfi_bytes,
        ),
        (
            "CFI functions whose CFI cannot be read",
            report.unreadable,
            report.unreadable_count,
            None,
        ),
    ):
        if not count:
            continue
        lines.append(f"  {title}: {count:,}" + (f" ({size:,} bytes)" if size is not None else ""))
        for item in unmatched[:limit]:
            suffix = f": {item.reason}" if item.reason else ""
            lines.append(f"    {_where(item.function, item.start, item.end)}{suffix}")
        _more(lines, count, limit, len(unmatched))
    if report.kernel_findings:
        lines.append(f"  the kernel rejects the section: {len(report.kernel_findings)} findings")
        lines.extend(f"    {finding}" for finding in report.kernel_findings[:limit])
    return "\n".join(lines) + "\n"


def _more(lines: list[str], count: int, limit: int, listed: int) -> None:
    shown = min(limit, listed)
    if count > shown:
        lines.append(f"    ... and {count - shown:,} more")


_COLUMNS = (
    ("package", "<"), ("files", ">"), ("ok", ">"), ("noSF", ">"), ("none", ">"), ("bad", ">"),
    ("err", ">"),
    ("CFI fns", ">"), ("compared", ">"), ("no SFrame", ">"), ("no CFI", ">"),
    ("compared B", ">"), ("agree", ">"), ("noted B", ">"), ("disagree B", ">"),
    ("disagreements", ">"), ("notes", ">"),
)  # fmt: skip


def _row(summary: Summary) -> list[str]:
    statuses = summary.statuses
    return [
        summary.name,
        f"{summary.files:,}",
        f"{statuses['consistent']:,}",
        f"{statuses['no-sframe']:,}",
        f"{statuses['no-cfi'] + statuses['not-compared']:,}",
        f"{statuses['disagreement'] + statuses['rejected']:,}",
        f"{statuses['error']:,}",
        f"{summary.cfi_functions:,}",
        f"{summary.compared_functions:,}",
        f"{summary.without_sframe:,}",
        f"{summary.without_cfi:,}",
        f"{summary.compared_bytes:,}",
        _percent(summary.agreeing_bytes, summary.compared_bytes),
        f"{summary.noted_bytes:,}",
        f"{summary.disagreeing_bytes:,}",
        f"{summary.disagreements:,}",
        f"{summary.notes:,}",
    ]


def summary_table(groups: Sequence[Summary], total: Summary) -> str:
    """One row per package directory and a total row; ``ok`` counts consistent files,
    ``noSF`` files without SFrame, ``none`` files where nothing could be compared (no CFI, or
    no CFI function with SFrame), ``bad`` files that disagree (or the kernel rejects)."""
    rows = [[name for name, _align in _COLUMNS]] + [_row(g) for g in groups] + [_row(total)]
    widths = [max(len(row[k]) for row in rows) for k in range(len(_COLUMNS))]
    out = []
    for number, row in enumerate(rows):
        if number == len(rows) - 1:
            out.append("  ".join("-" * width for width in widths))
        cells = [
            cell.ljust(width) if align == "<" else cell.rjust(width)
            for cell, width, (_name, align) in zip(row, widths, _COLUMNS, strict=True)
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out) + "\n"


def csv_rows(reports: Sequence[FileReport]) -> list[dict[str, Any]]:
    """One flat row per file (lists joined with ``; ``)."""
    rows = []
    for report in reports:
        flat = report.as_dict()
        row = {name: flat[name] for name in CSV_FIELDS}
        row["cfi_sources"] = " ".join(report.cfi_sources)
        row["kernel_findings"] = "; ".join(report.kernel_findings)
        rows.append(row)
    return rows


def json_document(
    reports: Sequence[FileReport], groups: Sequence[Summary], total: Summary, status: int
) -> dict[str, Any]:
    return {
        "status": status,
        "files": [report.as_dict() for report in reports],
        "packages": [group.as_dict() for group in groups],
        "total": total.as_dict(),
    }


__all__ = [
    "CONSISTENT",
    "CSV_FIELDS",
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
    "csv_rows",
    "json_document",
    "package_of",
    "report_text",
    "summarize",
    "summary_table",
]
