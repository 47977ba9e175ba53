"""The dump's content as JSON, written a piece at a time.

The same content as the text dump (:mod:`pysframe.tools.dump`): the header, then every function
with its rows, each row with its raw fields, its decoded rules and the cells objdump 2.47 prints.
Rows are read in bulk (:func:`pysframe.format.walk.scan_rows`, which checks every FRE first, so a
bad section fails before anything is written); each distinct row form (FDE type, info byte,
data words) is encoded once, and a row's JSON is its address and start offset put before its
form's text.  Functions are produced a chunk at a time, so the memory used does not grow with
the number of functions, whatever the output size.

* :func:`section_json_chunks`: one JSON object for the section (``functions`` a list);
* :func:`function_json_lines`: one JSON object per function, for JSON Lines;
* :func:`section_header_json`: the header fields alone;
* :func:`section_json`: the whole object as Python data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

from ..format.constants import FdeType, Flags, FreType, PauthKey, PcType, Version
from ..format.layout import (
    fde_fre_type,
    fde_pauth_key,
    fde_pc_type,
    fde_signal_frame,
    fde_type_of,
    fre_mangled_ra,
    fre_word_size,
)
from ..format.model import RegRule
from ..format.rules import RowContext, decode_rules
from ..format.section import SFrameSection
from ..format.walk import RowForm, RowScan, scan_rows
from .dump import form_cells, function_pcs, function_windows, row_windows

_U64 = 1 << 64
#: Rows turned into JSON at a time (some 250 bytes each): bounds the memory of a piece.
CHUNK_ROWS = 1 << 12
#: Compact separators, so that json uses its C encoder.
_SEPARATORS = (", ", ": ")


def _dumps(value: object) -> str:
    return json.dumps(value, separators=_SEPARATORS)


def section_header_json(section: SFrameSection) -> dict[str, Any]:
    """The header's fields, the section's address and size (the JSON dump without functions)."""
    h = section.header
    return {
        "version": int(h.version),
        "abi": h.abi.name,
        "big_endian": h.big_endian,
        "flags": [f.name for f in Flags if f.value and h.flags & f],
        "cfa_fixed_fp_offset": h.cfa_fixed_fp_offset,
        "cfa_fixed_ra_offset": h.cfa_fixed_ra_offset,
        "auxiliary_header": h.auxiliary_header.hex(),
        "num_fdes": h.num_fdes,
        "num_fres": h.num_fres,
        "section_address": section.section_address,
        "section_size": len(section.data),
    }


def section_json_chunks(section: SFrameSection) -> Iterator[str]:
    """The JSON text of the section: :func:`section_header_json` with ``functions``, the list
    of :func:`function_json_lines`' objects, in pieces to write one after the other.

    Every FRE is read and checked when this is called (an ``SFrameError`` then), before the
    first piece."""
    return _section_pieces(section, scan_rows(section))


def _section_pieces(section: SFrameSection, scan: RowScan) -> Iterator[str]:
    header = _dumps(section_header_json(section))
    yield header[:-1] + ', "functions": ['
    first = True
    for begins, piece in _function_pieces(section, scan):
        yield ", " + piece if begins and not first else piece
        first = False
    yield "]}"


def function_json_lines(section: SFrameSection) -> Iterator[str]:
    """One JSON object per function (no newline), in the order of the FDEs; every FRE is read
    and checked when this is called.  Each object is one string, however many rows the
    function has: :func:`function_json_pieces` gives them in pieces of bounded size."""
    return _joined(_function_pieces(section, scan_rows(section)))


def _joined(pieces: Iterator[tuple[bool, str]]) -> Iterator[str]:
    held: list[str] = []
    for begins, piece in pieces:
        if begins and held:
            yield "".join(held)
            held.clear()
        held.append(piece)
    if held:
        yield "".join(held)


def function_json_pieces(section: SFrameSection) -> Iterator[tuple[bool, str]]:
    """The objects of :func:`function_json_lines` in pieces, each flagged True when it begins
    a function's object; a function's rows come CHUNK_ROWS at a time, so that no piece grows
    with a function's rows.  Every FRE is read and checked when this is called."""
    return _function_pieces(section, scan_rows(section))


def section_json(section: SFrameSection) -> dict[str, Any]:
    """The content of the dump as plain data: header, functions, rows with rules and cells."""
    document: dict[str, Any] = json.loads("".join(section_json_chunks(section)))
    return document


# -- functions, a chunk at a time ---------------------------------------------------------------


