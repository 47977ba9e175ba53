"""perf's register numbers (PERF_SAMPLE_REGS_USER) per architecture, and their DWARF numbers.

A sample's user registers are those whose bit is set in ``attr.sample_regs_user``, in
ascending bit order; the bit numbers are perf's, per architecture:

* x86-64 (arch/x86/include/uapi/asm/perf_regs.h): AX BX CX DX SI DI BP SP IP FLAGS CS SS DS
  ES FS GS (0-15), R8-R15 (16-23); XMM registers from 32 are not user registers.
* AArch64 (arch/arm64/include/uapi/asm/perf_regs.h): X0-X28 (0-28), X29 (the frame pointer),
  LR (30), SP (31), PC (32), VG (46, SVE vector granule).
* s390x (arch/s390/include/uapi/asm/perf_regs.h): R0-R15 (0-15), FP0-FP15 (16-31), MASK (32,
  the PSW mask), PC (33, the PSW address).

DWARF numbers as the unwinder uses them (unwind/core.py, ``DwarfReg``): x86-64 psABI rax 0,
rdx 1, rcx 2, rbx 3, rsi 4, rdi 5, rbp 6, rsp 7, r8-r15 8-15, rFLAGS 49, es 50, cs 51, ss 52,
ds 53, fs 54, gs 55; AArch64 x0-x30 0-30, sp 31, VG 46; s390x r0-r15 0-15, f0-f15 the
s390x ABI's 16-31 order, PSW mask 64.  The program counter has none here (-1): it is the
:class:`Registers` ``pc``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..dataclass import dataclass
from ..format.constants import Abi
from ..unwind import S390X_FPR_DWARF, Registers
from .errors import PerfDataError


@dataclass(frozen=True, eq=False, repr=False)
class _Arch:
    """perf register number -> (perf's name, DWARF number or -1), and the perf numbers of the
    PC, SP, FP and return-address register (None on x86-64: the return address is on the
    stack)."""

    registers: dict[int, tuple[str, int]]
    pc: int
    sp: int
    fp: int
    lr: int | None


_X86_64 = _Arch(
    {
        0: ("AX", 0), 1: ("BX", 3), 2: ("CX", 2), 3: ("DX", 1), 4: ("SI", 4), 5: ("DI", 5),
        6: ("BP", 6), 7: ("SP", 7), 8: ("IP", -1), 9: ("FLAGS", 49), 10: ("CS", 51),
        11: ("SS", 52), 12: ("DS", 53), 13: ("ES", 50), 14: ("FS", 54), 15: ("GS", 55),
        **{16 + n: (f"R{8 + n}", 8 + n) for n in range(8)},
    },
    pc=8, sp=7, fp=6, lr=None,
)  # fmt: skip
_AARCH64 = _Arch(
    {
        **{n: (f"X{n}", n) for n in range(30)},
        30: ("LR", 30), 31: ("SP", 31), 32: ("PC", -1), 46: ("VG", 46),
    },
    pc=32, sp=31, fp=29, lr=30,
)  # fmt: skip
_S390X = _Arch(
    {
        **{n: (f"R{n}", n) for n in range(16)},
        **{16 + n: (f"FP{n}", S390X_FPR_DWARF[n]) for n in range(16)},
        32: ("MASK", 64), 33: ("PC", -1),
    },
    pc=33, sp=15, fp=11, lr=14,
)  # fmt: skip

#: uname -m (the ARCH feature) and perf's normalized names -> the unwinder's ABI.
ARCHES: dict[str, tuple[Abi, _Arch]] = {
    "x86_64": (Abi.AMD64_ENDIAN_LITTLE, _X86_64),
    "x86": (Abi.AMD64_ENDIAN_LITTLE, _X86_64),
    "aarch64": (Abi.AARCH64_ENDIAN_LITTLE, _AARCH64),
    "arm64": (Abi.AARCH64_ENDIAN_LITTLE, _AARCH64),
    "aarch64_be": (Abi.AARCH64_ENDIAN_BIG, _AARCH64),
    "s390x": (Abi.S390X_ENDIAN_BIG, _S390X),
    "s390": (Abi.S390X_ENDIAN_BIG, _S390X),
}


@dataclass(frozen=True, eq=False, repr=False)
class RegisterLayout:
    """How to read a sample's register array (the columns of a ``SampleChunk.regs`` row, one
    per bit of ``mask``) for one architecture.

    ``perf``: perf's register number of each column; ``names``: perf's names; ``dwarf``: the
    DWARF number of each column (-1: none, the PC).  ``pc``, ``sp``, ``fp``, ``lr``: the columns
    of those registers, None when the mask lacks them (``lr`` is None on x86-64).
    """

    arch: str
    abi: Abi
    mask: int
    perf: tuple[int, ...]
    names: tuple[str, ...]
    dwarf: tuple[int, ...]
    pc: int | None
    sp: int | None
    fp: int | None
    lr: int | None

    def registers(self, row: Sequence[int]) -> Registers:
        """The unwinder's :class:`Registers` from one sample's row; PerfDataError without a
        PC or SP among them."""
        if self.pc is None or self.sp is None:
            raise PerfDataError("the samples' user registers lack the PC or the SP")
        extra = tuple(
            (number, int(row[column]) & ((1 << 64) - 1))
            for column, number in enumerate(self.dwarf)
            if number >= 0
        )
        return Registers(
            pc=int(row[self.pc]),
            sp=int(row[self.sp]),
            fp=int(row[self.fp]) if self.fp is not None else 0,
            lr=int(row[self.lr]) if self.lr is not None else None,
            extra=extra,
        )


def architecture_of(abi: Abi) -> str | None:
    """The name of :data:`ARCHES` (uname -m) of the machine of ``abi``."""
    return next((name for name, (known, _) in ARCHES.items() if known == abi), None)


def register_layout(arch: str, mask: int, big_endian: bool | None = None) -> RegisterLayout:
    """The layout of the registers ``mask`` selects on ``arch`` (uname -m, as the ARCH
    feature gives it, or perf's ``x86``/``arm64``/``s390``); ``big_endian`` (the file's
    byte order) picks big-endian AArch64.  PerfDataError for another architecture, or a bit
    that names no register of it."""
    try:
        abi, table = ARCHES[arch]
    except KeyError:
        raise PerfDataError(f"user registers of architecture {arch!r} are not supported") from None
    if abi.is_aarch64 and big_endian is not None:
        abi = Abi.AARCH64_ENDIAN_BIG if big_endian else Abi.AARCH64_ENDIAN_LITTLE
    bits = tuple(bit for bit in range(64) if mask >> bit & 1)
    unknown = [bit for bit in bits if bit not in table.registers]
    if unknown:
        raise PerfDataError(f"perf register {unknown[0]} is not a {arch} user register")
    column = {bit: index for index, bit in enumerate(bits)}
    return RegisterLayout(
        arch=arch, abi=abi, mask=mask, perf=bits,
        names=tuple(table.registers[b][0] for b in bits),
        dwarf=tuple(table.registers[b][1] for b in bits), pc=column.get(table.pc),
        sp=column.get(table.sp), fp=column.get(table.fp),
        lr=None if table.lr is None else column.get(table.lr),
    )  # fmt: skip


__all__ = ["ARCHES", "RegisterLayout", "architecture_of", "register_layout"]
