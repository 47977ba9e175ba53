"""The ``dump``, ``info`` and ``lookup`` sub-commands: output, JSON and every error path."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS
from pysframe.cli import main
from pysframe.cli.report import GENERATE_HINT

V3 = CORPUS / "x86_64" / "v3"
FRAMES = str(V3 / "frames")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(args)
    out, err = capsys.readouterr()
    return status, out, err


def _corrupt_copy(tmp_path: Path) -> Path:
    """A copy of x86_64/v3/frames whose .sframe magic is broken."""
    path = tmp_path / "corrupt"
    shutil.copy(V3 / "frames", path)
    data = bytearray(path.read_bytes())
    data[0x3278:0x327A] = b"\x00\x00"  # .sframe starts at file offset 0x3278
    path.write_bytes(bytes(data))
    return path


def _no_sframe(tmp_path: Path) -> Path:
    """An ELF file without .sframe: the corpus executable with the section renamed and retyped."""
    path = tmp_path / "plain"
    result = (
        subprocess.run(
            ["objcopy", "--remove-section", ".sframe", FRAMES, str(path)], capture_output=True
        )
        if shutil.which("objcopy")
        else None
    )
    if result is None or result.returncode != 0:
        from elf_build import Sec, build_elf

        path.write_bytes(build_elf([Sec(".text", 1, b"\xc3", flags=6)]))
    return path


# -- dump --------------------------------------------------------------------------------------


def test_dump_section_option_and_not_sframe_section(capsys: pytest.CaptureFixture[str]) -> None:
    """objdump: ``Section %s does not contain SFrame data`` for a section of another type."""
    status, out, err = run(["dump", "--section", ".text", FRAMES], capsys)
    assert status == 1
    header = f"\n{FRAMES}:     file format elf64-x86-64\n\n"
    assert out == header + "Section .text does not contain SFrame data\n\n"
    assert err == f"pysframe: {FRAMES}: no SFrame data in the .text section\n"
    status, out, _ = run(["dump", "--section", ".sframe", FRAMES], capsys)
    assert status == 0
    assert out == (V3 / "frames.objdump-2.47.txt").read_text().replace("frames:", f"{FRAMES}:", 1)


def test_dump_missing_named_section(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(["dump", "--section", ".nothing", FRAMES], capsys)
    assert status == 1
    assert out.endswith("No .nothing section present\n\n")
    assert err == f"pysframe: {FRAMES}: no .nothing section\n"


def test_dump_readelf_format_for_v3(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["dump", "--format", "readelf", FRAMES], capsys)
    assert status == 0
    objdump = (V3 / "frames.objdump-2.47.txt").read_text()
    assert out == objdump.split("\n\n", 1)[1]  # the same dump without objdump's file line


def test_dump_objdump_format_for_v1(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(CORPUS / "x86_64/v1/lib.so")
    status, out, _ = run(["dump", "--format", "objdump", path], capsys)
    assert status == 0
    readelf = (CORPUS / "x86_64/v1/lib.so.readelf-2.40.txt").read_text()
    assert out == f"\n{path}:     file format elf64-x86-64\n\n" + readelf


def test_dump_json(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["dump", "--json", FRAMES, str(CORPUS / "s390x/v3/frames.o")], capsys)
    assert status == 0
    documents = json.loads(out)
    assert [d["file_format"] for d in documents] == ["elf64-x86-64", "elf64-s390"]
    first = documents[0]["sframe"]
    assert (first["version"], first["num_fdes"]) == (3, len(first["functions"]))
    assert first["functions"][0]["pc"] == 0x1020
    assert first["functions"][0]["rows"][0]["text"] == ["sp+16", "u", "f   "]


def test_dump_json_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(["dump", "--json", FRAMES, str(tmp_path / "missing")], capsys)
    assert status == 1
    assert len(json.loads(out)) == 1
    assert err.startswith("pysframe: ") and err.count("\n") == 1


def test_dump_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing")
    status, out, err = run(["dump", missing], capsys)
    assert (status, out) == (1, "")
    assert err == f"pysframe: {missing}: No such file or directory\n"


def test_dump_not_elf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not an ELF file\n")
    status, out, err = run(["dump", str(path)], capsys)
    assert (status, out) == (1, "")
    assert err == f"pysframe: {path}: not an ELF file\n"


def test_dump_unreadable_section_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file cut before its section header table: one line naming the problem, as for
    every other file; the file header was printed already."""
    path = tmp_path / "cut"
    path.write_bytes((CORPUS / "x86_64" / "v3" / "app").read_bytes()[:3000])
    for framing in ([], ["--format", "readelf"], ["--section", ".sframe"]):
        status, _, err = run(["dump", *framing, str(path)], capsys)
        assert status == 1
        assert err.startswith(f"pysframe: {path}: unreadable section headers (")
        assert err.count("\n") == 1 and "Traceback" not in err


