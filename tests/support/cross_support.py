"""Helpers of the cross-architecture stack tests: build tests/data/stack/cross_prog.c for AArch64
and s390x with Debian's cross compilers (and binutils 2.47's cross assembler and linker for
SFrame from gas), run it under qemu-user to its abort(): for a core file, or stopped at the
SIGABRT under qemu's gdbstub; and ask gdb-multiarch for its frames."""

from __future__ import annotations

import os
import re
import resource
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stack_support import SOURCES, GdbFrame, Unavailable, gdb_backtraces

PROGRAM_SOURCE = SOURCES / "cross_prog.c"
#: The program's recursion depth: recurse() is DEPTH + 1 frames.
DEPTH = 6
GDB = "gdb-multiarch"
REFERENCE_ENV = Path.home() / ".cache" / "sframe-ref" / "env.sh"


@dataclass(frozen=True)
class Arch:
    name: str
    triplet: str
    qemu: str
    #: The environment variable naming binutils 2.47's cross tools (in REFERENCE_ENV).
    binutils_variable: str

    @property
    def sysroot(self) -> str:
        return f"/usr/{self.triplet}"

    @property
    def libc_dev(self) -> str:
        """The Debian package of the C library's headers and static libraries for the arch."""
        return {"aarch64": "libc6-dev-arm64-cross", "s390x": "libc6-dev-s390x-cross"}[self.name]

    def check_libc_dev(self) -> None:
        """Raise Unavailable unless the cross compiler has C library headers to build with."""
        if not Path(self.sysroot, "include", "stdio.h").exists():
            raise Unavailable(
                self.libc_dev, f"{self.libc_dev} is not installed: no {self.sysroot}/include"
            )


ARCHES = {
    "aarch64": Arch("aarch64", "aarch64-linux-gnu", "qemu-aarch64", "PATH_AARCH64"),
    "s390x": Arch("s390x", "s390x-linux-gnu", "qemu-s390x", "PATH_S390X"),
}


@dataclass(frozen=True)
class Variant:
    """One build of the program.  ``linkage``: static, dynamic (not PIE) or pie; ``gas``: SFrame
    from ``as --gsframe`` (else none: pysframe generates it from .eh_frame); ``pac``: AArch64
    return addresses signed (-mbranch-protection=pac-ret, run with qemu's -cpu max)."""

    arch: str
    linkage: str
    gas: bool
    pac: bool = False

    def __str__(self) -> str:
        name = f"{self.arch}-{self.linkage}-{'sframe' if self.gas else 'eh_frame'}"
        return name + ("-pac" if self.pac else "")

    @property
    def target(self) -> Arch:
        return ARCHES[self.arch]

    @property
    def dynamic(self) -> bool:
        return self.linkage != "static"

    def qemu_command(
        self, program: Path, port: int | None = None, depth: int = DEPTH
    ) -> list[str]:
        command = [self.target.qemu]
        if self.dynamic:
            command += ["-L", self.target.sysroot]
        if self.pac:
            command += ["-cpu", "max"]
        if port is not None:
            command += ["-g", str(port)]
        return [*command, str(program), str(depth)]


def binutils_247(arch: Arch) -> Path:
    """The directory of binutils 2.47's cross ``as`` and ``ld`` for ``arch``."""
    value = os.environ.get(arch.binutils_variable)
    if not value and REFERENCE_ENV.exists():
        match = re.search(rf"\b{arch.binutils_variable}=(\S+)", REFERENCE_ENV.read_text())
        value = match.group(1) if match else None
    if not value or not (Path(value) / f"{arch.triplet}-as").exists():
        raise Unavailable(
            f"binutils-2.47 {arch.triplet}",
            f"binutils 2.47 for {arch.triplet} is not built (${arch.binutils_variable}, "
            f"{REFERENCE_ENV}): SFrame from gas needs it"
        )
    return Path(value)


def check_tools(variant: Variant) -> None:
    arch = variant.target
    for tool in (f"{arch.triplet}-gcc", arch.qemu, GDB):
        if shutil.which(tool) is None:
            raise Unavailable(tool, f"{tool} is not installed")
    arch.check_libc_dev()
    if variant.dynamic and not Path(arch.sysroot, "lib").is_dir():
        raise Unavailable(
            f"{arch.triplet} libraries",
            f"the {arch.triplet} libraries are not installed in {arch.sysroot}",
        )


