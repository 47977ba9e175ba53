"""Demangled names of C++ (Itanium ABI) and Rust symbols, as gdb and eu-stack print them.

* Itanium C++ (``_Z…``): ``cxxfilt``, which calls the C++ runtime's own ``__cxa_demangle``.
  That prints the standard substitutions ``Ss``, ``Si``, ``So`` and ``Sd`` short
  (``std::string``, ``std::ostream``...), where gdb and c++filt demangle verbosely
  (libiberty's ``DMGL_VERBOSE``: the ``full_expansion`` of cp-demangle.c's ``standard_subs``,
  ``std::basic_ostream<char, std::char_traits<char> >``): the short forms are expanded.
* Rust "legacy" names are Itanium names ending in a ``17h<16 hex digits>E`` hash: demangled as
  C++, then the ``::h…`` hash is dropped, as libiberty's ``rust_demangle`` (gdb, c++filt) does.
* Rust v0 names (``_R…``, RFC 2603): ``rust_demangler``, when it is installed.

A name that does not demangle, or a demangler that is not installed, leaves the name as it is:
a stack trace never fails for want of a demangler.

perf 6.1 names frames its own way (:func:`demangle_like_perf`, util/symbol-elf.c
``demangle_sym``): libiberty's ``cplus_demangle`` with no options (``DMGL_NO_OPTS``: no
parameter list, return type, function qualifiers or clone suffix at the top level, standard
substitutions short), then OCaml's ``caml`` names.  libiberty is found in the system's libbfd,
which exports it; without it the name is derived from ``__cxa_demangle``'s
(:func:`bare_name`), which differs only in rare names.

Demangled names are bounded in length and time.  A name's back-references (``S_``, ``T_``,
Rust's ``B…_``) each repeat an earlier part of it, so a few hundred bytes may demangle to
hundreds of MB (each reference doubling the last): ``__cxa_demangle`` cannot be stopped once
called, nor told a size.  So:

* :func:`length_bound` gives, in one pass over the name, a length the demangled name cannot
  exceed (every literal byte writes at most :data:`_BYTE_LENGTH` characters, every reference
  at most all that came before it, every pack expansion repeats what follows as many times as
  what came before); a name whose bound is at most :data:`IN_PROCESS_BOUND` is demangled here
  (nearly all: the bound of 95% of libLLVM's 45,000 names is under it);
* any other name is demangled by a worker process under a memory limit and a time limit
  (:data:`WORKER_MEMORY`, :data:`WORKER_SECONDS`); a name it cannot finish within them stays
  mangled;
* a demangled name longer than :data:`MAX_DEMANGLED` characters stays mangled.

A name left mangled for its size or time says so (:func:`demangle_checked`), for a warning.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import struct
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..bounded import BoundedCache, cached

if TYPE_CHECKING:  # the worker's modules are imported when a worker is started
    import subprocess

#: The patterns of this module are text, compiled by ``re`` when first used (its cache keeps
#: them): a report of names none of which is mangled compiles none.
_RUST_LEGACY_HASH = r"::h[0-9a-f]{16}$"
#: cp-demangle.c's standard_subs whose simple and full expansions differ.
_FULL_EXPANSION = {
    "string": "basic_string<char, std::char_traits<char>, std::allocator<char> >",
    "istream": "basic_istream<char, std::char_traits<char> >",
    "ostream": "basic_ostream<char, std::char_traits<char> >",
    "iostream": "basic_iostream<char, std::char_traits<char> >",
}
_SHORT_SUBSTITUTION = r"\bstd::(string|istream|ostream|iostream)\b"
_RUST_LEGACY = r"^_ZN.*17h[0-9a-f]{16}E$"

_cxx: Callable[[str], str] | None = None
_rust: Callable[[str], str] | None = None
_libiberty: Callable[[str], str | None] | None = None
_loaded = False
_libiberty_loaded = False
#: Where libbfd (which carries libiberty's demangler) is looked for.
_LIBBFD_GLOBS = (
    "/usr/lib/*-linux-gnu*/libbfd*.so*",
    "/usr/lib64/libbfd*.so*",
    "/usr/lib/libbfd*.so*",
)


def _load() -> None:
    global _cxx, _rust, _loaded
    _loaded = True
    try:
        import cxxfilt

        _cxx = cxxfilt.demangle
    except Exception:  # not installed, or no C++ runtime library to load: names stay mangled
        _cxx = None
    try:
        import rust_demangler

        _rust = rust_demangler.demangle
    except Exception:  # optional: v0 Rust names then stay mangled
        _rust = None
    _perf_demangler()


def _perf_demangler() -> Callable[[str], str | None] | None:
    """libiberty's demangler, loaded alone when first needed: perf's demangling needs no
    other where it is found (loading cxxfilt looks its libraries up with
    ctypes.util.find_library, which runs programs: some 50 ms)."""
    global _libiberty, _libiberty_loaded
    if not _libiberty_loaded:
        _libiberty_loaded = True
        _libiberty = _load_libiberty()
    return _libiberty


def _load_libiberty() -> Callable[[str], str | None] | None:
    """libiberty's ``cplus_demangle(name, DMGL_NO_OPTS)`` (demangle.h) from the system's
    libbfd, which exports it; None when there is none."""
    import ctypes
    import glob

    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    for path in sorted(p for pattern in _LIBBFD_GLOBS for p in glob.glob(pattern)):
        try:
            function = ctypes.CDLL(path).cplus_demangle
        except (OSError, AttributeError):  # not loadable here, or without the demangler
            continue
        function.restype = ctypes.c_void_p
        function.argtypes = [ctypes.c_char_p, ctypes.c_int]

        def cplus_demangle(name: str, function: Any = function) -> str | None:
            pointer = function(name.encode("utf-8", "surrogateescape"), 0)
            if not pointer:
                return None
            try:
                return ctypes.string_at(pointer).decode("utf-8", "surrogateescape")
            finally:
                free(pointer)

        return cplus_demangle
    return None


#: A demangled name longer than this many characters stays mangled.
MAX_DEMANGLED = 1 << 16
#: Names whose :func:`length_bound` is at most this are demangled in this process (1 Mi
#: characters: tens of milliseconds at most).
IN_PROCESS_BOUND = 1 << 20
#: The worker's limits, for one name: seconds, and bytes of address space.
WORKER_SECONDS = 0.5
WORKER_MEMORY = 512 << 20
#: After this many names that exhausted the worker's limits, the others it would get stay
#: mangled at once (a file full of them costs seconds, not minutes).
WORKER_FAILURES = 4
#: The most characters one byte of a mangled name writes that is not a reference: the
#: verbose ``Ss`` (``std::basic_string<char, std::char_traits<char>, std::allocator<char> >``,
#: 71 for 2), ``TA`` (``template parameter object for ``, 30 for 2), ``y`` (``unsigned long
#: long``) and the like, with the ``, `` and ``::`` around them.
_BYTE_LENGTH = 36
#: Back-references (substitutions ``S[seq-id]_``, template parameters ``T[n]_``, lambda
#: template parameters ``TL[n]_[n]_``; Rust v0 ``B[base-62]_``), pack expansions (``Dp``,
#: ``sp``), and conversion operators (``cv``, whose template parameters may refer forward).
_ITANIUM_EXPANDING = r"S[0-9A-Z]*_|TL[0-9]*_[0-9]*_|T[0-9]*_|Dp|sp|cv"
_RUST_EXPANDING = r"B[0-9a-zA-Z]*_"


def length_bound(name: str, limit: int = IN_PROCESS_BOUND) -> int | None:
    """A length the demangling of ``name`` cannot exceed, or None when it may exceed
    ``limit`` (or is not bounded this way: a conversion operator).  Linear in the name; every
    reference counts, even a byte sequence of an identifier that reads like one."""
    expanding = re.compile(_RUST_EXPANDING if name.startswith("_R") else _ITANIUM_EXPANDING)
    tokens = expanding.findall(name, 2)
    if not any(t in ("cv", "Dp", "sp") for t in tokens):
        # Most names: each reference at most doubles what came before.
        quick = _BYTE_LENGTH * len(name) << len(tokens)
        if quick <= limit:
            return quick
    bound, repeat, at = 0, 1, 2
    for match in expanding.finditer(name, 2):
        bound += repeat * _BYTE_LENGTH * (match.start() - at)
        token, at = match.group(), match.end()
        if token == "cv":
            return None
        if token in ("Dp", "sp"):
            repeat *= max(bound, 1)  # what follows, once for each element of the pack
            bound += repeat * _BYTE_LENGTH * 2
        else:
            bound += repeat * bound  # all that came before, at most
        if bound > limit:
            return None
    bound += repeat * _BYTE_LENGTH * (len(name) - at)
    return bound if bound <= limit else None


#: Names kept demangled, and why a name left mangled for its size or time was (see
#: :func:`demangle_checked`), at most this many of each.
CACHE_SIZE = 1 << 16
_LEFT_MANGLED: BoundedCache[str, str] = BoundedCache(CACHE_SIZE)
#: Answers of the worker for names :func:`demangle_many` sent it, taken by :func:`demangle`.
_FROM_WORKER: dict[str, str | _Refused] = {}


@cached(CACHE_SIZE)
def demangle(name: str) -> str:
    """``name`` demangled, or ``name`` itself when it is not a mangled C++ or Rust name, no
    demangler for it is installed, or its demangled name is too long or too slow to make
    (:func:`demangle_checked` says why)."""
    if not name.startswith(("_Z", "_R")):
        return name
    base, at, suffix = name.partition("@")  # a PLT entry's NAME@plt: NAME demangled, as gdb
    if at:
        text = demangle(base)
        why = _LEFT_MANGLED.peek(base)
        if why is not None:
            _LEFT_MANGLED.put(name, why)
        return text + at + suffix
    if not _loaded:
        _load()
    answer = _FROM_WORKER.pop(name, None)  # sent by demangle_many
    if answer is None and length_bound(name) is not None:
        text = demangle_unbounded(name)
    else:
        answer = answer or _WORKER.demangle([name])[name]
        if isinstance(answer, _Refused):
            _LEFT_MANGLED.put(name, answer.why)
            return name
        text = answer
    if len(text) > MAX_DEMANGLED:
        _LEFT_MANGLED.put(
            name,
            f"its demangled name of {len(text)} characters is longer than {MAX_DEMANGLED}",
        )
        return name
    return text


def demangle_many(names: Iterable[str]) -> list[str]:
    """:func:`demangle` of each name; the names that go to the worker process go together
    (one exchange for many names, not one each)."""
    names = list(names)  # the demanglers are loaded by the first name that needs them
    bases = {name.partition("@")[0] for name in names if name.startswith(("_Z", "_R"))}
    bounded = {base for base in bases if length_bound(base) is not None}
    needing = [b for b in bases if b not in bounded and b not in _LEFT_MANGLED]
    if needing:
        _FROM_WORKER.update(_WORKER.demangle(needing))
    try:
        return [
            demangle(name) if name not in bounded else _bounded(name) for name in names
        ]
    finally:
        for base in needing:  # those demangle() had already: not kept
            _FROM_WORKER.pop(base, None)


@cached(CACHE_SIZE)
def _bounded(name: str) -> str:
    """:func:`demangle` of a name whose :func:`length_bound` is known to hold (a plain name
    with no ``@`` suffix), without computing it again."""
    text = demangle_unbounded(name)
    if len(text) > MAX_DEMANGLED:
        _LEFT_MANGLED.put(
            name,
            f"its demangled name of {len(text)} characters is longer than {MAX_DEMANGLED}",
        )
        return name
    return text


def demangle_checked(name: str) -> tuple[str, str | None]:
    """(:func:`demangle` of ``name``, and when it stayed mangled for its size or time, a line
    to warn with saying so; else None)."""
    text = demangle(name)
    return text, left_mangled(name) if text == name else None


def left_mangled(name: str) -> str | None:
    """The line to warn with when ``name`` was left mangled for its size or time (by
    :func:`demangle` or :func:`demangle_like_perf`), else None."""
    why = _LEFT_MANGLED.peek(name)
    if why is None:
        return None
    shown = name if len(name) <= 80 else f"{name[:80]}..."
    return f"{shown}: left mangled ({why})"


def demangle_unbounded(name: str) -> str:
    """``name`` demangled by the demanglers themselves, with no bound (see the module's
    text): for names :func:`length_bound` has bounded, and for the worker process."""
    if not _loaded:
        _load()
    try:
        if name.startswith("_R"):
            return _rust(name) if _rust is not None else name
        if _cxx is None:
            return name
        text = _cxx(name)
        if re.match(_RUST_LEGACY, name):
            return re.sub(_RUST_LEGACY_HASH, "", text) or name
        if not text:
            return name
        return re.sub(_SHORT_SUBSTITUTION, _full_expansion, text)
    except Exception:  # the demanglers raise their own errors on names they do not read
        return name


def _full_expansion(match: re.Match[str]) -> str:
    """The verbose form of a short standard substitution; a template argument list it now
    ends closes with ``> >``, as the demangler writes it."""
    text = "std::" + _FULL_EXPANSION[match[1]]
    return text + " " if match.string.startswith(">", match.end()) else text


#: Names perf's demangler may change (libiberty: Itanium C++ and ``_GLOBAL_`` constructor
#: names, Rust); others stay as they are, but OCaml's.
_PERF_PREFIXES = ("_Z", "_R", "_GLOBAL_")
#: The parts of an OCaml name that change (util/demangle-ocaml.c ocaml_demangle_sym).
_OCAML_PART = r"__|\$([0-9a-fA-F]{2})"
#: The end of a function's demangled name: its parameter list, then qualifiers.
_FUNCTION_END = r"\)(?: const| volatile| restrict| &&| &| noexcept)*$"
#: Answers of the worker for names demangle_like_perf_many sent it.
_FROM_WORKER_PERF: dict[str, Any] = {}
#: What :data:`_FROM_WORKER_PERF` holds for a name it was not sent.
_NOT_SENT = object()


@cached(CACHE_SIZE)
def demangle_like_perf(name: str) -> str | None:
    """``name`` as perf 6.1 demangles a symbol's name (util/symbol-elf.c demangle_sym:
    libiberty's ``cplus_demangle`` with ``DMGL_NO_OPTS``, then OCaml's names,
    util/demangle-ocaml.c), bounded as :func:`demangle` is; None where perf keeps the name
    as it is (and where it is left mangled for its size or time: :func:`left_mangled` says
    why)."""
    if name.startswith("caml") and "A" <= name[4:5] <= "Z":  # ocaml_is_mangled: caml[A-Z]
        # "caml" dropped, "__" -> ".", "$xx" -> the character of hex xx.
        return re.sub(_OCAML_PART, lambda m: chr(int(m[1], 16)) if m[1] else ".", name[4:])
    if not name.startswith(_PERF_PREFIXES):
        return None
    answer = _FROM_WORKER_PERF.pop(name, _NOT_SENT)
    if answer is _NOT_SENT and length_bound(name) is not None:
        return _perf_bounded(name)
    if answer is _NOT_SENT:
        answer = _WORKER.demangle([name], perf=True)[name]
    if isinstance(answer, _Refused):
        _LEFT_MANGLED.put(name, answer.why)
        return None
    return _perf_checked(name, answer)


@cached(CACHE_SIZE)
def _perf_bounded(name: str) -> str | None:
    """:func:`demangle_like_perf` of a name whose :func:`length_bound` is known to hold."""
    return _perf_checked(name, demangle_like_perf_unbounded(name))


def _perf_checked(name: str, text: str | None) -> str | None:
    if text is not None and len(text) > MAX_DEMANGLED:
        _LEFT_MANGLED.put(
            name,
            f"its demangled name of {len(text)} characters is longer than {MAX_DEMANGLED}",
        )
        return None
    return text


def demangle_like_perf_many(names: Iterable[str]) -> list[str | None]:
    """:func:`demangle_like_perf` of each name; those that go to the worker process go
    together."""
    names = list(names)  # the demanglers are loaded by the first name that needs them
    mangled = {name for name in names if name.startswith(_PERF_PREFIXES)}
    bounded = {name for name in mangled if length_bound(name) is not None}
    needing = [name for name in mangled - bounded if name not in _LEFT_MANGLED]
    if needing:
        _FROM_WORKER_PERF.update(_WORKER.demangle(needing, perf=True))
    try:
        return [
            _perf_bounded(name) if name in bounded else demangle_like_perf(name) for name in names
        ]
    finally:
        for name in needing:
            _FROM_WORKER_PERF.pop(name, None)


def demangle_like_perf_unbounded(name: str) -> str | None:
    """:func:`demangle_like_perf` with no bound, for bounded names and the worker: libiberty
    where it is found; else ``__cxa_demangle``'s name cut to what ``DMGL_NO_OPTS`` prints
    (:func:`bare_name`; special names such as ``vtable for X`` and thunks as they are)."""
    libiberty = _perf_demangler()
    if libiberty is None and not _loaded:
        _load()
    try:
        if libiberty is not None:
            return libiberty(name)
        base = name.split("@", 1)[0]  # libiberty reads no further than the encoding
        if base.startswith("_R"):
            return _rust(base) if _rust is not None else None
        if _cxx is None or not base.startswith("_Z"):
            return None
        text = _cxx(base)
        if not text or text == base:
            return None
        if re.match(_RUST_LEGACY, base):
            return re.sub(_RUST_LEGACY_HASH, "", text)
        if base.startswith(("_ZT", "_ZGV", "_ZGT")):
            return text
        text = text.split(" [clone ", 1)[0]
        # A function's name ends with its parameter list (and qualifiers); a variable's not.
        return bare_name(text) if re.search(_FUNCTION_END, text) else text
    except Exception:  # the demanglers raise their own errors on names they do not read
        return None


#: Operator names whose brackets are no brackets (``operator<<``, ``operator->``...).
_OPERATOR = r"operator(?:<=>|<<=|>>=|->\*|<<|>>|<=|>=|->|\(\)|<|>)"


def bare_name(name: str) -> str:
    """A demangled function name without its clone suffix, parameter list, qualifiers and
    return type, as gdb names a function from DWARF: ``int recurse<0>(Box<int>&)`` ->
    ``recurse<0>``, ``f(int) [clone .isra.0]`` -> ``f``."""
    name = name.split(" [clone ", 1)[0]
    # Brackets are counted in a copy where operators' own are blanked out.
    plain = re.sub(_OPERATOR, lambda m: "operator" + "#" * (len(m[0]) - 8), name)
    depth, end = 0, len(name)
    for index in range(len(plain) - 1, -1, -1):  # the parameter list: the last top-level (...)
        if plain[index] == ")":
            depth += 1
        elif plain[index] == "(":
            depth -= 1
            if depth == 0:
                end = index
                break
    name, plain = name[:end], plain[:end]
    depth = 0
    for index in range(len(plain) - 1, -1, -1):  # a return type ends at the last top-level space
        if plain[index] in ">)":
            depth += 1
        elif plain[index] in "<(":
            depth -= 1
        elif plain[index] == " " and depth == 0 and not plain[:index].endswith(("operator", "#")):
            return name[index + 1 :]
    return name


# ---------------------------------------------------------------------------------------------
# The worker process: names not bounded by length_bound are demangled there, under limits.
# Frames: a u32 length then UTF-8 bytes; the answer's first byte says what it is.

_FRAME = struct.Struct("<I")
_DONE, _TOO_LONG, _UNCHANGED = 0, 1, 2
#: The first byte of a name sent: which demangling (:func:`demangle_unbounded`, or
#: :func:`demangle_like_perf_unbounded`).
_GDB_STYLE, _PERF_STYLE = b"g", b"p"
#: Names sent at once: at most this many bytes, so that the writes never wait on the worker
#: (a pipe holds 64 KiB).
_BATCH_BYTES = 32 << 10


class _Refused:
    """A name the worker did not demangle, and why."""

    def __init__(self, why: str) -> None:
        self.why = why


class _Worker:
    """The worker process, started on the first name that needs it and again after one it
    could not finish (killed at its limits); given up after :data:`WORKER_FAILURES`."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self.failures = 0

    def demangle(self, names: list[str], perf: bool = False) -> dict[str, Any]:
        """Each name demangled (``perf``: as perf does; None where perf keeps it), or why
        not.  Names go in batches that fit a pipe's buffer
        (the worker answers each as it goes); a name the worker dies on, or does not answer
        in time, is refused, and the batch goes on in a new worker."""
        out: dict[str, Any] = {}
        queue = list(dict.fromkeys(names))
        while queue:
            if self.failures >= WORKER_FAILURES:
                for name in queue:
                    out[name] = _Refused(f"{WORKER_FAILURES} names already took more than "
                                         "the demangler's limits")
                return out
            batch: list[str] = []
            size = 0
            while queue and (not batch or size + len(queue[0]) * 4 < _BATCH_BYTES):
                batch.append(queue.pop(0))
                size += len(batch[-1]) * 4
            answered = self._run(batch, out, _PERF_STYLE if perf else _GDB_STYLE)
            if answered < len(batch):
                self._stop()
                self.failures += 1
                out[batch[answered]] = _Refused(
                    f"its demangling takes more than {WORKER_SECONDS} s or "
                    f"{WORKER_MEMORY >> 20} MiB"
                )
                queue[:0] = batch[answered + 1 :]
        return out

    def _run(self, batch: list[str], out: dict[str, Any], style: bytes) -> int:
        """Send ``batch`` and read the answers into ``out``; how many came."""
        try:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            frames = b""
            for name in batch:
                data = style + name.encode("utf-8", "surrogateescape")
                frames += _FRAME.pack(len(data)) + data
            process.stdin.write(frames)
            process.stdin.flush()
            for index, name in enumerate(batch):
                answer = _read_frame(process.stdout, WORKER_SECONDS + 2)
                if answer is None:
                    return index
                if answer[0] == _TOO_LONG:
                    out[name] = _Refused(
                        f"its demangled name is longer than {MAX_DEMANGLED} characters"
                    )
                elif answer[0] == _UNCHANGED:
                    out[name] = None
                else:
                    out[name] = answer[1:].decode("utf-8", "surrogateescape")
        except (OSError, ValueError):
            return sum(1 for name in batch if name in out)
        return len(batch)

    def _started(self) -> subprocess.Popen[bytes]:
        import subprocess

        if self._process is None or self._process.poll() is not None:
            package = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
            environment = dict(os.environ)
            environment["PYTHONPATH"] = os.pathsep.join(
                p for p in (package, environment.get("PYTHONPATH")) if p
            )
            self._process = subprocess.Popen(
                [sys.executable, "-c", "from pysframe.unwind.demangle import serve; serve()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment,
            )
        return self._process

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def close(self) -> None:
        """End the worker (at exit): its input closed, it returns."""
        if self._process is not None:
            with contextlib.suppress(OSError, ValueError):
                assert self._process.stdin is not None
                self._process.stdin.close()
            import subprocess

            try:
                self._process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self._stop()
            self._process = None


def _read_frame(stream: object, seconds: float) -> bytes | None:
    """One frame from the worker within ``seconds``; None if it does not come (the worker
    died at its limits, or hangs)."""
    import select

    fd = stream.fileno()  # type: ignore[attr-defined]
    deadline = time.monotonic() + seconds
    data = b""
    need = _FRAME.size
    size: int | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, need - len(data))
        if not chunk:
            return None
        data += chunk
        if len(data) == need:
            if size is not None:
                return data
            (size,) = _FRAME.unpack(data)
            data, need = b"", size
            if not need:
                return b""


