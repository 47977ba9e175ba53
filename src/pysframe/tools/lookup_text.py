"""Text and JSON of lookups: the CFA, FP and RA rules found at a PC, with register names."""

from __future__ import annotations

from typing import Any

from ..format.constants import Abi
from ..format.model import CfaRule, RegRule, RuleKind
from ..format.section import SFrameSection
from .lookup import Answer

#: DWARF register names (the psABIs' DWARF register number mappings).
_AMD64 = [
    *("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp"),
    *(f"r{n}" for n in range(8, 16)),
    "rip",
]
_AARCH64 = [f"x{n}" for n in range(31)] + ["sp"]
_S390X = [f"r{n}" for n in range(16)]
_REG_NAMES: dict[Abi, list[str]] = {
    Abi.AMD64_ENDIAN_LITTLE: _AMD64,
    Abi.AARCH64_ENDIAN_LITTLE: _AARCH64,
    Abi.AARCH64_ENDIAN_BIG: _AARCH64,
    Abi.S390X_ENDIAN_BIG: _S390X,
}


def reg_name(abi: Abi, reg: int) -> str:
    names = _REG_NAMES.get(abi, [])
    return names[reg] if 0 <= reg < len(names) else f"r{reg}"


def _plus(offset: int) -> str:
    return f"{offset:+d}" if offset else ""


def cfa_text(abi: Abi, cfa: CfaRule | None) -> str:
    if cfa is None:
        return "undefined"
    text = f"{reg_name(abi, cfa.reg)}{_plus(cfa.offset)}"
    return f"[{text}]" if cfa.deref else text


def rule_text(abi: Abi, rule: RegRule) -> str:
    """``[CFA-16]`` saved at; ``CFA+8`` / ``rbp`` value; ``unchanged``; ``undefined``."""
    base = "CFA" if rule.reg is None else reg_name(abi, rule.reg)
    if rule.kind in (RuleKind.FIXED, RuleKind.SAVED):
        return f"[{base}{_plus(rule.offset)}]"
    if rule.kind is RuleKind.VALUE:
        return f"{base}{_plus(rule.offset)}"
    if rule.kind is RuleKind.UNDEFINED:
        return "undefined"
    return "unchanged"


def _rule_json(abi: Abi, rule: RegRule) -> dict[str, Any]:
    return {
        "kind": rule.kind.value,
        "offset": rule.offset,
        "reg": rule.reg,
        "text": rule_text(abi, rule),
    }


def _where(answer: Answer) -> str:
    """The PC as the user reads it: an address, or ``SECTION+OFFSET`` in an object."""
    target = answer.target
    return f"{target.pc:#x}" if target.section is None else f"{target.section}+{target.pc:#x}"


def result_json(section: SFrameSection, answer: Answer) -> dict[str, Any]:
    """``pc``: the address (in an object: the offset in ``section``, the code section's name);
    ``symbol``: the function symbol holding it."""
    pc, found = answer.target.pc, answer.found
    symbol = answer.symbol
    named = None if symbol is None else {"name": symbol[0], "offset": symbol[1]}
    placed = {} if answer.target.section is None else {"section": answer.target.section}
    if found is None:
        return {"pc": pc, **placed, "symbol": named, "found": False}
    f, row, abi = found.function, found.row, section.abi
    return {
        "pc": pc,
        **placed,
        "symbol": named,
        "found": True,
        "function": {"index": f.index, "start": f.start, "size": f.size},
        "row": {"index": found.row_index, "start": row.start_address},
        "cfa": None
        if row.cfa is None
        else {
            "reg": row.cfa.reg,
            "offset": row.cfa.offset,
            "deref": row.cfa.deref,
            "text": cfa_text(abi, row.cfa),
        },
        "fp": _rule_json(abi, row.fp),
        "ra": _rule_json(abi, row.ra),
        "mangled_ra": row.mangled_ra,
    }


def result_text(section: SFrameSection, answer: Answer) -> str:
    """One line: the PC (``SECTION+OFFSET`` in an object), the symbol holding it as gdb shows
    it (``0x1139 <main+4>``), the function and row found, and the rules."""
    where, found, symbol = _where(answer), answer.found, answer.symbol
    if symbol is not None:
        name, offset = symbol
        where += f" <{name}+{offset:#x}>" if offset else f" <{name}>"
    if found is None:
        return f"{where}: no SFrame row"
    f, row, abi = found.function, found.row, section.abi
    ra = rule_text(abi, row.ra) + (" (signed)" if row.mangled_ra else "")
    return (
        f"{where}: function {f.index} [{f.start:#x}, {f.end:#x}) row {found.row_index} "
        f"at {row.start_address:#x}: CFA={cfa_text(abi, row.cfa)} "
        f"FP={rule_text(abi, row.fp)} RA={ra}"
    )


__all__ = ["cfa_text", "reg_name", "result_json", "result_text", "rule_text"]
