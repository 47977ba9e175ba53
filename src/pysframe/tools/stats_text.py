"""The figures of :mod:`pysframe.tools.stats` as JSON, CSV rows and a text table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .stats import FRE_TYPE_NAMES, WORD_SIZE_NAMES, FileStats


def stats_json(results: Sequence[FileStats], summary: FileStats) -> dict[str, Any]:
    """Every file's figures and the total, JSON-ready."""
    return {"files": [r.as_dict() for r in results], "total": summary.as_dict()}


CSV_FIELDS = (
    "path",
    "machine",
    "origin",
    "eh_frame",
    "eh_frame_hdr",
    "sframe",
    "sframe_version",
    "sframe_v2",
    "sframe_v3",
    "sframe_v3_compact",
    "ratio_v2",
    "ratio_v3",
    "ratio_v3_unwind",
    "functions",
    "rows",
    *(f"fre_{name}" for name in FRE_TYPE_NAMES),
    *(f"words_{name}" for name in WORD_SIZE_NAMES),
    "skipped",
    "functions_total",
    "text_bytes",
    "covered_bytes",
    "coverage",
    "error",
)


def _csv_row(stats: FileStats) -> dict[str, Any]:
    flat = stats.as_dict()
    for name in FRE_TYPE_NAMES:
        flat[f"fre_{name}"] = flat["fre_types"][name]
    for name in WORD_SIZE_NAMES:
        flat[f"words_{name}"] = flat["word_sizes"][name]
    return {key: "" if flat[key] is None else flat[key] for key in CSV_FIELDS}


def stats_csv_rows(results: Sequence[FileStats]) -> list[dict[str, Any]]:
    """One row per file, keyed by :data:`CSV_FIELDS` (no total row: a CSV holds records of
    one kind; the text table and JSON give the total)."""
    return [_csv_row(stats) for stats in results]


def _size(value: int | None) -> str:
    return "-" if value is None else str(value)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def stats_table(results: Sequence[FileStats], summary: FileStats) -> str:
    """The table ``pysframe stats`` prints: a line per file, the total, the distributions."""
    lines: list[str] = []
    columns = (
        ("eh_frame", 10),
        ("eh_hdr", 8),
        ("sframe", 10),
        ("V2", 10),
        ("V3", 10),
        ("V3c", 10),
        ("V2/eh", 6),
        ("V3/eh", 6),
        ("funcs", 8),
        ("rows", 9),
        ("skipped", 7),
        ("cover", 6),
    )
    name_width = min(max([len(r.path) for r in results] + [5]), 48)
    lines.append(f"{'FILE':<{name_width}}" + "".join(f" {t:>{w}}" for t, w in columns) + "\n")
    for stats in [*results, summary]:
        name = stats.path
        if len(name) > name_width:
            name = "..." + name[len(name) - name_width + 3 :]
        if stats.error is not None:
            lines.append(f"{name:<{name_width}} error: {stats.error}\n")
            continue
        sframe = "-" if not stats.sframe else f"{stats.sframe}"
        if stats.sframe_version:
            sframe = f"{sframe}/v{stats.sframe_version}"
        cells = (
            str(stats.eh_frame),
            str(stats.eh_frame_hdr),
            sframe,
            _size(stats.sframe_v2),
            _size(stats.sframe_v3),
            _size(stats.sframe_v3_compact),
            _ratio(stats.ratio(2)),
            _ratio(stats.ratio(3)),
            str(stats.functions),
            str(stats.rows),
            _size(stats.skipped),
            "-" if stats.coverage is None else f"{100 * stats.coverage:.0f}%",
        )
        lines.append(
            f"{name:<{name_width}}"
            + "".join(f" {c:>{w}}" for c, (_, w) in zip(cells, columns, strict=True))
            + "\n"
        )
        for note in stats.notes:
            lines.append(f"{'':<{name_width}}   note: {note}\n")
    functions, rows = summary.functions, summary.rows
    types = ", ".join(
        f"{n} {c} ({_percent(c, functions)})"
        for n, c in zip(FRE_TYPE_NAMES, summary.fre_types, strict=True)
    )
    words = ", ".join(
        f"{n if n == 'none' else n + '-byte'} {c} ({_percent(c, rows)})"
        for n, c in zip(WORD_SIZE_NAMES, summary.word_sizes, strict=True)
    )
    lines.append(f"FRE start-address types (functions): {types}\n")
    lines.append(f"data-word sizes (rows): {words}\n")
    return "".join(lines)


__all__ = ["CSV_FIELDS", "stats_csv_rows", "stats_json", "stats_table"]
