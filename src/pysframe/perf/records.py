"""The side-band records: MMAP, MMAP2, COMM, FORK, EXIT, LOST, LOST_SAMPLES and
CALLCHAIN_DEFERRED (Linux 6.19: a thread's user callchain, for the samples it took before).

Layouts from perf_event.h (``enum perf_event_type``): after the record header, the record's
own fields, then, when the record's attribute has sample_id_all, ``struct sample_id`` at the
end of the record (attrs.py says which attribute and where).  The time of a record is the
trailer's; perf writes the records it synthesizes for processes that already ran (and the
kernel's own mapping) with a trailer of zeros, hence time 0.  Each event keeps ``offset``, the
record's offset in the file or stream, so that events and samples can be put back in file
order.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from ..dataclass import dataclass
from ..names import decode_name
from . import layout
from .attrs import AttrTable
from .errors import PerfDataError
from .layout import Buffer, RecordType


@dataclass(frozen=True, slots=True)
class SampleId:
    """The ``struct sample_id`` trailer of a record; None for the fields it lacks."""

    pid: int | None = None
    tid: int | None = None
    time: int | None = None
    id: int | None = None
    stream_id: int | None = None
    cpu: int | None = None


_NO_SAMPLE_ID = SampleId()


@dataclass(frozen=True, slots=True)
class MmapEvent:
    """A mapping (MMAP, or MMAP2 with ``mmap2``): ``start``, ``length`` bytes of ``filename``
    from file offset ``pgoff``.  MMAP2 adds the device and inode (``maj``, ``min``, ``ino``,
    ``ino_generation``) or, with MISC_MMAP_BUILD_ID, the ``build_id``; and ``prot``, ``flags``
    (mmap(2) bits)."""

    offset: int
    misc: int
    sample_id: SampleId
    pid: int
    tid: int
    start: int
    length: int
    pgoff: int
    filename: str
    mmap2: bool = False
    maj: int | None = None
    min: int | None = None
    ino: int | None = None
    ino_generation: int | None = None
    build_id: bytes | None = None
    prot: int | None = None
    flags: int | None = None

    @property
    def time(self) -> int | None:
        return self.sample_id.time

    @property
    def cpumode(self) -> int:
        return self.misc & layout.MISC_CPUMODE_MASK

    @property
    def executable(self) -> bool:
        """Code: PROT_EXEC for MMAP2; for MMAP, not marked as a data mapping."""
        if self.prot is not None:
            return bool(self.prot & layout.PROT_EXEC)
        return not self.misc & layout.MISC_MMAP_DATA


@dataclass(frozen=True, slots=True)
class CommEvent:
    """A thread's command name (``exec``: it changed because of an exec), its bytes that are
    not UTF-8 written ``\\xNN`` (:func:`pysframe.names.decode_name`)."""

    offset: int
    misc: int
    sample_id: SampleId
    pid: int
    tid: int
    comm: str

    @property
    def time(self) -> int | None:
        return self.sample_id.time

    @property
    def exec(self) -> bool:
        return bool(self.misc & layout.MISC_COMM_EXEC)


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """FORK (``fork`` True) or EXIT of a thread; ``task_time`` is the record's own time."""

    offset: int
    misc: int
    sample_id: SampleId
    fork: bool
    pid: int
    ppid: int
    tid: int
    ptid: int
    task_time: int

    @property
    def time(self) -> int | None:
        return self.sample_id.time


@dataclass(frozen=True, slots=True)
class LostEvent:
    """LOST (``id`` the event's id) or LOST_SAMPLES (``id`` None): ``lost`` records dropped."""

    offset: int
    misc: int
    sample_id: SampleId
    id: int | None
    lost: int

    @property
    def time(self) -> int | None:
        return self.sample_id.time


@dataclass(frozen=True, slots=True)
class DeferredCallchainEvent:
    """CALLCHAIN_DEFERRED: the user callchain ``ips`` (innermost first, no context marker)
    of the thread the trailer names, for its samples whose callchain ends with
    PERF_CONTEXT_USER_DEFERRED and ``cookie`` (deferred.py stitches them)."""

    offset: int
    misc: int
    sample_id: SampleId
    cookie: int
    ips: tuple[int, ...]

    @property
    def time(self) -> int | None:
        return self.sample_id.time


SideBandEvent = MmapEvent | CommEvent | TaskEvent | LostEvent | DeferredCallchainEvent

#: The record types decoded here.
SIDE_BAND_TYPES = frozenset({
    RecordType.MMAP, RecordType.MMAP2, RecordType.COMM, RecordType.FORK, RecordType.EXIT,
    RecordType.LOST, RecordType.LOST_SAMPLES, RecordType.CALLCHAIN_DEFERRED,
})  # fmt: skip


def _sample_id(
    buffer: Buffer, at: int, size: int, table: AttrTable, big_endian: bool, where: int
) -> tuple[SampleId, int]:
    """The trailer of the record at ``buffer[at:at+size]`` and the size it takes."""
    if not len(table):
        return _NO_SAMPLE_ID, 0
    attr = 0
    if not table.single and table.first_sample_id_all:
        position = table.trailer_id_position
        assert position is not None  # AttrTable checked it
        if 8 * position > size - layout.RECORD_HEADER.size:
            raise PerfDataError("record too short to hold its id", where)
        u64 = layout.U64.struct(big_endian)
        (ident,) = u64.unpack_from(buffer, at + size - 8 * position)
        found = table.attr_of_id(ident)
        if found is None:
            raise PerfDataError(f"record of unknown event id {ident}", where)
        attr = found
    trailer = table.trailers[attr]
    if not trailer.size:
        return _NO_SAMPLE_ID, 0
    if trailer.size > size - layout.RECORD_HEADER.size:
        raise PerfDataError("record too short to hold its sample_id", where)
    base = at + size - trailer.size
    words = layout.U64.struct(big_endian)
    pair = layout.U32_PAIR.struct(big_endian)
    values: dict[str, int] = {}
    for name, rel in trailer.fields.items():
        if name == "tid":
            values["pid"], values["tid"] = pair.unpack_from(buffer, base + rel)
        elif name == "cpu":
            values["cpu"] = pair.unpack_from(buffer, base + rel)[0]
        else:
            key = "id" if name == "identifier" else name
            values[key] = words.unpack_from(buffer, base + rel)[0]
    return SampleId(**values), trailer.size


