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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

_RUST_LEGACY_HASH = re.compile(r"::h[0-9a-f]{16}$")
#: cp-demangle.c's standard_subs whose simple and full expansions differ.
_FULL_EXPANSION = {
    "string": "basic_string<char, std::char_traits<char>, std::allocator<char> >",
    "istream": "basic_istream<char, std::char_traits<char> >",
    "ostream": "basic_ostream<char, std::char_traits<char> >",
    "iostream": "basic_iostream<char, std::char_traits<char> >",
}
_SHORT_SUBSTITUTION = re.compile(r"\bstd::(string|istream|ostream|iostream)\b")
_RUST_LEGACY = re.compile(r"^_ZN.*17h[0-9a-f]{16}E$")

_cxx: Callable[[str], str] | None = None
_rust: Callable[[str], str] | None = None
_loaded = False


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


@lru_cache(maxsize=1 << 16)
def demangle(name: str) -> str:
    """``name`` demangled, or ``name`` itself when it is not a mangled C++ or Rust name or no
    demangler for it is installed."""
    if not name.startswith(("_Z", "_R")):
        return name
    base, at, suffix = name.partition("@")  # a PLT entry's NAME@plt: NAME demangled, as gdb
    if at:
        return demangle(base) + at + suffix
    if not _loaded:
        _load()
    try:
        if name.startswith("_R"):
            return _rust(name) if _rust is not None else name
        if _cxx is None:
            return name
        text = _cxx(name)
        if _RUST_LEGACY.match(name):
            return _RUST_LEGACY_HASH.sub("", text) or name
        if not text:
            return name
        return _SHORT_SUBSTITUTION.sub(_full_expansion, text)
    except Exception:  # the demanglers raise their own errors on names they do not read
        return name


def _full_expansion(match: re.Match[str]) -> str:
    """The verbose form of a short standard substitution; a template argument list it now
    ends closes with ``> >``, as the demangler writes it."""
    text = "std::" + _FULL_EXPANSION[match[1]]
    return text + " " if match.string.startswith(">", match.end()) else text


def bare_name(name: str) -> str:
    """A demangled function name without its clone suffix, parameter list, qualifiers and
    return type, as gdb names a function from DWARF: ``int recurse<0>(Box<int>&)`` ->
    ``recurse<0>``, ``f(int) [clone .isra.0]`` -> ``f``."""
    name = name.split(" [clone ", 1)[0]
    depth, end = 0, len(name)
    for index in range(len(name) - 1, -1, -1):  # the parameter list: the last top-level (...)
        if name[index] == ")":
            depth += 1
        elif name[index] == "(":
            depth -= 1
            if depth == 0:
                end = index
                break
    name = name[:end]
    depth = 0
    for index in range(len(name) - 1, -1, -1):  # a return type ends at the last top-level space
        if name[index] in ">)":
            depth += 1
        elif name[index] in "<(":
            depth -= 1
        elif name[index] == " " and depth == 0 and not name[:index].endswith("operator"):
            return name[index + 1 :]
    return name


def demangler_available() -> bool:
    """Whether C++ names can be demangled here."""
    if not _loaded:
        _load()
    return _cxx is not None


__all__ = ["bare_name", "demangle", "demangler_available"]
