"""Walking FREs: where each FRE of a function is, how long it is, and whether it lies inside the
FRE sub-section.  The only code that steps from one FRE to the next; every layout comes from
:mod:`pysframe.format.layout` (V2 spec 2.4: start address of 1, 2 or 4 bytes by FRE type, u8
info, then ``count`` data words of 1, 2 or 4 bytes).

A walk checks, FRE after FRE: the start address and info byte lie in the sub-section, the
data-word size code is not 3, the data words lie in the sub-section.  Two entry points share
those checks and the layout:

* :func:`walk_fres`, scalar: one function's FREs as they are stored, for validation and for
  :func:`read_rows`, which also decodes their rules (for
  :func:`pysframe.format.decode.decode_rows`).  A problem stops the walk and is returned, so
  that each caller reports it its own way.
* :func:`locate_fres`, bulk: every FRE of a section at once.  Step j reads the j-th FRE of
  every function that has one, functions ordered by descending FRE count so that the ones
  still walking are a prefix; an FRE's length comes from a table indexed by FRE type and
  info.  Once only a few functions are still walking, each finishes alone
  (:func:`step_fres`, the same table in a loop), so that a
  function of millions of FREs does not cost a bulk step per FRE.  On a problem the scalar
  walk runs over the functions in order, so that the error raised is the one it finds
  first.  :func:`fre_infos` gives every FRE's info byte, :func:`fre_ends` where each
  function's FREs end.

:func:`scan_rows` reads every row of a section in bulk for whole-section work (the dump, the
batch lookup's row table): positions, start offsets, and the row *forms*: the FDE type (FLEX
or not) with the info byte and data-word bytes.  Real sections have a few hundred forms for
hundreds of thousands of rows; each form is checked once with :func:`decode_rules`.  On any
problem every function's rows are decoded in order (:func:`read_rows`), so that the error
raised is the one :func:`~pysframe.format.decode.decode_rows` raises first.
:func:`scan_stored_rows` reads them the same way for validation, which checks the words its
own way: only FLEX rows are grouped into forms, the others' checks depend on the info byte.

The whole-section entry points take a :class:`~pysframe.format.view.SectionView` (bytes,
header, FDE table), not the section type; they import numpy when they run, the scalar walk
never does.
"""

from __future__ import annotations

from array import array
from functools import cache
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from ..dataclass import dataclass
from ..errors import InvalidFieldError, SFrameError, TruncatedError
from .constants import FdeType, FreType
from .layout import (
    FRE_BAD_WORD_SIZE,
    FRE_INFO_SIZE,
    byte_order,
    fde_fre_type,
    fde_type_of,
    fre_address_size,
    fre_address_struct,
    fre_length,
    fre_word_count,
    fre_word_size,
    fre_word_size_code,
    fre_words_struct,
    word_mask,
)
from .rules import Rules, decode_rules, row_context

if TYPE_CHECKING:
    import struct

    import numpy as np
    import numpy.typing as npt

    from ..bounded import BoundedCache
    from .model import Header
    from .view import Buffer, SectionView

I64: TypeAlias = "npt.NDArray[np.int64]"


# -- one function ---------------------------------------------------------------------------------

#: One FRE as stored: (byte position, start offset, info byte, data words as signed integers).
RawFre = tuple[int, int, int, tuple[int, ...]]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class WalkProblem:
    """Why a walk stopped at FRE ``number``: ``truncated`` (it or its data words run past the
    FRE sub-section) or else an invalid data-word size code; ``offset`` is where."""

    number: int
    offset: int
    message: str
    truncated: bool

    def error(self, function: int) -> SFrameError:
        """The decoder's error for this problem in function ``function``."""
        kind = TruncatedError if self.truncated else InvalidFieldError
        return kind(self.message, self.offset, function=function)


class FreWalk(NamedTuple):
    """The FREs read, the byte position after the last one, and the problem that stopped the
    walk (None: every FRE was read)."""

    fres: list[RawFre]
    end: int
    problem: WalkProblem | None


@cache
def _info_table(big_endian: bool) -> tuple[tuple[int, struct.Struct | None], ...]:
    """Per info byte: bytes of its data words, and their struct (None: size code 3)."""
    table: list[tuple[int, struct.Struct | None]] = []
    for info in range(256):
        size_code, count = fre_word_size_code(info), fre_word_count(info)
        if size_code == FRE_BAD_WORD_SIZE:
            table.append((0, None))
        else:
            words = fre_words_struct(size_code, count, big_endian)
            table.append((count * fre_word_size(info), words))
    return tuple(table)


