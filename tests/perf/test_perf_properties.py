"""Properties of the perf.data reader (hypothesis).

* Any sample layout (any set of sample fields, group reads, branch stacks, registers, stacks;
  either byte order, file or pipe mode, any chunk size): the reader and the oracle of its
  sample decoder (perf_sample_oracle.py) give the values written.
* Any cut of a real recording, and any bytes overwritten in it: the reader gives the samples
  before the damage and then a warning or a PerfDataError, never another exception; the
  oracle agrees, on the samples and the error of a corrupt one; a stream cut the same way
  reads the same.
"""

from __future__ import annotations

import io
import struct
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import perf_support as ps
from perf_oracles import (
    kallsyms_text_symbols,
    script_frame_line,
    script_sample_lines,
    time_order_reference,
)
from perf_sample_oracle import oracle_samples
from perf_support import DATA, Attr, PerfFile, read_both
from pysframe.perf import PerfData, PerfDataError
from pysframe.perf.profile import KERNEL_MODULE

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
    assert reading.bulk_error is None and reading.oracle_error is None
    assert reading.bulk == reading.oracle and len(reading.bulk) == len(written)
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
    assert reading.agreed and _samples_prefix(reading.bulk, FULL[name])
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
    assert reading.agreed


_KALLSYMS_NAMES = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters="["), min_size=1
)
_KALLSYMS_LINES = st.one_of(
    st.builds(
        lambda address, kind, name, module: (
            f"{address:016x} {kind} {name}" + (f"\t[{module}]" if module else "")
        ),
        st.sampled_from([0, 0x1000, 0x1010, 0xFFFFFFFF81000000, 0xFFFFFFFFC0000000, 2**64 - 1]),
        st.sampled_from("tTwWdDbBrRA"),
        _KALLSYMS_NAMES,
        st.one_of(st.just(""), _KALLSYMS_NAMES.filter(lambda name: "]" not in name)),
    ),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30),
)


@SETTINGS
@example(["ffffffff81000000 t one junk", "10 T two\t[mod]", "10 W two_alias\t[mod]"], True)
@example(["", "\n", "1 t", "1 t  ", "x t name", "1 t [name"], False)
@example(["10 t caf\u00e9\t[m\u00f6d]", "10 T caf\u00e9s", "ffffffff81000000 w \u00fc"], True)
@given(st.lists(_KALLSYMS_LINES, max_size=40), st.booleans())
def test_kallsyms_bulk_parse_equals_line_parse(lines: list[str], final_newline: bool) -> None:
    """Any kallsyms text, well formed or not: the numpy parse reads the text symbols a plain
    line-by-line reader reads.  Each symbol kept is one of those lines, one per address; and
    the text reads as the same symbols, extents, names and modules (perf's pick among
    aliases included) as those lines written one per line in kallsyms' own form."""
    from pysframe.perf.kernel import parse_kallsyms

    text = ("\n".join(lines) + ("\n" if final_newline else "")).encode()
    symbols = kallsyms_text_symbols(text)
    parsed = parse_kallsyms(text)
    assert parsed.starts.tolist() == sorted({address for address, _, _, _ in symbols})
    read = {(address, name, f"[{module}]" if module else KERNEL_MODULE)
            for address, _, name, module in symbols}  # fmt: skip
    kept = zip(parsed.starts.tolist(), parsed.names, parsed.modules, strict=True)
    assert set(kept) <= read
    plain = "".join(
        f"{address:016x} {kind} {name}" + (f"\t[{module}]" if module else "") + "\n"
        for address, kind, name, module in symbols
    )
    written = parse_kallsyms(plain.encode())
    assert parsed.starts.tolist() == written.starts.tolist()
    assert parsed.ends.tolist() == written.ends.tolist()
    assert (parsed.names, parsed.modules) == (written.names, written.modules)


