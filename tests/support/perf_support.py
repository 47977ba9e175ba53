"""Helpers of the perf.data tests: hand-built files, perf itself, and what perf prints.

* :class:`PerfFile` writes small perf.data files field by field (file or pipe mode, either
  byte order), after perf.data-file-format.txt and perf_event.h, for the unit tests;
  :func:`unfinished` makes of one what ``perf record`` leaves when it is killed.
* :func:`check_perf` raises :class:`Unavailable` (tool "perf": the tests stop through
  conftest.unavailable, a skip outside CI and a failure under CI) where perf is missing or may
  not open events (conftest.perf_problem); :func:`record` records a program.
* :func:`parse_dump` reads ``perf script -D`` (every record perf decoded, with its file offset),
  :func:`parse_script` ``perf script -F pid,tid,time,ip,period,cpu --ns -G``,
  :func:`parse_header` ``perf report --header-only -I``: the golden references.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import perf_problem
from stack_support import Unavailable

DATA = Path(__file__).parent.parent / "data" / "perf"
PERF = shutil.which("perf") or "/usr/bin/perf"

# PERF_SAMPLE_* bits (perf_event.h), spelled here on purpose: tests do not take the layout
# they check from the code under test.
IP, TID, TIME, ADDR, READ, CALLCHAIN, ID, CPU, PERIOD, STREAM_ID, RAW = (1 << n for n in range(11))
BRANCH_STACK, REGS_USER, STACK_USER, WEIGHT, DATA_SRC, IDENTIFIER = (1 << n for n in range(11, 17))
TRANSACTION, REGS_INTR, PHYS_ADDR, AUX, CGROUP = (1 << n for n in range(17, 22))
DATA_PAGE_SIZE, CODE_PAGE_SIZE = 1 << 22, 1 << 23
#: Every sample field, in the order of a sample record (perf_output_sample).
SAMPLE_FIELDS = (
    IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD, READ, CALLCHAIN, RAW,
    BRANCH_STACK, REGS_USER, STACK_USER, WEIGHT, DATA_SRC, TRANSACTION, REGS_INTR, PHYS_ADDR,
    CGROUP, DATA_PAGE_SIZE, CODE_PAGE_SIZE, AUX,
)  # fmt: skip
# attr flag bits (bit fields in declaration order) and PERF_RECORD_* types.
FLAG_FREQ, FLAG_SAMPLE_ID_ALL = 1 << 10, 1 << 18
# Linux 6.19: defer_callchain and defer_output, the bit fields after sigtrap (bit 37).
FLAG_DEFER_CALLCHAIN, FLAG_DEFER_OUTPUT = 1 << 38, 1 << 39
MMAP, LOST, COMM, EXIT, FORK, SAMPLE, MMAP2, LOST_SAMPLES = 1, 2, 3, 4, 7, 9, 10, 13
CALLCHAIN_DEFERRED = 22
# Callchain context markers (enum perf_callchain_context): (u64)-128, -512, and Linux 6.19's
# PERF_CONTEXT_USER_DEFERRED, (u64)-640, which the cookie follows.
CONTEXT_KERNEL, CONTEXT_USER, CONTEXT_USER_DEFERRED = 2**64 - 128, 2**64 - 512, 2**64 - 640
HEADER_ATTR, HEADER_TRACING_DATA, HEADER_BUILD_ID, FINISHED_ROUND = 64, 66, 67, 68
AUXTRACE, HEADER_FEATURE, COMPRESSED = 71, 80, 81
# Feature numbers.
FEAT_BUILD_ID, FEAT_HOSTNAME, FEAT_OSRELEASE, FEAT_VERSION, FEAT_ARCH, FEAT_NRCPUS = range(2, 8)
FEAT_CMDLINE, FEAT_EVENT_DESC = 11, 12


def check_perf() -> None:
    """Raise Unavailable unless perf is here and may record a child process."""
    problem = perf_problem()
    if problem:
        raise Unavailable("perf", problem)


def build_program(out: Path, name: str) -> Path:
    """Compile ``tests/data/perf/NAME.c`` (-O2 -pthread) into ``out``."""
    if shutil.which("gcc") is None:
        raise Unavailable("gcc", "gcc is not installed")
    program = out / name
    done = subprocess.run(
        ["gcc", "-O2", "-pthread", "-o", str(program), str(DATA / f"{name}.c")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise Unavailable("gcc", f"cannot compile {name}.c: {done.stderr.strip()[:200]}")
    return program


def build_profiled(out: Path, frame_pointers: bool = False) -> Path:
    """Build ``tests/data/perf/profiled.c`` and its shared library (profiledlib.c) into
    ``out``, -O2 without frame pointers (``frame_pointers``: with them, for ``perf record
    -g``): the program whose chains the walks are checked on."""
    if shutil.which("gcc") is None:
        raise Unavailable("gcc", "gcc is not installed")
    flags = ["-O2", "-fno-omit-frame-pointer" if frame_pointers else "-fomit-frame-pointer"]
    for command in (
        ["gcc", *flags, "-fPIC", "-shared", "-o", str(out / "libprofiled.so"),
         str(DATA / "profiledlib.c")],
        ["gcc", *flags, "-pthread", "-o", str(out / "profiled"), str(DATA / "profiled.c"),
         f"-L{out}", "-lprofiled", "-Wl,-rpath,$ORIGIN"],
    ):  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            raise Unavailable("gcc", f"cannot build the program: {done.stderr[:200]}")
    return out / "profiled"


#: The options of the golden recordings: fixed period, DWARF call graphs (registers and user
#: stack copies), the CPU and period in every sample.
RECORD_OPTIONS = (
    "-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,512", "--sample-cpu", "--period",
)  # fmt: skip


def record(
    out: Path, program: list[str], *, pipe: bool = False, options: tuple[str, ...] = RECORD_OPTIONS,
    environment: dict[str, str] | None = None,
) -> Path:
    """Record ``program`` into ``out`` (with ``-o -`` into the file when ``pipe``), with
    ``environment`` added to this process's."""
    check_perf()
    command = [PERF, "record", "-q", *options, "-o", "-" if pipe else str(out), "--", *program]
    env = {**os.environ, **environment} if environment else None
    with open(out, "wb") if pipe else open("/dev/null", "wb") as sink:
        done = subprocess.run(
            command, stdout=sink, stderr=subprocess.PIPE, timeout=120, check=False, env=env
        )
    if done.returncode:
        message = f"perf record failed: {done.stderr.decode(errors='replace')[:300]}"
        raise Unavailable("perf", message)
    return out


