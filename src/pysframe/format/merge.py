"""Sections that a linker did not merge: found, and merged into one sorted section.

GNU ld merges its inputs' SFrame sections into one (sorted, one header).  Linkers that do not
know the format (LLVM lld, mold) concatenate them instead, each input's section aligned after
the previous one with zero padding: readers then see the first input's section only, unsorted
(GNU as never sets FDE_SORTED).  :func:`split_sections` finds the sections back to back in a
section's bytes; :func:`merge_sections` writes one section holding every function, sorted by
address, each function's FRE block as it was.

Each piece's function starts are relative to that piece (to its FDE fields, with
FDE_FUNC_START_PCREL; else to the piece's first byte), because the linker applied each input's
relocations where that input's section landed: a piece is decoded at its own address.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dataclass import dataclass
from ..errors import EncodeError, InvalidFieldError, SFrameError
from .constants import SFRAME_MAGIC, Flags, Version
from .encode import FdeColumns, SectionSpec, assemble_section
from .layout import FDE_SIZE, HEADER_AT
from .section import SFrameSection
from .view import Buffer
from .walk import fre_ends, locate_fres


@dataclass(frozen=True, slots=True)
class Piece:
    """One SFrame section found at byte ``offset`` of the bytes searched, decoded at its own
    address; ``end`` is where its header, FDEs and FREs end."""

    offset: int
    end: int
    section: SFrameSection


def split_sections(data: Buffer, section_address: int = 0) -> list[Piece]:
    """The SFrame sections in ``data`` (an ELF section's bytes at ``section_address``), one
    after the other with only zero bytes between and after them.

    Raises a FormatError subclass when a piece is malformed, or InvalidFieldError when bytes
    that are not zero follow a piece without being the next one's magic."""
    pieces: list[Piece] = []
    at = 0
    size = len(data)
    magic = SFRAME_MAGIC.to_bytes(2, "little"), SFRAME_MAGIC.to_bytes(2, "big")
    while at < size:
        try:
            section = SFrameSection.from_bytes(memoryview(data)[at:], section_address + at)
        except SFrameError as error:
            raise _in_piece(error, at) from None
        header = section.header
        end = at + max(
            header.size + header.fde_offset + header.num_fdes * FDE_SIZE[header.version],
            header.fre_end,
        )
        pieces.append(Piece(at, end, section))
        at = end
        while at < size and data[at] == 0:
            at += 1
        if at < size and bytes(data[at : at + 2]) not in magic:
            raise InvalidFieldError(
                f"byte {at:#x}, after SFrame section {len(pieces)}, is neither zero padding "
                "nor the start of another SFrame section",
                at,
            )
    return pieces


def piece_offsets(data: Buffer) -> list[int]:
    """Where each SFrame section of ``data`` starts, for sections back to back as
    :func:`split_sections` finds them, reading their headers only: ``[0]`` for one section;
    more when a linker concatenated its inputs' sections.  The search stops at the first
    piece that cannot be read (and never raises: a malformed first piece gives ``[0]``)."""
    offsets = [0]
    size = len(data)
    magic = SFRAME_MAGIC.to_bytes(2, "little"), SFRAME_MAGIC.to_bytes(2, "big")
    at = 0
    while True:
        try:
            header = SFrameSection.from_bytes(memoryview(data)[at:]).header
        except SFrameError:
            return offsets
        at += max(
            header.size + header.fde_offset + header.num_fdes * FDE_SIZE[header.version],
            header.fre_end,
        )
        while at < size and data[at] == 0:
            at += 1
        if at >= size or bytes(data[at : at + 2]) not in magic:
            return offsets
        offsets.append(at)


def merge_sections(
    pieces: list[Piece],
    section_address: int,
    text_ranges: Sequence[tuple[int, int]] | None = None,
) -> tuple[bytes, int]:
    """One section at ``section_address`` holding every function of ``pieces``, sorted by
    start address (stable), flagged FDE_SORTED; each function's FRE bytes are copied.  Also
    the number of functions left out: with ``text_ranges`` ([start, end) address ranges, the
    executable segments), those not inside one, whose code the linker discarded (as GNU ld
    leaves out the FDEs of discarded sections).

    The pieces must agree on version, ABI, byte order, fixed offsets and auxiliary header
    (EncodeError otherwise).  The PCREL flag is kept when every piece has it."""
    if not pieces:
        raise EncodeError("no SFrame section to merge")
    first = pieces[0].section.header
    _check_alike(pieces)
    blocks: list[bytes] = []
    columns: list[list[np.ndarray]] = [[] for _ in range(8)]
    for piece in pieces:
        try:
            table = piece.section.table
            piece_blocks = _fre_blocks(piece.section)
        except SFrameError as error:
            raise _in_piece(error, piece.offset) from None
        own = (table.start.view(np.int64), table.size, table.num_rows, table.info, table.info2,
               table.rep_size, table.padding, np.arange(len(table)) + len(blocks))  # fmt: skip
        for column, values in zip(columns, own, strict=True):
            column.append(values)
        blocks += piece_blocks
    start, size, num_fres, info, info2, rep_size, padding, block = (
        np.concatenate(c) if c else np.zeros(0, dtype=np.int64) for c in columns
    )
    order = np.argsort(start.view(np.uint64), kind="stable")
    dropped = 0
    if text_ranges is not None:
        begin = start.view(np.uint64)[order]
        end = begin + size[order].astype(np.uint64)
        inside = np.zeros(len(order), dtype=bool)
        for low, high in text_ranges:
            inside |= (begin >= np.uint64(low)) & (end <= np.uint64(high))
        dropped = int(np.count_nonzero(~inside))
        order = order[inside]
    pcrel = all(p.section.header.pcrel for p in pieces) and first.version is not Version.V1
    flags = Flags.FDE_SORTED | (Flags.FDE_FUNC_START_PCREL if pcrel else Flags.NONE)
    if first.version is not Version.V3:
        flags |= first.flags & Flags.FRAME_POINTER
    spec = SectionSpec(
        version=first.version,
        abi=first.abi,
        flags=flags,
        cfa_fixed_fp_offset=first.cfa_fixed_fp_offset,
        cfa_fixed_ra_offset=first.cfa_fixed_ra_offset,
        big_endian=first.big_endian,
        auxiliary_header=first.auxiliary_header,
        section_address=section_address,
    )
    fdes = FdeColumns(
        start[order],
        size[order],
        num_fres[order],
        info[order],
        info2[order],
        rep_size[order],
        padding[order],
    )
    return assemble_section(spec, fdes, [blocks[int(b)] for b in block[order]]), dropped


def _in_piece(error: SFrameError, at: int) -> SFrameError:
    """``error`` about the piece at byte ``at``, its offset counted from the start of the
    bytes searched, as the offsets of the section they are (its ``function`` stays the
    piece's own function index)."""
    if error.offset is not None:
        error.offset += at
    return error


def _check_alike(pieces: list[Piece]) -> None:
    """EncodeError unless every piece has the first's version, ABI, fixed offsets and
    auxiliary header."""
    first = pieces[0].section.header
    for number, piece in enumerate(pieces[1:], 2):
        header = piece.section.header
        for what, mine, theirs in (
            ("version", header.version, first.version),
            ("ABI", header.abi, first.abi),
            ("CFA fixed FP offset", header.cfa_fixed_fp_offset, first.cfa_fixed_fp_offset),
            ("CFA fixed RA offset", header.cfa_fixed_ra_offset, first.cfa_fixed_ra_offset),
            ("auxiliary header", header.auxiliary_header, first.auxiliary_header),
        ):
            if mine != theirs:
                raise EncodeError(
                    f"SFrame section {number} differs from the first in its {what}: "
                    "they cannot be merged"
                )


def _fre_blocks(section: SFrameSection) -> list[bytes]:
    """Each function's FREs as stored (without the V3 attribute record)."""
    ends = fre_ends(section, locate_fres(section)).tolist()
    data = bytes(section.data)
    begins = section.table.fre_data.tolist()
    return [data[b:e] for b, e in zip(begins, ends, strict=True)]


def with_pcrel_starts(data: Buffer) -> bytes:
    """``data`` (an SFrame section) with FDE_FUNC_START_PCREL set, so that its function starts
    read as relative to their own FDE fields.  GNU as writes every function start of an object
    that way (R_*_PC32: S + A - P) in every version, V1 and V2 included, which have no such
    flag before V2 errata 1 (docs/format.md, "Function start address"); GNU ld reads them so,
    and a linker that only concatenates the objects' sections (lld, mold) leaves them so."""
    at = HEADER_AT["flags"]
    patched = bytearray(data)
    if len(patched) > at and patched[HEADER_AT["version"]] < Version.V3:
        patched[at] |= Flags.FDE_FUNC_START_PCREL
    return bytes(patched)


def describe(pieces: list[Piece]) -> str:
    """What was found, in words: how many sections, their version, ABI and functions."""
    header = pieces[0].section.header
    functions = sum(len(p.section) for p in pieces)
    unsorted = sum(1 for p in pieces if not p.section.header.sorted)
    if len(pieces) == 1:
        what = "one SFrame section"
        sorting = "flagged sorted" if not unsorted else "not flagged sorted"
    else:
        what = f"{len(pieces)} SFrame sections back to back"
        sorting = f"{unsorted} not flagged sorted"
    return f"{what} (V{int(header.version)}, {header.abi.name}), {functions} functions, {sorting}"


__all__ = [
    "Piece",
    "describe",
    "merge_sections",
    "piece_offsets",
    "split_sections",
    "with_pcrel_starts",
]
