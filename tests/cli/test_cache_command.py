"""``pysframe cache``: the cache's directory, its bound, its entries by folder and by kind;
``--clear`` removes the entries and nothing else.  The cache is made by hand here (entries of
known sizes and times, in this version's folder and another's), so that every number the
command prints is known."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pysframe.cli import main
from pysframe.sources import cache

OTHER = "generated-0123456789abcdef"
#: Entries by folder: name, size.
ENTRIES = {
    "this": [("aa11.1000.sframe", 5000), ("aa11.1000.checked", 100), ("bb22.2000.sframe", 9000)],
    OTHER: [("cc33.0123456789abcdef.kallsyms", 20000), ("dd44.perf-symbols", 300)],
}


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache with the ENTRIES, a file of another name and a link in this version's folder;
    its directory."""
    base = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENVIRONMENT, str(base))
    monkeypatch.setenv(cache.SIZE_ENVIRONMENT, "2G")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    current = Path(cache.cache_directory() or "")
    folders = {"this": current, OTHER: base / OTHER}
    current.mkdir(parents=True, mode=0o700)
    (current / "notes.txt").write_text("mine")
    (current / "ee55.1000.sframe").symlink_to(tmp_path / "notes")
    os.utime(current / "notes.txt", (0, 0))
    os.utime(current / "ee55.1000.sframe", (0, 0), follow_symlinks=False)
    when = time.mktime((2025, 3, 4, 5, 6, 0, 0, 0, -1))
    for key, entries in ENTRIES.items():
        folders[key].mkdir(parents=True, mode=0o700, exist_ok=True)
        for name, size in entries:
            (folders[key] / name).write_bytes(b"x" * size)
            os.utime(folders[key] / name, (when, when))
        os.utime(folders[key], (when - 60, when - 60))
        when -= 86400
    cache.take_warnings()
    return base


def _blocks(folder: Path, name: str) -> int:
    return (folder / name).lstat().st_blocks * 512


def test_the_cache_is_shown(made: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache"]) == 0
    out, err = capsys.readouterr()
    current = Path(cache.cache_directory() or "")
    this = sum(_blocks(current, n) for n, _ in ENTRIES["this"])
    other = sum(_blocks(made / OTHER, n) for n, _ in ENTRIES[OTHER])
    sframe = sum(_blocks(current, n) for n, _ in ENTRIES["this"] if n.endswith(".sframe"))
    checked = _blocks(current, "aa11.1000.checked")
    kallsyms = _blocks(made / OTHER, ENTRIES[OTHER][0][0])
    symbols = _blocks(made / OTHER, ENTRIES[OTHER][1][0])
    size = cache.size_text
    assert out.splitlines() == [
        f"directory: {made}",
        f"size: {size(this + other)} of at most 2.0 GiB",
        "folder                      entries        size  last used",
        f"{current.name}        3  {size(this):>10}  2025-03-04 05:06 (this pysframe)",
        f"{OTHER}        2  {size(other):>10}  2025-03-03 05:06",
        "",
        "kind                        entries        size",
        f"sframe                            2  {size(sframe):>10}",
        f"checked                           1  {size(checked):>10}",
        f"perf-symbols                      1  {size(symbols):>10}",
        f"kallsyms                          1  {size(kallsyms):>10}",
        f"total                             5  {size(this + other):>10}",
    ]
    assert err == ""


def test_the_cache_is_cleared_of_its_entries_only(
    made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    current = Path(cache.cache_directory() or "")
    total = sum(_blocks(current, n) for n, _ in ENTRIES["this"])
    total += sum(_blocks(made / OTHER, n) for n, _ in ENTRIES[OTHER])
    assert main(["cache", "--clear"]) == 0
    out, err = capsys.readouterr()
    assert out == f"removed 5 entries ({cache.size_text(total)}) from {made}\n" and err == ""
    assert sorted(os.listdir(made)) == [current.name]  # the other folder, emptied, went
    assert sorted(os.listdir(current)) == ["ee55.1000.sframe", "notes.txt"]
    assert (current / "notes.txt").read_text() == "mine"
    assert main(["cache"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["total", "0", "0", "B"]


def test_an_entry_that_cannot_be_removed_fails(
    made: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    unlink = os.unlink

    def refuse(name: str, *, dir_fd: int | None = None) -> None:
        if name == "bb22.2000.sframe":
            raise PermissionError(1, "Operation not permitted")
        unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", refuse)
    assert main(["cache", "--clear"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("removed 4 entries (") and out.endswith(f") from {made}\n")
    assert err == f"pysframe: {made}: 1 entries could not be removed\n"


def test_no_cache_and_no_cache_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_ENVIRONMENT, "")
    for arguments in (["cache"], ["cache", "--clear"]):
        assert main(arguments) == 0
        assert capsys.readouterr() == ("no cache (PYSFRAME_CACHE_DIR is empty)\n", "")
    monkeypatch.setenv(cache.CACHE_ENVIRONMENT, str(tmp_path / "none"))
    monkeypatch.delenv(cache.SIZE_ENVIRONMENT, raising=False)
    assert main(["cache"]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        f"directory: {tmp_path / 'none'}", "size: 0 B of at most 1.0 GiB"
    ]
    assert main(["cache", "--clear"]) == 0
    assert capsys.readouterr().out == f"removed 0 entries (0 B) from {tmp_path / 'none'}\n"
    assert not (tmp_path / "none").exists()  # looking made nothing


def test_a_directory_others_may_write_to_is_left_alone(
    made: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made.chmod(0o777)
    for arguments in (["cache"], ["cache", "--clear"]):
        assert main(arguments) == 1
        out, err = capsys.readouterr()
        assert (out, err) == ("", f"pysframe: {made}: not used as a cache: writable by others "
                                  "(mode 0777)\n")  # fmt: skip
    assert len(os.listdir(made / OTHER)) == 2


def test_a_folder_that_is_a_link_is_not_followed(
    made: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ff66.1000.sframe").write_bytes(b"precious")
    (made / "generated-fedcba9876543210").symlink_to(outside)
    assert main(["cache", "--clear"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("removed 5 entries")
    assert (outside / "ff66.1000.sframe").read_bytes() == b"precious"
    assert main(["cache"]) == 0
    out, err = capsys.readouterr()
    assert "generated-fedcba9876543210" not in out
    assert err == (f"pysframe: warning: {made}/generated-fedcba9876543210: not used as the cache "
                   "of generated SFrame: a symbolic link\n")  # fmt: skip


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["cache", "--clean"])
    assert exit.value.code == 2
    assert "unrecognized arguments: --clean" in capsys.readouterr().err
