"""A function run in a child process forked from this one, its result read back through a
pipe: the worker processes of one recording read in time slices
(:func:`pysframe.perf.analyze.profile_parts`).

The child starts with every module and cache this process has loaded, nothing is pickled on
the way in, and the result comes back pickled through a pipe made larger (``F_SETPIPE_SZ``,
Linux), written and read as it is made, without a buffer of the whole: a pool's connections
pickle a result whole, and read it 64 KiB at a time, each read into a buffer as large as
what is left, which takes a tenth of a second for the 20 MB text of a slice (fresh pages
are costly: a fault for each).

Text a result holds (a slice's script text, hundreds of MB for a large recording) goes
another way, :class:`Spooled`: the child writes it, piece by piece as it makes it, to its
spool, an anonymous temporary file this process made for it before the fork (unlinked: no
name another user could plant or read; the page cache holds it, no process's heap), and this
process copies it from there to its output, in large blocks (``sendfile``).  So the child
makes its text while this process does its own work, and neither holds it whole.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Generic, NoReturn, TextIO, TypeVar

from ..errors import SFrameError

Result = TypeVar("Result")

#: The size asked for the pipe (the kernel's pipe-max-size by default): fewer, larger reads.
PIPE_BYTES = 1 << 20
#: The most of a spool copied, or read, at a time.
COPY_BYTES = 1 << 20

#: In a child, or in the process that forks within :func:`spooling`: the spool its
#: :class:`Spooled` texts are written to, or why it could not be made.  None elsewhere.
_spool: IO[bytes] | OSError | None = None
#: Whether :data:`_spool` is this process's own (:func:`spooling`), not a child's.
_own_spool = False


class Spooled:
    """A text, in pieces, to be written once to an output (:meth:`write`).  Made in a child
    of :class:`Forked`, it is written at once, piece by piece as ``pieces`` makes them, to
    the child's spool, and pickled as where it is there: in the process that forked, it is
    copied from the spool.  Made anywhere else, it is ``pieces``, made as they are written.
    ``output``: the stream it is for (standard output by default), whose encoding and error
    handler the spool's bytes are in."""

    def __init__(self, pieces: Iterable[str], output: TextIO | None = None) -> None:
        self._pieces: Iterable[str] = pieces
        #: Where the text is: a descriptor of its spool (this process's own), its first byte
        #: there, its length, and its encoding and error handler.
        self._spool: tuple[int, int, int, str, str] | None = None
        if _spool is not None:  # in a child, or within spooling()
            self._pieces = ()
            descriptor, start, size, encoding, errors = _write_spooled(
                pieces, output or sys.stdout
            )
            if _own_spool:  # the spool is closed when spooling() ends: a descriptor of its own
                descriptor = os.dup(descriptor)
            self._spool = (descriptor, start, size, encoding, errors)

    def write(self, stream: TextIO) -> None:
        """Write the text to ``stream``; bytes copied as they are where ``stream`` has the
        spool's encoding and error handler, and a binary buffer."""
        if self._spool is None:
            stream.writelines(self._pieces)
            self._pieces = ()
            return
        descriptor, start, size, encoding, errors = self._spool
        try:
            buffer = getattr(stream, "buffer", None)
            if buffer is not None and (stream.encoding, stream.errors) == (encoding, errors):
                stream.flush()
                buffer.flush()
                _copy(descriptor, start, size, buffer)
            else:
                import codecs

                decoder = codecs.getincrementaldecoder(encoding)(errors)
                for block in _blocks(descriptor, start, size):
                    stream.write(decoder.decode(block))
                stream.write(decoder.decode(b"", final=True))
        finally:
            self.close()

    def close(self) -> None:
        """Let the text go unwritten (its descriptor of the spool closed)."""
        self._pieces = ()
        if self._spool is not None:
            os.close(self._spool[0])
            self._spool = None

    def __reduce__(self) -> tuple[Callable[..., NoReturn], tuple[int, int, str, str]]:
        if self._spool is None:
            raise TypeError("a Spooled is sent back from a child of Forked alone")
        _descriptor, start, size, encoding, errors = self._spool
        return _spooled, (start, size, encoding, errors)


def _write_spooled(pieces: Iterable[str], output: TextIO) -> tuple[int, int, int, str, str]:
    """Write ``pieces`` to this child's spool, encoded as ``output`` encodes (UTF-8 with lone
    surrogates kept where it has no binary buffer: it takes text); where they are there.
    SFrameError where the spool cannot take them (a disk full)."""
    spool = _spool
    if getattr(output, "buffer", None) is not None:
        encoding, errors = output.encoding, output.errors or "strict"
    else:
        encoding, errors = "utf-8", "surrogatepass"
    try:
        if isinstance(spool, OSError):
            raise spool
        assert spool is not None
        start = spool.tell()
        for piece in pieces:
            spool.write(piece.encode(encoding, errors))
        spool.flush()
        return spool.fileno(), start, spool.tell() - start, encoding, errors
    except OSError as error:
        where = "this process" if _own_spool else "a worker process"
        raise SFrameError(
            f"the text made in {where} could not be written to a temporary file "
            f"({error.strerror or error})"
        ) from None


@contextlib.contextmanager
def spooling() -> Iterator[None]:
    """:class:`Spooled` texts made within are made at once, written to a spool of this
    process's own (an anonymous temporary file, as a child's), and copied from there when
    written: the process that forks makes its own slice's text while its children make
    theirs, not after them, and holds no more of it than they do."""
    global _spool, _own_spool
    import tempfile

    if _spool is not None:  # in a child, or within spooling() already
        yield
        return
    try:
        spool: IO[bytes] | OSError = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
    except OSError as error:  # said where a text is spooled
        spool = error
    _spool, _own_spool = spool, True
    try:
        yield
    finally:
        _spool, _own_spool = None, False
        if not isinstance(spool, OSError):
            spool.close()  # the texts written to it have descriptors of their own


