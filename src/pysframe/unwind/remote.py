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
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from xml.parsers import expat

from ..format.constants import Abi
from .core import Registers
from .mappings import auxv_entries
from .ptrace import S390X_FPR_DWARF, ThreadState
from .rsp import Connection, RemoteError, unescape_binary

#: Bytes of ``qXfer`` objects accepted (target descriptions, auxv, paths) and included files.
_MAX_OBJECT = 1 << 20
_MAX_INCLUDES = 64
#: Memory is read in aligned blocks of this many bytes and cached while the target is stopped.
_BLOCK = 256
_MAX_CACHED_BLOCKS = 1 << 14
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

    def walk(annex: str, depth: int) -> None:
        nonlocal architecture, includes
        if depth > 8:
            raise RemoteError(f"target description {annex}: includes nest too deep")
        for kind, value in _description_items(annex, read_annex(annex)):
            if kind == "architecture":
                architecture = architecture or value["text"]
            elif kind == "include":
                includes += 1
                if includes > _MAX_INCLUDES:
                    raise RemoteError("the target description includes too many files")
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
        raise RemoteError(f"target description {annex}: a bad register {attrs}") from None


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


_THREAD_ID = re.compile(rb"^(?:p(-?[0-9a-fA-F]+)\.)?(-?[0-9a-fA-F]+)$")


@dataclass(frozen=True, slots=True)
class RemoteThread:
    """A thread as the stub names it (``p<pid>.<tid>`` with multiprocess extensions)."""

    ident: bytes
    pid: int | None
    tid: int

    @classmethod
    def parse(cls, ident: bytes) -> RemoteThread:
        match = _THREAD_ID.match(ident)
        if match is None:
            raise RemoteError(f"a bad thread id {ident!r}")
        pid = int(match.group(1), 16) if match.group(1) else None
        return cls(ident, pid, int(match.group(2), 16))


