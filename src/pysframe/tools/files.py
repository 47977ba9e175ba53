"""The ELF files of a directory tree, for the commands that go through many files (``stats``,
``verify``): regular files only, each inode once, symbolic links left out, in name order."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..elf.reader import is_elf_file
from ..errors import InputError


def find_elf_files(directory: str | os.PathLike[str], recursive: bool) -> list[str]:
    """Regular ELF files in ``directory`` (symbolic links and repeated inodes skipped), sorted;
    InputError when ``directory`` is not a directory."""
    found: list[str] = []
    seen: set[tuple[int, int]] = set()
    for path in _files(Path(directory), recursive):
        try:
            info = path.lstat()
        except OSError:
            continue
        key = (info.st_dev, info.st_ino)
        if key in seen or not path.is_file() or path.is_symlink():
            continue
        seen.add(key)
        if is_elf_file(path):
            found.append(str(path))
    return sorted(found)


def _files(top: Path, recursive: bool) -> Iterator[Path]:
    if not top.is_dir():
        raise InputError("not a directory", path=str(top))
    if not recursive:
        yield from sorted(top.iterdir())
        return
    for root, dirs, names in os.walk(top):
        dirs.sort()
        for name in sorted(names):
            yield Path(root) / name


__all__ = ["find_elf_files"]
