"""The single-PC lookup without numpy (:class:`pysframe.format.single.SectionLookup`) answers
as ``SFrameSection.lookup``, the reference: the same function, row and row index, or the same
error, for PCs around every function and row of real sections (the corpus, every version and
both byte orders) and of built ones (unsorted, with and without PCREL, loaded high enough
that addresses wrap), and opening it imports no numpy."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from pysframe import SFrameSection
from pysframe.errors import SFrameError
from pysframe.format.builder import SFrameBuilder
from pysframe.format.constants import Abi, Version
from pysframe.format.model import CfaRule, LookupResult
from pysframe.format.single import SectionLookup
from pysframe.sources import load_sframe

from conftest import corpus_files

U64 = 1 << 64


def _pcs(section: SFrameSection) -> Iterator[int]:
    """PCs around every function's edges and every row's start."""
    for function in section:
        start, end = function.start, function.start + function.size
        yield from (start - 1, start, start + 1, (start + end) // 2, end - 1, end)
        for row in function.rows:
            yield from (row.start_address - 1, row.start_address, row.start_address + 1)


def _answer(lookup: object, pc: int) -> tuple[object, ...]:
    try:
        found = lookup.lookup(pc)  # type: ignore[attr-defined]
    except SFrameError as error:
        return ("error", type(error), str(error))
    if found is None:
        return ("none",)
    assert isinstance(found, LookupResult)
    return found.function, found.function.rows, found.row, found.row_index


def _assert_same(section: SFrameSection) -> int:
    single = SectionLookup(section.data, section.section_address)
    assert single.header == section.header and len(single) == len(section)
    compared = 0
    for pc in _pcs(section):
        assert _answer(single, pc) == _answer(section, pc), hex(pc)
        compared += 1
    return compared


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: "/".join(p.parts[-3:]))
def test_corpus_sections_answer_alike(path: object) -> None:
    section = load_sframe(str(path))
    assert _assert_same(section) > 0


def _built(
    version: Version, *, sort: bool, pcrel: bool, big_endian: bool = False, wrap: bool = True
) -> bytes:
    """Four functions, stored out of order when not sorted; with ``wrap``, one function's
    range reaches past 2**64 (a sorted section then opens at address 0 only: elsewhere its
    start wraps below the others')."""
    builder = SFrameBuilder(
        Abi.AMD64_ENDIAN_LITTLE, version, sort=sort, pcrel=pcrel, big_endian=big_endian
    )
    functions = [(0x3000, 0x40), (0x1000, 0x20), (0x2000, 0x8)]
    if wrap:
        functions.insert(2, (U64 - 0x10, 0x20))
    for start, size in functions:
        function = builder.add_function(start, size)
        function.add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16)).add_row(4, CfaRule(6, 16))
    return builder.to_bytes()


@pytest.mark.parametrize("version", [Version.V1, Version.V2, Version.V3])
@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("address", [0, 0x7F00_0000_0000, U64 - 0x10000])
def test_built_sections_answer_alike(
    version: Version, sort: bool, big_endian: bool, address: int
) -> None:
    pcrel = version is not Version.V1
    wrap = not sort or address == 0
    data = _built(version, sort=sort, pcrel=pcrel, big_endian=big_endian, wrap=wrap)
    assert _assert_same(SFrameSection.from_bytes(data, address)) > 0


def test_a_malformed_function_raises_the_decoders_error() -> None:
    data = bytearray(_built(Version.V3, sort=True, pcrel=True))
    section = SFrameSection.from_bytes(bytes(data))
    function = section.find_function(0x1000)
    assert function is not None
    # The first FRE's info byte: data-word size code 3 (bits 5-6), which no version defines.
    info_at = section.header.fre_start + function.fre_offset + 5 + 1
    data[info_at] |= 0x60
    broken = SFrameSection.from_bytes(bytes(data))
    single = SectionLookup(bytes(data))
    answer = _answer(single, 0x1004)
    assert answer[0] == "error" and answer == _answer(broken, 0x1004)


def test_pcs_that_are_no_address_are_not_found() -> None:
    single = SectionLookup(_built(Version.V3, sort=True, pcrel=True))
    assert single.lookup(-1) is None and single.lookup(U64) is None
    assert single.find_row(0x1004) is not None


def test_opening_and_looking_up_import_no_numpy() -> None:
    data = _built(Version.V3, sort=True, pcrel=True)
    code = (
        "import sys\n"
        "from pysframe.format.single import SectionLookup\n"
        f"section = SectionLookup({data!r})\n"
        "assert section.lookup(0x1004) is not None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_long_sorted_section_answers_alike() -> None:
    """Hundreds of functions: the binary search goes deep."""
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3)
    address = 0x401000
    for number in range(600):
        size = 16 + (number * 37) % 200
        function = builder.add_function(address, size)
        function.add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16))
        address += size + (number % 3) * 8  # gaps between some functions
    assert _assert_same(SFrameSection.from_bytes(builder.to_bytes(), 0x40_0000)) > 600 * 6
