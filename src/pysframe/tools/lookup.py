"""What ``pysframe lookup`` answers: each PC of a file resolved (an address, or a function
symbol with an offset) and looked up in the file's SFrame section, with the symbol naming it.

In a linked file a PC is an address.  In a relocatable object every section sits at address
0, so a PC is an offset in the code section it is in, as ``nm`` and ``objdump -d`` show it and
as ``objdump --sframe`` 2.47 shows the function starts of GNU as' V3 sections (``pysframe
dump``).  To tell the code sections apart, the object's sections are laid out one after the
other and its SFrame section is relocated for that layout, each function start read relative
to its own field, as GNU as writes it in every version (:class:`~pysframe.tools.verify_place.
Placement`, the layout ``verify`` compares an object with its CFI in): V1 and V2 before errata
1 included, whose dump shows the starts as they are stored or relocated, not where the
functions are.  The function symbols of ``.symtab`` are laid out the same way.  A number is
then looked for in every code section: when functions of several sections hold it, which one
is meant is asked, by naming a symbol (``NAME+OFFSET``) or the section (``.text+0x24``).  The
answers give offsets in the section again, and its name.

The answers are written as text and JSON (:func:`result_text`, :func:`result_json`): the CFA,
FP and RA rules found at a PC, with register names.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..dataclass import dataclass
from ..elf.layout import SHF_EXECINSTR
from ..elf.reader import ElfReader, ElfSection
from ..elf.symbols import FunctionSymbols, read_function_symbols
from ..errors import ElfError, SFrameError
from ..format.constants import Abi
from ..format.model import CfaRule, LookupResult, RegRule, RuleKind
from ..format.section import SFrameSection
from ..sources import Origin, ResolvedSFrame
from ..unwind.symbolize import ModuleSymbols, symbols_of_file
from .verify_place import Placement

#: A location: an address, or (symbol or section name, offset).
Location = int | tuple[str, int]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a PC is looked up (``address``: None where no function holds it), and how it is
    shown: ``pc``, an offset in the object's code section ``section``, else an address."""

    address: int | None
    pc: int
    section: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """The row found at a PC, in the terms of its target (offsets in an object's section),
    and the function symbol (name, offset) holding it."""

    target: Target
    found: LookupResult | None
    symbol: tuple[str, int] | None