def serve() -> None:
    """The worker's loop: limits itself (address space, and a timer per name whose signal
    ends the process), then demangles each name it is sent."""
    import resource
    import signal

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while header := source.read(_FRAME.size):
        (size,) = _FRAME.unpack(header)
        frame = source.read(size)
        name = frame[1:].decode("utf-8", "surrogateescape")
        signal.setitimer(signal.ITIMER_REAL, WORKER_SECONDS)
        try:
            if frame[:1] == _PERF_STYLE:
                text: str | None = demangle_like_perf_unbounded(name)
            else:
                text = demangle_unbounded(name)
        except MemoryError:
            text = name + "\0"  # too long (no demangled name holds a NUL)
        signal.setitimer(signal.ITIMER_REAL, 0)
        if text is None:
            answer = bytes([_UNCHANGED])
        elif len(text) > MAX_DEMANGLED or "\0" in text:
            answer = bytes([_TOO_LONG])
        else:
            answer = bytes([_DONE]) + text.encode("utf-8", "surrogateescape")
        sink.write(_FRAME.pack(len(answer)) + answer)
        sink.flush()


_WORKER = _Worker()
atexit.register(_WORKER.close)

__all__ = [
    "IN_PROCESS_BOUND",
    "MAX_DEMANGLED",
    "bare_name",
    "demangle",
    "demangle_checked",
    "demangle_like_perf",
    "demangle_like_perf_many",
    "demangle_like_perf_unbounded",
    "demangle_many",
    "demangle_unbounded",
    "left_mangled",
    "length_bound",
]
