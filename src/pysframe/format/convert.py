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
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConversionError, EncodeError
from .constants import KNOWN_FLAGS, FdeType, Flags, PcType, Version
from .encode import (
    FdeColumns,
    SectionSpec,
    assemble_section,
    encode_fre_blocks,
    v3_fre_count_error,
)
from .layout import (
    FDE_INFO_MASK,
    V3_MAX_FRES,
    fde_fre_type,
    fde_pc_type,
    fde_signal_frame,
    fde_type_of,
    fre_mangled_ra,
    fre_word_size,
    fre_word_size_code,
    fre_words_struct,
)
from .lookup import RowSearch
from .model import Function, Header
from .rules import (
    RowContext,
    Rules,
    decode_rules,
    encode_row,
    row_context,
)
from .walk import RowForm, RowScan, scan_rows_until_error

if TYPE_CHECKING:
    from .view import FunctionTable, SectionView

_U64 = 1 << 64


def _target_spec(
    header: Header,
    spec: SectionSpec,
    version: Version,
    big_endian: bool | None,
    pcrel: bool | None,
) -> SectionSpec:
    """The encoder settings of the converted section."""
    if pcrel is None:
        pcrel = version is Version.V3 or (version is Version.V2 and header.pcrel)
    if pcrel and version is Version.V1:
        raise ConversionError("SFrame V1 has no FDE_FUNC_START_PCREL flag")
    flags = header.flags & ~Flags.FDE_FUNC_START_PCREL & KNOWN_FLAGS[version]
    if pcrel:
        flags |= Flags.FDE_FUNC_START_PCREL
    return replace(
        spec,
        version=version,
        flags=flags,
        big_endian=header.big_endian if big_endian is None else big_endian,
        trailing=b"",
    )


def _encode_failure(version: Version, error: EncodeError) -> ConversionError:
    message = f"cannot convert to SFrame V{int(version)}: {error.message}"
    return ConversionError(message, error.offset, function=error.function)


def _where(function: Function) -> str:
    return f"function {function.index} at {function.start:#x}"


def _check_function(
    header: Header, function: Function, version: Version, pcmask_rep_size: int | None
) -> int:
    """Raise ConversionError if ``version`` cannot hold the function, whatever its rows;
    return its rep_size there."""
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
    return rep_size


#: V1 PCMASK rows match the low four bits of the address (libsframe 2.40; see lookup).
_V1_PCMASK_PERIOD = 16


def _check_pcmask_lookups(
    function: Function, source: Version, target: Version, rep_size: int
) -> None:
    """V2/V3 PCMASK rows match ``(pc - start) % rep_size``; V1 stores no rep_size and matches
    the low four bits of the address (:class:`~pysframe.format.lookup.RowSearch` searches
    both ways).  Raise ConversionError unless both find the same row at every PC of the
    function.  Both answers repeat every
    lcm(16, rep_size) bytes from the start, so that many PCs (at most 4,080) decide it."""
    rows = function.rows
    converted = replace(function, rep_size=rep_size)
    period = math.lcm(_V1_PCMASK_PERIOD, rep_size or function.rep_size or 1)
    starts = [row.start_offset for row in rows]
    before_search = RowSearch(function, source, starts)
    after_search = RowSearch(converted, target, starts)
    for pc in range(function.start, function.start + min(function.size, period)):
        before, after = before_search.find(pc), after_search.find(pc)
        if before != after:
            raise ConversionError(
                f"{_where(function)} is a PCMASK FDE (rep_size {function.rep_size or rep_size}) "
                f"whose rows V{int(target)} would match differently: at {pc:#x} row "
                f"{_row_name(before)} becomes {_row_name(after)}"
            )


def _row_name(index: int | None) -> str:
    return "none" if index is None else str(index)


def _row_failure(function: int, address: int, error: EncodeError) -> ConversionError:
    message = f"row at {address:#x}: {error.message}"
    return ConversionError(message, error.offset, function=function)


def _converted_form(
    source: RowContext, target: RowContext, info: int, words: tuple[int, ...], rules: Rules
) -> tuple[int, tuple[int, ...]]:
    """The info byte and words of a row in ``target`` with the ``rules`` it has in ``source``:
    its own when they read the same there, else encoded again (EncodeError if they cannot)."""
    if source == target or decode_rules(target, info, words, fre_word_size(info)) == rules:
        return info, words
    encoded = encode_row(target, *rules, bool(fre_mangled_ra(info)))
    return encoded.info, encoded.words


# -- every row at once ----------------------------------------------------------------------------


