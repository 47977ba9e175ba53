"""Profiles of recordings whose names hold anything: every format stays whole and shows them.

A thread may name itself anything but NUL (``prctl(PR_SET_NAME)``), and a symbol table or a
file name may hold any bytes: markup that would end the flame graph's ``<script>`` element,
``;`` (the separator of folded stacks), newlines and other control characters, line
separators, bytes that are not UTF-8, quotes.  Two recordings hold such names:

* a hand-made one (``perf_support.PerfFile``) of a hand-made shared object (``elf_build``:
  code, an SFrame section, a symbol table) whose file name is bad too: every sample's stack
  is walked through it with SFrame, so the commands, functions and module of every frame are
  known by construction;
* a real one (``perf record``) of tests/data/perf/names.c, whose threads name themselves
  badly, with its functions renamed by objcopy: pysframe's ``perf script`` text is perf's,
  byte for byte, once the bad names are written by pysframe's rule.

pysframe's rule (``pysframe.names``): bytes that are not UTF-8 are ``\\xNN`` wherever a name
is decoded; in text made of lines (perf script's, the top table, folded stacks) control
characters and line separators are escaped too (``\\x0a``, ``\\u2028``).  Everything runs
through the CLI, in a process of its own: exit status 0, nothing on stderr, output that is
UTF-8; folded lines ``frame;frame;... count``; each perf script sample one header line and
its frame lines; the flame graph, in headless Chromium, draws every name and runs no script
a name holds.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import unavailable
from elf_build import RawFunction, Sec, Seg, build_elf, fre_info, sframe_bytes
from perf_support import (
    CALLCHAIN,
    FEAT_ARCH,
    FEAT_EVENT_DESC,
    IP,
    PERF,
    PERIOD,
    REGS_USER,
    STACK_USER,
    TID,
    TIME,
    Attr,
    PerfFile,
    Unavailable,
    build_program,
    record,
)
from pysframe.elf.symbols import symbol_names
from pysframe.names import decode_name, escape_controls, shown_name
from pysframe.perf.analyze import profile_recording
from pysframe.perf.flamegraph import write_flamegraph
from pysframe.perf.kernel import parse_kallsyms
from pysframe.perf.profile import FrameInfo, Profile
from pysframe.perf.report import FoldOptions, write_folded
from test_perf_report_golden import _browser_check

# -- the hand-made recording ---------------------------------------------------------------

#: Each function: its name as the symbol table holds it; as pysframe decodes it (what JSON
#: formats and the flame graph show); as pysframe's perf script text prints it; as a folded
#: stack's element (stackcollapse-perf.pl's rules: arguments from "(" and quotes dropped, ";"
#: made ":"; an empty name is "[unknown]").
FUNCTIONS = [
    (b"<!--<script>", "<!--<script>", "<!--<script>", "<!--<script>"),
    (b"</script><script>console.error('injected 1')</script>",
     "</script><script>console.error('injected 1')</script>",
     "</script><script>console.error('injected 1')</script>",
     "</script><script>console.error"),
    (b"<img src=injected.png onerror=console.error(2)>",
     "<img src=injected.png onerror=console.error(2)>",
     "<img src=injected.png onerror=console.error(2)>",
     "<img src=injected.png onerror=console.error"),
    (b"a&amp;b>c", "a&amp;b>c", "a&amp;b>c", "a&amp:b>c"),
    (b"ls\xe2\x80\xa8ps\xe2\x80\xa9", "ls\u2028ps\u2029", "ls\\u2028ps\\u2029",
     "ls\\u2028ps\\u2029"),
    (b"semi;colon", "semi;colon", "semi;colon", "semi:colon"),
    (b"new\nline", "new\nline", "new\\x0aline", "new\\x0aline"),
    (b"tab\tcr\rff\x0c", "tab\tcr\rff\x0c", "tab\\x09cr\\x0dff\\x0c", "tab\\x09cr\\x0dff\\x0c"),
    (b"ansi\x1b[31m\x7f\x01", "ansi\x1b[31m\x7f\x01", "ansi\\x1b[31m\\x7f\\x01",
     "ansi\\x1b[31m\\x7f\\x01"),
    (b"c1\xc2\x85", "c1\x85", "c1\\u0085", "c1\\u0085"),
    (b"bad\xff\xfe", "bad\\xff\\xfe", "bad\\xff\\xfe", "bad\\xff\\xfe"),
    (b"q\"uo'te", "q\"uo'te", "q\"uo'te", "quote"),
    (b"\"'", "\"'", "\"'", "[unknown]"),
    (b"plain", "plain", "plain", "plain"),
]  # fmt: skip
#: Each thread's command name, the same four ways (stackcollapse-perf.pl keeps quotes in a
#: process name and makes its spaces "_").
COMMS = [
    (b"bad\xff\xfe", "bad\\xff\\xfe", "bad\\xff\\xfe", "bad\\xff\\xfe"),
    (b"semi;colon", "semi;colon", "semi;colon", "semi:colon"),
    (b"new\nline", "new\nline", "new\\x0aline", "new\\x0aline"),
    (b"<!--<script>", "<!--<script>", "<!--<script>", "<!--<script>"),
    (b"</script>&<> x", "</script>&<> x", "</script>&<> x", "</script>&<>_x"),
    (b"ls\xe2\x80\xa8", "ls\u2028", "ls\\u2028", "ls\\u2028"),
    (b"tab\tq\"'", "tab\tq\"'", "tab\\x09q\"'", "tab\\x09q\"'"),
    (b"", "", "", "[unknown]"),
]
#: The event's name (from the EVENT_DESC feature), as perf script's text prints it.
EVENT, EVENT_SCRIPT = b"cpu\nclock", "cpu\\x0aclock"

TEXT = 0x1000  # .text's address and file offset
SIZE = 16  # bytes per function; one more piece of code after them has no symbol
BASE = 0x7F0000000000  # where the recording maps the module
STACK_POINTER = 0x7FFD00000000
STACK_COPY = 256
SHT_GNU_SFRAME = 0x6FFFFFF4
SFRAME_ABI_AMD64_LITTLE = 3
SFRAME_F_FDE_SORTED = 1
PERF_CONTEXT_USER = (1 << 64) - 512
#: perf's x86-64 register numbers BP, SP, IP (arch/x86/include/uapi/asm/perf_regs.h).
REGS_BP_SP_IP = 0b111 << 6

Names = list[tuple[bytes, str, str, str]]


def _utf8(names: Names) -> Names:
    """The names whose bytes are UTF-8."""
    out = []
    for entry in names:
        try:
            entry[0].decode("utf-8")
        except UnicodeDecodeError:
            continue
        out.append(entry)
    return out


@dataclass(frozen=True)
class Recording:
    """A hand-made recording: its path, the functions and commands it names, and its module
    (a file whose name is bad too) as pysframe shows it and as its unnamed frames fold."""

    path: Path
    functions: Names
    comms: Names
    module: str
    module_folded: str

    def stacks(self) -> list[list[int]]:
        return _stacks(len(self.functions))


def _stacks(count: int) -> list[list[int]]:
    """The stacks of each thread's samples, as numbers of ``count`` functions, innermost
    first (-1: the code after them, which no symbol covers): each function with the next two
    as its callers, then the unnamed code called by the first function."""
    return [[n, (n + 1) % count, (n + 2) % count] for n in range(count)] + [[-1, 0]]


def _module_bytes(names: list[bytes]) -> bytes:
    """An x86-64 shared object: one function of SIZE bytes per name at TEXT, and a last piece
    of code no symbol covers; an SFrame FDE for each, whose one row says what every function's
    entry says (CFA = SP + 8, the return address at CFA - 8)."""
    symbols, strings = bytes(24), b"\0"  # the null symbol; the empty name
    for number, name in enumerate(names):
        # Elf64_Sym: st_name, st_info (GLOBAL FUNC), st_other, st_shndx (.text is 1),
        # st_value, st_size
        symbols += struct.pack("<IBBHQQ", len(strings), 0x12, 0, 1, TEXT + SIZE * number, SIZE)
        strings += name + b"\0"
    code = b"\xc3" * (SIZE * (len(names) + 1))  # ret
    sframe_at = TEXT + len(code)
    functions = [
        # start (from the section's address), size, FRE type ADDR1 and FDE type PCINC, one
        # row at offset 0: CFA on SP, one offset (the CFA's: 8)
        RawFunction(TEXT + SIZE * number - sframe_at, SIZE, 0, rows=[(0, fre_info(1), (8,))])
        for number in range(len(names) + 1)
    ]
    sframe = sframe_bytes(
        2, SFRAME_ABI_AMD64_LITTLE, functions, flags=SFRAME_F_FDE_SORTED, fixed_ra=-8
    )
    end = sframe_at + len(sframe)
    return build_elf(
        [
            Sec(".text", 1, code, flags=6, addr=TEXT, align=TEXT),  # PROGBITS, ALLOC|EXEC
            Sec(".sframe", SHT_GNU_SFRAME, sframe, flags=2, addr=sframe_at, align=1),
            Sec(".symtab", 2, symbols, link=4, info=1, entsize=24),  # link: .strtab
            Sec(".strtab", 3, strings, align=1),
        ],
        e_type=3,  # ET_DYN
        segments=[Seg(1, None, flags=5, extra={"offset": 0, "vaddr": 0, "filesz": end,
                                               "memsz": end})],  # PT_LOAD R+X
    )  # fmt: skip


def make_recording(out: Path, functions: Names, comms: Names, module: bytes) -> Path:
    """A recording of threads (one per command, pid and tid 100 on) that each map ``module``
    (written in ``out``, made of ``functions``) and take one sample per stack of
    :func:`_stacks`, its user registers and stack copy walked with SFrame."""
    path = os.path.join(os.fsencode(out), module)
    with open(path, "wb") as file:
        file.write(_module_bytes([name[0] for name in functions]))
    gap = TEXT + SIZE * len(functions)
    perf = PerfFile()
    sample_type = IP | TID | TIME | PERIOD | CALLCHAIN | REGS_USER | STACK_USER
    attr = perf.add_attr(
        Attr(sample_type, regs_user=REGS_BP_SP_IP, stack_user=STACK_COPY, size=136)
    )
    perf.add_feature(FEAT_ARCH, perf.string("x86_64"))
    event_desc = perf.pack("II", 1, 136)                     # u32 nr, u32 attr_size
    event_desc += perf.attr_bytes(perf.attrs[attr])          # struct perf_event_attr
    event_desc += perf.pack("I", 0)                          # u32 nr_ids
    name = EVENT + b"\0"                                     # perf_header_string: u32 len,
    length = -(-len(name) // 64) * 64                        # the name NUL-padded to 64
    event_desc += perf.pack("I", length) + name.ljust(length, b"\0")
    perf.add_feature(FEAT_EVENT_DESC, event_desc)
    time = 1
    for pid, (comm, *_) in enumerate(comms, 100):
        perf.comm(attr, pid, pid, comm, time=time)
        perf.mmap2(attr, pid, pid, BASE, 0x2000, 0, path, time=time + 1)
        time += 2
        for stack in _stacks(len(functions)):
            # Each frame one byte into its code; the stack copy holds the callers' return
            # addresses, then 0.
            at = [BASE + (gap if n < 0 else TEXT + SIZE * n) + 1 for n in stack]
            copy = struct.pack(f"<{len(at)}Q", *at[1:], 0).ljust(STACK_COPY, b"\0")
            perf.sample(
                attr, ip=at[0], pid=pid, tid=pid, time=time, period=1000,
                callchain=(PERF_CONTEXT_USER, at[0]), regs=(0, STACK_POINTER, at[0]),
                stack=copy,
            )  # fmt: skip
            time += 1
    recording = out / "names.data"
    recording.write_bytes(perf.build())
    return recording


def _hand_made(out: Path, kind: str) -> Recording:
    """The hand-made recording of the names that are UTF-8 (``utf8``), or of every name
    (``any``), in ``out``."""
    assert str(out).isascii()
    if kind == "utf8":
        functions, comms = _utf8(FUNCTIONS), _utf8(COMMS)
        module = b"lib;\n.so"
        shown, folded = f"{out}/lib;\n.so", "[lib:\\x0a.so]"
    else:
        functions, comms = FUNCTIONS, COMMS
        module = b"lib;\n\xff.so"
        shown, folded = f"{out}/lib;\n\\xff.so", "[lib:\\x0a\\xff.so]"
    path = make_recording(out, functions, comms, module)
    return Recording(path, functions, comms, shown, folded)


@pytest.fixture(scope="module", params=["utf8", "any"])
def hand_made(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Recording:
    """The hand-made recording: of the names that are UTF-8 (each defect but the bytes that
    are not), and of every name."""
    return _hand_made(tmp_path_factory.mktemp("any-name"), request.param)


@pytest.fixture(scope="module")
def every_name(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """The hand-made recording of every name."""
    return _hand_made(tmp_path_factory.mktemp("every-name"), "any")


def pysframe(*arguments: str | Path) -> bytes:
    """What ``pysframe perf ARGUMENTS`` writes on stdout, which must exit 0 with nothing on
    stderr (no traceback, no internal error) but the warning of samples perf record lost, which
    a loaded machine can give."""
    done = subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", *map(str, arguments)],
        capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    others = [
        line for line in done.stderr.splitlines()
        if not (line.startswith(b"pysframe: warning: ") and b" samples were lost (" in line)
    ]  # fmt: skip
    assert done.returncode == 0 and not others, done.stderr.decode(errors="replace")
    return done.stdout


FOLDED_LINE = re.compile(r"^[^\n;]+(;[^\n;]+)* [0-9]+$")


def _folded_lines(text: str) -> Counter[str]:
    """The stacks of folded text with their counts; every line must be one whole stack."""
    assert text.endswith("\n")
    counts: Counter[str] = Counter()
    for line in text[:-1].split("\n"):
        assert FOLDED_LINE.match(line), repr(line)
        stack, _, count = line.rpartition(" ")
        counts[stack] += int(count)
    return counts


#: A perf script header line: the command, the thread id (%5d), the time (%12s of
#: SECONDS.MICROSECONDS), the period (%10d), the event.
SCRIPT_HEADER = re.compile(r"^(.*) ([ \d]{4}\d) ([ \d]{4}\d\.\d{6}): ([ \d]{9}\d) (.*): $")
#: A frame line: the address, the name (+0xOFFSET, or [unknown]), the module.
SCRIPT_FRAME = re.compile(r"^\t *([0-9a-f]+) (.*?)(\+0x[0-9a-f]+)? \((.*)\)$")


def _script_samples(text: str) -> list[tuple[re.Match[str], list[re.Match[str]]]]:
    """Each sample of perf script text: its header and frame lines, each a line of its own
    to every reader (no other line break, as str.splitlines sees them, holds in a line)."""
    assert text.endswith("\n\n")
    assert text.splitlines() == text[:-1].split("\n")
    samples = []
    for block in text[:-2].split("\n\n"):
        header, *frames = block.split("\n")
        found = SCRIPT_HEADER.match(header)
        assert found, repr(header)
        lines = [SCRIPT_FRAME.match(line) for line in frames]
        assert all(lines), frames
        samples.append((found, [line for line in lines if line]))
    return samples


def test_folded_lines_hold_one_stack_each(hand_made: Recording) -> None:
    """Commands holding ";" or a newline, functions and a module holding anything: each
    sample's stack is one line, named as the tables say (each name cleaned by one rule)."""
    expected: Counter[str] = Counter()
    for *_, comm in hand_made.comms:
        for stack in hand_made.stacks():
            names = [hand_made.functions[n][3] if n >= 0 else hand_made.module_folded
                     for n in reversed(stack)]  # fmt: skip
            expected[";".join([comm, *names])] += 1
    text = pysframe("report", "--format", "folded", hand_made.path).decode("utf-8")
    assert _folded_lines(text) == expected
    # With the process and thread ids after the command (stackcollapse-perf.pl --tid).
    profile, _ = profile_recording(str(hand_made.path))
    out = io.StringIO()
    write_folded(profile, out, FoldOptions(tid=True))
    with_tid = _folded_lines(out.getvalue())
    assert sum(with_tid.values()) == sum(expected.values())
    assert {stack.split(";", 1)[0] for stack in with_tid} == {
        f"{comm}-{pid}/{pid}" for pid, (*_, comm) in enumerate(hand_made.comms, 100)
    }


