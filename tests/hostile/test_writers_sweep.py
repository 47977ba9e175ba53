"""The commands that write files -- ``compact``, ``repair`` and ``generate`` (a bare section, or
a copy of the program carrying it) -- over good and damaged inputs, and onto outputs that must
not or cannot be written.

After every run: exit 0 or 1; every stderr line a ``pysframe: ...`` line, one error line on
failure and none on success, never an internal error; the input byte for byte as it was, with
its mode and modification time; nothing in the input's and the output's directories but the
input and the output (no temporary file); on failure no output (an existing one as it was, an
``--in-place`` input as it was); on success an output that ``pysframe check`` reads without an
error finding the input has not (a damaged input may keep its own), which runs as the input
runs (the programs of this machine).

Inputs: corpus programs, shared objects and an object (x86_64 SFrame V1 to V3, AArch64,
s390x), a program without SFrame (gcc), one linked by LLVM lld with its objects' SFrame
sections concatenated (as tests/elf/test_repair.py builds it), and damaged copies (the damages of
tests/hostile/test_damaged_sweep.py, a fixed-seed sample) of a position-independent program with
SFrame, of one at a fixed address, and of one without SFrame.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import shutil
import stat
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import pysframe
from conftest import CORPUS, require
from pysframe.cli import main
from pysframe.elf.inject import new_section_address
from pysframe.elf.reader import ElfReader
from test_damaged_sweep import _damaged
from test_repair import HELPERS, MAIN, WALK, _link, _system_objects

#: Every writer, FILE the input and OUT the output (its name ends in .sframe for a bare section).
WRITERS = {
    "compact -o": ["compact", "FILE", "-o", "OUT"],
    "compact --in-place": ["compact", "FILE", "--in-place"],
    "compact --dry-run": ["compact", "FILE", "--dry-run"],
    "repair -o": ["repair", "FILE", "-o", "OUT"],
    "repair --in-place": ["repair", "FILE", "--in-place"],
    "repair --dry-run": ["repair", "FILE", "--dry-run"],
    "generate --inject": ["generate", "FILE", "--inject", "-o", "OUT"],
    "generate --inject --replace": ["generate", "FILE", "--inject", "--replace", "-o", "OUT"],
    "generate -o": ["generate", "FILE", "-o", "OUT"],
    "generate --inject --compact": ["generate", "FILE", "--inject", "--compact", "-o", "OUT"],
}
#: The writers that take -o: the output's name is checked against the input's, and its place.
TO_OUTPUT = ["compact -o", "repair -o", "generate --inject --replace", "generate -o"]
#: What an existing output holds before a run (it must hold it still after a failed one).
PREVIOUS = b"the previous output\n"
#: The error findings of the bare section generated for a relocatable object: its functions
#: start at their addresses in their own unlinked code sections, each at address 0 (generate
#: warns that it cannot be linked), so they overlap and tie for the sorted order.
UNLINKED = {"fde-overlap", "fde-sorted"}
#: The modification time the inputs are given (a rewrite in the same second would show).
OLD_TIME = 1_000_000_000 * 10**9
#: Damaged copies run per damaged program (of some 300 each), chosen with this seed.
DAMAGES_PER_PROGRAM = 14
SEED = 20260726

NATIVE = platform.machine() == "x86_64"
APP = CORPUS / "x86_64/v3/app"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What must not change in an input: its bytes, permissions and modification time."""

    digest: str
    mode: int
    mtime: int


def snapshot(path: Path) -> Snapshot:
    info = path.stat()
    return Snapshot(hashlib.sha256(path.read_bytes()).hexdigest(), info.st_mode, info.st_mtime_ns)


#: How a program behaves: its exit status and output (None: it does not run).
Behaviour = tuple[int, bytes] | None


