"""Validation: every check the Linux kernel makes before it uses an SFrame section, the
invariants GNU ld relies on when it merges sections, and checks against the ELF file.

Each problem is a :class:`Finding` (severity, rule id, function index, byte offset, message);
:data:`RULES` lists the rule ids.  Validation never raises on bad input: what cannot be decoded
becomes a finding too (:func:`validate_bytes`).

Profiles.  By default the rules are those of the format itself (V1 spec, V2 spec 2.x,
VERSIONS.md for errata 1 and V3), so every section GNU as and ld write passes, whatever its
version.  ``kernel=True`` adds what the Linux kernel's SFrame unwinder (kernel/unwind/sframe.c,
``sframe_read_header`` and ``sframe_validate_section``) requires on top: version 3, the
FDE_SORTED and FDE_FUNC_START_PCREL flags, no auxiliary header, at least one FDE and one FRE,
the FRE sub-section after the FDE index, control-word register numbers below 32 and a
PT_GNU_SFRAME segment.

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

import itertools
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from ..errors import SFrameError, UnsortedError
from ..format.constants import (
    FDE_SIZE,
    HEADER_SIZE,
    KNOWN_FLAGS,
    SFRAME_MAGIC,
    V3_ATTR_SIZE,
    Abi,
    FdeType,
    Flags,
    PcType,
    Version,
)
from ..format.decode import Buffer, fde_position

if TYPE_CHECKING:
    from ..elf.image import ElfImage
    from ..format.section import SFrameSection


class Severity(StrEnum):
    """How bad a finding is: an error makes a consumer reject or misread the section."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: ``function`` is the FDE index (None: the section), ``offset`` the byte
    offset from the start of the section (None: not tied to one place)."""

    severity: Severity
    rule: str
    message: str
    function: int | None = None
    offset: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "severity": self.severity.value,
            "rule": self.rule,
            "function": self.function,
            "offset": self.offset,
            "message": self.message,
        }

    def __str__(self) -> str:
        where = "-" if self.function is None else str(self.function)
        at = "-" if self.offset is None else f"{self.offset:#x}"
        return f"{self.severity.value}: [{self.rule}] function {where} offset {at}: {self.message}"


#: Every rule id with what it requires.
RULES: dict[str, str] = {
    "truncated": "the preamble, header and auxiliary header fit in the section",
    "magic": "the preamble starts with the SFrame magic 0xdee2 (in either byte order)",
    "version": "the version is 1, 2 or 3 (kernel: 3)",
    "abi": "the ABI/arch identifier is defined and matches the byte order and ELF machine",
    "flags": "only flags the version defines are set (kernel: FDE_SORTED and "
    "FDE_FUNC_START_PCREL are set)",
    "auxiliary-header": "kernel: sfh_auxhdr_len is 0",
    "empty": "kernel: at least one FDE and one FRE",
    "subsection-bounds": "the FDE and FRE sub-sections lie inside the section without overlapping "
    "(kernel: the FRE sub-section follows the FDE index)",
    "fre-type": "each function's FRE type is 0, 1 or 2",
    "fde-type": "V3: each function's FDE type (info2 bits 0-4) is DEFAULT or FLEX",
    "attribute-bounds": "V3: each attribute record lies inside the FRE sub-section",
    "fre-bounds": "each function's FREs and their data words lie inside the FRE sub-section",
    "fde-sorted": "with FDE_SORTED (and always for the kernel) function starts strictly increase",
    "fde-overlap": "no two functions' address ranges overlap",
    "fde-gap": "(opt-in, warning) no address gap between consecutive functions",
    "fde-text": "each function lies inside a text range (an executable segment)",
    "fde-size": "(warning) a function has a non-zero size",
    "rep-size": "a PCMASK function (V2/V3) has a non-zero repetition size",
    "reserved-bits": "(warning) unused bits of the function info bytes and V2 padding are zero",
    "word-size": "each FRE's data-word size code is 0, 1 or 2",
    "fre-order": "FRE start offsets strictly increase within a function",
    "fre-start": "each FRE starts inside its function (PCINC: start <= size, warning when equal; "
    "PCMASK: start < rep_size)",
    "fre-words": "each FRE has exactly the data words its ABI, header and FDE type define",
    "flex-control": "FLEX control words are valid: CFA reg_p set, RA/FP pairs non-zero, "
    "padding zero (kernel: register numbers below 32)",
    "mangled-ra": "(warning) the mangled-RA bit is set only for AArch64",
    "num-fres": "sfh_num_fres is the sum of the functions' FRE counts",
    "fre-len": "sfh_fre_len ends where the last FRE block ends",
    "fre-gap": "(warning) no unused bytes between FRE blocks",
    "fre-block-overlap": "no two functions' FRE blocks overlap or share bytes",
    "elf-segment": "the section's address and size match PT_GNU_SFRAME (kernel: it exists)",
    "decode": "anything else the decoder rejects",
}

_U64 = 1 << 64
#: Number of words a FLEX FRE may have (V3: CFA pair, [RA pair | padding], [FP pair]);
#: libsframe also reads 3 (CFA pair and a padding word).
_FLEX_COUNTS = (0, 2, 3, 4, 5, 6)
#: The kernel's control-word register field is 5 bits wide.
_KERNEL_MAX_REGNUM = 31


def _error(
    rule: str, message: str, function: int | None = None, offset: int | None = None
) -> Finding:
    return Finding(Severity.ERROR, rule, message, function, offset)


def _warning(
    rule: str, message: str, function: int | None = None, offset: int | None = None
) -> Finding:
    return Finding(Severity.WARNING, rule, message, function, offset)


# ---------------------------------------------------------------------------------------------
# Entry points


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
) -> list[Finding]:
    """Validate raw section bytes: structural problems that stop decoding become findings."""
    findings = _check_structure(data)
    if findings:
        return findings
    from ..format.section import SFrameSection

    try:
        section = SFrameSection(data, section_address)
    except UnsortedError as error:
        return [_error("fde-sorted", error.message, None, error.offset)]
    except SFrameError as error:
        return [_error("decode", error.message, None, error.offset)]
    return validate_section(
        section,
        kernel=kernel,
        text_ranges=text_ranges,
        sframe_segment_address=sframe_segment_address,
        sframe_segment_size=sframe_segment_size,
        relocatable=relocatable,
        address_gaps=address_gaps,
    )


def validate_section(
    section: SFrameSection,
    *,
    text_ranges: Sequence[tuple[int, int]] | None = None,
    sframe_segment_address: int | None = None,
    sframe_segment_size: int | None = None,
    kernel: bool = False,
    relocatable: bool = False,
    address_gaps: bool = False,
) -> list[Finding]:
    """Check a decoded section; see :data:`RULES`.

    ``text_ranges``: [start, end) address ranges functions must lie in (the executable
    segments).  ``sframe_segment_address`` / ``sframe_segment_size``: PT_GNU_SFRAME's p_vaddr
    and p_memsz, compared with ``section.section_address`` and the section's size.
    """
    try:
        section.table  # noqa: B018  (reads and checks every FDE, once)
    except SFrameError as error:
        return [_error("decode", error.message, None, error.offset)]
    findings: list[Finding] = []
    findings += _check_header(section, kernel)
    findings += _check_functions(section, kernel, relocatable)
    if not relocatable:
        findings += _check_addresses(section, text_ranges, address_gaps)
    findings += _check_rows(section, kernel)
    findings += _check_segment(section, sframe_segment_address, sframe_segment_size, kernel)
    return findings


# ---------------------------------------------------------------------------------------------
# Structure (what the decoder needs before it can build a section)


def _check_structure(data: Buffer) -> list[Finding]:
    """Preamble, header and table checks the decoder would stop at, one finding each."""
    size = len(data)
    if size < 4:
        return [
            _error("truncated", f"section of {size} bytes is shorter than the preamble", None, 0)
        ]
    if int.from_bytes(data[0:2], "little") == SFRAME_MAGIC:
        order = "<"
    elif int.from_bytes(data[0:2], "big") == SFRAME_MAGIC:
        order = ">"
    else:
        return [_error("magic", f"bad magic {bytes(data[0:2]).hex()}", None, 0)]
    version = data[2]
    if version not in Version._value2member_map_:
        return [_error("version", f"unsupported version {version}", None, 2)]
    if size < HEADER_SIZE:
        return [_error("truncated", f"section of {size} bytes is shorter than the header", None, 0)]
    fields = struct.unpack_from(order + "HBBBbbBIIIII", data, 0)
    abi, aux_len, num_fdes, fre_len, fde_off, fre_off = (
        fields[3],
        fields[6],
        fields[7],
        fields[9],
        fields[10],
        fields[11],
    )
    if abi not in Abi._value2member_map_:
        return [_error("abi", f"unknown ABI/arch identifier {abi}", None, 4)]
    header_end = HEADER_SIZE + aux_len
    if header_end > size:
        return [
            _error("truncated", f"auxiliary header of {aux_len} bytes runs past the end", None, 7)
        ]
    v = Version(version)
    fde_start, fde_end = header_end + fde_off, header_end + fde_off + num_fdes * FDE_SIZE[v]
    fre_start, fre_end = header_end + fre_off, header_end + fre_off + fre_len
    findings = []
    if fde_end > size:
        findings.append(
            _error(
                "subsection-bounds",
                f"FDE sub-section [{fde_start:#x}, {fde_end:#x}) ({num_fdes} FDEs) runs past "
                f"the end of the {size}-byte section",
                None,
                0x14,
            )
        )
    if fre_end > size:
        findings.append(
            _error(
                "subsection-bounds",
                f"FRE sub-section [{fre_start:#x}, {fre_end:#x}) runs past the end of the "
                f"{size}-byte section",
                None,
                0x18,
            )
        )
    if findings:
        return findings
    return _check_fde_fields(data, order, v, num_fdes, fde_start, fre_start, fre_len)


def _check_fde_fields(
    data: Buffer,
    order: str,
    version: Version,
    num_fdes: int,
    fde_start: int,
    fre_start: int,
    fre_len: int,
) -> list[Finding]:
    """FRE type, FDE type, attribute-record bounds and FRE counts of every function."""
    findings = []
    fde_size = FDE_SIZE[version]
    needed = 0  # bytes the FRE blocks take at least, if they do not share bytes
    for index in range(num_fdes):  # bounded: the FDE table fits in the section
        at = fde_start + index * fde_size
        if version is Version.V3:
            (fre_off,) = struct.unpack_from(order + "I", data, at + 12)
            if fre_off + V3_ATTR_SIZE > fre_len:
                findings.append(
                    _error(
                        "attribute-bounds",
                        f"attribute record at FRE offset {fre_off} runs past the {fre_len}-byte "
                        "FRE sub-section",
                        index,
                        at + 12,
                    )
                )
                continue
            info_at = fre_start + fre_off + 2
            (num_fres,) = struct.unpack_from(order + "H", data, info_at - 2)
            info, info2 = data[info_at], data[info_at + 1]
            if info2 & 0x1F > FdeType.FLEX:
                findings.append(
                    _error("fde-type", f"invalid FDE type {info2 & 0x1F}", index, info_at + 1)
                )
            room = fre_len - fre_off - V3_ATTR_SIZE
            needed += V3_ATTR_SIZE
        else:
            fre_off, num_fres = struct.unpack_from(order + "II", data, at + 8)
            info_at = at + 16
            info = data[info_at]
            room = fre_len - fre_off
        if info & 0xF > 2:
            findings.append(_error("fre-type", f"invalid FRE type {info & 0xF}", index, info_at))
            continue
        least = num_fres * ((1 << (info & 0xF)) + 1)  # start address and info byte (V2 spec 2.4)
        needed += least
        if least > room or room < 0:
            findings.append(
                _error(
                    "fre-bounds",
                    f"{num_fres} FREs at FRE offset {fre_off} do not fit in the {fre_len}-byte "
                    "FRE sub-section",
                    index,
                    at,
                )
            )
    if not findings and needed > fre_len:
        findings.append(
            _error(
                "fre-block-overlap",
                f"the functions' FREs need at least {needed} bytes but the FRE sub-section has "
                f"{fre_len}: FRE blocks overlap",
                None,
                0x10,
            )
        )
    return findings


# ---------------------------------------------------------------------------------------------
# Header


def _check_header(section: SFrameSection, kernel: bool) -> list[Finding]:
    h = section.header
    findings = []
    unknown = int(h.flags) & ~int(KNOWN_FLAGS[h.version])
    if unknown:
        findings.append(
            _error("flags", f"flags {unknown:#x} are not defined in V{int(h.version)}", None, 3)
        )
    if h.abi.big_endian != h.big_endian:
        order = "big" if h.big_endian else "little"
        findings.append(
            _error("abi", f"ABI {h.abi.name} does not match the {order}-endian section", None, 4)
        )
    if kernel:
        findings += _check_kernel_header(section)
    data_size = len(section.data)
    fde_start = h.size + h.fde_offset
    fde_end = fde_start + h.num_fdes * FDE_SIZE[h.version]
    fre_start = h.size + h.fre_offset
    fre_end = fre_start + h.fre_len
    if fde_start < fre_end and fre_start < fde_end:
        findings.append(
            _error(
                "subsection-bounds",
                f"FDE sub-section [{fde_start:#x}, {fde_end:#x}) and FRE sub-section "
                f"[{fre_start:#x}, {fre_end:#x}) overlap",
                None,
                0x14,
            )
        )
    elif kernel and fre_start < fde_end:
        findings.append(
            _error(
                "subsection-bounds",
                f"FRE sub-section at {fre_start:#x} precedes the FDE index ending at {fde_end:#x}",
                None,
                0x18,
            )
        )
    if kernel and h.size >= data_size:
        findings.append(_error("truncated", "nothing follows the header", None, 0))
    return findings


def _check_kernel_header(section: SFrameSection) -> list[Finding]:
    h = section.header
    findings = []
    if h.version is not Version.V3:
        findings.append(
            _error("version", f"version {int(h.version)} (the kernel reads 3)", None, 2)
        )
    missing = [
        flag.name or ""
        for flag in (Flags.FDE_SORTED, Flags.FDE_FUNC_START_PCREL)
        if not h.flags & flag
    ]
    if missing:
        findings.append(_error("flags", f"flag(s) {', '.join(missing)} not set", None, 3))
    if h.auxiliary_header:
        findings.append(
            _error(
                "auxiliary-header",
                f"auxiliary header of {len(h.auxiliary_header)} bytes",
                None,
                7,
            )
        )
    if h.num_fdes == 0 or h.num_fres == 0:
        findings.append(
            _error("empty", f"{h.num_fdes} FDEs and {h.num_fres} FREs (need at least one)", None, 8)
        )
    return findings


# ---------------------------------------------------------------------------------------------
# Functions (FDEs)


def _info_offset(section: SFrameSection, index: int) -> int:
    """Where function ``index``'s info byte is (V3: in its attribute record)."""
    h = section.header
    if h.version is Version.V3:
        return h.size + h.fre_offset + int(section.table.fre_offset[index]) + 2
    return fde_position(h, index) + 16


