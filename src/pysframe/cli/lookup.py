"""``pysframe lookup FILE PC...``: the CFA, FP and RA rules that apply at each PC.

PCs are addresses as the section shows them (``pysframe dump``), in hex (``0x...``) or decimal.
The lookup follows libsframe's ``sframe_find_fre``.  Exit status 1 if any PC has no row.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..elf.image import ElfImage
from ..errors import ElfError, SFrameError
from ..format.constants import Abi
from ..format.model import CfaRule, LookupResult, RegRule, RuleKind
from ..format.section import SFrameSection
from .dump import load_section

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


def parse_pc(text: str) -> int:
    """An address: ``0x`` hex, or decimal; argparse reports anything else as a usage error."""
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an address: {text!r}") from None
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"address out of range: {text!r}")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lookup",
        help="show the frame rules at PCs",
        description="Print the CFA, FP and RA rules that apply at each PC (hex 0x... or "
        "decimal), found as libsframe's sframe_find_fre finds them.",
    )
    parser.add_argument("file", metavar="FILE", help="ELF file")
    parser.add_argument("pcs", nargs="+", metavar="PC", type=parse_pc, help="addresses")
    parser.add_argument("--section", metavar="NAME", help="section to read (default: .sframe)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(func=run)


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


def result_json(section: SFrameSection, pc: int, found: LookupResult | None) -> dict[str, Any]:
    if found is None:
        return {"pc": pc, "found": False}
    f, row, abi = found.function, found.row, section.abi
    return {
        "pc": pc,
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


def result_text(section: SFrameSection, pc: int, found: LookupResult | None) -> str:
    if found is None:
        return f"{pc:#x}: no SFrame row"
    f, row, abi = found.function, found.row, section.abi
    ra = rule_text(abi, row.ra) + (" (signed)" if row.mangled_ra else "")
    return (
        f"{pc:#x}: function {f.index} [{f.start:#x}, {f.end:#x}) row {found.row_index} "
        f"at {row.start_address:#x}: CFA={cfa_text(abi, row.cfa)} "
        f"FP={rule_text(abi, row.fp)} RA={ra}"
    )


def run(args: argparse.Namespace) -> int:
    path: str = args.file
    with ElfImage.open(path) as image:
        elf_section = image.find_sframe(args.section)
        if elf_section is None:
            raise ElfError(f"{path}: no {args.section or '.sframe'} section")
        try:
            section = load_section(image, elf_section)
            results = [(pc, section.lookup(pc)) for pc in args.pcs]
        except SFrameError as error:
            raise SFrameError(f"{path}: {elf_section.name}: {error}") from None
    if args.json:
        json.dump([result_json(section, pc, r) for pc, r in results], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for pc, r in results:
            sys.stdout.write(result_text(section, pc, r) + "\n")
    return 0 if all(r is not None for _, r in results) else 1
