"""SFrame generated for files without a section of their own is kept per build ID
(:mod:`pysframe.sources.cache`): a second look at the same file generates nothing, an entry
that does not decode is not used, and the cache can be turned off.  Beside each entry the
checks' verdict is kept (:func:`pysframe.sources.trust.checked`), used for the same bytes
only."""

from __future__ import annotations

from pathlib import Path

import pytest

from pysframe.elf.reader import ElfReader
from pysframe.sources import generated_sframe, resolve_sframe
from pysframe.sources.cache import CACHE_ENVIRONMENT, cache_directory
from pysframe.sources.trust import Verdict, checked, trust_problems

CORPUS = Path(__file__).parent / "data" / "corpus" / "x86_64" / "v3" / "frames"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    directory = cache_directory()
    assert directory is not None
    return directory


def _generate_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("generated again")

    monkeypatch.setattr("pysframe.generate.generate_from_elf", refuse)


def test_second_look_generates_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ElfReader.open(str(CORPUS)) as image:
        first = generated_sframe(image, cached=True)
        build_id = image.build_id()
    assert build_id is not None and first.generation is not None
    key = f"{build_id.hex()}.{first.address:x}"
    assert sorted(e.name for e in cache.iterdir()) == [f"{key}.checked", f"{key}.sframe"]
    entry = cache / f"{key}.sframe"
    assert entry.read_bytes() == first.stored
    _generate_refused(monkeypatch)
    with ElfReader.open(str(CORPUS)) as image:
        second = generated_sframe(image, cached=True)
    assert second.generation is None  # from the cache
    assert second.stored == first.stored and second.address == first.address
    assert [(f.start, f.size) for f in second.section] == [(f.start, f.size) for f in first.section]


def test_a_damaged_entry_is_generated_again(cache: Path) -> None:
    with ElfReader.open(str(CORPUS)) as image:
        first = generated_sframe(image, cached=True)
    (entry,) = cache.glob("*.sframe")
    entry.write_bytes(entry.read_bytes()[:40])  # cut inside its FDE table
    with ElfReader.open(str(CORPUS)) as image:
        again = generated_sframe(image, cached=True)
    assert again.generation is not None and again.stored == first.stored
    assert entry.read_bytes() == first.stored  # and kept whole again


def test_cache_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENVIRONMENT, "")
    assert cache_directory() is None
    with ElfReader.open(str(CORPUS)) as image:
        assert generated_sframe(image, cached=True).generation is not None
    assert list(tmp_path.iterdir()) == []


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
