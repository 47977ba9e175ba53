"""Opening the files pysframe reads: regular files only, never a wait, never more than asked.

Every file pysframe reads is opened through :func:`open_input`: the files a command is given,
and the files an input names (a core's ``NT_FILE`` paths, the dynamic linker's ``link_map``
paths, files under ``--sysroot``, separate debug files found by build ID or
``.gnu_debuglink``, a remote stub's executable).  It

* refuses a name holding a NUL byte (no file can have one; the OS call would fail late);
* opens without blocking (``O_NONBLOCK``: opening a FIFO for reading would otherwise wait for
  a writer forever, and ``/dev/stdin`` is a pipe when standard input is one);
* refuses anything but a regular file, so that a FIFO, a device (``/dev/zero`` reads without
  end) or a directory gets one clear error instead of a hang, an unbounded read or an OS error
  later;
* with ``max_size``, refuses a file larger than the caller will read of it (a sparse file may
  claim any size);
* with ``follow_links=False``, refuses a symbolic link instead of following it
  (``O_NOFOLLOW``), and opens a name in an open directory (``directory``): the cache of
  generated SFrame reads its entries so (:mod:`pysframe.sources.cache`).

The file is then read where it is needed: :class:`pysframe.elf.reader.ElfReader` seeks to what
it parses, a debuglink's CRC reads its file a MiB at a time (faster than a mapping, whose
holes in a sparse file fault in page by page), and :func:`read_input` reads a whole input
only for the commands that rewrite it.

``/proc`` files (``/proc/PID/maps``, ``/proc/PID/auxv``) are regular files whose ``stat`` size
is 0, whatever they hold: :func:`read_proc` opens them the same way and reads at most a given
number of bytes, refusing one that holds more.

A name an input gives for a file under ``--sysroot`` is looked up by :func:`sysroot_path`,
which refuses a name that leaves the sysroot, by ``..`` or through a symbolic link.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from .errors import InputError

#: What ``stat`` says a file is, for messages.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _printable(name: str) -> str:
    """``name`` as messages show it (a NUL byte as ``\\0``)."""
    return name.replace("\0", "\\0")


def open_input(
    path: str | os.PathLike[str],
    *,
    max_size: int | None = None,
    directory: int | None = None,
    follow_links: bool = True,
    shown: str | None = None,
) -> BinaryIO:
    """``path`` opened for binary reading; InputError when its name holds a NUL byte, it
    cannot be opened, it is not a regular file, or it is larger than ``max_size`` bytes.

    ``directory``: an open directory ``path`` is relative to; ``follow_links=False``: a
    symbolic link named by ``path`` is refused, not followed (``O_NOFOLLOW``); ``shown``: what
    errors call the file (default ``path``)."""
    name = os.fspath(path)
    shown = name if shown is None else shown
    if "\0" in name:
        raise InputError("the file name holds a NUL byte", path=_printable(shown))
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= os.O_NOFOLLOW
    try:
        descriptor = os.open(name, flags, dir_fd=directory)
    except OSError as error:
        if not follow_links and error.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise InputError(
                "a symbolic link, not followed", path=shown, errno=error.errno
            ) from None
        raise InputError(error.strerror or str(error), path=shown, errno=error.errno) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            kind = next((f"{text}, " for test, text in _KINDS if test(info.st_mode)), "")
            raise InputError(f"{kind}not a regular file", path=shown)
        if max_size is not None and info.st_size > max_size:
            raise InputError(
                f"{info.st_size} bytes, more than the {max_size} that are read of it", path=shown
            )
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_input(path: str | os.PathLike[str], *, max_size: int | None = None) -> bytes:
    """The whole content of the regular file ``path`` (see :func:`open_input`)."""
    with open_input(path, max_size=max_size) as stream:
        try:
            return stream.read()
        except OSError as error:
            raise InputError(
                error.strerror or str(error), path=os.fspath(path), errno=error.errno
            ) from None


def read_proc(path: str, limit: int) -> bytes:
    """The content of a ``/proc`` file (which ``stat`` says is empty whatever it holds), opened
    as :func:`open_input` opens any input; InputError when it holds more than ``limit``
    bytes."""
    with open_input(path) as stream:
        try:
            data = stream.read(limit + 1)
        except OSError as error:
            raise InputError(error.strerror or str(error), path=path, errno=error.errno) from None
    if len(data) > limit:
        raise InputError(f"holds more than the {limit} bytes that are read of it", path=path)
    return data


def sysroot_path(sysroot: str, name: str) -> str:
    """Where the file a program knew as ``name`` is under ``sysroot`` (gdb's ``set
    sysroot``); InputError when ``name`` holds a NUL byte, or leaves the sysroot by ``..`` or
    through a symbolic link (the sysroot's own links included)."""
    if "\0" in name:
        raise InputError("the file name holds a NUL byte", path=_printable(name))
    candidate = os.path.join(sysroot, name.lstrip("/"))
    root = os.path.realpath(sysroot)
    real = os.path.realpath(candidate)
    if os.path.commonpath([root, real]) != root:
        raise InputError(f"leaves the sysroot {sysroot} (it is {real})", path=candidate)
    return candidate


__all__ = [
    "InputError",
    "open_input",
    "read_input",
    "read_proc",
    "sysroot_path",
]
