"""Compaction: the same section in fewer bytes, with every function's rows unchanged.

What the format allows, and :func:`compact_section` does (each can be turned off, so that its
gain can be measured on its own; see :class:`CompactOptions`):

* **shared blocks**: ``sfde_func_start_fre_off`` is only an offset (V2 spec 2.3;
  docs/format.md, "V2 FDE" and "V3 FDE"), so the FDEs of functions whose FRE blocks are byte
  for byte the same (in V3, attribute record included) name one copy;
* **shared prefixes** (V1, V2): the FRE count lives in the FDE, so a function whose FREs are
  the first FREs of another function's block, read with the same FRE type, names that block;
* **narrow start addresses**: each function gets the smallest FRE type (V2 spec 2.3.3) that
  holds its largest FRE start offset, where GNU as picks it from the function's size;
* **narrow data words**: each FRE gets the smallest data-word size (V2 spec 2.4.1) holding
  its words, offsets as signed and FLEX control words as unsigned numbers, as GNU as
  chooses it (most sections are already there);
* **no trailing bytes** after the FRE sub-section.

Nothing else changes: the header fields but the FRE length, the FDE order and every FDE field
but the FRE type and offset, and each row's start offset and rules.  :func:`check_same_rows`
proves it for the result (same functions, same rows with the same CFA, FP and RA rules, hence
the same rule at every PC) and compaction raises EncodeError if it does not hold.

Which readers accept shared blocks is in the README ("Compaction"): libsframe and the
kernel read them; a reader of the other byte order that swaps the section in place, one FDE
at a time (libsframe's ``sframe_decode``), does not.  Deciding whether to share for such
readers is the caller's (:func:`safe_to_share` gives the usual answer).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..dataclass import dataclass
from ..errors import EncodeError
from .builder import fre_types_for_sizes
from .constants import FdeType, Version, WordSize
from .encode import FdeColumns, assemble_section, encode_fre_blocks
from .layout import (
    fde_fre_type,
    fre_base_reg,
    fre_info,
    fre_mangled_ra,
    fre_word_count,
    fre_word_size_code,
    fre_words_struct,
    word_mask,
)
from .rules import decode_rules, flex_control_positions, row_context, stored_words, word_size_for
from .walk import RowForm, RowScan, scan_rows

if TYPE_CHECKING:
    from .model import Header
    from .section import SFrameSection

I64 = npt.NDArray[np.int64]

#: The bits of sfde_func_info that are not the FRE type (V2 spec 2.3.1).
_NOT_FRE_TYPE = 0xF0


@dataclass(frozen=True, slots=True)
class CompactOptions:
    """Which of the tricks :func:`compact_section` applies (all by default)."""

    share_blocks: bool = True
    share_prefixes: bool = True
    narrow_addresses: bool = True
    narrow_words: bool = True
    drop_trailing: bool = True


#: Nothing but laying the section out again.
NO_TRICKS = CompactOptions(False, False, False, False, False)


@dataclass(frozen=True, slots=True)
class Compacted:
    """A compacted section and what was done to it."""

    data: bytes
    original_size: int
    functions: int
    #: FRE blocks written, and functions that name a block another function names first
    #: (of those, V1/V2 functions using the first FREs of a longer block).
    blocks: int
    shared: int
    prefixes: int
    #: Functions written with a smaller FRE type, and distinct row forms (info byte and data
    #: words) written with smaller data words.
    narrowed_functions: int
    narrowed_forms: int

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def saved(self) -> int:
        return self.original_size - len(self.data)


def safe_to_share(section: SFrameSection) -> bool:
    """Whether sharing blocks keeps the section readable where it is usually read: sections of
    little-endian machines (whose readers of the other byte order, on big-endian hosts, are
    rare).  A big-endian section is read by libsframe on little-endian hosts too (objdump
    and readelf for s390x files on x86-64), which swaps it in place and rejects shared
    blocks."""
    return not section.big_endian


def compact_section(
    section: SFrameSection, options: CompactOptions | None = None, *, verify: bool = True
) -> Compacted:
    """``section`` in as few bytes as ``options`` allow (see the module's description).

    With ``verify`` the result is decoded and :func:`check_same_rows` checked against the
    input.  Raises EncodeError when the result cannot be written (or does not check).
    """
    options = options or CompactOptions()
    header, table = section.header, section.table
    scan = scan_rows(section)
    forms, narrowed_forms = _encode_forms(header, scan.forms, options.narrow_words)
    old_type = fde_fre_type(table.info)
    fre_type = _fre_types(scan, old_type) if options.narrow_addresses else old_type
    info = (table.info & _NOT_FRE_TYPE) | fre_type
    blocks = encode_fre_blocks(scan, fre_type, forms, header.big_endian)
    columns = FdeColumns(
        table.start.view(np.int64),
        table.size,
        table.num_rows,
        info,
        table.info2,
        table.rep_size,
        table.padding,
    )
    v3 = header.version is Version.V3
    block_of: list[int] | None = None
    shared = prefixes = 0
    written = blocks
    if options.share_blocks:
        written, block_of, prefixes = _share(
            blocks,
            columns,
            fre_type.tolist(),
            v3,
            options.share_prefixes and not v3,
        )
        shared = len(blocks) - len(written)
    spec = section.spec()
    if options.drop_trailing:
        spec = replace(spec, trailing=b"")
    # The blocks in the order of the original ones (GNU ld writes FREs before sorting FDEs),
    # so that a section without anything to gain is written back as it was.
    first_user = np.arange(len(blocks)) if block_of is None else _first_users(block_of, written)
    order = np.lexsort((first_user, table.fre_offset[first_user])).tolist()
    data = assemble_section(spec, columns, written, order, block_of)
    if verify:
        from .section import SFrameSection

        check_same_rows(section, SFrameSection.from_bytes(data, section.section_address))
    return Compacted(
        data=data,
        original_size=len(section.data),
        functions=len(table),
        blocks=len(written),
        shared=shared,
        prefixes=prefixes,
        narrowed_functions=int(np.count_nonzero(fre_type < old_type)),
        narrowed_forms=narrowed_forms,
    )


# -- rows -------------------------------------------------------------------------------------


def _encode_forms(
    header: Header, forms: tuple[RowForm, ...], narrow: bool
) -> tuple[list[bytes], int]:
    """Each row form's info byte and data words as written, and how many were narrowed."""
    encoded: list[bytes] = []
    narrowed = 0
    for form in forms:
        info, words = form.info, form.words
        if narrow and words:
            smaller = _narrower(header, form)
            if smaller is not None:
                info, words = smaller
                narrowed += 1
        packed = fre_words_struct(fre_word_size_code(info), len(words), header.big_endian)
        encoded.append(bytes([info]) + packed.pack(*words))
    return encoded, narrowed


def _narrower(header: Header, form: RowForm) -> tuple[int, tuple[int, ...]] | None:
    """The form's info byte and words with the smallest data-word size that holds them, as
    GNU as sizes them (offsets signed, FLEX control words unsigned), when that is smaller
    and the rules read from them are the same; else None."""
    code = fre_word_size_code(form.info)
    size = 1 << code
    unsigned = flex_control_positions(len(form.words)) if form.flex else ()
    logical = tuple(
        word & word_mask(size) if position in unsigned else word
        for position, word in enumerate(form.words)
    )
    try:
        smallest = word_size_for(logical, unsigned)
    except EncodeError:
        return None
    if smallest.value >= code:
        return None
    words = stored_words(logical, smallest)
    mangled = bool(fre_mangled_ra(form.info))
    info = fre_info(fre_base_reg(form.info), fre_word_count(form.info), smallest, mangled)
    ctx = row_context(header, int(FdeType.FLEX) if form.flex else 0)
    before = decode_rules(ctx, form.info, form.words, size)
    if decode_rules(ctx, info, words, WordSize(smallest).size) != before:
        return None
    return info, words


def _fre_types(scan: RowScan, old_type: I64) -> I64:
    """Per function the smallest FRE type holding its largest FRE start offset (functions
    without FREs: ADDR1)."""
    count = len(old_type)
    largest = np.zeros(count, dtype=np.int64)
    with_rows = np.flatnonzero(np.diff(scan.row_base) > 0)
    if len(with_rows):
        largest[with_rows] = np.maximum.reduceat(scan.start_offset, scan.row_base[with_rows])
    return np.minimum(fre_types_for_sizes(largest), old_type)


# -- sharing ----------------------------------------------------------------------------------


def _first_users(block_of: list[int], written: list[bytes]) -> I64:
    """The first function naming each written block."""
    first = np.full(len(written), -1, dtype=np.int64)
    named = np.asarray(block_of, dtype=np.int64)
    first[named[::-1]] = np.arange(len(named) - 1, -1, -1, dtype=np.int64)
    return first


def _share(
    blocks: list[bytes],
    columns: FdeColumns,
    fre_type: list[int],
    v3: bool,
    prefixes: bool,
) -> tuple[list[bytes], list[int], int]:
    """The distinct blocks (first use first), the block each function names, and how many
    functions name a longer block whose first FREs are theirs."""
    if v3:  # the attribute record is part of the block
        record = zip(
            np.asarray(columns.num_fres).tolist(),
            np.asarray(columns.info).tolist(),
            np.asarray(columns.info2).tolist(),
            np.asarray(columns.rep_size).tolist(),
            strict=True,
        )
        keys: list[tuple[object, bytes]] = [(r, b) for r, b in zip(record, blocks, strict=True)]
    else:  # the FRE type decides how the bytes are read
        keys = [(t, b) for t, b in zip(fre_type, blocks, strict=True)]
    index: dict[tuple[object, bytes], int] = {}
    named = [index.setdefault(key, len(index)) for key in keys]
    distinct = list(index)
    longer = list(range(len(distinct)))
    if prefixes:
        longer = _longest_extensions(distinct)
    using_prefix = sum(1 for n in named if longer[n] != n)
    # Renumber the blocks still written, in order of first use.
    final: dict[int, int] = {}
    block_of = [final.setdefault(longer[n], len(final)) for n in named]
    written = [distinct[n][1] for n in final]
    return written, block_of, using_prefix


def _longest_extensions(distinct: list[tuple[object, bytes]]) -> list[int]:
    """For each (FRE type, bytes) block, the block it is a prefix of that is not a prefix of
    another (itself if none).  Among blocks of one FRE type sorted by their bytes, a block is a
    prefix of some other exactly when it is one of the next, so one pass from the end finds
    each chain's end.  Blocks without FREs share nothing."""
    longer = list(range(len(distinct)))
    by_type: dict[object, list[int]] = {}
    for number, (fre_type, _) in enumerate(distinct):
        by_type.setdefault(fre_type, []).append(number)
    for numbers in by_type.values():
        ordered = sorted(numbers, key=lambda n: distinct[n][1])
        for here, following in zip(ordered[-2::-1], ordered[:0:-1], strict=True):
            data = distinct[here][1]
            if data and distinct[following][1].startswith(data):
                longer[here] = longer[following]
    return longer


# -- checking ---------------------------------------------------------------------------------


def check_same_rows(before: SFrameSection, after: SFrameSection) -> None:
    """Raise EncodeError unless ``after`` has the functions of ``before`` (start, size, FRE
    count, PC type, pauth key, signal frame, FDE type, rep size, in the same order) and each
    the same rows: the same start offsets and the same CFA, FP and RA rules and mangled-RA
    bit.  Lookups then answer every PC alike (libsframe's sframe_find_fre reads nothing else).
    """
    a, b = before.table, after.table
    if len(a) != len(b) or before.header.sorted != after.header.sorted:
        raise EncodeError(f"compaction changed the functions: {len(a)} became {len(b)}")
    fields = {
        "start": (a.start, b.start),
        "size": (a.size, b.size),
        "FRE count": (a.num_rows, b.num_rows),
        "info": (a.info & _NOT_FRE_TYPE, b.info & _NOT_FRE_TYPE),
        "info2": (a.info2, b.info2),
        "rep size": (a.rep_size, b.rep_size),
    }
    for what, (old, new) in fields.items():
        differs = np.flatnonzero(old != new)
        if len(differs):
            raise EncodeError(f"compaction changed function {int(differs[0])}'s {what}")
    old_scan, new_scan = scan_rows(before), scan_rows(after)
    known: dict[object, int] = {}
    old_rules = _rule_ids(before, old_scan, known)
    new_rules = _rule_ids(after, new_scan, known)
    differs = np.flatnonzero(
        (old_scan.start_offset != new_scan.start_offset) | (old_rules != new_rules)
    )
    if len(differs):
        row = int(differs[0])
        function = int(np.searchsorted(old_scan.row_base, row, side="right")) - 1
        number = row - int(old_scan.row_base[function])
        raise EncodeError(f"compaction changed FRE {number} of function {function}")


def _rule_ids(section: SFrameSection, scan: RowScan, known: dict[object, int]) -> I64:
    """Per row a number naming its rules (CFA, FP, RA, mangled RA), shared through ``known``."""
    ids = []
    for form in scan.forms:
        ctx = row_context(section.header, int(FdeType.FLEX) if form.flex else 0)
        size = 1 << fre_word_size_code(form.info)
        rules = (*decode_rules(ctx, form.info, form.words, size), fre_mangled_ra(form.info))
        ids.append(known.setdefault(rules, len(known)))
    return np.asarray(ids, dtype=np.int64)[scan.form] if ids else np.zeros(0, dtype=np.int64)


__all__ = [
    "NO_TRICKS",
    "CompactOptions",
    "Compacted",
    "check_same_rows",
    "compact_section",
    "safe_to_share",
]
