"""Core files: threads (NT_PRSTATUS), mapped files (NT_FILE), memory (PT_LOAD).

Only the program headers and notes are read (ELF64, either byte order; through
:mod:`pysframe.elf`); memory is read on demand, so cores of any size open at once.  Memory the
core does not hold (a file-backed segment the kernel did not dump) is read from the mapped file
itself, through the NT_FILE note.  Notes used (Linux ``elf_core_dump``):

* NT_PRSTATUS (1): one per thread; pr_pid at byte 32, pr_reg (the general-purpose registers,
  ``user_regs_struct`` layout) at byte 112;
* NT_AUXV (6): AT_ENTRY (9) names the main executable's mapping, AT_SYSINFO_EHDR (33) the
  vDSO's;
* NT_FILE (0x46494c45): count, page size, then (start, end, file offset in pages) per mapping,
  then the file names;
* NT_PRFPREG (2), s390x: the floating-point registers, where leaf functions may keep their
  return address;
* NT_ARM_PAC_MASK (0x406, name "LINUX"): the AArch64 pointer-authentication masks.

A core without NT_FILE (qemu-user writes none) is given its executable (``exe``): it is placed
by address, permissions and content, and the shared objects are found through the dynamic
linker's list in the core's memory, under ``sysroot`` when given (:mod:`.loadmap`).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import os
import struct
from typing import BinaryIO

from ..elf.layout import (
    ELF_MAGIC,
    ET_CORE,
    NT_ARM_PAC_MASK,
    NT_PRFPREG,
    PT_LOAD,
    PT_NOTE,
    byte_order,
    pac_mask_struct,
    phdr_struct,
    s390x_fpregs_struct,
)
from ..elf.reader import ElfReader, ElfSegment, iter_notes
from ..errors import ElfError, SFrameError, UnwindError
from ..format.constants import Abi
from ..input import InputError, open_input
from .loadmap import (
    AddressSpace,
    ElfLayout,
    Region,
    lookup_paths,
    place_executable,
    shared_object_mappings,
    va_bits_for,
    va_bits_from_pac_mask,
)
from .mappings import AT_SYSINFO_EHDR, Mapping, auxv_entries
from .ptrace import ThreadState, registers_from_gregs, s390x_fpr_registers

NT_PRSTATUS = 1
NT_AUXV = 6
NT_FILE = 0x46494C45
AT_ENTRY = 9
_PR_PID_OFFSET = 32
_PR_REG_OFFSET = 112
#: NT_FILE: u64 count and page size, then (start, end, file offset in pages) per mapping.
_NT_FILE_HEADER = "QQ"
_NT_FILE_ENTRY = "QQQ"
#: Notes bigger than this are not believed (a core's notes are a few MB at most).
_MAX_NOTES = 256 << 20


class CoreFileError(UnwindError):
    """The core file cannot be read: not a core, truncated, or an unsupported machine."""


class CoreFile:
    """An opened core file; close it (or use it as a context manager) when done."""

    def __init__(self, path: str, exe: str | None = None, sysroot: str | None = None) -> None:
        self.path = path
        #: Lines to warn with (``FILE: why``): NT_FILE or link_map names that leave the sysroot.
        self.warnings: list[str] = []
        self._files: dict[str, BinaryIO | None] = {}
        self._by_start: list[Mapping] | None = None
        self._image = self._open(path)
        try:
            self.size = self._image.file_size
            self._read_headers()
            self._starts = [segment.vaddr for segment in self.segments]
            self.threads: list[ThreadState] = []
            self.mappings: list[Mapping] = []
            self._entry: int | None = None
            #: Where the vDSO was mapped (AT_SYSINFO_EHDR), or None.
            self.vdso_address: int | None = None
            #: The auxiliary vector (NT_AUXV).
            self.auxv: dict[int, int] = {}
            #: AArch64: the instruction mask of NT_ARM_PAC_MASK, or None.
            self.pac_mask: int | None = None
            self._read_notes()
            if not self.mappings:
                self._find_mappings(exe, sysroot)
            else:
                if exe is not None:
                    self._override_exe(exe)
                if sysroot is not None:
                    self._apply_sysroot(sysroot, exe)
            self._by_start = _disjoint(self.mappings)
        except BaseException:
            self.close()
            raise

    # -- headers ----------------------------------------------------------------------------

    @staticmethod
    def _open(path: str) -> ElfReader:
        try:
            file = open_input(path)  # the image closes it
        except InputError as error:
            raise CoreFileError(error.message, path=error.path or path) from None
        try:
            if file.read(4) != ELF_MAGIC:
                raise CoreFileError("not an ELF file", path=path)
            file.seek(0)
            return ElfReader(path, file)
        except ElfError as error:
            file.close()
            raise CoreFileError(error.message, error.offset, path=error.path or path) from None
        except BaseException:
            file.close()
            raise

    def _check_present(self, offset: int, size: int, what: str) -> None:
        if offset + size > self.size:
            raise CoreFileError(
                f"core file truncated: {what} needs bytes {offset:#x}-{offset + size:#x}, "
                f"the file has {self.size:#x}",
                path=self.path,
            )

    def _read_headers(self) -> None:
        image, header = self._image, self._image.header
        if image.elfclass != 64:
            raise CoreFileError("only 64-bit core files are supported", path=self.path)
        self.big_endian = image.big_endian
        self._order = byte_order(self.big_endian)
        if image.e_type != ET_CORE:
            raise CoreFileError(f"not a core file (ELF type {image.e_type})", path=self.path)
        abi = image.abi
        if abi is None:
            raise CoreFileError(f"unsupported machine {image.machine}", path=self.path)
        self.abi = abi
        entry_size = phdr_struct(64, self.big_endian).size
        if header.phentsize != entry_size or header.phnum == 0:
            raise CoreFileError(
                f"bad program header table ({header.phnum} x {header.phentsize})", path=self.path
            )
        self._check_present(header.phoff, entry_size * header.phnum, "the program header table")
        try:
            segments = image.segments()
        except ElfError as error:
            raise CoreFileError(error.message, error.offset, path=self.path) from None
        self.segments: list[ElfSegment] = sorted(
            (s for s in segments if s.type == PT_LOAD), key=lambda segment: segment.vaddr
        )
        self._notes = [s for s in segments if s.type == PT_NOTE]
        needed = max((s.offset + s.filesz for s in self.segments if s.filesz), default=0)
        if needed > self.size:
            raise CoreFileError(
                f"core file truncated: its segments need {needed:#x} bytes, the file has "
                f"{self.size:#x}",
                path=self.path,
            )

    def _read_notes(self) -> None:
        for segment in self._notes:
            if segment.filesz > _MAX_NOTES:
                raise CoreFileError(
                    f"note segment of {segment.filesz} bytes is too big", path=self.path
                )
            self._check_present(segment.offset, segment.filesz, "the notes")
            data = self._image.segment_data(segment)
            try:
                for name, n_type, desc in iter_notes(data, self.big_endian):
                    if name == b"LINUX" and n_type == NT_ARM_PAC_MASK:
                        self._read_pac_mask(desc)
                    if name != b"CORE":
                        continue
                    if n_type == NT_PRSTATUS:
                        self._add_thread(desc)
                    elif n_type == NT_FILE:
                        self._add_files(desc)
                    elif n_type == NT_AUXV:
                        self._read_auxv(desc)
                    elif n_type == NT_PRFPREG and self.abi is Abi.S390X_ENDIAN_BIG:
                        self._add_s390x_fprs(desc)
            except ElfError as error:
                raise CoreFileError(error.message, error.offset, path=self.path) from None
        if not self.threads:
            raise CoreFileError("no thread (NT_PRSTATUS) in the core file", path=self.path)

    def _add_thread(self, desc: bytes) -> None:
        if len(desc) < _PR_REG_OFFSET:
            raise CoreFileError(
                f"NT_PRSTATUS note of {len(desc)} bytes is too short", path=self.path
            )
        (pid,) = struct.unpack_from(self._order + "i", desc, _PR_PID_OFFSET)
        try:
            registers = registers_from_gregs(self.abi, desc[_PR_REG_OFFSET:])
        except UnwindError as error:
            raise CoreFileError(
                f"NT_PRSTATUS note of {len(desc)} bytes: {error.message}", path=self.path
            ) from None
        self.threads.append(ThreadState(pid, registers))

    def _add_files(self, desc: bytes) -> None:
        header = struct.Struct(self._order + _NT_FILE_HEADER)
        entry = struct.Struct(self._order + _NT_FILE_ENTRY)
        if len(desc) < header.size:
            raise CoreFileError("NT_FILE note is too short", path=self.path)
        count, page_size = header.unpack_from(desc, 0)
        names_at = header.size + entry.size * count
        if names_at > len(desc):
            raise CoreFileError(
                f"NT_FILE note lists {count} files in {len(desc)} bytes", path=self.path
            )
        names = desc[names_at:].split(b"\0")
        if len(names) < count:
            raise CoreFileError("NT_FILE note has fewer names than mappings", path=self.path)
        for index in range(count):
            start, end, page_offset = entry.unpack_from(desc, header.size + entry.size * index)
            path = os.fsdecode(names[index])
            self.mappings.append(Mapping(start, end, page_offset * page_size, path))

    def _read_auxv(self, desc: bytes) -> None:
        entries = auxv_entries(desc, self.big_endian)
        self.auxv = entries
        self._entry = entries.get(AT_ENTRY, self._entry)
        self.vdso_address = entries.get(AT_SYSINFO_EHDR) or self.vdso_address

    def _read_pac_mask(self, desc: bytes) -> None:
        layout = pac_mask_struct(self.big_endian)
        if len(desc) >= layout.size:
            _, insn_mask = layout.unpack_from(desc)
            self.pac_mask = insn_mask

    def _add_s390x_fprs(self, desc: bytes) -> None:
        """NT_PRFPREG follows its thread's NT_PRSTATUS (Linux ``fill_thread_core_info``)."""
        layout = s390x_fpregs_struct()
        if not self.threads or len(desc) < layout.size:
            return
        _, *fprs = layout.unpack_from(desc)
        thread = self.threads[-1]
        registers = thread.registers
        extra = registers.extra + s390x_fpr_registers(fprs)
        self.threads[-1] = ThreadState(thread.tid, dataclasses.replace(registers, extra=extra))

    @property
    def va_bits(self) -> int:
        """The AArch64 virtual-address size: from NT_ARM_PAC_MASK, else the highest address the
        core maps (the bits above it are a return address's signature)."""
        from_mask = va_bits_from_pac_mask(self.pac_mask) if self.pac_mask else None
        return from_mask or va_bits_for(s.vaddr + s.memsz for s in self.segments)

    def _find_mappings(self, exe: str | None, sysroot: str | None) -> None:
        """No NT_FILE: place ``exe`` and find the shared objects in the core's memory."""
        if exe is None:
            raise CoreFileError(
                "the core file does not list its mapped files (no NT_FILE note): "
                "name its executable with --exe",
                path=self.path,
            )
        try:
            layout = ElfLayout.read(exe)
        except SFrameError as error:
            raise CoreFileError(error.message, error.offset, path=error.path or exe) from None
        regions = tuple(Region(s.vaddr, s.vaddr + s.memsz, s.flags) for s in self.segments)
        space = AddressSpace(
            self.path, self.abi, self.read_memory, self.read_dumped, self.auxv, regions
        )
        bias = place_executable(space, layout)
        self.mappings = layout.mappings(bias, space.page_size)
        self.mappings += shared_object_mappings(space, layout, bias, sysroot, self.warnings)

    def _apply_sysroot(self, sysroot: str, exe: str | None) -> None:
        """NT_FILE paths are the dumping machine's: look for each under ``sysroot`` first."""
        found: dict[str, str] = {}  # each path looked for once, however many mappings it has
        for mapping in self.mappings:
            path = mapping.path
            if path != exe and path not in found:
                found[path] = next(
                    (p for p in lookup_paths(path, sysroot, self.warnings) if os.path.exists(p)),
                    path,
                )
        self.mappings = [
            dataclasses.replace(mapping, path=found.get(mapping.path, mapping.path))
            for mapping in self.mappings
        ]

    def _override_exe(self, exe: str) -> None:
        """Map the main executable's NT_FILE entries to ``exe``."""
        old = self.executable
        if old is None:
            raise CoreFileError("cannot tell which mapping is the executable", path=self.path)
        self.mappings = [
            Mapping(m.start, m.end, m.file_offset, exe if m.path == old else m.path)
            for m in self.mappings
        ]

    @property
    def executable(self) -> str | None:
        """Path of the main executable (the mapping holding AT_ENTRY, else the first file)."""
        if self._entry is not None:
            for mapping in self.mappings:
                if mapping.start <= self._entry < mapping.end:
                    return mapping.path
        return self.mappings[0].path if self.mappings else None

    @property
    def pid(self) -> int:
        return self.threads[0].tid

    # -- memory -----------------------------------------------------------------------------

    def read_memory(self, address: int, size: int) -> bytes:
        """Bytes at ``address``; raises OSError where the core and the mapped files hold none."""
        out = bytearray()
        while len(out) < size:
            chunk = self._read_some(address + len(out), size - len(out))
            if not chunk:
                raise OSError(f"address {address + len(out):#x} is not in the core file")
            out += chunk
        return bytes(out)

    def read_dumped(self, address: int, size: int) -> bytes:
        """Bytes at ``address`` that the core file itself holds; OSError where it holds none."""
        index = bisect.bisect_right(self._starts, address) - 1
        if index >= 0:
            segment = self.segments[index]
            delta = address - segment.vaddr
            if delta + size <= segment.filesz:
                return self._image.read(segment.offset + delta, size)
        raise OSError(f"the core file holds no {size} bytes at {address:#x}")

    def _read_some(self, address: int, size: int) -> bytes:
        index = bisect.bisect_right(self._starts, address) - 1
        if index >= 0:
            segment = self.segments[index]
            delta = address - segment.vaddr
            if delta < segment.filesz:
                count = min(size, segment.filesz - delta)
                return self._image.read(segment.offset + delta, count)
            if delta < segment.memsz:
                return self._read_mapped_file(address, min(size, segment.memsz - delta))
        return self._read_mapped_file(address, size)

    def _read_mapped_file(self, address: int, size: int) -> bytes:
        mapping = self._mapping_at(address)
        if mapping is None:
            return b""
        file = self._file(mapping.path)
        if file is None:
            return b""
        count = min(size, mapping.end - address)
        return os.pread(file.fileno(), count, mapping.file_offset + address - mapping.start)

    def _mapping_at(self, address: int) -> Mapping | None:
        """The first mapping (in NT_FILE order) holding ``address``: by bisection when the
        mappings do not overlap (as the kernel writes them), else one by one."""
        if self._by_start is None:
            return next((m for m in self.mappings if m.start <= address < m.end), None)
        index = bisect.bisect_right(self._by_start, address, key=lambda m: m.start) - 1
        if index >= 0 and address < self._by_start[index].end:
            return self._by_start[index]
        return None

    def _file(self, path: str) -> BinaryIO | None:
        """The mapped file at ``path``, opened once as every input is
        (:func:`pysframe.input.open_input`: a FIFO or a device is not read); None when it
        cannot be."""
        if path not in self._files:
            try:
                self._files[path] = open_input(path)
            except InputError:
                self._files[path] = None
        return self._files[path]

    def close(self) -> None:
        for file in self._files.values():
            if file is not None:
                file.close()
        self._files.clear()
        self._image.close()

    def __enter__(self) -> CoreFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _disjoint(mappings: list[Mapping]) -> list[Mapping] | None:
    """``mappings`` sorted by start when no two overlap (then the first holding an address is
    the only one), else None."""
    ordered = sorted(mappings, key=lambda m: m.start)
    if any(first.end > second.start for first, second in itertools.pairwise(ordered)):
        return None
    return ordered


__all__ = ["CoreFile", "CoreFileError"]