def perf_output(*arguments: str) -> str:
    done = subprocess.run(
        [PERF, *arguments], capture_output=True, text=True, timeout=300, check=False,
        errors="replace",
    )  # fmt: skip
    if done.returncode:
        raise AssertionError(f"perf {' '.join(arguments)} failed: {done.stderr[:300]}")
    return done.stdout


def dump_text(path: Path) -> str:
    """``perf script -D`` of ``path`` without the hex dumps of the raw records."""
    text = perf_output("script", "-D", "-i", str(path))
    return "".join(
        line for line in text.splitlines(keepends=True) if not re.match(r"\.\s+[0-9a-f]{4}: ", line)
    )


# -- perf script -D -------------------------------------------------------------------------

_RECORD = re.compile(
    r"^(?:(?P<cpu>\d+) )?(?P<time>-?\d+) (?P<offset>0x[0-9a-f]+) \[(?P<size>0x[0-9a-f]+)\]: "
    r"PERF_RECORD_(?P<kind>[A-Z0-9_]+)(?P<rest>.*)$"
)
_SAMPLE = re.compile(
    r"^\(IP, (?P<misc>0x[0-9a-f]+)\): (?P<pid>-?\d+)/(?P<tid>-?\d+): (?P<ip>0x[0-9a-f]+) "
    r"period: (?P<period>\d+) addr: (?P<addr>0x[0-9a-f]+|0)"
)


@dataclass
class DumpSample:
    """A sample as perf script -D prints it."""

    cpu: int | None
    time: int
    misc: int
    pid: int
    tid: int
    ip: int
    period: int
    addr: int
    callchain: list[int] = field(default_factory=list)
    regs_mask: int | None = None
    regs_abi: str | None = None
    regs: dict[str, int] = field(default_factory=dict)
    ustack_size: int | None = None
    ustack_offset: int | None = None


@dataclass
class DumpRecord:
    """A side-band record as perf script -D prints it: its type and the rest of the line."""

    cpu: int | None
    time: int
    kind: str
    text: str


@dataclass
class Dump:
    samples: dict[int, DumpSample] = field(default_factory=dict)
    records: dict[int, DumpRecord] = field(default_factory=dict)


