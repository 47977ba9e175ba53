"""Validation of a section: every check the Linux kernel makes before it uses an SFrame
section, and the invariants GNU ld relies on when it merges sections.

Each problem is a :class:`~pysframe.format.findings.Finding` (severity, rule id, function
index, byte offset, message); :data:`~pysframe.format.findings.RULES` lists the rule ids.
:func:`validate_section` checks a decoded section, :func:`check_structure` the raw bytes a
section cannot be opened without (one finding per problem where the decoder stops at the
first), and :func:`check_rows` the rows and FRE blocks.  Reading the ranges
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

Validation of rows (FREs) and FRE blocks: each function's FREs read from the raw bytes, their
start offsets, data words and FLEX control words, and how the functions' FRE blocks fill the
FRE sub-section.  Part of :func:`pysframe.format.validate.validate_section`; the rule ids are
in :data:`pysframe.format.findings.RULES`.

In bulk: every row is read at once (:func:`pysframe.format.walk.scan_stored_rows`, as the
dump reads them; a function whose walk stops keeps the FREs before), and the checks that hold
row by row are made on columns: start offsets in order and inside the function, and each
distinct row form's words checked once.  Only the rows where one of them fails, and the FRE
where each walk stops, are then worded, in function and FRE order; the FRE blocks are placed
the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..dataclass import dataclass
from ..errors import BadMagicError, SFrameError, TruncatedError
from .constants import KNOWN_FLAGS, Abi, FdeType, Flags, FreType, PcType, Version
from .decode import fde_position, parse_header, probe, read_fde_table
from .findings import Finding, error, warning
from .layout import (
    FDE_AT,
    FDE_INFO2_UNUSED,
    FDE_INFO_UNUSED,
    FDE_SIZE,
    FLEX_UNUSED,
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
    flex_reg,
    flex_reg_p,
    fre_address_size,
    fre_mangled_ra,
    fre_min_length,
    fre_word_count,
    fre_word_size,
    header_struct,
    v3_attr_struct,
    word_mask,
)
from .walk import StoredRows, fre_form, scan_stored_rows, walk_problem

if TYPE_CHECKING:
    from .model import Header
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
) -> list[Finding]:
    """Check a decoded section; see :data:`~pysframe.format.findings.RULES`.

    ``text_ranges``: [start, end) address ranges functions must lie in (the executable
    segments).  ``sframe_segment_address`` / ``sframe_segment_size``: PT_GNU_SFRAME's p_vaddr
    and p_memsz, compared with ``section.section_address`` and the section's size.
    ``foreign_endian``: also warn about what readers of the other byte order reject (shared
    FRE blocks).

    The functions and rows are checked on numpy columns, and only those where a check fails
    are looked at one by one, to word the findings.
    """
    try:
        section.table  # noqa: B018  (reads and checks every FDE, once)
    except SFrameError as problem:
        return [error("decode", problem.description, None, problem.offset)]
    findings: list[Finding] = []
    findings += _check_header(section, kernel)
    findings += _check_functions(section, kernel)
    if not relocatable:
        findings += _check_addresses(section, text_ranges, address_gaps)
    findings += check_rows(section, kernel, foreign_endian)
    findings += _check_segment(section, sframe_segment_address, sframe_segment_size, kernel)
    return findings


# ---------------------------------------------------------------------------------------------
# Structure (what the decoder needs before it can build a section)


def check_structure(data: Buffer) -> list[Finding]:
    """Preamble, header and FDE checks the decoder would stop at, one finding each; empty when
    a section can be opened and its FDE table read.

    The FDEs are first read as the decoder reads them, all at once
    (:func:`~pysframe.format.decode.read_fde_table`, which stops at the first problem); only
    when that fails are they checked one by one, for every problem."""
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
    if _fde_table_reads(data):
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


def _check_functions(section: SectionView, kernel: bool) -> list[Finding]:
    """Each function's FDE: in order after the one before it, its size, rep_size and unused
    bits.  Every rule is tested on the FDE table's columns; the findings are worded for the
    functions where one fails, function by function, in the order of the rules."""
    h, t = section.header, section.table
    none = np.zeros(len(t), dtype=bool)
    unsorted = none.copy()
    if h.sorted or kernel:
        unsorted[1:] = t.start[1:] <= t.start[:-1]
    empty = t.size == 0
    no_rep_size = none
    if h.version is not Version.V1:
        no_rep_size = (fde_pc_type(t.info) == PcType.MASK) & (t.rep_size == 0)
    # V1/V2 info: bits 0-3 FRE type, 4 PC type, 5 pauth key, 6-7 unused (V2 spec 2.3.1).
    # V3 info: bit 6 unused, bit 7 signal frame; info2 bits 5-7 unused (docs/format.md,
    # "FDE info byte" and "V3 FDE").
    unused = FDE_INFO_UNUSED[h.version]
    bad_info = (t.info & unused) != 0
    bad_info2 = (t.info2 & FDE_INFO2_UNUSED) != 0 if h.version is Version.V3 else none
    bad_padding = t.padding != 0 if h.version is Version.V2 else none
    failing = unsorted | empty | no_rep_size | bad_info | bad_info2 | bad_padding
    what = "FDE_SORTED is set" if h.sorted else "the kernel needs sorted FDEs"
    findings = []
    for index in np.flatnonzero(failing).tolist():
        at = fde_position(h, index)
        if unsorted[index]:
            start, previous = int(t.start[index]), int(t.start[index - 1])
            findings.append(
                error(
                    "fde-sorted",
                    f"starts at {start:#x}, not after function {index - 1} at {previous:#x} "
                    f"({what})",
                    index,
                    at,
                )
            )
        if empty[index]:
            message = "size 0: no PC ever matches it"
            findings.append(warning("fde-size", message, index, at + _FDE_SIZE_FINDING_AT))
        if no_rep_size[index]:
            message = "PCMASK function with repetition size 0"
            findings.append(error("rep-size", message, index, at + _REP_SIZE_FINDING_AT))
        if bad_info[index]:
            info = int(t.info[index])
            findings.append(
                warning(
                    "reserved-bits",
                    f"unused bits {info & unused:#x} set in info {info:#04x}",
                    index,
                    _info_offset(section, index),
                )
            )
        if bad_info2[index]:
            info2 = int(t.info2[index])
            findings.append(
                warning(
                    "reserved-bits",
                    f"unused bits {info2 & FDE_INFO2_UNUSED:#x} set in info2 {info2:#04x}",
                    index,
                    h.fre_start + int(t.fre_offset[index]) + V3_ATTR_AT["info2"],
                )
            )
        if bad_padding[index]:
            findings.append(
                warning(
                    "reserved-bits",
                    f"padding {int(t.padding[index]):#x} is not zero",
                    index,
                    at + FDE_AT[Version.V2]["padding"],
                )
            )
    return findings


def _check_addresses(
    section: SectionView,
    text_ranges: Sequence[tuple[int, int]] | None,
    address_gaps: bool,
) -> list[Finding]:
    """Overlaps, optional gaps, and text ranges, over the functions in address order."""
    t = section.table
    order = np.argsort(t.start, kind="stable")  # by start, then index
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
        if all(low >= 0 and high < 1 << 64 for low, high in text_ranges):
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


# -- rows and FRE blocks -------------------------------------------------------------------------
I64 = npt.NDArray[np.int64]

#: Number of words a FLEX FRE may have (V3: CFA pair, [RA pair | padding], [FP pair]);
#: libsframe also reads 3 (CFA pair and a padding word).
_FLEX_COUNTS = (0, 2, 3, 4, 5, 6)
#: The kernel's control-word register field is 5 bits wide.
_KERNEL_MAX_REGNUM = 31


@dataclass(frozen=True, slots=True)
class _Block:
    """The bytes one function's FREs (V3: with the attribute record) occupy, and the FRE type
    they are read with."""

    function: int
    begin: int
    end: int
    fre_type: int


def check_rows(
    section: SectionView, kernel: bool, foreign_endian: bool = False
) -> list[Finding]:
    """Every function's FREs, sfh_num_fres, and the FRE blocks (``section.table`` is read)."""
    h, t = section.header, section.table
    ends, findings = _check_all_rows(section, kernel)
    total = int(t.num_rows.sum())
    if total != h.num_fres:
        findings.append(
            error(
                "num-fres",
                f"header counts {h.num_fres} FREs but the functions have {total}",
                None,
                HEADER_AT["num_fres"],
            )
        )
    begin, end = t.fre_offset, ends - h.fre_start
    fre_type = fde_fre_type(t.info)
    findings += _place_blocks(h, begin, end, fre_type, foreign_endian)
    return findings


