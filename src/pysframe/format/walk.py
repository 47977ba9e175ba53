"""Walking FREs: where each FRE of a function is, how long it is, and whether it lies inside the
FRE sub-section.  The only code that steps from one FRE to the next; every layout comes from
:mod:`pysframe.format.layout` (V2 spec 2.4: start address of 1, 2 or 4 bytes by FRE type, u8
info, then ``count`` data words of 1, 2 or 4 bytes).

A walk checks, FRE after FRE: the start address and info byte lie in the sub-section, the
data-word size code is not 3, the data words lie in the sub-section.  Two entry points share
those checks and the layout:

* :func:`walk_fres`, one function: its FREs as they are stored, for :func:`read_rows`, which
  also decodes their rules (for :func:`pysframe.format.decode.decode_rows` and a lookup of
  one PC).  A problem stops the walk and is returned, worded, so that each caller reports it
  its own way.
* :func:`locate_fres`, every FRE of a section at once.  Step j reads the j-th FRE of every
  function that has one, functions ordered by descending FRE count so that the ones still
  walking are a prefix; an FRE's length comes from a table indexed by FRE type and info.
  Once only a few functions are still walking, each finishes alone (:func:`step_fres`, the
  same table in a loop), so that a function of millions of FREs does not cost a bulk step
  per FRE.  An FRE that does not end inside the sub-section is unsound, and so is every FRE
  of its function after it; the first, in function and FRE order, is raised, worded by the
  walk of that one FRE (:func:`walk_problem`).  :func:`fre_infos` gives every FRE's info
  byte, :func:`fre_ends` where each function's FREs end.

:func:`scan_rows` reads every row of a section in bulk for whole-section work (the dump, the
batch lookup's row table, conversion): positions, start offsets, and the row *forms*: the FDE
type (FLEX or not) with the info byte and data-word bytes.  Real sections have a few hundred
forms for hundreds of thousands of rows; each form is checked once with :func:`decode_rules`.
The first row that is unsound or of a form that does not decode is raised as
:func:`~pysframe.format.decode.decode_rows` raises it (:func:`scan_rows_until_error` also
gives the rows of the functions before it).  :func:`scan_stored_rows` reads them the same
way for validation, which checks the words its own way (only FLEX rows are grouped into
forms, the others' checks depend on the info byte) and reports every function whose walk
stops, not only the first.

The whole-section entry points take a :class:`~pysframe.format.view.SectionView` (bytes,
header, FDE table), not the section type; they import numpy when they run, the one-function
walk never does.
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
from .rules import RowContext, Rules, decode_rules, row_context

if TYPE_CHECKING:
    import struct

    import numpy as np
    import numpy.typing as npt

    from ..bounded import BoundedCache
    from .model import Header
    from .view import Buffer, SectionView

I64: TypeAlias = "npt.NDArray[np.int64]"
Bools: TypeAlias = "npt.NDArray[np.bool_]"


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
    """Every FRE's position, each checked as :func:`walk_fres` checks it: the first problem,
    in function and FRE order, is raised as the decoder raises it."""
    located, unsound = _locate(view)
    if unsound is not None:
        first = int(unsound.argmax())
        raise walk_problem(view, located, first).error(_function_of(located, first))
    return located


def fre_infos(view: SectionView) -> I64:
    """The info byte of every FRE of the section, functions in stored order."""
    import numpy as np

    located = locate_fres(view)
    octets = np.frombuffer(view.data, dtype=np.uint8)
    return octets[located.info_at].astype(np.int64)


def _locate(view: SectionView) -> tuple[FreLocations, Bools | None]:
    """Every FRE located, and per FRE whether the walk finds it unsound (None: none is).  The
    FREs of a function from its first unsound one on are all unsound (their positions mean
    nothing)."""
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
    type_of_row = np.repeat(fre_type, table.num_rows)
    info_at = position + fre_address_size(type_of_row)
    located = FreLocations(row_base, position, type_of_row, info_at)
    end = view.header.fre_end
    # Each function's cursor only grows, so its last value shows whether any FRE ran over.
    if not len(cursor) or int(cursor.max()) <= end:
        return located, None
    # An FRE is sound when it ends inside the sub-section: its info byte lies there, its
    # data-word size code is not 3 (far too long) and its words lie there.
    info = octets.take(info_at, mode="clip")
    return located, position + lengths[type_of_row * 256 + info] > end


def _function_of(located: FreLocations, row: int) -> int:
    """The function FRE ``row`` (of every FRE, in stored order) belongs to."""
    import numpy as np

    return int(np.searchsorted(located.row_base, row, side="right")) - 1


def walk_problem(view: SectionView, located: FreLocations, row: int) -> WalkProblem:
    """Why the walk stops at FRE ``row``, the first unsound FRE of its function: the checked
    walk (:func:`walk_fres`) of that FRE alone says it, in the decoder's words."""
    number = row - int(located.row_base[_function_of(located, row)])
    position, fre_type = int(located.position[row]), int(located.fre_type[row])
    problem = walk_fres(view.data, view.header, fre_type, position, 1, number).problem
    if problem is None:
        raise AssertionError(f"the walk finds FRE {number} at {position:#x} sound")
    return problem


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
        if len(stepped) < remaining:  # stopped before an FRE whose info byte is past end
            position[first + len(stepped)] = following
            position[first + len(stepped) + 1 : first + remaining] = end + 1
            following = end + 1
        cursor[k] = following


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
    (the rules of each distinct form decoded once); raise the first problem, in function and
    FRE order, as decode_rows raises it."""
    scan, problem = scan_rows_until_error(view)
    if problem is not None:
        raise problem
    return scan


def scan_rows_until_error(view: SectionView) -> tuple[RowScan, SFrameError | None]:
    """:func:`scan_rows`, and where a row does not decode, the scan of the functions before
    the first that has one, with the error :func:`scan_rows` raises (else None)."""
    import numpy as np

    header, table = view.header, view.table
    located, unsound = _locate(view)
    # The rows before the first unsound one are sound: they are grouped into forms.
    sound = len(located.position) if unsound is None else int(unsound.argmax())
    octets = np.frombuffer(view.data, dtype=np.uint8)
    info_at = located.info_at[:sound]
    length = _fre_lengths()[located.fre_type[:sound] * 256 + octets[info_at]]
    tail = located.position[:sound] + length - info_at
    # Room for reading whole 8-byte chunks of the longest FRE (61 bytes from its info byte).
    padded = np.concatenate((octets, np.zeros(72, dtype=np.uint8)))
    start_offset = _start_offsets(padded, located, header.big_endian, sound)
    flex = np.repeat(fde_type_of(table.info2) == FdeType.FLEX, table.num_rows)[:sound]
    form, first = _group(padded, info_at, tail, flex)
    contexts = (row_context(header, 0), row_context(header, int(FdeType.FLEX)))
    forms, rules, failing = [], [], []
    for index, r in enumerate(first.tolist()):
        row_form = fre_form(view, int(info_at[r]), bool(flex[r]))
        # Checked as decode_rows checks each row's, and decoded: once per form.
        try:
            rules.append(_decode(contexts, row_form, None))
        except SFrameError:
            failing.append(index)
            continue
        forms.append(row_form)
    scan = RowScan(located.row_base, start_offset, form, tuple(forms), tuple(rules))
    if not failing and unsound is None:
        return scan, None
    # The first row that does not decode: the first unsound one, or an earlier one of a form
    # whose rules do not decode.
    bad_form = np.zeros(len(first), dtype=bool)
    bad_form[failing] = True
    decoded = bad_form[form]
    row = int(decoded.argmax()) if bool(decoded.any()) else sound
    function = _function_of(located, row)
    if row < sound:
        row_form = fre_form(view, int(info_at[row]), bool(flex[row]))
        try:
            _decode(contexts, row_form, int(located.position[row]))
        except SFrameError as error:
            problem = error
        else:
            raise AssertionError(f"row {row} of a form that does not decode decodes")
    else:
        problem = walk_problem(view, located, row).error(function)
    # The functions before: their rows use forms that decode, renumbered without the others.
    rows = int(located.row_base[function])
    renumbered = np.cumsum(~bad_form) - 1
    before = RowScan(
        located.row_base[: function + 1],
        start_offset[:rows],
        renumbered[form[:rows]],
        tuple(forms),
        tuple(rules),
    )
    return before, problem


def _decode(contexts: tuple[RowContext, RowContext], form: RowForm, at: int | None) -> Rules:
    """The rules of the rows of ``form`` (a row at byte ``at``, for the error's offset)."""
    info, words = form.info, form.words
    return decode_rules(contexts[form.flex], info, words, fre_word_size(info), at)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class StoredRows:
    """Every FRE as stored: where each is (``located``), where each function's FREs end
    (``end``); per FRE its raw start offset, its info byte, and for the FREs of FLEX functions
    the index of their form in ``flex_forms`` (-1 for the others, whose meaning the info byte
    alone gives).  ``unsound``: per FRE whether the walk stops at it or stopped before (None:
    none); a function with such FREs ends where the FRE sub-section does, and the fields of
    those FREs mean nothing."""

    located: FreLocations
    end: I64
    start_offset: I64
    info: I64
    flex_form: I64
    flex_forms: tuple[RowForm, ...]
    unsound: Bools | None


def scan_stored_rows(view: SectionView) -> StoredRows:
    """Every FRE of the section as stored, each checked as :func:`walk_fres` checks it, for
    validation, which checks the words its own way: only FLEX rows, whose words are control
    words, are grouped into forms.  A walk that stops does not stop the others."""
    import numpy as np

    located, unsound = _locate(view)
    table = view.table
    octets = np.frombuffer(view.data, dtype=np.uint8)
    padded = np.concatenate((octets, np.zeros(72, dtype=np.uint8)))  # as in scan_rows
    sound = located
    if unsound is not None:  # read the unsound FREs at the first byte, so that reads stay in
        position = np.where(unsound, 0, located.position)
        info_at = np.where(unsound, 0, located.info_at)
        sound = FreLocations(located.row_base, position, located.fre_type, info_at)
    start_offset = _start_offsets(padded, sound, view.header.big_endian, len(sound.position))
    info = octets[sound.info_at].astype(np.int64)
    flex_row = np.repeat(fde_type_of(table.info2) == FdeType.FLEX, table.num_rows)
    if unsound is not None:
        flex_row &= ~unsound
    flex = np.flatnonzero(flex_row)
    flex_form = np.full(len(info), -1, dtype=np.int64)
    forms: tuple[RowForm, ...] = ()
    if len(flex):
        info_at = sound.info_at[flex]
        tail = sound.position[flex] + _fre_lengths()[sound.fre_type[flex] * 256 + info[flex]]
        form, first = _group(padded, info_at, tail - info_at, np.ones(len(flex), dtype=bool))
        flex_form[flex] = form
        forms = tuple(fre_form(view, int(info_at[r]), True) for r in first.tolist())
    end = fre_ends(view, sound)
    if unsound is not None:
        end[np.repeat(np.arange(len(table)), table.num_rows)[unsound]] = view.header.fre_end
    return StoredRows(located, end, start_offset, info, flex_form, forms, unsound)


def _start_offsets(
    padded: npt.NDArray[np.uint8], located: FreLocations, big_endian: bool, rows: int
) -> I64:
    """The unsigned 1-, 2- or 4-byte start address at the position of each of the first
    ``rows`` FREs."""
    import numpy as np

    u32 = _every_byte(padded, byte_order(big_endian) + "u4")
    raw = u32[located.position[:rows]].astype(np.int64)
    bits = 8 * fre_address_size(located.fre_type[:rows])
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


def fre_form(view: SectionView, info_at: int, flex: bool) -> RowForm:
    """The form of the FRE whose info byte is at ``info_at``: its info byte and words."""
    info = view.data[info_at]
    size_code, count = fre_word_size_code(info), fre_word_count(info)
    words: tuple[int, ...] = fre_words_struct(
        size_code, count, view.header.big_endian
    ).unpack_from(view.data, info_at + FRE_INFO_SIZE)
    return RowForm(flex, info, words)
