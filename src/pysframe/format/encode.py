"""Encoding: the one writer of SFrame sections, V1, V2 or V3 layout, either byte order.

Two entries, one writer:

* :func:`assemble_section` writes a header, an FDE table and an FRE sub-section from FDE fields
  given as columns and each function's FREs already encoded (start address fields, info bytes,
  data words).  It checks every field against its layout and lays the FRE blocks out in any
  order.  The generator (:mod:`pysframe.generate`) writes through it directly.
* :func:`encode_section` writes what the model holds (:class:`~pysframe.format.model.Function`
  with its rows: each row's raw info byte and words), by encoding each function's FREs and
  assembling them.  Choosing those bytes (smallest FRE type and word size, FLEX or DEFAULT) is
  the builder's job.

Shared FRE blocks.  ``sfde_func_start_fre_off`` is only an offset (V2 spec 2.3; docs/format.md,
"V2 FDE" and "V3 FDE"): several FDEs may name one FRE block, and both entries take
``fre_block_of``, the block each function's FDE names.  In V3 the block starts with the
attribute record, so the functions that share one have the same FRE count, info, info2 and rep
size; in V1 and V2 the FRE count is the FDE's own, and a function may use the first FREs of a
longer block (its FREs are a prefix of the block's).  ``sfh_num_fres`` counts every FDE's
FREs, shared or not, as GNU ld counts them.
:mod:`pysframe.format.compact` decides what to share.

Every layout (header, FDE per version, V3 attribute record, FRE fields) comes from
:mod:`pysframe.format.layout`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from struct import error as StructError
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from ..dataclass import dataclass
from ..errors import EncodeError
from .constants import KNOWN_FLAGS, SFRAME_MAGIC, Abi, Flags, Version
from .layout import (
    FDE_INFO_MASK,
    FDE_SIZE,
    FDE_START_BITS,
    HEADER_SIZE,
    V3_ATTR_FIELDS,
    V3_ATTR_SIZE,
    V3_MAX_FRES,
    byte_order,
    fde_dtype,
    fde_fre_type,
    fre_address_struct,
    fre_words_struct,
    header_struct,
)
from .model import FrameRow, Function

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .walk import RowScan

#: A column of FDE fields: a sequence of ints or a numpy integer array.
Column: TypeAlias = "Sequence[int] | npt.NDArray[np.int64]"

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class SectionSpec:
    """What the encoder needs besides the functions."""

    version: Version
    abi: Abi
    flags: Flags
    cfa_fixed_fp_offset: int
    cfa_fixed_ra_offset: int
    big_endian: bool
    auxiliary_header: bytes = b""
    section_address: int = 0
    #: Bytes written after the FRE sub-section (alignment padding of the original section).
    trailing: bytes = b""


class FdeColumns(NamedTuple):
    """The FDE fields of every function, one column per field, in FDE order.

    ``start`` holds absolute addresses; the writer stores them relative to the section or to
    the field itself (FDE_FUNC_START_PCREL, errata 1).  ``num_fres`` must be the number of FREs
    in the function's block.  Versions without a field (V1 ``rep_size``, V1/V2 ``info2``, all
    but V2 ``padding``) need zeros in its column.
    """

    start: Column
    size: Column
    num_fres: Column
    info: Column
    info2: Column
    rep_size: Column
    padding: Column


def encode_section(
    spec: SectionSpec,
    functions: Sequence[Function],
    fre_block_order: Sequence[int] | None = None,
    fre_block_of: Sequence[int] | None = None,
) -> bytes:
    """Serialize ``functions`` (each with its rows) as an SFrame section.

    ``fre_block_order`` lists function positions in the order their FRE blocks are laid out in
    the FRE sub-section (default: FDE order), so that a linked section, whose FDEs were sorted
    after the FREs were written, re-encodes byte for byte.

    ``fre_block_of`` (see "Shared FRE blocks" above) names, per function, the block its FDE
    names by a function position (functions naming the same position share a block); each
    block is encoded from the rows of the function with the most rows among those naming it
    (the first such one), and ``fre_block_order`` then lists the blocks by those names.
    """
    _check_spec(spec)
    owners, names, block_of = _block_owners(functions, fre_block_of)
    order = _block_order(names, fre_block_order, block_of is not None)
    blocks: list[bytes] = []
    row_bytes: dict[tuple[int, tuple[int, ...]], bytes] = {}
    for position in owners:
        function = functions[position]
        blocks.append(_encode_block(spec, function, function.rows, row_bytes))
    if block_of is not None:
        for position, function in enumerate(functions):
            owner = functions[owners[block_of[position]]]
            rows, shared = function.rows, owner.rows[: len(function.rows)]
            if function is not owner and [_row_key(r) for r in rows] != [
                _row_key(r) for r in shared
            ]:
                raise EncodeError(
                    f"its rows are not the first rows of the FRE block it shares with function "
                    f"{owner.index}",
                    function=function.index,
                )
    columns = FdeColumns(
        [f.start for f in functions],
        [f.size for f in functions],
        [len(f.rows) for f in functions],
        [f.info for f in functions],
        [f.info2 for f in functions],
        [f.rep_size for f in functions],
        [f.padding for f in functions],
    )
    return _assemble(spec, columns, blocks, order, block_of)


def encode_fre_blocks(
    scan: RowScan, fre_type: npt.NDArray[np.int64], forms: Sequence[bytes], big_endian: bool
) -> list[bytes]:
    """Every function's FREs from a bulk read of rows (:class:`~pysframe.format.walk.RowScan`),
    all at once: each FRE its start offset in the function's FRE type (``fre_type``, one per
    function), then its form's bytes (``forms``: info byte and data words as written)."""
    import numpy as np

    rows = len(scan.start_offset)
    width = np.repeat(np.left_shift(1, fre_type), np.diff(scan.row_base))
    form_length = np.fromiter(map(len, forms), dtype=np.int64, count=len(forms))
    form_at = np.cumsum(form_length) - form_length
    length = width + form_length[scan.form] if rows else np.zeros(0, dtype=np.int64)
    end = np.cumsum(length)
    begin = end - length
    total = int(end[-1]) if rows else 0
    out = np.zeros(total, dtype=np.uint8)
    start = scan.start_offset
    for byte in range(4):  # the start address, byte by byte in the section's order
        wide = np.flatnonzero(width > byte)
        at = begin[wide] + (width[wide] - 1 - byte if big_endian else byte)
        out[at] = (start[wide] >> (8 * byte)) & 0xFF
    # Each row's form bytes after its start address.
    copied = form_length[scan.form]
    row = np.repeat(np.arange(rows), copied)
    within = np.arange(int(copied.sum())) - np.repeat(np.cumsum(copied) - copied, copied)
    source = np.frombuffer(b"".join(forms), dtype=np.uint8)
    out[begin[row] + width[row] + within] = source[form_at[scan.form][row] + within]
    edges = np.append(begin, total)[scan.row_base].tolist()
    blob = out.tobytes()
    return [blob[low:high] for low, high in pairwise(edges)]


