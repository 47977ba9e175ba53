"""Function names for PCs: each ELF file's symbols, from every place gdb takes them.

For one file (:class:`ModuleSymbols`, read on first use and kept by the owner of the file's
facts), the symbols are the union of, as gdb's minimal symbols are (gdb/elfread.c):

* the file's ``.symtab`` and ``.dynsym``;
* the ``.symtab`` of its separate debug file, found by build ID or ``.gnu_debuglink``
  (:func:`pysframe.elf.debuginfo.find_debug_file`) under the debug directories;
* MiniDebugInfo (``.gnu_debugdata``), when the file has no ``.symtab`` of its own;
* ``NAME@plt`` for the PLT entries (:mod:`pysframe.elf.plt`), as BFD's synthetic symbols.

The name for an address is then picked by gdb's rules (:mod:`pysframe.elf.symbols`), and
demangled (:mod:`pysframe.unwind.demangle`) unless told not to be.

Each table is read in one piece (:class:`~pysframe.elf.symbols.FunctionSymbols`), and names
one address (``stack``) or many at once (``lookup``, ``perf``).  A table that cannot be read is
left out, with the reason in :attr:`ModuleSymbols.problems`.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING

from ..dataclass import dataclass
from ..elf.debuginfo import DEFAULT_DEBUG_DIRS
from ..elf.layout import SHF_ALLOC, SHF_TLS, SHT_NOBITS
from ..elf.reader import ElfReader
from ..errors import SFrameError
from .demangle import (
    bare_name,
    demangle_checked,
    demangle_like_perf_many,
    demangle_many,
    left_mangled,
)

if TYPE_CHECKING:
    import numpy as np

    from ..elf.dwarf_lines import SourceFrame, SourceLines
    from ..elf.symbols import FunctionColumns, FunctionSymbols, SymbolRecord

@dataclass(slots=True)
class ModuleSymbols:
    """The function symbols of one ELF file, and where they came from.  ``tables``: the file's
    own (``.symtab`` with ``.dynsym``), then its separate debug file's, then MiniDebugInfo's;
    gdb keeps them as separate objfiles, and so do these."""

    path: str
    tables: Sequence[FunctionSymbols]
    #: Where the symbols came from: ".symtab", ".dynsym", ".plt", the debug file's path,
    #: ".gnu_debugdata".
    sources: list[str] = field(default_factory=list)
    debug_file: str | None = None
    #: Debug files passed over, and data that could not be read or was read only in part
    #: (symbol tables, MiniDebugInfo, DWARF walks that stopped), with the reason: one line
    #: each, ``FILE: [SECTION: ]why``, to warn with.
    problems: list[str] = field(default_factory=list)
    #: The file's allocated sections, (start, end) in address order; empty when its section
    #: headers are stripped.  gdb names no PC outside them, and a PC only with a symbol of its
    #: own section (lookup_minimal_symbol_by_pc_section).
    sections: tuple[tuple[int, int], ...] = ()
    #: The DWARF reader for source lines: not yet opened (False), none (None), or open.
    _lines: SourceLines | bool | None = False

    def _section_of(self, address: int) -> int:
        """The index in :attr:`sections` of the one holding ``address``, -1 for none."""
        at = bisect.bisect_right(self.sections, (address, 1 << 64)) - 1
        return at if at >= 0 and address < self.sections[at][1] else -1

    def _in_its_section(self, address: int, symbol_start: int) -> bool:
        if not self.sections:
            return True
        section = self._section_of(address)
        return section >= 0 and section == self._section_of(symbol_start)

    def source(self, address: int) -> list[SourceFrame]:
        """The functions at link-time ``address`` with their source lines, innermost inlined
        function first (:meth:`pysframe.elf.dwarf_lines.SourceLines.frames`), from the DWARF
        of the separate debug file, else of the file itself; empty without DWARF."""
        lines = self._source_lines()
        return [] if lines is None else lines.frames(address)

    def starts_line(self, address: int) -> bool:
        lines = self._source_lines()
        return lines is not None and lines.starts_line(address)

    def _source_lines(self) -> SourceLines | None:
        from ..elf.dwarf_lines import SourceLines, source_lines

        if self._lines is False:
            self._lines = None
            for candidate in (self.debug_file, self.path):
                if candidate is not None:
                    self._lines = source_lines(candidate, self.problems)
                    if self._lines is not None:
                        break
        return self._lines if isinstance(self._lines, SourceLines) else None

    def find(self, address: int) -> tuple[str, int] | None:
        """(mangled name, offset) of the function holding link-time ``address``: the first
        table's symbol, unless a later table's starts higher (see
        :func:`pysframe.elf.symbols.find_in_objfiles`)."""
        best: tuple[FunctionSymbols, int] | None = None
        for table in self.tables:
            index = table.find_index(address)
            if index >= 0 and (best is None or table.start_of(index) > best[0].start_of(best[1])):
                best = table, index
        if best is None or not self._in_its_section(address, best[0].start_of(best[1])):
            return None
        table, index = best
        return table.name_of(index), address - table.start_of(index)

    def find_many(self, addresses: Sequence[int] | np.ndarray) -> list[tuple[str, int] | None]:
        """:meth:`find` for many addresses at once (one numpy search per table)."""
        from ..elf.symbols import find_in_objfiles

        tables = self.tables
        out: list[tuple[str, int] | None] = []
        for address, (table, index) in zip(
            addresses, find_in_objfiles(tables, addresses), strict=True
        ):
            found = tables[table] if index >= 0 else None
            if found is None or not self._in_its_section(int(address), found.start_of(index)):
                out.append(None)
            else:
                out.append((found.name_of(index), int(address) - found.start_of(index)))
        return out

    def by_name(self, name: str) -> list[SymbolRecord]:
        """Symbols called ``name``, mangled or demangled (with or without the parameter list
        of a C++ function), from the first table that has one."""
        for table in self.tables:
            found = table.by_name(name)
            if not found:
                names = table.names
                mangled = [i for i, n in enumerate(names) if n.startswith(("_Z", "_R"))]
                texts = demangle_many(names[i] for i in mangled)
                found = [
                    table.symbol(index)
                    for index, text in zip(mangled, texts, strict=True)
                    if name in (text, bare_name(text))
                ]
            if found:
                return found
        return []


def _attempt(
    call: Callable[[], FunctionColumns | list[SymbolRecord]], problems: list[str]
) -> FunctionColumns | list[SymbolRecord]:
    """The symbols ``call`` reads; none when they cannot be read, the reason in ``problems``."""
    try:
        return call()
    except SFrameError as error:
        problems.append(str(error))
        return []


def symbols_of_image(
    image: ElfReader,
    debug_dirs: tuple[str, ...] = DEFAULT_DEBUG_DIRS,
    *,
    search: bool = True,
    link_path: str | None = None,
) -> ModuleSymbols:
    """The symbols of an open ELF image (``search``: also look for its separate debug file).
    ``link_path``: the file's name for the debuglink search when the image is read from
    elsewhere (``/proc/PID/map_files/...`` for a deleted file)."""
    # The readers of tables, imported when one is read (``perf`` reads its own, or the cache's).
    from ..elf.debuginfo import find_debug_file, minidebuginfo
    from ..elf.plt import plt_symbols
    from ..elf.symbols import FunctionSymbols, read_function_columns

    problems: list[str] = []
    sources: list[str] = []
    parts: list[FunctionColumns | list[SymbolRecord]] = []
    for table in (".symtab", ".dynsym"):
        found = _attempt(functools.partial(read_function_columns, image, table), problems)
        if len(found):
            sources.append(table)
            parts.append(found)
    # gdb's minimal symbols include BFD's NAME@plt.
    stubs = _attempt(functools.partial(plt_symbols, image), problems)
    if stubs:
        sources.append(".plt")
        parts.append(stubs)
    tables = [FunctionSymbols(*parts)]
    has_symtab = ".symtab" in sources
    debug_file = None
    if search:
        build_id, debuglink = _identity(image)
        debug = find_debug_file(link_path or image.path, build_id, debuglink, debug_dirs)
        problems += debug.rejected
        if debug.path is not None:
            path = debug.path
            try:
                with ElfReader.open(path) as opened:
                    found = read_function_columns(opened, ".symtab")
            except SFrameError as error:
                problems.append(str(error))
            else:
                debug_file = path
                sources.append(path)
                tables.append(FunctionSymbols(found))
                has_symtab = has_symtab or bool(len(found))
    if not has_symtab:
        # gdb reads MiniDebugInfo only for a file without .symtab (elf_symfile_read).
        try:
            mini = minidebuginfo(image)
            if mini is not None:
                with ElfReader.from_bytes(f"{image.path}:.gnu_debugdata", mini) as inner:
                    tables.append(FunctionSymbols(read_function_columns(inner, ".symtab")))
                sources.append(".gnu_debugdata")
        except SFrameError as error:
            problems.append(str(error))
    return ModuleSymbols(image.path, tables, sources, debug_file, problems, _sections(image))


def _sections(image: ElfReader) -> tuple[tuple[int, int], ...]:
    """(start, end) of the image's allocated sections, as gdb's find_pc_section sees them
    (.tbss takes no addresses of its own)."""
    ranges = {
        (s.address, s.address + s.size)
        for s in image.sections()
        if s.flags & SHF_ALLOC and s.size and not (s.flags & SHF_TLS and s.type == SHT_NOBITS)
    }
    return tuple(sorted(ranges))


def _identity(image: ElfReader) -> tuple[bytes | None, tuple[str, int] | None]:
    """The image's build ID and debuglink; None for either that a damaged file does not give."""
    try:
        build_id = image.build_id()
    except SFrameError:
        build_id = None
    try:
        debuglink = image.debuglink()
    except SFrameError:
        debuglink = None
    return build_id, debuglink


