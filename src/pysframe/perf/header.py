"""The metadata of a perf.data file: its header, event attributes and feature sections.

File mode (perf.data-file-format.txt): the 104-byte header points at the attribute section
(``perf_file_attr`` entries of ``attr_size`` bytes: the attribute, then the file section of its
u64 ids) and at the data section; after the data section, one file section per feature bit set,
in bit order, each pointing at that feature's bytes.  Pipe mode: a 16-byte header, then the
same things as records (HEADER_ATTR: the attribute then its ids up to the record's end;
HEADER_FEATURE: u64 feature number then the section bytes; EVENT_UPDATE NAME: an event's name;
HEADER_BUILD_ID: one build ID).

The features decoded are those :class:`Features` names (header.c ``process_*``); every other
feature's bytes stay reachable through ``Features.sections``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import field, replace
from itertools import pairwise

from ..dataclass import dataclass
from ..names import decode_name
from . import layout
from .errors import PerfDataError
from .layout import ATTR, Buffer, Feature, Record


@dataclass(frozen=True)
class EventAttr:
    """One event of the recording (``struct perf_event_attr`` and the ids of its streams).

    ``flags`` holds the attribute's bit fields with field N at bit N whatever the file's byte
    order (:data:`layout.ATTR_FLAG_BITS`).  ``sample_period`` is the frequency when ``freq``.
    ``name`` comes from the EVENT_DESC feature or an EVENT_UPDATE record (None without them).
    """

    index: int
    type: int
    config: int
    sample_period: int
    sample_type: int
    read_format: int
    flags: int
    branch_sample_type: int
    sample_regs_user: int
    sample_stack_user: int
    sample_regs_intr: int
    clockid: int
    size: int
    ids: tuple[int, ...] = ()
    name: str | None = None

    @property
    def freq(self) -> bool:
        return bool(self.flags & layout.FLAG_FREQ)

    @property
    def sample_id_all(self) -> bool:
        return bool(self.flags & layout.FLAG_SAMPLE_ID_ALL)

    @property
    def exclude_callchain_user(self) -> bool:
        return bool(self.flags & layout.FLAG_EXCLUDE_CALLCHAIN_USER)

    @property
    def exclude_callchain_kernel(self) -> bool:
        return bool(self.flags & layout.FLAG_EXCLUDE_CALLCHAIN_KERNEL)

    @property
    def defer_callchain(self) -> bool:
        """Its samples' user callchains come later, in CALLCHAIN_DEFERRED records."""
        return bool(self.flags & layout.FLAG_DEFER_CALLCHAIN)

    def flag(self, name: str) -> bool:
        """The bit field ``name`` of :data:`layout.ATTR_FLAG_BITS` (``mmap2``, ``comm_exec``...)."""
        return bool(self.flags >> layout.ATTR_FLAG_BITS.index(name) & 1)


def decode_attr(
    data: Buffer, at: int, limit: int, big_endian: bool, index: int, where: int
) -> EventAttr:
    """The attribute at ``data[at:]``, of its own ``size`` (0 means PERF_ATTR_SIZE_VER0),
    which must end by ``limit``; fields it is too short to hold are zero (header.c
    read_attr).  ``where`` is the file offset of ``data[at]``, for errors."""
    order = layout.byte_order(big_endian)
    if limit - at < 8:
        raise PerfDataError("event attribute cut short", where)
    size = int.from_bytes(bytes(data[at + 4 : at + 8]), "big" if order == ">" else "little")
    size = size or layout.ATTR_SIZE_VER0
    if size < layout.ATTR_SIZE_VER0 or at + size > limit:
        raise PerfDataError(f"event attribute of {size} bytes does not fit", where)
    raw = bytes(data[at : at + min(size, ATTR.size)]).ljust(ATTR.size, b"\0")
    values = dict(zip(ATTR.names, ATTR.struct(big_endian).unpack(raw), strict=True))
    flags = values["flags"]
    if big_endian:
        flags = layout.reverse_bits64(flags)
    return EventAttr(
        index=index, type=values["type"], config=values["config"],
        sample_period=values["sample_period"], sample_type=values["sample_type"],
        read_format=values["read_format"], flags=flags,
        branch_sample_type=values["branch_sample_type"],
        sample_regs_user=values["sample_regs_user"],
        sample_stack_user=values["sample_stack_user"],
        sample_regs_intr=values["sample_regs_intr"], clockid=values["clockid"], size=size,
    )  # fmt: skip


