"""SFrame generated from DWARF CFI, with the rules GNU as 2.47 applies (gas/gen-sframe.c).

Modules, each with one job:

* :mod:`~pysframe.generate.cfi`: the CIEs and FDEs of ``.eh_frame`` / ``.debug_frame``;
* :mod:`~pysframe.generate.ops`: DW_CFA instructions decoded to canonical operations;
* :mod:`~pysframe.generate.rows`: the row state, the ABI parameters and the FRE encoding of rows;
* :mod:`~pysframe.generate.translator`: gas' translation rules, one function at a time;
* :mod:`~pysframe.generate.bulk`: the same rules for the common programs of a whole section, with
  numpy;
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
