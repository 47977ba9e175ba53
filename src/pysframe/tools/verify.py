"""``pysframe verify``: does a file's SFrame section say what its CFI says, at every PC?

For each ELF file: the CFI of ``.eh_frame`` (and of ``.debug_frame`` for functions it does not
describe) is interpreted with DWARF's semantics (:mod:`pysframe.generate.interpret`), the
SFrame section is asked at every row boundary of both (:mod:`pysframe.tools.verify_compare`),
and the report says:

* where they disagree: the function, the PC range and both sides' rules;
* which differences are expected, as notes: the linker's PLT descriptions, signal frames GNU
  as keeps without rows, what V1/V2 sections cannot say;
* the CFI functions without SFrame, with GNU as' reason (the generator's translation rules,
  :func:`pysframe.generate.driver.skip_reasons`), and the SFrame functions without CFI;
* how much was compared: functions and bytes of text.

``--kernel`` adds the Linux kernel's acceptance rules (:mod:`pysframe.tools.validate`).  A
relocatable object's sections all sit at address 0; they are laid out one after the other
(:meth:`~pysframe.elf.image.ElfImage.object_layout`) and both ``.eh_frame`` and the SFrame
section relocated for that layout, so that each function has an address of its own.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any

import numpy as np

from ..elf.image import ElfImage
from ..elf.layout import SHF_ALLOC, SHF_EXECINSTR, SHT_NOBITS
from ..elf.sframe import ElfSFrame, find_sframe
from ..errors import SFrameError
from ..format.constants import Abi, Flags, Version
from ..format.findings import Severity
from ..format.layout import HEADER_AT
from ..format.section import SFrameSection
from ..generate.cfi import CfiFormat, PointerContext
from ..generate.interpret import CfiTable, interpret_cfi
from .parallel import DASK_CONNECT_TIMEOUT, map_files
from .verify_compare import (
    CombinedCfi,
    combine,
    coverage,
    segments,
    signal_frames_without_rows,
)
from .verify_rules import (
    DISAGREE,
    NOTE,
    PLT_NOT_DESCRIBED,
    REASONS,
    REPRESENTABLE,
    classify,
    describe,
    without_sframe_reason,
)

#: Items of each list a report keeps (the counts cover them all).
MAX_LISTED = 200
#: Linker-made PLT sections (GNU ld writes their SFrame and their CFI itself).
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got", ".plt.bnd")

# File statuses, worst last.
CONSISTENT = "consistent"
NO_SFRAME = "no-sframe"
NO_CFI = "no-cfi"
DISAGREEMENT = "disagreement"
REJECTED = "rejected"
ERROR = "error"
#: Statuses that make ``pysframe verify`` exit 1.
FAILING = (DISAGREEMENT, REJECTED, ERROR)


@dataclass(frozen=True, slots=True)
class Options:
    """How files are verified."""

    #: Files without an SFrame section get one generated in memory (V3) to verify.
    generate: bool = False
    #: Also apply the kernel's acceptance rules to the section.
    kernel: bool = False
    #: The SFrame section's name (default: .sframe, or by type).
    section: str | None = None
    #: Interpret the CFI of programs one at a time (the bulk path's reference).
    bulk: bool = True


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
    #: "section" (the file's own) or "generated" (from its CFI, in memory).
    sframe_source: str = ""
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


# -- one file --------------------------------------------------------------------------------
def verify_file(path: str | os.PathLike[str], options: Options = Options()) -> FileReport:
    """Verify one ELF file; raises SFrameError (ElfError, FormatError...) or OSError when it
    cannot be read at all."""
    name = os.fspath(path)
    began = time.perf_counter()
    with ElfImage.open(name) as image:
        report = _verify_image(image, options)
    return replace(report, seconds=time.perf_counter() - began)


def verify_file_or_error(path: str, options: Options = Options()) -> FileReport:
    """:func:`verify_file`, with a failure recorded as an ``error`` report instead of raised."""
    try:
        return verify_file(path, options)
    except SFrameError as error:
        message = str(error)
        return FileReport(path=path, status=ERROR, error=message)
    except OSError as error:
        return FileReport(path=path, status=ERROR, error=f"{path}: {error.strerror or error}")


class _Place:
    """Addresses of an image: a relocatable object's sections laid out, a linked file's as
    they are."""

    def __init__(self, image: ElfImage) -> None:
        self.image = image
        self.layout = image.object_layout() if image.is_relocatable else None

    def address(self, index: int, address: int) -> int:
        return address if self.layout is None else self.layout.get(index, 0)

    def contents(self, section: Any) -> bytes:
        data: bytes = section.data()
        if self.layout is None:
            return data
        return self.image.relocated_at(section, data, self.layout)


def _verify_image(image: ElfImage, options: Options) -> FileReport:
    abi = image.abi
    report = FileReport(path=image.path)
    if abi is None:
        unsupported = f"{image.path}: SFrame defines no ABI for {image.file_format}"
        if find_sframe(image, options.section) is None:
            # Nothing to verify, as for any file without SFrame: 32-bit x86 helpers in a
            # library tree (perf's perf-read-vdso32) are not errors of a directory run.
            return replace(report, status=NO_SFRAME, error=unsupported)
        raise SFrameError(unsupported)
    place = _Place(image)
    text = [
        (place.address(s.index, s.address), s.size, s.name)
        for s in image.sections()
        if s.flags & SHF_EXECINSTR and s.flags & SHF_ALLOC and s.size and s.type != SHT_NOBITS
    ]
    report = replace(report, abi=abi.name, text_bytes=sum(size for _a, size, _n in text))
    found = find_sframe(image, options.section)
    if found is not None and not found.is_sframe_data(options.section):
        found = None
    if found is None and not options.generate:
        missing = f"{image.path}: no {options.section or '.sframe'} section"
        return replace(report, status=NO_SFRAME, error=missing)
    tables = _cfi_tables(image, place, abi, options.bulk)
    section, source, kernel = _sframe_section(image, place, abi, tables, options, found)
    if section is None:
        return replace(
            report, status=NO_SFRAME, cfi_sources=tuple(t.source for t in tables), error=source
        )
    report = replace(
        report,
        sframe_source=source,
        sframe_version=int(section.version),
        cfi_sources=tuple(t.source for t in tables),
        kernel_findings=tuple(kernel),
    )
    if section.abi is not abi:
        raise SFrameError(
            f"{image.path}: the SFrame section is for {section.abi.name}, the file for {abi.name}"
        )
    plt = [(lo, lo + size, name) for lo, size, name in text if name in PLT_SECTIONS]
    return _compare(report, image, place, section, combine(tables), abi, plt)


def _cfi_tables(image: ElfImage, place: _Place, abi: Abi, bulk: bool) -> list[CfiTable]:
    """The CFI of .eh_frame, then of .debug_frame (which the combination filters)."""
    tables = []
    for name, cfi_format in (
        (".eh_frame", CfiFormat.EH_FRAME),
        (".debug_frame", CfiFormat.DEBUG_FRAME),
    ):
        sec = image.section(name)
        if sec is None or not sec.size or sec.type == SHT_NOBITS:
            continue
        address = place.address(sec.index, sec.address)
        tables.append(
            interpret_cfi(
                place.contents(sec),
                address,
                abi,
                debug_frame=cfi_format is CfiFormat.DEBUG_FRAME,
                address_size=image.elfclass // 8,
                pointers=_pointers(image, place),
                bulk=bulk,
            )
        )
    return tables


def _pointers(image: ElfImage, place: _Place) -> PointerContext:
    """Bases of .eh_frame pointer encodings (textrel: .text, datarel: .got)."""
    text = image.section(".text")
    got = image.section(".got")
    return PointerContext(
        0,
        place.address(text.index, text.address) if text is not None else None,
        place.address(got.index, got.address) if got is not None else None,
    )


def _sframe_section(
    image: ElfImage,
    place: _Place,
    abi: Abi,
    tables: list[CfiTable],
    options: Options,
    found: ElfSFrame | None,
) -> tuple[SFrameSection | None, str, list[str]]:
    """The SFrame section to verify (``found``, or one generated from the CFI), where it comes
    from (or why there is none), and the kernel's findings on it."""
    kernel: list[str] = []
    if found is not None:
        address = place.address(found.section.index, found.address)
        data = place.contents(found.section)
        if place.layout is not None:
            data = _object_starts_pcrel(data)
        section = SFrameSection.from_bytes(data, address)
        section.table  # noqa: B018  (reads and checks every FDE before anything relies on them)
        if options.kernel:
            from .validate import validate_elf

            findings = validate_elf(image, options.section, kernel=True)
            kernel = [str(f) for f in findings if f.severity is Severity.ERROR]
        return section, "section", kernel
    if place.layout is None:
        from ..generate.driver import generate_from_elf

        result = generate_from_elf(image, Version.V3)
    else:
        eh = next((t for t in tables if t.source == ".eh_frame"), None)
        if eh is None:
            return None, f"{image.path}: no .eh_frame to generate SFrame from", kernel
        end = max(place.layout.values(), default=0) + 0x1000
        eh_section = image.section(".eh_frame")
        assert eh_section is not None
        from ..generate.driver import generate_from_eh_frame

        result = generate_from_eh_frame(
            eh.data, place.address(eh_section.index, 0), abi, section_address=end
        )
    section = result.section
    if options.kernel:
        from .validate import validate_section

        findings = validate_section(
            section,
            kernel=True,
            sframe_segment_address=section.section_address,
            sframe_segment_size=len(result.data),
        )
        kernel = [str(f) for f in findings if f.severity is Severity.ERROR]
    return section, "generated", kernel