def _check_all_rows(section: SectionView, kernel: bool) -> tuple[I64, list[Finding]]:
    """Where each function's FREs end, and the findings about them, function by function and
    FRE by FRE: only the FREs where a check fails, or where a walk stops, are worded."""
    h, t = section.header, section.table
    rows = scan_stored_rows(section)
    function_of_row = np.repeat(np.arange(len(t)), t.num_rows)
    worded = _failing_rows(section, rows, function_of_row, kernel)
    stops = np.zeros(len(worded), dtype=bool)
    if rows.unsound is not None:  # the first unsound FRE of each function: where its walk stops
        worded &= ~rows.unsound
        stops = rows.unsound.copy()
        stops[1:] &= ~rows.unsound[:-1] | (function_of_row[1:] != function_of_row[:-1])
    findings: list[Finding] = []
    for row in np.flatnonzero(worded | stops).tolist():
        index = int(function_of_row[row])
        number = row - int(rows.located.row_base[index])
        if stops[row]:
            problem = walk_problem(section, rows.located, row)
            rule = "fre-bounds" if problem.truncated else "word-size"
            findings.append(error(rule, problem.message, index, problem.offset))
            continue
        pos, start = int(rows.located.position[row]), int(rows.start_offset[row])
        if number and start <= rows.start_offset[row - 1]:
            previous = int(rows.start_offset[row - 1])
            findings.append(
                error(
                    "fre-order",
                    f"FRE {number} starts at offset {start:#x}, not after FRE {number - 1} at "
                    f"{previous:#x}",
                    index,
                    pos,
                )
            )
        info, size, rep_size = int(t.info[index]), int(t.size[index]), int(t.rep_size[index])
        pc_mask = fde_pc_type(info) == PcType.MASK
        findings += _check_start(index, number, start, pos, size, rep_size, pc_mask)
        flex = h.version is Version.V3 and fde_type_of(int(t.info2[index])) == FdeType.FLEX
        at_info = fre_address_size(fde_fre_type(info))
        form = fre_form(section, pos + at_info, flex)
        findings += _word_findings(h, kernel, flex, form.info, form.words, index, number, pos,
                                   at_info)  # fmt: skip
    return rows.end, findings


