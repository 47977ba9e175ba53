"""Compressed recordings (``perf record -z``) on hand-built bytes: the records a recording's
COMPRESSED records hold, compressed here with zstandard as perf compresses them (one zstd
stream for the file, flushed, never ended, between records: util/zstd.c
zstd_compress_stream_to_records), read as the same recording written without compression
(same samples, events and offsets); and the compressed records that cannot be read, each one
clear error, never a traceback or a large allocation."""

from __future__ import annotations

import io
import struct
import sys
import tracemalloc
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from conftest import require_module
from perf_support import FINISHED_ROUND, IP, TID, TIME, Attr, PerfFile, read_both, unfinished
from pysframe.perf import PerfData, PerfDataError, Sample


def zstandard() -> ModuleType:
    """The zstandard package (the ``zstd`` extra, in ``dev``): skipped without it, failed
    under CI (conftest.require_module)."""
    return require_module("zstandard")


#: HEADER_COMPRESSED (feature 27) and the record types (perf.data-file-format.txt).
FEAT_COMPRESSED = 27
COMPRESSED, COMPRESSED2 = 81, 83
#: perf's ring buffer size in a recording made with the default -m (129 pages).
MMAP_LEN = 129 * 4096


def compressed_feature(perf: PerfFile, mmap_len: int = MMAP_LEN, kind: int = 1) -> None:
    perf.add_feature(FEAT_COMPRESSED, perf.pack(
        "5I",
        1,         # u32 version
        kind,      # u32 type: 1 = zstd
        1,         # u32 level
        3,         # u32 ratio
        mmap_len,  # u32 mmap_len: the ring buffer size
    ))  # fmt: skip


def plain_recording(pipe: bool = False) -> PerfFile:
    """A recording of side-band records and samples, uncompressed: ten samples, a COMM and
    an MMAP2 among them."""
    perf = PerfFile(pipe=pipe)
    perf.add_attr(Attr(IP | TID | TIME, sample_id_all=True))
    perf.comm(0, 10, 10, "prog", time=1, exec_=True)
    perf.mmap2(0, 10, 10, 0x400000, 0x2000, 0x1000, "/bin/prog", time=2)
    for index in range(10):
        perf.sample(0, ip=0x401000 + index, pid=10, tid=10, time=10 + index)
    return perf


def compressed_copy(plain: PerfFile, record: int = COMPRESSED) -> PerfFile:
    """``plain``'s records in three compressed records: the first ends within the fourth
    record, the second within the seventh, and a FINISHED_ROUND (perf writes its own records
    uncompressed, between them) comes after the second; the COMPRESSED feature.  ``plain``
    gets the FINISHED_ROUND where perf delivers it: before the seventh record, which it reads
    whole only with the third compressed record (util/session.c)."""
    records = plain.records
    round_end = plain.pack("IHH", FINISHED_ROUND, 0, 8)  # u32 type, u16 misc, u16 size
    stream = b"".join(records)
    cut1 = len(b"".join(records[:3])) + 13  # within the fourth record
    cut2 = len(b"".join(records[:6])) + 21  # within the seventh
    plain.records = [*records[:6], round_end, *records[6:]]
    packed = PerfFile(pipe=plain.pipe)
    packed.attrs = plain.attrs
    compressed_feature(packed)
    compressor = zstandard().ZstdCompressor(level=1).compressobj()
    for piece in (stream[:cut1], stream[cut1:cut2], None, stream[cut2:]):
        if piece is None:
            packed.records.append(round_end)
            continue
        payload = compressor.compress(piece) + compressor.flush(zstandard().COMPRESSOBJ_FLUSH_BLOCK)
        packed.records.append(compressed_record(packed, payload, record))
    return packed


