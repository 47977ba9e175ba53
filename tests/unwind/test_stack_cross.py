"""pysframe stack on AArch64 and s390x programs run under qemu-user, frame by frame against
gdb-multiarch: from the guest core files qemu writes (no NT_FILE note: the executable is placed
by address, and the shared objects found through r_debug under --sysroot) and live, stopped at
their SIGABRT under qemu's gdbstub (the GDB remote protocol).

Each variant of tests/data/stack/cross_prog.c (see cross_support.Variant) is built once per
session: static, dynamic and PIE; SFrame from gas 2.47 or none (generated from .eh_frame by
pysframe); AArch64 pac-ret, whose signed return addresses stop gdb early while pysframe strips
them and reaches _start.  gdb cannot place a PIE executable in a qemu core (the core holds no
code to check its program headers against), so PIE cores are compared with gdb's live frames
of the same program: qemu-user loads it at the same addresses every run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from conftest import unavailable
from cross_support import (
    DEPTH,
    Variant,
    build,
    gdb_core_frames,
    gdb_live_frames,
    gdbstub,
    run_to_core,
)
from pysframe.cli import main as cli_main
from pysframe.unwind.core import StopKind
from pysframe.unwind.stack import StackReport, stack_of_core, stack_of_remote
from stack_support import GdbFrame, Unavailable

VARIANTS = [
    *(
        Variant(arch, linkage, gas)
        for arch in ("aarch64", "s390x")
        for linkage in ("static", "dynamic")
        for gas in (True, False)
    ),
    Variant("aarch64", "pie", True),
    Variant("s390x", "pie", False),
    Variant("aarch64", "static", True, pac=True),
    Variant("aarch64", "dynamic", False, pac=True),
]
#: AArch64 user addresses have at most 48 bits under qemu-user: a PAC signature lies above.
ADDRESS_MASK = (1 << 48) - 1
T = TypeVar("T")


class Builds:
    """Programs, cores and gdb's frames per variant, each made once (or its reason to skip)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._made: dict[tuple[str, str], object] = {}

    def _once(self, what: str, variant: Variant, make: Callable[[], T]) -> T:
        key = (what, str(variant))
        if key not in self._made:
            try:
                self._made[key] = make()
            except Unavailable as why:
                self._made[key] = why
        made = self._made[key]
        if isinstance(made, Unavailable):
            unavailable(made)
        return made  # type: ignore[return-value]

    def workdir(self, variant: Variant) -> Path:
        return self.root / f"{variant}.run"

    def program(self, variant: Variant) -> Path:
        return self._once("program", variant, lambda: build(variant, self.root))

    def core(self, variant: Variant) -> Path:
        program = self.program(variant)
        return self._once(
            "core", variant, lambda: run_to_core(variant, program, self.workdir(variant))
        )

    def gdb_live(self, variant: Variant) -> dict[int, list[GdbFrame]]:
        program = self.program(variant)
        return self._once(
            "gdb-live", variant, lambda: gdb_live_frames(variant, program, self.workdir(variant))
        )

    def gdb_core(self, variant: Variant) -> dict[int, list[GdbFrame]]:
        if variant.linkage == "pie":
            return self.gdb_live(variant)
        core, program = self.core(variant), self.program(variant)
        return self._once("gdb-core", variant, lambda: gdb_core_frames(variant, program, core))


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    return Builds(tmp_path_factory.mktemp("cross"))


def only_thread(report: StackReport) -> list[int]:
    (thread,) = report.threads
    return [frame.pc for frame in thread.backtrace.frames]


def check_against_gdb(
    variant: Variant, report: StackReport, gdb: dict[int, list[GdbFrame]], program: Path
) -> None:
    """Every frame's PC is gdb's (pac-ret: gdb's frames with their signatures stripped, and
    pysframe goes on to _start), and the walk ends at _start."""
    (gdb_frames,) = gdb.values()
    assert gdb_frames and None not in gdb_frames, gdb
    ours = only_thread(report)
    (thread,) = report.threads
    frames = thread.backtrace.frames
    assert thread.backtrace.stop is StopKind.OUTERMOST, thread.backtrace.reason
    assert frames[-1].symbol == "_start"
    if variant.pac:
        # gdb cannot strip the signatures (qemu gives it no PAC mask) and stops early.
        assert len(gdb_frames) < len(ours)
        assert ours[: len(gdb_frames)] == [pc & ADDRESS_MASK for pc in gdb_frames]  # type: ignore[operator]
    else:
        assert ours == gdb_frames
    names = [frame.symbol for frame in frames]
    assert names[names.index("crash") : names.index("crash") + 3] == [
        "crash", "big_frame", "with_alloca"
    ]
    assert names.count("recurse") == DEPTH + 1
    exe = [m for m in report.modules.modules if m.path == str(program)]
    assert len(exe) == 1 and exe[0].origin == ("section" if variant.gas else "generated")
    if variant.dynamic:
        sysroot = variant.target.sysroot
        assert any(
            m.path.startswith(sysroot) and "libc.so" in m.path for m in report.modules.modules
        )


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_core_frames_match_gdb(variant: Variant, builds: Builds) -> None:
    program, core = builds.program(variant), builds.core(variant)
    gdb = builds.gdb_core(variant)
    report = stack_of_core(str(core), str(program), sysroot=variant.target.sysroot)
    assert report.kind == "core"
    if variant.linkage != "pie":
        assert sorted(gdb) == [thread.tid for thread in report.threads]
    check_against_gdb(variant, report, gdb, program)


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_live_frames_match_gdb(variant: Variant, builds: Builds) -> None:
    program = builds.program(variant)
    gdb = builds.gdb_live(variant)
    with gdbstub(variant, program, builds.workdir(variant)) as address:
        report = stack_of_remote(
            address, str(program), sysroot=variant.target.sysroot, resume=True
        )
    assert report.kind == "remote"
    check_against_gdb(variant, report, gdb, program)


