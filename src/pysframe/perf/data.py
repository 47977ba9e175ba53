"""The perf.data reader: a file through a memory map, or a pipe-mode stream in blocks.

Reading is one pass down the data section: each record's header (u32 type, u16 misc, u16
size) says what it is and where the next one starts.  Samples are gathered by offset and
decoded together a chunk at a time (samples.py); side-band records (records.py) are decoded as
they come; records perf writes for itself (from type 64) update the attributes and features
(header.py); every other record is stepped over by its size, never looked into.
HEADER_TRACING_DATA and AUXTRACE records are followed by a payload their size does not count,
which is stepped over too (perf's util/session.c perf_session__process_user_event).
A compressed recording (``perf record -z``) is read as a stream of its data decompressed
(compressed.py), by the same loop: its offsets are those of the decompressed data.

Memory does not grow with the file: a file is read through a memory map whose pages behind
the chunk being read are given back to the kernel (MADV_DONTNEED: they are read again from the
file if a chunk kept from before touches them); a stream is read in blocks, one chunk never
spanning two.  A chunk keeps the map or its block alive while it is referenced.

Bad input: a record size under 8 bytes, a record or the payload after it that runs past the
end of a data section the file holds whole, a corrupt sample or side-band record, a compressed
record that does not decompress: PerfDataError with the path and the record's offset (the
samples before it are delivered first).  A file or stream cut short (a copy truncated, a pipe
closed), or a file whose header says its data has a size of 0 (perf record killed before it
wrote the header back, and the feature sections after the data), is read up to the last whole
record, and what happened is noted once in ``problems``.

Costs are linear in the recording: the attributes' id sections are read once each (sections
that overlap are refused), an attribute added (a pipe-mode HEADER_ATTR record) costs its own
ids (attrs.py), and a stream's window grows by doubling while the prologue is kept.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import field, replace
from typing import IO, Any, Literal

from ..dataclass import dataclass
from ..input import ByteStream, open_input, standard_input
from ..names import decode_name
from . import layout
from .attrs import AttrTable
from .errors import PerfDataError
from .header import (
    EventAttr,
    Features,
    FileHeader,
    decode_attr,
    decode_build_id,
    decode_feature,
    header_kind,
    name_attrs,
    read_attr_section,
    read_feature_sections,
    read_file_header,
    read_u64s,
)
from .layout import RecordType
from .records import SIDE_BAND_TYPES, SideBandEvent, decode_side_band, trailing_payload
from .samples import SampleChunk, decode_chunk

#: Samples per chunk unless told otherwise.
DEFAULT_CHUNK = 16384
#: Bytes a stream is read by.
STREAM_BLOCK = 8 << 20
#: A stretch of a file ends after this many bytes even if it has fewer samples than a chunk.
MAX_STRETCH_BYTES = 64 << 20
_PAGE = mmap.PAGESIZE

Mode = Literal["bulk", "events"]


@dataclass(eq=False)
class Stretch:
    """The records of one stretch of the data, in file order: the side-band ``events`` and the
    ``samples`` (a :class:`SampleChunk`).  ``start`` and ``end`` are file offsets; every
    event's and sample's file offset lies between them, so that a consumer can merge the two
    back in file order."""

    start: int
    end: int
    events: list[SideBandEvent] = field(default_factory=list)
    samples: SampleChunk | None = None
    #: File offsets of the FINISHED_ROUND records in the stretch: perf record wrote every
    #: ring buffer's records up to there (the bound of perf's time ordering: order.py).
    round_ends: list[int] = field(default_factory=list)


@dataclass(frozen=True, eq=False, repr=False)
class _Window:
    """Bytes of the data at hand: ``buffer[0]`` is at file offset ``base``, valid up to file
    offset ``end``; ``final``: nothing comes after ``end``."""

    buffer: Any
    base: int
    end: int
    final: bool


class _MappedSource:
    """A file's data section through its memory map: one window, all of it.  The window's
    buffer is a memoryview of the map, which the chunks keep: the map stays valid while they
    live, even after :meth:`PerfData.close`."""

    def __init__(self, mapped: mmap.mmap, end: int) -> None:
        self.mapped = mapped
        self.window = _Window(memoryview(mapped), 0, end, True)
        self.released = 0

    def ensure(self, keep: int, end: int) -> _Window:
        return self.window

    def release(self, before: int) -> None:
        """Give back the pages of the map before ``before`` (a hint: they are read again from
        the file if touched)."""
        start = self.released - self.released % _PAGE
        before = min(before, len(self.mapped))
        stop = before - before % _PAGE
        if stop > start:
            try:
                self.mapped.madvise(mmap.MADV_DONTNEED, start, stop - start)
            except (OSError, ValueError):  # only a hint
                return
            self.released = stop


class _StreamSource:
    """A pipe-mode stream read in blocks: each window is a new bytes object, so that chunks
    keep the window they index alive and valid."""

    def __init__(self, stream: ByteStream, start: int) -> None:
        self.stream = stream
        self.data = b""
        self.base = start
        self.eof = False
        #: What a read failed with after giving bytes (the bytes are read first).
        self.error: PerfDataError | None = None

    def ensure(self, keep: int, end: int) -> _Window:
        """A window holding the bytes from ``keep`` to ``end`` (fewer at the stream's end).

        The window at hand serves while it holds them.  Else the bytes from ``keep`` on are
        kept and more are read: at least a block, and at least as many as are kept, so that a
        window that grows record by record (the prologue, kept whole until the first sample)
        is copied a bounded number of times per byte: reading stays linear in the stream."""
        have_end = self.base + len(self.data)
        if self.base <= keep and (end <= have_end or self.eof):
            return _Window(self.data, self.base, have_end, self.eof)
        if self.error is not None:
            raise self.error
        if keep >= have_end:
            have_end += self._discard(keep - have_end)
            if have_end < keep:  # the stream ended before ``keep``
                self.data, self.base = b"", have_end
                return _Window(self.data, have_end, have_end, True)
            kept = b""
        else:
            kept = self.data[keep - self.base :]
        parts = [kept]
        have = len(kept)
        want = max(end - keep, STREAM_BLOCK, 2 * have)
        while have < want and not self.eof:
            try:
                block = self._read(min(want - have, STREAM_BLOCK))
            except PerfDataError as error:
                if have == len(kept):
                    raise
                self.error = error  # the bytes before it are read first
                break
            parts.append(block)
            have += len(block)
        self.data = b"".join(parts)
        self.base = keep
        return _Window(self.data, keep, keep + len(self.data), self.eof)

    def _read(self, size: int) -> bytes:
        try:
            block = self.stream.read(size)
        except OSError as error:
            raise PerfDataError(error.strerror or str(error)) from None
        if not block:
            self.eof = True
        return block or b""

    def _discard(self, count: int) -> int:
        """Read past ``count`` bytes (a payload stepped over); how many there were."""
        done = 0
        while done < count and not self.eof:
            done += len(self._read(min(count - done, STREAM_BLOCK)))
        return done

    def release(self, before: int) -> None:
        return


class PerfData:
    """A perf.data file or stream (see the package's documentation).

    ``header``: byte order, pipe or file mode, where the sections lie.  ``attrs``: the event
    attributes (:class:`EventAttr`), index = a sample's ``attr``.  ``features``: the feature
    sections.  ``problems``: what was read past (a file cut short...), as PerfDataError
    instances, each to be reported once as a warning.  ``record_counts`` (record type ->
    count), ``unknown_id_samples`` and ``stopped`` (whether it ended at its ``stop``:
    :meth:`read`) describe the last pass over the data.
    """

    def __init__(self, path: str, header: FileHeader) -> None:
        self.path = path
        self.header = header
        self.features = Features()
        self.problems: list[PerfDataError] = []
        self.record_counts: Counter[int] = Counter()
        self.unknown_id_samples = 0
        self.stopped = False
        #: The attributes as read (unnamed), with their formats.
        self._table = AttrTable()
        #: Names EVENT_UPDATE records give, by id: (record number, name).
        self._updated_names: dict[int, tuple[int, str]] = {}
        #: :attr:`attrs`, named; None when an attribute or a name came since.
        self._named: list[EventAttr] | None = None
        self._file: IO[bytes] | None = None
        self._map: mmap.mmap | None = None
        self._stream: _StreamSource | None = None
        self._data_start = header.size
        self._data_end = 0
        #: Offset of the last user record whose effect (attribute, feature...) is applied.
        self._applied = -1
        self._read_once = False
        #: Whether the last pass read a compressed recording (offsets in the decompressed
        #: data: compressed.py).
        self._decompressing = False
        #: Whether the file's feature sections are missing (data size 0, or cut short).
        self._features_missing = False

    # -- opening ------------------------------------------------------------------------------

    @property
    def attrs(self) -> list[EventAttr]:
        """The event attributes, named from the EVENT_DESC feature and EVENT_UPDATE records
        (a name an EVENT_UPDATE gives wins)."""
        if self._named is None:
            named = list(self._table.attrs)
            name_attrs(named, self.features)
            if self._updated_names:
                for index, attr in enumerate(named):
                    found = [self._updated_names[i] for i in attr.ids if i in self._updated_names]
                    if found:
                        named[index] = replace(attr, name=max(found)[1])
            self._named = named
        return self._named

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> PerfData:
        """The perf.data file at ``path`` (file or pipe format, read through a memory map), or
        standard input for ``-`` (pipe format)."""
        name = os.fspath(path)
        if name == "-":
            return cls.from_stream(standard_input(), "-")
        stream = open_input(name)
        try:
            return cls._from_file(stream, name)
        except PerfDataError as error:
            stream.close()
            raise error.at(path=name) from None
        except BaseException:
            stream.close()
            raise

    @classmethod
    def from_stream(cls, stream: ByteStream, path: str = "-") -> PerfData:
        """A pipe-format stream (standard input), read once, in blocks."""
        try:
            big_endian, size = header_kind(stream.read(layout.PIPE_HEADER.size) or b"")
            if size != layout.PIPE_HEADER.size:
                raise PerfDataError(
                    "a perf.data file in file mode cannot be read as a stream: give its path", 0
                )
            header = FileHeader(big_endian, True, size)
            data = cls(path, header)
            data._stream = _StreamSource(stream, header.size)
            data._data_end = -1
            data._read_prologue(data._stream)
            data._with_path()
        except OSError as error:
            raise PerfDataError(error.strerror or str(error), path=path) from None
        except PerfDataError as error:
            raise error.at(path=path) from None
        return data

    @classmethod
    def _from_file(cls, stream: IO[bytes], path: str) -> PerfData:
        size = os.fstat(stream.fileno()).st_size
        if size < layout.PIPE_HEADER.size:
            raise PerfDataError("not a perf.data file: too short" if size else "empty file")
        mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        header = read_file_header(mapped[: layout.FILE_HEADER.size])
        data = cls(path, header)
        data._file, data._map = stream, mapped
        if header.pipe:
            data._data_end = size
            data._read_prologue(_MappedSource(mapped, size))
            return data._with_path()
        data._data_start = header.data_offset
        data._data_end = header.data_offset + header.data_size
        if header.data_offset < header.size or header.data_offset > size:
            raise PerfDataError("the data section lies outside the file", 40)
        data._table = AttrTable(read_attr_section(mapped, header, size))
        if header.data_size != 0 and data._data_end <= size:
            data.features = read_feature_sections(mapped, header, size, data.problems)
        else:  # perf record killed, or a file cut short: reading says so once, at the end
            data._data_end = size
            data._features_missing = True
        return data._with_path()

    def _with_path(self) -> PerfData:
        """This reader, its problems given its path."""
        for problem in self.problems:
            problem.at(path=self.path)
        return self

    def close(self) -> None:
        if self._map is not None:
            with contextlib.suppress(BufferError):  # chunks still view it: it goes with them
                self._map.close()
            self._map = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> PerfData:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def compressed(self) -> bool:
        """Whether the recording was made with ``perf record -z`` (its COMPRESSED feature): its
        records are read decompressed (compressed.py), their offsets in the decompressed data,
        as if it had been recorded without ``-z``."""
        return self.features.compressed is not None

    @property
    def big_endian(self) -> bool:
        return self.header.big_endian

    # -- reading the records --------------------------------------------------------------------

    def read(
        self, chunk: int = DEFAULT_CHUNK, cuts: Iterable[int] = (), stop: int | None = None
    ) -> Iterator[Stretch]:
        """The records in file order, a stretch at a time: side-band events and up to
        ``chunk`` samples per stretch.  ``cuts`` (file offsets): no stretch holds both a
        record that ends at or before a cut and one that ends after it (a stretch ends
        before the record that crosses it), so that what is read up to a cut is the
        stretches whose ``end`` is at most the cut (the time slices of session.py).
        ``stop``: a cut where the reading ends, the record that crosses it not read
        (:attr:`stopped` True where one did)."""
        return self._walk(chunk, "bulk", sorted({*cuts, *([] if stop is None else [stop])}), stop)

    def samples(self, chunk: int = DEFAULT_CHUNK) -> Iterator[SampleChunk]:
        """The samples, ``chunk`` at most at a time, in file order."""
        for stretch in self._walk(chunk, "bulk"):
            if stretch.samples is not None and len(stretch.samples):
                yield stretch.samples

    def events(self) -> Iterator[SideBandEvent]:
        """The side-band events (MMAP, MMAP2, COMM, FORK, EXIT, LOST, LOST_SAMPLES,
        CALLCHAIN_DEFERRED) in file order; samples are stepped over without being decoded."""
        for stretch in self._walk(DEFAULT_CHUNK, "events"):
            yield from stretch.events

    def _source(self) -> _MappedSource | _StreamSource:
        compressed = self.compressed
        if self._stream is not None:
            if self._read_once:
                raise PerfDataError("a stream can be read once", path=self.path)
            self._read_once = True
            if compressed:  # the prologue read already, then the rest of the stream
                kept = self._stream.data[self._data_start - self._stream.base :]
                rest = None if self._stream.eof else self._stream.stream
                return self._decompressed(kept, rest)
            return self._stream
        if self._map is None:
            raise PerfDataError("the file is closed", path=self.path)
        if compressed:
            data = memoryview(self._map)[self._data_start : self._data_end]
            return self._decompressed(data, None)
        return _MappedSource(self._map, self._data_end)

    def _decompressed(self, head: Any, rest: ByteStream | None) -> _StreamSource:
        """A compressed recording's data, ``head`` then what ``rest`` gives, read as a stream
        of the records it holds (compressed.py: imported only then)."""
        from .compressed import Decompressed, Joined, record_output_limit

        raw = Joined(head, rest)
        limit = record_output_limit(self.features)
        data = Decompressed(raw, self._data_start, self.big_endian, limit)
        self._decompressing = True
        return _StreamSource(data, self._data_start)

    def _walk(
        self, chunk: int, mode: Mode, cuts: list[int] | None = None, stop: int | None = None
    ) -> Iterator[Stretch]:
        """One pass over the data.  Errors come with the path, after the records before them
        were delivered."""
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        self.record_counts = Counter()
        self.unknown_id_samples = 0
        self.stopped = False
        try:
            yield from self._pass(self._source(), chunk, mode, cuts or [], stop)
        except PerfDataError as error:
            raise error.at(path=self.path) from None

    def _pass(
        self,
        source: _MappedSource | _StreamSource,
        chunk: int,
        mode: Mode,
        cuts: list[int],
        stop: int | None,
    ) -> Iterator[Stretch]:
        """The loop down the record headers (about 90 lines: it is the one place that knows
        where the records are, and the path every record of the file takes, kept free of calls
        it does not need).  Samples are collected by offset and decoded at each flush; a flush
        happens when a stretch holds ``chunk`` samples or events or MAX_STRETCH_BYTES, when the
        window of a stream moves, before an attribute is added, and at the end."""
        big_endian = self.big_endian
        unpack = layout.RECORD_HEADER.struct(big_endian).unpack_from
        header_size = layout.RECORD_HEADER.size
        position = self._data_start
        window = source.ensure(position, position + header_size)
        buffer, base, end = window.buffer, window.base, window.end
        stretch = Stretch(position, position)
        offsets: list[int] = []
        counts = self.record_counts
        side_band, user_start = SIDE_BAND_TYPES, layout.USER_TYPE_START
        budget, limit = chunk, position + MAX_STRETCH_BYTES
        bulk = mode == "bulk"
        # the next cut (:meth:`read`) a record may not cross within its stretch
        cuts = [*cuts, 1 << 64]
        cut, next_cut = cuts[0], 1
        #: The last record followed by a payload its size does not count: (offset, type,
        #: payload bytes).
        payload: tuple[int, int, int] | None = None

        def flush() -> Iterator[Stretch]:
            nonlocal stretch, offsets, budget, limit
            done, stretch = stretch, Stretch(position, position)
            done.end = position
            pending, offsets = offsets, []
            budget, limit = chunk, position + MAX_STRETCH_BYTES
            error = None
            if bulk and (pending or done.events or done.round_ends):
                result = decode_chunk(buffer, pending, self._table, big_endian, base)
                done.samples, error = result.chunk, result.error
                self.unknown_id_samples += result.unknown_ids
            if done.events or done.samples or done.round_ends:
                yield done
            if error is not None:
                raise error
            source.release(position)

        try:
            while True:
                if budget <= 0 or position > limit:
                    yield from flush()
                if position + header_size <= end:
                    kind, misc, size = unpack(buffer, position - base)
                    if size < header_size:
                        raise PerfDataError(
                            f"{layout.record_type_name(kind)} record of size {size}", position
                        )
                    whole = position + size <= end
                else:
                    size, whole = None, False
                if not whole:  # the window ends within this record
                    if window.final:
                        self._note_end(position, end, size, payload)
                        break
                    yield from flush()
                    window = source.ensure(position, position + (size or header_size))
                    buffer, base, end = window.buffer, window.base, window.end
                    continue
                if position + size > cut:  # this record crosses a cut: a stretch from it
                    if position > stretch.start:
                        yield from flush()
                    if cut == stop:
                        self.stopped = True
                        break
                    while position + size > cut:
                        cut, next_cut = cuts[next_cut], next_cut + 1
                extra = 0
                if kind == 9:  # PERF_RECORD_SAMPLE, and those after it
                    # A run of whole samples within the stretch, in a loop of its own (most
                    # records are samples): the first other record goes round again.
                    run = 0
                    while True:
                        run += 1
                        if bulk:
                            offsets.append(position - base)
                        position += size
                        if run >= budget or position > limit or position + header_size > end:
                            break
                        kind, misc, size = unpack(buffer, position - base)
                        after = position + size
                        if kind != 9 or size < header_size or after > end or after > cut:
                            break
                    counts[9] += run
                    budget -= run
                    continue
                counts[kind] += 1
                if kind in side_band:
                    budget -= 1
                    stretch.events.append(decode_side_band(
                        buffer, position - base, kind, misc, size, self._table, big_endian,
                        position,
                    ))  # fmt: skip
                elif kind >= user_start:
                    if kind == RecordType.FINISHED_ROUND:
                        stretch.round_ends.append(position)
                    elif kind == RecordType.HEADER_ATTR and position > self._applied:
                        yield from flush()  # the samples before it, by the attributes before
                        self._apply_user_record(window, position, kind, misc, size)
                    else:
                        extra = self._apply_user_record(window, position, kind, misc, size)
                        if extra:
                            payload = (position, kind, extra)
                            if position + size + extra > end and window.final:
                                self._note_end(position + size + extra, end, None, payload)
                                break
                position += size + extra
            yield from flush()
        except PerfDataError:
            yield from flush()  # the records before the error (an earlier error wins)
            raise

    def _note_end(
        self, position: int, end: int, size: int | None, payload: tuple[int, int, int] | None
    ) -> None:
        """The data ended at ``end`` with the next record at ``position`` (``size`` bytes, None
        when its header is not whole; past ``end`` when the ``payload`` of the record before,
        (offset, type, bytes), runs past it).  Fine at the end of a data section the file holds
        whole.  A record or payload past the end of such a section is an error.  In a stream,
        a file whose header says the data goes on, or a file whose header says its data has
        a size of 0 (perf record killed), the records were read up to the last whole one:
        that is noted once, with what happened."""
        declared = self._data_end_declared()
        if self._decompressing and not self.header.pipe:
            # offsets in the decompressed data: the end the header declares lies past the
            # end read by what the file lacks of it
            declared = end + max(0, declared - self._data_end)
        unfinished = not self.header.pipe and self.header.data_size == 0
        cut = self.header.pipe or unfinished or declared > end
        container = "stream" if self._stream is not None else "file"
        if position > end and payload is not None:
            where, kind, length = payload
            past = (
                f"the payload of {length} bytes of the {layout.record_type_name(kind)} record "
                "at this offset runs past the end of the "
            )
        elif position < end:
            where = position
            what = f"a record of {size} bytes" if size is not None else "a record header"
            past = f"{what} runs past the end of the "
        elif cut and (unfinished or declared > end):
            where, past = position, None
        else:
            return  # the end of a data section the file holds whole, or of a stream
        if not cut and past is not None:
            raise PerfDataError(past + "data section", where)
        if unfinished:
            # perf's util/header.c perf_session__read_header warns so too, and reads on.
            what = (
                "the header's data size is 0: perf record did not finish (was it killed?) "
                "and wrote no feature sections"
            )
        elif declared > end:
            what = (
                f"the file is cut short: its data should run to {declared:#x}, and the "
                "feature sections after it are missing"
            )
        else:
            what = f"the {container} is cut short"
        if past is None:
            what += f"; the records were read to the end of the {container}"
        else:
            what += f"; {past}{container}, the records before it were read"
        problem = PerfDataError(what, where, path=self.path)
        if all(str(problem) != str(known) for known in self.problems):  # once, whatever the passes
            self.problems.append(problem)

    def _data_end_declared(self) -> int:
        """Where the header says the data ends (file mode), else where it does."""
        if self.header.pipe or self.header.data_size == 0:
            return self._data_end
        return self.header.data_offset + self.header.data_size

    # -- records perf writes for itself ---------------------------------------------------------

    def _read_prologue(self, source: _MappedSource | _StreamSource) -> None:
        """Pipe mode: apply the attributes, features and names perf writes before the first
        sample (they come before FINISHED_INIT, or the first FINISHED_ROUND in older perf),
        keeping the bytes for the pass that reads the records."""
        unpack = layout.RECORD_HEADER.struct(self.big_endian).unpack_from
        position = self._data_start
        while True:
            window = source.ensure(self._data_start, position + layout.RECORD_HEADER.size)
            if position + layout.RECORD_HEADER.size > window.end:
                break
            kind, misc, size = unpack(window.buffer, position - window.base)
            if size < layout.RECORD_HEADER.size:
                break  # the pass over the records reports it
            window = source.ensure(self._data_start, position + size)
            if position + size > window.end or kind in _PROLOGUE_ENDS:
                break
            extra = 0
            if kind >= layout.USER_TYPE_START:
                extra = self._apply_user_record(window, position, kind, misc, size)
            position += size + extra

    def _apply_user_record(
        self, window: _Window, position: int, kind: int, misc: int, size: int
    ) -> int:
        """Apply a record of type 64 and up; the bytes of payload that follow it."""
        buffer, at, big_endian = window.buffer, position - window.base, self.big_endian
        extra = trailing_payload(buffer, at, kind, size, big_endian)
        if extra:
            return extra
        if kind in (RecordType.COMPRESSED, RecordType.COMPRESSED2):
            # Met only where the recording's features do not say it is compressed (else
            # compressed.py has replaced these records by what they hold).
            why = (
                "its feature sections are missing (perf record did not finish, or the file "
                "is cut short), and the COMPRESSED feature with them"
                if self._features_missing
                else "the recording has no COMPRESSED feature (perf record -z writes it)"
            )
            raise PerfDataError(
                f"{layout.record_type_name(kind)} record cannot be read: {why}", position
            )
        if position <= self._applied or kind not in _APPLIED_TYPES:
            return 0
        self._applied = position
        body = at + layout.RECORD_HEADER.size
        end = at + size
        self._named = None  # named again when next asked (:attr:`attrs`)
        if kind == RecordType.HEADER_ATTR:
            attr = decode_attr(buffer, body, end, big_endian, len(self._table), position + 8)
            ids = read_u64s(buffer, body + attr.size, (end - body - attr.size) // 8, big_endian)
            try:
                self._table.add(replace(attr, ids=ids))
            except PerfDataError as error:
                raise PerfDataError(error.message, position) from None
        elif kind == RecordType.HEADER_FEATURE and size >= 16:
            (feature,) = layout.U64.struct(big_endian).unpack_from(buffer, body)
            try:
                decode_feature(self.features, feature, buffer, body + 8, end, big_endian)
            except PerfDataError as error:
                where = position if error.offset is None else error.offset + window.base
                said = f"feature {feature}: "
                if not any(known.message.startswith(said) for known in self.problems):
                    self.problems.append(
                        PerfDataError(said + error.message, where, path=self.path)
                    )
        elif kind == RecordType.EVENT_UPDATE and size >= 24:
            update, ident = layout.EVENT_UPDATE.struct(big_endian).unpack_from(buffer, body)
            if update == layout.EVENT_UPDATE_NAME:
                name = decode_name(bytes(buffer[body + 16 : end]).split(b"\0", 1)[0])
                self._updated_names[ident] = (position, name)
        elif kind == RecordType.HEADER_BUILD_ID:
            if size < layout.RECORD_HEADER.size + layout.BUILD_ID.size:
                raise PerfDataError("HEADER_BUILD_ID record too short", position)
            self.features.build_ids.append(decode_build_id(buffer, at, size, misc, big_endian))
            self.features.present.add(layout.Feature.BUILD_ID)
        return 0


#: Records that end the pipe-mode prologue (a compressed record holds the kernel's records:
#: the stream is read decompressed from its start, compressed.py).
_PROLOGUE_ENDS = frozenset({
    RecordType.SAMPLE, RecordType.FINISHED_INIT, RecordType.FINISHED_ROUND,
    RecordType.COMPRESSED, RecordType.COMPRESSED2,
})  # fmt: skip
#: User records that change what is known of the recording (applied once).
_APPLIED_TYPES = frozenset({
    RecordType.HEADER_ATTR, RecordType.HEADER_FEATURE, RecordType.EVENT_UPDATE,
    RecordType.HEADER_BUILD_ID,
})  # fmt: skip
