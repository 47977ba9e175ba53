"""JIT code named from ``/tmp/perf-PID.map``, as perf 6.1 names it.

* The map's lines as perf's dso__load_perf_map reads them, on bytes made by hand (each field
  and each rule of its arithmetic: what it keeps, what it skips);
* which mappings are JIT code (util/map.c map__new), and a map that is no regular file or
  is too large;
* a program (tests/data/perf/jitmap.c) that copies a function into an executable anonymous
  mapping three times and calls the copies, recorded by perf with frame pointers and with
  DWARF: every frame in the JIT code is named and placed as ``perf script`` names it, from
  the map the program wrote and from one made here with every kind of line in it; perf
  report's rows of the JIT code ("[JIT] tid PID") are pysframe's.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import unavailable
from perf_support import DATA, PERF, Unavailable, record
from pysframe.errors import InputError
from pysframe.perf.report import module_short_name
from pysframe.perf.symbols import (
    MAX_PERF_MAP_SIZE,
    parse_perf_map,
    perf_map_dso,
    perf_map_symbols,
)

#: PROT_READ | PROT_EXEC, PROT_READ | PROT_WRITE; MAP_HUGETLB.
RX, RW, HUGETLB = 0x5, 0x3, 0x40000


# -- the map's lines ----------------------------------------------------------------------------


def test_lines_as_perf_reads_them() -> None:
    data = (
        b"7f0000001000 40 jit_one\n"                  # START SIZE NAME, hex
        b"0x7f0000002000 0X20 with spaces (and more)\n"  # strtoull takes 0x; the rest is the name
        b"  7f0000003000 10 lead\n"                   # and leading blanks
        b"7f0000004000 10 ab\n"                       # a name of 2 bytes: skipped (len + 2 >= n)
        b"7f0000005000 10 abc\n"                      # 3 bytes: kept
        b"7f0000006000 10\n"                          # no name: skipped
        b"\n"                                         # empty: skipped
        b"7f0000007000 10 nul\0after\n"               # a C string: up to the NUL
        b"7f0000008000 10 bad\xff\xfename\n"          # not UTF-8: \xNN
        b"7f0000009000 10 last"                       # no newline: perf drops its last byte
    )  # fmt: skip
    starts, sizes, names = parse_perf_map(data)
    assert list(zip(starts, sizes, names, strict=True)) == [
        (0x7F0000001000, 0x40, "jit_one"),
        (0x7F0000002000, 0x20, "with spaces (and more)"),
        (0x7F0000003000, 0x10, "lead"),
        (0x7F0000005000, 0x10, "abc"),
        (0x7F0000007000, 0x10, "nul"),
        (0x7F0000008000, 0x10, "bad\\xff\\xfename"),
        (0x7F0000009000, 0x10, "las"),
    ]


def test_lines_that_are_no_entry_are_read_as_perf_reads_them() -> None:
    # Words perf's hex2u64 reads as far as they are hex: "hello world" is 0 (no digit), then
    # "e" (the size), then the name "lo world".  No line is an error.
    starts, sizes, names = parse_perf_map(b"hello world\nzz zz zzz\n-1 10 neg\n" + b"x" * 70000)
    assert list(zip(starts, sizes, names, strict=True)) == [
        (0, 0xE, "lo world"),
        (0, 0, " zz zzz"),  # no digits at all: the name starts one byte after each
        ((1 << 64) - 1, 0x10, "neg"),  # strtoull negates
    ]


def test_lookup_in_a_map_is_perfs_symbol_table(tmp_path: Path) -> None:
    path = tmp_path / "perf-1.map"
    path.write_bytes(b"1000 100 outer\n1040 20 inner\n2000 0 empty\n")
    table = perf_map_symbols(str(path))
    assert table is not None
    addresses = np.array([0x1000, 0x1050, 0x10FF, 0x1100, 0x2000, 0x2001], dtype=np.uint64)
    found = table.find_many(addresses)
    # perf's tree (no fixups for a perf map): the three inserted in order make inner the
    # root (one rotation), where the walk for 0x1050 stops, and from which the walk for
    # 0x10ff goes right, past outer, to nothing; the end is exclusive; an empty symbol holds
    # its own address only.
    assert [table.name_of(int(i)) if i >= 0 else None for i in found] == [
        "outer", "inner", None, None, "empty", None,
    ]


def test_a_map_that_is_not_there_names_nothing(tmp_path: Path) -> None:
    assert perf_map_symbols(str(tmp_path / "perf-2.map")) is None


def test_a_map_that_is_no_regular_file_or_too_large_is_an_error(tmp_path: Path) -> None:
    fifo = tmp_path / "perf-3.map"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        perf_map_symbols(str(fifo))  # and no wait for a writer
    large = tmp_path / "perf-4.map"
    with large.open("wb") as file:
        file.truncate(MAX_PERF_MAP_SIZE + 1)  # sparse
    with pytest.raises(InputError, match="more than"):
        perf_map_symbols(str(large))


# -- which mappings are JIT code ---------------------------------------------------------------


@pytest.mark.parametrize(("filename", "prot", "flags", "expected"), [
    ("//anon", RX, 0, "/tmp/perf-42.map"),
    ("//anon", RW, 0, None),  # not executable
    ("//anon", None, 0, "/tmp/perf-42.map"),  # MMAP: no prot, code
    ("/dev/zero (deleted)", RX, 0, "/tmp/perf-42.map"),
    ("/anon_hugepage (deleted)", RX, 0, "/tmp/perf-42.map"),
    ("/memfd:jit (deleted)", RX, HUGETLB, "/tmp/perf-42.map"),
    ("[heap]", RX, 0, "/tmp/perf-42.map"),
    ("[stack]", RX, 0, "/tmp/perf-42.map"),
    ("/SYSV00000000 (deleted)", RX, 0, "/tmp/perf-42.map"),
    ("/memfd:jit (deleted)", RX, 0, None),  # a file, as perf sees it
    ("/usr/lib/libc.so.6", RX, 0, None),
    ("[vdso]", RX, 0, None),
])  # fmt: skip
def test_jit_mappings(filename: str, prot: int | None, flags: int, expected: str | None) -> None:
    assert perf_map_dso(filename, 42, prot, flags) == expected


def test_jit_short_name() -> None:
    assert module_short_name("/tmp/perf-4242.map") == "[JIT] tid 4242"
    assert module_short_name("/usr/lib/x86_64-linux-gnu/libc.so.6") == "libc.so.6"


# -- a JIT program, recorded ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def jit_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if platform.machine() != "x86_64":
        pytest.skip("tests/data/perf/jitmap.c copies x86-64 code")
    if shutil.which("gcc") is None:
        unavailable(Unavailable("gcc", "gcc is not installed"))
    out = tmp_path_factory.mktemp("jit") / "jitmap"
    done = subprocess.run(
        ["gcc", "-O1", "-fno-omit-frame-pointer", "-o", str(out), str(DATA / "jitmap.c")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        unavailable(Unavailable("gcc", f"cannot build jitmap.c: {done.stderr[:200]}"))
    return out


@pytest.fixture(params=["fp", "dwarf"])
def jit_recording(
    request: pytest.FixtureRequest, jit_program: Path, tmp_path: Path
) -> Iterator[tuple[Path, str, Path]]:
    """A recording of the JIT program (``-g`` or ``--call-graph dwarf``), its names' tag, and
    the map it wrote (removed afterwards)."""
    tag = f"t{uuid.uuid4().hex[:8]}"
    call_graph = ("-g",) if request.param == "fp" else ("--call-graph", "dwarf,1024")
    try:
        data = record(
            tmp_path / "perf.data", [str(jit_program), "0.3", tag],
            options=("-e", "cpu-clock", "-c", "100000", *call_graph),
        )  # fmt: skip
    except Unavailable as why:
        unavailable(why)
    maps = _maps_of(data)
    assert len(maps) == 1, maps
    try:
        yield data, tag, maps[0]
    finally:
        maps[0].unlink(missing_ok=True)


def _maps_of(data: Path) -> list[Path]:
    """The perf maps the recording's process wrote (/tmp/perf-PID.map of its pids)."""
    text = subprocess.run(
        [PERF, "script", "-i", str(data), "-F", "pid"], capture_output=True, text=True,
        check=True, timeout=120,
    ).stdout  # fmt: skip
    pids = {int(word) for word in text.split()}
    return [Path(f"/tmp/perf-{pid}.map") for pid in sorted(pids)
            if Path(f"/tmp/perf-{pid}.map").exists()]  # fmt: skip


