"""Remote targets: a program stopped under a GDB remote stub (``gdbserver``, ``qemu-user -g``),
read through the remote protocol (gdb manual, "Remote Protocol"; packets in :mod:`.rsp`).

* ``qSupported``: the stub's packet size and which ``qXfer`` objects it serves;
* the target description (``qXfer:features:read``, ``target.xml`` and the files it
  ``xi:include``\\ s) names each register, its size and number; without one, the ABI's core
  registers are assumed in gdb's order;
* ``qfThreadInfo`` / ``qsThreadInfo`` list the threads, ``Hg`` selects one, ``g`` reads its
  registers (``p`` those the ``g`` reply leaves out), ``m`` reads memory;
* ``qXfer:auxv:read`` gives the auxiliary vector, ``qXfer:exec-file:read`` the executable's
  path on the target (when the stub knows it);
* ``vCont;c`` / ``c`` resumes until the next stop (a signal such as SIGABRT, a breakpoint),
  ``D`` detaches, leaving the program running.

The stub's answers are checked as file input is: each exchange ends within ``timeout`` seconds
and the whole session within ``time_limit`` (:meth:`RemoteTarget.connect`; 30 s and 120 s by
default, the bounds of :mod:`.rsp`); an object (``qXfer``) holds at most 1 MiB, and each of its
parts must add to it; the thread list at most 65,536 threads, each reply naming a new one;
thread ids are 1 to 16 hex digits; memory is read at most 1 MiB at a time, each ``m`` reply
must give between one byte and the bytes asked for, in hex, and at most 4 MiB of it is cached;
paths (the executable's) hold no NUL byte.  A reply that breaks the protocol (an empty or
malformed ``m`` reply, a timeout) fails the connection for good: later requests fail at once,
and the failure is raised again when the target is closed, so that a caller which took a read
that failed for it as unreadable memory still ends with the error.  Every error names the
target (``HOST:PORT``) as its path.
"""

from __future__ import annotations

import binascii
import contextlib
import os
import re
from collections.abc import Callable
from types import TracebackType
from xml.parsers import expat

from ..dataclass import dataclass
from ..format.constants import Abi
from .core import S390X_FPR_DWARF, Registers
from .mappings import auxv_entries
from .ptrace import ThreadState
from .rsp import (
    EXCHANGE_TIMEOUT,
    MAX_PACKET,
    TIME_LIMIT,
    Connection,
    RemoteError,
    unescape_binary,
)

#: Bytes of a ``qXfer`` object accepted (auxv, a path), and of the target description's files
#: together; files the description may include.
_MAX_OBJECT = 1 << 20
_MAX_INCLUDES = 64
#: The longest path accepted (Linux's PATH_MAX).
_MAX_PATH = 4096
_MAX_THREADS = 1 << 16
#: Memory is read in aligned blocks of this many bytes and cached while the target is stopped
#: (at most this many blocks: 4 MiB); one read gives at most _MAX_READ bytes.
_BLOCK = 256
_MAX_CACHED_BLOCKS = 1 << 14
_MAX_READ = 1 << 20
_ADDRESS_END = 1 << 64
#: A file the target description includes, as it may be asked for.
_ANNEX = re.compile(r"[^\x00-\x1f$#}*:\x7f]{1,256}")
#: Reads one file of the target description (``target.xml``, the files it includes).
AnnexReader = Callable[[str], bytes]
#: gdb's architecture names in target descriptions, per ABI.
_ARCHITECTURES = {
    "aarch64": (Abi.AARCH64_ENDIAN_LITTLE, Abi.AARCH64_ENDIAN_BIG),
    "s390:64-bit": (Abi.S390X_ENDIAN_BIG,),
    "i386:x86-64": (Abi.AMD64_ENDIAN_LITTLE,),
}


def _amd64_names() -> tuple[str, ...]:
    return (
        "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
        *(f"r{n}" for n in range(8, 16)), "rip",
    )


