"""Size statistics: what SFrame costs in an ELF file compared with .eh_frame.

For each ELF file: the sizes of .eh_frame, .eh_frame_hdr and .sframe as the section headers
give them; the size of the file's SFrame data in V2 and in V3 (the .sframe section converted
between versions, or generated from .eh_frame by :mod:`pysframe.generate` when the file has no
.sframe), and the V3 section compacted (:mod:`pysframe.format.compact`, blocks shared unless
the section is big-endian); function and row (FRE) counts; how many functions use each FRE
start-address type (V2 spec 2.3.3) and how many rows use each data-word size (V2 spec 2.4.1,
"none" for rows without words); functions the generator skipped and the share of executable
bytes covered.

Relocations of a relocatable object's .sframe are not applied: no figure here depends on them.

The figures are written as JSON, CSV rows and a text table (:func:`stats_json`,
:func:`stats_csv_rows`, :func:`stats_table`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dataclass import dataclass
from ..elf.reader import ElfReader
from ..errors import NoSFrameError, SFrameError
from ..format.constants import FreType, Version
from ..format.layout import fde_fre_type, fre_word_count, fre_word_size_code
from ..format.section import SFrameSection
from ..format.walk import fre_infos
from ..sources import ResolvedSFrame, resolve_image
from .compact import compact
from .info import covered_bytes
from .parallel import map_files

if TYPE_CHECKING:
    from ..generate import GenerateResult

#: Rep size given to PCMASK functions when a V1 section (which stores none) is converted:
#: the 16-byte PLT entries of x86-64, the only producer of V1 PCMASK FDEs (V1 spec 2.3.2).
V1_PCMASK_REP_SIZE = 16

FRE_TYPE_NAMES = tuple(t.name.lower() for t in FreType)  # addr1, addr2, addr4
WORD_SIZE_NAMES = ("none", "1", "2", "4")


@dataclass(frozen=True, slots=True)
class FileStats:
    """The figures of one ELF file (sizes in bytes; None where they could not be had)."""

    path: str
    machine: str = ""
    eh_frame: int = 0
    eh_frame_hdr: int = 0
    #: The file's own .sframe section (0 when it has none) and its version.
    sframe: int = 0
    sframe_version: int | None = None
    #: Where the SFrame figures come from (:class:`pysframe.sources.Origin`): "section" or
    #: "segment" (the file's own), "generated" (from its CFI), or "none".
    origin: str = "none"
    sframe_v2: int | None = None
    sframe_v3: int | None = None
    #: The V3 section compacted.
    sframe_v3_compact: int | None = None
    functions: int = 0
    rows: int = 0
    #: Functions per FRE start-address type, in FreType order (addr1, addr2, addr4).
    fre_types: tuple[int, int, int] = (0, 0, 0)
    #: Rows per data-word size: no words, 1, 2 and 4 bytes.
    word_sizes: tuple[int, int, int, int] = (0, 0, 0, 0)
    #: Functions of .eh_frame the generator could not express (None: not generated).
    skipped: int | None = None
    functions_total: int | None = None
    text_bytes: int = 0
    covered_bytes: int = 0
    notes: tuple[str, ...] = ()
    error: str | None = None
    #: For totals: the .eh_frame bytes of the files whose V2 (V3) size is known, so that the
    #: ratios compare like with like.
    eh_frame_for_v2: int | None = None
    eh_frame_for_v3: int | None = None

    @property
    def unwind_info(self) -> int:
        """.eh_frame plus .eh_frame_hdr: what SFrame replaces for stack tracing."""
        return self.eh_frame + self.eh_frame_hdr

    @property
    def coverage(self) -> float | None:
        return self.covered_bytes / self.text_bytes if self.text_bytes else None

    def ratio(self, version: int) -> float | None:
        """SFrame size in ``version`` / .eh_frame size."""
        size = self.sframe_v2 if version == 2 else self.sframe_v3
        base = self.eh_frame_for_v2 if version == 2 else self.eh_frame_for_v3
        if base is None:
            base = self.eh_frame
        return size / base if size is not None and base else None

    @property
    def ratio_v3_unwind(self) -> float | None:
        """V3 size / (.eh_frame + .eh_frame_hdr)."""
        if self.sframe_v3 is None or not self.unwind_info:
            return None
        return self.sframe_v3 / self.unwind_info

    def as_dict(self) -> dict[str, Any]:
        """Flat, JSON-ready figures (ratios included)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "fre_types":
                out["fre_types"] = dict(zip(FRE_TYPE_NAMES, value, strict=True))
            elif f.name == "word_sizes":
                out["word_sizes"] = dict(zip(WORD_SIZE_NAMES, value, strict=True))
            elif f.name == "notes":
                out["notes"] = list(value)
            elif f.name.startswith("eh_frame_for_"):
                continue
            else:
                out[f.name] = value
        out["ratio_v2"] = _rounded(self.ratio(2))
        out["ratio_v3"] = _rounded(self.ratio(3))
        out["ratio_v3_unwind"] = _rounded(self.ratio_v3_unwind)
        out["coverage"] = _rounded(self.coverage)
        return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# -- one file ------------------------------------------------------------------------------------