def behaviour(path: Path) -> Behaviour:
    try:
        done = subprocess.run([str(path)], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode, done.stdout


def error_lines(code: int, err: str) -> list[str]:
    """What is wrong with a run's exit status and stderr: exit 0 or 1, every line pysframe's,
    no internal error, one error line on failure and none on success (warnings and notes
    aside)."""
    problems = [] if code in (0, 1) else [f"exit {code}"]
    lines = err.splitlines()
    if "internal error" in err or "Traceback" in err:
        problems.append(f"internal error: {err[-300:]!r}")
    if any(not line.startswith("pysframe: ") for line in lines):
        problems.append(f"lines not from pysframe: {lines[:3]}")
    failing = [
        line
        for line in lines
        if not line.startswith("pysframe: warning: ") and ": note: " not in line
    ]
    if len(failing) != (1 if code else 0):
        problems.append(f"exit {code} with error lines {failing[:3]}")
    return problems


def check_errors(
    path: Path, capsys: pytest.CaptureFixture[str], address: int | None = None
) -> set[str] | None:
    """The rules of the error findings ``pysframe check`` reports on ``path`` (a bare section
    for ``address`` when it is given); None when it cannot read the file (or finds no SFrame
    section in it)."""
    raw = [] if address is None else ["--raw", "--address", hex(address)]
    main(["check", "--json", "--errors-only", *raw, str(path)])
    report = json.loads(capsys.readouterr().out)["files"][0]
    if report["status"] == "unreadable":
        return None
    return {finding["rule"] for finding in report["findings"]}


def bare_address(path: Path) -> int:
    """The address ``generate -o`` writes the section of ``path`` for: where ``--inject`` would
    put it (0 in an object)."""
    with ElfReader.open(str(path)) as image:
        return 0 if image.is_relocatable else new_section_address(image)


def writer_argv(name: str, source: Path, out: str) -> list[str]:
    """The arguments of the writer ``name`` on ``source``, writing to ``out``."""
    return [str(source) if w == "FILE" else out if w == "OUT" else w for w in WRITERS[name]]


@dataclass(frozen=True, slots=True)
class Input:
    """An input of the sweep, and what the outputs made from it are held to."""

    label: str
    data: bytes
    #: How the input runs (None: not run here).
    runs: Behaviour
    #: Its own error findings (None: check cannot read it).
    errors: set[str] | None
    relocatable: bool = False


def prepare(label: str, data: bytes, folder: Path, runnable: bool,
            capsys: pytest.CaptureFixture[str]) -> Input:  # fmt: skip
    """An input's behaviour and findings, found on a copy of ``data``."""
    probe = folder / "probe"
    probe.write_bytes(data)
    probe.chmod(0o755)
    runs = behaviour(probe) if runnable else None
    errors = check_errors(probe, capsys)
    relocatable = data[16:18] == b"\x01\x00"  # e_type ET_REL (little-endian inputs only)
    probe.unlink()
    return Input(label, data, runs, errors, relocatable)


def run_writer(
    given: Input, name: str, folder: Path, existing: bool, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str]]:
    """Run the writer ``name`` on ``given`` (with an output already there when ``existing``):
    its exit status, and what went wrong, in words."""
    case = folder / "case"
    shutil.rmtree(case, ignore_errors=True)
    in_dir, out_dir = case / "in", case / "out"
    in_dir.mkdir(parents=True)
    out_dir.mkdir()
    source = in_dir / "prog"
    source.write_bytes(given.data)
    source.chmod(0o755)
    os.utime(source, ns=(OLD_TIME, OLD_TIME))
    before = snapshot(source)
    command = WRITERS[name]
    out = out_dir / ("out.sframe" if name == "generate -o" else "out")
    existing = existing and "OUT" in command
    if existing:
        out.write_bytes(PREVIOUS)
        out.chmod(0o700)
    code = main(writer_argv(name, source, str(out)))
    problems = error_lines(code, capsys.readouterr().err)
    in_place = "--in-place" in command
    rewritten = in_place and code == 0
    after = snapshot(source)
    if not rewritten and after != before:
        problems.append("the input changed")
    if rewritten and after.mode != before.mode:
        problems.append(f"the input's mode became {after.mode:o}")
    if sorted(os.listdir(in_dir)) != ["prog"]:
        problems.append(f"left beside the input: {sorted(os.listdir(in_dir))}")
    written = code == 0 and "OUT" in command
    left = sorted(os.listdir(out_dir))
    if left != ([out.name] if written or existing else []):
        problems.append(f"left in the output's directory: {left}")
    if existing and not written and out.read_bytes() != PREVIOUS:
        problems.append("the existing output changed")
    bare = name == "generate -o"
    if written and not bare:
        mode = stat.S_IMODE(out.stat().st_mode)
        if mode != (0o700 if existing else 0o755):
            problems.append(f"the output's mode is {mode:o}")
    target = out if written else source if rewritten else None
    if target is not None:
        errors = check_errors(target, capsys, bare_address(source) if bare else None)
        allowed = (given.errors or set()) | (UNLINKED if given.relocatable else set())
        if errors is None:
            problems.append("check cannot read the output")
        elif errors - allowed:
            problems.append(f"the output has new error findings {errors - allowed}")
        if given.runs is not None and not bare and behaviour(target) != given.runs:
            problems.append(f"the output runs as {behaviour(target)}, the input as {given.runs}")
    return code, [f"{given.label}: {name}: {problem}" for problem in problems]