def _string(
    buffer: Buffer, start: int, end: int, decode: Callable[[bytes], str] = os.fsdecode
) -> str:
    """The NUL-terminated name in ``buffer[start:end]``: a file's as the file system decodes
    it (it must still open the file), a command's by pysframe's rule for names (``\\xNN`` for
    bytes that are not UTF-8: :func:`pysframe.names.decode_name`)."""
    raw = bytes(buffer[start:end])
    return decode(raw.split(b"\0", 1)[0])


def decode_side_band(
    buffer: Buffer, at: int, kind: int, misc: int, size: int, table: AttrTable,
    big_endian: bool, where: int,
) -> SideBandEvent:
    """The side-band record of type ``kind`` and ``size`` bytes at ``buffer[at:]``;
    ``where`` is its offset in the file.  PerfDataError when its fields do not fit."""
    sample_id, trailer = _sample_id(buffer, at, size, table, big_endian, where)
    body = at + layout.RECORD_HEADER.size
    end = at + size - trailer
    fixed = {
        RecordType.MMAP: layout.MMAP, RecordType.MMAP2: layout.MMAP2,
        RecordType.COMM: layout.COMM, RecordType.FORK: layout.TASK,
        RecordType.EXIT: layout.TASK, RecordType.LOST: layout.LOST,
        RecordType.LOST_SAMPLES: layout.LOST_SAMPLES,
        RecordType.CALLCHAIN_DEFERRED: layout.CALLCHAIN_DEFERRED,
    }[RecordType(kind)]  # fmt: skip
    if body + fixed.size > end:
        raise PerfDataError(
            f"{layout.record_type_name(kind)} record of {size} bytes is too short", where
        )
    values = fixed.struct(big_endian).unpack_from(buffer, body)
    tail = body + fixed.size
    if kind == RecordType.MMAP:
        pid, tid, start, length, pgoff = values
        return MmapEvent(
            where, misc, sample_id, pid, tid, start, length, pgoff, _string(buffer, tail, end)
        )
    if kind == RecordType.MMAP2:
        pid, tid, start, length, pgoff, maj, minor, ino, generation, prot, flags = values
        build_id = None
        if misc & layout.MISC_MMAP_BUILD_ID:
            identity = layout.MMAP2_BUILD_ID.struct(big_endian).unpack_from(
                buffer, body + layout.MMAP2_IDENTITY_AT
            )
            build_id = identity[3][: min(identity[0], layout.BUILD_ID_MAX)]
            maj = minor = ino = generation = None
        return MmapEvent(
            where, misc, sample_id, pid, tid, start, length, pgoff, _string(buffer, tail, end),
            True, maj, minor, ino, generation, build_id, prot, flags,
        )
    if kind == RecordType.COMM:
        pid, tid = values
        comm = _string(buffer, tail, end, decode_name)
        return CommEvent(where, misc, sample_id, pid, tid, comm)
    if kind in (RecordType.FORK, RecordType.EXIT):
        pid, ppid, tid, ptid, time = values
        return TaskEvent(
            where, misc, sample_id, kind == RecordType.FORK, pid, ppid, tid, ptid, time
        )
    if kind == RecordType.CALLCHAIN_DEFERRED:
        cookie, count = values
        # perf's evsel__parse_sample reads nr addresses; here they must fit in the record
        # before its trailer (a count that does not is a corrupt record, not a big read).
        if count > (end - tail) // 8:
            raise PerfDataError(
                f"CALLCHAIN_DEFERRED record of {size} bytes cannot hold its {count} addresses",
                where,
            )
        ips = struct.unpack_from(f"{layout.byte_order(big_endian)}{count}Q", buffer, tail)
        return DeferredCallchainEvent(where, misc, sample_id, cookie, ips)
    if kind == RecordType.LOST:
        ident, lost = values
        return LostEvent(where, misc, sample_id, ident, lost)
    return LostEvent(where, misc, sample_id, None, values[0])


def trailing_payload(buffer: Buffer, at: int, kind: int, size: int, big_endian: bool) -> int:
    """The bytes of payload that follow the record at ``at`` and its ``size`` does not count:
    HEADER_TRACING_DATA's tracing data (8-aligned) and AUXTRACE's trace data (perf's
    util/session.c perf_session__process_user_event); 0 for every other record."""
    if kind == RecordType.HEADER_TRACING_DATA and size >= 12:
        (length,) = layout.U32.struct(big_endian).unpack_from(buffer, at + 8)
        return int(-(-length // 8) * 8)
    if kind == RecordType.AUXTRACE and size >= 16:
        return int(layout.U64.struct(big_endian).unpack_from(buffer, at + 8)[0])
    return 0


__all__ = [
    "SIDE_BAND_TYPES",
    "CommEvent",
    "DeferredCallchainEvent",
    "LostEvent",
    "MmapEvent",
    "SampleId",
    "SideBandEvent",
    "TaskEvent",
    "decode_side_band",
    "trailing_payload",
]
