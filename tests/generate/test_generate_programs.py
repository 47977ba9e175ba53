"""A section's functions written from their programs: each program read once, shared by FDEs
of every size, across the chunks programs are decoded in, several CIEs, functions of too many
rows; and the section writer against a plain one written here."""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

from pysframe.errors import EncodeError, SFrameError
from pysframe.format.constants import DEFAULT_FIXED_OFFSETS, SFRAME_MAGIC, Abi, Flags, Version
from pysframe.format.layout import (
    FDE_INFO_MASK,
    FDE_SIZE,
    FDE_START_BITS,
    HEADER_SIZE,
    fde_struct,
    header_struct,
    v3_attr_struct,
)
from pysframe.generate import GeneratedFunction, encode_functions, generate_from_eh_frame
from pysframe.generate.interpret import PROGRAMS
from test_cfi_units import sleb, uleb


def record(order: str, body: bytes) -> bytes:
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack(order + "I", len(body)) + body


def eh_frame(
    cies: list[bytes], fdes: list[tuple[int, int, int, bytes]], order: str = "<"
) -> bytes:
    """CIEs (x86-64: zR, alignments 1 and -8, RA column 16, these initial instructions) and
    FDEs (CIE number, pc, size, instructions) with pcrel|sdata4 pointers, at 0x1000."""
    data = bytearray()
    at = []
    for insns in cies:
        at.append(len(data))
        body = b"\0\0\0\0\x01zR\0" + uleb(1) + sleb(-8) + uleb(16) + b"\x01\x1b" + insns
        data += record(order, body)
    for cie, pc, size, program in fdes:
        here = len(data)
        head = struct.pack(order + "Iii", here + 4 - at[cie], pc - (0x1000 + here + 8), size)
        data += record(order, head + b"\0" + program)
    return bytes(data + b"\0\0\0\0")


X86_CIE = b"\x0c\x07\x08\x90\x01"  # CFA rsp+8, RA at CFA-8


