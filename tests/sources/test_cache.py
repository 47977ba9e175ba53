"""SFrame generated for files without a section of their own is kept per build ID
(:mod:`pysframe.sources.cache`): a second look at the same file generates nothing, an entry
that does not decode is not used, and the cache can be turned off.  Beside each entry the
checks' verdict is kept (:func:`pysframe.sources.trust.checked`), used for the same bytes
only.

The cache is a place others may write to, so nothing in it is trusted: an entry made from
another file (the issue's attack: a program's entry put under libc's build ID), one whose
functions lie outside the file's code or whose bytes changed is a miss with one warning naming
it; names that are links or FIFOs are replaced, never followed; the directory is made 0700 and
one that others may write to is not used.  (tests/cli/test_cache_cli.py runs the same through
``pysframe perf``.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require
from pysframe.cli import main
from pysframe.elf.reader import ElfReader
from pysframe.sources import ResolvedSFrame, generated_sframe, resolve_sframe
from pysframe.sources.cache import (
    CACHE_ENVIRONMENT,
    cache_directory,
    generator_digest,
    take_warnings,
)
from pysframe.sources.trust import Verdict, checked, trust_problems

X86_64 = Path(__file__).parent.parent / "data" / "corpus" / "x86_64" / "v3"
CORPUS = X86_64 / "frames"
#: Another program, whose entry is put under CORPUS's build ID.
OTHER = X86_64 / "app"
#: An entry's first line (the layout written here on purpose, not taken from the code).
MAGIC = b"pysframe generated SFrame\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    directory = cache_directory()
    assert directory is not None
    take_warnings()  # what earlier tests of this process left
    yield Path(directory)
    take_warnings()


def _generate_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("generated again")

    monkeypatch.setattr("pysframe.generate.generate_from_elf", refuse)


def _generated(path: Path = CORPUS) -> ResolvedSFrame:
    with ElfReader.open(str(path)) as image:
        return generated_sframe(image, cached=True)


def _build_id(path: Path) -> bytes:
    with ElfReader.open(str(path)) as image:
        build_id = image.build_id()
    assert build_id
    return build_id


def _entry(data: bytes) -> tuple[dict[str, object], bytes]:
    """An entry's header (its JSON line) and the section after it."""
    assert data.startswith(MAGIC)
    record, _, section = data[len(MAGIC) :].partition(b"\n")
    return json.loads(record), section


def test_second_look_generates_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _generated()
    build_id = _build_id(CORPUS)
    assert first.generation is not None
    key = f"{build_id.hex()}.{first.address:x}"
    assert sorted(e.name for e in cache.iterdir()) == [f"{key}.checked", f"{key}.sframe"]
    record, section = _entry((cache / f"{key}.sframe").read_bytes())
    assert section == first.stored
    assert record["build_id"] == build_id.hex() and record["address"] == first.address
    assert record["sframe"] == hashlib.sha256(first.stored).hexdigest()
    # Nobody else reads or writes what is kept.
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert {stat.S_IMODE(e.stat().st_mode) for e in cache.iterdir()} == {0o600}
    _generate_refused(monkeypatch)
    second = _generated()
    assert second.generation is None  # from the cache
    assert second.stored == first.stored and second.address == first.address
    assert [(f.start, f.size) for f in second.section] == [(f.start, f.size) for f in first.section]
    assert take_warnings() == []


def test_a_damaged_entry_is_generated_again(cache: Path) -> None:
    first = _generated()
    (entry,) = cache.glob("*.sframe")
    entry.write_bytes(entry.read_bytes()[:-100])  # cut inside the section
    again = _generated()
    assert again.generation is not None and again.stored == first.stored
    assert _entry(entry.read_bytes())[1] == first.stored  # and kept whole again
    assert take_warnings() == [
        f"{entry}: cache entry not used: its section is not the one written (damaged); "
        "SFrame is generated again"
    ]


def test_cache_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENVIRONMENT, "")
    assert cache_directory() is None
    with ElfReader.open(str(CORPUS)) as image:
        assert generated_sframe(image, cached=True).generation is not None
    assert list(tmp_path.iterdir()) == []


