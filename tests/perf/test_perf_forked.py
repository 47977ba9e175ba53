"""A function run in a forked child process (:class:`pysframe.perf.forked.Forked`, the worker
processes of ``pysframe perf script -j N``): what it returns comes back whole (larger than a
pipe holds), what it raises is raised with its fields, a child that dies or returns what does
not pickle is one SFrameError, and a child whose result is not wanted is ended.  The pieces
of a :class:`~pysframe.perf.forked.Streamed` in a result come one by one, each as soon as the
child made it; what making one raises is raised, a child that dies before the last is one
SFrameError, and a child whose pieces are not wanted is ended."""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Iterator

import pytest

from pysframe.errors import SFrameError
from pysframe.perf.errors import PerfDataError
from pysframe.perf.forked import PIPE_BYTES, Forked, Streamed


def test_the_result_comes_back_whole() -> None:
    loaded = ["made before the fork"]  # the child has what this process had
    text = "\t    7f0000001234 f+0x12 (/lib/m.so)\n" * (3 * PIPE_BYTES // 37)
    worker = Forked(lambda: (os.getpid(), loaded[0], text))
    pid, seen, back = worker.result()
    assert pid != os.getpid() and seen == "made before the fork"
    assert back == text and len(back) > 2 * PIPE_BYTES


def test_what_the_child_raises_is_raised_here() -> None:
    def fails() -> None:
        raise PerfDataError("record of size 4", 0x1234, path="perf.data")

    worker = Forked(fails)
    with pytest.raises(PerfDataError) as raised:
        worker.result()
    assert (raised.value.offset, raised.value.path) == (0x1234, "perf.data")
    assert "record of size 4" in str(raised.value)
    assert any("in the worker process" in note for note in raised.value.__notes__)


def test_a_child_that_dies_is_one_error() -> None:
    worker: Forked[None] = Forked(lambda: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(SFrameError, match="ended without its result \\(killed by signal 9\\)"):
        worker.result()


def test_a_result_that_does_not_pickle_is_one_error() -> None:
    worker = Forked(lambda: (lambda: None))
    with pytest.raises(SFrameError, match="ended without its result \\(exit status 1\\)"):
        worker.result()


def test_a_child_not_waited_for_is_ended() -> None:
    began = time.monotonic()
    worker = Forked(lambda: time.sleep(60))
    worker.close()
    assert time.monotonic() - began < 30
    worker.close()  # twice: nothing left to end


def test_each_piece_comes_as_it_is_made() -> None:
    """The second piece is made only once this process has read the first: a child that
    made them all before sending any would wait its 30 seconds out, and say so."""
    go_ahead, tell = os.pipe()

    def pieces() -> Iterator[str]:
        yield "first"
        told = select.select([go_ahead], [], [], 30)[0]
        yield "second" if told else "made before the first was read"

    worker = Forked(lambda: ("head", Streamed(pieces())))
    head, streamed = worker.result()
    read = iter(streamed)
    assert (head, next(read)) == ("head", "first")
    os.write(tell, b"x")
    assert list(read) == ["second"]
    os.close(go_ahead)
    os.close(tell)


def test_pieces_larger_than_the_pipe_come_whole_and_in_order() -> None:
    line = "\t    7f0000001234 f+0x12 (/lib/m.so)\n"
    pieces = [f"{number}:" + line * (PIPE_BYTES // 200) for number in range(600)]
    worker = Forked(lambda: Streamed(iter(pieces)))
    assert list(worker.result()) == pieces
    assert sum(map(len, pieces)) > 3 * PIPE_BYTES


def test_what_making_a_piece_raises_is_raised_after_the_pieces_before() -> None:
    def pieces() -> Iterator[str]:
        yield "made"
        raise PerfDataError("record of size 4", 0x1234, path="perf.data")

    read = iter(Forked(lambda: Streamed(pieces())).result())
    assert next(read) == "made"
    with pytest.raises(PerfDataError) as raised:
        next(read)
    assert raised.value.offset == 0x1234
    assert any("in the worker process" in note for note in raised.value.__notes__)


def test_a_child_that_dies_before_its_last_piece_is_one_error() -> None:
    def pieces() -> Iterator[str]:
        yield "made"
        os.kill(os.getpid(), signal.SIGKILL)
        yield "never"

    read = iter(Forked(lambda: Streamed(pieces())).result())
    assert next(read) == "made"
    with pytest.raises(SFrameError, match="before the end of its result \\(killed by signal 9\\)"):
        next(read)


def test_a_child_whose_pieces_are_not_wanted_is_ended() -> None:
    def endless() -> Iterator[str]:
        while True:
            yield "x" * 4096

    began = time.monotonic()
    streamed = Forked(lambda: Streamed(endless())).result()
    assert next(iter(streamed)) == "x" * 4096
    streamed.close()
    streamed.close()  # twice: nothing left to end
    assert time.monotonic() - began < 30


def test_a_result_of_two_streams_is_one_error() -> None:
    worker = Forked(lambda: (Streamed(["a"]), Streamed(["b"])))
    with pytest.raises(SFrameError, match="ended without its result \\(exit status 1\\)"):
        worker.result()
