"""A sans-IO stack unwinder driven by SFrame rows.

Input: a thread's registers (:class:`Registers`), a ``read_memory(address, size) -> bytes``
callable and a ``find_module(pc) -> ModuleInfo | None`` callable giving the SFrame section
(already rebased by the module's load bias) and symbolizer of the code at a PC.
Output: a :class:`Backtrace`, the frames from the innermost outwards and why the walk stopped.

Rules (V2 spec 2.4; docs/format.md, "DEFAULT rows", "FLEX FDEs", "RA undefined" and "s390x"):

* CFA = register + offset, or the word at register + offset (FLEX deref).  s390x offsets come
  decoded from the core library.
* RA: AMD64 at CFA + the header's fixed RA offset (-8).  AArch64: in the link register until a
  row says it is saved; s390x: in r14 until saved.  A register holds a known value only in the
  first frame (and in a frame restored from a signal context), so register-based rules anywhere
  else end the walk with a reason.  A mangled (PAC-signed) AArch64 RA is stripped to the
  virtual-address size.  RA undefined (an FRE without words) is the outermost frame.
* FP: untracked means unchanged; saved at CFA/reg + offset, or held in a register.  A saved
  FP that cannot be read is unknown from there on, as libdw and gdb leave such a register
  unset; only a frame whose rules need it stops.
* The caller's SP is the CFA (s390x: CFA - 160).
* A frame that no SFrame row covers is unwound by the frame-pointer chain (AMD64, AArch64),
  which the caller frame says in its ``source``.
* Signal frames: a frame whose code is the Linux ``rt_sigreturn`` trampoline (or whose SFrame
  function has the V3 signal-frame bit) is a signal trampoline; the interrupted frame's
  registers are read from the ``ucontext`` the kernel pushed (AMD64 and AArch64 layouts).
  The code is read from memory, else from the module's file (``ModuleInfo.trampolines``: a
  recording's stack copy holds no code).  On s390x the walk stops there with a reason.

One frame is one :meth:`Unwinder.step`: from a :class:`WalkState` (the frame's PC and the
registers known there) to the frame and its caller's state, or the reason the walk ends.
:meth:`Unwinder.unwind` steps from a thread's registers; the batch walk
(:mod:`pysframe.unwind.batch`) steps the frames it does not vectorize, from where it is.

The walk is bounded: ``max_frames`` frames, a CFA that must grow strictly from frame to frame
(except across a signal frame, whose context may be on another stack), and a fixed, small
number of bytes read per frame.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Protocol

from ..bounded import BoundedCache
from ..dataclass import dataclass
from ..errors import SFrameError, UnwindError
from ..format.constants import S390X_SP_VAL_OFFSET, Abi, DwarfReg
from ..format.model import FrameRow, Header, LookupResult, RegRule, RuleKind
from .limits import DEFAULT_MAX_FRAMES

ReadMemory = Callable[[int, int], bytes]
Symbolizer = Callable[[int], "tuple[str, int] | None"]

_U64 = 1 << 64
_MASK64 = _U64 - 1
#: AArch64 user-space virtual addresses have 48 bits by default (VA_BITS=48).
DEFAULT_VA_BITS = 48


class RowLookup(Protocol):
    """What the unwinder reads of an SFrame section: its header, and the function and row at a
    PC (:class:`~pysframe.format.lookup.SectionLookup`, or the
    :class:`~pysframe.format.section.SFrameSection` holding one)."""

    @property
    def header(self) -> Header: ...

    def find_row(self, pc: int) -> LookupResult | None: ...


@dataclass(frozen=True, slots=True)
class ModuleInfo:
    """What the unwinder needs to know about the module mapped at a PC.

    ``section``: its SFrame section with addresses already rebased by ``bias`` (None: none).
    ``symbolize(pc)``: (symbol, offset) or None.  ``problem``: why the module's data cannot be
    trusted (file missing or changed); its section and symbols are then not used.
    ``fallback()``: another section (SFrame generated from the module's CFI), consulted for PCs
    ``section`` does not cover, such as start-up code assembled without SFrame; called on first
    need.  ``trampolines()``: the sorted addresses at which the module's code is the signal
    return sequence (:func:`sigreturn_code`), read from its file on first need, for a walk
    whose memory holds no code.
    """

    name: str
    bias: int = 0
    section: RowLookup | None = None
    symbolize: Symbolizer | None = None
    problem: str | None = None
    fallback: Callable[[], RowLookup | None] | None = None
    trampolines: Callable[[], Sequence[int]] | None = None


FindModule = Callable[[int], "ModuleInfo | None"]


#: s390x DWARF register numbers of f0..f15 (s390x ELF ABI supplement, "DWARF Definition":
#: 16-31 are f0 f2 f4 f6 f1 f3 f5 f7 f8 f10 f12 f14 f9 f11 f13 f15).
S390X_FPR_DWARF = (16, 20, 17, 21, 18, 22, 19, 23, 24, 28, 25, 29, 26, 30, 27, 31)


@dataclass(frozen=True, slots=True)
class Registers:
    """A thread's registers at the point it stopped.

    ``lr`` is the AArch64 link register (s390x: r14, may also be given in ``extra``).
    ``extra``: more registers as (DWARF register number, value) pairs, usable by register-based
    rules of the first frame.
    """

    pc: int
    sp: int
    fp: int
    lr: int | None = None
    extra: tuple[tuple[int, int], ...] = ()

    def by_dwarf(self, abi: Abi) -> dict[int, int]:
        regs = dict(self.extra)
        regs[DwarfReg.SP[abi]] = self.sp & _MASK64
        regs[DwarfReg.FP[abi]] = self.fp & _MASK64
        if self.lr is not None and abi is not Abi.AMD64_ENDIAN_LITTLE:
            regs[DwarfReg.RA[abi]] = self.lr & _MASK64
        return regs


class FrameSource(Enum):
    """How a frame's PC was found."""

    #: Frame 0: the thread's program counter.
    REGISTERS = "registers"
    #: The callee frame's SFrame row.
    SFRAME = "sframe"
    #: The callee frame had no SFrame row: frame-pointer chain.
    FRAME_POINTER = "frame-pointer"
    #: Restored from the context a signal trampoline frame points to.
    SIGNAL = "signal"


class StopKind(Enum):
    """Why a walk ended (``stack`` and ``perf stats`` say it in these words)."""

    OUTERMOST = "outermost"  # RA undefined, or a zero RA / frame pointer
    MAX_FRAMES = "max-frames"
    NO_UNWIND_INFO = "no-unwind-info"
    UNKNOWN_REGISTER = "unknown-register"
    #: A read failed (a recording's walk: past the end of its stack copy).
    UNREADABLE = "unreadable-memory"
    CFA_NOT_GROWING = "cfa-not-growing"
    CFA_MISALIGNED = "cfa-misaligned"
    UNSUPPORTED = "unsupported"
    BAD_SFRAME = "bad-sframe"
    #: A callable given to the unwinder (read_memory, find_module, a module's symbolizer or
    #: SFrame source) raised or answered with the wrong type.
    CALLBACK_FAILED = "callback-failed"
    #: No registers or no stack to start from (a recorded sample of a kernel thread).
    NO_STACK = "no-stack"


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a backtrace.

    ``cfa`` is the frame's canonical frame address when its unwind rule could be applied.
    ``covered``: an SFrame row covers the PC.  ``signal_trampoline``: the frame is the signal
    return trampoline ("<signal handler called>").  ``problem``: the module's data is unusable.
    """

    index: int
    pc: int
    sp: int | None
    cfa: int | None
    source: FrameSource
    module: str | None
    symbol: str | None
    offset: int | None
    covered: bool
    signal_trampoline: bool = False
    problem: str | None = None

    @property
    def symbol_text(self) -> str:
        if self.symbol is None:
            return "??"
        return f"{self.symbol}+{self.offset:#x}" if self.offset else self.symbol


@dataclass(frozen=True, slots=True)
class Backtrace:
    """A whole walk: its frames, innermost first, and why it stopped (``stop``, with the
    ``reason`` in words)."""

    frames: tuple[Frame, ...]
    stop: StopKind
    reason: str

    @property
    def pcs(self) -> list[int]:
        return [frame.pc for frame in self.frames]


# ---------------------------------------------------------------------------------------------
# Per-ABI facts


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Arch:
    """What the walk needs to know of an ABI: its SP, FP and RA registers (DWARF numbers)."""

    abi: Abi
    sp: int
    fp: int
    ra: int
    #: Alignment every CFA must have.
    cfa_align: int
    #: Caller's SP = CFA + this (s390x: -160).
    sp_at_cfa: int
    big_endian: bool
    #: Whether a frame no row covers is unwound by the frame-pointer chain (not on s390x).
    fp_chain: bool

    @classmethod
    def of(cls, abi: Abi) -> Arch:
        return cls(
            abi, DwarfReg.SP[abi], DwarfReg.FP[abi], DwarfReg.RA[abi],
            16 if abi.is_aarch64 else 8,
            S390X_SP_VAL_OFFSET if abi is Abi.S390X_ENDIAN_BIG else 0,
            abi.big_endian, abi is not Abi.S390X_ENDIAN_BIG,
        )  # fmt: skip


#: x86-64 Linux rt_sigreturn trampoline: mov $15, %rax; syscall.
_AMD64_SIGRETURN = bytes.fromhex("48c7c00f0000000f05")
#: AArch64 Linux rt_sigreturn trampoline: mov x8, #139; svc #0 (instructions are little-endian).
_AARCH64_SIGRETURN = bytes.fromhex("681180d2010000d4")
#: s390x: svc 173 (rt_sigreturn).
_S390X_SIGRETURN = bytes.fromhex("0aad")


def sigreturn_code(abi: Abi) -> bytes:
    """The code of the Linux signal return trampoline (rt_sigreturn) on ``abi``."""
    if abi is Abi.AMD64_ENDIAN_LITTLE:
        return _AMD64_SIGRETURN
    if abi.is_aarch64:
        return _AARCH64_SIGRETURN
    return _S390X_SIGRETURN


#: AMD64 struct ucontext: uc_flags, uc_link, uc_stack (24 bytes), then mcontext gregs
#: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip.  The trampoline runs with SP at it.
_AMD64_GREGS_OFFSET = 40
_AMD64_GREGS_DWARF = (8, 9, 10, 11, 12, 13, 14, 15, 5, 4, 6, 3, 1, 0, 2, 7)
#: AArch64 struct rt_sigframe: siginfo (128 bytes), then ucontext whose sigcontext is at 176:
#: fault_address, x0..x30, sp, pc.
_AARCH64_SIGCONTEXT_OFFSET = 128 + 176


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Found:
    """The row that applies at a PC, whether its function is a signal trampoline, and the
    header's fixed RA offset (the rules the unwinder reads beside the row)."""

    row: FrameRow
    signal_frame: bool
    fixed_ra_offset: int


class _Stop(Exception):
    def __init__(self, kind: StopKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        #: The CFA of the frame the walk stopped in, when it was computed.
        self.cfa: int | None = None


@dataclass(slots=True)
class WalkState:
    """Where a walk is: a frame's PC, the registers known there (by DWARF number) and how the
    frame was reached."""

    pc: int
    regs: dict[int, int]
    #: The PC is where execution stopped (frame 0, a signal context), not a return address.
    exact_pc: bool
    #: Register rules may be used here (frame 0, a signal context).
    all_registers: bool
    #: The frame's number.
    index: int = 0
    #: The CFA of the frame before (None: the first frame, or one restored from a signal
    #: context, whose stack may be another).
    prev_cfa: int | None = None
    source: FrameSource = FrameSource.REGISTERS

    @property
    def lookup_pc(self) -> int:
        """The address the frame's code is looked up at: a return address less one (it may
        be past the end of the call's function)."""
        return self.pc if self.exact_pc else (self.pc - 1) & _MASK64


@dataclass(frozen=True, slots=True)
class Step:
    """One frame of a walk, and its caller's state; or, ``caller`` None, why the walk ends
    at this frame."""

    frame: Frame
    caller: WalkState | None
    stop: StopKind | None = None
    reason: str = ""


class _Memory:
    """Bounded, checked reads of words through the caller's ``read_memory``."""

    __slots__ = ("_read", "big_endian")

    def __init__(self, read: ReadMemory, big_endian: bool) -> None:
        self._read = read
        self.big_endian = big_endian

    def read(self, address: int, size: int) -> bytes:
        if not 0 <= address <= _U64 - size:
            raise _Stop(StopKind.UNREADABLE, f"address {address:#x} is outside the address space")
        try:
            data = self._read(address, size)
        except (OSError, ValueError, SFrameError) as error:
            raise _Stop(
                StopKind.UNREADABLE, f"cannot read {size} bytes at {address:#x}: {error}"
            ) from None
        except Exception as error:  # the caller's reader failed: this walk stops, marked
            raise _Stop(StopKind.CALLBACK_FAILED, _failure("read_memory", error)) from None
        if not isinstance(data, bytes | bytearray | memoryview):
            raise _Stop(
                StopKind.CALLBACK_FAILED,
                f"read_memory gave a {type(data).__name__}, not bytes",
            )
        if len(data) != size:
            raise _Stop(StopKind.UNREADABLE, f"cannot read {size} bytes at {address:#x}")
        return bytes(data)

    def word(self, address: int) -> int:
        return int.from_bytes(self.read(address, 8), "big" if self.big_endian else "little")

    def words(self, address: int, count: int) -> list[int]:
        data = self.read(address, 8 * count)
        if self.big_endian:
            return [int.from_bytes(data[i : i + 8], "big") for i in range(0, len(data), 8)]
        return [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data), 8)]


