"""Validation of a section: every check the Linux kernel makes before it uses an SFrame
section, and the invariants GNU ld relies on when it merges sections.

Each problem is a :class:`~pysframe.format.findings.Finding` (severity, rule id, function
index, byte offset, message); :data:`~pysframe.format.findings.RULES` lists the rule ids.
:func:`validate_section` checks a decoded section, :func:`check_structure` the raw bytes a
section cannot be opened without (one finding per problem where the decoder stops at the
first); rows and FRE blocks are :mod:`pysframe.format.validate_rows`'s.  Reading the ranges
and segments to check against from an ELF file, and validating raw bytes end to end, is
:mod:`pysframe.tools.validate`'s.

Profiles.  By default the rules are those of the format itself (V1 spec, V2 spec 2.x;
docs/format.md, "Errata 1", "Errata 2" and "V3 changes"), so every section GNU as and ld write
passes, whatever its version.  ``kernel=True`` adds what the Linux kernel's SFrame unwinder
(kernel/unwind/sframe.c, ``sframe_read_header`` and ``sframe_validate_section``) requires on
top: version 3, the FDE_SORTED and FDE_FUNC_START_PCREL flags, no auxiliary header, at least
one FDE and one FRE, the FRE sub-section after the FDE index, control-word register numbers
below 32 and a PT_GNU_SFRAME segment (docs/format.md, "ELF section and segment") locating the
section.

Gaps.  Address gaps between consecutive functions are normal: every file GNU ld links has
them (alignment padding, start-up code without CFI), and the kernel and libsframe answer a PC
in a gap with "no row".  They are therefore not reported unless asked for
(``address_gaps=True``, ``pysframe check --gaps``), and then as warnings.  Unused bytes
between FRE blocks inside the declared ``sfh_fre_len`` are a warning (``fre-gap``); a
``sfh_fre_len`` that does not end where the last FRE block ends is an error (``fre-len``).

Relocatable objects.  Before linking, functions of different text sections share addresses,
so the order, overlap and text-range checks are skipped for them (``relocatable=True``);
GNU as never sets FDE_SORTED in an object file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import BadMagicError, SFrameError, TruncatedError
from .constants import KNOWN_FLAGS, Abi, FdeType, Flags, FreType, PcType, Version
from .decode import fde_position, parse_header, probe, read_fde_table
from .findings import Finding, error, warning
from .layout import (
    FDE_AT,
    FDE_INFO2_UNUSED,
    FDE_INFO_UNUSED,
    FDE_SIZE,
    HEADER_AT,
    HEADER_FDE_OFF_AT,
    HEADER_FRE_LEN_AT,
    HEADER_FRE_OFF_AT,
    HEADER_NAMES,
    HEADER_NUM_FDES_AT,
    HEADER_SIZE,
    V3_ATTR_AT,
    V3_ATTR_SIZE,
    fde_fre_type,
    fde_pc_type,
    fde_struct,
    fde_type_of,
    fre_min_length,
    header_struct,
    v3_attr_struct,
)
from .validate_rows import check_rows

if TYPE_CHECKING:
    from .view import Buffer, SectionView


def validate_section(
    section: SectionView,
    *,
    text_ranges: Sequence[tuple[int, int]] | None = None,
    sframe_segment_address: int | None = None,
    sframe_segment_size: int | None = None,
    kernel: bool = False,
    relocatable: bool = False,
    address_gaps: bool = False,
    foreign_endian: bool = False,
    scalar: bool = False,
) -> list[Finding]:
    """Check a decoded section; see :data:`~pysframe.format.findings.RULES`.

    ``text_ranges``: [start, end) address ranges functions must lie in (the executable
    segments).  ``sframe_segment_address`` / ``sframe_segment_size``: PT_GNU_SFRAME's p_vaddr
    and p_memsz, compared with ``section.section_address`` and the section's size.
    ``foreign_endian``: also warn about what readers of the other byte order reject (shared
    FRE blocks).

    The functions and rows are checked on numpy columns, and only those where a check fails
    are looked at one by one, to word the findings.  ``scalar=True`` looks at every function
    and row one by one: the reference the columns are tested against (the same findings).
    """
    try:
        section.table  # noqa: B018  (reads and checks every FDE, once)
    except SFrameError as problem:
        return [error("decode", problem.description, None, problem.offset)]
    findings: list[Finding] = []
    findings += _check_header(section, kernel)
    findings += _check_functions(section, kernel, scalar)
    if not relocatable:
        findings += _check_addresses(section, text_ranges, address_gaps, scalar)
    findings += check_rows(section, kernel, foreign_endian, scalar=scalar)
    findings += _check_segment(section, sframe_segment_address, sframe_segment_size, kernel)
    return findings


# ---------------------------------------------------------------------------------------------
# Structure (what the decoder needs before it can build a section)


def check_structure(data: Buffer, *, scalar: bool = False) -> list[Finding]:
    """Preamble, header and FDE checks the decoder would stop at, one finding each; empty when
    a section can be opened and its FDE table read.

    The FDEs are first read as the decoder reads them, all at once
    (:func:`~pysframe.format.decode.read_fde_table`, which stops at the first problem); only
    when that fails are they checked one by one, for every problem.  ``scalar=True`` checks
    them one by one in any case (the reference)."""
    size = len(data)
    try:
        big_endian, version = probe(data)
    except TruncatedError:
        message = f"section of {size} bytes is shorter than the preamble"
        return [error("truncated", message, None, 0)]
    except BadMagicError:
        return [error("magic", f"bad magic {bytes(data[: HEADER_AT['version']]).hex()}", None, 0)]
    except SFrameError:
        at = HEADER_AT["version"]
        return [error("version", f"unsupported version {data[at]}", None, at)]
    if size < HEADER_SIZE:
        return [error("truncated", f"section of {size} bytes is shorter than the header", None, 0)]
    fields = dict(zip(HEADER_NAMES, header_struct(big_endian).unpack_from(data, 0), strict=True))
    abi, aux_len = fields["abi"], fields["auxhdr_len"]
    if abi not in Abi._value2member_map_:
        return [error("abi", f"unknown ABI/arch identifier {abi}", None, HEADER_AT["abi"])]
    header_end = HEADER_SIZE + aux_len
    if header_end > size:
        message = f"auxiliary header of {aux_len} bytes runs past the end"
        return [error("truncated", message, None, HEADER_AT["auxhdr_len"])]
    num_fdes, fre_len = fields["num_fdes"], fields["fre_len"]
    fde_start = header_end + fields["fde_off"]
    fde_end = fde_start + num_fdes * FDE_SIZE[version]
    fre_start = header_end + fields["fre_off"]
    fre_end = fre_start + fre_len
    findings = []
    if fde_end > size:
        findings.append(
            error(
                "subsection-bounds",
                f"FDE sub-section [{fde_start:#x}, {fde_end:#x}) ({num_fdes} FDEs) runs past "
                f"the end of the {size}-byte section",
                None,
                HEADER_FDE_OFF_AT,
            )
        )
    if fre_end > size:
        findings.append(
            error(
                "subsection-bounds",
                f"FRE sub-section [{fre_start:#x}, {fre_end:#x}) runs past the end of the "
                f"{size}-byte section",
                None,
                HEADER_FRE_OFF_AT,
            )
        )
    if findings:
        return findings
    if not scalar and _fde_table_reads(data):
        return []
    return _check_fde_fields(data, big_endian, version, num_fdes, fde_start, fre_start, fre_len)


def _fde_table_reads(data: Buffer) -> bool:
    """Whether the decoder reads every FDE without an error.  It checks, in bulk, what
    :func:`_check_fde_fields` checks one FDE at a time (the FRE and FDE types, the attribute
    records and FREs inside the FRE sub-section, blocks that do not overlap) and a bound of
    its own (FREs per byte) that the checks here leave to the "decode" finding."""
    try:
        header = parse_header(data)
        read_fde_table(data, header, np.zeros(header.num_fdes, dtype=np.uint64))
    except SFrameError:
        return False
    return True


def _check_fde_fields(
    data: Buffer,
    big_endian: bool,
    version: Version,
    num_fdes: int,
    fde_start: int,
    fre_start: int,
    fre_len: int,
) -> list[Finding]:
    """FRE type, FDE type, attribute-record bounds and FRE counts of every function."""
    findings: list[Finding] = []
    fde_size = FDE_SIZE[version]
    unpack_fde = fde_struct(version, big_endian).unpack_from
    # Bytes each distinct block takes at least: blocks at different offsets do not share
    # bytes (functions naming one offset share its block; a V2 prefix counts once).
    needed: dict[int, int] = {}
    for index in range(num_fdes):  # bounded: the FDE table fits in the section
        at = fde_start + index * fde_size
        if version is Version.V3:
            _, _, fre_off = unpack_fde(data, at)
            fields = _attribute_record(data, big_endian, index, at, fre_off, fre_start, fre_len)
            if isinstance(fields, Finding):
                findings.append(fields)
                continue
            num_fres, info, info_at, problem = fields
            findings += problem
            record_size = V3_ATTR_SIZE
        else:
            _, _, fre_off, num_fres, info, *_ = unpack_fde(data, at)
            info_at = at + FDE_AT[version]["info"]
            record_size = 0
        if fde_fre_type(info) > FreType.ADDR4:
            findings.append(
                error("fre-type", f"invalid FRE type {fde_fre_type(info)}", index, info_at)
            )
            continue
        least = num_fres * fre_min_length(fde_fre_type(info))  # V2 spec 2.4
        needed[fre_off] = max(needed.get(fre_off, 0), record_size + least)
        room = fre_len - fre_off - record_size
        if least > room or room < 0:
            findings.append(
                error(
                    "fre-bounds",
                    f"{num_fres} FREs at FRE offset {fre_off} do not fit in the {fre_len}-byte "
                    "FRE sub-section",
                    index,
                    at,
                )
            )
    if not findings and sum(needed.values()) > fre_len:
        findings.append(
            error(
                "fre-block-overlap",
                f"the functions' FREs need at least {sum(needed.values())} bytes but the FRE "
                f"sub-section has {fre_len}: FRE blocks overlap",
                None,
                HEADER_FRE_LEN_AT,
            )
        )
    return findings


def _attribute_record(
    data: Buffer, big_endian: bool, index: int, at: int, fre_off: int, fre_start: int,
    fre_len: int,
) -> Finding | tuple[int, int, int, list[Finding]]:
    """V3 function ``index`` (FDE index entry at ``at``): its attribute record's num_fres,
    info and where that is, and a finding if its FDE type is invalid; or the finding that the
    record lies outside the FRE sub-section."""
    if fre_off + V3_ATTR_SIZE > fre_len:
        return error(
            "attribute-bounds",
            f"attribute record at FRE offset {fre_off} runs past the {fre_len}-byte FRE "
            "sub-section",
            index,
            at + FDE_AT[Version.V3]["fre_off"],
        )
    record = fre_start + fre_off
    num_fres, info, info2, _ = v3_attr_struct(big_endian).unpack_from(data, record)
    problem = []
    if fde_type_of(info2) > FdeType.FLEX:
        message = f"invalid FDE type {fde_type_of(info2)}"
        problem.append(error("fde-type", message, index, record + V3_ATTR_AT["info2"]))
    return num_fres, info, record + V3_ATTR_AT["info"], problem


# ---------------------------------------------------------------------------------------------
# Header


def _check_header(section: SectionView, kernel: bool) -> list[Finding]:
    h = section.header
    findings = []
    unknown = int(h.flags) & ~int(KNOWN_FLAGS[h.version])
    if unknown:
        findings.append(
            error(
                "flags",
                f"flags {unknown:#x} are not defined in V{int(h.version)}",
                None,
                HEADER_AT["flags"],
            )
        )
    if h.abi.big_endian != h.big_endian:
        order = "big" if h.big_endian else "little"
        findings.append(
            error(
                "abi",
                f"ABI {h.abi.name} does not match the {order}-endian section",
                None,
                HEADER_AT["abi"],
            )
        )
    if kernel:
        findings += _check_kernel_header(section)
    data_size = len(section.data)
    fde_start = h.size + h.fde_offset
    fde_end = fde_start + h.num_fdes * FDE_SIZE[h.version]
    fre_start, fre_end = h.fre_start, h.fre_end
    if fde_start < fre_end and fre_start < fde_end:
        findings.append(
            error(
                "subsection-bounds",
                f"FDE sub-section [{fde_start:#x}, {fde_end:#x}) and FRE sub-section "
                f"[{fre_start:#x}, {fre_end:#x}) overlap",
                None,
                HEADER_FDE_OFF_AT,
            )
        )
    elif kernel and fre_start < fde_end:
        findings.append(
            error(
                "subsection-bounds",
                f"FRE sub-section at {fre_start:#x} precedes the FDE index ending at {fde_end:#x}",
                None,
                HEADER_FRE_OFF_AT,
            )
        )
    if kernel and h.size >= data_size:
        findings.append(error("truncated", "nothing follows the header", None, 0))
    return findings


def _check_kernel_header(section: SectionView) -> list[Finding]:
    h = section.header
    findings = []
    if h.version is not Version.V3:
        findings.append(
            error(
                "version",
                f"version {int(h.version)} (the kernel reads 3)",
                None,
                HEADER_AT["version"],
            )
        )
    missing = [
        flag.name or ""
        for flag in (Flags.FDE_SORTED, Flags.FDE_FUNC_START_PCREL)
        if not h.flags & flag
    ]
    if missing:
        findings.append(
            error("flags", f"flag(s) {', '.join(missing)} not set", None, HEADER_AT["flags"])
        )
    if h.auxiliary_header:
        findings.append(
            error(
                "auxiliary-header",
                f"auxiliary header of {len(h.auxiliary_header)} bytes",
                None,
                HEADER_AT["auxhdr_len"],
            )
        )
    if h.num_fdes == 0 or h.num_fres == 0:
        findings.append(
            error(
                "empty",
                f"{h.num_fdes} FDEs and {h.num_fres} FREs (need at least one)",
                None,
                HEADER_NUM_FDES_AT,
            )
        )
    return findings


# ---------------------------------------------------------------------------------------------
# Functions (FDEs)


def _info_offset(section: SectionView, index: int) -> int:
    """Where function ``index``'s info byte is (V3: in its attribute record)."""
    h = section.header
    if h.version is Version.V3:
        return h.fre_start + int(section.table.fre_offset[index]) + V3_ATTR_AT["info"]
    return fde_position(h, index) + FDE_AT[h.version]["info"]


