"""The GDB remote protocol adapter against a scripted stub on loopback: packet framing, acks and
retransmission, run-length encoding, binary escapes, target descriptions, registers, memory,
threads, resuming and detaching; and what it does with a stub that misbehaves."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pysframe.format.constants import Abi
from pysframe.unwind.remote import (
    RemoteTarget,
    parse_address,
    parse_target_description,
    registers_from_names,
)
from pysframe.unwind.rsp import RemoteError, checksum, expand_runs, frame, unescape_binary

Handler = Callable[[bytes], "bytes | list[bytes] | None"]


class Stub:
    """A remote stub serving one connection: each packet is acked and answered by ``handler``
    (a list: several packets; None: no answer).  ``nak_first``: the first packet received is
    refused once; ``corrupt_first``: the first reply goes out with a wrong checksum once."""

    def __init__(self, handler: Handler, *, nak_first: bool = False, corrupt_first: bool = False,
                 encode: Callable[[bytes], bytes] = lambda data: data) -> None:
        self.handler = handler
        self.nak_first = nak_first
        self.corrupt_first = corrupt_first
        self.encode = encode
        self.received: list[bytes] = []
        self.naks_seen = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        connection, _ = self._server.accept()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        try:
            while True:
                while b"#" not in buffer or len(buffer) < buffer.index(b"#") + 3:
                    if b"\x03" in buffer.split(b"$")[0]:
                        break
                    chunk = connection.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                if b"\x03" in buffer.split(b"$")[0]:
                    # The interrupt request, outside any packet.
                    buffer = buffer[buffer.index(b"\x03") + 1 :]
                    replies = self.handler(b"\x03")
                    for reply in replies if isinstance(replies, list) else [replies or b""]:
                        buffer = self._send(connection, self.encode(reply), buffer)
                    continue
                start = buffer.index(b"$")
                self.naks_seen += buffer[:start].count(b"-")
                end = buffer.index(b"#", start)
                data, buffer = buffer[start + 1 : end], buffer[end + 3 :]
                if self.nak_first:
                    self.nak_first = False
                    connection.sendall(b"-")
                    continue
                connection.sendall(b"+")
                self.received.append(data)
                replies = self.handler(data)
                if replies is None:
                    continue
                for reply in replies if isinstance(replies, list) else [replies]:
                    buffer = self._send(connection, self.encode(reply), buffer)
        except OSError:
            return
        finally:
            connection.close()

    def _send(self, connection: socket.socket, reply: bytes, buffer: bytes) -> bytes:
        """Send a reply; wait for its ack (sending it again after a ``-``)."""
        while True:
            packet = frame(reply)
            if self.corrupt_first:
                self.corrupt_first = False
                packet = packet[:-2] + (b"00" if packet[-2:] != b"00" else b"01")
            connection.sendall(packet)
            while not buffer:
                chunk = connection.recv(65536)
                if not chunk:
                    raise OSError("closed")
                buffer += chunk
            ack, buffer = buffer[:1], buffer[1:]
            if ack == b"+":
                return buffer
            self.naks_seen += 1

    def close(self) -> None:
        self._server.close()


def rle(data: bytes) -> bytes:
    """gdbserver's run-length encoding: runs of 4 to 97 repeats (not making ``#`` or ``$``)."""
    out = bytearray()
    index = 0
    while index < len(data):
        run = 1
        while index + run < len(data) and data[index + run] == data[index] and run < 98:
            run += 1
        count = run - 1
        if count >= 3 and chr(count + 29) not in "#$":
            out += bytes([data[index]]) + b"*" + bytes([count + 29])
        else:
            out += data[index : index + run]
        index += run
    return bytes(out)


def escape(data: bytes) -> bytes:
    out = bytearray()
    for byte in data:
        if byte in b"#$}*":
            out += bytes([0x7D, byte ^ 0x20])
        else:
            out.append(byte)
    return bytes(out)


