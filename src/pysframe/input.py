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
* refuses the regular files of the kernel's own file systems (``/proc``, ``/sys``, tracefs,
  debugfs...): their size says nothing of what a read gives (``/proc/PID/mem`` fails with an
  I/O error or reads a process's memory, tracefs's ``trace_pipe`` waits for events), so that
  a name an input gives (a recording's mapped file, a core's ``NT_FILE`` path) cannot make
  one of them read as a module;
* with ``max_size``, refuses a file larger than the caller will read of it (a sparse file may
  claim any size);
* with ``follow_links=False``, refuses a symbolic link instead of following it
  (``O_NOFOLLOW``), and opens a name in an open directory (``directory``): the cache of
  generated SFrame reads its entries so (:mod:`pysframe.sources.cache`).

The file is then read where it is needed: :class:`pysframe.elf.reader.ElfReader` seeks to what
it parses, a debuglink's CRC reads its file a MiB at a time (faster than a mapping, whose
holes in a sparse file fault in page by page), :func:`read_input` reads a whole input
only for the commands that rewrite it, :func:`read_up_to` reads a file up to a bound with
no more memory than the file needs, and :func:`map_up_to` maps one (the cache's entries,
kallsyms) instead of copying it.

The kernel's files pysframe reads itself (``/proc/PID/maps``, ``/proc/PID/auxv``,
``/sys/kernel/notes``) are read by :func:`read_proc`, which opens them the same way (but for
that last refusal) and reads at most a given number of bytes, refusing one that holds more.

A name an input gives for a file under ``--sysroot`` is looked up by :func:`sysroot_path`,
which refuses a name that leaves the sysroot, by ``..`` or through a symbolic link.

Standard input, when it is a pipe (``perf record -o - | pysframe perf report -``), is read by
:func:`standard_input`: a thread reads the pipe as the bytes come, ahead of the reader, up to
:data:`READ_AHEAD_LIMIT` bytes, and the pipe's buffer is made as large as the system lets a
process make it.  A writer that finds the pipe full waits; ``perf record`` waiting is ``perf
record`` not emptying the kernel's buffers, whose samples are then lost.  So the pipe is kept
empty from the start of the command (not only once the modules the reading needs are
imported) and while the reader is busy with the records it has, rather than between reads.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import sys
from collections import deque
from typing import TYPE_CHECKING, BinaryIO, Protocol

from .errors import InputError

if TYPE_CHECKING:
    import mmap

#: What ``stat`` says a file is, for messages.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


#: The kernel's file systems (``/proc/self/mountinfo`` names) whose files are views of the
#: kernel, not data.
_KERNEL_FILE_SYSTEMS = frozenset({
    "proc", "sysfs", "tracefs", "debugfs", "securityfs", "configfs", "pstore", "efivarfs",
    "bpf", "cgroup", "cgroup2", "fusectl", "binfmt_misc",
})  # fmt: skip
#: The most of ``/proc/self/mountinfo`` read.
_MOUNTINFO_LIMIT = 1 << 22