def _check_functions(section: SFrameSection, kernel: bool, relocatable: bool) -> list[Finding]:
    h, t = section.header, section.table
    findings = []
    previous: int | None = None
    for index in range(len(t)):
        start, size = int(t.start[index]), int(t.size[index])
        info, at = int(t.info[index]), fde_position(h, index)
        if (h.sorted or kernel) and previous is not None and start <= previous:
            what = "FDE_SORTED is set" if h.sorted else "the kernel needs sorted FDEs"
            findings.append(
                _error(
                    "fde-sorted",
                    f"starts at {start:#x}, not after function {index - 1} at {previous:#x} "
                    f"({what})",
                    index,
                    at,
                )
            )
        previous = start
        if size == 0:
            findings.append(_warning("fde-size", "size 0: no PC ever matches it", index, at + 8))
        pc_mask = (info >> 4) & 1 == PcType.MASK
        if pc_mask and h.version is not Version.V1 and int(t.rep_size[index]) == 0:
            findings.append(
                _error("rep-size", "PCMASK function with repetition size 0", index, at + 17)
            )
        findings += _reserved_bits(section, index, info)
    return findings


def _reserved_bits(section: SFrameSection, index: int, info: int) -> list[Finding]:
    h, t = section.header, section.table
    findings = []
    # V1/V2 info: bits 0-3 FRE type, 4 PC type, 5 pauth key, 6-7 unused (V2 spec 2.3.1).
    # V3 info: bit 6 unused, bit 7 signal frame; info2 bits 5-7 unused (VERSIONS.md V3).
    unused = 0x40 if h.version is Version.V3 else 0xC0
    if info & unused:
        findings.append(
            _warning(
                "reserved-bits",
                f"unused bits {info & unused:#x} set in info {info:#04x}",
                index,
                _info_offset(section, index),
            )
        )
    info2 = int(t.info2[index])
    if h.version is Version.V3 and info2 & 0xE0:
        findings.append(
            _warning(
                "reserved-bits",
                f"unused bits {info2 & 0xE0:#x} set in info2 {info2:#04x}",
                index,
                _info_offset(section, index) + 1,
            )
        )
    if h.version is Version.V2 and int(t.padding[index]):
        findings.append(
            _warning(
                "reserved-bits",
                f"padding {int(t.padding[index]):#x} is not zero",
                index,
                fde_position(h, index) + 18,
            )
        )
    return findings


