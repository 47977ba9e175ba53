"""Text dumps of an SFrame section, byte-identical to GNU binutils.

* V2 and V3 sections print as ``objdump --sframe`` of binutils 2.47 (libsframe/sframe-dump.c:
  ``dump_sframe_header``, ``dump_sframe_func_with_fres``, ``dump_sframe_func_fres_simple`` and
  ``dump_sframe_func_fres_flex``).
* V1 sections print as ``readelf --sframe`` of binutils 2.40 (the V1-only sframe-dump.c of
  that release, as the Debian 2.40 library behaves).

The cells are computed from the raw stored words the way libsframe's getters read them, not
from the decoded rules, so that a dump shows what is stored.  Framing (file names, the
``Contents of...`` line) is here too; the command line lives in :mod:`pysframe.cli.dump`.

:func:`section_chunks` (and :func:`section_text`) make the text of a whole section at once
from :func:`pysframe.format.walk.scan_rows`, the cells formatted once per distinct row form
(:func:`form_cells`).

The same content as JSON, written a piece at a time: the header, then every function
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

import numpy as np
import numpy.typing as npt

from ..dataclass import dataclass
from ..errors import InvalidFieldError
from ..format.constants import (
    S390X_CFA_OFFSET_ADJUSTMENT,
    S390X_CFA_OFFSET_ALIGNMENT,
    Abi,
    FdeType,
    Flags,
    FreType,
    PauthKey,
    PcType,
    Version,
)
from ..format.layout import (
    FDE_SIZE,
    fde_fre_type,
    fde_info,
    fde_pauth_key,
    fde_pc_type,
    fde_signal_frame,
    fde_type_of,
    flex_deref,
    flex_reg,
    flex_reg_p,
    fre_base_reg,
    fre_mangled_ra,
    fre_word_size,
    word_mask,
)
from ..format.model import RegRule
from ..format.rules import RowContext, decode_rules, s390x_word_register
from ..format.section import SFrameSection
from ..format.walk import RowForm, RowScan, scan_rows

_U64 = 1 << 64

#: ``base_reg_str`` of sframe-dump.c: the CFA base register of a DEFAULT FRE.
_BASE_REG_NAMES = ("fp", "sp")

#: sframe_get_reg_name (2.47): the SP and FP DWARF numbers have names, others print r%u.
_REG_NAMES: dict[Abi, dict[int, str]] = {
    Abi.AMD64_ENDIAN_LITTLE: {7: "sp", 6: "fp"},
    Abi.AARCH64_ENDIAN_LITTLE: {31: "sp", 29: "fp"},
    Abi.AARCH64_ENDIAN_BIG: {31: "sp", 29: "fp"},
    Abi.S390X_ENDIAN_BIG: {15: "sp", 11: "fp"},
}

#: The column header, ``printf ("\n    %-7s%-8s %-10s%-10s%-13s", "STARTPC", marker, ...)``.
_COLUMNS = "\n    {:<7}{:<8} {:<10}{:<10}{:<13}"


def cells_text(cells: tuple[str, str, str] | None) -> str:
    """A row's text after its address and two spaces."""
    # printf ("    %016"PRIx64, fre_start_pc_vma); then "  RA undefined" or the cells
    # printf ("  %-10s", cfa); printf ("%-10s", fp); printf ("%-13s", ra).
    if cells is None:
        return "RA undefined"
    cfa, fp, ra = cells
    return f"{cfa:<10}{fp:<10}{ra:<13}"


# -- header ------------------------------------------------------------------------------------