def _cfa_offsets(data: bytes) -> dict[int, list[tuple[int, int]]]:
    result = generate_from_eh_frame(data, 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    return {
        f.start: [(r.start_offset, r.cfa.offset) for r in f.rows if r.cfa is not None]
        for f in result.section
    }


def test_programs_across_the_chunks_they_are_decoded_in() -> None:
    """More distinct programs than are decoded together (interpret.PROGRAMS), each shared by
    two FDEs of different sizes, advances of every size: each function's rows known by
    construction (the CIE's, then CFA offset 16 + n two bytes in, 8 again four bytes in)."""
    count = PROGRAMS + 321
    advances = [b"\x42", b"\x02\x02", b"\x03\x02\x00", b"\x04\x02\x00\x00\x00"]
    programs = [advances[n % 4] + b"\x0e" + uleb(16 + n) + b"\x42\x0e\x08" for n in range(count)]
    fdes = [(0, 0x10000 + 0x10 * n, 16, p) for n, p in enumerate(programs)]
    fdes += [(0, 0x100000 + 0x10 * n, 3, p) for n, p in enumerate(programs)]  # cut at 3
    got = _cfa_offsets(eh_frame([X86_CIE], fdes))
    for n in (0, 1, PROGRAMS - 1, PROGRAMS, count - 1):
        assert got[0x10000 + 0x10 * n] == [(0, 8), (2, 16 + n), (4, 8)]
        assert got[0x100000 + 0x10 * n] == [(0, 8), (2, 16 + n)]
    assert len(got) == 2 * count


def test_fdes_of_several_cies() -> None:
    """FDEs start from their own CIE's rules, whatever the others hold: a CIE that remembers
    a state, one of another CFA offset, one of another CFA register."""
    cies = [X86_CIE + b"\x0a", b"\x0c\x07\x10\x90\x01", b"\x0c\x06\x08\x90\x01"]
    program = b"\x41\x0e\x20"  # advance 1, CFA offset 32
    fdes = [(n % 3, 0x4000 + 0x100 * n, 0x40, program) for n in range(9)]
    result = generate_from_eh_frame(eh_frame(cies, fdes), 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    assert not result.skipped
    first = {
        f.start: (f.rows[0].cfa.reg, f.rows[0].cfa.offset)  # type: ignore[union-attr]
        for f in result.section
    }
    assert [first[0x4000 + 0x100 * n] for n in range(3)] == [(7, 8), (7, 16), (6, 8)]


def test_functions_of_too_many_rows() -> None:
    """One program of 70,000 rows (DW_CFA_advance_loc 1, then a CFA offset: a row at every
    byte), shared by functions whose ends cut it at several places: those left with at most
    65,535 rows are written, the others left out with gas' reason."""
    program = b"".join(b"\x41\x0e" + (b"\x10" if k % 2 else b"\x18") for k in range(70_000))
    sizes = [0x4000, 65_535, 65_536, 70_001, 1 << 20]
    fdes = [(0, 0x100000 * (k + 1), size, program) for k, size in enumerate(sizes)]
    result = generate_from_eh_frame(eh_frame([X86_CIE], fdes), 0x1000, Abi.AMD64_ENDIAN_LITTLE)
    assert [(f.size, f.num_fres) for f in result.functions] == [(0x4000, 0x4000), (65_535, 65_535)]
    assert [(s.size, s.reason) for s in result.skipped] == [
        (size, "no SFrame FDE emitted; Number of FREs exceeds UINT16_MAX") for size in sizes[2:]
    ]


def plain_section(
    functions: Sequence[GeneratedFunction], abi: Abi, version: Version, section_address: int
) -> bytes:
    """What encode_functions writes, one function at a time: FDEs sorted by start, SORTED
    (and PCREL in V3) starts, V3 attribute records before the FREs, V1 without rep_size; the
    first function (in FDE order) that a field cannot hold raises."""
    ordered = sorted(functions, key=lambda f: f.start)
    for f in ordered:
        if version is not Version.V3 and f.v3_only:
            raise EncodeError(
                f"function at {f.start:#x} needs SFrame V3 (FLEX FDE, signal frame or undefined RA)"
            )
    big = abi.big_endian
    v3 = version is Version.V3
    fde, attr = fde_struct(version, big), v3_attr_struct(big)
    bits = FDE_START_BITS[version]
    fdes, blob = bytearray(), bytearray()
    for index, f in enumerate(ordered):
        base = section_address + (HEADER_SIZE + FDE_SIZE[version] * index if v3 else 0)
        stored = f.start - base
        if not v3 and (f.info2 or f.info & ~FDE_INFO_MASK[version]):
            raise EncodeError(f"function {index}: FLEX FDEs and signal frames need SFrame V3")
        if not -(1 << (bits - 1)) <= stored < 1 << (bits - 1):
            where = "its FDE" if v3 else "the section"
            raise EncodeError(
                f"function {index} at {f.start:#x}: start is {stored:#x} bytes from {where}, "
                f"beyond the {bits}-bit field of SFrame V{int(version)}"
            )
        if v3:
            fdes += fde.pack(stored, f.size, len(blob))
            blob += attr.pack(f.num_fres, f.info, f.info2, f.rep_size)
        elif version is Version.V2:
            fdes += fde.pack(stored, f.size, len(blob), f.num_fres, f.info, f.rep_size, 0)
        else:
            fdes += fde.pack(stored, f.size, len(blob), f.num_fres, f.info)
        blob += f.fres
    flags = Flags.FDE_SORTED | (Flags.FDE_FUNC_START_PCREL if v3 else Flags.NONE)
    fixed_fp, fixed_ra = DEFAULT_FIXED_OFFSETS[abi]
    header = header_struct(big).pack(
        SFRAME_MAGIC, int(version), int(flags), int(abi), fixed_fp, fixed_ra, 0, len(ordered),
        sum(f.num_fres for f in ordered), len(blob), 0, len(fdes),
    )  # fmt: skip
    return header + bytes(fdes) + bytes(blob)


def test_the_section_writer_writes_what_a_plain_writer_writes() -> None:
    rng = random.Random(9)
    for _ in range(40):
        functions = [
            GeneratedFunction(
                rng.choice([0x1000, 0x400000, 0x7FFF0000, 0x1_0000_0000]) + rng.randrange(1 << 16),
                rng.randrange(1, 1 << 20),
                rng.randrange(256),
                rng.randrange(2),
                rng.choice([0, 8, 16]),
                rng.randrange(4),
                bytes(rng.randrange(256) for _ in range(rng.randrange(12))),
                rng.random() < 0.05,
            )
            for _ in range(rng.randint(1, 60))
        ]
        for abi in (Abi.AMD64_ENDIAN_LITTLE, Abi.S390X_ENDIAN_BIG):
            for version in (Version.V1, Version.V2, Version.V3):
                address = rng.choice([0, 0x2000, 0x7FFFF000])
                got = []
                for writer in (encode_functions, plain_section):
                    try:
                        got.append(writer(functions, abi, version, address))
                    except SFrameError as error:
                        got.append(f"error: {error}".encode())
                assert got[0] == got[1]


def test_set_loc_moves_to_an_address_of_each_function() -> None:
    """DW_CFA_set_loc gives an address (DWARF 5 6.4.2.1), here absolute (a CIE with 'zR' and
    DW_EH_PE_absptr, 8-byte pointers): one program, ``set_loc 0x4004; def_cfa_offset 16``,
    shared by a function at 0x4000 (its row at +4) and one at 0x3000 (0x4004 is past its
    end: no row)."""
    cie = b"\0\0\0\0\x01zR\0" + uleb(1) + sleb(-8) + uleb(16) + b"\x01\x00" + X86_CIE
    data = bytearray(record("<", cie))
    program = b"\x01" + struct.pack("<Q", 0x4004) + b"\x0e\x10"
    for pc in (0x4000, 0x3000):
        data += record("<", struct.pack("<IQQ", len(data) + 4, pc, 0x20) + b"\0" + program)
    assert _cfa_offsets(bytes(data + b"\0\0\0\0")) == {
        0x3000: [(0, 8)],
        0x4000: [(0, 8), (4, 16)],
    }
