"""The bulk (numpy) generation paths give exactly what the per-function paths give.

pysframe.generate.bulk translates the common CFA programs of a whole section at once and cfi
scans a well-formed .eh_frame with numpy; each falls back to the per-record / per-function code
for anything else (``bulk=False`` uses only that code).  These tests run both on random programs
(every handled instruction, and unhandled ones mixed in), random function sizes (rows cut at the
end, every FRE type), every ABI and byte order and every SFrame version, and on damaged
sections.  encode_functions, which writes sections through format.encode, is compared with a
plain writer that packs one function at a time.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

import numpy as np
import pytest

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
from pysframe.generate import (
    ABI_PARAMS,
    GeneratedFunction,
    Translation,
    bulk,
    bulk_section,
    cfi,
    encode_functions,
    generate_from_eh_frame,
    instructions_bulk,
    ops,
    translate_ops,
)
from pysframe.generate.ops import decode_instructions
from pysframe.generate.rows import FunctionEncoder

from test_cfi_units import cfa_instruction, sleb, uleb


def record(order: str, body: bytes) -> bytes:
    body += b"\0" * (-(len(body) + 4) % 8)
    return struct.pack(order + "I", len(body)) + body


def eh_frame(
    order: str, cie: tuple[str, int, int, int, bytes], fdes: list[tuple[int, int, bytes]]
) -> bytes:
    """A CIE (augmentation, code and data alignment, RA column, instructions) and FDEs
    (pc, size, instructions) with pcrel|sdata4 pointers, for a section at address 0x1000."""
    aug, caf, daf, ra, insns = cie
    body = b"\0\0\0\0\x01" + aug.encode() + b"\0" + uleb(caf) + sleb(daf) + uleb(ra)
    body += b"\x01\x1b" + insns
    data = bytearray(record(order, body))
    for pc, size, program in fdes:
        at = len(data)
        head = struct.pack(order + "Iii", at + 4, pc - (0x1000 + at + 8), size)
        data += record(order, head + b"\0" + program)
    return bytes(data + b"\0\0\0\0")


#: Per ABI: byte order, CIE, and instruction pieces (handled ones first, then others).
AMD64_PIECES = [
    b"\x41", b"\x44", b"\x40", b"\x02\x30", b"\x03\x00\x01", b"\x04\x10\x00\x00\x00",
    b"\x0e\x10", b"\x0e\x18", b"\x0e\x90\x01", b"\x0e\x80\x80\x04", b"\x0e\x08",
    b"\x86\x02", b"\x86\x81\x01", b"\x83\x03", b"\x90\x01", b"\x90\x02", b"\x0d\x06",
    b"\x0d\x07", b"\x0d\x03", b"\x0c\x07\x08", b"\x0c\x06\x10", b"\x0c\x05\x10", b"\x00",
    b"\xc6", b"\x0a", b"\x0b", b"\x10\x06\x02\x76\x00", b"\x07\x10", b"\x2e\x00",
]  # fmt: skip
A64_PIECES = [
    b"\x41", b"\x44", b"\x02\x30", b"\x0e\x10", b"\x0e\x20", b"\x0e\x90\x01", b"\x9d\x02",
    b"\x9e\x01", b"\x9d\x04", b"\x93\x03", b"\x0c\x1d\x10", b"\x0d\x1d", b"\x0d\x1f",
    b"\x00", b"\xdd", b"\xde", b"\x0a", b"\x0b", b"\x2d", b"\x07\x1e",
]  # fmt: skip
S390X_PIECES = [
    b"\x41", b"\x44", b"\x02\x30", b"\x0e\x08", b"\x0e\x10", b"\x0e\xa0\x01", b"\x0e\x0c",
    b"\x8b\x05", b"\x8e\x04", b"\x8f\x06", b"\x0c\x0b\x08", b"\x0d\x0f", b"\x00",
    b"\xcb", b"\x0a", b"\x0b",
]  # fmt: skip
CASES = [
    (Abi.AMD64_ENDIAN_LITTLE, "<", ("zR", 1, -8, 16, b"\x0c\x07\x08\x90\x01"), AMD64_PIECES),
    (Abi.AARCH64_ENDIAN_LITTLE, "<", ("zR", 4, -8, 30, b"\x0c\x1f\x00"), A64_PIECES),
    (Abi.AARCH64_ENDIAN_BIG, ">", ("zRB", 4, -8, 30, b"\x0c\x1f\x00"), A64_PIECES),
    (Abi.S390X_ENDIAN_BIG, ">", ("zR", 1, -8, 14, b"\x0c\x0f\x08"), S390X_PIECES),
]


def outcome(data: bytes, abi: Abi, version: int, bulk: bool = True) -> object:
    """What the generator makes of ``data``; ``bulk=False``: every function goes through the
    per-function code."""
    try:
        result = generate_from_eh_frame(
            data, 0x1000, abi, version=version, section_address=0x9000, bulk=bulk
        )
    except SFrameError as error:
        return f"error: {error}"
    return result.data, list(result.functions), result.skipped, result.functions_total


def random_program(rng: random.Random, pieces: list[bytes], handled_only: bool) -> bytes:
    usable = pieces[: len(pieces) - 6] if handled_only else pieces
    return b"".join(rng.choice(usable) for _ in range(rng.randint(0, 24)))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].name)
def test_bulk_generation_equals_per_function(case: tuple) -> None:  # type: ignore[type-arg]
    abi, order, cie, pieces = case
    rng = random.Random(abi.value)
    bulk_handled = 0
    for _round in range(12):
        fdes = []
        for index in range(rng.randint(1, 120)):
            program = random_program(rng, pieces, handled_only=rng.random() < 0.7)
            if rng.random() < 0.3 and fdes:
                program = fdes[rng.randrange(len(fdes))][2]  # shared programs
            size = rng.choice([1, 3, 8, 40, 0x80, 0x200, 0x12345, 0])
            fdes.append((0x4000 + 0x100 * index, size, program))
        data = eh_frame(order, cie, fdes)
        for version in (1, 2, 3):
            fast = outcome(data, abi, version)
            slow = outcome(data, abi, version, bulk=False)
            assert fast == slow, (abi, version, [f[2].hex() for f in fdes])
        cies, spans = cfi.scan_fdes(data, 0x1000, big_endian=order == ">")
        encoder = FunctionEncoder(ABI_PARAMS[abi], order == ">")
        done = bulk_section.translate_fdes(data, cies, [s for s in spans if s[2]], encoder)
        bulk_handled += sum(made is not None for made in done)
    assert bulk_handled > 100  # the bulk path was exercised


def test_bulk_generation_on_damaged_sections() -> None:
    """Random byte changes (instructions, lengths, pointers): same result or same error."""
    rng = random.Random(11)
    for abi, order, cie, pieces in CASES:
        fdes = [(0x4000 + 0x100 * i, 0x90, random_program(rng, pieces, True)) for i in range(30)]
        original = eh_frame(order, cie, fdes)
        for _ in range(40):
            data = bytearray(original)
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            if rng.random() < 0.2:
                data = data[: rng.randrange(len(data))]
            version = rng.choice((1, 2, 3))
            fast = outcome(bytes(data), abi, version)
            slow = outcome(bytes(data), abi, version, bulk=False)
            assert fast == slow


def test_bulk_scan_equals_record_by_record() -> None:
    rng = random.Random(5)
    _abi, order, cie, _pieces = CASES[0]
    original = eh_frame(order, cie, [(0x4000 + 64 * i, 64, b"\x41\x0e\x10") for i in range(20)])
    for _ in range(300):
        data = bytearray(original)
        for _ in range(rng.randint(0, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        results = []
        for in_bulk in (True, False):
            try:
                results.append(repr(cfi.scan_fdes(bytes(data), 0x1000, bulk=in_bulk)))
            except SFrameError as error:
                results.append(f"error: {error}")
        assert results[0] == results[1]


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
        SFRAME_MAGIC,
        int(version),
        int(flags),
        int(abi),
        fixed_fp,
        fixed_ra,
        0,
        len(ordered),
        sum(f.num_fres for f in ordered),
        len(blob),
        0,
        len(fdes),
    )
    return header + bytes(fdes) + bytes(blob)


def test_bulk_encoder_equals_per_function_writer() -> None:
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


def test_bulk_generation_with_several_cies() -> None:
    """FDEs of a second CIE start from that CIE's rules, whatever the first CIE holds."""
    rng = random.Random(3)
    abi, order, _cie, pieces = CASES[0]
    first_cies = [b"\x0c\x07\x08\x90\x01\x0a", b"\x0c\x07\x10\x90\x01", b"\x0c\x06\x08"]
    for first in first_cies:
        head = eh_frame(order, ("zR", 1, -8, 16, first), [])[:-4]
        second = eh_frame(order, ("zR", 1, -8, 16, b"\x0c\x07\x08\x90\x01"), [])[:-4]
        data = bytearray(head + second)
        for index in range(40):
            at = len(data)
            cie_at = len(head) if index % 3 else 0
            program = random_program(rng, pieces, handled_only=True)
            body = struct.pack(
                order + "Iii", at + 4 - cie_at, 0x4000 + 0x100 * index - (0x1000 + at + 8), 0x40
            )
            data += record(order, body + b"\0" + program)
        data += b"\0\0\0\0"
        for version in (2, 3):
            fast = outcome(bytes(data), abi, version)
            slow = outcome(bytes(data), abi, version, bulk=False)
            assert fast == slow


