"""Validation end to end: raw section bytes (:func:`validate_bytes`) and the SFrame section of
an ELF file against the file itself (:func:`validate_elf`: executable segments, PT_GNU_SFRAME,
the ELF machine).

The rules are the format's (:mod:`pysframe.format.validate`, and
:data:`~pysframe.format.findings.RULES` for their ids); validation never raises on bad input:
what cannot be decoded becomes a finding too.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import SFrameError, UnsortedError
from ..format.constants import PT_GNU_SFRAME, Abi
from ..format.findings import RULES as RULES
from ..format.findings import Finding as Finding
from ..format.findings import Severity as Severity
from ..format.findings import error
from ..format.layout import HEADER_AT
from ..format.merge import piece_offsets
from ..format.section import SFrameSection
from ..format.validate import check_structure
from ..format.validate import validate_section as validate_section
from ..format.view import Buffer

if TYPE_CHECKING:
    from ..elf.reader import ElfReader, ElfSegment
    from ..sources import ResolvedSFrame


def validate_bytes(
    data: Buffer,
    section_address: int = 0,
    *,
    kernel: bool = False,
    text_ranges: Sequence[tuple[int, int]] | None = None,
    sframe_segment_address: int | None = None,
    sframe_segment_size: int | None = None,
    relocatable: bool = False,
    address_gaps: bool = False,
    structure_checks: bool = True,
    foreign_endian: bool = False,
) -> list[Finding]:
    """Validate raw section bytes: structural problems that stop decoding become findings.

    The raw bytes are first checked for every problem that stops decoding, one finding each
    (:func:`pysframe.format.validate.check_structure`).  ``structure_checks=False`` leaves
    that out: the section is then opened at once, and what the decoder rejects is the one
    finding (``fde-sorted`` or ``decode``, with the decoder's message and offset).
    """
    if structure_checks:
        findings = check_structure(data)
        if findings:
            return findings
    pieces = _concatenated(data)
    try:
        section = SFrameSection(data, section_address)
    except UnsortedError as problem:
        return [error("fde-sorted", problem.message, None, problem.offset)]
    except SFrameError as problem:
        return [error("decode", problem.message, None, problem.offset)]
    return pieces + validate_section(
        section,
        kernel=kernel,
        text_ranges=text_ranges,
        sframe_segment_address=sframe_segment_address,
        sframe_segment_size=sframe_segment_size,
        relocatable=relocatable,
        address_gaps=address_gaps,
        foreign_endian=foreign_endian,
    )


def _concatenated(data: Buffer) -> list[Finding]:
    """An error for each SFrame section found after the first one's end
    (:func:`pysframe.format.merge.piece_offsets`): the bytes a linker concatenated."""
    offsets = piece_offsets(data)
    count = len(offsets)
    return [
        error(
            "concatenated",
            f"SFrame section {number} of {count} starts at byte {offset:#x}, after the first "
            "one's end: a linker concatenated its inputs' sections, and readers see the first "
            "only (pysframe repair merges them)",
            None,
            offset,
        )
        for number, offset in enumerate(offsets[1:], 2)
    ]


#: Program header flag: executable segment (System V gABI).
_PF_X = 0x1


def validate_elf(
    image: ElfReader,
    name: str | None = None,
    *,
    kernel: bool = False,
    address_gaps: bool = False,
    foreign_endian: bool = False,
) -> list[Finding]:
    """Validate the SFrame section of an open ELF file against itself and the file.

    Functions must lie in executable PT_LOAD segments; PT_GNU_SFRAME must locate the section,
    which must lie in a PT_LOAD segment; the section's ABI must match the ELF machine.
    Relocatable objects get their .sframe relocations applied as objdump applies them (V1 as
    stored) and no address checks.  Raises NoSFrameError when the file has no SFrame section,
    ElfError when it cannot be read.
    """
    from ..sources import locate_sframe

    found = locate_sframe(image, name)
    data = found.contents(relocate=True)
    relocatable = image.is_relocatable
    text_ranges: list[tuple[int, int]] | None = None
    segment_address = segment_size = None
    findings: list[Finding] = []
    if not relocatable:
        loads = image.load_segments()
        text_ranges = [(s.vaddr, s.vaddr + s.memsz) for s in loads if s.flags & _PF_X] or None
        segment = image.segment(PT_GNU_SFRAME)
        if segment is not None:
            segment_address, segment_size = segment.vaddr, segment.memsz
        findings += _overlapping_loads(loads)
        if not loads:
            findings.append(
                error(
                    "elf-segment",
                    "the file has no loadable segment (PT_LOAD): its program headers are "
                    "missing or damaged",
                )
            )
        end = found.address + len(data)
        if loads and not any(s.vaddr <= found.address and end <= s.vaddr + s.memsz for s in loads):
            findings.append(
                error(
                    "elf-segment",
                    f"the section [{found.address:#x}, {end:#x}) is not inside a loadable segment",
                )
            )
    findings += validate_bytes(
        data,
        found.address,
        kernel=kernel,
        text_ranges=text_ranges,
        sframe_segment_address=segment_address,
        sframe_segment_size=segment_size,
        relocatable=relocatable,
        address_gaps=address_gaps,
        foreign_endian=foreign_endian,
    )
    machine_abi = image.abi
    at_abi = HEADER_AT["abi"]
    if len(data) > at_abi and data[at_abi] in Abi._value2member_map_:
        abi = Abi(data[at_abi])
        if abi is not machine_abi:
            what = "a machine SFrame does not support" if machine_abi is None else machine_abi.name
            message = f"section ABI {abi.name} but the ELF file is for {what}"
            findings.append(error("abi", message, None, at_abi))
    return findings


def validate_generated(
    generated: ResolvedSFrame,
    *,
    kernel: bool = False,
    address_gaps: bool = False,
    foreign_endian: bool = False,
) -> list[Finding]:
    """Validate a section generated for a file without one (at the address and with the size
    ``generate --inject`` would give its PT_GNU_SFRAME)."""
    return validate_section(
        generated.section,
        kernel=kernel,
        sframe_segment_address=generated.address,
        sframe_segment_size=len(generated.stored),
        address_gaps=address_gaps,
        foreign_endian=foreign_endian,
    )


def _overlapping_loads(loads: list[ElfSegment]) -> list[Finding]:
    """An error for each pair of PT_LOAD segments whose memory ranges intersect (the loader
    maps them in order: the later one's pages replace the earlier one's)."""
    found = []
    ordered = sorted((s for s in loads if s.memsz), key=lambda s: s.vaddr)
    for before, after in itertools.pairwise(ordered):
        end = before.vaddr + before.memsz
        if after.vaddr < end:
            found.append(
                error(
                    "load-overlap",
                    f"PT_LOAD [{after.vaddr:#x}, {after.vaddr + after.memsz:#x}) overlaps "
                    f"PT_LOAD [{before.vaddr:#x}, {end:#x})",
                )
            )
    return found


__all__ = [
    "RULES",
    "Finding",
    "Severity",
    "validate_bytes",
    "validate_elf",
    "validate_generated",
    "validate_section",
]