def test_perf_script_keeps_each_sample_whole(hand_made: Recording) -> None:
    """Control characters and line separators in commands, functions, the module and the
    event are escaped: each sample is its header line and one line per frame, with the
    names the tables give."""
    samples = _script_samples(pysframe("script", hand_made.path).decode("utf-8"))
    assert len(samples) == len(hand_made.comms) * len(hand_made.stacks())
    by_thread: dict[int, list[list[str]]] = {}
    for header, frames in samples:
        pid = int(header[2])
        assert header[1] == hand_made.comms[pid - 100][2] and header[5] == EVENT_SCRIPT
        assert {frame[4] for frame in frames} == {hand_made.module.replace("\n", "\\x0a")}
        by_thread.setdefault(pid, []).append([frame[2] for frame in frames])
    expected = [
        [hand_made.functions[n][2] if n >= 0 else "[unknown]" for n in stack]
        for stack in hand_made.stacks()
    ]
    assert by_thread == {pid: expected for pid in range(100, 100 + len(hand_made.comms))}


def test_top_table_keeps_each_row_one_line(hand_made: Recording) -> None:
    # perf's default: children, and a call graph under each row, whose names are escaped too
    text = pysframe("report", hand_made.path).decode("utf-8")
    assert text.splitlines() == text[:-1].split("\n")
    assert "---new\\x0aline" in text or "--new\\x0aline" in text
    text = pysframe("report", "--no-children", "-g", "none", hand_made.path).decode("utf-8")
    assert text.splitlines() == text[:-1].split("\n")
    rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    # one per (command, own function)
    assert len(rows) == len(hand_made.comms) * len(hand_made.stacks())
    assert all(re.match(r"^ +\d+\.\d\d%  ", row) for row in rows), rows
    assert sum("[.] new\\x0aline" in row for row in rows) == len(hand_made.comms)


