"""The records of a compressed recording (``perf record -z``), as if written without ``-z``.

``perf record -z`` compresses the records it reads from the kernel's ring buffers with one
zstd stream for the whole file: each push of a ring buffer's bytes is compressed and flushed
(never ended) into COMPRESSED records (util/zstd.c zstd_compress_stream_to_records), so that a
record of the recording may begin in one COMPRESSED record and end in the next.  The records
perf writes itself (the synthesized MMAP and COMM of processes that already ran, FINISHED_ROUND,
the pipe-mode attributes and features) stay uncompressed, between them.  perf reads them back
with one decompression stream (util/session.c perf_session__process_compressed_event: each
record's bytes are decompressed after what the one before left, at most the HEADER_COMPRESSED
feature's ``mmap_len`` bytes per record, and its records processed before the next record of
the file).

:class:`Decompressed` is a byte stream of the data section with each COMPRESSED record
(81: the zstd bytes after the header) and COMPRESSED2 record (83, perf 6.15: a u64 data_size,
then that many zstd bytes, padded to 8) replaced by the records it decompresses to, the other
records as they are.  A record whose end comes with the next compressed record comes after
the records perf wrote between the two, as perf delivers it (perf record writes a
FINISHED_ROUND after a round even when the compressor could not flush the round's last
bytes into the record of at most 64 KiB it was writing).  The reader reads it as it reads a
pipe-mode stream (data.py ``_StreamSource``): one loop over the records, whose offsets are
then offsets in the decompressed data (as if the recording had been made without ``-z``).

Memory stays bounded: the file is read a record at a time, and a record may not decompress to
more than perf could read of it (``mmap_len`` bytes and what the decoder holds back:
Decompressed._decompress); the decompressor is fed in slices, so that a record that would
decompress to gigabytes (a zstd bomb) stops at the bound.

Decompressing needs the ``zstandard`` package (the optional extra ``pysframe[zstd]``),
imported when a compressed recording is first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..input import ByteStream
from . import layout
from .errors import PerfDataError
from .layout import RecordType
from .records import trailing_payload

if TYPE_CHECKING:
    from .header import Features

#: HEADER_COMPRESSED's ``type`` for zstd (util/compress.h enum perf_compress_type).
ZSTD = 1
#: The most ``mmap_len`` counted in the bound of a record's output, whatever the file says.
MAX_RECORD_OUTPUT = 1 << 30
#: The largest zstd window counted in the bound (zstd's decoders refuse larger by default:
#: ZSTD_WINDOWLOG_LIMIT_DEFAULT, 2^27), and the largest block (RFC 8878 3.1.1.2.4).
_MAX_WINDOW = 1 << 27
_BLOCK = 128 << 10
#: Compressed bytes decompressed by one call (see Decompressed._decompress).
_SLICE = 256
#: Bytes passed through by one read of a payload that follows a record (AUXTRACE).
_PIECE = 1 << 20


def record_output_limit(features: Features) -> int:
    """The HEADER_COMPRESSED feature's ``mmap_len`` (perf decompresses each record into a
    buffer of that size: the bound of Decompressed._decompress), at most
    :data:`MAX_RECORD_OUTPUT`.  PerfDataError unless the feature says zstd."""
    if features.compressed is None:
        raise PerfDataError("compressed records without the COMPRESSED feature")
    _version, kind, _level, _ratio, mmap_len = features.compressed
    if kind != ZSTD:
        raise PerfDataError(f"compressed records of type {kind}: only zstd (1) is known")
    return min(mmap_len, MAX_RECORD_OUTPUT)


class Decompressed:
    """The data section read from ``raw`` (a byte stream whose first byte is at offset
    ``start`` of the file), each compressed record replaced by its decompressed bytes
    (see the module's documentation).  ``read(size)``: the next ``size`` bytes (fewer only
    at the end).  A compressed record that is not zstd, or decompresses to more than
    ``limit`` bytes (``mmap_len``) and the zstd window, is a PerfDataError with the file
    offset of the record; a record cut short, or one whose size is under 8 bytes, is passed
    on as it is (from there on the bytes are passed on unread), for the reader to report it
    as it does in any recording."""

    def __init__(self, raw: ByteStream, start: int, big_endian: bool, limit: int) -> None:
        self.raw = raw
        self.offset = start  # the file offset of the next byte of ``raw``
        self.big_endian = big_endian
        self.limit = limit
        self.header = layout.RECORD_HEADER.struct(big_endian)
        self.data_size = layout.COMPRESSED2.struct(big_endian)
        #: The decompressed bytes of a record not whole yet (its end comes with the next
        #: compressed record).
        self.tail = b""
        self.pending: list[bytes] = []
        self.have = 0
        self.copy = 0  # bytes of ``raw`` to pass on as they are (a payload after a record)
        self.done = False
        self.error: PerfDataError | None = None
        self._stream: Any = None  # a zstandard ZstdDecompressionObj, from the first record

    def read(self, size: int, /) -> bytes:
        if self.error is not None:
            raise self.error
        try:
            while self.have < size and not self.done:
                self._step()
        except PerfDataError as error:
            if not self.have:
                raise
            self.error = error  # the records before it are read first
        joined = b"".join(self.pending)
        out, rest = joined[:size], joined[size:]
        self.pending, self.have = ([rest] if rest else []), len(rest)
        return out

    def _put(self, data: bytes) -> None:
        if data:
            self.pending.append(data)
            self.have += len(data)

    def _take(self, count: int) -> bytes:
        """Up to ``count`` bytes of ``raw`` (fewer only at its end)."""
        parts, have = [], 0
        while have < count:
            part = self.raw.read(count - have)
            if not part:
                break
            parts.append(part)
            have += len(part)
        self.offset += have
        return b"".join(parts)

    def _step(self) -> None:
        """Pass on the next record of ``raw`` (or a piece of the payload after one)."""
        if self.copy:
            piece = self._take(min(self.copy, _PIECE))
            self.copy = 0 if len(piece) < min(self.copy, _PIECE) else self.copy - len(piece)
            self.done = not piece
            self._put(piece)
            return
        at = self.offset
        head = self._take(layout.RECORD_HEADER.size)
        if len(head) < layout.RECORD_HEADER.size:  # the end (a record not whole: the reader
            self._put(self.tail + head)            # reports it)
            self.done = True
            return
        kind, _misc, size = self.header.unpack(head)
        if size < layout.RECORD_HEADER.size:  # the reader reports it; nothing after is read
            self._put(self.tail + head)
            self.copy, self.done, self.tail = 1 << 62, False, b""
            return
        body = self._take(size - layout.RECORD_HEADER.size)
        if len(body) < size - layout.RECORD_HEADER.size:  # cut short: the reader tells
            self._put(self.tail + head + body)
            self.done = True
            return
        if kind == RecordType.COMPRESSED:
            self._decompress(body, at)
        elif kind == RecordType.COMPRESSED2:
            # struct perf_record_compressed2: u64 data_size, then the zstd bytes (padded)
            if len(body) < self.data_size.size:
                raise PerfDataError(f"COMPRESSED2 record of size {size}", at)
            (length,) = self.data_size.unpack_from(body)
            if length > len(body) - self.data_size.size:
                raise PerfDataError(
                    f"COMPRESSED2 record of size {size} with data_size {length}", at
                )
            self._decompress(body[self.data_size.size : self.data_size.size + length], at)
        else:
            record = head + body
            self._put(record)
            self.copy = trailing_payload(record, 0, kind, size, self.big_endian)

    def _decompress(self, payload: bytes, at: int) -> None:
        """Decompress one record's ``payload`` after those before it (one zstd stream), a
        slice at a time: a slice of :data:`_SLICE` bytes completes at most 1 + _SLICE / 4
        blocks of at most 128 KiB each (a block takes a 3-byte header and a byte at least:
        RFC 8878 3.1.1.2), so that the output is checked against the bound every 8 MiB at
        most.

        The bound: perf decompresses a record into a buffer of ``mmap_len`` bytes; what does
        not fit stays in the decoder, which holds at most the frame's window and a block
        (the window, from the frame's header, at most the 128 MiB decoders accept by default),
        and comes out with the next record.  So a record perf reads decompresses to at most
        ``mmap_len`` + window + 128 KiB."""
        try:
            if self._stream is None:
                zstandard = _zstandard(at)
                window = zstandard.get_frame_parameters(payload).window_size
                self.limit += min(window, _MAX_WINDOW) + _BLOCK
                self._stream = zstandard.ZstdDecompressor().decompressobj()
            room = self.limit
            parts = [self.tail]
            for start in range(0, len(payload), _SLICE):
                out = self._stream.decompress(payload[start : start + _SLICE])
                room -= len(out)
                if room < 0:
                    raise PerfDataError(
                        f"a compressed record decompresses to more than {self.limit} bytes: "
                        "the ring buffer size (mmap_len) the COMPRESSED feature gives, and "
                        "the zstd window",
                        at,
                    )
                parts.append(out)
        except PerfDataError:
            raise
        except Exception as error:  # zstandard.ZstdError: zstandard is imported lazily
            raise PerfDataError(f"a compressed record does not decompress: {error}", at) from None
        self._put_whole(b"".join(parts))

    def _put_whole(self, data: bytes) -> None:
        """Pass on the records ``data`` holds whole; keep the part of one it ends with, whose
        end comes with the next compressed record, after the records perf wrote itself
        between the two (a FINISHED_ROUND...): perf reads so (util/session.c
        perf_session__process_compressed_event keeps the part of a record its buffer ends
        with, decomp_last_rem, for the buffer of the next compressed record)."""
        position, end, unpack = 0, len(data), self.header.unpack_from
        header_size = layout.RECORD_HEADER.size
        while position + header_size <= end:
            size = unpack(data, position)[2]
            if size < header_size:  # the reader reports it: all passed on
                position = end
            elif position + size > end:
                break
            else:
                position += size
        self._put(data[:position])
        self.tail = data[position:]


def _zstandard(at: int) -> Any:
    """The zstandard module; PerfDataError (at offset ``at``) when it is not installed."""
    try:
        import zstandard
    except ImportError:
        raise PerfDataError(
            "reading compressed records (perf record -z) needs zstandard: "
            "pip install 'pysframe[zstd]'",
            at,
        ) from None
    return zstandard


class Joined:
    """The byte stream of ``head`` (bytes or a memoryview: a pipe's prologue, read already, or
    a file's map) and then ``rest``."""

    def __init__(self, head: Any, rest: ByteStream | None) -> None:
        self.head = head
        self.rest = rest

    def read(self, size: int, /) -> bytes:
        if len(self.head):
            out, self.head = bytes(self.head[:size]), self.head[size:]
            return out
        return self.rest.read(size) if self.rest is not None else b""
