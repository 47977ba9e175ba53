"""What validation reports: a :class:`Finding` per problem, and :data:`RULES`, every rule id
with what it requires.  The checks are :mod:`pysframe.format.validate`'s (and, against an ELF
file, :mod:`pysframe.tools.validate`'s).
"""

from __future__ import annotations

from enum import StrEnum

from ..dataclass import dataclass


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
        where = "section" if self.function is None else f"function {self.function}"
        at = "" if self.offset is None else f" offset {self.offset:#x}"
        return f"{self.severity.value}: [{self.rule}] {where}{at}: {self.message}"


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
    "fre-block-overlap": "FRE blocks do not overlap: functions share a block only by naming its "
    "offset (V3: attribute record included; V1/V2: the first FREs of a longer block, same FRE "
    "type)",
    "fre-block-shared": "(opt-in, warning) no function uses another's FRE block (readers of the "
    "other byte order reject shared blocks)",
    "concatenated": "the section holds one SFrame section: nothing but zero padding follows its "
    "end (a linker that does not know the format leaves its inputs' sections back to back, of "
    "which readers see the first only; pysframe repair merges them)",
    "elf-segment": "the section's address and size match PT_GNU_SFRAME (kernel: it exists)",
    "load-overlap": "no two PT_LOAD segments share an address (the later mapping would "
    "replace the earlier one's pages)",
    "decode": "anything else the decoder rejects",
}


def error(
    rule: str, message: str, function: int | None = None, offset: int | None = None
) -> Finding:
    """An error finding."""
    return Finding(Severity.ERROR, rule, message, function, offset)


def warning(
    rule: str, message: str, function: int | None = None, offset: int | None = None
) -> Finding:
    """A warning finding."""
    return Finding(Severity.WARNING, rule, message, function, offset)