def _row_key(row: FrameRow) -> tuple[int, int, tuple[int, ...]]:
    return row.start_offset, row.info, row.words


def _block_owners(
    functions: Sequence[Function], fre_block_of: Sequence[int] | None
) -> tuple[list[int], list[int], list[int] | None]:
    """(the function each block is encoded from, and its name, in block order; each
    function's block index, None when every function has its own block)."""
    count = len(functions)
    if fre_block_of is None:
        return list(range(count)), list(range(count)), None
    named = list(fre_block_of)
    if len(named) != count or any(not 0 <= n < count for n in named):
        raise EncodeError("fre_block_of must name a function position for every function")
    groups: dict[int, list[int]] = {}
    for position, name in enumerate(named):
        groups.setdefault(name, []).append(position)
    owners: list[int] = []
    index_of: dict[int, int] = {}
    for name in sorted(groups):
        members = groups[name]
        # The block is written from the member with the most rows (the first of them).
        owner = max(members, key=lambda p: (len(functions[p].rows), -p))
        index_of[name] = len(owners)
        owners.append(owner)
    return owners, sorted(groups), [index_of[name] for name in named]


def assemble_section(
    spec: SectionSpec,
    fdes: FdeColumns,
    fre_blocks: Sequence[bytes],
    fre_block_order: Sequence[int] | None = None,
    fre_block_of: Column | None = None,
) -> bytes:
    """Write a section from FDE columns and encoded FRE blocks.

    Without ``fre_block_of``, ``fre_blocks[i]`` is function ``i``'s FREs as written (start
    address field of the function's FRE type, info byte, data words; without the V3
    attribute record, which is written from the columns).  With it, ``fre_block_of[i]`` is the
    index in ``fre_blocks`` of the block function ``i``'s FDE names (see "Shared FRE blocks"
    above); every block must be named.  ``fre_block_order`` lists block indices in layout
    order (default: as given).
    """
    _check_spec(spec)
    count = len(fre_blocks)
    block_of = None if fre_block_of is None else _int_column(fre_block_of)
    order = _block_order(list(range(count)), fre_block_order, block_of is not None)
    return _assemble(spec, fdes, fre_blocks, order, block_of)


