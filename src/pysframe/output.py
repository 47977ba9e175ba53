"""Writing output files safely: every file pysframe writes goes through :func:`write_file`.

The bytes go to a temporary file in the target's directory, which is renamed over the target
only once it is complete and flushed, so a failed or interrupted write leaves the target as it
was.  The input of a command is never written to: an output that names the input (the same
path, a hard link or a symbolic link to it) is refused unless the caller asks for an in-place
rewrite; an in-place rewrite of a file with other hard links copies the finished temporary
file over it, so that every name sees the new bytes.  ``-`` names standard output.  A character
device or a FIFO (``/dev/null``, ``/dev/stdout``, a shell's ``>(...)``) is written to as it is,
since nothing can be renamed over it; a directory, a socket or a block device is refused.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import BinaryIO, Literal

from .errors import OutputError

#: The output path that means standard output.
STDOUT = "-"


def same_file(first: str, second: str) -> bool:
    """Whether two paths name the same file (following symbolic links); False when either
    does not exist."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def write_file(
    path: str,
    chunks: bytes | bytearray | Iterable[bytes],
    *,
    input_path: str | None = None,
    in_place: bool = False,
    mode_from: str | None = None,
) -> None:
    """Write ``chunks`` to ``path`` atomically (``-``: standard output).

    ``input_path`` is the file the output was made from: writing onto it is refused unless
    ``in_place``.  A new regular file gets the permission bits of ``mode_from`` (for example
    the input program, so that a copy stays executable); an existing regular file keeps its
    own.  A character device or a FIFO is written to directly; any other file that is not a
    regular file (a directory, a socket, a block device) is refused as a target.
    """
    data = [chunks] if isinstance(chunks, bytes | bytearray | memoryview) else chunks
    if path == STDOUT:
        out = sys.stdout.buffer
        for chunk in data:
            out.write(chunk)
        out.flush()
        return
    if input_path is not None and not in_place and same_file(path, input_path):
        raise OutputError("is the input file; refusing to write over it", path=path)
    target = os.path.realpath(path)
    try:
        existing = os.stat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISCHR(existing.st_mode) | stat.S_ISFIFO(existing.st_mode):
        _write_stream(path, data)
        return
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise OutputError("not a regular file; refusing to replace it", path=path)
    if existing is not None:
        mode = stat.S_IMODE(existing.st_mode)
    elif mode_from is not None:
        mode = stat.S_IMODE(os.stat(mode_from).st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    directory = os.path.dirname(target) or "."
    try:
        descriptor, temporary = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory
        )
    except OSError as error:  # no such directory, no permission: the error names the output
        raise OutputError(error.strerror or str(error), path=path) from None
    try:
        _write_all(path, os.fdopen(descriptor, "wb"), data, sync=True)
        _written(path, os.chmod, temporary, mode)
        if existing is not None and existing.st_nlink > 1:
            _copy_over(path, temporary, target)
        else:
            _written(path, os.replace, temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _copy_over(path: str, temporary: str, target: str) -> None:
    """Copy the complete ``temporary`` over the regular file ``target``, which has other hard
    links: a rename would leave them naming the old bytes (binutils' ``smart_rename`` copies
    for the same reason).  The new bytes are whole on disk before the target is touched."""
    with open(temporary, "rb") as source:
        out = _opened(path, target, "r+b")
        _write_all(path, out, iter(lambda: source.read(1 << 20), b""), sync=True, truncate=True)
    _written(path, os.unlink, temporary)


def _write_stream(path: str, data: Iterable[bytes | bytearray | memoryview]) -> None:
    """Write ``data`` to the character device or FIFO ``path`` as it is (no temporary file:
    a device cannot be renamed over)."""
    _write_all(path, _opened(path, path, "wb"), data, sync=False)


def _opened(path: str, name: str, mode: Literal["wb", "r+b"]) -> BinaryIO:
    """``name`` opened for writing the output ``path`` (closed by :func:`_write_all`); an
    OSError becomes an OutputError naming the output."""
    try:
        return open(name, mode)
    except OSError as error:
        raise OutputError(error.strerror or str(error), path=path) from None


def _write_all(
    path: str,
    out: BinaryIO,
    data: Iterable[bytes | bytearray | memoryview],
    *,
    sync: bool,
    truncate: bool = False,
) -> None:
    """Write ``data`` to ``out`` (the open output ``path``), flush it (``sync``: to the disk)
    and close it (``truncate``: cut the file at the end of ``data``).  After a failed write,
    closing flushes the buffer again and fails again (ENOSPC, EFBIG): that second error is
    dropped, so that the first, which names the output, is the one raised."""
    try:
        for chunk in data:  # the producer's own errors pass through as they are
            _written(path, out.write, chunk)
        _written(path, out.flush)
        if truncate:  # a file written over: cut what was past the new end
            _written(path, out.truncate)
        if sync:
            _written(path, os.fsync, out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            out.close()
        raise
    _written(path, out.close)


def _written(path: str, action: Callable[..., object], *args: object) -> None:
    """``action(*args)``, an OSError (a full disk, say) turned into an OutputError naming the
    output ``path``, not the temporary file beside it."""
    try:
        action(*args)
    except OSError as error:
        raise OutputError(error.strerror or str(error), path=path) from None
