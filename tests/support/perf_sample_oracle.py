"""The oracle of the perf.data sample decoder: each PERF_RECORD_SAMPLE read on its own.

The reader decodes samples a chunk at a time with numpy (pysframe.perf.samples); the tests
hold it equal to this plain walk, written apart from it.  :func:`oracle_samples` steps down
the records of the data section by their headers (u32 type, u16 misc, u16 size), file or pipe
mode, and reads each sample with ``struct``, one field after the other in the order of
perf_output_sample (kernel/events/core.c), each where the sizes and counts before it say
(perf_event.h, PERF_RECORD_SAMPLE), from its attribute's sample_type, read_format,
branch_sample_type and register masks.  Only the attributes come from the reader
(``PerfData.attrs``); the record walk, the sample layouts and their bits are this module's.

A corrupt sample is a PerfDataError at the record's file offset, in the reader's words:
"sample record before any event attribute", "sample too short to hold its id", "sample field
F runs past the end of its record" (F the first field checked that does not fit: a count or
fixed word where it is read, the callchain and the user registers and stack where they end,
the other stretches by the field after them, "data" by the record's end), and "user stack of
N bytes says M were used".

The walk stops, with no error, at a record it cannot step over (a size under 8 bytes, a
record or a payload past the end of the data): the reader's errors and warnings there are not
the sample decoder's, and tests check those texts on their own.  Compressed recordings are not
read (their records are pieces of one zstd stream).
"""

from __future__ import annotations

import struct
from pathlib import Path

from perf_support import (
    ADDR,
    AUX,
    AUXTRACE,
    BRANCH_STACK,
    CALLCHAIN,
    CGROUP,
    CODE_PAGE_SIZE,
    CPU,
    DATA_PAGE_SIZE,
    DATA_SRC,
    HEADER_ATTR,
    HEADER_TRACING_DATA,
    ID,
    IDENTIFIER,
    IP,
    PERIOD,
    PHYS_ADDR,
    RAW,
    READ,
    REGS_INTR,
    REGS_USER,
    SAMPLE,
    STACK_USER,
    STREAM_ID,
    TID,
    TIME,
    TRANSACTION,
    WEIGHT,
)  # fmt: skip
from pysframe.perf import EventAttr, PerfData, PerfDataError, Sample

U64_MAX = 2**64 - 1
#: PERF_SAMPLE_WEIGHT_STRUCT (Linux 5.12): the weight as a struct, one u64 as WEIGHT is.
WEIGHT_STRUCT = 1 << 24
#: The u64 fields at the start of a sample, in record order, by the reader's names for them.
FIXED = (
    ("identifier", IDENTIFIER), ("ip", IP), ("tid", TID), ("time", TIME), ("addr", ADDR),
    ("id", ID), ("stream_id", STREAM_ID), ("cpu", CPU), ("period", PERIOD),
)  # fmt: skip
#: PERF_FORMAT_* (perf_event.h): what READ holds.
TOTAL_TIME_ENABLED, TOTAL_TIME_RUNNING, FORMAT_ID, FORMAT_GROUP, FORMAT_LOST = (
    1 << n for n in range(5)
)
#: PERF_SAMPLE_BRANCH_HW_INDEX and PERF_SAMPLE_BRANCH_COUNTERS (branch_sample_type).
BRANCH_HW_INDEX, BRANCH_COUNTERS = 1 << 17, 1 << 19
#: struct perf_branch_entry: u64 from, u64 to, u64 flags.
BRANCH_ENTRY = 24
#: PERF_SAMPLE_REGS_ABI_NONE: no registers follow.
ABI_NONE = 0


class _Record:
    """Bounded reads of one sample record, each naming the field it reads."""

    def __init__(self, raw: bytes, at: int, size: int, order: str, offset: int) -> None:
        self.raw, self.end, self.order, self.offset = raw, at + size, order, offset

    def need(self, at: int, size: int, what: str) -> None:
        if at + size > self.end:
            raise PerfDataError(f"sample field {what} runs past the end of its record", self.offset)

    def word(self, at: int, what: str) -> int:
        self.need(at, 8, what)
        return int(struct.unpack_from(self.order + "Q", self.raw, at)[0])

    def words(self, at: int, count: int, what: str) -> tuple[int, ...]:
        self.need(at, 8 * count, what)
        return struct.unpack_from(f"{self.order}{count}Q", self.raw, at)