def symbols_of_file(
    path: str,
    debug_dirs: tuple[str, ...] = DEFAULT_DEBUG_DIRS,
    link_path: str | None = None,
) -> ModuleSymbols:
    """The symbols of the ELF file at ``path``; an unreadable file has none (its ``problems``
    say why).  ``link_path``: see :func:`symbols_of_image`.  The owner of a file's facts keeps
    them (:class:`pysframe.unwind.modules.ElfFacts`)."""
    try:
        with ElfReader.open(path) as image:
            return symbols_of_image(image, debug_dirs, link_path=link_path)
    except SFrameError as error:
        return ModuleSymbols(path, [], problems=[str(error)])


@dataclass(frozen=True, slots=True)
class SymbolOptions:
    """How frames are named: the debug directories searched, and whether names are
    demangled.  ``warnings``: a line for each name :meth:`name` left mangled for its size or
    time (:func:`pysframe.unwind.demangle.demangle_checked`), to warn with."""

    debug_dirs: tuple[str, ...] = DEFAULT_DEBUG_DIRS
    demangle: bool = True
    warnings: list[str] = field(default_factory=list, compare=False, repr=False)

    def name(self, mangled: str) -> str:
        if not self.demangle:
            return mangled
        text, why = demangle_checked(mangled)
        if why is not None and why not in self.warnings:
            self.warnings.append(why)
        return text

    def perf_names(self, stored: list[str]) -> list[str]:
        """Symbols' names as perf gives them from their stored names: demangled as perf
        demangles (:func:`pysframe.unwind.demangle.demangle_like_perf`) unless told not to."""
        if not self.demangle:
            return list(stored)
        out = []
        for name, text in zip(stored, demangle_like_perf_many(stored), strict=True):
            if text is None:
                why = left_mangled(name)
                if why is not None and why not in self.warnings:
                    self.warnings.append(why)
            out.append(name if text is None else text)
        return out


__all__ = [
    "DEFAULT_DEBUG_DIRS",
    "ModuleSymbols",
    "SourceFrame",
    "SymbolOptions",
    "symbols_of_file",
    "symbols_of_image",
]