@pytest.mark.parametrize("form", ["top", "folded", "json", "speedscope", "pprof", "flamegraph",
                                  "script", "stats", "stats-json"])  # fmt: skip
def test_bytes_that_are_not_utf8_in_every_format(
    every_name: Recording, tmp_path: Path, form: str
) -> None:
    """A command and a function named ``bad\\xff\\xfe``: every format is written, in UTF-8,
    and shows them so."""
    hand_made = every_name
    out = tmp_path / "out"
    if form == "script":
        data = pysframe("script", hand_made.path)
    elif form.startswith("stats"):
        data = pysframe("stats", *(["--json"] if form == "stats-json" else []), hand_made.path)
        # the module, named by the rule (and, in text, on its line)
        module = hand_made.module
        assert (json.dumps(module) if form == "stats-json" else
                module.replace("\n", "\\x0a") + ": section").encode() in data  # fmt: skip
        return
    else:
        assert pysframe("report", "--format", form, "-o", out, hand_made.path) == b""
        data = out.read_bytes()
    if form == "pprof":
        data = gzip.decompress(data)  # protobuf strings are UTF-8: the string table shows
        # string_table (field 6, length-delimited: tag 0x32), an entry of 11 bytes
        assert b"\x32\x0b" + b"bad\\xff\\xfe" in data
        return
    text = data.decode("utf-8")
    # JSON (the flame graph's too) writes the backslash as "\\".
    json_text = form in ("json", "speedscope", "flamegraph")
    assert ("bad\\\\xff\\\\xfe" if json_text else "bad\\xff\\xfe") in text
    if form == "json":
        document = json.loads(text)
        assert sorted(document["comms"]) == sorted(comm[1] for comm in hand_made.comms)
        assert {frame["symbol"] for frame in document["frames"]} == {
            name[1] for name in hand_made.functions
        } | {None}
        # (one frame, which no stack uses, stands for a return address lost: [unknown])
        modules = {frame["module"] for frame in document["frames"]}
        assert modules == {hand_made.module, "[unknown]"}
    if form == "speedscope":
        document = json.loads(text)
        assert {frame["name"] for frame in document["shared"]["frames"]} >= {
            name[1] for name in hand_made.functions
        }


