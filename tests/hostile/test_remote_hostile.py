"""A GDB remote stub cannot hold ``pysframe stack --remote`` or make it allocate without bound:
a stub on loopback that sends bad checksums or refuses packets forever, trickles noise or a
reply a byte at a time, floods noise or notifications, lists threads or an object without end,
answers memory reads with empty, short, over-long or padded replies, or names impossible
paths; each ends in a RemoteError that names the target, within the exchange timeout or the
session's time limit (short ones here, so that each case takes well under a second or two)."""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysframe.cli import main as cli_main
from pysframe.errors import SFrameError
from pysframe.format.constants import Abi
from pysframe.unwind.remote import RemoteTarget
from pysframe.unwind.rsp import MAX_PACKET, RemoteError, expand_runs, frame

#: What a stub does with a packet the client sent: write anything to the connection.
Answer = Callable[[bytes, socket.socket], None]
#: Exchange timeout and session time limit of the targets here, in seconds.
TIMEOUT = 0.5
TIME_LIMIT = 1.5
#: Every case must end within this many seconds.
BOUND = 4.0
AMD64 = Abi.AMD64_ENDIAN_LITTLE


def well_behaved(data: bytes) -> bytes:
    """The answers of a stopped x86-64 program, one thread, no target description, 64 KiB of
    memory at 0 (byte i holds i & 0xFF), an executable /bin/true."""
    if data.startswith(b"qSupported"):
        return b"PacketSize=4000;qXfer:auxv:read+;qXfer:exec-file:read+;multiprocess+"
    if data == b"?":
        return b"T05thread:p10.10;"
    if data == b"qfThreadInfo":
        return b"mp10.10"
    if data == b"qsThreadInfo":
        return b"l"
    if data.startswith(b"Hg") or data.startswith(b"D"):
        return b"OK"
    if data == b"g":
        # rax..r15, rip: 17 little-endian 64-bit values, register n holding n + 1.
        return b"".join((n + 1).to_bytes(8, "little").hex().encode() for n in range(17))
    if data.startswith(b"qXfer:exec-file:read:"):
        return b"l/bin/true"
    if data.startswith(b"qXfer:auxv:read:"):
        return b"l" + bytes(16)  # AT_NULL alone
    if data.startswith(b"m"):
        address, _, size = data[1:].partition(b",")
        start, count = int(address, 16), int(size, 16)
        if start + count > 1 << 16:
            return b"E14"
        return bytes(a & 0xFF for a in range(start, start + count)).hex().encode()
    return b""


def replying(change: Callable[[bytes], bytes | None]) -> Answer:
    """A stub that answers as :func:`well_behaved` does where ``change`` gives None."""

    def answer(data: bytes, connection: socket.socket) -> None:
        reply = change(data)
        connection.sendall(frame(well_behaved(data) if reply is None else reply))

    return answer


class HostileStub:
    """Serves one connection on loopback: acknowledges each packet the client sends with
    ``ack`` and hands it to ``answer``.  Its thread ends when the client hangs up or the stub
    is closed."""

    def __init__(self, answer: Answer, ack: bytes = b"+") -> None:
        self.answer = answer
        self.ack = ack
        self.received: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._connection: socket.socket | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            connection, _ = self._server.accept()
        except OSError:
            return
        self._connection = connection
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        try:
            while True:
                # The next packet; acks and interrupt bytes before it are dropped.
                while b"$" not in buffer or b"#" not in buffer[buffer.index(b"$") :] or (
                    len(buffer) < buffer.index(b"#", buffer.index(b"$")) + 3
                ):
                    chunk = connection.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                start = buffer.index(b"$")
                end = buffer.index(b"#", start)
                data, buffer = buffer[start + 1 : end], buffer[end + 3 :]
                connection.sendall(self.ack)
                self.received.append(data)
                self.answer(data, connection)
        except OSError:
            return
        finally:
            connection.close()

    def close(self) -> None:
        self._server.close()
        if self._connection is not None:
            with suppress(OSError):
                self._connection.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)


@contextmanager
def hostile(answer: Answer, ack: bytes = b"+") -> Iterator[HostileStub]:
    stub = HostileStub(answer, ack)
    try:
        yield stub
    finally:
        stub.close()


@contextmanager
def within(seconds: float = BOUND) -> Iterator[None]:
    start = time.monotonic()
    yield
    took = time.monotonic() - start
    assert took < seconds, f"took {took:.1f} s"


