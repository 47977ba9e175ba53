"""Opening the files pysframe reads: regular files only, never a wait.

Every file a command reads (ELF files, core files, raw sections) is opened through
:func:`open_input`.  It opens without blocking (``O_NONBLOCK``: opening a FIFO for reading
would otherwise wait for a writer forever) and refuses anything but a regular file, so that a
FIFO, a device (``/dev/zero`` reads without end) or a directory gets one clear error instead of
a hang, an unbounded read or an OS error later.  :func:`read_input` reads a whole input after
the same checks.
"""

from __future__ import annotations

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


def open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for binary reading; InputError when it cannot be opened or is not a
    regular file."""
    name = os.fspath(path)
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise InputError(error.strerror or str(error), path=name) from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = next((f"{text}, " for test, text in _KINDS if test(mode)), "")
            raise InputError(f"{kind}not a regular file", path=name)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_input(path: str | os.PathLike[str]) -> bytes:
    """The whole content of the regular file ``path`` (see :func:`open_input`)."""
    with open_input(path) as stream:
        try:
            return stream.read()
        except OSError as error:
            raise InputError(error.strerror or str(error), path=os.fspath(path)) from None


__all__ = ["InputError", "open_input", "read_input"]
