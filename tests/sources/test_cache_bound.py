"""The cache keeps itself under a size (pysframe.sources.cache: ``PYSFRAME_CACHE_MAX_SIZE``):
when a write takes it over, the entries used least recently go, until it holds 90% of it; an
entry read is marked used (its modification time set to now).  The folders of other versions
of pysframe unused for 30 days are removed.  Nothing but entries is ever removed: not a file of
another name, not a link nor what it points to.  A command that only reads looks at no
directory; one that writes looks at the cache once.

The entries are written and read through the cache's own functions (tables of known sizes);
the order they were used in is set by hand (``os.utime``), so that which must stay is known by
construction.  Sizes are what ``du`` counts: the blocks of the files.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pysframe
from pysframe.elf.reader import ElfReader
from pysframe.sources import cache

CORPUS = Path(__file__).parent.parent / "data" / "corpus" / "x86_64" / "v3" / "frames"
#: The code digest the tables are bound to (any 16 hex digits).
CODE = "0123456789abcdef"
KIND = "perf-symbols"
DAY = 24 * 3600


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This pysframe's folder (generated-DIGEST) in a private cache."""
    monkeypatch.setenv(cache.CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.SIZE_ENVIRONMENT, raising=False)
    cache.take_warnings()
    directory = cache.cache_directory()
    assert directory is not None
    return Path(directory)


def _key(number: int) -> str:
    return f"{number:040x}"


def _name(number: int) -> str:
    return f"{_key(number)}.{CODE}.{KIND}"


def _binding(number: int) -> dict[str, object]:
    return {"code": CODE, "number": number}


def _write(number: int, size: int = 64 << 10) -> None:
    cache.keep_tables(_key(number), KIND, _binding(number), [bytes([number % 256]) * size])


def _read(number: int) -> bool:
    parts = cache.cached_tables(_key(number), KIND, _binding(number))
    return parts is not None and bytes(parts[0]) == bytes([number % 256]) * len(parts[0])


def _disk(folder: Path) -> int:
    """The size of the regular files of ``folder`` as du counts it (blocks of 512 bytes)."""
    return sum(p.lstat().st_blocks * 512 for p in folder.iterdir() if p.is_file())


def _kept(folder: Path) -> set[int]:
    return {int(p.name.split(".")[0], 16) for p in folder.glob(f"*.{KIND}")}


def _age(path: Path, seconds: float) -> None:
    """Set ``path``'s times to ``seconds`` ago (a link itself, not what it points to)."""
    when = time.time() - seconds
    os.utime(path, (when, when), follow_symlinks=False)


def test_sizes_are_read_as_du_and_sort_read_them() -> None:
    assert cache.parse_size("1048576") == 1 << 20
    assert cache.parse_size("500M") == 500 << 20
    assert cache.parse_size("2G") == 2 << 30
    assert cache.parse_size("2GiB") == 2 << 30
    assert cache.parse_size("64k") == 64 << 10
    assert cache.parse_size("1.5G") == 3 << 29
    assert cache.parse_size(" 1T ") == 1 << 40
    for wrong in ("0", "0M", "-1", "1X", "M", "1 G B", "ten"):
        with pytest.raises(ValueError):
            cache.parse_size(wrong)
    assert cache.size_text(1000) == "1000 B"
    assert cache.size_text(1536) == "1.5 KiB"
    assert cache.size_text(1 << 30) == "1.0 GiB"
    assert cache.size_text(5 << 40) == "5.0 TiB"


def test_a_size_that_is_none_is_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    cache.take_warnings()
    monkeypatch.setenv(cache.SIZE_ENVIRONMENT, "0")
    assert cache.max_size() == cache.DEFAULT_MAX_SIZE == 1 << 30
    assert cache.take_warnings() == [
        "PYSFRAME_CACHE_MAX_SIZE: not more than 0: '0' (PYSFRAME_CACHE_DIR= turns the cache "
        "off); 1.0 GiB is used"
    ]
    monkeypatch.setenv(cache.SIZE_ENVIRONMENT, "")
    assert cache.max_size() == 1 << 30


