"""SFrame generated from DWARF CFI, with the rules GNU as 2.47 applies (gas/gen-sframe.c), and
the CFI read with DWARF's own semantics to check a section against (``pysframe verify``).

One interpreter reads CFA programs (:mod:`~pysframe.generate.cfa_rules`); the generator reads
them through it with GNU as' rules (:mod:`~pysframe.generate.translator`), ``verify`` with
DWARF's (:mod:`~pysframe.generate.interpret`).  Modules, each with one job:

* :mod:`~pysframe.generate.locate`: where a file's ``.eh_frame`` is (its section header, or
  ``PT_GNU_EH_FRAME`` when the section headers are stripped);
* :mod:`~pysframe.generate.cfi`: the CIEs and FDEs of ``.eh_frame`` / ``.debug_frame``;
* :mod:`~pysframe.generate.ops`: the DW_CFA instructions and their operands, declared once, and
  the one decoder of CFA programs to canonical operations (many programs at once, with numpy);
* :mod:`~pysframe.generate.expression`: DWARF expressions of frame rules, reduced to register
  plus offset (per PC where they read it);
* :mod:`~pysframe.generate.cfa_rules`: the one DWARF CFA interpreter: the CFA, FP and RA rules
  of a program at each PC (DWARF 5 6.4.2), and the ways a producer reads them otherwise;
* :mod:`~pysframe.generate.interpret`: a section's programs through it, each distinct shape of
  program once, its rows placed at every FDE's PCs; the CFI table ``verify`` compares;
* :mod:`~pysframe.generate.translator`: GNU as' rules: which CFI SFrame can hold, DWARF rows
  as SFrame rows, a section's functions;
* :mod:`~pysframe.generate.rows`: the row state, the ABI parameters, the rules of a row that
  the format core encodes, and the FREs of functions written from them;
* :mod:`~pysframe.generate.plt`: the PLT FDEs GNU ld writes;
* :mod:`~pysframe.generate.driver`: sections from ``.eh_frame`` bytes or ELF files.

The public names below are imported on first use, so that importing the package does not load
numpy or the section reader.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name -> module that defines it.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ("GenerateResult", "encode_functions", "generate_from_eh_frame", "generate_from_elf"),
        "pysframe.generate.driver",
    ),
    **dict.fromkeys(
        ("ABI_PARAMS", "AbiParams", "GeneratedFunction", "RowState", "SkippedFunction",
         "Translation"),
        "pysframe.generate.rows",
    ),
    **dict.fromkeys(("translate",), "pysframe.generate.translator"),
    **dict.fromkeys(("plt_functions", "s390x_plt_functions"), "pysframe.generate.plt"),
}  # fmt: skip

__all__ = [
    "ABI_PARAMS",
    "AbiParams",
    "GenerateResult",
    "GeneratedFunction",
    "RowState",
    "SkippedFunction",
    "Translation",
    "encode_functions",
    "generate_from_eh_frame",
    "generate_from_elf",
    "plt_functions",
    "s390x_plt_functions",
    "translate",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pysframe.generate' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from .driver import GenerateResult, encode_functions, generate_from_eh_frame, generate_from_elf
    from .plt import plt_functions, s390x_plt_functions
    from .rows import (
        ABI_PARAMS,
        AbiParams,
        GeneratedFunction,
        RowState,
        SkippedFunction,
        Translation,
    )
    from .translator import translate