#: Far past any section: the "length" of an FRE with the invalid data-word size code.
_TOO_LONG = 1 << 40


@cache
def fre_lengths(fre_type: int) -> tuple[int, ...]:
    """Bytes of an FRE of ``fre_type`` by info byte (start address, info, data words);
    far too many for the invalid data-word size code."""
    return tuple(
        _TOO_LONG if fre_word_size_code(info) == FRE_BAD_WORD_SIZE else fre_length(fre_type, info)
        for info in range(256)
    )


def step_fres(
    data: Buffer, fre_type: int, position: int, count: int, end: int, out: array[int], base: int
) -> int:
    """Append to ``out`` the position (less ``base``) of each of ``count`` FREs from byte
    ``position`` on, and return the byte after the last one.

    It stops early, before an FRE whose info byte is not before ``end``; an FRE running past
    ``end`` makes the returned position pass it.  Either way the walk is not sound:
    ``len(out)`` short of ``count``, or the result past ``end``; the checked walk
    (:func:`pysframe.format.walk.walk_fres`) then says why."""
    lengths = fre_lengths(fre_type)
    at_info = fre_address_size(fre_type)
    last = end - FRE_INFO_SIZE - at_info  # the last position whose info byte is before end
    append = out.append
    for _ in range(count):
        if position > last:
            break
        append(position - base)
        position += lengths[data[position + at_info]]
    return position


def walk_fres(
    data: Buffer, header: Header, fre_type: int, position: int, count: int, first: int = 0
) -> FreWalk:
    """Read ``count`` FREs of FRE type ``fre_type`` from byte ``position`` on, each checked;
    the first is FRE number ``first`` of its function (for the problem's message)."""
    address_size = fre_address_size(fre_type)
    unpack_address = fre_address_struct(fre_type, header.big_endian).unpack_from
    words_of = _info_table(header.big_endian)
    end = header.fre_end
    fres: list[RawFre] = []
    for number in range(first, first + count):
        info_at = position + address_size
        if info_at + FRE_INFO_SIZE > end:
            message = f"FRE {number} runs past the FRE sub-section"
            return FreWalk(fres, position, WalkProblem(number, position, message, True))
        info = data[info_at]
        words_bytes, words = words_of[info]
        if words is None:
            message = f"FRE {number} has invalid data-word size code {FRE_BAD_WORD_SIZE}"
            return FreWalk(fres, position, WalkProblem(number, info_at, message, False))
        words_at = info_at + FRE_INFO_SIZE
        following = words_at + words_bytes
        if following > end:
            message = f"data words of FRE {number} run past the FRE sub-section"
            return FreWalk(fres, position, WalkProblem(number, position, message, True))
        fres.append(
            (position, unpack_address(data, position)[0], info, words.unpack_from(data, words_at))
        )
        position = following
    return FreWalk(fres, position, None)


#: One FRE decoded: its start offset, info byte, data words and (cfa, fp, ra) rules.
DecodedFre = tuple[int, int, tuple[int, ...], Rules]


def read_rows(
    data: Buffer,
    header: Header,
    function: int,
    fre_type: int,
    position: int,
    count: int,
    info2: int,
    known: BoundedCache[tuple[int, int, tuple[int, ...]], Rules] | None = None,
) -> list[DecodedFre]:
    """Walk function ``function``'s ``count`` FREs from byte ``position`` on and decode their
    rules (FDE type from ``info2``); raise the first problem in FRE order, as the decoder
    reports it.  ``known``: rules decoded before, by (info2, info, words), which the caller
    keeps (a section's lookups: real sections repeat a few hundred forms)."""
    walk = walk_fres(data, header, fre_type, position, count)
    ctx = row_context(header, info2)
    decoded = []
    for at, start_offset, info, words in walk.fres:
        size = fre_word_size(info)
        if known is None:
            rules = decode_rules(ctx, info, words, size, at)
        else:
            rules = known.get((info2, info, words), decode_rules, ctx, info, words, size, at)
        decoded.append((start_offset, info, words, rules))
    if walk.problem is not None:
        raise walk.problem.error(function)
    return decoded


