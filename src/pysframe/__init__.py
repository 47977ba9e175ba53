"""pysframe: read, write, generate, dump, validate and unwind with SFrame sections.

The public API is the format layer: :class:`SFrameSection` (a decoded section), the values it
gives (:class:`Header`, :class:`Function` with its :class:`FrameRow` rows, their
:class:`CfaRule` and :class:`RegRule` rules, :class:`LookupResult`, :class:`BatchResult`,
:class:`FunctionTable`, :class:`SectionSpec`, :class:`Finding`), :class:`SFrameBuilder` to
make sections, the format's enums and every error.  Every type a public method takes or
returns is exported here (tests/test_public_api.py checks it).

The names are imported on first use, so that ``import pysframe`` (and the command line's
start-up) does not pay for numpy and the decoder until they are needed.

>>> import pysframe
>>> pysframe.Version(3), pysframe.Abi(1).name
(<Version.V3: 3>, 'AARCH64_ENDIAN_BIG')
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> module that defines it.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ("Abi", "BaseReg", "FdeType", "Flags", "FreType", "PauthKey", "PcType", "Version",
         "WordSize"),
        "pysframe.format.constants",
    ),
    **dict.fromkeys(
        ("BadMagicError", "CfiError", "ConversionError", "ElfError", "EncodeError",
         "FormatError", "InputError", "InvalidFieldError", "NoSFrameError", "OutOfBoundsError",
         "OutputError", "SFrameError", "TruncatedError", "UnsortedError",
         "UnsupportedVersionError", "UnwindError"),
        "pysframe.errors",
    ),
    "BatchResult": "pysframe.format.lookup",
    **dict.fromkeys(("FunctionBuilder", "RowSpec", "SFrameBuilder"), "pysframe.format.builder"),
    "SectionSpec": "pysframe.format.encode",
    **dict.fromkeys(("Finding", "Severity"), "pysframe.format.findings"),
    **dict.fromkeys(
        ("CfaRule", "FrameRow", "Function", "Header", "LookupResult", "RegRule", "RuleKind"),
        "pysframe.format.model",
    ),
    "SFrameSection": "pysframe.format.section",
    **dict.fromkeys(("Buffer", "FunctionTable"), "pysframe.format.view"),
}

__all__ = [
    "Abi",
    "BadMagicError",
    "BaseReg",
    "BatchResult",
    "Buffer",
    "CfaRule",
    "CfiError",
    "ConversionError",
    "ElfError",
    "EncodeError",
    "FdeType",
    "Finding",
    "Flags",
    "FormatError",
    "FrameRow",
    "FreType",
    "Function",
    "FunctionBuilder",
    "FunctionTable",
    "Header",
    "InputError",
    "InvalidFieldError",
    "LookupResult",
    "NoSFrameError",
    "OutOfBoundsError",
    "OutputError",
    "PauthKey",
    "PcType",
    "RegRule",
    "RowSpec",
    "RuleKind",
    "SFrameBuilder",
    "SFrameError",
    "SFrameSection",
    "SectionSpec",
    "Severity",
    "TruncatedError",
    "UnsortedError",
    "UnsupportedVersionError",
    "UnwindError",
    "Version",
    "WordSize",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pysframe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from .errors import (
        BadMagicError,
        CfiError,
        ConversionError,
        ElfError,
        EncodeError,
        FormatError,
        InputError,
        InvalidFieldError,
        NoSFrameError,
        OutOfBoundsError,
        OutputError,
        SFrameError,
        TruncatedError,
        UnsortedError,
        UnsupportedVersionError,
        UnwindError,
    )
    from .format.builder import FunctionBuilder, RowSpec, SFrameBuilder
    from .format.constants import (
        Abi,
        BaseReg,
        FdeType,
        Flags,
        FreType,
        PauthKey,
        PcType,
        Version,
        WordSize,
    )
    from .format.encode import SectionSpec
    from .format.findings import Finding, Severity
    from .format.lookup import BatchResult
    from .format.model import (
        CfaRule,
        FrameRow,
        Function,
        Header,
        LookupResult,
        RegRule,
        RuleKind,
    )
    from .format.section import SFrameSection
    from .format.view import Buffer, FunctionTable
