"""Build a libbfd-sized shared library whose every object was assembled by GNU as 2.47 with
``--gsframe`` and linked by GNU ld 2.47: libbfd of the binutils 2.47 sources, all targets.

    python tests/support/libbfd_gsframe.py [--force]   # about 5 minutes on two cores, once

gcc compiles each C file and hands the assembly to ``-B``'s ``as`` (GNU as 2.47, with
``-Wa,--gsframe``); ``-B``'s ``ld`` links the objects into one shared library.  Needs gcc, make
and binutils 2.47 (sources and binaries) in ``~/.cache/sframe-ref`` (``$SFRAME_REF``).  The
library is kept in ``$PYSFRAME_VERIFY_CACHE`` (default ``~/.cache/pysframe-verify``), where
``tests/generate/test_verify.py`` finds it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

NAME = "libbfd-gsframe.so"


def reference() -> Path:
    return Path(os.environ.get("SFRAME_REF") or Path.home() / ".cache" / "sframe-ref")


def cache() -> Path:
    return Path(
        os.environ.get("PYSFRAME_VERIFY_CACHE") or Path.home() / ".cache" / "pysframe-verify"
    )


def built() -> Path | None:
    """The library, if it was built."""
    path = cache() / NAME
    return path if path.exists() else None


def missing() -> str | None:
    """What the build needs and does not have, or None."""
    tools = reference() / "binutils-2.47" / "bin"
    sources = reference() / "src" / "binutils-2.47" / "bfd" / "configure"
    for need, ok in (
        ("gcc", shutil.which("gcc") is not None),
        ("make", shutil.which("make") is not None),
        (f"GNU as and ld 2.47 in {tools}", (tools / "as").exists() and (tools / "ld").exists()),
        (f"the binutils 2.47 sources ({sources})", sources.exists()),
    ):
        if not ok:
            return need
    return None


def build() -> Path:
    """Configure, compile and link; returns the library."""
    problem = missing()
    if problem is not None:
        raise RuntimeError(f"cannot build {NAME}: needs {problem}")
    tools = reference() / "binutils-2.47" / "bin"
    source = reference() / "src" / "binutils-2.47" / "bfd"
    work = cache() / "bfd-build"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    compiler = f"gcc -B{tools}/ -Wa,--gsframe"

    def run(*command: str) -> None:
        subprocess.run(command, cwd=work, check=True, stdout=subprocess.DEVNULL)

    run(
        str(source / "configure"), "--enable-shared", "--disable-static", "--disable-nls",
        "--enable-targets=all", "--enable-64-bit-bfd", "--quiet", f"CC={compiler}", "CFLAGS=-O2",
    )  # fmt: skip
    run("make", "bfdver.h", "elf32-target.h", "elf64-target.h", "targmatch.h")
    # Every object of libbfd.la (-k: the archive's other inputs, libsframe, are not built).
    subprocess.run(["make", "-k", "-j2", "libbfd.la"], cwd=work, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    objects = sorted(str(p) for p in (work / ".libs").glob("*.o"))
    if len(objects) < 250:
        raise RuntimeError(f"only {len(objects)} objects of libbfd were built in {work}")
    target = cache() / NAME
    run(*compiler.split(), "-shared", "-o", str(target), *objects)
    return target


if __name__ == "__main__":
    try:
        # Built once per machine; --force builds it again.
        done = built()
        print(done if done is not None and "--force" not in sys.argv[1:] else build())
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"libbfd_gsframe: {error}", file=sys.stderr)
        raise SystemExit(1) from None
