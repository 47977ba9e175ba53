"""Modules of an address space: which ELF file is mapped where, with its SFrame and symbols.

* Mappings come from /proc/PID/maps (a live process) or a core file's NT_FILE note
  (:mod:`pysframe.unwind.mappings`).
* For each mapped ELF file, its facts (:mod:`pysframe.unwind.facts`): its own ``.sframe``
  section if it has one, else SFrame generated from its ``.eh_frame``, read once per file.
  Which one a module is unwound with is chosen when a PC in it is first looked up (or the
  report asks where its SFrame came from): a module no frame lands in costs its headers only.
  Lookups are single-PC ones without numpy (:class:`~pysframe.format.single.SectionLookup`).
* The load bias (run-time address minus link-time address) comes from the mapping of the file
  offset a PT_LOAD segment covers; the SFrame section is rebased by it.
* Symbols: :mod:`pysframe.unwind.symbolize` (the file's symbol tables, its separate debug
  file's, MiniDebugInfo's), read when a frame in the file is first named.
* A file that is missing, or that is not the one the process mapped (other inode, "(deleted)",
  other build ID), is kept as a module with a ``problem``: frames in it are printed unresolved.
* The vDSO, which has no file, is read from the address space (:mod:`pysframe.unwind.vdso`).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..elf.layout import PF_X
from ..errors import SFrameError
from ..sources.cache import has_generation
from ..sources.trust import Policy
from .core import ModuleInfo, ReadMemory
from .facts import (
    NO_SFRAME,
    Chosen,
    ChosenLookup,
    ElfFacts,
    elf_facts,
    generate_for,
    generated_lookup_for,
    lookup_for,
)
from .mappings import DELETED, Mapping, mapped_file
from .symbolize import ModuleSymbols, SymbolOptions
from .vdso import VDSO_NAME, vdso_facts

if TYPE_CHECKING:
    from ..format.model import Header, LookupResult
    from ..format.single import SectionLookup

_DEFAULT_SYMBOLS = SymbolOptions()


class ModuleSFrame:
    """The SFrame a module is unwound with (a :class:`~pysframe.unwind.core.RowLookup`),
    chosen by :func:`~pysframe.unwind.facts.lookup_for` when first needed, and SFrame generated
    from its CFI beside its own section when that leaves a PC out (:meth:`fallback`)."""

    __slots__ = ("_bias", "_chosen", "_facts", "_policy")

    def __init__(
        self,
        facts: ElfFacts | None,
        bias: int = 0,
        policy: Policy = Policy.AUTO,
        chosen: ChosenLookup | None = None,
    ) -> None:
        self._facts, self._bias, self._policy, self._chosen = facts, bias, policy, chosen

    @classmethod
    def none(cls, origin: str = NO_SFRAME) -> ModuleSFrame:
        """A module without SFrame (no file, or one that cannot be used)."""
        return cls(None, chosen=Chosen(None, origin))

    @property
    def chosen(self) -> ChosenLookup:
        if self._chosen is None:
            assert self._facts is not None
            self._chosen = lookup_for(self._facts, self._bias, self._policy)
        return self._chosen

    @property
    def header(self) -> Header:
        section = self.chosen.section
        assert section is not None, "a header is asked for only after a lookup found a row"
        return section.header

    def lookup(self, pc: int) -> LookupResult | None:
        section = self.chosen.section
        return None if section is None else section.lookup(pc)

    def prepare(self) -> None:
        """Make now what choosing will need that the cache does not hold: the checks'
        verdict on the file's own section, SFrame generated from its CFI when it will be
        unwound with it and the cache has none (see :func:`prepare_sframe`)."""
        facts, policy = self._facts, self._policy
        if facts is None or self._chosen is not None or policy is Policy.OWN:
            return
        if facts.own is not None and policy is Policy.AUTO and not facts.own_problems():
            return  # its own section (SFrame generated beside it is made if a PC needs it)
        if not facts.build_id or not has_generation(facts.build_id):
            generate_for(facts)

    def fallback(self) -> SectionLookup | None:
        """SFrame generated from the module's CFI, when its own section is used and may leave
        PCs out (start-up code assembled without SFrame); None otherwise."""
        if self._facts is None or not self.chosen.with_fallback:
            return None
        return generated_lookup_for(self._facts, self._bias)


@dataclass(frozen=True, slots=True)
class Module:
    """A mapped ELF file: its range, load bias and what the unwinder is told about it."""

    path: str
    start: int
    end: int
    bias: int
    info: ModuleInfo
    #: Its SFrame, chosen when first needed (``info.section`` is this too); how it is
    #: chosen is no API: :attr:`origin` and :attr:`reason` say what was chosen.
    _sframe: ModuleSFrame
    #: The file's symbols and source lines (read on first call); None without a usable file.
    symbols: Callable[[], ModuleSymbols] | None = None

    @property
    def origin(self) -> str:
        """Where its SFrame came from (:class:`pysframe.sources.Origin`: "section",
        "segment", "generated"), or "none" / "invalid"."""
        return self._sframe.chosen.origin

    @property
    def reason(self) -> str | None:
        """Why its own SFrame section is not used (or is used though it fails the checks), for
        one warning line; None when there is nothing to say."""
        return self._sframe.chosen.reason


class ModuleTable:
    """``find_module`` for an address space: the module whose mappings hold a PC."""

    def __init__(self, modules: Iterable[Module]) -> None:
        self.modules = sorted(modules, key=lambda m: m.start)
        self._starts = [m.start for m in self.modules]

    def __call__(self, pc: int) -> ModuleInfo | None:
        module = self.module_at(pc)
        return None if module is None else module.info

    def module_at(self, pc: int) -> Module | None:
        index = bisect.bisect_right(self._starts, pc) - 1
        if index >= 0 and pc < self.modules[index].end:
            return self.modules[index]
        return None

    def __len__(self) -> int:
        return len(self.modules)


def prepare_sframe(table: ModuleTable) -> None:
    """Make, before a process is stopped, what choosing its modules' SFrame will need that the
    cache does not hold yet (SFrame generated from their CFI, the checks' verdicts), so that
    its threads stay stopped for the walk only; what the cache holds is read when a frame
    first needs it."""
    for module in table.modules:
        module._sframe.prepare()


def load_modules(
    mappings: Iterable[Mapping],
    read_memory: ReadMemory | None = None,
    *,
    policy: Policy = Policy.AUTO,
    vdso: int | None = None,
    symbols: SymbolOptions = _DEFAULT_SYMBOLS,
    pid: int | None = None,
) -> ModuleTable:
    """Modules for the mapped ELF files; ``read_memory`` lets build IDs be compared, and
    reads the vDSO when its address (``vdso``, AT_SYSINFO_EHDR) is given.  ``symbols``: how
    frames are named (debug directories, demangling).  ``pid``: the live process the mappings
    are of, whose files deleted or replaced since they were mapped are read through
    ``/proc/PID/map_files``."""
    by_path: dict[str, list[Mapping]] = {}
    for mapping in mappings:
        by_path.setdefault(mapping.path, []).append(mapping)
    modules = []
    for path, ranges in by_path.items():
        module = _module(path, ranges, read_memory, policy, symbols, pid)
        if module is not None:
            modules.append(module)
    if vdso is not None and read_memory is not None:
        module = vdso_module(vdso, read_memory, policy=policy, symbols=symbols)
        if module is not None and not any(
            m.start < module.end and module.start < m.end for m in modules
        ):
            modules.append(module)
    return ModuleTable(modules)


def _module(
    path: str,
    ranges: list[Mapping],
    read_memory: ReadMemory | None,
    policy: Policy,
    symbols: SymbolOptions,
    pid: int | None,
) -> Module | None:
    ranges.sort(key=lambda m: m.start)
    start, end = ranges[0].start, max(m.end for m in ranges)
    name = path.removesuffix(DELETED)
    problem = _file_problem(path, name, ranges)
    read_from = name
    if pid is not None and (problem is not None or _other_device(name, ranges)):
        mapped = mapped_file(pid, ranges)
        if mapped is not None:
            # The file the process mapped, whatever is at its path now.
            read_from, name, problem = mapped, path, None
    facts: ElfFacts | None = None
    if problem is None:
        try:
            facts = elf_facts(read_from)
            if facts is not None and read_from != name:
                facts.link_path = name.removesuffix(DELETED)
        except OSError as error:
            problem = f"cannot read {name}: {error.strerror or error}"
        else:
            if facts is None:
                return None  # not an ELF file (data mapped from a file)
    if facts is None:
        return Module(name, start, end, 0, ModuleInfo(name, problem=problem), ModuleSFrame.none())
    bias = load_bias(facts, ranges)
    if bias is None:
        problem = f"{name} does not match its mappings (no PT_LOAD segment fits)"
    elif read_memory is not None:
        problem = _build_id_problem(facts, bias, read_memory)
    if problem is not None or bias is None:
        info = ModuleInfo(name, problem=problem)
        return Module(name, start, end, bias or 0, info, ModuleSFrame.none())
    return module_from_facts(name, start, end, facts, bias, policy, symbols)


def module_from_facts(
    name: str,
    start: int,
    end: int,
    facts: ElfFacts,
    bias: int,
    policy: Policy,
    symbols: SymbolOptions,
) -> Module:
    sframe = ModuleSFrame(facts, bias, policy)

    def symbolize(pc: int) -> tuple[str, int] | None:
        found = facts.symbols(symbols).find(pc - bias)
        return None if found is None else (symbols.name(found[0]), found[1])

    # A file's own .sframe may leave code out (start-up objects assembled without SFrame):
    # SFrame generated from its CFI answers for those PCs.
    info = ModuleInfo(name, bias, sframe, symbolize, fallback=sframe.fallback)
    return Module(
        name, start, end, bias, info, sframe, lambda: facts.symbols(symbols)
    )


def _other_device(name: str, ranges: list[Mapping]) -> bool:
    """Whether the file at ``name`` is on another device than the mapped one (same inode
    number, another file system)."""
    devices = {m.device for m in ranges if m.device is not None}
    try:
        stat = os.stat(name)
    except OSError:
        return False
    return bool(devices) and (os.major(stat.st_dev), os.minor(stat.st_dev)) not in devices


def _file_problem(path: str, name: str, ranges: list[Mapping]) -> str | None:
    if path.endswith(DELETED):
        return f"{name} was deleted or replaced after it was mapped"
    try:
        stat = os.stat(name)
    except OSError:
        return f"{name} is missing"
    inodes = {m.inode for m in ranges if m.inode is not None}
    if inodes and stat.st_ino not in inodes:
        return f"{name} changed after it was mapped"
    return None


def load_bias(facts: ElfFacts, ranges: list[Mapping], *, code: bool = False) -> int | None:
    """What the file's link-time addresses gain where ``ranges`` map it: from the mapping of
    the lowest file offset and the first load segment on its file page.  ``code``: the
    ranges map code (a recording's executable mappings), so a segment that holds code is
    taken first (lld puts read-only data and code on one file page, each mapped on its
    own)."""
    segments = sorted(facts.segments, key=lambda s: not s.flags & PF_X) if code else facts.segments
    for mapping in sorted(ranges, key=lambda m: m.file_offset):
        for segment in segments:
            page_start = segment.offset & ~0xFFF
            if page_start <= mapping.file_offset < segment.offset + max(segment.filesz, 1):
                return mapping.start - (segment.vaddr - segment.offset + mapping.file_offset)
    return None


def _build_id_problem(facts: ElfFacts, bias: int, read_memory: ReadMemory) -> str | None:
    if facts.build_id is None or facts.build_id_address is None:
        return None
    try:
        seen = read_memory(facts.build_id_address + bias, len(facts.build_id))
    except (OSError, ValueError, SFrameError):
        return None
    if len(seen) == len(facts.build_id) and seen != facts.build_id:
        return f"{facts.path} changed (build ID {facts.build_id.hex()} is not the mapped one)"
    return None


def vdso_module(
    address: int,
    read_memory: ReadMemory,
    *,
    policy: Policy = Policy.AUTO,
    symbols: SymbolOptions = _DEFAULT_SYMBOLS,
) -> Module | None:
    """The vDSO mapped at ``address`` as a module (:mod:`pysframe.unwind.vdso`): its symbols,
    and SFrame generated from its ``.eh_frame`` unless it has a ``.sframe``; None if it cannot
    be read."""
    found = vdso_facts(address, read_memory)
    if found is None:
        return None
    facts, size = found
    bias = load_bias(facts, [Mapping(address, address + size, 0, VDSO_NAME)])
    if bias is None:
        return None
    return module_from_facts(VDSO_NAME, address, address + size, facts, bias, policy, symbols)


__all__ = [
    "Module",
    "ModuleSFrame",
    "ModuleTable",
    "load_bias",
    "load_modules",
    "module_from_facts",
    "prepare_sframe",
    "vdso_module",
]
