"""The batch walk (:mod:`pysframe.unwind.batch`) on hand-built memory images: many stacks of
one ABI walked together, each to the frames and the stop known by construction (those of
tests/unwind/test_unwind.py's programs).  The plain SFrame step is taken in bulk, every other frame
(signal frames by code and by flag, the frame-pointer fallback, FLEX rules, register rules,
the link register) by the unwinder's step; a batch mixes both."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pysframe.bounded import SlotTable
from pysframe.format.builder import SFrameBuilder
from pysframe.format.constants import Abi
from pysframe.format.lookup import SectionLookup
from pysframe.format.model import CfaRule, RegRule
from pysframe.format.section import SFrameSection
from pysframe.unwind import BatchStart, BatchUnwinder, ModuleInfo, Registers, StopKind, Unwinder
from test_unwind import (
    AARCH64,
    AMD64,
    S390X,
    Memory,
    aarch64_program,
    amd64_program,
    fn,
    s390x_program,
    section,
)


@dataclass
class Case:
    """One stack: its SFrame, memory and registers, and what its walk is by construction."""

    section: SFrameSection
    memory: Memory
    registers: Registers
    pcs: list[int]
    stop: StopKind
    lost_return: bool = False


class _Module:
    """What the batch reads of a module: its section, no fallback, no trampoline code."""

    def __init__(self, section: SFrameSection) -> None:
        self.section: SectionLookup | None = section.lookup

    def fallback(self) -> SectionLookup | None:
        return None

    def trampolines(self) -> tuple[int, ...]:
        return ()


class _Memories:
    """Each walk's own memory, word by word (a test's memory is small)."""

    counts_used = True

    def __init__(self, cases: Sequence[Case]) -> None:
        self.cases = cases
        self.used = np.zeros(len(cases), dtype=np.int64)

    def read(self, walks: np.ndarray, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.zeros(len(walks), dtype=np.uint64)
        readable = np.zeros(len(walks), dtype=bool)
        for at, (walk, address) in enumerate(zip(walks.tolist(), addresses.tolist(), strict=True)):
            memory = self.cases[walk].memory
            try:
                data = memory(address, 8)
            except OSError:
                continue
            values[at] = int.from_bytes(data, memory.order)  # type: ignore[arg-type]
            readable[at] = True
        return values, readable

    def mark(self, walks: np.ndarray, ends: np.ndarray) -> None:
        pass

    def reader(self, walk: int) -> Callable[[int, int], bytes]:
        return self.cases[walk].memory


class _Spaces:
    """Each walk in an address space of its own, its one module covering every address."""

    def __init__(self, cases: Sequence[Case]) -> None:
        self.modules = [_Module(case.section) for case in cases]
        self.infos = [ModuleInfo(f"m{n}", section=case.section) for n, case in enumerate(cases)]

    def mappings_at(self, walks: np.ndarray, pcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return walks.astype(np.int64), np.zeros(len(walks), dtype=np.uint64)

    def find_module(self, walk: int) -> Callable[[int], ModuleInfo | None]:
        info = self.infos[walk]
        return lambda pc: info


class _Numbered:
    """Walk ``i`` in module ``numbers[i]`` of ``modules`` (the same section may be in several)
    at every address."""

    def __init__(self, modules: list[_Module], numbers: list[int]) -> None:
        self.modules = modules
        self.numbers = numbers

    def mappings_at(self, walks: np.ndarray, pcs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        numbers = np.array(self.numbers, dtype=np.int64)[walks]
        return numbers, np.zeros(len(walks), dtype=np.uint64)

    def find_module(self, walk: int) -> Callable[[int], ModuleInfo | None]:
        section = self.modules[self.numbers[walk]].section
        assert section is not None
        info = ModuleInfo(f"m{self.numbers[walk]}", section=section)
        return lambda pc: info


def walk(
    abi: Abi,
    cases: list[Case],
    batch: BatchUnwinder | None = None,
    spaces: _Spaces | _Numbered | None = None,
) -> None:
    """Walk ``cases`` in one batch (of ``batch``, a new one by default; in ``spaces``, each
    walk in a module of its own by default) and check each walk against its case."""
    column = lambda f: np.array([f(c.registers) for c in cases], dtype=np.uint64)  # noqa: E731
    lr = column(lambda r: r.lr or 0) if abi is not Abi.AMD64_ENDIAN_LITTLE else None
    start = BatchStart(
        column(lambda r: r.pc), column(lambda r: r.sp), column(lambda r: r.fp), lr,
        np.ones(len(cases), dtype=bool), lambda walk: cases[walk].registers,
    )  # fmt: skip
    batch = batch or BatchUnwinder(Unwinder(abi, lambda pc: None))
    spaces = spaces or _Spaces(cases)
    walks = batch.walk(start, _Memories(cases), spaces)  # type: ignore[arg-type]
    for index, case in enumerate(cases):
        assert (walks.frames(index), walks.stop_of(index)) == (case.pcs, case.stop), index
        assert bool(walks.lost_return[index]) == case.lost_return, index
    assert int(walks.stepped.sum()) < sum(len(case.pcs) for case in cases)  # some in bulk


def test_amd64_batch() -> None:
    program = section(AMD64, amd64_program)

    def signal_program(b: SFrameBuilder) -> None:
        fn(b, 0x1000).add_row(0, CfaRule(7, 8))  # handler
        fn(b, 0x2000).add_row(0, CfaRule(7, 8))  # interrupted
        fn(b, 0x3000).add_undefined_ra_row(0)

    # The trampoline's code at 0x4000, no row covers it; the context above the handler's RA.
    signal = Memory().put_bytes(0x4000, bytes.fromhex("48c7c00f0000000f05")).put(0x7000, 0x4000)
    gregs = 0x7008 + 40
    signal.put(gregs + 8 * 10, 0x7700).put(gregs + 8 * 15, 0x7800).put(gregs + 8 * 16, 0x2010)
    for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14):
        signal.put(gregs + 8 * n, n)
    signal.put(0x7800, 0x3002)

    def flex_program(b: SFrameBuilder) -> None:
        f = fn(b, 0x1000)
        f.add_row(0, CfaRule(10, 0))  # DRAP: the CFA in r10, known in the first frame
        f.add_row(0x10, CfaRule(6, -8, deref=True), fp=RegRule(RegRule.at_cfa(0).kind, 0, 6))
        fn(b, 0x2000).add_undefined_ra_row(0)

    def register_program(b: SFrameBuilder) -> None:
        fn(b, 0x1000).add_row(0, CfaRule(7, 8))
        fn(b, 0x2000).add_row(0, CfaRule(10, 0))  # CFA from r10: unknown in frame 1

    flex = section(AMD64, flex_program)
    walk(AMD64, [
        # SFrame all the way: leaf, rbp-based middle, outermost.
        Case(program, Memory().put(0x7000, 0x2050).put(0x7100, 0).put(0x7108, 0x3005),
             Registers(pc=0x1010, sp=0x7000, fp=0x7100), [0x1010, 0x2050, 0x3005],
             StopKind.OUTERMOST),
        # No row at 0x9000: the frame-pointer chain, then SFrame.
        Case(program, Memory().put(0x7200, 0x7300).put(0x7208, 0x3001),
             Registers(pc=0x9000, sp=0x7100, fp=0x7200), [0x9000, 0x3001], StopKind.OUTERMOST),
        # No row anywhere on the way: the frame records to the one whose caller FP is 0, the
        # end of the chain (as Unwinder.unwind stops: test_unwind.py).
        Case(program, Memory().put(0x7200, 0x7300).put(0x7208, 0x9100).put(0x7300, 0)
             .put(0x7308, 0x9200), Registers(pc=0x9000, sp=0x7100, fp=0x7200),
             [0x9000, 0x9100, 0x9200], StopKind.OUTERMOST),
        # A signal frame known by its code, then the interrupted frame and its caller.
        Case(section(AMD64, signal_program), signal, Registers(pc=0x1000, sp=0x7000, fp=0),
             [0x1000, 0x4000, 0x2010, 0x3002], StopKind.OUTERMOST),
        # FLEX: the CFA in r10 in the first frame; the CFA dereferenced through rbp.
        Case(flex, Memory().put(0x7FF8, 0x2001),
             Registers(pc=0x1004, sp=0x7000, fp=0, extra=((10, 0x8000),)), [0x1004, 0x2001],
             StopKind.OUTERMOST),
        Case(flex, Memory().put(0x70F8, 0x8000).put(0x7FF8, 0x2001).put(0x7100, 0x7500),
             Registers(pc=0x1020, sp=0x7000, fp=0x7100), [0x1020, 0x2001], StopKind.OUTERMOST),
        # A register rule past the first frame.
        Case(section(AMD64, register_program), Memory().put(0x7000, 0x2004),
             Registers(pc=0x1000, sp=0x7000, fp=0, extra=((10, 0x9000),)), [0x1000, 0x2004],
             StopKind.UNKNOWN_REGISTER),
        # A misaligned CFA, and a return address that cannot be read.
        Case(section(AMD64, lambda b: fn(b, 0x1000).add_row(0, CfaRule(7, 12)) and None),
             Memory(), Registers(pc=0x1000, sp=0x7000, fp=0), [0x1000], StopKind.CFA_MISALIGNED),
        Case(program, Memory(), Registers(pc=0x1000, sp=0x7000, fp=0), [0x1000],
             StopKind.UNREADABLE, lost_return=True),
    ])  # fmt: skip


def test_aarch64_batch() -> None:
    def signal_program(b: SFrameBuilder) -> None:
        b.add_function(0x5000, 0x10, signal_frame=True).add_row(0, CfaRule(31, 0))
        fn(b, 0x1000).add_row(0, CfaRule(31, 0))  # interrupted leaf: RA in LR
        fn(b, 0x3000).add_undefined_ra_row(0)

    signal = Memory()
    context = 0x6000 + 128 + 176 + 8
    for n in range(31):
        signal.put(context + 8 * n, 0x100 + n)
    signal.put(context + 8 * 30, 0x3004).put(context + 8 * 31, 0x6800)
    signal.put(context + 8 * 32, 0x1008)

    def lr_program(b: SFrameBuilder) -> None:
        aarch64_program(b)
        fn(b, 0x4000).add_row(0, CfaRule(31, 16))  # a frame with RA still in LR

    walk(AARCH64, [
        # The RA in LR in the first frame, then saved and PAC-signed.
        Case(section(AARCH64, aarch64_program),
             Memory().put(0x7000, 0x7400).put(0x7008, 0x002A_0000_0000_3008),
             Registers(pc=0x1008, sp=0x7000, fp=0x7000, lr=0x2010), [0x1008, 0x2010, 0x3008],
             StopKind.OUTERMOST),
        # The RA in LR past the first frame is unknown.
        Case(section(AARCH64, lr_program), Memory().put(0x7000, 0x7400).put(0x7008, 0x4004),
             Registers(pc=0x2010, sp=0x7000, fp=0x7000, lr=0x5555), [0x2010, 0x4004],
             StopKind.UNKNOWN_REGISTER),
        # A signal frame known by its SFrame flag: the context's registers, then LR in it.
        Case(section(AARCH64, signal_program), signal,
             Registers(pc=0x1004, sp=0x6000, fp=0, lr=0x5000), [0x1004, 0x5000, 0x1008, 0x3004],
             StopKind.OUTERMOST),
    ])  # fmt: skip


def test_s390x_batch() -> None:
    walk(S390X, [
        # r14 and f8 in the first frame; the caller's SP is CFA - 160.
        Case(section(S390X, s390x_program, version=2),
             Memory(big_endian=True).put(0x7110, 0x3006).put(0x70F8, 0x7A00),
             Registers(pc=0x1008, sp=0x7000, fp=0x11, lr=0x2040, extra=((24, 0x7F00),)),
             [0x1008, 0x2040, 0x3006], StopKind.OUTERMOST),
        Case(section(S390X, s390x_program, version=2),
             Memory(big_endian=True).put(0x7110, 0x3006).put(0x70F8, 0x7A00),
             Registers(pc=0x2000, sp=0x7000, fp=0, lr=0), [0x2000, 0x3006],
             StopKind.OUTERMOST),
    ])  # fmt: skip


def _leaf_then_outermost(cfa_offset: int) -> Callable[[SFrameBuilder], None]:
    """A leaf at 0x1000 with CFA = rsp + ``cfa_offset`` (its RA at CFA - 8), and an outermost
    function at 0x3000."""

    def build(b: SFrameBuilder) -> None:
        fn(b, 0x1000).add_row(0, CfaRule(7, cfa_offset))
        fn(b, 0x3000).add_undefined_ra_row(0)

    return build


def test_frames_met_before_are_stepped_as_then() -> None:
    """A batch walker keeps each frame's rule by module and PC: the same batch walked again
    gives the same walks; and a key that holds neither its PC (above 48 bits) nor its module
    number (above 14 bits) is never taken for the key it would alias."""
    program = section(AMD64, amd64_program)
    batch = BatchUnwinder(Unwinder(AMD64, lambda pc: None))
    middle = Case(program, Memory().put(0x7000, 0x2050).put(0x7100, 0).put(0x7108, 0x3005),
                  Registers(pc=0x1010, sp=0x7000, fp=0x7100), [0x1010, 0x2050, 0x3005],
                  StopKind.OUTERMOST)  # fmt: skip
    for _ in range(2):
        walk(AMD64, [middle], batch, _Numbered([_Module(program)], [0]))
    # A return address 2**48 + 0x1011 is looked up at 2**48 + 0x1010, not exact: its key
    # would be the exact 0x1010's.  No row covers it: the frame-pointer chain.
    high = (1 << 48) + 0x1011
    beyond = Case(program, Memory().put(0x7000, high).put(0x7100, 0x7200).put(0x7108, 0x3005),
                  Registers(pc=0x1010, sp=0x7000, fp=0x7100), [0x1010, high, 0x3005],
                  StopKind.OUTERMOST)  # fmt: skip
    walk(AMD64, [middle, beyond], batch, _Numbered([_Module(program)], [0, 0]))
    # Module number 2**15 would be module 0 (its bits shifted out): the other rule.
    other = section(AMD64, _leaf_then_outermost(16))
    modules = [_Module(program)] + [_Module(other)] * (1 << 15)
    spaces = _Numbered(modules, [0, 1 << 15])
    first = Case(program, Memory().put(0x7000, 0x3005), Registers(pc=0x1010, sp=0x7000, fp=0),
                 [0x1010, 0x3005], StopKind.OUTERMOST)  # fmt: skip
    second = Case(other, Memory().put(0x7000, 0x9999).put(0x7008, 0x3006),
                  Registers(pc=0x1010, sp=0x7000, fp=0), [0x1010, 0x3006],
                  StopKind.OUTERMOST)  # fmt: skip
    walk(AMD64, [first], batch, spaces)
    spaces.numbers = [1 << 15]
    walk(AMD64, [second], batch, spaces)


def test_module_numbers_naming_other_modules_are_looked_up_again() -> None:
    """A batch walker's rules kept by module number hold while the numbers name the same
    modules: address spaces with other modules under the same numbers are looked up again."""
    batch = BatchUnwinder(Unwinder(AMD64, lambda pc: None))
    for cfa_offset in (8, 16, 8):
        program = section(AMD64, _leaf_then_outermost(cfa_offset))
        memory = Memory().put(0x7000 + cfa_offset - 8, 0x3005)
        case = Case(program, memory, Registers(pc=0x1010, sp=0x7000, fp=0), [0x1010, 0x3005],
                    StopKind.OUTERMOST)  # fmt: skip
        walk(AMD64, [case], batch, _Numbered([_Module(program)], [0]))


@given(st.lists(st.lists(st.tuples(st.integers(0, (1 << 64) - 1), st.integers(-9, 9)),
                         max_size=40), max_size=8))  # fmt: skip
def test_a_slot_table_finds_the_last_value_put_or_nothing(
    batches: list[list[tuple[int, int]]],
) -> None:
    """What the batch walker keeps its rules in: a key found has the value put last for it
    (a later key may take its slot; the empty slot's key is never found), and the last key
    put in a slot is found."""
    table, last = SlotTable(3), {}
    for batch in batches:
        keys = np.array([key for key, _ in batch], dtype=np.uint64)
        values = np.array([value for _, value in batch], dtype=np.int64)
        table.put(keys, values)
        last.update(batch)
        found, hit = table.find(np.array(list(last), dtype=np.uint64))
        for key, value, present in zip(last, found.tolist(), hit.tolist(), strict=True):
            assert not present or value == last[key]
            assert not present or key != SlotTable.EMPTY
        if batch and batch[-1][0] != SlotTable.EMPTY:
            assert table.find(keys[-1:])[1].all()