def _spooled(start: int, size: int, encoding: str, errors: str) -> NoReturn:
    """Where a :class:`Spooled` was pickled: :class:`_Unpickler` makes it the text in the
    child's spool."""
    raise pickle.UnpicklingError("a Spooled is read by Forked.result alone")


def _blocks(descriptor: int, start: int, size: int) -> Iterable[bytes]:
    """The ``size`` bytes at ``start`` of a file, a block at a time."""
    end = start + size
    while start < end:
        block = os.pread(descriptor, min(COPY_BYTES, end - start), start)
        if not block:
            raise SFrameError("a worker process's temporary file is shorter than its text")
        start += len(block)
        yield block


def _copy(descriptor: int, start: int, size: int, output: IO[bytes]) -> None:
    """The ``size`` bytes at ``start`` of a file written to ``output``: by ``sendfile``
    (from the page cache to the output, never through this process) where the output has a
    descriptor that takes it, else a block at a time."""
    import errno

    try:
        target = output.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation: a stream in memory
        target = -1
    end = start + size
    while target >= 0 and start < end:
        try:
            sent = os.sendfile(target, descriptor, start, min(1 << 30, end - start))
        except OSError as error:
            # EINVAL, ENOSYS: an output sendfile does not write to (O_APPEND, say)
            if error.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            break
        if not sent:
            raise SFrameError("a worker process's temporary file is shorter than its text")
        start += sent
    for block in _blocks(descriptor, start, end - start):
        output.write(block)
    output.flush()


class Forked(Generic[Result]):
    """``function()`` run in a child process forked now; :meth:`result` waits for what it
    returned (or raises what it raised), :meth:`close` ends a child whose result is not
    wanted.  POSIX only (``os.fork``)."""

    def __init__(self, function: Callable[[], Result]) -> None:
        import tempfile  # where a recording is read in slices: not at every start

        try:  # the child's spool: unlinked (O_TMPFILE where the kernel has it)
            spool: IO[bytes] | OSError = tempfile.TemporaryFile()  # noqa: SIM115 (the child's)
        except OSError as error:  # said where the child has text to spool
            spool = error
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
            if not isinstance(spool, OSError):
                spool.close()
            raise
        if pid == 0:
            os.close(read)
            _child(function, write, spool)
        os.close(write)
        self._pid: int | None = pid
        self._read: int | None = read
        self._spool: IO[bytes] | None = None if isinstance(spool, OSError) else spool

    def result(self) -> Result:
        """What ``function`` returned, once the child has ended; what it raised is raised
        here (with the child's traceback as a note), and SFrameError where it ended
        without a result (killed, or what it returned does not pickle).  Its
        :class:`Spooled` texts are read from the child's spool when written."""
        assert self._read is not None, "the result is read once"
        with open(self._read, "rb") as stream:
            self._read = None
            try:  # as it comes: no buffer of the whole pickle
                returned, value, where = _Unpickler(stream, self._spooled).load()
            except Exception:  # nothing, or a pickle cut short
                returned = None
        status = self._reap()
        self._close_spool()
        if returned is None:
            raise SFrameError(f"a worker process ended without its result ({_ended(status)})")
        if not returned:
            value.add_note(f"in the worker process:\n{where}")
            raise value
        result: Result = value
        return result

    def _spooled(self, start: int, size: int, encoding: str, errors: str) -> Spooled:
        """A text the child wrote to its spool, with a descriptor of its own."""
        assert self._spool is not None, "a child without a spool spools nothing"
        text = Spooled(())
        text._spool = (os.dup(self._spool.fileno()), start, size, encoding, errors)
        return text

    def close(self) -> None:
        """End the child if it is still running (its result not read), and let it go."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            self._reap()
        if self._read is not None:
            os.close(self._read)
            self._read = None
        self._close_spool()

    def _close_spool(self) -> None:
        if self._spool is not None:
            self._spool.close()  # the texts read from it have descriptors of their own
            self._spool = None

    def _reap(self) -> int:
        assert self._pid is not None
        _pid, status = os.waitpid(self._pid, 0)
        self._pid = None
        return status


class _Unpickler(pickle.Unpickler):
    """Reads a result whose :class:`Spooled` texts ``spooled`` makes."""

    def __init__(self, stream: IO[bytes], spooled: Callable[..., Spooled]) -> None:
        super().__init__(stream)
        self._spooled = spooled

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == (__name__, _spooled.__name__):
            return self._spooled
        return super().find_class(module, name)


def _child(function: Callable[[], object], write: int, spool: IO[bytes] | OSError) -> NoReturn:
    """Run ``function`` (its :class:`Spooled` texts written to ``spool``) and write
    ``(returned, value, traceback)`` pickled to ``write``, as it is made (no buffer of the
    whole); then end the process at once (no exit handlers, no buffers of the parent's
    flushed), with status 1 where it could not be written."""
    global _spool, _own_spool
    _spool, _own_spool = spool, False
    status = 0
    try:
        try:
            outcome: tuple[bool, object, str] = (True, function(), "")
        except BaseException as error:  # raised in the parent
            outcome = (False, error, traceback.format_exc())
        with open(write, "wb") as stream:
            pickle.dump(outcome, stream, pickle.HIGHEST_PROTOCOL)
    except BaseException:  # what does not pickle; a parent gone
        status = 1
    finally:
        os._exit(status)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


__all__ = ["COPY_BYTES", "PIPE_BYTES", "Forked", "Spooled", "spooling"]
