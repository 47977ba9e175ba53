"""pysframe: read, write, generate, dump, validate and unwind with SFrame sections.

The public API is the format layer and the entry points above it.  The format layer:
:class:`SFrameSection` (a decoded section), the values it gives (:class:`Header`,
:class:`Function` with its :class:`FrameRow` rows, their :class:`CfaRule` and :class:`RegRule`
rules, :class:`LookupResult`, :class:`BatchResult`,
:class:`FunctionTable`, :class:`SectionSpec`, :class:`Finding`), :class:`SFrameBuilder` to
make sections, the format's enums and every error.  Above it: :func:`load_sframe` and
:func:`resolve_sframe` (the SFrame of an ELF file or a bare section file, with its
:class:`Origin`: own section, found through the program header, bare, generated),
:func:`generate_from_elf` (SFrame from a file's DWARF CFI), and unwinding:
:func:`stack_of_process`, :func:`stack_of_core`, :func:`stack_of_remote` (whole-process
backtraces, a :class:`StackReport`; :class:`Policy` chooses between a module's own SFrame and
SFrame generated from its CFI) and :class:`Unwinder` (the sans-IO unwinder: registers, a
memory reader and modules in, a :class:`Backtrace` of :class:`Frame` out).  Every type a
public method takes or returns is exported here (tests/test_public_api.py checks it).

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
    # The entry points above the format: a file's SFrame, generating it, unwinding with it.
    **dict.fromkeys(
        ("Origin", "ResolvedSFrame", "load_sframe", "resolve_sframe"), "pysframe.sources.resolve"
    ),
    "Policy": "pysframe.sources.trust",
    **dict.fromkeys(("GenerateResult", "generate_from_elf"), "pysframe.generate.driver"),
    **dict.fromkeys(("GeneratedFunction", "SkippedFunction"), "pysframe.generate.rows"),
    "ElfSection": "pysframe.elf.reader",
    **dict.fromkeys(
        ("FunctionColumns", "FunctionSymbols", "SymbolRecord", "SymbolTable"),
        "pysframe.elf.symbols",
    ),
    "SourceFrame": "pysframe.elf.dwarf_lines",
    **dict.fromkeys(("Module", "ModuleTable"), "pysframe.unwind.modules"),
    "ModuleSymbols": "pysframe.unwind.symbolize",
    **dict.fromkeys(
        ("StackReport", "ThreadTrace", "stack_of_core", "stack_of_process", "stack_of_remote"),
        "pysframe.unwind.stack",
    ),
    **dict.fromkeys(
        ("Backtrace", "Frame", "FrameSource", "ModuleInfo", "Registers", "RowLookup", "StopKind",
         "Unwinder"),
        "pysframe.unwind.core",
    ),
}

__all__ = [
    "Abi",
    "Backtrace",
    "BadMagicError",
    "BaseReg",
    "BatchResult",
    "Buffer",
    "CfaRule",
    "CfiError",
    "ConversionError",
    "ElfError",
    "ElfSection",
    "EncodeError",
    "FdeType",
    "Finding",
    "Flags",
    "FormatError",
    "Frame",
    "FrameRow",
    "FrameSource",
    "FreType",
    "Function",
    "FunctionBuilder",
    "FunctionColumns",
    "FunctionSymbols",
    "FunctionTable",
    "GenerateResult",
    "GeneratedFunction",
    "Header",
    "InputError",
    "InvalidFieldError",
    "LookupResult",
    "Module",
    "ModuleInfo",
    "ModuleSymbols",
    "ModuleTable",
    "NoSFrameError",
    "Origin",
    "OutOfBoundsError",
    "OutputError",
    "PauthKey",
    "PcType",
    "Policy",
    "RegRule",
    "Registers",
    "ResolvedSFrame",
    "RowLookup",
    "RowSpec",
    "RuleKind",
    "SFrameBuilder",
    "SFrameError",
    "SFrameSection",
    "SectionSpec",
    "Severity",
    "SkippedFunction",
    "SourceFrame",
    "StackReport",
    "StopKind",
    "SymbolRecord",
    "SymbolTable",
    "ThreadTrace",
    "TruncatedError",
    "UnsortedError",
    "UnsupportedVersionError",
    "UnwindError",
    "Unwinder",
    "Version",
    "WordSize",
    "__version__",
    "generate_from_elf",
    "load_sframe",
    "resolve_sframe",
    "stack_of_core",
    "stack_of_process",
    "stack_of_remote",
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
    from .elf.dwarf_lines import SourceFrame
    from .elf.reader import ElfSection
    from .elf.symbols import FunctionColumns, FunctionSymbols, SymbolRecord, SymbolTable
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
    from .generate.driver import GenerateResult, generate_from_elf
    from .generate.rows import GeneratedFunction, SkippedFunction
    from .sources.resolve import Origin, ResolvedSFrame, load_sframe, resolve_sframe
    from .sources.trust import Policy
    from .unwind.core import (
        Backtrace,
        Frame,
        FrameSource,
        ModuleInfo,
        Registers,
        RowLookup,
        StopKind,
        Unwinder,
    )
    from .unwind.modules import Module, ModuleTable
    from .unwind.stack import (
        StackReport,
        ThreadTrace,
        stack_of_core,
        stack_of_process,
        stack_of_remote,
    )
    from .unwind.symbolize import ModuleSymbols
