"""The exception hierarchy: every failure pysframe reports is an SFrameError.

Errors that concern a place in the section carry ``offset``, the byte offset from the
start of the section, and say it in their message.
"""

from __future__ import annotations


class SFrameError(Exception):
    """Root of all pysframe errors."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        self.message = message
        super().__init__(message if offset is None else f"{message} (at byte offset {offset:#x})")


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


class CfiError(SFrameError):
    """DWARF call-frame information that cannot be parsed."""


class UnwindError(SFrameError):
    """A stack walk could not start or read what it needed."""
