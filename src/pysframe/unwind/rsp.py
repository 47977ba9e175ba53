"""The packet layer of the GDB remote serial protocol, over TCP (gdb manual, "Remote Protocol",
"Overview").

* A packet is ``$data#cs``, ``cs`` the sum of the bytes of ``data`` modulo 256 as two hex
  digits.  The receiver answers ``+`` (received) or ``-`` (checksum wrong: send it again).
* Replies may be run-length encoded: ``X*n`` stands for ``X`` followed by ``ord(n) - 29``
  more copies of it (gdb's ``read_frame`` accepts 1 to 255 more, after at least one byte).
* Binary data (``qXfer`` replies) escapes ``#``, ``$``, ``}`` and ``*`` as ``}`` followed by
  the byte XOR 0x20 (:func:`unescape_binary`).
* Notifications (``%data#cs``) are not acknowledged; nothing here asks for them, and any that
  come are skipped.

Bounds, whatever the stub sends:

* an exchange (a packet sent and acknowledged, or a reply received) ends within ``timeout``
  seconds (:data:`EXCHANGE_TIMEOUT`, 30 s by default), however slowly its bytes trickle in;
* all exchanges of a connection end within its ``time_limit`` (:data:`TIME_LIMIT`, 120 s by
  default; None: none), counted from the connection and again from the start of each packet
  :meth:`Connection.receive` waited for with ``wait`` (a resumed program may run as long as it
  likes: only the wait for the first byte of its stop reply is unbounded);
* a packet is sent at most :data:`RETRIES` times when the stub refuses it (``-``), and a reply
  with a wrong checksum is refused at most :data:`RETRIES` times;
* a reply holds at most :data:`MAX_PACKET` bytes, both as sent and once its runs are expanded,
  and at most :data:`MAX_PACKET` bytes that are no reply (noise, stray acks, notifications)
  come before it.

A connection that fails (a timeout, the time limit, a lost connection, a stub that breaks the
protocol) stays failed: its byte stream can no longer be trusted to pair replies with requests
(a late reply would be read as the answer to the next request), so every later exchange raises
the same :class:`RemoteError` at once, and :attr:`Connection.failure` keeps it for whoever
swallowed the first one.  Every error names the target (``HOST:PORT``) as its path.
"""

from __future__ import annotations

import re
import socket
import time
from types import TracebackType
from typing import NoReturn

from ..errors import UnwindError
from .limits import EXCHANGE_TIMEOUT, TIME_LIMIT

#: The longest reply accepted (a register set, a memory block, a target description part), as
#: sent and once its runs are expanded; also the most bytes that may come before a reply.
MAX_PACKET = 1 << 20
#: Times a packet is sent, or a reply with a wrong checksum refused, before giving up.
RETRIES = 5
_RLE_BIAS = 29
_ESCAPE = 0x7D
_PACKET_START = re.compile(rb"[$%]")
_ACK = re.compile(rb"[+-]")


class RemoteError(UnwindError):
    """The remote target cannot be reached, or it answered what the protocol does not allow."""


def checksum(data: bytes) -> bytes:
    """The two hex digits after ``#``."""
    return b"%02x" % (sum(data) & 0xFF)


def frame(data: bytes) -> bytes:
    """``data`` as a packet on the wire."""
    return b"$" + data + b"#" + checksum(data)


def expand_runs(data: bytes, limit: int = MAX_PACKET) -> bytes:
    """Undo the run-length encoding of a reply (``X*n``: ``ord(n) - 29`` more copies of X);
    RemoteError for a run gdb's ``read_frame`` refuses (nothing to repeat, a count out of 1 to
    255) or a reply longer than ``limit`` bytes once expanded."""
    if b"*" not in data:
        if len(data) > limit:
            raise RemoteError(f"a reply of more than {limit} bytes")
        return data
    out = bytearray()
    start = 0
    while (star := data.find(b"*", start)) >= 0:
        out += data[start:star]
        if not out or star + 1 >= len(data) or data[star + 1] <= _RLE_BIAS:
            raise RemoteError(f"a bad run-length encoding at byte {star} of a reply")
        out += out[-1:] * (data[star + 1] - _RLE_BIAS)
        if len(out) > limit:
            raise RemoteError(f"a reply of more than {limit} bytes once its runs are expanded")
        start = star + 2
    out += data[start:]
    if len(out) > limit:
        raise RemoteError(f"a reply of more than {limit} bytes once its runs are expanded")
    return bytes(out)


