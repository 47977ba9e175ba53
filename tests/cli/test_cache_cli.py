"""The cache of generated SFrame through ``pysframe perf``, as the issue's attacker uses it: a
cache directory is a place other processes may write to (a shared ``XDG_CACHE_HOME``, a CI
cache, a container volume).

* Entry names that are symbolic links to the user's files: the files stay as they were (they
  were overwritten with SFrame bytes or JSON).
* Entry names that are FIFOs: no wait (``perf report`` hung), the run is bounded by a timeout.
* A directory writable by its group or others, owned by another user, or a symbolic link: not
  used, one warning line says so.
* A directory that does not exist is made with mode 0700, its missing parents too.
* A poisoned entry -- the program's own entry put under libc's build ID, the issue's example,
  which made ``perf report --format folded`` drop ``_start;__libc_start_main`` from every stack
  without a word -- is a miss: one warning line names it, and the profile is the one made
  without a cache.

Each run is ``python -m pysframe`` in a process of its own (a fresh process reads the cache
from the disk), checked for its exit status, its stdout against the same command without a
cache, every stderr line, and that no file changed but the cache's own.  The recordings are
hand-made (one sample in a corpus program, tests/support/perf_support.py), except the poisoned one,
which needs a real program, libc and perf.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import pysframe
from conftest import CORPUS, require, unavailable
from perf_support import Unavailable, build_program, one_sample_recording, record
from pysframe.elf.reader import ElfReader

PROGRAM = CORPUS / "x86_64" / "v3" / "frames"
#: big_frame+4 (nm: big_frame at 0x1270), in the executable segment at file offset 0x1000.
PC = 0x1274
TEXT = (0x1000, 0x1000, 0x1E09)
#: What the cache's warnings say after an entry's name (tests spell it out on purpose).
GENERATED_AGAIN = "SFrame is generated again"
CHECKED_AGAIN = "checked again"
MADE_AGAIN = "made again"
#: How long a run may take before it counts as hung.
TIMEOUT = 60


@dataclass(frozen=True, slots=True)
class Run:
    code: int
    out: str
    err: list[str]


def pysframe_run(arguments: list[str], cache: Path | str) -> Run:
    """``python -m pysframe ARGUMENTS`` with the cache in ``cache`` ("": none), bounded."""
    sources = [str(Path(pysframe.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYSFRAME_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(sources))
    done = subprocess.run(
        [sys.executable, "-m", "pysframe", *arguments], capture_output=True, text=True,
        env=env, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    return Run(done.returncode, done.stdout, done.stderr.splitlines())


def folder(base: Path) -> Path:
    """The folder of this pysframe's entries under ``base`` (generated-DIGEST)."""
    env = dict(os.environ, PYSFRAME_CACHE_DIR=str(base))
    done = subprocess.run(
        [sys.executable, "-c", "from pysframe.sources.cache import cache_directory as d; "
         "print(d())"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return Path(done.stdout.strip())


def files_under(top: Path, *, skip: Path | None = None) -> dict[str, tuple[int, str]]:
    """Every file under ``top`` (links not followed; ``skip`` left out): its mode and the
    SHA-256 of its bytes (of its target's name for a link)."""
    found = {}
    for root, directories, names in os.walk(top):
        if skip is not None and Path(root).is_relative_to(skip):
            continue
        for name in [*names, *directories]:
            path = Path(root) / name
            info = path.lstat()
            if stat.S_ISDIR(info.st_mode):
                continue
            if stat.S_ISLNK(info.st_mode):
                content = os.readlink(path).encode()
            elif stat.S_ISREG(info.st_mode):
                content = path.read_bytes()
            else:
                content = b""
            found[str(path.relative_to(top))] = (info.st_mode, hashlib.sha256(content).hexdigest())
    return found


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One sample in PROGRAM, whose SFrame (its own and one generated from its CFI) the cache
    keeps."""
    with ElfReader.open(str(PROGRAM)) as image:
        build_id = image.build_id()
    assert build_id is not None
    path = tmp_path_factory.mktemp("recording") / "perf.data"
    path.write_bytes(one_sample_recording(PROGRAM, build_id, TEXT, PC))
    return path


#: The commands run on the recording: SFrame generated for PROGRAM (a .sframe entry and its
#: .checked verdict), then its own section checked (a .trusted verdict).
COMMANDS = (["perf", "script", "--sframe", "generated"], ["perf", "script"])


@pytest.fixture(scope="module")
def expected(recording: Path) -> list[str]:
    """Each command's output without a cache."""
    outputs = []
    for command in COMMANDS:
        alone = pysframe_run([*command, str(recording)], "")
        assert alone.code == 0 and alone.err == [] and "big_frame+0x4" in alone.out, alone
        outputs.append(alone.out)
    return outputs


@pytest.fixture(scope="module")
def entry_names(recording: Path, expected: list[str], tmp_path_factory: pytest.TempPathFactory
                ) -> list[str]:  # fmt: skip
    """The names the commands give their entries, learnt from a run in a cache of their own."""
    base = tmp_path_factory.mktemp("learn")
    for command, output in zip(COMMANDS, expected, strict=True):
        run = pysframe_run([*command, str(recording)], base)
        assert run.code == 0 and run.out == output and run.err == [], run
    names = sorted(os.listdir(folder(base)))
    kinds = sorted(name.rsplit(".", 1)[1] for name in names)
    assert kinds == ["addr2line", "checked", "perf-symbols", "sframe", "trusted"]
    return names


def _why_then(name: str) -> str:
    if name.endswith((".perf-symbols", ".addr2line")):
        return MADE_AGAIN
    return GENERATED_AGAIN if name.endswith(".sframe") else CHECKED_AGAIN


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO"])
def test_entry_names_that_are_no_files(
    kind: str, recording: Path, expected: list[str], entry_names: list[str], tmp_path: Path
) -> None:
    cache = folder(tmp_path / "cache")
    cache.mkdir(parents=True, mode=0o700)
    victims = tmp_path / "victims"
    victims.mkdir()
    for name in entry_names:
        if kind == "symbolic link":
            victim = victims / name
            victim.write_text(f"the user's own {name}\n")
            (cache / name).symlink_to(victim)
        else:
            os.mkfifo(cache / name)
    before = files_under(tmp_path, skip=cache)
    recorded = files_under(recording.parent)
    why = "a symbolic link, not followed" if kind == "symbolic link" else (
        "a FIFO, not a regular file"
    )  # fmt: skip
    warned = []
    for command, output in zip(COMMANDS, expected, strict=True):
        try:
            run = pysframe_run([*command, str(recording)], tmp_path / "cache")
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command} on a cache of FIFOs did not end in {TIMEOUT} s")
        assert run.code == 0 and run.out == output, run
        warned += run.err
    assert files_under(tmp_path, skip=cache) == before  # the victims as they were
    assert files_under(recording.parent) == recorded
    # One line per entry, as each command meets it: the section and its verdict, the
    # program's symbol table and addr2line's answers, then the verdict on its own section.
    order = {"sframe": 0, "checked": 1, "perf-symbols": 2, "addr2line": 3, "trusted": 4}
    assert warned == [
        f"pysframe: warning: {cache / name}: cache entry not used: {why}; {_why_then(name)}"
        for name in sorted(entry_names, key=lambda n: order[n.rsplit(".", 1)[1]])
    ], warned
    for name in entry_names:  # each name now an entry of the cache's own
        assert stat.S_ISREG((cache / name).lstat().st_mode)


#: Directories the cache must not use: how each is made, what the warning says of it.
UNTRUSTED = {
    "group-writable": (0o770, None, "writable by its group (mode 0770)"),
    "writable by others": (0o1777, None, "writable by others (mode 1777)"),
    "foreign-owned": (0o700, 65534, "owned by another user (uid 65534)"),
}


@pytest.mark.parametrize("kind", [*UNTRUSTED, "symbolic link"])
def test_an_untrusted_cache_directory_is_not_used(
    kind: str, recording: Path, expected: list[str], tmp_path: Path
) -> None:
    cache = folder(tmp_path / "cache")
    if kind == "symbolic link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        cache.parent.mkdir()
        cache.symlink_to(elsewhere)
        why = "a symbolic link"
    else:
        mode, owner, why = UNTRUSTED[kind]
        if owner is not None and os.geteuid() != 0:
            require("root", "giving a directory to another user needs root")
        cache.mkdir(parents=True)
        cache.chmod(mode)
        if owner is not None:
            os.chown(cache, owner, owner)
    before = files_under(tmp_path)
    run = pysframe_run([*COMMANDS[0], str(recording)], tmp_path / "cache")
    assert run.code == 0 and run.out == expected[0], run
    assert files_under(tmp_path) == before  # nothing written there
    assert run.err == [
        f"pysframe: warning: {cache}: not used as the cache of generated SFrame: {why}"
    ], run.err


def test_the_cache_directory_is_made_0700(
    recording: Path, expected: list[str], tmp_path: Path
) -> None:
    base = tmp_path / "new" / "cache"
    run = pysframe_run([*COMMANDS[0], str(recording)], base)
    assert run.code == 0 and run.out == expected[0] and run.err == [], run
    cache = folder(base)
    for made in (tmp_path / "new", base, cache):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
    assert {stat.S_IMODE(entry.stat().st_mode) for entry in cache.iterdir()} == {0o600}


# -- the poisoned entry ---------------------------------------------------------------


@pytest.fixture(scope="module")
def program_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A recording of tests/data/perf/perfprog.c (gcc, no SFrame of its own: every module's
    is generated and cached), and the libc it ran with."""
    out = tmp_path_factory.mktemp("poisoned")
    try:
        program = build_program(out, "perfprog")
        recorded = record(out / "perf.data", [str(program), "1"],
                          options=("-e", "cpu-clock", "-c", "100000", "--call-graph",
                                   "dwarf,4096"))  # fmt: skip
    except Unavailable as why:
        unavailable(why)
    ldd = subprocess.run(["ldd", str(program)], capture_output=True, text=True, check=False)
    libc = next(
        (line.split("=>")[1].split("(")[0].strip() for line in ldd.stdout.splitlines()
         if line.strip().startswith("libc.so")),
        None,
    )  # fmt: skip
    if libc is None:
        require("ldd", f"ldd does not name the libc of the program: {ldd.stdout[:200]}")
    return recorded, Path(os.path.realpath(libc))


def _build_id_hex(path: Path) -> str:
    with ElfReader.open(str(path)) as image:
        build_id = image.build_id()
    assert build_id is not None
    return build_id.hex()


def test_a_poisoned_entry_is_a_miss(program_recording: tuple[Path, Path], tmp_path: Path) -> None:
    recorded, libc = program_recording
    program = recorded.parent / "perfprog"
    command = ["perf", "report", "--format", "folded", str(recorded)]
    alone = pysframe_run(command, "")
    assert alone.code == 0 and alone.err == [], alone
    assert "perfprog;_start;__libc_start_main" in alone.out  # what the poison took away
    base = tmp_path / "cache"
    filled = pysframe_run(command, base)
    assert filled.code == 0 and filled.out == alone.out and filled.err == [], filled
    cache = folder(base)
    own, libc_id = _build_id_hex(program), _build_id_hex(libc)
    (program_entry,) = cache.glob(f"{own}.*.sframe")
    (libc_entry,) = cache.glob(f"{libc_id}.*.sframe")
    # The program's entry under libc's build ID, at the program's address (renamed as it is).
    libc_entry.unlink()
    planted = cache / program_entry.name.replace(own, libc_id)
    shutil.copy(program_entry, planted)
    others = files_under(tmp_path, skip=base)
    poisoned = pysframe_run(command, base)
    assert poisoned.code == 0 and poisoned.out == alone.out, poisoned.err
    (warning,) = poisoned.err
    assert warning.startswith(f"pysframe: warning: {planted}: cache entry not used: ")
    assert warning.endswith(GENERATED_AGAIN)
    assert files_under(tmp_path, skip=base) == others
    # The entry made again in its place is used from now on, without a word.
    again = pysframe_run(command, base)
    assert again.code == 0 and again.out == alone.out and again.err == [], again
