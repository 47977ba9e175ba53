"""A short summary of a file's SFrame section: version, ABI, flags, counts, text coverage."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import numpy as np

from ..dataclass import dataclass
from ..errors import SFrameError
from ..format import lookup
from ..format.constants import FdeType, Flags, PcType
from ..format.layout import fde_pc_type, fde_signal_frame, fde_type_of
from ..format.section import SFrameSection
from ..sources import Origin, ResolvedSFrame, resolve_sframe


@dataclass(frozen=True, slots=True)
class SectionInfo:
    file: str
    file_format: str
    section: str
    address: int
    size: int
    version: int
    abi: str
    flags: list[str]
    cfa_fixed_fp_offset: int
    cfa_fixed_ra_offset: int
    functions: int
    rows: int
    flex_functions: int
    pcmask_functions: int
    signal_functions: int
    #: Bytes of code the functions cover (their ranges merged; summed in relocatable objects,
    #: where every text section starts at 0).
    covered_bytes: int
    #: Bytes of executable code (:meth:`pysframe.elf.reader.ElfReader.code_bytes`).
    text_bytes: int
    #: Where the section came from (:class:`pysframe.sources.Origin`): "section" or "segment"
    #: (the file's own), "bare" (a bare section file) or "generated" (from the file's CFI).
    origin: str = "section"
    #: SFrame sections the file's section holds back to back (more than 1: a linker that does
    #: not know the format concatenated them; readers see the first only).
    pieces: int = 1
    #: Why the section is not the file's own, for a warning line; else None.
    note: str | None = None

    @property
    def coverage(self) -> float | None:
        return self.covered_bytes / self.text_bytes if self.text_bytes else None

    def as_dict(self) -> dict[str, Any]:
        """The fields and the coverage, JSON-ready."""
        return dict(asdict(self), coverage=self.coverage)


def covered_bytes(section: SFrameSection, relocatable: bool) -> int:
    """Bytes of code the functions of ``section`` cover: their ranges merged
    (:func:`pysframe.format.lookup.covered_bytes`), or (relocatable objects, where every text
    section starts at 0) summed."""
    table = section.table
    if relocatable:
        return int(table.size.sum())
    return lookup.covered_bytes(table.start, table.size.astype(np.uint64))


def section_info(
    path: str,
    name: str | None = None,
    *,
    raw: bool = False,
    address: int | None = None,
    generate: bool = False,
) -> SectionInfo:
    """Summarise the SFrame section of ``path`` as :func:`pysframe.sources.resolve_sframe`
    finds it: an ELF file's own, a bare section file (``raw``, or the SFrame magic; at
    ``address``), or one generated from the file's CFI when it has none (``generate``)."""
    found = resolve_sframe(path, section=name, raw=raw, address=address, generate=generate)
    return replace(_summary(found, found.address), pieces=found.pieces, note=found.note)


def _summary(other: ResolvedSFrame, address: int) -> SectionInfo:
    sframe = other.section
    try:
        table = sframe.table
        h = sframe.header
        return SectionInfo(
            file=other.path,
            file_format=other.file_format,
            section=other.name,
            address=address,
            size=len(sframe.data),
            version=int(h.version),
            abi=h.abi.name,
            flags=[f.name or "" for f in Flags if f.value and h.flags & f],
            cfa_fixed_fp_offset=h.cfa_fixed_fp_offset,
            cfa_fixed_ra_offset=h.cfa_fixed_ra_offset,
            functions=len(table),
            rows=sframe.num_rows,
            flex_functions=int(np.count_nonzero(fde_type_of(table.info2) == FdeType.FLEX)),
            pcmask_functions=int(np.count_nonzero(fde_pc_type(table.info) == PcType.MASK)),
            signal_functions=(
                int(np.count_nonzero(fde_signal_frame(table.info))) if h.version >= 3 else 0
            ),
            covered_bytes=covered_bytes(sframe, other.relocatable),
            text_bytes=other.code_bytes,
            origin=str(other.origin),
        )
    except SFrameError as error:
        raise error.at(path=other.path, section=other.error_section) from None


def _pieces(info: SectionInfo) -> str:
    if info.pieces == 1:
        return ""
    return f" holding {info.pieces} SFrame sections back to back (readers see the first only)"


def info_text(info: SectionInfo) -> str:
    """The summary as ``pysframe info`` prints it, one ``label: value`` line per fact."""
    coverage = f"{info.covered_bytes} of {info.text_bytes} bytes of executable code" + (
        f" ({100 * info.coverage:.1f}%)" if info.coverage is not None else ""
    )
    if info.origin == Origin.BARE:
        coverage = f"{info.covered_bytes} bytes (a bare section: no code to compare with)"
    fixed = f"FP {info.cfa_fixed_fp_offset}, RA {info.cfa_fixed_ra_offset}"
    origin: dict[str, str] = {
        Origin.GENERATED: " (generated from the file's CFI)",
        Origin.BARE: " (bare section file)",
        Origin.SEGMENT: " (found through PT_GNU_SFRAME)",
    }
    lines = [
        f"file:           {info.file} ({info.file_format})",
        f"section:        {info.section}{origin.get(info.origin, '')} at {info.address:#x}, "
        f"{info.size} bytes{_pieces(info)}",
        f"version:        {info.version}",
        f"abi:            {info.abi}",
        f"flags:          {', '.join(info.flags) or 'NONE'}",
        f"fixed offsets:  {fixed}",
        f"functions:      {info.functions} ({info.flex_functions} flex, "
        f"{info.pcmask_functions} pc-mask, {info.signal_functions} signal)",
        f"rows:           {info.rows}",
        f"text coverage:  {coverage}",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["SectionInfo", "covered_bytes", "info_text", "section_info"]