#: The core registers of each ABI in gdb's order (its built-in descriptions), all 64 bits: the
#: layout of a ``g`` reply when the stub sends no target description.
_DEFAULT_REGISTERS: dict[Abi, tuple[str, ...]] = {
    Abi.AARCH64_ENDIAN_LITTLE: (*(f"x{n}" for n in range(31)), "sp", "pc"),
    Abi.AARCH64_ENDIAN_BIG: (*(f"x{n}" for n in range(31)), "sp", "pc"),
    Abi.S390X_ENDIAN_BIG: ("pswm", "pswa", *(f"r{n}" for n in range(16))),
    Abi.AMD64_ENDIAN_LITTLE: _amd64_names(),
}
#: AMD64 register name -> DWARF number.
_AMD64_DWARF = {
    "rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
    **{f"r{n}": n for n in range(8, 16)},
}


@dataclass(frozen=True, slots=True)
class RemoteRegister:
    """A register of the target description: its name, number and size in bits."""

    name: str
    number: int
    bits: int


@dataclass(frozen=True, slots=True)
class TargetDescription:
    architecture: str | None
    registers: tuple[RemoteRegister, ...]

    def abis(self) -> tuple[Abi, ...]:
        """The ABIs the architecture may be (empty: not named, or not one SFrame has)."""
        return _ARCHITECTURES.get(self.architecture or "", ())


def parse_target_description(read_annex: AnnexReader) -> TargetDescription:
    """The description in ``target.xml`` and the files it includes (gdb manual, "Target
    Description Format"): registers numbered in document order unless ``regnum`` says."""
    architecture: str | None = None
    registers: list[RemoteRegister] = []
    includes = 0
    size = 0

    def walk(annex: str, depth: int) -> None:
        nonlocal architecture, includes, size
        if depth > 8:
            raise RemoteError(f"target description {annex}: includes nest too deep")
        text = read_annex(annex)
        size += len(text)
        if size > _MAX_OBJECT:
            raise RemoteError(f"the target description is larger than {_MAX_OBJECT} bytes")
        for kind, value in _description_items(annex, text):
            if kind == "architecture":
                architecture = architecture or value["text"]
            elif kind == "include":
                includes += 1
                if includes > _MAX_INCLUDES:
                    raise RemoteError("the target description includes too many files")
                if not _ANNEX.fullmatch(value["href"]):
                    # It goes into a qXfer request: no packet framing, no ':' (the field
                    # separator there).
                    raise RemoteError(
                        f"target description {annex}: a bad include {_shown(value['href'])}"
                    )
                walk(value["href"], depth + 1)
            else:
                registers.append(_register(annex, value, registers))

    walk("target.xml", 0)
    return TargetDescription(architecture, tuple(registers))


def _register(annex: str, attrs: dict[str, str], before: list[RemoteRegister]) -> RemoteRegister:
    try:
        number = int(attrs["regnum"]) if "regnum" in attrs else (
            before[-1].number + 1 if before else 0
        )
        bits = int(attrs["bitsize"])
        if not 0 < bits <= 4096 or number < 0:
            raise ValueError
        return RemoteRegister(attrs["name"], number, bits)
    except (KeyError, ValueError):
        raise RemoteError(
            f"target description {annex}: a bad register {_shown(repr(attrs))}"
        ) from None


def _description_items(annex: str, text: bytes) -> list[tuple[str, dict[str, str]]]:
    """``architecture``, ``include`` and ``reg`` elements in document order.  expat without
    namespace processing: stubs write ``xi:include`` without declaring the prefix."""
    items: list[tuple[str, dict[str, str]]] = []
    in_architecture = False
    architecture_text: list[str] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        nonlocal in_architecture
        if name == "architecture":
            in_architecture = True
            architecture_text.clear()
        elif name == "xi:include" and "href" in attrs:
            items.append(("include", {"href": attrs["href"]}))
        elif name == "reg":
            items.append(("reg", dict(attrs)))

    def end(name: str) -> None:
        nonlocal in_architecture
        if name == "architecture":
            in_architecture = False
            items.append(("architecture", {"text": "".join(architecture_text).strip()}))

    def characters(data: str) -> None:
        if in_architecture:
            architecture_text.append(data)

    parser = expat.ParserCreate()
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(text, True)
    except expat.ExpatError as error:
        raise RemoteError(f"target description {annex}: {error}") from None
    return items