def _check_spec(spec: SectionSpec) -> None:
    unknown = spec.flags & ~KNOWN_FLAGS[spec.version]
    if unknown:
        raise EncodeError(f"flags {int(unknown):#x} are not defined in SFrame V{int(spec.version)}")
    if len(spec.auxiliary_header) > 0xFF:
        raise EncodeError("auxiliary header longer than 255 bytes")
    for name in ("cfa_fixed_fp_offset", "cfa_fixed_ra_offset"):
        if not -0x80 <= getattr(spec, name) <= 0x7F:
            raise EncodeError(f"{name} {getattr(spec, name)} does not fit a signed byte")


def _block_order(
    names: list[int], fre_block_order: Sequence[int] | None, shared: bool = False
) -> list[int] | None:
    """The block order checked (as block indices), or None for the order given.

    ``names[b]`` is what ``fre_block_order`` calls block ``b``."""
    if fre_block_order is None:
        return None
    index_of = {name: block for block, name in enumerate(names)}
    order = [index_of.get(position, -1) for position in fre_block_order]
    if sorted(order) != list(range(len(names))):
        what = "FRE block" if shared else "function"
        raise EncodeError(f"fre_block_order must list every {what} exactly once")
    return order


def _assemble(
    spec: SectionSpec,
    fdes: FdeColumns,
    blocks: Sequence[bytes],
    order: list[int] | None,
    block_of: npt.NDArray[np.int64] | list[int] | None,
) -> bytes:
    import numpy as np

    count = len(fdes.start)
    block_count = len(blocks)
    if block_of is None and any(len(column) != block_count for column in fdes):
        raise EncodeError("every FDE column needs one value per FRE block")
    if any(len(column) != count for column in fdes):
        raise EncodeError("every FDE column needs one value per function")
    version = spec.version
    v3 = version is Version.V3
    fde_size = FDE_SIZE[version]
    stored = _stored_starts(spec, fdes.start, HEADER_SIZE + len(spec.auxiliary_header), fde_size)
    fields = [_int_column(column) for column in fdes[1:]]
    _check_fields(spec, fdes, stored, fields)
    _, num_fres, info, info2, rep_size, _ = fields
    named = np.arange(count) if block_of is None else np.asarray(block_of, dtype=np.int64)
    owner = _check_sharing(spec, named, block_count, num_fres, info, info2, rep_size)

    # The FRE sub-section: the blocks in ``order``, each after its V3 attribute record (that
    # of the first function naming it).
    lengths = np.fromiter(map(len, blocks), dtype=np.int64, count=block_count)
    position = np.arange(block_count) if order is None else np.array(order, dtype=np.int64)
    laid_out = (lengths + V3_ATTR_SIZE if v3 else lengths)[position]
    block_offset = np.zeros(block_count, dtype=np.int64)
    block_offset[position] = np.cumsum(laid_out) - laid_out
    fre_offset = block_offset[named]
    fre_len = int(laid_out.sum())
    total_fres = int(num_fres.sum())
    if max(fre_len, total_fres, fde_size * count) > 0xFFFFFFFF:
        raise EncodeError(
            f"{count} FDEs and {total_fres} FREs in {fre_len} bytes exceed the 32-bit fields "
            "of the header"
        )
    ordered_blocks = blocks if order is None else [blocks[p] for p in order]
    if v3:
        records = (num_fres, info, info2, rep_size)
        fre_blob = _with_records(spec, ordered_blocks, [c[owner[position]] for c in records])
    else:
        fre_blob = b"".join(ordered_blocks)
    table = _fde_records(spec, stored, fre_offset, fields)
    header = header_struct(spec.big_endian).pack(
        SFRAME_MAGIC,
        int(version),
        int(spec.flags),
        int(spec.abi),
        spec.cfa_fixed_fp_offset,
        spec.cfa_fixed_ra_offset,
        len(spec.auxiliary_header),
        count,
        total_fres,
        fre_len,
        0,
        fde_size * count,
    )
    return b"".join((header, spec.auxiliary_header, table, fre_blob, spec.trailing))