def header_text(section: SFrameSection) -> str:
    """dump_sframe_header: from the leading newline through ``Num FREs``."""
    h = section.header
    lines = ["", "  Header :", "", f"    Version: SFRAME_VERSION_{int(h.version)}"]
    if h.version is Version.V1:
        # 2.40: flags on one line; strcpy overwrote SORTED when FRAME_POINTER was set too.
        lines.append(f"    Flags: {_flags_v1(int(h.flags))}")
    else:
        lines.extend(_flags_lines(int(h.flags), h.version))
        # printf ("    CFA fixed FP offset: %d\n", ...) only when the int8 is not 0 (2.47).
        if h.cfa_fixed_fp_offset:
            lines.append(f"    CFA fixed FP offset: {h.cfa_fixed_fp_offset}")
        if h.cfa_fixed_ra_offset:
            lines.append(f"    CFA fixed RA offset: {h.cfa_fixed_ra_offset}")
    lines.append(f"    Num FDEs: {_c_int(h.num_fdes)}")
    lines.append(f"    Num FREs: {_c_int(h.num_fres)}")
    return "\n".join(lines) + "\n"


def _flags_v1(flags: int) -> str:
    if not flags:
        return "NONE"
    text = ""
    if flags & Flags.FDE_SORTED:
        text = "SFRAME_F_FDE_SORTED"
    if flags & Flags.FRAME_POINTER:
        text = "SFRAME_F_FRAME_POINTER"
    return text


def _flags_lines(flags: int, version: Version) -> list[str]:
    """dump_sframe_header_flags (2.47): ``printf ("%11s%s%s\\n", prefix, name, more ? "," : "")``
    with prefix "Flags: " for the first line and " " after; leftover bits as ``%d``."""
    if not flags:
        return [f"{'Flags: ':>11}NONE"]
    known = [(Flags.FDE_SORTED, "SFRAME_F_FDE_SORTED")]
    if version is Version.V2:  # SFRAME_F_FRAME_POINTER is gone in V3
        known.append((Flags.FRAME_POINTER, "SFRAME_F_FRAME_POINTER"))
    known.append((Flags.FDE_FUNC_START_PCREL, "SFRAME_F_FDE_FUNC_START_PCREL"))
    prefix = "Flags: "
    lines = []
    for bit, name in known:
        if flags & bit:
            flags &= ~bit
            lines.append(f"{prefix:>11}{name}{',' if flags else ''}")
            prefix = " "
    if flags:
        lines.append(f"{prefix:>11}{flags}")
    return lines


def _c_int(value: int) -> int:
    """A uint32 printed with %d."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


# -- functions ---------------------------------------------------------------------------------


def _attributes(section: SFrameSection, info: int, flex: bool) -> str:
    """What follows ``bytes`` on a function's line: attr and pauth."""
    text = ""
    if section.version is not Version.V1:
        # attrs: "S" for SFRAME_V3_FDE_SIGNAL_P (info bit 7, tested for V2 too), "F" for FLEX.
        attrs = ("S" if fde_signal_frame(info) else "") + ("F" if flex else "")
        if attrs:
            text += f', attr = "{attrs}"'
    if section.abi.is_aarch64 and fde_pauth_key(info):
        text += ", pauth = B key"
    return text


def _columns(info: int) -> str:
    """The column header; ``[m]`` for PCMASK functions (info bit 4)."""
    marker = "[m]" if fde_pc_type(info) == PcType.MASK else "   "
    return _COLUMNS.format("STARTPC", marker, "CFA", "FP", "RA")


def section_text(section: SFrameSection) -> str:
    """What follows ``Contents of the SFrame section NAME:`` (sframe-dump.c dump_sframe)."""
    return b"".join(section_chunks(section)).decode("ascii")


def section_chunks(section: SFrameSection) -> Iterator[bytes]:
    """:func:`section_text` as ASCII bytes, in pieces to write one after the other.

    The whole section is read and checked when this is called; the pieces are then made one
    at a time as they are taken, so that only one piece of text is held at once.

    The text is made for all rows at once: the rows are read and checked in bulk
    (:func:`pysframe.format.walk.scan_rows`) before any text is made, the cells are formatted
    once per distinct row form, and the row lines of a chunk of functions are assembled as one
    byte array."""
    scan = scan_rows(section)
    head = (header_text(section) + "\n  Function Index :\n").encode()
    forms = _FormCells.of(section, scan.forms)
    return _chunks(section, scan, forms, head)


def _chunks(
    section: SFrameSection, scan: RowScan, forms: _FormCells, head: bytes
) -> Iterator[bytes]:
    yield head
    for first, end, long in function_windows(scan.row_base, CHUNK_ROWS):
        if long:
            yield from _long_function_text(section, scan, forms, first)
        else:
            yield _functions_text(section, scan, forms, first, end)


