"""Batch and scalar lookups agree at the edges: PCs that are no address (negative, 2**64 and
above, given as Python integers or signed numpy arrays) and functions whose ranges reach the
top of the address space."""

from __future__ import annotations

import numpy as np
import pytest

from pysframe import SFrameSection
from pysframe.format.builder import SFrameBuilder
from pysframe.format.constants import Abi, Version
from pysframe.format.model import CfaRule

U64 = 1 << 64


def _section(version: Version, sort: bool) -> SFrameSection:
    builder = SFrameBuilder(
        Abi.AMD64_ENDIAN_LITTLE, version, pcrel=version is Version.V3, sort=sort
    )
    # Stored first: a function whose end, start + size, wraps past 2**64.
    builder.add_function(U64 - 0x10, 0x20).add_row(0, CfaRule(7, 8)).add_row(4, CfaRule(7, 16))
    builder.add_function(0x8, 0x10).add_row(0, CfaRule(7, 24))
    builder.add_function(0x1000, 0x40).add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16))
    return SFrameSection.from_bytes(builder.to_bytes())


def _scalar(section: SFrameSection, pc: int) -> tuple[int, int, int]:
    found = section.find_row(pc) if 0 <= pc < U64 else None
    if found is None:
        return -1, -1, 0
    assert found.row.cfa is not None
    return found.function.index, found.row_index, found.row.cfa.offset


@pytest.mark.parametrize("version", [Version.V2, Version.V3])
@pytest.mark.parametrize("sort", [False, True])
def test_batch_equals_scalar_around_the_top_of_the_address_space(
    version: Version, sort: bool
) -> None:
    section = _section(version, sort)
    pcs = [U64 - 0x20 + i for i in range(0x50)] + list(range(0x30)) + list(range(0xFF0, 0x1050))
    pcs += [-5, -1, U64]
    pcs += [U64 + 0x1008, 1 << 70]
    result = section.find_rows(pcs)
    batch = list(
        zip(
            result.function_index.tolist(),
            result.row_index.tolist(),
            result.cfa_offset.tolist(),
            strict=True,
        )
    )
    assert batch == [_scalar(section, pc) for pc in pcs]
    assert {_scalar(section, pc)[0] for pc in pcs} == {-1, 0, 1, 2}


def test_pcs_that_are_no_address_are_not_found() -> None:
    section = _section(Version.V3, True)
    inside = 0x1008
    for pcs in ([-1], [U64], [U64 + inside], [-1, inside, 1 << 70]):
        result = section.find_rows(pcs)
        assert result.found.tolist() == [pc == inside for pc in pcs]
        assert result.cfa_reg.tolist() == [7 if pc == inside else -1 for pc in pcs]
    signed = section.find_rows(np.array([-1, inside], dtype=np.int64))
    assert signed.found.tolist() == [False, True]
    assert section.find_row(-1) is None and section.find_row(U64 + inside) is None
