#!/usr/bin/env python3
"""Make the virtual environment ``.venv`` at the top of the repository and install pysframe in
it, editable, with its test tools (the ``dev`` extra; more extras as arguments):

    python3 scripts/bootstrap.py          # then .venv/bin/pysframe, .venv/bin/python -m pytest
    python3 scripts/bootstrap.py plot     # ... and matplotlib for ``pysframe stats --plot``

It needs nothing but Python 3.11 or later, as a stock Debian 12 has it, where ``pip install``
outside a virtual environment is refused (PEP 668: externally-managed-environment) and
``python3 -m venv`` fails without the python3-venv package (Debian leaves ensurepip out).  pip
comes, in that order, from ensurepip when Python has it; from Debian's own pip (python3-pip)
when it is installed; else from PyPI: the newest pip wheel, its SHA-256 checked against the
index, run from the wheel itself to install pip into the environment.  Running it again
reuses ``.venv`` and brings the installation up to date.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
#: PyPI's JSON description of the newest pip release (files, their URLs and digests).
PIP_RELEASE = "https://pypi.org/pypi/pip/json"


def _has_pip(python: Path | str) -> bool:
    done = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, check=False)
    return done.returncode == 0


def _has_ensurepip() -> bool:
    done = subprocess.run([sys.executable, "-c", "import ensurepip"], capture_output=True)
    return done.returncode == 0


def make_environment() -> None:
    """Create ``.venv`` (with pip when ensurepip is there), unless a working one exists."""
    if PYTHON.exists() and subprocess.run([str(PYTHON), "-c", ""], check=False).returncode == 0:
        return
    with_pip = _has_ensurepip()
    print(f"bootstrap: creating {VENV}" + ("" if with_pip else " (no ensurepip here)"))
    venv.EnvBuilder(with_pip=with_pip, clear=VENV.exists()).create(VENV)


def _pip_wheel(folder: Path) -> Path:
    """The newest pip wheel from PyPI, checked against the digest the index gives."""
    with urllib.request.urlopen(PIP_RELEASE, timeout=60) as answer:
        release = json.load(answer)
    wheel = next(
        f
        for f in release["urls"]
        if f["packagetype"] == "bdist_wheel" and f["filename"].endswith("py3-none-any.whl")
    )
    print(f"bootstrap: fetching {wheel['filename']} from PyPI")
    # The index may give the file's address relative to the JSON document (a mirror does).
    with urllib.request.urlopen(
        urllib.parse.urljoin(PIP_RELEASE, wheel["url"]), timeout=120
    ) as answer:
        data = answer.read()
    if hashlib.sha256(data).hexdigest() != wheel["digests"]["sha256"]:
        raise SystemExit(f"bootstrap: {wheel['filename']} does not match its SHA-256 on PyPI")
    path = folder / wheel["filename"]
    path.write_bytes(data)
    return path


def install_pip() -> None:
    """Give ``.venv`` a pip of its own."""
    if _has_pip(PYTHON):
        return
    if _has_pip(sys.executable):
        # Debian's python3-pip (23.0) can install into another interpreter's environment.
        command = [sys.executable, "-m", "pip", "--python", str(PYTHON), "install", "pip"]
        subprocess.run([*command, "--quiet", "--disable-pip-version-check"], check=True)
        return
    with tempfile.TemporaryDirectory() as folder:
        try:
            wheel = _pip_wheel(Path(folder))
        except (OSError, ValueError, KeyError, StopIteration) as error:
            raise SystemExit(f"bootstrap: cannot fetch pip from {PIP_RELEASE}: {error}") from None
        # A pip wheel runs from the wheel file itself (pip's documented bootstrap).
        subprocess.run([str(PYTHON), f"{wheel}/pip", "install", "--quiet", str(wheel)], check=True)


def install(extras: list[str]) -> None:
    """pysframe, editable, with ``extras`` (its sources stay where they are)."""
    target = f"{ROOT}[{','.join(extras)}]"
    print(f"bootstrap: installing pysframe[{','.join(extras)}] into {VENV}")
    subprocess.run(
        [str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--editable", target],
        check=True,
    )  # fmt: skip


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 (run by any python3 there is)
        print(f"bootstrap: pysframe needs Python 3.11 or later, not {sys.version.split()[0]}")
        return 1
    try:
        make_environment()
        install_pip()
        install(["dev", *argv])
    except subprocess.CalledProcessError as error:
        print(f"bootstrap: {' '.join(map(str, error.cmd))} failed (exit {error.returncode})")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
