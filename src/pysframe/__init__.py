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
public method takes or returns is exported here (tests/project/test_public_api.py checks it).

The names are imported on first use, so that ``import pysframe`` (and the command line's
start-up) does not pay for numpy and the decoder until they are needed.  They are written
once, as the imports under ``TYPE_CHECKING`` at the end of this file (what type checkers
read); at run time the same statements are read from this file's source, the first time a
name or ``__all__`` is asked for, to learn which module defines each name (as
``lazy_loader.attach_stub`` reads a stub): the command line, which imports its modules
itself, never parses them.

>>> import pysframe
>>> pysframe.Version(3), pysframe.Abi(1).name
(<Version.V3: 3>, 'AARCH64_ENDIAN_BIG')
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"


@cache
def _exports() -> dict[str, str]:
    """Public name -> module that defines it, from the ``if TYPE_CHECKING:`` imports below."""
    import ast

    with open(__file__, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    guarded = next(
        node for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )  # fmt: skip
    return {
        alias.name: f"{__name__}.{statement.module}"
        for statement in guarded.body
        if isinstance(statement, ast.ImportFrom) and statement.module is not None
        for alias in statement.names
    }


def __getattr__(name: str) -> Any:
    if name == "__all__":  # ``from pysframe import *`` asks for it
        value: Any = sorted([*_exports(), "__version__"])
    else:
        module = _exports().get(name)
        if module is None:
            raise AttributeError(f"module 'pysframe' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    names: list[str] = __getattr__("__all__")
    return names


if TYPE_CHECKING:  # the public names: ``X as X`` re-exports each
    # isort: off
    from .elf.dwarf_lines import (
        SourceFrame as SourceFrame,
    )
    from .elf.reader import (
        ElfSection as ElfSection,
        ElfSegment as ElfSegment,
    )
    from .elf.symbols import (
        FunctionColumns as FunctionColumns,
        FunctionSymbols as FunctionSymbols,
        SymbolRecord as SymbolRecord,
        SymbolTable as SymbolTable,
    )
    from .errors import (
        BadMagicError as BadMagicError,
        CfiError as CfiError,
        ConversionError as ConversionError,
        ElfError as ElfError,
        EncodeError as EncodeError,
        FormatError as FormatError,
        InputError as InputError,
        InvalidFieldError as InvalidFieldError,
        NoSFrameError as NoSFrameError,
        OutOfBoundsError as OutOfBoundsError,
        OutputError as OutputError,
        SFrameError as SFrameError,
        TruncatedError as TruncatedError,
        UnsortedError as UnsortedError,
        UnsupportedVersionError as UnsupportedVersionError,
        UnwindError as UnwindError,
    )
    from .format.builder import (
        FunctionBuilder as FunctionBuilder,
        RowSpec as RowSpec,
        SFrameBuilder as SFrameBuilder,
    )
    from .format.constants import (
        Abi as Abi,
        BaseReg as BaseReg,
        FdeType as FdeType,
        Flags as Flags,
        FreType as FreType,
        PauthKey as PauthKey,
        PcType as PcType,
        Version as Version,
        WordSize as WordSize,
    )
    from .format.encode import (
        SectionSpec as SectionSpec,
    )
    from .format.findings import (
        Finding as Finding,
        Severity as Severity,
    )
    from .format.lookup import (
        BatchResult as BatchResult,
        SectionLookup as SectionLookup,
    )
    from .format.model import (
        CfaRule as CfaRule,
        FrameRow as FrameRow,
        Function as Function,
        Header as Header,
        LookupResult as LookupResult,
        RegRule as RegRule,
        RuleKind as RuleKind,
    )
    from .format.section import (
        SFrameSection as SFrameSection,
    )
    from .format.view import (
        Buffer as Buffer,
        FunctionTable as FunctionTable,
    )
    from .generate.driver import (
        GenerateResult as GenerateResult,
        generate_from_elf as generate_from_elf,
    )
    from .generate.rows import (
        GeneratedFunction as GeneratedFunction,
        SkippedFunction as SkippedFunction,
    )
    from .input import (
        ByteStream as ByteStream,
    )
    from .perf.data import (
        PerfData as PerfData,
    )
    from .sources.resolve import (
        Origin as Origin,
        ResolvedSFrame as ResolvedSFrame,
        load_sframe as load_sframe,
        resolve_sframe as resolve_sframe,
    )
    from .sources.trust import (
        Policy as Policy,
        Verdict as Verdict,
    )
    from .unwind.core import (
        Backtrace as Backtrace,
        Frame as Frame,
        FrameSource as FrameSource,
        ModuleInfo as ModuleInfo,
        Registers as Registers,
        RowLookup as RowLookup,
        Step as Step,
        StopKind as StopKind,
        Unwinder as Unwinder,
        WalkState as WalkState,
    )
    from .unwind.modules import (
        AddressSpace as AddressSpace,
        ElfFacts as ElfFacts,
        ElfFiles as ElfFiles,
        Module as Module,
    )
    from .unwind.stack import (
        StackReport as StackReport,
        ThreadTrace as ThreadTrace,
        stack_of_core as stack_of_core,
        stack_of_process as stack_of_process,
        stack_of_remote as stack_of_remote,
    )
    from .unwind.symbolize import (
        ModuleSymbols as ModuleSymbols,
        SymbolOptions as SymbolOptions,
    )
    # isort: on