def sweep(
    inputs: list[Input], folder: Path, capsys: pytest.CaptureFixture[str]
) -> list[dict[str, int]]:
    """Every writer on every input, half of the runs onto an existing output; asserts that
    none went wrong, and returns each input's exit statuses by writer."""
    problems: list[str] = []
    statuses = []
    for number, given in enumerate(inputs):
        codes = {}
        for index, name in enumerate(WRITERS):
            codes[name], found = run_writer(given, name, folder, (number + index) % 2 == 1, capsys)
            problems += found
        statuses.append(codes)
    assert not problems, "\n".join(problems[:30]) + f"\n({len(problems)} problems)"
    return statuses


# -- good and damaged inputs ----------------------------------------------------------------------


def compiled(factory: pytest.TempPathFactory, name: str, *options: str) -> Path:
    """tests/elf/test_repair.py's program, built by gcc with ``options``: without SFrame (gcc 12
    and gas 2.40 write none unless asked)."""
    if shutil.which("gcc") is None:
        require("gcc", "gcc is not installed")
    folder = factory.mktemp(name)
    (folder / "all.c").write_text(MAIN + HELPERS + WALK)
    program = folder / name
    subprocess.run(["gcc", "-O1", *options, "-o", str(program), str(folder / "all.c")], check=True)
    return program


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A position-independent program without SFrame."""
    return compiled(tmp_path_factory, "plain")


@pytest.fixture(scope="module")
def concatenated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A program linked by lld from three objects of gas 2.40: three SFrame V1 sections back to
    back."""
    folder = tmp_path_factory.mktemp("lld")
    objects = _system_objects(folder, {"main.c": MAIN, "helpers.c": HELPERS, "walk.c": WALK})
    return _link(folder, objects, None)[0]


