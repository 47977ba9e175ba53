"""The oracle of conversion: each function converted on its own, each of its rows on its own.

``SFrameSection.convert`` reads and writes every row of a section in bulk
(pysframe.format.convert); the tests hold its bytes, or its error, equal to this plain
conversion.  It goes through the functions in order and stops at the first thing the target
cannot say: a FLEX FDE or a signal frame before V3, a PCMASK FDE going to V2/V3 from V1
(which stores no rep_size) without ``pcmask_rep_size``, a PCMASK FDE whose rows the target
would match at some PC differently (V1 matches the low four bits of the address, V2/V3 the
offset modulo rep_size), rows that do not decode, then the function's first row the target
cannot encode; last, what the encoder refuses for the whole section.

Taken from the product: the functions and their rows (``Function``, ``FrameRow``), the row
codec (``decode_rules``, ``encode_row``), the search of one function's rows (``RowSearch``)
and the encoder of a model (``encode_section``).  The order of the checks, the target's
header settings and the words of the errors are this module's.
"""

from __future__ import annotations

from dataclasses import replace

from pysframe import ConversionError, FdeType, Flags, PcType, SFrameSection, Version
from pysframe.errors import EncodeError
from pysframe.format.constants import KNOWN_FLAGS
from pysframe.format.encode import encode_section
from pysframe.format.layout import FDE_INFO_MASK, fre_mangled_ra, fre_word_size
from pysframe.format.lookup import RowSearch
from pysframe.format.model import FrameRow, Function, Header
from pysframe.format.rules import RowContext, decode_rules, encode_row, row_context

#: Most PCs of a PCMASK function compared (the answers repeat every lcm(16, rep_size) bytes).
_PCS = 1 << 16


def convert_one_by_one(
    section: SFrameSection,
    target: Version,
    *,
    big_endian: bool | None = None,
    pcrel: bool | None = None,
    pcmask_rep_size: int | None = None,
) -> bytes:
    """The bytes of ``section`` converted to ``target``; raises what the conversion raises
    first (ConversionError, or the decoder's error for rows that do not decode)."""
    header = section.header
    if pcrel is None:
        pcrel = target is Version.V3 or (target is Version.V2 and header.pcrel)
    if pcrel and target is Version.V1:
        raise ConversionError("SFrame V1 has no FDE_FUNC_START_PCREL flag")
    flags = header.flags & ~Flags.FDE_FUNC_START_PCREL & KNOWN_FLAGS[target]
    if pcrel:
        flags |= Flags.FDE_FUNC_START_PCREL
    spec = replace(
        section.spec(),
        version=target,
        flags=flags,
        big_endian=header.big_endian if big_endian is None else big_endian,
        trailing=b"",
    )
    functions = list(section)
    converted = [_function(header, f, target, pcmask_rep_size) for f in functions]
    order = sorted(range(len(functions)), key=lambda i: (functions[i].fre_offset, i))
    try:
        return encode_section(spec, converted, order)
    except ConversionError:
        raise
    except EncodeError as error:
        message = f"cannot convert to SFrame V{int(target)}: {error.message}"
        raise ConversionError(message, error.offset, function=error.function) from None


def _function(
    header: Header, function: Function, target: Version, pcmask_rep_size: int | None
) -> Function:
    where = f"function {function.index} at {function.start:#x}"
    lacks = f"which V{int(target)} lacks"
    if function.fde_type is FdeType.FLEX and target is not Version.V3:
        raise ConversionError(f"{where} has a FLEX FDE, {lacks}")
    if function.signal_frame and target is not Version.V3:
        raise ConversionError(f"{where} is a signal frame, {lacks}")
    rep_size = 0 if target is Version.V1 else function.rep_size
    from_v1, to_v1 = header.version is Version.V1, target is Version.V1
    masked = function.pc_type is PcType.MASK
    if masked and from_v1 and not to_v1:
        if pcmask_rep_size is None:
            raise ConversionError(
                f"{where} is a PCMASK FDE; V1 stores no rep_size: give pcmask_rep_size"
            )
        rep_size = pcmask_rep_size
    if masked and from_v1 != to_v1:
        starts = [row.start_offset for row in function.rows]
        before = RowSearch(function, header.version, starts)
        after = RowSearch(replace(function, rep_size=rep_size), target, starts)
        for pc in range(function.start, function.start + min(function.size, _PCS)):
            old, new = before.find(pc), after.find(pc)
            if old != new:
                raise ConversionError(
                    f"{where} is a PCMASK FDE (rep_size {function.rep_size or rep_size}) whose "
                    f"rows V{int(target)} would match differently: at {pc:#x} row "
                    f"{'none' if old is None else old} becomes {'none' if new is None else new}"
                )
    source = row_context(header, function.info2)
    to = replace(source, version=target)
    rows = tuple(_row(function, row, source, to) for row in function.rows)
    return replace(
        function,
        info=function.info & FDE_INFO_MASK[target],
        info2=function.info2 if target is Version.V3 else 0,
        rep_size=rep_size,
        padding=function.padding if target is Version.V2 else 0,
        _rows=rows,
        _loader=None,
    )


def _row(function: Function, row: FrameRow, source: RowContext, to: RowContext) -> FrameRow:
    """The row in the target: its own info and words where they read the same there, else
    encoded again."""
    rules = (row.cfa, row.fp, row.ra)
    if source == to or decode_rules(to, row.info, row.words, fre_word_size(row.info)) == rules:
        return row
    try:
        encoded = encode_row(to, *rules, bool(fre_mangled_ra(row.info)))
    except EncodeError as error:
        message = f"row at {row.start_address:#x}: {error.message}"
        raise ConversionError(message, error.offset, function=function.index) from None
    return replace(row, info=encoded.info, words=encoded.words)