def test_the_bound_holds_and_the_entries_used_last_stay(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 1 << 20
    monkeypatch.setenv(cache.SIZE_ENVIRONMENT, "1M")
    for number in range(8):  # some 70 KiB each: 8 of them hold a bit over half the bound
        _write(number)
    for number in range(8):  # used in this order, long ago
        _age(cache_dir / _name(number), DAY - number)
    assert _read(1) and _read(3)  # used now: the newest of the eight
    assert time.time() - (cache_dir / _name(1)).stat().st_mtime < 60
    for number in range(8, 16):
        _write(number)
        assert _disk(cache_dir) <= bound
    entry = (cache_dir / _name(15)).stat().st_blocks * 512
    kept = _kept(cache_dir)
    # 1 and 3 were used after 0, 2, 4..7 and before 8..15: the oldest went first, then the
    # next oldest, and nothing more than what brought the cache to 90% of its bound.
    assert {1, 3} <= kept and 0 not in kept and 15 in kept
    order = [0, 2, 4, 5, 6, 7, 1, 3, *range(8, 16)]
    gone = [n for n in order if n not in kept]
    assert gone == order[: len(gone)]
    assert _disk(cache_dir) > bound * cache.LOW_MARK - entry
    assert all(_read(n) for n in kept)


def test_a_new_process_orders_the_entries_by_their_times(cache_dir: Path) -> None:
    """The first write of a process finds the entries and their last use on the disk."""
    for number in range(12):
        _write(number)
    # The last use, oldest first (known by construction).
    order = [0, 11, 1, 10, 2, 9, 3, 8, 4, 7, 5, 6]
    for number in range(12):
        _age(cache_dir / _name(number), DAY - order.index(number))
    entry = (cache_dir / _name(0)).stat().st_blocks * 512
    bound = entry * 8 + entry // 2  # 8 entries and a half: a 13th goes over
    printed = _in_a_process(cache_dir, "_write(99); print(*sorted(_kept(folder)))", bound)
    # The cache goes down to 90% of 8.5 entries: the 6 used last and the one written stay.
    assert [int(n) for n in printed.split()] == sorted([*order[-6:], 99])


def _in_a_process(folder: Path, code: str, bound: int | None = None) -> str:
    """Run ``code`` in a new Python process with this module's helpers, the cache at
    ``folder``'s parent (and ``bound``); its output."""
    sources = [str(Path(pysframe.__file__).parents[1]), str(Path(__file__).parent)]
    path = os.pathsep.join([*sources, os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYSFRAME_CACHE_DIR=str(folder.parent), PYTHONPATH=path)
    env.pop(cache.SIZE_ENVIRONMENT, None)
    if bound is not None:
        env[cache.SIZE_ENVIRONMENT] = str(bound)
    script = (
        "from pathlib import Path\n"
        "from test_cache_bound import _write, _read, _kept, cache\n"
        f"folder = Path({str(folder)!r})\n{code}\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, check=False, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_folders_of_other_versions_go_when_unused_for_long(
    cache_dir: Path, tmp_path: Path
) -> None:
    base = cache_dir.parent
    old, mixed, recent, foreign = (base / f"generated-{c * 16}" for c in "abcd")
    current = cache_dir
    current.mkdir(parents=True, mode=0o700)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / _name(7)).write_bytes(b"not the cache's")
    linked = base / "generated-eeeeeeeeeeeeeeee"
    linked.symlink_to(outside)
    for folder, days in ((old, 31), (mixed, 31), (recent, 29), (foreign, 31), (current, 100)):
        folder.mkdir(exist_ok=True, mode=0o700)
        for number in range(3):
            (folder / _name(number)).write_bytes(b"x" * 100)
            _age(folder / _name(number), days * DAY)
    (foreign / "notes.txt").write_text("mine")
    _age(foreign / "notes.txt", 31 * DAY)
    _age(mixed / _name(2), DAY)  # used yesterday by another pysframe
    _age(outside / _name(7), 365 * DAY)
    for folder in (old, mixed, recent, foreign, current, outside):
        _age(folder, 31 * DAY)
    _age(linked, 365 * DAY)
    _write(50, 100)
    assert not old.exists()
    assert _kept(mixed) == _kept(recent) == {0, 1, 2}
    assert _kept(foreign) == set() and (foreign / "notes.txt").read_text() == "mine"
    assert _kept(current) == {0, 1, 2, 50}  # this pysframe's is never removed for its age
    assert linked.is_symlink() and (outside / _name(7)).read_bytes() == b"not the cache's"


def test_links_and_other_names_are_never_removed(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names planted in the cache's folder: links (to a file, to a directory) under entries'
    names, files of other names; the cache is then swept to its bound, then cleared."""
    outside = tmp_path / "outside"
    (outside / "directory").mkdir(parents=True)
    (outside / "file").write_bytes(b"precious")
    (outside / "directory" / _name(9)).write_bytes(b"precious too")
    cache_dir.mkdir(parents=True, mode=0o700)
    (cache_dir / _name(1000)).symlink_to(outside / "file")
    (cache_dir / _name(1001)).symlink_to(outside / "directory")
    planted = [_name(1000), _name(1001), "notes.txt", f"{_name(2)}.old", f".{_name(3)}.tmp",
               f"{_key(4)}.{CODE}.sframe2"]  # fmt: skip
    for name in planted[2:]:
        (cache_dir / name).write_bytes(b"x" * 10000)
    for name in planted:
        _age(cache_dir / name, 365 * DAY)
    monkeypatch.setenv(cache.SIZE_ENVIRONMENT, "100K")
    for number in range(6):
        _write(number, 40 << 10)
    assert sorted(_kept(cache_dir) - {1000, 1001}) == [4, 5]  # the bound was kept
    cleared = cache.clear_cache()
    assert cleared is not None and cleared.removed == 2 and cleared.failed == 0
    assert sorted(os.listdir(cache_dir)) == sorted(planted)
    assert (outside / "file").read_bytes() == b"precious"
    assert (outside / "directory" / _name(9)).read_bytes() == b"precious too"


def test_reads_look_at_no_directory_and_a_process_looks_once(cache_dir: Path) -> None:
    _in_a_process(cache_dir, "for n in range(3): _write(n, 100)")
    for number in range(3):
        _age(cache_dir / _name(number), DAY)
    counting = (
        "import os\n"
        "calls = []\n"
        "scandir = os.scandir\n"
        "os.scandir = lambda *a: calls.append(a) or scandir(*a)\n"
        "assert all(_read(n) for n in range(3)) and _read(0)\n"
        "print(len(calls))\n"
        "_write(3, 100)\n"
        "print(len(calls))\n"
        "_write(4, 100)\n"
        "_write(0, 100)\n"
        "print(len(calls))\n"
    )
    (cache_dir.parent / "generated-aaaaaaaaaaaaaaaa").mkdir(mode=0o700)
    counts = [int(n) for n in _in_a_process(cache_dir, counting).split()]
    # Reading: nothing.  The first write: this folder, the cache, the other folder.
    assert counts == [0, 3, 3]
    for number in (1, 2):  # each read marked its entry used
        assert time.time() - (cache_dir / _name(number)).stat().st_mtime < 600


def test_an_entry_that_vanishes_is_a_miss(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another pysframe removed the entry between the listing and the reading."""
    with ElfReader.open(str(CORPUS)) as image:
        binding = cache.generation_binding(image)
    assert binding is not None
    cache_dir.mkdir(parents=True, mode=0o700)
    listdir = os.listdir
    gone = f"{binding.build_id.hex()}.1000.sframe"
    monkeypatch.setattr(os, "listdir", lambda where: [*listdir(where), gone])
    assert cache.cached_generation(binding) is None
    assert cache.cached_tables(_key(1), KIND, _binding(1)) is None
    assert cache.cached_verdict(binding.build_id, 0x1000, "checked", "0" * 32) is None
    assert cache.take_warnings() == []


def test_entries_another_pysframe_removed_are_no_longer_counted(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two entries counted by this process are removed by another: the next writes go over the
    bound as this process counts, find them gone, and remove nothing else."""
    monkeypatch.setenv(cache.SIZE_ENVIRONMENT, "200K")
    _write(0)
    _write(1)
    for number in (0, 1):
        (cache_dir / _name(number)).unlink()
    _write(2)
    _write(3)  # four entries of some 70 KiB counted, two of them gone
    assert _kept(cache_dir) == {2, 3}
