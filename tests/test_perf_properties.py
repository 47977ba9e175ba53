"""Properties of the perf.data reader (hypothesis).

* Any sample layout (any set of sample fields, group reads, branch stacks, registers, stacks;
  either byte order, file or pipe mode, any chunk size): the bulk and scalar decoders give the
  values written.
* Any cut of a real recording, and any bytes overwritten in it: the reader gives the samples
  before the damage and then a warning or a PerfDataError, never another exception; the bulk
  and scalar decoders agree; a stream cut the same way reads the same.
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysframe.perf import PerfData, PerfDataError

import perf_support as ps
from perf_support import DATA, Attr, PerfFile, read_both

OPTIONAL_FIELDS = ps.SAMPLE_FIELDS
U64 = st.integers(0, 2**64 - 1)
SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[PerfFile, list[dict[str, object]], int]:
    big_endian, pipe = draw(st.booleans()), draw(st.booleans())
    sample_type = 0
    for bit in OPTIONAL_FIELDS:
        if draw(st.booleans()):
            sample_type |= bit
    regs = draw(st.integers(1, 2**24 - 1))
    read_format = draw(st.sampled_from([0, 1, 4, 1 | 2 | 4, 8, 8 | 4, 8 | 1 | 4 | 16]))
    attr = Attr(
        sample_type, ids=(7,), regs_user=regs, regs_intr=draw(st.integers(0, 15)),
        read_format=read_format, branch_sample_type=draw(st.sampled_from([0, 1 << 17])),
        stack_user=64,
    )  # fmt: skip
    perf = PerfFile(big_endian, pipe)
    perf.add_attr(attr)
    written = []
    for _ in range(draw(st.integers(0, 6))):
        fields: dict[str, object] = {
            "ip": draw(U64), "pid": draw(st.integers(-1, 2**31 - 1)),
            "tid": draw(st.integers(-1, 2**31 - 1)), "time": draw(U64),
            "cpu": draw(st.integers(0, 4096)), "period": draw(U64),
            "callchain": tuple(draw(st.lists(U64, max_size=5))),
            "raw": draw(st.binary(max_size=13)),
            "branches": tuple(draw(st.lists(st.tuples(U64, U64, U64), max_size=3))),
            "regs_abi": draw(st.sampled_from([0, 2])),
            "stack": draw(st.sampled_from([b"", bytes(range(64))])),
            "aux": draw(st.binary(max_size=9)),
        }  # fmt: skip
        count = regs.bit_count()
        fields["regs"] = tuple(draw(st.lists(U64, min_size=count, max_size=count)))
        fields["dyn_size"] = draw(st.integers(0, len(fields["stack"])))  # type: ignore[arg-type]
        if read_format & 8:
            members = draw(st.integers(0, 3))
            per = 1 + bool(read_format & 4) + bool(read_format & 16)
            times = bool(read_format & 1) + bool(read_format & 2)
            words = times + members * per
            fields["read"] = perf.pack(f"{1 + words}Q", members, *range(words))
        else:
            count = 1 + sum(bool(read_format & b) for b in (1, 2, 4, 16))
            fields["read"] = perf.pack(f"{count}Q", *range(count))
        perf.sample(0, **fields)
        written.append(fields)
    return perf, written, draw(st.integers(1, 4))


@SETTINGS
@given(layouts())
def test_any_sample_layout_reads_back(tmp_path: Path, case: tuple[PerfFile, list, int]) -> None:
    perf, written, chunk = case
    path = tmp_path / "any.data"
    path.write_bytes(perf.build())
    reading = read_both(path, chunk)
    assert reading.bulk_error is None and reading.scalar_error is None
    assert reading.bulk == reading.scalar and len(reading.bulk) == len(written)
    kind = perf.attrs[0].sample_type
    with PerfData.open(path) as data:
        stacks = [bytes(c.stack(i)) for c in data.samples(chunk) for i in range(len(c))]
    for sample, fields, stack in zip(reading.bulk, written, stacks, strict=True):
        if kind & ps.IP:
            assert sample.ip == fields["ip"]
        if kind & ps.TID:
            assert (sample.pid, sample.tid) == (fields["pid"], fields["tid"])
        if kind & ps.TIME:
            assert sample.time == fields["time"]
        if kind & ps.CPU:
            assert sample.cpu == fields["cpu"]
        if kind & ps.PERIOD:
            assert sample.period == fields["period"]
        if kind & (ps.ID | ps.IDENTIFIER):
            assert sample.id == 7
        if kind & ps.CALLCHAIN:
            assert sample.callchain == fields["callchain"]
        if kind & ps.REGS_USER:
            assert sample.regs_abi == fields["regs_abi"]
            assert sample.regs == (fields["regs"] if fields["regs_abi"] else ())
        if kind & ps.STACK_USER:
            assert stack == fields["stack"][: fields["dyn_size"]]  # type: ignore[index]


def _samples_prefix(reading_samples: list, full: list) -> bool:
    strip = [replace(s, offset=0, stack_offset=0) for s in reading_samples]
    return strip == [replace(s, offset=0, stack_offset=0) for s in full[: len(strip)]]


RECORDINGS = {name: (DATA / f"{name}.data").read_bytes() for name in ("threads", "pipe")}
FULL = {name: read_both(DATA / f"{name}.data").bulk for name in RECORDINGS}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(sorted(RECORDINGS)), st.floats(0, 1), st.integers(1, 50))
def test_any_cut_gives_a_warning_or_an_error(
    tmp_path: Path, name: str, where: float, chunk: int
) -> None:
    blob = RECORDINGS[name]
    cut = blob[: int(len(blob) * where)]
    path = tmp_path / "cut.data"
    path.write_bytes(cut)
    try:
        reading = read_both(path, chunk)
    except PerfDataError:
        return  # the header or the attributes are gone: one error, at open
    assert reading.bulk == reading.scalar and reading.bulk_error == reading.scalar_error
    assert _samples_prefix(reading.bulk, FULL[name])
    assert len(reading.problems) <= 1
    if name == "pipe":
        try:
            data = PerfData.from_stream(io.BytesIO(cut))
            streamed = [c.sample(i) for c in data.samples(chunk) for i in range(len(c))]
        except PerfDataError:
            return
        assert _samples_prefix(streamed, FULL[name]) and len(streamed) == len(reading.bulk)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(sorted(RECORDINGS)),
    st.lists(
        st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=8)), min_size=1, max_size=4
    ),
)
def test_any_damage_gives_samples_or_an_error(
    tmp_path: Path, name: str, damage: list[tuple[float, bytes]]
) -> None:
    blob = bytearray(RECORDINGS[name])
    for where, raw in damage:
        at = int((len(blob) - len(raw)) * where)
        blob[at : at + len(raw)] = raw
    path = tmp_path / "damaged.data"
    path.write_bytes(bytes(blob))
    try:
        reading = read_both(path, 5)
    except PerfDataError:
        return
    assert reading.bulk == reading.scalar and reading.bulk_error == reading.scalar_error