def test_dump_no_sframe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """objdump prints ``No .sframe section present``; pysframe also says so on stderr."""
    path = _no_sframe(tmp_path)
    status, out, err = run(["dump", str(path)], capsys)
    assert status == 1
    assert out.endswith(":     file format elf64-x86-64\n\nNo .sframe section present\n\n")
    assert err == f"pysframe: {path}: no .sframe section ({GENERATE_HINT})\n"


def test_dump_corrupt_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _corrupt_copy(tmp_path)
    status, out, err = run(["dump", str(path)], capsys)
    assert status == 1
    assert out == f"\n{path}:     file format elf64-x86-64\n\n"
    assert err.startswith(f"pysframe: {path}: .sframe: bad SFrame magic")
    assert err.count("\n") == 1


def test_dump_continues_after_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(["dump", str(tmp_path / "missing"), FRAMES], capsys)
    assert status == 1
    assert out.endswith((V3 / "frames.objdump-2.47.txt").read_text().split("\n\n", 1)[1])
    assert err.count("\n") == 1


def test_dump_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["dump"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["dump", "--format", "gdb", FRAMES])
    assert exit_info.value.code == 2
    capsys.readouterr()


def _subprocess(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pysframe", *args], capture_output=True, check=False, **kwargs
    )  # type: ignore[call-overload]


