"""Start-up: the command line imports only what the command it runs needs.

``pysframe --version`` and ``--help`` build every sub-command's parser; none of them may pull
in numpy, pyelftools or the tools behind the commands, which are imported when a command runs.
(Timings belong to ``benchmarks/``; these tests check what is imported, which is what makes
start-up slow.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "elftools", "pysframe.format.section", "pysframe.tools.dump", "pysframe.generate")

PROBE = """
import json, sys
from pysframe.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as exit:
    status = exit.code
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported_by(*arguments: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *arguments], capture_output=True, text=True, check=False
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("arguments", [("--version",), ("--help",), ("dump", "--help")])
def test_parsers_alone_import_nothing_heavy(arguments: tuple[str, ...]) -> None:
    modules = imported_by(*arguments)
    assert "pysframe.cli.dump" in modules  # the parsers were built
    assert not [name for name in HEAVY if name in modules]


def test_a_command_imports_its_tools_when_it_runs() -> None:
    from conftest import DATA

    modules = imported_by("info", str(DATA / "corpus" / "x86_64" / "v3" / "frames"))
    assert "pysframe.tools.info" in modules
    assert "pysframe.tools.verify" not in modules and "pysframe.generate.interpret" not in modules
