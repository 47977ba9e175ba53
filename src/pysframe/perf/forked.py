"""A function run in a child process forked from this one, its result read back through a
pipe: the worker processes of one recording read in time slices
(:func:`pysframe.perf.analyze.profile_parts`).

The child starts with every module and cache this process has loaded, nothing is pickled on
the way in, and the result comes back pickled through a pipe made larger (``F_SETPIPE_SZ``,
Linux), written and read as it is made, without a buffer of the whole: a pool's connections
pickle a result whole, and read it 64 KiB at a time, each read into a buffer as large as
what is left, which takes a tenth of a second for the 20 MB text of a slice (fresh pages
are costly: a fault for each).

A result may hold one :class:`Streamed`: its pieces are sent after the rest of the result,
each as it is made, and read in this process as they come (the text of a slice reaches the
output piece by piece, never whole in either process).
"""

from __future__ import annotations

import contextlib
import copyreg
import fcntl
import os
import pickle
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Generic, NoReturn, TypeVar

from ..errors import SFrameError

Result = TypeVar("Result")
Piece = TypeVar("Piece")

#: The size asked for the pipe (the kernel's pipe-max-size by default): fewer, larger reads.
PIPE_BYTES = 1 << 20

#: What comes after a result with a :class:`Streamed` in it: pickles of ``(_PIECE, piece)``,
#: then one of ``(_END, None)``, or of ``(_RAISED, (error, traceback))`` where making a piece
#: raised.
_PIECE, _END, _RAISED = 0, 1, 2


class Streamed(Generic[Piece]):
    """Pieces of a function's result (a text, a batch at a time): in the child, pickled
    and sent one by one after the rest of the result, each as ``pieces`` makes it; in this
    process, read as they come, once, by iterating (:meth:`Forked.result`).  Outside a
    child, it is ``pieces``.  :meth:`close` ends a child whose pieces are not wanted."""

    def __init__(self, pieces: Iterable[Piece], close: Callable[[], None] | None = None) -> None:
        self._pieces = pieces
        self._close = close

    def __iter__(self) -> Iterator[Piece]:
        return iter(self._pieces)

    def close(self) -> None:
        """Let the pieces go unread (the child that sends them ended)."""
        if self._close is not None:
            self._close()


class Forked(Generic[Result]):
    """``function()`` run in a child process forked now; :meth:`result` waits for what it
    returned (or raises what it raised), :meth:`close` ends a child whose result is not
    wanted.  POSIX only (``os.fork``)."""

    def __init__(self, function: Callable[[], Result]) -> None:
        read, write = os.pipe()
        setting = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux's
        if setting is not None:
            with contextlib.suppress(OSError):  # more than a user may have: the default
                fcntl.fcntl(write, setting, PIPE_BYTES)
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            raise
        if pid == 0:
            os.close(read)
            _child(function, write)
        os.close(write)
        self._pid: int | None = pid
        self._read: int | None = read
        #: The pipe, while the pieces of a :class:`Streamed` are still to be read from it.
        self._stream: IO[bytes] | None = None

    def result(self) -> Result:
        """What ``function`` returned, once the child has ended; what it raised is raised
        here (with the child's traceback as a note), and SFrameError where it ended
        without a result (killed, or what it returned does not pickle).  Where the result
        holds a :class:`Streamed`, it is returned as soon as the rest has come, and the
        child ends once its pieces are read (or :meth:`close`)."""
        assert self._read is not None, "the result is read once"
        stream = open(self._read, "rb")  # noqa: SIM115 (closed here, or after the pieces)
        self._read = None
        streamed: list[Streamed[object]] = []

        def pieces() -> Streamed[object]:
            streamed.append(Streamed(self._pieces(), self.close))
            return streamed[-1]

        try:  # as it comes: no buffer of the whole pickle
            returned, value, where = _Unpickler(stream, pieces).load()
        except Exception:  # nothing, or a pickle cut short
            returned = None
        if returned and streamed:
            self._stream = stream  # the pieces come next
        else:
            stream.close()
            status = self._reap()
            if returned is None:
                raise SFrameError(f"a worker process ended without its result ({_ended(status)})")
        if not returned:
            value.add_note(f"in the worker process:\n{where}")
            raise value
        result: Result = value
        return result

    def _pieces(self) -> Iterator[object]:
        """The pieces of the result's :class:`Streamed`, read as they come; then the child
        is let go.  What making a piece raised is raised here, SFrameError where the child
        ended before the last piece."""
        stream = self._stream
        assert stream is not None, "the pieces are read once"
        while True:
            try:
                kind, value = pickle.load(stream)
            except Exception:  # the end of the pipe, or a pickle cut short
                kind = None
            if kind != _PIECE:
                break
            yield value
        self._stream = None
        stream.close()
        status = self._reap()
        if kind == _RAISED:
            error, where = value
            error.add_note(f"in the worker process:\n{where}")
            raise error
        if kind != _END:
            raise SFrameError(
                f"a worker process ended before the end of its result ({_ended(status)})"
            )

    def close(self) -> None:
        """End the child if it is still running (its result, or its pieces, not all read),
        and let it go."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            self._reap()
        if self._read is not None:
            os.close(self._read)
            self._read = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _reap(self) -> int:
        assert self._pid is not None
        _pid, status = os.waitpid(self._pid, 0)
        self._pid = None
        return status


class _Pickler(pickle.Pickler):
    """Pickles a result, its :class:`Streamed` (one at most) as a call of
    :func:`_pieces_follow`: its pieces are sent after it (:func:`_child`).  A dispatch table
    entry, not ``persistent_id``: no Python call for each object pickled."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(stream, pickle.HIGHEST_PROTOCOL)
        self.streamed: Streamed[object] | None = None
        self.dispatch_table = {**copyreg.dispatch_table, Streamed: self._reduce_streamed}

    def _reduce_streamed(self, streamed: Any) -> tuple[Callable[[], NoReturn], tuple[()]]:
        if self.streamed is not None:
            raise ValueError("a worker's result holds one Streamed at most")
        self.streamed = streamed
        return _pieces_follow, ()


