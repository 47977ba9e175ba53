"""Validation of rows (FREs) and FRE blocks: each function's FREs walked from the raw bytes
(:func:`pysframe.format.walk.walk_fres`), their start offsets, data words and FLEX control
words, and how the functions' FRE blocks fill the FRE sub-section.  Part of
:func:`pysframe.format.validate.validate_section`; the rule ids are in
:data:`pysframe.format.findings.RULES`.

Bulk first: every row is read at once (:func:`pysframe.format.walk.scan_stored_rows`, as the
dump reads them), and the checks that hold row by row are made on columns: start offsets in
order and inside the function, and each distinct row form's words checked once.  Only the
functions where one of them fails are then walked one by one, with the scalar checks that
word the findings; the FRE blocks are placed the same way.  ``scalar=True`` walks every
function and every block: the reference the bulk path is tested against
(tests/test_validate_bulk.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..errors import SFrameError
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
    fre_word_count,
    fre_word_size,
    word_mask,
)
from .walk import StoredRows, scan_stored_rows, walk_fres

if TYPE_CHECKING:
    from .model import Header
    from .view import SectionView

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
    section: SectionView, kernel: bool, foreign_endian: bool = False, *, scalar: bool = False
) -> list[Finding]:
    """Every function's FREs, sfh_num_fres, and the FRE blocks (``section.table`` is read);
    ``scalar``: every function walked on its own (the reference)."""
    h, t = section.header, section.table
    ends, findings = _check_all_rows(section, kernel, scalar)
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
    begin, end = t.fre_offset, np.asarray(ends, dtype=np.int64) - h.fre_start
    fre_type = fde_fre_type(t.info)
    if scalar:
        blocks = [
            _Block(*fields)
            for fields in zip(
                range(len(t)), begin.tolist(), end.tolist(), fre_type.tolist(), strict=True
            )
        ]
        findings += _check_blocks(section, blocks, foreign_endian)
    else:
        findings += _place_blocks(h, begin, end, fre_type, foreign_endian)
    return findings


def _check_all_rows(
    section: SectionView, kernel: bool, scalar: bool
) -> tuple[list[int], list[Finding]]:
    """Where each function's FREs end, and the findings about them, function by function."""
    count = len(section.table)
    suspects: Iterable[int] = range(count)
    ends = [section.header.fre_end] * count
    if not scalar:
        try:
            rows = scan_stored_rows(section)
        except SFrameError:
            pass  # an FRE runs past the sub-section: every function is walked on its own
        else:
            ends = rows.end.tolist()
            suspects = np.flatnonzero(_suspects(section, rows, kernel)).tolist()
    findings: list[Finding] = []
    for index in suspects:
        ends[index], problems = _check_function_rows(section, index, kernel)
        findings += problems
    return ends, findings


def _suspects(section: SectionView, rows: StoredRows, kernel: bool) -> npt.NDArray[np.bool_]:
    """Per function: whether a check of :func:`_check_function_rows` may fail on one of its
    rows (every function for which one does is marked)."""
    h, t = section.header, section.table
    function_of_row = np.repeat(np.arange(len(t)), t.num_rows)
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
    suspect = np.zeros(len(t), dtype=bool)
    suspect[function_of_row[bad]] = True
    return suspect


def _place_blocks(
    header: Header, begin: I64, end: I64, fre_type: I64, foreign_endian: bool
) -> list[Finding]:
    """:func:`_check_blocks` on columns: the blocks grouped by where they begin, in order,
    and only the groups with a problem looked at one by one (the same findings)."""
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


def _check_blocks(
    section: SectionView, blocks: Sequence[_Block], foreign_endian: bool
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
                findings.append(_type_mismatch(h, member, longest))
        if len(members) > 1:
            sharing += len(members) - 1
            first_sharer = first_sharer or sorted(members, key=lambda b: b.function)[1]
        block = longest
        if previous is not None and block.begin < covered:
            findings.append(_overlap(h, block, previous))
        elif block.begin > covered:
            findings.append(_gap(h, block, covered))
        covered = max(covered, block.end)
        previous = block
    findings += _fre_len(h, covered)
    if foreign_endian and first_sharer is not None:
        findings.append(_shared(h, sharing, first_sharer.function))
    return findings


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
    at_info = fre_address_size(fre_type)  # from an FRE's position to its info byte
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
        findings += _word_findings(h, kernel, flex, fre_info, words, index, number, pos, at_info)
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
