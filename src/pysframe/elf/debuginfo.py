"""Separate debug information, found as gdb finds it ("Debugging Information in Separate
Files", gdb manual; gdb/symfile.c, gdb/build-id.c, gdb/minidebug.c).

* By build ID: ``DIR/.build-id/xx/yyyy….debug`` for each debug directory ``DIR`` (gdb's
  ``debug-file-directory``, ``/usr/lib/debug`` by default), where ``xx`` is the first byte of
  the ID in hex and ``yyyy…`` the rest.  The file found must carry the same build ID.
* By ``.gnu_debuglink`` (a file name and the CRC32 of the debug file, the CRC of zlib and of
  gdb's ``gnu_debuglink_crc32``): the name in the file's own directory, in its ``.debug/``
  subdirectory, then ``DIR/<the file's directory>/`` for each debug directory.  A file whose
  CRC differs is not used (gdb warns "the debug information found in ... does not match").
  gdb reads the whole candidate for its CRC, whatever its size (``separate_debug_file_exists``,
  ``gdb_bfd_crc``); here a candidate larger than :data:`MAX_DEBUGLINK_SIZE` is passed over
  without reading it (a sparse file may claim any size, and its CRC would read it all).
* MiniDebugInfo: ``.gnu_debugdata`` holds an XZ-compressed ELF file with a ``.symtab`` (Fedora
  and others add it to stripped binaries); gdb reads it when the file has no ``.symtab``.  It
  is decompressed within a bound, as compressed sections are
  (:data:`pysframe.elf.reader.MAX_EXPANSION` times its size plus 1 MiB, and never more than
  :data:`MAX_MINIDEBUGINFO`): a symbol table of zeros compresses a thousandfold.

Every candidate is opened as inputs are (:func:`pysframe.input.open_input`): a FIFO or a
device in a debug directory, or named by an absolute debuglink, is passed over unread.
"""

from __future__ import annotations

import os
from dataclasses import field

from ..dataclass import dataclass
from ..errors import ElfError, SFrameError
from ..input import InputError, open_input
from .reader import MAX_EXPANSION, ElfReader, is_elf_file

#: gdb's default ``debug-file-directory``.
DEFAULT_DEBUG_DIRS: tuple[str, ...] = ("/usr/lib/debug",)
#: MiniDebugInfo bigger than this once decompressed is not read (a bomb stays small).
MAX_MINIDEBUGINFO = 256 << 20
#: A debuglink candidate larger than this (2 GiB) is not read for its CRC (about a second a
#: GiB): it is passed over, with the reason.
MAX_DEBUGLINK_SIZE = 2 << 30


@dataclass(slots=True, eq=False, repr=False)
class DebugFileSearch:
    """Where a file's separate debug information is: ``path`` (None: not found), how it was
    found (``"build-id"`` or ``"debuglink"``), and each candidate that was passed over, why."""

    path: str | None = None
    how: str | None = None
    rejected: list[str] = field(default_factory=list)


def build_id_path(directory: str, build_id: bytes) -> str:
    """``DIR/.build-id/xx/yyyy….debug`` for ``build_id``."""
    text = build_id.hex()
    return os.path.join(directory, ".build-id", text[:2], text[2:] + ".debug")


def file_crc32(path: str, max_size: int | None = MAX_DEBUGLINK_SIZE) -> int:
    """The CRC32 of a whole file, as ``.gnu_debuglink`` records it (zlib's CRC-32); InputError
    when the file is not a regular file or is larger than ``max_size`` bytes.  Read a MiB at
    a time (faster than mapping it: a sparse file's holes fault in page by page)."""
    import zlib

    crc = 0
    with open_input(path, max_size=max_size) as file:
        try:
            while chunk := file.read(1 << 20):
                crc = zlib.crc32(chunk, crc)
        except OSError as error:
            raise InputError(error.strerror or str(error), path=path) from None
    return crc


def debuglink_candidates(path: str, name: str, debug_dirs: tuple[str, ...]) -> list[str]:
    """Where gdb looks for the debuglink ``name`` of the file at ``path``, in order."""
    directory = os.path.dirname(os.path.realpath(path))
    out = [os.path.join(directory, name), os.path.join(directory, ".debug", name)]
    for root in debug_dirs:
        out.append(os.path.join(root, directory.lstrip("/"), name))
    return out


def _build_id_of(path: str) -> bytes | None:
    try:
        with ElfReader.open(path) as image:
            return image.build_id()
    except SFrameError:
        return None


def find_debug_file(
    path: str,
    build_id: bytes | None,
    debuglink: tuple[str, int] | None,
    debug_dirs: tuple[str, ...] = DEFAULT_DEBUG_DIRS,
) -> DebugFileSearch:
    """The separate debug file of the ELF file at ``path`` (its ``build_id`` and
    ``debuglink``), looked for by build ID first, then by debuglink, as gdb does."""
    search = DebugFileSearch()
    own = os.path.realpath(path)
    if build_id:
        for root in debug_dirs:
            candidate = build_id_path(root, build_id)
            if not is_elf_file(candidate) or os.path.realpath(candidate) == own:
                continue
            if _build_id_of(candidate) != build_id:
                search.rejected.append(f"{candidate}: build ID does not match")
                continue
            search.path, search.how = candidate, "build-id"
            return search
    if debuglink is not None:
        name, crc = debuglink
        for candidate in debuglink_candidates(path, name, debug_dirs):
            if not is_elf_file(candidate) or os.path.realpath(candidate) == own:
                continue
            try:
                found = file_crc32(candidate)
            except InputError as error:
                search.rejected.append(str(error))
                continue
            if found != crc:
                search.rejected.append(
                    f"{candidate}: CRC mismatch ({found:#010x}, the debuglink says {crc:#010x})"
                )
                continue
            search.path, search.how = candidate, "debuglink"
            return search
    return search


def minidebuginfo(image: ElfReader) -> bytes | None:
    """The ELF image of ``.gnu_debugdata`` (MiniDebugInfo), decompressed; None if the file has
    none.  ElfError when it is not XZ data or is too big."""
    import lzma

    section = image.section(".gnu_debugdata")
    if section is None:
        return None
    packed = section.data()
    limit = min(MAX_MINIDEBUGINFO, MAX_EXPANSION * len(packed) + (1 << 20))
    decompressor = lzma.LZMADecompressor()
    path, name = image.path, ".gnu_debugdata"
    try:
        data = decompressor.decompress(packed, max_length=limit)
    except lzma.LZMAError as error:
        raise ElfError(f"not XZ data ({error})", path=path, section=name) from None
    if not decompressor.eof:
        if decompressor.needs_input:
            raise ElfError("truncated XZ data", path=path, section=name)
        raise ElfError(
            f"more than {limit} bytes once decompressed from {len(packed)}: not read",
            path=path,
            section=name,
        )
    return data


__all__ = [
    "DEFAULT_DEBUG_DIRS",
    "MAX_DEBUGLINK_SIZE",
    "DebugFileSearch",
    "build_id_path",
    "debuglink_candidates",
    "file_crc32",
    "find_debug_file",
    "minidebuginfo",
]
