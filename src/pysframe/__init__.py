"""pysframe: read, write, generate, dump, validate and unwind with SFrame sections."""

from .constants import (
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
from .lookup import BatchResult
from .model import CfaRule, FrameRow, Function, Header, LookupResult, RegRule, RuleKind
from .section import SFrameSection

__version__ = "0.1.0"

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