#: What each writer does with a kind of good input: 0 writes (or, dry, would), 1 refuses.
LINKED = {name: 0 for name in WRITERS} | {"generate --inject": 1, "generate --inject --compact": 1}
KINDS = {
    # An SFrame section of its own: --inject without --replace is refused.
    "linked": LINKED,
    # compact refuses several sections back to back (repair merges them).
    "concatenated": LINKED | {name: 1 for name in WRITERS if name.startswith("compact")},
    # No SFrame section: nothing to compact or repair; generate adds one.
    "without": {name: int(not name.startswith("generate")) for name in WRITERS},
    # A relocatable object: only the bare section can be generated.
    "object": {name: int(name != "generate -o") for name in WRITERS},
}
#: Good inputs: the file (or fixture), its kind, whether it runs here.
GOOD: dict[str, tuple[Path | str, str, bool]] = {
    "x86_64 V3 app": (APP, "linked", NATIVE),
    "x86_64 V2 frames": (CORPUS / "x86_64/v2/frames", "linked", NATIVE),
    "x86_64 V1 lib.so": (CORPUS / "x86_64/v1/lib.so", "linked", False),
    "x86_64 V3 frames-nopie": (CORPUS / "x86_64/v3/frames-nopie", "linked", NATIVE),
    "aarch64 V3 frames": (CORPUS / "aarch64/v3/frames", "linked", False),
    "s390x V3 frames-nopie": (CORPUS / "s390x/v3/frames-nopie", "linked", False),
    "x86_64 V3 app.o": (CORPUS / "x86_64/v3/app.o", "object", False),
    "gcc without SFrame": ("plain", "without", NATIVE),
    "lld concatenated": ("concatenated", "concatenated", NATIVE),
}


