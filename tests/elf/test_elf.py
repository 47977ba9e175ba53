"""pysframe.elf.reader: finding .sframe, applying relocations, file facts and errors."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from conftest import CORPUS
from elf_build import RawFunction, Sec, Seg, build_elf, fre_info, rel, rela, sframe_bytes, symtab
from pysframe.elf.layout import EM_386, EM_AARCH64, EM_S390, EM_X86_64, SHT_RELA, ElfHeader
from pysframe.elf.reader import ElfReader, iter_notes
from pysframe.elf.relocation import Relocation, apply_relocations, relocations_for
from pysframe.elf.symbols import read_function_symbols
from pysframe.errors import ElfError, InputError
from pysframe.format.constants import PT_GNU_SFRAME, SHT_GNU_SFRAME, Abi
from pysframe.sources import load_sframe

SHT_PROGBITS, SHT_SYMTAB, SHT_REL, SHT_STRTAB = 1, 2, 9, 3
SHF_ALLOC, SHF_EXECINSTR = 2, 4


# -- apply_relocations on hand-built cases -----------------------------------------------------


@pytest.mark.parametrize(
    ("machine", "rtype", "size", "pcrel"),
    [
        (EM_X86_64, 2, 4, True),  # R_X86_64_PC32
        (EM_X86_64, 24, 8, True),  # R_X86_64_PC64
        (EM_X86_64, 1, 8, False),  # R_X86_64_64
        (EM_X86_64, 10, 4, False),  # R_X86_64_32
        (EM_X86_64, 11, 4, False),  # R_X86_64_32S
        (EM_AARCH64, 261, 4, True),  # R_AARCH64_PREL32
        (EM_AARCH64, 260, 8, True),  # R_AARCH64_PREL64
        (EM_AARCH64, 257, 8, False),  # R_AARCH64_ABS64
        (EM_AARCH64, 258, 4, False),  # R_AARCH64_ABS32
        (EM_S390, 5, 4, True),  # R_390_PC32
        (EM_S390, 23, 8, True),  # R_390_PC64
        (EM_S390, 22, 8, False),  # R_390_64
        (EM_S390, 4, 4, False),  # R_390_32
        (EM_386, 2, 4, True),  # R_386_PC32
        (EM_386, 1, 4, False),  # R_386_32
    ],
)
@pytest.mark.parametrize("big_endian", [False, True])
def test_rela_kinds(machine: int, rtype: int, size: int, pcrel: bool, big_endian: bool) -> None:
    """S + A - P (PC-relative) or S + A, stored in the field's size and the file's order."""
    data = bytes(range(32))
    reloc = Relocation(offset=8, type=rtype, symbol_value=0x40, addend=0x10)
    out = apply_relocations(data, [reloc], machine, big_endian, section_address=0x1000)
    expected = 0x40 + 0x10 - (0x1008 if pcrel else 0)
    fmt = (">" if big_endian else "<") + ("Q" if size == 8 else "I")
    assert struct.unpack_from(fmt, out, 8)[0] == expected % (1 << (8 * size))
    assert out[:8] == data[:8] and out[8 + size :] == data[8 + size :]


def test_rel_takes_the_addend_from_the_field() -> None:
    data = struct.pack("<iI", -4, 0xAAAAAAAA)
    out = apply_relocations(data, [Relocation(0, 2, symbol_value=0x100)], EM_X86_64, False, 0)
    assert struct.unpack("<iI", out) == (0x100 - 4 - 0, 0xAAAAAAAA)


def test_pc32_result_is_truncated_and_reads_back_negative() -> None:
    """A V2 start field at offset 28 with S + A = 0 holds -28, as objdump 2.47 shows it."""
    data = bytes(32)
    out = apply_relocations(data, [Relocation(28, 2, 0, 0)], EM_X86_64, False, 0)
    assert struct.unpack_from("<i", out, 28)[0] == -28


def test_none_relocation_is_skipped() -> None:
    assert apply_relocations(b"\x01" * 8, [Relocation(0, 0, 5, 5)], EM_X86_64, False) == b"\x01" * 8


def test_unsupported_relocation_type_is_an_error() -> None:
    with pytest.raises(ElfError, match=r"relocation type 4 .* is not supported"):
        apply_relocations(bytes(8), [Relocation(0, 4, 0, 0)], EM_X86_64, False)


def test_relocation_past_the_end_is_an_error() -> None:
    with pytest.raises(ElfError, match="runs past the section end"):
        apply_relocations(bytes(8), [Relocation(6, 2, 0, 0)], EM_X86_64, False)


# -- relocatable objects built here ------------------------------------------------------------


def _object_with_relocations(tmp_path: Path, use_rel: bool, big_endian: bool = False) -> Path:
    """.text (index 1), .sframe (2), .symtab (3), .strtab (4), .rel[a].sframe (5).

    Two V2 FDEs whose start fields get R_X86_64_PC32 against section symbol .text + 0x10 / +0x30
    (PCREL flag set, so the dump adds the field offset back).
    """
    functions = [
        RawFunction(0, 16, rows=[(0, fre_info(1), (8,))]),
        RawFunction(0, 32, rows=[(0, fre_info(1), (8,))]),
    ]
    data = bytearray(sframe_bytes(2, 3, functions, flags=4, fixed_ra=-8))
    if use_rel:  # implicit addends live in the fields
        struct.pack_into("<i", data, 28, 0x10)
        struct.pack_into("<i", data, 48, 0x30)
        relocs = rel([(28, 1, 2), (48, 1, 2)])
    else:
        relocs = rela([(28, 1, 2, 0x10), (48, 1, 2, 0x30)])
    sections = [
        Sec(".text", SHT_PROGBITS, bytes(0x60), flags=SHF_ALLOC | SHF_EXECINSTR),
        Sec(".sframe", SHT_PROGBITS, bytes(data), flags=SHF_ALLOC),
        Sec(".symtab", SHT_SYMTAB, symtab([(3, 1, 0, 0)]), link=4, info=1, entsize=24),
        Sec(".strtab", SHT_STRTAB, b"\0", align=1),
        Sec(
            ".rel.sframe" if use_rel else ".rela.sframe",
            SHT_REL if use_rel else SHT_RELA,
            relocs,
            link=3,
            info=2,
            entsize=16 if use_rel else 24,
        ),
    ]
    path = tmp_path / "obj.o"
    path.write_bytes(build_elf(sections))
    return path


@pytest.mark.parametrize("use_rel", [False, True])
def test_object_relocations_give_function_offsets(tmp_path: Path, use_rel: bool) -> None:
    path = _object_with_relocations(tmp_path, use_rel)
    with ElfReader.open(str(path)) as image:
        assert image.is_relocatable
        section = image.find_sframe()
        assert section is not None
        relocations = relocations_for(image, section)
        assert [(r.offset, r.type) for r in relocations] == [(28, 2), (48, 2)]
        sframe = load_sframe(image)
        assert [f.start for f in sframe] == [0x10, 0x30]
        assert [f.start_field for f in sframe] == [0x10 - 28, 0x30 - 48]
        raw = load_sframe(image, relocate=False)
        assert [f.start_field for f in raw] == ([0x10, 0x30] if use_rel else [0, 0])


def test_corpus_object_relocations_are_read() -> None:
    with ElfReader.open(str(CORPUS / "s390x/v3/frames.o")) as image:
        section = image.find_sframe()
        assert section is not None and section.type == SHT_GNU_SFRAME
        relocations = relocations_for(image, section)
        assert len(relocations) == 12
        assert {r.type for r in relocations} == {23}  # R_390_PC64
        assert relocations[0].symbol_section == 1  # the .text section symbol's: .text


# -- finding the section -----------------------------------------------------------------------


def _v3_section() -> bytes:
    function = RawFunction(0x1000 - 28, 16, rows=[(0, fre_info(1), (8,))])
    return sframe_bytes(3, 3, [function], flags=5, fixed_ra=-8)


def test_found_by_type_when_renamed(tmp_path: Path) -> None:
    path = tmp_path / "renamed"
    path.write_bytes(
        build_elf([Sec(".sfrm", SHT_GNU_SFRAME, _v3_section(), flags=SHF_ALLOC)], e_type=3)
    )
    with ElfReader.open(str(path)) as image:
        section = image.find_sframe()
        assert section is not None and section.name == ".sfrm"
        assert image.find_sframe(".sframe") is None
        assert [f.start for f in load_sframe(image)] == [0x1000]


def test_found_through_pt_gnu_sframe_without_section_headers(tmp_path: Path) -> None:
    path = tmp_path / "stripped"
    sections = [Sec(".sframe", SHT_GNU_SFRAME, _v3_section(), flags=SHF_ALLOC, addr=0x4000)]
    segments = [Seg(1, ".sframe"), Seg(PT_GNU_SFRAME, ".sframe")]
    path.write_bytes(build_elf(sections, e_type=3, segments=segments, strip_section_headers=True))
    with ElfReader.open(str(path)) as image:
        assert image.sections() == []
        section = image.find_sframe()
        assert section is not None
        assert (section.name, section.address, section.index) == (".sframe", 0x4000, -1)
        sframe = load_sframe(image)
        assert [f.start for f in sframe] == [0x4000 + 0x1000]
        assert len(image.load_segments()) == 1


def test_no_sframe_section(tmp_path: Path) -> None:
    path = tmp_path / "plain"
    path.write_bytes(build_elf([Sec(".text", SHT_PROGBITS, b"\xc3", flags=6)]))
    with ElfReader.open(str(path)) as image:
        assert image.find_sframe() is None
        with pytest.raises(ElfError, match=r"no \.sframe section"):
            load_sframe(image)


# -- file facts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "file_format", "abi"),
    [
        ("x86_64/v3/frames", "elf64-x86-64", Abi.AMD64_ENDIAN_LITTLE),
        ("aarch64/v3/frames", "elf64-littleaarch64", Abi.AARCH64_ENDIAN_LITTLE),
        ("aarch64/v3/nolibc-be.o", "elf64-bigaarch64", Abi.AARCH64_ENDIAN_BIG),
        ("s390x/v3/frames-nopie", "elf64-s390", Abi.S390X_ENDIAN_BIG),
    ],
)
def test_file_format_and_abi(name: str, file_format: str, abi: Abi) -> None:
    with ElfReader.open(str(CORPUS / name)) as image:
        assert image.file_format == file_format
        assert image.abi is abi


def test_32_bit_format_names(tmp_path: Path) -> None:
    """objdump's BFD names for 32-bit files (elf32-i386, elf32-x86-64 for x32, elf32-s390)."""
    # Patch the class byte of a 64-bit header: only the header fields are read for these.
    for machine, name in (
        (EM_386, "elf32-i386"),
        (EM_X86_64, "elf32-x86-64"),
        (EM_S390, "elf32-s390"),
    ):
        ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
        header = ident + struct.pack(
            "<HHIIIIIHHHHHH", 1, machine, 1, 0, 0, 0, 0, 52, 32, 0, 40, 0, 0
        )
        path = tmp_path / name
        path.write_bytes(header)
        with ElfReader.open(str(path)) as image:
            assert image.elfclass == 32
            assert image.file_format == name
            assert image.abi is None


