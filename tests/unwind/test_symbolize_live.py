"""Frame names of a live C++ program against gdb's: templates, lambdas run by std::thread, an
exception in flight, an inlined helper, built with ``g++ -O2 -g`` and split into a stripped
program and a separate debug file, found by ``.gnu_debuglink`` or by build ID.

For every physical frame gdb shows, pysframe's name must be the minimal symbol gdb itself names
the frame's address with (``info symbol``: demangled, the same alias), and, written without its
parameter list and return type, the name ``bt`` prints.  ``bt`` prints DWARF's name where gdb has
debug information, and two kinds of DWARF names are not symbol names, so for those the frame's
symbol name (``info symbol``) is the check: gdb's own spelling of lambda types
(``<lambda()>`` for the mangled ``{lambda()#1}``) and another alias of the same function
(``__libc_start_main_impl`` for ``__libc_start_main``, checked to be at the same address).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require, require_program, unavailable
from pysframe.cli import main as cli_main
from pysframe.elf.debuginfo import DEFAULT_DEBUG_DIRS, build_id_path
from pysframe.elf.reader import ElfReader
from pysframe.unwind.core import Frame
from pysframe.unwind.demangle import bare_name as without_signature
from pysframe.unwind.stack import StackReport, report_lines_gdb, stack_of_process
from pysframe.unwind.symbolize import SymbolOptions, symbols_of_file
from stack_support import (
    SOURCES,
    GdbSourceFrame,
    NamedFrame,
    Unavailable,
    check_ptrace,
    gdb_named_frames,
    gdb_source_frames,
    run_program,
)

LIBC_NAMES = ("start_thread", "clone3", "__libc_start_call_main")


def run(*command: str, cwd: Path | None = None) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=cwd)
    if result.returncode:
        raise Unavailable(command[0], f"{command[0]} failed: {result.stderr.strip()[:200]}")


def build(out: Path) -> dict[str, Path]:
    """The program split three ways: ``strip --strip-debug`` with a debuglink, ``strip
    --strip-all`` with a debuglink (names only from the debug file), and ``--strip-all`` with
    its debug file in a build-ID tree under ``out/debug`` (no debuglink)."""
    for tool in ("g++", "objcopy", "strip"):
        if shutil.which(tool) is None:
            raise Unavailable(tool, f"{tool} is not installed")
    full = out / "cxx_full"
    run("g++", "-O2", "-g", "-pthread", "-o", str(full), str(SOURCES / "cxx_prog.cc"))
    programs = {}
    for variant, strip in (("debuglink", "--strip-debug"), ("stripped", "--strip-all")):
        directory = out / variant
        directory.mkdir()
        program = directory / "cxx_prog"
        shutil.copy(full, program)
        run("objcopy", "--only-keep-debug", "cxx_prog", "cxx_prog.debug", cwd=directory)
        run("strip", strip, "cxx_prog", cwd=directory)
        run("objcopy", "--add-gnu-debuglink=cxx_prog.debug", "cxx_prog", cwd=directory)
        programs[variant] = program
    directory = out / "build-id"
    directory.mkdir()
    program = directory / "cxx_prog"
    shutil.copy(full, program)
    with ElfReader.open(str(program)) as image:
        build_id = image.build_id()
    assert build_id is not None, "g++ wrote no build ID"
    debug = Path(build_id_path(str(out / "debug"), build_id))
    debug.parent.mkdir(parents=True)
    run("objcopy", "--only-keep-debug", str(program), str(debug))
    run("strip", "--strip-all", str(program))
    programs["build-id"] = program
    return programs


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    try:
        built = build(tmp_path_factory.mktemp("cxx"))
        check_ptrace()
        if shutil.which("gdb") is None:
            raise Unavailable("gdb", "gdb is not installed")
    except Unavailable as why:
        unavailable(why)
    return built


def debug_root(program: Path) -> Path:
    return program.parent.parent / "debug"


@pytest.fixture(scope="module", params=["debuglink", "stripped", "build-id"])
def named(
    request: pytest.FixtureRequest, programs: dict[str, Path]
) -> Iterator[tuple[str, StackReport, dict[int, list[NamedFrame | None]]]]:
    program = programs[request.param]
    dirs = (str(debug_root(program)), *DEFAULT_DEBUG_DIRS)
    with run_program(program, 0, 0) as running:
        gdb = gdb_named_frames(
            "-iex", f"set debug-file-directory {':'.join(dirs)}", "-p", str(running.pid)
        )
        report = stack_of_process(running.pid, symbols=SymbolOptions(debug_dirs=dirs))
        yield request.param, report, gdb


def test_without_signature() -> None:
    assert without_signature("int recurse<0>(shapes::Box<int>&)") == "recurse<0>"
    assert without_signature("shapes::Box<long>::spin_inside(int) [clone .isra.0]") == (
        "shapes::Box<long>::spin_inside"
    )
    assert without_signature("std::thread::join()") == "std::thread::join"
    assert without_signature("main") == "main"
    assert without_signature("Vec::operator new(unsigned long)") == "Vec::operator new"


def same_function(frame: Frame, gdb_name: str, program: Path) -> bool:
    """Whether gdb's DWARF name is another symbol at the address of pysframe's symbol."""
    assert frame.module is not None and frame.offset is not None
    dirs = (str(debug_root(program)), *DEFAULT_DEBUG_DIRS)
    symbols = symbols_of_file(frame.module, dirs)
    start = frame.pc - frame.offset
    ours = symbols.by_name(frame.symbol or "")
    theirs = symbols.by_name(gdb_name)
    bias = {s.address for s in ours}
    return bool(theirs) and any(start - b + t.address == start for b in bias for t in theirs)


def test_names_match_gdb(
    named: tuple[str, StackReport, dict[int, list[NamedFrame | None]]],
    programs: dict[str, Path],
) -> None:
    variant, report, gdb = named
    assert sorted(t.tid for t in report.threads) == sorted(gdb)
    compared = 0
    for thread in report.threads:
        frames = [f for f in thread.backtrace.frames if not f.signal_trampoline]
        theirs = [f for f in gdb[thread.tid] if f is not None]
        assert [f.pc for f in frames] == [f.pc for f in theirs], f"thread {thread.tid}"
        for ours, gdb_frame in zip(frames, theirs, strict=True):
            where = f"{variant}: thread {thread.tid} frame {ours.index} at {ours.pc:#x}"
            assert ours.symbol == gdb_frame.symbol, where
            if ours.symbol is None or gdb_frame.bt_name is None:
                continue
            short = without_signature(ours.symbol)
            if short != gdb_frame.bt_name and "<lambda" not in gdb_frame.bt_name:
                assert same_function(ours, gdb_frame.bt_name, programs[variant]), (
                    f"{where}: {short!r} is not {gdb_frame.bt_name!r}"
                )
            compared += 1
    assert compared >= 20
    names = {f.symbol for t in report.threads for f in t.backtrace.frames}
    assert {"shapes::Box<int>::spin_inside(int)", "int recurse<0>(shapes::Box<int>&)",
            "throw_through_guard()", "main"} <= names
    assert any("main::{lambda()#1}" in (name or "") for name in names)


def libc_debug_file() -> str | None:
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6")
    if not libc.exists():
        return None
    with ElfReader.open(str(libc)) as image:
        build_id = image.build_id()
    if build_id is None:
        return None
    path = build_id_path(DEFAULT_DEBUG_DIRS[0], build_id)
    return path if Path(path).exists() else None


def test_libc_frames_named_from_libc6_dbg(
    named: tuple[str, StackReport, dict[int, list[NamedFrame | None]]],
) -> None:
    if libc_debug_file() is None:
        require("libc6-dbg", "libc's separate debug file (Debian's libc6-dbg) is not installed")
    _, report, gdb = named
    ours = {f.symbol for t in report.threads for f in t.backtrace.frames}
    theirs = {f.bt_name for frames in gdb.values() for f in frames if f is not None}
    for name in LIBC_NAMES:
        assert name in ours and name in theirs, name


def test_cli_demangles_unless_told_not_to(
    programs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    program = programs["stripped"]
    with run_program(program, 0, 0) as running:
        assert cli_main(["stack", str(running.pid)]) == 0
        text = capsys.readouterr().out
        assert " shapes::Box<int>::spin_inside(int)+0x" in text
        assert cli_main(["stack", "--no-demangle", str(running.pid)]) == 0
        mangled = capsys.readouterr().out
        assert " _ZN6shapes3BoxIiE11spin_insideEi+0x" in mangled
        # Without the debug file, a program stripped of .symtab has names from .dynsym only.
        empty = program.parent / "no-debug"
        empty.mkdir(exist_ok=True)
        (program.parent / "cxx_prog.debug").rename(program.parent / "cxx_prog.debug.away")
        try:
            assert cli_main(["stack", "--debug-dir", str(empty), str(running.pid)]) == 0
        finally:
            (program.parent / "cxx_prog.debug.away").rename(program.parent / "cxx_prog.debug")
        unnamed = capsys.readouterr().out
        assert "spin_inside" not in unnamed and " main+0x" not in unnamed


def test_running_threads_are_not_needed(programs: dict[str, Path]) -> None:
    # The program spins until stopped; a run without SIGSTOP still names every thread's frame.
    with run_program(programs["debuglink"], 0, 0, stop=False) as running:
        report = stack_of_process(running.pid)
        assert all(t.backtrace.frames[0].symbol for t in report.threads)


def test_lookup_by_demangled_and_mangled_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lookup`` takes C++ names as they print (with or without the parameter list) or
    mangled, names the function of each PC, and finds the names in the separate debug file."""
    require_program("g++")
    program = tmp_path / "cxx_prog"
    try:
        run("g++", "-O2", "-g", "-pthread", "-Wa,--gsframe", "-o", str(program),
            str(SOURCES / "cxx_prog.cc"))
        run("objcopy", "--only-keep-debug", "cxx_prog", "cxx_prog.debug", cwd=tmp_path)
        run("strip", "--strip-all", "cxx_prog", cwd=tmp_path)
        run("objcopy", "--add-gnu-debuglink=cxx_prog.debug", "cxx_prog", cwd=tmp_path)
    except Unavailable as why:
        unavailable(why)
    spin = "shapes::Box<int>::spin_inside(int)"
    assert cli_main(["lookup", str(program), f"{spin}+4", "recurse<1>", "main"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"<{spin}+0x4>: function " in lines[0]
    assert "<int recurse<1>(shapes::Box<int>&)>: function " in lines[1]
    assert "<main>: function " in lines[2]
    mangled = "_ZN6shapes3BoxIiE11spin_insideEi"
    assert cli_main(["lookup", "--no-demangle", str(program), mangled]) == 0
    assert f"<{mangled}>: function " in capsys.readouterr().out
    assert cli_main(["lookup", str(program), "no::such(int)"]) == 1
    assert "no function symbol no::such(int)" in capsys.readouterr().err


_BT_LINE = re.compile(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(.*) \(\)(?: at (.*):(\d+)| from .*)?$")


def parse_our_gdb_format(lines: list[str]) -> dict[int, list[GdbSourceFrame]]:
    traces: dict[int, list[GdbSourceFrame]] = {}
    current: list[GdbSourceFrame] = []
    for line in lines:
        if line.startswith("Thread "):
            current = traces.setdefault(int(line.split("LWP ")[1].rstrip("):")), [])
        elif line.endswith("<signal handler called>"):
            current.append(("signal", None, None, None))
        elif line.startswith("#"):
            match = _BT_LINE.match(line)
            assert match is not None, line
            _, name, file, number = match.groups()
            current.append(("?", None if name == "??" else name, file,
                            None if number is None else int(number)))
    return traces


@pytest.fixture(scope="module", params=["debuglink", "build-id"])
def with_lines(
    request: pytest.FixtureRequest, programs: dict[str, Path]
) -> tuple[list[str], dict[int, list[GdbSourceFrame]]]:
    program = programs[request.param]
    dirs = (str(debug_root(program)), *DEFAULT_DEBUG_DIRS)
    with run_program(program, 0, 0) as running:
        gdb = gdb_source_frames(
            "-iex", f"set debug-file-directory {':'.join(dirs)}", "-p", str(running.pid)
        )
        report = stack_of_process(running.pid, symbols=SymbolOptions(debug_dirs=dirs))
        return list(report_lines_gdb(report)), gdb


def test_format_gdb_lines_and_inlined_frames_match_gdb(
    with_lines: tuple[list[str], dict[int, list[GdbSourceFrame]]],
) -> None:
    """``--format gdb``: the same frames as gdb's ``bt``, inlined ones included, at the same
    source lines, with the same names (gdb writes an empty parameter list of a template's
    member as ``(void)`` in the names it builds from DWARF; tail-call frames it rebuilds from
    call-site information are not on the stack and are left out)."""
    lines, gdb = with_lines
    ours = parse_our_gdb_format(lines)
    assert sorted(ours) == sorted(gdb)
    inlined = 0
    for tid, frames in ours.items():
        theirs = gdb[tid]
        assert len(frames) == len(theirs), f"thread {tid}: {lines}"
        for index, (mine, gdb_frame) in enumerate(zip(frames, theirs, strict=True)):
            where = f"thread {tid} frame {index}"
            assert mine[2:] == gdb_frame[2:], where
            name = gdb_frame[1]
            assert mine[1] == (name.removesuffix("(void)") if name else None), where
            inlined += gdb_frame[0] == "inline"
    assert inlined >= 5  # inlined_helper, the lambda and std::thread's invokers


def test_lines_option_text(programs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    program = programs["debuglink"]
    with run_program(program, 0, 0) as running:
        assert cli_main(["stack", "--lines", str(running.pid)]) == 0
        text = capsys.readouterr().out
        assert cli_main(["stack", "--lines", "--json", str(running.pid)]) == 0
        data = json.loads(capsys.readouterr().out)
    source = str(SOURCES / "cxx_prog.cc")
    assert f"    inlined inlined_helper at {source}:30\n    at {source}:35\n" in text
    assert f"    at {source}:20\n" in text
    sources = [f["source"] for t in data["threads"] for f in t["frames"]]
    assert [
        {"function": "inlined_helper", "linkage_name": None, "file": source, "line": 30,
         "inlined": True},
        {"function": "recurse<0>", "linkage_name": "_Z7recurseILi0EEiRN6shapes3BoxIiEE",
         "file": source, "line": 35, "inlined": False},
    ] in sources


def test_format_gdb_names_libc_aliases_as_gdb(tmp_path: Path) -> None:
    """A process asleep in libc: ``--format gdb`` names libc's functions as gdb's ``bt`` does
    from libc6-dbg's DWARF, where a C function's linkage name is glibc's internal alias
    (``__GI___clock_nanosleep``, not DW_AT_name's ``__clock_nanosleep``)."""
    require_program("gdb")
    if libc_debug_file() is None:
        require("libc6-dbg", "libc's separate debug file (Debian's libc6-dbg) is not installed")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        stopped = False
        for _ in range(100):  # until it sleeps in the kernel
            state = Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "S":
                stopped = True
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert stopped
        report = stack_of_process(sleeper.pid)
        ours = [
            line.split(" in ", 1)[-1].split(" (", 1)[0].removeprefix("#0  ")
            for line in report_lines_gdb(report)
            if line.startswith("#")
        ]
        gdb = subprocess.run(
            ["gdb", "-batch", "-nx", "-p", str(sleeper.pid), "-ex", "bt"],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    finally:
        sleeper.kill()
        sleeper.wait()
    theirs = [
        re.sub(r"^#\d+\s+(0x[0-9a-f]+ in )?", "", line).split(" (", 1)[0]
        for line in gdb.splitlines()
        if line.startswith("#")
    ]
    if not theirs:
        require("ptrace", "gdb could not attach (ptrace_scope?)")
    assert ours[: len(theirs)] == theirs
    assert any(name.startswith("__GI_") for name in theirs)


def test_format_gdb_lines_in_libio_match_gdb(tmp_path: Path) -> None:
    """A program blocked in write(2) under ``fflush`` (its stdout a full pipe): every frame's
    name and source line as gdb gives them from libc6-dbg.  libio's line table switches file
    at return addresses without a statement there (``new_do_write`` at ``libioP.h:947``,
    where the last row says ``fileops.c:448``)."""
    require_program("gdb", "gcc")
    if libc_debug_file() is None:
        require("libc6-dbg", "libc's separate debug file (Debian's libc6-dbg) is not installed")
    program = tmp_path / "blocked_write"
    try:
        run("gcc", "-O2", "-g", "-o", str(program), str(SOURCES / "blocked_write.c"))
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    writer = subprocess.Popen([str(program)], stdout=subprocess.PIPE)
    try:
        for _ in range(200):  # until the pipe is full and write(2) sleeps
            state = Path(f"/proc/{writer.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "S":
                break
            subprocess.run(["sleep", "0.05"], check=True)
        gdb = gdb_source_frames("-p", str(writer.pid))
        lines = list(report_lines_gdb(stack_of_process(writer.pid)))
    finally:
        writer.kill()
        writer.wait()
        assert writer.stdout is not None
        writer.stdout.close()
    ours = parse_our_gdb_format(lines)
    assert list(ours) == list(gdb) == [writer.pid]
    frames, theirs = ours[writer.pid], gdb[writer.pid]
    assert [frame[1:] for frame in frames] == [frame[1:] for frame in theirs]
    assert ("new_do_write", "./libio/libioP.h", 947) in [frame[1:] for frame in theirs]
