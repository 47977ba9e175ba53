"""Every example of the README and of the documentation in docs/ runs, and says what it shows.

- A ```python block runs; the blocks of one page run in order, in one namespace, from a fresh
  directory where ``tests`` is the repository's (so that ``tests/data/...`` names the files the
  repository ships).  A block written with ``>>>`` prompts is a doctest: each answer shown is
  checked (``...`` stands for any text).
- A ```console block runs each ``$ COMMAND`` line with bash in such a directory, with this
  environment's ``pysframe`` first on PATH, and compares what it prints (standard output and
  error) with the lines that follow it, up to the next ``$``: line for line (trailing blanks
  aside, which Markdown editors drop), where a line ``...`` stands for any lines.  Blocks
  without a ``$ pysframe`` command are not run.

The one way to leave a console block out is an HTML comment just above it, ``<!-- example:
not run: shows a PID -->`` (or ``a timing``): output that no second run repeats.  A block
that needs a permission says ``<!-- example: needs ptrace -->``; it runs where the permission
is given (and fails under CI where it is not, as every test that misses a tool does).
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import unavailable
from stack_support import Unavailable, check_ptrace

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")],
)
PAGES = [page for page in PAGES if "_build" not in page.relative_to(ROOT).parts]
MARKER = re.compile(r"<!--\s*example:\s*(?P<what>.*?)\s*-->")
#: The reasons a console block may be left out: its output is not the same twice.
NOT_RUN = re.compile(r"not run: shows (a PID|a timing|PIDs|timings)\b")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    marker: str  # what the comment above it says, or ""

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, each with the example marker above it."""
    blocks: list[Block] = []
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^(`{3,})(\S*)", lines[index])
        if not fence:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence.group(1):
            end += 1
        above = next((line for line in reversed(lines[:index]) if line.strip()), "")
        marker = MARKER.search(above)
        blocks.append(
            Block(
                page,
                index + 1,
                fence.group(2),
                "\n".join(lines[index + 1 : end]) + "\n",
                marker.group("what") if marker else "",
            )
        )
        index = end + 1
    return blocks


def _workdir(tmp_path: Path) -> Path:
    """A fresh directory where ``tests`` is the repository's."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    return tmp_path


def _needs(block: Block) -> None:
    if block.marker == "needs ptrace":
        try:
            check_ptrace()
        except Unavailable as why:
            unavailable(why)
    elif block.marker:
        assert NOT_RUN.match(block.marker), f"{block.name}: unknown example marker {block.marker!r}"


PYTHON_PAGES = [page for page in PAGES if any(b.language == "python" for b in read_blocks(page))]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_python_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_workdir(tmp_path))
    monkeypatch.setenv("PYSFRAME_CACHE_DIR", str(tmp_path / "cache"))
    namespace: dict[str, object] = {"__name__": "__docs__"}
    parser = doctest.DocTestParser()
    for block in (b for b in read_blocks(page) if b.language == "python"):
        _needs(block)
        if ">>> " in block.text:
            test = parser.get_doctest(block.text, namespace, block.name, str(page), block.line)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            report: list[str] = []
            runner.run(test, out=report.append, clear_globs=False)
            assert runner.failures == 0, "".join(report)
            namespace.update(test.globs)  # a DocTest runs in a copy of what it is given
        else:
            exec(compile(block.text, block.name, "exec"), namespace)


def _console_blocks() -> list[Block]:
    return [
        block
        for page in PAGES
        for block in read_blocks(page)
        if block.language == "console" and re.search(r"^\$ pysframe ", block.text, re.M)
    ]


def parse_session(text: str) -> list[tuple[str, list[str]]]:
    """``(command, expected lines)`` for each ``$ `` line of a console block."""
    session: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            session.append((line[2:], []))
        else:
            assert session, f"output before the first command: {line!r}"
            session[-1][1].append(line.rstrip())
    return session


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected``, a line ``...`` standing for any lines (none too)."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[skip:]) for skip in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


@pytest.mark.parametrize("block", _console_blocks(), ids=lambda block: block.name)
def test_console_examples_print_what_they_show(block: Block, tmp_path: Path) -> None:
    if NOT_RUN.match(block.marker):
        pytest.skip(f"{block.name}: {block.marker}")
    _needs(block)
    workdir = _workdir(tmp_path)
    environment = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        PYSFRAME_CACHE_DIR=str(tmp_path / "cache"),
        LC_ALL="C.UTF-8",
    )
    for command, expected in parse_session(block.text):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=workdir,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        actual = [line.rstrip() for line in done.stdout.splitlines()]
        assert matches(expected, actual), (
            f"{block.name}: $ {command}\nexpected:\n"
            + "\n".join(expected)
            + "\nprinted:\n"
            + "\n".join(actual)
        )


def test_matches_reads_ellipses_as_any_lines() -> None:
    """The comparison's own rule, on cases whose answer is known."""
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "d"], ["a", "d"])
    assert not matches(["a", "...", "d"], ["a", "b", "c"])
    assert not matches(["a", "b"], ["a", "b", "c"])
    assert matches(["..."], [])


def test_the_examples_are_found() -> None:
    """The pages hold examples of both kinds, and every marker is one this test knows."""
    blocks = [block for page in PAGES for block in read_blocks(page)]
    assert sum(block.language == "python" for block in blocks) >= 5
    assert len(_console_blocks()) >= 5
    for block in blocks:
        assert not block.marker or block.marker == "needs ptrace" or NOT_RUN.match(block.marker), (
            f"{block.name}: unknown example marker {block.marker!r}"
        )


def _slug(heading: str) -> str:
    """A heading's anchor, as GitHub and MyST make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("page", [ROOT / "README.md"], ids=["README.md"])
def test_relative_links_name_files_and_headings_that_exist(page: Path) -> None:
    """The README is not part of the docs build, whose -W checks the pages' own links: its
    links to files and their headings are checked here."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path) if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", linked.read_text(), flags=re.M)
            if anchor not in {_slug(heading) for heading in headings}:
                broken.append(target)
    assert not broken, broken


def test_the_files_the_pages_name_exist() -> None:
    """Every ``tests/...`` and ``benchmarks/...`` path the README and the docs name is there
    (test files move; the pages must follow)."""
    named = {
        match.rstrip(".,)")
        for page in PAGES
        for match in re.findall(r"\b(?:tests|benchmarks|scripts)/[\w./*-]+", page.read_text())
    }
    assert len(named) > 20, named
    missing = sorted(path for path in named if not list(ROOT.glob(path)))
    assert not missing, missing