def parse_dump(text: str, pipe: bool) -> Dump:
    """The samples and side-band records of ``perf script -D`` output, by file offset (perf
    counts a pipe-mode stream's offsets after its 16-byte header)."""
    dump = Dump()
    current: DumpSample | None = None
    shift = 16 if pipe else 0
    for line in text.splitlines():
        found = _RECORD.match(line)
        if found:
            current = None
            offset = int(found["offset"], 16) + shift
            cpu = int(found["cpu"]) if found["cpu"] is not None else None
            if found["kind"] == "SAMPLE":
                sample = _SAMPLE.match(found["rest"])
                assert sample, line
                current = DumpSample(
                    cpu, int(found["time"]), int(sample["misc"], 16), int(sample["pid"]),
                    int(sample["tid"]), int(sample["ip"], 16), int(sample["period"]),
                    int(sample["addr"], 16) if sample["addr"] != "0" else 0,
                )  # fmt: skip
                dump.samples[offset] = current
            else:
                dump.records[offset] = DumpRecord(
                    cpu, int(found["time"]), found["kind"], found["rest"].strip()
                )
            continue
        if current is None:
            continue
        if entry := re.match(r"^\.\.\.\.\.\s+\d+: ([0-9a-f]+)$", line):
            current.callchain.append(int(entry[1], 16))
        elif regs := re.match(r"^\.\.\. user regs: mask (0x[0-9a-f]+) ABI (.+)$", line):
            current.regs_mask, current.regs_abi = int(regs[1], 16), regs[2]
        elif reg := re.match(r"^\.\.\.\. (\w+)\s+(0x[0-9a-f]+)$", line):
            current.regs[reg[1]] = int(reg[2], 16)
        elif stack := re.match(r"^\.\.\. ustack: size (\d+), offset (0x[0-9a-f]+)$", line):
            current.ustack_size, current.ustack_offset = int(stack[1]), int(stack[2], 16)
    return dump


def parse_script(text: str) -> list[tuple[int, int, int, int, int, int]]:
    """(pid, tid, cpu, time in ns, period, ip) of each line of
    ``perf script -F pid,tid,time,ip,period,cpu --ns -G``."""
    rows = []
    for line in text.splitlines():
        found = re.match(
            r"^\s*(-?\d+)/(-?\d+)\s+\[(\d+)\]\s+(\d+)\.(\d{9}):\s+(\d+)\s+([0-9a-f]+)\s*$", line
        )
        assert found, line
        pid, tid, cpu, seconds, nanos, period, ip = found.groups()
        rows.append((
            int(pid), int(tid), int(cpu), int(seconds) * 10**9 + int(nanos), int(period),
            int(ip, 16),
        ))  # fmt: skip
    return rows


def parse_header(text: str) -> dict[str, str]:
    """``# name : value`` lines of ``perf report --header-only -I`` (the last of each name,
    events as ``event`` lines joined by newlines)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        found = re.match(r"^# ([a-z][a-z ]*[a-z]) *: (.*)$", line)
        if not found:
            continue
        key, value = found[1], found[2]
        if key == "event" and key in values:
            values[key] += "\n" + value
        else:
            values[key] = value
    return values


def _c_hex(value: int) -> str:
    """``%#x`` as C prints it (no prefix for zero)."""
    return f"{value:#x}" if value else "0"


def mmap_text(event: Any) -> str:
    """An MMAP or MMAP2 event as perf script -D prints it after PERF_RECORD_MMAP[2]
    (util/event.c perf_event__fprintf_mmap[2])."""
    where = f"[{_c_hex(event.start)}({_c_hex(event.length)}) @ {_c_hex(event.pgoff)}"
    if not event.mmap2:
        kind = "r" if event.misc & (1 << 13) else "x"
        return f"{event.pid}/{event.tid}: {where}]: {kind} {event.filename}"
    if event.build_id is not None:
        identity = event.build_id.hex()
    else:
        identity = f"{event.maj:02x}:{event.min:02x} {event.ino} {event.ino_generation}"
    prot = (
        ("r" if event.prot & 1 else "-") + ("w" if event.prot & 2 else "-")
        + ("x" if event.prot & 4 else "-") + ("s" if event.flags & 1 else "p")
    )
    return f"{event.pid}/{event.tid}: {where} {identity}]: {prot} {event.filename}"


# -- hand-built perf.data -------------------------------------------------------------------


