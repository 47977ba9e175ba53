"""The packet layer of the GDB remote serial protocol, over TCP (gdb manual, "Remote Protocol",
"Overview").

* A packet is ``$data#cs``, ``cs`` the sum of the bytes of ``data`` modulo 256 as two hex
  digits.  The receiver answers ``+`` (received) or ``-`` (checksum wrong: send it again).
* Replies may be run-length encoded: ``X*n`` stands for ``X`` followed by ``ord(n) - 29``
  more copies of it.
* Binary data (``qXfer`` replies) escapes ``#``, ``$``, ``}`` and ``*`` as ``}`` followed by
  the byte XOR 0x20 (:func:`unescape_binary`).
* Notifications (``%data#cs``) are not acknowledged; nothing here asks for them, and any that
  come are skipped.

Every wait is bounded by the connection's timeout, except the wait for a resumed program to stop
again, and a reply by :data:`MAX_PACKET` bytes.
"""

from __future__ import annotations

import socket
from types import TracebackType

from ..errors import UnwindError

#: The longest reply accepted (a register set, a memory block, a target description part).
MAX_PACKET = 1 << 20
#: Times a packet is sent again after a ``-`` before giving up.
_RETRIES = 5
_RLE_BIAS = 29
_ESCAPE = 0x7D


class RemoteError(UnwindError):
    """The remote target cannot be reached, or it answered what the protocol does not allow."""


def checksum(data: bytes) -> bytes:
    """The two hex digits after ``#``."""
    return b"%02x" % (sum(data) & 0xFF)


def frame(data: bytes) -> bytes:
    """``data`` as a packet on the wire."""
    return b"$" + data + b"#" + checksum(data)


def expand_runs(data: bytes) -> bytes:
    """Undo the run-length encoding of a reply (``X*n``: ``ord(n) - 29`` more copies of X)."""
    if b"*" not in data:
        return data
    out = bytearray()
    index = 0
    while index < len(data):
        byte = data[index]
        if byte == ord("*") and out and index + 1 < len(data):
            out += bytes([out[-1]]) * (data[index + 1] - _RLE_BIAS)
            index += 2
            continue
        out.append(byte)
        index += 1
    return bytes(out)


def unescape_binary(data: bytes) -> bytes:
    """Undo the ``}`` escapes of binary data."""
    if _ESCAPE not in data:
        return data
    out = bytearray()
    index = 0
    while index < len(data):
        byte = data[index]
        if byte == _ESCAPE and index + 1 < len(data):
            out.append(data[index + 1] ^ 0x20)
            index += 2
            continue
        out.append(byte)
        index += 1
    return bytes(out)


class Connection:
    """One TCP connection to a remote stub: send a packet, receive a reply, with acks."""

    def __init__(self, sock: socket.socket, name: str, timeout: float) -> None:
        self._sock = sock
        self.name = name
        self.timeout = timeout
        self._buffer = b""
        self._pos = 0
        sock.settimeout(timeout)

    @classmethod
    def open(cls, host: str, port: int, timeout: float = 30.0) -> Connection:
        name = f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as error:
            raise RemoteError(f"{name}: cannot connect: {error.strerror or error}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock, name, timeout)

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

    # -- sending -------------------------------------------------------------------------------

    def request(self, data: bytes, *, wait: bool = False) -> bytes:
        """Send ``data`` and return the reply (run-length encoding undone).  ``wait``: the reply
        comes when the target next stops, which may take any time (no timeout)."""
        self.send(data)
        return self.receive(wait=wait)

    def send(self, data: bytes) -> None:
        """Send a packet and wait for its ``+``."""
        packet = frame(data)
        for _ in range(_RETRIES):
            self._write(packet)
            ack = self._read_byte()
            while ack not in b"+-":
                # Bytes before the ack (a stray packet of an earlier exchange): skip them.
                ack = self._read_byte()
            if ack == b"+"[0]:
                return
        raise RemoteError(f"{self.name}: the stub keeps refusing a packet ({data[:20]!r})")

    def send_raw(self, data: bytes) -> None:
        """Bytes outside any packet (``\\x03``, the interrupt request)."""
        self._write(data)

    def _write(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as error:
            raise RemoteError(f"{self.name}: connection lost: {error.strerror or error}") from None

    # -- receiving -----------------------------------------------------------------------------

    def receive(self, *, wait: bool = False) -> bytes:
        """The next packet, acknowledged; notifications are skipped."""
        self._sock.settimeout(None if wait else self.timeout)
        try:
            while True:
                start = self._read_byte()
                if start not in (ord("$"), ord("%")):
                    continue  # acks and noise between packets
                data, valid = self._read_body()
                if start == ord("%"):
                    continue
                self._write(b"+" if valid else b"-")
                if valid:
                    return expand_runs(data)
        finally:
            self._sock.settimeout(self.timeout)

    def _read_body(self) -> tuple[bytes, bool]:
        data = bytearray()
        while True:
            end = self._buffer.find(b"#", self._pos)
            if end >= 0:
                data += self._buffer[self._pos : end]
                self._pos = end + 1
                break
            data += self._buffer[self._pos :]
            self._pos = len(self._buffer)
            if len(data) > MAX_PACKET:
                raise RemoteError(f"{self.name}: a reply of more than {MAX_PACKET} bytes")
            self._fill()
        if len(data) > MAX_PACKET:
            raise RemoteError(f"{self.name}: a reply of more than {MAX_PACKET} bytes")
        digits = bytes([self._read_byte(), self._read_byte()])
        return bytes(data), digits.lower() == checksum(bytes(data))

    def _read_byte(self) -> int:
        if self._pos >= len(self._buffer):
            self._fill()
        byte = self._buffer[self._pos]
        self._pos += 1
        return byte

    def _fill(self) -> None:
        """Read what the socket has (at least one byte) into the emptied buffer."""
        try:
            chunk = self._sock.recv(65536)
        except TimeoutError:
            raise RemoteError(f"{self.name}: no reply in {self.timeout:g} s") from None
        except OSError as error:
            raise RemoteError(f"{self.name}: connection lost: {error.strerror or error}") from None
        if not chunk:
            raise RemoteError(f"{self.name}: the stub closed the connection")
        self._buffer = chunk
        self._pos = 0


__all__ = [
    "MAX_PACKET",
    "Connection",
    "RemoteError",
    "checksum",
    "expand_runs",
    "frame",
    "unescape_binary",
]