_JIT_FRAME = re.compile(r"^\t +[0-9a-f]+ .* \(/tmp/perf-\d+\.map\)$")


def _jit_frames(text: str) -> list[str]:
    """Each sample's frames in the JIT code (its lines naming the perf map), in order."""
    return [
        "\n".join(line for line in sample.splitlines() if _JIT_FRAME.match(line))
        for sample in text.split("\n\n")
    ]


def _scripts(data: Path) -> tuple[str, str]:
    theirs = subprocess.run(
        [PERF, "script", "--no-inline", "-F", "comm,tid,time,ip,sym,symoff,dso", "-i", str(data)],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    ours = subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", "script", "-F",
         "comm,tid,time,ip,sym,symoff,dso", "-i", str(data)],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout  # fmt: skip
    return theirs, ours


def _same_jit_frames(ours: str, theirs: str) -> None:
    """Every sample's JIT frames are perf's; a sample may only lack them where pysframe
    does not walk its user stack: a kernel sample of a ``-g`` recording, whose recorded user
    callchain is not read yet (perf's has them), at most one in ten."""
    mine, perfs = _jit_frames(ours), _jit_frames(theirs)
    assert len(mine) == len(perfs)
    both = [(a, b) for a, b in zip(mine, perfs, strict=True) if a]
    assert all(a == b for a, b in both), next((a, b) for a, b in both if a != b)
    assert len(both) >= 0.9 * sum(1 for b in perfs if b) > 100


