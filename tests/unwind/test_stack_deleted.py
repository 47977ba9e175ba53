"""A live process whose files were deleted or replaced after it mapped them: pysframe reads the
mapped files through /proc/PID/map_files, as a debugger must, and names every frame as before."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require, unavailable
from pysframe.sources.trust import Policy
from pysframe.unwind.mappings import process_mappings
from pysframe.unwind.modules import load_modules
from pysframe.unwind.stack import StackReport, stack_of_process
from stack_support import Running, Unavailable, build_programs, check_ptrace, run_program

DEPTH, THREADS = 4, 1


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        path = build_programs(tmp_path_factory.mktemp("deleted"))
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    return path


def names(report: StackReport) -> list[list[str | None]]:
    return [[f.symbol for f in t.backtrace.frames] for t in report.threads]


def map_files_readable(pid: int) -> bool:
    try:
        entry = next(iter(os.listdir(f"/proc/{pid}/map_files")))
        with open(f"/proc/{pid}/map_files/{entry}", "rb"):
            return True
    except (OSError, StopIteration):
        return False


@pytest.fixture
def changed(program: Path, tmp_path: Path) -> Iterator[tuple[Running, StackReport, Path]]:
    """The program running from a copy, stopped, unwound; then its library deleted and its
    executable replaced by another file at the same path."""
    directory = tmp_path / "run"
    shutil.copytree(program.parent, directory)
    copy = directory / program.name
    with run_program(copy, DEPTH, THREADS) as running:
        if not map_files_readable(running.pid):
            require("CAP_SYS_ADMIN", "/proc/PID/map_files cannot be read here")
        before = stack_of_process(running.pid)
        (directory / "libstacklib.so").unlink()
        replacement = directory / "replacement"
        shutil.copy(shutil.which("true") or "/bin/true", replacement)
        replacement.rename(copy)  # another inode at the executable's path
        yield running, before, directory


def test_deleted_and_replaced_files_are_read_through_map_files(
    changed: tuple[Running, StackReport, Path],
) -> None:
    running, before, directory = changed
    after = stack_of_process(running.pid)
    assert names(after) == names(before)
    assert [[f.pc for f in t.backtrace.frames] for t in after.threads] == [
        [f.pc for f in t.backtrace.frames] for t in before.threads
    ]
    frames = [f for t in after.threads for f in t.backtrace.frames]
    assert not [f for f in frames if f.problem]
    library = [f for f in frames if f.symbol == "lib_call"]
    assert library and all(
        f.module == f"{directory / 'libstacklib.so'} (deleted)" for f in library
    )
    # The executable's path now names another file: its maps line says "(deleted)".
    executable = str(directory / "stack_prog")
    assert any(
        f.symbol == "spin_here" and (f.module or "").startswith(executable) for f in frames
    )
    modules = {m.path: m for m in after.modules.modules}
    assert modules[f"{directory / 'libstacklib.so'} (deleted)"].origin == "section"


def test_a_path_naming_another_inode_is_read_through_map_files() -> None:
    """A mapping whose path now holds another file (another inode than the one mapped)."""
    if not map_files_readable(os.getpid()):
        require("CAP_SYS_ADMIN", "/proc/PID/map_files cannot be read here")
    mine = [m for m in process_mappings(os.getpid()) if m.path == os.path.realpath(sys.executable)]
    other = shutil.which("true") or "/bin/true"
    assert mine and os.stat(other).st_ino != mine[0].inode
    moved = [dataclasses.replace(m, path=other) for m in mine]
    table = load_modules(moved, policy=Policy.OWN, pid=os.getpid())
    module = table.modules[0]
    assert module.info.problem is None and module.path == other
    # Without the process to read from, the path's file is not the mapped one.
    table = load_modules(moved, policy=Policy.OWN)
    assert table.modules[0].info.problem == f"{other} changed after it was mapped"
    # A map_files entry that is not the mapped inode is not used either.
    wrong = [dataclasses.replace(m, inode=(m.inode or 0) + 1) for m in moved]
    assert load_modules(wrong, policy=Policy.OWN, pid=os.getpid()).modules[0].info.problem