# Two findings point at fixed FDE offsets whatever the version: "fde-size" at byte 8 (the size
# field of a V3 FDE; V1 and V2 keep it at byte 4) and "rep-size" at byte 17 (V2's rep_size;
# V3 keeps it in the attribute record).  Both are kept as reported so far: correcting them is
# a change of output of its own.
_FDE_SIZE_FINDING_AT = FDE_AT[Version.V3]["size"]
_REP_SIZE_FINDING_AT = FDE_AT[Version.V2]["rep_size"]


def _check_functions(section: SectionView, kernel: bool, scalar: bool) -> list[Finding]:
    suspects: Iterable[int] = range(len(section.table))
    if not scalar:
        suspects = np.flatnonzero(_function_suspects(section, kernel)).tolist()
    findings = []
    for index in suspects:
        findings += _check_function(section, index, kernel)
    return findings


def _function_suspects(section: SectionView, kernel: bool) -> npt.NDArray[np.bool_]:
    """Per function: whether :func:`_check_function` finds something (the same tests on the
    FDE table's columns)."""
    h, t = section.header, section.table
    suspect: npt.NDArray[np.bool_] = t.size == 0
    if h.sorted or kernel:
        suspect[1:] |= t.start[1:] <= t.start[:-1]
    if h.version is not Version.V1:
        suspect |= (fde_pc_type(t.info) == PcType.MASK) & (t.rep_size == 0)
    suspect |= (t.info & FDE_INFO_UNUSED[h.version]) != 0
    if h.version is Version.V3:
        suspect |= (t.info2 & FDE_INFO2_UNUSED) != 0
    if h.version is Version.V2:
        suspect |= t.padding != 0
    return suspect


