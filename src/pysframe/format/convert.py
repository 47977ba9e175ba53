"""Convert a section between SFrame versions (and byte orders) where the content allows: the
bytes of the converted section (:meth:`SFrameSection.convert` opens them).

Absolute function addresses are kept and re-stored for the target (PCREL or section-relative,
errata 1).  Rows keep their raw words when they mean the same in the target version, and are
re-encoded from their rules otherwise.  What the target cannot say raises ConversionError
naming the function: FLEX FDEs and signal frames before V3, s390x registers-in-registers
between V2 (low-bit form) and V3 (FLEX), a start beyond the 32-bit field of V1/V2, PCMASK
functions without a rep_size (V1 has none; give ``pcmask_rep_size``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ..errors import ConversionError, EncodeError
from .constants import KNOWN_FLAGS, FdeType, Flags, PcType, Version
from .encode import SectionSpec, encode_section
from .layout import FDE_INFO_MASK
from .lookup import find_row_index
from .model import FrameRow, Function, Header
from .rules import RowContext, decode_rules, encode_row, row_context


def convert_section(
    header: Header,
    spec: SectionSpec,
    functions: Sequence[Function],
    version: Version,
    *,
    big_endian: bool | None = None,
    pcrel: bool | None = None,
    pcmask_rep_size: int | None = None,
) -> bytes:
    """The bytes of the section of ``header`` and ``functions`` (written with ``spec``)
    converted to ``version``; raises ConversionError."""
    if pcrel is None:
        pcrel = version is Version.V3 or (version is Version.V2 and header.pcrel)
    if pcrel and version is Version.V1:
        raise ConversionError("SFrame V1 has no FDE_FUNC_START_PCREL flag")
    flags = header.flags & ~Flags.FDE_FUNC_START_PCREL & KNOWN_FLAGS[version]
    if pcrel:
        flags |= Flags.FDE_FUNC_START_PCREL
    spec = replace(
        spec,
        version=version,
        flags=flags,
        big_endian=header.big_endian if big_endian is None else big_endian,
        trailing=b"",
    )
    converted = [
        _convert_function(header, function, version, pcmask_rep_size) for function in functions
    ]
    order = sorted(range(len(functions)), key=lambda i: (functions[i].fre_offset, i))
    try:
        return encode_section(spec, converted, order)
    except ConversionError:
        raise
    except EncodeError as error:
        message = f"cannot convert to SFrame V{int(version)}: {error.message}"
        raise ConversionError(message, error.offset, function=error.function) from None


def _where(function: Function) -> str:
    return f"function {function.index} at {function.start:#x}"


def _convert_function(
    header: Header, function: Function, version: Version, pcmask_rep_size: int | None
) -> Function:
    if function.fde_type is FdeType.FLEX and version is not Version.V3:
        raise ConversionError(f"{_where(function)} has a FLEX FDE, which V{int(version)} lacks")
    if function.signal_frame and version is not Version.V3:
        raise ConversionError(f"{_where(function)} is a signal frame, which V{int(version)} lacks")
    rep_size = 0 if version is Version.V1 else function.rep_size
    needs_rep_size = version is not Version.V1 and header.version is Version.V1
    if function.pc_type is PcType.MASK and needs_rep_size:
        if pcmask_rep_size is None:
            raise ConversionError(
                f"{_where(function)} is a PCMASK FDE; V1 stores no rep_size: give pcmask_rep_size"
            )
        rep_size = pcmask_rep_size
    if function.pc_type is PcType.MASK and (version is Version.V1) != (
        header.version is Version.V1
    ):
        _check_pcmask_lookups(function, header.version, version, rep_size)
    info = function.info & FDE_INFO_MASK[version]
    source = row_context(header, function.info2)
    target = replace(source, version=version)
    rows = tuple(_convert_row(function, row, source, target) for row in function.rows)
    return replace(
        function,
        info=info,
        info2=function.info2 if version is Version.V3 else 0,
        rep_size=rep_size,
        padding=function.padding if version is Version.V2 else 0,
        _rows=rows,
        _loader=None,
    )


#: V1 PCMASK rows match the low four bits of the address (libsframe 2.40; see lookup).
_V1_PCMASK_PERIOD = 16


def _check_pcmask_lookups(
    function: Function, source: Version, target: Version, rep_size: int
) -> None:
    """V2/V3 PCMASK rows match ``(pc - start) % rep_size``; V1 stores no rep_size and matches
    the low four bits of the address (lookup.find_row_index).  Raise ConversionError unless
    both find the same row at every PC of the function.  Both answers repeat every
    lcm(16, rep_size) bytes from the start, so that many PCs (at most 4,080) decide it."""
    rows = function.rows
    converted = replace(function, rep_size=rep_size)
    period = math.lcm(_V1_PCMASK_PERIOD, rep_size or function.rep_size or 1)
    for pc in range(function.start, function.start + min(function.size, period)):
        before = find_row_index(function, rows, source, pc)
        after = find_row_index(converted, rows, target, pc)
        if before != after:
            raise ConversionError(
                f"{_where(function)} is a PCMASK FDE (rep_size {function.rep_size or rep_size}) "
                f"whose rows V{int(target)} would match differently: at {pc:#x} row "
                f"{_row_name(before)} becomes {_row_name(after)}"
            )


def _row_name(index: int | None) -> str:
    return "none" if index is None else str(index)


def _convert_row(
    function: Function, row: FrameRow, source: RowContext, target: RowContext
) -> FrameRow:
    rules = (row.cfa, row.fp, row.ra)
    if source == target or decode_rules(target, row.info, row.words, row.word_size.size) == rules:
        return row
    try:
        info, _, words = encode_row(target, *rules, row.mangled_ra)
    except EncodeError as error:
        message = f"row at {row.start_address:#x}: {error.message}"
        raise ConversionError(message, error.offset, function=function.index) from None
    return replace(row, info=info, words=words)
