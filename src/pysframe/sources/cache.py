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

Library code does not print: the warnings wait in :func:`take_warnings` for the command line,
which prints each once.  A failed write is ignored.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
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


def _open_directory(path: str, create: bool) -> int | None:
    """A descriptor of the directory ``path`` when it is the user's own and nobody else may
    write to it (checked on the open directory, which is what every later call uses)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        if not create:
            return None
        try:
            _make_directories(path)
            descriptor = os.open(path, flags)
        except OSError:
            return None  # no place for a cache (read-only, no permission): none, as when off
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a link, or a file
            _distrust(path, "a symbolic link" if os.path.islink(path) else "not a directory")
        return None
    try:
        info = os.fstat(descriptor)
    except OSError:
        os.close(descriptor)
        return None
    why = None
    if info.st_uid != os.geteuid():
        why = f"owned by another user (uid {info.st_uid})"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "others" if info.st_mode & stat.S_IWOTH else "its group"
        why = f"writable by {who} (mode {stat.S_IMODE(info.st_mode):04o})"
    if why is not None:
        os.close(descriptor)
        _distrust(path, why)
        return None
    return descriptor


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
            return how(stream, limit + 1)
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

    with suppress(OSError, SFrameError):
        write_in_directory(directory.descriptor, name, chunks, shown=directory.shown(name))


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


__all__ = [
    "CACHE_ENVIRONMENT",
    "ENTRY_FORMAT",
    "ENTRY_MAGIC",
    "GENERATOR_INPUTS",
    "MAX_ENTRY",
    "MAX_TABLES",
    "MAX_VERDICT",
    "TABLES_MAGIC",
    "Binding",
    "cache_directory",
    "cached_generation",
    "cached_tables",
    "cached_verdict",
    "code_digest",
    "generation_binding",
    "generator_digest",
    "has_generation",
    "keep_generation",
    "keep_tables",
    "keep_verdict",
    "reject_generation",
    "take_warnings",
]
