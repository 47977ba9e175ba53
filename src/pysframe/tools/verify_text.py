"""How ``pysframe verify`` reports: a block of text per file, a table per package directory,
CSV rows and a JSON document (:mod:`pysframe.tools.verify` finds what they say)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .verify_report import FileReport, Summary

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


__all__ = ["CSV_FIELDS", "csv_rows", "json_document", "report_text", "summary_table"]
