"""Modules of an address space: which ELF file is mapped where, its SFrame section and symbols.

* Mappings come from /proc/PID/maps (a live process) or a core file's NT_FILE note.
* For each mapped ELF file: its own ``.sframe`` section if it has one, else SFrame generated
  from its ``.eh_frame`` (``pysframe.generate.generate_from_elf``), cached per file (path,
  modification time, size).
* The load bias (run-time address minus link-time address) comes from the mapping of the file
  offset a PT_LOAD segment covers; the SFrame section is rebased by it.
* Symbols: :mod:`pysframe.unwind.symbolize` (the file's symbol tables, its separate debug
  file's, MiniDebugInfo's), read when a frame in the file is first named.
* A file that is missing, or that is not the one the process mapped (other inode, "(deleted)",
  other build ID), is kept as a module with a ``problem``: frames in it are printed unresolved.
"""

from __future__ import annotations

import bisect
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..elf.image import ElfImage, ElfSegment
from ..elf.layout import EHDR_SIZE, ELF_MAGIC, ElfHeader, auxv64_struct
from ..elf.sframe import find_sframe
from ..errors import SFrameError
from ..format.constants import Abi
from ..format.section import SFrameSection
from .core import ModuleInfo, ReadMemory
from .symbolize import ModuleSymbols, SymbolOptions, symbols_of_file, symbols_of_image

_DELETED = " (deleted)"
_DEFAULT_SYMBOLS = SymbolOptions()


@dataclass(frozen=True, slots=True)
class Mapping:
    """One mapped file range: [start, end) shows the file from ``file_offset``."""

    start: int
    end: int
    file_offset: int
    path: str
    #: /proc/PID/maps only: permissions, inode and device (major, minor).
    perms: str = ""
    inode: int | None = None
    device: tuple[int, int] | None = None


def process_mappings(pid: int) -> list[Mapping]:
    """File-backed mappings of a live process, from /proc/PID/maps."""
    mappings = []
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="surrogateescape") as maps:
        for line in maps:
            mapping = parse_maps_line(line)
            if mapping is not None:
                mappings.append(mapping)
    return mappings


def parse_maps_line(line: str) -> Mapping | None:
    """A /proc/PID/maps line: ``start-end perms offset dev inode path``; None if anonymous."""
    parts = line.rstrip("\n").split(maxsplit=5)
    if len(parts) < 6 or not parts[5].startswith("/"):
        return None
    start, _, end = parts[0].partition("-")
    major, _, minor = parts[3].partition(":")
    try:
        return Mapping(
            int(start, 16), int(end, 16), int(parts[2], 16), parts[5], parts[1], int(parts[4]),
            (int(major, 16), int(minor, 16)),
        )
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# What pysframe needs from each ELF file


@dataclass(slots=True)
class ElfFacts:
    """Facts about one ELF file, shared by every address space that maps it."""

    path: str
    abi: Abi | None
    #: The PT_LOAD program headers.
    segments: tuple[ElfSegment, ...]
    sframe: tuple[bytes, int] | None  # (.sframe bytes, sh_addr)
    build_id: bytes | None
    build_id_address: int | None
    #: SFrame generated from .eh_frame: (bytes, section address), or the error text.
    generated: tuple[bytes, int] | str | None = None
    sections: dict[int, SFrameSection] = field(default_factory=dict)
    #: Generated sections used beside the file's own .sframe, per load bias.
    fallbacks: dict[tuple[str, int], SFrameSection | None] = field(default_factory=dict)
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


_CACHE: dict[tuple[str, int, int, int], ElfFacts | None] = {}


def elf_facts(path: str) -> ElfFacts | None:
    """Facts about the ELF file at ``path`` (None: not an ELF file), cached per file version."""
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
            return _facts_from_elf(path, image)
    except SFrameError as error:
        raise OSError(f"not a readable ELF file ({error})") from None
    except Exception as error:  # a hostile file must cost its own frames only, not the stack
        raise OSError(f"not a readable ELF file ({type(error).__name__}: {error})") from None