def _failing_rows(
    section: SectionView, rows: StoredRows, function_of_row: I64, kernel: bool
) -> npt.NDArray[np.bool_]:
    """Per FRE: whether a check of :func:`_check_all_rows` fails on it (exactly those)."""
    h, t = section.header, section.table
    start = rows.start_offset
    bad = np.zeros(len(start), dtype=bool)
    # fre-order: a start offset not after the one before it, in the same function.
    bad[1:] = (start[1:] <= start[:-1]) & (function_of_row[1:] == function_of_row[:-1])
    # fre-start: PCMASK rows inside the repeated block, PCINC rows before the function's end.
    masked = (fde_pc_type(t.info) == PcType.MASK)[function_of_row]
    rep_size, size = t.rep_size[function_of_row], t.size[function_of_row]
    bad |= np.where(masked, (rep_size > 0) & (start >= rep_size), start >= size)
    # fre-words, mangled-ra: what the info byte says (DEFAULT rows: the number of words);
    # flex-control too for FLEX rows: the same for every row of a form.
    bad_info = np.array(
        [bool(_word_findings(h, kernel, False, i, (0,) * fre_word_count(i), 0, 0, 0, 0))
         for i in range(256)]
    )  # fmt: skip
    bad_flex = [
        bool(_word_findings(h, kernel, True, form.info, form.words, 0, 0, 0, 0))
        for form in rows.flex_forms
    ]
    flex = rows.flex_form >= 0
    bad |= np.where(flex, np.array([*bad_flex, False])[rows.flex_form], bad_info[rows.info])
    return bad


