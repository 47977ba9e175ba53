"""What the unwinder needs from each ELF file an address space maps, read once per file.

:class:`ElfFacts` holds a file's load segments, build ID, symbols (read when a frame is first
named) and its SFrame: the file's own section as stored (a mapped file's section is what the
process sees: nothing relocates it), or one generated from its CFI
(:mod:`pysframe.sources`), each rebased per load bias when a module is placed.  Facts are
cached per file version (path, modification time, size, inode), so that every address space
and every walk of a command shares them.

Reading the facts costs the file's headers (:class:`~pysframe.elf.reader.ElfReader`) and its
own section's bytes; the section is decoded and checked when a module first needs it
(:func:`pysframe.sources.trust.checked`, whose verdict the cache keeps).  The SFrame of a
module comes in two forms: :func:`sframe_for` decoded sections
(:class:`~pysframe.format.section.SFrameSection`, for work on many PCs: ``perf``), and
:func:`lookup_for` sections for single-PC lookups without numpy
(:class:`~pysframe.format.single.SectionLookup`, for ``stack``); both choose by the same rules
(:func:`_choose`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeAlias, TypeVar

from ..elf.layout import ELF_MAGIC, PF_X
from ..elf.reader import ElfReader, ElfSegment
from ..errors import InputError, NoSFrameError, SFrameError
from ..format.constants import Abi
from ..input import open_input
from ..sources import Origin, ResolvedSFrame, generated_sframe, locate_sframe, own_sframe
from ..sources.trust import Policy, Verdict, checked
from .symbolize import ModuleSymbols, SymbolOptions, symbols_of_file, symbols_of_image

if TYPE_CHECKING:
    from ..format.section import SFrameSection
    from ..format.single import SectionLookup

#: What a module's SFrame is when it has none: no section and nothing generated.
NO_SFRAME = "none"
#: ... and when its section cannot be read.
INVALID = "invalid"


@dataclass(slots=True)
class ElfFacts:
    """Facts about one ELF file, shared by every address space that maps it."""

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
    #: Sections rebased per (origin, load bias).
    rebased: dict[tuple[str, int], SFrameSection | None] = field(default_factory=dict)
    #: ... and the same for single-PC lookups.
    lookups: dict[tuple[str, int], SectionLookup | None] = field(default_factory=dict)
    #: The bytes of an image that is no file (the vDSO), read instead of ``path``.
    image: bytes | None = None
    #: The file's own name when ``path`` is another way to it (/proc/PID/map_files/...): its
    #: debuglink is looked for beside it.
    link_path: str | None = None
    #: The checks' verdict on the own section, found when first asked.
    _verdict: Verdict | None = None
    #: The symbols of an image that is no file, read on first use.
    _image_symbols: ModuleSymbols | None = None

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
        if self.image is None:
            return symbols_of_file(self.path, options.debug_dirs, self.link_path)
        if self._image_symbols is None:
            with ElfReader.from_bytes(self.path, self.image) as opened:
                self._image_symbols = symbols_of_image(opened, search=False)
        return self._image_symbols

    @property
    def has_own(self) -> bool:
        """Whether the file has an SFrame section of its own (usable or not)."""
        return self.own is not None


_CACHE: dict[tuple[str, int, int, int], ElfFacts | None] = {}


def elf_facts(path: str) -> ElfFacts | None:
    """Facts about the ELF file at ``path`` (None: not an ELF file), cached per file version;
    OSError when it cannot be read."""
    stat = os.stat(path)
    key = (path, stat.st_mtime_ns, stat.st_size, stat.st_ino)
    if key not in _CACHE:
        _CACHE[key] = _read_facts(path)
    return _CACHE[key]


def _read_facts(path: str) -> ElfFacts | None:
    try:
        with open_input(path) as file:  # never a wait on a FIFO the mappings name
            if file.read(len(ELF_MAGIC)) != ELF_MAGIC:
                return None
    except InputError as error:
        raise OSError(error.message) from None
    try:
        with ElfReader.open(path) as image:
            return facts_of_image(image)
    except SFrameError as error:
        raise OSError(f"not a readable ELF file ({error.detail})") from None
    except Exception as error:  # a hostile file must cost its own frames only, not the stack
        raise OSError(f"not a readable ELF file ({type(error).__name__}: {error})") from None


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
        except SFrameError as error:
            facts.generated = error.detail
        except Exception as error:  # a hostile file: no SFrame for it, the walk goes on
            facts.generated = f"{type(error).__name__}: {error}"
    return facts.generated if isinstance(facts.generated, ResolvedSFrame) else None


_Section = TypeVar("_Section")


@dataclass(frozen=True, slots=True)
class Chosen(Generic[_Section]):
    """The SFrame a module is unwound with, per :class:`~pysframe.sources.trust.Policy`."""

    #: The section rebased for the module, or None (frames fall back to frame pointers).
    section: _Section | None
    #: Where it came from (:class:`~pysframe.sources.Origin`), or ``none`` / ``invalid``.
    origin: str
    #: Why the file's own section is not used, or used though it fails the checks; None when
    #: there is nothing to say.
    reason: str | None = None
    #: Whether SFrame generated from the file's CFI answers for PCs the own section leaves out.
    with_fallback: bool = False


#: The SFrame chosen as a decoded section (:func:`sframe_for`)...
ChosenSFrame: TypeAlias = "Chosen[SFrameSection]"
#: ... and for single-PC lookups (:func:`lookup_for`).
ChosenLookup: TypeAlias = "Chosen[SectionLookup]"


@dataclass(frozen=True, slots=True)
class _Choice:
    """Which SFrame a module is unwound with, before it is rebased: ``source`` the own or the
    generated section (None: none), and what ChosenSFrame says about it."""

    source: ResolvedSFrame | None
    origin: str
    reason: str | None
    with_fallback: bool


def _choose(facts: ElfFacts, policy: Policy) -> _Choice:
    """The SFrame of the file, chosen by ``policy``: its own section (``own``, or ``auto``
    when it passes the checks), else one generated from its CFI."""
    asked = policy is not Policy.GENERATED and facts.own is not None
    verdict = facts.own_verdict() if asked else Verdict()
    problems = verdict.problems
    if policy is Policy.OWN or (policy is Policy.AUTO and facts.own is not None and not problems):
        if facts.own is None:
            return _Choice(None, NO_SFRAME, None, False)
        reason = None
        if problems:
            reason = "its .sframe fails the checks, used as asked: " + "; ".join(problems)
        if isinstance(facts.own, str) or verdict.malformed is not None:
            return _Choice(None, INVALID, reason, False)
        return _Choice(facts.own, str(facts.own.origin), reason, policy is Policy.AUTO)
    reason = None
    if policy is Policy.AUTO and problems:
        reason = "its .sframe is not used: " + "; ".join(problems)
    generated = generate_for(facts)
    if generated is None:
        if reason is not None:
            reason += f"; no SFrame could be generated from its CFI ({facts.generated})"
        return _Choice(None, NO_SFRAME, reason, False)
    if reason is not None:
        reason += "; unwound with SFrame generated from its CFI"
    return _Choice(generated, str(Origin.GENERATED), reason, False)


def sframe_for(facts: ElfFacts, bias: int, policy: Policy = Policy.AUTO) -> ChosenSFrame:
    """The SFrame of the file rebased by ``bias``, chosen by ``policy`` (:func:`_choose`)."""
    choice = _choose(facts, policy)
    if choice.source is None:
        return Chosen(None, choice.origin, choice.reason)
    section = _rebased(facts, choice.source, bias)
    if section is None and choice.origin != Origin.GENERATED:
        return Chosen(None, INVALID, choice.reason)
    return Chosen(section, choice.origin, choice.reason, choice.with_fallback)


def lookup_for(facts: ElfFacts, bias: int, policy: Policy = Policy.AUTO) -> ChosenLookup:
    """:func:`sframe_for` for single-PC lookups without numpy, once the checks' verdicts are
    kept (else the checks run first, with numpy)."""
    choice = _choose(facts, policy)
    if choice.source is None:
        return Chosen(None, choice.origin, choice.reason)
    opens, section = _rebased_lookup(facts, choice.source, bias)
    if not opens and choice.origin != Origin.GENERATED:
        return Chosen(None, INVALID, choice.reason)
    return Chosen(section, choice.origin, choice.reason, choice.with_fallback)


def generated_for(facts: ElfFacts, bias: int) -> SFrameSection | None:
    """SFrame generated from the file's CFI, rebased by ``bias``, used beside the file's own
    section for the PCs it leaves out; None when it cannot be generated."""
    generated = generate_for(facts)
    return None if generated is None else _rebased(facts, generated, bias)


def generated_lookup_for(facts: ElfFacts, bias: int) -> SectionLookup | None:
    """:func:`generated_for` for single-PC lookups."""
    generated = generate_for(facts)
    return None if generated is None else _rebased_lookup(facts, generated, bias)[1]


def _rebased(facts: ElfFacts, found: ResolvedSFrame, bias: int) -> SFrameSection | None:
    key = (str(found.origin), bias)
    if key not in facts.rebased:
        try:
            facts.rebased[key] = found.rebased(bias)
        except SFrameError:
            facts.rebased[key] = None
    return facts.rebased[key]


def _rebased_lookup(
    facts: ElfFacts, found: ResolvedSFrame, bias: int
) -> tuple[bool, SectionLookup | None]:
    """Whether ``found`` opens once rebased by ``bias`` (as :meth:`ResolvedSFrame.rebased`
    would), and the section to look PCs up in: None also where every lookup of the decoded
    section would fail (an unsorted section whose FDE table fails the checks)."""
    key = (str(found.origin), bias)
    if key not in facts.lookups:
        facts.lookups[key] = _open_lookup(facts, found, bias)
    section = facts.lookups[key]
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
    """The section for single-PC lookups at its address plus ``bias``; None where
    ResolvedSFrame.rebased raises: a section that does not decode at its address, or whose
    sorted functions wrap around the top of the address space once rebased (the decoder then
    finds them out of order)."""
    from ..format.single import SectionLookup

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


__all__ = [
    "INVALID",
    "NO_SFRAME",
    "Chosen",
    "ChosenLookup",
    "ChosenSFrame",
    "ElfFacts",
    "elf_facts",
    "facts_of_image",
    "generate_for",
    "generated_for",
    "generated_lookup_for",
    "lookup_for",
    "sframe_for",
]
