"""A function run in a child process forked from this one, its result read back through a
pipe: the worker processes of one recording read in time slices
(:func:`pysframe.perf.analyze.profile_parts`).

The child starts with every module and cache this process has loaded, nothing is pickled on
the way in, and the result comes back pickled through a pipe made larger (``F_SETPIPE_SZ``,
Linux), written and read as it is made, without a buffer of the whole: a pool's connections
pickle a result whole, and read it 64 KiB at a time, each read into a buffer as large as
what is left, which takes a tenth of a second for the 20 MB text of a slice (fresh pages
are costly: a fault for each).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import signal
import traceback
from collections.abc import Callable
from typing import Generic, NoReturn, TypeVar

from ..errors import SFrameError

Result = TypeVar("Result")

#: The size asked for the pipe (the kernel's pipe-max-size by default): fewer, larger reads.
PIPE_BYTES = 1 << 20


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

    def result(self) -> Result:
        """What ``function`` returned, once the child has ended; what it raised is raised
        here (with the child's traceback as a note), and SFrameError where it ended
        without a result (killed, or what it returned does not pickle)."""
        assert self._read is not None, "the result is read once"
        with open(self._read, "rb") as stream:
            try:  # as it comes: no buffer of the whole pickle
                returned, value, where = pickle.load(stream)
            except Exception:  # nothing, or a pickle cut short
                returned = None
        self._read = None
        status = self._reap()
        if returned is None:
            raise SFrameError(f"a worker process ended without its result ({_ended(status)})")
        if not returned:
            value.add_note(f"in the worker process:\n{where}")
            raise value
        result: Result = value
        return result

    def close(self) -> None:
        """End the child if it is still running (its result not read), and let it go."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            self._reap()
        if self._read is not None:
            os.close(self._read)
            self._read = None

    def _reap(self) -> int:
        assert self._pid is not None
        _pid, status = os.waitpid(self._pid, 0)
        self._pid = None
        return status


def _child(function: Callable[[], object], write: int) -> NoReturn:
    """Run ``function`` and write ``(returned, value, traceback)`` pickled to ``write``, as
    it is made (no buffer of the whole); then end the process at once (no exit handlers, no
    buffers of the parent's flushed), with status 1 where it could not be written."""
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


__all__ = ["PIPE_BYTES", "Forked"]
