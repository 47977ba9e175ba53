"""The man page and the shell completions of ``pysframe``, generated from its parser.

``python -m pysframe.cli.shell_files [DIR]`` writes them under DIR (default ``share``):
``man/man1/pysframe.1`` (argparse-manpage), ``bash-completion/completions/pysframe`` and
``zsh/site-functions/_pysframe`` (shtab).  The repository keeps the generated files, and a test
checks that they match the parser.  Both libraries are development dependencies: installed
pysframe does not need them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import build_parser

#: Where each generated file goes, under the output directory.
FILES = {
    "man": Path("man/man1/pysframe.1"),
    "bash": Path("bash-completion/completions/pysframe"),
    "zsh": Path("zsh/site-functions/_pysframe"),
}


def man_page() -> str:
    """The manual page (roff), from every sub-command's parser.  Its NAME line is the command's
    name and the parser's description as man-pages(7) asks for it: ``pysframe \\- read, write,
    ...`` (lower case, no full stop), which whatis and apropos show."""
    from argparse_manpage.manpage import Manpage  # type: ignore[import-untyped]

    from .. import __version__

    parser = build_parser()
    page = Manpage(parser)
    page.source = f"pysframe {__version__}"
    page.manual = "pysframe manual"
    summary = (parser.description or "").strip().rstrip(".")
    page.description = summary[:1].lower() + summary[1:]
    return str(page)


def completion(shell: str) -> str:
    """The completion script for ``shell`` (bash or zsh)."""
    import shtab

    script: str = shtab.complete(build_parser(), shell=shell)
    return script


def generated() -> dict[str, str]:
    """Every generated file's text, keyed as :data:`FILES`."""
    return {"man": man_page(), "bash": completion("bash"), "zsh": completion("zsh")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pysframe.cli.shell_files",
        description="Write the man page and the bash and zsh completions under DIR.",
    )
    parser.add_argument("directory", nargs="?", default="share", metavar="DIR")
    root = Path(parser.parse_args(argv).directory)
    for key, text in generated().items():
        path = root / FILES[key]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