def decode_sample(
    raw: bytes, at: int, size: int, index: int, attr: EventAttr, order: str, offset: int
) -> Sample:
    """The sample record of ``size`` bytes at ``raw[at:]`` (file offset ``offset``), of
    attribute ``index``, ``attr``; ``order`` is struct's byte order."""
    record = _Record(raw, at, size, order, offset)
    kind = attr.sample_type
    cursor = at + 8  # after the header
    fields: dict[str, int] = {}
    pid = tid = cpu = -1
    for name, bit in FIXED:
        if kind & bit:
            fields[name] = record.word(cursor, name)
            if name == "tid":  # u32 pid, u32 tid
                pid, tid = struct.unpack_from(order + "ii", raw, cursor)
            elif name == "cpu":  # u32 cpu, u32 res
                cpu = struct.unpack_from(order + "i", raw, cursor)[0]
            cursor += 8
    if kind & READ:
        rf = attr.read_format
        per_value = 1 + bool(rf & FORMAT_ID) + bool(rf & FORMAT_LOST)
        times = bool(rf & TOTAL_TIME_ENABLED) + bool(rf & TOTAL_TIME_RUNNING)
        if rf & FORMAT_GROUP:  # u64 nr, [time_enabled], [time_running], nr values
            members = record.word(cursor, "read")
            cursor += 8 * (1 + times) + 8 * per_value * members
        else:  # u64 value, [time_enabled], [time_running], [id], [lost]
            cursor += 8 * (per_value + times)
    callchain: tuple[int, ...] = ()
    if kind & CALLCHAIN:  # u64 nr, u64 ips[nr]
        count = record.word(cursor, "callchain")
        callchain = record.words(cursor + 8, count, "callchain")
        cursor += 8 + 8 * count
    if kind & RAW:  # u32 size, char data[size]
        record.need(cursor, 4, "raw")
        cursor += 4 + struct.unpack_from(order + "I", raw, cursor)[0]
    if kind & BRANCH_STACK:  # u64 nr, [u64 hw_idx], entries[nr], [u64 counters[nr]]
        count = record.word(cursor, "branch stack")
        bst = attr.branch_sample_type
        cursor += 8 + 8 * bool(bst & BRANCH_HW_INDEX)
        cursor += count * (BRANCH_ENTRY + 8 * bool(bst & BRANCH_COUNTERS))
    regs_abi, regs = 0, ()
    regs_mask = attr.sample_regs_user if kind & REGS_USER else 0
    if kind & REGS_USER:  # u64 abi, u64 regs[weight(mask)] unless abi is NONE
        regs_abi = record.word(cursor, "user registers")
        if regs_abi != ABI_NONE:
            regs = record.words(cursor + 8, regs_mask.bit_count(), "user registers")
        cursor += 8 + 8 * len(regs)
    stack_offset = stack_size = stack_dyn_size = 0
    if kind & STACK_USER:  # u64 size, char data[size], u64 dyn_size (when size is not 0)
        stack_size = record.word(cursor, "user stack")
        cursor += 8
        stack_offset = cursor
        if stack_size:
            record.need(cursor, stack_size, "user stack")
            stack_dyn_size = record.word(cursor + stack_size, "user stack")
            cursor += stack_size + 8
            if stack_dyn_size > stack_size:
                raise PerfDataError(
                    f"user stack of {stack_size} bytes says {stack_dyn_size} were used", offset
                )
    for bit in (WEIGHT | WEIGHT_STRUCT, DATA_SRC, TRANSACTION):  # a u64 each
        cursor += 8 * bool(kind & bit)
    if kind & REGS_INTR:  # u64 abi, u64 regs[weight(mask)] unless abi is NONE
        abi = record.word(cursor, "interrupt registers")
        cursor += 8 + 8 * attr.sample_regs_intr.bit_count() * (abi != ABI_NONE)
    for bit in (PHYS_ADDR, CGROUP, DATA_PAGE_SIZE, CODE_PAGE_SIZE):  # a u64 each
        cursor += 8 * bool(kind & bit)
    if kind & AUX:  # u64 size, char data[size]
        cursor += 8 + record.word(cursor, "aux")
    record.need(cursor, 0, "data")
    (misc,) = struct.unpack_from(order + "H", raw, at + 4)
    return Sample(
        offset=at, file_offset=offset, attr=index, misc=misc, ip=fields.get("ip", 0),
        pid=pid, tid=tid, time=fields.get("time", U64_MAX), addr=fields.get("addr", 0),
        id=fields.get("id", fields.get("identifier", U64_MAX)),
        stream_id=fields.get("stream_id", U64_MAX), cpu=cpu,
        period=fields.get("period", attr.sample_period), callchain=tuple(callchain),
        regs_abi=regs_abi, regs_mask=regs_mask, regs=tuple(regs), stack_offset=stack_offset,
        stack_size=stack_size, stack_dyn_size=stack_dyn_size,
    )  # fmt: skip