def test_dump_into_a_closed_pipe_ends_quietly() -> None:
    """``pysframe dump X | head -1``: no traceback, no message."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pysframe", "dump", *([FRAMES] * 20)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()
    process.stdout.close()
    status = process.wait(timeout=60)
    assert process.stderr.read() == b""
    assert status == 0


def test_errors_in_a_real_process_have_no_traceback(tmp_path: Path) -> None:
    corrupt = _corrupt_copy(tmp_path)
    for args, status in (
        (["dump", str(tmp_path / "missing")], 1),
        (["dump", str(corrupt)], 1),
        (["info", str(corrupt)], 1),
        (["lookup", FRAMES, "0xzz"], 2),
        (["dump"], 2),
    ):
        result = _subprocess(args)
        assert result.returncode == status, args
        assert b"Traceback" not in result.stderr
        assert result.stderr.startswith(b"pysframe: ") or status == 2


# -- info --------------------------------------------------------------------------------------


def test_info_text(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["info", FRAMES], capsys)
    assert status == 0
    assert f"file:           {FRAMES} (elf64-x86-64)\n" in out
    assert "section:        .sframe at 0x3278, 498 bytes\n" in out
    assert "version:        3\n" in out
    assert "abi:            AMD64_ENDIAN_LITTLE\n" in out
    assert "flags:          FDE_SORTED, FDE_FUNC_START_PCREL\n" in out
    assert "functions:      15 (1 flex, 2 pc-mask, 0 signal)\n" in out
    assert "rows:           43\n" in out
    assert "text coverage:  " in out


def test_info_json(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["info", "--json", FRAMES, str(CORPUS / "x86_64/v1/app")], capsys)
    assert status == 0
    first, second = json.loads(out)
    assert (first["version"], first["functions"], first["rows"]) == (3, 15, 43)
    assert (second["version"], second["functions"], second["rows"]) == (1, 17, 112)
    assert 0 < first["coverage"] <= 1


def test_info_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing")
    assert run(["info", missing], capsys) == (
        1,
        "",
        f"pysframe: {missing}: No such file or directory\n",
    )
    plain = _no_sframe(tmp_path)
    assert run(["info", str(plain)], capsys) == (
        1, "", f"pysframe: {plain}: no .sframe section ({GENERATE_HINT})\n"
    )
    status, out, err = run(["info", str(_corrupt_copy(tmp_path))], capsys)
    assert (status, out) == (1, "")
    assert "bad SFrame magic" in err and err.count("\n") == 1


# -- lookup ------------------------------------------------------------------------------------


def test_lookup_text(capsys: pytest.CaptureFixture[str]) -> None:
    """Rows as objdump shows them: func idx [7] at 0x1270 has sp+8 then sp+4112 at 0x127b."""
    status, out, _ = run(["lookup", FRAMES, "0x1270", str(0x127B), "0x12c0"], capsys)
    assert status == 0
    assert out.splitlines() == [
        "0x1270 <big_frame>: function 7 [0x1270, 0x12c4) row 0 at 0x1270: CFA=rsp+8 "
        "FP=unchanged RA=[CFA-8]",
        "0x127b <big_frame+0xb>: function 7 [0x1270, 0x12c4) row 1 at 0x127b: CFA=rsp+4112 "
        "FP=unchanged RA=[CFA-8]",
        "0x12c0 <big_frame+0x50>: function 7 [0x1270, 0x12c4) row 2 at 0x12c0: CFA=rsp+8 "
        "FP=unchanged RA=[CFA-8]",
    ]


def test_lookup_symbols(capsys: pytest.CaptureFixture[str]) -> None:
    """SYMBOL[+OFFSET] wherever an address is accepted: big_frame is at 0x1270."""
    status, out, _ = run(["lookup", FRAMES, "big_frame", "big_frame+0xb", "big_frame+80"], capsys)
    assert status == 0
    assert [line.split(":")[0] for line in out.splitlines()] == [
        "0x1270 <big_frame>", "0x127b <big_frame+0xb>", "0x12c0 <big_frame+0x50>"
    ]
    status, out, _ = run(["lookup", "--json", FRAMES, "main+4"], capsys)
    assert json.loads(out)[0]["symbol"] == {"name": "main", "offset": 4}
    assert json.loads(out)[0]["pc"] == 0x10A4
    for bad, why in (
        ("no_such_function", "no function symbol no_such_function"),
        ("big_frame+0x54", "big_frame+0x54 is past the end of big_frame (0x54 bytes)"),
    ):
        assert run(["lookup", FRAMES, bad], capsys) == (1, "", f"pysframe: {FRAMES}: {why}\n")


def test_lookup_aarch64_signed_ra(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(CORPUS / "aarch64/v3/frames-pacb.o")  # .text and .text.startup both at 0
    status, out, _ = run(["lookup", path, ".text+0x30"], capsys)
    assert status == 0
    assert out.startswith(".text+0x30 <small_frame+0x10>: function 2 [0x20, 0x70) row 2 ")
    assert out.endswith("CFA=sp+48 FP=[CFA-48] RA=[CFA-40] (signed)\n")


def test_lookup_json_and_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(["lookup", "--json", FRAMES, "0x127b", "1"], capsys)
    assert status == 1  # one PC has no row
    found, missing = json.loads(out)
    assert found["function"]["index"] == 7 and found["row"]["index"] == 1
    assert found["cfa"] == {"reg": 7, "offset": 4112, "deref": False, "text": "rsp+4112"}
    assert found["ra"]["kind"] == "fixed" and found["ra"]["offset"] == -8
    assert missing == {"pc": 1, "symbol": None, "found": False}


def test_lookup_bad_pc_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0x", "-5", "12abc", "main+0xzz"):
        with pytest.raises(SystemExit) as exit_info:
            main(["lookup", FRAMES, bad])
        assert exit_info.value.code == 2
        assert "not an address" in capsys.readouterr().err or bad in ("-5", "main+0xzz")


def test_lookup_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing")
    assert run(["lookup", missing, "0x10"], capsys) == (
        1,
        "",
        f"pysframe: {missing}: No such file or directory\n",
    )
    plain = _no_sframe(tmp_path)
    status, _, err = run(["lookup", str(plain), "0x10"], capsys)
    assert (status, err) == (1, f"pysframe: {plain}: no .sframe section ({GENERATE_HINT})\n")
    status, _, err = run(["lookup", str(_corrupt_copy(tmp_path)), "0x10"], capsys)
    assert status == 1 and "bad SFrame magic" in err