def _check_function(section: SectionView, index: int, kernel: bool) -> list[Finding]:
    """Function ``index``'s FDE: in order after the one before it, its size, rep_size and
    unused bits."""
    h, t = section.header, section.table
    start, size = int(t.start[index]), int(t.size[index])
    info, at = int(t.info[index]), fde_position(h, index)
    findings = []
    if (h.sorted or kernel) and index > 0 and start <= (previous := int(t.start[index - 1])):
        what = "FDE_SORTED is set" if h.sorted else "the kernel needs sorted FDEs"
        findings.append(
            error(
                "fde-sorted",
                f"starts at {start:#x}, not after function {index - 1} at {previous:#x} "
                f"({what})",
                index,
                at,
            )
        )
    if size == 0:
        message = "size 0: no PC ever matches it"
        findings.append(warning("fde-size", message, index, at + _FDE_SIZE_FINDING_AT))
    pc_mask = fde_pc_type(info) == PcType.MASK
    if pc_mask and h.version is not Version.V1 and int(t.rep_size[index]) == 0:
        message = "PCMASK function with repetition size 0"
        findings.append(error("rep-size", message, index, at + _REP_SIZE_FINDING_AT))
    findings += _reserved_bits(section, index, info)
    return findings


def _reserved_bits(section: SectionView, index: int, info: int) -> list[Finding]:
    h, t = section.header, section.table
    findings = []
    # V1/V2 info: bits 0-3 FRE type, 4 PC type, 5 pauth key, 6-7 unused (V2 spec 2.3.1).
    # V3 info: bit 6 unused, bit 7 signal frame; info2 bits 5-7 unused (docs/format.md,
    # "FDE info byte" and "V3 FDE").
    unused = FDE_INFO_UNUSED[h.version]
    if info & unused:
        findings.append(
            warning(
                "reserved-bits",
                f"unused bits {info & unused:#x} set in info {info:#04x}",
                index,
                _info_offset(section, index),
            )
        )
    info2 = int(t.info2[index])
    if h.version is Version.V3 and info2 & FDE_INFO2_UNUSED:
        findings.append(
            warning(
                "reserved-bits",
                f"unused bits {info2 & FDE_INFO2_UNUSED:#x} set in info2 {info2:#04x}",
                index,
                h.fre_start + int(t.fre_offset[index]) + V3_ATTR_AT["info2"],
            )
        )
    if h.version is Version.V2 and int(t.padding[index]):
        findings.append(
            warning(
                "reserved-bits",
                f"padding {int(t.padding[index]):#x} is not zero",
                index,
                fde_position(h, index) + FDE_AT[Version.V2]["padding"],
            )
        )
    return findings