class FileLookup:
    """The SFrame section of a file (``found``) as lookups read it, and its symbols."""

    def __init__(self, found: ResolvedSFrame, debug_dirs: tuple[str, ...]) -> None:
        self.found = found
        self.symbols: ModuleSymbols | None = None
        #: A relocatable object's code sections with functions, laid out: (address, end, name).
        self._sections: list[tuple[int, int, str]] = []
        #: Why the file has no symbols to name PCs with.
        self._why = "a bare section"
        self._starts: list[int] = []
        self._reach: list[int] = []
        self.section: SFrameSection
        if found.origin is Origin.BARE:
            self.section = found.section
        elif not found.relocatable:
            self.section = found.section
            self.symbols = symbols_of_file(found.path, debug_dirs)
        elif found.elf_section is None:
            # Generated from the CFI: every section at 0, and no record of which it is.
            self.section = found.section
            self._why = "a section generated for a relocatable object"
        else:
            self._place(found, found.elf_section)

    def _place(self, found: ResolvedSFrame, section: ElfSection) -> None:
        """The object's own ``section``, and its symbols, laid out (see the module's
        docstring); symbols that cannot be read are none, and a problem to warn of."""
        problems: list[str] = []
        with ElfReader.open(found.path) as image, found.located():
            placement = Placement(image)
            data = placement.sframe(section, found.stored)
            self.section = SFrameSection.from_bytes(data, placement.address(section.index, 0))
            for sec in image.sections():
                if sec.flags & SHF_EXECINSTR and sec.index in (placement.layout or {}):
                    start = placement.address(sec.index, 0)
                    self._sections.append((start, start + sec.size, sec.name))
            try:
                records = read_function_symbols(image, ".symtab", placement.layout)
            except SFrameError as error:
                records, problems = [], [str(error)]
        self._sections.sort()
        spans = sorted((f.start, f.end) for f in self.section)
        #: The functions' starts in order, and the furthest end up to each.
        self._starts = [start for start, _ in spans]
        self._reach = list(itertools.accumulate((end for _, end in spans), max))
        sources = [".symtab"] if records else []
        table = FunctionSymbols(records)
        self.symbols = ModuleSymbols(found.path, [table], sources, problems=problems)

    # -- resolving ---------------------------------------------------------------------------

    def target(self, location: Location) -> Target:
        """Where ``location`` is looked up; ElfError when it names nothing, or more than one
        place."""
        if isinstance(location, int):
            return self._number(location)
        name, offset = location
        path = self.found.path
        if self.symbols is None:
            raise ElfError(f"{self._why}: give addresses, not symbols ({name})", path=path)
        found = self.symbols.by_name(name)
        if not found:
            section = next((s for s in self._sections if s[2] == name), None)
            if section is None:
                raise ElfError(f"no function symbol {name}", path=path)
            start, end, _ = section
            if offset >= end - start:
                raise ElfError(
                    f"{name}+{offset:#x} is past the end of {name} ({end - start:#x} bytes)",
                    path=path,
                )
            return self._placed(start + offset)
        starts = sorted({s.address for s in found})
        if len(starts) > 1:
            listed = ", ".join(f"{self._placed(s).pc:#x}" for s in starts)
            raise ElfError(
                f"{len(starts)} functions are called {name} (at {listed}): give an address",
                path=path,
            )
        symbol = found[0]
        if offset and symbol.size and offset >= symbol.size:
            raise ElfError(
                f"{name}+{offset:#x} is past the end of {name} ({symbol.size:#x} bytes)",
                path=path,
            )
        return self._placed(starts[0] + offset)

    def _number(self, pc: int) -> Target:
        """A PC given as a number: an address, or in an object an offset in the code section
        whose functions hold it."""
        if not self._sections:
            if self.found.relocatable:
                indexes = [str(f.index) for f in self.section if f.start <= pc < f.end]
                if len(indexes) > 1:
                    raise ElfError(
                        f"{pc:#x} is in {len(indexes)} functions ({', '.join(indexes)}): every "
                        "section of an object is at 0, and a section generated from its CFI "
                        "does not say which function is in which",
                        path=self.found.path,
                    )
            return Target(pc, pc)
        holders = [
            (start, name)
            for start, end, name in self._sections
            if pc < end - start and self._in_function(start + pc)
        ]
        if len(holders) > 1:
            names = ", ".join(name for _, name in holders)
            raise ElfError(
                f"{pc:#x} is in functions of {len(holders)} code sections ({names}): give a "
                "symbol (NAME+OFFSET) or a section (SECTION+OFFSET)",
                path=self.found.path,
            )
        if not holders:
            return Target(None, pc)
        return self._placed(holders[0][0] + pc)

    def _in_function(self, address: int) -> bool:
        """Whether a function of the laid-out section holds ``address``."""
        at = bisect.bisect_right(self._starts, address) - 1
        return at >= 0 and self._reach[at] > address

    def _placed(self, address: int) -> Target:
        """The target of a laid-out ``address``: an offset in its code section."""
        if not self._sections:
            return Target(address, address)
        at = bisect.bisect_right(self._sections, (address, 1 << 64)) - 1
        if at < 0 or address >= self._sections[at][1]:
            return Target(address, address)
        start, _, name = self._sections[at]
        return Target(address, address - start, name)

    # -- looking up --------------------------------------------------------------------------

    def answers(
        self, targets: list[Target], rename: Callable[[str], str] = str
    ) -> list[Answer]:
        """The row and the symbol at each target, its name as ``rename`` gives it (demangled:
        :meth:`pysframe.unwind.symbolize.SymbolOptions.name`)."""
        addresses = [t.address for t in targets if t.address is not None]
        with self.found.located():
            rows = dict(zip(addresses, map(self.section.find_row, addresses), strict=True))
        names: list[tuple[str, int] | None] = [None] * len(addresses)
        if self.symbols is not None:
            names = self.symbols.find_many(addresses)
        symbols = dict(zip(addresses, names, strict=True))
        out = []
        for target in targets:
            if target.address is None:
                out.append(Answer(target, None, None))
                continue
            found = rows[target.address]
            if found is not None and target.pc != target.address:  # back in section terms
                base = target.address - target.pc
                found = replace(
                    found,
                    function=replace(found.function, start=found.function.start - base),
                    row=replace(found.row, start_address=found.row.start_address - base),
                )
            symbol = symbols.get(target.address)
            named = None if symbol is None else (rename(symbol[0]), symbol[1])
            out.append(Answer(target, found, named))
        return out


# -- the answers as text and JSON ---------------------------------------------------------------
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


__all__ = [
    "Answer",
    "FileLookup",
    "Location",
    "Target",
    "cfa_text",
    "reg_name",
    "result_json",
    "result_text",
    "rule_text",
]
