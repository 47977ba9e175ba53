"""pysframe.output: atomic writes that never touch the input."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from pysframe.output import OutputError, write_file, write_in_directory


def test_writes_a_new_file_with_the_mode_of_the_input(tmp_path: Path) -> None:
    source = tmp_path / "program"
    source.write_bytes(b"input")
    source.chmod(0o751)
    target = tmp_path / "copy"
    write_file(str(target), [b"new ", b"bytes"], inputs=[str(source)], mode_from=str(source))
    assert target.read_bytes() == b"new bytes"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert source.read_bytes() == b"input"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "program"]  # no temporary left


def test_an_existing_file_keeps_its_own_mode(tmp_path: Path) -> None:
    source = tmp_path / "program"
    source.write_bytes(b"input")
    source.chmod(0o755)
    target = tmp_path / "out"
    target.write_bytes(b"old")
    target.chmod(0o600)
    write_file(str(target), b"new", mode_from=str(source))
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
def test_refuses_to_write_over_the_input(tmp_path: Path, link: str) -> None:
    source = tmp_path / "program"
    source.write_bytes(b"input")
    target = source
    if link == "symlink":
        target = tmp_path / "alias"
        target.symlink_to(source)
    elif link == "hardlink":
        target = tmp_path / "other-name"
        os.link(source, target)
    with pytest.raises(OutputError, match="is the input file"):
        write_file(str(target), b"new", inputs=[str(source)])
    assert source.read_bytes() == b"input"


def test_refuses_to_write_over_any_of_the_inputs(tmp_path: Path) -> None:
    # A profile of several recordings: the output may be none of them, under any name.
    recordings = [tmp_path / f"run{number}.data" for number in range(3)]
    for number, path in enumerate(recordings):
        path.write_bytes(b"recording %d" % number)
    alias = tmp_path / "alias"
    alias.symlink_to(recordings[2])
    with pytest.raises(OutputError, match="is the input file") as error:
        write_file(str(alias), b"profile", inputs=[str(p) for p in recordings])
    assert error.value.path == str(alias)
    assert [p.read_bytes() for p in recordings] == [b"recording %d" % n for n in range(3)]
    write_file(str(tmp_path / "profile"), b"profile", inputs=[str(p) for p in recordings])
    assert (tmp_path / "profile").read_bytes() == b"profile"


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO", "hard link", "file"])
def test_write_in_directory_never_follows_a_name(tmp_path: Path, kind: str) -> None:
    # The name is replaced by a rename, never opened: a link's target, a FIFO (no wait for a
    # reader) and a file's other hard link keep what they had.
    directory = tmp_path / "cache"
    directory.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"the user's own file")
    entry = directory / "entry"
    if kind == "symbolic link":
        entry.symlink_to(victim)
    elif kind == "FIFO":
        os.mkfifo(entry)
    elif kind == "hard link":
        os.link(victim, entry)
    else:
        entry.write_bytes(b"an older entry")
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    done = threading.Event()

    def write() -> None:
        write_in_directory(descriptor, "entry", [b"new ", b"entry"], shown=str(entry))
        done.set()

    writer = threading.Thread(target=write, daemon=True)  # a hang must not hold pytest
    writer.start()
    writer.join(timeout=30)
    os.close(descriptor)
    assert done.is_set(), "the write did not end"
    assert victim.read_bytes() == b"the user's own file"
    assert stat.S_ISREG(entry.lstat().st_mode) and entry.read_bytes() == b"new entry"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert os.listdir(directory) == ["entry"]  # no temporary left


def test_in_place_rewrite_when_asked(tmp_path: Path) -> None:
    source = tmp_path / "program"
    source.write_bytes(b"input")
    write_file(str(source), b"rewritten", inputs=[str(source)], in_place=True)
    assert source.read_bytes() == b"rewritten"


def test_in_place_rewrite_keeps_hard_links(tmp_path: Path) -> None:
    # A file with another hard link is written over, not renamed over: both names see the
    # new bytes (shorter than the old: the rest is cut), and no temporary file is left.
    source = tmp_path / "program"
    source.write_bytes(b"the input bytes")
    other = tmp_path / "other-name"
    os.link(source, other)
    write_file(str(source), b"rewritten", inputs=[str(source)], in_place=True)
    assert source.read_bytes() == other.read_bytes() == b"rewritten"
    assert os.path.samefile(source, other)
    assert sorted(os.listdir(tmp_path)) == ["other-name", "program"]


def test_writes_to_a_character_device_as_it_is(tmp_path: Path) -> None:
    # -o /dev/null: nothing can be renamed over a device, so it is written to directly, and
    # no temporary file is left in /dev.
    before = set(os.listdir(os.path.dirname(os.devnull)))
    write_file(os.devnull, b"data")
    assert os.path.exists(os.devnull)
    assert set(os.listdir(os.path.dirname(os.devnull))) == before


def test_writes_to_a_fifo_as_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_file(str(fifo), [b"da", b"ta"])
    reader.join(timeout=10)
    assert received == [b"data"]
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


def test_refuses_a_directory_as_target(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="not a regular file"):
        write_file(str(tmp_path), b"data")


def test_a_failed_write_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"old")

    def chunks() -> object:
        yield b"partial"
        raise RuntimeError("producer failed")

    with pytest.raises(RuntimeError):
        write_file(str(target), chunks())  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_dash_is_standard_output(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    write_file("-", [b"to ", b"stdout"])
    assert capfdbinary.readouterr().out == b"to stdout"


def test_an_output_in_a_missing_directory_is_named(tmp_path: Path) -> None:
    target = tmp_path / "no-such-directory" / "out"
    with pytest.raises(OutputError) as error:
        write_file(str(target), b"data")
    assert str(error.value) == f"{target}: No such file or directory"  # not the temporary file


def test_an_output_that_is_a_link_is_replaced_not_followed(tmp_path: Path) -> None:
    # A link planted where the output will go (a shared directory) must not turn the write
    # into a write over the file it points to: the link is replaced by the new file.
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    output = tmp_path / "profile.html"
    output.symlink_to(victim)
    write_file(str(output), b"profile")
    assert victim.read_bytes() == b"precious"
    assert not output.is_symlink()
    assert output.read_bytes() == b"profile"


def test_a_dangling_link_as_the_output_is_replaced(tmp_path: Path) -> None:
    output = tmp_path / "out"
    output.symlink_to(tmp_path / "nowhere")
    write_file(str(output), b"bytes")
    assert not output.is_symlink()
    assert output.read_bytes() == b"bytes"
    assert not (tmp_path / "nowhere").exists()


def test_a_link_to_a_device_is_written_through(tmp_path: Path) -> None:
    # /dev/stdout is such a link: writing through it replaces no file.
    link = tmp_path / "sink"
    link.symlink_to("/dev/null")
    write_file(str(link), b"discarded")
    assert link.is_symlink()
