"""The oracle of the bulk FRE readers: each function's FREs read on their own, one after the
other, and checked as the decoder and the validator check them.

The product reads every FRE of a section at once (pysframe.format.walk: ``locate_fres``,
``scan_rows``, ``scan_stored_rows``) and words its own first problem, or its findings; the
tests hold it equal to this plain walk, written apart from it.  Only the header and the FDE
table come from the product (``section.header``, ``section.table``); the FRE layout (V2 spec
2.4, docs/format.md "V3 changes"), the FLEX rules and the wording are this module's:

* an FRE: a start address of 1, 2 or 4 bytes (FRE type 0, 1, 2), an info byte (bit 0 the
  CFA base register, bits 1-4 the number of data words, bits 5-6 their size code: 1, 2 or
  4 bytes, 3 invalid, bit 7 the mangled-RA bit), then the signed data words;
* a walk stops at the first FRE whose info byte, or whose data words, lie past the FRE
  sub-section, or whose size code is 3;
* a FLEX row (V3) has 0 or 2 to 6 words: CFA control word and offset, then an RA pair or a
  zero padding word, then an FP pair; a control word is ``reg << 3 | unused << 2 | deref << 1
  | reg_p``.

:func:`first_row_error` is what decoding every function's rows in order raises first,
:func:`first_walk_error` what walking them raises first, :func:`row_findings` the findings
of the validator's row rules and where each function's FREs end.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pysframe import SFrameSection

#: (type name, message, offset, function) of an error, or a finding's
#: (severity, rule, function, offset, message).
Outcome = tuple[object, ...]

_ADDRESS = {0: "B", 1: "H", 2: "I"}
_WORD = {0: "b", 1: "h", 2: "i"}


@dataclass(frozen=True)
class Fre:
    position: int
    start: int
    info: int
    words: tuple[int, ...]


@dataclass(frozen=True)
class Walk:
    fres: list[Fre]
    #: (error type, rule, message, offset) of the FRE the walk stopped at; None: none.
    problem: tuple[str, str, str, int] | None
    end: int


def walk(section: SFrameSection, index: int) -> Walk:
    """Function ``index``'s FREs, read one after the other from its first."""
    header, table, data = section.header, section.table, section.data
    order = ">" if header.big_endian else "<"
    fre_type = int(table.info[index]) & 0xF
    address_size = 1 << fre_type
    end = header.fre_start + header.fre_len
    position = int(table.fre_data[index])
    fres = []
    for number in range(int(table.num_rows[index])):
        info_at = position + address_size
        if info_at >= end:
            message = f"FRE {number} runs past the FRE sub-section"
            return Walk(fres, ("TruncatedError", "fre-bounds", message, position), end)
        info = data[info_at]
        code, count = (info >> 5) & 3, (info >> 1) & 0xF
        if code == 3:
            message = f"FRE {number} has invalid data-word size code 3"
            return Walk(fres, ("InvalidFieldError", "word-size", message, info_at), end)
        following = info_at + 1 + count * (1 << code)
        if following > end:
            message = f"data words of FRE {number} run past the FRE sub-section"
            return Walk(fres, ("TruncatedError", "fre-bounds", message, position), end)
        (start,) = struct.unpack_from(order + _ADDRESS[fre_type], data, position)
        words = struct.unpack_from(order + _WORD[code] * count, data, info_at + 1)
        fres.append(Fre(position, start, info, words))
        position = following
    return Walk(fres, None, position)


def _is_flex(section: SFrameSection, index: int) -> bool:
    return int(section.header.version) == 3 and int(section.table.info2[index]) & 0x1F == 1


def flex_problem(fre: Fre) -> str | None:
    """Why a FLEX row does not decode (libsframe's sframe_fre_get_*; the decoder's words)."""
    count = len(fre.words)
    if count == 0:
        return None
    if count < 2 or count > 6:
        return f"FLEX FRE with {count} data words (expected 2 to 6)"
    mask = (1 << (8 << ((fre.info >> 5) & 3))) - 1
    if not fre.words[0] & mask & 1:
        return "FLEX FRE CFA control word names no register"
    if count in (3, 5) and fre.words[2] != 0:
        return "FLEX FRE RA padding word is not zero"
    if count in (4, 6) and fre.words[2] & mask == 0:
        return "FLEX FRE RA pair has a zero control word"
    return None


def first_walk_error(section: SFrameSection) -> Outcome | None:
    """What walking every function's FREs in order stops at first."""
    for index in range(len(section.table)):
        problem = walk(section, index).problem
        if problem is not None:
            return problem[0], problem[2], problem[3], index
    return None


def first_row_error(section: SFrameSection) -> Outcome | None:
    """What decoding every function's rows in order raises first: in a function, a FLEX row
    that does not decode before the FRE its walk stops at."""
    for index in range(len(section.table)):
        outcome = function_row_error(section, index)
        if outcome is not None:
            return outcome
    return None


def function_row_error(section: SFrameSection, index: int) -> Outcome | None:
    """What decoding function ``index``'s rows raises."""
    walked = walk(section, index)
    if _is_flex(section, index):
        for fre in walked.fres:
            problem = flex_problem(fre)
            if problem is not None:
                return "InvalidFieldError", problem, fre.position, None
    if walked.problem is not None:
        return walked.problem[0], walked.problem[2], walked.problem[3], index
    return None


