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
(:mod:`pysframe.tools.verify_place`) and both ``.eh_frame`` and the SFrame section relocated
for that layout, so that each function has an address of its own.  The report's values are
those of :mod:`pysframe.tools.verify_report`.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from ..elf.layout import SHF_ALLOC, SHF_EXECINSTR, SHT_NOBITS
from ..elf.reader import ElfReader
from ..elf.sframe import ElfSFrame
from ..errors import ElfError, NoSFrameError, NotSFrameDataError, SFrameError
from ..format.constants import Abi, Version
from ..format.findings import Severity
from ..format.section import SFrameSection
from ..generate.cfi import CfiFormat, PointerContext
from ..generate.interpret import CfiTable, interpret_cfi
from ..generate.locate import find_eh_frame
from ..sources import Origin, locate_sframe
from .parallel import DASK_CONNECT_TIMEOUT, map_files
from .verify_compare import (
    CombinedCfi,
    combine,
    coverage,
    segments,
    signal_frames_without_rows,
)
from .verify_place import Namer, Placement
from .verify_report import (
    CONSISTENT,
    DISAGREEMENT,
    ERROR,
    MAX_LISTED,
    NO_CFI,
    NO_SFRAME,
    NOT_COMPARED,
    PLT_SECTIONS,
    REJECTED,
    Difference,
    FileReport,
    Options,
    Unmatched,
)
from .verify_rules import (
    DISAGREE,
    NOTE,
    PLT_NOT_DESCRIBED,
    REASONS,
    classify,
    describe,
    without_sframe_reasons,
)

#: Verify with the default options.
DEFAULT_OPTIONS = Options()


# -- one file --------------------------------------------------------------------------------
def verify_file(path: str | os.PathLike[str], options: Options = DEFAULT_OPTIONS) -> FileReport:
    """Verify one ELF file; raises SFrameError when it cannot be read at all."""
    name = os.fspath(path)
    began = time.perf_counter()
    with ElfReader.open(name) as image:
        report = _verify_image(image, options)
    return replace(report, seconds=time.perf_counter() - began)


def verify_file_or_error(path: str, options: Options = DEFAULT_OPTIONS) -> FileReport:
    """:func:`verify_file`, with a failure recorded as an ``error`` report instead of raised."""
    try:
        return verify_file(path, options)
    except SFrameError as error:
        return FileReport(path=path, status=ERROR, error=str(error.at(path=path)))


def _verify_image(image: ElfReader, options: Options) -> FileReport:
    abi = image.abi
    report = FileReport(path=image.path, abi=abi.name if abi is not None else "")
    try:
        found: ElfSFrame | None = locate_sframe(image, options.section)
    except NotSFrameDataError as error:
        return replace(report, status=NO_SFRAME, error=str(error))
    except NoSFrameError as error:
        if abi is None:
            # Nothing to verify, as for any file without SFrame: 32-bit x86 helpers in a
            # library tree (perf's perf-read-vdso32) are not errors of a directory run.
            return replace(report, status=NO_SFRAME, error=str(_no_abi(image)))
        if not options.generate:
            return replace(report, status=NO_SFRAME, error=str(error))
        found = None
    if abi is None:
        raise _no_abi(image)
    place = Placement(image)
    text = [
        (place.address(s.index, s.address), s.size, s.name)
        for s in image.sections()
        if s.flags & SHF_EXECINSTR and s.flags & SHF_ALLOC and s.size and s.type != SHT_NOBITS
    ]
    text_bytes = sum(size for _a, size, _n in text)
    if not image.has_section_headers():  # headers stripped: the executable segments are the text
        text_bytes = image.code_bytes()
    report = replace(report, abi=abi.name, text_bytes=text_bytes)
    tables = _cfi_tables(image, place, abi)
    section, origin, kernel = _sframe_section(image, place, abi, tables, options, found)
    if section is None:
        return replace(
            report, status=NO_SFRAME, cfi_sources=tuple(t.source for t in tables), error=origin
        )
    report = replace(
        report,
        origin=origin,
        sframe_version=int(section.version),
        cfi_sources=tuple(t.source for t in tables),
        kernel_findings=tuple(kernel),
    )
    if section.abi is not abi:
        raise ElfError(
            f"the SFrame section is for {section.abi.name}, the file for {abi.name}",
            path=image.path,
        )
    plt = [(lo, lo + size, name) for lo, size, name in text if name in PLT_SECTIONS]
    return _compare(report, image, place, section, combine(tables), abi, plt)


def _no_abi(image: ElfReader) -> ElfError:
    return ElfError(f"SFrame defines no ABI for {image.file_format}", path=image.path)


def _cfi_tables(image: ElfReader, place: Placement, abi: Abi) -> list[CfiTable]:
    """The CFI of .eh_frame, then of .debug_frame (which the combination filters)."""
    tables = []
    for name, cfi_format in (
        (".eh_frame", CfiFormat.EH_FRAME),
        (".debug_frame", CfiFormat.DEBUG_FRAME),
    ):
        # Without section headers, .eh_frame is found through PT_GNU_EH_FRAME.
        sec = find_eh_frame(image) if cfi_format is CfiFormat.EH_FRAME else image.section(name)
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
            )
        )
    return tables


def _pointers(image: ElfReader, place: Placement) -> PointerContext:
    """Bases of .eh_frame pointer encodings (textrel: .text, datarel: .got)."""
    text = image.section(".text")
    got = image.section(".got")
    return PointerContext(
        0,
        place.address(text.index, text.address) if text is not None else None,
        place.address(got.index, got.address) if got is not None else None,
    )