def test_jit_frames_are_named_from_the_map(jit_recording: tuple[Path, str, Path]) -> None:
    data, tag, _map = jit_recording
    theirs, ours = _scripts(data)
    _same_jit_frames(ours, theirs)
    names = {
        line.split(maxsplit=1)[1] for sample in _jit_frames(ours) for line in sample.splitlines()
    }
    assert any(f"jit_hot_{tag}+0x" in name for name in names)
    assert any(f"Interpreted {tag}::loop (spaces)+0x" in name for name in names)
    assert any(name.startswith("[unknown] (/tmp/perf-") for name in names)  # not in the map


def test_jit_frames_from_a_map_of_every_kind_of_line(
    jit_recording: tuple[Path, str, Path],
) -> None:
    """The map rewritten after the recording (perf reads it when it reports): overlapping
    entries, a name too short, lines that are no entry, no newline at the end."""
    data, _tag, map_path = jit_recording
    first = min(int(line.split()[0], 16) for line in map_path.read_text().splitlines())
    map_path.write_bytes(
        b"garbage line\n"
        + f"{first:x} 17 outer_whole_{'x' * 5}\n".encode()      # the first copy
        + f"{first + 8:x} 4 inner_part\n".encode()                # inside it
        + f"{first + 64:x} 17 ab\n".encode()                      # too short a name: skipped
        + f"0x{first + 128:x} 0x17 third copy (no newline)".encode()  # loses its last byte
    )
    theirs, ours = _scripts(data)
    _same_jit_frames(ours, theirs)
    assert "third copy (no newline" in ours and "third copy (no newline)" not in ours


def test_jit_rows_of_the_report_are_perfs(jit_recording: tuple[Path, str, Path]) -> None:
    data, _tag, _map = jit_recording
    arguments = ["report", "-i", str(data), "--stdio", "--no-children", "-g", "none"]
    theirs = subprocess.run(
        [PERF, *arguments], capture_output=True, text=True, check=True, timeout=120
    ).stdout  # fmt: skip
    ours = subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", *arguments],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout  # fmt: skip

    def jit_rows(text: str) -> list[str]:
        return [line for line in text.splitlines() if "[JIT] tid " in line]

    assert jit_rows(theirs) and jit_rows(ours) == jit_rows(theirs)