def _facts_from_elf(path: str, image: ElfImage) -> ElfFacts:
    segments = tuple(image.load_segments())
    found = find_sframe(image)
    # As stored: a mapped file's section is what the process sees (nothing relocates it).
    sframe = None if found is None else (found.stored, found.address)
    build_id = image.build_id()
    build_id_address = None
    note = image.section(".note.gnu.build-id")
    if build_id is not None and note is not None and note.address:
        at = note.data().find(build_id)
        build_id_address = note.address + at if at >= 0 else None
    return ElfFacts(path, image.abi, segments, sframe, build_id, build_id_address)


def _generated(facts: ElfFacts) -> tuple[bytes, int] | None:
    if facts.generated is None:
        from ..generate import generate_from_elf

        try:
            section = generate_from_elf(facts.path, version=3).section
            facts.generated = (bytes(section.data), section.section_address)
        except SFrameError as error:
            facts.generated = str(error)
        except Exception as error:  # a hostile file: no SFrame for it, the walk goes on
            facts.generated = f"{type(error).__name__}: {error}"
    return facts.generated if isinstance(facts.generated, tuple) else None


def sframe_for(facts: ElfFacts, bias: int) -> tuple[SFrameSection | None, str]:
    """The file's SFrame section rebased by ``bias`` and where it came from."""
    if bias in facts.sections:
        return facts.sections[bias], "sframe" if facts.sframe else "generated"
    source = facts.sframe
    origin = "sframe"
    if source is None:
        source = _generated(facts)
        origin = "generated"
    if source is None:
        return None, "none"
    data, address = source
    try:
        section = SFrameSection.from_bytes(data, section_address=address + bias)
    except SFrameError:
        return None, "invalid"
    facts.sections[bias] = section
    return section, origin


def generated_for(facts: ElfFacts, bias: int) -> SFrameSection | None:
    """SFrame generated from the file's CFI, rebased by ``bias`` (cached with the facts)."""
    key = ("generated", bias)
    if key not in facts.fallbacks:
        source = _generated(facts)
        section = None
        if source is not None:
            try:
                section = SFrameSection.from_bytes(source[0], section_address=source[1] + bias)
            except SFrameError:
                section = None
        facts.fallbacks[key] = section
    return facts.fallbacks[key]


# ---------------------------------------------------------------------------------------------
# Address space


@dataclass(frozen=True, slots=True)
class Module:
    """A mapped ELF file: its range, load bias and what the unwinder is told about it."""

    path: str
    start: int
    end: int
    bias: int
    info: ModuleInfo
    sframe_origin: str
    #: The file's symbols and source lines (read on first call); None without a usable file.
    symbols: Callable[[], ModuleSymbols] | None = None


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


