"""Where a program's ELF files are loaded, found in its memory the way a debugger finds them.

For address spaces that do not list their mapped files: core files without an NT_FILE note
(qemu-user writes none, nor do some dumpers) and remote targets.

* The executable is named by the user.  Its load bias is AT_ENTRY minus its entry point (gdb's
  ``svr4_exec_displacement``), else AT_PHDR minus its PT_PHDR address, else the bias the space
  reports (a stub's ``qOffsets``), else, for a position-independent executable, the first bias
  under which it fits the address space.  It must fit
  by address, permissions and content: each PT_LOAD lies in the space's regions (a core's
  PT_LOADs) with the same execute permission, and the bytes the space holds of its program
  headers, ELF header and build ID note are the file's.
* Shared objects are listed by the dynamic linker in ``struct r_debug``, which ``DT_DEBUG`` in
  the executable's dynamic section (read from memory) points to: a chain of ``struct
  link_map`` with each object's load bias (``l_addr``), path (``l_name``) and dynamic section
  address (``l_ld``; gdb's ``lm_addr_check`` trusts it over ``l_addr``).  Before the dynamic
  linker has filled it (a program stopped at its first instruction), the interpreter alone is
  found at AT_BASE.  Paths are looked up under the sysroot first (gdb's ``set sysroot``),
  then as they are; a file for another machine is passed over.
* The AArch64 virtual-address size, which bounds the bits a pointer-authentication code may
  use, comes from NT_ARM_PAC_MASK when the kernel wrote it, else from the highest address
  the space maps, rounded up to a size Linux configures.
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Iterable, Iterator

from ..dataclass import dataclass
from ..elf.layout import (
    AT_BASE,
    AT_ENTRY,
    AT_PAGESZ,
    AT_PHDR,
    DT_DEBUG,
    DT_NULL,
    EHDR_SIZE,
    ET_EXEC,
    NT_GNU_BUILD_ID,
    PF_X,
    PHDR_NAMES,
    PT_DYNAMIC,
    PT_LOAD,
    PT_NOTE,
    PT_PHDR,
    ElfHeader,
    dyn64_struct,
    link_map64_struct,
    phdr_struct,
    r_debug64_struct,
)
from ..elf.reader import ElfReader, ElfSegment, is_elf_file, iter_notes
from ..errors import SFrameError, UnwindError
from ..format.constants import Abi
from ..input import InputError, sysroot_path
from .core import ReadMemory
from .mappings import Mapping

#: Bytes of a dynamic section read from memory, link_map entries followed, bytes of a path.
_MAX_DYNAMIC = 1 << 16
_MAX_LINKED = 4096
_MAX_PATH = 4096
_DEFAULT_PAGE = 4096
#: AArch64 Linux user address-space sizes (VA_BITS: 36, 39, 42, 47, 48 or 52 bits).
_LINUX_VA_BITS = (36, 39, 42, 47, 48, 52)


class ExecutableMismatchError(UnwindError):
    """The executable named for an address space is not the one loaded in it."""


@dataclass(frozen=True, slots=True)
class Region:
    """A range of the address space, with its PF_R / PF_W / PF_X permissions."""

    start: int
    end: int
    flags: int


@dataclass(frozen=True, slots=True)
class AddressSpace:
    """What the search reads.

    ``read_memory``: any byte of the space (a core's, with its mapped files behind).
    ``read_held``: only bytes the space itself holds (a core's dump), for content checks.
    ``regions``: the mapped ranges and their permissions, when known (None: a remote target).
    ``auxv``: the auxiliary vector.  ``name`` names the space in messages.
    ``reported_bias``: the executable's load bias as the space itself reports it, when it has
    no auxiliary vector (a stub's ``qOffsets``).
    """

    name: str
    abi: Abi
    read_memory: ReadMemory
    read_held: ReadMemory
    auxv: dict[int, int]
    regions: tuple[Region, ...] | None = None
    reported_bias: int | None = None

    @property
    def big_endian(self) -> bool:
        return self.abi.big_endian

    @property
    def page_size(self) -> int:
        size = self.auxv.get(AT_PAGESZ, 0)
        return size if size and size & (size - 1) == 0 else _DEFAULT_PAGE


@dataclass(frozen=True, slots=True)
class ElfLayout:
    """The parts of an ELF file's layout that place it in memory."""

    path: str
    abi: Abi | None
    e_type: int
    entry: int
    loads: tuple[ElfSegment, ...]
    phdr_address: int | None
    phdr_bytes: bytes
    header_bytes: bytes
    dynamic: ElfSegment | None
    interpreter: str | None
    build_id: bytes | None
    build_id_address: int | None

    @classmethod
    def read(cls, path: str) -> ElfLayout:
        """The layout of ``path``; ElfError (an SFrameError) if it is not a readable ELF file."""
        with ElfReader.open(path) as image:
            header = image.header
            segments = image.segments()
            phdr = next((s for s in segments if s.type == PT_PHDR), None)
            table = header.phentsize * header.phnum
            note = image.section(".note.gnu.build-id")
            build_id = image.build_id()
            build_id_address = None
            if build_id is not None and note is not None and note.address:
                at = note.data().find(build_id)
                build_id_address = note.address + at if at >= 0 else None
            return cls(
                path,
                image.abi,
                image.e_type,
                image.entry,
                tuple(s for s in segments if s.type == PT_LOAD),
                phdr.vaddr if phdr is not None else None,
                image.read(header.phoff, table) if header.phnum else b"",
                image.read(0, EHDR_SIZE[image.elfclass]),
                next((s for s in segments if s.type == PT_DYNAMIC), None),
                image.interpreter(),
                build_id,
                build_id_address,
            )

    def mappings(self, bias: int, page_size: int, path: str | None = None) -> list[Mapping]:
        """The file-backed ranges of each PT_LOAD placed at ``bias``, as the loader maps them
        (from the page holding the segment's start, file bytes only)."""
        out = []
        for segment in self.loads:
            if not segment.filesz:
                continue
            start = (segment.vaddr + bias) & -page_size
            end = segment.vaddr + bias + segment.filesz
            offset = segment.offset - (segment.vaddr + bias - start)
            if offset < 0:
                continue
            out.append(Mapping(start, end, offset, path or self.path))
        return out

    @property
    def lowest(self) -> int:
        return min((s.vaddr for s in self.loads), default=0)


# ---------------------------------------------------------------------------------------------
# The executable


def place_executable(space: AddressSpace, layout: ElfLayout) -> int:
    """The load bias of the executable ``layout`` in ``space``; ExecutableMismatchError when it
    does not fit by address, permissions or content."""
    if layout.abi is not space.abi:
        machine = layout.abi.name if layout.abi else "another machine"
        raise ExecutableMismatchError(
            f"is for {machine}, not for {space.abi.name} like {space.name}", path=layout.path
        )
    if not layout.loads:
        raise ExecutableMismatchError("has no loadable segment", path=layout.path)
    entry = space.auxv.get(AT_ENTRY)
    phdr = space.auxv.get(AT_PHDR)
    if entry is not None:
        candidates = [entry - layout.entry]
        why = f"its entry point {layout.entry:#x} is not where {space.name} started ({entry:#x})"
    elif phdr is not None and layout.phdr_address is not None:
        candidates = [phdr - layout.phdr_address]
        why = f"its program headers are not at {phdr:#x}"
    elif space.reported_bias is not None:
        candidates = [space.reported_bias]
        why = f"it is not loaded {space.reported_bias:#x} from its link-time addresses"
    elif layout.e_type == ET_EXEC or space.regions is None:
        candidates = [0]
        why = "it is not mapped at its link-time address"
    else:
        candidates = _pie_candidates(space, layout)
        why = "no placement fits the loaded segments"
    regions = None if space.regions is None else _Regions(space.regions)
    for bias in candidates:
        if (layout.e_type == ET_EXEC and bias != 0) or bias % space.page_size:
            continue
        problem = _misfit(space, layout, bias, regions)
        if problem is None:
            return bias
        why = problem
    raise ExecutableMismatchError(
        f"is not the executable of {space.name}: {why}", path=layout.path
    )


def _pie_candidates(space: AddressSpace, layout: ElfLayout) -> list[int]:
    first = min(layout.loads, key=lambda s: s.vaddr)
    base = first.vaddr & -space.page_size
    starts = (region.start - base for region in space.regions or () if region.start >= base)
    return list(dict.fromkeys(starts))


class _Regions:
    """A space's regions by start, searched by bisection: the regions that may overlap a
    range begin at the first whose end, or an earlier one's, reaches past its start."""

    def __init__(self, regions: tuple[Region, ...]) -> None:
        self.regions = sorted(regions, key=lambda r: r.start)
        self._reach = list(itertools.accumulate((r.end for r in self.regions), max))

    def overlapping(self, start: int, end: int) -> Iterator[Region]:
        """The regions that overlap [start, end), by start."""
        for index in range(bisect.bisect_right(self._reach, start), len(self.regions)):
            region = self.regions[index]
            if region.start >= end:
                return
            if region.end > start:
                yield region


def _misfit(
    space: AddressSpace, layout: ElfLayout, bias: int, regions: _Regions | None = None
) -> str | None:
    """Why ``layout`` does not fit ``space`` at ``bias`` (None: it fits).  ``regions``: the
    space's regions, sorted once for every bias tried."""
    if space.regions is not None:
        regions = regions or _Regions(space.regions)
        for segment in layout.loads:
            problem = _segment_misfit(regions, segment, bias, space.page_size)
            if problem is not None:
                return problem
    checks = []
    header_segment = next((s for s in layout.loads if s.offset == 0 and s.filesz), None)
    if header_segment is not None:
        checks.append((layout.header_bytes, header_segment.vaddr + bias, "ELF header"))
    if layout.phdr_address is not None:
        checks.append((layout.phdr_bytes, layout.phdr_address + bias, "program headers"))
    if layout.build_id is not None and layout.build_id_address is not None:
        checks.append((layout.build_id, layout.build_id_address + bias, "build ID"))
    seen = False
    for expected, address, what in checks:
        held = _held(space, address, len(expected))
        if held is not None and held != expected:
            return f"the bytes at {address:#x} are not its {what}"
        seen = seen or held is not None
    if space.regions is None and not seen:
        # No permissions to go by: the bytes must be seen to match.
        return f"none of its headers can be read where a load bias of {bias:#x} puts them"
    return None


def _segment_misfit(
    regions: _Regions, segment: ElfSegment, bias: int, page: int
) -> str | None:
    start = (segment.vaddr + bias) & -page
    end = -(-(segment.vaddr + bias + segment.memsz) // page) * page
    perms = _perms(segment.flags)
    covered = start
    for region in regions.overlapping(start, end):
        if region.start > covered:
            break
        if bool(region.flags & PF_X) != bool(segment.flags & PF_X):
            return (
                f"its {perms} segment at {start:#x}-{end:#x} is mapped "
                f"{_perms(region.flags)} at {region.start:#x}"
            )
        covered = max(covered, region.end)
    if covered < end:
        return f"its {perms} segment at {start:#x}-{end:#x} is not mapped there"
    return None


def _perms(flags: int) -> str:
    return "".join(c if flags & bit else "-" for c, bit in (("r", 4), ("w", 2), ("x", 1)))


def _held(space: AddressSpace, address: int, size: int) -> bytes | None:
    try:
        data = space.read_held(address, size)
    except (OSError, ValueError, SFrameError):
        return None
    return bytes(data) if len(data) == size else None


def build_id_in_memory(read: ReadMemory, start: int) -> bytes | None:
    """The NT_GNU_BUILD_ID note of the ELF image mapped from ``start``, read through ``read``:
    its ELF header, its program headers, then its PT_NOTE segments placed by the load bias
    of the PT_LOAD that maps file offset 0.  Linux core dumps hold these first pages of
    every mapped ELF file (``coredump_filter`` bit 4, on by default), as gdb's ``gcore``
    does; None when ``read`` holds no such image or it has no build ID."""
    try:
        header = ElfHeader.unpack(read(start, EHDR_SIZE[64]))
        layout = phdr_struct(header.bits, header.big_endian)
        if header.phentsize != layout.size or not 0 < header.phnum <= 256:
            return None
        table = read(start + header.phoff, layout.size * header.phnum)
        segments = [
            dict(zip(PHDR_NAMES[header.bits], layout.unpack_from(table, i * layout.size),
                     strict=True))
            for i in range(header.phnum)
        ]
        first = next((s for s in segments if s["type"] == PT_LOAD and s["offset"] == 0), None)
        if first is None:
            return None
        bias = start - first["vaddr"]
        for note in segments:
            if note["type"] != PT_NOTE or not 0 < note["filesz"] <= 1 << 16:
                continue
            data = read(note["vaddr"] + bias, note["filesz"])
            for name, kind, desc in iter_notes(data, header.big_endian):
                if name == b"GNU" and kind == NT_GNU_BUILD_ID:
                    return desc
    except (OSError, ValueError, SFrameError):
        return None
    return None


# ---------------------------------------------------------------------------------------------
# Shared objects


@dataclass(frozen=True, slots=True)
class LinkedObject:
    """An entry of the dynamic linker's list: load bias, path, dynamic section address."""

    bias: int
    name: str
    dynamic: int


def linked_objects(space: AddressSpace, exe: ElfLayout, exe_bias: int) -> list[LinkedObject]:
    """The dynamic linker's list of loaded objects (empty: not filled in, or unreadable),
    the executable's own entry left out."""
    if exe.dynamic is None:
        return []
    r_debug = _dt_debug(space, exe.dynamic.vaddr + exe_bias, exe.dynamic.memsz)
    if not r_debug:
        return []
    link_map = link_map64_struct(space.big_endian)
    try:
        version, entry, *_ = r_debug64_struct(space.big_endian).unpack(
            _read(space, r_debug, r_debug64_struct(space.big_endian).size)
        )
    except OSError:
        return []
    if version < 1:
        return []
    found: list[LinkedObject] = []
    seen: set[int] = set()
    while entry and entry not in seen and len(seen) < _MAX_LINKED:
        seen.add(entry)
        try:
            bias, name_at, dynamic, entry, _ = link_map.unpack(_read(space, entry, link_map.size))
            name = _read_string(space, name_at) if name_at else ""
        except OSError:
            break
        if name:
            found.append(LinkedObject(bias, name, dynamic))
    return found


def _dt_debug(space: AddressSpace, address: int, size: int) -> int:
    entry = dyn64_struct(space.big_endian)
    size = min(size, _MAX_DYNAMIC) // entry.size * entry.size
    try:
        data = _read(space, address, size)
    except OSError:
        return 0
    for tag, value in entry.iter_unpack(data):
        if tag == DT_NULL:
            break
        if tag == DT_DEBUG:
            return int(value)
    return 0


def _read(space: AddressSpace, address: int, size: int) -> bytes:
    try:
        data = space.read_memory(address, size)
    except (ValueError, SFrameError) as error:
        raise OSError(str(error)) from None
    if len(data) != size:
        raise OSError(f"cannot read {size} bytes at {address:#x}")
    return bytes(data)


def _read_string(space: AddressSpace, address: int) -> str:
    """A NUL-terminated path, read a page piece at a time (never past a page it needs)."""
    out = b""
    while len(out) < _MAX_PATH:
        at = address + len(out)
        chunk = _read(space, at, min(256, _DEFAULT_PAGE - at % _DEFAULT_PAGE))
        end = chunk.find(b"\0")
        if end >= 0:
            return os.fsdecode(out + chunk[:end])
        out += chunk
    raise OSError(f"the path at {address:#x} is longer than {_MAX_PATH} bytes")


def shared_object_mappings(
    space: AddressSpace,
    exe: ElfLayout,
    exe_bias: int,
    sysroot: str | None = None,
    warnings: list[str] | None = None,
) -> list[Mapping]:
    """Mappings of the shared objects the dynamic linker loaded (or of the interpreter alone,
    before it has listed them).  A library whose file cannot be found is mapped under the
    path looked at, from its load bias to its dynamic section, so that frames in it are shown
    unresolved rather than lost.  ``warnings`` gets a line for each name that leaves the
    sysroot (:func:`lookup_paths`)."""
    objects = linked_objects(space, exe, exe_bias)
    if not objects and exe.interpreter and space.auxv.get(AT_BASE):
        objects = [LinkedObject(space.auxv[AT_BASE], exe.interpreter, 0)]
        interpreter_base = True
    else:
        interpreter_base = False
    mappings: list[Mapping] = []
    # Each file is read once, however many entries name it (the list is the process's).
    layouts: dict[str, ElfLayout | None] = {}
    for linked in objects:
        mappings.extend(
            _object_mappings(space, linked, sysroot, interpreter_base, layouts, warnings)
        )
    return mappings


def _object_mappings(
    space: AddressSpace,
    linked: LinkedObject,
    sysroot: str | None,
    at_base: bool,
    layouts: dict[str, ElfLayout | None],
    warnings: list[str] | None,
) -> list[Mapping]:
    candidates = list(dict.fromkeys(lookup_paths(linked.name, sysroot, warnings)))
    for path in candidates:
        if path not in layouts:
            layouts[path] = _layout(path, space.abi)
        layout = layouts[path]
        if layout is None:
            continue
        bias = linked.bias
        if at_base:
            bias -= layout.lowest & -space.page_size
        elif layout.dynamic is not None and linked.dynamic:
            # gdb's lm_addr_check: l_ld is where the dynamic section is (a prelinked object
            # moved by the loader has an l_addr that says otherwise).
            moved = linked.dynamic - layout.dynamic.vaddr
            if moved != bias and moved % space.page_size == 0:
                bias = moved
        return layout.mappings(bias, space.page_size)
    if not os.path.isabs(linked.name) or not candidates or os.path.exists(candidates[0]):
        return []
    if not linked.bias < linked.dynamic < linked.bias + (1 << 32):
        return []
    return [Mapping(linked.bias, linked.dynamic, 0, candidates[0])]


def lookup_paths(
    name: str, sysroot: str | None, warnings: list[str] | None = None
) -> list[str]:
    """Where a file a program loaded as ``name`` is looked for: under ``sysroot`` first
    (:func:`pysframe.input.sysroot_path`: a name that leaves the sysroot, by ``..`` or a
    symbolic link, is not looked for there, and ``warnings`` gets a line saying so)."""
    paths = []
    if sysroot:
        try:
            paths.append(sysroot_path(sysroot, name))
        except InputError as error:
            if warnings is not None and str(error) not in warnings:
                warnings.append(str(error))
    if os.path.isabs(name) or not sysroot:
        paths.append(name)
    return paths


def _layout(path: str, abi: Abi) -> ElfLayout | None:
    """The layout of the ELF file at ``path`` when it is one for ``abi``; None when it is
    missing, not a regular file (:func:`pysframe.elf.reader.is_elf_file`), or not ELF."""
    if not is_elf_file(path):
        return None
    try:
        layout = ElfLayout.read(path)
    except (OSError, SFrameError):
        return None
    return layout if layout.abi is abi else None


# ---------------------------------------------------------------------------------------------
# Address-space size


def va_bits_from_pac_mask(mask: int) -> int | None:
    """The virtual-address size an NT_ARM_PAC_MASK mask implies (its lowest bit), or None."""
    if mask <= 0:
        return None
    return (mask & -mask).bit_length() - 1


def va_bits_for(addresses: Iterable[int]) -> int:
    """The smallest Linux AArch64 address-space size holding every address given: stripping
    the bits above it from a signed return address leaves any address the space can map."""
    highest = max(addresses, default=0)
    for bits in _LINUX_VA_BITS:
        if highest <= 1 << bits:
            return bits
    return 64


__all__ = [
    "AddressSpace",
    "ElfLayout",
    "ExecutableMismatchError",
    "LinkedObject",
    "Region",
    "linked_objects",
    "lookup_paths",
    "place_executable",
    "shared_object_mappings",
    "va_bits_for",
    "va_bits_from_pac_mask",
]