#: Functions, and rows, turned into text at a time: what bounds the memory of a piece.
CHUNK_FUNCTIONS = 1 << 12
CHUNK_ROWS = 1 << 16


def function_windows(row_base: npt.NDArray[np.int64], rows: int) -> Iterator[tuple[int, int, bool]]:
    """Consecutive ranges [first, end) of the functions (function i's rows are
    ``row_base[i]:row_base[i + 1]``): at most CHUNK_FUNCTIONS functions with at most ``rows``
    rows together, or one function alone with more (flagged True: its rows are to be taken
    in :func:`row_windows`)."""
    count = len(row_base) - 1
    first = 0
    while first < count:
        end = min(first + CHUNK_FUNCTIONS, count)
        if row_base[end] - row_base[first] > rows:
            # The most functions whose rows fit, at least one.
            fitting = int(np.searchsorted(row_base, row_base[first] + rows, side="right"))
            end = max(fitting - 1, first + 1)
        yield first, end, bool(row_base[end] - row_base[first] > rows)
        first = end


def row_windows(low: int, high: int, rows: int) -> Iterator[slice]:
    """Rows ``low`` to ``high``, ``rows`` at a time."""
    for begin in range(low, high, rows):
        yield slice(begin, min(begin + rows, high))


def _long_function_text(
    section: SFrameSection, scan: RowScan, forms: _FormCells, index: int
) -> Iterator[bytes]:
    """The text of function ``index``, its rows CHUNK_ROWS at a time: what
    :func:`_functions_text` makes of it, in pieces."""
    text = _functions_text(section, scan, forms, index, index + 1, with_rows=False)
    yield text[:-1]  # the function's line and the column header, without the final newline
    low, high = int(scan.row_base[index]), int(scan.row_base[index + 1])
    origin = function_pcs(section, index, index + 1)
    if fde_pc_type(int(section.table.info[index])) == PcType.MASK:
        origin[:] = 0
    for rows in row_windows(low, high, CHUNK_ROWS):
        base = np.repeat(origin, rows.stop - rows.start)
        yield bytes(_rows_text(scan, rows, base, forms)[0])
    yield b"\n"


#: The bits of sfde_func_info a function's line shows after its size: PC type, pauth key and
#: signal frame.
_HEAD_BITS = fde_info(fre_type=0, pc_type=1, pauth_key=1, signal_frame=True)


def _functions_text(
    section: SFrameSection,
    scan: RowScan,
    forms: _FormCells,
    first: int,
    end: int,
    *,
    with_rows: bool = True,
) -> bytes:
    """The text of functions ``first`` to ``end`` (exclusive); without rows, as if they had
    none."""
    table = section.table
    info = table.info[first:end]
    flex = fde_type_of(table.info2[first:end]) == FdeType.FLEX
    heads, head_of = np.unique((info & _HEAD_BITS) | (flex << 8), return_inverse=True)
    tails = [(_attributes(section, k, bool(k >> 8)) + _columns(k)).encode() for k in heads.tolist()]
    pcs = function_pcs(section, first, end)
    count = end - first
    if with_rows:
        rows_of = slice(int(scan.row_base[first]), int(scan.row_base[end]))
        # PCMASK rows print their start offset alone, others the function's pc plus it.
        origin = np.where(fde_pc_type(info) == PcType.MASK, np.uint64(0), pcs)
        base = np.repeat(origin, table.num_rows[first:end])
        rows, line_end = _rows_text(scan, rows_of, base, forms)
        row_end = line_end[scan.row_base[first : end + 1] - scan.row_base[first]].tolist()
    else:
        rows, row_end = memoryview(b""), [0] * (count + 1)
    sizes = (table.size[first:end] & 0xFFFFFFFF).astype(np.uint32).view(np.int32).tolist()
    # One printf-style format of every function: line, attributes and columns, rows, newline.
    fields: list[object] = [None] * (5 * count)
    fields[0::5] = range(first, end)
    fields[1::5] = pcs.tolist()
    fields[2::5] = sizes
    fields[3::5] = np.array(tails, dtype=object)[head_of].tolist()
    fields[4::5] = [rows[a:b] for a, b in pairwise(row_end)]
    # printf ("\n    func idx [%d]: pc = 0x%"PRIx64", size = %d bytes", ...)
    return (b"\n    func idx [%d]: pc = %#x, size = %d bytes%s%s\n" * count) % tuple(fields)