def _sframe_section(
    image: ElfReader,
    place: Placement,
    abi: Abi,
    tables: list[CfiTable],
    options: Options,
    found: ElfSFrame | None,
) -> tuple[SFrameSection | None, str, list[str]]:
    """The SFrame section to verify (the file's own ``found``, placed; or one generated from
    the CFI), its origin (or why there is none), and the kernel's findings on it."""
    kernel: list[str] = []
    if found is not None:
        address = place.address(found.section.index, found.address)
        try:
            section = SFrameSection.from_bytes(place.sframe(found.section, found.stored), address)
            section.table  # noqa: B018  (reads and checks every FDE before anything relies on it)
        except SFrameError as error:
            raise error.at(path=image.path, section=found.name) from None
        if options.kernel:
            from .validate import validate_elf

            findings = validate_elf(image, options.section, kernel=True)
            kernel = [str(f) for f in findings if f.severity is Severity.ERROR]
        origin = Origin.SEGMENT if found.section.index < 0 else Origin.SECTION
        return section, str(origin), kernel
    if place.layout is None:
        from ..sources import generated_sframe

        generated = generated_sframe(image)
        section, size = generated.section, len(generated.stored)
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
        section, size = result.section, len(result.data)
    if options.kernel:
        from .validate import validate_section

        findings = validate_section(
            section,
            kernel=True,
            sframe_segment_address=section.section_address,
            sframe_segment_size=size,
        )
        kernel = [str(f) for f in findings if f.severity is Severity.ERROR]
    return section, str(Origin.GENERATED), kernel


def _compare(
    report: FileReport,
    image: ElfReader,
    place: Placement,
    section: SFrameSection,
    cfi: CombinedCfi,
    abi: Abi,
    plt: list[tuple[int, int, str]],
) -> FileReport:
    """The report of ``section`` against ``cfi``: the rules compared at every PC, and what
    either side has that the other has not."""
    covered = coverage(section, cfi)
    compared = covered.compared
    found = segments(section, cfi, compared, abi)
    length = found.end - found.start
    kinds, reasons = classify(found, cfi, section, abi, plt, signal_frames_without_rows(section))
    namer = Namer(image, place, plt)
    disagreements, notes = _differences(found, kinds, reasons, cfi, abi, namer)
    bad_bytes = int(length[kinds == DISAGREE].sum())
    noted_bytes = int(length[kinds == NOTE].sum())
    status = CONSISTENT
    if not compared.any():
        # Nothing was compared: never "consistent" (a section that describes other code).
        status = NOT_COMPARED if bool(cfi.usable.any()) else NO_CFI
    if report.kernel_findings:
        status = REJECTED
    if disagreements[1]:
        status = DISAGREEMENT
    report = replace(
        report,
        status=status,
        cfi_functions=int((cfi.size > 0).sum()),
        cfi_bytes=int(cfi.size[cfi.size > 0].sum()),
        compared_functions=int(compared.sum()),
        compared_bytes=int(length.sum()),
        agreeing_bytes=int(length.sum()) - bad_bytes - noted_bytes,
        noted_bytes=noted_bytes,
        disagreeing_bytes=bad_bytes,
        disagreement_count=disagreements[1],
        note_count=notes[1],
        disagreements=tuple(disagreements[0]),
        notes=tuple(notes[0]),
    )
    report = _without_sframe(report, cfi, compared, section.version, abi, plt, namer)
    return _without_cfi(report, section, cfi, covered.without_cfi, namer)


def _without_sframe(
    report: FileReport,
    cfi: CombinedCfi,
    compared: np.ndarray,
    version: Version,
    abi: Abi,
    plt: list[tuple[int, int, str]],
    namer: Callable[[int], str],
) -> FileReport:
    """The CFI functions without SFrame, with gas' reasons."""
    without = np.flatnonzero(cfi.usable & ~compared)
    reasons = _without_sframe_reasons(cfi, without, abi, version, plt)
    return replace(
        report,
        without_sframe_count=len(without),
        without_sframe_bytes=int(cfi.size[without].sum()),
        without_sframe=tuple(
            Unmatched(
                namer(int(cfi.begin[k])), int(cfi.begin[k]), int(cfi.begin[k] + cfi.size[k]), r
            )
            for k, r in zip(without[:MAX_LISTED].tolist(), reasons, strict=False)
        ),
        without_sframe_reasons=tuple(Counter(reasons).most_common()),
    )


def _without_cfi(
    report: FileReport,
    section: SFrameSection,
    cfi: CombinedCfi,
    sframe_only: np.ndarray,
    namer: Callable[[int], str],
) -> FileReport:
    """The SFrame functions without CFI, and the CFI functions whose CFI cannot be read."""
    table = section.table
    sframe_without = np.flatnonzero(sframe_only)
    unreadable = [
        (k, table_index, local)
        for k, (table_index, local) in enumerate(
            zip(cfi.table.tolist(), cfi.local.tolist(), strict=True)
        )
        if not cfi.usable[k] and cfi.size[k] > 0
    ]
    return replace(
        report,
        sframe_functions=len(section),
        sframe_bytes=int(table.size.sum()),
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
        fdes = [int(cfi.local[functions[p]]) for p in positions]
        spans = [table.spans[fde] for fde in fdes]
        from ..generate.driver import skip_reasons

        reasons = skip_reasons(table.data, table.cies, spans, abi, version)
        explained = without_sframe_reasons(reasons, table, fdes, version)
        for position, reason in zip(positions, explained, strict=True):
            out[position] = reason
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


# -- many files ----------------------------------------------------------------------------
def collect(
    paths: Sequence[str],
    options: Options = DEFAULT_OPTIONS,
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


__all__ = ["collect", "verify_file", "verify_file_or_error"]
