"""Programs and libraries given SFrame by ``generate --inject`` (and ``--replace``) keep running,
with the same SFrame section, after strip, strip -g and objcopy of binutils 2.40 (the machine's)
and 2.47 (the reference build), and after elfutils' eu-strip.

Each case runs the program before injection and after each tool, and compares exit code and
output; the stripped file's SFrame section is compared with the injected file's as objdump
2.47 prints it (pysframe's own dump when the reference is absent), and ``pysframe check``
must find no error in it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import require, require_program, unavailable
from cross_support import ARCHES
from elf_build import Sec, Seg, build_elf
from libsframe_ref import reference_tool_if_present
from pysframe.cli import main
from pysframe.elf.inject import new_section_address, plan_injection
from pysframe.elf.layout import (
    ET_DYN,
    ET_EXEC,
    PT_DYNAMIC,
    PT_LOAD,
    PT_NOTE,
    SHT_PROGBITS,
    dyn64_struct,
)
from pysframe.elf.reader import ElfReader
from pysframe.errors import ElfError
from stack_support import Unavailable

#: Dynamic tags (gABI; DT_GNU_HASH from GNU's include/elf/common.h).
DT_STRTAB, DT_SYMTAB, DT_GNU_HASH = 5, 6, 0x6FFFFEF5

HELLO = r"""
#include <stdio.h>
#include <stdlib.h>
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20;
    printf("fib(%d) = %d\n", n, fib(n));
    return 3;
}
"""
#: A package note as systemd's tools add them (.note.package, owner "FDO"): the linker puts it
#: after .note.ABI-tag in the same PT_NOTE, which then reaches past the sections in the way of
#: the growing program header table and moves whole with them.
PACKAGE_NOTE = r"""
#include <stdio.h>
__asm__(".pushsection .note.package,\"a\",@note\n"
        ".balign 4\n .long 4\n .long 2f-1f\n .long 0xcafe1a7e\n .asciz \"FDO\"\n"
        "1: .asciz \"{\\\"type\\\":\\\"deb\\\",\\\"name\\\":\\\"pysframe-test\\\"}\"\n"
        "2: .balign 4\n .popsection\n");