def function_pcs(section: SFrameSection, first: int, end: int) -> npt.NDArray[np.uint64]:
    """``func_start_pc_vma`` of functions ``first`` to ``end`` as the dumper computes it
    (uint64 arithmetic wraps).

    2.47: stored start + section address + (PCREL flag ? sframe_decoder_get_offsetof_fde_start_addr,
    which is header size + index * FDE size and ignores sfh_fdeoff).  2.40 (V1): stored start +
    section address.
    """
    h = section.header
    pcs = section.table.start_field[first:end].astype(np.uint64)
    pcs += np.uint64(section.section_address % _U64)
    if h.version is not Version.V1 and h.pcrel:
        fde_size = FDE_SIZE[h.version]
        pcs += np.arange(first, end, dtype=np.uint64) * np.uint64(fde_size) + np.uint64(h.size)
    return pcs


def _rows_text(
    scan: RowScan, rows: slice, base: npt.NDArray[np.uint64], forms: _FormCells
) -> tuple[memoryview, npt.NDArray[np.int64]]:
    """The lines of ``rows`` (of the whole scan) as one byte buffer, and where each ends; a
    row's address is its ``base`` (its function's pc, 0 for PCMASK) plus its start offset.

    A line is ``printf ("\n    %016"PRIx64"  %s", address, cells)``: a matrix of one line per
    row, the cells padded with NUL bytes to the longest, which are then dropped."""
    addresses = base + scan.start_offset[rows].astype(np.uint64)
    if not len(addresses):
        return memoryview(b""), np.zeros(1, dtype=np.int64)
    # Each row's line from its form's template, then its 16 address digits written in place.
    width = forms.lines.dtype.itemsize
    lines = forms.lines.take(scan.form[rows]).view(np.uint8).reshape(len(addresses), width)
    digits = _HEX_PAIRS[addresses.astype(">u8").view(np.uint8)].view(np.uint8)
    lines[:, 5:21] = digits.reshape(len(addresses), 16)
    length = forms.length[scan.form[rows]]
    line_end = np.zeros(len(length) + 1, dtype=np.int64)
    np.cumsum(length, out=line_end[1:])
    if bool((length < width).any()):
        lines = lines[np.arange(width) < length[:, None]]
    return lines.reshape(-1).data, line_end


#: The two lowercase hex digits of every byte value, as uint16 (ASCII pairs in memory order).
_HEX_PAIRS = np.frombuffer(bytes(range(256)).hex().encode(), dtype=np.uint16)


@dataclass(frozen=True, slots=True)
class _FormCells:
    """A row line per row form, ``\\n``, 4 spaces, 16 digits to fill, 2 spaces and the cells,
    NUL-padded to the longest (one numpy void item each); and each line's length."""

    lines: npt.NDArray[np.void]
    length: npt.NDArray[np.int64]

    @classmethod
    def of(cls, section: SFrameSection, forms: tuple[RowForm, ...]) -> _FormCells:
        texts = [
            f"\n    {0:016x}  {cells_text(form_cells(section, f.flex, f.info, f.words))}".encode()
            for f in forms
        ]
        width = max(map(len, texts), default=1)
        lines = np.array(texts, dtype=f"S{width}").view(f"V{width}")
        return cls(lines, np.array([len(t) for t in texts], dtype=np.int64))


# -- cells -------------------------------------------------------------------------------------


