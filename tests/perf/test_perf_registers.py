"""perf's user register numbers mapped to the unwinder's DWARF numbers and Registers."""

from __future__ import annotations

import struct

import pytest

from perf_support import DATA
from pysframe.format.constants import Abi, DwarfReg
from pysframe.perf import PerfData, PerfDataError
from pysframe.perf.registers import ARCHES, register_layout
from pysframe.unwind.ptrace import registers_from_gregs

#: perf's default x86-64 mask for --call-graph dwarf: AX..SS and R8..R15 (no DS ES FS GS).
X86_DWARF_MASK = 0xFF0FFF


def test_x86_64_layout() -> None:
    layout = register_layout("x86_64", X86_DWARF_MASK)
    assert layout.names == (
        "AX", "BX", "CX", "DX", "SI", "DI", "BP", "SP", "IP", "FLAGS", "CS", "SS",
        "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15",
    )  # fmt: skip
    # psABI: rax 0, rbx 3, rcx 2, rdx 1, rsi 4, rdi 5, rbp 6, rsp 7, rFLAGS 49, cs 51, ss 52.
    assert layout.dwarf == (0, 3, 2, 1, 4, 5, 6, 7, -1, 49, 51, 52, *range(8, 16))
    assert (layout.pc, layout.sp, layout.fp, layout.lr) == (8, 7, 6, None)
    assert layout.abi is Abi.AMD64_ENDIAN_LITTLE and register_layout("x86", 1).abi is layout.abi


def test_aarch64_layout() -> None:
    layout = register_layout("aarch64", (1 << 33) - 1 | 1 << 46)
    assert layout.names[29:] == ("X29", "LR", "SP", "PC", "VG")
    assert layout.dwarf == (*range(32), -1, 46)
    assert (layout.pc, layout.sp, layout.fp, layout.lr) == (32, 31, 29, 30)
    assert register_layout("arm64", 1, big_endian=True).abi is Abi.AARCH64_ENDIAN_BIG


def test_s390x_layout() -> None:
    layout = register_layout("s390x", (1 << 34) - 1)
    # f0..f15 in the s390x ABI's DWARF order (16-31: f0 f2 f4 f6 f1 f3 f5 f7 f8 f10 ...).
    assert layout.dwarf[16:20] == (16, 20, 17, 21) and layout.dwarf[32:] == (64, -1)
    assert (layout.pc, layout.sp, layout.fp, layout.lr) == (33, 15, 11, 14)
    assert sorted(layout.dwarf[16:32]) == list(range(16, 32))


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_roles_are_the_unwinders_registers(arch: str) -> None:
    """The SP, FP and return-address registers have the DWARF numbers unwind/core.py uses."""
    layout = register_layout(arch, (1 << 34) - 1 if "s390" in arch else (1 << 33) - 1
                             if "arm" in arch or "aarch" in arch else X86_DWARF_MASK)  # fmt: skip
    assert layout.dwarf[layout.sp] == DwarfReg.SP[layout.abi]
    assert layout.dwarf[layout.fp] == DwarfReg.FP[layout.abi]
    if layout.lr is not None:
        assert layout.dwarf[layout.lr] == DwarfReg.RA[layout.abi]


def test_registers_agree_with_a_core_files() -> None:
    """The same x86-64 values as a sample row and as an NT_PRSTATUS block give the same
    registers (slots of user_regs_struct: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx
    rsi rdi orig_rax rip cs eflags rsp ss...)."""
    layout = register_layout("x86_64", X86_DWARF_MASK)
    values = dict(zip(layout.names, range(0x1000, 0x1000 + 20 * 0x10, 0x10), strict=True))
    row = [values[name] for name in layout.names]
    slots = ["R15", "R14", "R13", "R12", "BP", "BX", "R11", "R10", "R9", "R8", "AX", "CX",
             "DX", "SI", "DI", None, "IP", "CS", "FLAGS", "SP", "SS"]  # fmt: skip
    gregs = struct.pack("<27Q", *[values.get(s, 0) if s else 0 for s in slots], *([0] * 6))
    ours = layout.registers(row)
    theirs = registers_from_gregs(Abi.AMD64_ENDIAN_LITTLE, gregs)
    assert (ours.pc, ours.sp, ours.fp, ours.lr) == (theirs.pc, theirs.sp, theirs.fp, theirs.lr)
    general = {n: v for n, v in ours.by_dwarf(layout.abi).items() if n < 16}
    assert general == theirs.by_dwarf(layout.abi)


def test_registers_of_a_recording() -> None:
    """In a user-mode sample the user registers' PC is the sample's IP."""
    with PerfData.open(DATA / "threads.data") as data:
        layout = register_layout(data.features.arch or "", data.attrs[0].sample_regs_user)
        checked = 0
        for chunk in data.samples():
            rows = chunk.registers(range(len(layout.perf)))
            for i in range(len(chunk)):
                if chunk.misc[i] & 7 == 2 and chunk.regs_abi[i]:
                    registers = layout.registers(rows[i])
                    assert registers.pc == chunk.ip[i] and registers.sp > 0
                    checked += 1
    assert checked > 10


def test_bad_architectures_and_registers() -> None:
    with pytest.raises(PerfDataError, match="'riscv64'"):
        register_layout("riscv64", 1)
    with pytest.raises(PerfDataError, match="perf register 30 is not a x86_64"):
        register_layout("x86_64", 1 << 30)
    with pytest.raises(PerfDataError, match="lack the PC"):
        register_layout("x86_64", 0b1).registers([1])
