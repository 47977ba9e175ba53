"""The modules of a recording, found as perf finds them, with the SFrame each is unwound with.

A mapping in a recording (MMAP/MMAP2) names a file by its path as the recording machine saw it.
The file read for it is, in perf's order (util/dso.c, dso__read_binary_type_filename):

1. the build-ID cache: ``DEBUG_DIR/.build-id/XX/REST/elf`` (``perf record`` and ``perf
   buildid-cache`` copy each module there; ``DEBUG_DIR`` is ``~/.debug`` unless told);
2. the path under ``--symfs DIR``, when given;
3. the path itself.

The build ID the recording holds for the mapping (MMAP2 with a build ID, else the recording's
build-ID feature) must be the file's: a file with another build ID is passed over (it is not
the one that ran), and a module without a file that fits is kept, without SFrame, with the
reason.  Every file is opened through the one bounded input path (:mod:`pysframe.input`).

Each module is the unwinder's (:class:`pysframe.unwind.Module`): its own section where the
trust checks pass (:mod:`pysframe.sources.trust`), else SFrame generated from its CFI, kept in
the cache per build ID (:mod:`pysframe.sources.cache`).  The vDSO has no file: perf's cache
holds it (``DEBUG_DIR/[vdso]/BUILD-ID/vdso``), else this machine's own vDSO is used when its
build ID is the recorded one.

A module's symbols are the ones perf reads for it (:meth:`ModuleFinder.perf_symbols`), from
files perf chooses its own way (:mod:`pysframe.perf.symbols`), found once per name and build
ID; JIT code's (``/tmp/perf-PID.map``) from that map.
"""

from __future__ import annotations

import os

from ..dataclass import dataclass
from ..elf.reader import ElfReader
from ..errors import SFrameError
from ..sources.trust import Policy
from ..unwind import (
    VDSO_NAME,
    ElfFacts,
    ElfFiles,
    Mapping,
    Module,
    ModuleSymbols,
    SymbolOptions,
    load_bias,
    process_vdso_address,
    read_vdso_image,
)
from .symbols import (
    DsoFiles,
    SymbolSource,
    candidate_files,
    choose_files,
    is_perf_map,
    join_symfs,
    load_symbols_kept,
    perf_map_symbols,
)
from .symtab import PerfSymbols

#: perf's build-ID cache, unless told otherwise (perf's buildid.dir).
DEFAULT_DEBUG_DIR = "~/.debug"
#: Names of mappings that are no file.
VDSO = VDSO_NAME


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ModuleFile:
    """The file read for a module (None: none fits), and why none did."""

    path: str | None
    build_id: bytes | None
    problem: str | None = None