def test_symbols_and_build_id() -> None:
    with ElfReader.open(str(CORPUS / "x86_64/v3/frames")) as image:
        symbols = read_function_symbols(image, ".symtab")
        assert "main" in {s.name for s in symbols}
        build_id = image.build_id()
        assert build_id is not None and len(build_id) == 20
        assert image.interpreter() is not None
        assert any(seg.type == PT_GNU_SFRAME for seg in image.segments())


# -- errors ------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    # A file that cannot be opened is an input error, whatever it was to be read as.
    with pytest.raises(InputError, match="No such file") as raised:
        ElfReader.open(str(tmp_path / "nothing"))
    assert raised.value.path == str(tmp_path / "nothing")


def test_not_elf(tmp_path: Path) -> None:
    path = tmp_path / "text"
    path.write_text("hello\n")
    with pytest.raises(ElfError, match="not an ELF file"):
        ElfReader.open(str(path))


def test_truncated_elf(tmp_path: Path) -> None:
    path = tmp_path / "short"
    path.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(20))
    with pytest.raises(ElfError, match="unreadable ELF file"):
        ElfReader.open(str(path))


def test_section_past_end_of_file(tmp_path: Path) -> None:
    path = tmp_path / "cut"
    data = build_elf([Sec(".sframe", SHT_PROGBITS, _v3_section(), flags=SHF_ALLOC)])
    # Point the .sframe header's sh_offset far past the end.
    shoff = struct.unpack_from("<Q", data, 40)[0]
    patched = bytearray(data)
    struct.pack_into("<Q", patched, shoff + 64 + 24, len(data) + 0x1000)
    path.write_bytes(bytes(patched))
    with ElfReader.open(str(path)) as image, pytest.raises(ElfError):
        load_sframe(image)