def _raise_first_walk_error(view: SectionView) -> None:
    header, table = view.header, view.table
    types, first, counts = (
        fde_fre_type(table.info).tolist(),
        table.fre_data.tolist(),
        table.num_rows.tolist(),
    )
    for index, (fre_type, position, count) in enumerate(zip(types, first, counts, strict=True)):
        problem = walk_fres(view.data, header, fre_type, position, count).problem
        if problem is not None:
            raise problem.error(index)


def _raise_first_row_error(view: SectionView) -> None:
    """Decode every function's rows in order: the first problem is raised."""
    header, table = view.header, view.table
    columns = zip(
        fde_fre_type(table.info).tolist(),
        table.fre_data.tolist(),
        table.num_rows.tolist(),
        table.info2.tolist(),
        strict=True,
    )
    for index, (fre_type, position, count, info2) in enumerate(columns):
        read_rows(view.data, header, index, fre_type, position, count, info2)


# -- every function at once -----------------------------------------------------------------------

@cache
def _fre_lengths() -> I64:
    """Bytes of an FRE by ``fre_type * 256 + info`` (:func:`fre_lengths` of each FRE type)."""
    import numpy as np

    return np.array([fre_lengths(fre_type) for fre_type in FreType], dtype=np.int64).reshape(-1)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class FreLocations:
    """Function i's FREs are ``row_base[i]:row_base[i + 1]``; per FRE its byte position, its
    FRE type and where its info byte is."""

    row_base: I64
    position: I64
    fre_type: I64
    info_at: I64


def locate_fres(view: SectionView) -> FreLocations:
    """Every FRE's position, each checked as :func:`walk_fres` checks it."""
    try:
        return _locate(view)
    except SFrameError:
        _raise_first_walk_error(view)
        raise


def fre_infos(view: SectionView) -> I64:
    """The info byte of every FRE of the section, functions in stored order."""
    import numpy as np

    located = locate_fres(view)
    octets = np.frombuffer(view.data, dtype=np.uint8)
    return octets[located.info_at].astype(np.int64)


def _locate(view: SectionView) -> FreLocations:
    import numpy as np

    table = view.table
    octets = np.frombuffer(view.data, dtype=np.uint8)
    row_base = np.zeros(len(table) + 1, dtype=np.int64)
    np.cumsum(table.num_rows, out=row_base[1:])
    fre_type = fde_fre_type(table.info)  # 0-2, checked when the FDEs were read
    order = np.argsort(-table.num_rows, kind="stable")
    counts = table.num_rows[order]
    cursor = table.fre_data[order].astype(np.int64)
    info_offset = fre_address_size(fre_type[order])
    length_row = fre_type[order] * 256
    base = row_base[:-1][order]
    longest = int(counts[0]) if len(counts) else 0
    # Functions with more than `step` FREs: a prefix of `order`, of this many functions.
    walking = np.searchsorted(-counts, -np.arange(longest), side="left")
    position = np.empty(int(row_base[-1]), dtype=np.int64)
    lengths = _fre_lengths()
    step = 0
    for step, k in enumerate(walking.tolist()):
        if k <= _FEW_WALKING:
            break
        at = cursor[:k]
        # mode="clip": a read past the end only happens for an FRE that fails the check below.
        info = octets.take(at + info_offset[:k], mode="clip")
        following = at + lengths[length_row[:k] + info]
        position[base[:k] + step] = at
        cursor[:k] = following
    else:
        step = longest
    _finish_alone(view, fre_type[order], cursor, counts, base, position, step)
    # Each function's cursor only grows, so its last value shows whether any FRE ran over.
    if len(cursor) and int(cursor.max()) > view.header.fre_end:
        raise TruncatedError("an FRE runs past the FRE sub-section", None)
    type_of_row = np.repeat(fre_type, table.num_rows)
    info_at = position + fre_address_size(type_of_row)
    return FreLocations(row_base, position, type_of_row, info_at)


#: When at most this many functions are still walking, each finishes on its own: a step of
#: the bulk walk costs some microseconds whatever the number of functions it moves, a scalar
#: step (:func:`step_fres`) a fraction of one.  So every bulk step
#: moves more than this many FREs, and a function of millions of FREs is walked in one loop.
_FEW_WALKING = 32


