"""pysframe stack on a live process and on its core file, frame by frame against gdb's bt.

The test program (tests/data/stack) is compiled here with -O2 -fomit-frame-pointer and
-Wa,--gsframe: worker threads recurse through a shared library, the main thread recurses in a
SIGUSR1 handler, one thread prints READY and then blocks in libc's pause() (it may still be in
libc's write() when the stop comes).  It is stopped with SIGSTOP once every other thread is at
its known point, so gdb and pysframe see the same registers.  gdb's frames for inlined functions
(libc has them when its debug info is installed) are left out: see gdb_frames.py.

Without ``pysframe.generate``, libc (which has no .sframe) cannot be unwound: then only the
frames pysframe finds must agree with gdb (a prefix covering the program and its library), and
the full-stack comparisons skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require, require_program, unavailable
from pysframe.cli import main as cli_main
from pysframe.errors import SFrameError
from pysframe.unwind.core import StopKind
from pysframe.unwind.corefile import CoreFileError
from pysframe.unwind.ptrace import attach
from pysframe.unwind.stack import StackReport, stack_of_core, stack_of_process
from stack_support import (
    GdbFrame,
    Running,
    Unavailable,
    build_programs,
    check_ptrace,
    gdb_backtraces,
    run_program,
)

HAVE_GENERATOR = importlib.util.find_spec("pysframe.generate") is not None
NEEDS_GENERATOR = pytest.mark.skipif(
    not HAVE_GENERATOR,
    reason="pysframe.generate is not available: libc has no .sframe to unwind with",
)
DEPTH, THREADS = 12, 3


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        path = build_programs(tmp_path_factory.mktemp("stack"))
        check_ptrace()
        if shutil.which("gdb") is None:
            raise Unavailable("gdb", "gdb is not installed")
    except Unavailable as why:
        unavailable(why)
    return path


@pytest.fixture(scope="module")
def stopped(program: Path) -> Iterator[Running]:
    with run_program(program, DEPTH, THREADS) as running:
        yield running


@pytest.fixture(scope="module")
def live(stopped: Running) -> tuple[StackReport, dict[int, list[GdbFrame]]]:
    # gdb first (it detaches when done and leaves the process stopped), then pysframe.
    gdb = gdb_backtraces("-p", str(stopped.pid))
    report = stack_of_process(stopped.pid)
    assert gdb_backtraces("-p", str(stopped.pid)) == gdb, "the process moved between looks"
    return report, gdb


@pytest.fixture(scope="module")
def core(stopped: Running, program: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_program("gcore", "gdb")
    prefix = tmp_path_factory.mktemp("core") / "core"
    subprocess.run(
        ["gcore", "-o", str(prefix), str(stopped.pid)], capture_output=True, check=False,
        timeout=300,
    )
    path = Path(f"{prefix}.{stopped.pid}")
    if not path.exists():
        require("gdb", "gcore did not write a core file")
    return path


def ours(report: StackReport) -> dict[int, list[GdbFrame]]:
    return {
        thread.tid: [None if f.signal_trampoline else f.pc for f in thread.backtrace.frames]
        for thread in report.threads
    }


def check_prefix(report: StackReport, gdb: dict[int, list[GdbFrame]]) -> None:
    found = ours(report)
    assert sorted(found) == sorted(gdb)
    for tid, frames in found.items():
        assert frames == gdb[tid][: len(frames)], f"thread {tid}"


def test_threads_match_gdb_frame_by_frame_in_sframe_code(
    live: tuple[StackReport, dict[int, list[GdbFrame]]],
) -> None:
    report, gdb = live
    check_prefix(report, gdb)
    traces = {t.tid: t.backtrace for t in report.threads}
    names = {tid: [f.symbol for f in trace.frames] for tid, trace in traces.items()}
    workers = [tid for tid in names if "lib_call" in names[tid]]
    assert len(workers) == THREADS
    for tid in workers:
        # spin_here, DEPTH + k + 1 recurse frames, lib_call, via_lib, worker: all by SFrame
        frames = names[tid]
        assert frames[0] == "spin_here"
        assert frames[frames.index("lib_call") + 1 : frames.index("lib_call") + 3] == [
            "via_lib", "worker"
        ]
        assert traces[tid].frames[frames.index("lib_call")].module.endswith("libstacklib.so")
    main = traces[report.pid]
    assert any(f.signal_trampoline for f in main.frames)
    assert "main_spin" in names[report.pid] and "main" in names[report.pid]


@NEEDS_GENERATOR
def test_full_stacks_match_gdb(live: tuple[StackReport, dict[int, list[GdbFrame]]]) -> None:
    report, gdb = live
    assert ours(report) == gdb
    for thread in report.threads:
        assert thread.backtrace.stop is StopKind.OUTERMOST, thread.backtrace.reason


def test_core_matches_gdb(core: Path, program: Path) -> None:
    gdb = gdb_backtraces(str(program), str(core))
    report = stack_of_core(str(core))
    assert report.kind == "core"
    if HAVE_GENERATOR:
        assert ours(report) == gdb
    else:
        check_prefix(report, gdb)
        assert all(len(frames) >= 1 for frames in ours(report).values())


def test_core_exe_override_and_changed_module(
    core: Path, program: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "moved_prog"
    shutil.copy(program, moved)
    report = stack_of_core(str(core), str(moved))
    exe_frames = [f for t in report.threads for f in t.backtrace.frames if f.symbol == "recurse"]
    assert exe_frames and all(f.module == str(moved) for f in exe_frames)
    # An executable with another build ID: frames print, unresolved and marked.
    other = tmp_path / "other_prog"
    source = tmp_path / "other.c"
    source.write_text("int main(void) { return 42; }\n")
    subprocess.run(["gcc", "-O2", "-o", str(other), str(source)], check=True)
    report = stack_of_core(str(core), str(other))
    marked = [f for t in report.threads for f in t.backtrace.frames if f.problem]
    assert marked and all("another build" in (f.problem or "") for f in marked)


def test_core_exe_build_id_mismatch_and_missing_exe(
    core: Path,
    program: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The build ID of --exe is compared with the one the core holds in the first page of
    the executable's mapping: another build is one warning line, naming the file.  (A cache
    of its own: the session's may hold an entry another test made from a copy of the
    program changed under the same build ID, which is warned about as it is refused.)"""
    from pysframe.elf.reader import ElfReader

    monkeypatch.setenv("PYSFRAME_CACHE_DIR", str(tmp_path / "cache"))
    from pysframe.unwind.corefile import CoreFile
    from pysframe.unwind.loadmap import build_id_in_memory

    with ElfReader.open(str(program)) as image:
        own = image.build_id()
    with CoreFile(str(core)) as opened:
        start = min(m.start for m in opened.mappings if m.path == str(program))
        assert build_id_in_memory(opened.read_dumped, start) == own
    other = tmp_path / "other_prog"
    source = tmp_path / "other.c"
    source.write_text("int main(void) { return 42; }\n")
    subprocess.run(["gcc", "-O2", "-o", str(other), str(source)], check=True)
    with ElfReader.open(str(other)) as image:
        theirs = image.build_id()
    assert own is not None and theirs is not None
    assert cli_main(["stack", "--core", str(core), "--exe", str(other)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"pysframe: warning: {other}: build ID {theirs.hex()} is not the one in {core} "
        f"({own.hex()}): the core was dumped from another build of the program"
    ]
    missing = tmp_path / "missing_prog"
    assert cli_main(["stack", "--core", str(core), "--exe", str(missing)]) == 1
    assert capsys.readouterr().err == f"pysframe: {missing}: No such file or directory\n"


def test_cli_text_and_json(stopped: Running, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["stack", str(stopped.pid)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == f"PID {stopped.pid} - process"
    assert f"TID {stopped.pid}:" in lines
    assert any(" spin_here+0x" in line and "stack_prog" in line for line in lines)
    assert any("<signal handler called>" in line for line in lines)
    assert cli_main(["stack", "--json", str(stopped.pid)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pid"] == stopped.pid and len(data["threads"]) == THREADS + 2
    assert {m["origin"] for m in data["modules"] if m["path"].endswith("stack_prog")} == {"section"}


def test_process_left_stopped_and_detached(stopped: Running) -> None:
    stack_of_process(stopped.pid)
    status = Path(f"/proc/{stopped.pid}/status").read_text()
    assert "TracerPid:\t0" in status


def test_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], program: Path
) -> None:
    assert cli_main(["stack", "999999999"]) == 1
    assert capsys.readouterr().err.strip() == "pysframe: no such process: 999999999"
    assert cli_main(["stack", str(os.getpid())]) == 1
    assert "itself" in capsys.readouterr().err
    bad = tmp_path / "not-a-core"
    bad.write_bytes(b"hello")
    assert cli_main(["stack", "--core", str(bad)]) == 1
    assert capsys.readouterr().err == f"pysframe: {bad}: not an ELF file\n"
    assert cli_main(["stack", "--core", str(program)]) == 1
    assert capsys.readouterr().err == f"pysframe: {program}: not a core file (ELF type 3)\n"
    missing = tmp_path / "missing.core"
    assert cli_main(["stack", "--core", str(missing)]) == 1
    assert capsys.readouterr().err == f"pysframe: {missing}: No such file or directory\n"
    with pytest.raises(SystemExit) as usage:
        cli_main(["stack", "--max-frames", "0", str(os.getpid())])
    assert usage.value.code == 2 and "--max-frames" in capsys.readouterr().err


def test_truncated_core(core: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.core"
    data = core.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(CoreFileError, match="truncated"):
        stack_of_core(str(cut))


def test_no_permission_to_attach(stopped: Running) -> None:
    if os.geteuid() != 0:
        require("root", "needs root to drop privileges in a child")
    code = (
        "import os, sys\n"
        "from pysframe.cli import build_parser, main\n"
        "import pysframe.cli.stack, pysframe.unwind.modules, pysframe.unwind.ptrace\n"
        "import pysframe.unwind.stack\n"
        "build_parser()\n"
        "os.setgid(65534); os.setuid(65534)\n"
        f"sys.exit(main(['stack', '{stopped.pid}']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "permission" in result.stderr


def test_attach_detaches_on_error(stopped: Running) -> None:
    with pytest.raises(KeyboardInterrupt), attach(stopped.pid) as process:
        assert process.threads
        raise KeyboardInterrupt
    assert "TracerPid:\t0" in Path(f"/proc/{stopped.pid}/status").read_text()
    with pytest.raises(SFrameError), attach(stopped.pid):
        raise SFrameError("boom")
    assert "TracerPid:\t0" in Path(f"/proc/{stopped.pid}/status").read_text()