@dataclass(frozen=True)
class FileHeader:
    """The header: the byte order the magic tells, pipe or file mode, where things lie.

    In pipe mode only ``big_endian``, ``pipe`` and ``size`` mean anything; the data runs from
    ``size`` to the end of the stream.
    """

    big_endian: bool
    pipe: bool
    size: int
    attr_size: int = 0
    attrs_offset: int = 0
    attrs_size: int = 0
    data_offset: int = 0
    data_size: int = 0
    #: The features the bitmap says are present, in bit order.
    feature_bits: tuple[int, ...] = ()


def header_kind(start: bytes) -> tuple[bool, int]:
    """The byte order the magic tells, and the header size after it (16: pipe mode), from the
    first 16 bytes of a file or stream."""
    magic = bytes(start[:8])
    if magic == layout.MAGIC_LITTLE:
        big_endian = False
    elif magic == layout.MAGIC_BIG:
        big_endian = True
    elif magic == layout.MAGIC_V1:
        raise PerfDataError("perf.data version 1 (PERFFILE) is not supported", 0)
    else:
        raise PerfDataError("not a perf.data file (no PERFILE2 magic)", 0)
    if len(start) < layout.PIPE_HEADER.size:
        raise PerfDataError("the header is cut short", 0)
    _, size = layout.PIPE_HEADER.struct(big_endian).unpack_from(start)
    if size not in (layout.PIPE_HEADER.size, layout.FILE_HEADER.size):
        raise PerfDataError(f"unknown header size {size}", 8)
    return big_endian, size


def read_file_header(start: bytes) -> FileHeader:
    """The header from the first bytes of a file (at least 16; 104 for the file mode)."""
    big_endian, size = header_kind(start)
    if size == layout.PIPE_HEADER.size:
        return FileHeader(big_endian, True, size)
    if len(start) < layout.FILE_HEADER.size:
        raise PerfDataError("the header is cut short", 0)
    fields = layout.FILE_HEADER.struct(big_endian).unpack_from(start)
    values = dict(zip(layout.FILE_HEADER.names, fields, strict=True))
    bitmap = sum(values[f"features{i}"] << (64 * i) for i in range(4))
    return FileHeader(
        big_endian, False, size, values["attr_size"], values["attrs_offset"],
        values["attrs_size"], values["data_offset"], values["data_size"],
        tuple(bit for bit in range(layout.FEATURE_BITS) if bitmap >> bit & 1),
    )


# -- features ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildId:
    """A build ID perf recorded for a file (BUILD_ID feature or HEADER_BUILD_ID record).

    ``pid`` is the machine's (-1 for the host), not a process's; ``cpumode`` is the
    PERF_RECORD_MISC CPU mode (kernel or user...).
    """

    pid: int
    filename: str
    build_id: bytes
    cpumode: int

    @property
    def hex(self) -> str:
        return self.build_id.hex()


@dataclass(frozen=True)
class EventDesc:
    """One event of the EVENT_DESC feature: its name and ids."""

    name: str
    ids: tuple[int, ...]
    attr: EventAttr


