"""The sans-IO unwinder on hand-built memory images, one test per ABI and rule kind."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pysframe.format.builder import FunctionBuilder, SFrameBuilder
from pysframe.format.constants import Abi, Version
from pysframe.format.model import CfaRule, RegRule
from pysframe.format.section import SFrameSection
from pysframe.unwind.core import (
    Backtrace,
    FrameSource,
    ModuleInfo,
    Registers,
    StopKind,
    Unwinder,
    single_module,
    unwind,
)

AMD64 = Abi.AMD64_ENDIAN_LITTLE
AARCH64 = Abi.AARCH64_ENDIAN_LITTLE
S390X = Abi.S390X_ENDIAN_BIG


class Memory:
    """Sparse memory: words written at addresses; everything else unreadable."""

    def __init__(self, big_endian: bool = False) -> None:
        self.bytes: dict[int, int] = {}
        self.order: str = "big" if big_endian else "little"
        self.reads = 0

    def put(self, address: int, value: int, size: int = 8) -> Memory:
        data = (value % (1 << (8 * size))).to_bytes(size, self.order)  # type: ignore[arg-type]
        for i, byte in enumerate(data):
            self.bytes[address + i] = byte
        return self

    def put_bytes(self, address: int, data: bytes) -> Memory:
        for i, byte in enumerate(data):
            self.bytes[address + i] = byte
        return self

    def __call__(self, address: int, size: int) -> bytes:
        self.reads += 1
        try:
            return bytes(self.bytes[address + i] for i in range(size))
        except KeyError:
            raise OSError(f"unmapped {address:#x}") from None


def section(abi: Abi, build: Callable[[SFrameBuilder], object], version: int = 3) -> SFrameSection:
    builder = SFrameBuilder(abi, version)
    build(builder)
    return builder.build()


def fn(builder: SFrameBuilder, start: int, size: int = 0x100) -> FunctionBuilder:
    return builder.add_function(start, size)


SP_ = RegRule.at_cfa


# ---------------------------------------------------------------------------------------------
# AMD64


def amd64_program(b: SFrameBuilder) -> None:
    # leaf at 0x1000: CFA = rsp + 8 (entry); RA fixed at CFA - 8.
    fn(b, 0x1000).add_row(0, CfaRule(7, 8))
    # middle at 0x2000: after push %rbp: CFA = rsp + 16, FP at CFA - 16; then rbp-based.
    fn(b, 0x2000).add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16), fp=SP_(-16)).add_row(
        4, CfaRule(6, 16), fp=SP_(-16)
    )
    # outermost at 0x3000: RA undefined.
    fn(b, 0x3000).add_undefined_ra_row(0)


def test_amd64_sframe_walk_to_outermost() -> None:
    sec = section(AMD64, amd64_program)
    mem = Memory()
    # frame 0: leaf at 0x1010, rsp = 0x7000 -> CFA 0x7008, RA at 0x7000 -> 0x2050
    mem.put(0x7000, 0x2050)
    # frame 1: middle at 0x2050 (rbp-based): rbp = 0x7100 -> CFA 0x7110, FP at 0x7100, RA 0x7108
    mem.put(0x7100, 0x0).put(0x7108, 0x3005)
    trace = unwind(AMD64, Registers(pc=0x1010, sp=0x7000, fp=0x7100), mem, single_module(sec))
    assert trace.pcs == [0x1010, 0x2050, 0x3005]
    assert [f.cfa for f in trace.frames] == [0x7008, 0x7110, None]
    assert [f.source for f in trace.frames] == [
        FrameSource.REGISTERS, FrameSource.SFRAME, FrameSource.SFRAME
    ]
    assert trace.stop is StopKind.OUTERMOST
    assert all(f.covered for f in trace.frames)


def test_amd64_frame_pointer_fallback_marks_the_caller() -> None:
    sec = section(AMD64, amd64_program)
    mem = Memory()
    # frame 0 at 0x9000: no SFrame; rbp = 0x7200 holds [caller rbp, RA].
    mem.put(0x7200, 0x7300).put(0x7208, 0x3001)
    trace = unwind(AMD64, Registers(pc=0x9000, sp=0x7100, fp=0x7200), mem, single_module(sec))
    assert trace.pcs == [0x9000, 0x3001]
    assert not trace.frames[0].covered
    assert trace.frames[0].cfa == 0x7210
    assert trace.frames[1].source is FrameSource.FRAME_POINTER
    assert trace.stop is StopKind.OUTERMOST


def test_frame_pointer_chain_ends_at_a_zero_frame_pointer() -> None:
    """No SFrame anywhere (a binary without unwind information): the frame records lead to
    the outermost frame, whose record holds a caller FP of 0 (the psABI's end of the chain):
    the walk ends there as at an outermost frame, not for want of unwind information."""
    mem = Memory()
    mem.put(0x7200, 0x7300).put(0x7208, 0x9100)  # frame 0's record: caller FP, RA
    mem.put(0x7300, 0x0).put(0x7308, 0x9200)  # frame 1's record: FP 0 (its caller: _start)
    trace = unwind(AMD64, Registers(pc=0x9000, sp=0x7100, fp=0x7200), mem, lambda pc: None)
    assert trace.pcs == [0x9000, 0x9100, 0x9200]
    assert trace.frames[2].source is FrameSource.FRAME_POINTER
    assert trace.stop is StopKind.OUTERMOST


def test_a_zero_frame_pointer_at_the_first_frame_is_no_unwind_information() -> None:
    """The sampled function has no SFrame and its FP register holds 0 (a function that keeps
    no frame pointer): nothing says where its caller is."""
    trace = unwind(AMD64, Registers(pc=0x9000, sp=0x7100, fp=0), Memory(), lambda pc: None)
    assert trace.pcs == [0x9000]
    assert trace.stop is StopKind.NO_UNWIND_INFO


def test_amd64_no_fallback_stops_with_reason() -> None:
    sec = section(AMD64, amd64_program)
    trace = unwind(
        AMD64, Registers(pc=0x9000, sp=0x7100, fp=0x7200), Memory(), single_module(sec),
        fp_fallback=False,
    )
    assert trace.stop is StopKind.NO_UNWIND_INFO
    assert "0x9000" in trace.reason
    assert trace.pcs == [0x9000]


def test_frame_pointer_cycle_stops() -> None:
    mem = Memory()
    # The frame record points to itself: the CFA cannot grow.
    mem.put(0x7200, 0x7200).put(0x7208, 0x9100)
    trace = unwind(AMD64, Registers(pc=0x9000, sp=0x7100, fp=0x7200), mem, lambda pc: None)
    assert trace.pcs == [0x9000, 0x9100]
    assert trace.stop is StopKind.CFA_NOT_GROWING


def test_non_growing_cfa_stops() -> None:
    # A function whose RA returns to itself with the same SP: CFA repeats.
    sec = section(AMD64, lambda b: fn(b, 0x1000).add_row(0, CfaRule(7, 8)) and None)
    mem = Memory().put(0x7000, 0x1010)
    trace = unwind(AMD64, Registers(pc=0x1010, sp=0x7000, fp=0), mem, single_module(sec))
    # frame 1 at 0x1010 with SP 0x7008 -> CFA 0x7010 grows; RA read at 0x7008 is unmapped.
    assert trace.stop is StopKind.UNREADABLE
    assert trace.frames[-1].cfa == 0x7010
    # CFA = rsp - 8 makes frame 1's CFA equal frame 0's SP: below the previous CFA.
    sec2 = section(
        AMD64,
        lambda b: fn(b, 0x1000).add_row(0, CfaRule(7, 8)).add_row(0x20, CfaRule(7, -8)) and None,
    )
    mem2 = Memory().put(0x7000, 0x1030)
    trace2 = unwind(AMD64, Registers(pc=0x1010, sp=0x7000, fp=0), mem2, single_module(sec2))
    assert trace2.stop is StopKind.CFA_NOT_GROWING
    assert trace2.pcs == [0x1010, 0x1030]


def test_misaligned_cfa_stops() -> None:
    sec = section(AMD64, lambda b: fn(b, 0x1000).add_row(0, CfaRule(7, 12)) and None)
    trace = unwind(AMD64, Registers(pc=0x1000, sp=0x7000, fp=0), Memory(), single_module(sec))
    assert trace.stop is StopKind.CFA_MISALIGNED
    assert "0x700c" in trace.reason


def test_unreadable_memory_keeps_the_frame() -> None:
    sec = section(AMD64, amd64_program)
    trace = unwind(AMD64, Registers(pc=0x1000, sp=0x7000, fp=0), Memory(), single_module(sec))
    assert trace.pcs == [0x1000]
    assert trace.frames[0].cfa == 0x7008
    assert trace.stop is StopKind.UNREADABLE
    assert "0x7000" in trace.reason


def test_max_frames_bounds_a_deep_stack() -> None:
    # A function calling itself: CFA = rsp + 16 per frame, 200 frames deep on the stack.
    sec = section(AMD64, lambda b: fn(b, 0x1000).add_row(0, CfaRule(7, 16)) and None)
    mem = Memory()
    for i in range(200):
        mem.put(0x7000 + 16 * i + 8, 0x1010)
    unwinder = Unwinder(AMD64, single_module(sec), max_frames=50)
    trace = unwinder.unwind(Registers(pc=0x1010, sp=0x7000, fp=0), mem)
    assert len(trace.frames) == 50
    assert trace.stop is StopKind.MAX_FRAMES
    assert trace.frames[-1].cfa == 0x7000 + 16 * 50
    # reads are bounded per frame: one RA word and a cached trampoline probe
    assert mem.reads <= 2 * 50 + 2


def test_flex_cfa_from_register_and_dereference() -> None:
    def build(b: SFrameBuilder) -> None:
        # DRAP-style: at entry the CFA is r10 + 0 (valid in the first frame only); later the
        # CFA is the word at rbp - 8, FP saved at rbp + 0.
        f = fn(b, 0x1000)
        f.add_row(0, CfaRule(10, 0))
        f.add_row(0x10, CfaRule(6, -8, deref=True), fp=RegRule(RegRule.at_cfa(0).kind, 0, 6))
        fn(b, 0x2000).add_undefined_ra_row(0)

    sec = section(AMD64, build)
    assert sec[0].fde_type.name == "FLEX"
    mem = Memory().put(0x7ff8, 0x2001)
    regs = Registers(pc=0x1004, sp=0x7000, fp=0, extra=((10, 0x8000),))
    trace = unwind(AMD64, regs, mem, single_module(sec))
    assert trace.pcs == [0x1004, 0x2001]
    assert trace.frames[0].cfa == 0x8000
    # deref: rbp = 0x7100, *(0x70f8) = CFA 0x8000, RA at 0x7ff8, FP = *(rbp) = 0x7500
    mem2 = Memory().put(0x70F8, 0x8000).put(0x7FF8, 0x2001).put(0x7100, 0x7500)
    trace2 = unwind(AMD64, Registers(pc=0x1020, sp=0x7000, fp=0x7100), mem2, single_module(sec))
    assert trace2.pcs == [0x1020, 0x2001]
    assert trace2.frames[0].cfa == 0x8000
    assert trace2.stop is StopKind.OUTERMOST


def test_register_rule_outside_the_first_frame_stops() -> None:
    def build(b: SFrameBuilder) -> None:
        fn(b, 0x1000).add_row(0, CfaRule(7, 8))
        fn(b, 0x2000).add_row(0, CfaRule(10, 0))  # CFA from r10: unknown in frame 1

    sec = section(AMD64, build)
    mem = Memory().put(0x7000, 0x2004)
    regs = Registers(pc=0x1000, sp=0x7000, fp=0, extra=((10, 0x9000),))
    trace = unwind(AMD64, regs, mem, single_module(sec))
    assert trace.pcs == [0x1000, 0x2004]
    assert trace.stop is StopKind.UNKNOWN_REGISTER
    assert "register 10" in trace.reason


def test_ra_undefined_ends_the_walk() -> None:
    sec = section(AMD64, lambda b: fn(b, 0x1000).add_undefined_ra_row(0) and None)
    trace = unwind(AMD64, Registers(pc=0x1000, sp=0x7000, fp=0), Memory(), single_module(sec))
    assert trace.stop is StopKind.OUTERMOST
    assert trace.pcs == [0x1000]


def test_zero_return_address_is_outermost() -> None:
    sec = section(AMD64, lambda b: fn(b, 0x1000).add_row(0, CfaRule(7, 8)) and None)
    trace = unwind(
        AMD64, Registers(pc=0x1000, sp=0x7000, fp=0), Memory().put(0x7000, 0), single_module(sec)
    )
    assert trace.stop is StopKind.OUTERMOST
    assert trace.pcs == [0x1000]


def test_symbols_and_module_problems() -> None:
    sec = section(AMD64, amd64_program)
    mem = Memory().put(0x7000, 0x2050).put(0x7100, 0).put(0x7108, 0x3005)

    def symbolize(pc: int) -> tuple[str, int] | None:
        return (f"f{pc >> 12}", pc & 0xFFF)

    good = ModuleInfo("prog", section=sec, symbolize=symbolize)
    trace = unwind(AMD64, Registers(pc=0x1010, sp=0x7000, fp=0x7100), mem, lambda pc: good)
    # callers are symbolized at pc - 1 but show the offset of the PC itself
    assert [(f.symbol, f.offset) for f in trace.frames] == [
        ("f1", 0x10), ("f2", 0x50), ("f3", 0x5)
    ]
    assert trace.frames[1].symbol_text == "f2+0x50"
    bad = ModuleInfo("prog", section=sec, symbolize=symbolize, problem="file changed")
    trace2 = unwind(AMD64, Registers(pc=0x1010, sp=0x7000, fp=0x7100), mem, lambda pc: bad)
    assert trace2.frames[0].problem == "file changed"
    assert trace2.frames[0].symbol is None and not trace2.frames[0].covered


# ---------------------------------------------------------------------------------------------
# AArch64


def aarch64_program(b: SFrameBuilder) -> None:
    # leaf at 0x1000: nothing saved, RA in LR.
    fn(b, 0x1000).add_row(0, CfaRule(31, 0))
    # caller at 0x2000: stp x29, x30, [sp, -32]!: CFA = sp + 32, FP at CFA-32, RA at CFA-24,
    # signed (paciasp) from offset 0.
    fn(b, 0x2000).add_row(
        0, CfaRule(31, 32), fp=SP_(-32), ra=SP_(-24), mangled_ra=True
    )
    fn(b, 0x3000).add_undefined_ra_row(0)


def test_aarch64_lr_then_saved_mangled_ra() -> None:
    sec = section(AARCH64, aarch64_program)
    mem = Memory()
    # frame 1: sp = 0x7000 -> CFA 0x7020; FP at 0x7000, RA (PAC-signed) at 0x7008
    mem.put(0x7000, 0x7400).put(0x7008, 0x002A_0000_0000_3008)
    regs = Registers(pc=0x1008, sp=0x7000, fp=0x7000, lr=0x2010)
    trace = unwind(AARCH64, regs, mem, single_module(sec))
    assert trace.pcs == [0x1008, 0x2010, 0x3008]
    assert [f.cfa for f in trace.frames[:2]] == [0x7000, 0x7020]
    assert trace.stop is StopKind.OUTERMOST


def test_aarch64_lr_is_only_valid_in_the_first_frame() -> None:
    def build(b: SFrameBuilder) -> None:
        aarch64_program(b)
        fn(b, 0x4000).add_row(0, CfaRule(31, 16))  # a frame with RA still in LR

    sec = section(AARCH64, build)
    mem = Memory()
    # frame 0 returns into 0x4000's function, whose RA is "in LR": unknown in frame 1.
    mem.put(0x7000, 0x7400).put(0x7008, 0x4004)
    regs = Registers(pc=0x2010, sp=0x7000, fp=0x7000, lr=0x5555)
    trace = unwind(AARCH64, regs, mem, single_module(sec))
    assert trace.pcs == [0x2010, 0x4004]
    assert trace.stop is StopKind.UNKNOWN_REGISTER
    assert "first frame" in trace.reason


def test_aarch64_misaligned_cfa() -> None:
    sec = section(AARCH64, lambda b: fn(b, 0x1000).add_row(0, CfaRule(31, 8)) and None)
    trace = unwind(
        AARCH64, Registers(pc=0x1000, sp=0x7000, fp=0, lr=0x1), Memory(), single_module(sec)
    )
    assert trace.stop is StopKind.CFA_MISALIGNED


def test_aarch64_frame_pointer_fallback_strips_pac() -> None:
    mem = Memory().put(0x7200, 0).put(0x7208, 0x0055_0000_0000_4444)
    trace = unwind(
        AARCH64, Registers(pc=0x9000, sp=0x7100, fp=0x7200, lr=0x1), mem, lambda pc: None
    )
    assert trace.pcs == [0x9000, 0x4444]
    assert trace.frames[1].source is FrameSource.FRAME_POINTER
    assert trace.frames[1].sp is None  # unknown after an AArch64 frame-record step


def test_aarch64_signal_frame_by_sframe_flag() -> None:
    def build(b: SFrameBuilder) -> None:
        b.add_function(0x5000, 0x10, signal_frame=True).add_row(0, CfaRule(31, 0))
        fn(b, 0x1000).add_row(0, CfaRule(31, 0))  # interrupted leaf: RA in LR
        fn(b, 0x3000).add_undefined_ra_row(0)

    sec = section(AARCH64, build)
    mem = Memory()
    # handler frame 0 at 0x1000 returns (LR) to the trampoline 0x5000 with SP 0x6000.
    ctx = 0x6000 + 128 + 176 + 8
    for n in range(31):
        mem.put(ctx + 8 * n, 0x100 + n)
    mem.put(ctx + 8 * 30, 0x3004)  # x30 = LR of the interrupted code
    mem.put(ctx + 8 * 31, 0x6800)  # sp
    mem.put(ctx + 8 * 32, 0x1008)  # pc
    regs = Registers(pc=0x1004, sp=0x6000, fp=0, lr=0x5000)
    trace = unwind(AARCH64, regs, mem, single_module(sec))
    assert trace.pcs == [0x1004, 0x5000, 0x1008, 0x3004]
    assert trace.frames[1].signal_trampoline
    assert trace.frames[2].source is FrameSource.SIGNAL
    assert trace.stop is StopKind.OUTERMOST


# ---------------------------------------------------------------------------------------------
# AMD64 signal frame by code bytes


def test_amd64_signal_frame_by_code() -> None:
    def build(b: SFrameBuilder) -> None:
        fn(b, 0x1000).add_row(0, CfaRule(7, 8))  # handler
        fn(b, 0x2000).add_row(0, CfaRule(7, 8))  # interrupted
        fn(b, 0x3000).add_undefined_ra_row(0)

    sec = section(AMD64, build)
    mem = Memory().put_bytes(0x4000, bytes.fromhex("48c7c00f0000000f05"))
    mem.put(0x7000, 0x4000)  # handler's RA: the trampoline; its SP becomes 0x7008
    gregs = 0x7008 + 40
    mem.put(gregs + 8 * 10, 0x7700)  # rbp
    mem.put(gregs + 8 * 15, 0x7800)  # rsp
    mem.put(gregs + 8 * 16, 0x2010)  # rip
    for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14):
        mem.put(gregs + 8 * n, n)
    mem.put(0x7800, 0x3002)  # interrupted frame's RA
    trace = unwind(AMD64, Registers(pc=0x1000, sp=0x7000, fp=0), mem, single_module(sec))
    assert trace.pcs == [0x1000, 0x4000, 0x2010, 0x3002]
    assert trace.frames[1].signal_trampoline and not trace.frames[1].covered
    assert trace.frames[2].source is FrameSource.SIGNAL
    assert trace.frames[2].sp == 0x7800
    assert trace.stop is StopKind.OUTERMOST


# ---------------------------------------------------------------------------------------------
# s390x


def s390x_program(b: SFrameBuilder) -> None:
    # leaf at 0x1000: CFA = r15 + 160, RA in r14, FP saved in f8 (DWARF 24): V2 "in register".
    fn(b, 0x1000).add_row(0, CfaRule(15, 160), fp=RegRule.in_register(24), ra=RegRule.padding())
    # caller at 0x2000: stmg %r6,%r15,48(%r15); aghi %r15,-160: CFA = r15 + 320,
    # RA (r14) at CFA - 48, FP (r11) at CFA - 72.
    fn(b, 0x2000).add_row(0, CfaRule(15, 320), fp=SP_(-72), ra=SP_(-48))
    fn(b, 0x3000).add_undefined_ra_row(0)


def test_s390x_registers_in_first_frame_and_sp_at_cfa() -> None:
    sec = section(S390X, s390x_program, version=2)
    mem = Memory(big_endian=True)
    # frame 0: r15 = 0x7000 -> CFA 0x70a0, caller SP = 0x7000 (CFA - 160)
    # frame 1: r15 = 0x7000 -> CFA 0x7140; RA at 0x7110, FP at 0x70f8
    mem.put(0x7110, 0x3006).put(0x70F8, 0x7A00)
    regs = Registers(pc=0x1008, sp=0x7000, fp=0x11, lr=0x2040, extra=((24, 0x7F00),))
    trace = unwind(S390X, regs, mem, single_module(sec))
    assert trace.pcs == [0x1008, 0x2040, 0x3006]
    assert [f.cfa for f in trace.frames[:2]] == [0x70A0, 0x7140]
    assert trace.frames[1].sp == 0x7000
    assert trace.stop is StopKind.OUTERMOST


def test_s390x_register_saved_fp_outside_first_frame_stops() -> None:
    def build(b: SFrameBuilder) -> None:
        fn(b, 0x2000).add_row(0, CfaRule(15, 320), fp=SP_(-72), ra=SP_(-48))
        # "FP saved in f8": only meaningful in the first frame; RA saved on the stack.
        fn(b, 0x1000).add_row(0, CfaRule(15, 320), fp=RegRule.in_register(24), ra=SP_(-48))

    sec = section(S390X, build, version=2)
    mem = Memory(big_endian=True).put(0x7110, 0x1006).put(0x70F8, 0x7A00).put(0x71B0, 0x3000)
    regs = Registers(pc=0x2000, sp=0x7000, fp=0, lr=0)
    trace = unwind(S390X, regs, mem, single_module(sec))
    assert trace.pcs == [0x2000, 0x1006]
    assert trace.stop is StopKind.UNKNOWN_REGISTER


def test_s390x_flex_v3_and_signal_unsupported() -> None:
    def build(b: SFrameBuilder) -> None:
        fn(b, 0x1000).add_row(0, CfaRule(15, 160), fp=RegRule.in_register(24))

    sec = section(S390X, build, version=3)
    assert sec.version is Version.V3
    mem = Memory(big_endian=True).put_bytes(0x5000, bytes.fromhex("0aad"))
    regs = Registers(pc=0x1000, sp=0x7000, fp=0, lr=0x5000, extra=((24, 0x10),))
    trace = unwind(S390X, regs, mem, single_module(sec))
    assert trace.pcs == [0x1000, 0x5000]
    assert trace.frames[1].signal_trampoline
    assert trace.stop is StopKind.UNSUPPORTED


# ---------------------------------------------------------------------------------------------
# Robustness


@settings(max_examples=150, deadline=None)
@given(
    st.binary(min_size=0, max_size=512),
    st.integers(0, 0x1FF),
    st.integers(0, 0x1FF),
    st.sampled_from([AMD64, AARCH64, S390X]),
)
def test_any_memory_terminates(data: bytes, sp_off: int, fp_off: int, abi: Abi) -> None:
    def build(b: SFrameBuilder) -> None:
        fn(b, 0x7000, 0x200).add_row(0, CfaRule(DwarfSP[abi], 16 if abi != S390X else 160))

    sec = section(abi, build, version=2 if abi == S390X else 3)
    base = 0x7000

    def read(address: int, size: int) -> bytes:
        start = address - base
        if start < 0 or start + size > len(data):
            raise OSError("unmapped")
        return data[start : start + size]

    regs = Registers(pc=base + 4, sp=base + sp_off, fp=base + fp_off, lr=base + 8)
    trace = Unwinder(abi, single_module(sec), max_frames=64).unwind(regs, read)
    assert 1 <= len(trace.frames) <= 64
    cfas = [f.cfa for f in trace.frames if f.cfa is not None and not f.signal_trampoline]
    assert cfas == sorted(cfas)


DwarfSP = {AMD64: 7, AARCH64: 31, S390X: 15}


def test_bad_max_frames() -> None:
    from pysframe.errors import UnwindError

    with pytest.raises(UnwindError):
        Unwinder(AMD64, lambda pc: None, max_frames=0)


# ---------------------------------------------------------------------------------------------
# The caller's callables failing: the walk stops, marked, with what it had


def _walk_with(read: Callable[[int, int], object], find: Callable[[int], object]) -> Backtrace:
    return unwind(
        AMD64,
        Registers(pc=0x1010, sp=0x7000, fp=0x7100),
        read,  # type: ignore[arg-type]
        find,  # type: ignore[arg-type]
    )


def _amd64_memory() -> Memory:
    return Memory().put(0x7000, 0x2050).put(0x7100, 0x0).put(0x7108, 0x3005)


def test_a_reader_that_raises_anything_stops_the_walk_marked() -> None:
    sec = section(AMD64, amd64_program)
    memory = _amd64_memory()

    def read(address: int, size: int) -> bytes:
        if address == 0x7100:
            raise RuntimeError("the debugger's connection dropped")
        return memory(address, size)

    trace = _walk_with(read, single_module(sec))
    assert trace.pcs == [0x1010, 0x2050]
    assert trace.stop is StopKind.CALLBACK_FAILED
    assert trace.reason == "read_memory failed: RuntimeError: the debugger's connection dropped"


def test_a_reader_that_answers_no_bytes_stops_the_walk_marked() -> None:
    sec = section(AMD64, amd64_program)
    trace = _walk_with(lambda address, size: "0" * size, single_module(sec))
    assert trace.pcs == [0x1010]
    assert trace.stop is StopKind.CALLBACK_FAILED and "gave a str, not bytes" in trace.reason


def test_a_module_finder_or_symbolizer_that_raises_stops_the_walk_marked() -> None:
    sec = section(AMD64, amd64_program)
    good = single_module(sec)

    def find(pc: int) -> object:
        if pc >= 0x2000:
            raise KeyError(pc)
        return good(pc)

    trace = _walk_with(_amd64_memory(), find)
    assert trace.pcs == [0x1010, 0x2050] and trace.stop is StopKind.CALLBACK_FAILED
    assert "KeyError" in trace.reason

    def bad_symbols(pc: int) -> tuple[str, int]:
        raise ValueError("corrupt symbol table")

    hostile = ModuleInfo("libhostile.so", section=sec, symbolize=bad_symbols)
    trace = _walk_with(_amd64_memory(), lambda pc: hostile)
    assert trace.pcs == [0x1010] and trace.stop is StopKind.CALLBACK_FAILED
    assert "ValueError: corrupt symbol table" in trace.reason
