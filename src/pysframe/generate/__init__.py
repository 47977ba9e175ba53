"""SFrame generated from DWARF CFI, with the rules GNU as 2.47 applies (gas/gen-sframe.c), and
the CFI read with DWARF's own semantics to check a section against (``pysframe verify``).

Modules, each with one job:

* :mod:`~pysframe.generate.locate`: where a file's ``.eh_frame`` is (its section header, or
  ``PT_GNU_EH_FRAME`` when the section headers are stripped);
* :mod:`~pysframe.generate.cfi`: the CIEs and FDEs of ``.eh_frame`` / ``.debug_frame``;
* :mod:`~pysframe.generate.ops`: the DW_CFA instructions and their operands, declared once, and
  their decoding to canonical operations;
* :mod:`~pysframe.generate.expression`: DWARF expressions of frame rules, reduced to register
  plus offset (per PC where they read it);
* :mod:`~pysframe.generate.rows`: the row state, the ABI parameters, and the rules of a row that
  the format core encodes to FRE bytes;
* :mod:`~pysframe.generate.translator`: gas' translation rules, one function at a time;
* :mod:`~pysframe.generate.instructions_bulk`: the instructions of many programs at once, with
  numpy (per-opcode tables from the one operand table, the walk, advance operands);
* :mod:`~pysframe.generate.bulk`: gas' rules for the common programs of a whole section, with
  numpy;
* :mod:`~pysframe.generate.bulk_section`: a section's FDEs translated through it, a chunk of
  functions at a time;
* :mod:`~pysframe.generate.fres_bulk`: the FREs of many functions at once, with numpy;
* :mod:`~pysframe.generate.plt`: the PLT FDEs GNU ld writes;
* :mod:`~pysframe.generate.driver`: sections from ``.eh_frame`` bytes or ELF files;
* :mod:`~pysframe.generate.cfa_rules`: DWARF's rules of one CFA program (DWARF 5 6.4.2), and
  the ways a producer reads them otherwise (GNU as' quirks);
* :mod:`~pysframe.generate.interpret_bulk`: the same rows for the common programs of a whole
  section, with numpy;
* :mod:`~pysframe.generate.interpret`: the CFI table of a whole section (every FDE's rows).

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
    **dict.fromkeys(("translate", "translate_ops"), "pysframe.generate.translator"),
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
    "translate_ops",
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
    from .translator import translate, translate_ops