def _with_records(
    spec: SectionSpec, blocks: Sequence[bytes], columns: Sequence[npt.NDArray[np.int64]]
) -> bytes:
    """The V3 FRE sub-section: each block after its attribute record (docs/format.md, "V3
    FDE"), whose num_fres, info, info2 and rep_size are ``columns`` (one element per block)."""
    import numpy as np

    count = len(blocks)
    attributes = np.zeros(count, dtype=_record_dtype(V3_ATTR_FIELDS, spec.big_endian))
    for name, column in zip(attributes.dtype.names or (), columns, strict=True):
        attributes[name] = column
    raw = attributes.tobytes()
    pieces = [b""] * (2 * count)
    size = V3_ATTR_SIZE
    pieces[0::2] = [raw[at : at + size] for at in range(0, size * count, size)]
    pieces[1::2] = blocks
    return b"".join(pieces)


def _fde_records(
    spec: SectionSpec,
    stored: npt.NDArray[np.int64],
    fre_offset: npt.NDArray[np.int64],
    fields: Sequence[npt.NDArray[np.int64]],
) -> bytes:
    """The FDE sub-section (V2 spec 2.3; V3 index entries): ``fields`` are the size, num_fres,
    info, info2, rep_size and padding columns."""
    import numpy as np

    version = spec.version
    size, num_fres, info, _, rep_size, padding = fields
    table = np.zeros(len(stored), dtype=fde_dtype(version, spec.big_endian))
    table["start"] = stored
    table["size"] = size
    table["fre_off"] = fre_offset
    if version is not Version.V3:
        table["num_fres"] = num_fres
        table["info"] = info
    if version is Version.V2:
        table["rep_size"] = rep_size
        table["padding"] = padding
    return table.tobytes()