int main(void) { puts("package note"); return 0; }
"""
LIBRARY = r"""
int scaled(int x) { return 3 * x + 1; }
"""
LIBRARY_USER = r"""
#include <stdio.h>
int scaled(int);
int main(void) { printf("%d\n", scaled(13)); return 0; }
"""


@pytest.fixture(scope="module", autouse=True)
def _needs_gcc() -> None:
    require_program("gcc")


@dataclass(frozen=True)
class Case:
    """A file to inject and how to run it (``run(path)`` gives the exit code and output)."""

    path: Path
    run: Callable[[Path], tuple[int, str]]
    replace: bool = False


def _run_program(path: Path) -> tuple[int, str]:
    done = subprocess.run([str(path), "20"], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


def _gcc(
    folder: Path, name: str, source: str, *flags: str, libraries: tuple[str, ...] = ()
) -> Path:
    (folder / f"{name}.c").write_text(source)
    out = folder / name
    source_file = str(folder / f"{name}.c")
    subprocess.run(["gcc", "-O2", *flags, "-o", str(out), source_file, *libraries], check=True)
    return out


def _reference_bin() -> Path | None:
    objdump = os.environ.get("OBJDUMP")
    if objdump and (Path(objdump).parent / "strip").exists():
        return Path(objdump).parent
    return None


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    work = tmp_path_factory.mktemp("strip")
    built: dict[str, Case] = {
        "pie": Case(_gcc(work, "pie", HELLO, "-pie", "-fPIE"), _run_program),
        "non-pie": Case(_gcc(work, "nopie", HELLO, "-no-pie"), _run_program),
        "static": Case(_gcc(work, "static", HELLO, "-static"), _run_program),
        "static-pie": Case(_gcc(work, "spie", HELLO, "-static-pie"), _run_program),
        "pie with a package note": Case(_gcc(work, "note", PACKAGE_NOTE), _run_program),
    }
    library = _gcc(work, "libscaled.so", LIBRARY, "-shared", "-fPIC")
    user = _gcc(work, "user", LIBRARY_USER, f"-Wl,-rpath,{work / 'lib'}", libraries=(str(library),))

    def run_with_library(path: Path) -> tuple[int, str]:
        libdir = work / "lib"
        libdir.mkdir(exist_ok=True)
        shutil.copy(path, libdir / "libscaled.so")
        return _run_program(user)

    built["shared library"] = Case(library, run_with_library)
    if shutil.which("ld.lld"):
        built["pie linked by lld"] = Case(_gcc(work, "lld", HELLO, "-fuse-ld=lld"), _run_program)
    ls = Path("/usr/bin/ls")
    if ls.exists():
        shutil.copy(ls, work / "ls")
        # A listing that does not change while the tests run: files with fixed times.
        listed = work / "listed"
        listed.mkdir()
        for number, name in enumerate(("alpha", "beta", "gamma.txt")):
            (listed / name).write_text(name * (number + 1))
            os.utime(listed / name, (1_700_000_000, 1_700_000_000 + number))

        def run_ls(path: Path) -> tuple[int, str]:
            done = subprocess.run(
                [str(path), "-l", "--full-time", "-t", str(listed)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            return done.returncode, done.stdout

        built["/usr/bin/ls"] = Case(work / "ls", run_ls)
    apt_pkg = Path("/usr/lib/x86_64-linux-gnu/libapt-pkg.so.6.0")
    apt_config = shutil.which("apt-config")
    if apt_pkg.exists() and apt_config:
        shutil.copy(apt_pkg, work / "libapt-pkg.so.6.0")

        def run_apt_config(path: Path) -> tuple[int, str]:
            """apt-config dump with ``path`` as its libapt-pkg (ldd must say so too)."""
            libdir = work / "apt-lib"
            libdir.mkdir(exist_ok=True)
            shutil.copy(path, libdir / "libapt-pkg.so.6.0")
            env = {**os.environ, "LD_LIBRARY_PATH": str(libdir)}
            linked = subprocess.run(
                ["ldd", apt_config], capture_output=True, text=True, env=env, check=True
            ).stdout
            assert str(libdir) in linked
            done = subprocess.run(
                [apt_config, "dump"], capture_output=True, text=True, env=env, timeout=60
            )
            return done.returncode, done.stdout

        built["libapt-pkg (C++, run by apt-config)"] = Case(
            work / "libapt-pkg.so.6.0", run_apt_config
        )
    reference = _reference_bin()
    if reference is not None:
        as_dir = Path(os.environ.get("GAS", str(reference / "as"))).parent
        built["own .sframe, --replace"] = Case(
            _gcc(work, "sframed", HELLO, f"-B{as_dir}/", "-Wa,--gsframe"), _run_program, True
        )
    return built


#: The strip and objcopy runs each file goes through.
TOOLS = (
    "strip 2.40", "strip -g 2.40", "objcopy 2.40", "strip 2.47", "strip -g 2.47", "objcopy 2.47",
    "eu-strip", "eu-strip -g",
)  # fmt: skip


def _tool_command(tool: str, given: Path, out: Path) -> list[str]:
    """The command line of ``tool`` writing ``given`` stripped (or copied) to ``out``; the test
    stops (conftest.require) when the tool is not there."""
    program, *options = tool.split()
    if program == "eu-strip":
        return [require_program("eu-strip", "elfutils"), *options, "-o", str(out), str(given)]
    release = options.pop()
    if release == "2.47":
        folder = _reference_bin()
        if folder is None:
            require("binutils-2.47", f"{program} of binutils 2.47 ($OBJDUMP's directory)")
        path = str(folder / program)
    else:
        path = require_program(program, "binutils")
    if program == "objcopy":
        return [path, str(given), str(out)]
    return [path, *options, "-o", str(out), str(given)]


def _sframe_text(path: Path) -> str:
    objdump = reference_tool_if_present("OBJDUMP")
    if objdump is not None:
        text = subprocess.run(
            [objdump, "--sframe", str(path)], capture_output=True, text=True, check=True
        ).stdout
    else:
        text = subprocess.run(
            ["pysframe", "dump", str(path)], capture_output=True, text=True, check=True
        ).stdout
    return text.split("Contents of the SFrame section", 1)[1]


def _check_errors(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["check", str(path)])
    out = capsys.readouterr()
    return "" if code == 0 else out.out + out.err


CASE_NAMES = [
    "pie",
    "non-pie",
    "static",
    "static-pie",
    "pie with a package note",
    "shared library",
    "pie linked by lld",
    "/usr/bin/ls",
    "libapt-pkg (C++, run by apt-config)",
    "own .sframe, --replace",
]
#: What the cases not every machine can build need (their tool, for conftest.require).
CASE_NEEDS = {
    "pie linked by lld": "ld.lld",
    "/usr/bin/ls": "coreutils",
    "libapt-pkg (C++, run by apt-config)": "apt",
    "own .sframe, --replace": "binutils-2.47",
}


def _case(cases: dict[str, Case], name: str) -> Case:
    """The case ``name``; the test stops (conftest.require) when this machine cannot make it."""
    if name not in cases:
        require(CASE_NEEDS.get(name, name), f"{name}: not available on this machine")
    return cases[name]


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("name", CASE_NAMES)
def test_injected_file_survives(
    cases: dict[str, Case],
    name: str,
    tool: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = _case(cases, name)
    injected, processed = tmp_path / "injected", tmp_path / "processed"
    command = _tool_command(tool, injected, processed)
    args = ["generate", str(case.path), "--inject", "-o", str(injected)]
    assert main(args + (["--replace"] if case.replace else [])) == 0
    capsys.readouterr()
    expected = case.run(case.path)
    assert case.run(injected) == expected
    subprocess.run(command, check=True, capture_output=True)
    assert case.run(processed) == expected
    assert _sframe_text(processed) == _sframe_text(injected)
    assert _check_errors(processed, capsys) == ""
    assert _notes(processed) == _notes(injected) == _notes(case.path)


def _notes(path: Path) -> str:
    """The notes as readelf prints them (moved notes must still be found and read)."""
    return subprocess.run(
        ["readelf", "-n", str(path)], capture_output=True, text=True, check=True
    ).stdout


def _section_map(path: Path) -> dict[str, tuple[int, bytes]]:
    with ElfReader.open(str(path)) as image:
        return {s.name: (s.address, s.data()) for s in image.sections() if s.name}


def test_moved_sections_are_pointed_at_again(cases: dict[str, Case], tmp_path: Path) -> None:
    """The shared library's table grows over its build-id note and .gnu.hash: both move to
    the new segment, same bytes, same place in the page, and PT_NOTE and DT_GNU_HASH follow."""
    library = cases["shared library"].path
    out = tmp_path / "lib.so"
    assert main(["generate", str(library), "--inject", "-o", str(out)]) == 0
    before, after = _section_map(library), _section_map(out)
    with ElfReader.open(str(library)) as image:
        old_phoff = image.header.phoff
    with ElfReader.open(str(out)) as image:
        assert image.header.phoff == old_phoff
        segments = image.segments()
        new_load = max((s for s in segments if s.type == PT_LOAD), key=lambda s: s.vaddr)
        dynamic = image.segment_data(next(s for s in segments if s.type == PT_DYNAMIC))
        note = next(s for s in segments if s.type == PT_NOTE)
    for name in (".note.gnu.build-id", ".gnu.hash"):
        address, data = after[name]
        assert address != before[name][0] and data == before[name][1]
        assert new_load.vaddr <= address < new_load.vaddr + new_load.memsz
        assert address % 4096 == before[name][0] % 4096
    assert note.vaddr == after[".note.gnu.build-id"][0]
    entries = dict(dyn64_struct(False).iter_unpack(dynamic[: len(dynamic) // 16 * 16]))
    assert entries[DT_GNU_HASH] == after[".gnu.hash"][0]
    assert entries[DT_SYMTAB] == after[".dynsym"][0]
    assert entries[DT_STRTAB] == after[".dynstr"][0]


def _tight(e_type: int, base: int) -> bytes:
    """One PT_LOAD holding the ELF header, a one-entry program header table and, right after
    it, 256 bytes of code (nothing that can move)."""
    text = Sec(".text", SHT_PROGBITS, b"\xc3" * 256, flags=0x6, addr=base + 120, align=1)
    load = Seg(PT_LOAD, flags=5, extra={"offset": 0, "vaddr": base, "filesz": 376, "memsz": 376})
    return build_elf([text], e_type=e_type, segments=[load], entry=base + 120)


def test_position_independent_file_without_room_is_refused(tmp_path: Path) -> None:
    data = _tight(ET_DYN, 0)
    with pytest.raises(ElfError, match=r"cannot be added safely: .*section \.text follows it"):
        plan_injection(data)
    # A section generated for it (shown, not injected) still gets an address above it.
    (tmp_path / "tight").write_bytes(data)
    with ElfReader.open(str(tmp_path / "tight")) as image:
        assert new_section_address(image) == 0x1000


def test_fixed_address_executable_without_room_is_lowered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same layout at a fixed address: the first segment starts a page lower, the table
    grows at e_phoff, and the code keeps its address at an offset one page later."""
    data = _tight(ET_EXEC, 0x400000)
    plan = plan_injection(data)
    assert plan.file_shift == 4096 and plan.moved is None
    path, out = tmp_path / "tight", tmp_path / "tight.sf"
    path.write_bytes(data)
    assert main(["generate", str(path), "--inject", "-o", str(out)]) == 0
    with ElfReader.open(str(out)) as image:
        first = image.load_segments()[0]
        assert (first.offset, first.vaddr, first.filesz) == (0, 0x3FF000, 376 + 4096)
        assert image.header.phoff == 64 and image.header.phnum == 3
        text = next(s for s in image.sections() if s.name == ".text")
        assert (text.address, text.offset) == (0x400000 + 120, 4096 + 120)
        assert text.data() == b"\xc3" * 256
    capsys.readouterr()
    assert main(["check", str(out)]) == 0