def _finish_alone(
    view: SectionView,
    fre_type: I64,
    cursor: I64,
    counts: I64,
    base: I64,
    position: I64,
    step: int,
) -> None:
    """Walk the FREs from ``step`` on of the functions that have more (a prefix of the
    order), one function at a time; their ``cursor`` passes the FRE sub-section's end if one
    runs past it."""
    import numpy as np

    end = view.header.fre_end
    for k in range(int(np.count_nonzero(counts > step))):
        stepped = array("q")
        remaining = int(counts[k]) - step
        following = step_fres(
            view.data, int(fre_type[k]), int(cursor[k]), remaining, end, stepped, 0
        )
        first = int(base[k]) + step
        position[first : first + len(stepped)] = np.frombuffer(stepped, dtype=np.int64)
        cursor[k] = following if len(stepped) == remaining else end + 1


def fre_ends(view: SectionView, located: FreLocations) -> I64:
    """The byte where each function's FREs end (where they would start, for a function
    without any): its last FRE's position and length."""
    import numpy as np

    table = view.table
    end = table.fre_data.copy()
    has_rows = table.num_rows > 0
    last = located.row_base[1:][has_rows] - 1
    info = np.frombuffer(view.data, dtype=np.uint8)[located.info_at[last]]
    end[has_rows] = located.position[last] + _fre_lengths()[located.fre_type[last] * 256 + info]
    return end


# -- every row at once, grouped by form -----------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RowForm:
    """What a row's dumped cells depend on, besides the header: FDE type, info byte, words."""

    flex: bool
    info: int
    words: tuple[int, ...]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RowScan:
    """Function i's rows are ``row_base[i]:row_base[i + 1]``; per row its raw start offset
    and the index of its form in ``forms``, whose rules (cfa, fp, ra) are ``rules``."""

    row_base: I64
    start_offset: I64
    form: I64
    forms: tuple[RowForm, ...]
    rules: tuple[Rules, ...]


def scan_rows(view: SectionView) -> RowScan:
    """Read and check every FRE of the section, as decode_rows would one function at a time
    (the rules of each distinct form decoded once)."""
    try:
        return _scan(view)
    except SFrameError:
        _raise_first_row_error(view)
        raise


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class StoredRows:
    """Every FRE as stored: function i's are ``row_base[i]:row_base[i + 1]`` and end at byte
    ``end[i]``; per FRE its raw start offset, its info byte, and for the FREs of FLEX
    functions the index of their form in ``flex_forms`` (-1 for the others, whose meaning the
    info byte alone gives)."""

    row_base: I64
    end: I64
    start_offset: I64
    info: I64
    flex_form: I64
    flex_forms: tuple[RowForm, ...]


def scan_stored_rows(view: SectionView) -> StoredRows:
    """Every FRE of the section as stored, each checked as :func:`walk_fres` checks it (the
    same error), for validation, which checks the words its own way: only FLEX rows, whose
    words are control words, are grouped into forms."""
    import numpy as np

    located = locate_fres(view)
    table = view.table
    octets = np.frombuffer(view.data, dtype=np.uint8)
    padded = np.concatenate((octets, np.zeros(72, dtype=np.uint8)))  # as in _scan
    start_offset = _start_offsets(padded, located, view.header.big_endian)
    info = octets[located.info_at].astype(np.int64)
    flex = np.flatnonzero(np.repeat(fde_type_of(table.info2) == FdeType.FLEX, table.num_rows))
    flex_form = np.full(len(info), -1, dtype=np.int64)
    forms: tuple[RowForm, ...] = ()
    if len(flex):
        info_at = located.info_at[flex]
        tail = located.position[flex] + _fre_lengths()[located.fre_type[flex] * 256 + info[flex]]
        form, first = _group(padded, info_at, tail - info_at, np.ones(len(flex), dtype=bool))
        flex_form[flex] = form
        forms = tuple(_form(view, int(info_at[r]), True) for r in first.tolist())
    end = fre_ends(view, located)
    return StoredRows(located.row_base, end, start_offset, info, flex_form, forms)


