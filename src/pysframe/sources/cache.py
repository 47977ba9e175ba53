"""SFrame generated from a file's CFI, kept on disk per build ID, so that a second ``stack`` or
``perf report`` of the same programs generates nothing; and what the checks found in a
section, so that they need not run again on the same bytes.

Each entry is a bare section file (as ``generate -o`` writes it; ``pysframe dump --raw
--address ADDRESS`` shows it): ``DIR/BUILD-ID.ADDRESS.sframe``, ADDRESS being the section
address it was encoded for (hex).  Beside it, ``DIR/BUILD-ID.ADDRESS.KIND`` holds a check's
verdict on a section of that file at that address (:mod:`pysframe.sources.trust`): a JSON
object whose ``digest`` names the bytes checked (with what else the check read), so that a
verdict is used only for those bytes.  ``DIR`` is ``$PYSFRAME_CACHE_DIR`` when set (empty: no
cache), else ``$XDG_CACHE_HOME/pysframe`` or ``~/.cache/pysframe``, then a folder named after
the generator's own code (a digest of the ``format`` and ``generate`` packages' sources): a
pysframe whose generator writes other bytes never reads an older one's entries.

The cache is a convenience, never a source of truth: an entry is read through the one bounded
input path, decoded and checked before use, and anything wrong with it (unreadable, too large,
malformed) makes it count as absent; writing is atomic (:func:`pysframe.output.write_file`)
and a failed write is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import SFrameError
from ..input import open_input

#: The environment variable naming the cache's directory (empty: no cache).
CACHE_ENVIRONMENT = "PYSFRAME_CACHE_DIR"
#: An entry larger than this is not read (libLLVM's generated section is 6 MB).
MAX_ENTRY = 256 << 20
#: A verdict larger than this is not read (a few lines of text).
MAX_VERDICT = 1 << 20


@cache
def generator_digest() -> str:
    """A digest of the code that generates and encodes SFrame (the ``generate`` and
    ``format`` packages' sources), naming the cache's folder."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for package in ("format", "generate"):
        directory = os.path.join(root, package)
        for name in sorted(n for n in os.listdir(directory) if n.endswith(".py")):
            digest.update(name.encode())
            with open(os.path.join(directory, name), "rb") as source:
                digest.update(source.read())
    return digest.hexdigest()[:16]


def cache_directory() -> Path | None:
    """Where entries are kept (None: caching is off)."""
    chosen = os.environ.get(CACHE_ENVIRONMENT)
    if chosen is not None:
        base = Path(chosen) if chosen else None
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "pysframe"
    return None if base is None else base / f"generated-{generator_digest()}"


def cached_generation(build_id: bytes) -> tuple[bytes, int] | None:
    """The generated section kept for ``build_id`` and its address, or None."""
    directory = cache_directory()
    if directory is None or not build_id:
        return None
    prefix = f"{build_id.hex()}."
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(prefix))
    except OSError:
        return None
    for path in (directory / name for name in names if name.endswith(".sframe")):
        try:
            address = int(path.name.split(".")[1], 16)
            with open_input(path) as stream:
                if os.fstat(stream.fileno()).st_size > MAX_ENTRY:
                    continue
                return stream.read(), address
        except (ValueError, IndexError, OSError, SFrameError):
            continue
    return None


def has_generation(build_id: bytes) -> bool:
    """Whether the cache holds a generated section for ``build_id`` (not read: it may still
    turn out unusable)."""
    directory = cache_directory()
    if directory is None or not build_id:
        return False
    prefix = f"{build_id.hex()}."
    try:
        return any(n.startswith(prefix) and n.endswith(".sframe") for n in os.listdir(directory))
    except OSError:
        return False


def keep_generation(build_id: bytes, data: bytes, address: int) -> None:
    """Keep a generated section for ``build_id`` (best effort: a failure is ignored)."""
    directory = cache_directory()
    if directory is None or not build_id or len(data) > MAX_ENTRY:
        return
    from ..output import write_file

    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_file(str(directory / f"{build_id.hex()}.{address:x}.sframe"), data)
    except (OSError, SFrameError):
        return


def _verdict_path(build_id: bytes, address: int, kind: str) -> Path | None:
    directory = cache_directory()
    if directory is None or not build_id:
        return None
    return directory / f"{build_id.hex()}.{address:x}.{kind}"


def cached_verdict(build_id: bytes, address: int, kind: str, digest: str) -> dict[str, Any] | None:
    """The verdict of check ``kind`` kept for the section at ``address`` of the file with
    ``build_id``, when it was found for the bytes named by ``digest``; else None."""
    path = _verdict_path(build_id, address, kind)
    if path is None:
        return None
    try:
        with open_input(path, max_size=MAX_VERDICT) as stream:
            found = json.loads(stream.read())
    except (OSError, ValueError, SFrameError):
        return None
    if not isinstance(found, dict) or found.get("digest") != digest:
        return None
    return found


def keep_verdict(
    build_id: bytes, address: int, kind: str, digest: str, verdict: dict[str, Any]
) -> None:
    """Keep the verdict of check ``kind`` on the bytes named by ``digest`` (best effort)."""
    from ..output import write_file

    path = _verdict_path(build_id, address, kind)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(str(path), json.dumps({**verdict, "digest": digest}).encode())
    except (OSError, SFrameError):
        return


__all__ = [
    "CACHE_ENVIRONMENT",
    "MAX_ENTRY",
    "MAX_VERDICT",
    "cache_directory",
    "cached_generation",
    "cached_verdict",
    "generator_digest",
    "has_generation",
    "keep_generation",
    "keep_verdict",
]
