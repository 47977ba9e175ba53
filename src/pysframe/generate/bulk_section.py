"""A whole section's FDEs translated in bulk, a chunk of functions at a time.

:func:`translate_fdes` finds the distinct CFA programs of each chunk of :data:`CHUNK` functions,
runs them through the bulk interpreter of :mod:`pysframe.generate.bulk` (gas' rules for the
common instructions, GNU as 2.47 gas/gen-sframe.c), and writes the FREs of every function it
takes with :mod:`pysframe.generate.fres_bulk`, sharing the bytes of functions whose program,
FRE type and row count are the same.  What it does not take is left to the per-function path
(:mod:`pysframe.generate.translator`), so the output is the same byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from itertools import pairwise, repeat
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..format.builder import fre_types_for_sizes
from ..format.constants import FreType, PcType
from ..format.layout import fde_info
from .bulk import PAD, Programs, empty_start, instruction_lengths, interpret, tracked
from .cfi import Cie, FdeSpan
from .fres_bulk import RowBytes, encode_rows, function_rows, write_fres
from .instructions_bulk import ByteArray, IntArray
from .rows import MAX_FRES, FunctionEncoder, GeneratedFunction
from .translator import TOO_MANY_FRES


def tuple_columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """The columns of equal-length tuples (faster than ``zip(*rows)`` for many rows)."""
    return [list(map(itemgetter(k), rows)) for k in range(width)]


def translate_fdes(
    data: bytes,
    cies: dict[int, Cie],
    spans: list[FdeSpan],
    encoder: FunctionEncoder,
) -> list[GeneratedFunction | str | None]:
    """The functions this module translates, in ``spans`` order: the function, or why gas
    leaves it out (more rows than an FDE can count), or None for the others.

    Their rows are those :func:`~pysframe.generate.translator.translate_ops` gives, and their
    FREs those the per-function path writes; everything it does not handle (other
    instructions, CIEs with another RA column or the signal-frame augmentation, functions that
    gas' checks refuse) is left to the per-function path.
    """
    params = encoder.params
    big_endian = encoder.big_endian
    done: list[GeneratedFunction | str | None] = [None] * len(spans)
    usable = [
        offset
        for offset in sorted({span[0] for span in spans})
        if cies[offset].return_column == params.ra
        and not cies[offset].signal_frame
        and 0 <= cies[offset].code_alignment < 1 << 16
        and abs(cies[offset].data_alignment) < 1 << 16
    ]
    if not usable:
        return done
    buf = np.concatenate([np.frombuffer(data, dtype=np.uint8), np.zeros(PAD, dtype=np.uint8)])
    lengths = instruction_lengths(buf)
    cie_list = [cies[offset] for offset in usable]
    code_alignment = np.array([c.code_alignment for c in cie_list], dtype=np.int64)
    data_alignment = np.array([c.data_alignment for c in cie_list], dtype=np.int64)
    initial = interpret(
        buf,
        lengths,
        np.array([c.instructions_start for c in cie_list], dtype=np.int64),
        np.array([c.instructions_end for c in cie_list], dtype=np.int64),
        code_alignment,
        data_alignment,
        empty_start(len(cie_list)),
        params,
        big_endian,
    )
    cie_ok = (initial.ok & ~initial.has_advance).tolist()
    cie_index = {offset: i for i, offset in enumerate(usable) if cie_ok[i]}
    context = _Context(
        data, buf, lengths, cies, usable, cie_index, initial, code_alignment, data_alignment
    )
    # Chunks of functions bound the memory of the columns (several int64 per instruction and
    # per row): about a tenth of what one pass over libLLVM-15's 98,000 functions needs.
    for low in range(0, len(spans), CHUNK):
        chunk = spans[low : low + CHUNK]
        for at, function in enumerate(_translate_chunk(context, chunk, encoder)):
            if function is not None:
                done[low + at] = function
    return done


#: Functions translated together (see :func:`translate_fdes`).
CHUNK = 4096


@dataclass(frozen=True, slots=True)
class _Context:
    """What every chunk of :func:`translate_fdes` shares: the section and its CIEs' states."""

    data: bytes
    buf: ByteArray
    lengths: npt.NDArray[np.int8]
    cies: dict[int, Cie]
    usable: list[int]
    cie_index: dict[int, int]
    initial: Programs
    code_alignment: IntArray
    data_alignment: IntArray


class _ChunkPrograms(NamedTuple):
    """The functions of a chunk whose CIE the bulk path takes, and their distinct programs."""

    #: Positions of the functions in the chunk.
    picked: list[int]
    starts: list[int]
    #: Sizes, clipped to 2**40 (beyond any FRE start address; the section writer refuses them).
    sizes: list[int]
    #: Per function: the number of its distinct (CIE, instructions) program, and its CIE's
    #: number in the context.
    program: IntArray
    cie: IntArray
    #: Per program: the first function with it, and where its instructions are.
    first_use: IntArray
    starts_at: IntArray
    ends_at: IntArray


def _chunk_programs(context: _Context, spans: list[FdeSpan]) -> _ChunkPrograms | None:
    """The functions of ``spans`` the bulk path may take and their programs; None: none."""
    cie_index, data = context.cie_index, context.data
    if all(span[0] in cie_index for span in spans):
        picked = list(range(len(spans)))
        usable_spans = spans
    else:
        picked = [i for i, span in enumerate(spans) if span[0] in cie_index]
        usable_spans = [spans[i] for i in picked]
    if not usable_spans:
        return None
    cie_column, start_column, size_column, lo_column, hi_column = tuple_columns(usable_spans, 5)
    programs: dict[object, int] = {}
    number = programs.setdefault
    if len(cie_index) == 1:
        program_list = [
            number(data[lo:hi], len(programs)) for lo, hi in zip(lo_column, hi_column, strict=True)
        ]
        cie_of_span = np.full(len(usable_spans), next(iter(cie_index.values())), dtype=np.int64)
    else:
        program_list = [
            number((c, data[lo:hi]), len(programs))
            for c, lo, hi in zip(cie_column, lo_column, hi_column, strict=True)
        ]
        cie_of_span = np.array([cie_index[c] for c in cie_column], dtype=np.int64)
    program = np.array(program_list, dtype=np.int64)
    _, first_use = np.unique(program, return_index=True)
    if max(size_column) >> 40:
        size_column = [min(size, 1 << 40) for size in size_column]
    return _ChunkPrograms(
        picked,
        start_column,
        size_column,
        program,
        cie_of_span,
        first_use,
        np.array(lo_column, dtype=np.int64)[first_use],
        np.array(hi_column, dtype=np.int64)[first_use],
    )


def _translate_chunk(
    context: _Context, spans: list[FdeSpan], encoder: FunctionEncoder
) -> list[GeneratedFunction | str | None]:
    """The functions of one chunk of :func:`translate_fdes` (None for those it leaves)."""
    done: list[GeneratedFunction | str | None] = [None] * len(spans)
    chunk = _chunk_programs(context, spans)
    if chunk is None:
        return done
    cie_of = chunk.cie[chunk.first_use]
    cie_end = context.initial.end
    found = interpret(
        context.buf,
        context.lengths,
        chunk.starts_at,
        chunk.ends_at,
        context.code_alignment[cie_of],
        context.data_alignment[cie_of],
        cie_end.take(cie_of),  # CIE programs do not advance: at location 0
        encoder.params,
        encoder.big_endian,
        MAX_FRES + 1,  # a function of more rows is left out, whatever they are
    )
    chosen = np.flatnonzero(found.ok[chunk.program])
    program = chunk.program[chosen]
    sizes = np.array(chunk.sizes, dtype=np.int64)[chosen]
    first, end = function_rows(found.row_program, found.row_begin, program, sizes)
    encoded = encode_rows(found.rows, tracked(found.rows), encoder)
    refused = np.zeros(len(encoded.code) + 1, dtype=np.int64)
    np.cumsum(encoded.refused[encoded.code], out=refused[1:])
    # gas' end-of-function checks (translator.finish) refuse these.  Too many rows is the
    # first of them: its reason is known here; the per-function path says why for the others.
    few = end - first <= MAX_FRES
    for i in chosen[~few].tolist():
        done[chunk.picked[i]] = TOO_MANY_FRES
    good = (refused[end] == refused[first]) & few
    _write_functions(
        context,
        chunk,
        chosen[good],
        sizes[good],
        found.row_begin,
        encoded,
        first[good],
        end[good],
        encoder,
        done,
    )
    return done


def _write_functions(
    context: _Context,
    chunk: _ChunkPrograms,
    chosen: IntArray,
    sizes: IntArray,
    row_begin: IntArray,
    encoded: RowBytes,
    first: IntArray,
    end: IntArray,
    encoder: FunctionEncoder,
    done: list[GeneratedFunction | str | None],
) -> None:
    """The functions ``chosen`` of the chunk (of ``sizes``, their rows ``[first, end)``),
    written into ``done`` at their places in the chunk: FRE type by size, sfde_func_info, and
    the FREs."""
    program = chunk.program[chosen]
    fre_types = fre_types_for_sizes(sizes)
    counts = end - first
    # Functions with the same program, FRE type and row count have the same FREs: write
    # each such set once and share its bytes.
    _, shown, same_as = np.unique(
        (((program << 2) | fre_types) << 17) | counts, return_index=True, return_inverse=True
    )
    fres, bounds = write_fres(
        row_begin, encoded, first[shown], end[shown], fre_types[shown], encoder.big_endian
    )
    shared = [fres[lo:hi] for lo, hi in pairwise(bounds.tolist())]
    # sfde_func_info by FRE type and AArch64 pauth key (the CIE's 'B' augmentation).
    info_of = np.array(
        [[fde_info(fre_type, PcType.INC, key) for key in (0, 1)] for fre_type in FreType],
        dtype=np.int64,
    )
    b_key = np.zeros(len(chosen), dtype=np.int64)
    if encoder.params.aarch64:
        cies = context.cies
        cie_b_key = np.array([int(cies[c].b_key) for c in context.usable], dtype=np.int64)
        b_key = cie_b_key[chunk.cie[chosen]]
    info = info_of[fre_types, b_key]
    chosen_list = chosen.tolist()
    starts = [chunk.starts[i] for i in chosen_list]
    sizes_list = [chunk.sizes[i] for i in chosen_list]
    blobs = [shared[k] for k in same_as.ravel().tolist()]
    zeros = repeat(0)
    made = map(
        partial(tuple.__new__, GeneratedFunction),
        zip(
            starts,
            sizes_list,
            info.tolist(),
            zeros,
            zeros,
            counts.tolist(),
            blobs,
            repeat(False),
        ),
    )
    picked = chunk.picked
    for i, function in zip(chosen_list, made, strict=True):
        done[picked[i]] = function


__all__ = ["CHUNK", "translate_fdes", "tuple_columns"]
