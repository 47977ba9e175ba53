"""Names read from inputs (a command's name, a function's, a file's), as text: one rule.

perf.data and ELF files hold names as bytes in no declared encoding: a thread may name itself
anything (``prctl(PR_SET_NAME)``), a symbol table may hold any bytes but NUL.  perf prints
such bytes as they are, which makes its text something no UTF-8 reader (a JSON parser,
protobuf, a browser) takes whole.  pysframe decodes every name by one rule,
:func:`decode_name`: UTF-8, with each byte that is not part of valid UTF-8 written ``\\xNN``
(two lowercase hex digits; Python's ``backslashreplace``).  Unlike U+FFFD, the escapes keep
names apart that differ only in such bytes, and they show which bytes were there.  Names
already decoded with the file system's rule (``os.fsdecode``: paths, which must still open
their files) are shown by the same rule with :func:`shown_name`.

Text outputs made of lines (``perf script``'s, perf report's table) must also keep each name
on its line: :func:`escape_controls` writes the control characters (C0, DEL, C1) and the line
and paragraph separators (U+2028, U+2029) as escapes, ``\\xNN`` below U+0080 and ``\\uNNNN``
above.  Backslashes are left as they are, so that ordinary names stay byte for byte what perf
prints.
"""

from __future__ import annotations

import re

#: What :func:`escape_controls` escapes: C0 controls, DEL, C1 controls, U+2028 and U+2029
#: (every character but those of a plain name that str.splitlines, JavaScript or a terminal
#: take as a line break or a command).  Text, compiled by ``re`` when a name is not printable
#: ASCII (its cache keeps it).
_CONTROLS = "[\x00-\x1f\x7f-\x9f\u2028\u2029]"


def decode_name(raw: bytes) -> str:
    """``raw`` as text: UTF-8, each byte that is not part of valid UTF-8 as ``\\xNN``."""
    return raw.decode("utf-8", "backslashreplace")


def shown_name(name: str) -> str:
    """A name decoded with ``os.fsdecode`` (bytes that are not UTF-8 kept as lone surrogates,
    U+DC80 to U+DCFF) shown by :func:`decode_name`'s rule; any other lone surrogate as
    ``\\uNNNN``."""
    if name.isascii():
        return name
    try:
        return decode_name(name.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with its control characters and line separators escaped (``\\x0a`` for a
    newline, ``\\u2028``), the rest as it is."""
    if text.isascii() and text.isprintable():  # none of them: most names
        return text
    return re.sub(_CONTROLS, _escape, text)


__all__ = ["decode_name", "escape_controls", "shown_name"]