def _object_starts_pcrel(data: bytes) -> bytes:
    """An object's section with FDE_FUNC_START_PCREL set: GNU as writes every function start
    of an object PC-relative (R_*_PC32: S + A - P), also in V1 and V2 sections, which have no
    such flag before errata 1; GNU ld reads them so."""
    at = HEADER_AT["flags"]
    if len(data) <= at or data[HEADER_AT["version"]] >= Version.V3:
        return data
    patched = bytearray(data)
    patched[at] |= Flags.FDE_FUNC_START_PCREL
    return bytes(patched)


def _compare(
    report: FileReport,
    image: ElfImage,
    place: _Place,
    section: SFrameSection,
    cfi: CombinedCfi,
    abi: Abi,
    plt: list[tuple[int, int, str]],
) -> FileReport:
    table = section.table
    covered = coverage(section, cfi)
    compared = covered.compared
    found = segments(section, cfi, compared, abi)
    length = found.end - found.start
    signal_no_rows = signal_frames_without_rows(section)
    kinds, reasons = classify(found, cfi, section, abi, plt, signal_no_rows)
    namer = _Namer(image, place, plt)
    disagreements, notes = _differences(found, kinds, reasons, cfi, abi, namer)
    usable = cfi.usable
    without = np.flatnonzero(usable & ~compared)
    without_reasons = _without_sframe_reasons(cfi, without, abi, section.version, plt)
    reason_counts = Counter(without_reasons)
    unreadable = [
        (k, table_index, local)
        for k, (table_index, local) in enumerate(
            zip(cfi.table.tolist(), cfi.local.tolist(), strict=True)
        )
        if not usable[k] and cfi.size[k] > 0
    ]
    sframe_without = np.flatnonzero(covered.without_cfi)
    bad_bytes = int(length[kinds == DISAGREE].sum())
    noted_bytes = int(length[kinds == NOTE].sum())
    status = CONSISTENT
    if report.kernel_findings:
        status = REJECTED
    if disagreements[1]:
        status = DISAGREEMENT
    if not len(cfi):
        status = NO_CFI if status == CONSISTENT else status
    return replace(
        report,
        status=status,
        cfi_functions=int((cfi.size > 0).sum()),
        cfi_bytes=int(cfi.size[cfi.size > 0].sum()),
        sframe_functions=len(section),
        sframe_bytes=int(table.size.sum()),
        compared_functions=int(compared.sum()),
        compared_bytes=int(length.sum()),
        agreeing_bytes=int(length.sum()) - bad_bytes - noted_bytes,
        noted_bytes=noted_bytes,
        disagreeing_bytes=bad_bytes,
        disagreement_count=disagreements[1],
        note_count=notes[1],
        disagreements=tuple(disagreements[0]),
        notes=tuple(notes[0]),
        without_sframe_count=len(without),
        without_sframe_bytes=int(cfi.size[without].sum()),
        without_sframe=tuple(
            Unmatched(
                namer(int(cfi.begin[k])), int(cfi.begin[k]), int(cfi.begin[k] + cfi.size[k]), r
            )
            for k, r in zip(without[:MAX_LISTED].tolist(), without_reasons, strict=False)
        ),
        without_sframe_reasons=tuple(reason_counts.most_common()),
        without_cfi_count=len(sframe_without),
        without_cfi_bytes=int(table.size[sframe_without].sum()),
        without_cfi=tuple(
            Unmatched(
                namer(int(table.start[i])),
                int(table.start[i]),
                int(table.start[i]) + int(table.size[i]),
            )
            for i in sframe_without[:MAX_LISTED].tolist()
        ),
        unreadable_count=len(unreadable),
        unreadable=tuple(
            Unmatched(
                namer(int(cfi.begin[k])),
                int(cfi.begin[k]),
                int(cfi.begin[k] + cfi.size[k]),
                cfi.tables[t].problems.get(local, ""),
            )
            for k, t, local in unreadable[:MAX_LISTED]
        ),
    )


