"""What the unwinder needs from each ELF file an address space maps, read once per file.

:class:`ElfFacts` holds a file's load segments, build ID, symbols (read when a frame is first
named) and its SFrame: the file's own section as stored (a mapped file's section is what the
process sees: nothing relocates it), or one generated from its CFI
(:mod:`pysframe.sources`), each rebased per load bias when a module is placed.  Facts are
cached per file version (path, modification time, size, inode), so that every address space
and every walk of a command shares them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..elf.image import ElfImage, ElfSegment
from ..elf.layout import ELF_MAGIC, PF_X
from ..errors import NoSFrameError, SFrameError
from ..format.constants import Abi
from ..format.section import SFrameSection
from ..sources import Origin, ResolvedSFrame, generated_sframe, locate_sframe, own_sframe
from ..sources.trust import Policy, trust_problems
from .symbolize import ModuleSymbols, SymbolOptions, symbols_of_file

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
    #: The file's own SFrame section, or why it has none usable (None: it has none).
    own: ResolvedSFrame | str | None
    build_id: bytes | None
    build_id_address: int | None
    #: SFrame generated from the file's CFI (read when first needed), or why there is none.
    generated: ResolvedSFrame | str | None = None
    #: Sections rebased per (origin, load bias).
    rebased: dict[tuple[str, int], SFrameSection | None] = field(default_factory=dict)
    #: The symbols of an image that is not a file (the vDSO); files' are read when needed.
    image_symbols: ModuleSymbols | None = None
    #: The file's own name when ``path`` is another way to it (/proc/PID/map_files/...): its
    #: debuglink is looked for beside it.
    link_path: str | None = None
    #: Why the own section must not be used (:func:`pysframe.sources.trust.trust_problems`),
    #: found when first asked.
    _own_problems: list[str] | None = None

    @property
    def code(self) -> list[tuple[int, int]]:
        """The link-time ranges of the executable PT_LOAD segments."""
        return [(s.vaddr, s.vaddr + s.memsz) for s in self.segments if s.flags & PF_X]

    def own_problems(self) -> list[str]:
        """Why the file's own section must not be used to unwind: empty when it passes every
        check (or there is none)."""
        if self._own_problems is None:
            if isinstance(self.own, str):
                self._own_problems = [f"it is malformed: {self.own}"]
            elif self.own is None:
                self._own_problems = []
            else:
                self._own_problems = trust_problems(self.own, self.code)
        return self._own_problems

    def symbols(self, options: SymbolOptions) -> ModuleSymbols:
        """The file's symbols (with its separate debug file's), read on first use."""
        if self.image_symbols is not None:
            return self.image_symbols
        return symbols_of_file(self.path, options.debug_dirs, self.link_path)

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
    with open(path, "rb") as file:
        if file.read(len(ELF_MAGIC)) != ELF_MAGIC:
            return None
    try:
        with ElfImage.open(path) as image:
            return facts_of_image(image)
    except SFrameError as error:
        raise OSError(f"not a readable ELF file ({error.detail})") from None
    except Exception as error:  # a hostile file must cost its own frames only, not the stack
        raise OSError(f"not a readable ELF file ({type(error).__name__}: {error})") from None


def facts_of_image(image: ElfImage) -> ElfFacts:
    """The facts of an open ELF image."""
    own: ResolvedSFrame | str | None
    try:
        own = own_sframe(locate_sframe(image), relocate=False)
        own.section  # noqa: B018  (decoded now: a malformed section is told here)
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


def generate_for(facts: ElfFacts, image: ElfImage | None = None) -> ResolvedSFrame | None:
    """SFrame generated from the file's CFI (from ``image`` if given, else the file at its
    path), made once and kept with the facts; None when it cannot be."""
    if facts.generated is None:
        try:
            if image is not None:
                facts.generated = generated_sframe(image, cached=True)
            else:
                with ElfImage.open(facts.path) as opened:
                    facts.generated = generated_sframe(opened, cached=True)
        except SFrameError as error:
            facts.generated = error.detail
        except Exception as error:  # a hostile file: no SFrame for it, the walk goes on
            facts.generated = f"{type(error).__name__}: {error}"
    return facts.generated if isinstance(facts.generated, ResolvedSFrame) else None


@dataclass(frozen=True, slots=True)
class ChosenSFrame:
    """The SFrame a module is unwound with, per :class:`~pysframe.sources.trust.Policy`."""

    #: The section rebased for the module, or None (frames fall back to frame pointers).
    section: SFrameSection | None
    #: Where it came from (:class:`~pysframe.sources.Origin`), or ``none`` / ``invalid``.
    origin: str
    #: Why the file's own section is not used, or used though it fails the checks; None when
    #: there is nothing to say.
    reason: str | None = None
    #: Whether SFrame generated from the file's CFI answers for PCs the own section leaves out.
    with_fallback: bool = False


def sframe_for(facts: ElfFacts, bias: int, policy: Policy = Policy.AUTO) -> ChosenSFrame:
    """The SFrame of the file rebased by ``bias``, chosen by ``policy``: its own section
    (``own``, or ``auto`` when it passes the checks), else one generated from its CFI."""
    problems = facts.own_problems() if facts.own is not None else []
    if policy is Policy.OWN or (policy is Policy.AUTO and facts.own is not None and not problems):
        if facts.own is None:
            return ChosenSFrame(None, NO_SFRAME)
        reason = None
        if problems:
            reason = "its .sframe fails the checks, used as asked: " + "; ".join(problems)
        section = None if isinstance(facts.own, str) else _rebased(facts, facts.own, bias)
        if section is None:
            return ChosenSFrame(None, INVALID, reason)
        origin = str(facts.own.origin) if isinstance(facts.own, ResolvedSFrame) else INVALID
        return ChosenSFrame(section, origin, reason, with_fallback=policy is Policy.AUTO)
    reason = None
    if policy is Policy.AUTO and problems:
        reason = "its .sframe is not used: " + "; ".join(problems)
    generated = generate_for(facts)
    if generated is None:
        if reason is not None:
            reason += f"; no SFrame could be generated from its CFI ({facts.generated})"
        return ChosenSFrame(None, NO_SFRAME, reason)
    if reason is not None:
        reason += "; unwound with SFrame generated from its CFI"
    return ChosenSFrame(_rebased(facts, generated, bias), str(Origin.GENERATED), reason)


def generated_for(facts: ElfFacts, bias: int) -> SFrameSection | None:
    """SFrame generated from the file's CFI, rebased by ``bias``, used beside the file's own
    section for the PCs it leaves out; None when it cannot be generated."""
    generated = generate_for(facts)
    return None if generated is None else _rebased(facts, generated, bias)


def _rebased(facts: ElfFacts, found: ResolvedSFrame, bias: int) -> SFrameSection | None:
    key = (str(found.origin), bias)
    if key not in facts.rebased:
        try:
            facts.rebased[key] = found.rebased(bias)
        except SFrameError:
            facts.rebased[key] = None
    return facts.rebased[key]


__all__ = [
    "INVALID",
    "NO_SFRAME",
    "ChosenSFrame",
    "ElfFacts",
    "elf_facts",
    "facts_of_image",
    "generate_for",
    "generated_for",
    "sframe_for",
]