# ---------------------------------------------------------------------------------------------
# The walk


class Unwinder:
    """Walks stacks for one address space; caches row lookups across walks.

    >>> from pysframe import SFrameBuilder
    >>> b = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE)
    >>> _ = b.add_function(0x1000, 0x10).add_undefined_ra_row(0)
    >>> u = Unwinder(Abi.AMD64_ENDIAN_LITTLE, lambda pc: ModuleInfo("m", section=b.build()))
    >>> u.unwind(Registers(pc=0x1004, sp=0x8000, fp=0), lambda a, n: b"").stop.value
    'outermost'
    """

    __slots__ = (
        "_find_module", "_rows", "_trampolines", "arch", "fp_fallback", "max_frames", "names",
        "va_bits",
    )

    #: Row lookups, and answers to "is the code at this PC a signal trampoline", kept.
    CACHE_SIZE = 1 << 16

    def __init__(
        self,
        abi: Abi,
        find_module: FindModule,
        *,
        max_frames: int = DEFAULT_MAX_FRAMES,
        fp_fallback: bool = True,
        va_bits: int = DEFAULT_VA_BITS,
        names: bool = True,
    ) -> None:
        if max_frames < 1:
            raise UnwindError(f"max_frames must be at least 1, not {max_frames}")
        self.arch = Arch.of(Abi(abi))
        #: Whether frames are named with the modules' symbolizers (a recording's frames are
        #: named afterwards, as perf names them).
        self.names = names
        self._find_module = find_module
        self.max_frames = max_frames
        self.fp_fallback = fp_fallback
        self.va_bits = va_bits
        self._rows: BoundedCache[tuple[int, int], _Found | None] = BoundedCache(self.CACHE_SIZE)
        self._trampolines: BoundedCache[tuple[int, int], bool] = BoundedCache(self.CACHE_SIZE)

    @property
    def abi(self) -> Abi:
        return self.arch.abi

    def start(self, registers: Registers) -> WalkState:
        """The state of a walk from a thread's registers (frame 0)."""
        return WalkState(registers.pc & _MASK64, registers.by_dwarf(self.arch.abi), True, True)

    def unwind(self, registers: Registers, read_memory: ReadMemory) -> Backtrace:
        """Walk one thread's stack."""
        memory = _Memory(read_memory, self.arch.big_endian)
        state = self.start(registers)
        frames: list[Frame] = []
        while state.index < self.max_frames:
            step = self._step(state, memory)
            frames.append(step.frame)
            if step.caller is None:
                assert step.stop is not None
                return Backtrace(tuple(frames), step.stop, step.reason)
            state = step.caller
        return Backtrace(
            tuple(frames), StopKind.MAX_FRAMES, f"stopped after {self.max_frames} frames"
        )

    def step(
        self, state: WalkState, read_memory: ReadMemory, find_module: FindModule | None = None
    ) -> Step:
        """The frame at ``state`` and its caller's state: the walk's one step.
        ``find_module``: the modules of the walk's address space, when they are not the
        unwinder's (a recording's processes)."""
        memory = _Memory(read_memory, self.arch.big_endian)
        return self._step(state, memory, find_module or self._find_module)

    def _step(
        self, state: WalkState, memory: _Memory, find_module: FindModule | None = None
    ) -> Step:
        arch = self.arch
        index, pc, source = state.index, state.pc, state.source
        lookup_pc = state.lookup_pc
        sp = state.regs.get(arch.sp)
        try:
            module = (find_module or self._find_module)(lookup_pc)
            usable = module if module is not None and module.problem is None else None
            symbol = _symbolize(usable, lookup_pc, pc) if self.names else (None, None)
            found = self._row(usable, lookup_pc)
        except Exception as error:  # a caller's callable failed: this walk stops, marked
            frame = _frame((index, pc, sp, source, None, None, None, False), None, False, None)
            reason = _failure("find_module or the module's callables", error)
            return Step(frame, None, StopKind.CALLBACK_FAILED, reason)
        frame_args = (
            index, pc, sp, source, module.name if module else None, *symbol, found is not None,
        )
        trampoline = False
        try:
            trampoline = self._is_trampoline(memory, state, usable, found)
            if trampoline:
                if sp is None:
                    raise _Stop(StopKind.UNKNOWN_REGISTER, "signal frame without a known SP")
                caller = self._signal_context(memory, sp, index + 1)
                return Step(_frame(frame_args, sp, True, module), caller)
            if found is not None:
                cfa, caller = self._step_sframe(memory, state, found)
            elif self.fp_fallback:
                cfa, caller = self._step_frame_pointer(memory, state)
            else:
                raise _Stop(StopKind.NO_UNWIND_INFO, f"no SFrame row covers {lookup_pc:#x}")
        except _Stop as stop:
            return Step(_frame(frame_args, stop.cfa, trampoline, module), None, stop.kind,
                        stop.reason)  # fmt: skip
        return Step(_frame(frame_args, cfa, False, module), caller)

    # -- lookups ------------------------------------------------------------------------------

    def _row(self, module: ModuleInfo | None, pc: int) -> _Found | None:
        """The SFrame row covering ``pc`` and facts about its function, cached."""
        if module is None:
            return None
        found = self._row_in(module.section, pc)
        if found is None and module.fallback is not None:
            found = self._row_in(module.fallback(), pc)
        return found

    def _row_in(self, section: RowLookup | None, pc: int) -> _Found | None:
        if section is None:
            return None
        return self._rows.get((id(section), pc), _found_in, section, pc)

    def _is_trampoline(
        self, memory: _Memory, state: WalkState, module: ModuleInfo | None, found: _Found | None
    ) -> bool:
        """Is the frame at ``state.pc`` a signal trampoline (by SFrame flag or by its code)?"""
        pc = state.pc
        if found is not None and found.signal_frame:
            return True
        if not state.exact_pc:
            # The return address is the trampoline's first instruction: pc - 1 may be outside.
            exact = self._row(module, pc)
            if exact is not None and exact.signal_frame:
                return True
        return self._trampolines.get((id(module), pc), self._sigreturn_at, memory, module, pc)

    def _sigreturn_at(self, memory: _Memory, module: ModuleInfo | None, pc: int) -> bool:
        """Whether the code at ``pc`` is the signal return trampoline: read from memory, else
        (a stack copy holds no code) from the module's file."""
        pattern = sigreturn_code(self.arch.abi)
        try:
            return memory.read(pc, len(pattern)) == pattern
        except _Stop:
            pass
        if module is None or module.trampolines is None:
            return False
        try:
            known = module.trampolines()
        except Exception:  # the module's callable failed: its code is not known
            return False
        at = bisect_left(known, pc)
        return at < len(known) and known[at] == pc

    # -- signal frames ----------------------------------------------------------------------------

    def _signal_context(self, memory: _Memory, sp: int, index: int) -> WalkState:
        abi = self.arch.abi
        if abi is Abi.AMD64_ENDIAN_LITTLE:
            values = memory.words(sp + _AMD64_GREGS_OFFSET, 17)
            regs = dict(zip(_AMD64_GREGS_DWARF, values[:16], strict=True))
            return WalkState(values[16], regs, True, True, index, None, FrameSource.SIGNAL)
        if abi.is_aarch64:
            values = memory.words(sp + _AARCH64_SIGCONTEXT_OFFSET + 8, 33)
            regs = {number: values[number] for number in range(31)}
            regs[31] = values[31]
            return WalkState(values[32], regs, True, True, index, None, FrameSource.SIGNAL)
        raise _Stop(StopKind.UNSUPPORTED, f"signal frames are not unwound on {abi.name}")

    # -- SFrame rules ------------------------------------------------------------------------

    def _step_sframe(
        self, memory: _Memory, state: WalkState, found: _Found
    ) -> tuple[int, WalkState]:
        arch = self.arch
        row = found.row
        if row.cfa is None or row.ra.kind is RuleKind.UNDEFINED:
            raise _Stop(StopKind.OUTERMOST, "outermost frame (return address undefined)")
        base = _register(state, row.cfa.reg, "the CFA")
        cfa = (base + row.cfa.offset) & _MASK64
        if row.cfa.deref:
            cfa = memory.word(cfa)
        _check_cfa(arch, state, cfa)
        try:
            ra_rule = row.ra
            if found.fixed_ra_offset and ra_rule.kind in (RuleKind.UNTRACKED, RuleKind.PADDING):
                # FLEX rows with only an FP pair carry a padding word for the RA, which stays
                # at the header's fixed offset (AMD64).
                ra_rule = RegRule.fixed(found.fixed_ra_offset)
            ra = self._recover(memory, state, cfa, ra_rule, arch.ra, "return address")
            if ra is None:
                raise _Stop(StopKind.OUTERMOST, "outermost frame (return address undefined)")
            if row.mangled_ra:
                ra &= (1 << self.va_bits) - 1
            try:
                fp = self._recover(memory, state, cfa, row.fp, arch.fp, "frame pointer")
            except _Stop as stop:
                if stop.kind is not StopKind.UNREADABLE:
                    raise
                # A saved FP that cannot be read is unknown, not the end of the walk (as
                # libdw and gdb leave such a register unset): a frame that needs it stops.
                fp = None
        except _Stop as stop:
            stop.cfa = cfa
            raise
        caller = self._caller(state, cfa, (cfa + arch.sp_at_cfa) & _MASK64, fp, ra)
        return cfa, caller

    def _recover(
        self, memory: _Memory, state: WalkState, cfa: int, rule: RegRule, own_reg: int, what: str
    ) -> int | None:
        kind = rule.kind
        if kind in (RuleKind.FIXED, RuleKind.SAVED):
            base = cfa if rule.reg is None else _register(state, rule.reg, f"the {what}")
            return memory.word((base + rule.offset) & _MASK64)
        if kind is RuleKind.VALUE:
            base = cfa if rule.reg is None else _register(state, rule.reg, f"the {what}")
            return (base + rule.offset) & _MASK64
        if kind is RuleKind.UNDEFINED:
            return None
        # UNTRACKED / PADDING: the register still holds the value (link register for the RA).
        if own_reg in state.regs:
            return state.regs[own_reg]
        if what == "frame pointer":
            return None
        raise _Stop(
            StopKind.UNKNOWN_REGISTER,
            f"{what} is in register {own_reg}, whose value is known only in the first frame",
        )

    def _caller(
        self, state: WalkState, cfa: int, sp: int | None, fp: int | None, ra: int,
        source: FrameSource = FrameSource.SFRAME,
    ) -> WalkState:  # fmt: skip
        if ra == 0:
            raise _Stop(StopKind.OUTERMOST, "outermost frame (return address 0)")
        regs: dict[int, int] = {}
        if sp is not None:
            regs[self.arch.sp] = sp
        if fp is not None:
            regs[self.arch.fp] = fp
        return WalkState(ra, regs, False, False, state.index + 1, cfa, source)

    # -- frame-pointer fallback -----------------------------------------------------------------

    def _step_frame_pointer(self, memory: _Memory, state: WalkState) -> tuple[int, WalkState]:
        """Frame record at FP: [FP] = caller's FP, [FP + 8] = RA; CFA = FP + 16."""
        arch = self.arch
        if not arch.fp_chain:
            raise _Stop(StopKind.NO_UNWIND_INFO, f"no SFrame row covers {state.pc:#x}")
        fp = state.regs.get(arch.fp)
        if fp == 0 and state.source is FrameSource.FRAME_POINTER:
            # The chain's end: the outermost frame keeps a frame pointer of 0 (x86-64 psABI
            # 3.4.1, "the user code should mark the deepest stack frame by setting the frame
            # pointer to zero"; AAPCS64, "The Frame Pointer": a frame record whose previous
            # frame address is 0 ends the chain).
            raise _Stop(StopKind.OUTERMOST, "outermost frame (frame pointer 0 ends the chain)")
        if fp is None or fp == 0:
            raise _Stop(
                StopKind.NO_UNWIND_INFO,
                f"no SFrame row covers {state.pc:#x} and there is no frame pointer",
            )
        if fp % 8:
            raise _Stop(StopKind.CFA_MISALIGNED, f"frame pointer {fp:#x} is misaligned")
        sp = state.regs.get(arch.sp)
        if sp is not None and fp < sp:
            raise _Stop(StopKind.CFA_NOT_GROWING, f"frame pointer {fp:#x} is below SP {sp:#x}")
        cfa = (fp + 16) & _MASK64
        _check_cfa(arch, state, cfa, align=8)
        caller_fp, ra = memory.words(fp, 2)
        if arch.abi.is_aarch64:
            ra &= (1 << self.va_bits) - 1
        # AMD64: push %rbp; mov %rsp, %rbp puts the record right below the CFA.  AArch64 puts
        # it anywhere in the frame: the caller's SP is unknown.
        caller_sp = cfa if arch.abi is Abi.AMD64_ENDIAN_LITTLE else None
        caller = self._caller(state, cfa, caller_sp, caller_fp, ra, FrameSource.FRAME_POINTER)
        return cfa, caller


