"""The man page and shell completions in share/ match the parser they are generated from
(``python -m pysframe.cli.shell_files``); every sub-command and option is in them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SHARE = Path(__file__).resolve().parents[1] / "share"


def _without_date(text: str) -> list[str]:
    """The page without its .TH line (which carries the date it was made)."""
    return [line for line in text.splitlines() if not line.startswith(".TH ")]


def test_the_committed_files_match_the_parser() -> None:
    pytest.importorskip("shtab", reason="shtab (a development dependency) is not installed")
    pytest.importorskip("argparse_manpage", reason="argparse-manpage is not installed")
    from pysframe.cli.shell_files import FILES, generated

    stale = "share/ is out of date: run python -m pysframe.cli.shell_files"
    for key, text in generated().items():
        committed = (SHARE / FILES[key]).read_text()
        if key == "man":
            assert _without_date(committed) == _without_date(text), stale
        else:
            assert committed == text, stale


def test_every_command_and_some_options_are_there() -> None:
    from pysframe.cli import COMMANDS

    page = (SHARE / "man/man1/pysframe.1").read_text()
    bash = (SHARE / "bash-completion/completions/pysframe").read_text()
    for command in COMMANDS:
        assert command in page and command in bash
    for option in ("--jsonl", "--inject", "--kernel", "--remote"):
        assert option in bash


def test_bash_loads_the_completion() -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    script = SHARE / "bash-completion/completions/pysframe"
    done = subprocess.run(
        ["bash", "-c", f"source {script} && complete -p pysframe"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and "pysframe" in done.stdout