def _check_addresses(
    section: SFrameSection,
    text_ranges: Sequence[tuple[int, int]] | None,
    address_gaps: bool,
) -> list[Finding]:
    """Overlaps, optional gaps, and text ranges, over the functions in address order."""
    h, t = section.header, section.table
    order = sorted(range(len(t)), key=lambda i: (int(t.start[i]), i))
    findings = []
    for before, after in itertools.pairwise(order):
        end = int(t.start[before]) + int(t.size[before])
        start = int(t.start[after])
        if end > start:
            findings.append(
                _error(
                    "fde-overlap",
                    f"[{start:#x}, {start + int(t.size[after]):#x}) overlaps function {before} "
                    f"[{int(t.start[before]):#x}, {end:#x})",
                    after,
                    fde_position(h, after),
                )
            )
        elif address_gaps and end < start:
            findings.append(
                _warning(
                    "fde-gap",
                    f"{start - end} bytes [{end:#x}, {start:#x}) between function {before} and "
                    "this one have no function",
                    after,
                    fde_position(h, after),
                )
            )
    if text_ranges is not None:
        for index in range(len(t)):
            start = int(t.start[index])
            end = start + int(t.size[index])
            if not any(low <= start and end <= high for low, high in text_ranges):
                findings.append(
                    _error(
                        "fde-text",
                        f"[{start:#x}, {end:#x}) is not inside an executable segment",
                        index,
                        fde_position(h, index),
                    )
                )
    return findings