def _check_addresses(
    section: SectionView,
    text_ranges: Sequence[tuple[int, int]] | None,
    address_gaps: bool,
    scalar: bool,
) -> list[Finding]:
    """Overlaps, optional gaps, and text ranges, over the functions in address order."""
    t = section.table
    order = np.argsort(t.start, kind="stable")  # by start, then index
    pairs = np.arange(max(len(order) - 1, 0))
    if not scalar:
        # Sorted, so the distance from one start to the next is exact in 64 bits.
        step = t.start[order[1:]] - t.start[order[:-1]]
        size = t.size[order[:-1]].astype(np.uint64)
        near = (size > step) | (size < step) if address_gaps else size > step
        pairs = np.flatnonzero(near)
    order_list = order.tolist()
    findings = []
    for pair in pairs.tolist():
        finding = _neighbours(section, order_list[pair], order_list[pair + 1], address_gaps)
        if finding is not None:
            findings.append(finding)
    if text_ranges is not None:
        outside: Iterable[int] = range(len(t))
        if not scalar and all(low >= 0 and high < 1 << 64 for low, high in text_ranges):
            outside = np.flatnonzero(~_inside(section, text_ranges)).tolist()
        for index in outside:
            findings += _check_text(section, index, text_ranges)
    return findings


def _neighbours(section: SectionView, before: int, after: int, gaps: bool) -> Finding | None:
    """Function ``after`` overlaps ``before``, the one starting before it, or (with ``gaps``)
    leaves a gap after it."""
    h, t = section.header, section.table
    end = int(t.start[before]) + int(t.size[before])
    start = int(t.start[after])
    if end > start:
        return error(
            "fde-overlap",
            f"[{start:#x}, {start + int(t.size[after]):#x}) overlaps function {before} "
            f"[{int(t.start[before]):#x}, {end:#x})",
            after,
            fde_position(h, after),
        )
    if gaps and end < start:
        return warning(
            "fde-gap",
            f"{start - end} bytes [{end:#x}, {start:#x}) between function {before} and "
            "this one have no function",
            after,
            fde_position(h, after),
        )
    return None


