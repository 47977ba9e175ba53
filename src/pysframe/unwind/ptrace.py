"""Live processes: stop every thread with ptrace, read registers and memory, detach cleanly.

Linux only, through ctypes (ptrace(2)):

* each thread is attached with PTRACE_SEIZE and stopped with PTRACE_INTERRUPT (threads that
  appear meanwhile are attached too, for a bounded number of rounds);
* registers come from PTRACE_GETREGSET with NT_PRSTATUS (the ``user_regs_struct`` layout, the
  same as ``pr_reg`` in a core file's NT_PRSTATUS note);
* memory is read from /proc/PID/mem;
* every attached thread is detached whatever happens (errors, Ctrl-C), a signal that stopped a
  thread instead of our interrupt being handed back to it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..dataclass import dataclass
from ..errors import UnwindError
from ..format.constants import Abi
from .core import S390X_FPR_DWARF, Registers

PTRACE_GETREGSET = 0x4204
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_DETACH = 17
PTRACE_EVENT_STOP = 128
NT_PRSTATUS = 1
WALL = 0x40000000

#: Attach rounds: threads created while attaching are picked up by the next round.
_ATTACH_ROUNDS = 100
_REGSET_BUFFER = 1024


class AttachError(UnwindError):
    """The process cannot be attached (permission, already traced...)."""


class NoSuchProcessError(UnwindError):
    """No process has this PID."""


@dataclass(frozen=True, slots=True)
class ThreadState:
    tid: int
    registers: Registers


# ---------------------------------------------------------------------------------------------
# Register layouts (Linux user_regs_struct / elf_gregset_t)

#: AMD64 user_regs_struct slot -> DWARF register number (rax 0, rdx 1, rcx 2, rbx 3, rsi 4,
#: rdi 5, rbp 6, rsp 7, r8-r15 8-15).  Slots: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx
#: rdx rsi rdi orig_rax rip cs eflags rsp ...
_AMD64_SLOTS = {
    0: 15, 1: 14, 2: 13, 3: 12, 4: 6, 5: 3, 6: 11, 7: 10, 8: 9, 9: 8,
    10: 0, 11: 2, 12: 1, 13: 4, 14: 5, 19: 7,
}
_AMD64_RIP, _AMD64_RSP, _AMD64_RBP = 16, 19, 4
_AMD64_SIZE = 27 * 8
#: AArch64 user_pt_regs: x0..x30, sp, pc, pstate.
_AARCH64_SIZE = 34 * 8
#: s390x s390_regs: psw mask, psw addr, r0..r15, ...
_S390X_MIN_SIZE = 18 * 8


def host_abi() -> Abi:
    """The ABI of the machine pysframe runs on (the processes it can attach to)."""
    machine = os.uname().machine
    if machine in ("x86_64", "amd64"):
        return Abi.AMD64_ENDIAN_LITTLE
    if machine in ("aarch64", "arm64"):
        return Abi.AARCH64_ENDIAN_LITTLE
    if machine == "s390x":
        return Abi.S390X_ENDIAN_BIG
    raise UnwindError(f"unwinding live processes is not supported on {machine}")


def registers_from_gregs(abi: Abi, data: bytes) -> Registers:
    """Registers from a Linux general-purpose register block (NT_PRSTATUS layout)."""
    order: str = "big" if abi.big_endian else "little"

    def word(slot: int) -> int:
        return int.from_bytes(data[8 * slot : 8 * slot + 8], order)  # type: ignore[arg-type]

    if abi is Abi.AMD64_ENDIAN_LITTLE:
        _need(data, _AMD64_SIZE, abi)
        extra = tuple((dwarf, word(slot)) for slot, dwarf in _AMD64_SLOTS.items())
        return Registers(word(_AMD64_RIP), word(_AMD64_RSP), word(_AMD64_RBP), extra=extra)
    if abi.is_aarch64:
        _need(data, _AARCH64_SIZE, abi)
        extra = tuple((n, word(n)) for n in range(32))
        return Registers(word(32), word(31), word(29), lr=word(30), extra=extra)
    _need(data, _S390X_MIN_SIZE, abi)
    gprs = [word(2 + n) for n in range(16)]
    extra = tuple(enumerate(gprs))
    return Registers(word(1), gprs[15], gprs[11], lr=gprs[14], extra=extra)


def s390x_fpr_registers(fprs: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """(DWARF number, value) of the s390x floating-point registers f0..f15, in that order: where
    a leaf function may keep its return address or frame pointer (the SFrame s390x register
    rules)."""
    return tuple(zip(S390X_FPR_DWARF, fprs, strict=False))


def _need(data: bytes, size: int, abi: Abi) -> None:
    if len(data) < size:
        raise UnwindError(
            f"register block of {len(data)} bytes is too short for {abi.name} ({size} bytes); "
            "32-bit processes are not supported"
        )


# ---------------------------------------------------------------------------------------------
# ptrace through ctypes


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_libc: ctypes.CDLL | None = None


def _ptrace(request: int, tid: int, addr: int | None = None, data: int | None = None) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        _libc.ptrace.restype = ctypes.c_long
    ctypes.set_errno(0)
    result = int(_libc.ptrace(request, tid, addr, data))
    if result == -1:
        error = ctypes.get_errno()
        if error:
            raise OSError(error, os.strerror(error))
    return result


class Process:
    """A stopped process; use :func:`attach`."""

    def __init__(self, pid: int, abi: Abi) -> None:
        self.pid = pid
        self.abi = abi
        #: Attached threads and the signal to hand back at detach (0: none).
        self.attached: dict[int, int] = {}
        self._mem: int | None = None

    # -- attaching ------------------------------------------------------------------------------

    def _attach_all(self) -> None:
        for _ in range(_ATTACH_ROUNDS):
            new = [tid for tid in _list_threads(self.pid) if tid not in self.attached]
            if not new:
                return
            for tid in new:
                self._attach_thread(tid)
        raise AttachError(f"process {self.pid} keeps creating threads; gave up attaching")

    def _attach_thread(self, tid: int) -> None:
        try:
            _ptrace(PTRACE_SEIZE, tid, 0, 0)
        except OSError as error:
            if error.errno == errno.ESRCH:
                return  # the thread exited
            if error.errno == errno.EPERM:
                raise AttachError(
                    f"no permission to attach to process {self.pid} (thread {tid}): "
                    "run as the same user or as root, and check /proc/sys/kernel/yama/ptrace_scope"
                ) from None
            raise AttachError(f"cannot attach to thread {tid}: {error.strerror}") from None
        self.attached[tid] = 0
        try:
            _ptrace(PTRACE_INTERRUPT, tid, 0, 0)
        except OSError as error:
            if error.errno == errno.ESRCH:
                self.attached.pop(tid, None)
                return
            raise AttachError(f"cannot stop thread {tid}: {error.strerror}") from None
        self._wait_stop(tid)

    def _wait_stop(self, tid: int) -> None:
        try:
            _, status = os.waitpid(tid, WALL)
        except ChildProcessError:
            self.attached.pop(tid, None)
            return
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            self.attached.pop(tid, None)
            return
        if os.WIFSTOPPED(status) and status >> 16 != PTRACE_EVENT_STOP:
            # A signal-delivery stop came first: deliver the signal when detaching.
            self.attached[tid] = os.WSTOPSIG(status)

    def detach(self) -> None:
        """Detach every thread (safe to call twice)."""
        if self._mem is not None:
            os.close(self._mem)
            self._mem = None
        while self.attached:
            tid, signo = self.attached.popitem()
            with contextlib.suppress(OSError):  # the thread may have exited meanwhile
                _ptrace(PTRACE_DETACH, tid, 0, signo)

    # -- reading --------------------------------------------------------------------------------

    @property
    def threads(self) -> list[int]:
        """Attached thread ids, the main thread first."""
        return sorted(self.attached, key=lambda tid: (tid != self.pid, tid))

    def registers(self, tid: int) -> Registers:
        buffer = ctypes.create_string_buffer(_REGSET_BUFFER)
        iov = _IoVec(ctypes.cast(buffer, ctypes.c_void_p), _REGSET_BUFFER)
        try:
            _ptrace(PTRACE_GETREGSET, tid, NT_PRSTATUS, ctypes.addressof(iov))
        except OSError as error:
            if error.errno == errno.ESRCH:
                raise _ThreadGone(f"thread {tid} exited") from None
            raise UnwindError(
                f"cannot read the registers of thread {tid}: {error.strerror}"
            ) from None
        return registers_from_gregs(self.abi, buffer.raw[: iov.iov_len])

    def read_memory(self, address: int, size: int) -> bytes:
        if self._mem is None:
            self._mem = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
        return os.pread(self._mem, size, address)

    def snapshot(self) -> list[ThreadState]:
        """The registers of every attached thread; a thread that exited since it was stopped
        (killed meanwhile) is left out, and the others are still given."""
        states = []
        for tid in self.threads:
            try:
                states.append(ThreadState(tid, self.registers(tid)))
            except _ThreadGone:
                self.attached.pop(tid, None)
        return states


class _ThreadGone(UnwindError):
    """A thread that no longer exists (ESRCH)."""


def _list_threads(pid: int) -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        raise NoSuchProcessError(f"no such process: {pid}") from None
    except PermissionError:
        raise AttachError(f"no permission to read /proc/{pid}/task") from None


#: PF_KTHREAD in /proc/PID/stat's flags (linux/sched.h).
_PF_KTHREAD = 0x00200000


def _untraceable(pid: int) -> str | None:
    """Why ``pid`` cannot be traced, when /proc says so before ptrace would only say EPERM:
    a zombie (it has exited and holds no address space: proc(5) state Z) or a dead process
    (X), a kernel thread (no user-space stack), or a process another tracer holds (a process
    has one tracer at a time, proc(5) "TracerPid")."""
    try:
        stat_fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, IndexError):
        return None  # ptrace itself will say what is wrong
    # After "pid (comm)": state is field 3 and flags field 9 (proc(5)).
    state = stat_fields[0] if stat_fields else ""
    if state in ("Z", "X"):
        return (
            f"process {pid} has exited (a zombie its parent has not yet waited for): it has "
            "no stack to unwind"
        )
    if len(stat_fields) > 6 and int(stat_fields[6]) & _PF_KTHREAD:
        return f"process {pid} is a kernel thread: it has no user-space stack to unwind"
    tracer = next(
        (int(line.split()[1]) for line in status.splitlines() if line.startswith("TracerPid:")),
        0,
    )
    if tracer and tracer != os.getpid():
        try:
            name = Path(f"/proc/{tracer}/comm").read_text().strip()
        except OSError:
            name = "?"
        return (
            f"process {pid} is already traced by process {tracer} ({name}): a process has "
            "one tracer at a time; detach that one first"
        )
    return None


@contextmanager
def attach(pid: int) -> Iterator[Process]:
    """Stop every thread of ``pid``; detach on leaving, even on error or KeyboardInterrupt."""
    if pid <= 0:
        raise NoSuchProcessError(f"no such process: {pid}")
    if pid == os.getpid():
        raise AttachError("pysframe cannot attach to itself")
    if not os.path.exists(f"/proc/{pid}"):
        raise NoSuchProcessError(f"no such process: {pid}")
    refusal = _untraceable(pid)
    if refusal is not None:
        raise AttachError(refusal)
    process = Process(pid, host_abi())
    # Ctrl-C while threads are stopped must still detach them: mask SIGINT only around the
    # detach itself, the rest of the work stays interruptible.
    try:
        process._attach_all()
        if not process.attached:
            raise NoSuchProcessError(f"no such process: {pid} (it exited)")
        yield process
    finally:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            process.detach()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


__all__ = [
    "AttachError",
    "NoSuchProcessError",
    "Process",
    "ThreadState",
    "attach",
    "host_abi",
    "registers_from_gregs",
    "s390x_fpr_registers",
]