def file_stats(path: str | os.PathLike[str], *, generate: bool = False) -> FileStats:
    """The statistics of one ELF file (with ``generate``, of SFrame generated from its CFI
    when it has no section of its own); raises SFrameError when it cannot be read."""
    name = os.fspath(path)
    with ElfReader.open(name) as image:
        eh_frame, eh_frame_hdr = image.section(".eh_frame"), image.section(".eh_frame_hdr")
        result = FileStats(
            path=name,
            machine=image.machine_name,
            eh_frame=eh_frame.size if eh_frame else 0,
            eh_frame_hdr=eh_frame_hdr.size if eh_frame_hdr else 0,
            text_bytes=image.code_bytes(),
        )
        try:
            # As stored: no figure depends on the relocations of an object's section.
            found = resolve_image(image, generate=generate and eh_frame is not None, relocate=False)
        except NoSFrameError:
            return result
        except SFrameError as error:
            if not generate:
                raise
            return replace(result, notes=(f"cannot generate SFrame: {error.detail}",))
        if found.generation is not None:
            return _from_generation(result, image, found.generation)
        return _from_section(result, found)


def _from_section(result: FileStats, found: ResolvedSFrame) -> FileStats:
    section, data = found.section, found.stored
    result = replace(
        result,
        sframe=len(data),
        sframe_version=int(section.version),
        origin=str(found.origin),
        covered_bytes=min(covered_bytes(section, found.relocatable), result.text_bytes),
    )
    notes: list[str] = []
    sizes: dict[Version, int | None] = {}
    v3: SFrameSection | None = None
    for version in (Version.V2, Version.V3):
        if version is section.version:
            sizes[version] = len(data)
            v3 = section if version is Version.V3 else v3
            continue
        try:
            converted = section.convert(version, pcmask_rep_size=V1_PCMASK_REP_SIZE)
        except SFrameError as error:
            notes.append(f"no V{int(version)}: {error}")
            sizes[version] = None
        else:
            sizes[version] = len(converted.data)
            v3 = converted if version is Version.V3 else v3
    result = replace(
        result,
        sframe_v2=sizes[Version.V2],
        sframe_v3=sizes[Version.V3],
        sframe_v3_compact=_compacted_size(v3, notes),
        notes=tuple(notes),
    )
    return _with_distributions(result, section)


def _compacted_size(section: SFrameSection | None, notes: list[str]) -> int | None:
    """The size of ``section`` (V3) compacted, None (with a note) when it cannot be."""
    if section is None:
        return None
    try:
        return compact(section)[0].size
    except SFrameError as error:
        notes.append(f"no compacted V3: {error}")
        return None