def _inside(
    section: SectionView, text_ranges: Sequence[tuple[int, int]]
) -> npt.NDArray[np.bool_]:
    """Per function: whether it lies in one of ``text_ranges`` (bounds below 2**64)."""
    t = section.table
    start, size = t.start, t.size.astype(np.uint64)
    inside = np.zeros(len(t), dtype=bool)
    for low, high in text_ranges:
        within = (start >= np.uint64(low)) & (start <= np.uint64(high))
        room = np.where(within, np.uint64(high) - start, np.uint64(0))
        inside |= within & (size <= room)
    return inside


def _check_text(
    section: SectionView, index: int, text_ranges: Sequence[tuple[int, int]]
) -> list[Finding]:
    t = section.table
    start = int(t.start[index])
    end = start + int(t.size[index])
    if any(low <= start and end <= high for low, high in text_ranges):
        return []
    message = f"[{start:#x}, {end:#x}) is not inside an executable segment"
    return [error("fde-text", message, index, fde_position(section.header, index))]


# ---------------------------------------------------------------------------------------------
# The segment that locates the section (PT_GNU_SFRAME, errata 1)


def _check_segment(
    section: SectionView,
    segment_address: int | None,
    segment_size: int | None,
    kernel: bool,
) -> list[Finding]:
    size = len(section.data)
    if segment_address is None:
        if kernel:
            return [error("elf-segment", "no PT_GNU_SFRAME segment locates the section")]
        return []
    findings = []
    if segment_address != section.section_address:
        findings.append(
            error(
                "elf-segment",
                f"PT_GNU_SFRAME is at {segment_address:#x} but the section is at "
                f"{section.section_address:#x}",
            )
        )
    elif segment_size is not None and segment_size < size:
        findings.append(
            error(
                "elf-segment",
                f"PT_GNU_SFRAME covers {segment_size} bytes, less than the {size}-byte section",
            )
        )
    return findings
