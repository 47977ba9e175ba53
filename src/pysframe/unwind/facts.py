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
from ..elf.layout import ELF_MAGIC
from ..errors import NoSFrameError, SFrameError
from ..format.constants import Abi
from ..format.section import SFrameSection
from ..sources import Origin, ResolvedSFrame, generated_sframe, locate_sframe, own_sframe
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
                facts.generated = generated_sframe(image)
            else:
                with ElfImage.open(facts.path) as opened:
                    facts.generated = generated_sframe(opened)
        except SFrameError as error:
            facts.generated = error.detail
        except Exception as error:  # a hostile file: no SFrame for it, the walk goes on
            facts.generated = f"{type(error).__name__}: {error}"
    return facts.generated if isinstance(facts.generated, ResolvedSFrame) else None


def sframe_for(facts: ElfFacts, bias: int, generate: bool) -> tuple[SFrameSection | None, str]:
    """The file's SFrame section rebased by ``bias``, and its origin: the file's own, else
    (``generate``) one generated from its CFI; ``none`` or ``invalid`` without one."""
    if facts.own is not None:
        if isinstance(facts.own, str):
            return None, INVALID
        section = _rebased(facts, facts.own, bias)
        return section, str(facts.own.origin) if section is not None else INVALID
    if not generate:
        return None, NO_SFRAME
    generated = generate_for(facts)
    if generated is None:
        return None, NO_SFRAME
    return _rebased(facts, generated, bias), str(Origin.GENERATED)


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
    "ElfFacts",
    "elf_facts",
    "facts_of_image",
    "generate_for",
    "generated_for",
    "sframe_for",
]