class ModuleFinder:
    """Finds and reads the files of a recording's modules, once per (path, build ID)."""

    def __init__(
        self,
        *,
        build_ids: dict[str, bytes] | None = None,
        debug_dir: str | None = DEFAULT_DEBUG_DIR,
        symfs: str | None = None,
        policy: Policy = Policy.AUTO,
        symbols: SymbolOptions | None = None,
    ) -> None:
        self.build_ids = build_ids or {}
        self.debug_dir = os.path.expanduser(debug_dir) if debug_dir else None
        self.symfs = symfs
        self.policy = policy
        self.symbol_options = symbols or SymbolOptions()
        self._files: dict[tuple[str, bytes | None], ModuleFile] = {}
        self._elf_files = ElfFiles()
        self._modules: dict[tuple[str, bytes | None, int], Module] = {}
        self._perf_symbols: dict[tuple[str, bytes | None], PerfSymbols | None] = {}
        self._dso_files: dict[tuple[str, bytes | None], DsoFiles] = {}
        #: Modules that had no SFrame of their own, and why not, for the statistics.
        self.problems: dict[str, str] = {}
        #: Symbol files that could not be read, one line each.
        self.symbol_problems: list[str] = []

    def module(
        self, path: str, start: int, end: int, pgoff: int, build_id: bytes | None
    ) -> Module | None:
        """The module for the mapping ``[start, end)`` of ``path`` from file offset ``pgoff``;
        None when the mapping is no ELF file (data, anonymous memory)."""
        if is_perf_map(path):  # JIT code: no ELF file, named from the map alone
            return Module(path, start, end, problem="JIT code, which has no SFrame")
        build_id = build_id or self.build_ids.get(path)
        found = self.file(path, build_id)
        if found.path is None:
            return Module(path, start, end, problem=found.problem, build_id=build_id)
        facts = self._read(found.path)
        if isinstance(facts, str):
            return Module(path, start, end, problem=facts, build_id=build_id)
        bias = load_bias(facts, [Mapping(start, end, pgoff, path)], code=True)
        if bias is None:
            why = f"{path} does not match its mapping"
            return Module(path, start, end, problem=why, build_id=build_id)
        key = (path, build_id, bias)
        module = self._modules.get(key)
        if module is None:
            module = Module(path, start, end, bias, facts, policy=self.policy,
                            symbols=self.symbol_options, build_id=build_id)  # fmt: skip
            self._modules[key] = module
            if module.origin not in ("section", "segment"):
                why = module.reason or "no .sframe section"
                if module.origin == "none":
                    why += ", and none could be generated from its CFI"
                self.problems.setdefault(path, why)
        return module

    def symbols(self, module: Module) -> ModuleSymbols | None:
        """The module's symbols and DWARF as ``stack`` reads them (for ``--inline``: the
        functions inlined at a PC), or None without a file."""
        try:
            return module.symbols()
        except SFrameError:
            return None

    def perf_symbols(self, module: Module) -> PerfSymbols | None:
        """The module's symbols as perf reads them (:mod:`pysframe.perf.symbols`: its own
        choice of files, found once per name and build ID), or None without any."""
        key = (module.path, module.build_id)
        if key not in self._perf_symbols:
            self._perf_symbols[key] = self._read_perf_symbols(module.path, module.build_id)
        return self._perf_symbols[key]

    def _read_perf_symbols(self, name: str, build_id: bytes | None) -> PerfSymbols | None:
        """dso__load for the dso ``name``: its build ID is the recorded one, else its file's
        own (the vDSO's: this machine's, perf's stand-in for it)."""
        if is_perf_map(name):  # read where it is, as perf 6.1 does (not under --symfs)
            try:
                return perf_map_symbols(name)
            except SFrameError as error:
                self.symbol_problems.append(str(error))
                return None
        key = (name, build_id)
        vdso = name == VDSO
        own = own_vdso_image() if vdso else None
        if build_id is None:
            build_id = _own_build_id(own) if vdso else _file_build_id(name, self.symfs)
        debug_dir = self.debug_dir
        sources = [
            SymbolSource(path)
            for path in candidate_files(name, build_id, debug_dir=debug_dir, symfs=self.symfs,
                                        vdso=vdso)
        ]  # fmt: skip
        if own is not None:
            sources.append(SymbolSource(VDSO, own))
        options = self.symbol_options
        files = self._dso_files[key] = choose_files(sources, build_id)
        try:
            return load_symbols_kept(
                files, build_id, options.perf_names,
                renamed="demangled" if options.demangle else "stored", warnings=options.warnings,
            )  # fmt: skip
        except SFrameError as error:
            self.symbol_problems.append(str(error))
            return None

    def srcline_file(self, module: Module) -> tuple[str | None, int]:
        """The file perf 6.1 asks addr2line about for the module's addresses (util/srcline.c
        dso__name: the one it read symbols from, else the module's own name; None for
        ``[...]`` names and ``/tmp/perf-`` maps) and the ``text_offset`` that makes its
        printed addresses link-time ones (map__rip_2objdump: ``.text``'s sh_addr less
        sh_offset in the file it reads the program headers from, 0 without symbols)."""
        symbols = self.perf_symbols(module)
        files = self._dso_files.get((module.path, module.build_id))
        path: str | None = module.path
        if files is not None and files.symtab is not None:
            path = files.symtab.path
        if path is not None and path.startswith(("[", "/tmp/perf-")):
            path = None
        text_offset = 0
        if symbols is not None and files is not None and files.runtime is not None:
            try:
                with files.runtime.open() as image:
                    text = image.section(".text")
            except SFrameError:
                text = None
            text_offset = (text.address - text.offset) if text is not None else 0
        return (path, text_offset)

    # -- finding files ----------------------------------------------------------------------------
    def file(self, path: str, build_id: bytes | None) -> ModuleFile:
        """The file to read for ``path`` with ``build_id`` (see the module's docstring)."""
        key = (path, build_id)
        if key not in self._files:
            self._files[key] = self._find(path, build_id)
        return self._files[key]

    def _find(self, path: str, build_id: bytes | None) -> ModuleFile:
        candidates: list[str] = []
        if build_id and self.debug_dir is not None:
            hexed = build_id.hex()
            if path == VDSO:
                candidates.append(os.path.join(self.debug_dir, VDSO, hexed, "vdso"))
            elf = os.path.join(self.debug_dir, ".build-id", hexed[:2], hexed[2:], "elf")
            candidates.append(elf)
        if path == VDSO:
            own = _own_vdso()
            if own is not None:
                candidates.append(own)
        elif path.startswith("/"):
            if self.symfs:
                candidates.append(os.path.join(self.symfs, path.lstrip("/")))
            candidates.append(path)
        wrong: list[str] = []
        for candidate in candidates:
            facts = self._read(candidate)
            if isinstance(facts, str):
                continue
            if build_id and facts.build_id and facts.build_id != build_id:
                wrong.append(candidate)
                continue
            return ModuleFile(candidate, facts.build_id)
        if wrong:
            want = build_id.hex() if build_id else "?"
            why = f"{wrong[0]} is not the file recorded (build ID {want})"
            return ModuleFile(None, build_id, why)
        return ModuleFile(None, build_id, f"{path}: no file found")

    def _read(self, path: str) -> ElfFacts | str:
        """The facts of the ELF file at ``path``, or why it cannot be read."""
        try:
            if path.startswith(_OWN_VDSO_PREFIX):
                image = own_vdso_image()
                facts = None if image is None else self._elf_files.image(VDSO, image)
            else:
                facts = self._elf_files.facts(path)
        except (OSError, SFrameError) as error:
            return f"{path}: {getattr(error, 'strerror', None) or error}"
        return facts if facts is not None else f"{path}: not an ELF file"