def _from_generation(result: FileStats, image: ElfReader, primary: GenerateResult) -> FileStats:
    """Figures of the V3 section generated from the file's CFI, with the same functions
    encoded as V2; if V2 cannot hold them (FLEX FDEs, signal frames), V2 generated on its own,
    and a note says so."""
    from ..generate import generate_from_elf

    notes: list[str] = []
    v2_size: int | None
    try:
        v2_size = len(primary.encode(primary.section_address, Version.V2))
    except SFrameError:
        try:
            v2 = generate_from_elf(image, version=Version.V2)
        except SFrameError as error:
            notes.append(f"no V2: {error.detail}")
            v2_size = None
        else:
            v2_size = len(v2.data)
            notes.append(
                f"V2 generated on its own: {len(v2.section)} functions "
                f"({len(v2.left_out)} skipped) against V3's {len(primary.section)}"
            )
    result = replace(
        result,
        origin="generated",
        sframe_v2=v2_size,
        sframe_v3=len(primary.data),
        sframe_v3_compact=_compacted_size(primary.section, notes),
        skipped=len(primary.left_out),
        functions_total=primary.functions_total,
        text_bytes=primary.text_bytes_total,
        covered_bytes=primary.text_bytes_covered,
        notes=tuple(notes),
    )
    return _with_distributions(result, primary.section)


def _with_distributions(result: FileStats, section: SFrameSection) -> FileStats:
    table = section.table
    fre_types = np.bincount(fde_fre_type(table.info), minlength=3)[:3]
    words = word_size_counts(section)
    return replace(
        result,
        functions=len(section),
        rows=int(table.num_rows.sum()),
        fre_types=(int(fre_types[0]), int(fre_types[1]), int(fre_types[2])),
        word_sizes=words,
    )


def word_size_counts(section: SFrameSection) -> tuple[int, int, int, int]:
    """Rows with no data words, and with words of 1, 2 and 4 bytes (V2 spec 2.4.1).

    Reads only each FRE's info byte, every FRE of the section at once
    (:func:`pysframe.format.walk.fre_infos`, which checks the FREs as decoding does).
    """
    info = fre_infos(section)
    kind = np.where(fre_word_count(info) == 0, 0, fre_word_size_code(info) + 1)
    totals = np.bincount(kind, minlength=4)
    return (int(totals[0]), int(totals[1]), int(totals[2]), int(totals[3]))


def file_stats_or_error(path: str, generate: bool = False) -> FileStats:
    """:func:`file_stats`, with a failure recorded in ``error`` instead of raised."""
    try:
        return file_stats(path, generate=generate)
    except SFrameError as error:
        return FileStats(path=path, error=str(error.at(path=path)))


def collect(
    paths: Sequence[str],
    *,
    jobs: int = 1,
    generate: bool = False,
    on_done: Callable[[int, FileStats], None] | None = None,
    dask: str | None = None,
) -> list[FileStats]:
    """Statistics of every path, in the order given, using ``jobs`` processes, or the Dask
    cluster whose scheduler is at ``dask`` (:func:`pysframe.tools.parallel.map_files`)."""
    task = partial(file_stats_or_error, generate=generate)
    return map_files(task, paths, jobs=jobs, dask=dask, on_done=on_done)


def total(results: Iterable[FileStats]) -> FileStats:
    """A line summing every file without an error; V2/V3 sums count files where they exist."""
    ok = [r for r in results if r.error is None]

    def known(values: Iterable[int | None]) -> int | None:
        present = [v for v in values if v is not None]
        return sum(present) if present else None

    return FileStats(
        path="TOTAL",
        eh_frame=sum(r.eh_frame for r in ok),
        eh_frame_hdr=sum(r.eh_frame_hdr for r in ok),
        sframe=sum(r.sframe for r in ok),
        origin=f"{len(ok)} file{'' if len(ok) == 1 else 's'}",
        sframe_v2=known(r.sframe_v2 for r in ok),
        sframe_v3=known(r.sframe_v3 for r in ok),
        sframe_v3_compact=known(r.sframe_v3_compact for r in ok),
        functions=sum(r.functions for r in ok),
        rows=sum(r.rows for r in ok),
        fre_types=_sum_tuple3([r.fre_types for r in ok]),
        word_sizes=_sum_tuple4([r.word_sizes for r in ok]),
        skipped=known(r.skipped for r in ok),
        functions_total=known(r.functions_total for r in ok),
        text_bytes=sum(r.text_bytes for r in ok),
        covered_bytes=sum(r.covered_bytes for r in ok),
        eh_frame_for_v2=sum(r.eh_frame for r in ok if r.sframe_v2 is not None),
        eh_frame_for_v3=sum(r.eh_frame for r in ok if r.sframe_v3 is not None),
    )