# -- the command line ----------------------------------------------------------------------------

DYNAMIC = Variant("aarch64", "dynamic", True)
S390X_DYNAMIC = Variant("s390x", "dynamic", False)
STATIC = Variant("aarch64", "static", True)


def test_cli_core_text(builds: Builds, capsys: pytest.CaptureFixture[str]) -> None:
    program, core = builds.program(DYNAMIC), builds.core(DYNAMIC)
    sysroot = DYNAMIC.target.sysroot
    args = ["stack", "--core", str(core), "--exe", str(program), "--sysroot", sysroot]
    assert cli_main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    (tid,) = builds.gdb_core(DYNAMIC)
    assert lines[0] == f"PID {tid} - core" and lines[1] == f"TID {tid}:"
    assert any(" crash+0x10 - " + str(program) in line for line in lines)
    assert any(" abort+0x" in line and f"{sysroot}/lib/libc.so.6" in line for line in lines)
    assert " _start+0x" in lines[-1] and not any("backtrace stopped" in line for line in lines)


def test_cli_remote_json(builds: Builds, capsys: pytest.CaptureFixture[str]) -> None:
    program = builds.program(S390X_DYNAMIC)
    (gdb,) = builds.gdb_live(S390X_DYNAMIC).values()
    with gdbstub(S390X_DYNAMIC, program, builds.workdir(S390X_DYNAMIC)) as address:
        args = [
            "stack", "--json", "--remote", address, "--continue", "--exe", str(program),
            "--sysroot", S390X_DYNAMIC.target.sysroot,
        ]
        assert cli_main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "remote"
    (thread,) = data["threads"]
    assert [frame["pc"] for frame in thread["frames"]] == gdb
    assert thread["stop"] == "outermost"


@pytest.mark.parametrize("variant", [DYNAMIC, Variant("s390x", "static", True)], ids=str)
def test_remote_stopped_at_its_first_instruction(variant: Variant, builds: Builds) -> None:
    """Before the dynamic linker has listed anything, the interpreter is found at AT_BASE."""
    program = builds.program(variant)
    (gdb,) = gdb_live_frames(variant, program, builds.workdir(variant), resume=False).values()
    with gdbstub(variant, program, builds.workdir(variant)) as address:
        report = stack_of_remote(address, str(program), sysroot=variant.target.sysroot)
    assert only_thread(report) == gdb
    (thread,) = report.threads
    first = thread.backtrace.frames[0]
    if variant.dynamic:
        assert first.module is not None and "ld-linux-aarch64" in first.module
    else:
        assert first.symbol == "_start" and first.module == str(program)


def test_cli_errors_are_one_line(
    builds: Builds, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    core, program = builds.core(STATIC), builds.program(STATIC)

    def fails(*args: str) -> str:
        assert cli_main(["stack", *args]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("pysframe: "), err
        return err.strip()

    assert fails("--core", str(core)) == (
        f"pysframe: {core}: the core file does not list its mapped files (no NT_FILE note): "
        "name its executable with --exe"
    )
    other = builds.program(DYNAMIC)
    assert fails("--core", str(core), "--exe", str(other)).startswith(
        f"pysframe: {other}: is not the executable of {core}: its entry point"
    )
    s390x = builds.program(Variant("s390x", "static", True))
    assert "S390X" in fails("--core", str(core), "--exe", str(s390x))
    assert fails("--core", str(core), "--exe", str(tmp_path / "none")).startswith(
        f"pysframe: {tmp_path / 'none'}: "
    )
    assert "cannot connect" in fails("--remote", "127.0.0.1:1", "--exe", str(program))
    with pytest.raises(SystemExit) as usage:
        cli_main(["stack", "--remote", "nowhere", "--exe", str(program)])
    assert usage.value.code == 2 and "nowhere: not HOST:PORT" in capsys.readouterr().err
    assert cli_main(["stack", "--core", str(core), "--continue"]) == 2  # a usage error
    assert capsys.readouterr().err == "pysframe: stack: --continue needs --remote\n"
    with gdbstub(STATIC, program, builds.workdir(STATIC), depth=-1) as address:
        message = fails("--remote", address, "--continue", "--exe", str(program))
    assert message == f"pysframe: {address}: the program exited with status 3"