@dataclass
class Attr:
    """An event attribute to write (perf_event.h struct perf_event_attr)."""

    sample_type: int
    ids: tuple[int, ...] = ()
    sample_id_all: bool = True
    regs_user: int = 0
    stack_user: int = 0
    read_format: int = 0
    branch_sample_type: int = 0
    regs_intr: int = 0
    period: int = 4000
    freq: bool = False
    type: int = 1
    config: int = 0
    #: PERF_ATTR_SIZE_VER8; smaller sizes cut the struct (0 writes VER0's 64 and says 0).
    size: int = 136
    name: str | None = None
    #: Linux 6.19's defer_callchain and defer_output (perf record --call-graph fp,defer).
    defer: bool = False


def _flags(attr: Attr, big_endian: bool) -> int:
    """The bit-field word: disabled at bit 0 ... freq 10 ... sample_id_all 18 ...
    defer_callchain 38, defer_output 39 (declaration order), which a big-endian machine lays
    out from bit 63 down."""
    flags = (FLAG_FREQ if attr.freq else 0) | (FLAG_SAMPLE_ID_ALL if attr.sample_id_all else 0)
    flags |= (FLAG_DEFER_CALLCHAIN | FLAG_DEFER_OUTPUT) if attr.defer else 0
    return int(f"{flags:064b}"[::-1], 2) if big_endian else flags