def _scan(view: SectionView) -> RowScan:
    import numpy as np

    header, table = view.header, view.table
    located = _locate(view)
    octets = np.frombuffer(view.data, dtype=np.uint8)
    # Every row at once (the walk checked that every FRE lies in the sub-section).
    info_at = located.info_at
    tail = located.position + _fre_lengths()[located.fre_type * 256 + octets[info_at]] - info_at
    # Room for reading whole 8-byte chunks of the longest FRE (61 bytes from its info byte).
    padded = np.concatenate((octets, np.zeros(72, dtype=np.uint8)))
    start_offset = _start_offsets(padded, located, header.big_endian)
    flex = np.repeat(fde_type_of(table.info2) == FdeType.FLEX, table.num_rows)
    form, first = _group(padded, info_at, tail, flex)
    position = located.position
    contexts = (row_context(header, 0), row_context(header, int(FdeType.FLEX)))
    forms, rules = [], []
    for r in first.tolist():
        row_form = _form(view, int(info_at[r]), bool(flex[r]))
        forms.append(row_form)
        # Checked as decode_rows checks each row's, and decoded: once per form.
        info, words = row_form.info, row_form.words
        rules.append(decode_rules(
            contexts[row_form.flex], info, words, fre_word_size(info), int(position[r])
        ))  # fmt: skip
    return RowScan(located.row_base, start_offset, form, tuple(forms), tuple(rules))


def _start_offsets(padded: npt.NDArray[np.uint8], located: FreLocations, big_endian: bool) -> I64:
    """The unsigned 1-, 2- or 4-byte start address at each FRE's position."""
    import numpy as np

    u32 = _every_byte(padded, byte_order(big_endian) + "u4")
    raw = u32[located.position].astype(np.int64)
    bits = 8 * fre_address_size(located.fre_type)
    if big_endian:
        return raw >> (32 - bits)
    return raw & ((1 << bits) - 1)


def _every_byte(padded: npt.NDArray[np.uint8], dtype: str) -> npt.NDArray[np.uint64]:
    """A view holding the ``dtype`` value that starts at every byte of ``padded``."""
    import numpy as np

    size = np.dtype(dtype).itemsize
    view: npt.NDArray[np.uint64] = np.ndarray(
        (len(padded) - size + 1,), dtype=dtype, buffer=padded, strides=(1,)
    )
    return view


#: Odd multiplier of the key hash.
_MIX = 0x9E3779B97F4A7C15
#: The bits of the low n bytes of a 64-bit word, n from 0 to 8.
_LOW_BYTES = tuple(word_mask(n) for n in range(9))


def _group(
    padded: npt.NDArray[np.uint8], info_at: I64, tail: I64, flex: npt.NDArray[np.bool_]
) -> tuple[I64, I64]:
    """Per row the index of its form, and the first row of each form.

    A form's key is the row's ``tail`` bytes from the info byte on, 8 at a time (bytes past
    the row masked off), and its FDE type."""
    import numpy as np

    u64 = _every_byte(padded, "<u8")
    low_bytes = np.array(_LOW_BYTES, dtype=np.uint64)
    mix = np.uint64(_MIX)
    longest = int(tail.max()) if len(tail) else 0
    columns = []
    for chunk in range(0, longest, 8):
        keep = low_bytes[np.clip(tail - chunk, 0, 8)]
        columns.append(u64[info_at + chunk] & keep)
    if bool(flex.any()):
        columns.append(flex.astype(np.uint64))
    if not columns:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # One 64-bit key per row: the columns mixed into a hash, checked below.  Sorting the
    # keys (a vectorized sort) and searching them is several times faster than np.unique.
    key = columns[0]
    for column in columns[1:]:
        key = key * mix + column
    ordered = np.sort(key)
    distinct = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    form = np.searchsorted(distinct, key)
    first = np.empty(len(distinct), dtype=np.int64)
    first[form] = np.arange(len(key))  # a row of each form, whichever
    if len(columns) > 1 and not all(np.array_equal(c, c[first][form]) for c in columns):
        # Two forms share a hash: sort on the whole keys (slower).
        whole = np.column_stack(columns)
        _, first, form = np.unique(whole, return_index=True, return_inverse=True, axis=0)
    return form.reshape(-1).astype(np.int64), first.astype(np.int64)


def _form(view: SectionView, info_at: int, flex: bool) -> RowForm:
    """The form of the FRE whose info byte is at ``info_at``: its info byte and words."""
    info = view.data[info_at]
    size_code, count = fre_word_size_code(info), fre_word_count(info)
    words: tuple[int, ...] = fre_words_struct(
        size_code, count, view.header.big_endian
    ).unpack_from(view.data, info_at + FRE_INFO_SIZE)
    return RowForm(flex, info, words)
