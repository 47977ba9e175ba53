"""The vDSO as a module: found through the auxiliary vector, read from the address space,
unwound with SFrame generated from its .eh_frame; live and core stacks stopped inside it
against gdb."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import require, require_program, unavailable
from pysframe.format.model import RuleKind
from pysframe.unwind.mappings import (
    AT_SYSINFO_EHDR,
    process_mappings,
    process_vdso_address,
    vdso_address,
)
from pysframe.unwind.modules import vdso_module
from pysframe.unwind.stack import stack_of_core, stack_of_process
from pysframe.unwind.vdso import VDSO_NAME
from stack_support import SOURCES, Unavailable, check_ptrace, gdb_backtraces, wait_stopped

AT_ENTRY = 9


def auxv(pairs: list[tuple[int, int]], order: str = "<") -> bytes:
    return b"".join(struct.pack(order + "QQ", key, value) for key, value in pairs)


@pytest.mark.parametrize("order", ["<", ">"])
def test_vdso_address_from_the_auxiliary_vector(order: str) -> None:
    big = order == ">"
    vector = auxv([(AT_ENTRY, 0x401000), (AT_SYSINFO_EHDR, 0x7FFF_F7FC_1000), (0, 0)], order)
    assert vdso_address(vector, big) == 0x7FFF_F7FC_1000
    assert vdso_address(auxv([(AT_ENTRY, 0x401000), (0, 0)], order), big) is None
    assert vdso_address(auxv([(AT_SYSINFO_EHDR, 0)], order), big) is None  # no vDSO
    assert vdso_address(vector[:-1], big) == 0x7FFF_F7FC_1000  # a torn last pair is ignored


def elf_header(shoff: int, shnum: int, phoff: int = 64, phnum: int = 1) -> bytes:
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"  # ELFCLASS64, little-endian
    struct.pack_into("<QQ", header, 0x20, phoff, shoff)  # e_phoff, e_shoff
    struct.pack_into("<HHHH", header, 0x36, 56, phnum, 64, shnum)  # sizes and counts
    return bytes(header)


def test_unreadable_or_oversized_vdso_images_are_left_out() -> None:
    reads: list[tuple[int, int]] = []

    def memory_of(image: bytes):  # type: ignore[no-untyped-def]
        def read(address: int, size: int) -> bytes:
            reads.append((address, size))
            return image[:size]

        return read

    # A header placing its section headers 2 GB in: nothing more is read.
    assert vdso_module(0x1000, memory_of(elf_header(0x8000_0000, 1))) is None
    assert reads == [(0x1000, 64)]
    assert vdso_module(0x1000, memory_of(b"\x7fELF" + bytes(60))) is None  # not ELFCLASS64
    assert vdso_module(0x1000, memory_of(b"not an ELF image" * 4)) is None
    # Claims 4 KB, memory holds 64 bytes: unreadable, left out.
    assert vdso_module(0x1000, memory_of(elf_header(4096 - 64, 1))) is None

    def unmapped(address: int, size: int) -> bytes:
        raise OSError("unmapped")

    assert vdso_module(0x1000, unmapped) is None


def own_memory(address: int, size: int) -> bytes:
    with open("/proc/self/mem", "rb") as memory:
        memory.seek(address)
        return memory.read(size)


def test_this_process_vdso_is_a_module_with_symbols_and_sframe() -> None:
    address = process_vdso_address(os.getpid())
    if address is None:
        require("vdso", "this process has no vDSO")
    module = vdso_module(address, own_memory)
    assert module is not None and module.path == VDSO_NAME and module.start == address
    maps = Path("/proc/self/maps").read_text().splitlines()
    mapped = [line.split()[0] for line in maps if line.endswith("[vdso]")]
    low, high = (int(part, 16) for part in mapped[0].split("-"))
    assert low == module.start and module.end <= high
    assert module.info.section is module and module.origin in {"generated", "section"}
    section = module.section  # chosen when first needed
    assert section is not None
    symbolize = module.info.symbolize
    assert symbolize is not None
    starts = [section.start(index) for index in range(len(section))]
    symbols = [start for start in starts if symbolize(start) is not None]
    assert symbols, "no generated function starts at a vDSO symbol"
    if platform.machine() == "x86_64":
        found = section.find_row(symbols[0])
        assert found is not None and found.row.cfa is not None
        assert (found.row.cfa.reg, found.row.cfa.offset) == (7, 8)  # CFA = rsp + 8 at entry
        assert found.row.ra.kind is RuleKind.FIXED


# -- live process and core stopped in the vDSO, against gdb --------------------------------------

#: Distinct vDSO PCs to stop at (within a minute).
STOPS_IN_VDSO = 4


@pytest.fixture(scope="module")
def clock_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("gcc", "gdb"):
        require_program(tool)
    try:
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    out = tmp_path_factory.mktemp("vdso") / "clock_loop"
    subprocess.run(
        ["gcc", "-O2", "-fomit-frame-pointer", "-o", str(out), str(SOURCES / "clock_loop.c")],
        check=True,
    )
    return out


def vdso_range(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        if line.endswith("[vdso]"):
            low, high = line.split()[0].split("-")
            return int(low, 16), int(high, 16)
    require("vdso", "the test program has no vDSO")


def test_stacks_stopped_in_the_vdso_match_gdb(clock_program: Path, tmp_path: Path) -> None:
    process = subprocess.Popen([str(clock_program)], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"READY\n"
        low, high = vdso_range(process.pid)
        assert any(m.path.endswith("clock_loop") for m in process_mappings(process.pid))
        seen: set[int] = set()
        core_taken = False
        deadline = time.monotonic() + 60
        while len(seen) < STOPS_IN_VDSO and time.monotonic() < deadline:
            os.kill(process.pid, signal.SIGSTOP)
            wait_stopped(process.pid)
            report = stack_of_process(process.pid)
            frames = report.threads[0].backtrace.frames
            if low <= frames[0].pc < high and frames[0].pc not in seen:
                seen.add(frames[0].pc)
                assert frames[0].module == VDSO_NAME and frames[0].symbol is not None
                assert [f.symbol for f in frames].count("clock_loop") == 1
                gdb = gdb_backtraces("-p", str(process.pid))
                assert [f.pc for f in frames] == gdb[process.pid]
                if not core_taken:
                    core_taken = check_core(process.pid, clock_program, tmp_path, frames)
            os.kill(process.pid, signal.SIGCONT)
            time.sleep(0.002 * (1 + len(seen)))
        # A clock source the vDSO cannot read makes it fall back to a system call: then
        # nearly every stop is at the one PC after it, and fewer PCs are seen.
        assert seen, "never stopped in the vDSO"
        assert core_taken or shutil.which("gcore") is None
    finally:
        process.kill()
        process.wait()


def check_core(pid: int, program: Path, tmp_path: Path, frames: tuple[object, ...]) -> bool:
    """gcore the stopped process; its core unwinds to the same PCs as gdb's on the core."""
    if shutil.which("gcore") is None:
        return False
    prefix = tmp_path / "core"
    subprocess.run(["gcore", "-o", str(prefix), str(pid)], capture_output=True, timeout=300)
    core = Path(f"{prefix}.{pid}")
    if not core.exists():
        return False
    report = stack_of_core(str(core))
    ours = [f.pc for f in report.threads[0].backtrace.frames]
    assert ours == [f.pc for f in frames]  # type: ignore[attr-defined]
    assert ours == gdb_backtraces(str(program), str(core))[pid]
    assert report.threads[0].backtrace.frames[0].module == VDSO_NAME
    return True