def _place_blocks(
    header: Header, begin: I64, end: I64, fre_type: I64, foreign_endian: bool
) -> list[Finding]:
    """How the blocks fill the FRE sub-section.  Functions may share a block: their FDEs name
    the same offset (V3: so the same attribute record); before V3 a function may also use the
    first FREs of a longer block, read with the same FRE type.  Any other shared byte is an
    overlap.  The blocks are grouped by where they begin, in order, on columns, and only the
    groups with a problem are looked at one by one, to word the findings."""
    used = np.flatnonzero(begin != end)  # V1/V2 functions without FREs occupy nothing
    # By position; in a group, the longest block first (the first function of those).
    order = used[np.lexsort((used, -end[used], begin[used]))]
    first = np.ones(len(order), dtype=bool)
    first[1:] = begin[order][1:] != begin[order][:-1]
    heads = order[first]  # each group's longest block
    group_start = np.flatnonzero(first)
    group_of = np.cumsum(first) - 1
    mismatch = fre_type[order] != fre_type[heads][group_of]
    head_end = end[heads]
    covered = np.zeros(len(heads), dtype=np.int64)  # end of the bytes used before each group
    if len(heads):
        covered[1:] = np.maximum.accumulate(head_end)[:-1]
    overlap, gap = begin[heads] < covered, begin[heads] > covered
    troubled = np.zeros(len(heads), dtype=bool)
    troubled[group_of[mismatch]] = True
    findings = []
    bounds = [*group_start.tolist(), len(order)]
    for g in np.flatnonzero(troubled | overlap | gap).tolist():
        head = _block(int(heads[g]), begin, end, fre_type)
        members = sorted(order[bounds[g] : bounds[g + 1]].tolist())
        for member in members:
            if member != head.function and fre_type[member] != head.fre_type:
                findings.append(_type_mismatch(header, _block(member, begin, end, fre_type), head))
        if overlap[g]:
            previous = _block(int(heads[g - 1]), begin, end, fre_type)
            findings.append(_overlap(header, head, previous))
        elif gap[g]:
            findings.append(_gap(header, head, int(covered[g])))
    last = int(head_end.max()) if len(heads) else 0
    findings += _fre_len(header, max(last, 0))
    if foreign_endian:
        shared = np.flatnonzero(np.diff(bounds) > 1)
        if len(shared):
            g = int(shared[0])
            sharer = sorted(order[bounds[g] : bounds[g + 1]].tolist())[1]
            findings.append(_shared(header, len(order) - len(heads), sharer))
    return findings


def _block(function: int, begin: I64, end: I64, fre_type: I64) -> _Block:
    return _Block(function, int(begin[function]), int(end[function]), int(fre_type[function]))


def _type_mismatch(header: Header, member: _Block, longest: _Block) -> Finding:
    return error(
        "fre-block-overlap",
        f"FRE block [{member.begin}, {member.end}) starts where function "
        f"{longest.function}'s [{longest.begin}, {longest.end}) does but is "
        f"read with FRE type {member.fre_type}, not {longest.fre_type}",
        member.function,
        fde_position(header, member.function),
    )


def _overlap(header: Header, block: _Block, previous: _Block) -> Finding:
    return error(
        "fre-block-overlap",
        f"FRE block [{block.begin}, {block.end}) overlaps that of function "
        f"{previous.function} [{previous.begin}, {previous.end})",
        block.function,
        fde_position(header, block.function),
    )


def _gap(header: Header, block: _Block, covered: int) -> Finding:
    return warning(
        "fre-gap",
        f"{block.begin - covered} unused bytes in the FRE sub-section before this "
        "function's FRE block",
        block.function,
        header.fre_start + covered,
    )


def _fre_len(header: Header, covered: int) -> list[Finding]:
    if covered == header.fre_len:
        return []
    message = f"sfh_fre_len is {header.fre_len} but the FRE blocks end at {covered}"
    return [error("fre-len", message, None, HEADER_FRE_LEN_AT)]


def _shared(header: Header, sharing: int, first_sharer: int) -> Finding:
    return warning(
        "fre-block-shared",
        f"{sharing} functions use another function's FRE block: a reader of the other "
        "byte order that swaps the section in place one function at a time (libsframe "
        "2.47's sframe_decode) swaps shared blocks twice and rejects the section",
        first_sharer,
        fde_position(header, first_sharer),
    )


def _check_start(
    index: int, number: int, start: int, pos: int, size: int, rep_size: int, pc_mask: bool
) -> list[Finding]:
    if pc_mask:
        if rep_size and start >= rep_size:
            return [
                warning(
                    "fre-start",
                    f"FRE {number} starts at offset {start:#x}, outside the {rep_size}-byte "
                    "repeated block",
                    index,
                    pos,
                )
            ]
        return []
    if start > size:
        return [
            error(
                "fre-start",
                f"FRE {number} starts at offset {start:#x}, past the function's {size} bytes",
                index,
                pos,
            )
        ]
    if start == size:
        return [
            warning(
                "fre-start",
                f"FRE {number} starts at the function's end ({size:#x}) and never applies",
                index,
                pos,
            )
        ]
    return []


