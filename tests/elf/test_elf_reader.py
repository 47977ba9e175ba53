"""The ELF reader (:class:`pysframe.elf.reader.ElfReader`) against pyelftools, read here as the
oracle: the same ELF header, section headers (names included), program headers, section
contents, build ID and interpreter, on real files (the corpus, this machine's libc, dynamic
linker and programs, the vDSO) and on damaged copies of a corpus program.

Where pyelftools refuses a file's headers, or the contents of a section pysframe reads entry by
entry (symbol tables, relocations, ``.dynamic``), the reader refuses them too.  Where they
differ, they may differ only so:

* contents of the sections whose structure pysframe does not read (hash tables, symbol
  versions, ...): pyelftools parses them and may refuse; the reader gives their bytes;
* a compressed section: the reader refuses one that claims more than its bound
  (:data:`~pysframe.elf.reader.MAX_EXPANSION` times its size), pyelftools inflates it all;
* a section that runs past the end of the file: the reader refuses it, pyelftools gives what
  the file holds of it.
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
import sys
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from elftools.common.exceptions import ELFError
from elftools.construct import ConstructError
from elftools.elf import enums
from elftools.elf.elffile import ELFFile

from conftest import DATA, corpus_files
from pysframe.elf.reader import ElfReader
from pysframe.errors import SFrameError
from test_damaged_sweep import PROGRAMS, _damaged

#: The section types pysframe reads entry by entry: SHT_SYMTAB, SHT_RELA, SHT_DYNAMIC, SHT_REL,
#: SHT_DYNSYM; plain contents: SHT_PROGBITS, SHT_STRTAB, SHT_NOTE, SHT_NOBITS, SHT_NULL.
READ_BY_BOTH = {0, 1, 2, 3, 4, 6, 7, 8, 9, 11}
SHF_COMPRESSED = 0x800

#: What pyelftools raises on a damaged file.
PYELFTOOLS_ERRORS = (
    ELFError, ConstructError, struct.error, OverflowError, ValueError, LookupError,
    AttributeError, EOFError, OSError, AssertionError,
)  # fmt: skip


def _numbers(*tables: dict[str, Any]) -> dict[str, int]:
    """pyelftools gives known enum values as names: name -> number."""
    out: dict[str, int] = {}
    for table in tables:
        out.update({k: v for k, v in table.items() if isinstance(v, int)})
    return out


SH_TYPES = _numbers(
    enums.ENUM_SH_TYPE_BASE, enums.ENUM_SH_TYPE_AMD64, enums.ENUM_SH_TYPE_AARCH64,
    enums.ENUM_SH_TYPE_ARM, enums.ENUM_SH_TYPE_MIPS, enums.ENUM_SH_TYPE_RISCV,
)  # fmt: skip
P_TYPES = _numbers(
    enums.ENUM_P_TYPE_BASE, enums.ENUM_P_TYPE_AARCH64, enums.ENUM_P_TYPE_ARM,
    enums.ENUM_P_TYPE_MIPS, enums.ENUM_P_TYPE_RISCV,
)  # fmt: skip
E_TYPES = _numbers(enums.ENUM_E_TYPE)
MACHINES = _numbers(enums.ENUM_E_MACHINE)


def _number(value: Any, names: dict[str, int]) -> int:
    return value if isinstance(value, int) else names[value]


def _outcome(call: Any, errors: tuple[type[BaseException], ...]) -> Any:
    try:
        return call()
    except errors:
        return "refused"


def _digest(data: Any) -> Any:
    return data if isinstance(data, str) else hashlib.sha256(bytes(data)).hexdigest()


def _ours(path: str, file: BinaryIO) -> Any:
    """What the reader gives about the file, or "refused"."""
    try:
        image = ElfReader(path, file)
        h = image.header
        found: dict[str, Any] = {
            "header": (h.type, h.machine, h.entry, h.phoff, h.shoff, h.flags, h.ehsize,
                       h.phentsize, h.phnum, h.shentsize, h.shnum, h.shstrndx),
            "sections": [
                (s.index, s.name, s.type, s.address, s.offset, s.size, s.flags, s.link, s.info,
                 s.entsize, s.name_offset, s.addralign)
                for s in image.sections()
            ],
        }  # fmt: skip
    except SFrameError:
        return "refused"
    errors = (SFrameError,)
    found["segments"] = _outcome(
        lambda: [
            (s.type, s.offset, s.vaddr, s.paddr, s.filesz, s.memsz, s.flags, s.align)
            for s in image.segments()
        ],
        errors,
    )
    found["build_id"] = _outcome(image.build_id, errors)
    found["interpreter"] = _outcome(image.interpreter, errors)
    for section in image.sections():
        found[f"data {section.index}"] = _digest(_outcome(section.data, errors))
    return found


def _reference(file: BinaryIO) -> Any:
    """What pyelftools gives about the file, or "refused"."""
    errors = PYELFTOOLS_ERRORS
    try:
        elf = ELFFile(file)
        h = elf.header
        headers = [elf._get_section_header(i) for i in range(elf.num_sections())]
        found: dict[str, Any] = {
            "header": (
                _number(h.e_type, E_TYPES), _number(h.e_machine, MACHINES), h.e_entry,
                h.e_phoff, h.e_shoff, h.e_flags, h.e_ehsize, h.e_phentsize, h.e_phnum,
                h.e_shentsize, h.e_shnum, h.e_shstrndx,
            ),
            "sections": [
                (i, elf._get_section_name(s), _number(s.sh_type, SH_TYPES), s.sh_addr,
                 s.sh_offset, s.sh_size, s.sh_flags, s.sh_link, s.sh_info, s.sh_entsize,
                 s.sh_name, s.sh_addralign)
                for i, s in enumerate(headers)
            ],
        }  # fmt: skip
    except errors:
        return "refused"

    def segments() -> list[tuple[int, ...]]:
        return [
            (_number(s.p_type, P_TYPES), s.p_offset, s.p_vaddr, s.p_paddr, s.p_filesz,
             s.p_memsz, s.p_flags, s.p_align)
            for s in map(elf._get_segment_header, range(elf.num_segments()))
        ]  # fmt: skip

    def build_id() -> bytes | None:
        # gABI notes: in .note.gnu.build-id, or in the PT_NOTE segments without sections.
        holders: list[Any] = []
        if elf.num_sections() > 1:
            names = [name for _, name, *_ in found["sections"]]
            if ".note.gnu.build-id" in names:  # the first section of that name
                note = elf.get_section(names.index(".note.gnu.build-id"))
                holders = [note] if note["sh_type"] == "SHT_NOTE" else []
        else:
            holders = [s for s in elf.iter_segments() if s["p_type"] == "PT_NOTE"]
        for holder in holders:
            try:
                for note in holder.iter_notes():
                    if note["n_name"] == "GNU" and note["n_type"] == "NT_GNU_BUILD_ID":
                        return bytes.fromhex(note["n_desc"])
            except errors:
                continue  # a note past its section's end ends the search there
        return None

    def interpreter() -> str | None:
        for segment in elf.iter_segments():
            if segment["p_type"] == "PT_INTERP":
                return str(segment.get_interp_name())
        return None

    found["segments"] = _outcome(segments, errors)
    found["build_id"] = _outcome(build_id, errors)
    found["interpreter"] = _outcome(interpreter, errors)
    for index, header in enumerate(headers):
        if _number(header.sh_type, SH_TYPES) == 8:  # SHT_NOBITS: no contents in the file
            found[f"data {index}"] = _digest(b"")
            continue
        contents = _outcome(lambda i=index: elf.get_section(i).data(), errors)
        found[f"data {index}"] = _digest(contents)
    return found


def _compare(name: str, data: bytes) -> None:
    """Checks what the reader gives against pyelftools."""
    _assert_alike(_ours(name, io.BytesIO(data)), _reference(io.BytesIO(data)), len(data))


def _assert_alike(ours: Any, reference: Any, file_size: int) -> None:
    """Checks ``ours`` against ``reference``; the number of sections compared."""
    if reference == "refused":
        assert ours == "refused", "pyelftools refuses the headers the reader reads"
        return
    assert ours != "refused", "the reader refused headers pyelftools reads"
    assert ours.keys() == reference.keys()
    sections = reference["sections"]
    for key, expected in reference.items():
        got = ours[key]
        if got == expected:
            continue
        if key in ("build_id", "interpreter", "segments") and got == "refused":
            # pyelftools reads a note or PT_INTERP that runs past the file as far as it goes.
            continue
        assert key.startswith("data "), (key, got, expected)
        _, _, kind, _, offset, size, flags, *_ = sections[int(key.split()[1])]
        if kind not in READ_BY_BOTH and got != "refused":
            continue  # pyelftools parses these contents and may refuse them: the reader reads
        if got == "refused" and (flags & SHF_COMPRESSED or offset + size > file_size):
            continue  # past the reader's bound on decompression, or past the file's end
        raise AssertionError((key, got, expected))


def _system_files() -> list[Path]:
    candidates = [
        Path("/usr/lib/x86_64-linux-gnu/libc.so.6"),
        Path("/lib64/ld-linux-x86-64.so.2"),
        Path("/usr/bin/sleep"),
        Path(sys.executable).resolve(),
    ]
    with open("/proc/self/maps") as maps:  # the libraries this Python runs (libpython...)
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip()
            if ".so" in path and path.startswith("/") and "python" in path:
                candidates.append(Path(path))
    return sorted({p for p in candidates if p.is_file()})


REAL = corpus_files() + sorted((DATA / "elf-damaged").iterdir()) + _system_files()


@pytest.mark.parametrize("path", REAL, ids=lambda p: "/".join(p.parts[-3:]))
def test_real_files_read_alike(path: Path) -> None:
    _compare(str(path), path.read_bytes())


def test_the_vdso_reads_alike() -> None:
    from pysframe.unwind.mappings import process_vdso_address
    from pysframe.unwind.vdso import read_vdso_image

    address = process_vdso_address(os.getpid())
    if address is None:
        pytest.skip("no vDSO in this process")

    def read(at: int, size: int) -> bytes:
        with open("/proc/self/mem", "rb") as memory:
            memory.seek(at)
            return memory.read(size)

    image = read_vdso_image(address, read)
    assert image is not None
    _compare("[vdso]", image)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_damaged_copies_read_alike(program: Path) -> None:
    copies = 0
    for label, data in _damaged(program):
        try:
            _compare("damaged", data)
        except AssertionError as error:
            raise AssertionError(f"{label}: {error}") from None
        copies += 1
    assert copies > 100


# -- the DWARF pyelftools parses: the sections as the reader reads them ----------------------


def _dwarf_info(path: str) -> Any:
    """pyelftools' ``DWARFInfo`` over the sections :class:`~pysframe.elf.dwarf_info.DebugSections`
    reads (decompressed, relocated in an object), pyelftools reading no ELF."""
    from elftools.dwarf.dwarfinfo import DebugSectionDescriptor, DwarfConfig, DWARFInfo

    from pysframe.elf.dwarf_info import DebugSections

    with ElfReader.open(path) as image:
        sections = DebugSections.read(image)
        config = DwarfConfig(little_endian=not image.big_endian, machine_arch=image.machine_name,
                             default_address_size=image.elfclass // 8)

    def descriptor(name: str) -> Any:
        data = sections.get(name)
        return DebugSectionDescriptor(io.BytesIO(data), name, 0, len(data), 0) if data else None

    arguments = ("info", "aranges", "abbrev", "str", "line", "frame", "loc", "ranges",
                 "pubtypes", "pubnames", "addr", "str_offsets", "line_str", "loclists",
                 "rnglists", "sup")
    return DWARFInfo(config=config, eh_frame_sec=None, gnu_debugaltlink_sec=None,
                     debug_types_sec=None,
                     **{f"debug_{name}_sec": descriptor(f".debug_{name}") for name in arguments})

DWARF_SOURCE = """static int triple(int x) { return x * 3; }
int twice_plus(int y) { return triple(y) + y; }
int main(void) { return twice_plus(2); }
"""


def _dwarf_view(dwarf: Any) -> list[Any]:
    """Every unit's DIEs (offset, tag, attribute values) and line rows, as pyelftools parses
    them from ``dwarf``."""
    view: list[Any] = []
    for unit in dwarf.iter_CUs():
        dies = [
            (die.offset, die.tag, sorted(
                (k, repr(a.value)) for k, a in die.attributes.items() if k != "DW_AT_producer"
            ))  # the producer names the options: -gz or none
            for die in unit.iter_DIEs()
        ]
        program = dwarf.line_program_for_CU(unit)
        rows = [
            (e.state.address, e.state.file, e.state.line, e.state.end_sequence)
            for e in program.get_entries()
            if e.state is not None
        ]
        view.append((unit.cu_offset, dies, rows))
    return view


@pytest.mark.parametrize(
    "options",
    [("-c",), ("-c", "-gz=zlib"), (), ("-gz=zlib",), ("-gz=zlib-gnu",)],
    ids=["object", "object-compressed", "program", "program-compressed", "program-zdebug"],
)
def test_dwarf_sections_are_those_pyelftools_reads(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """The DWARF sections as :class:`pysframe.elf.dwarf_info.DebugSections` reads them
    (decompressed, and relocated in an object), parsed by pyelftools, against pyelftools' own
    ``get_dwarf_info`` of the same code built without compression: the same units, DIEs and
    line rows.  (pyelftools reads no file whose
    small sections stayed ``.debug_*`` beside ``.zdebug_*`` ones, as gas leaves them.)"""
    import subprocess

    from conftest import require_program

    gcc = require_program("gcc")
    source = tmp_path / "lines.c"
    source.write_text(DWARF_SOURCE)
    plain = [option for option in options if not option.startswith("-gz")]
    suffix = ".o" if "-c" in options else ""
    built, reference_built = tmp_path / f"lines{suffix}", tmp_path / f"plain{suffix}"
    for output, flags in ((built, options), (reference_built, plain)):
        subprocess.run([gcc, "-g", "-O1", *flags, str(source), "-o", str(output)], check=True)
    ours = _dwarf_view(_dwarf_info(str(built)))
    with open(reference_built, "rb") as file:
        reference = _dwarf_view(ELFFile(file).get_dwarf_info(relocate_dwarf_sections=True))
    assert ours == reference
    names = {dict(attributes).get("DW_AT_name") for _, dies, _ in ours for *_, attributes in dies}
    assert {"b'triple'", "b'twice_plus'", "b'main'"} <= names
    if "-c" in options:  # relocated: the functions at their offsets in .text, not all at 0
        lows = {dict(a).get("DW_AT_low_pc") for _, dies, _ in ours for *_, a in dies} - {None}
        assert len(lows) >= 2
