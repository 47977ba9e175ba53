"""Helpers of the compaction tests: every PC of a section, and the rules found there."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from pysframe import SFrameSection

#: Functions longer than this are sampled (their first and last PCs, and a stride between).
MAX_PCS_PER_FUNCTION = 4096


def every_pc(section: SFrameSection) -> npt.NDArray[np.uint64]:
    """Every PC of every function (long ones: the first and last 2048 and a stride between),
    and the PC before and after each function."""
    pieces = []
    for start, size in zip(section.table.start.tolist(), section.table.size.tolist(), strict=True):
        if size <= MAX_PCS_PER_FUNCTION:
            offsets = np.arange(size, dtype=np.uint64)
        else:
            half = MAX_PCS_PER_FUNCTION // 2
            offsets = np.unique(
                np.concatenate(
                    (
                        np.arange(half),
                        np.arange(size - half, size),
                        np.arange(0, size, 97),
                    )
                ).astype(np.uint64)
            )
        with np.errstate(over="ignore"):
            pieces.append(np.uint64(start) + offsets)
        pieces.append(np.array([(start - 1) % (1 << 64), (start + size) % (1 << 64)], np.uint64))
    if not pieces:
        return np.zeros(0, dtype=np.uint64)
    return np.concatenate(pieces).astype(np.uint64)


def assert_same_rules(before: SFrameSection, after: SFrameSection) -> int:
    """Every PC of ``before`` finds the same function, row and CFA/FP/RA rules in ``after``
    (batch lookups); returns the number of PCs compared."""
    pcs = every_pc(before)
    old, new = before.find_rows(pcs), after.find_rows(pcs)
    for field in dataclasses.fields(old):
        a, b = getattr(old, field.name), getattr(new, field.name)
        differs = np.flatnonzero(a != b)
        assert not len(differs), (
            f"{field.name} differs at PC {int(pcs[differs[0]]):#x}: "
            f"{a[differs[0]]} became {b[differs[0]]}"
        )
    return len(pcs)