def _without_sframe_reasons(
    cfi: CombinedCfi,
    functions: np.ndarray,
    abi: Abi,
    version: Version,
    plt: list[tuple[int, int, str]],
) -> list[str]:
    """gas' reason for each of these CFI functions to have no SFrame (or that it has none);
    for linker-made PLT code, that the linker did not describe it."""
    out: list[str] = [""] * len(functions)
    by_table: dict[int, list[int]] = {}
    for position, k in enumerate(functions.tolist()):
        begin = int(cfi.begin[k])
        section = next((name for lo, hi, name in plt if lo <= begin < hi), None)
        if section is not None:
            out[position] = PLT_NOT_DESCRIBED.format(section)
            continue
        by_table.setdefault(int(cfi.table[k]), []).append(position)
    for table_index, positions in by_table.items():
        table = cfi.tables[table_index]
        spans = [table.spans[int(cfi.local[functions[p]])] for p in positions]
        from ..generate.driver import skip_reasons

        reasons = skip_reasons(table.data, table.cies, spans, abi, version)
        for position, reason, span in zip(positions, reasons, spans, strict=True):
            out[position] = without_sframe_reason(reason, table, span, version)
    return out


def _differences(
    found: Any,
    kinds: np.ndarray,
    reasons: np.ndarray,
    cfi: CombinedCfi,
    abi: Abi,
    namer: Callable[[int], str],
) -> tuple[tuple[list[Difference], int], tuple[list[Difference], int]]:
    """Runs of consecutive differing segments with the same rules, as Differences: the
    disagreements and the notes (the first MAX_LISTED of each, and how many there are)."""
    # Position k of the compared columns is range found.differ[k].
    differ = found.differ
    if not len(differ):
        return ([], 0), ([], 0)
    kind_of = kinds[differ]
    columns = [found.fde[differ], kind_of, *found.cfi, *found.sframe]
    joined = np.ones(len(differ), dtype=bool)
    if len(differ) > 1:
        same = found.end[differ[:-1]] == found.start[differ[1:]]
        for column in columns:
            same &= column[:-1] == column[1:]
        joined[1:] = ~same
    run_start = np.flatnonzero(joined)
    run_end = np.append(run_start[1:], len(differ)) - 1
    out: dict[int, list[Difference]] = {NOTE: [], DISAGREE: []}
    counts = {NOTE: 0, DISAGREE: 0}
    for first, last in zip(run_start.tolist(), run_end.tolist(), strict=True):
        kind = int(kind_of[first])
        counts[kind] += 1
        if len(out[kind]) >= MAX_LISTED:
            continue
        at, to = int(differ[first]), int(differ[last])
        fde = int(found.fde[at])
        begin = int(cfi.begin[fde])
        out[kind].append(
            Difference(
                "note" if kind == NOTE else "disagreement",
                namer(begin),
                begin,
                begin + int(cfi.size[fde]),
                begin + int(found.start[at]),
                begin + int(found.end[to]),
                describe(found.cfi.row(first), abi),
                describe(found.sframe.row(first), abi),
                REASONS[int(reasons[at])],
            )
        )
    return (out[DISAGREE], counts[DISAGREE]), (out[NOTE], counts[NOTE])


