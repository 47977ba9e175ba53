"""``pysframe check``: exit 0 clean, 1 findings, 2 unreadable; one line per finding; --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import CORPUS, corpus_files
from pysframe.cli import main
from test_validate import F0, F1, elf_with_moved_sframe_segment, elf_with_sframe_abi, v3


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_clean_corpus_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(["check", *map(str, corpus_files())], capsys)
    assert (status, out, err) == (0, "", "")


def test_kernel_profile_on_linked_v3(capsys: pytest.CaptureFixture[str]) -> None:
    path = CORPUS / "x86_64" / "v3" / "frames"
    assert run(["check", "--kernel", str(path)], capsys) == (0, "", "")


def test_kernel_profile_rejects_v1(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(CORPUS / "x86_64" / "v1" / "frames")
    status, out, _ = run(["check", "--kernel", path], capsys)
    assert status == 1
    assert out.splitlines() == [
        f"{path}: error: [version] section offset 0x2: version 1 (the kernel reads 3)",
        f"{path}: error: [flags] section offset 0x3: flag(s) FDE_FUNC_START_PCREL not set",
    ]


def test_findings_exit_1_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = elf_with_sframe_abi(tmp_path, 2)
    status, out, err = run(["check", str(path)], capsys)
    assert status == 1 and err == ""
    assert out == (
        f"{path}: error: [abi] section offset 0x4: section ABI AARCH64_ENDIAN_LITTLE but the "
        "ELF file is for AMD64_ENDIAN_LITTLE\n"
    )


def test_unreadable_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing"
    not_elf = tmp_path / "not-elf"
    not_elf.write_bytes(b"hello, world")
    status, out, err = run(["check", str(missing), str(not_elf)], capsys)
    assert status == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2 and "Traceback" not in err
    assert lines[0].startswith(f"pysframe: {missing}: ")
    assert lines[1] == f"pysframe: {not_elf}: not an ELF file"


def test_no_sframe_section_is_unreadable(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(CORPUS / "x86_64" / "v3" / "frames")
    status, _, err = run(["check", "--section", ".nosuch", path], capsys)
    assert status == 1 and err == f"pysframe: {path}: no .nosuch section\n"


def test_worst_status_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = str(CORPUS / "x86_64" / "v3" / "frames")
    bad = str(elf_with_moved_sframe_segment(tmp_path))
    assert run(["check", clean, bad], capsys)[0] == 1
    assert run(["check", clean, bad, str(tmp_path / "missing")], capsys)[0] == 1


def test_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = str(CORPUS / "x86_64" / "v3" / "frames")
    bad = str(elf_with_moved_sframe_segment(tmp_path))
    missing = str(tmp_path / "missing")
    status, out, err = run(["check", "--json", clean, bad, missing], capsys)
    assert status == 1 and err == ""
    document = json.loads(out)
    assert document["status"] == 1
    assert json.loads(out)["files"][2]["status"] == "unreadable"
    files = {entry["file"]: entry for entry in document["files"]}
    assert files[clean] == {"file": clean, "status": "clean", "findings": []}
    (finding,) = files[bad]["findings"]
    assert files[bad]["status"] == "findings"
    assert finding["rule"] == "elf-segment" and finding["severity"] == "error"
    assert set(finding) == {"severity", "rule", "function", "offset", "message"}
    assert files[missing]["status"] == "unreadable" and files[missing]["error"]


def test_raw_sections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.sframe"
    good.write_bytes(v3())
    gap = tmp_path / "gap.sframe"
    gap.write_bytes(v3([F0, F1], gap=b"\0"))
    assert run(["check", "--raw", str(good)], capsys) == (0, "", "")
    status, out, _ = run(["check", "--raw", str(gap)], capsys)
    assert status == 1 and "warning: [fre-gap] function 1" in out
    assert run(["check", "--raw", "--errors-only", str(gap)], capsys) == (0, "", "")


def test_gaps_option(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(CORPUS / "x86_64" / "v3" / "lib.so")
    status, out, _ = run(["check", "--gaps", path], capsys)
    assert status == 1
    assert out and all("warning: [fde-gap]" in line for line in out.splitlines())


def test_list_rules(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["check", "--list-rules"], capsys)
    assert status == 0 and "fde-sorted" in out and "flex-control" in out


def test_no_files_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["check"], capsys)[0] == 2