TARGET_XML = (
    b'<?xml version="1.0"?><!DOCTYPE target SYSTEM "gdb-target.dtd"><target>'
    b"<architecture>aarch64</architecture><xi:include href=\"core.xml\"/>"
    b'<xi:include href="pauth.xml"/></target>'
)
CORE_XML = (
    b'<?xml version="1.0"?><!-- a } and a # to escape --><feature name="org.gnu.gdb.aarch64.core">'
    + b"".join(b'<reg name="x%d" bitsize="64"/>' % n for n in range(31))
    + b'<reg name="sp" bitsize="64"/><reg name="pc" bitsize="64"/>'
    b'<reg name="cpsr" bitsize="32"/></feature>'
)
PAUTH_XML = (
    b'<feature name="org.gnu.gdb.aarch64.pauth"><reg name="pauth_dmask" bitsize="64" '
    b'regnum="90"/><reg name="pauth_cmask" bitsize="64"/></feature>'
)


class Aarch64Target:
    """The requests of a stopped little-endian AArch64 program with two threads."""

    def __init__(self) -> None:
        self.memory = {0x1000 + i: i & 0xFF for i in range(0x2FC)}
        self.files = {"target.xml": TARGET_XML, "core.xml": CORE_XML, "pauth.xml": PAUTH_XML}
        self.selected = b""
        self.exited = False
        self.running_forever = False

    def __call__(self, data: bytes) -> bytes | list[bytes] | None:
        if data.startswith(b"qSupported"):
            return (
                b"PacketSize=40;qXfer:features:read+;qXfer:auxv:read+;multiprocess+;"
                b"vContSupported+"
            )
        if data == b"?":
            return b"T05thread:p2a.2b;"
        if data.startswith(b"qXfer:features:read:"):
            annex, _, window = data[len(b"qXfer:features:read:") :].decode().partition(":")
            return self._window(self.files[annex], window)
        if data.startswith(b"qXfer:auxv:read::"):
            auxv = (9).to_bytes(8, "little") + (0x401000).to_bytes(8, "little") + bytes(16)
            return self._window(auxv, data.decode().rsplit(":", 1)[1])
        if data == b"qfThreadInfo":
            return b"mp2a.2a,p2a.2b"
        if data == b"qsThreadInfo":
            return b"l"
        if data.startswith(b"Hg"):
            self.selected = data[2:]
            return b"OK"
        if data == b"g":
            tid = int(self.selected.split(b".")[-1], 16)
            # x0..x30, sp, pc: x_n = tid * 0x100 + n, sp, pc; x20 and later left to p.
            values = [tid * 0x100 + n for n in range(20)]
            return b"".join(v.to_bytes(8, "little").hex().encode() for v in values)
        if data.startswith(b"p"):
            number = int(data[1:], 16)
            tid = int(self.selected.split(b".")[-1], 16)
            if number == 91:  # pauth_cmask
                return (0x007F000000000000).to_bytes(8, "little").hex().encode()
            if number == 29:
                return b"xxxxxxxxxxxxxxxx"
            values = {31: 0x7FF000 + tid, 32: 0x400000 + tid}
            value = values.get(number, tid * 0x100 + number)
            return value.to_bytes(8, "little").hex().encode()
        if data.startswith(b"m"):
            address, _, size = data[1:].decode().partition(",")
            start, count = int(address, 16), int(size, 16)
            if start not in self.memory:
                return b"E14"
            got = bytes(self.memory[a] for a in range(start, start + count) if a in self.memory)
            return got.hex().encode()
        if data == b"vCont;c":
            if self.running_forever:
                return None
            if self.exited:
                return [b"O" + b"bye\n".hex().encode(), b"W03;process:2a"]
            return [b"O" + b"hi\n".hex().encode(), b"T06thread:p2a.2a;"]
        if data.startswith(b"D"):
            return b"OK"
        if data == b"\x03":
            return b"T02thread:p2a.2a;"
        return b""

    @staticmethod
    def _window(data: bytes, window: str) -> bytes:
        offset, _, length = window.partition(",")
        start, count = int(offset, 16), int(length, 16)
        part = data[start : start + count]
        return (b"l" if start + count >= len(data) else b"m") + escape(part)


@contextmanager
def stub_target(**options: object) -> Iterator[tuple[RemoteTarget, Stub, Aarch64Target]]:
    handler = Aarch64Target()
    stub = Stub(handler, **options)  # type: ignore[arg-type]
    try:
        with RemoteTarget.connect(stub.address, timeout=5) as target:
            yield target, stub, handler
    finally:
        stub.close()


# -- packet layer --------------------------------------------------------------------------------


