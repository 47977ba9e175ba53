"""Validation of rows (FREs) and FRE blocks: each function's FREs walked from the raw bytes
(:func:`pysframe.format.walk.walk_fres`), their start offsets, data words and FLEX control
words, and how the functions' FRE blocks fill the FRE sub-section.  Part of
:func:`pysframe.format.validate.validate_section`; the rule ids are in
:data:`pysframe.format.findings.RULES`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .constants import FdeType, PcType, Version
from .decode import fde_position
from .findings import Finding, error, warning
from .layout import (
    FLEX_UNUSED,
    HEADER_AT,
    HEADER_FRE_LEN_AT,
    fde_fre_type,
    fde_pc_type,
    fde_type_of,
    flex_reg,
    flex_reg_p,
    fre_address_size,
    fre_mangled_ra,
    fre_word_size,
    word_mask,
)
from .walk import walk_fres

if TYPE_CHECKING:
    from .view import SectionView

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


def check_rows(section: SectionView, kernel: bool, foreign_endian: bool = False) -> list[Finding]:
    """Every function's FREs, sfh_num_fres, and the FRE blocks (``section.table`` is read)."""
    h, t = section.header, section.table
    findings = []
    blocks = []
    fre_types = fde_fre_type(t.info).tolist()
    for index in range(len(t)):
        end, problems = _check_function_rows(section, index, kernel)
        findings += problems
        blocks.append(
            _Block(index, int(t.fre_offset[index]), end - h.fre_start, fre_types[index])
        )
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
    findings += _check_blocks(section, blocks, foreign_endian)
    return findings


def _check_blocks(
    section: SectionView, blocks: list[_Block], foreign_endian: bool
) -> list[Finding]:
    """How the blocks fill the FRE sub-section.  Functions may share a block: their FDEs name
    the same offset (V3: so the same attribute record); before V3 a function may also use the
    first FREs of a longer block, read with the same FRE type.  Any other shared byte is an
    overlap."""
    h = section.header
    findings = []
    covered = 0  # end of the bytes used so far, walking the blocks by position
    previous: _Block | None = None
    sharing = 0  # functions naming a block another function names first
    first_sharer: _Block | None = None
    groups: dict[int, list[_Block]] = {}
    for block in blocks:
        if block.begin != block.end:  # V1/V2 function without FREs: occupies nothing
            groups.setdefault(block.begin, []).append(block)
    for begin in sorted(groups):
        members = groups[begin]
        longest = max(members, key=lambda b: (b.end, -b.function))
        for member in members:
            if member is not longest and member.fre_type != longest.fre_type:
                findings.append(
                    error(
                        "fre-block-overlap",
                        f"FRE block [{member.begin}, {member.end}) starts where function "
                        f"{longest.function}'s [{longest.begin}, {longest.end}) does but is "
                        f"read with FRE type {member.fre_type}, not {longest.fre_type}",
                        member.function,
                        fde_position(h, member.function),
                    )
                )
        if len(members) > 1:
            sharing += len(members) - 1
            first_sharer = first_sharer or sorted(members, key=lambda b: b.function)[1]
        block = longest
        if previous is not None and block.begin < covered:
            findings.append(
                error(
                    "fre-block-overlap",
                    f"FRE block [{block.begin}, {block.end}) overlaps that of function "
                    f"{previous.function} [{previous.begin}, {previous.end})",
                    block.function,
                    fde_position(h, block.function),
                )
            )
        elif block.begin > covered:
            findings.append(
                warning(
                    "fre-gap",
                    f"{block.begin - covered} unused bytes in the FRE sub-section before this "
                    "function's FRE block",
                    block.function,
                    h.fre_start + covered,
                )
            )
        covered = max(covered, block.end)
        previous = block
    if covered != h.fre_len:
        findings.append(
            error(
                "fre-len",
                f"sfh_fre_len is {h.fre_len} but the FRE blocks end at {covered}",
                None,
                HEADER_FRE_LEN_AT,
            )
        )
    if foreign_endian and first_sharer is not None:
        findings.append(
            warning(
                "fre-block-shared",
                f"{sharing} functions use another function's FRE block: a reader of the other "
                "byte order that swaps the section in place one function at a time (libsframe "
                "2.47's sframe_decode) swaps shared blocks twice and rejects the section",
                first_sharer.function,
                fde_position(h, first_sharer.function),
            )
        )
    return findings


def _check_function_rows(
    section: SectionView, index: int, kernel: bool
) -> tuple[int, list[Finding]]:
    """Check function ``index``'s FREs from the raw bytes; return (end offset, findings).

    The walk reads at most ``num_fres`` FREs, each at least two bytes, and stops at the first
    one that runs past the FRE sub-section (the decoder checked num_fres fits); the end offset
    is then the end of the sub-section.
    """
    h, t = section.header, section.table
    info = int(t.info[index])
    fre_type = fde_fre_type(info)
    walk = walk_fres(section.data, h, fre_type, int(t.fre_data[index]), int(t.num_rows[index]))
    address_size = fre_address_size(fre_type)
    pc_mask = fde_pc_type(info) == PcType.MASK
    size, rep_size = int(t.size[index]), int(t.rep_size[index])
    flex = h.version is Version.V3 and fde_type_of(int(t.info2[index])) == FdeType.FLEX
    previous: int | None = None
    findings: list[Finding] = []
    for number, (pos, start, fre_info, words) in enumerate(walk.fres):
        if previous is not None and start <= previous:
            findings.append(
                error(
                    "fre-order",
                    f"FRE {number} starts at offset {start:#x}, not after FRE {number - 1} at "
                    f"{previous:#x}",
                    index,
                    pos,
                )
            )
        previous = start
        findings += _check_start(index, number, start, pos, size, rep_size, pc_mask)
        if flex:
            word_size = fre_word_size(fre_info)
            findings += _check_flex_words(index, number, pos, words, word_size, kernel)
        else:
            findings += _check_default_words(section, index, number, pos, len(words))
        if fre_mangled_ra(fre_info) and not h.abi.is_aarch64:
            findings.append(
                warning(
                    "mangled-ra",
                    f"FRE {number} has the mangled-RA bit set on {h.abi.name}",
                    index,
                    pos + address_size,
                )
            )
    problem = walk.problem
    if problem is not None:
        rule = "fre-bounds" if problem.truncated else "word-size"
        findings.append(error(rule, problem.message, index, problem.offset))
        return h.fre_end, findings
    return walk.end, findings


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


def _check_default_words(
    section: SectionView, index: int, number: int, pos: int, count: int
) -> list[Finding]:
    """DEFAULT FDE: CFA, then an RA word unless the header fixes RA, then an FP word unless
    the header fixes FP (V2 spec 2.4, VERSIONS.md V3); zero words: RA undefined."""
    h = section.header
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