def registers_from_names(abi: Abi, values: dict[str, int]) -> Registers:
    """Registers from their values by target-description name; RemoteError without PC/SP."""

    def need(name: str) -> int:
        if name not in values:
            raise RemoteError(f"the target did not give register {name}")
        return values[name]

    if abi is Abi.AMD64_ENDIAN_LITTLE:
        extra = tuple((dwarf, values[name]) for name, dwarf in _AMD64_DWARF.items()
                      if name in values)
        return Registers(need("rip"), need("rsp"), values.get("rbp", 0), extra=extra)
    if abi.is_aarch64:
        extra = tuple((n, values[f"x{n}"]) for n in range(31) if f"x{n}" in values)
        return Registers(need("pc"), need("sp"), values.get("x29", 0), lr=values.get("x30"),
                         extra=extra)
    gprs = tuple((n, values[f"r{n}"]) for n in range(16) if f"r{n}" in values)
    fprs = tuple((S390X_FPR_DWARF[n], values[f"f{n}"]) for n in range(16) if f"f{n}" in values)
    return Registers(
        need("pswa"), need("r15"), values.get("r11", 0), lr=values.get("r14"), extra=gprs + fprs
    )


#: The registers the unwinder uses, per ABI (the others are not read).
def _wanted(abi: Abi) -> frozenset[str]:
    if abi is Abi.AMD64_ENDIAN_LITTLE:
        return frozenset((*_AMD64_DWARF, "rip"))
    if abi.is_aarch64:
        return frozenset((*(f"x{n}" for n in range(31)), "sp", "pc", "pauth_cmask"))
    return frozenset(
        ("pswa", *(f"r{n}" for n in range(16)), *(f"f{n}" for n in range(16)))
    )


#: ``p<pid>.<tid>`` or ``<tid>`` as a stub lists threads (gdb manual, "thread-id syntax"): the
#: -1 and 0 of requests ("all", "any") name no thread there.
_THREAD_ID = re.compile(rb"(?:p([0-9a-fA-F]{1,16})\.)?([0-9a-fA-F]{1,16})")


@dataclass(frozen=True, slots=True)
class RemoteThread:
    """A thread as the stub names it (``p<pid>.<tid>`` with multiprocess extensions)."""

    ident: bytes
    pid: int | None
    tid: int

    @classmethod
    def parse(cls, ident: bytes) -> RemoteThread:
        match = _THREAD_ID.fullmatch(ident)
        if match is None:
            raise RemoteError(f"a bad thread id {_shown(ident)}")
        pid = int(match.group(1), 16) if match.group(1) else None
        return cls(ident, pid, int(match.group(2), 16))