class _Namer:
    """The function symbol at an address (read from the symbol table on first use), or the
    PLT section it is in."""

    def __init__(self, image: ElfImage, place: _Place, plt: list[tuple[int, int, str]]) -> None:
        self.image = image
        self.place = place
        self.plt = plt
        self.starts: list[int] | None = None
        self.ends: list[int] = []
        self.names: list[str] = []

    def __call__(self, address: int) -> str:
        if self.starts is None:
            self._load()
        assert self.starts is not None
        import bisect

        at = bisect.bisect_right(self.starts, address) - 1
        if at >= 0 and (address == self.starts[at] or address < self.ends[at]):
            return self.names[at]
        # Linker-made code has no symbols: name its section.
        return next((name for lo, hi, name in self.plt if lo <= address < hi), "")

    def _load(self) -> None:
        symbols = []
        try:
            for symbol in self.image.symbols():
                value = symbol.value
                if self.place.layout is not None:
                    value += self.place.layout.get(symbol.section_index, 0)
                symbols.append((value, value + symbol.size, symbol.name))
        except SFrameError:
            symbols = []
        symbols.sort()
        self.starts = [s[0] for s in symbols]
        self.ends = [s[1] for s in symbols]
        self.names = [s[2] for s in symbols]


# -- many files ----------------------------------------------------------------------------
def collect(
    paths: Sequence[str],
    options: Options = Options(),
    *,
    jobs: int = 1,
    dask: str | None = None,
    dask_timeout: float = DASK_CONNECT_TIMEOUT,
    on_done: Callable[[int, FileReport], None] | None = None,
) -> list[FileReport]:
    """Reports for every path, in the order given: ``jobs`` processes, or the Dask cluster
    whose scheduler is at ``dask`` (one task per file, the same per-file function)."""
    return map_files(
        partial(verify_file_or_error, options=options),
        paths,
        jobs=jobs,
        dask=dask,
        dask_timeout=dask_timeout,
        on_done=on_done,
    )


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
    "MAX_LISTED",
    "NO_CFI",
    "NO_SFRAME",
    "REJECTED",
    "REPRESENTABLE",
    "Difference",
    "FileReport",
    "Options",
    "Summary",
    "Unmatched",
    "collect",
    "package_of",
    "summarize",
    "verify_file",
    "verify_file_or_error",
]