def _function_pieces(section: SFrameSection, scan: RowScan) -> Iterator[tuple[bool, str]]:
    forms = [_form_json(section, form) for form in scan.forms]
    # The members from fre_type to pauth_key depend on the info and info2 bytes alone.
    kinds: dict[tuple[int, int], str] = {}
    for first, end, long in function_windows(scan.row_base, CHUNK_ROWS):
        heads = _function_heads(section, first, end, kinds)
        if long:
            ((origin, fields),) = heads
            yield True, _FUNCTION_HEAD % fields
            low, high = scan.row_base[first : first + 2].tolist()
            for rows in row_windows(low, high, CHUNK_ROWS):
                text = _rows_json(scan, forms, origin, rows.start, rows.stop)
                yield False, text if rows.start == low else ", " + text
            yield False, "]}"
            continue
        for (origin, fields), (low, high) in zip(
            heads, pairwise(scan.row_base[first : end + 1].tolist()), strict=True
        ):
            yield True, _FUNCTION % (*fields, _rows_json(scan, forms, origin, low, high))


def _function_heads(
    section: SFrameSection, first: int, end: int, kinds: dict[tuple[int, int], str]
) -> list[tuple[int, tuple[object, ...]]]:
    """For functions ``first`` to ``end``: the address their rows' start offsets are added
    to, and the fields of :data:`_FUNCTION_HEAD`."""
    table = section.table
    columns = zip(
        range(first, end),
        function_pcs(section, first, end).tolist(),
        table.start[first:end].tolist(),
        table.size[first:end].tolist(),
        table.start_field[first:end].tolist(),
        table.info[first:end].tolist(),
        table.info2[first:end].tolist(),
        table.rep_size[first:end].tolist(),
        strict=True,
    )
    heads: list[tuple[int, tuple[object, ...]]] = []
    for index, pc, start, size, start_field, info, info2, rep_size in columns:
        kind = kinds.get((info, info2))
        if kind is None:
            kind = kinds[info, info2] = _function_kind(section, info, info2)
        # PCMASK rows show their start offset alone, others the function's pc plus it.
        origin = 0 if fde_pc_type(info) == PcType.MASK else pc
        heads.append((origin, (index, pc, start, size, start_field, kind, rep_size)))
    return heads


def _rows_json(scan: RowScan, forms: list[str], origin: int, low: int, high: int) -> str:
    """Rows ``low`` to ``high`` of the scan, ``origin`` plus their start offsets their
    addresses, separated by commas."""
    offsets = scan.start_offset[low:high].tolist()
    row_forms = scan.form[low:high].tolist()
    return ", ".join(
        [
            _ROW % ((origin + offset) % _U64, offset, forms[form])
            for offset, form in zip(offsets, row_forms, strict=True)
        ]
    )


#: A row: its address and start offset, then its form's members (json.dumps' spelling).
_ROW = '{"address": %d, "start_offset": %d, %s'
#: A function: json.dumps' spelling of the keys in order, ``kind`` from _function_kind; its
#: rows, then ``]}``.
_FUNCTION_HEAD = (
    '{"index": %d, "pc": %d, "start": %d, "size": %d, "start_field": %d, %s, '
    '"rep_size": %d, "rows": ['
)
_FUNCTION = _FUNCTION_HEAD + "%s]}"


def _function_kind(section: SFrameSection, info: int, info2: int) -> str:
    """The members fre_type, pc_type, fde_type, signal and pauth_key of a function with these
    info and info2 bytes, without braces."""
    members = {
        "fre_type": FreType(fde_fre_type(info)).name,
        "pc_type": PcType(fde_pc_type(info)).name,
        "fde_type": _fde_type(info2).name,
        "signal": bool(fde_signal_frame(info)) if section.version is Version.V3 else False,
        "pauth_key": PauthKey(fde_pauth_key(info)).name if section.abi.is_aarch64 else None,
    }
    return _dumps(members)[1:-1]


def _fde_type(info2: int) -> FdeType:
    return FdeType.FLEX if fde_type_of(info2) == FdeType.FLEX else FdeType.DEFAULT


def _form_json(section: SFrameSection, form: RowForm) -> str:
    """A row form's JSON members after the address and start offset, with the closing brace."""
    h = section.header
    context = RowContext(
        h.abi,
        h.version,
        FdeType.FLEX if form.flex else FdeType.DEFAULT,
        h.cfa_fixed_fp_offset,
        h.cfa_fixed_ra_offset,
    )
    cfa, fp, ra = decode_rules(context, form.info, form.words, fre_word_size(form.info))
    cells = form_cells(section, form.flex, form.info, form.words)
    members = {
        "info": form.info,
        "words": list(form.words),
        "cfa": None if cfa is None else {"reg": cfa.reg, "offset": cfa.offset, "deref": cfa.deref},
        "fp": _rule_json(fp),
        "ra": _rule_json(ra),
        "mangled_ra": bool(fre_mangled_ra(form.info)),
        "text": None if cells is None else list(cells),
    }
    return _dumps(members)[1:]


def _rule_json(rule: RegRule) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": rule.kind.value}
    if rule.kind.value in ("fixed", "saved", "value"):
        out["offset"] = rule.offset
        out["reg"] = rule.reg
    return out


__all__ = [
    "function_json_lines",
    "function_json_pieces",
    "section_header_json",
    "section_json",
    "section_json_chunks",
]