class RemoteTarget:
    """A connection to a stopped remote target; use :meth:`connect` and close it (or use it
    as a context manager), which detaches and leaves the program running."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.name = connection.name
        self.features: dict[str, str] = {}
        self.packet_size = 4096
        self.stop_reply = b""
        self._description: TargetDescription | None = None
        self._cache: dict[int, bytes] = {}
        self.detached = False

    @classmethod
    def connect(cls, address: str, timeout: float = 30.0) -> RemoteTarget:
        """Connect to ``HOST:PORT`` and learn what the stub supports and why it stopped."""
        host, port = parse_address(address)
        target = cls(Connection.open(host, port, timeout))
        try:
            target._handshake()
        except BaseException:
            target.connection.close()
            raise
        return target

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
        try:
            self.packet_size = max(64, int(self.features.get("PacketSize", "1000"), 16))
        except ValueError:
            self.packet_size = 4096
        self.stop_reply = self.connection.request(b"?")
        if self.stop_reply[:1] in (b"W", b"X"):
            self.detached = True
            raise RemoteError(f"{self.name}: the program has exited")

    def supports(self, feature: str) -> bool:
        return self.features.get(feature) == "+"

    # -- objects -------------------------------------------------------------------------------

    def read_object(self, kind: str, annex: str = "") -> bytes | None:
        """A ``qXfer:KIND:read`` object whole; None when the stub does not serve it."""
        if not self.supports(f"qXfer:{kind}:read"):
            return None
        out = b""
        chunk = max(16, self.packet_size - 16)
        while len(out) <= _MAX_OBJECT:
            reply = self.connection.request(
                f"qXfer:{kind}:read:{annex}:{len(out):x},{chunk:x}".encode()
            )
            if not reply or reply[:1] == b"E":
                return out or None
            if reply[:1] not in b"ml":
                raise RemoteError(f"{self.name}: a bad qXfer reply {reply[:20]!r}")
            out += unescape_binary(reply[1:])
            if reply[:1] == b"l":
                return out
        raise RemoteError(f"{self.name}: the {kind} object is larger than {_MAX_OBJECT} bytes")

    @property
    def description(self) -> TargetDescription | None:
        """The target description, or None when the stub sends none."""
        if self._description is None and self.supports("qXfer:features:read"):

            def read(annex: str) -> bytes:
                data = self.read_object("features", annex)
                if data is None:
                    raise RemoteError(f"{self.name}: cannot read target description {annex}")
                return data

            self._description = parse_target_description(read)
        return self._description

    def auxv(self, big_endian: bool) -> dict[int, int]:
        data = self.read_object("auxv")
        return auxv_entries(data, big_endian) if data else {}

    def text_offset(self) -> int | None:
        """The load bias of the program's code, as ``qOffsets`` reports it (None: no answer)."""
        reply = self.connection.request(b"qOffsets")
        match = re.match(rb"Text=([0-9a-fA-F]+)", reply)
        return int(match.group(1), 16) if match else None

    def exec_file(self) -> str | None:
        """The executable's path on the target, when the stub says it."""
        pid = self.threads()[0].pid
        data = self.read_object("exec-file", f"{pid:x}" if pid is not None else "")
        return data.decode("utf-8", "surrogateescape") if data else None

    # -- threads and registers -----------------------------------------------------------------

    def threads(self) -> list[RemoteThread]:
        """The stopped threads, the one the stop reply names first."""
        found: list[RemoteThread] = []
        reply = self.connection.request(b"qfThreadInfo")
        while reply[:1] == b"m" and len(found) < 1 << 16:
            found.extend(RemoteThread.parse(t) for t in reply[1:].split(b",") if t)
            reply = self.connection.request(b"qsThreadInfo")
        stopped = re.search(rb"thread:([^;]+);", self.stop_reply)
        current = RemoteThread.parse(stopped.group(1)) if stopped else None
        if not found:
            return [current] if current is not None else [RemoteThread(b"", None, 0)]
        if current is not None:
            # The stopped thread first (its id may be spelled otherwise in the list).
            found.sort(key=lambda t: (t.pid, t.tid) != (current.pid, current.tid))
        return found

    def registers(self, thread: RemoteThread, abi: Abi) -> Registers:
        """The registers of ``thread`` the unwinder uses."""
        if thread.ident:
            reply = self.connection.request(b"Hg" + thread.ident)
            if reply != b"OK":
                raise RemoteError(f"{self.name}: cannot select thread {thread.ident.decode()}")
        layout = self._layout(abi)
        wanted = _wanted(abi)
        order = "big" if abi.big_endian else "little"
        reply = self.connection.request(b"g")
        if not reply or reply[:1] == b"E":
            raise RemoteError(f"{self.name}: cannot read the registers ({reply[:8]!r})")
        values: dict[str, int] = {}
        offset = 0
        for register in layout:
            size = register.bits // 4
            text = reply[offset : offset + size]
            offset += size
            if register.name not in wanted:
                continue
            if len(text) == size:
                value = _hex_value(text, order)
            else:
                value = self._read_register(register, order)
            if value is not None:
                values[register.name] = value
        return registers_from_names(abi, values)

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
                raise RemoteError(
                    f"{self.name}: the target is {description.architecture}, not {abi.name}"
                )
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
        """Bytes at ``address``; OSError where the target has none."""
        if size <= 0:
            return b""
        first = address - address % _BLOCK
        out = bytearray()
        for block in range(first, address + size, _BLOCK):
            data = self._block(block)
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
        out = bytearray()
        most = max(1, (self.packet_size - 8) // 2)
        while start + len(out) < end:
            at = start + len(out)
            count = min(most, end - at)
            reply = self.connection.request(b"m%x,%x" % (at, count))
            if not reply or reply[:1] == b"E" or len(reply) % 2:
                raise OSError(f"{self.name}: cannot read {count} bytes at {at:#x}")
            try:
                out += bytes.fromhex(reply.decode("ascii"))
            except ValueError:
                raise OSError(f"{self.name}: a bad memory reply at {at:#x}") from None
        return bytes(out)

    # -- running -------------------------------------------------------------------------------

    def resume(self) -> bytes:
        """Let the program run until it stops again; the stop reply.  RemoteError when it
        exits instead."""
        self._cache.clear()
        command = b"vCont;c" if self.supports("vContSupported") else b"c"
        self.connection.send(command)
        try:
            return self._wait_stop()
        except KeyboardInterrupt:
            # Stop the program again (the interrupt byte), so that it can be detached.
            self.connection.send_raw(b"\x03")
            try:
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
                    code = str(int(code, 16))
                raise RemoteError(f"{self.name}: the program {what} {code}")
            raise RemoteError(f"{self.name}: cannot resume the program ({reply[:20]!r})")

    def detach(self) -> None:
        """Detach: the program goes on running."""
        if self.detached:
            return
        self.detached = True
        try:
            pid = self.threads()[0].pid if self.supports("multiprocess") else None
            self.connection.request(b"D" if pid is None else b"D;%x" % pid)
        except RemoteError:
            pass  # the stub is gone: nothing is left to detach from

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


def _hex_value(text: bytes, order: str) -> int | None:
    """A register's hex bytes in target order; None for ``xx`` (unavailable)."""
    try:
        return int.from_bytes(bytes.fromhex(text.decode("ascii")), order)  # type: ignore[arg-type]
    except ValueError:
        return None


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``; ``:PORT`` for localhost); RemoteError when malformed."""
    host, sep, port = address.rpartition(":")
    if not sep:
        raise RemoteError(f"{address}: not HOST:PORT")
    host = host.strip("[]") or "localhost"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise RemoteError(f"{address}: the port must be a number from 1 to 65535")
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