def form_cells(
    section: SFrameSection, flex: bool, info: int, words: tuple[int, ...], where: str = "a"
) -> tuple[str, str, str] | None:
    """The cells of a row with ``info`` and ``words`` in a FLEX or DEFAULT function."""
    if section.version is Version.V1:
        return _cells_v1(section, info, words)
    # sframe_fre_get_ra_undefined_p: no data words at all.
    if not words:
        return None
    if flex:
        return _cells_flex(section, info, words, where)
    return _cells_simple(section, info, words)


def _mangled(info: int) -> str:
    # strcat (temp, sframe_fre_get_ra_mangled_p (...) ? "[s]" : "   ")
    return "[s]" if fre_mangled_ra(info) else "   "


def _cfa_offset(section: SFrameSection, stored: int) -> int:
    """sframe_fre_get_cfa_offset: s390x stores (offset - 160) / 8."""
    if section.abi is Abi.S390X_ENDIAN_BIG:
        return stored * S390X_CFA_OFFSET_ALIGNMENT + S390X_CFA_OFFSET_ADJUSTMENT
    return stored


def _cells_simple(
    section: SFrameSection, info: int, words: tuple[int, ...]
) -> tuple[str, str, str]:
    """dump_sframe_func_fres_simple (2.47)."""
    h = section.header
    s390x = section.abi is Abi.S390X_ENDIAN_BIG
    # sprintf (temp, "%s+%d", base_reg_str[base_reg_id], cfa_offset)
    cfa = f"{_BASE_REG_NAMES[fre_base_reg(info)]}+{_cfa_offset(section, words[0])}"
    # sframe_fre_get_fp_offset: the fixed offset if set, else word (fixed RA ? 1 : 2).
    fp_offset: int | None
    if h.cfa_fixed_fp_offset:
        fp_offset = h.cfa_fixed_fp_offset
    else:
        index = 1 if h.cfa_fixed_ra_offset else 2
        fp_offset = words[index] if index < len(words) else None
    fp = "u" if fp_offset is None else _simple_reg_cell(section, fp_offset, s390x)
    # RA: "f" when the header has a fixed RA offset; "U" for a 0 word; else the word.
    ra_offset = words[1] if len(words) > 1 else None
    if h.cfa_fixed_ra_offset:
        ra = "f"
    elif ra_offset == 0:
        ra = "U"
    elif ra_offset is not None:
        ra = _simple_reg_cell(section, ra_offset, s390x)
    else:
        ra = "u"
    return cfa, fp, ra + _mangled(info)


def _simple_reg_cell(section: SFrameSection, offset: int, s390x: bool) -> str:
    # s390x V2: an odd word names a register (sframe_s390x_offset_regnum_p), printed "r%d"
    # with the word shifted right by one; otherwise sprintf (temp, "c%+d", offset).
    reg = s390x_word_register(offset) if s390x and section.version is Version.V2 else None
    if reg is not None:
        return f"r{reg}"
    return f"c{offset:+d}"


def _cells_flex(
    section: SFrameSection, info: int, words: tuple[int, ...], where: str
) -> tuple[str, str, str]:
    """dump_sframe_func_fres_flex (2.47): (control, offset) pairs for CFA, RA, FP."""
    h = section.header
    mask = word_mask(fre_word_size(info))
    count = len(words)
    if count < 2:
        # sframe_assert (!err_cfa_reg && !err_cfa_offset) aborts objdump here.
        raise InvalidFieldError(f"{where} has {count} data word(s); the CFA needs two")
    abi = section.abi
    cfa = _flex_disp(abi, words[0] & mask, _cfa_offset(section, words[1]))
    ra_control = words[2] & mask if count > 2 else None
    # FP pair at words 4/5, or 3/4 when the RA control word is the 0 padding word.
    fp_index = 3 if ra_control == 0 else 4
    fp_control = words[fp_index] & mask if count > fp_index else None
    fp_offset: int | None
    if count > fp_index + 1:
        fp_offset = words[fp_index + 1]
    else:
        fp_offset = h.cfa_fixed_fp_offset if h.cfa_fixed_fp_offset else None
    missing = fp_control is None or fp_offset is None
    fp = "u" if missing else _flex_disp(abi, fp_control or 0, fp_offset or 0)
    if ra_control is None:
        ra = "f" if h.cfa_fixed_ra_offset else "u"
    elif ra_control == 0:
        ra = "U"
    else:
        ra_offset = words[3] if count > 3 else h.cfa_fixed_ra_offset
        ra = _flex_disp(abi, ra_control, ra_offset)
    return cfa, fp, ra + _mangled(info)