def convert_rows(
    view: SectionView,
    spec: SectionSpec,
    version: Version,
    function_at: Callable[[int], Function],
    *,
    big_endian: bool | None = None,
    pcrel: bool | None = None,
    pcmask_rep_size: int | None = None,
) -> bytes:
    """The bytes of the section of ``view`` (written with ``spec``, ``function_at(i)`` reads
    function i) converted to ``version``; raises ConversionError, or the decoder's error.

    The rows are read and written in bulk: each distinct row form
    (:func:`~pysframe.format.walk.scan_rows`) converted once, the FREs written at once
    (:func:`~pysframe.format.encode.encode_fre_blocks`).  The error is the first, going
    through the functions in order: what the target cannot hold of the function, else why
    its rows do not decode, else the first of its rows the target cannot hold; then what the
    encoder refuses."""
    header, table = view.header, view.table
    target_spec = _target_spec(header, spec, version, big_endian, pcrel)
    scan, problem = scan_rows_until_error(view)
    forms, failures = _convert_forms(header, scan.forms, version, target_spec.big_endian)
    _raise_first_failure(view, scan, failures, version, pcmask_rep_size, function_at)
    if problem is not None:  # the functions before it convert; it fails unless the target
        # cannot hold it in the first place
        _check_function(header, function_at(len(scan.row_base) - 1), version, pcmask_rep_size)
        raise problem
    if version is Version.V3 and len(table) and int(table.num_rows.max()) > V3_MAX_FRES:
        index = int(np.flatnonzero(table.num_rows > V3_MAX_FRES)[0])
        raise _encode_failure(version, v3_fre_count_error(int(table.num_rows[index]), index))
    blocks = encode_fre_blocks(scan, fde_fre_type(table.info), forms, target_spec.big_endian)
    order = np.lexsort((np.arange(len(table)), table.fre_offset)).tolist()
    try:
        return assemble_section(
            target_spec, _converted_columns(header, table, version, pcmask_rep_size), blocks, order
        )
    except EncodeError as error:
        raise _encode_failure(version, error) from None


def _convert_forms(
    header: Header, forms: Sequence[RowForm], version: Version, big_endian: bool
) -> tuple[list[bytes], list[EncodeError | None]]:
    """Each row form converted (info byte and data words, written in ``big_endian`` order),
    and why it cannot be (None when it can)."""
    written: list[bytes] = []
    failures: list[EncodeError | None] = []
    for form in forms:
        source = row_context(header, int(FdeType.FLEX) if form.flex else 0)
        target = replace(source, version=version)
        rules = decode_rules(source, form.info, form.words, fre_word_size(form.info))
        try:
            info, words = _converted_form(source, target, form.info, form.words, rules)
        except EncodeError as error:
            written.append(b"")
            failures.append(error)
            continue
        packed = fre_words_struct(fre_word_size_code(info), len(words), big_endian).pack(*words)
        written.append(bytes([info]) + packed)
        failures.append(None)
    return written, failures


def _raise_first_failure(
    view: SectionView,
    scan: RowScan,
    failures: list[EncodeError | None],
    version: Version,
    pcmask_rep_size: int | None,
    function_at: Callable[[int], Function],
) -> None:
    """Raise the first failure, going through the functions of ``scan`` in order (those
    before the first whose rows do not decode): what the target cannot hold of the function,
    else of its first row it cannot hold.  Only the functions where one may fail are looked
    at."""
    header, table = view.header, view.table
    failing = np.array([failure is not None for failure in failures] + [False])
    bad_rows = np.flatnonzero(failing[scan.form]) if len(scan.form) else np.zeros(0, np.int64)
    function_of_bad = np.searchsorted(scan.row_base, bad_rows, side="right") - 1
    functions, first = np.unique(function_of_bad, return_index=True)
    first_bad_row = dict(zip(functions.tolist(), bad_rows[first].tolist(), strict=True))
    crosses_v1 = (version is Version.V1) != (header.version is Version.V1)
    suspects = np.zeros(len(scan.row_base) - 1, dtype=bool)
    if version is not Version.V3:
        flex = fde_type_of(table.info2[: len(suspects)]) == FdeType.FLEX
        suspects |= flex | (fde_signal_frame(table.info[: len(suspects)]) != 0)
    if crosses_v1:
        suspects |= fde_pc_type(table.info[: len(suspects)]) == PcType.MASK
    suspects[functions] = True
    for index in np.flatnonzero(suspects).tolist():
        function = function_at(index)
        _check_function(header, function, version, pcmask_rep_size)
        row = first_bad_row.get(index)
        if row is not None:
            failure = failures[int(scan.form[row])]
            assert failure is not None
            address = (function.start + int(scan.start_offset[row])) % _U64
            raise _row_failure(index, address, failure)


def _converted_columns(
    header: Header, table: FunctionTable, version: Version, pcmask_rep_size: int | None
) -> FdeColumns:
    """The FDE fields of the converted functions (see :func:`_convert_function`)."""
    zeros = np.zeros(len(table), dtype=np.int64)
    rep_size = zeros if version is Version.V1 else table.rep_size.copy()
    if version is not Version.V1 and header.version is Version.V1:
        rep_size[fde_pc_type(table.info) == PcType.MASK] = pcmask_rep_size or 0
    return FdeColumns(
        table.start.view(np.int64),
        table.size,
        table.num_rows,
        table.info & FDE_INFO_MASK[version],
        table.info2 if version is Version.V3 else zeros,
        rep_size,
        table.padding if version is Version.V2 else zeros,
    )
