"""Usage errors: arguments that do not go together exit with status 2 and one line, as
argparse's own errors do (README, "Command line")."""

from __future__ import annotations

import pytest

from conftest import CORPUS
from pysframe.cli import main

FRAMES = str(CORPUS / "x86_64/v3/frames")
RAW = str(CORPUS.parent / "fuzz-seeds" / "x86_64-v1-app.sframe")

CASES = [
    (["generate", FRAMES], "generate: nothing to do: give -o OUTPUT and/or --report"),
    (["generate", FRAMES, "--replace", "-o", "x"], "generate: --replace goes with --inject"),
    (["stack", "--exe", FRAMES, "1"], "stack: --exe needs --core or --remote"),
    (["stack", "--sysroot", "/", "1"], "stack: --sysroot needs --core or --remote"),
    (["stats"], "stats: no ELF files given (name FILEs or --dir DIR)"),
    (["verify"], "verify: no ELF files given (name FILEs or --dir DIR)"),
    (["check", "--address", "0x10", FRAMES], "check: --address goes with bare sections (--raw)"),
    (["check", "--list-rules", FRAMES], "check: --list-rules takes no FILE"),
    (["dump", "--format", "readelf", "--json", FRAMES], "dump: --format frames the text dump"),
    (["stack", "--continue", "1"], "stack: --continue needs --remote"),
]


@pytest.mark.parametrize(("arguments", "message"), CASES, ids=[" ".join(c[0][:2]) for c in CASES])
def test_usage_errors_exit_2_with_one_line(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(arguments) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"pysframe: {message}") and captured.err.count("\n") == 1
    assert captured.out == ""


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["dump"])
    assert exit_info.value.code == 2
    assert "the following arguments are required" in capsys.readouterr().err


def test_check_address_with_raw_is_used(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--raw", "--address", "0x401000", RAW]) in (0, 1)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("columns", [None, "", "0", "-3", "abc", "40", "200"])
def test_help_is_as_wide_as_argparse_makes_it(
    columns: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parsers' width is shutil.get_terminal_size's (argparse's own), without shutil."""
    import shutil

    from pysframe.cli.usage import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
