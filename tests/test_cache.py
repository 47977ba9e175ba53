"""SFrame generated for files without a section of their own is kept per build ID
(:mod:`pysframe.sources.cache`): a second look at the same file generates nothing, an entry
that does not decode is not used, and the cache can be turned off."""

from __future__ import annotations

from pathlib import Path

import pytest

from pysframe.elf.image import ElfImage
from pysframe.sources import generated_sframe
from pysframe.sources.cache import CACHE_ENVIRONMENT, cache_directory

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
    with ElfImage.open(str(CORPUS)) as image:
        first = generated_sframe(image, cached=True)
        build_id = image.build_id()
    assert build_id is not None and first.generation is not None
    (entry,) = cache.iterdir()
    assert entry.name == f"{build_id.hex()}.{first.address:x}.sframe"
    assert entry.read_bytes() == first.stored
    _generate_refused(monkeypatch)
    with ElfImage.open(str(CORPUS)) as image:
        second = generated_sframe(image, cached=True)
    assert second.generation is None  # from the cache
    assert second.stored == first.stored and second.address == first.address
    assert [(f.start, f.size) for f in second.section] == [(f.start, f.size) for f in first.section]


def test_a_damaged_entry_is_generated_again(cache: Path) -> None:
    with ElfImage.open(str(CORPUS)) as image:
        first = generated_sframe(image, cached=True)
    (entry,) = cache.iterdir()
    entry.write_bytes(entry.read_bytes()[:40])  # cut inside its FDE table
    with ElfImage.open(str(CORPUS)) as image:
        again = generated_sframe(image, cached=True)
    assert again.generation is not None and again.stored == first.stored
    assert entry.read_bytes() == first.stored  # and kept whole again


def test_cache_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENVIRONMENT, "")
    assert cache_directory() is None
    with ElfImage.open(str(CORPUS)) as image:
        assert generated_sframe(image, cached=True).generation is not None
    assert list(tmp_path.iterdir()) == []