#: What elfutils 0.188's eu-elflint says of any SFrame file: it predates the format.
_ELFLINT_UNKNOWN = ("0x6474e554", "unsupported type 1879048180", "No errors")


def _elflint(path: Path) -> list[str]:
    done = subprocess.run(
        ["eu-elflint", "--gnu-ld", str(path)], capture_output=True, text=True, check=False
    )
    lines = (done.stdout + done.stderr).splitlines()
    return [line for line in lines if line and not any(u in line for u in _ELFLINT_UNKNOWN)]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_injected_file_adds_no_elflint_error(
    cases: dict[str, Case], name: str, tmp_path: Path
) -> None:
    """eu-elflint finds nothing in the injected file that it did not find in the original
    (besides the SFrame types it does not know)."""
    require_program("eu-elflint", "elfutils")
    case = _case(cases, name)
    injected = tmp_path / "injected"
    args = ["generate", str(case.path), "--inject", "-o", str(injected)]
    assert main(args + (["--replace"] if case.replace else [])) == 0
    before = _elflint(case.path)
    assert [line for line in _elflint(injected) if line not in before] == []


@pytest.mark.parametrize(
    "tool", ["aarch64-linux-gnu-strip", "aarch64-linux-gnu-objcopy", "eu-strip"]
)
def test_lowered_aarch64_static_program_survives(tool: str, tmp_path: Path) -> None:
    """A static AArch64 program has no room after its program header table (its .rela.plt
    cannot move), so its first segment is lowered by a 64 KiB page.  Its glibc reads the
    program headers through __ehdr_start, the old first address: the original headers stay
    there, in a section that strip and objcopy keep."""
    needed = ["aarch64-linux-gnu-gcc", "qemu-aarch64", tool.split()[0]]
    for name in needed:
        require_program(name)
    try:
        ARCHES["aarch64"].check_libc_dev()
    except Unavailable as why:
        unavailable(why)
    program = tmp_path / "hello"
    (tmp_path / "hello.c").write_text(HELLO)
    subprocess.run(
        ["aarch64-linux-gnu-gcc", "-O2", "-static", "-o", str(program), str(tmp_path / "hello.c")],
        check=True,
    )

    def run(path: Path) -> tuple[int, str]:
        done = subprocess.run(
            ["qemu-aarch64", str(path), "20"], capture_output=True, text=True, timeout=60
        )
        return done.returncode, done.stdout

    injected, processed = tmp_path / "injected", tmp_path / "processed"
    assert main(["generate", str(program), "--inject", "-o", str(injected)]) == 0
    with ElfReader.open(str(injected)) as image:
        kept = image.section(".pysframe.ehdr")
        assert kept is not None and kept.data()[:4] == b"\x7fELF"
        assert image.load_segments()[0].vaddr == 0x400000 - 0x10000
    if tool.endswith("objcopy"):
        subprocess.run([tool, str(injected), str(processed)], check=True)
    else:
        subprocess.run([tool, "-o", str(processed), str(injected)], check=True)
    assert run(processed) == run(injected) == run(program) == (3, "fib(20) = 6765\n")