def compressed_record(perf: PerfFile, payload: bytes, record: int = COMPRESSED) -> bytes:
    if record == COMPRESSED:
        # struct perf_record_compressed: header (u32 type, u16 misc, u16 size), zstd bytes
        return perf.pack("IHH", COMPRESSED, 0, 8 + len(payload)) + payload
    # struct perf_record_compressed2: header, u64 data_size, zstd bytes padded to 8
    padded = payload.ljust(-(-len(payload) // 8) * 8, b"\0")
    return perf.pack("IHHQ", COMPRESSED2, 0, 16 + len(padded), len(payload)) + padded


def _unplaced(samples: list[Sample], shift: int = 0) -> list[Sample]:
    """``samples`` without their offsets in their buffers, their file offsets ``shift``
    bytes on."""
    return [replace(s, offset=0, file_offset=s.file_offset + shift) for s in samples]


def write(path: Path, perf: PerfFile) -> Path:
    path.write_bytes(perf.build())
    return path


@pytest.mark.parametrize("pipe", [False, True], ids=["file", "pipe"])
@pytest.mark.parametrize("record", [COMPRESSED, COMPRESSED2])
def test_compressed_records_read_as_the_records_they_hold(
    tmp_path: Path, pipe: bool, record: int
) -> None:
    plain = plain_recording(pipe)
    packed = compressed_copy(plain, record)
    ours = read_both(write(tmp_path / "z.data", packed))
    theirs = read_both(write(tmp_path / "plain.data", plain))
    # the oracle does not read compressed records: it holds the plain recording's samples
    assert ours.bulk_error is None and ours.problems == [] and theirs.agreed
    assert [s.ip for s in ours.bulk] == [0x401000 + i for i in range(10)]
    # the same samples and events, at the same offsets (those of the records uncompressed,
    # after the HEADER_FEATURE record of the COMPRESSED feature in a pipe; a sample's
    # ``offset`` is in the buffer it was read from, a map or a stream's block)
    shift = 8 + 8 + 20 if pipe else 0  # record header, u64 feature id, the feature's fields
    assert _unplaced(ours.bulk) == _unplaced(theirs.bulk, shift)
    assert ours.events == [replace(e, offset=e.offset + shift) for e in theirs.events]
    assert len(ours.events) == 2
    with PerfData.open(tmp_path / "z.data") as data:
        assert data.compressed
        list(data.samples())
        assert data.record_counts[FINISHED_ROUND] == 1 and data.record_counts[9] == 10


def test_a_compressed_stream_is_read_as_the_records_it_holds(tmp_path: Path) -> None:
    plain = plain_recording(pipe=True)
    packed = compressed_copy(plain)
    expected = read_both(write(tmp_path / "plain.data", plain))
    with PerfData.from_stream(io.BytesIO(packed.build())) as data:
        samples = [c.sample(i) for c in data.samples(3) for i in range(len(c))]
    assert _unplaced(samples) == _unplaced(expected.bulk, 36) and len(samples) == 10


def _packed_with(tmp_path: Path, payload: bytes, mmap_len: int = MMAP_LEN) -> Path:
    """One sample, then one COMPRESSED record holding ``payload`` (at :func:`second`)."""
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    compressed_feature(perf, mmap_len)
    perf.sample(0, ip=1)
    perf.records.append(compressed_record(perf, payload))
    return write(tmp_path / "z.data", perf)


def second(path: Path) -> int:
    """The file offset of the second record of ``path``'s data section."""
    blob = path.read_bytes()
    (data_offset,) = struct.unpack_from("<Q", blob, 40)  # the header's data section offset
    (size,) = struct.unpack_from("<H", blob, data_offset + 6)  # the first record's size
    return int(data_offset + size)


def test_a_compressed_record_that_is_not_zstd(tmp_path: Path) -> None:
    path = _packed_with(tmp_path, b"not zstd at all!")
    reading = read_both(path)
    assert reading.bulk_error is not None
    assert reading.bulk_error.startswith(f"{path}: a compressed record does not decompress: ")
    assert reading.bulk_error.endswith(f"(at byte offset {second(path):#x})")  # in the file
    assert [s.ip for s in reading.bulk] == [1]  # the sample before it


def test_a_compressed_record_past_the_end_of_the_data(tmp_path: Path) -> None:
    payload = zstandard().ZstdCompressor().compress(b"x" * 100)
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    compressed_feature(perf)
    perf.sample(0, ip=1)
    record = compressed_record(perf, payload)
    perf.records.append(record[:-5])  # the data section ends 5 bytes before the record does
    reading = read_both(write(tmp_path / "z.data", perf))
    assert "runs past the end of the data section" in str(reading.bulk_error)
    assert [s.ip for s in reading.bulk] == [1]


def test_a_compressed_pipe_cut_short_is_read_to_its_last_whole_record(tmp_path: Path) -> None:
    blob = compressed_copy(plain_recording(pipe=True)).build()
    path = tmp_path / "z.data"
    path.write_bytes(blob[:-10])  # the last compressed record's last 10 bytes missing
    reading = read_both(path)
    assert reading.bulk_error is None
    assert [s.ip for s in reading.bulk] == [0x401000 + i for i in range(len(reading.bulk))]
    assert 0 < len(reading.bulk) < 10
    assert len(reading.problems) == 1 and "cut short" in reading.problems[0]


def _bomb(blocks: int) -> bytes:
    """A zstd frame (RFC 8878) of ``blocks`` RLE blocks of 128 KiB each: 4 bytes a block."""
    out = bytes.fromhex("28b52ffd")              # magic number 0xFD2FB528
    out += bytes([0x00])                         # frame header descriptor: no content size
    out += bytes([(17 - 10) << 3])               # window descriptor: 128 KiB
    for index in range(blocks):
        last = index == blocks - 1
        header = int(last) | (1 << 1) | ((128 << 10) << 3)  # last, type RLE, block size
        out += header.to_bytes(3, "little") + b"\0"         # the byte repeated
    return out


def test_a_zstd_bomb_stops_at_the_ring_buffer_size(tmp_path: Path) -> None:
    payload = _bomb(16000)  # 64 KB that would decompress to 2 GiB
    assert zstandard().ZstdDecompressor().decompressobj().decompress(payload[:4000])  # valid
    path = _packed_with(tmp_path, payload, mmap_len=MMAP_LEN)
    tracemalloc.start()
    try:
        reading = read_both(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    bound = MMAP_LEN + (128 << 10) + (128 << 10)  # mmap_len, the window, a block
    assert reading.bulk_error == (
        f"{path}: a compressed record decompresses to more than {bound} bytes: the ring "
        "buffer size (mmap_len) the COMPRESSED feature gives, and the zstd window "
        f"(at byte offset {second(path):#x})"
    )
    assert peak < 24 << 20, peak  # the bound and one slice's output, never the 2 GiB


def test_a_compression_other_than_zstd_is_named(tmp_path: Path) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    compressed_feature(perf, kind=2)
    perf.sample(0, ip=1)
    reading = read_both(write(tmp_path / "z.data", perf))
    assert "compressed records of type 2: only zstd (1) is known" in str(reading.bulk_error)


@pytest.mark.parametrize("kind", [COMPRESSED, COMPRESSED2])
def test_a_compressed_record_without_the_feature_is_refused(tmp_path: Path, kind: int) -> None:
    perf = PerfFile()
    perf.add_attr(Attr(IP))
    perf.sample(0, ip=1)
    perf.record(kind, 0, bytes(16))
    path = write(tmp_path / "z.data", perf)
    reading = read_both(path)
    name = "COMPRESSED" if kind == COMPRESSED else "COMPRESSED2"
    assert reading.agreed and reading.bulk_error == (
        f"{path}: {name} record cannot be read: the recording has no COMPRESSED feature "
        f"(perf record -z writes it) (at byte offset {second(path):#x})"
    )
    assert [s.ip for s in reading.bulk] == [1]


def test_a_compressed_recording_perf_record_did_not_finish(tmp_path: Path) -> None:
    """perf record -z killed: the header's data size 0, no feature sections, so that what
    compressed the records is not known (perf cannot read them either)."""
    path = tmp_path / "z.data"
    path.write_bytes(unfinished(compressed_copy(plain_recording()).build()))
    reading = read_both(path)
    (data_offset,) = struct.unpack_from("<Q", path.read_bytes(), 40)  # the first record's
    assert reading.bulk_error == (
        f"{path}: COMPRESSED record cannot be read: its feature sections are missing (perf "
        "record did not finish, or the file is cut short), and the COMPRESSED feature with "
        f"them (at byte offset {data_offset:#x})"
    )


def test_without_zstandard_one_line_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "z.data", compressed_copy(plain_recording()))
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard: ImportError
    with PerfData.open(path) as data, pytest.raises(PerfDataError) as caught:
        list(data.samples())
    (data_offset,) = struct.unpack_from("<Q", path.read_bytes(), 40)  # the data section's
    assert str(caught.value) == (
        f"{path}: reading compressed records (perf record -z) needs zstandard: "
        f"pip install 'pysframe[zstd]' (at byte offset {data_offset:#x})"
    )
