"""The exception hierarchy: every failure pysframe reports is an SFrameError.

An error carries its context as fields, not pasted into its text:

* ``message``: what went wrong, without the file or section it concerns;
* ``path``: the file it concerns (None when it concerns none, or it is not known yet);
* ``section``: the section it concerns (``.sframe``, ``.eh_frame``...);
* ``offset``: the byte offset of the problem from the start of that section (or of the file,
  for errors about the file's own structure).

``str(error)`` puts them together the way every message of pysframe reads:
``PATH: SECTION: MESSAGE (at byte offset 0xOFF)``.  A layer that knows more than the one that
raised (the file being read, the section it came from) adds it with :meth:`SFrameError.at`,
which keeps the error's class and offset:

>>> error = TruncatedError("an FDE runs past the end", 0x40)
>>> str(error)
'an FDE runs past the end (at byte offset 0x40)'
>>> str(error.at(path="a.out", section=".sframe"))
'a.out: .sframe: an FDE runs past the end (at byte offset 0x40)'
>>> error.at(path="other")  # the first to name the file wins
TruncatedError('a.out: .sframe: an FDE runs past the end (at byte offset 0x40)')

The command line prints ``pysframe: `` followed by ``str(error)``, in one place
(:mod:`pysframe.cli.report`).
"""

from __future__ import annotations

from typing import Self


class SFrameError(Exception):
    """Root of all pysframe errors."""

    def __init__(
        self,
        message: str,
        offset: int | None = None,
        *,
        path: str | None = None,
        section: str | None = None,
    ) -> None:
        super().__init__(message, offset)
        self.message = message
        self.offset = offset
        self.path = path
        self.section = section

    def at(self, *, path: str | None = None, section: str | None = None) -> Self:
        """This error, with ``path`` and ``section`` filled in where it names none yet (the
        innermost layer that knew them wins); returns ``self``, to be raised again."""
        if self.path is None and path:
            self.path = path
        if self.section is None and section:
            self.section = section
        return self

    @property
    def detail(self) -> str:
        """The message and the offset, without the path and the section."""
        if self.offset is None:
            return self.message
        return f"{self.message} (at byte offset {self.offset:#x})"

    def __str__(self) -> str:
        return ": ".join(part for part in (self.path, self.section, self.detail) if part)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled whole (process pools, Dask): the fields, and a subclass's own, travel with
        # the class.
        fields = (type(self), self.message, self.offset, self.path, self.section)
        return (_rebuild, fields, dict(self.__dict__))


def _rebuild(
    kind: type[SFrameError], message: str, offset: int | None, path: str | None,
    section: str | None,
) -> SFrameError:
    error = kind.__new__(kind)
    SFrameError.__init__(error, message, offset, path=path, section=section)
    return error


class FormatError(SFrameError):
    """The bytes are not a well-formed SFrame section."""


class BadMagicError(FormatError):
    """The preamble does not start with the SFrame magic in either byte order."""


class UnsupportedVersionError(FormatError):
    """sfp_version names a version this library does not read."""


class TruncatedError(FormatError):
    """A structure runs past the end of the section."""


class OutOfBoundsError(FormatError):
    """An offset or count points outside the section or its sub-section."""


class InvalidFieldError(FormatError):
    """A field holds a value the format does not define (ABI, FRE type, word size...)."""


class UnsortedError(FormatError):
    """The header says FDEs are sorted but they are not."""


class EncodeError(SFrameError):
    """The model cannot be written in the requested version or layout."""


class ConversionError(EncodeError):
    """A section cannot be converted to the requested version; names the function."""


class ElfError(SFrameError):
    """The file is not an ELF file pysframe can read, or has no SFrame section."""


class NoSFrameError(ElfError):
    """The file is a readable ELF file, but has no SFrame section (of the name asked for), or
    the section it names holds no SFrame data.  ``generable``: the file is of a machine SFrame
    has an ABI for, so that a section generated from its CFI could stand in."""

    def __init__(
        self,
        message: str,
        offset: int | None = None,
        *,
        path: str | None = None,
        section: str | None = None,
        generable: bool = False,
    ) -> None:
        super().__init__(message, offset, path=path, section=section)
        self.generable = generable


class NotSFrameDataError(NoSFrameError):
    """The section asked for is there, but is not SFrame data (objdump 2.47 reads a section of
    type SHT_GNU_SFRAME, or SHT_PROGBITS named ``.sframe``)."""


class CfiError(SFrameError):
    """DWARF call-frame information that cannot be parsed."""


class UnwindError(SFrameError):
    """A stack walk could not start or read what it needed."""


class InputError(SFrameError):
    """An input file that cannot be read: missing, unreadable, not a regular file, or larger
    than what may be read of it."""


class OutputError(SFrameError):
    """An output file that cannot or must not be written."""


__all__ = [
    "BadMagicError",
    "CfiError",
    "ConversionError",
    "ElfError",
    "EncodeError",
    "FormatError",
    "InputError",
    "InvalidFieldError",
    "NoSFrameError",
    "NotSFrameDataError",
    "OutOfBoundsError",
    "OutputError",
    "SFrameError",
    "TruncatedError",
    "UnsortedError",
    "UnsupportedVersionError",
    "UnwindError",
]