@pytest.mark.parametrize("name", list(GOOD))
def test_writers_on_good_inputs(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where, kind, runnable = GOOD[name]
    path = request.getfixturevalue(where) if isinstance(where, str) else where
    given = prepare(name, path.read_bytes(), tmp_path, runnable, capsys)
    if runnable:
        assert given.runs is not None and given.runs[1], "the input does not run"
    (statuses,) = sweep([given], tmp_path, capsys)
    assert statuses == KINDS[kind]


#: Damaged programs: a position-independent one with SFrame, one at a fixed address, and one
#: without SFrame (generate --inject without --replace writes it).
DAMAGED: dict[str, Path | str] = {
    "app": APP,
    "frames-nopie": CORPUS / "x86_64/v3/frames-nopie",
    "plain": "plain",
}


@pytest.mark.parametrize("name", list(DAMAGED))
def test_writers_on_damaged_copies(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = DAMAGED[name]
    path = request.getfixturevalue(where) if isinstance(where, str) else where
    damages = list(_damaged(path))
    chosen = random.Random(SEED).sample(damages, DAMAGES_PER_PROGRAM)
    inputs = [prepare(label, data, tmp_path, NATIVE, capsys) for label, data in chosen]
    statuses = sweep(inputs, tmp_path, capsys)
    codes = [code for by_writer in statuses for code in by_writer.values()]
    assert len(damages) > 250 and codes.count(0) > 20 and codes.count(1) > 20


# -- outputs that must not or cannot be written ---------------------------------------------------


@pytest.fixture()
def program(tmp_path: Path) -> Path:
    """A copy of the corpus' V3 program, alone in its directory, with an old time."""
    source = tmp_path / "in" / "app"
    source.parent.mkdir()
    shutil.copy(APP, source)
    os.utime(source, ns=(OLD_TIME, OLD_TIME))
    return source


@pytest.mark.parametrize("alias", ["same name", "symbolic link", "hard link"])
def test_output_naming_the_input_is_refused(
    alias: str, program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = program
    if alias == "symbolic link":
        target = program.with_name("alias")
        target.symlink_to(program)
    elif alias == "hard link":
        target = program.with_name("other-name")
        os.link(program, target)
    listing = sorted(os.listdir(program.parent))
    before = snapshot(program)
    for name in TO_OUTPUT:
        code = main(writer_argv(name, program, str(target)))
        err = capsys.readouterr().err
        assert code == 1 and not error_lines(code, err), (name, err)
        assert f"pysframe: {target}: is the input file; refusing to write over it" in err, name
        assert snapshot(program) == before and sorted(os.listdir(program.parent)) == listing


def test_output_that_is_a_directory_is_refused(
    program: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "out"
    directory.mkdir()
    before = snapshot(program)
    for name in TO_OUTPUT:
        code = main(writer_argv(name, program, str(directory)))
        err = capsys.readouterr().err
        assert code == 1 and not error_lines(code, err), (name, err)
        assert f"pysframe: {directory}: not a regular file; refusing to replace it" in err, name
        assert os.listdir(directory) == [] and snapshot(program) == before
    assert sorted(os.listdir(tmp_path)) == ["in", "out"]


def test_output_to_dev_null(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(program)
    for name in TO_OUTPUT:
        code = main(writer_argv(name, program, os.devnull))
        err = capsys.readouterr().err
        assert code == 0 and not error_lines(code, err), (name, err)
    assert os.path.exists(os.devnull) and not stat.S_ISREG(os.stat(os.devnull).st_mode)
    assert [n for n in os.listdir("/dev") if n.endswith(".tmp")] == []
    assert snapshot(program) == before and os.listdir(program.parent) == ["app"]


def test_output_to_a_full_device(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # /dev/full: every write fails with ENOSPC.  The bare section is small enough to wait in
    # the write buffer, so closing the file fails again: the error still names the output.
    if not os.path.exists("/dev/full"):
        require("/dev/full", "no /dev/full")
    for name in TO_OUTPUT:
        code = main(writer_argv(name, program, "/dev/full"))
        err = capsys.readouterr().err
        assert code == 1 and not error_lines(code, err), (name, err)
        assert err == "pysframe: /dev/full: No space left on device\n", name


def test_standard_output_to_a_full_device(program: Path) -> None:
    # "-o -" and the text commands write to standard output; when it is /dev/full the error
    # line names it (the write raises an OSError without a file name).
    if not os.path.exists("/dev/full"):
        require("/dev/full", "no /dev/full")
    for argv in (["compact", str(program), "-o", "-"], ["dump", str(program)]):
        with open("/dev/full", "wb") as full:
            done = subprocess.run(
                [sys.executable, "-m", "pysframe", *argv], stdout=full, stderr=subprocess.PIPE,
                text=True, check=False, timeout=120,
            )  # fmt: skip
        assert done.returncode == 1, (argv, done.stderr)
        assert done.stderr == "pysframe: standard output: No space left on device\n", argv


def test_output_where_no_file_can_be_made(
    program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # /proc/self holds only what the kernel makes: creating a file there fails (ENOENT).
    target = "/proc/self/pysframe-output"
    for name in TO_OUTPUT:
        code = main(writer_argv(name, program, target))
        err = capsys.readouterr().err
        assert code == 1 and not error_lines(code, err), (name, err)
        assert err.startswith(f"pysframe: {target}: "), (name, err)
    assert os.listdir(program.parent) == ["app"]


#: Runs writers in a child process, under a file size limit or in a mount namespace whose
#: mounts the test does not see: prints, for each command, its exit status, its stderr and the
#: files of the directory after it (name: SHA-256), as JSON.
CHILD = r"""
import contextlib, hashlib, io, json, os, resource, shutil, signal, sys
from pysframe.cli import main

plan = json.loads(sys.argv[1])
directory = plan["directory"]
if plan["setup"]:
    shutil.copy(plan["input"], os.path.join(directory, "prog"))
    with open(os.path.join(directory, "out"), "wb") as out:
        out.write(plan["previous"].encode())
if plan["file_size_limit"] is not None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    limit = plan["file_size_limit"]
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
results = []
for argv in plan["commands"]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(argv)
    files = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as stream:
            files[name] = hashlib.sha256(stream.read()).hexdigest()
    results.append({"code": code, "err": err.getvalue(), "files": files})
print(json.dumps(results))
"""


def mount_namespace() -> list[str]:
    """unshare(1) giving a command a mount namespace of its own, where it may mount (as root,
    or as a user mapped to root in a user namespace); skip when neither is allowed."""
    if shutil.which("unshare") is None:
        require("unshare", "no unshare(1) (util-linux)")
    for command in (["unshare", "--mount"], ["unshare", "--mount", "--map-root-user"]):
        if subprocess.run([*command, "true"], capture_output=True, check=False).returncode == 0:
            return command
    require("mount namespaces", "no mount namespace may be made here (root or user namespaces)")


def unwritable_runs(
    directory: Path, *, setup: bool, file_size_limit: int | None = None,
    mount: str | None = None,
) -> None:  # fmt: skip
    """Run every writer into ``directory`` (holding ``prog``, a copy of the V3 program, and
    ``out``, an existing output) in a child process, and assert that each fails with one
    line naming its output and leaves both files as they were.  ``setup``: the child puts the
    files there; ``mount``: a shell command run first, in a mount namespace of the child's."""
    prog, out = directory / "prog", str(directory / "out")
    commands = [writer_argv(name, prog, out) for name in TO_OUTPUT]
    commands += [writer_argv(name, prog, out) for name in WRITERS if "--in-place" in name]
    plan = {
        "directory": str(directory), "setup": setup, "input": str(APP),
        "previous": PREVIOUS.decode(), "file_size_limit": file_size_limit, "commands": commands,
    }  # fmt: skip
    child = [sys.executable, "-c", CHILD, json.dumps(plan)]
    if mount is not None:
        child = [*mount_namespace(), "sh", "-c", f'{mount} && exec "$@"', "sh", *child]
    # The child imports this pysframe.
    sources = [str(Path(pysframe.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sources))
    done = subprocess.run(child, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    expected = {
        "prog": hashlib.sha256(APP.read_bytes()).hexdigest(),
        "out": hashlib.sha256(PREVIOUS).hexdigest(),
    }
    for argv, result in zip(commands, json.loads(done.stdout), strict=True):
        code, err = result["code"], result["err"]
        assert code == 1 and not error_lines(code, err), (argv, err)
        named = prog if "--in-place" in argv else out
        assert err.startswith(f"pysframe: {named}: "), (argv, err)
        assert result["files"] == expected, (argv, result["files"])


def test_output_in_a_read_only_directory(tmp_path: Path) -> None:
    directory = tmp_path / "read-only"
    directory.mkdir()
    shutil.copy(APP, directory / "prog")
    (directory / "out").write_bytes(PREVIOUS)
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            unwritable_runs(directory, setup=False)
        finally:
            directory.chmod(0o755)
    else:
        # Root writes into a directory of mode 0555 all the same: the directory is bound over
        # itself read-only instead (EROFS), in the child's mount namespace.
        bind = f"mount --bind {directory} {directory} && mount -o remount,bind,ro {directory}"
        unwritable_runs(directory, setup=False, mount=bind)
    assert sorted(os.listdir(directory)) == ["out", "prog"]


def test_full_disk(tmp_path: Path) -> None:
    # A tmpfs of 8 pages: the copy of the program takes 7, the existing output 1 (ENOSPC).
    directory = tmp_path / "full"
    directory.mkdir()
    unwritable_runs(directory, setup=True, mount=f"mount -t tmpfs -o size=32k tmpfs {directory}")
    assert os.listdir(directory) == []  # the tmpfs was the child's alone


def test_file_size_limit(tmp_path: Path) -> None:
    # RLIMIT_FSIZE below every output's size, SIGXFSZ ignored: each write fails with EFBIG.
    directory = tmp_path / "limited"
    directory.mkdir()
    unwritable_runs(directory, setup=True, file_size_limit=512)
    assert sorted(os.listdir(directory)) == ["out", "prog"]


# -- what the sweep found -------------------------------------------------------------------------

#: Elf64_Ehdr e_shoff, e_shnum, e_shstrndx; Elf64_Shdr sh_type, sh_addr, sh_size; Elf64_Phdr
#: p_vaddr.
E_SHOFF, E_SHNUM, E_SHSTRNDX = 40, 60, 62
SH_TYPE, SH_ADDR, SH_SIZE, P_VADDR = 4, 16, 32, 16
SHT_NOBITS, PT_LOAD, PT_INTERP = 8, 1, 3


def damaged_copy(path: Path, folder: Path, patches: list[tuple[int, str, int]]) -> Path:
    """A copy of ``path`` in ``folder`` with each (offset, struct code, value) written."""
    data = bytearray(path.read_bytes())
    for offset, code, value in patches:
        struct.pack_into(code, data, offset, value)
    copy = folder / f"damaged-{path.name}"
    copy.write_bytes(data)
    copy.chmod(0o755)
    return copy


def section_header(path: Path, name: str) -> int:
    """The file offset of section ``name``'s header."""
    with ElfReader.open(str(path)) as image:
        (section,) = [s for s in image.sections() if s.name == name]
        return image.header.shoff + image.header.shentsize * section.index


def program_header(path: Path, kind: int) -> int:
    """The file offset of the first program header of type ``kind``."""
    with ElfReader.open(str(path)) as image:
        index = next(i for i, s in enumerate(image.segments()) if s.type == kind)
        return image.header.phoff + image.header.phentsize * index


def one_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert not error_lines(code, err), err
    return code, err


@pytest.fixture(scope="module")
def plain_at_fixed_address(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The program without SFrame, linked at a fixed address."""
    return compiled(tmp_path_factory, "no-pie", "-no-pie")


#: Section headers stripped (e_shoff 0, as sstrip leaves a file), or the null entry alone.
NO_SECTION_HEADERS = {
    "stripped": [(E_SHOFF, "<Q", 0), (E_SHNUM, "<H", 0), (E_SHSTRNDX, "<H", 0)],
    "null entry alone": [(E_SHNUM, "<H", 1), (E_SHSTRNDX, "<H", 0)],
}


@pytest.mark.parametrize("headers", list(NO_SECTION_HEADERS))
def test_injection_without_section_headers(
    headers: str, plain: Path, plain_at_fixed_address: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    # Nothing tells what follows the program header table (.interp, .gnu.hash, .dynsym...):
    # growing it in place wrote over PT_INTERP's path, and the program no longer ran.
    pie = damaged_copy(plain, tmp_path, NO_SECTION_HEADERS[headers])
    assert behaviour(pie) == behaviour(plain)
    code, err = one_run(["generate", str(pie), "--inject", "-o", str(tmp_path / "pie")], capsys)
    assert code == 1 and "the program header table cannot grow: no section headers" in err
    assert not (tmp_path / "pie").exists()
    # At a fixed address the first segment is lowered by a page instead.
    fixed = damaged_copy(plain_at_fixed_address, tmp_path, NO_SECTION_HEADERS[headers])
    out = tmp_path / "fixed"
    assert one_run(["generate", str(fixed), "--inject", "-o", str(out)], capsys)[0] == 0
    assert behaviour(out) == behaviour(plain_at_fixed_address) is not None
    assert check_errors(out, capsys) == set()


def test_injection_moves_a_segment_no_section_describes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # .interp's header says SHT_NOBITS: PT_INTERP alone says where the interpreter's path is,
    # and the grown table must not cover it.
    at = section_header(APP, ".interp") + SH_TYPE
    app = damaged_copy(APP, tmp_path, [(at, "<I", SHT_NOBITS)])
    out = tmp_path / "out"
    assert one_run(["generate", str(app), "--inject", "--replace", "-o", str(out)], capsys)[0] == 0
    assert behaviour(out) == behaviour(APP) is not None


def test_lowered_injection_keeps_e_shoff_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # e_shoff 0 says there is no section header table (gABI) whatever e_shnum says; lowering
    # the first segment moved it to 0 + a page, where the old ELF header was read as sections.
    nopie = CORPUS / "x86_64/v3/frames-nopie"
    damaged = damaged_copy(nopie, tmp_path, [(E_SHOFF, "<Q", 0)])
    out = tmp_path / "out"
    assert one_run(["generate", str(damaged), "--inject", "--replace", "-o", str(out)],
                   capsys)[0] == 0  # fmt: skip
    with ElfReader.open(str(out)) as image:
        assert image.header.shoff == 0 and image.sections() == []
    assert check_errors(out, capsys) == set()
    assert behaviour(out) == behaviour(nopie) is not None


def test_injection_refuses_a_name_table_without_the_names(
    plain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # .shstrtab of 0 bytes: ".sframe" appended at offset 0 named the null section, and at the
    # next offsets .symtab and others.
    at = section_header(plain, ".shstrtab") + SH_SIZE
    damaged = damaged_copy(plain, tmp_path, [(at, "<Q", 0)])
    out = tmp_path / "out"
    code, err = one_run(["generate", str(damaged), "--inject", "-o", str(out)], capsys)
    assert code == 1 and "the section-name table (0 bytes) does not hold every section's" in err
    assert not out.exists()


def test_the_null_section_header_alone_is_no_section_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # e_shnum 1: the reserved entry 0 only, so PT_GNU_SFRAME locates the section.
    damaged = damaged_copy(APP, tmp_path, NO_SECTION_HEADERS["null entry alone"])
    assert check_errors(damaged, capsys) == set()
    assert one_run(["compact", str(damaged), "--dry-run"], capsys)[0] == 0


def test_generate_leaves_out_functions_outside_the_code(
    plain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # .eh_frame's address 1 TiB off: its PC-relative pointers give functions where no code
    # is, which a reader checking the section (the kernel; rule fde-text) refuses it for.
    at = section_header(plain, ".eh_frame") + SH_ADDR
    damaged = damaged_copy(plain, tmp_path, [(at, "<Q", 1 << 40)])
    out = tmp_path / "out"
    argv = ["generate", str(damaged), "--inject", "-o", str(out), "--report"]
    assert one_run(argv, capsys)[0] == 0
    assert check_errors(out, capsys) == set()
    assert behaviour(out) == behaviour(plain)
    main(["generate", str(damaged), "--report"])
    assert "is outside every executable segment" in capsys.readouterr().out


#: A program header's p_vaddr at the last address.  PT_INTERP moves with the sections after
#: the program header table: its p_vaddr would pass 2**64 (an internal error before).  A
#: PT_LOAD ending past 2**64 leaves no address for the section: it was written for the page
#: above, which no 64-bit file has.
PAST_THE_END = {
    "PT_INTERP": (PT_INTERP, ["--inject", "--replace"], "does not fit an ELFCLASS64 field"),
    "PT_LOAD": (PT_LOAD, [], "no address is left above the file's segments for a new one"),
}


@pytest.mark.parametrize("segment", list(PAST_THE_END))
def test_addresses_past_the_address_space_are_refused(
    segment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kind, options, message = PAST_THE_END[segment]
    at = program_header(APP, kind) + P_VADDR
    damaged = damaged_copy(APP, tmp_path, [(at, "<Q", (1 << 64) - 1)])
    out = tmp_path / "out"
    code, err = one_run(["generate", str(damaged), *options, "-o", str(out)], capsys)
    assert code == 1 and message in err and not out.exists()


def test_injection_refuses_a_symbol_table_past_the_end_of_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # .symtab's sh_size 2**64 - 1: the symbols of the sections moved after the table are
    # patched where they are, and "symbols" read past the end of the file were the SFrame
    # data appended to it (FDE types 16 in the section written).
    at = section_header(APP, ".symtab") + SH_SIZE
    damaged = damaged_copy(APP, tmp_path, [(at, "<Q", (1 << 64) - 1)])
    out = tmp_path / "out"
    code, err = one_run(["generate", str(damaged), "--inject", "--replace", "-o", str(out)],
                        capsys)  # fmt: skip
    assert code == 1 and err == f"pysframe: {damaged}: .symtab: runs past the end of the file\n"
    assert not out.exists()