#: A record of a recording whose order is checked: a sample or a COMM of some time (0: none,
#: delivered at once), or a FINISHED_ROUND.
_ORDER_RECORDS = st.lists(
    st.tuples(
        st.sampled_from(["sample", "comm", "round"]),
        st.one_of(st.just(0), st.integers(1, 12), st.just(2**64 - 1)),
        st.integers(0, 3),  # the stack copy's size, in words
    ),
    max_size=60,
)


@SETTINGS
# a round delivers up to the latest time the round before it saw, no further
@example(
    [("sample", 5, 1), ("round", 0, 0), ("sample", 6, 0), ("round", 0, 0), ("sample", 3, 2)],
    2,
    False,
    True,
    False,
)
# a queue emptied by a round forgets its latest time
@example(
    [("sample", 10, 0), ("round", 0, 0), ("round", 0, 0), ("sample", 3, 0), ("sample", 8, 0),
     ("round", 0, 0), ("sample", 9, 0), ("round", 0, 0), ("sample", 7, 0)],
    3, True, True, False,
)  # fmt: skip
# a delivery of samples read in several blocks of a stream: their stacks and registers copied
@example([("sample", 9, 2), ("sample", 4, 1), ("round", 0, 0), ("round", 0, 0)], 1, True, True,
         True)  # fmt: skip