class RemoteTarget:
    """A connection to a stopped remote target; use :meth:`connect` and close it (or use it
    as a context manager), which detaches and leaves the program running.  As a context
    manager, it raises the connection's failure on the way out when nothing else is raised
    (see the module docstring)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.name = connection.name
        self.features: dict[str, str] = {}
        self.packet_size = 4096
        self.stop_reply = b""
        self._description: TargetDescription | None = None
        self._threads: list[RemoteThread] | None = None
        self._cache: dict[int, bytes] = {}
        self.detached = False

    @classmethod
    def connect(
        cls,
        address: str,
        timeout: float = EXCHANGE_TIMEOUT,
        time_limit: float | None = TIME_LIMIT,
    ) -> RemoteTarget:
        """Connect to ``HOST:PORT`` and learn what the stub supports and why it stopped.
        ``timeout``: seconds each exchange with the stub may take; ``time_limit``: seconds
        all of them may take (None: no limit), counted again after :meth:`resume`."""
        host, port = parse_address(address)
        target = cls(Connection.open(host, port, timeout, time_limit))
        try:
            target._handshake()
        except BaseException:
            target.connection.close()
            raise
        return target

    def _error(self, message: str) -> RemoteError:
        return RemoteError(message, path=self.name)

    def _handshake(self) -> None:
        reply = self.connection.request(
            b"qSupported:multiprocess+;swbreak+;hwbreak+;vContSupported+;xmlRegisters=i386"
        )
        for item in reply.split(b";"):
            text = item.decode("ascii", "replace")
            if "=" in text:
                key, _, value = text.partition("=")
                self.features[key] = value
            elif text.endswith(("+", "-", "?")):
                self.features[text[:-1]] = text[-1]
        size = self.features.get("PacketSize", "1000")
        if re.fullmatch("[0-9a-fA-F]{1,8}", size):
            self.packet_size = min(MAX_PACKET, max(64, int(size, 16)))
        self.stop_reply = self.connection.request(b"?")
        if self.stop_reply[:1] in (b"W", b"X"):
            self.detached = True
            raise self._error("the program has exited")

    def supports(self, feature: str) -> bool:
        return self.features.get(feature) == "+"

    # -- objects -------------------------------------------------------------------------------

    def read_object(self, kind: str, annex: str = "") -> bytes | None:
        """A ``qXfer:KIND:read`` object whole; None when the stub does not serve it."""
        if not self.supports(f"qXfer:{kind}:read"):
            return None
        out = bytearray()
        chunk = max(16, self.packet_size - 16)
        while True:
            reply = self.connection.request(
                f"qXfer:{kind}:read:{annex}:{len(out):x},{chunk:x}".encode()
            )
            if not reply or reply[:1] == b"E":
                if out:
                    raise self._error(f"the stub stopped sending the {kind} object ({reply!r})")
                return None
            if reply[:1] not in b"ml":
                raise self._error(f"a bad qXfer reply {_shown(reply)}")
            part = unescape_binary(reply[1:])
            out += part
            if len(out) > _MAX_OBJECT:
                raise self._error(f"the {kind} object is larger than {_MAX_OBJECT} bytes")
            if reply[:1] == b"l":
                return bytes(out)
            if not part:
                # An empty part that does not end the object: asking again gets no further.
                raise self._error(f"the stub sends the {kind} object without an end")

    @property
    def description(self) -> TargetDescription | None:
        """The target description, or None when the stub sends none."""
        if self._description is None and self.supports("qXfer:features:read"):

            def read(annex: str) -> bytes:
                data = self.read_object("features", annex)
                if data is None:
                    raise self._error(f"cannot read target description {annex}")
                return data

            try:
                self._description = parse_target_description(read)
            except RemoteError as error:
                raise error.at(path=self.name) from None
        return self._description

    def auxv(self, big_endian: bool) -> dict[int, int]:
        data = self.read_object("auxv")
        return auxv_entries(data, big_endian) if data else {}

    def text_offset(self) -> int | None:
        """The load bias of the program's code, as ``qOffsets`` reports it (None: no answer,
        or the segment form, ``TextSeg=``)."""
        reply = self.connection.request(b"qOffsets")
        if not reply.startswith(b"Text="):
            return None
        match = re.match(rb"Text=([0-9a-fA-F]{1,16})(?:;|$)", reply)
        if match is None:
            raise self._error(f"a bad qOffsets reply {_shown(reply)}")
        return int(match.group(1), 16)

    def exec_file(self) -> str | None:
        """The executable's path on the target, when the stub says it."""
        pid = self.threads()[0].pid
        data = self.read_object("exec-file", f"{pid:x}" if pid is not None else "")
        if not data:
            return None
        if b"\0" in data:
            raise self._error(f"the executable's path the stub gives holds a NUL: {_shown(data)}")
        if len(data) > _MAX_PATH:
            raise self._error(f"the stub names the executable with a path of {len(data)} bytes")
        return os.fsdecode(data)

    # -- threads and registers -----------------------------------------------------------------

    def threads(self) -> list[RemoteThread]:
        """The stopped threads, the one the stop reply names first."""
        if self._threads is None:
            self._threads = self._list_threads()
        return list(self._threads)

    def _list_threads(self) -> list[RemoteThread]:
        found: dict[tuple[int | None, int], RemoteThread] = {}
        reply = self.connection.request(b"qfThreadInfo")
        while reply[:1] == b"m":
            before = len(found)
            for ident in reply[1:].split(b","):
                if ident:
                    thread = self._thread(ident)
                    found.setdefault((thread.pid, thread.tid), thread)
            if len(found) == before:
                # No new thread: the stub would list these for ever.
                raise self._error(f"a thread list reply that names no new thread {_shown(reply)}")
            if len(found) > _MAX_THREADS:
                raise self._error(f"the stub lists more than {_MAX_THREADS} threads")
            reply = self.connection.request(b"qsThreadInfo")
        stopped = re.search(rb"thread:([^;]+);", self.stop_reply)
        current = self._thread(stopped.group(1)) if stopped else None
        if not found:
            return [current] if current is not None else [RemoteThread(b"", None, 0)]
        threads = list(found.values())
        if current is not None:
            # The stopped thread first (its id may be spelled otherwise in the list).
            threads.sort(key=lambda t: (t.pid, t.tid) != (current.pid, current.tid))
        return threads

    def _thread(self, ident: bytes) -> RemoteThread:
        try:
            return RemoteThread.parse(ident)
        except RemoteError as error:
            raise error.at(path=self.name) from None

    def registers(self, thread: RemoteThread, abi: Abi) -> Registers:
        """The registers of ``thread`` the unwinder uses."""
        if thread.ident:
            reply = self.connection.request(b"Hg" + thread.ident)
            if reply != b"OK":
                raise self._error(f"cannot select thread {thread.ident.decode()}")
        layout = self._layout(abi)
        wanted = _wanted(abi)
        order = "big" if abi.big_endian else "little"
        reply = self.connection.request(b"g")
        if not reply or reply[:1] == b"E":
            raise self._error(f"cannot read the registers ({_shown(reply)})")
        values: dict[str, int] = {}
        seen: set[str] = set()
        offset = 0
        for register in layout:
            size = register.bits // 4
            text = reply[offset : offset + size]
            offset += size
            if register.name not in wanted or register.name in seen:
                continue  # a name described twice is read once
            seen.add(register.name)
            if len(text) == size:
                value = _hex_value(text, order)
            else:
                value = self._read_register(register, order)
            if value is not None:
                values[register.name] = value
        try:
            return registers_from_names(abi, values)
        except RemoteError as error:
            raise error.at(path=self.name) from None

    def pac_mask(self, abi: Abi) -> int | None:
        """AArch64: the code mask of the pointer-authentication feature, when described."""
        if not abi.is_aarch64:
            return None
        for register in self._layout(abi):
            if register.name == "pauth_cmask":
                return self._read_register(register, "big" if abi.big_endian else "little")
        return None

    def _layout(self, abi: Abi) -> list[RemoteRegister]:
        description = self.description
        if description is not None:
            if description.abis() and abi not in description.abis():
                raise self._error(f"the target is {description.architecture}, not {abi.name}")
            return sorted(description.registers, key=lambda r: r.number)
        return [RemoteRegister(n, i, 64) for i, n in enumerate(_DEFAULT_REGISTERS[abi])]

    def _read_register(self, register: RemoteRegister, order: str) -> int | None:
        reply = self.connection.request(b"p%x" % register.number)
        if len(reply) != register.bits // 4 or reply[:1] == b"E":
            return None
        return _hex_value(reply, order)

    def snapshot(self, abi: Abi) -> list[ThreadState]:
        return [ThreadState(thread.tid, self.registers(thread, abi)) for thread in self.threads()]

    # -- memory --------------------------------------------------------------------------------

    def read_memory(self, address: int, size: int) -> bytes:
        """Bytes at ``address``; OSError where the target has none, RemoteError (the
        connection failed) when the stub answers what the protocol does not allow."""
        if size <= 0:
            return b""
        if size > _MAX_READ:
            raise OSError(f"a read of {size} bytes is more than the {_MAX_READ} read at once")
        if not 0 <= address <= _ADDRESS_END - size:
            raise OSError(f"{size} bytes at {address:#x} are outside the address space")
        first = address - address % _BLOCK
        out = bytearray()
        for block in range(first, address + size, _BLOCK):
            data = self._block(block) if block + _BLOCK <= _ADDRESS_END else None
            if data is None:
                # A block reaching into unmapped memory: read the bytes asked for alone.
                return bytes(out) + self._read_exact(max(address, block), address + size)
            out += data
        start = address - first
        return bytes(out[start : start + size])

    def _block(self, address: int) -> bytes | None:
        if address in self._cache:
            return self._cache[address]
        try:
            data = self._read_exact(address, address + _BLOCK)
        except OSError:
            return None
        if len(self._cache) >= _MAX_CACHED_BLOCKS:
            self._cache.clear()
        self._cache[address] = data
        return data

    def _read_exact(self, start: int, end: int) -> bytes:
        """The bytes from ``start`` to ``end``, in as many ``m`` requests as the packet size
        and the stub's short replies take (each gives at least a byte, or fails)."""
        out = bytearray()
        most = max(1, (self.packet_size - 8) // 2)
        while start + len(out) < end:
            at = start + len(out)
            count = min(most, end - at)
            reply = self.connection.request(b"m%x,%x" % (at, count))
            if reply[:1] == b"E" and (len(reply) == 3 or reply[1:2] == b"."):
                # gdb's remote_read_bytes_1: "E NN" (or "E.text") is an error.
                raise OSError(f"cannot read {count} bytes at {at:#x}")
            if not reply:
                self.connection.fail(f"an empty reply to a memory read at {at:#x}")
            try:
                data = binascii.unhexlify(reply)
            except ValueError:
                self.connection.fail(f"a memory reply at {at:#x} that is not hex: {_shown(reply)}")
            if len(data) > count:
                self.connection.fail(
                    f"a memory reply of {len(data)} bytes to a read of {count} at {at:#x}"
                )
            out += data
        return bytes(out)

    # -- running -------------------------------------------------------------------------------

    def resume(self) -> bytes:
        """Let the program run until it stops again; the stop reply.  RemoteError when it
        exits instead.  The time limit counts again from the stop."""
        self._cache.clear()
        self._threads = None
        command = b"vCont;c" if self.supports("vContSupported") else b"c"
        self.connection.send(command)
        try:
            return self._wait_stop()
        except KeyboardInterrupt:
            # Stop the program again (the interrupt byte), so that it can be detached.
            self.connection.restart_clock()
            try:
                self.connection.send_raw(b"\x03")
                self._wait_stop(wait=False)
            except RemoteError:
                self.detached = True  # no answer: nothing left to detach politely
            raise

    def _wait_stop(self, wait: bool = True) -> bytes:
        while True:
            reply = self.connection.receive(wait=wait)
            kind = reply[:1]
            if kind == b"O" and reply != b"OK":
                continue  # the program's console output
            if kind in b"TS" and reply:
                self.stop_reply = reply
                return reply
            if kind in b"WX" and reply:
                what = "exited with status" if kind == b"W" else "was killed by signal"
                code = reply[1:].split(b";")[0].decode("ascii", "replace")
                self.detached = True
                with contextlib.suppress(ValueError):
                    code = str(int(code[:16], 16))
                raise self._error(f"the program {what} {code[:16]}")
            raise self._error(f"cannot resume the program ({_shown(reply)})")

    def detach(self) -> None:
        """Detach: the program goes on running."""
        if self.detached:
            return
        self.detached = True
        try:
            pid = self.threads()[0].pid if self.supports("multiprocess") else None
            self.connection.request(b"D" if pid is None else b"D;%x" % pid)
        except RemoteError:
            pass  # the stub is gone, or broke the protocol: nothing to detach from politely

    def close(self) -> None:
        try:
            self.detach()
        finally:
            self.connection.close()

    def __enter__(self) -> RemoteTarget:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        failure = self.connection.failure
        if exc is None and failure is not None:
            # A read that failed with the connection was taken as unreadable memory: what
            # the caller made of the target since is incomplete.
            raise failure


def _hex_value(text: bytes, order: str) -> int | None:
    """A register's hex bytes in target order; None for ``xx`` (unavailable)."""
    try:
        return int.from_bytes(binascii.unhexlify(text), order)  # type: ignore[arg-type]
    except ValueError:
        return None


def _shown(data: bytes | str) -> str:
    """A stub's bytes in a message: their repr, cut short."""
    text = repr(data)
    return text if len(text) <= 40 else text[:36] + "..."


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``; ``:PORT`` for localhost); RemoteError when malformed."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise RemoteError("not HOST:PORT", path=address)
    host = host.strip("[]") or "localhost"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise RemoteError("the port must be a number from 1 to 65535", path=address)
    return host, number


__all__ = [
    "AnnexReader",
    "RemoteError",
    "RemoteRegister",
    "RemoteTarget",
    "RemoteThread",
    "TargetDescription",
    "parse_address",
    "parse_target_description",
    "registers_from_names",
]