def _found_in(section: RowLookup, pc: int) -> _Found | None:
    """The row of ``section`` at ``pc`` (None: none, or a section the lookup rejects)."""
    try:
        result = section.find_row(pc)
    except SFrameError:
        return None
    if result is None:
        return None
    header = section.header
    return _Found(result.row, result.function.signal_frame, header.cfa_fixed_ra_offset)


def _frame(
    args: tuple[int, int, int | None, FrameSource, str | None, str | None, int | None, bool],
    cfa: int | None,
    trampoline: bool,
    module: ModuleInfo | None,
) -> Frame:
    index, pc, sp, source, name, symbol, offset, covered = args
    return Frame(
        index, pc, sp, cfa, source, name, symbol, offset, covered, trampoline,
        module.problem if module else None,
    )


def _failure(what: str, error: Exception) -> str:
    return f"{what} failed: {type(error).__name__}: {error}"


def _symbolize(module: ModuleInfo | None, lookup_pc: int, pc: int) -> tuple[str | None, int | None]:
    if module is None or module.symbolize is None:
        return None, None
    found = module.symbolize(lookup_pc)
    if found is None:
        return None, None
    name, offset = found
    return name, offset + (pc - lookup_pc)


def _register(state: WalkState, reg: int, what: str) -> int:
    value = state.regs.get(reg)
    if value is None:
        where = "" if state.all_registers else " (register rules hold only in the first frame)"
        raise _Stop(
            StopKind.UNKNOWN_REGISTER, f"{what} needs register {reg}, whose value is unknown{where}"
        )
    return value