def test_framing_and_checksum() -> None:
    assert checksum(b"") == b"00"
    assert frame(b"g") == b"$g#67"
    assert frame(b"qSupported") == b"$qSupported#37"


def test_run_length_encoding_and_escapes() -> None:
    assert expand_runs(b"0* ") == b"0000"
    assert expand_runs(b"a*!b") == b"a" * 5 + b"b"
    assert unescape_binary(b"a}]b}\x03}\x04}\x0a") == b"a}b#$*"


@given(st.binary(max_size=300))
def test_encodings_round_trip(data: bytes) -> None:
    assert expand_runs(rle(escape(data))) == escape(data)
    assert unescape_binary(expand_runs(rle(escape(data)))) == data


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:1234") == ("127.0.0.1", 1234)
    assert parse_address(":1234") == ("localhost", 1234)
    assert parse_address("[::1]:99") == ("::1", 99)
    for bad in ("1234", "host:", "host:x", "host:0", "host:70000"):
        with pytest.raises(RemoteError):
            parse_address(bad)


# -- the target ----------------------------------------------------------------------------------


def test_description_registers_and_threads() -> None:
    with stub_target() as (target, stub, _):
        description = target.description
        assert description is not None and description.architecture == "aarch64"
        numbers = {r.name: (r.number, r.bits) for r in description.registers}
        assert numbers["x0"] == (0, 64) and numbers["pc"] == (32, 64)
        assert numbers["cpsr"] == (33, 32)
        assert numbers["pauth_dmask"] == (90, 64) and numbers["pauth_cmask"] == (91, 64)
        threads = target.threads()
        assert [t.tid for t in threads] == [0x2B, 0x2A]  # the stopped one first
        assert threads[0].pid == 0x2A
        registers = target.registers(threads[1], Abi.AARCH64_ENDIAN_LITTLE)
        # x0..x19 from g, the rest from p; x29 is unavailable ("xx").
        assert registers.pc == 0x40002A and registers.sp == 0x7FF02A
        assert registers.lr == 0x2A00 + 30
        extra = dict(registers.extra)
        assert extra[0] == 0x2A00 and extra[19] == 0x2A13 and extra[25] == 0x2A19
        assert 29 not in extra and registers.fp == 0
        assert target.pac_mask(Abi.AARCH64_ENDIAN_LITTLE) == 0x007F000000000000
        assert target.auxv(False) == {9: 0x401000, 0: 0}
        assert target.text_offset() is None  # qOffsets not served
        assert b"Hgp2a.2a" in stub.received
        with pytest.raises(RemoteError, match="not S390X"):
            target.registers(threads[0], Abi.S390X_ENDIAN_BIG)


def test_memory_reads_in_blocks_and_fails_cleanly() -> None:
    with stub_target() as (target, stub, handler):
        assert target.read_memory(0x1010, 8) == bytes(range(0x10, 0x18))
        asked = len(stub.received)
        assert target.read_memory(0x1018, 4) == bytes(range(0x18, 0x1C))
        assert len(stub.received) == asked  # the block is cached
        # The last block reaches past the mapped bytes: the bytes asked for are read alone.
        assert target.read_memory(0x12F8, 4) == bytes(range(0xF8, 0xFC))
        for address in (0x12F8, 0x9000):
            with pytest.raises(OSError, match="cannot read"):
                target.read_memory(address, 8)
        assert target.read_memory(0x1000, 0) == b""
        assert handler.memory  # untouched


def test_resume_skips_console_output_and_reports_the_stop() -> None:
    with stub_target() as (target, _, _):
        assert target.resume() == b"T06thread:p2a.2a;"
        assert target.threads()[0].tid == 0x2A


def test_resume_into_exit_is_an_error() -> None:
    with stub_target() as (target, stub, handler):
        handler.exited = True
        with pytest.raises(RemoteError, match="exited with status 3"):
            target.resume()
    assert not any(packet.startswith(b"D") for packet in stub.received)


def test_interrupted_resume_stops_the_program_and_detaches() -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    with stub_target() as (target, stub, handler):
        handler.running_forever = True
        previous = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                target.resume()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert target.stop_reply == b"T02thread:p2a.2a;"
    assert stub.received[-1] == b"D;2a"


def test_close_detaches() -> None:
    with stub_target() as (_, stub, _):
        pass
    assert stub.received[-1] == b"D;2a"