@pytest.mark.parametrize("slice_size", [None, 1, 7, 100])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].name)
def test_bulk_rows_are_the_translators_rows(
    case: tuple,  # type: ignore[type-arg]
    slice_size: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every field of every row the bulk interpreter finds (as RowState columns) equals the
    per-function translator's row, not only the bytes they encode to; also when it runs the
    programs a few instructions at a time (``bulk.SLICE``), programs cut between slices."""
    if slice_size is not None:
        monkeypatch.setattr(bulk, "SLICE", slice_size)
    abi, order, cie, pieces = case
    rng = random.Random(100 + abi.value)
    fdes = [
        (0x4000 + 0x100 * i, 0x100, random_program(rng, pieces, handled_only=True))
        for i in range(400)
    ]
    data = eh_frame(order, cie, fdes)
    big = order == ">"
    params = ABI_PARAMS[abi]
    cies, spans = cfi.scan_fdes(data, 0x1000, big_endian=big)
    (record,) = cies.values()
    buf = np.concatenate([np.frombuffer(data, dtype=np.uint8), np.zeros(bulk.PAD, dtype=np.uint8)])
    lengths = bulk.instruction_lengths(buf)

    def column(values: list[int]) -> np.ndarray:  # type: ignore[type-arg]
        return np.array(values, dtype=np.int64)

    caf, daf = record.code_alignment, record.data_alignment
    initial = bulk.interpret(
        buf,
        lengths,
        column([record.instructions_start]),
        column([record.instructions_end]),
        column([caf]),
        column([daf]),
        bulk.empty_start(1),
        params,
        big,
    )
    assert initial.ok[0] and not initial.has_advance[0]
    every = np.zeros(len(spans), dtype=np.int64)
    start = initial.end.take(every)
    found = bulk.interpret(
        buf,
        lengths,
        column([span[3] for span in spans]),
        column([span[4] for span in spans]),
        column([caf] * len(spans)),
        column([daf] * len(spans)),
        start,
        params,
        big,
    )
    cie_ops = decode_instructions(data, record.instructions_start, record.instructions_end, record)
    compared = 0
    for number, (_cie, _pc, _size, low, high) in enumerate(spans):
        if not found.ok[number]:
            continue
        rows = [
            (int(found.row_begin[k]), bulk.row_at(found.rows, k))
            for k in np.flatnonzero(found.row_program == number).tolist()
        ]
        translated = translate_ops(cie_ops + decode_instructions(data, low, high, record), params)
        assert isinstance(translated, Translation)
        assert rows == translated.rows
        compared += 1
    assert compared > 100


#: The instructions the generator's bulk path handles, as its documentation lists them.
GENERATOR_BULK = {
    *range(ops.DW_CFA_advance_loc, ops.DW_CFA_advance_loc + 64),
    ops.DW_CFA_advance_loc1,
    ops.DW_CFA_advance_loc2,
    ops.DW_CFA_advance_loc4,
    ops.DW_CFA_def_cfa,
    ops.DW_CFA_def_cfa_register,
    ops.DW_CFA_def_cfa_offset,
    *range(ops.DW_CFA_offset, ops.DW_CFA_offset + 64),
    ops.DW_CFA_nop,
}


def test_bulk_instruction_lengths_are_the_declared_ones() -> None:
    """Per opcode byte, the generator's bulk path walks an instruction of the length the one
    operand table (ops.CFA_INSTRUCTIONS) gives it, or leaves the opcode to the per-function
    path; the ULEB128 offsets of DW_CFA_offset and DW_CFA_def_cfa_offset may take up to 4
    bytes, other operands one."""
    rng = random.Random(11)
    for opcode in range(256):
        if (opcode & ops.HIGH_2_BITS or opcode) not in ops.CFA_INSTRUCTIONS:
            continue
        _name, operands = ops.CFA_INSTRUCTIONS[opcode & ops.HIGH_2_BITS or opcode]
        lebs = [ops.Operand.ULEB, ops.Operand.SLEB]
        long_ok = opcode in (ops.DW_CFA_def_cfa_offset, *range(ops.DW_CFA_offset, 0xC0))
        for leb_bytes in (1, 2, 3, 4, 5) if any(o in lebs for o in operands) else (1,):
            raw = cfa_instruction(opcode, rng, leb_bytes)
            buf = np.frombuffer(raw + bytes(bulk.PAD), dtype=np.uint8)
            handled = opcode in GENERATOR_BULK and (leb_bytes == 1 or (long_ok and leb_bytes <= 4))
            assert bulk.instruction_lengths(buf)[0] == (len(raw) if handled else 0), raw.hex()


def test_bulk_generation_across_chunks() -> None:
    """More functions than one chunk of the bulk path (bulk_section.CHUNK) holds, programs shared
    across chunk boundaries: the same section as the per-function path."""
    abi, order, cie, pieces = CASES[0]
    rng = random.Random(2026)
    fdes: list[tuple[int, int, bytes]] = []
    for index in range(2 * bulk_section.CHUNK + 123):
        if fdes and rng.random() < 0.5:
            program = fdes[rng.randrange(len(fdes))][2]
        else:
            program = random_program(rng, pieces, handled_only=True)
        fdes.append((0x4000 + 0x100 * index, rng.choice([8, 40, 0x80, 0x200]), program))
    data = eh_frame(order, cie, fdes)
    assert outcome(data, abi, 3) == outcome(data, abi, 3, bulk=False)
    cies, spans = cfi.scan_fdes(data, 0x1000, big_endian=order == ">")
    encoder = FunctionEncoder(ABI_PARAMS[abi], order == ">")
    done = bulk_section.translate_fdes(data, cies, spans, encoder)
    handled = [at // bulk_section.CHUNK for at, made in enumerate(done) if made is not None]
    assert set(handled) == {0, 1, 2} and len(handled) > 1000  # every chunk went the bulk path


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].name)
def test_instruction_walks_agree(case: tuple, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[type-arg]
    """The programs walked together (one numpy round per instruction), one at a time (one
    Python turn per instruction) and one at a time in strides give the same instructions and
    mark the same programs: random programs, unhandled and truncated ones among them, of all
    lengths."""
    abi, order, cie, pieces = case
    rng = random.Random(300 + abi.value)
    fdes = [
        (0x4000 + 0x100 * i, 0x100, b"".join(
            rng.choice(pieces if i % 5 == 0 else pieces[:-6])
            for _ in range(rng.choice([0, 1, 5, 30, 400]))
        ))
        for i in range(300)
    ]  # fmt: skip
    data = eh_frame(order, cie, fdes)
    _cies, spans = cfi.scan_fdes(data, 0x1000, big_endian=order == ">")
    buf = np.frombuffer(data + bytes(bulk.PAD), dtype=np.uint8)
    lengths = bulk.instruction_lengths(buf)
    starts = np.array([span[3] for span in spans], dtype=np.int64)
    # Programs cut short inside an instruction, too.
    ends = np.array([span[4] - (k % 7 == 3) for k, span in enumerate(spans)], dtype=np.int64)
    walks = []
    # Every program together; every one on its own, one instruction at a time; in strides.
    for few, long in ((0, 0), (len(spans) + 1, 1 << 20), (len(spans) + 1, 0)):
        monkeypatch.setattr(instructions_bulk, "FEW_PROGRAMS", few)
        monkeypatch.setattr(instructions_bulk, "LONG_PROGRAM", long)
        ok = np.ones(len(spans), dtype=bool)
        pos, prg = instructions_bulk.instruction_positions(lengths, starts, ends, ok)
        walks.append((pos.tolist(), prg.tolist(), ok.tolist()))
    assert walks[0] == walks[1] == walks[2]
    assert 0 < sum(walks[0][2]) < len(spans)  # some programs walked, some refused
    assert len(walks[0][0]) > 10_000


@pytest.mark.parametrize("slice_size", [1, 3, 64])
def test_bulk_generation_in_slices(slice_size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk path run a few instructions at a time (programs cut between slices, programs
    without instructions between them) writes the per-function path's section."""
    monkeypatch.setattr(bulk, "SLICE", slice_size)
    for abi, order, cie, pieces in CASES:
        rng = random.Random(400 + abi.value)
        fdes = []
        for index in range(rng.randint(20, 60)):
            program = random_program(rng, pieces, handled_only=rng.random() < 0.8)
            size = rng.choice([1, 8, 40, 0x80, 0x200, 0])
            fdes.append((0x4000 + 0x100 * index, size, program))
        data = eh_frame(order, cie, fdes)
        assert outcome(data, abi, 3) == outcome(data, abi, 3, bulk=False)


def test_bulk_generation_of_a_function_of_too_many_rows() -> None:
    """One program of 70,000 rows (more than an FDE counts: bulk.SLICE instructions and more,
    run in slices), shared by functions whose ends cut it at several places: those left with
    at most 65,535 rows are written, the others left out with gas' reason, as the per-function
    path does."""
    abi, order, cie, _pieces = CASES[0]
    # DW_CFA_advance_loc 1, then DW_CFA_def_cfa_offset 16 or 24: a row at every byte.
    program = b"".join(b"\x41\x0e" + (b"\x10" if k % 2 else b"\x18") for k in range(70_000))
    # Row k starts at byte k: a function of n bytes has n rows (and may have 16 bytes of CFI
    # per byte of code, cfi.MAX_CFI_BYTES_PER_CODE_BYTE).
    sizes = [0x4000, 65_535, 65_536, 70_001, 1 << 20]
    fdes = [(0x100000 * (k + 1), size, program) for k, size in enumerate(sizes)]
    data = eh_frame(order, cie, fdes)
    fast = outcome(data, abi, 3)
    assert fast == outcome(data, abi, 3, bulk=False)
    assert isinstance(fast, tuple)
    _data, functions, skipped, _total = fast
    assert [(f.size, f.num_fres) for f in functions] == [(0x4000, 0x4000), (65_535, 65_535)]
    cies, spans = cfi.scan_fdes(data, 0x1000)
    done = bulk_section.translate_fdes(data, cies, spans, FunctionEncoder(ABI_PARAMS[abi], False))
    assert None not in done  # all through the bulk path
    assert [(s.size, s.reason) for s in skipped] == [
        (size, "no SFrame FDE emitted; Number of FREs exceeds UINT16_MAX") for size in sizes[2:]
    ]