def connect(stub: HostileStub, time_limit: float | None = TIME_LIMIT) -> RemoteTarget:
    return RemoteTarget.connect(stub.address, timeout=TIMEOUT, time_limit=time_limit)


def fails(stub: HostileStub, match: str, action: Callable[[RemoteTarget], object]) -> RemoteError:
    """Connect and do ``action``: it must end in a RemoteError that names the target and
    says ``match``, within the bound."""
    with within(), pytest.raises(RemoteError, match=match) as caught, connect(stub) as target:
        action(target)
    error = caught.value
    assert error.path == stub.address and str(error).startswith(f"{stub.address}: ")
    return error


def forever(send: Callable[[socket.socket], None]) -> Answer:
    """A stub that, to the first packet, does ``send`` again and again."""

    def answer(data: bytes, connection: socket.socket) -> None:
        while True:
            send(connection)

    return answer


# -- the packet layer ----------------------------------------------------------------------------


def test_bad_checksums_forever() -> None:
    # Each refused reply comes again, its checksum wrong again.
    with hostile(forever(lambda c: c.sendall(b"$OK#00"))) as stub:
        fails(stub, "6 replies with a wrong checksum", lambda target: None)


def test_refused_packets_forever() -> None:
    # Every packet is refused ("-"), however often it comes again.
    with hostile(lambda data, connection: None, ack=b"-") as stub:
        fails(stub, "refused a packet 5 times", lambda target: None)
    assert stub.received == [stub.received[0]] * 5


def test_trickle_of_noise() -> None:
    def send(connection: socket.socket) -> None:
        connection.sendall(b"x")  # a byte that is no packet, ten times a second
        time.sleep(0.1)

    with hostile(forever(send)) as stub:
        fails(stub, r"no reply in 0\.5 s", lambda target: None)


def test_valid_reply_a_byte_at_a_time() -> None:
    # Ten bytes a second: each recv gets a byte well within the timeout, the reply never
    # within it.
    def answer(data: bytes, connection: socket.socket) -> None:
        for byte in frame(well_behaved(data)):
            connection.sendall(bytes([byte]))
            time.sleep(0.1)

    with hostile(answer) as stub:
        fails(stub, r"no reply in 0\.5 s", lambda target: None)


def test_flood_of_noise() -> None:
    noise = b"x" * 65536
    with hostile(forever(lambda c: c.sendall(noise))) as stub:
        tracemalloc.start()
        try:
            fails(stub, f"more than {MAX_PACKET} bytes that are no reply", lambda target: None)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 50 << 20


def test_flood_of_notifications() -> None:
    notifications = frame(b"Stop:T05thread:p10.10;").replace(b"$", b"%", 1) * 1000
    with hostile(forever(lambda c: c.sendall(notifications))) as stub:
        fails(stub, r"no reply in 0\.5 s|bytes that are no reply", lambda target: None)


def test_over_long_packet() -> None:
    def answer(data: bytes, connection: socket.socket) -> None:
        connection.sendall(b"$" + b"0" * (MAX_PACKET + 1) + b"#00")

    with hostile(answer) as stub:
        fails(stub, f"a reply of more than {MAX_PACKET} bytes", lambda target: None)


def test_run_length_encoding_bounds() -> None:
    assert expand_runs(b"0* ") == b"0000"  # ' ' is 3 more copies
    for bad in (b"*!", b"0*", b"0*\x1d", b"0*\x00"):  # nothing to repeat, no count, count 0
        with pytest.raises(RemoteError, match="bad run-length encoding"):
            expand_runs(bad)
    with pytest.raises(RemoteError, match="once its runs are expanded"):
        expand_runs(b"0*~" * 20, limit=1000)  # 20 runs of 98 bytes
    assert len(expand_runs(b"0*~" * 10, limit=1000)) == 980


def test_memory_replies_padded_with_runs() -> None:
    # 1 MB of run-length-encoded bytes after each memory reply: 32 MB once expanded.
    padding = b"0*~" * 333_333

    def change(data: bytes) -> bytes | None:
        return well_behaved(data) + padding if data.startswith(b"m") else None

    with hostile(replying(change)) as stub:
        tracemalloc.start()
        try:
            fails(stub, "once its runs are expanded", lambda t: t.read_memory(0x100, 8))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 50 << 20


# -- the session's time limit ----------------------------------------------------------------