def _pieces_follow() -> NoReturn:
    """Where a :class:`Streamed` was pickled: :class:`_Unpickler` makes it the pieces that
    follow the result."""
    raise pickle.UnpicklingError("a Streamed is read by Forked.result alone")


class _Unpickler(pickle.Unpickler):
    """Reads a result pickled by :class:`_Pickler`, its :class:`Streamed` made by
    ``pieces``."""

    def __init__(self, stream: IO[bytes], pieces: Callable[[], Streamed[object]]) -> None:
        super().__init__(stream)
        self._make_pieces = pieces

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == (__name__, _pieces_follow.__name__):
            return self._make_pieces
        return super().find_class(module, name)


def _child(function: Callable[[], object], write: int) -> NoReturn:
    """Run ``function`` and write ``(returned, value, traceback)`` pickled to ``write``, as
    it is made (no buffer of the whole), then the pieces of its :class:`Streamed`, each as it
    is made; then end the process at once (no exit handlers, no buffers of the parent's
    flushed), with status 1 where it could not be written."""
    status = 0
    try:
        try:
            outcome: tuple[bool, object, str] = (True, function(), "")
        except BaseException as error:  # raised in the parent
            outcome = (False, error, traceback.format_exc())
        with open(write, "wb") as stream:
            pickler = _Pickler(stream)
            pickler.dump(outcome)
            if pickler.streamed is not None:
                stream.flush()  # the rest of the result, before the first piece is made
                _send_pieces(pickler.streamed, stream)
    except BaseException:  # what does not pickle; a parent gone
        status = 1
    finally:
        os._exit(status)


def _send_pieces(streamed: Streamed[object], stream: IO[bytes]) -> None:
    """Each piece pickled as it is made (and flushed: the parent reads it meanwhile), then
    the end, or what making one raised."""
    pieces = iter(streamed)
    while True:
        try:
            piece = next(pieces)
        except StopIteration:
            break
        except BaseException as error:  # raised in the parent
            pickle.dump((_RAISED, (error, traceback.format_exc())), stream, pickle.HIGHEST_PROTOCOL)
            return
        pickle.dump((_PIECE, piece), stream, pickle.HIGHEST_PROTOCOL)
        stream.flush()
    pickle.dump((_END, None), stream, pickle.HIGHEST_PROTOCOL)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


__all__ = ["PIPE_BYTES", "Forked", "Streamed"]
