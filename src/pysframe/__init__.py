"""pysframe: read, write, generate, dump, validate and unwind with SFrame sections.

The names below are imported on first use, so that ``import pysframe`` (and the command
line's start-up) does not pay for numpy and the decoder until they are needed.
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
        ("BadMagicError", "ConversionError", "EncodeError", "FormatError", "InvalidFieldError",
         "OutOfBoundsError", "SFrameError", "TruncatedError", "UnsortedError",
         "UnsupportedVersionError"),
        "pysframe.errors",
    ),
    "BatchResult": "pysframe.format.lookup",
    **dict.fromkeys(
        ("CfaRule", "FrameRow", "Function", "Header", "LookupResult", "RegRule", "RuleKind"),
        "pysframe.format.model",
    ),
    "SFrameSection": "pysframe.format.section",
}

__all__ = [
    "Abi",
    "BadMagicError",
    "BaseReg",
    "BatchResult",
    "CfaRule",
    "ConversionError",
    "EncodeError",
    "FdeType",
    "Flags",
    "FormatError",
    "FrameRow",
    "FreType",
    "Function",
    "Header",
    "InvalidFieldError",
    "LookupResult",
    "OutOfBoundsError",
    "PauthKey",
    "PcType",
    "RegRule",
    "RuleKind",
    "SFrameError",
    "SFrameSection",
    "TruncatedError",
    "UnsortedError",
    "UnsupportedVersionError",
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
        ConversionError,
        EncodeError,
        FormatError,
        InvalidFieldError,
        OutOfBoundsError,
        SFrameError,
        TruncatedError,
        UnsortedError,
        UnsupportedVersionError,
    )
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
