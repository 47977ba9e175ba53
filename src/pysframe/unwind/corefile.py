"""Core files: threads (NT_PRSTATUS), mapped files (NT_FILE), memory (PT_LOAD).

Only the program headers and notes are read (ELF64, either byte order); memory is read on
demand with pread, so cores of any size open at once.  Memory the core does not hold (a
file-backed segment the kernel did not dump) is read from the mapped file itself, through the
NT_FILE note.  Notes used (Linux ``elf_core_dump``):

* NT_PRSTATUS (1): one per thread; pr_pid at byte 32, pr_reg (the general-purpose registers,
  ``user_regs_struct`` layout) at byte 112;
* NT_AUXV (6): AT_ENTRY (9) names the main executable's mapping, AT_SYSINFO_EHDR (33) the
  vDSO's;
* NT_FILE (0x46494c45): count, page size, then (start, end, file offset in pages) per mapping,
  then the file names.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass

from ..errors import UnwindError
from ..format.constants import Abi
from .modules import AT_SYSINFO_EHDR, Mapping, auxv_entries
from .ptrace import ThreadState, registers_from_gregs

ET_CORE = 4
PT_LOAD = 1
PT_NOTE = 4
NT_PRSTATUS = 1
NT_AUXV = 6
NT_FILE = 0x46494C45
AT_ENTRY = 9
_PR_PID_OFFSET = 32
_PR_REG_OFFSET = 112
_MACHINES = {62: "x86-64", 183: "aarch64", 22: "s390x"}
#: Notes bigger than this are not believed (a core's notes are a few MB at most).
_MAX_NOTES = 256 << 20


class CoreFileError(UnwindError):
    """The core file cannot be read: not a core, truncated, or an unsupported machine."""


@dataclass(frozen=True, slots=True)
class LoadSegment:
    vaddr: int
    memsz: int
    offset: int
    filesz: int


class CoreFile:
    """An opened core file; close it (or use it as a context manager) when done."""

    def __init__(self, path: str, exe: str | None = None) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as error:
            raise CoreFileError(f"cannot open core file {path}: {error.strerror}") from None
        try:
            self.size = os.fstat(self._fd).st_size
            self._read_headers()
            self.threads: list[ThreadState] = []
            self.mappings: list[Mapping] = []
            self._entry: int | None = None
            #: Where the vDSO was mapped (AT_SYSINFO_EHDR), or None.
            self.vdso_address: int | None = None
            self._read_notes()
            if exe is not None:
                self._override_exe(exe)
        except BaseException:
            os.close(self._fd)
            raise
        self._starts = [segment.vaddr for segment in self.segments]
        self._file_fds: dict[str, int | None] = {}

    # -- headers ----------------------------------------------------------------------------

    def _pread(self, size: int, offset: int, what: str) -> bytes:
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise CoreFileError(
                f"core file {self.path} is truncated: {what} needs bytes {offset:#x}-"
                f"{offset + size:#x}, the file has {self.size:#x}"
            )
        return data

    def _read_headers(self) -> None:
        ident = self._pread(64, 0, "the ELF header") if self.size >= 64 else b""
        if len(ident) < 64 or ident[:4] != b"\x7fELF":
            raise CoreFileError(f"{self.path} is not an ELF file")
        if ident[4] != 2:
            raise CoreFileError(f"{self.path}: only 64-bit core files are supported")
        self.big_endian = ident[5] == 2
        self._order = ">" if self.big_endian else "<"
        e_type, e_machine = struct.unpack_from(self._order + "HH", ident, 16)
        if e_type != ET_CORE:
            raise CoreFileError(f"{self.path} is not a core file (ELF type {e_type})")
        machine = _MACHINES.get(e_machine)
        if machine is None:
            raise CoreFileError(f"{self.path}: unsupported machine {e_machine}")
        self.abi = _abi(machine, self.big_endian)
        (phoff,) = struct.unpack_from(self._order + "Q", ident, 32)
        phentsize, phnum = struct.unpack_from(self._order + "HH", ident, 54)
        if phentsize != 56 or phnum == 0:
            raise CoreFileError(f"{self.path}: bad program header table ({phnum} x {phentsize})")
        table = self._pread(56 * phnum, phoff, "the program header table")
        self.segments: list[LoadSegment] = []
        self._notes: list[tuple[int, int]] = []
        for index in range(phnum):
            p_type, _, offset, vaddr, _, filesz, memsz, _ = struct.unpack_from(
                self._order + "IIQQQQQQ", table, 56 * index
            )
            if p_type == PT_LOAD:
                self.segments.append(LoadSegment(vaddr, memsz, offset, filesz))
            elif p_type == PT_NOTE:
                self._notes.append((offset, filesz))
        self.segments.sort(key=lambda segment: segment.vaddr)
        needed = max((s.offset + s.filesz for s in self.segments if s.filesz), default=0)
        if needed > self.size:
            raise CoreFileError(
                f"core file {self.path} is truncated: its segments need {needed:#x} bytes, "
                f"the file has {self.size:#x}"
            )

    def _read_notes(self) -> None:
        for offset, size in self._notes:
            if size > _MAX_NOTES:
                raise CoreFileError(f"{self.path}: note segment of {size} bytes is too big")
            data = self._pread(size, offset, "the notes")
            for n_type, name, desc in _iter_notes(data, self._order):
                if name != b"CORE":
                    continue
                if n_type == NT_PRSTATUS:
                    self._add_thread(desc)
                elif n_type == NT_FILE:
                    self._add_files(desc)
                elif n_type == NT_AUXV:
                    self._read_auxv(desc)
        if not self.threads:
            raise CoreFileError(f"{self.path}: no thread (NT_PRSTATUS) in the core file")

    def _add_thread(self, desc: bytes) -> None:
        if len(desc) < _PR_REG_OFFSET:
            raise CoreFileError(f"{self.path}: NT_PRSTATUS note of {len(desc)} bytes is too short")
        (pid,) = struct.unpack_from(self._order + "i", desc, _PR_PID_OFFSET)
        registers = registers_from_gregs(self.abi, desc[_PR_REG_OFFSET:])
        self.threads.append(ThreadState(pid, registers))

    def _add_files(self, desc: bytes) -> None:
        if len(desc) < 16:
            raise CoreFileError(f"{self.path}: NT_FILE note is too short")
        count, page_size = struct.unpack_from(self._order + "QQ", desc, 0)
        names_at = 16 + 24 * count
        if names_at > len(desc):
            raise CoreFileError(
                f"{self.path}: NT_FILE note lists {count} files in {len(desc)} bytes"
            )
        names = desc[names_at:].split(b"\0")
        if len(names) < count:
            raise CoreFileError(f"{self.path}: NT_FILE note has fewer names than mappings")
        for index in range(count):
            start, end, page_offset = struct.unpack_from(self._order + "QQQ", desc, 16 + 24 * index)
            path = os.fsdecode(names[index])
            self.mappings.append(Mapping(start, end, page_offset * page_size, path))

    def _read_auxv(self, desc: bytes) -> None:
        entries = auxv_entries(desc, self.big_endian)
        self._entry = entries.get(AT_ENTRY, self._entry)
        self.vdso_address = entries.get(AT_SYSINFO_EHDR) or self.vdso_address

    def _override_exe(self, exe: str) -> None:
        """Map the main executable's NT_FILE entries to ``exe``."""
        old = self.executable
        if old is None:
            raise CoreFileError(f"{self.path}: cannot tell which mapping is the executable")
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

    def _read_some(self, address: int, size: int) -> bytes:
        index = bisect.bisect_right(self._starts, address) - 1
        if index >= 0:
            segment = self.segments[index]
            delta = address - segment.vaddr
            if delta < segment.filesz:
                count = min(size, segment.filesz - delta)
                return os.pread(self._fd, count, segment.offset + delta)
            if delta < segment.memsz:
                return self._read_mapped_file(address, min(size, segment.memsz - delta))
        return self._read_mapped_file(address, size)

    def _read_mapped_file(self, address: int, size: int) -> bytes:
        for mapping in self.mappings:
            if mapping.start <= address < mapping.end:
                fd = self._file(mapping.path)
                if fd is None:
                    return b""
                count = min(size, mapping.end - address)
                return os.pread(fd, count, mapping.file_offset + address - mapping.start)
        return b""

    def _file(self, path: str) -> int | None:
        if path not in self._file_fds:
            try:
                self._file_fds[path] = os.open(path, os.O_RDONLY)
            except OSError:
                self._file_fds[path] = None
        return self._file_fds[path]

    def close(self) -> None:
        for fd in self._file_fds.values():
            if fd is not None:
                os.close(fd)
        self._file_fds.clear()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> CoreFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _iter_notes(data: bytes, order: str) -> list[tuple[int, bytes, bytes]]:
    notes = []
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, n_type = struct.unpack_from(order + "III", data, pos)
        name_at = pos + 12
        desc_at = name_at + _align4(namesz)
        end = desc_at + _align4(descsz)
        if desc_at + descsz > len(data):
            raise CoreFileError(f"note at byte {pos:#x} of a note segment runs past its end")
        notes.append((n_type, data[name_at : name_at + namesz].rstrip(b"\0"),
                      data[desc_at : desc_at + descsz]))
        pos = end
    return notes


def _align4(value: int) -> int:
    return (value + 3) & ~3


def _abi(machine: str, big_endian: bool) -> Abi:
    if machine == "x86-64":
        return Abi.AMD64_ENDIAN_LITTLE
    if machine == "aarch64":
        return Abi.AARCH64_ENDIAN_BIG if big_endian else Abi.AARCH64_ENDIAN_LITTLE
    return Abi.S390X_ENDIAN_BIG


__all__ = ["CoreFile", "CoreFileError", "LoadSegment"]