#: The name this process's own vDSO image goes by among the candidates.
_OWN_VDSO_PREFIX = "/proc/self/[vdso]"


def _own_vdso() -> str | None:
    """This machine's vDSO, read from this process (a stand-in for a recording made on the
    same kernel: its build ID is then the recorded one)."""
    return _OWN_VDSO_PREFIX if os.path.exists("/proc/self/auxv") else None


def _file_build_id(name: str, symfs: str | None) -> bytes | None:
    """The build ID of the module's file (perf reads it when the recording gives none:
    dso__load), or None."""
    if not os.path.isfile(name):
        return None
    try:
        with ElfReader.open(join_symfs(symfs, name)) as image:
            return image.build_id_as_perf()
    except SFrameError:
        return None


def _own_build_id(image: bytes | None) -> bytes | None:
    if image is None:
        return None
    try:
        with ElfReader.from_bytes(VDSO, image) as elf:
            return elf.build_id_as_perf()
    except SFrameError:
        return None


def own_vdso_image() -> bytes | None:
    """This process's vDSO image (None where it cannot be read)."""
    address = process_vdso_address(os.getpid())
    if address is None:
        return None

    def read(at: int, size: int) -> bytes:
        with open("/proc/self/mem", "rb") as memory:
            memory.seek(at)
            return memory.read(size)

    return read_vdso_image(address, read)


__all__ = ["DEFAULT_DEBUG_DIR", "VDSO", "Module", "ModuleFile", "ModuleFinder"]
