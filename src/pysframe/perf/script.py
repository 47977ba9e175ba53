"""A profile as ``perf script`` prints it, so that what reads perf's text (FlameGraph's
stackcollapse-perf.pl, speedscope, the Firefox Profiler) reads this too.

Each sample, in time order as perf orders them (stable for equal times): a header line with
the fields perf prints by default for a sampling event (builtin-script.c
perf_sample__fprintf_start: the command name, the thread id as ``%5d``, the CPU as
``[%03d]`` where the samples have one, the time in seconds with microseconds as ``%12s``, the
period as ``%10lu``, the event name as wide as the longest), then, for an event with
callchains, one line per frame, innermost first (``\\t%16lx SYMBOL+0xOFFSET (MODULE)``,
``[unknown]`` without a name; an inline entry, perf's default, says ``(inlined)`` instead of
its module), then an empty line; for an event without, the sample's address, symbol and
module on its header line.  ``perf script -F`` chooses the fields (:func:`script_fields`).
Deferred user callchains (Linux 6.19, deferred.py): a merged sample is printed when perf
delivers it, once its chain came; an unmerged one shows its cookie as perf does
(``(cookie)``), and ``--no-merge-callchain`` prints each CALLCHAIN_DEFERRED record apart.

One difference from perf, on purpose: control characters and line separators in a command,
function, module or event name are escaped (``\\x0a`` for a newline:
:func:`pysframe.names.escape_controls`), so that every sample stays one header line and its
frame lines; perf prints them as they are, and a newline in a name breaks its text into lines
no reader can parse.  Other names are printed as perf prints them, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TextIO

from ..dataclass import dataclass
from ..names import escape_controls
from .profile import UNKNOWN, DeferredChain, FrameInfo, Profile

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .forked import Spooled


def _event_width(profile: Profile) -> int:
    """The width perf prints event names in: the longest name of the recording's events
    (builtin-script.c process_event: ``%*s``, evlist__max_name_len), each right-aligned."""
    return max((len(escape_controls(name)) for name, _unit in profile.events), default=0)


def deferred_lines(profile: Profile, chain: DeferredChain, frames: list[str]) -> str:
    """A deferred user callchain as ``perf script --no-merge-callchain`` prints a
    CALLCHAIN_DEFERRED record (builtin-script.c process_deferred_sample_event, Linux 6.19):
    the command, thread and time as a sample's header has them, ``DEFERRED CALLCHAIN
    [cookie: HEX]``, then its frames (``frames``: their lines) and an empty line."""
    stamp = f"{chain.time // 1_000_000_000}.{chain.time % 1_000_000_000 // 1000:06d}"
    comm = escape_controls(profile.comms[chain.comm])
    header = f"{comm} {chain.tid:5d} {stamp:>12}: DEFERRED CALLCHAIN [cookie: {chain.cookie:x}]\n"
    return header + "".join(frames) + "\n"


#: perf script's ``-F`` fields that the text has, in perf's order (builtin-script.c
#: all_output_options), and the others perf 6.1 knows.
FIELDS = (
    "comm", "tid", "pid", "time", "cpu", "event", "ip", "sym", "dso", "symoff", "srcline",
    "period",
)  # fmt: skip
PERF_FIELDS = (
    "comm", "tid", "pid", "time", "cpu", "event", "trace", "ip", "sym", "dso", "addr",
    "symoff", "srcline", "period", "iregs", "uregs", "brstack", "brstacksym", "flags",
    "data_src", "weight", "bpf-output", "brstackinsn", "brstackinsnlen", "brstackoff",
    "callindent", "insn", "insnlen", "synth", "phys_addr", "metric", "misc", "srccode", "ipc",
    "tod", "data_page_size", "code_page_size", "ins_lat",
)  # fmt: skip
#: The fields perf prints of a sampling event by default (output[PERF_TYPE_SOFTWARE]:
#: bpf-output aside); ``cpu`` only where the samples have it.
DEFAULT_FIELDS = frozenset(
    {"comm", "tid", "cpu", "time", "event", "ip", "sym", "symoff", "dso", "period"}
)


class FieldError(ValueError):
    """A ``-F`` list perf would refuse (its message), or one with a field perf knows that the
    text does not have (``supported`` False: the field's name)."""

    def __init__(self, message: str, unsupported: str | None = None) -> None:
        super().__init__(message)
        self.unsupported = unsupported


def parse_fields(text: str) -> tuple[frozenset[str] | None, frozenset[str], frozenset[str]]:
    """perf script's ``-F`` (builtin-script.c parse_output_fields): a list of fields that
    replaces the default (returned first; None when the list only changes it), or fields
    to add (``+field``) and to remove (``-field``), returned second and third.  A list may
    not mix both ways; FieldError for that, for a field perf does not know, and for one the
    text does not have."""
    chosen: set[str] = set()
    added: set[str] = set()
    removed: set[str] = set()
    mode = None
    if ":" in text:
        raise FieldError("an event type (hw:, sw:...)", "an event type (hw:, sw:...)")
    for token in text.split(","):
        change = "set"
        if token.startswith(("+", "-")):
            change = "add" if token[0] == "+" else "remove"
            token = token[1:]
        if mode is not None and (mode == "set") != (change == "set"):
            raise FieldError("Cannot mix +-field with overridden fields")
        mode = change
        if token not in PERF_FIELDS:
            raise FieldError(f"Invalid field requested: {token!r}")
        if token not in FIELDS:
            raise FieldError(token, token)
        {"set": chosen, "add": added, "remove": removed}[change].add(token)
    return (frozenset(chosen) if mode == "set" else None), frozenset(added), frozenset(removed)


@dataclass(frozen=True, slots=True)
class ScriptFields:
    """What perf script prints of each sample: ``fields`` (of :data:`FIELDS`), and
    ``nanoseconds`` (``--ns``: the time with 9 decimal places)."""

    fields: frozenset[str] = DEFAULT_FIELDS
    nanoseconds: bool = False
    #: The fields named by ``-F`` (a field the samples lack is then an error, where one of
    #: the default is left out).
    named: frozenset[str] = frozenset()


def script_fields(text: str | None, nanoseconds: bool = False) -> ScriptFields:
    """The fields of ``-F text`` (None: perf's default)."""
    if text is None:
        return ScriptFields(nanoseconds=nanoseconds)
    chosen, added, removed = parse_fields(text)
    fields = (chosen if chosen is not None else DEFAULT_FIELDS | added) - removed
    return ScriptFields(frozenset(fields), nanoseconds, (chosen or frozenset()) | added)


def _frame_texts(
    frames: Sequence[FrameInfo], fields: frozenset[str], callchain: bool
) -> list[str]:
    """Each frame's line (sample__fprintf_callchain: ``\t%16lx``, `` SYMBOL+0xOFFSET``,
    `` (MODULE)``, its srcline on a line of its own, ``(inlined)``), or with ``callchain``
    False the sample's address on its header line (sample__fprintf_sym: the address as the
    process saw it).  Each symbol and module is escaped once."""
    if "ip" not in fields:
        return [""] * len(frames)
    symbols, offsets, sources = "sym" in fields, "symoff" in fields, "srcline" in fields
    modules: dict[str, str] | None = {} if "dso" in fields else None
    names: dict[str, str] = {}
    lead, end = ("\t", "\n") if callchain else ("", "")
    texts = []
    for frame in frames:
        address = frame.address
        if not callchain and frame.runtime_address is not None:
            address = frame.runtime_address
        name = ""
        if not symbols:
            pass
        elif frame.cookie:  # a deferred chain's cookie, left unmerged
            name = " (cookie)"
        elif frame.symbol is None:
            name = f" {UNKNOWN}"
        else:
            name = names.get(frame.symbol, "")
            if not name:
                name = names[frame.symbol] = f" {escape_controls(frame.symbol)}"
            if offsets:
                name = f"{name}+{frame.offset:#x}"
        inlined = callchain and frame.inlined
        module = ""
        if modules is not None and not inlined:
            module = modules.get(frame.module, "")
            if not module:
                module = modules[frame.module] = f" ({escape_controls(frame.module)})"
        source = ""
        if sources and frame.file is not None:
            # its source line on a line of its own, two spaces in, before (inlined)
            line = "" if frame.line is None else f":{frame.line}"
            source = f"\n  {escape_controls(frame.file)}{line}"
        texts.append(
            f"{lead}{address:16x}{name}{module}{source}{' (inlined)' if inlined else ''}{end}"
        )
    return texts


def _check_fields(profile: Profile, options: ScriptFields) -> frozenset[str]:
    """The fields printed of ``profile``'s samples: ``cpu`` left out of the default where
    they have none (evsel__check_stype); FieldError where a chosen one cannot be printed,
    as perf refuses it."""
    import numpy as np

    fields = options.fields
    if "symoff" in fields and "sym" not in fields:
        raise FieldError("Display of offsets requested but symbol is not selected.")
    if "srcline" in fields and "ip" not in fields:
        raise FieldError(
            "Display of source line number requested but sample IP is not selected. Hence, "
            "no address to lookup the source line number."
        )
    # a sample without a CPU (-1): the first, where none has one (a recording of a program's
    # threads), else found by one scan
    if "cpu" in fields and profile.cpu and (profile.cpu[0] < 0 or min(profile.cpu) < 0):
        if "cpu" in options.named:
            event = profile.events[profile.event[int(np.argmin(np.array(profile.cpu)))]][0]
            raise FieldError(
                f"Samples for '{event}' event do not have CPU attribute set. Cannot print "
                "'cpu' field."
            )
        fields = fields - {"cpu"}
    return fields


def script_text(
    profile: Profile, batch: int = 4096, options: ScriptFields = ScriptFields()
) -> Iterator[str]:
    """The text of every sample, in time order, ``batch`` samples at a time: each frame and
    each distinct stack is formatted once, each header's numbers a column at a time and its
    command and event once per (command, event) (builtin-script.c
    perf_sample__fprintf_start and process_event: the command ``%s `` when the sample's
    frames follow on lines of their own, else ``%16s ``; ``%5d/%-5d `` of pid and tid, or
    ``%5d `` of one; ``[%03d] `` of the CPU; ``%12s: `` of the time, with microseconds, or
    ``%5d.%09d: `` with nanoseconds; ``%10d `` of the period; ``%*s: `` of the event, as
    wide as the longest event name; then the frames, or the sample's address on the line).
    """
    import numpy as np

    from .samples import sorted_distinct

    fields = _check_fields(profile, options)
    kinds = len(profile.events) or 1
    name_width = _event_width(profile)
    callchain = [profile.has_callchains(name) for name, _ in profile.events] or [True]
    frame_texts: dict[bool, list[str]] = {}
    # What ends a header line where a callchain's frames follow on lines of their own, or
    # where the sample's IP follows on it (nothing without the IP: the line ends there).
    # It begins the text of the stack (below), so that the headers can be made with a
    # newline after each, which no header holds (names are escaped), and split there.
    ends = {True: "\n", False: " "} if "ip" in fields else {True: "", False: ""}
    # Each (stack, with callchain) pair's text, what ends the header first, at index ``2 *
    # stack + chained`` (None: not made yet): a batch's samples take theirs with one gather.
    pair_texts = np.full(2 * len(profile.stacks), None, dtype=object)
    made = np.zeros(len(pair_texts), dtype=bool)

    def frame_texts_of(chained: bool) -> list[str]:
        """Each frame's text, then what ends a header before them and the empty line after
        a callchain's."""
        texts = frame_texts.get(chained)
        if texts is None:
            texts = frame_texts[chained] = [
                *_frame_texts(profile.frames, fields, chained), ends[chained], "\n"
            ]
        return texts

    def make_pairs(pairs: npt.NDArray[np.int64]) -> None:
        """Make the texts of the (stack, with callchain) pairs ``pairs`` not made yet."""
        stacks = profile.stacks
        fresh = np.array(sorted_distinct(pairs[~made[pairs]]), dtype=np.int64)
        for chained in (True, False):
            chosen = fresh[(fresh & 1) == chained]
            if not len(chosen):
                continue
            ids = (chosen >> 1).tolist()
            if chained:
                # What ends the header, the frames' lines and the empty line, taken by one
                # call (an itemgetter of two or more items gives them in a tuple).
                texts = frame_texts_of(True)
                first, last = len(texts) - 2, len(texts) - 1
                made_texts = ["".join(itemgetter(first, *stacks[stack], last)(texts))
                              for stack in ids]  # fmt: skip
            elif "ip" in fields:
                # No callchain: the sample's IP (its innermost frame) on the header line.
                texts, end = frame_texts_of(False), ends[False]
                made_texts = [end + (texts[stacks[stack][0]] if stacks[stack] else f"{0:16x}")
                              + "\n" for stack in ids]  # fmt: skip
            else:
                made_texts = ["\n"] * len(ids)
            pair_texts[chosen] = made_texts
        made[fresh] = True

    def chain_text(stack: int) -> str:
        """A deferred callchain's frames (:func:`_deferred_text`)."""
        make_pairs(np.array([2 * stack + 1]))
        text: str = pair_texts[2 * stack + 1]
        return text[len(ends[True]) : -1]

    # Each header's pieces, in order: the command (per command and event), the numbers
    # (formatted a column at a time: :func:`_decimals`), the event and what ends the line.
    def prefix(key: int) -> str:
        name = escape_controls(profile.comms[key // kinds])
        if "comm" not in fields:
            return ""
        return f"{name} " if callchain[key % kinds] and "ip" in fields else f"{name:>16} "

    def suffix(key: int) -> str:  # then a newline, where the header text is split
        event = escape_controls(profile.events[key % kinds][0])
        return (f"{event:>{name_width}}: " if "event" in fields else "") + "\n"

    # One byte per character where every name is ASCII (the numbers are): a quarter of
    # the memory to move and an ASCII decode, else a code point each.
    narrow = all(escape_controls(name).isascii() for name in
                [*profile.comms, *(event for event, _unit in profile.events)])  # fmt: skip
    code: _Code = np.uint8 if narrow else np.uint32
    times = profile.column("time", np.uint64)
    keys = profile.column("comm") * kinds + profile.column("event")
    stack_ids = profile.column("stack")
    # The columns the fields print, each made an array once (some 1.5 ms each of 50,000
    # samples).
    pids, tids, cpus = (profile.column(name) if name in fields else np.zeros(0, np.int64)
                        for name in ("pid", "tid", "cpu"))  # fmt: skip
    periods = profile.column("period", np.uint64) if "period" in fields else np.zeros(0, np.uint64)
    fraction = np.uint64(1 if options.nanoseconds else 1000)
    digits = 9 if options.nanoseconds else 6

    def headers(chosen: np.ndarray) -> list[str]:
        """The header lines of samples ``chosen``, each without what ends it (``ends``)."""
        key = keys[chosen]
        distinct = np.flatnonzero(np.bincount(key))  # the batch's (command, event) keys
        which = np.searchsorted(distinct, key) if len(distinct) > 1 else None
        pieces: list[_Piece] = [_texts([prefix(key) for key in distinct.tolist()], which, code)]
        if "pid" in fields and "tid" in fields:  # %5d/%-5d
            tid = _decimals(tids[chosen], 0, code)
            pad = 5 - (len(tid) if isinstance(tid, str) else tid[1])
            pieces += [_decimals(pids[chosen], 5, code), "/", tid, _spaces(pad, code), " "]
        elif "pid" in fields or "tid" in fields:
            column = pids if "pid" in fields else tids
            pieces += [_decimals(column[chosen], 5, code), " "]
        if "cpu" in fields:
            pieces += ["[", _decimals(cpus[chosen], 3, code, zero=True), "] "]
        if "time" in fields:
            time = times[chosen]
            pieces += [_decimals(time // np.uint64(10**9), 5, code), ".",
                       _decimals(time % np.uint64(10**9) // fraction, digits, code, zero=True),
                       ": "]  # fmt: skip
        if "period" in fields:
            pieces += [_decimals(periods[chosen], 10, code), " "]
        pieces.append(_texts([suffix(key) for key in distinct.tolist()], which, code))
        return _joined(pieces, len(chosen), code).split("\n")[:-1]

    chained = np.array(callchain, dtype=np.int64)
    delivered = _delivery_times(profile, times)
    order = np.argsort(delivered, kind="stable")
    # Deferred records shown apart, each after the samples delivered up to its time (perf
    # delivers both by time, a record after the samples it follows in the file).
    chains = sorted(profile.deferred, key=lambda chain: chain.time)
    taken = 0
    for start in range(0, len(order), batch):
        chosen = order[start : start + batch]
        lines = headers(chosen)
        # each (stack, with callchain) pair formatted once, when first met
        pairs = stack_ids[chosen] * 2 + chained[keys[chosen] % kinds]
        make_pairs(pairs)
        # each sample's header, then its stack's text
        texts: list[str] = [""] * (2 * len(chosen))
        texts[0::2] = lines
        texts[1::2] = pair_texts[pairs].tolist()
        if taken < len(chains):
            merged = []
            for at, header, stack in zip(
                delivered[chosen].tolist(), texts[0::2], texts[1::2], strict=True
            ):
                while taken < len(chains) and chains[taken].time < at:
                    merged.append(_deferred_text(profile, chains[taken], chain_text))
                    taken += 1
                merged += (header, stack)
            texts = merged
        yield "".join(texts)
    for chain in chains[taken:]:
        yield _deferred_text(profile, chain, chain_text)


def _delivery_times(
    profile: Profile, times: npt.NDArray[np.uint64] | None = None
) -> npt.NDArray[np.uint64]:
    """The time perf delivers each sample at, the order it prints them in: its own time (the
    samples' ``times``, where they are at hand), or the later one :attr:`Profile.delivered`
    gives."""
    import numpy as np

    if times is not None and not profile.delivered:
        return times
    delivered = profile.column("time", np.uint64)
    for index, time in profile.delivered.items():
        delivered[index] = time
    return delivered


@dataclass(frozen=True, slots=True)
class ScriptSlice:
    """The text of a time slice of a recording (:func:`script_slice`), with what of its
    profile the text took that the whole recording's might not share: where the slices agree
    on it, their texts one after the other are the whole's (:func:`joined_script`)."""

    #: The text (:func:`script_text`'s), written once: made in a worker process, it was
    #: written there, batch by batch as it was made, to the worker's temporary file, and is
    #: copied from it; else it is made as it is written.
    text: Spooled
    #: Each event's name and whether its samples carry callchains (the width of the event
    #: column; a sample's frames on lines of their own, or its IP on its line).
    events: tuple[tuple[str, bool], ...]
    #: The fields printed (perf leaves out ``cpu`` where a sample has none); None: no sample.
    fields: frozenset[str] | None
    #: The earliest and latest times its samples are delivered at; None: no sample.
    delivered: tuple[int, int] | None
    #: Whether deferred user callchains are shown apart (they go among the samples of the
    #: whole recording, by time).
    deferred: bool


def script_slice(profile: Profile, options: ScriptFields = ScriptFields()) -> ScriptSlice:
    """The text of ``profile``, the profile of a time slice of a recording, as
    :func:`script_text` gives it (in a worker process, made now, into its temporary file;
    else made as it is written), with what :func:`joined_script` checks; FieldError now
    where a field cannot be printed."""
    from .forked import Spooled  # a report of one slice, in this process, forks nothing

    fields = _check_fields(profile, options)
    text = Spooled(script_text(profile, options=options))
    events = tuple((name, profile.has_callchains(name)) for name, _unit in profile.events)
    if not len(profile):
        return ScriptSlice(text, events, None, None, bool(profile.deferred))
    delivered = _delivery_times(profile)
    span = (int(delivered.min()), int(delivered.max()))
    return ScriptSlice(text, events, fields, span, bool(profile.deferred))


def joined_script(slices: Sequence[ScriptSlice | None]) -> list[Spooled] | None:
    """The text of a recording, each slice's to be written in turn (none held whole in
    memory), from the texts of its time slices, in order (None: one that could not be made),
    where it is theirs one after the other: the slices agree on the events and the fields
    printed, show no deferred callchains apart, and no sample is delivered before one of an
    earlier slice (the text is in delivery order, ties in profile order).  None where they
    do not (the slices' texts let go unwritten): the text is then the whole profile's."""
    chosen = [piece for piece in slices if piece is not None]
    if not _joinable(slices):
        for piece in chosen:
            piece.text.close()
        return None
    return [piece.text for piece in chosen]


def _joinable(slices: Sequence[ScriptSlice | None]) -> bool:
    if not slices or any(piece is None or piece.deferred for piece in slices):
        return False
    chosen = [piece for piece in slices if piece is not None]
    if len({piece.events for piece in chosen}) > 1:
        return False
    if len({piece.fields for piece in chosen if piece.fields is not None}) > 1:
        return False
    latest = None
    for piece in chosen:
        if piece.delivered is not None:
            if latest is not None and piece.delivered[0] < latest:
                return False
            latest = piece.delivered[1]
    return True


# -- the headers' text, a column at a time ----------------------------------------------------
# A piece of text per sample: a text the same on every row, or a matrix of characters (one
# row per sample), each row's text right-aligned in it, and the rows' lengths: one for every
# row (an int: the matrix is as wide, all text), or each row's (the columns before it are
# NULs, which no header holds: names are escaped).  The characters are code points (``code``
# np.uint32, UTF-32), or bytes of ASCII text (np.uint8).
_Piece = str | tuple["npt.NDArray[np.unsignedinteger[Any]]", "int | npt.NDArray[np.int64]"]
_Code = type["np.unsignedinteger[Any]"]
#: The powers of ten that a uint64 reaches: the digits of ``v`` are 1 + how many are <= v.
_TENS = [10**k for k in range(1, 20)]


def _decimals(values: npt.NDArray[Any], width: int, code: _Code, zero: bool = False) -> _Piece:
    """``values`` as ``%{width}d`` prints them (``%0{width}d`` with ``zero``): right-aligned
    in ``width`` characters, wider where they need it, ``-`` before the digits of a negative
    value (before the zeros with ``zero``).  One value on every row is formatted once, by
    Python's ``%``, which has C's rules for these formats."""
    import numpy as np

    count = len(values)
    if not count or values.min() == values.max():
        return ("%0*d" if zero else "%*d") % (width, int(values[0]) if count else 0)
    negative = values < 0 if values.dtype.kind == "i" else None
    if negative is not None and negative.any():
        magnitude = values.astype(np.uint64)
        magnitude[negative] = np.uint64(0) - magnitude[negative]
    else:
        negative, magnitude = None, values
    top = int(magnitude.max())
    places = len(str(top))  # the digits of the longest
    lengths: int | npt.NDArray[np.int64] = max(width, places)
    if negative is not None or places > width:
        tens = np.array(_TENS, np.uint64)
        digits = 1 + np.searchsorted(tens, magnitude, side="right").astype(np.int64)
        lengths = np.maximum(digits if negative is None else digits + negative, width)
    size = lengths if isinstance(lengths, int) else int(lengths.max())
    # The digits a place at a time, the last first: a division by a constant, which numpy
    # makes a multiplication (much faster than a divmod), in 32 bits where the values fit.
    kind = np.uint32 if top < 1 << 32 else np.uint64
    rest = magnitude = magnitude.astype(kind, copy=False)
    text = np.empty((count, size), dtype=code)
    text[:, : size - places] = ord("0" if zero else " ")
    ten = kind(10)
    for place in range(places):
        quotient = rest // ten
        digit = rest - quotient * ten
        digit += kind(ord("0"))
        if place and not zero:  # no zeros before the first digit: spaces
            digit[magnitude < kind(10**place)] = ord(" ")
        text[:, size - 1 - place] = digit
        rest = quotient
    if negative is not None:
        rows = np.flatnonzero(negative)
        sign = size - (lengths[rows] if zero else digits[rows] + 1)  # type: ignore[index]
        text[rows, sign] = ord("-")
    if not isinstance(lengths, int):  # NULs before the shorter rows
        text[np.arange(size) < (size - lengths)[:, None]] = 0
    return text, lengths


def _spaces(counts: int | npt.NDArray[np.int64], code: _Code) -> _Piece:
    """``counts[i]`` spaces on row ``i`` (none where it is not positive)."""
    import numpy as np

    if isinstance(counts, int):
        return " " * counts
    lengths = np.maximum(counts, 0).astype(np.int64)
    size = int(lengths.max()) if len(lengths) else 0
    used = np.arange(size) >= (size - lengths)[:, None]
    return np.where(used, code(ord(" ")), code(0)), lengths


def _texts(texts: list[str], which: npt.NDArray[np.intp] | None, code: _Code) -> _Piece:
    """Text ``texts[which[i]]`` on row ``i`` (None: one text, on every row)."""
    import numpy as np

    if which is None:
        return texts[0]
    size = max(len(text) for text in texts)
    table = np.zeros((len(texts), size), dtype=code)
    for row, text in enumerate(texts):
        if text:
            table[row, size - len(text) :] = _characters(text, code)
    if all(len(text) == size for text in texts):
        return table[which], size
    lengths = np.array([len(text) for text in texts], dtype=np.int64)
    return table[which], lengths[which]


def _characters(text: str, code: _Code) -> npt.NDArray[np.unsignedinteger[Any]]:
    """The characters of ``text`` as a piece holds them (its ASCII bytes for np.uint8)."""
    import numpy as np

    if code == np.uint8:
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _joined(pieces: list[_Piece], count: int, code: _Code) -> str:
    """Each of ``count`` rows' pieces one after the other, the rows one after the other."""
    import numpy as np

    # Texts the same on every row, one after the other, are one; where every piece is, each
    # row is that text.
    joined: list[_Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and joined and isinstance(joined[-1], str):
            joined[-1] += piece
        else:
            joined.append(piece)
    if len(joined) == 1 and isinstance(joined[0], str):
        return joined[0] * count
    # The texts the same on every row written to all of them at once, a row repeated, then
    # the other pieces' columns; the NULs of rows shorter than their piece's matrix are
    # taken out of the text.
    row = np.concatenate(
        [_characters(piece, code) if isinstance(piece, str)
         else np.zeros(piece[0].shape[1], code) for piece in joined]
    )  # fmt: skip
    matrix = np.empty((count, len(row)), dtype=code)
    matrix[:] = row
    at = 0
    for piece in joined:
        width = len(piece) if isinstance(piece, str) else piece[0].shape[1]
        if not isinstance(piece, str):
            matrix[:, at : at + width] = piece[0]
        at += width
    if matrix.dtype == np.uint8:
        text = str(matrix.data, "ascii")
    else:
        text = str(matrix.data, "utf-32-le", "surrogatepass")
    if all(isinstance(piece, str) or isinstance(piece[1], int) for piece in joined):
        return text
    return text.replace("\0", "")


def _deferred_text(
    profile: Profile, chain: DeferredChain, chain_text: Callable[[int], str]
) -> str:
    return deferred_lines(profile, chain, [chain_text(chain.stack)])


def write_script(profile: Profile, out: TextIO, options: ScriptFields = ScriptFields()) -> None:
    """Write the profile as ``perf script`` text (with ``options``' fields:
    ``perf script -F``), in batches."""
    for piece in script_text(profile, options=options):
        out.write(piece)


__all__ = [
    "DEFAULT_FIELDS",
    "FIELDS",
    "PERF_FIELDS",
    "FieldError",
    "ScriptFields",
    "ScriptSlice",
    "deferred_lines",
    "joined_script",
    "parse_fields",
    "script_fields",
    "script_slice",
    "script_text",
    "write_script",
]