# ---------------------------------------------------------------------------------------------
# Rows (FREs) and FRE blocks


@dataclass(frozen=True, slots=True)
class _Block:
    """The bytes one function's FREs (V3: with the attribute record) occupy."""

    function: int
    begin: int
    end: int


def _check_rows(section: SFrameSection, kernel: bool) -> list[Finding]:
    h, t = section.header, section.table
    findings = []
    blocks = []
    fre_base = h.size + h.fre_offset
    for index in range(len(t)):
        end, problems = _walk_function(section, index, kernel)
        findings += problems
        blocks.append(_Block(index, int(t.fre_offset[index]), end - fre_base))
    total = int(t.num_fres.sum())
    if total != h.num_fres:
        findings.append(
            _error(
                "num-fres",
                f"header counts {h.num_fres} FREs but the functions have {total}",
                None,
                0x0C,
            )
        )
    findings += _check_blocks(section, blocks)
    return findings


def _check_blocks(section: SFrameSection, blocks: list[_Block]) -> list[Finding]:
    h = section.header
    findings = []
    covered = 0  # end of the bytes used so far, walking the blocks by position
    previous: _Block | None = None
    for block in sorted(blocks, key=lambda b: (b.begin, b.end, b.function)):
        if block.begin == block.end:
            continue  # V1/V2 function without FREs: occupies nothing
        if previous is not None and block.begin < covered:
            findings.append(
                _error(
                    "fre-block-overlap",
                    f"FRE block [{block.begin}, {block.end}) overlaps that of function "
                    f"{previous.function} [{previous.begin}, {previous.end})",
                    block.function,
                    fde_position(h, block.function),
                )
            )
        elif block.begin > covered:
            findings.append(
                _warning(
                    "fre-gap",
                    f"{block.begin - covered} unused bytes in the FRE sub-section before this "
                    "function's FRE block",
                    block.function,
                    h.size + h.fre_offset + covered,
                )
            )
        covered = max(covered, block.end)
        previous = block
    if covered != h.fre_len:
        findings.append(
            _error(
                "fre-len",
                f"sfh_fre_len is {h.fre_len} but the FRE blocks end at {covered}",
                None,
                0x10,
            )
        )
    return findings