def test_another_files_entry_is_a_miss(cache: Path) -> None:
    # The attack: another program's entry put under this file's build ID (renamed,
    # as it is, or given this file's address).  It decodes, and was used: now it is not.
    fresh = _generated()
    other = _generated(OTHER)
    own_entry = cache / f"{_build_id(CORPUS).hex()}.{fresh.address:x}.sframe"
    other_entry = (cache / f"{_build_id(OTHER).hex()}.{other.address:x}.sframe").read_bytes()
    for name in (f"{other.address:x}", f"{fresh.address:x}"):
        for left in cache.iterdir():
            left.unlink()
        planted = cache / f"{_build_id(CORPUS).hex()}.{name}.sframe"
        planted.write_bytes(other_entry)
        again = _generated()
        assert again.generation is not None and again.stored == fresh.stored
        assert take_warnings() == [
            f"{planted}: cache entry not used: made for another file (build ID "
            f"{_build_id(OTHER).hex()}); SFrame is generated again"
        ]
        assert _entry(own_entry.read_bytes())[1] == fresh.stored
        assert planted == own_entry or not planted.exists()


def test_an_entry_of_other_cfi_is_a_miss(cache: Path) -> None:
    # The same build ID, other CFI (a file rebuilt without a new build ID, or edited).
    fresh = _generated()
    (entry,) = cache.glob("*.sframe")
    record, section = _entry(entry.read_bytes())
    record["inputs"] = "0" * 64
    entry.write_bytes(MAGIC + json.dumps(record).encode() + b"\n" + section)
    assert _generated().generation is not None
    assert take_warnings() == [
        f"{entry}: cache entry not used: made from other CFI or headers than the file's; "
        "SFrame is generated again"
    ]
    assert _entry(entry.read_bytes())[1] == fresh.stored


def test_an_entry_outside_the_code_is_a_miss(cache: Path) -> None:
    # A header that binds the entry to this file, and its section read 1 MiB higher: every
    # function then lies outside the file's executable segment (0x1000-0x2e09).
    fresh = _generated()
    (entry,) = cache.glob("*.sframe")
    record, section = _entry(entry.read_bytes())
    moved = fresh.address + 0x100000
    record["address"] = moved
    for left in cache.iterdir():
        left.unlink()
    planted = cache / f"{_build_id(CORPUS).hex()}.{moved:x}.sframe"
    planted.write_bytes(MAGIC + json.dumps(record).encode() + b"\n" + section)
    again = _generated()
    assert again.generation is not None and again.stored == fresh.stored
    (warning,) = take_warnings()
    assert warning.startswith(f"{planted}: cache entry not used: ")
    assert "functions lie outside the file's code" in warning
    assert not planted.exists()


#: Headers no pysframe writes, and what the warning says of each.
HOSTILE_HEADERS = {
    "nested thousands deep": (b"[" * 2000 + b"]" * 2000, "its header is damaged"),
    "a line break in the build ID": (
        b'{"build_id": "x\\npysframe: forged line"}', "made for another file (build ID ?)"
    ),
    "no header line at all": (b"x" * 5000, "its header is damaged"),
}


@pytest.mark.parametrize("hostile", list(HOSTILE_HEADERS))
def test_hostile_headers_are_a_miss(cache: Path, hostile: str) -> None:
    fresh = _generated()
    (entry,) = cache.glob("*.sframe")
    (verdict,) = cache.glob("*.checked")
    header, why = HOSTILE_HEADERS[hostile]
    entry.write_bytes(MAGIC + header + b"\n" + fresh.stored)
    verdict.write_bytes(header)
    again = _generated()
    assert again.generation is not None and again.stored == fresh.stored
    assert take_warnings() == [
        f"{entry}: cache entry not used: {why}; SFrame is generated again"
    ]  # the damaged verdict is a miss without a word: it names other bytes than any section
    assert _entry(entry.read_bytes())[1] == fresh.stored
    assert json.loads(verdict.read_bytes())["digest"]


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO", "directory"])
def test_entry_names_that_are_not_files(cache: Path, tmp_path: Path, kind: str) -> None:
    # Each name the cache would read or write is something else: a link to a victim file is
    # replaced (the victim is left alone), a FIFO is neither waited on nor written to, a
    # directory stays (and the section is generated each time).
    fresh = _generated()
    names = sorted(e.name for e in cache.iterdir())
    for left in cache.iterdir():
        left.unlink()
    victim = tmp_path / "victim"
    victim.write_bytes(b"the user's own file")
    for name in names:
        if kind == "symbolic link":
            (cache / name).symlink_to(victim)
        elif kind == "FIFO":
            os.mkfifo(cache / name)
        else:
            (cache / name).mkdir()
    again = _generated()
    assert again.generation is not None and again.stored == fresh.stored
    assert victim.read_bytes() == b"the user's own file"
    why = {
        "symbolic link": "a symbolic link, not followed",
        "FIFO": "a FIFO, not a regular file",
        "directory": "a directory, not a regular file",
    }[kind]
    then = {"sframe": "SFrame is generated again", "checked": "checked again"}
    expected = [
        f"{cache / name}: cache entry not used: {why}; {then[name.rsplit('.', 1)[1]]}"
        for name in sorted(names, key=lambda n: not n.endswith(".sframe"))
    ]
    assert take_warnings() == expected
    for name in names:
        if kind == "directory":
            assert (cache / name).is_dir()
        else:
            assert stat.S_ISREG((cache / name).lstat().st_mode)


