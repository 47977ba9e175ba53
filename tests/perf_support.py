"""Helpers of the perf.data tests: hand-built files, perf itself, and what perf prints.

* :class:`PerfFile` writes small perf.data files field by field (file or pipe mode, either
  byte order), after perf.data-file-format.txt and perf_event.h, for the unit tests.
* :func:`check_perf` raises :class:`Unavailable` (the tests skip with its message) where perf
  is missing or may not open events; :func:`record` records a program.
* :func:`parse_dump` reads ``perf script -D`` (every record perf decoded, with its file offset),
  :func:`parse_script` ``perf script -F pid,tid,time,ip,period,cpu --ns -G``,
  :func:`parse_header` ``perf report --header-only -I``: the golden references.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "perf"
PERF = shutil.which("perf") or "/usr/bin/perf"

# PERF_SAMPLE_* bits (perf_event.h), spelled here on purpose: tests do not take the layout
# they check from the code under test.
IP, TID, TIME, ADDR, READ, CALLCHAIN, ID, CPU, PERIOD, STREAM_ID, RAW = (1 << n for n in range(11))
BRANCH_STACK, REGS_USER, STACK_USER, WEIGHT, DATA_SRC, IDENTIFIER = (1 << n for n in range(11, 17))
TRANSACTION, REGS_INTR, PHYS_ADDR, AUX, CGROUP = (1 << n for n in range(17, 22))
DATA_PAGE_SIZE, CODE_PAGE_SIZE = 1 << 22, 1 << 23
# attr flag bits (bit fields in declaration order) and PERF_RECORD_* types.
FLAG_FREQ, FLAG_SAMPLE_ID_ALL = 1 << 10, 1 << 18
MMAP, LOST, COMM, EXIT, FORK, SAMPLE, MMAP2, LOST_SAMPLES = 1, 2, 3, 4, 7, 9, 10, 13
HEADER_ATTR, HEADER_TRACING_DATA, HEADER_BUILD_ID, FINISHED_ROUND = 64, 66, 67, 68
AUXTRACE, HEADER_FEATURE, COMPRESSED = 71, 80, 81
# Feature numbers.
FEAT_BUILD_ID, FEAT_HOSTNAME, FEAT_OSRELEASE, FEAT_VERSION, FEAT_ARCH, FEAT_NRCPUS = range(2, 8)
FEAT_CMDLINE, FEAT_EVENT_DESC = 11, 12


class Unavailable(Exception):
    """perf, or the permission to open perf events, is missing (the message says which)."""


@functools.cache
def _perf_problem() -> str | None:
    if not Path(PERF).exists():
        return "perf is not installed"
    try:
        done = subprocess.run(
            [PERF, "record", "-q", "-e", "cpu-clock", "-o", "/dev/null", "--", "true"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"perf cannot run: {error}"
    if done.returncode:
        return f"perf record cannot open events here: {done.stderr.strip()[:200]}"
    return None


def check_perf() -> None:
    """Raise Unavailable unless perf is here and may record a child process."""
    problem = _perf_problem()
    if problem:
        raise Unavailable(problem)


def build_program(out: Path, name: str) -> Path:
    """Compile ``tests/data/perf/NAME.c`` (-O2 -pthread) into ``out``."""
    if shutil.which("gcc") is None:
        raise Unavailable("gcc is not installed")
    program = out / name
    done = subprocess.run(
        ["gcc", "-O2", "-pthread", "-o", str(program), str(DATA / f"{name}.c")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise Unavailable(f"cannot compile {name}.c: {done.stderr.strip()[:200]}")
    return program


#: The options of the golden recordings: fixed period, DWARF call graphs (registers and user
#: stack copies), the CPU and period in every sample.
RECORD_OPTIONS = (
    "-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,512", "--sample-cpu", "--period",
)  # fmt: skip


def record(
    out: Path, program: list[str], *, pipe: bool = False, options: tuple[str, ...] = RECORD_OPTIONS
) -> Path:
    """Record ``program`` into ``out`` (with ``-o -`` into the file when ``pipe``)."""
    check_perf()
    command = [PERF, "record", "-q", *options, "-o", "-" if pipe else str(out), "--", *program]
    with open(out, "wb") if pipe else open("/dev/null", "wb") as sink:
        done = subprocess.run(
            command, stdout=sink, stderr=subprocess.PIPE, timeout=120, check=False
        )
    if done.returncode:
        raise Unavailable(f"perf record failed: {done.stderr.decode(errors='replace')[:300]}")
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