def _word_findings(
    header: Header,
    kernel: bool,
    flex: bool,
    info: int,
    words: tuple[int, ...],
    index: int,
    number: int,
    pos: int,
    at_info: int,
) -> list[Finding]:
    """The data words of FRE ``number`` of function ``index`` at ``pos`` (its info byte
    ``at_info`` bytes further), and its mangled-RA bit: what only the row's form decides."""
    if flex:
        findings = _check_flex_words(index, number, pos, words, fre_word_size(info), kernel)
    else:
        findings = _check_default_words(header, index, number, pos, len(words))
    if fre_mangled_ra(info) and not header.abi.is_aarch64:
        findings.append(
            warning(
                "mangled-ra",
                f"FRE {number} has the mangled-RA bit set on {header.abi.name}",
                index,
                pos + at_info,
            )
        )
    return findings


def _check_default_words(
    h: Header, index: int, number: int, pos: int, count: int
) -> list[Finding]:
    """DEFAULT FDE: CFA, then an RA word unless the header fixes RA, then an FP word unless
    the header fixes FP (V2 spec 2.4; docs/format.md, "DEFAULT rows"); zero words: RA undefined
    (docs/format.md, "RA undefined")."""
    most = 1 + (0 if h.cfa_fixed_ra_offset else 1) + (0 if h.cfa_fixed_fp_offset else 1)
    if count > most:
        return [
            error(
                "fre-words",
                f"FRE {number} has {count} data words; {h.abi.name} DEFAULT rows have at most "
                f"{most}",
                index,
                pos,
            )
        ]
    return []


def _check_flex_words(
    index: int, number: int, pos: int, words: Iterable[int], word_size: int, kernel: bool
) -> list[Finding]:
    """FLEX FDE (V3): CFA pair, then RA pair or a 0 padding word, then FP pair; the CFA
    control word has reg_p set, RA/FP control words are non-zero (the kernel reads a zero one
    as padding and then finds a word left over).  Three words (CFA pair and a lone padding
    word) decode in libsframe but the kernel rejects them."""
    mask = word_mask(word_size)
    values = [w & mask for w in words]
    count = len(values)
    if count not in _FLEX_COUNTS:
        return [
            error(
                "fre-words",
                f"FLEX FRE {number} has {count} data words (expected 0 or 2 to 6)",
                index,
                pos,
            )
        ]
    if count == 0:
        return []
    findings = []
    if count == 3:
        make = error if kernel else warning
        findings.append(
            make(
                "fre-words",
                f"FLEX FRE {number} has 3 data words: a padding word with no FP pair after it "
                "(the kernel rejects it)",
                index,
                pos,
            )
        )
    controls: list[tuple[str, int]] = [("CFA", values[0])]
    if count in (3, 5):
        if values[2] != 0:
            findings.append(
                error(
                    "flex-control",
                    f"FLEX FRE {number}: RA padding word is {values[2]:#x}, not 0",
                    index,
                    pos,
                )
            )
        if count == 5:
            controls.append(("FP", values[3]))
    elif count >= 4:
        controls.append(("RA", values[2]))
        if count == 6:
            controls.append(("FP", values[4]))
    for what, control in controls:
        findings += _check_control(index, number, pos, what, control, kernel)
    return findings


def _check_control(
    index: int, number: int, pos: int, what: str, control: int, kernel: bool
) -> list[Finding]:
    regnum, reg_p = flex_reg(control), flex_reg_p(control)
    prefix = f"FLEX FRE {number}: {what} control word {control:#x}"
    if what == "CFA" and not reg_p:
        return [error("flex-control", f"{prefix} names no register (reg_p clear)", index, pos)]
    if control == 0:
        return [error("flex-control", f"{prefix} is zero (reads as padding)", index, pos)]
    findings = []
    if control & FLEX_UNUSED:
        findings.append(warning("flex-control", f"{prefix} has unused bit 2 set", index, pos))
    if not reg_p and regnum:
        findings.append(
            warning("flex-control", f"{prefix} names register {regnum} without reg_p", index, pos)
        )
    if kernel and regnum > _KERNEL_MAX_REGNUM:
        findings.append(
            error(
                "flex-control",
                f"{prefix} names register {regnum}; the kernel reads 5-bit register numbers",
                index,
                pos,
            )
        )
    return findings