def test_short_memory_replies_forever_end_at_the_time_limit() -> None:
    # Each m reply gives one byte: every read goes on, each exchange is quick, and the
    # reads that fail are taken as unreadable memory, as the unwinder takes them; leaving the
    # target raises what ended them.
    def change(data: bytes) -> bytes | None:
        return well_behaved(data)[:2] if data.startswith(b"m") else None

    def read_everything(target: RemoteTarget) -> None:
        for address in range(0, 1 << 16, 256):
            with suppress(OSError, SFrameError):
                target.read_memory(address, 256)

    with hostile(replying(change)) as stub:
        fails(stub, r"took longer than its time limit of 1\.5 s", read_everything)


def test_after_failing_every_request_fails_at_once() -> None:
    empty = "an empty reply to a memory read"
    with (
        hostile(replying(lambda data: b"" if data.startswith(b"m") else None)) as stub,
        within(),
        pytest.raises(RemoteError, match=empty),
        connect(stub) as target,
    ):
        for _ in range(3):
            with pytest.raises(RemoteError, match=empty):
                target.read_memory(0, 8)
        asked = len(stub.received)
        with pytest.raises(RemoteError, match=empty):
            target.threads()
        assert len(stub.received) == asked  # nothing more was sent
    assert not any(packet.startswith(b"D") for packet in stub.received)


def test_time_limit_counts_again_after_the_program_stops() -> None:
    # The program runs for twice the time limit before it stops: the wait is not bounded,
    # and the session goes on after the stop.
    def answer(data: bytes, connection: socket.socket) -> None:
        if data == b"c":
            time.sleep(1.0)
            connection.sendall(frame(b"T05thread:p10.10;"))
            return
        connection.sendall(frame(well_behaved(data)))

    with (
        hostile(answer) as stub,
        RemoteTarget.connect(stub.address, timeout=TIMEOUT, time_limit=0.5) as target,
    ):
        assert target.resume() == b"T05thread:p10.10;"
        assert target.read_memory(0x10, 4) == bytes([0x10, 0x11, 0x12, 0x13])
    assert stub.received[-1] == b"D;10"


def test_stop_reply_that_trickles_after_the_program_stops() -> None:
    def answer(data: bytes, connection: socket.socket) -> None:
        if data != b"c":
            connection.sendall(frame(well_behaved(data)))
            return
        for byte in frame(b"T05thread:p10.10;"):
            connection.sendall(bytes([byte]))
            time.sleep(0.1)

    with hostile(answer) as stub:
        fails(stub, r"no reply in 0\.5 s", lambda target: target.resume())


# -- replies checked -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_start", "reply", "match", "action"),
    [
        # The thread list: a reply naming no new thread, for ever.
        (b"qsThreadInfo", b"m", "names no new thread", "threads"),
        (b"qsThreadInfo", b"mp10.10", "names no new thread", "threads"),
        (b"qfThreadInfo", b"mzz", r"a bad thread id b'zz'", "threads"),
        (b"qfThreadInfo", b"mp1." + b"1" * 17, "a bad thread id", "threads"),
        (b"qfThreadInfo", b"m-1", "a bad thread id", "threads"),
        # Objects: an empty part that does not end them, for ever.
        (b"qXfer:auxv:read:", b"m", "auxv object without an end", "auxv"),
        (b"qXfer:auxv:read:", b"x", "a bad qXfer reply", "auxv"),
        (b"qXfer:exec-file:read:", b"l/tmp/a\0b", "path the stub gives holds a NUL", "exec"),
        (b"qXfer:exec-file:read:", b"l/" + b"a" * 5000, "a path of 5001 bytes", "exec"),
        # Registers.
        (b"g", b"00" * 8 * 5, "the target did not give register rip", "registers"),
        (b"g", b"E01", "cannot read the registers", "registers"),
        (b"Hg", b"E01", "cannot select thread p10.10", "registers"),
        # Memory: empty, not hex, longer than asked.
        (b"m", b"", "an empty reply to a memory read at 0x100", "memory"),
        (b"m", b"0g", "not hex", "memory"),
        (b"m", b"00 11", "not hex", "memory"),
        (b"m", b"00" * 257, "a memory reply of 257 bytes to a read of 256", "memory"),
        (b"qOffsets", b"Text=" + b"f" * 17, "a bad qOffsets reply", "offsets"),
    ],
)
def test_bad_replies_name_the_target(
    request_start: bytes, reply: bytes, match: str, action: str
) -> None:
    actions: dict[str, Callable[[RemoteTarget], object]] = {
        "threads": lambda t: t.threads(),
        "auxv": lambda t: t.auxv(False),
        "exec": lambda t: t.exec_file(),
        "registers": lambda t: t.registers(t.threads()[0], AMD64),
        "memory": lambda t: t.read_memory(0x100, 8),
        "offsets": lambda t: t.text_offset(),
    }
    with hostile(replying(lambda data: reply if data.startswith(request_start) else None)) as stub:
        fails(stub, match, actions[action])