def _sum_tuple3(values: Sequence[tuple[int, int, int]]) -> tuple[int, int, int]:
    a, b, c = (sum(v[i] for v in values) for i in range(3))
    return a, b, c


def _sum_tuple4(values: Sequence[tuple[int, int, int, int]]) -> tuple[int, int, int, int]:
    a, b, c, d = (sum(v[i] for v in values) for i in range(4))
    return a, b, c, d


# -- plot --------------------------------------------------------------------------------------
_PLOT_MAX_FILES = 20


def plot_stats(results: Sequence[FileStats], summary: FileStats, path: str) -> None:
    """Draw the size comparison and the distributions into the PNG file ``path`` (needs
    matplotlib), written as every output is (:func:`pysframe.output.write_file`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SFrameError("plotting needs matplotlib: pip install 'pysframe[plot]'") from None
    shown = sorted(
        (r for r in results if r.error is None), key=lambda r: r.unwind_info, reverse=True
    )[:_PLOT_MAX_FILES]
    figure = plt.figure(figsize=(13, 8), layout="constrained")
    grid = figure.add_gridspec(2, 2, height_ratios=(3, 2))
    sizes = figure.add_subplot(grid[0, :])
    names = [os.path.basename(r.path) for r in shown]
    if len(set(names)) < len(names):
        names = [_short_name(r.path) for r in shown]
    x = np.arange(len(shown))
    width = 0.2
    series = (
        (".eh_frame", [r.eh_frame for r in shown]),
        (".eh_frame_hdr", [r.eh_frame_hdr for r in shown]),
        (".sframe V2", [r.sframe_v2 or 0 for r in shown]),
        (".sframe V3", [r.sframe_v3 or 0 for r in shown]),
    )
    for k, (label, values) in enumerate(series):
        sizes.bar(x + (k - 1.5) * width, [v / 1024 for v in values], width, label=label)
    sizes.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    sizes.set_ylabel("KiB")
    ratio = summary.ratio(3)
    note = f"; all {summary.origin}: V3/.eh_frame = {ratio:.2f}" if ratio is not None else ""
    sizes.set_title(f"Section sizes (largest {len(shown)} files{note})")
    sizes.legend()
    types = figure.add_subplot(grid[1, 0])
    _bars(types, FRE_TYPE_NAMES, summary.fre_types, "functions", "FRE start-address types")
    words = figure.add_subplot(grid[1, 1])
    labels = ["no words", "1 byte", "2 bytes", "4 bytes"]
    _bars(words, labels, summary.word_sizes, "rows", "Data-word sizes")
    import io

    from ..output import write_file

    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=100)
    plt.close(figure)
    # Atomically, never over one of the files read.
    write_file(path, image.getvalue(), inputs=[r.path for r in results])


def _short_name(path: str) -> str:
    """The file name with its directory, enough to tell a.so in two trees apart."""
    parts = Path(path).parts
    return "/".join(parts[-2:])


def _bars(axes: Any, labels: Sequence[str], counts: Sequence[int], unit: str, title: str) -> None:
    whole = sum(counts) or 1
    bars = axes.bar(labels, counts, color="tab:blue")
    axes.bar_label(bars, labels=[f"{100 * c / whole:.1f}%" for c in counts])
    axes.margins(y=0.15)
    axes.set_ylabel(unit)
    axes.set_title(f"{title} ({sum(counts)} {unit})")


# -- the figures as text ------------------------------------------------------------------------
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


__all__ = [
    "CSV_FIELDS",
    "FileStats",
    "collect",
    "file_stats",
    "file_stats_or_error",
    "plot_stats",
    "stats_csv_rows",
    "stats_json",
    "stats_table",
    "total",
    "word_size_counts",
]