def _flex_disp(abi: Abi, control: int, offset: int) -> str:
    """sframe_format_fre_disp: ``%s%+d`` or ``(%s%+d)``; "c" when the control names no
    register (CFA-relative).  Control word: regnum << 3 | deref << 1 | reg_p."""
    if flex_reg_p(control):
        reg = flex_reg(control)
        name = _REG_NAMES.get(abi, {}).get(reg, f"r{reg}")
        if flex_deref(control):
            return f"({name}{offset:+d})"
        return f"{name}{offset:+d}"
    return f"c{offset:+d}"


def _cells_v1(section: SFrameSection, info: int, words: tuple[int, ...]) -> tuple[str, str, str]:
    """readelf 2.40 rows (sframe-dump.c of 2.40, as the Debian 2.40 libsframe behaves)."""
    h = section.header
    # A failed sframe_fre_get_cfa_offset returns SFRAME_ERR (-1): "sp+-1".
    cfa_offset = words[0] if words else -1
    cfa = f"{_BASE_REG_NAMES[fre_base_reg(info)]}+{cfa_offset}"
    # A fixed FP offset makes the 2.40 getter fail ("u"); else word (fixed RA ? 1 : 2).
    fp = "u"
    if not h.cfa_fixed_fp_offset:
        index = 1 if h.cfa_fixed_ra_offset else 2
        if index < len(words):
            fp = f"c{words[index]:+d}"
    if h.cfa_fixed_ra_offset:
        ra = "u"
    elif len(words) > 1:
        ra = f"c{words[1]:+d}"
    else:
        ra = fp  # the 2.40 dumper leaves the FP text in its buffer
    return cfa, fp, ra + _mangled(info)


# -- framing -----------------------------------------------------------------------------------


def contents_line(section_name: str) -> str:
    """``Contents of the SFrame section %s:`` (no newline: the dump starts with one)."""
    return f"Contents of the SFrame section {section_name}:"


def objdump_file_header(filename: str, file_format: str) -> str:
    """objdump's ``\\n%s:     file format %s\\n`` and the blank line after it."""
    return f"\n{filename}:     file format {file_format}\n\n"


def objdump_no_section(section_name: str) -> str:
    return f"No {section_name} section present\n\n"


def objdump_not_sframe(section_name: str) -> str:
    return f"Section {section_name} does not contain SFrame data\n\n"


def readelf_file_header(filename: str) -> str:
    """readelf prints ``\\nFile: %s\\n`` before each file when given several."""
    return f"\nFile: {filename}\n"


def readelf_text(section_name: str, section: SFrameSection) -> str:
    return contents_line(section_name) + section_text(section)


# -- the same content as JSON -------------------------------------------------------------------
#: Rows turned into JSON at a time (some 250 bytes each): bounds the memory of a piece.
JSON_CHUNK_ROWS = 1 << 12
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
    a function's object; a function's rows come JSON_CHUNK_ROWS at a time, so that no piece grows
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
    for first, end, long in function_windows(scan.row_base, JSON_CHUNK_ROWS):
        heads = _function_heads(section, first, end, kinds)
        if long:
            ((origin, fields),) = heads
            yield True, _FUNCTION_HEAD % fields
            low, high = scan.row_base[first : first + 2].tolist()
            for rows in row_windows(low, high, JSON_CHUNK_ROWS):
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
    "cells_text",
    "contents_line",
    "form_cells",
    "function_json_lines",
    "function_json_pieces",
    "function_pcs",
    "function_windows",
    "header_text",
    "objdump_file_header",
    "objdump_no_section",
    "objdump_not_sframe",
    "readelf_file_header",
    "readelf_text",
    "row_windows",
    "section_chunks",
    "section_header_json",
    "section_json",
    "section_json_chunks",
    "section_text",
]