def test_memory_errors_and_bounds() -> None:
    with hostile(replying(lambda data: None)) as stub, connect(stub) as target:
        assert target.read_memory(0xFFFC, 4) == bytes([0xFC, 0xFD, 0xFE, 0xFF])
        with pytest.raises(OSError, match="cannot read 4 bytes at 0x10000"):
            target.read_memory(0xFFFE, 6)  # E14 for the bytes past 64 KiB
        with pytest.raises(OSError, match="outside the address space"):
            target.read_memory((1 << 64) - 4, 8)
        with pytest.raises(OSError, match="more than the 1048576 read at once"):
            target.read_memory(0, (1 << 20) + 1)
        asked = len(stub.received)
        assert target.read_memory(0xFFF0, 2) == bytes([0xF0, 0xF1])
        assert len(stub.received) == asked  # cached
        assert target.connection.failure is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([b"qfThreadInfo", b"qXfer", b"g", b"m", b"?", b"qSupported"]), st.binary()
)
def test_any_one_reply_ends_in_a_result_or_a_clean_error(
    request_start: bytes, reply: bytes
) -> None:
    # Whatever a stub answers to one kind of request (the packet's own framing bytes left
    # out), the target gives a result or a clean error.
    framed = reply.replace(b"#", b"").replace(b"$", b"")

    def change(data: bytes) -> bytes | None:
        return framed if data.startswith(request_start) else None

    with hostile(replying(change)) as stub, within():
        try:
            with connect(stub) as target:
                thread = target.threads()[0]
                target.registers(thread, AMD64)
                target.exec_file()
                target.auxv(False)
                target.read_memory(0x100, 16)
        except (SFrameError, OSError) as error:
            if isinstance(error, SFrameError):
                assert error.path == stub.address


# -- through the command line --------------------------------------------------------------------


def test_cli_names_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    def change(data: bytes) -> bytes | None:
        return b"l/tmp/a\0b" if data.startswith(b"qXfer:exec-file:read:") else None

    with hostile(replying(change)) as stub, within():
        assert cli_main(["stack", "--remote", stub.address]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pysframe: {stub.address}: the executable's path the stub gives "
                          "holds a NUL"), err
    assert "internal error" not in err


# -- target descriptions -------------------------------------------------------------------------


def described(target_xml: bytes) -> Callable[[bytes], bytes | None]:
    """Answers that serve ``target_xml`` as the target description, whole in one part."""

    def change(data: bytes) -> bytes | None:
        if data.startswith(b"qSupported"):
            return b"PacketSize=4000;qXfer:features:read+"
        if data.startswith(b"qXfer:features:read:target.xml:"):
            # Binary data: # $ } * escaped as } and the byte XOR 0x20.
            return b"l" + b"".join(
                bytes([0x7D, byte ^ 0x20]) if byte in b"#$}*" else bytes([byte])
                for byte in target_xml
            )
        return None

    return change


def test_a_register_described_many_times_is_read_once() -> None:
    # rax..r15 in the g reply; rip, described 1,000 times, is left to p requests.
    names = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
             *(f"r{n}" for n in range(8, 16)))
    xml = (
        b"<target><architecture>i386:x86-64</architecture><feature name='core'>"
        + b"".join(b"<reg name='%s' bitsize='64'/>" % n.encode() for n in names)
        + b"<reg name='rip' bitsize='64'/>" * 1000
        + b"</feature></target>"
    )
    change = described(xml)

    def answer(data: bytes) -> bytes | None:
        if data == b"g":
            return well_behaved(data)[: 16 * 16]
        return change(data)

    with (
        hostile(replying(answer)) as stub,
        within(),
        pytest.raises(RemoteError, match="did not give register rip"),
        connect(stub) as target,
    ):
        target.registers(target.threads()[0], AMD64)
    assert sum(packet.startswith(b"p") for packet in stub.received) == 1


@pytest.mark.parametrize("href", [b"a:b", b"x#00", b"", b"a" * 300])
def test_bad_include_names_are_refused(href: bytes) -> None:
    xml = b"<target><xi:include href='%s'/></target>" % href
    with hostile(replying(described(xml))) as stub:
        fails(stub, "a bad include", lambda target: target.description)