def test_refused_and_corrupt_packets_are_sent_again() -> None:
    with stub_target(nak_first=True, corrupt_first=True) as (target, stub, _):
        assert target.features["PacketSize"] == "40"
        assert stub.naks_seen == 1  # the corrupt reply was refused, then came again


def test_run_length_encoded_replies() -> None:
    with stub_target(encode=rle) as (target, _, _):
        threads = target.threads()
        registers = target.registers(threads[0], Abi.AARCH64_ENDIAN_LITTLE)
        assert dict(registers.extra)[1] == 0x2B01
        assert target.read_memory(0x1000, 4) == b"\0\1\2\3"


def test_stub_that_never_answers_times_out() -> None:
    stub = Stub(lambda data: None if data == b"?" else b"")
    try:
        with pytest.raises(RemoteError, match=r"no reply in 0\.5 s"):
            RemoteTarget.connect(stub.address, timeout=0.5)
    finally:
        stub.close()


def test_stub_that_closes_the_connection() -> None:
    def handler(data: bytes) -> bytes:
        raise OSError("gone")

    stub = Stub(handler)
    try:
        with pytest.raises(RemoteError, match="the stub closed the connection"):
            RemoteTarget.connect(stub.address, timeout=5)
    finally:
        stub.close()


def test_no_target_description_uses_the_core_registers() -> None:
    def handler(data: bytes) -> bytes:
        if data.startswith(b"qSupported"):
            return b"PacketSize=1000"
        if data == b"?":
            return b"S05"
        if data == b"qfThreadInfo":
            return b""
        if data == b"qOffsets":
            return b"Text=5500000000;Data=5500000000;Bss=5500000000"
        if data == b"g":
            # s390x: pswm, pswa, r0..r15, big-endian.
            values = [0x0705, 0x1000A, *range(0x100, 0x110)]
            return b"".join(v.to_bytes(8, "big").hex().encode() for v in values)
        return b""

    stub = Stub(handler)
    try:
        with RemoteTarget.connect(stub.address, timeout=5) as target:
            assert target.description is None
            (thread,) = target.threads()
            registers = target.registers(thread, Abi.S390X_ENDIAN_BIG)
            assert (registers.pc, registers.sp, registers.fp, registers.lr) == (
                0x1000A, 0x10F, 0x10B, 0x10E
            )
            assert target.exec_file() is None and target.auxv(True) == {}
            assert target.text_offset() == 0x5500000000
    finally:
        stub.close()


# -- descriptions and register names --------------------------------------------------------------


def test_description_errors() -> None:
    files = {"target.xml": b"<target><xi:include href=\"target.xml\"/></target>"}
    with pytest.raises(RemoteError, match="nest too deep"):
        parse_target_description(files.__getitem__)
    with pytest.raises(RemoteError, match=r"target\.xml"):
        parse_target_description({"target.xml": b"<target><reg"}.__getitem__)
    with pytest.raises(RemoteError, match="a bad register"):
        parse_target_description({"target.xml": b'<target><reg name="x"/></target>'}.__getitem__)


def test_registers_from_names() -> None:
    amd64 = registers_from_names(
        Abi.AMD64_ENDIAN_LITTLE, {"rip": 1, "rsp": 2, "rbp": 3, "rax": 4, "r15": 5}
    )
    assert (amd64.pc, amd64.sp, amd64.fp) == (1, 2, 3)
    assert dict(amd64.extra) == {0: 4, 15: 5, 6: 3, 7: 2}
    s390x = registers_from_names(
        Abi.S390X_ENDIAN_BIG, {"pswa": 8, "r15": 9, "r14": 10, "f0": 11, "f1": 12, "f15": 13}
    )
    assert (s390x.pc, s390x.sp, s390x.lr) == (8, 9, 10)
    # s390x DWARF numbers 16-31: f0 f2 f4 f6 f1 f3 f5 f7 f8 f10 f12 f14 f9 f11 f13 f15.
    assert dict(s390x.extra)[16] == 11 and dict(s390x.extra)[20] == 12
    assert dict(s390x.extra)[31] == 13
    with pytest.raises(RemoteError, match="register pc"):
        registers_from_names(Abi.AARCH64_ENDIAN_LITTLE, {"sp": 1})