def load_modules(
    mappings: Iterable[Mapping],
    read_memory: ReadMemory | None = None,
    *,
    generate: bool = True,
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
        module = _module(path, ranges, read_memory, generate, symbols, pid)
        if module is not None:
            modules.append(module)
    if vdso is not None and read_memory is not None:
        module = vdso_module(vdso, read_memory, generate=generate, symbols=symbols)
        if module is not None and not any(
            m.start < module.end and module.start < m.end for m in modules
        ):
            modules.append(module)
    return ModuleTable(modules)


def _module(
    path: str,
    ranges: list[Mapping],
    read_memory: ReadMemory | None,
    generate: bool,
    symbols: SymbolOptions,
    pid: int | None,
) -> Module | None:
    ranges.sort(key=lambda m: m.start)
    start, end = ranges[0].start, max(m.end for m in ranges)
    name = path[: -len(_DELETED)] if path.endswith(_DELETED) else path
    problem = _file_problem(path, name, ranges)
    read_from = name
    if pid is not None and (problem is not None or _other_device(name, ranges)):
        mapped = _mapped_file(pid, ranges)
        if mapped is not None:
            # The file the process mapped, whatever is at its path now.
            read_from, name, problem = mapped, path, None
    facts: ElfFacts | None = None
    if problem is None:
        try:
            facts = elf_facts(read_from)
            if facts is not None and read_from != name:
                facts.link_path = name.removesuffix(_DELETED)
        except OSError as error:
            problem = f"cannot read {name}: {error.strerror or error}"
        else:
            if facts is None:
                return None  # not an ELF file (data mapped from a file)
    if facts is None:
        return Module(name, start, end, 0, ModuleInfo(name, problem=problem), "none")
    bias = _load_bias(facts, ranges)
    if bias is None:
        problem = f"{name} does not match its mappings (no PT_LOAD segment fits)"
    elif read_memory is not None:
        problem = _build_id_problem(facts, bias, read_memory)
    if problem is not None or bias is None:
        return Module(name, start, end, bias or 0, ModuleInfo(name, problem=problem), "none")
    return _module_from_facts(name, start, end, facts, bias, generate, symbols)


def _module_from_facts(
    name: str,
    start: int,
    end: int,
    facts: ElfFacts,
    bias: int,
    generate: bool,
    symbols: SymbolOptions,
) -> Module:
    if facts.sframe is None and not generate:
        section, origin = None, "none"
    else:
        section, origin = sframe_for(facts, bias)

    def symbolize(pc: int) -> tuple[str, int] | None:
        found = facts.symbols(symbols).find(pc - bias)
        return None if found is None else (symbols.name(found[0]), found[1])

    def fallback(facts: ElfFacts = facts, bias: int = bias) -> SFrameSection | None:
        return generated_for(facts, bias)

    # A file's own .sframe may leave code out (start-up objects assembled without SFrame):
    # SFrame generated from its CFI answers for those PCs.
    own = origin == "sframe" and generate
    info = ModuleInfo(name, bias, section, symbolize, fallback=fallback if own else None)
    return Module(name, start, end, bias, info, origin, lambda: facts.symbols(symbols))


def _other_device(name: str, ranges: list[Mapping]) -> bool:
    """Whether the file at ``name`` is on another device than the mapped one (same inode
    number, another file system)."""
    devices = {m.device for m in ranges if m.device is not None}
    try:
        stat = os.stat(name)
    except OSError:
        return False
    return bool(devices) and (os.major(stat.st_dev), os.minor(stat.st_dev)) not in devices


def _mapped_file(pid: int, ranges: list[Mapping]) -> str | None:
    """``/proc/PID/map_files/START-END`` of the mapping of the file's first page: the mapped
    file itself, even deleted or replaced (readable with the rights ptrace needs, and
    CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: proc(5)); None if it cannot be read or is not
    the mapped inode."""
    first = min(ranges, key=lambda m: (m.file_offset, m.start))
    candidate = f"/proc/{pid}/map_files/{first.start:x}-{first.end:x}"
    try:
        stat = os.stat(candidate)
        with open(candidate, "rb"):
            pass
    except OSError:
        return None
    if first.inode is not None and stat.st_ino != first.inode:
        return None
    return candidate


def _file_problem(path: str, name: str, ranges: list[Mapping]) -> str | None:
    if path.endswith(_DELETED):
        return f"{name} was deleted or replaced after it was mapped"
    try:
        stat = os.stat(name)
    except OSError:
        return f"{name} is missing"
    inodes = {m.inode for m in ranges if m.inode is not None}
    if inodes and stat.st_ino not in inodes:
        return f"{name} changed after it was mapped"
    return None


def _load_bias(facts: ElfFacts, ranges: list[Mapping]) -> int | None:
    for mapping in sorted(ranges, key=lambda m: m.file_offset):
        for segment in facts.segments:
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


# ---------------------------------------------------------------------------------------------
# The vDSO: an ELF image the kernel maps into every process, with no file behind it

#: The auxiliary vector entry holding the vDSO's address (AT_SYSINFO_EHDR).
AT_SYSINFO_EHDR = 33
VDSO_NAME = "[vdso]"
#: A vDSO is a few pages; an image that claims more is not read.
_VDSO_LIMIT = 1 << 20
_VDSO_CACHE: dict[bytes, ElfFacts] = {}


def auxv_entries(auxv: bytes, big_endian: bool = False) -> dict[int, int]:
    """The (type, value) pairs of a 64-bit auxiliary vector (/proc/PID/auxv, a core's
    NT_AUXV); the first value of a type wins, as getauxval returns it."""
    entry = auxv64_struct(big_endian)
    entries: dict[int, int] = {}
    for key, value in entry.iter_unpack(auxv[: len(auxv) - len(auxv) % entry.size]):
        entries.setdefault(key, value)
    return entries


def vdso_address(auxv: bytes, big_endian: bool = False) -> int | None:
    """AT_SYSINFO_EHDR of a 64-bit auxiliary vector, or None."""
    return auxv_entries(auxv, big_endian).get(AT_SYSINFO_EHDR) or None


def process_vdso_address(pid: int) -> int | None:
    """Where the vDSO of process ``pid`` is mapped, or None (none, or /proc/PID/auxv is not
    readable)."""
    try:
        with open(f"/proc/{pid}/auxv", "rb") as file:
            return vdso_address(file.read(1 << 16), sys.byteorder == "big")
    except OSError:
        return None


def vdso_module(
    address: int,
    read_memory: ReadMemory,
    *,
    generate: bool = True,
    symbols: SymbolOptions = _DEFAULT_SYMBOLS,
) -> Module | None:
    """The vDSO mapped at ``address``, read from the address space (its symbols, and SFrame
    generated from its ``.eh_frame`` unless it has a ``.sframe``); None if it cannot be read."""
    image = _read_vdso_image(address, read_memory)
    if image is None:
        return None
    facts = _VDSO_CACHE.get(image)
    if facts is None:
        try:
            facts = _vdso_facts(image)
        except SFrameError:
            return None
        if len(_VDSO_CACHE) >= 8:
            _VDSO_CACHE.clear()
        _VDSO_CACHE[image] = facts
    bias = _load_bias(facts, [Mapping(address, address + len(image), 0, VDSO_NAME)])
    if bias is None:
        return None
    return _module_from_facts(
        VDSO_NAME, address, address + len(image), facts, bias, generate, symbols
    )


def _read_vdso_image(address: int, read_memory: ReadMemory) -> bytes | None:
    """The vDSO's bytes: up to the end of its section or program headers, whichever is last
    (its file image is mapped whole)."""
    try:
        header = ElfHeader.unpack(read_memory(address, EHDR_SIZE[64]))
        if header.bits != 64:
            return None
        size = header.tables_end
        if size > _VDSO_LIMIT:
            return None
        image = read_memory(address, size)
    except (OSError, ValueError, SFrameError):
        return None
    return image if len(image) == size else None


def _vdso_facts(image: bytes) -> ElfFacts:
    from ..generate import generate_from_elf

    with ElfImage.from_bytes(VDSO_NAME, image) as elf:
        facts = _facts_from_elf(VDSO_NAME, elf)
        facts.image_symbols = symbols_of_image(elf, search=False)
        # Generated now, from the image: there is no file to generate from later.
        try:
            section = generate_from_elf(elf, version=3).section
            facts.generated = (bytes(section.data), section.section_address)
        except SFrameError as error:
            facts.generated = str(error)
    return facts


Symbolize = Callable[[int], "tuple[str, int] | None"]

__all__ = [
    "ElfFacts",
    "Mapping",
    "Module",
    "ModuleTable",
    "auxv_entries",
    "elf_facts",
    "load_modules",
    "parse_maps_line",
    "process_mappings",
    "process_vdso_address",
    "sframe_for",
    "vdso_address",
    "vdso_module",
]