# -- the validator's row rules ----------------------------------------------------------------


def row_findings(section: SFrameSection, kernel: bool) -> tuple[list[Outcome], list[int]]:
    """The findings of the row rules (fre-order, fre-start, fre-words, flex-control,
    mangled-ra, and where a walk stops: fre-bounds, word-size), function by function and FRE
    by FRE, and where each function's FREs end (a walk that stops: the sub-section's end)."""
    findings: list[Outcome] = []
    ends = []
    table = section.table
    for index in range(len(table)):
        walked = walk(section, index)
        previous = None
        for number, fre in enumerate(walked.fres):
            out = _RowFindings(section, kernel, index, number, fre)
            if previous is not None and fre.start <= previous:
                out.error(
                    "fre-order",
                    f"FRE {number} starts at offset {fre.start:#x}, not after FRE "
                    f"{number - 1} at {previous:#x}",
                )
            previous = fre.start
            out.start()
            out.words()
            findings += out.found
        if walked.problem is not None:
            _, rule, message, offset = walked.problem
            findings.append(("error", rule, index, offset, message))
        ends.append(walked.end)
    return findings, ends


class _RowFindings:
    def __init__(
        self, section: SFrameSection, kernel: bool, index: int, number: int, fre: Fre
    ) -> None:
        self.section, self.kernel, self.index, self.number, self.fre = (
            section, kernel, index, number, fre
        )  # fmt: skip
        self.found: list[Outcome] = []

    def error(self, rule: str, message: str, offset: int | None = None) -> None:
        where = self.fre.position if offset is None else offset
        self.found.append(("error", rule, self.index, where, message))

    def warning(self, rule: str, message: str, offset: int | None = None) -> None:
        where = self.fre.position if offset is None else offset
        self.found.append(("warning", rule, self.index, where, message))

    def start(self) -> None:
        table, i, n, start = self.section.table, self.index, self.number, self.fre.start
        size, rep_size = int(table.size[i]), int(table.rep_size[i])
        if (int(table.info[i]) >> 4) & 1:  # PCMASK
            if rep_size and start >= rep_size:
                self.warning(
                    "fre-start",
                    f"FRE {n} starts at offset {start:#x}, outside the {rep_size}-byte "
                    "repeated block",
                )
        elif start > size:
            self.error("fre-start", f"FRE {n} starts at offset {start:#x}, past the "
                       f"function's {size} bytes")  # fmt: skip
        elif start == size:
            self.warning(
                "fre-start", f"FRE {n} starts at the function's end ({size:#x}) and never applies"
            )

    def words(self) -> None:
        header, n, fre = self.section.header, self.number, self.fre
        if _is_flex(self.section, self.index):
            self._flex()
        else:
            most = 1 + (not header.cfa_fixed_ra_offset) + (not header.cfa_fixed_fp_offset)
            if len(fre.words) > most:
                self.error(
                    "fre-words",
                    f"FRE {n} has {len(fre.words)} data words; {header.abi.name} DEFAULT rows "
                    f"have at most {most}",
                )
        if fre.info & 0x80 and not header.abi.is_aarch64:
            info_at = fre.position + (1 << (int(self.section.table.info[self.index]) & 0xF))
            self.warning(
                "mangled-ra", f"FRE {n} has the mangled-RA bit set on {header.abi.name}", info_at
            )

    def _flex(self) -> None:
        n, fre = self.number, self.fre
        mask = (1 << (8 << ((fre.info >> 5) & 3))) - 1
        values = [w & mask for w in fre.words]
        count = len(values)
        if count not in (0, 2, 3, 4, 5, 6):
            self.error("fre-words", f"FLEX FRE {n} has {count} data words (expected 0 or 2 to 6)")
            return
        if count == 0:
            return
        if count == 3:
            (self.error if self.kernel else self.warning)(
                "fre-words",
                f"FLEX FRE {n} has 3 data words: a padding word with no FP pair after it "
                "(the kernel rejects it)",
            )
        controls = [("CFA", values[0])]
        if count in (3, 5):
            if values[2]:
                message = f"FLEX FRE {n}: RA padding word is {values[2]:#x}, not 0"
                self.error("flex-control", message)
            if count == 5:
                controls.append(("FP", values[3]))
        elif count >= 4:
            controls.append(("RA", values[2]))
            if count == 6:
                controls.append(("FP", values[4]))
        for what, control in controls:
            prefix = f"FLEX FRE {n}: {what} control word {control:#x}"
            reg, reg_p = control >> 3, control & 1
            if what == "CFA" and not reg_p:
                self.error("flex-control", f"{prefix} names no register (reg_p clear)")
                continue
            if control == 0:
                self.error("flex-control", f"{prefix} is zero (reads as padding)")
                continue
            if control & 4:
                self.warning("flex-control", f"{prefix} has unused bit 2 set")
            if not reg_p and reg:
                self.warning("flex-control", f"{prefix} names register {reg} without reg_p")
            if self.kernel and reg > 31:
                self.error(
                    "flex-control",
                    f"{prefix} names register {reg}; the kernel reads 5-bit register numbers",
                )