@dataclass
class Features:
    """The feature sections perf wrote (file header, or HEADER_FEATURE records in pipe mode).

    ``present``: the feature numbers (:class:`layout.Feature`) the file has.  ``sections``:
    where each feature's bytes lie in the file (offset, size), to read those not decoded here.
    In pipe mode the features are known once the records that carry them are read: all those
    ``perf record`` writes come before the first sample, but HEADER_BUILD_ID records (from
    ``perf inject -b``) may come anywhere.
    """

    present: set[int] = field(default_factory=set)
    sections: dict[int, tuple[int, int]] = field(default_factory=dict)
    hostname: str | None = None
    os_release: str | None = None
    version: str | None = None
    arch: str | None = None
    nrcpus_online: int | None = None
    nrcpus_available: int | None = None
    cpudesc: str | None = None
    cpuid: str | None = None
    #: Total memory in kB.
    total_mem: int | None = None
    cmdline: tuple[str, ...] = ()
    build_ids: list[BuildId] = field(default_factory=list)
    event_desc: tuple[EventDesc, ...] = ()
    #: Times of the first and last samples (SAMPLE_TIME).
    sample_time: tuple[int, int] | None = None
    #: The frequency of the clock of the time stamps (CLOCKID).
    clockid_frequency: int | None = None
    #: COMPRESSED: (version, type, level, ratio, mmap_len).
    compressed: tuple[int, ...] | None = None

    def build_id(self, filename: str, pid: int = -1) -> bytes | None:
        """The build ID of ``filename`` in machine ``pid`` (-1: the host), or None."""
        for entry in reversed(self.build_ids):
            if entry.filename == filename and entry.pid == pid:
                return entry.build_id
        return None


class _Cursor:
    """Bounded reads through one feature section; PerfDataError at its offset past its end."""

    __slots__ = ("big_endian", "data", "end", "position", "start")

    def __init__(self, data: Buffer, start: int, end: int, big_endian: bool) -> None:
        self.data, self.start, self.position, self.end = data, start, start, end
        self.big_endian = big_endian

    def take(self, record: Record) -> tuple[int, ...]:
        if self.position + record.size > self.end:
            raise PerfDataError("feature section cut short", self.position)
        values = record.struct(self.big_endian).unpack_from(self.data, self.position)
        self.position += record.size
        return tuple(values)

    def string(self) -> str:
        (length,) = self.take(layout.STRING_LENGTH)
        if length > self.end - self.position:
            raise PerfDataError(f"string of {length} bytes past the section's end", self.position)
        raw = bytes(self.data[self.position : self.position + length])
        self.position += length
        return decode_name(raw.split(b"\0", 1)[0])  # names read as everywhere: \xNN

    def strings(self) -> tuple[str, ...]:
        (count,) = self.take(layout.COUNT)
        # Each string takes at least its 4-byte length: a count past that is corrupt.
        if count > (self.end - self.position) // 4:
            raise PerfDataError(f"{count} strings cannot fit", self.position)
        return tuple(self.string() for _ in range(count))


def decode_build_ids(data: Buffer, start: int, end: int, big_endian: bool) -> list[BuildId]:
    """The build_id_event entries of ``data[start:end]`` (BUILD_ID feature), each sized by
    its own header (header.c perf_header__read_build_ids)."""
    header = layout.RECORD_HEADER.struct(big_endian)
    entries: list[BuildId] = []
    position = start
    while position < end:
        if end - position < layout.RECORD_HEADER.size:
            raise PerfDataError("build ID entry cut short", position)
        _, misc, size = header.unpack_from(data, position)
        if size < layout.RECORD_HEADER.size + layout.BUILD_ID.size or position + size > end:
            raise PerfDataError(f"build ID entry of {size} bytes does not fit", position)
        entries.append(decode_build_id(data, position, size, misc, big_endian))
        position += size
    return entries