@functools.cache
def _kernel_devices() -> dict[int, str]:
    """The devices (``st_dev``) of the kernel file systems mounted, and their types, from
    ``/proc/self/mountinfo`` (proc(5): the third field is MAJOR:MINOR, the type follows the
    ``-`` separator); empty where it cannot be read."""
    try:
        with open("/proc/self/mountinfo", "rb") as mounts:
            text = mounts.read(_MOUNTINFO_LIMIT)
    except OSError:
        return {}
    devices = {}
    for line in text.splitlines():
        fields = line.split()
        try:
            kind = fields[fields.index(b"-") + 1].decode("ascii")
            major, minor = fields[2].split(b":")
            if kind in _KERNEL_FILE_SYSTEMS:
                devices[os.makedev(int(major), int(minor))] = kind
        except (ValueError, IndexError, UnicodeDecodeError):
            continue
    return devices


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
    kernel_files: bool = False,
) -> BinaryIO:
    """``path`` opened for binary reading; InputError when its name holds a NUL byte, it
    cannot be opened, it is not a regular file (or, unless ``kernel_files``, one of the
    kernel's: see the module's documentation), or it is larger than ``max_size`` bytes.

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
        system = None if kernel_files else _kernel_devices().get(info.st_dev)
        if system is not None:
            raise InputError(
                f"a file of the kernel ({system} file system), whose size says nothing of "
                "what it holds: not read as an input",
                path=shown,
            )
        if max_size is not None and info.st_size > max_size:
            raise InputError(
                f"{info.st_size} bytes, more than the {max_size} that are read of it", path=shown
            )
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_up_to(stream: BinaryIO, size: int) -> bytes:
    """``stream.read(size)`` of an open file, without the ``size`` bytes of memory that
    ``read`` takes first (a bound of hundreds of MiB costs milliseconds to take and give back
    for a file of a few): the file's size, from ``fstat``, sizes the read, one byte more
    telling whether it grew since."""
    try:
        known = max(os.fstat(stream.fileno()).st_size - stream.tell(), 0)
    except (OSError, ValueError, AttributeError):  # no file behind it (io.BytesIO...)
        return stream.read(size)
    first = stream.read(min(size, known + 1))
    if len(first) <= known or len(first) == size:  # the end, or all that was asked
        return first
    return first + stream.read(size - len(first))


def map_up_to(stream: BinaryIO, size: int) -> mmap.mmap | bytes:
    """The first ``size`` bytes of an open file, mapped read-only: its pages are the page
    cache's, where a read copies them into new memory, every page of which the kernel must
    then fault in (some microseconds each: milliseconds for the megabytes of a kernel's
    kallsyms).  For files that are replaced whole, never rewritten in place (reading a
    mapping past the end of a file cut short under it is a SIGBUS): the cache's entries,
    perf's copies of kallsyms.  An empty file is ``b""``; a stream with no file behind it,
    or a file that cannot be mapped, is read (:func:`read_up_to`)."""
    import mmap

    try:
        length = min(os.fstat(stream.fileno()).st_size, size)
        if length <= 0:
            return b""
        return mmap.mmap(stream.fileno(), length, access=mmap.ACCESS_READ)
    except (OSError, ValueError, AttributeError):
        return read_up_to(stream, size)


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
    """The content of a file of the kernel (``/proc``, ``/sys``: ``stat`` says nothing of what
    it holds), opened as :func:`open_input` opens any other input; InputError when it holds
    more than ``limit`` bytes."""
    with open_input(path, kernel_files=True) as stream:
        try:
            data = stream.read(limit + 1)
        except OSError as error:
            raise InputError(error.strerror or str(error), path=path, errno=error.errno) from None
    if len(data) > limit:
        raise InputError(f"holds more than the {limit} bytes that are read of it", path=path)
    return data


class ByteStream(Protocol):
    """What the readers of a stream need of it: ``read(size)``, the bytes up to ``size``
    (fewer only at the end: an empty result is the end)."""

    def read(self, size: int, /) -> bytes: ...


#: Bytes read ahead of the reader from a pipe on standard input, at most (more wait in the
#: pipe, and its writer with them).
READ_AHEAD_LIMIT = 128 << 20
#: Bytes asked of the pipe by one read.
_READ_AHEAD_BLOCK = 1 << 20
#: The largest pipe buffer an unprivileged process may ask for (``/proc/sys/fs/pipe-max-size``;
#: Linux's default 1 MiB when it cannot be read).
_PIPE_MAX_SIZE = "/proc/sys/fs/pipe-max-size"


class ReadAhead:
    """A pipe read by a thread as its bytes come, up to ``limit`` bytes ahead of
    :meth:`read`.  A read error reaches the reader after the bytes read before it, as an
    InputError naming ``name``."""

    def __init__(self, descriptor: int, name: str, limit: int = READ_AHEAD_LIMIT) -> None:
        import threading  # a pipe only: not for files

        self.name = name
        self._descriptor = descriptor
        self._limit = limit
        self._blocks: deque[bytes] = deque()
        self._held = 0
        self._ended = False
        self._error: OSError | None = None
        self._changed = threading.Condition()
        _enlarge_pipe(descriptor)
        self._thread = threading.Thread(target=self._fill, name="read-ahead", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        while True:
            with self._changed:
                while self._held >= self._limit:
                    self._changed.wait()
            failed: OSError | None = None
            try:
                block = os.read(self._descriptor, _READ_AHEAD_BLOCK)
            except OSError as error:
                block, failed = b"", error
            with self._changed:
                if block:
                    self._blocks.append(block)
                    self._held += len(block)
                else:
                    self._ended, self._error = True, failed
                self._changed.notify_all()
            if not block:
                return

    def read(self, size: int = -1, /) -> bytes:
        """The next ``size`` bytes (all the rest when negative), fewer only at the end."""
        with self._changed:
            while not self._ended and (size < 0 or self._held < size):
                self._changed.wait()
            if not self._held and self._error is not None:
                error = self._error
                raise InputError(error.strerror or str(error), path=self.name, errno=error.errno)
            parts: list[bytes] = []
            wanted = self._held if size < 0 else min(size, self._held)
            taken = 0
            while taken < wanted:
                block = self._blocks.popleft()
                if taken + len(block) > wanted:
                    cut = wanted - taken
                    self._blocks.appendleft(block[cut:])
                    block = block[:cut]
                parts.append(block)
                taken += len(block)
            self._held -= taken
            self._changed.notify_all()
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _enlarge_pipe(descriptor: int) -> None:
    """Ask for the pipe's largest buffer (fcntl F_SETPIPE_SZ, Linux); a hint."""
    try:
        import fcntl

        with open(_PIPE_MAX_SIZE, "rb") as limit:
            largest = int(limit.read(32))
        fcntl.fcntl(descriptor, fcntl.F_SETPIPE_SZ, largest)
    except (ImportError, AttributeError, OSError, ValueError):
        return


_read_ahead: dict[tuple[int, int], ReadAhead] = {}


def standard_input() -> ByteStream:
    """Standard input, to read a stream from (``-``): read ahead by a thread when it is a pipe
    or a socket (see the module's documentation), else as it is.  The first call starts the
    reading ahead; the calls after it give the same stream."""
    stream: ByteStream = sys.stdin.buffer
    try:
        descriptor = sys.stdin.buffer.fileno()
        info = os.fstat(descriptor)
    except (OSError, ValueError, AttributeError):
        return stream  # no file of this process (replaced, as tests do): as it is
    if not (stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode)):
        return stream
    key = (info.st_dev, info.st_ino)
    if key not in _read_ahead:
        _read_ahead[key] = ReadAhead(descriptor, "-")
    return _read_ahead[key]


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
    "READ_AHEAD_LIMIT",
    "ByteStream",
    "InputError",
    "ReadAhead",
    "map_up_to",
    "open_input",
    "read_input",
    "read_proc",
    "read_up_to",
    "standard_input",
    "sysroot_path",
]