def _walk_function(section: SFrameSection, index: int, kernel: bool) -> tuple[int, list[Finding]]:
    """Check function ``index``'s FREs from the raw bytes; return (end offset, findings).

    The walk reads at most ``num_fres`` FREs, each at least two bytes, and stops at the first
    one that runs past the FRE sub-section (the decoder checked num_fres fits).
    """
    h, t, data = section.header, section.table, section.data
    order = ">" if h.big_endian else "<"
    info = int(t.info[index])
    addr_size = 1 << (info & 0xF)
    pc_mask = (info >> 4) & 1 == PcType.MASK
    size, rep_size = int(t.size[index]), int(t.rep_size[index])
    flex = h.version is Version.V3 and int(t.info2[index]) & 0x1F == FdeType.FLEX
    fre_end = h.size + h.fre_offset + h.fre_len
    pos = int(t.fre_data[index])
    previous: int | None = None
    findings: list[Finding] = []
    for number in range(int(t.num_fres[index])):
        if pos + addr_size + 1 > fre_end:
            findings.append(
                _error("fre-bounds", f"FRE {number} runs past the FRE sub-section", index, pos)
            )
            return fre_end, findings
        start = int.from_bytes(data[pos : pos + addr_size], "big" if h.big_endian else "little")
        fre_info = data[pos + addr_size]
        count, size_code = (fre_info >> 1) & 0xF, (fre_info >> 5) & 0x3
        if size_code == 3:
            findings.append(
                _error(
                    "word-size",
                    f"FRE {number} has invalid data-word size code 3",
                    index,
                    pos + addr_size,
                )
            )
            return fre_end, findings
        word_size = 1 << size_code
        words_at = pos + addr_size + 1
        if words_at + count * word_size > fre_end:
            findings.append(
                _error(
                    "fre-bounds",
                    f"data words of FRE {number} run past the FRE sub-section",
                    index,
                    pos,
                )
            )
            return fre_end, findings
        if previous is not None and start <= previous:
            findings.append(
                _error(
                    "fre-order",
                    f"FRE {number} starts at offset {start:#x}, not after FRE {number - 1} at "
                    f"{previous:#x}",
                    index,
                    pos,
                )
            )
        previous = start
        findings += _check_start(index, number, start, pos, size, rep_size, pc_mask)
        code = {1: "b", 2: "h", 4: "i"}[word_size]
        words = struct.unpack_from(f"{order}{count}{code}", data, words_at)
        if flex:
            findings += _check_flex_words(index, number, pos, words, word_size, kernel)
        else:
            findings += _check_default_words(section, index, number, pos, count)
        if fre_info & 0x80 and not h.abi.is_aarch64:
            findings.append(
                _warning(
                    "mangled-ra",
                    f"FRE {number} has the mangled-RA bit set on {h.abi.name}",
                    index,
                    pos + addr_size,
                )
            )
        pos = words_at + count * word_size
    return pos, findings