def test_flamegraph_of_any_name_in_chromium(hand_made: Recording, tmp_path: Path) -> None:
    """The flame graph of the recording, in headless Chromium: every command and function is
    drawn with its name, and none of the scripts the names hold runs (each would log an
    error or fetch a file)."""
    page = tmp_path / "graph.html"
    assert pysframe("report", "--format", "flamegraph", "-o", page, hand_made.path) == b""
    result = _browser_check(page, "semi")
    assert result["errors"] == [] and result["foreign_requests"] == []
    drawn = set(result["names_drawn"])  # type: ignore[call-overload]
    assert {name[1] for name in hand_made.functions} <= drawn
    assert {comm[1] for comm in hand_made.comms} <= drawn
    assert "[unknown]" in drawn
    assert result["highlighted_names"] == ["semi;colon"]


# -- a real recording --------------------------------------------------------------------------

#: objcopy's new names for names.c's functions, and as pysframe's text prints them.
RENAMED = {
    "spin_leaf": (b"<!--<script>", b"<!--<script>"),
    "spin_mid": (b"new\nline;x\xff\xfe", b"new\\x0aline;x\\xff\\xfe"),
    "spin_top": (b"a\xe2\x80\xa8b\tc\x01", b"a\\u2028b\\x09c\\x01"),
}
#: names.c's threads' names, and as pysframe's text prints them.
THREADS = {
    b"bad\xff\xfe": b"bad\\xff\\xfe",
    b"semi;colon": b"semi;colon",
    b"new\nline": b"new\\x0aline",
    b"<!--<script>": b"<!--<script>",
    b"tab\tq\"'": b"tab\\x09q\"'",
}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording of names.c (its functions renamed) by perf record --call-graph dwarf."""
    out = tmp_path_factory.mktemp("any-name-real")
    try:
        program = build_program(out, "names")
        objcopy = shutil.which("objcopy")
        if objcopy is None:
            raise Unavailable("objcopy", "objcopy is not installed")
        renames = [b"--redefine-sym=" + old.encode() + b"=" + new for old, (new, _) in
                   RENAMED.items()]  # fmt: skip
        subprocess.run([objcopy.encode(), *renames, bytes(program)], check=True)
        return record(
            out / "perf.data", [str(program), "0.3"],
            options=("-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf"),
        )  # fmt: skip
    except Unavailable as why:
        unavailable(why)


def test_real_recording_is_perfs_text_with_names_escaped(real: Path) -> None:
    """pysframe perf script against perf script --no-inline on a recording whose threads and
    functions are named badly: perf prints the names as they are, pysframe by its rule;
    with that difference written into perf's text, every sample of the named threads is
    perf's, byte for byte, and every sample's header is."""
    theirs = subprocess.run(
        [PERF, "script", "--no-inline", "-i", str(real)], capture_output=True, timeout=300,
        check=True,
    ).stdout  # fmt: skip
    ours = pysframe("script", "--no-inline", real)
    # The names with their context: a function's before "+0x", a thread's at a line start.
    for raw, shown in RENAMED.values():
        theirs = theirs.replace(b" " + raw + b"+0x", b" " + shown + b"+0x")
    for raw, shown in THREADS.items():
        theirs = re.compile(rb"(?m)^" + re.escape(raw) + rb"(?= +\d+ )").sub(
            lambda _, shown=shown: shown, theirs
        )
    ours_samples, their_samples = ours.split(b"\n\n"), theirs.split(b"\n\n")
    assert len(ours_samples) == len(their_samples)
    named = 0
    for mine, perfs in zip(ours_samples, their_samples, strict=True):
        assert mine.split(b"\n", 1)[0] == perfs.split(b"\n", 1)[0]
        if any(mine.startswith(shown + b" ") for shown in THREADS.values()):
            assert mine == perfs
            named += 1
    assert named > 50
    for _, shown in RENAMED.values():
        assert b" " + shown + b"+0x" in ours
    _script_samples(ours.decode("utf-8"))  # whole samples
    text = pysframe("report", "--format", "folded", real).decode("utf-8")
    assert any(line.startswith("new\\x0aline;") for line in _folded_lines(text))


# -- units -------------------------------------------------------------------------------------


def test_one_rule_for_names() -> None:
    """Bytes that are not UTF-8 as \\xNN, the rest as UTF-8; a path decoded by the file system
    (lone surrogates) shown alike; control characters and line separators escaped."""
    assert decode_name(b"bad\xff\xfe") == "bad\\xff\\xfe"
    assert decode_name(b"caf\xc3\xa9 \xe2\x80\xa8 \xc3") == "caf\u00e9 \u2028 \\xc3"
    assert decode_name(b"\xed\xa0\x80") == "\\xed\\xa0\\x80"  # an encoded surrogate is not UTF-8
    assert shown_name(os.fsdecode(b"/tmp/lib\xff.so")) == "/tmp/lib\\xff.so"
    assert shown_name("caf\u00e9") == "caf\u00e9" and shown_name("lone \ud800") == "lone \\ud800"
    assert escape_controls("a\nb\tc\x00\x1f\x7f\x85\x9f\u2028\u2029 d\\x") == (
        "a\\x0ab\\x09c\\x00\\x1f\\x7f\\u0085\\u009f\\u2028\\u2029 d\\x"
    )
    plain = "std::vector<int, std::allocator<int> >::_M_realloc_insert@plt café"
    assert escape_controls(plain) == plain


def test_symbol_and_kernel_names_by_the_rule() -> None:
    """ELF symbol names and kallsyms names go through the same rule."""
    strings = b"\0bad\xff\xfe\0ok@@V1\0"
    assert symbol_names(strings, [1, 7]) == ["bad\\xff\\xfe", "ok"]
    assert symbol_names(strings, [1, 7], versions=True) == ["bad\\xff\\xfe", "ok@@V1"]
    kallsyms = b"ffffffff81000000 T bad\xff\xfe\nffffffff81000100 t ok\t[mod\xff]\n"
    table = parse_kallsyms(kallsyms)
    assert table.names == ["bad\\xff\\xfe", "ok"]
    assert table.modules == ["[kernel.kallsyms]", "[mod\\xff]"]


def _page_data(page: str) -> str:
    """The JSON of the flame graph page's data element."""
    marker = '<script id="profile-data" type="application/json">'
    start = page.index(marker) + len(marker)
    return page[start : page.index("</script>", start)]


