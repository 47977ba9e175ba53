"""A module's symbols as perf 6.1 reads them, and the symbol it names an address with.

``perf script`` names a user frame from the symbols of its module (a "dso"), loaded once
(util/symbol.c ``dso__load``).  This module follows perf 6.1's rules, checked against the
machine's perf (tests/perf/test_perf_names.py):

Which files (``dso__load``, util/dso.c ``dso__read_binary_type_filename``).  The candidates,
in ``binary_type_symtab`` order: the file its ``.gnu_debuglink`` names (in the current
directory, the module's directory, its ``.debug/``, ``/usr/lib/debug/<its directory>``; no
CRC check); the build-ID cache (``DEBUG_DIR/.build-id/xx/rest/elf``, ``vdso`` for the vDSO,
then ``.../debug``); ``/usr/lib/debug/PATH.debug``; ``/usr/lib/debug/PATH``;
``/usr/lib/debug/.build-id/xx/rest.debug``; the path itself (under ``--symfs``); then
``/usr/lib/debug/DIR/.debug/NAME`` and ``/usr/lib/debug/lib/...`` for ``/usr/lib/...``.
Each must be a regular ELF file with the module's build ID (the recorded one, else the
file's own) when it has one (``symsrc__init``).  The symbols come from the first with a
``.symtab`` (``syms_ss``), the PLT and section and program headers from the first with a
``.dynsym`` (``runtime_ss``); one stands for the other when only one is found.

Which symbols (util/symbol-elf.c ``dso__load_sym``): the ``.symtab`` of ``syms_ss``, then its
``.dynsym``, each pass keeping, in table order, named defined functions (``STT_FUNC``,
``STT_GNU_IFUNC``) and objects, and ``STT_NOTYPE`` labels (not ``SHN_ABS``, not hidden or
internal) in a section whose name holds ``text`` or ``data``; never a symbol of a section
without ``SHF_ALLOC``, nor an ``SHN_ABS`` one, nor an ARM/AArch64 mapping symbol (``$a``,
``$d``, ``$t``, ``$x``, alone or before a dot).  A section that is ``SHT_NOBITS`` in a debug
file is read from ``runtime_ss``.  Names are kept as stored (``memcpy@@GLIBC_2.14``) and
demangled as perf demangles them (:func:`pysframe.unwind.demangle.demangle_like_perf`).
Values become file offsets: less ``p_vaddr - p_offset`` of the ``PT_LOAD`` of
``runtime_ss`` that holds them, else ``sh_addr - sh_offset`` of their section.  A size of 0
leaves a symbol empty (``symbol__new``).

Fixups, after each pass (util/symbol.c): ``symbols__fixup_end`` (an empty symbol ends where
the next one starts; the last at the next page boundary after its start, plus a page), then
``symbols__fixup_duplicate`` (of the symbols of one address only the one
:func:`choose_best_symbol` prefers is kept).  Then ``dso__synthesize_plt_symbols``: one
``NAME@plt`` per relocation of ``.rela.plt`` (``.rel.plt``) linked to ``.dynsym`` of
``runtime_ss``, ``.plt``'s entry size apart from its file offset after a header of one
entry (AArch64: 32, then 16; ARM: 20, then 12), added with no fixup (an ``IRELATIVE``
relocation names its entry ``@plt``).

Lookup: :mod:`pysframe.perf.symtab` (perf's red-black tree, rebuilt where symbols overlap).

JIT code (util/map.c ``map__new``): an executable mapping of anonymous memory (``//anon``,
``/dev/zero...``, ``/anon_hugepage...``, or ``MAP_HUGETLB``) or of memory without a file
(``[heap]``, ``[stack...``, ``/SYSV...``) is the dso ``/tmp/perf-PID.map`` (PID: the
process's), mapped at its own addresses (``identity__map_ip``).  Its symbols are the lines
of that file (``dso__load_perf_map``), which JITs write: Python 3.12+ with ``-X perf``, Node
with ``--perf-basic-prof``, the JVM with perf-map-agent, LuaJIT.  perf 6.1 reads the file
where it is, on the machine perf runs on: neither under ``--symfs`` nor in the build-ID
cache (``perf record`` copies no map there); :func:`perf_map_symbols` does the same.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from ..dataclass import dataclass
from ..elf.layout import (
    EM_AARCH64,
    EM_ARM,
    PT_LOAD,
    SHF_ALLOC,
    SHN_ABS,
    SHN_UNDEF,
    SHT_DYNSYM,
    SHT_NOBITS,
    SHT_REL,
    SHT_RELA,
    SHT_SYMTAB,
    STT_FUNC,
    STT_GNU_IFUNC,
)
from ..elf.reader import ElfReader, ElfSection
from ..errors import SFrameError
from .symtab import STB_GLOBAL, PerfSymbols, SymbolSet

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..elf.symbols import SymbolEntries

#: ELF symbol types and visibilities perf tells apart (gABI).
STT_NOTYPE, STT_OBJECT = 0, 1
STV_INTERNAL, STV_HIDDEN = 1, 2
_MASK = (1 << 64) - 1
#: symbol__new's name buffer for PLT entries (sympltname[1024]).
_PLT_NAME_BYTES = 1023
#: perf's debug directory and the places of dso__read_binary_type_filename.
USR_LIB_DEBUG = "/usr/lib/debug"


# -- reading a dso's files as perf reads them ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class SymbolSource:
    """A file a dso's symbols may come from: its name, and its bytes when it is no file
    (this machine's vDSO)."""

    path: str
    data: bytes | None = None

    def open(self) -> ElfReader:
        if self.data is not None:
            return ElfReader.from_bytes(self.path, self.data)
        return ElfReader.open(self.path)


def _regular_file(path: str) -> bool:
    """is_regular_file (util/util.c): stat (following links) says a regular file."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def join_symfs(symfs: str | None, path: str) -> str:
    """__symbol__join_symfs (path__join): ``--symfs`` before a path, a ``/`` between them
    when neither has one."""
    if not symfs:
        return path
    between = "" if symfs.endswith("/") or path.startswith("/") else "/"
    return f"{symfs}{between}{path}"


def candidate_files(
    name: str,
    build_id: bytes | None,
    *,
    debug_dir: str | None,
    symfs: str | None = None,
    vdso: bool = False,
    cwd: str | None = None,
) -> list[str]:
    """The files dso__load tries for the dso ``name`` with ``build_id``, in
    ``binary_type_symtab`` order (dso__read_binary_type_filename), those that exist as
    regular files."""
    out: list[str] = []
    path = join_symfs(symfs, name)
    # DSO_BINARY_TYPE__DEBUGLINK: the first of its places that is a regular file.
    if _regular_file(path):
        link = _debuglink(path)
        if link:
            directory = path[: path.rfind("/")] if "/" in path else ""
            for place in (
                os.path.join(cwd or os.getcwd(), link),
                f"{directory}/{link}",
                f"{directory}/.debug/{link}",
                f"{USR_LIB_DEBUG}{directory}/{link}",
            ):
                if _regular_file(place):
                    out.append(place)
                    break
    if build_id and debug_dir:
        # DSO_BINARY_TYPE__BUILD_ID_CACHE and __BUILD_ID_CACHE_DEBUGINFO (build_id_cache__
        # linkname, build_id_cache__basename): an old-style cache links the file itself.
        hexed = build_id.hex()
        link = os.path.join(os.path.expanduser(debug_dir), ".build-id", hexed[:2], hexed[2:])
        if _regular_file(link):
            out += [link, link]
        else:
            out += [f"{link}/{'vdso' if vdso else 'elf'}", f"{link}/{'vdso' if vdso else 'debug'}"]
    root = join_symfs(symfs, USR_LIB_DEBUG)
    out += [f"{root}{name}.debug", f"{root}{name}"]  # FEDORA_, UBUNTU_DEBUGINFO
    if build_id:  # BUILDID_DEBUGINFO
        out.append(f"{root}/.build-id/{build_id.hex()[:2]}/{build_id.hex()[2:]}.debug")
    out.append(path)  # SYSTEM_PATH_DSO
    slash = name.rfind("/")
    if slash >= 0:  # OPENEMBEDDED_DEBUGINFO
        out.append(join_symfs(symfs, f"{name[: slash + 1]}.debug{name[slash:]}"))
    if name.startswith("/usr/lib/"):  # MIXEDUP_UBUNTU_DEBUGINFO
        out.append(f"{root}{name[4:]}")
    return [candidate for candidate in out if _regular_file(candidate)]


def _debuglink(path: str) -> str | None:
    """The file name ``.gnu_debuglink`` of the ELF file at ``path`` gives (perf reads the
    name only: filename__read_debuglink)."""
    try:
        with ElfReader.open(path) as image:
            found = image.debuglink()
    except SFrameError:
        return None
    return found[0] if found else None


def same_build_id(recorded: bytes, found: bytes) -> bool:
    """dso__build_id_equal: equal, or the recorded one is the found one padded with zeros
    to 20 bytes."""
    if len(recorded) == 20 and len(recorded) > len(found):
        return recorded[: len(found)] == found and not recorded[len(found) :].strip(b"\0")
    return recorded == found


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DsoFiles:
    """Where perf reads a dso's symbols: ``symbols`` (syms_ss, the first candidate with a
    ``.symtab``) and ``runtime`` (runtime_ss, the first with a ``.dynsym``); each stands for
    the other when it alone is found; None when neither is."""

    symbols: SymbolSource | None
    runtime: SymbolSource | None
    #: The first candidate with a ``.symtab`` (perf's ``dso->symsrc_filename``, the file
    #: util/srcline.c gives addr2line), None when none has one.
    symtab: SymbolSource | None = None


def choose_files(sources: Iterable[SymbolSource], build_id: bytes | None) -> DsoFiles:
    """dso__load's choice among its candidates (symsrc__init rejects a file that is no ELF
    file, or whose build ID is not ``build_id``)."""
    symbols: SymbolSource | None = None
    runtime: SymbolSource | None = None
    for source in sources:
        try:
            with source.open() as image:
                if build_id is not None:
                    found = image.build_id_as_perf()
                    if not found or not same_build_id(build_id, found):
                        continue
                has_symtab = _table_type(image, ".symtab") == SHT_SYMTAB
                has_dynsym = _table_type(image, ".dynsym") == SHT_DYNSYM
        except SFrameError:  # unreadable: symsrc__init fails, the next candidate is tried
            continue
        if symbols is None and has_symtab:
            symbols = source
        if runtime is None and has_dynsym:
            runtime = source
        if symbols is not None and runtime is not None:
            break
    return DsoFiles(symbols or runtime, runtime or symbols, symbols)


def _table_type(image: ElfReader, name: str) -> int | None:
    section = image.section(name)
    return section.type if section is not None else None


# -- dso__load_sym and dso__synthesize_plt_symbols ----------------------------------------------


def load_symbols(
    files: DsoFiles, rename: Callable[[list[str]], list[str]] | None = None
) -> PerfSymbols | None:
    """The symbols perf loads from ``files`` (dso__load_sym, then dso__synthesize_plt_symbols
    when any were found); None without files.  ElfError when a file cannot be read."""
    from ..elf.symbols import read_symbol_entries  # not when the table is kept in the cache

    if files.symbols is None or files.runtime is None:
        return None
    symbols = SymbolSet(rename)
    with files.symbols.open() as syms, files.runtime.open() as runtime:
        total, failed = 0, False
        for table in (".symtab", ".dynsym"):
            wanted = SHT_SYMTAB if table == ".symtab" else SHT_DYNSYM
            if _table_type(syms, table) != wanted:
                continue
            entries = read_symbol_entries(syms, table)
            if entries is None:
                continue
            added = _load_pass(symbols, entries, syms, runtime)
            if added is None:  # a symbol of a section that is not there: perf gives up
                failed = True
                break
            if added:
                symbols.fix()
            total += added
        if total > 0 and not failed:
            _add_plt(symbols, runtime, rename)
    return symbols.table()


#: The code that makes a dso's table from its files (a kept table names its digest).
TABLE_CODE = (
    "perf/symbols.py", "perf/symtab.py", "elf/symbols.py", "elf/relocation.py", "elf/reader.py",
    "elf/layout.py", "unwind/demangle.py", "unwind/symbolize.py", "names.py",
)  # fmt: skip
#: The sections load_symbols reads, besides the headers and the string tables they link.
_TABLE_INPUTS = (".symtab", ".dynsym", ".rela.plt", ".rel.plt", ".plt")


def source_digest(source: SymbolSource) -> str:
    """A digest of what :func:`load_symbols` reads of ``source``: its headers, the symbol
    tables and their strings, the PLT and its relocations (ElfReader.content_digest).
    ElfError when they cannot be read."""
    with source.open() as image:
        names = set(_TABLE_INPUTS) | image.linked_names((".symtab", ".dynsym"))
        return image.content_digest(names)


def load_symbols_kept(
    files: DsoFiles,
    build_id: bytes | None,
    rename: Callable[[list[str]], list[str]] | None = None,
    *,
    renamed: str = "",
    warnings: list[str] | None = None,
) -> PerfSymbols | None:
    """:func:`load_symbols`, kept in the cache (:mod:`pysframe.sources.cache`) under the
    dso's ``build_id``, bound to digests of the files read (:func:`source_digest`), the
    code's and ``renamed`` (what ``rename`` does: demangled or not); a table whose loading
    added to ``warnings`` (a name left mangled) is not kept, so that the warning is given
    again."""
    if not build_id or files.symbols is None or files.runtime is None:
        return load_symbols(files, rename)
    from ..sources.cache import cache_directory, cached_tables, code_digest, keep_tables

    if cache_directory() is None:
        return load_symbols(files, rename)
    try:
        symbols = source_digest(files.symbols)
        # Mostly one file has both tables: read once.
        same = files.runtime == files.symbols
        runtime = symbols if same else source_digest(files.runtime)
        binding = {
            "code": code_digest(*TABLE_CODE),
            "symbols": symbols,
            "runtime": runtime,
            "renamed": renamed,
        }
    except SFrameError:
        return load_symbols(files, rename)
    parts = cached_tables(build_id.hex(), "perf-symbols", binding)
    if parts is not None:
        try:
            return PerfSymbols.from_parts(parts)
        except (ValueError, RecursionError):
            pass  # written by this code and checked: not expected; made again
    given = len(warnings) if warnings is not None else 0
    table = load_symbols(files, rename)
    if table is not None and (warnings is None or len(warnings) == given):
        keep_tables(build_id.hex(), "perf-symbols", binding, table.parts())
    return table


def _load_pass(
    symbols: SymbolSet, entries: SymbolEntries, syms: ElfReader, runtime: ElfReader
) -> int | None:
    """One dso__load_sym_internal pass over ``entries``: the symbols it adds (in table order),
    how many; None when a kept symbol names a section the file lacks (perf stops there,
    with what it added before and no fixups)."""
    named = entries.name_offsets != 0
    defined = entries.shndx != SHN_UNDEF
    types = entries.types
    function = ((types == STT_FUNC) | (types == STT_GNU_IFUNC)) & named & defined
    data = (types == STT_OBJECT) & named & defined
    label = (
        (types == STT_NOTYPE) & named & defined
        & (entries.visibility != STV_HIDDEN) & (entries.visibility != STV_INTERNAL)
    )  # fmt: skip
    kept = np.flatnonzero((function | data | label) & (entries.shndx != SHN_ABS))
    names = entries.names(kept)
    machine = syms.machine
    if machine in (EM_ARM, EM_AARCH64):
        mapping = np.array([_mapping_symbol(name) for name in names], dtype=bool)
        kept = kept[~mapping]
        names = [name for name, skip in zip(names, mapping.tolist(), strict=True) if not skip]
    if not len(kept):
        return 0
    # The section of each symbol: its own, or the runtime file's where a debug file has
    # only its header (SHT_NOBITS).
    headers = _section_table(syms.sections())
    runtime_headers = _section_table(runtime.sections())
    shndx = entries.shndx[kept]
    missing = shndx >= len(headers.alloc)
    index = np.where(missing, 0, shndx)
    alloc = headers.alloc[index] & ~missing
    nobits = headers.nobits[index] & alloc
    missing |= nobits & (shndx >= len(runtime_headers.alloc))
    bad = np.flatnonzero(missing)
    stop = int(bad[0]) if len(bad) else len(kept)
    own = np.where(nobits, 0, index)
    other = np.where(nobits & ~missing, index, 0)
    address = np.where(nobits, runtime_headers.address[other], headers.address[own])
    offset = np.where(nobits, runtime_headers.offset[other], headers.offset[own])
    text_or_data = np.where(nobits, runtime_headers.text_or_data[other],
                            headers.text_or_data[own])  # fmt: skip
    keep = alloc & (~label[kept] | text_or_data)
    keep[stop:] = False
    values = entries.values[kept]
    if machine == EM_ARM:  # a Thumb function's address has bit 0 set
        thumb = (types[kept] == STT_FUNC) & (values & np.uint64(1) != 0)
        values = values - thumb.astype(np.uint64)
    values = values - _file_deltas(runtime, values, address - offset)
    chosen = np.flatnonzero(keep)
    symbols.add(
        values[chosen], entries.sizes[kept][chosen], entries.binds[kept][chosen],
        [names[i] for i in chosen.tolist()],
    )  # fmt: skip
    return None if len(bad) else len(chosen)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Sections:
    """Section headers as arrays, by index: SHF_ALLOC, SHT_NOBITS, address, offset, and
    whether the name holds ``text`` or ``data`` (elf_sec__filter)."""

    alloc: npt.NDArray[np.bool_]
    nobits: npt.NDArray[np.bool_]
    address: npt.NDArray[np.uint64]
    offset: npt.NDArray[np.uint64]
    text_or_data: npt.NDArray[np.bool_]


def _section_table(sections: list[ElfSection]) -> _Sections:
    return _Sections(
        np.array([bool(s.flags & SHF_ALLOC) for s in sections], dtype=bool),
        np.array([s.type == SHT_NOBITS for s in sections], dtype=bool),
        np.array([s.address for s in sections], dtype=np.uint64),
        np.array([s.offset for s in sections], dtype=np.uint64),
        np.array([("text" in s.name or "data" in s.name) for s in sections], dtype=bool),
    )


def _file_deltas(
    runtime: ElfReader, values: npt.NDArray[np.uint64], section_deltas: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    """What each value loses to become a file offset: ``p_vaddr - p_offset`` of the first
    PT_LOAD of ``runtime`` holding it (elf_read_program_header), else its section's
    ``sh_addr - sh_offset``."""
    deltas = section_deltas.copy()
    unset = np.ones(len(values), dtype=bool)
    for segment in runtime.segments():
        size = max(segment.memsz, segment.filesz)
        if segment.type != PT_LOAD or not size:
            continue
        low = np.uint64(segment.vaddr)
        inside = unset & (values >= low) & (values - low < np.uint64(size))
        deltas[inside] = np.uint64((segment.vaddr - segment.offset) & _MASK)
        unset &= ~inside
    return deltas


def _mapping_symbol(name: str) -> bool:
    """An ARM or AArch64 mapping symbol: ``$a``, ``$d``, ``$t`` or ``$x``, alone or before
    a dot."""
    return len(name) >= 2 and name[0] == "$" and name[1] in "adtx" and name[2:3] in ("", ".")


#: PLT header and entry sizes perf knows by machine (dso__synthesize_plt_symbols); others:
#: .plt's sh_entsize for both.
_PLT_SIZES = {EM_ARM: (20, 12), EM_AARCH64: (32, 16), 2: (48, 12), 43: (128, 32)}


def _add_plt(
    symbols: SymbolSet, runtime: ElfReader, rename: Callable[[list[str]], list[str]] | None
) -> None:
    """dso__synthesize_plt_symbols (perf 6.1): ``NAME@plt`` for each relocation of
    ``.rela.plt`` (else ``.rel.plt``) when it is linked to ``.dynsym``: the entries of
    ``.plt`` one after another from its file offset, after a header."""
    from ..elf.relocation import relocation_symbols
    from ..elf.symbols import read_symbol_entries

    dynsym = runtime.section(".dynsym")
    if dynsym is None or dynsym.type != SHT_DYNSYM:
        return
    relocations = runtime.section(".rela.plt") or runtime.section(".rel.plt")
    plt = runtime.section(".plt")
    if relocations is None or relocations.link != dynsym.index or plt is None:
        return
    if relocations.type not in (SHT_RELA, SHT_REL) or not relocations.entsize:
        return
    entries = read_symbol_entries(runtime, ".dynsym")
    if entries is None or not entries.strings:
        return
    indexes = relocation_symbols(runtime, relocations)
    count = min(len(indexes), relocations.size // relocations.entsize)
    header, size = _PLT_SIZES.get(runtime.machine, (plt.entsize, plt.entsize))
    # An index past the table reads nothing: gelf_getsym fails and the entry takes the
    # previous one's name.
    valid = indexes[:count] < len(entries)
    picks = np.maximum.accumulate(np.where(valid, np.arange(count), -1))
    named_at = indexes[:count][np.maximum(picks, 0)].astype(np.int64)
    stored = entries.names(named_at)
    names = rename(stored) if rename is not None else stored
    texts = [
        f"{name if picks[at] >= 0 else ''}@plt".encode()[:_PLT_NAME_BYTES].decode("utf-8", "ignore")
        for at, name in enumerate(names)
    ]
    starts = plt.offset + header + size * np.arange(len(texts), dtype=np.uint64)
    symbols.add(starts, [size] * len(texts), [STB_GLOBAL] * len(texts), texts, named=True)


# -- JIT code: perf maps ---------------------------------------------------------------------------

#: mmap's PROT_EXEC and MAP_HUGETLB (asm-generic/mman-common.h).
PROT_EXEC, MAP_HUGETLB = 0x4, 0x40000
#: The largest perf map read (a JIT that runs long writes a line per function it compiles:
#: Node's maps reach hundreds of MiB), and the longest line kept (a longer one is skipped).
MAX_PERF_MAP_SIZE = 1 << 30
MAX_PERF_MAP_LINE = 1 << 16


def perf_map_dso(filename: str, pid: int, prot: int | None, flags: int = 0) -> str | None:
    """The dso perf 6.1 names a mapping of ``filename`` in process ``pid`` when it is JIT
    code (util/map.c map__new: an executable mapping of anonymous memory, is_anon_memory, or
    of memory without a file, is_no_dso_memory): ``/tmp/perf-PID.map``; None for any other
    mapping.  ``prot`` None (an MMAP record, which has none): executable, as perf takes such
    a record that is no data mapping."""
    anon = (
        filename == "//anon" or filename.startswith(("/dev/zero", "/anon_hugepage"))
        or bool(flags & MAP_HUGETLB)
    )  # fmt: skip
    no_dso = filename.startswith(("[stack", "/SYSV")) or filename == "[heap]"
    executable = prot is None or bool(prot & PROT_EXEC)
    if (anon or no_dso) and executable:
        return f"/tmp/perf-{pid}.map"
    return None


def is_perf_map(name: str) -> bool:
    """Whether the dso ``name`` is a perf map (dso__load: its name starts ``/tmp/perf-``)."""
    return name.startswith("/tmp/perf-")


def _hex_prefix(line: bytes, at: int) -> tuple[int, int]:
    """hex2u64 (util/util.c: strtoull base 16) of ``line[at:]``: the value and how many bytes
    it read (0: none).  strtoull skips leading white space, takes a sign and a ``0x``, and
    saturates at 2**64 - 1."""
    text = line[at:]
    stripped = text.lstrip(b" \t\n\v\f\r")
    skipped = len(text) - len(stripped)
    sign = 1
    if stripped[:1] in (b"+", b"-"):
        sign = -1 if stripped[:1] == b"-" else 1
        stripped, skipped = stripped[1:], skipped + 1
    body = stripped
    if body[:2].lower() == b"0x" and body[2:3] and body[2:3] in _HEX_DIGITS:
        body, skipped = body[2:], skipped + 2
    digits = len(body) - len(body.lstrip(_HEX_DIGITS))
    if not digits:
        return 0, 0
    value = min(int(body[:digits], 16), _MASK)
    return (value * sign) & _MASK, skipped + digits


_HEX_DIGITS = b"0123456789abcdefABCDEF"


def parse_perf_map(data: bytes) -> tuple[list[int], list[int], list[str]]:
    """The symbols of a perf map as dso__load_perf_map (util/symbol.c) reads them: per line
    (its last byte dropped, taken for the newline even where the last line has none),
    ``START SIZE NAME`` in hex, one byte after each number, the name the rest of the line;
    a line with nothing after a number is skipped, as is one longer than
    :data:`MAX_PERF_MAP_LINE` (perf takes any).  Names are decoded by
    :func:`pysframe.names.decode_name`."""
    from ..names import decode_name

    starts: list[int] = []
    sizes: list[int] = []
    names: list[str] = []
    pieces = data.split(b"\n")
    last = pieces.pop()  # what follows the last newline: a line only if not empty
    lines = [piece + b"\n" for piece in pieces] + ([last] if last else [])
    for raw in lines:
        if len(raw) > MAX_PERF_MAP_LINE:
            continue
        line = raw[:-1]  # line[--line_len] = '\0'
        size_of_line = len(line)
        start, used = _hex_prefix(line, 0)
        at = used + 1
        if at + 2 >= size_of_line:
            continue
        size, used = _hex_prefix(line, at)
        at += used + 1
        if at + 2 >= size_of_line:
            continue
        # The name is a C string: it ends at a NUL byte.
        name = line[at:].split(b"\0", 1)[0]
        starts.append(start)
        sizes.append(size)
        names.append(decode_name(name))
    return starts, sizes, names


def perf_map_symbols(path: str) -> PerfSymbols | None:
    """The symbols of the perf map at ``path`` (:func:`parse_perf_map`), each inserted in the
    order of the file and none fixed up, as dso__load does for a perf map; None when there is
    no such file (perf names the dso's frames ``[unknown]`` then).  InputError when it is no
    regular file, cannot be read, or is larger than :data:`MAX_PERF_MAP_SIZE`."""
    import errno

    from ..errors import InputError
    from ..input import open_input, read_up_to

    try:
        with open_input(path, max_size=MAX_PERF_MAP_SIZE) as file:
            data = read_up_to(file, MAX_PERF_MAP_SIZE + 1)
    except InputError as error:
        if error.errno == errno.ENOENT:
            return None
        raise
    except OSError as error:
        raise InputError(error.strerror or str(error), path=path, errno=error.errno) from None
    starts, sizes, names = parse_perf_map(data)
    table = SymbolSet()
    table.add(starts, sizes, [STB_GLOBAL] * len(starts), names, named=True)
    return table.table()


__all__ = [
    "MAX_PERF_MAP_SIZE",
    "DsoFiles",
    "SymbolSource",
    "candidate_files",
    "choose_files",
    "is_perf_map",
    "join_symfs",
    "load_symbols",
    "load_symbols_kept",
    "parse_perf_map",
    "perf_map_dso",
    "perf_map_symbols",
    "same_build_id",
    "source_digest",
]
