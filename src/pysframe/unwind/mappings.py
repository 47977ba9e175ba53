"""What an address space maps, and where a live process says so.

* :class:`Mapping`: one mapped file range, from ``/proc/PID/maps`` (a live process) or a core
  file's ``NT_FILE`` note (:mod:`pysframe.unwind.corefile`), or found through the dynamic
  linker's ``r_debug`` (:mod:`pysframe.unwind.loadmap`);
* the auxiliary vector (``/proc/PID/auxv``, a core's ``NT_AUXV``, a remote stub's
  ``qXfer:auxv:read``): its entries, and the vDSO's address in it (``AT_SYSINFO_EHDR``);
* ``/proc/PID/map_files/START-END``: the file a process mapped, even deleted or replaced since.
"""

from __future__ import annotations

import os
import sys

from ..dataclass import dataclass
from ..elf.layout import auxv64_struct
from ..errors import InputError
from ..input import open_input, read_proc

#: The auxiliary vector entry holding the vDSO's address (AT_SYSINFO_EHDR, <elf.h>).
AT_SYSINFO_EHDR = 33
#: What /proc/PID/maps appends to the path of a file deleted since it was mapped.
DELETED = " (deleted)"
#: /proc/PID/auxv is a few hundred bytes; more than this is not read.
_AUXV_LIMIT = 1 << 16
#: /proc/PID/maps of the largest processes is a few MB; more than this is refused.
_MAPS_LIMIT = 64 << 20


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
    """File-backed mappings of a live process, from /proc/PID/maps (read bounded, as every
    input is: InputError when it cannot be read)."""
    text = read_proc(f"/proc/{pid}/maps", _MAPS_LIMIT).decode("utf-8", "surrogateescape")
    mappings = []
    for line in text.splitlines():
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
        )  # fmt: skip
    except ValueError:
        return None


def mapped_file(pid: int, ranges: list[Mapping]) -> str | None:
    """``/proc/PID/map_files/START-END`` of the mapping of the file's first page: the mapped
    file itself, even deleted or replaced (readable with the rights ptrace needs, and
    CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: proc(5)); None if it cannot be read or is not
    the mapped inode."""
    first = min(ranges, key=lambda m: (m.file_offset, m.start))
    candidate = f"/proc/{pid}/map_files/{first.start:x}-{first.end:x}"
    try:
        stat = os.stat(candidate)
        open_input(candidate).close()
    except (OSError, InputError):
        return None
    if first.inode is not None and stat.st_ino != first.inode:
        return None
    return candidate


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
        auxv = read_proc(f"/proc/{pid}/auxv", _AUXV_LIMIT)
    except InputError:
        return None
    return vdso_address(auxv, sys.byteorder == "big")


__all__ = [
    "AT_SYSINFO_EHDR",
    "DELETED",
    "Mapping",
    "auxv_entries",
    "mapped_file",
    "parse_maps_line",
    "process_mappings",
    "process_vdso_address",
    "vdso_address",
]