def decode_build_id(data: Buffer, at: int, size: int, misc: int, big_endian: bool) -> BuildId:
    """One build_id_event at ``data[at:at+size]`` (a HEADER_BUILD_ID record or a BUILD_ID
    feature entry): pid, build ID (20 bytes, or the size byte says with
    MISC_BUILD_ID_SIZE), file name."""
    body = at + layout.RECORD_HEADER.size
    pid, raw = layout.BUILD_ID.struct(big_endian).unpack_from(data, body)
    length = layout.BUILD_ID_MAX
    if misc & layout.MISC_BUILD_ID_SIZE:
        length = min(raw[layout.BUILD_ID_SIZE_AT], layout.BUILD_ID_MAX)
    name = bytes(data[body + layout.BUILD_ID.size : at + size]).split(b"\0", 1)[0]
    return BuildId(pid, os.fsdecode(name), raw[:length], misc & layout.MISC_CPUMODE_MASK)


def _decode_event_desc(cursor: _Cursor, features: Features) -> None:
    nr, attr_size = cursor.take(layout.EVENT_DESC)
    if nr > cursor.end - cursor.position:
        raise PerfDataError(f"{nr} event descriptions cannot fit", cursor.position)
    events = []
    for index in range(nr):
        if attr_size > cursor.end - cursor.position:
            raise PerfDataError("event description cut short", cursor.position)
        attr = decode_attr(
            cursor.data, cursor.position, cursor.position + attr_size, cursor.big_endian, index,
            cursor.position,
        )
        cursor.position += attr_size
        (nr_ids,) = cursor.take(layout.COUNT)
        name = cursor.string()
        if nr_ids > (cursor.end - cursor.position) // 8:
            raise PerfDataError(f"{nr_ids} event ids cannot fit", cursor.position)
        ids = read_u64s(cursor.data, cursor.position, nr_ids, cursor.big_endian)
        cursor.position += 8 * nr_ids
        events.append(EventDesc(name, ids, replace(attr, ids=ids, name=name)))
    features.event_desc = tuple(events)


def decode_feature(
    features: Features, feature: int, data: Buffer, start: int, end: int, big_endian: bool
) -> None:
    """Decode the section ``data[start:end]`` of ``feature`` into ``features`` (those it
    names; others are only recorded in ``sections``).  PerfDataError when it is malformed."""
    features.present.add(feature)
    features.sections[feature] = (start, end - start)
    cursor = _Cursor(data, start, end, big_endian)
    strings = {
        Feature.HOSTNAME: "hostname", Feature.OSRELEASE: "os_release",
        Feature.VERSION: "version", Feature.ARCH: "arch", Feature.CPUDESC: "cpudesc",
        Feature.CPUID: "cpuid",
    }  # fmt: skip
    if feature in strings:
        setattr(features, strings[Feature(feature)], cursor.string())
    elif feature == Feature.NRCPUS:
        features.nrcpus_available, features.nrcpus_online = cursor.take(layout.NRCPUS)
    elif feature == Feature.TOTAL_MEM:
        (features.total_mem,) = cursor.take(layout.U64)
    elif feature == Feature.CMDLINE:
        features.cmdline = cursor.strings()
    elif feature == Feature.BUILD_ID:
        features.build_ids.extend(decode_build_ids(data, start, end, big_endian))
    elif feature == Feature.EVENT_DESC:
        _decode_event_desc(cursor, features)
    elif feature == Feature.SAMPLE_TIME:
        first, last = cursor.take(layout.SAMPLE_TIME)
        features.sample_time = (first, last)
    elif feature == Feature.CLOCKID:
        (features.clockid_frequency,) = cursor.take(layout.U64)
    elif feature == Feature.COMPRESSED:
        features.compressed = cursor.take(layout.COMPRESSED_FEATURE)


def name_attrs(attrs: list[EventAttr], features: Features) -> None:
    """Give each attribute the name EVENT_DESC has for it (by id, else by position)."""
    by_id = {ident: desc.name for desc in features.event_desc for ident in desc.ids}
    for index, attr in enumerate(attrs):
        name = next((by_id[i] for i in attr.ids if i in by_id), None)
        if name is None and len(features.event_desc) == len(attrs):
            name = features.event_desc[index].name
        if name is not None:
            attrs[index] = replace(attr, name=name)