def test_the_directory_is_made_0700_with_its_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENVIRONMENT, str(tmp_path / "new" / "cache"))
    _generated()
    directory = cache_directory()
    assert directory == str(tmp_path / "new" / "cache" / f"generated-{generator_digest()}")
    assert len(os.listdir(directory)) == 2
    for made in (tmp_path / "new", tmp_path / "new" / "cache", Path(directory)):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made


#: Directories the cache must not use: how each is made, and what the warning says of it.
UNTRUSTED = {
    "group-writable": (lambda d: d.chmod(0o770), "writable by its group (mode 0770)"),
    "writable by others": (lambda d: d.chmod(0o1777), "writable by others (mode 1777)"),
    "foreign-owned": (lambda d: os.chown(d, 65534, 65534), "owned by another user (uid 65534)"),
}


@pytest.mark.parametrize("kind", [*UNTRUSTED, "symbolic link"])
def test_an_untrusted_directory_is_not_used(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    if kind == "foreign-owned" and os.geteuid() != 0:
        require("root", "giving a directory to another user needs root")
    if kind == "symbolic link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        cache.parent.mkdir()
        cache.symlink_to(elsewhere)
        seen, why = elsewhere, "a symbolic link"
    else:
        cache.mkdir(parents=True, mode=0o700)
        make, why = UNTRUSTED[kind]
        make(cache)
        seen = cache
    for _ in range(2):
        assert _generated().generation is not None
    assert list(seen.iterdir()) == []
    # Once per process.
    assert take_warnings() == [f"{cache}: not used as the cache of generated SFrame: {why}"]
    assert _generated().generation is not None and take_warnings() == []



def test_a_command_prints_none_of_the_warnings_earlier_calls_left(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cache's warnings wait for the command line to print them: those a library call
    left before a command (in the same process) are not the command's, and it drops them."""
    cache.mkdir(parents=True, mode=0o700)
    cache.chmod(0o770)  # group-writable: not used, and a warning waits
    assert _generated().generation is not None
    assert main(["dump", str(CORPUS)]) == 0
    assert capsys.readouterr().err == ""
    assert take_warnings() == []

def test_a_verdict_is_kept_and_used_for_the_same_bytes_only(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    found = resolve_sframe(str(CORPUS))
    code = [(0x1000, 0x2000)]
    first = checked(found, code, b"\x12\x34", trust=True)
    assert first == Verdict(None, None, tuple(trust_problems(found, code)))
    (kept,) = cache.glob("1234.*.trusted")

    def refuse(*_args: object) -> object:
        raise AssertionError("checked again")

    monkeypatch.setattr("pysframe.sources.trust._check", refuse)
    assert checked(found, code, b"\x12\x34", trust=True) == first  # from the cache
    monkeypatch.undo()
    # Other code ranges, or other bytes: checked again (and kept in place of the first).
    other = checked(found, [(0, 0x10)], b"\x12\x34", trust=True)
    assert other.problems and "outside the file's code" in other.problems[-1]
    kept.write_text('{"digest": "x", "malformed": 3, "table": null, "problems": []}')
    assert checked(found, code, b"\x12\x34", trust=True) == first  # a damaged verdict: absent
    # Another file's verdict on the same bytes at the same address is not this one's.
    shutil.copy(kept, cache / kept.name.replace("1234", "5678"))
    monkeypatch.setattr("pysframe.sources.trust._check", refuse)
    with pytest.raises(AssertionError, match="checked again"):
        checked(found, code, b"\x56\x78", trust=True)


def test_a_verdict_of_a_malformed_section(cache: Path, tmp_path: Path) -> None:
    found = resolve_sframe(str(CORPUS))
    broken = tmp_path / "broken.sframe"
    broken.write_bytes(found.stored[:30])  # a header whose FDE table runs past the end
    bare = resolve_sframe(str(broken), raw=True)
    verdict = checked(bare, (), b"\x56", trust=True)
    assert verdict.malformed is not None and verdict.problems == (
        f"it is malformed: {verdict.malformed}",
    )
    assert checked(bare, (), b"\x56", trust=True) == verdict  # the same, from the cache
