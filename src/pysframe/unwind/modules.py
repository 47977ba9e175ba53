"""The address space of a process: which ELF file is mapped where, at what load bias, with its
SFrame and its symbols.  ``stack`` and ``perf`` both unwind through it.

* :class:`ElfFiles`: the ELF files an address space maps, each read once per version (path,
  modification time, size, inode) as an :class:`ElfFacts`: its load segments, build ID, own
  SFrame section (read, decoded when a module first needs it: the trust checks of
  :func:`pysframe.sources.trust.checked`, whose verdict the on-disk cache keeps), SFrame
  generated from its CFI (:mod:`pysframe.sources`) and symbols (:mod:`pysframe.unwind.symbolize`),
  each made when first needed.  Whoever unwinds owns one (a ``stack`` command, a ``perf``
  session); it keeps a bounded number of files.
* :class:`Module`: a file placed at a load bias (run-time address minus link-time address,
  :func:`load_bias`), unwound with the SFrame :class:`~pysframe.sources.trust.Policy` chooses
  when a PC in it is first looked up (a module no frame lands in costs its headers only): its
  own section, SFrame generated from its CFI beside it for the PCs it leaves out, or generated
  SFrame alone; each looked up through :class:`~pysframe.format.lookup.SectionLookup` (one PC
  without numpy, many with it).  A file that is missing, or not the one the process mapped
  (other inode, "(deleted)", other build ID), is a module with a ``problem``: frames in it are
  printed unresolved.  :attr:`Module.info` is what the unwinder is told of it.
* :class:`AddressSpace`: which module each address is in (a later mapping replaces what it
  covers of earlier ones), for one PC (the unwinder's ``find_module``) or many (numpy).
* :func:`load_modules`: the address space of mappings from /proc/PID/maps or a core file's
  NT_FILE note (:mod:`pysframe.unwind.mappings`), and the vDSO, read from the address space
  (:mod:`pysframe.unwind.vdso`).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING

from ..bounded import BoundedCache
from ..dataclass import dataclass
from ..elf.layout import ELF_MAGIC, PF_X
from ..elf.reader import ElfReader, ElfSegment
from ..errors import InputError, NoSFrameError, SFrameError
from ..format.constants import Abi
from ..format.lookup import SectionLookup
from ..input import open_input
from ..sources import Origin, ResolvedSFrame, generated_sframe, locate_sframe, own_sframe
from ..sources.cache import has_generation
from ..sources.trust import Policy, Verdict, checked
from .core import ModuleInfo, ReadMemory, sigreturn_code
from .mappings import DELETED, Mapping, mapped_file
from .symbolize import ModuleSymbols, SymbolOptions, symbols_of_file, symbols_of_image
from .vdso import VDSO_NAME, read_vdso_image

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..format.model import Header, LookupResult

    #: An address space's pieces: where each starts, its module number and delta.
    _Pieces = tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.uint64]]

#: What a module's SFrame is when it has none: no section and nothing generated.
NO_SFRAME = "none"
#: ... and when its section cannot be read.
INVALID = "invalid"
_DEFAULT_SYMBOLS = SymbolOptions()
_MASK64 = (1 << 64) - 1


# -- one file -----------------------------------------------------------------------------------


@dataclass(slots=True)
class ElfFacts:
    """What unwinding needs of one ELF file, shared by every module that maps it."""

    path: str
    abi: Abi | None
    #: The PT_LOAD program headers.
    segments: tuple[ElfSegment, ...]
    #: The file's own SFrame section as found (read, not yet decoded), or why it cannot be
    #: read (None: it has none).
    own: ResolvedSFrame | str | None
    build_id: bytes | None
    build_id_address: int | None
    #: SFrame generated from the file's CFI (read when first needed), or why there is none.
    generated: ResolvedSFrame | str | None = None
    #: The bytes of an image that is no file (the vDSO), read instead of ``path``.
    image: bytes | None = None
    #: The file's own name when ``path`` is another way to it (/proc/PID/map_files/...): its
    #: debuglink is looked for beside it.
    link_path: str | None = None
    #: The checks' verdict on the own section, found when first asked.
    _verdict: Verdict | None = None
    #: Sections opened for lookups at a load bias, by (origin, bias); None: it does not open.
    _lookups: BoundedCache[tuple[str, int], SectionLookup | None] = field(
        default_factory=lambda: BoundedCache(16)
    )
    #: Symbols, by the debug directories searched.
    _symbols: BoundedCache[tuple[str, ...], ModuleSymbols] = field(
        default_factory=lambda: BoundedCache(4)
    )
    #: Link-time addresses where the code is the signal return trampoline (read when asked).
    _trampolines: tuple[int, ...] | None = None

    @property
    def code(self) -> list[tuple[int, int]]:
        """The link-time ranges of the executable PT_LOAD segments."""
        return [(s.vaddr, s.vaddr + s.memsz) for s in self.segments if s.flags & PF_X]

    def own_verdict(self) -> Verdict:
        """What the checks find in the file's own section (:func:`~pysframe.sources.trust.
        checked`: decoded, its table, :func:`~pysframe.sources.trust.trust_problems`)."""
        if self._verdict is None:
            if isinstance(self.own, str):
                self._verdict = Verdict(self.own, None, (f"it is malformed: {self.own}",))
            elif self.own is None:
                self._verdict = Verdict()
            else:
                self._verdict = checked(self.own, self.code, self.build_id, trust=True)
        return self._verdict

    def own_problems(self) -> list[str]:
        """Why the file's own section must not be used to unwind: empty when it passes every
        check (or there is none)."""
        return list(self.own_verdict().problems)

    def symbols(self, options: SymbolOptions) -> ModuleSymbols:
        """The file's symbols (with its separate debug file's), read on first use."""
        return self._symbols.get(options.debug_dirs, self._read_symbols, options.debug_dirs)

    def _read_symbols(self, debug_dirs: tuple[str, ...]) -> ModuleSymbols:
        if self.image is None:
            return symbols_of_file(self.path, debug_dirs, self.link_path)
        with ElfReader.from_bytes(self.path, self.image) as opened:
            return symbols_of_image(opened, search=False)

    def trampolines(self) -> tuple[int, ...]:
        """The link-time addresses at which the file's executable segments hold the signal
        return trampoline's code (:func:`~pysframe.unwind.core.sigreturn_code`), sorted;
        read from the file when first asked."""
        if self._trampolines is None:
            found: list[int] = []
            if self.abi is not None:
                pattern = sigreturn_code(self.abi)
                for segment, code in self._executable_code():
                    at = code.find(pattern)
                    while at >= 0:
                        found.append(segment.vaddr + at)
                        at = code.find(pattern, at + 1)
            self._trampolines = tuple(sorted(found))
        return self._trampolines

    def _executable_code(self) -> list[tuple[ElfSegment, bytes]]:
        """The bytes of each executable PT_LOAD segment (empty where they cannot be read)."""
        chosen = [s for s in self.segments if s.flags & PF_X and s.filesz]
        if self.image is not None:
            return [(s, self.image[s.offset : s.offset + s.filesz]) for s in chosen]
        out = []
        try:
            with open_input(self.path) as file:
                for segment in chosen:
                    file.seek(segment.offset)
                    out.append((segment, file.read(segment.filesz)))
        except (InputError, OSError):
            return []
        return out

    @property
    def has_own(self) -> bool:
        """Whether the file has an SFrame section of its own (usable or not)."""
        return self.own is not None


def facts_of_image(image: ElfReader) -> ElfFacts:
    """The facts of an open ELF image (its own section read, not decoded)."""
    own: ResolvedSFrame | str | None
    try:
        own = own_sframe(locate_sframe(image), relocate=False)
    except NoSFrameError:
        own = None
    except SFrameError as error:
        own = error.detail
    build_id = image.build_id()
    build_id_address = None
    note = image.section(".note.gnu.build-id")
    if build_id is not None and note is not None and note.address:
        at = note.data().find(build_id)
        build_id_address = note.address + at if at >= 0 else None
    segments = tuple(image.load_segments())
    return ElfFacts(image.path, image.abi, segments, own, build_id, build_id_address)


class ElfFiles:
    """The ELF files address spaces map, read once per file version; the owner keeps at most
    :attr:`CACHE_SIZE` of them (and of vDSO images)."""

    CACHE_SIZE = 256

    def __init__(self) -> None:
        self._files: BoundedCache[tuple[str, int, int, int], ElfFacts | None] = BoundedCache(
            self.CACHE_SIZE
        )
        self._images: BoundedCache[bytes, ElfFacts | None] = BoundedCache(8)

    def facts(self, path: str) -> ElfFacts | None:
        """Facts about the ELF file at ``path`` (None: not an ELF file); OSError when it
        cannot be read."""
        stat = os.stat(path)
        key = (path, stat.st_mtime_ns, stat.st_size, stat.st_ino)
        return self._files.get(key, _read_facts, path)

    def image(self, name: str, image: bytes) -> ElfFacts | None:
        """Facts about an ELF image that is no file (the vDSO; None: it cannot be read): its
        symbols and generated SFrame are read from these bytes when first needed."""
        return self._images.get(image, _image_facts, name, image)


def _read_facts(path: str) -> ElfFacts | None:
    try:
        file = open_input(path)  # never a wait on a FIFO the mappings name
    except InputError as error:
        raise OSError(error.message) from None
    with file:  # opened once: its magic read, then the reader reads it from the start
        if file.read(len(ELF_MAGIC)) != ELF_MAGIC:
            return None
        try:
            return facts_of_image(ElfReader(path, file))
        except SFrameError as error:  # a hostile file costs its own frames only, not the stack
            raise OSError(f"not a readable ELF file ({error.detail})") from None


def _image_facts(name: str, image: bytes) -> ElfFacts | None:
    try:
        with ElfReader.from_bytes(name, image) as elf:
            facts = facts_of_image(elf)
    except SFrameError:
        return None
    facts.image = image
    return facts


# -- which SFrame -------------------------------------------------------------------------------


def generate_for(facts: ElfFacts) -> ResolvedSFrame | None:
    """SFrame generated from the file's CFI (from its image's bytes, else the file at its
    path), made once and kept with the facts; None when it cannot be."""
    if facts.generated is None:
        try:
            if facts.image is not None:
                opened = ElfReader.from_bytes(facts.path, facts.image)
            else:
                opened = ElfReader.open(facts.path)
            with opened:
                facts.generated = generated_sframe(opened, cached=True)
        except SFrameError as error:  # a hostile file: no SFrame for it, the walk goes on
            facts.generated = error.detail
        except OSError as error:  # the file went away or cannot be read now
            facts.generated = error.strerror or str(error)
    return facts.generated if isinstance(facts.generated, ResolvedSFrame) else None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Chosen:
    """The SFrame a module is unwound with, per :class:`~pysframe.sources.trust.Policy`."""

    #: The section opened for lookups at the module's address, or None (frames fall back to
    #: frame pointers).
    section: SectionLookup | None
    #: Where it came from (:class:`~pysframe.sources.Origin`), or ``none`` / ``invalid``.
    origin: str
    #: Why the file's own section is not used, or used though it fails the checks; None when
    #: there is nothing to say.
    reason: str | None = None
    #: Whether SFrame generated from the file's CFI answers for PCs the own section leaves out.
    with_fallback: bool = False


def choose_sframe(facts: ElfFacts, bias: int, policy: Policy = Policy.AUTO) -> Chosen:
    """The SFrame of the file at load bias ``bias``, chosen by ``policy``: its own section
    (``own``, or ``auto`` when it passes the checks), else one generated from its CFI."""
    asked = policy is not Policy.GENERATED and facts.own is not None
    verdict = facts.own_verdict() if asked else Verdict()
    problems = verdict.problems
    if policy is Policy.OWN or (policy is Policy.AUTO and facts.own is not None and not problems):
        if facts.own is None:
            return Chosen(None, NO_SFRAME)
        reason = None
        if problems:
            reason = "its .sframe fails the checks, used as asked: " + "; ".join(problems)
        if isinstance(facts.own, str) or verdict.malformed is not None:
            return Chosen(None, INVALID, reason)
        opens, section = _rebased(facts, facts.own, bias)
        if not opens:
            return Chosen(None, INVALID, reason)
        return Chosen(section, str(facts.own.origin), reason, policy is Policy.AUTO)
    reason = None
    if policy is Policy.AUTO and problems:
        reason = "its .sframe is not used: " + "; ".join(problems)
    generated = generate_for(facts)
    if generated is None:
        if reason is not None:
            reason += f"; no SFrame could be generated from its CFI ({facts.generated})"
        return Chosen(None, NO_SFRAME, reason)
    if reason is not None:
        reason += "; unwound with SFrame generated from its CFI"
    return Chosen(_rebased(facts, generated, bias)[1], str(Origin.GENERATED), reason)


def generated_for(facts: ElfFacts, bias: int) -> SectionLookup | None:
    """SFrame generated from the file's CFI at load bias ``bias``, used beside the file's own
    section for the PCs it leaves out; None when it cannot be generated."""
    generated = generate_for(facts)
    return None if generated is None else _rebased(facts, generated, bias)[1]


def _rebased(
    facts: ElfFacts, found: ResolvedSFrame, bias: int
) -> tuple[bool, SectionLookup | None]:
    """Whether ``found`` opens once rebased by ``bias`` (:func:`_open_lookup`), and the
    section to look PCs up in: None also where every lookup of the decoded section would
    fail (an unsorted section whose FDE table fails the checks)."""
    section = facts._lookups.get((str(found.origin), bias), _open_lookup, facts, found, bias)
    if section is None:
        return False, None
    if not section.header.sorted and _verdict_of(facts, found).table is not None:
        return True, None
    return True, section


def _verdict_of(facts: ElfFacts, found: ResolvedSFrame) -> Verdict:
    """The checks' verdict on the own section; a generated one passed them before it was
    given (the generator's output, or a cache entry checked by generated_sframe)."""
    return facts.own_verdict() if found is facts.own else Verdict()


def _open_lookup(facts: ElfFacts, found: ResolvedSFrame, bias: int) -> SectionLookup | None:
    """The section for lookups at its address plus ``bias`` (the stored bytes, read as
    they are once the file is loaded ``bias`` bytes from its link-time addresses): the one
    way a module's SFrame is opened rebased.  None where the section does not open there:
    it does not decode, or its sorted functions wrap around the top of the address space
    once rebased (a decoder then finds them out of order)."""
    if _verdict_of(facts, found).malformed is not None:
        return None
    try:
        section = SectionLookup(found.stored, found.address + bias)
    except SFrameError:
        return None
    count = len(section)
    if section.header.sorted and count > 1 and section.start(0) > section.start(count - 1):
        return None
    return section


# -- modules ------------------------------------------------------------------------------------


class Module:
    """A mapped ELF file: where it was placed (``start``, ``end``: the span of the mappings it
    was made for), its load bias, and its SFrame, chosen by ``policy`` when first needed.  It
    is also the unwinder's view of that SFrame (:attr:`header`, :meth:`find_row`), so that
    :attr:`info` costs nothing until a frame lands in it.  ``problem``: why its file cannot be
    used (missing, changed); ``build_id``: the one a recording gives it."""

    __slots__ = (
        "_chosen", "_info", "_trampolines", "bias", "build_id", "end", "facts", "path",
        "policy", "problem", "start", "symbol_options",
    )  # fmt: skip

    def __init__(
        self,
        path: str,
        start: int,
        end: int,
        bias: int = 0,
        facts: ElfFacts | None = None,
        *,
        problem: str | None = None,
        policy: Policy = Policy.AUTO,
        symbols: SymbolOptions = _DEFAULT_SYMBOLS,
        build_id: bytes | None = None,
    ) -> None:
        self.path, self.start, self.end, self.bias = path, start, end, bias
        self.facts, self.problem, self.policy = facts, problem, policy
        self.symbol_options, self.build_id = symbols, build_id
        self._chosen: Chosen | None = None if facts is not None else Chosen(None, NO_SFRAME)
        self._info: ModuleInfo | None = None
        self._trampolines: tuple[int, ...] | None = None

    def with_problem(self, problem: str) -> Module:
        """The same module, its file not to be used (``problem`` says why)."""
        return Module(
            self.path, self.start, self.end, self.bias, self.facts, problem=problem,
            policy=self.policy, symbols=self.symbol_options, build_id=self.build_id,
        )  # fmt: skip

    # -- its SFrame ----------------------------------------------------------------------------
    @property
    def _choice(self) -> Chosen:
        if self._chosen is None:
            assert self.facts is not None
            self._chosen = choose_sframe(self.facts, self.bias, self.policy)
        return self._chosen

    @property
    def origin(self) -> str:
        """Where its SFrame came from (:class:`pysframe.sources.Origin`: "section",
        "segment", "generated"), or "none" / "invalid"."""
        return self._choice.origin

    @property
    def reason(self) -> str | None:
        """Why its own SFrame section is not used (or is used though it fails the checks), for
        one warning line; None when there is nothing to say."""
        return self._choice.reason

    @property
    def section(self) -> SectionLookup | None:
        """The SFrame it is unwound with (None without a usable file, or without SFrame)."""
        return None if self.problem is not None else self._choice.section

    def fallback(self) -> SectionLookup | None:
        """SFrame generated from its CFI, when its own section is used and may leave PCs out
        (start-up code assembled without SFrame); None otherwise."""
        if self.facts is None or self.problem is not None or not self._choice.with_fallback:
            return None
        return generated_for(self.facts, self.bias)

    @property
    def header(self) -> Header:
        section = self.section
        assert section is not None, "a header is asked for only after a lookup found a row"
        return section.header

    def find_row(self, pc: int) -> LookupResult | None:
        section = self.section
        return None if section is None else section.find_row(pc)

    def prepare(self) -> None:
        """Make now what choosing will need that the cache does not hold: the checks'
        verdict on the file's own section, SFrame generated from its CFI when it will be
        unwound with it and the cache has none (see :func:`prepare_sframe`)."""
        facts, policy = self.facts, self.policy
        if facts is None or self._chosen is not None or policy is Policy.OWN:
            return
        if facts.own is not None and policy is Policy.AUTO and not facts.own_problems():
            return  # its own section (SFrame generated beside it is made if a PC needs it)
        if not facts.build_id or not has_generation(facts.build_id):
            generate_for(facts)

    # -- its code and names --------------------------------------------------------------------
    def trampolines(self) -> tuple[int, ...]:
        """Where its code is the signal return trampoline (run-time addresses, sorted)."""
        if self._trampolines is None:
            known = () if self.facts is None else self.facts.trampolines()
            self._trampolines = tuple((address + self.bias) & _MASK64 for address in known)
        return self._trampolines

    def symbols(self) -> ModuleSymbols | None:
        """Its symbols and source lines (read on first call); None without a usable file."""
        if self.facts is None or self.problem is not None:
            return None
        return self.facts.symbols(self.symbol_options)

    def symbolize(self, pc: int) -> tuple[str, int] | None:
        """(name, offset) of the function holding run-time ``pc``, or None."""
        symbols = self.symbols()
        found = None if symbols is None else symbols.find(pc - self.bias)
        return None if found is None else (self.symbol_options.name(found[0]), found[1])

    @property
    def info(self) -> ModuleInfo:
        """What the unwinder is told about the module."""
        if self._info is None:
            if self.facts is None or self.problem is not None:
                self._info = ModuleInfo(self.path, problem=self.problem)
            else:
                # A file's own .sframe may leave code out (start-up objects assembled without
                # SFrame): SFrame generated from its CFI answers for those PCs.
                self._info = ModuleInfo(
                    self.path, self.bias, self, self.symbolize, fallback=self.fallback,
                    trampolines=self.trampolines,
                )  # fmt: skip
        return self._info

    def __repr__(self) -> str:
        return f"<Module {self.path} at {self.start:#x} bias {self.bias:#x}>"


def prepare_sframe(space: AddressSpace) -> None:
    """Make, before a process is stopped, what choosing its modules' SFrame will need that the
    cache does not hold yet (SFrame generated from their CFI, the checks' verdicts), so that
    its threads stay stopped for the walk only; what the cache holds is read when a frame
    first needs it."""
    for module in space.modules:
        module.prepare()


# -- the address space --------------------------------------------------------------------------


class AddressSpace:
    """Which module each address of a process is in: mappings ``[start, end)`` of modules,
    sorted and not overlapping (a later one replaces what it covers of earlier ones), each
    with what turns its addresses into file offsets (``delta``: perf's map_ip is ``pc +
    delta``).  Modules are numbered in :attr:`modules`, which address spaces made by
    :meth:`copy` (and with ``sharing``) share: the numbers say the same in each.  Called with
    a PC, it is the unwinder's ``find_module``."""

    def __init__(self, modules: Iterable[Module] = (), *, sharing: AddressSpace | None = None):
        #: Every module placed in this address space or those it shares with, by number.
        self.modules: list[Module] = [] if sharing is None else sharing.modules
        self._numbers: dict[int, int] = {} if sharing is None else sharing._numbers
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._placed: list[int] = []
        self._deltas: list[int] = []
        #: The pieces of the address space (:meth:`_pieces`), made when first looked up
        #: after a change.
        self._arrays: _Pieces | None = None
        for module in modules:
            self.map(module.start, module.end, module)

    def number(self, module: Module) -> int:
        """The module's number in :attr:`modules` (given the first time it is asked)."""
        number = self._numbers.get(id(module))
        if number is None:
            number = self._numbers[id(module)] = len(self.modules)
            self.modules.append(module)
        return number

    def map(self, start: int, end: int, module: Module, delta: int = 0) -> None:
        """Map ``[start, end)`` to ``module``, cutting what it covers of older mappings."""
        self._arrays = None
        number = self.number(module)
        starts, ends = self._starts, self._ends
        at = bisect.bisect_left(ends, start + 1)  # the first mapping that ends after start
        kept: list[tuple[int, int, int, int]] = []
        stop = at
        while stop < len(starts) and starts[stop] < end:
            old = (self._placed[stop], self._deltas[stop])
            if starts[stop] < start:
                kept.append((starts[stop], start, *old))
            if ends[stop] > end:
                kept.append((end, ends[stop], *old))
            stop += 1
        pieces = sorted([*kept, (start, end, number, delta)])
        starts[at:stop] = [p[0] for p in pieces]
        ends[at:stop] = [p[1] for p in pieces]
        self._placed[at:stop] = [p[2] for p in pieces]
        self._deltas[at:stop] = [p[3] for p in pieces]

    def overlaps(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` covers an address already mapped."""
        at = bisect.bisect_right(self._starts, end - 1) - 1
        return at >= 0 and self._ends[at] > start

    def copy(self) -> AddressSpace:
        """An address space with the same mappings (a forked process), sharing the modules'
        numbers."""
        other = AddressSpace(sharing=self)
        other._starts, other._ends = list(self._starts), list(self._ends)
        other._placed, other._deltas = list(self._placed), list(self._deltas)
        return other

    # -- one PC --------------------------------------------------------------------------------
    def mapping_at(self, pc: int) -> tuple[int, int, int] | None:
        """(start, module number, delta) of the mapping holding ``pc``, or None."""
        at = bisect.bisect_right(self._starts, pc) - 1
        if at < 0 or pc >= self._ends[at]:
            return None
        return self._starts[at], self._placed[at], self._deltas[at]

    def module_at(self, pc: int) -> Module | None:
        found = self.mapping_at(pc)
        return None if found is None else self.modules[found[1]]

    def __call__(self, pc: int) -> ModuleInfo | None:
        module = self.module_at(pc)
        return None if module is None else module.info

    # -- many PCs ------------------------------------------------------------------------------
    def mappings_at(
        self, pcs: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
        """For each PC: the number of the module holding it (-1: none), and its mapping's
        delta."""
        if self._arrays is None:
            self._arrays = self._pieces()
        starts, placed, deltas = self._arrays
        at = starts.searchsorted(pcs, side="right")  # the piece at or before, plus one
        return placed[at], deltas[at]

    def _pieces(self) -> _Pieces:
        """The address space cut in pieces, each a mapping or a gap between them (module
        -1, delta 0), from address 0 on: their starts, and the module number and delta of
        each after an entry never read (a piece is found at its index plus one)."""
        import numpy as np

        starts, placed, deltas = [0], [-1, -1], [0, 0]
        following = [*self._starts[1:], None]
        for start, end, number, delta, after in zip(
            self._starts, self._ends, self._placed, self._deltas, following, strict=True
        ):
            starts.append(start)
            placed.append(number)
            deltas.append(delta & _MASK64)
            if after is None or end < after:  # a gap up to the next mapping
                starts.append(end)
                placed.append(-1)
                deltas.append(0)
        return (
            np.array(starts, dtype=np.uint64),
            np.array(placed, dtype=np.int64),
            np.array(deltas, dtype=np.uint64),
        )

    def __len__(self) -> int:
        return len(self._starts)


# -- the modules of mappings --------------------------------------------------------------------


def load_modules(
    mappings: Iterable[Mapping],
    read_memory: ReadMemory | None = None,
    *,
    policy: Policy = Policy.AUTO,
    vdso: int | None = None,
    symbols: SymbolOptions = _DEFAULT_SYMBOLS,
    pid: int | None = None,
    files: ElfFiles | None = None,
) -> AddressSpace:
    """The address space of the mapped ELF files; ``read_memory`` lets build IDs be compared,
    and reads the vDSO when its address (``vdso``, AT_SYSINFO_EHDR) is given.  ``symbols``:
    how frames are named (debug directories, demangling).  ``pid``: the live process the
    mappings are of, whose files deleted or replaced since they were mapped are read through
    ``/proc/PID/map_files``.  ``files``: the files read so far (a command loading the same
    process twice reads each once)."""
    files = files if files is not None else ElfFiles()
    by_path: dict[str, list[Mapping]] = {}
    for mapping in mappings:
        by_path.setdefault(mapping.path, []).append(mapping)
    modules = []
    for path, ranges in by_path.items():
        module = _module(path, ranges, read_memory, policy, symbols, pid, files)
        if module is not None:
            modules.append(module)
    if vdso is not None and read_memory is not None:
        module = vdso_module(vdso, read_memory, policy=policy, symbols=symbols, files=files)
        if module is not None and not any(
            m.start < module.end and module.start < m.end for m in modules
        ):
            modules.append(module)
    return AddressSpace(sorted(modules, key=lambda m: m.start))


def _module(
    path: str,
    ranges: list[Mapping],
    read_memory: ReadMemory | None,
    policy: Policy,
    symbols: SymbolOptions,
    pid: int | None,
    files: ElfFiles,
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
            facts = files.facts(read_from)
            if facts is not None and read_from != name:
                facts.link_path = name.removesuffix(DELETED)
        except OSError as error:
            problem = f"cannot read {name}: {error.strerror or error}"
        else:
            if facts is None:
                return None  # not an ELF file (data mapped from a file)
    if facts is None:
        return Module(name, start, end, problem=problem)
    bias = load_bias(facts, ranges)
    if bias is None:
        problem = f"{name} does not match its mappings (no PT_LOAD segment fits)"
    elif read_memory is not None:
        problem = _build_id_problem(facts, bias, read_memory)
    if problem is not None or bias is None:
        return Module(name, start, end, bias or 0, problem=problem)
    return Module(name, start, end, bias, facts, policy=policy, symbols=symbols)


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


def load_bias(facts: ElfFacts, ranges: Sequence[Mapping], *, code: bool = False) -> int | None:
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
    files: ElfFiles | None = None,
) -> Module | None:
    """The vDSO mapped at ``address`` as a module (:mod:`pysframe.unwind.vdso`): its symbols,
    and SFrame generated from its ``.eh_frame`` unless it has a ``.sframe``; None if it cannot
    be read."""
    image = read_vdso_image(address, read_memory)
    facts = None if image is None else (files or ElfFiles()).image(VDSO_NAME, image)
    if image is None or facts is None:
        return None
    end = address + len(image)
    bias = load_bias(facts, [Mapping(address, end, 0, VDSO_NAME)])
    if bias is None:
        return None
    return Module(VDSO_NAME, address, end, bias, facts, policy=policy, symbols=symbols)


__all__ = [
    "INVALID",
    "NO_SFRAME",
    "AddressSpace",
    "Chosen",
    "ElfFacts",
    "ElfFiles",
    "Module",
    "choose_sframe",
    "facts_of_image",
    "generate_for",
    "generated_for",
    "load_bias",
    "load_modules",
    "prepare_sframe",
    "vdso_module",
]
