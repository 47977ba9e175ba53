"""SFrame generated from a file's CFI, kept on disk per build ID, so that a second ``stack`` or
``perf report`` of the same programs generates nothing; and what the checks found in a
section, so that they need not run again on the same bytes.

Where: ``DIR`` is ``$PYSFRAME_CACHE_DIR`` when set (empty: no cache), else
``$XDG_CACHE_HOME/pysframe`` or ``~/.cache/pysframe``, then a folder named after the
generator's own code and the entries' layout (a digest of the ``format`` and ``generate``
packages' sources and :data:`ENTRY_FORMAT`): a pysframe whose generator writes other bytes never
reads an older one's entries.

What: ``DIR/BUILD-ID.ADDRESS.sframe`` holds a section generated for the file with that build
ID, encoded for the section address ADDRESS (hex), after a header that binds it to what it was
made from (:func:`generation_binding`): the line ``pysframe generated SFrame``, then one line
of JSON -- the build ID, a digest of the file's headers and of the sections the generator reads
(``.eh_frame``, ``.debug_frame``, the PLT), the address, the generator's digest and the SHA-256
of the section bytes that follow.  Beside it, ``DIR/BUILD-ID.ADDRESS.KIND`` holds a check's
verdict on a section of that file at that address (:mod:`pysframe.sources.trust`): a JSON
object whose ``digest`` names the bytes checked (with the build ID and what else the check
read), so that a verdict is used only for those bytes.

Beside them, tables that take long to make and are made the same from the same bytes:
``DIR/BUILD-ID.perf-symbols`` a module's symbols as perf reads them
(:func:`pysframe.perf.symbols.load_symbols_kept`), ``DIR/SHA-256.kallsyms`` a kernel's symbols
(:mod:`pysframe.perf.kernel`, named by the digest of the kallsyms text),
``DIR/SHA-256.addr2line`` addr2line's answers for a file's addresses
(:class:`pysframe.elf.addr2line.KeptAddr2Line`, named by the digest of the file): the line
``pysframe tables``, one line of JSON -- the binding (digests of the inputs and of the code
that made the table), the size of each part and the SHA-256 of the parts that follow
(:func:`cached_tables`).

The cache is a convenience, never a source of truth, and a place others may have written to:

* the directory is made with mode 0700 (its missing parents too), and one that is a symbolic
  link, belongs to another user or is writable by its group or others is not used (one warning
  per process says so);
* the directory is opened once per use and every name is looked up in it (``dir_fd``): an
  entry is opened with ``O_NOFOLLOW | O_NONBLOCK`` and read only when it is a regular file of
  bounded size (:func:`pysframe.input.open_input`), and written as a new temporary file renamed
  over its name (:func:`pysframe.output.write_in_directory`), so that a symbolic link, a FIFO
  or a hard link of that name is replaced, never followed, opened or written through;
* an entry is used only when its header names the same build ID, inputs, address and
  generator and the bytes it holds are the ones written; then its functions must lie in the
  file's executable segments (:func:`pysframe.sources.trust.checked`, by its caller).  Anything
  else (a link, a FIFO, another file's entry, damaged bytes) is a miss: one warning names the
  entry, which is removed and made again.

The cache keeps itself under a size, ``$PYSFRAME_CACHE_MAX_SIZE`` (:func:`max_size`: bytes,
or a number with K, M, G or T; 1 GiB by default), counted as ``du`` counts it (the files'
blocks), over every folder:

* an entry read is marked used, its modification time set to now (through the descriptor it
  was read from, once per entry per process; entries are never changed once written), so that
  the times order the entries by last use;
* the first write of a process looks at the cache: the entries of every
  folder, the folders of other versions whose newest entry (or the folder itself) is older than
  :data:`UNUSED_FOLDER_AGE` removed, and a write's temporary file older than
  :data:`STALE_TEMPORARY_AGE`; its later writes count what they add.  When a write takes the
  cache over its size, the entries used least recently are removed, in any folder, until it
  holds :data:`LOW_MARK` of it (each is looked at first: one used since is kept).  A command
  that writes nothing looks at no directory;
* nothing but an entry is removed: regular files named as entries are (:data:`ENTRY_KINDS`, the
  names this and earlier versions give), in folders named ``generated-`` and 16 hex digits that
  are not links, are the user's own and nobody else may write to, in a directory that is the
  user's own and nobody else may write to (else this version's folder alone is kept under the
  size), each name looked up in its opened folder (``dir_fd``), without following links; a
  folder goes when nothing else is left in it.  A removal that fails, or finds the entry gone
  (another pysframe removed it), is ignored, and a reader whose entry is gone has a miss.

:func:`cache_usage` says what the cache holds and :func:`clear_cache` removes every entry
(``pysframe cache``, ``pysframe cache --clear``).

Library code does not print: the warnings wait in :func:`take_warnings` for the command line,
which prints each once.  A failed write is ignored.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import cache
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from ..dataclass import dataclass
from ..errors import InputError, SFrameError
from ..input import map_up_to, open_input, read_up_to

if TYPE_CHECKING:
    import mmap

    from ..elf.reader import ElfReader

#: The environment variable naming the cache's directory (empty: no cache).
CACHE_ENVIRONMENT = "PYSFRAME_CACHE_DIR"
#: An entry larger than this is not read (libLLVM's generated section is 6 MB).
MAX_ENTRY = 256 << 20
#: A verdict larger than this is not read (a few lines of text).
MAX_VERDICT = 1 << 20
#: The layout of the entries (part of the folder's name): 2 is a header binding the section.
ENTRY_FORMAT = 2
#: The first line of an entry.
ENTRY_MAGIC = b"pysframe generated SFrame\n"
#: The longest header line read (the JSON binding is some 300 bytes).
MAX_HEADER = 4096
#: The sections whose bytes the generator reads (pysframe.generate.driver: ``.eh_frame`` and
#: ``.debug_frame``, relocated in an object; the PLT sections it describes): with the file's
#: headers, an entry is bound to them.
GENERATOR_INPUTS = frozenset(
    {
        ".eh_frame", ".debug_frame", ".rela.eh_frame", ".rel.eh_frame", ".rela.debug_frame",
        ".rel.debug_frame", ".plt", ".plt.sec", ".plt.got",
    }
)  # fmt: skip
#: The suffix of generated sections' entries.
_SFRAME = ".sframe"
#: The characters of a hex number (a build ID, a digest), as ``string.hexdigits``.
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")

#: What an entry is read as: its bytes, or a map of them.
_Content = TypeVar("_Content")

#: Warnings waiting for the command line (take_warnings), and the ones already given.
_pending: list[str] = []
_given: set[str] = set()


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Binding:
    """What a generated section is made from: the file's build ID and a digest of its headers
    and of the sections the generator reads (:data:`GENERATOR_INPUTS`)."""

    build_id: bytes
    inputs: str


def generation_binding(image: ElfReader) -> Binding | None:
    """The binding of a section generated for ``image``; None when caching is off, or the file
    has no build ID or its headers or CFI cannot be read (nothing is then cached)."""
    if cache_directory() is None:
        return None
    try:
        # The vDSO's build ID note is in ``.note`` (perf's elf_read_build_id reads it there).
        build_id = image.build_id() or image.build_id_as_perf()
        if not build_id:
            return None
        return Binding(build_id, image.content_digest(GENERATOR_INPUTS))
    except SFrameError:
        return None


def take_warnings() -> list[str]:
    """The warning lines (``PATH: why``) the cache has given since the last call, each once per
    process: an entry or a verdict not used, a directory not trusted."""
    taken = list(_pending)
    _pending.clear()
    return taken


def _warn(line: str) -> None:
    if line not in _given:
        _given.add(line)
        _pending.append(line)


@cache
def generator_digest() -> str:
    """A digest of the code that generates and encodes SFrame (the ``generate`` and
    ``format`` packages' sources) and of the entries' layout, naming the cache's folder."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256(f"entries {ENTRY_FORMAT}\n".encode())
    for package in ("format", "generate"):
        directory = os.path.join(root, package)
        for name in sorted(n for n in os.listdir(directory) if n.endswith(".py")):
            digest.update(name.encode())
            with open(os.path.join(directory, name), "rb") as source:
                digest.update(source.read())
    return digest.hexdigest()[:16]


def cache_directory() -> str | None:
    """Where entries are kept (None: caching is off)."""
    environ = os.environ
    return _directory_for(environ.get(CACHE_ENVIRONMENT), environ.get("XDG_CACHE_HOME"),
                          environ.get("HOME"))  # fmt: skip


@cache
def _directory_for(chosen: str | None, xdg: str | None, home: str | None) -> str | None:
    """:func:`cache_directory` for these variables (asked for at every use of the cache: the
    path is made once for them; ``home``, which ``~`` stands for, is only part of the key)."""
    if chosen is not None:
        if not chosen:
            return None
        base = chosen
    else:
        base = os.path.join(xdg or os.path.join(os.path.expanduser("~"), ".cache"), "pysframe")
    return os.path.join(base, f"generated-{generator_digest()}")


# -- the directory ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Directory:
    """The cache directory, open (``descriptor``) and checked; ``path`` names it in warnings."""

    descriptor: int
    path: str

    def shown(self, name: str) -> str:
        return os.path.join(self.path, name)


@contextmanager
def _opened(*, create: bool) -> Iterator[_Directory | None]:
    """The cache directory, opened and checked (made first when ``create``); None when there is
    no cache, none yet, or it is not trusted (warned once)."""
    path = cache_directory()
    descriptor = None if path is None else _open_directory(path, create)
    if path is None or descriptor is None:
        yield None
        return
    try:
        yield _Directory(descriptor, path)
    finally:
        os.close(descriptor)


#: How a folder of the cache is opened: a directory, never through a link.
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open_directory(path: str, create: bool) -> int | None:
    """A descriptor of the directory ``path`` when it is the user's own and nobody else may
    write to it (checked on the open directory, which is what every later call uses)."""
    try:
        descriptor = os.open(path, _DIRECTORY_FLAGS)
    except FileNotFoundError:
        if not create:
            return None
        try:
            _make_directories(path)
            descriptor = os.open(path, _DIRECTORY_FLAGS)
        except OSError:
            return None  # no place for a cache (read-only, no permission): none, as when off
    except OSError as error:
        _refused(path, error, path, None)
        return None
    return _trusted(descriptor, path)


def _refused(shown: str, error: OSError, name: str, base: int | None) -> None:
    """Warn where opening the folder ``name`` (of the open directory ``base``; None: a path)
    met a link or a file (O_NOFOLLOW)."""
    if error.errno in (errno.ELOOP, errno.ENOTDIR):
        _distrust(shown, "a symbolic link" if _is_link(base, name) else "not a directory")


def _trusted(descriptor: int, shown: str | None) -> int | None:
    """The open directory ``descriptor`` when it is the user's own and nobody else may write
    to it; else None, the descriptor closed (and where ``shown`` names it, a warning says
    why)."""
    why = _untrusted(descriptor)
    if why is None:
        return descriptor
    os.close(descriptor)
    if why and shown is not None:
        _distrust(shown, why)
    return None


def _untrusted(descriptor: int) -> str | None:
    """Why the open directory ``descriptor`` is not the user's own or others may write to it
    (empty: it cannot be looked at); None when it is neither."""
    try:
        info = os.fstat(descriptor)
    except OSError:
        return ""
    if info.st_uid != os.geteuid():
        return f"owned by another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "others" if info.st_mode & stat.S_IWOTH else "its group"
        return f"writable by {who} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _distrust(path: str, why: str) -> None:
    _warn(f"{path}: not used as the cache of generated SFrame: {why}")


def _make_directories(path: str) -> None:
    """Make ``path`` and its missing parents, each with mode 0700 (the XDG base directory
    specification's for a cache: nobody else reads or writes what is kept there)."""
    missing = []
    directory = path
    while directory and not os.path.lexists(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    for directory in reversed(missing):
        with suppress(FileExistsError):  # made meanwhile: checked when opened
            os.mkdir(directory, 0o700)


def _read(directory: _Directory, name: str, limit: int) -> bytes | None:
    """The content of the regular file ``name`` of the directory (no link followed, no wait
    on a FIFO, at most ``limit`` bytes); None when there is none.  A name that is something
    else is warned about and removed (InputError, for the caller's warning)."""
    return _content(directory, name, limit, read_up_to)


def _mapped(directory: _Directory, name: str, limit: int) -> bytes | mmap.mmap | None:
    """:func:`_read`, the file mapped (entries are replaced whole, by :func:`_write`, never
    rewritten: a mapping stays whole)."""
    return _content(directory, name, limit, map_up_to)


def _content(
    directory: _Directory, name: str, limit: int, how: Callable[[BinaryIO, int], _Content]
) -> _Content | None:
    try:
        with open_input(
            name, max_size=limit, directory=directory.descriptor, follow_links=False,
            shown=directory.shown(name),
        ) as stream:  # fmt: skip
            content = how(stream, limit + 1)
            _mark_used(directory, name, stream)
            return content
    except InputError as error:
        if error.errno == errno.ENOENT:
            return None
        raise
    except OSError as error:  # a read error: the name is not usable either
        raise InputError(error.strerror or str(error), path=directory.shown(name)) from None


def _reject(directory: _Directory, name: str, why: str, then: str) -> None:
    """Warn that the entry ``name`` is not used, and remove it (a link is removed, not what it
    points to), so that the one made ``then`` takes its place."""
    _warn(f"{directory.shown(name)}: cache entry not used: {why}; {then}")
    with suppress(OSError):
        os.unlink(name, dir_fd=directory.descriptor)


def _write(directory: _Directory, name: str, chunks: list[bytes]) -> None:
    """Write an entry (best effort: a failure is ignored)."""
    from ..output import write_in_directory

    try:
        write_in_directory(directory.descriptor, name, chunks, shown=directory.shown(name))
    except (OSError, SFrameError):
        return
    _account(directory, name)


# -- generated sections -------------------------------------------------------------------------


def _prefix(build_id: bytes) -> str:
    return f"{build_id.hex()}."


def _entry_name(build_id: bytes, address: int, kind: str) -> str:
    return f"{build_id.hex()}.{address:x}.{kind}"


def cached_generation(binding: Binding) -> tuple[bytes, int] | None:
    """The generated section kept for the file ``binding`` describes, and its address; None
    when there is none that was made from it (any other is warned about and removed)."""
    with _opened(create=False) as directory:
        if directory is None:
            return None
        prefix = _prefix(binding.build_id)
        try:
            names = sorted(
                n for n in os.listdir(directory.descriptor)
                if n.startswith(prefix) and n.endswith(_SFRAME)
            )  # fmt: skip
        except OSError:
            return None
        for name in names:
            try:
                address = int(name[len(prefix) : -len(_SFRAME)], 16)
            except ValueError:
                continue  # no name this cache gives
            try:
                data = _read(directory, name, MAX_ENTRY + len(ENTRY_MAGIC) + MAX_HEADER)
            except InputError as error:
                _reject(directory, name, error.message, "SFrame is generated again")
                continue
            if data is None:
                continue
            section, why = _unpacked(data, binding, address)
            if section is None:
                _reject(directory, name, why, "SFrame is generated again")
                continue
            return section, address
    return None


def _unpacked(data: bytes, binding: Binding, address: int) -> tuple[bytes | None, str]:
    """The section an entry holds when its header binds it to ``binding`` at ``address``;
    else None and why not."""
    if not data.startswith(ENTRY_MAGIC):
        return None, "not an entry this pysframe writes"
    end = data.find(b"\n", len(ENTRY_MAGIC), len(ENTRY_MAGIC) + MAX_HEADER)
    try:
        record = json.loads(data[len(ENTRY_MAGIC) : end]) if end >= 0 else None
    except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
        record = None
    if not isinstance(record, dict):
        return None, "its header is damaged"
    section = data[end + 1 :]
    build_id = record.get("build_id")
    if build_id != binding.build_id.hex():
        readable = isinstance(build_id, str) and 0 < len(build_id) <= 128 and all(
            c in _HEX_DIGITS for c in build_id
        )  # a hostile header's text stays out of the warning line
        return None, f"made for another file (build ID {build_id if readable else '?'})"
    if record.get("inputs") != binding.inputs:
        return None, "made from other CFI or headers than the file's"
    if record.get("address") != address or record.get("generator") != generator_digest():
        return None, "made for another address or by another generator"
    if record.get("sframe") != hashlib.sha256(section).hexdigest():
        return None, "its section is not the one written (damaged)"
    return section, ""


def reject_generation(build_id: bytes, address: int, why: str) -> None:
    """Warn that the entry of ``build_id`` at ``address`` is not used (its functions lie
    outside the file's code, say), and remove it."""
    with _opened(create=False) as directory:
        if directory is not None:
            name = _entry_name(build_id, address, _SFRAME[1:])
            _reject(directory, name, why, "SFrame is generated again")


def has_generation(build_id: bytes) -> bool:
    """Whether the cache holds a generated section for ``build_id`` (not read: it may still
    turn out unusable)."""
    with _opened(create=False) as directory:
        if directory is None or not build_id:
            return False
        prefix = _prefix(build_id)
        try:
            names = os.listdir(directory.descriptor)
        except OSError:
            return False
        return any(n.startswith(prefix) and n.endswith(_SFRAME) for n in names)


def keep_generation(binding: Binding, data: bytes, address: int) -> None:
    """Keep a section generated for the file ``binding`` describes, encoded for ``address``
    (best effort: a failure is ignored)."""
    if len(data) > MAX_ENTRY:
        return
    record = {
        "build_id": binding.build_id.hex(),
        "inputs": binding.inputs,
        "address": address,
        "generator": generator_digest(),
        "sframe": hashlib.sha256(data).hexdigest(),
    }
    header = ENTRY_MAGIC + json.dumps(record, sort_keys=True).encode() + b"\n"
    with _opened(create=True) as directory:
        if directory is not None:
            _write(directory, _entry_name(binding.build_id, address, _SFRAME[1:]), [header, data])


# -- tables (symbol tables, kallsyms) ------------------------------------------------------------


#: The first line of a kept table.
TABLES_MAGIC = b"pysframe tables\n"
#: A kept table larger than this is not read (a kernel's kallsyms is a few MB).
MAX_TABLES = 256 << 20


def code_digest(*modules: str) -> str:
    """A digest of the sources of the pysframe modules named (``"perf/symbols.py"``...): what
    made a kept table, so that a pysframe that makes other tables never reads an older one's."""
    return _code_digest(tuple(sorted(modules)))


@cache
def _code_digest(modules: tuple[str, ...]) -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256(f"tables {ENTRY_FORMAT}\n".encode())
    for module in modules:
        digest.update(module.encode() + b"\0")
        with open(os.path.join(root, module), "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:16]


def _tables_name(key: str, kind: str, binding: dict[str, Any]) -> str | None:
    """The entry of ``kind`` for ``key`` (hex: a build ID or a digest) made by the code whose
    digest the binding names (``"code"``: two versions of pysframe sharing a cache each keep
    their own entries instead of replacing the other's on every run); None for a key that
    names no file of this cache."""
    code = binding.get("code")
    if not isinstance(code, str) or not all(_hex(part) for part in (key, code)):
        return None
    return f"{key}.{code}.{kind}"


def _hex(text: str) -> bool:
    return 0 < len(text) <= 128 and all(c in _HEX_DIGITS for c in text)


def cached_tables(key: str, kind: str, binding: dict[str, Any]) -> list[memoryview] | None:
    """The parts kept by :func:`keep_tables` for ``key`` and ``kind`` when the entry's header
    names exactly ``binding`` (what the tables were made from: digests of the inputs, the
    code's digest) and its parts are the bytes written; else None (an entry made from
    anything else, damaged, a link or a FIFO is warned about and removed: a miss).  The
    parts are views of the entry's memory map (a kernel's table is megabytes: no copy is
    made), which stays mapped while a view of it lives: copy what is kept."""
    name = _tables_name(key, kind, binding)
    if name is None:
        return None
    with _opened(create=False) as directory:
        if directory is None:
            return None
        try:
            data = _mapped(directory, name, MAX_TABLES + len(TABLES_MAGIC) + MAX_HEADER)
        except InputError as error:
            _reject(directory, name, error.message, "made again")
            return None
        if data is None:
            return None
        parts, why = _tables_unpacked(data, binding)
        if parts is None:
            _reject(directory, name, why, "made again")
        return parts


def _tables_unpacked(
    data: bytes | mmap.mmap, binding: dict[str, Any]
) -> tuple[list[memoryview] | None, str]:
    if data[: len(TABLES_MAGIC)] != TABLES_MAGIC:
        return None, "not an entry this pysframe writes"
    end = data.find(b"\n", len(TABLES_MAGIC), len(TABLES_MAGIC) + MAX_HEADER)
    try:
        record = json.loads(data[len(TABLES_MAGIC) : end]) if end >= 0 else None
    except (ValueError, RecursionError):
        record = None
    if not isinstance(record, dict):
        return None, "its header is damaged"
    if record.get("binding") != binding:
        return None, "made from other files or by other code"
    sizes = record.get("parts")
    body = memoryview(data)[end + 1 :]
    if (
        not isinstance(sizes, list)
        or not all(isinstance(size, int) and size >= 0 for size in sizes)
        or sum(sizes) != len(body)
        or record.get("sha256") != hashlib.sha256(body).hexdigest()
    ):
        return None, "its content is not the one written (damaged)"
    parts, at = [], 0
    for size in sizes:
        parts.append(body[at : at + size])
        at += size
    return parts, ""


def keep_tables(key: str, kind: str, binding: dict[str, Any], parts: list[bytes]) -> None:
    """Keep ``parts`` for ``key`` and ``kind``, bound to ``binding`` (best effort: a failure,
    or an entry over :data:`MAX_TABLES`, is ignored)."""
    name = _tables_name(key, kind, binding)
    if name is None or sum(len(part) for part in parts) > MAX_TABLES:
        return
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    record = {"binding": binding, "parts": [len(p) for p in parts], "sha256": digest.hexdigest()}
    header = TABLES_MAGIC + json.dumps(record, sort_keys=True).encode() + b"\n"
    if len(header) > MAX_HEADER:
        return
    with _opened(create=True) as directory:
        if directory is not None:
            _write(directory, name, [header, *parts])


# -- verdicts -----------------------------------------------------------------------------------


def cached_verdict(build_id: bytes, address: int, kind: str, digest: str) -> dict[str, Any] | None:
    """The verdict of check ``kind`` kept for the section at ``address`` of the file with
    ``build_id``, when it was found for the bytes named by ``digest``; else None."""
    if not build_id:
        return None
    with _opened(create=False) as directory:
        if directory is None:
            return None
        name = _entry_name(build_id, address, kind)
        try:
            data = _read(directory, name, MAX_VERDICT)
        except InputError as error:
            _reject(directory, name, error.message, "checked again")
            return None
    try:
        found = json.loads(data) if data is not None else None
    except (ValueError, RecursionError):
        return None  # damaged: a miss, written again
    if not isinstance(found, dict) or found.get("digest") != digest:
        return None  # another section's, or other bytes' (its digest names them): a miss
    return found


def keep_verdict(
    build_id: bytes, address: int, kind: str, digest: str, verdict: dict[str, Any]
) -> None:
    """Keep the verdict of check ``kind`` on the bytes named by ``digest`` (best effort)."""
    if not build_id:
        return
    with _opened(create=True) as directory:
        if directory is not None:
            text = json.dumps({**verdict, "digest": digest}).encode()
            _write(directory, _entry_name(build_id, address, kind), [text])


# -- the bound: the least recently used entries removed ------------------------------------------


#: The environment variable setting the cache's largest size: bytes, or a number with K, M, G or
#: T (powers of 1024, as ``du`` and ``sort -S`` read them; ``KiB``, ``MB``... are read the same).
SIZE_ENVIRONMENT = "PYSFRAME_CACHE_MAX_SIZE"
#: The cache's largest size when :data:`SIZE_ENVIRONMENT` is not set.
DEFAULT_MAX_SIZE = 1 << 30
#: When a write takes the cache over its size, the least recently used entries are removed until
#: it holds this share of it or less (so that the next writes do not remove some again at once).
LOW_MARK = 0.9
#: The folder of another pysframe's entries is removed when neither it nor any of its entries
#: changed or was used for this long (seconds): two versions used side by side keep theirs.
UNUSED_FOLDER_AGE = 30 * 24 * 3600
#: A write's temporary file (:func:`pysframe.output.write_in_directory`: ``.NAME.XXXXXXXX.tmp``)
#: this old (seconds) was left by a write that never ended, and is removed.
STALE_TEMPORARY_AGE = 24 * 3600
#: The kinds of entries, the last part of their names: generated sections, the checks' verdicts
#: (:mod:`pysframe.sources.trust`) and the tables.
ENTRY_KINDS = ("sframe", "checked", "trusted", "perf-symbols", "kallsyms", "addr2line")
#: What the temporary files of writes count as.
TEMPORARY = "temporary"

#: The names of the folders (:func:`cache_directory`) of this and other versions of pysframe.
#: (The patterns are text, compiled by ``re`` when first used: a command that writes nothing to
#: the cache compiles none.)
_FOLDER_NAME = r"generated-[0-9a-f]{16}"
#: The names of entries (``KEY.ADDRESS.KIND``, ``KEY.CODE.KIND``; ``KEY.KIND``, the tables of
#: earlier versions, hex numbers all), and of the temporary files writing them: nothing else in
#: a folder is removed.
_ENTRY_NAME = rf"[0-9a-fA-F]{{1,128}}(?:\.[0-9a-fA-F]{{1,128}})?\.({'|'.join(ENTRY_KINDS)})"
_NAME = rf"{_ENTRY_NAME}|\.{_ENTRY_NAME}\.[0-9a-f]{{8}}\.tmp"
#: A size: a number, then K, M, G or T, alone or with ``iB`` or ``B``, or ``B``.
_SIZE = r"(?i)([0-9]+(?:\.[0-9]+)?) *(?:([kmgt])(?:ib|b)?|b)?"
_UNITS = " KMGT"

#: The entries read by this process and marked as used (folder, name): once each.
_used: set[tuple[str, str]] = set()


def parse_size(text: str) -> int:
    """The number of bytes ``text`` says (``1073741824``, ``500M``, ``2G``, ``1.5GiB``);
    ValueError when it is no size, or not more than 0."""
    found = re.fullmatch(_SIZE, text.strip())
    if found is None:
        raise ValueError(f"not a size: {text!r} (bytes, or a number with K, M, G or T)")
    scale = 1024 ** _UNITS.index(found[2].upper()) if found[2] else 1
    number = found[1]
    size = int(float(number) * scale) if "." in number else int(number) * scale
    if size < 1:
        raise ValueError(f"not more than 0: {text!r} ({CACHE_ENVIRONMENT}= turns the cache off)")
    return size


def size_text(size: int) -> str:
    """``size`` bytes as ``du -h`` would say them, in KiB, MiB, GiB or TiB (one decimal)."""
    if size < 1024:
        return f"{size} B"
    power = 1
    while power < 4 and size >= 1024 ** (power + 1):
        power += 1
    return f"{size / 1024**power:.1f} {_UNITS[power]}iB"


def max_size() -> int:
    """The cache's largest size: ``$PYSFRAME_CACHE_MAX_SIZE``, else :data:`DEFAULT_MAX_SIZE`
    (also when it says no size: one warning says so)."""
    return _max_size_for(os.environ.get(SIZE_ENVIRONMENT))


@cache
def _max_size_for(text: str | None) -> int:
    if text is None or not text.strip():
        return DEFAULT_MAX_SIZE
    try:
        return parse_size(text)
    except ValueError as error:
        _warn(f"{SIZE_ENVIRONMENT}: {error}; {size_text(DEFAULT_MAX_SIZE)} is used")
        return DEFAULT_MAX_SIZE


def _mark_used(directory: _Directory, name: str, stream: BinaryIO) -> None:
    """Set the modification time of the entry just read to now, once per process: entries are
    never changed once written, so that their times order them by last use
    (:func:`_make_room` removes the oldest).  Through the open file: the one read."""
    key = (directory.path, name)
    if key in _used:
        return
    _used.add(key)
    with suppress(OSError, ValueError):
        os.utime(stream.fileno())


@dataclass(slots=True, eq=False, repr=False)
class _Kept:
    """An entry as this process knows it: its size on the disk and when it was last used (its
    modification time, ns)."""

    size: int
    used: int


@dataclass(slots=True, eq=False, repr=False)
class _Usage:
    """The entries of the cache whose folder is ``path`` (:func:`cache_directory`), by folder
    name and name, as this process's first write found them and its writes added to them."""

    path: str
    entries: dict[tuple[str, str], _Kept]
    total: int = 0

    def add(self, folder: str, name: str, kept: _Kept) -> None:
        old = self.entries.get((folder, name))
        self.total += kept.size - (old.size if old is not None else 0)
        self.entries[folder, name] = kept

    def drop(self, folder: str, name: str) -> None:
        old = self.entries.pop((folder, name), None)
        if old is not None:
            self.total -= old.size


#: What this process's first write found in the cache (None: it wrote nothing yet).
_usage: _Usage | None = None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Found:
    """An entry (or a write's temporary file) of a folder: its name, kind, size on the disk
    (blocks, as ``du`` counts) and modification time (ns)."""

    name: str
    kind: str
    size: int
    used: int


def _found(folder: int) -> tuple[list[_Found], int]:
    """The entries and temporary files of the open ``folder`` (regular files of those names:
    a link, a directory, a file of any other name is not one), and the newest modification time
    of the folder and of them (ns; -1 when the folder could not be read through: nothing of it
    is then removed for its age)."""
    found = []
    try:
        newest = os.fstat(folder).st_mtime_ns
        with os.scandir(folder) as listing:
            for item in listing:
                match = re.fullmatch(_NAME, item.name)
                if match is None:
                    continue
                try:
                    info = item.stat(follow_symlinks=False)
                except OSError:
                    continue  # removed meanwhile
                if stat.S_ISREG(info.st_mode):
                    kind = match[1] or TEMPORARY
                    found.append(_Found(item.name, kind, info.st_blocks * 512, info.st_mtime_ns))
                    newest = max(newest, info.st_mtime_ns)
    except OSError:
        return found, -1
    return found, newest


def _removed(folder: int, name: str) -> bool:
    """Remove the name ``name`` of the open ``folder`` (a link is removed, never followed);
    whether it is gone (another pysframe may have removed it first)."""
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


@contextmanager
def _folder(base: int | None, name: str) -> Iterator[int | None]:
    """:func:`_open_folder`, closed after use."""
    descriptor = _open_folder(base, name)
    try:
        yield descriptor
    finally:
        if descriptor is not None:
            os.close(descriptor)


@contextmanager
def _base_of(folder: _Directory) -> Iterator[int | None]:
    """The directory the open folder of this pysframe's entries is in (``..``: no name looked
    up again), when it is the user's own and nobody else may write to it; else None (the folder
    alone is then kept under the bound)."""
    try:
        descriptor = os.open("..", os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0),
                             dir_fd=folder.descriptor)  # fmt: skip
    except OSError:
        yield None
        return
    try:
        yield None if _untrusted(descriptor) is not None else descriptor
    finally:
        os.close(descriptor)


def _account(directory: _Directory, name: str) -> None:
    """Count the entry ``name`` just written in ``directory``; when the cache is then over its
    size, remove the least recently used entries.  The process's first write looks at the whole
    cache (:func:`_survey`), the others count what they write."""
    global _usage
    try:
        info = os.stat(name, dir_fd=directory.descriptor, follow_symlinks=False)
    except OSError:
        return
    folder = os.path.basename(directory.path)
    if _usage is None or _usage.path != directory.path:
        _usage = _Usage(directory.path, {})
        _survey(directory, _usage)
    _usage.add(folder, name, _Kept(info.st_blocks * 512, info.st_mtime_ns))
    bound = max_size()
    if _usage.total > bound:
        _make_room(directory, _usage, int(bound * LOW_MARK))


def _survey(directory: _Directory, usage: _Usage) -> None:
    """Count the entries of every folder of the cache in ``usage``; remove the folders of other
    versions unused for :data:`UNUSED_FOLDER_AGE` (their entries, then the folder when nothing
    else is left in it) and temporary files older than :data:`STALE_TEMPORARY_AGE`."""
    now = time.time_ns()
    current = os.path.basename(directory.path)
    _count(directory.descriptor, current, usage, now)
    with _base_of(directory) as base:
        if base is None:
            return
        for name in _folder_names(base):
            if name == current:
                continue
            with _folder(base, name) as folder:
                if folder is not None and not _count(folder, name, usage, now):
                    with suppress(OSError):
                        os.rmdir(name, dir_fd=base)  # not when anything else is left in it


def _count(folder: int, name: str, usage: _Usage, now: int) -> bool:
    """Count the entries of ``folder`` (named ``name``) in ``usage``, removing stale temporary
    files; False when it is another version's unused for long, whose entries are removed."""
    found, newest = _found(folder)
    current = name == os.path.basename(usage.path)
    unused = not current and newest >= 0 and now - newest > UNUSED_FOLDER_AGE * 10**9
    for entry in found:
        if unused or (entry.kind == TEMPORARY and now - entry.used > STALE_TEMPORARY_AGE * 10**9):
            _removed(folder, entry.name)
        elif entry.kind != TEMPORARY:
            usage.add(name, entry.name, _Kept(entry.size, entry.used))
    return not unused


def _make_room(directory: _Directory, usage: _Usage, goal: int) -> None:
    """Remove the least recently used entries of ``usage`` until it holds ``goal`` bytes or
    fewer.  Each is looked at first: one used since it was counted (by this process or another)
    is kept, one gone is no longer counted."""
    current = os.path.basename(directory.path)
    opened: dict[str, int | None] = {current: directory.descriptor}
    emptied = set()
    with _base_of(directory) as base:
        try:
            for (folder, name), kept in sorted(usage.entries.items(), key=lambda e: e[1].used):
                if usage.total <= goal:
                    break
                if folder not in opened:
                    opened[folder] = _open_folder(base, folder)
                descriptor = opened[folder]
                if descriptor is None:
                    usage.drop(folder, name)  # no longer looked at
                    continue
                try:
                    info = os.stat(name, dir_fd=descriptor, follow_symlinks=False)
                except FileNotFoundError:
                    usage.drop(folder, name)
                    continue
                except OSError:
                    continue
                if not stat.S_ISREG(info.st_mode):
                    usage.drop(folder, name)  # replaced by something that is no entry
                elif info.st_mtime_ns > kept.used:
                    usage.add(folder, name, _Kept(info.st_blocks * 512, info.st_mtime_ns))
                elif _removed(descriptor, name):
                    usage.drop(folder, name)
                    emptied.add(folder)
        finally:
            for folder, descriptor in opened.items():
                if folder != current and descriptor is not None:
                    os.close(descriptor)
        left = {folder for folder, _ in usage.entries}
        for folder in emptied - left - {current} if base is not None else ():
            with suppress(OSError):
                os.rmdir(folder, dir_fd=base)  # not when anything else is left in it


def _open_folder(base: int | None, name: str, shown: str | None = None) -> int | None:
    """The folder ``name`` of the open cache ``base``, opened without following a link, when
    it is the user's own and nobody else may write to it; else None (and when ``shown`` names
    it, a warning says why)."""
    if base is None:
        return None
    try:
        descriptor = os.open(name, _DIRECTORY_FLAGS, dir_fd=base)
    except OSError as error:
        if shown is not None:
            _refused(shown, error, name, base)
        return None
    return _trusted(descriptor, shown)


def _is_link(base: int | None, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=base, follow_symlinks=False).st_mode)
    except OSError:
        return False


# -- looking at the cache, clearing it -------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class CacheFolder:
    """A folder of the cache (``generated-DIGEST``): whether it is this pysframe's, when it or
    one of its entries last changed or was used (seconds since the epoch), and its entries by
    kind (:data:`ENTRY_KINDS`, :data:`TEMPORARY`): how many, and their size on the disk."""

    name: str
    current: bool
    last_used: float
    kinds: dict[str, tuple[int, int]]

    @property
    def entries(self) -> int:
        return sum(count for count, _ in self.kinds.values())

    @property
    def size(self) -> int:
        return sum(size for _, size in self.kinds.values())


@dataclass(frozen=True, slots=True, eq=False)
class CacheUsage:
    """The cache's directory (the folders' parent), its largest size (:func:`max_size`) and
    its folders, this pysframe's first."""

    directory: str
    max_size: int
    folders: tuple[CacheFolder, ...]

    @property
    def size(self) -> int:
        return sum(folder.size for folder in self.folders)


@dataclass(frozen=True, slots=True, eq=False)
class ClearedCache:
    """What :func:`clear_cache` removed: the cache's directory, the entries and their size,
    and how many could not be removed."""

    directory: str
    removed: int
    size: int
    failed: int


def cache_usage() -> CacheUsage | None:
    """What the cache holds, folder by folder (None: no cache, ``PYSFRAME_CACHE_DIR=``).
    InputError when its directory cannot be looked at or others may write to it; a folder that
    is not the user's own or a link is left out, with a warning (:func:`take_warnings`)."""
    with _cache_base() as opened:
        if opened is None:
            return None
        path, base = opened
        current = os.path.basename(cache_directory() or "")
        folders = []
        for name in _folder_names(base):
            descriptor = _open_folder(base, name, os.path.join(path, name))
            if descriptor is None:
                continue
            try:
                found, newest = _found(descriptor)
            finally:
                os.close(descriptor)
            if newest < 0:
                continue  # not readable: nothing to say of it
            kinds: dict[str, tuple[int, int]] = {}
            for entry in found:
                count, size = kinds.get(entry.kind, (0, 0))
                kinds[entry.kind] = (count + 1, size + entry.size)
            folders.append(CacheFolder(name, name == current, newest / 1e9, kinds))
        folders.sort(key=lambda folder: (not folder.current, -folder.last_used, folder.name))
        return CacheUsage(path, max_size(), tuple(folders))


def clear_cache() -> ClearedCache | None:
    """Remove every entry of the cache (every folder's, temporary files too), then the folders
    left empty; nothing else (None: no cache).  InputError as :func:`cache_usage` raises it."""
    with _cache_base() as opened:
        if opened is None:
            return None
        path, base = opened
        removed = size = failed = 0
        for name in _folder_names(base):
            with _folder(base, name) as folder:
                if folder is None:
                    continue
                for entry in _found(folder)[0]:
                    if _removed(folder, entry.name):
                        removed, size = removed + 1, size + entry.size
                    else:
                        failed += 1
            with suppress(OSError):
                os.rmdir(name, dir_fd=base)  # not when anything else is left in it
        return ClearedCache(path, removed, size, failed)


@contextmanager
def _cache_base() -> Iterator[tuple[str, int | None] | None]:
    """The cache's directory (the folders' parent) and a descriptor of it (None: there is
    none yet); None when there is no cache."""
    path = cache_directory()
    if path is None:
        yield None
        return
    base = os.path.dirname(path)
    try:
        descriptor = os.open(base, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        yield base, None
        return
    except OSError as error:
        raise InputError(error.strerror or str(error), path=base) from None
    try:
        why = _untrusted(descriptor)
        if why is not None:
            raise InputError(f"not used as a cache: {why or 'cannot be looked at'}", path=base)
        yield base, descriptor
    finally:
        os.close(descriptor)


def _folder_names(base: int | None) -> list[str]:
    """The names of the folders of the open cache ``base``, sorted."""
    if base is None:
        return []
    try:
        with os.scandir(base) as listing:
            return sorted(item.name for item in listing if re.fullmatch(_FOLDER_NAME, item.name))
    except OSError:
        return []


__all__ = [
    "CACHE_ENVIRONMENT",
    "DEFAULT_MAX_SIZE",
    "ENTRY_FORMAT",
    "ENTRY_KINDS",
    "ENTRY_MAGIC",
    "GENERATOR_INPUTS",
    "LOW_MARK",
    "MAX_ENTRY",
    "MAX_TABLES",
    "MAX_VERDICT",
    "SIZE_ENVIRONMENT",
    "STALE_TEMPORARY_AGE",
    "TABLES_MAGIC",
    "TEMPORARY",
    "UNUSED_FOLDER_AGE",
    "Binding",
    "CacheFolder",
    "CacheUsage",
    "ClearedCache",
    "cache_directory",
    "cache_usage",
    "cached_generation",
    "cached_tables",
    "cached_verdict",
    "clear_cache",
    "code_digest",
    "generation_binding",
    "generator_digest",
    "has_generation",
    "keep_generation",
    "keep_tables",
    "keep_verdict",
    "max_size",
    "parse_size",
    "reject_generation",
    "size_text",
    "take_warnings",
]