@given(_ORDER_RECORDS, st.integers(1, 9), st.booleans(), st.booleans(), st.booleans())
def test_time_order_equals_perfs_queue(
    tmp_path: Path, records: list[tuple[str, int, int]], chunk: int, pipe: bool, timed: bool,
    streamed: bool,
) -> None:
    """Samples and side-band records of any times, rounds anywhere, any chunk size, file or
    pipe mode (read from a file, or ``streamed`` in blocks of 128 bytes, so that a delivery
    holds samples of several blocks), with or without TIME: the bulk ordering delivers them
    in the order of the one-record-at-a-time port of perf's ordered-events queue, and each
    sample keeps its own registers and stack bytes."""
    from unittest import mock

    from pysframe.perf import data as data_module
    from pysframe.perf.order import time_ordered

    perf = PerfFile(pipe=pipe)
    sample_type = ps.TID | (ps.TIME if timed else 0) | ps.CALLCHAIN | ps.REGS_USER | ps.STACK_USER
    attr = perf.add_attr(Attr(sample_type, ids=(7,), regs_user=0b101, stack_user=64))
    for number, (kind, time, words) in enumerate(records):
        if kind == "sample":  # the thread id, and all the rest, say which record it is
            stack = struct.pack("<Q", number) * words
            chain = range(number, number + words)
            perf.sample(attr, pid=1, tid=number, time=time, stack=stack, callchain=chain,
                        regs=(number, 2 * number))  # fmt: skip
        elif kind == "comm":
            perf.comm(attr, 1, number, f"c{number}", time=time)
        else:
            perf.record(ps.FINISHED_ROUND, 0, b"")
    path = tmp_path / "order.data"
    path.write_bytes(perf.build())
    expected = time_order_reference(
        (number, time if timed else None, kind == "round")
        for number, (kind, time, _words) in enumerate(records)
    )
    delivered: list[int] = []
    streamed = streamed and pipe
    with (
        mock.patch.object(data_module, "STREAM_BLOCK", 128),
        PerfData.from_stream(io.BytesIO(path.read_bytes())) if streamed else PerfData.open(path)
        as data,
    ):
        written = {
            sample.tid: replace(sample, offset=0, stack_offset=0)
            for sample in oracle_samples(path)[0]
        }
        for delivery in time_ordered(data.read(chunk)):
            samples = delivery.samples
            tids = samples.tid.tolist() if samples is not None else []
            done = 0
            for event, cut in zip(
                [*delivery.events, None], [*delivery.cuts, len(tids)], strict=True
            ):
                delivered += tids[done:cut]
                done = cut
                if event is not None:
                    delivered.append(event.tid)
            for index, tid in enumerate(tids):
                assert samples is not None
                assert bytes(samples.stack(index)) == struct.pack("<Q", tid) * records[tid][2]
                sample = replace(samples.sample(index), offset=0, stack_offset=0)
                assert sample == written[tid]
    assert delivered == expected


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(-1, 2**22),  # tid (-1: none recorded)
            st.integers(0, 2**63),  # time, ns: seconds of any width
            st.integers(0, 2**64 - 1),  # period
            st.sampled_from(["app", "a%sb", "with space", "x" * 20]),
            st.sampled_from(["cpu-clock", "cycles:u", "ev%d"]),
            st.integers(0, 2),  # stack
        ),
        max_size=30,
    ),
    st.integers(1, 7),
)
def test_script_text_is_each_sample_as_perf_prints_it(
    samples: list[tuple[int, int, int, str, str, int]], batch: int
) -> None:
    """The batched script text (a template per command and event) is, sample after sample in
    time order, what a plain one-sample formatter (perf_oracles) gives."""
    from pysframe.perf.profile import FrameInfo, Profile
    from pysframe.perf.script import script_text

    profile = Profile()
    frames = [profile.frame_id(FrameInfo(0x1000 + i, "/lib/m.so", f"f{i}", i)) for i in range(3)]
    stacks = [profile.stack_id(frames[:depth]) for depth in range(3)]
    for tid, time, period, comm, event, stack in samples:
        comm_id, event_id = profile.comm_id(comm), profile.event_id(event, "events")
        profile.add(stacks[stack], pid=1, tid=tid, time=time, cpu=0, period=period,
                    comm=comm_id, event=event_id)  # fmt: skip
    order = sorted(range(len(profile)), key=profile.time.__getitem__)
    frame_lines = [[script_frame_line(profile.frames[f]) for f in stack]
                   for stack in profile.stacks]  # fmt: skip
    expected = "".join(
        script_sample_lines(profile, i, frame_lines[profile.stack[i]]) for i in order
    )
    assert "".join(script_text(profile, batch)) == expected


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(-1, 2**31 - 1),  # pid (-1: none recorded)
            st.integers(-1, 2**31 - 1),  # tid
            st.integers(0, 5000),  # cpu
            st.integers(0, 2**64 - 1),  # time, ns
            st.integers(0, 2**64 - 1),  # period
            st.sampled_from(["app", "\u00e9t\u00e9", "x" * 20]),
        ),
        max_size=30,
    ),
    st.booleans(),
)
def test_script_fields_are_printf_of_each_sample(
    samples: list[tuple[int, int, int, int, int, str]], nanoseconds: bool
) -> None:
    """``-F comm,pid,tid,cpu,time,period,event,ip,sym`` (with or without ``--ns``): each
    header is what C's printf gives of perf's formats (builtin-script.c
    perf_sample__fprintf_start: ``%5d/%-5d ``, ``[%03d] ``, ``%5lu.%06lu: ``, ``%10lu``),
    here Python's ``%`` of the same formats."""
    from pysframe.perf.profile import FrameInfo, Profile
    from pysframe.perf.script import script_fields, script_text

    profile = Profile()
    frame = profile.frame_id(FrameInfo(0x1234, "/lib/m.so", "f", 4))
    stack = profile.stack_id([frame])
    event = profile.event_id("cpu-clock", "events")
    for pid, tid, cpu, time, period, comm in samples:
        profile.add(stack, pid=pid, tid=tid, time=time, cpu=cpu, period=period,
                    comm=profile.comm_id(comm), event=event)  # fmt: skip
    options = script_fields("comm,pid,tid,cpu,time,period,event,ip,sym", nanoseconds)
    expected = []
    for index in sorted(range(len(profile)), key=profile.time.__getitem__):
        pid, tid, cpu, time, period, comm = samples[index]
        # perf's printf formats, as they are
        ns = time % 10**9
        fraction = "%09d" % ns if nanoseconds else "%06d" % (ns // 1000)  # noqa: UP031
        expected.append(
            "%s %5d/%-5d [%03d] %5d.%s: %10d cpu-clock: \n\t%16x f\n\n"  # noqa: UP031
            % (comm, pid, tid, cpu, time // 10**9, fraction, period, 0x1234)
        )
    assert "".join(script_text(profile, 7, options)) == "".join(expected)