def _check_start(
    index: int, number: int, start: int, pos: int, size: int, rep_size: int, pc_mask: bool
) -> list[Finding]:
    if pc_mask:
        if rep_size and start >= rep_size:
            return [
                _warning(
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
            _error(
                "fre-start",
                f"FRE {number} starts at offset {start:#x}, past the function's {size} bytes",
                index,
                pos,
            )
        ]
    if start == size:
        return [
            _warning(
                "fre-start",
                f"FRE {number} starts at the function's end ({size:#x}) and never applies",
                index,
                pos,
            )
        ]
    return []


def _check_default_words(
    section: SFrameSection, index: int, number: int, pos: int, count: int
) -> list[Finding]:
    """DEFAULT FDE: CFA, then an RA word unless the header fixes RA, then an FP word unless
    the header fixes FP (V2 spec 2.4, VERSIONS.md V3); zero words: RA undefined."""
    h = section.header
    most = 1 + (0 if h.cfa_fixed_ra_offset else 1) + (0 if h.cfa_fixed_fp_offset else 1)
    if count > most:
        return [
            _error(
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
    mask = (1 << (8 * word_size)) - 1
    values = [w & mask for w in words]
    count = len(values)
    if count not in _FLEX_COUNTS:
        return [
            _error(
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
        make = _error if kernel else _warning
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
                _error(
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
    regnum, reg_p = control >> 3, control & 1
    prefix = f"FLEX FRE {number}: {what} control word {control:#x}"
    if what == "CFA" and not reg_p:
        return [_error("flex-control", f"{prefix} names no register (reg_p clear)", index, pos)]
    if control == 0:
        return [_error("flex-control", f"{prefix} is zero (reads as padding)", index, pos)]
    findings = []
    if control & 0x4:
        findings.append(_warning("flex-control", f"{prefix} has unused bit 2 set", index, pos))
    if not reg_p and regnum:
        findings.append(
            _warning("flex-control", f"{prefix} names register {regnum} without reg_p", index, pos)
        )
    if kernel and regnum > _KERNEL_MAX_REGNUM:
        findings.append(
            _error(
                "flex-control",
                f"{prefix} names register {regnum}; the kernel reads 5-bit register numbers",
                index,
                pos,
            )
        )
    return findings


# ---------------------------------------------------------------------------------------------
# ELF


def _check_segment(
    section: SFrameSection,
    segment_address: int | None,
    segment_size: int | None,
    kernel: bool,
) -> list[Finding]:
    size = len(section.data)
    if segment_address is None:
        if kernel:
            return [_error("elf-segment", "no PT_GNU_SFRAME segment locates the section")]
        return []
    findings = []
    if segment_address != section.section_address:
        findings.append(
            _error(
                "elf-segment",
                f"PT_GNU_SFRAME is at {segment_address:#x} but the section is at "
                f"{section.section_address:#x}",
            )
        )
    elif segment_size is not None and segment_size < size:
        findings.append(
            _error(
                "elf-segment",
                f"PT_GNU_SFRAME covers {segment_size} bytes, less than the {size}-byte section",
            )
        )
    return findings


# ---------------------------------------------------------------------------------------------
# ELF files

#: Program header flag: executable segment (System V gABI).
_PF_X = 0x1


def validate_elf(
    image: ElfImage,
    name: str | None = None,
    *,
    kernel: bool = False,
    address_gaps: bool = False,
) -> list[Finding]:
    """Validate the SFrame section of an open ELF file against itself and the file.

    Functions must lie in executable PT_LOAD segments; PT_GNU_SFRAME must locate the section,
    which must lie in a PT_LOAD segment; the section's ABI must match the ELF machine.
    Relocatable objects get their .sframe relocations applied and no address checks.
    Raises ElfError when the file has no SFrame section or cannot be read.
    """
    from ..errors import ElfError
    from ..format.constants import PT_GNU_SFRAME

    found = image.find_sframe(name)
    if found is None:
        raise ElfError(f"{image.path}: no {name or '.sframe'} section")
    data = image.section_contents(found, relocate=True)
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
        end = found.address + len(data)
        if loads and not any(s.vaddr <= found.address and end <= s.vaddr + s.memsz for s in loads):
            findings.append(
                _error(
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
    )
    machine_abi = image.abi
    if len(data) > 4 and data[4] in Abi._value2member_map_ and Abi(data[4]) is not machine_abi:
        what = "a machine SFrame does not support" if machine_abi is None else machine_abi.name
        findings.append(
            _error(
                "abi", f"section ABI {Abi(data[4]).name} but the ELF file is for {what}", None, 4
            )
        )
    return findings
