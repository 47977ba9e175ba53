"""Writing output files safely: every file pysframe writes goes through :func:`write_file`,
and every entry of the cache of generated SFrame through :func:`write_in_directory`.

The bytes go to a new temporary file beside the target (created with ``O_EXCL | O_NOFOLLOW``,
so that nothing already there is opened), which is renamed over the target only once it is
complete and flushed: a failed or interrupted write leaves the target as it was.  No input of
a command is ever written to: :func:`refuse_inputs`, the one place that decides it, refuses an
output that is the same file as any input (the same device and inode: the same path, a hard
link or a symbolic link to it, and standard output redirected onto it), unless the caller asks
for an in-place rewrite; an in-place rewrite of a file with other hard links copies the
finished temporary file over it, so that every name sees the new bytes.  ``-`` names standard
output.  A character device or a FIFO (``/dev/null``, ``/dev/stdout``, a shell's ``>(...)``)
named as an output is written to as it is, since nothing can be renamed over it; a directory,
a socket or a block device is refused.

:func:`write_in_directory` writes a name inside a directory the caller opened and checked
(the cache's), following no link at all: a symbolic link, a FIFO or any other file of that
name is replaced by the rename, never opened, and what a link points to is never touched.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Iterable
from typing import BinaryIO, Literal

from .errors import OutputError

#: The output path that means standard output.
STDOUT = "-"
#: The input path that means standard input.
STDIN = "-"
#: What messages call standard output.
STDOUT_NAME = "standard output"
#: The descriptors of standard input and output (what the shell redirected, whatever
#: ``sys.stdout`` is).
_STDIN_DESCRIPTOR, _STDOUT_DESCRIPTOR = 0, 1
#: Names tried for a temporary file before giving up (each is new at random: a clash is rare).
_TEMPORARY_TRIES = 100

Chunks = bytes | bytearray | Iterable[bytes]


def _identity(
    path: str, *, descriptor: int | None = None, regular: bool = False
) -> tuple[int, int] | None:
    """The (device, inode) of the file ``path`` names, links followed (or of the open
    ``descriptor``); None when there is none (or, ``regular``, when it is no regular file)."""
    try:
        info = os.stat(path) if descriptor is None else os.fstat(descriptor)
    except (OSError, ValueError):
        return None
    if regular and not stat.S_ISREG(info.st_mode):
        return None
    return info.st_dev, info.st_ino


def refuse_inputs(output: str, inputs: Iterable[str]) -> None:
    """OutputError when the output ``output`` (``-``: standard output) is a regular file that
    is the same file as one of ``inputs`` (``-``: standard input): the same device and inode,
    so that another path, a hard link or a symbolic link to an input counts too.  Every
    command that writes asks this before it writes (and before long work that would end in
    the refusal); a device or a FIFO output is nobody's input file."""
    if output == STDOUT:
        written = _identity("", descriptor=_STDOUT_DESCRIPTOR, regular=True)
    else:
        written = _identity(output, regular=True)
    if written is None:
        return
    for name in inputs:
        read = _identity("", descriptor=_STDIN_DESCRIPTOR) if name == STDIN else _identity(name)
        if read != written:
            continue
        if output == STDOUT:
            shown = STDOUT_NAME if name == STDIN else name
            raise OutputError(
                "standard output is this input file; refusing to write over it", path=shown
            )
        raise OutputError("is the input file; refusing to write over it", path=output)


def write_file(
    path: str,
    chunks: Chunks,
    *,
    inputs: Iterable[str] = (),
    in_place: bool = False,
    mode_from: str | None = None,
) -> None:
    """Write ``chunks`` to ``path`` atomically (``-``: standard output).

    ``inputs`` are the files the output was made from: writing onto one of them is refused
    (:func:`refuse_inputs`) unless ``in_place``.  A new regular file gets the permission bits
    of ``mode_from`` (for example the input program, so that a copy stays executable); an
    existing regular file keeps its own.  A character device or a FIFO is written to directly;
    any other file that is not a regular file (a directory, a socket, a block device) is
    refused as a target.  A symbolic link named as the output is not followed: the link
    itself is replaced by the new file, and what it pointed to is left as it was (a link to a
    character device or a FIFO, such as ``/dev/stdout``, is written through, since no file is
    replaced).  An in-place rewrite rewrites the file its input names, links followed.
    """
    data = [chunks] if isinstance(chunks, bytes | bytearray | memoryview) else chunks
    if not in_place:
        refuse_inputs(path, inputs)
    if path == STDOUT:
        out = sys.stdout.buffer
        for chunk in data:
            out.write(chunk)
        out.flush()
        return
    target = os.path.realpath(path) if in_place else path
    existing: os.stat_result | None
    try:
        existing = os.lstat(target)
        if stat.S_ISLNK(existing.st_mode):  # the output names a link: replaced, not followed
            pointed = os.stat(target)
            stream = stat.S_ISCHR(pointed.st_mode) | stat.S_ISFIFO(pointed.st_mode)
            existing = pointed if stream else None
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
    temporary = _written_temporary(path, target, data, mode, None)
    try:
        if existing is not None and existing.st_nlink > 1:
            _copy_over(path, temporary, target)
        else:
            _written(path, os.replace, temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_in_directory(
    directory: int, name: str, chunks: Chunks, *, shown: str, mode: int = 0o600
) -> None:
    """Write ``chunks`` as the file ``name`` of the open ``directory`` (a descriptor), with
    permissions ``mode``, following no link: a new temporary file in the directory, flushed to
    the disk, renamed over ``name``.  Whatever ``name`` was (a symbolic link, a FIFO, a file
    with other hard links) is replaced as a name, never opened.  OutputError naming ``shown``
    when it cannot be written."""
    data = [chunks] if isinstance(chunks, bytes | bytearray | memoryview) else chunks
    temporary = _written_temporary(shown, name, data, mode, directory)
    try:
        _written(
            shown,
            lambda: os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory),
        )
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        raise


def _written_temporary(
    path: str,
    target: str,
    data: Iterable[bytes | bytearray | memoryview],
    mode: int,
    directory: int | None,
) -> str:
    """A new file beside ``target`` (in the open ``directory`` when it is given) holding
    ``data``, flushed to the disk, with permissions ``mode``: its name, for a rename.  It is
    made with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (as :func:`tempfile.mkstemp` makes one): a
    name that exists, a link included, is never opened.  Errors are OutputErrors naming the
    output ``path``."""
    folder, base = os.path.split(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TEMPORARY_TRIES):
        temporary = os.path.join(folder, f".{base}.{os.urandom(4).hex()}.tmp")
        try:
            descriptor = os.open(temporary, flags, 0o600, dir_fd=directory)
            break
        except FileExistsError:
            continue
        except OSError as error:  # no such directory, no permission: the error names the output
            raise OutputError(error.strerror or str(error), path=path) from None
    else:
        raise OutputError("no name is left for a temporary file beside it", path=path)
    try:
        try:
            os.fchmod(descriptor, mode)
        except OSError as error:
            os.close(descriptor)
            raise OutputError(error.strerror or str(error), path=path) from None
        _write_all(path, os.fdopen(descriptor, "wb"), data, sync=True)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        raise
    return temporary


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
