"""The struct-only ELF reader (:class:`pysframe.elf.reader.ElfReader`) gives what the reference
(:class:`pysframe.elf.image.ElfImage`, pyelftools) gives: the same header, section and program
headers, section contents, build ID, debuglink, interpreter and SFrame section header, on real
files (the corpus, this machine's libc, dynamic linker and programs, the vDSO) and on damaged
copies of a corpus program.  Where the reference refuses a file or a section's contents, the
reader refuses it too; it refuses nothing else, but the section types it leaves to the
reference."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pysframe.elf.image import ElfImage
from pysframe.elf.reader import ElfReader
from pysframe.errors import SFrameError

from conftest import DATA, corpus_files
from test_damaged_sweep import PROGRAMS, _damaged

#: Section types the reader leaves to the reference (pysframe.elf.reader._UNREAD_TYPES).
UNREAD = {5, 18, 19, 0x6FFFFFF3, 0x6FFFFFF6, 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF}


def _system_files() -> list[Path]:
    candidates = [
        Path("/usr/lib/x86_64-linux-gnu/libc.so.6"),
        Path("/lib64/ld-linux-x86-64.so.2"),
        Path("/usr/bin/sleep"),
        Path(sys.executable).resolve(),
    ]
    with open("/proc/self/maps") as maps:  # the libraries this Python runs (libpython...)
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip()
            if ".so" in path and path.startswith("/") and "python" in path:
                candidates.append(Path(path))
    return sorted({p for p in candidates if p.is_file()})


def _outcome(call: Any) -> Any:
    try:
        return call()
    except SFrameError:
        return "refused"


def _read(image: ElfReader) -> dict[str, Any]:
    """What a reader gives about the open file (section contents as digests)."""
    sections = image.sections()
    found: dict[str, Any] = {
        "header": image.header,
        "sections": sections,
        "segments": _outcome(image.segments),
        "abi": image.abi,
        "format": image.file_format,
    }
    for name, call in (
        ("build_id", image.build_id),
        ("debuglink", image.debuglink),
        ("interpreter", image.interpreter),
        ("sframe", image.find_sframe),
        ("code_bytes", image.code_bytes),
        ("notes", lambda: list(image.notes())),
    ):
        found[name] = _outcome(call)
    for section in sections:
        data = _outcome(section.data)
        found[f"data {section.index}"] = (
            data if isinstance(data, str) else hashlib.sha256(data).hexdigest()
        )
    return found


def _both(opener: Any, argument: Any) -> tuple[Any, Any]:
    def read(kind: type[ElfReader]) -> Any:
        try:
            with opener(kind, argument) as image:
                return _read(image)
        except SFrameError:
            return "refused"

    return read(ElfReader), read(ElfImage)


def _assert_alike(ours: Any, reference: Any) -> None:
    if reference == "refused":
        assert ours == "refused"
        return
    assert ours != "refused", "the reader refused a file the reference reads"
    assert ours.keys() == reference.keys()
    for key, value in reference.items():
        if ours[key] == value:
            continue
        index = int(key.split()[1]) if key.startswith("data ") else None
        # Where the reader is stricter: the contents of the section types it leaves out.
        left_out = index is not None and reference["sections"][index].type in UNREAD
        assert left_out and ours[key] == "refused", (key, ours[key], value)


def _open(kind: type[ElfReader], path: Path) -> ElfReader:
    return kind.open(str(path))


REAL = corpus_files() + sorted((DATA / "elf-damaged").iterdir()) + _system_files()


@pytest.mark.parametrize("path", REAL, ids=lambda p: "/".join(p.parts[-3:]))
def test_real_files_read_alike(path: Path) -> None:
    ours, reference = _both(_open, path)
    assert reference != "refused"
    _assert_alike(ours, reference)


def test_the_vdso_reads_alike() -> None:
    from pysframe.unwind.mappings import process_vdso_address
    from pysframe.unwind.vdso import read_vdso_image

    address = process_vdso_address(os.getpid())
    if address is None:
        pytest.skip("no vDSO in this process")

    def read(at: int, size: int) -> bytes:
        with open("/proc/self/mem", "rb") as memory:
            memory.seek(at)
            return memory.read(size)

    image = read_vdso_image(address, read)
    assert image is not None
    ours, reference = _both(lambda kind, data: kind.from_bytes("[vdso]", data), image)
    assert reference != "refused"
    _assert_alike(ours, reference)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_damaged_copies_read_alike(program: Path) -> None:
    copies = 0
    for label, data in _damaged(program):
        ours, reference = _both(lambda kind, data: kind.from_bytes("damaged", data), data)
        try:
            _assert_alike(ours, reference)
        except AssertionError as error:
            raise AssertionError(f"{label}: {error}") from None
        copies += 1
    assert copies > 100
