"""Where the fields of a record lie, per event attribute, and which attribute a record is of.

A sample's layout follows from its attribute (perf_event.h "PERF_RECORD_SAMPLE", in the
order of kernel/events/core.c perf_output_sample): fixed u64 fields from IDENTIFIER to PERIOD,
then READ, CALLCHAIN, RAW, BRANCH_STACK, REGS_USER, STACK_USER, WEIGHT, DATA_SRC,
TRANSACTION, REGS_INTR, PHYS_ADDR, CGROUP, DATA_PAGE_SIZE, CODE_PAGE_SIZE, AUX, whose sizes
vary from record to record.  Other records end with ``struct sample_id`` when the attribute
has sample_id_all.

Which attribute a record is of (perf's evlist__event2evsel, util/evlist.c): the only one when
there is one; else the id found at the first attribute's id position (PERF_SAMPLE_IDENTIFIER:
the first u64 of a sample, the last of another record; PERF_SAMPLE_ID: after the fields
before it), looked up among the attributes' ids.  A record of another type whose first
attribute lacks sample_id_all is of the first attribute; so is a record with id 0 (perf
synthesized it).  A sample with an id no attribute has is skipped, as perf skips it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..dataclass import dataclass
from . import layout
from .errors import PerfDataError
from .header import EventAttr
from .layout import ReadFormat, SampleType

#: The size of the record header: every offset below counts from the record's start.
_HEADER = layout.RECORD_HEADER.size


@dataclass(frozen=True, eq=False, repr=False)
class SampleFormat:
    """The layout of the samples of one attribute.

    ``fixed``: byte offset, from the record's start, of each fixed u64 field present
    (names of :data:`layout.SAMPLE_FIXED_FIELDS`); ``variable``: where the fields of varying
    size begin.  ``read_size``: bytes of READ without PERF_FORMAT_GROUP; ``read_group_words``:
    the u64 words READ has per group member (the group's count is in the record).
    """

    sample_type: int
    read_format: int
    branch_sample_type: int
    regs_user_mask: int
    regs_intr_mask: int
    default_period: int
    fixed: dict[str, int]
    variable: int
    read_size: int
    read_group_words: int

    @property
    def user_regs(self) -> int:
        return self.regs_user_mask.bit_count()

    @property
    def intr_regs(self) -> int:
        return self.regs_intr_mask.bit_count()


def sample_format(attr: EventAttr) -> SampleFormat:
    """The sample layout of ``attr``; PerfDataError when its sample_type has a bit whose
    layout this reader does not know (a sample could not be read past it)."""
    sample_type = attr.sample_type
    unknown = sample_type & ~SampleType.KNOWN
    if unknown:
        raise PerfDataError(
            f"event {attr.index} samples fields this reader does not know "
            f"(sample_type bits {unknown:#x})"
        )
    fixed, at = {}, _HEADER
    for name, bit in layout.SAMPLE_FIXED_FIELDS:
        if sample_type & bit:
            fixed[name] = at
            at += 8
    read_format = attr.read_format
    times = bool(read_format & ReadFormat.TOTAL_TIME_ENABLED) + bool(
        read_format & ReadFormat.TOTAL_TIME_RUNNING
    )
    per_value = 1 + bool(read_format & ReadFormat.ID) + bool(read_format & ReadFormat.LOST)
    return SampleFormat(
        sample_type=sample_type,
        read_format=read_format,
        branch_sample_type=attr.branch_sample_type,
        regs_user_mask=attr.sample_regs_user if sample_type & SampleType.REGS_USER else 0,
        regs_intr_mask=attr.sample_regs_intr if sample_type & SampleType.REGS_INTR else 0,
        # perf's evsel__parse_sample: a sample without PERIOD has the attribute's period.
        default_period=attr.sample_period,
        fixed=fixed,
        variable=at,
        # Without GROUP: value, then time_enabled, time_running, id, lost as read_format says.
        read_size=8 * (per_value + times),
        read_group_words=per_value,
    )


@dataclass(frozen=True, eq=False, repr=False)
class TrailerFormat:
    """The ``struct sample_id`` trailer of one attribute's non-sample records: its size and
    the byte offset, from the trailer's start, of each u64 field present (names of
    :data:`layout.SAMPLE_ID_FIELDS`); size 0 without sample_id_all."""

    size: int
    fields: dict[str, int]


def trailer_format(attr: EventAttr) -> TrailerFormat:
    if not attr.sample_id_all:
        return TrailerFormat(0, {})
    fields, at = {}, 0
    for name, bit in layout.SAMPLE_ID_FIELDS:
        if attr.sample_type & bit:
            fields[name] = at
            at += 8
    return TrailerFormat(at, fields)


def _id_position(sample_type: int) -> int | None:
    """Index of the id among a sample's u64 words after the header (evsel.c
    __evsel__calc_id_pos)."""
    if sample_type & SampleType.IDENTIFIER:
        return 0
    if not sample_type & SampleType.ID:
        return None
    return sum(bool(sample_type & bit) for bit in (
        SampleType.IP, SampleType.TID, SampleType.TIME, SampleType.ADDR
    ))  # fmt: skip


def _trailer_id_position(sample_type: int) -> int | None:
    """Index of the id counted back from the end of another record (1: its last u64;
    evsel.c __evsel__calc_is_pos)."""
    if sample_type & SampleType.IDENTIFIER:
        return 1
    if not sample_type & SampleType.ID:
        return None
    return 1 + bool(sample_type & SampleType.CPU) + bool(sample_type & SampleType.STREAM_ID)


class AttrTable:
    """The attributes of a recording with their formats, and the lookup of a record's one.

    Attributes are added one at a time (:meth:`add`: a pipe-mode stream brings them as
    HEADER_ATTR records), each at a cost of its own ids: a recording of many attributes is
    read in time linear in their number."""

    def __init__(self, attrs: Iterable[EventAttr] = ()) -> None:
        self.attrs: list[EventAttr] = []
        self.formats: list[SampleFormat] = []
        self.trailers: list[TrailerFormat] = []
        self.by_id: dict[int, int] = {}
        self.single = False
        self.id_position: int | None = None
        self.trailer_id_position: int | None = None
        self.first_sample_id_all = False
        #: The union of the attributes' user register masks: the columns of a sample chunk's
        #: register array.
        self.regs_user_mask = 0
        #: Each attribute's user register mask.
        self.regs_user_masks: list[int] = []
        #: What a bulk decoder derives from ``by_id`` (sorted arrays), kept until an
        #: attribute is added (samples.py).
        self.id_lookup: object | None = None
        for attr in attrs:
            self.add(attr)

    def add(self, attr: EventAttr) -> None:
        """Add the next attribute; PerfDataError when its samples cannot be read, or when it
        does not put a record's id where the first attribute does (perf refuses such files:
        evlist__valid_sample_type)."""
        sample = sample_format(attr)
        if not self.attrs:
            self.id_position = _id_position(attr.sample_type)
            self.trailer_id_position = _trailer_id_position(attr.sample_type)
            self.first_sample_id_all = attr.sample_id_all
        elif (
            self.id_position is None
            or _id_position(attr.sample_type) != self.id_position
            or _trailer_id_position(attr.sample_type) != self.trailer_id_position
        ):
            raise PerfDataError("the event attributes do not agree on where a record's id lies")
        index = len(self.attrs)
        self.attrs.append(attr)
        self.formats.append(sample)
        self.trailers.append(trailer_format(attr))
        for ident in attr.ids:
            self.by_id.setdefault(ident, index)
        self.single = len(self.attrs) == 1
        self.regs_user_mask |= sample.regs_user_mask
        self.regs_user_masks.append(sample.regs_user_mask)
        self.id_lookup = None

    def __len__(self) -> int:
        return len(self.attrs)

    def attr_of_id(self, ident: int) -> int | None:
        """The attribute index of a record with this id (0 for id 0), None if unknown."""
        if ident == 0:
            return 0
        return self.by_id.get(ident)


__all__ = ["AttrTable", "SampleFormat", "TrailerFormat", "sample_format", "trailer_format"]