def read_attr_section(data: Buffer, header: FileHeader, file_size: int) -> list[EventAttr]:
    """The attributes of a file-mode header, each with its ids (header.c
    perf_session__read_header)."""
    if header.attr_size < layout.ATTR_SIZE_VER0 + layout.FILE_SECTION.size:
        raise PerfDataError(f"attribute entries of {header.attr_size} bytes", 16)
    if header.attrs_offset + header.attrs_size > file_size:
        raise PerfDataError("the attribute section runs past the end of the file", 24)
    section = layout.FILE_SECTION.struct(header.big_endian)
    found = []
    count = header.attrs_size // header.attr_size
    for index in range(count):
        at = header.attrs_offset + index * header.attr_size
        end = at + header.attr_size
        attr = decode_attr(data, at, end - layout.FILE_SECTION.size, header.big_endian, index, at)
        ids_offset, ids_size = section.unpack_from(data, at + attr.size)
        if ids_offset + ids_size > file_size or ids_size % 8:
            raise PerfDataError("the ids of an event attribute lie outside the file", at)
        found.append((attr, ids_offset, ids_size, at))
    # perf writes each attribute's ids once, apart (perf_session__do_write_header): sections
    # that overlap would have the same bytes read again and again, as many times as there are
    # attributes (a file of a few MB holding more ids than memory).  Each is read once.
    spans = sorted((offset, size, at) for _, offset, size, at in found if size)
    for (offset, size, _), (next_offset, _, at) in pairwise(spans):
        if next_offset < offset + size:
            raise PerfDataError(
                "the ids of this event attribute overlap those of another attribute", at
            )
    return [
        replace(attr, ids=read_u64s(data, offset, size // 8, header.big_endian))
        for attr, offset, size, _ in found
    ]


def read_u64s(data: Buffer, at: int, count: int, big_endian: bool) -> tuple[int, ...]:
    """``count`` u64 values at ``data[at:]``."""
    return struct.unpack_from(f"{layout.byte_order(big_endian)}{count}Q", data, at)


def read_feature_sections(
    data: Buffer, header: FileHeader, file_size: int, problems: list[PerfDataError]
) -> Features:
    """The features of a file-mode header: the section table right after the data section,
    one entry per feature bit set.  A feature that cannot be decoded is left out, with a
    problem noted (perf too reads on: header.c perf_header__process_sections)."""
    features = Features()
    table = header.data_offset + header.data_size
    section = layout.FILE_SECTION.struct(header.big_endian)
    missing: list[str] = []
    cut_at = None
    for index, feature in enumerate(header.feature_bits):
        entry = table + index * layout.FILE_SECTION.size
        if entry + layout.FILE_SECTION.size > file_size:
            missing.extend(_feature_name(f) for f in header.feature_bits[index:])
            cut_at = entry if cut_at is None else cut_at
            break
        offset, size = section.unpack_from(data, entry)
        if offset + size > file_size:
            missing.append(_feature_name(feature))
            cut_at = entry if cut_at is None else cut_at
            continue
        try:
            decode_feature(features, feature, data, offset, offset + size, header.big_endian)
        except PerfDataError as error:
            problems.append(PerfDataError(
                f"feature {_feature_name(feature)}: {error.message}", error.offset
            ))
    if missing:  # a file cut short in its features: one problem for them all
        problems.append(PerfDataError(
            f"the file is cut short: features {', '.join(missing)} lie past its end", cut_at
        ))
    return features


def _feature_name(feature: int) -> str:
    try:
        return Feature(feature).name
    except ValueError:
        return str(feature)


__all__ = [
    "BuildId",
    "EventAttr",
    "EventDesc",
    "Features",
    "FileHeader",
    "decode_attr",
    "decode_build_id",
    "decode_feature",
    "header_kind",
    "name_attrs",
    "read_attr_section",
    "read_feature_sections",
    "read_file_header",
]