def _check_sharing(
    spec: SectionSpec,
    named: npt.NDArray[np.int64],
    block_count: int,
    num_fres: npt.NDArray[np.int64],
    info: npt.NDArray[np.int64],
    info2: npt.NDArray[np.int64],
    rep_size: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """The first function naming each block; EncodeError for a block no function names, a
    function naming no block, or functions that share a block but cannot: in V3 their
    attribute records differ, before V3 their FRE types do (the block's FREs would be read
    with other start-address widths)."""
    import numpy as np

    count = len(named)
    if count and (int(named.min()) < 0 or int(named.max()) >= block_count):
        bad = int(np.flatnonzero((named < 0) | (named >= block_count))[0])
        raise EncodeError(f"function {bad} names FRE block {int(named[bad])}, which is not given")
    owner = np.full(block_count, -1, dtype=np.int64)
    owner[named[::-1]] = np.arange(count - 1, -1, -1, dtype=np.int64)  # the first wins
    if block_count and int(owner.min()) < 0:
        raise EncodeError(f"FRE block {int(np.flatnonzero(owner < 0)[0])} is named by no FDE")
    first = owner[named]
    if spec.version is Version.V3:
        differs = (
            (num_fres != num_fres[first])
            | (info != info[first])
            | (info2 != info2[first])
            | (rep_size != rep_size[first])
        )
        what = "attribute record (FRE count, info, info2, rep size)"
    else:
        differs = fde_fre_type(info) != fde_fre_type(info[first])
        what = "FRE type"
    if bool(differs.any()):
        index = int(np.flatnonzero(differs)[0])
        raise EncodeError(
            f"function {index} shares the FRE block of function {int(first[index])} but its "
            f"{what} differs"
        )
    return owner


def _record_dtype(fields: str, big_endian: bool) -> np.dtype[Any]:
    """numpy record type of a packed struct layout (struct codes are numpy type codes)."""
    import numpy as np

    order = byte_order(big_endian)
    return np.dtype([(f"f{k}", order + code) for k, code in enumerate(fields)])


def _int_column(values: Column) -> npt.NDArray[np.int64]:
    """A column as int64; values beyond int64 are clamped (the range checks report them)."""
    import numpy as np

    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:
        return np.array([min(max(v, _INT64_MIN), _INT64_MAX) for v in values], dtype=np.int64)


def _stored_starts(
    spec: SectionSpec, starts: Column, header_size: int, fde_size: int
) -> npt.NDArray[np.int64]:
    """Function starts as stored: from the field itself (PCREL) or the section (errata 1),
    modulo 2**64 as signed numbers."""
    import numpy as np

    count = len(starts)
    try:
        absolute = np.asarray(starts, dtype=np.int64).astype(np.uint64)
    except OverflowError:
        absolute = np.array([start % (1 << 64) for start in starts], dtype=np.uint64)
    base = np.full(count, spec.section_address % (1 << 64), dtype=np.uint64)
    if spec.flags & Flags.FDE_FUNC_START_PCREL:
        base += (header_size + fde_size * np.arange(count, dtype=np.int64)).astype(np.uint64)
    return (absolute - base).view(np.int64)


def _check_fields(
    spec: SectionSpec,
    given: FdeColumns,
    stored: npt.NDArray[np.int64],
    fields: list[npt.NDArray[np.int64]],
) -> None:
    """Raise EncodeError for the first function (in FDE order) with a field its layout cannot
    hold; a function's fields are checked in the order of the messages below.

    ``given`` are the columns as passed (for messages), ``stored`` the starts as stored and
    ``fields`` the other columns as int64 arrays."""
    import numpy as np

    version = spec.version
    size, num_fres, info, info2, rep_size, padding = fields
    nothing = np.zeros(len(stored), dtype=bool)
    fre_limit = 0xFFFF if version is Version.V3 else 0xFFFFFFFF
    bits = FDE_START_BITS[version]
    pcrel = bool(spec.flags & Flags.FDE_FUNC_START_PCREL)
    checks: list[tuple[npt.NDArray[np.bool_], Callable[[int], str]]] = [
        ((size < 0) | (size > 0xFFFFFFFF), lambda i: f"size {given.size[i]} out of range"),
        (
            (rep_size < 0) | (rep_size > 0xFF),
            lambda i: f"rep_size {given.rep_size[i]} out of range",
        ),
        (
            rep_size != 0 if version is Version.V1 else nothing,
            lambda i: "SFrame V1 has no rep_size field",
        ),
        ((info < 0) | (info > 0xFF), lambda i: f"info {given.info[i]} is not a byte"),
        ((info2 < 0) | (info2 > 0xFF), lambda i: f"info2 {given.info2[i]} is not a byte"),
        (
            (info2 != 0) | ((info & ~FDE_INFO_MASK[version]) != 0)
            if version is not Version.V3
            else nothing,
            lambda i: "FLEX FDEs and signal frames need SFrame V3",
        ),
        (
            (num_fres < 0) | (num_fres > fre_limit),
            lambda i: f"{given.num_fres[i]} FREs exceed the V{int(version)} limit of {fre_limit}",
        ),
        ((padding < 0) | (padding > 0xFFFF), lambda i: f"padding {given.padding[i]} out of range"),
        (
            (stored < -(1 << (bits - 1))) | (stored >= (1 << (bits - 1))) if bits < 64 else nothing,
            lambda i: (
                # The address as the model holds it: 64 bits, unsigned (int64 here).
                f"at {int(given.start[i]) & 0xFFFF_FFFF_FFFF_FFFF:#x}: start is "
                f"{int(stored[i]):#x} bytes from "
                f"{'its FDE' if pcrel else 'the section'}, "
                f"beyond the {bits}-bit field of SFrame V{int(version)}"
            ),
        ),
    ]
    first: tuple[int, Callable[[int], str]] | None = None
    for bad, message in checks:
        where = np.flatnonzero(bad)
        if len(where) and (first is None or where[0] < first[0]):
            first = (int(where[0]), message)
    if first is not None:
        index, message = first
        text = message(index)
        if text.startswith("at "):  # the start beyond its field: "function N at ADDRESS: ..."
            raise EncodeError(f"function {index} {text}")
        raise EncodeError(text, function=index)


def _encode_block(
    spec: SectionSpec,
    function: Function,
    rows: Sequence[FrameRow],
    row_bytes: dict[tuple[int, tuple[int, ...]], bytes],
) -> bytes:
    """A function's FREs; ``row_bytes`` keeps each distinct row's info byte and words encoded
    (sections repeat a few hundred distinct rows many times)."""
    if spec.version is Version.V3 and len(rows) > V3_MAX_FRES:
        raise v3_fre_count_error(len(rows), function.index)
    out = bytearray()
    fre_type = function.fre_type
    address = fre_address_struct(fre_type, spec.big_endian)
    for number, row in enumerate(rows):
        if not 0 <= row.start_offset < fre_type.limit:
            raise EncodeError(
                f"FRE {number} start offset {row.start_offset} does not fit FRE type "
                f"{fre_type.name}",
                function=function.index,
            )
        out += address.pack(row.start_offset)
        key = (row.info, row.words)
        encoded = row_bytes.get(key)
        if encoded is None:
            if not 0 <= row.info <= 0xFF:
                raise EncodeError(
                    f"FRE {number} info {row.info} is not a byte", function=function.index
                )
            encoded = row_bytes[key] = bytes([row.info]) + _encode_words(
                spec, function, number, row
            )
        out += encoded
    return bytes(out)


def v3_fre_count_error(count: int, function: int) -> EncodeError:
    """A V3 function cannot have ``count`` FREs (more than its attribute record counts)."""
    return EncodeError(f"{count} FREs exceed the V3 limit of {V3_MAX_FRES}", function=function)


def _encode_words(spec: SectionSpec, function: Function, number: int, row: FrameRow) -> bytes:
    if len(row.words) != row.word_count:
        raise EncodeError(
            f"FRE {number} info byte says {row.word_count} words, the row has {len(row.words)}",
            function=function.index,
        )
    size = row.word_size
    try:
        return fre_words_struct(size, len(row.words), spec.big_endian).pack(*row.words)
    except StructError:
        raise EncodeError(
            f"FRE {number}: a word of {row.words} does not fit {size.size} bytes",
            function=function.index,
        ) from None