class PerfFile:
    """A perf.data file written field by field (``file`` or ``pipe`` mode, either byte
    order).  Records are added in order; :meth:`build` lays the file out."""

    def __init__(self, big_endian: bool = False, pipe: bool = False) -> None:
        self.big_endian, self.pipe = big_endian, pipe
        self.o = ">" if big_endian else "<"
        self.attrs: list[Attr] = []
        self.features: list[tuple[int, bytes]] = []
        self.records: list[bytes] = []
        #: Attributes written as HEADER_ATTR records among the others (pipe mode), not
        #: before them.
        self.late_attrs: set[int] = set()

    def pack(self, codes: str, *values: Any) -> bytes:
        return struct.pack(self.o + codes, *values)

    def attr_bytes(self, attr: Attr) -> bytes:
        full = (
            self.pack("I", attr.type)                       # u32 type
            + self.pack("I", attr.size)                     # u32 size (0: PERF_ATTR_SIZE_VER0)
            + self.pack("Q", attr.config)                   # u64 config
            + self.pack("Q", attr.period)                   # u64 sample_period / sample_freq
            + self.pack("Q", attr.sample_type)              # u64 sample_type
            + self.pack("Q", attr.read_format)              # u64 read_format
            + self.pack("Q", _flags(attr, self.big_endian)) # u64 bit fields
            + self.pack("I", 0)                             # u32 wakeup_events
            + self.pack("I", 0)                             # u32 bp_type
            + self.pack("Q", 0)                             # u64 config1  (VER0 ends: 64)
            + self.pack("Q", 0)                             # u64 config2  (VER1: 72)
            + self.pack("Q", attr.branch_sample_type)       # u64 branch_sample_type (VER2: 80)
            + self.pack("Q", attr.regs_user)                # u64 sample_regs_user
            + self.pack("I", attr.stack_user)               # u32 sample_stack_user
            + self.pack("i", 0)                             # s32 clockid   (VER3: 96)
            + self.pack("Q", attr.regs_intr)                # u64 sample_regs_intr (VER4: 104)
            + self.pack("I", 0)                             # u32 aux_watermark
            + self.pack("H", 0)                             # u16 sample_max_stack
            + self.pack("H", 0)                             # u16 __reserved_2 (VER5: 112)
            + self.pack("I", 0)                             # u32 aux_sample_size
            + self.pack("I", 0)                             # u32 __reserved_3 (VER6: 120)
            + self.pack("Q", 0)                             # u64 sig_data (VER7: 128)
            + self.pack("Q", 0)                             # u64 config3  (VER8: 136)
        )  # fmt: skip
        return full[: attr.size or 64]

    def add_attr(self, attr: Attr) -> int:
        self.attrs.append(attr)
        return len(self.attrs) - 1

    def string(self, text: str) -> bytes:
        """perf_header_string: u32 len, then the text NUL-padded to len (a multiple of 64,
        header.c NAME_ALIGN)."""
        raw = text.encode() + b"\0"
        length = -(-len(raw) // 64) * 64
        return self.pack("I", length) + raw.ljust(length, b"\0")

    def add_feature(self, feature: int, payload: bytes) -> None:
        self.features.append((feature, payload))

    def record(self, kind: int, misc: int, body: bytes) -> None:
        """A record: u32 type, u16 misc, u16 size (header included), then ``body``."""
        self.records.append(self.pack("IHH", kind, misc, 8 + len(body)) + body)

    def trailer(
        self, attr: int, pid: int = 0, tid: int = 0, time: int = 0, ident: int = 0,
        stream_id: int = 0, cpu: int = 0,
    ) -> bytes:
        """struct sample_id for attribute ``attr``'s sample_type (empty without
        sample_id_all)."""
        kind = self.attrs[attr]
        if not kind.sample_id_all:
            return b""
        out = b""
        if kind.sample_type & TID:
            out += self.pack("ii", pid, tid)               # u32 pid, tid
        if kind.sample_type & TIME:
            out += self.pack("Q", time)                    # u64 time
        if kind.sample_type & ID:
            out += self.pack("Q", ident)                   # u64 id
        if kind.sample_type & STREAM_ID:
            out += self.pack("Q", stream_id)               # u64 stream_id
        if kind.sample_type & CPU:
            out += self.pack("II", cpu, 0)                 # u32 cpu, res
        if kind.sample_type & IDENTIFIER:
            out += self.pack("Q", ident)                   # u64 id
        return out

    def sample(self, attr: int, misc: int = 2, **f: Any) -> None:
        """A PERF_RECORD_SAMPLE of attribute ``attr`` (kernel/events/core.c
        perf_output_sample order); fields default to zero or empty."""
        kind = self.attrs[attr]
        st = kind.sample_type
        ident = f.get("ident", kind.ids[0] if kind.ids else 0)
        body = b""
        if st & IDENTIFIER:
            body += self.pack("Q", ident)                  # u64 id
        if st & IP:
            body += self.pack("Q", f.get("ip", 0))         # u64 ip
        if st & TID:
            body += self.pack("ii", f.get("pid", 0), f.get("tid", 0))  # u32 pid, tid
        if st & TIME:
            body += self.pack("Q", f.get("time", 0))       # u64 time
        if st & ADDR:
            body += self.pack("Q", f.get("addr", 0))       # u64 addr
        if st & ID:
            body += self.pack("Q", ident)                  # u64 id
        if st & STREAM_ID:
            body += self.pack("Q", f.get("stream_id", 0))  # u64 stream_id
        if st & CPU:
            body += self.pack("II", f.get("cpu", 0), 0)    # u32 cpu, res
        if st & PERIOD:
            body += self.pack("Q", f.get("period", 0))     # u64 period
        if st & READ:
            body += f.get("read", b"")                     # struct read_format, pre-packed
        if st & CALLCHAIN:
            chain = f.get("callchain", ())
            body += self.pack("Q", len(chain))             # u64 nr
            body += self.pack(f"{len(chain)}Q", *chain)    # u64 ips[nr]
        if st & RAW:
            raw = f.get("raw", b"")
            body += self.pack("I", len(raw)) + raw         # u32 size, char data[size]
        if st & BRANCH_STACK:
            entries = f.get("branches", ())
            body += self.pack("Q", len(entries))           # u64 nr
            if kind.branch_sample_type & (1 << 17):
                body += self.pack("Q", f.get("hw_idx", 0)) # u64 hw_idx (BRANCH_HW_INDEX)
            for entry in entries:
                body += self.pack("QQQ", *entry)           # u64 from, to, flags
        if st & REGS_USER:
            abi = f.get("regs_abi", 2)
            body += self.pack("Q", abi)                    # u64 abi
            if abi:
                regs = f.get("regs", (0,) * kind.regs_user.bit_count())
                body += self.pack(f"{len(regs)}Q", *regs)  # u64 regs[weight(mask)]
        if st & STACK_USER:
            stack = f.get("stack", b"")
            body += self.pack("Q", len(stack))             # u64 size
            if stack:
                body += stack                              # char data[size]
                body += self.pack("Q", f.get("dyn_size", len(stack)))  # u64 dyn_size
        if st & WEIGHT:
            body += self.pack("Q", f.get("weight", 0))     # u64 weight
        if st & DATA_SRC:
            body += self.pack("Q", f.get("data_src", 0))   # u64 data_src
        if st & TRANSACTION:
            body += self.pack("Q", 0)                      # u64 transaction
        if st & REGS_INTR:
            intr = f.get("intr_regs", (1,) * kind.regs_intr.bit_count())
            body += self.pack("Q", 2 if intr else 0)       # u64 abi
            body += self.pack(f"{len(intr)}Q", *intr)      # u64 regs[weight(mask)]
        if st & PHYS_ADDR:
            body += self.pack("Q", 0)                      # u64 phys_addr
        if st & CGROUP:
            body += self.pack("Q", 0)                      # u64 cgroup
        if st & DATA_PAGE_SIZE:
            body += self.pack("Q", 4096)                   # u64 data_page_size
        if st & CODE_PAGE_SIZE:
            body += self.pack("Q", 4096)                   # u64 code_page_size
        if st & AUX:
            aux = f.get("aux", b"")
            body += self.pack("Q", len(aux)) + aux         # u64 size, char data[size]
        self.record(SAMPLE, misc, body)

    def mmap2(
        self, attr: int, pid: int, tid: int, start: int, length: int, pgoff: int,
        name: str | bytes, *, prot: int = 5, flags: int = 2, build_id: bytes | None = None,
        time: int = 0, misc: int = 2,
    ) -> None:
        body = self.pack("iiQQQ", pid, tid, start, length, pgoff)  # pid, tid, addr, len, pgoff
        if build_id is None:
            body += self.pack("IIQQ", 8, 1, 1234, 7)       # maj, min, ino, ino_generation
        else:
            misc |= 1 << 14                                # PERF_RECORD_MISC_MMAP_BUILD_ID
            body += self.pack("BBH", len(build_id), 0, 0)  # build_id_size, reserved
            body += build_id.ljust(20, b"\0")              # u8 build_id[20]
        body += self.pack("II", prot, flags)               # u32 prot, flags
        body += _padded_name(name)                         # char filename[] (8-padded)
        body += self.trailer(attr, pid, tid, time, self._ident(attr))
        self.record(MMAP2, misc, body)

    def mmap(
        self, attr: int, pid: int, tid: int, start: int, length: int, pgoff: int, name: str,
        *, time: int = 0, misc: int = 2,
    ) -> None:
        body = self.pack("iiQQQ", pid, tid, start, length, pgoff)  # pid, tid, addr, len, pgoff
        body += _padded_name(name)                         # char filename[]
        body += self.trailer(attr, pid, tid, time, self._ident(attr))
        self.record(MMAP, misc, body)

    def comm(
        self, attr: int, pid: int, tid: int, name: str | bytes, *, time: int = 0,
        exec_: bool = False,
    ) -> None:
        body = self.pack("ii", pid, tid) + _padded_name(name)  # pid, tid, char comm[]
        body += self.trailer(attr, pid, tid, time, self._ident(attr))
        self.record(COMM, (1 << 13) if exec_ else 0, body)  # PERF_RECORD_MISC_COMM_EXEC

    def task(
        self, attr: int, fork: bool, pid: int, ppid: int, tid: int, ptid: int, *, time: int = 0
    ) -> None:
        body = self.pack("iiiiQ", pid, ppid, tid, ptid, time)  # pid, ppid, tid, ptid, time
        body += self.trailer(attr, pid, tid, time, self._ident(attr))
        self.record(FORK if fork else EXIT, 0, body)

    def lost(self, attr: int, ident: int, count: int, *, time: int = 0) -> None:
        body = self.pack("QQ", ident, count)               # u64 id, u64 lost
        body += self.trailer(attr, time=time, ident=self._ident(attr))
        self.record(LOST, 0, body)

    def lost_samples(self, attr: int, count: int, *, time: int = 0) -> None:
        body = self.pack("Q", count)                       # u64 lost
        body += self.trailer(attr, time=time, ident=self._ident(attr))
        self.record(LOST_SAMPLES, 0, body)

    def callchain_deferred(
        self, attr: int, pid: int, tid: int, cookie: int, ips: tuple[int, ...], *,
        time: int = 0, nr: int | None = None,
    ) -> None:
        """A PERF_RECORD_CALLCHAIN_DEFERRED (Linux 6.19 perf_event.h): the user callchain of
        thread ``tid`` for its samples with ``cookie``; ``nr`` says another count than
        ``len(ips)`` (a corrupt record)."""
        body = self.pack("Q", cookie)                      # u64 cookie
        body += self.pack("Q", len(ips) if nr is None else nr)  # u64 nr
        body += self.pack(f"{len(ips)}Q", *ips)            # u64 ips[nr]
        body += self.trailer(attr, pid, tid, time, self._ident(attr))  # struct sample_id
        self.record(CALLCHAIN_DEFERRED, 2, body)           # misc: PERF_RECORD_MISC_USER

    def auxtrace(self, size: int, payload: bytes = b"") -> None:
        """A PERF_RECORD_AUXTRACE saying ``size`` bytes of trace data follow it (its own
        size does not count them), then ``payload``."""
        body = self.pack("QQQ", size, 0, 0)                # u64 size, offset, reference
        body += self.pack("IIII", 0, 0, 0, 0)              # u32 idx, tid, cpu, reserved
        self.record(AUXTRACE, 0, body)
        self.records[-1] += payload

    def attr_record(self, attr: Attr) -> int:
        """Add ``attr`` as a HEADER_ATTR record here, among the records (pipe mode: perf
        inject and perf record's later events write them so)."""
        index = self.add_attr(attr)
        self.late_attrs.add(index)
        self.records.append(self._header_attr(attr))
        return index

    def _header_attr(self, attr: Attr) -> bytes:
        body = self.attr_bytes(attr) + self.pack(f"{len(attr.ids)}Q", *attr.ids)
        return self.pack("IHH", HEADER_ATTR, 0, 8 + len(body)) + body  # attr, u64 id[]

    def _ident(self, attr: int) -> int:
        ids = self.attrs[attr].ids
        return ids[0] if ids else 0

    def build(self) -> bytes:
        """The file: header, attributes (with their ids), data, features."""
        if self.pipe:
            return self._build_pipe()
        header_size, file_section = 104, 16
        attr_size = max((a.size or 64) for a in self.attrs) + file_section if self.attrs else 80
        ids_at = header_size
        ids_blob = b""
        id_sections = []
        for attr in self.attrs:
            id_sections.append((ids_at + len(ids_blob), 8 * len(attr.ids)))
            ids_blob += self.pack(f"{len(attr.ids)}Q", *attr.ids)
        attrs_at = ids_at + len(ids_blob)
        attrs_blob = b""
        for attr, (offset, size) in zip(self.attrs, id_sections, strict=True):
            entry = self.attr_bytes(attr).ljust(attr_size - file_section, b"\0")
            attrs_blob += entry + self.pack("QQ", offset, size)  # perf_file_section ids
        data_at = attrs_at + len(attrs_blob)
        data = b"".join(self.records)
        table_at = data_at + len(data)
        features = sorted(self.features)
        payload_at = table_at + file_section * len(features)
        table, payloads = b"", b""
        for _, payload in features:
            table += self.pack("QQ", payload_at + len(payloads), len(payload))
            payloads += payload
        bitmap = 0
        for feature, _ in features:
            bitmap |= 1 << feature
        header = (
            b"PERFILE2"[:: -1 if self.big_endian else 1]           # magic
            + self.pack("Q", header_size)                          # u64 size
            + self.pack("Q", attr_size)                            # u64 attr_size
            + self.pack("QQ", attrs_at, len(attrs_blob))           # attrs section
            + self.pack("QQ", data_at, len(data))                  # data section
            + self.pack("QQ", 0, 0)                                # event_types section
            + self.pack("4Q", *((bitmap >> (64 * i)) & (2**64 - 1) for i in range(4)))  # features
        )  # fmt: skip
        return header + ids_blob + attrs_blob + data + table + payloads

    def _build_pipe(self) -> bytes:
        out = b"PERFILE2"[:: -1 if self.big_endian else 1] + self.pack("Q", 16)  # magic, size
        for index, attr in enumerate(self.attrs):
            if index not in self.late_attrs:
                out += self._header_attr(attr)
        for feature, payload in self.features:
            body = self.pack("Q", feature) + payload       # u64 feat_id, then the section
            out += self.pack("IHH", HEADER_FEATURE, 0, 8 + len(body)) + body
        return out + b"".join(self.records)


def unfinished(blob: bytes, big_endian: bool = False) -> bytes:
    """The file-mode ``blob`` as ``perf record`` killed leaves it: the header's data size
    still 0 (perf writes it at the end, with the feature sections after the data: none)."""
    order = ">" if big_endian else "<"
    data_offset, data_size = struct.unpack_from(order + "QQ", blob, 40)  # data section
    out = bytearray(blob[: data_offset + data_size])
    struct.pack_into(order + "Q", out, 48, 0)                              # data.size
    return bytes(out)


def _padded_name(name: str | bytes) -> bytes:
    """A NUL-terminated name padded to 8 bytes, as perf writes file and comm names (bytes as
    they are: a name need not be UTF-8)."""
    raw = (name if isinstance(name, bytes) else name.encode()) + b"\0"
    return raw.ljust(-(-len(raw) // 8) * 8, b"\0")


@dataclass
class Reading:
    """Everything a pass of the reader over a file gives (its samples through the bulk
    decoder), and the samples of the same records read by the oracle (perf_sample_oracle.py; None
    for a compressed recording, which it does not read)."""

    bulk: list[Any]
    oracle: list[Any] | None
    events: list[Any]
    problems: list[str]
    bulk_error: str | None
    oracle_error: str | None

    @property
    def agreed(self) -> bool:
        """The bulk decoder and the oracle give the same samples up to where the reader
        stopped, and the same error where it stopped at a corrupt sample (the oracle gives
        none where the reader stopped at something else: a record's size, a payload...)."""
        return self.bulk == self.oracle and self.oracle_error in (None, self.bulk_error)


def read_both(path: Path | str, chunk: int = 3) -> Reading:
    """Read ``path`` with the reader (``chunk`` samples at a time), then its records up to
    where it stopped with the oracle; a PerfDataError ends a pass and is kept as its text."""
    from perf_sample_oracle import oracle_samples
    from pysframe.perf import PerfData, PerfDataError

    with PerfData.open(path) as data:
        bulk, events, bulk_error, until = [], [], None, None
        try:
            for stretch in data.read(chunk):
                events.extend(stretch.events)
                if stretch.samples is not None:
                    bulk.extend(map(stretch.samples.sample, range(len(stretch.samples))))
        except PerfDataError as error:
            bulk_error, until = str(error), error.offset
        problems, compressed = [str(p) for p in data.problems], data.compressed
    oracle, oracle_error = None, None
    if not compressed:
        oracle, error = oracle_samples(path, until)
        oracle_error = None if error is None else str(error)
    return Reading(bulk, oracle, events, problems, bulk_error, oracle_error)


# -- a recording of one sample in a real file -----------------------------------------------------

#: Where :func:`one_sample_recording` maps its file (where a PIE's first page is loaded).
ONE_SAMPLE_BASE = 0x555555554000
#: perf's x86_64 user registers of a --call-graph dwarf recording (arch/x86 PERF_REG_X86_*):
#: AX BX CX DX SI DI BP SP IP FLAGS CS SS, then R8-R15.
X86_64_USER_REGS = 0xFF0FFF
#: Their positions among the registers recorded: BP, SP, IP.
X86_64_BP, X86_64_SP, X86_64_IP = 6, 7, 8


def one_sample_recording(
    program: Path, build_id: bytes, segment: tuple[int, int, int], pc: int
) -> bytes:
    """A perf.data file of one x86_64 sample with a user stack copy, at the link-time address
    ``pc`` of ``program``, whose executable segment ``segment`` (file offset, address, size) is
    mapped with ``build_id`` at :data:`ONE_SAMPLE_BASE`: unwinding it needs the program's
    SFrame (its own, or generated from its CFI and kept in the cache)."""
    offset, address, size = segment
    perf = PerfFile()
    attr = perf.add_attr(Attr(
        IP | TID | TIME | PERIOD | REGS_USER | STACK_USER, regs_user=X86_64_USER_REGS,
        stack_user=64, size=120,
    ))  # fmt: skip
    perf.add_feature(FEAT_ARCH, perf.string("x86_64"))
    perf.comm(attr, 42, 42, "prog", time=1)
    perf.mmap2(attr, 42, 42, ONE_SAMPLE_BASE + address, size, offset, str(program), prot=5,
               time=2, build_id=build_id)  # fmt: skip
    regs = [0] * X86_64_USER_REGS.bit_count()
    sp = 0x7FFC_0000_0000
    regs[X86_64_BP], regs[X86_64_SP], regs[X86_64_IP] = sp + 32, sp, ONE_SAMPLE_BASE + pc
    perf.sample(attr, ip=ONE_SAMPLE_BASE + pc, pid=42, tid=42, time=10, period=1,
                regs=tuple(regs), stack=bytes(64))  # fmt: skip
    return perf.build()