def unescape_binary(data: bytes) -> bytes:
    """Undo the ``}`` escapes of binary data."""
    if _ESCAPE not in data:
        return data
    out = bytearray()
    start = 0
    while (escape := data.find(b"}", start)) >= 0 and escape + 1 < len(data):
        out += data[start:escape]
        out.append(data[escape + 1] ^ 0x20)
        start = escape + 2
    out += data[start:]
    return bytes(out)


class Connection:
    """One TCP connection to a remote stub: send a packet, receive a reply, with acks, each
    exchange within ``timeout`` seconds and all of them within ``time_limit``."""

    def __init__(
        self,
        sock: socket.socket,
        name: str,
        timeout: float = EXCHANGE_TIMEOUT,
        time_limit: float | None = TIME_LIMIT,
    ) -> None:
        self._sock = sock
        self.name = name
        self.timeout = timeout
        self.time_limit = time_limit
        self._buffer = b""
        self._pos = 0
        self._failure: str | None = None
        self._limit_end: float | None = None
        self._exchange_end: float | None = None
        self._skipped = 0
        self.restart_clock()

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        timeout: float = EXCHANGE_TIMEOUT,
        time_limit: float | None = TIME_LIMIT,
    ) -> Connection:
        name = f"{host}:{port}"
        wait = timeout if time_limit is None else min(timeout, time_limit)
        try:
            sock = socket.create_connection((host, port), timeout=wait)
        except OSError as error:
            raise RemoteError(f"cannot connect: {error.strerror or error}", path=name) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock, name, timeout, time_limit)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- failing -------------------------------------------------------------------------------

    @property
    def failure(self) -> RemoteError | None:
        """The error this connection failed with (None: it has not failed)."""
        return None if self._failure is None else RemoteError(self._failure, path=self.name)

    def fail(self, message: str) -> NoReturn:
        """Give up on the connection: the stub broke the protocol (``message`` says how)."""
        if self._failure is None:
            self._failure = message
        raise RemoteError(message, path=self.name)

    def restart_clock(self) -> None:
        """Count the time limit from now (the program stopped after running)."""
        if self.time_limit is not None:
            self._limit_end = time.monotonic() + self.time_limit

    def _begin(self, *, wait: bool = False) -> None:
        """Start an exchange: bounded, unless ``wait`` (until its first packet starts)."""
        if self._failure is not None:
            raise RemoteError(self._failure, path=self.name)
        self._skipped = 0
        if wait:
            self._exchange_end = None
            return
        now = time.monotonic()
        if self._limit_end is not None and now >= self._limit_end:
            self._past_limit()
        self._exchange_end = now + self.timeout

    def _past_limit(self) -> NoReturn:
        self.fail(f"the remote session took longer than its time limit of {self.time_limit:g} s")

    # -- sending -------------------------------------------------------------------------------

    def request(self, data: bytes, *, wait: bool = False) -> bytes:
        """Send ``data`` and return the reply (run-length encoding undone).  ``wait``: the reply
        comes when the target next stops, which may take any time (no timeout)."""
        self.send(data)
        return self.receive(wait=wait)

    def send(self, data: bytes) -> None:
        """Send a packet and wait for its ``+``."""
        self._begin()
        packet = frame(data)
        for _ in range(RETRIES):
            self._write(packet)
            if self._next(_ACK) == b"+"[0]:
                return
        self.fail(f"the stub refused a packet {RETRIES} times ({data[:20]!r})")

    def send_raw(self, data: bytes) -> None:
        """Bytes outside any packet (``\\x03``, the interrupt request)."""
        self._begin()
        self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            self._sock.settimeout(self._wait_time())
            self._sock.sendall(data)
        except TimeoutError:
            self._timed_out()
        except OSError as error:
            self.fail(f"connection lost: {error.strerror or error}")

    # -- receiving -----------------------------------------------------------------------------

    def receive(self, *, wait: bool = False) -> bytes:
        """The next packet, acknowledged, its runs expanded; notifications are skipped.
        ``wait``: the packet may take any time to start (a resumed program's stop)."""
        self._begin(wait=wait)
        refused = 0
        while True:
            start = self._next(_PACKET_START)
            if self._exchange_end is None:
                # The program stopped (or wrote to its console): its packet has started, and
                # comes within the timeout; the time limit counts again from now.
                self.restart_clock()
                self._exchange_end = time.monotonic() + self.timeout
            data, valid = self._read_body()
            if start == ord("%"):
                self._skip(len(data) + 4)
                continue
            if not valid:
                refused += 1
                if refused > RETRIES:
                    self.fail(f"the stub sent {refused} replies with a wrong checksum in a row")
                self._write(b"-")
                continue
            self._write(b"+")
            try:
                return expand_runs(data)
            except RemoteError as error:
                self.fail(error.message)

    def _next(self, wanted: re.Pattern[bytes]) -> int:
        """The next byte ``wanted`` matches; the bytes before it are skipped."""
        while True:
            found = wanted.search(self._buffer, self._pos)
            if found is not None:
                self._skip(found.start() - self._pos)
                self._pos = found.start() + 1
                return self._buffer[found.start()]
            self._skip(len(self._buffer) - self._pos)
            self._fill()

    def _skip(self, count: int) -> None:
        self._skipped += count
        if self._skipped > MAX_PACKET:
            self.fail(f"the stub sent more than {MAX_PACKET} bytes that are no reply")

    def _read_body(self) -> tuple[bytes, bool]:
        parts: list[bytes] = []
        size = 0
        while True:
            end = self._buffer.find(b"#", self._pos)
            part = self._buffer[self._pos : end if end >= 0 else len(self._buffer)]
            parts.append(part)
            size += len(part)
            if size > MAX_PACKET:
                self.fail(f"a reply of more than {MAX_PACKET} bytes")
            if end >= 0:
                self._pos = end + 1
                break
            self._fill()
        data = b"".join(parts)
        digits = bytes([self._read_byte(), self._read_byte()])
        return data, digits.lower() == checksum(data)

    def _read_byte(self) -> int:
        if self._pos >= len(self._buffer):
            self._fill()
        byte = self._buffer[self._pos]
        self._pos += 1
        return byte

    def _wait_time(self) -> float | None:
        """Seconds left for this exchange (None: no bound); fails when none are left."""
        if self._exchange_end is None:
            return None
        now = time.monotonic()
        if self._limit_end is not None and self._limit_end < self._exchange_end:
            if now >= self._limit_end:
                self._past_limit()
            return self._limit_end - now
        if now >= self._exchange_end:
            self._timed_out()
        return self._exchange_end - now

    def _timed_out(self) -> NoReturn:
        if self._limit_end is not None and time.monotonic() >= self._limit_end:
            self._past_limit()
        self.fail(f"no reply in {self.timeout:g} s")

    def _fill(self) -> None:
        """Read what the socket has (at least one byte) into the emptied buffer."""
        try:
            self._sock.settimeout(self._wait_time())
            chunk = self._sock.recv(65536)
        except TimeoutError:
            self._timed_out()
        except OSError as error:
            self.fail(f"connection lost: {error.strerror or error}")
        if not chunk:
            self.fail("the stub closed the connection")
        self._buffer = chunk
        self._pos = 0


__all__ = [
    "EXCHANGE_TIMEOUT",
    "MAX_PACKET",
    "RETRIES",
    "TIME_LIMIT",
    "Connection",
    "RemoteError",
    "checksum",
    "expand_runs",
    "frame",
    "unescape_binary",
]
