"""The bulk (numpy) generation paths give exactly what the per-function paths give.

pysframe.generate.bulk translates the common CFA programs of a whole section at once, cfi scans a
well-formed .eh_frame with numpy, and encode_functions writes large sections with numpy; each
falls back to the per-record / per-function code for anything else.  These tests run both on
random programs (every handled instruction, and unhandled ones mixed in), random function sizes
(rows cut at the end, every FRE type), every ABI and byte order and every SFrame version, and
on damaged sections.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pysframe.errors import SFrameError
from pysframe.format.constants import Abi, Version
from pysframe.generate import cfi
from pysframe.generate import translate as generate
from pysframe.generate.translate import GeneratedFunction, encode_functions, generate_from_eh_frame

from test_cfi_units import sleb, uleb


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


@contextmanager
def per_function_only() -> Iterator[None]:
    """Switch the bulk paths off: every function goes through the per-function code."""
    saved = generate._bulk_translate, generate._encode_bulk, cfi._scan_eh_frame_bulk
    generate._bulk_translate = lambda data, cies, spans, *rest: [None] * len(spans)  # type: ignore[assignment]
    generate._encode_bulk = lambda *args: None  # type: ignore[assignment]
    cfi._scan_eh_frame_bulk = lambda *args: None  # type: ignore[assignment]
    try:
        yield
    finally:
        generate._bulk_translate, generate._encode_bulk, cfi._scan_eh_frame_bulk = saved


def outcome(data: bytes, abi: Abi, version: int) -> object:
    try:
        result = generate_from_eh_frame(data, 0x1000, abi, version=version, section_address=0x9000)
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
            with per_function_only():
                slow = outcome(data, abi, version)
            assert fast == slow, (abi, version, [f[2].hex() for f in fdes])
        cies, spans = cfi.scan_fdes(data, 0x1000, big_endian=order == ">")
        params = generate.ABI_PARAMS[abi]
        done = generate._bulk_translate(
            data, cies, [s for s in spans if s[2]], params, order == ">"
        )
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
            with per_function_only():
                slow = outcome(bytes(data), abi, version)
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
        for bulk in (True, False):
            saved = cfi._scan_eh_frame_bulk
            if not bulk:
                cfi._scan_eh_frame_bulk = lambda *args: None  # type: ignore[assignment]
            try:
                results.append(repr(cfi.scan_fdes(bytes(data), 0x1000)))
            except SFrameError as error:
                results.append(f"error: {error}")
            finally:
                cfi._scan_eh_frame_bulk = saved
        assert results[0] == results[1]


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
                for bulk in (True, False):
                    saved = generate._encode_bulk
                    if not bulk:
                        generate._encode_bulk = lambda *args: None  # type: ignore[assignment]
                    try:
                        got.append(encode_functions(functions, abi, version, address))
                    except SFrameError as error:
                        got.append(f"error: {error}".encode())
                    finally:
                        generate._encode_bulk = saved
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
            with per_function_only():
                slow = outcome(bytes(data), abi, version)
            assert fast == slow
