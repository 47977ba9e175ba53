"""FDEs for procedure linkage tables, which have no CFI of their own in ``.eh_frame``'s sense,
as GNU ld 2.47 writes them.

x86-64 (bfd/elf64-x86-64.c, the FREs ``elf_x86_64_sframe_plt0_fre1`` ... and the tables
``elf_x86_64_sframe_*plt``, written by bfd/elfxx-x86.c ``_bfd_x86_elf_write_sframe_plt``):
PLT0 (``sp+16``, then ``sp+24`` after its push), a PCMASK FDE with 16-byte blocks for the
lazy entries (``sp+8``, then ``sp+16`` after the push), ``.plt.sec`` (PCMASK, ``sp+8``) and
``.plt.got`` (PCMASK, one row).  ld writes ``sp+16`` for ``.plt.got`` although its entries are
reached by a call (CFA = sp+8, as ld's own ``.eh_frame`` says); pysframe writes ``sp+8``
unless ``ld_compatible=True``.

s390x (bfd/elf64-s390.c): PLT0 and a PCMASK FDE over the entries,
CFA = sp+160 throughout (the PLT does not touch the stack).
"""

from __future__ import annotations

from ..format.builder import fre_type_for_size
from ..format.constants import S390X_CFA_OFFSET_ADJUSTMENT, Abi, DwarfReg
from .rows import (
    FunctionEncoder,
    GeneratedFunction,
    SkippedFunction,
    Translation,
    sp_based_row,
)

_AMD64_SP = DwarfReg.SP[Abi.AMD64_ENDIAN_LITTLE]
_S390X_SP = DwarfReg.SP[Abi.S390X_ENDIAN_BIG]

#: Bytes of x86-64 PLT0 and of each lazy PLT entry.
_PLT_ENTRY = 16
#: PLT0 begins ``push GOT+8`` (ff 35).
_PUSH_GOT = b"\xff\x35"
_ENDBR64 = b"\xf3\x0f\x1e\xfa"
_PUSH_IMM32 = b"\x68"


def _sp_rows(*rows: tuple[int, int]) -> Translation:
    """(start offset, CFA offset from the SP) rows."""
    return Translation([(at, sp_based_row(_AMD64_SP, cfa)) for at, cfa in rows], False, False)


def _lazy_push_end(entry: bytes) -> int:
    """Where the ``push $index`` of a lazy PLT entry ends (0: an unknown layout): after
    ``endbr64`` (IBT PLT), ``jmp *GOT(%rip)`` or ``bnd jmp *GOT(%rip)``."""
    if entry.startswith(_ENDBR64) and entry[4:5] == _PUSH_IMM32:
        return 9
    if entry.startswith(b"\xff\x25") and entry[6:7] == _PUSH_IMM32:
        return 11
    if entry.startswith(b"\xf2\xff\x25") and entry[7:8] == _PUSH_IMM32:
        return 12
    return 0


def plt_functions(
    plt: tuple[int, bytes] | None,
    plt_sec: tuple[int, bytes] | None,
    plt_got: tuple[int, bytes, int] | None,
    encoder: FunctionEncoder,
    *,
    ld_compatible: bool = False,
) -> tuple[list[GeneratedFunction], list[SkippedFunction]]:
    """FDEs for x86-64 ``.plt`` (address, bytes), ``.plt.sec`` and ``.plt.got`` (address,
    bytes, entry size), laid out as GNU ld 2.47 writes them."""
    out: list[GeneratedFunction] = []
    skipped: list[SkippedFunction] = []
    if plt is not None and len(plt[1]) >= _PLT_ENTRY:
        address, data = plt
        if data[:2] != _PUSH_GOT:
            skipped.append(
                SkippedFunction(
                    address,
                    len(data),
                    "PLT0 is not the lazy-binding PLT0 (push GOT+8; jmp *GOT+16)",
                )
            )
        else:
            plt0 = _sp_rows((0, 16), (6, 24))
            # ld picks PLT0's FRE type from the size of the whole .plt.
            fre_type = fre_type_for_size(len(data))
            out.append(encoder.function(address, _PLT_ENTRY, plt0, fre_type=fre_type))
            if len(data) > _PLT_ENTRY:
                push_end = _lazy_push_end(data[_PLT_ENTRY : 2 * _PLT_ENTRY])
                rest = (address + _PLT_ENTRY, len(data) - _PLT_ENTRY)
                if push_end:
                    rows = _sp_rows((0, 8), (push_end, 16))
                    out.append(encoder.function(*rest, rows, pc_mask=True, rep_size=_PLT_ENTRY))
                else:
                    skipped.append(SkippedFunction(*rest, "PLT entries of an unknown layout"))
    if plt_sec is not None and plt_sec[1]:
        address, data = plt_sec
        rows = _sp_rows((0, 8))
        out.append(encoder.function(address, len(data), rows, pc_mask=True, rep_size=_PLT_ENTRY))
    if plt_got is not None and plt_got[1]:
        address, data, entsize = plt_got
        rows = _sp_rows((0, 16 if ld_compatible else 8))
        out.append(encoder.function(address, len(data), rows, pc_mask=True, rep_size=entsize or 8))
    return out, skipped


def s390x_plt_functions(
    address: int, size: int, entry_size: int, encoder: FunctionEncoder
) -> list[GeneratedFunction]:
    """s390x ``.plt`` as GNU ld 2.47 describes it: PLT0 and a PCMASK FDE over the entries."""
    # On entry the CFA is SP + 160, the register save area the caller provides.
    row = sp_based_row(_S390X_SP, S390X_CFA_OFFSET_ADJUSTMENT)
    rows = Translation([(0, row)], False, False)
    if size <= entry_size:
        return [encoder.function(address, size, rows)]
    return [
        encoder.function(address, entry_size, rows),
        encoder.function(
            address + entry_size, size - entry_size, rows, pc_mask=True, rep_size=entry_size
        ),
    ]


__all__ = ["plt_functions", "s390x_plt_functions"]
