"""The man page and shell completions in share/ match the parser they are generated from
(``python -m pysframe.cli.shell_files``); every sub-command and option is in them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import require_module, require_program

SHARE = Path(__file__).resolve().parent.parents[1] / "share"


def _without_date(text: str) -> list[str]:
    """The page without its .TH line (which carries the date it was made)."""
    return [line for line in text.splitlines() if not line.startswith(".TH ")]


def test_the_committed_files_match_the_parser() -> None:
    require_module("shtab", reason="shtab (a development dependency) is not installed")
    require_module("argparse_manpage", "argparse-manpage")
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


def test_the_name_line_says_what_the_command_does() -> None:
    """man-db's lexgrog (what whatis and apropos read) finds the NAME line's description."""
    page = SHARE / "man/man1/pysframe.1"
    lines = page.read_text().splitlines()
    assert lines[lines.index(".SH NAME") + 1].startswith("pysframe \\- read, write, ")
    done = subprocess.run(
        [require_program("lexgrog", "man-db"), str(page)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith('"pysframe - read, write, generate and use SFrame '
                                        'stack-trace sections"')


def test_bash_loads_the_completion() -> None:
    require_program("bash")
    script = SHARE / "bash-completion/completions/pysframe"
    done = subprocess.run(
        ["bash", "-c", f"source {script} && complete -p pysframe"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and "pysframe" in done.stdout