def build(variant: Variant, out: Path) -> Path:
    """Compile the program (-O2, no frame pointers) as ``variant`` says, into ``out``."""
    check_tools(variant)
    arch = variant.target
    flags = ["-O2", "-fomit-frame-pointer"]
    if variant.gas:
        # gcc runs the "as" and "ld" of a -B directory: binutils 2.47's, which write SFrame V3.
        tools = out / f"binutils-{arch.name}"
        if not tools.exists():
            tools.mkdir()
            source = binutils_247(arch)
            for tool in ("as", "ld"):
                (tools / tool).symlink_to(source / f"{arch.triplet}-{tool}")
        flags += [f"-B{tools}/", "-Wa,--gsframe"]
    flags += {"static": ["-static"], "dynamic": ["-no-pie"], "pie": ["-fPIE", "-pie"]}[
        variant.linkage
    ]
    if variant.pac:
        flags.append("-mbranch-protection=pac-ret")
    program = out / str(variant)
    result = subprocess.run(
        [f"{arch.triplet}-gcc", *flags, "-o", str(program), str(PROGRAM_SOURCE)],
        capture_output=True, text=True, check=False, timeout=120,
    )
    if result.returncode:
        raise Unavailable(
            f"{arch.triplet}-gcc", f"cannot compile {variant}: {result.stderr.strip()[:300]}"
        )
    return program


def _core_limit(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (limit, limit))


def run_to_core(variant: Variant, program: Path, workdir: Path) -> Path:
    """Run the program under qemu-user to its abort(); the guest core file qemu writes."""
    workdir.mkdir(exist_ok=True)
    # qemu then kills itself with the guest's signal: where core_pattern is the default "core",
    # a directory of that name keeps the kernel from writing a core of qemu itself.
    (workdir / "core").mkdir(exist_ok=True)
    subprocess.run(
        variant.qemu_command(program), cwd=workdir, capture_output=True, check=False,
        timeout=120, preexec_fn=lambda: _core_limit(resource.RLIM_INFINITY),
    )
    cores = sorted(workdir.glob(f"qemu_{program.name}_*.core"))
    if not cores:
        raise Unavailable(
            variant.target.qemu, f"{variant.target.qemu} wrote no core file for {program.name}"
        )
    return cores[-1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    """Whether a socket listens on ``port`` (read from /proc/net/tcp*, without connecting: qemu's
    gdbstub takes one connection only)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            listening = len(fields) > 3 and fields[3] == "0A"  # TCP_LISTEN
            if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


@contextmanager
def gdbstub(
    variant: Variant, program: Path, workdir: Path, depth: int = DEPTH
) -> Iterator[str]:
    """The program under qemu-user's gdbstub, stopped at its first instruction: its address.
    A negative ``depth`` makes it exit with status 3 instead of aborting."""
    workdir.mkdir(exist_ok=True)
    for _ in range(5):
        port = free_port()
        process = subprocess.Popen(
            variant.qemu_command(program, port, depth), cwd=workdir, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, preexec_fn=lambda: _core_limit(0),
        )
        try:
            deadline = time.monotonic() + 20
            while not listening(port) and process.poll() is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{variant.target.qemu} does not listen on port {port}")
                time.sleep(0.01)
            if process.poll() is None:
                yield f"127.0.0.1:{port}"
                return
        finally:
            process.kill()
            process.wait(timeout=20)
    raise RuntimeError(f"{variant.target.qemu} -g did not start")


def gdb_core_frames(variant: Variant, program: Path, core: Path) -> dict[int, list[GdbFrame]]:
    return gdb_backtraces(
        "-iex", f"set sysroot {variant.target.sysroot}", str(program), str(core), gdb=GDB
    )


def gdb_live_frames(
    variant: Variant, program: Path, workdir: Path, resume: bool = True
) -> dict[int, list[GdbFrame]]:
    """gdb-multiarch's frames of the program under qemu's gdbstub, stopped at its SIGABRT
    (``resume``) or at its first instruction."""
    with gdbstub(variant, program, workdir) as address:
        run = ["-ex", "continue"] if resume else []
        return gdb_backtraces(
            "-iex", f"set sysroot {variant.target.sysroot}", "-ex", f"target remote {address}",
            *run, str(program), gdb=GDB,
        )