EVERY_CHARACTER = "".join(chr(c) for c in range(0x100)) + "\u2028\u2029<!--<script></script>"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list(EVERY_CHARACTER)) | st.characters(),
                        max_size=12), min_size=1, max_size=4))  # fmt: skip
def test_flamegraph_data_holds_any_name(names: list[str]) -> None:
    """The page's JSON holds no "<", ">", "&", U+2028 or U+2029 as they are, and reads back
    to the very names."""
    profile = Profile(sources=["<!--<script>.data"])
    event = profile.event_id("cpu-clock", "nanoseconds")
    for number, name in enumerate(names):
        frame = profile.frame_id(FrameInfo(0x1000 + number, name + ".so", name))
        profile.add(profile.stack_id([frame]), pid=1, tid=1, time=number, cpu=0, period=1,
                    comm=profile.comm_id(name), event=event)  # fmt: skip
    out = io.StringIO()
    write_flamegraph(profile, out, title="{{DATA}}</title><script>alert(1)</script>")
    page = out.getvalue()
    data = _page_data(page)
    assert not set(data) & set("<>&\u2028\u2029")
    document = json.loads(data)
    assert {entry[0] for entry in document["names"]} == {"all", *names}
    assert document["sources"] == ["<!--<script>.data"]
    # The title is escaped, and filled in once (a title that holds "{{DATA}}" stays so).
    title = "{{DATA}}&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;"
    assert page.count(f"<title>{title}</title>") == 1
    assert page.count('type="application/json">') == 1
