"""A function run in a forked child process (:class:`pysframe.perf.forked.Forked`, the worker
processes of ``pysframe perf script -j N``): what it returns comes back whole (larger than a
pipe holds), what it raises is raised with its fields, a child that dies or returns what does
not pickle is one SFrameError, and a child whose result is not wanted is ended."""

from __future__ import annotations

import os
import signal
import time

import pytest

from pysframe.errors import SFrameError
from pysframe.perf.errors import PerfDataError
from pysframe.perf.forked import PIPE_BYTES, Forked


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
