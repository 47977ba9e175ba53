"""A function run in a forked child process (:class:`pysframe.perf.forked.Forked`, the worker
processes of ``pysframe perf script -j N``): what it returns comes back whole (larger than a
pipe holds), what it raises is raised with its fields, a child that dies or returns what does
not pickle is one SFrameError, and a child whose result is not wanted is ended.  A
:class:`~pysframe.perf.forked.Spooled` text in a result is made by the child before it
returns, written to a temporary file as it is made, and copied from there, the same text:
neither process holds it whole; a file that cannot take it is one SFrameError."""

from __future__ import annotations

import io
import os
import pickle
import resource
import select
import signal
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysframe.errors import SFrameError
from pysframe.perf.errors import PerfDataError
from pysframe.perf.forked import PIPE_BYTES, Forked, Spooled, spooling


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


#: A line of a slice's text, its names not all ASCII (and a lone surrogate, as a name that is
#: not UTF-8 is decoded).
LINE = "\t    7f0000001234 f\u00e9+0x12 (/lib/m\udcff.so)\n"


def _file(path: Path) -> io.TextIOWrapper:
    return open(path, "w", encoding="utf-8", errors="surrogateescape")  # as stdout is, in C.UTF-8


def test_a_spooled_text_comes_back_whole_and_in_order(tmp_path: Path) -> None:
    """Larger than the pipe, to a file (its bytes copied) and to a stream in memory (its
    text decoded), after what was written before it."""
    pieces = [f"{number}:" + LINE * (PIPE_BYTES // 200) for number in range(300)]
    with _file(tmp_path / "out") as out:
        out.write("before\n")
        head, text = Forked(lambda: ("head", Spooled(iter(pieces), out))).result()
        text.write(out)
        out.write("after\n")
    expected = "before\n" + "".join(pieces) + "after\n"
    assert head == "head"
    assert (tmp_path / "out").read_bytes() == expected.encode("utf-8", "surrogateescape")
    assert (tmp_path / "out").stat().st_size > 3 * PIPE_BYTES
    memory = io.StringIO()
    Forked(lambda: Spooled(iter(pieces), memory)).result().write(memory)
    assert memory.getvalue() == "".join(pieces)


def test_a_spooled_text_goes_to_an_output_sendfile_refuses(tmp_path: Path) -> None:
    """An output opened to append (``>>``; sendfile says EINVAL): the bytes are copied a
    block at a time, after what the file held."""
    pieces = [f"{number}:" + LINE * 1000 for number in range(100)]
    (tmp_path / "out").write_text("held\n")
    with open(tmp_path / "out", "a", encoding="utf-8", errors="surrogateescape") as out:
        Forked(lambda: Spooled(iter(pieces), out)).result().write(out)
    expected = "held\n" + "".join(pieces)
    assert (tmp_path / "out").read_bytes() == expected.encode("utf-8", "surrogateescape")


def test_a_spooled_text_is_made_before_this_process_asks_for_it() -> None:
    """The child makes its text while this process goes on: its last piece is made before
    this process reads the child's result (a child that made its text only as this process
    read it would leave this one waiting its 30 seconds out, and say so)."""
    made, tell = os.pipe()

    def pieces() -> Iterator[str]:
        yield "first\n"
        yield "last\n"
        os.write(tell, b"x")

    worker = Forked(lambda: Spooled(pieces(), io.StringIO()))
    told = select.select([made], [], [], 30)[0]
    text = worker.result()
    out = io.StringIO()
    text.write(out)
    assert told, "the child's text was not made before its result was read"
    assert out.getvalue() == "first\nlast\n"
    os.close(made)
    os.close(tell)


def test_no_process_holds_a_spooled_text_whole(tmp_path: Path) -> None:
    """64 MiB of text, made a MiB at a time: the child's allocations peak at a few of its
    pieces, and so do this process's as it writes the text to a file."""
    size = 1 << 20

    def pieces() -> Iterator[str]:
        for number in range(64):
            yield chr(ord("a") + number % 26) * size

    def child() -> tuple[Spooled, int]:
        tracemalloc.start()
        text = Spooled(pieces(), out)
        return text, tracemalloc.get_traced_memory()[1]

    with _file(tmp_path / "out") as out:
        text, child_peak = Forked(child).result()
        tracemalloc.start()
        try:
            text.write(out)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert (tmp_path / "out").stat().st_size == 64 * size
    assert child_peak < 8 * size and peak < 8 * size, (child_peak, peak)


def test_a_spool_that_cannot_take_the_text_is_one_error() -> None:
    """A temporary file limited to 4 KiB (RLIMIT_FSIZE, as a disk full): the child's text
    is one SFrameError, with the system's reason."""

    def child() -> Spooled:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not the signal's death
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
        return Spooled(iter(["x" * 1000] * 100), io.StringIO())

    with pytest.raises(SFrameError, match="temporary file \\(File too large\\)"):
        Forked(child).result()


def test_a_spooled_text_made_here_is_its_pieces() -> None:
    made: list[str] = []

    def pieces() -> Iterator[str]:
        for piece in ("a\n", "b\n"):
            made.append(piece)
            yield piece

    text = Spooled(pieces(), io.StringIO())
    assert made == []  # made as it is written
    out = io.StringIO()
    text.write(out)
    text.write(out)  # written once
    assert out.getvalue() == "a\nb\n" and made == ["a\n", "b\n"]
    with pytest.raises(TypeError):
        pickle.dumps(Spooled(["a"]))


def test_a_spooled_text_let_go_is_not_written() -> None:
    text = Forked(lambda: Spooled(["a\n"], io.StringIO())).result()
    text.close()
    text.close()  # twice: nothing left
    out = io.StringIO()
    text.write(out)
    assert out.getvalue() == ""


def test_a_text_spooled_by_this_process_is_made_at_once(tmp_path: Path) -> None:
    """Within :func:`spooling`, a :class:`Spooled` text is made when it is made (every
    piece taken then), and written whole later, after the spool is let go: its bytes to a
    file, its text to a stream in memory."""
    pieces = [f"{number}:" + LINE * 1000 for number in range(50)]
    taken: list[str] = []

    def made() -> Iterator[str]:
        for piece in pieces:
            taken.append(piece)
            yield piece

    with _file(tmp_path / "out") as out:
        with spooling():
            text = Spooled(made(), out)
            assert taken == pieces
            memory = io.StringIO()
            in_memory = Spooled(iter(pieces), memory)
        out.write("before\n")
        text.write(out)
    expected = "before\n" + "".join(pieces)
    assert (tmp_path / "out").read_bytes() == expected.encode("utf-8", "surrogateescape")
    in_memory.write(memory)
    assert memory.getvalue() == "".join(pieces)
    lazy = Spooled(made())  # outside: made as it is written
    taken.clear()
    assert taken == []
    lazy.close()