def _id_position(sample_type: int) -> int | None:
    """Where a sample's id lies, in u64 words after the header (evsel.c
    __evsel__calc_id_pos): first with IDENTIFIER, else after IP, TID, TIME and ADDR."""
    if sample_type & IDENTIFIER:
        return 0
    if sample_type & ID:
        return sum(bool(sample_type & bit) for bit in (IP, TID, TIME, ADDR))
    return None


def attr_of_sample(
    raw: bytes, at: int, size: int, attrs: list[EventAttr], order: str, offset: int
) -> int | None:
    """The index of the attribute of the sample at ``raw[at:]`` (util/evlist.c
    evlist__event2evsel); None when no attribute has its id."""
    if not attrs:
        raise PerfDataError("sample record before any event attribute", offset)
    if len(attrs) == 1:
        return 0
    position = _id_position(attrs[0].sample_type)
    assert position is not None  # the reader refuses attributes without ids beside others
    if 8 + 8 * (position + 1) > size:
        raise PerfDataError("sample too short to hold its id", offset)
    (ident,) = struct.unpack_from(order + "Q", raw, at + 8 + 8 * position)
    if ident == 0:  # perf synthesized it: the first attribute
        return 0
    return next((index for index, attr in enumerate(attrs) if ident in attr.ids), None)


def _payload(raw: bytes, at: int, kind: int, size: int, order: str) -> int:
    """The bytes that follow a record its size does not count (util/session.c
    perf_session__process_user_event): HEADER_TRACING_DATA's u32 size, padded to 8 bytes;
    AUXTRACE's u64 size."""
    if kind == HEADER_TRACING_DATA and size >= 12:
        (length,) = struct.unpack_from(order + "I", raw, at + 8)
        return -(-length // 8) * 8
    if kind == AUXTRACE and size >= 16:
        return int(struct.unpack_from(order + "Q", raw, at + 8)[0])
    return 0


def oracle_samples(
    path: Path | str, until: int | None = None
) -> tuple[list[Sample], PerfDataError | None]:
    """The samples of the recording at ``path`` in file order, up to the first corrupt one
    (its error, with the path, comes second); ``until``: the file offset of the last record
    read (where the reader stopped).  Samples of an id no attribute has are left out."""
    path = str(path)
    raw = Path(path).read_bytes()
    with PerfData.open(path) as data:
        if data.compressed:
            raise ValueError("the oracle reads uncompressed recordings only")
        header = data.header
        attrs_before = 0 if header.pipe else len(data.attrs)
        try:  # a pass adds the attributes HEADER_ATTR records bring (a pipe's, mostly)
            for _ in data.events():
                pass
        except PerfDataError:
            pass  # the walk stops where the attributes do
        known = data.attrs
    order = ">" if header.big_endian else "<"
    if header.pipe:
        position, end = header.size, len(raw)
    else:
        position, end = header.data_offset, header.data_offset + header.data_size
        if not header.data_size or end > len(raw):  # perf record killed, or a file cut short
            end = len(raw)
    attrs = known[:attrs_before]
    samples: list[Sample] = []
    try:
        while position + 8 <= end and (until is None or position <= until):
            kind, _misc, size = struct.unpack_from(order + "IHH", raw, position)
            if size < 8 or position + size > end:
                break
            if kind == SAMPLE:
                index = attr_of_sample(raw, position, size, attrs, order, position)
                if index is not None:
                    samples.append(decode_sample(
                        raw, position, size, index, attrs[index], order, position
                    ))  # fmt: skip
            elif kind == HEADER_ATTR:
                if len(attrs) == len(known):
                    break  # the reader could not add it
                attrs.append(known[len(attrs)])
            position += size + _payload(raw, position, kind, size, order)
    except PerfDataError as error:
        return samples, error.at(path=path)
    return samples, None


__all__ = ["attr_of_sample", "decode_sample", "oracle_samples"]