# -- the layouts (elf.layout) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["x86_64/v3/app", "x86_64/v2/lib.so", "s390x/v3/frames-nopie", "aarch64/v3/frames.o"]
)
def test_headers_pack_back_to_the_files_bytes(name: str) -> None:
    """The ELF header, program headers and section headers as read, packed with the layouts
    of elf.layout, are the file's own bytes (little- and big-endian files)."""
    data = (CORPUS / name).read_bytes()
    with ElfReader.open(str(CORPUS / name)) as image:
        header = image.header
        assert header.pack() == data[: header.ehsize]
        assert (header.bits, header.big_endian) == (image.elfclass, image.big_endian)
        phdrs = b"".join(s.pack(header.bits, header.big_endian) for s in image.segments())
        assert phdrs == data[header.phoff : header.phoff + header.phnum * header.phentsize]
        shdrs = b"".join(s.pack(header.bits, header.big_endian) for s in image.sections())
        assert shdrs == data[header.shoff : header.shoff + header.shnum * header.shentsize]
        assert header.tables_end == max(
            header.ehsize,
            header.phoff + header.phnum * header.phentsize,
            header.shoff + header.shnum * header.shentsize,
        )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x7fELQ" + bytes(60), "not an ELF file"),
        (b"\x7fELF\x02", "ELF header is truncated"),
        (b"\x7fELF\x03\x01" + bytes(58), "unknown ELF class 3 or data encoding 1"),
        (b"\x7fELF\x02\x01" + bytes(40), "ELF header is truncated"),
    ],
)
def test_elf_header_errors(data: bytes, message: str) -> None:
    with pytest.raises(ElfError, match=message):
        ElfHeader.unpack(data)


def test_notes_running_past_their_data_are_errors() -> None:
    note = struct.pack("<III", 4, 4, 3) + b"GNU\0" + b"\1\2\3\4"
    assert list(iter_notes(note + note, False)) == [(b"GNU", 3, b"\1\2\3\4")] * 2
    with pytest.raises(ElfError, match="the note at byte 0x14 runs past the end of its 35"):
        list(iter_notes(note + note[:-5], False))