def _check_cfa(arch: Arch, state: WalkState, cfa: int, align: int | None = None) -> None:
    if cfa % (align or arch.cfa_align):
        raise _Stop(StopKind.CFA_MISALIGNED, f"CFA {cfa:#x} is misaligned")
    prev_cfa = state.prev_cfa
    if prev_cfa is not None and cfa <= prev_cfa:
        raise _Stop(
            StopKind.CFA_NOT_GROWING, f"CFA {cfa:#x} does not grow (previous {prev_cfa:#x})"
        )
    sp = state.regs.get(arch.sp)
    if sp is not None and cfa < sp:
        raise _Stop(StopKind.CFA_NOT_GROWING, f"CFA {cfa:#x} is below SP {sp:#x}")


def unwind(
    abi: Abi,
    registers: Registers,
    read_memory: ReadMemory,
    find_module: FindModule,
    *,
    max_frames: int = DEFAULT_MAX_FRAMES,
    fp_fallback: bool = True,
    va_bits: int = DEFAULT_VA_BITS,
) -> Backtrace:
    """Walk one stack; see :class:`Unwinder` to reuse lookups across threads."""
    unwinder = Unwinder(
        abi, find_module, max_frames=max_frames, fp_fallback=fp_fallback, va_bits=va_bits
    )
    return unwinder.unwind(registers, read_memory)


def single_module(section: RowLookup, name: str = "") -> FindModule:
    """A ``find_module`` for one section covering everything (for tests and simple uses)."""
    info = ModuleInfo(name, section=section)
    return lambda pc: info


__all__ = [
    "Arch",
    "Backtrace",
    "FindModule",
    "Frame",
    "FrameSource",
    "ModuleInfo",
    "ReadMemory",
    "Registers",
    "RowLookup",
    "Step",
    "StopKind",
    "Unwinder",
    "WalkState",
    "sigreturn_code",
    "single_module",
    "unwind",
]
