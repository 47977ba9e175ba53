"""The streamed JSON dump (``pysframe.tools.dump``, ``dump --json`` and ``--jsonl``).

The oracle is the row model: each function's rows as ``Function.rows`` decodes them one at a
time (rules from ``pysframe.format.rules``), with the cells of ``tools.dump.form_cells``; the
streamed writer reads every row in bulk and encodes each row form once, so the two paths share
only the cell formatting.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from conftest import CORPUS, corpus_files
from pysframe import SFrameSection
from pysframe.cli import main
from pysframe.elf.reader import ElfReader
from pysframe.elf.sframe import find_sframe
from pysframe.format.builder import SFrameBuilder
from pysframe.format.constants import Abi, FdeType, PcType, Version
from pysframe.format.model import CfaRule, Function, RegRule
from pysframe.format.walk import scan_rows
from pysframe.tools import dump
from pysframe.tools.dump import (
    form_cells,
    function_json_lines,
    function_json_pieces,
    section_header_json,
    section_json,
)

FRAMES = str(CORPUS / "x86_64/v3/frames")


def _rule(rule: RegRule) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": rule.kind.value}
    if rule.kind.value in ("fixed", "saved", "value"):
        out["offset"] = rule.offset
        out["reg"] = rule.reg
    return out


def _dumper_pc(section: SFrameSection, function: Function) -> int:
    """``func_start_pc_vma`` as objdump 2.47 prints it: the stored start plus the section's
    address, plus with FDE_FUNC_START_PCREL where the FDE's start field is as
    sframe_decoder_get_offsetof_fde_start_addr puts it (header size + index * FDE size, 20
    bytes in V2 and 16 in V3, sfh_fdeoff ignored); 2.40 (V1) has no PCREL."""
    pc = function.start_field + section.section_address
    if section.version is not Version.V1 and section.header.pcrel:
        fde_size = 20 if section.version is Version.V2 else 16
        pc += section.header.size + function.index * fde_size
    return pc % 2**64


def model_json(section: SFrameSection) -> dict[str, Any]:
    """What the JSON dump holds, from the row model, one function at a time."""
    functions = []
    for function in section:
        rows = []
        # PCMASK rows show their start offset alone, the others the function's pc plus it.
        origin = 0 if function.pc_type is PcType.MASK else _dumper_pc(section, function)
        flex = function.fde_type is FdeType.FLEX
        for row in function.rows:
            cfa = row.cfa
            cells = form_cells(section, flex, row.info, row.words)
            rows.append(
                {
                    "address": (origin + row.start_offset) % 2**64,
                    "start_offset": row.start_offset,
                    "info": row.info,
                    "words": list(row.words),
                    "cfa": None
                    if cfa is None
                    else {"reg": cfa.reg, "offset": cfa.offset, "deref": cfa.deref},
                    "fp": _rule(row.fp),
                    "ra": _rule(row.ra),
                    "mangled_ra": row.mangled_ra,
                    "text": None if cells is None else list(cells),
                }
            )
        functions.append(
            {
                "index": function.index,
                "pc": _dumper_pc(section, function),
                "start": function.start,
                "size": function.size,
                "start_field": function.start_field,
                "fre_type": function.fre_type.name,
                "pc_type": function.pc_type.name,
                "fde_type": function.fde_type.name,
                "signal": function.signal_frame if section.version is Version.V3 else False,
                "pauth_key": function.pauth_key.name if section.abi.is_aarch64 else None,
                "rep_size": function.rep_size,
                "rows": rows,
            }
        )
    return {**section_header_json(section), "functions": functions}


def corpus_sections() -> list[tuple[str, SFrameSection]]:
    found = []
    for path in corpus_files():
        with ElfReader.open(str(path)) as image:
            sframe = find_sframe(image, None)
            if sframe is not None:
                found.append((str(path.relative_to(CORPUS)), sframe.decode(True)))
    return found


SECTIONS = corpus_sections()


def test_the_corpus_covers_every_version_and_abi() -> None:
    assert {s.version for _, s in SECTIONS} == {Version.V1, Version.V2, Version.V3}
    assert len({s.abi for _, s in SECTIONS}) >= 3


@pytest.mark.parametrize(("name", "section"), SECTIONS, ids=[name for name, _ in SECTIONS])
def test_streamed_json_equals_the_row_model(name: str, section: SFrameSection) -> None:
    expected = model_json(section)
    assert section_json(section) == expected
    lines = [json.loads(line) for line in function_json_lines(section)]
    assert lines == expected["functions"]


def test_header_fields_of_a_known_section() -> None:
    (section,) = [s for name, s in SECTIONS if name == "x86_64/v3/frames"]
    header = section_header_json(section)
    assert header["version"] == 3 and header["abi"] == "AMD64_ENDIAN_LITTLE"
    assert header["flags"] == ["FDE_SORTED", "FDE_FUNC_START_PCREL"]
    assert header["cfa_fixed_ra_offset"] == -8 and header["num_fdes"] == len(section)


def _many_functions(count: int) -> SFrameSection:
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3)
    saved_fp = RegRule.at_cfa(-16)
    for index in range(count):
        function = builder.add_function(0x1000 + 0x40 * index, 0x40)
        function.add_row(0, CfaRule(7, 8)).add_row(1, CfaRule(7, 16), saved_fp)
        function.add_row(4 + index % 8, CfaRule(6, 16), saved_fp)
    return builder.build()


def test_memory_does_not_grow_with_the_functions_written() -> None:
    """The pieces are written and dropped: beyond the bulk row arrays (which the text dump
    reads too), streaming 20,000 functions' JSON takes a small fraction of its size, where a
    document built in memory would hold all of it."""
    section = _many_functions(20_000)
    total, beyond_rows = _streamed(section, function_json_lines)
    assert total > 15_000_000
    assert beyond_rows < total / 10


def _streamed(
    section: SFrameSection, pieces: Callable[[SFrameSection], Iterable[str]]
) -> tuple[int, int]:
    """The length of the text ``pieces`` gives, and the peak of Python's allocations (numpy's
    included) while it is taken piece by piece and dropped, beyond that of the bulk row read
    alone (:func:`scan_rows`, which every dump makes first)."""
    section.table  # noqa: B018 (read before measuring, as both paths need it)
    tracemalloc.start()
    scan_rows(section)
    _, rows_alone = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    total = 0
    tracemalloc.start()
    for piece in pieces(section):
        total += len(piece)
    _, streaming = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return total, streaming - rows_alone


def _run(arguments: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(arguments)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_json_is_one_list_of_documents(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(["dump", "--json", FRAMES, FRAMES], capsys)
    assert status == 0
    first, second = json.loads(out)
    assert first == second and first["file"] == FRAMES and first["section"] == ".sframe"
    (section,) = [s for name, s in SECTIONS if name == "x86_64/v3/frames"]
    assert first["sframe"] == model_json(section)


def test_cli_jsonl_has_a_section_record_then_one_line_per_function(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = _run(["dump", "--jsonl", FRAMES], capsys)
    assert status == 0
    records = [json.loads(line) for line in out.splitlines()]
    (section,) = [s for name, s in SECTIONS if name == "x86_64/v3/frames"]
    assert records[0]["record"] == "section" and records[0]["file"] == FRAMES
    assert records[0]["sframe"] == section_header_json(section)
    assert [r["record"] for r in records[1:]] == ["function"] * len(section)
    assert [r["function"] for r in records[1:]] == model_json(section)["functions"]


def test_cli_json_bad_files_write_nothing_for_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken"
    data = bytearray(Path(FRAMES).read_bytes())
    with ElfReader.open(FRAMES) as image:
        sframe = find_sframe(image, None)
        assert sframe is not None
        offset = image.section(sframe.name).offset
    data[offset + 28 + 16 * 3 - 4 : offset + 28 + 16 * 3] = b"\xff\xff\xff\x7f"  # an FRE offset
    broken.write_bytes(bytes(data))
    status, out, err = _run(["dump", "--json", str(broken), FRAMES], capsys)
    assert status == 1 and err.count("\n") == 1 and err.startswith(f"pysframe: {broken}: ")
    assert [d["file"] for d in json.loads(out)] == [FRAMES]
    status, out, err = _run(["dump", "--json", str(broken)], capsys)
    assert status == 1 and json.loads(out) == []


def long_functions() -> SFrameSection:
    """Functions of 0 to 23 rows, one of them PCMASK: with windows of 5 rows and 3 functions,
    some functions are written in several windows and others several to a window."""
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V3)
    saved_fp = RegRule.at_cfa(-16)
    start = 0x1000
    for count in (0, 1, 12, 2, 2, 2, 5, 6, 23, 2):
        masked = count == 6
        function = builder.add_function(start, 0x100, pc_type=int(masked), rep_size=16 * masked)
        for row in range(count):
            fp = saved_fp if row % 3 else RegRule.untracked()
            function.add_row(row % 16 if masked else 2 * row, CfaRule(7, 8 + 8 * (row % 4)), fp)
        start += 0x100
    return builder.build()


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dump, "JSON_CHUNK_ROWS", 5)
    monkeypatch.setattr(dump, "CHUNK_FUNCTIONS", 3)


def test_functions_cut_into_windows_of_rows_give_the_same_json(
    small_windows: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    section = long_functions()
    windows = list(dump.function_windows(scan_rows(section).row_base, 5))
    assert (7, 8, True) in windows and (3, 5, False) in windows  # the cases are there
    assert section_json(section) == model_json(section)
    assert [json.loads(line) for line in function_json_lines(section)] == model_json(section)[
        "functions"
    ]
    pieces = list(function_json_pieces(section))
    assert max(len(piece) for _, piece in pieces) < 2_000
    path = tmp_path / "section.sframe"
    path.write_bytes(section.data)
    status, out, _ = _run(["dump", "--jsonl", str(path)], capsys)
    assert status == 0
    lines = [json.loads(line) for line in out.splitlines()[1:]]
    assert [line["function"] for line in lines] == model_json(section)["functions"]


def test_windows_of_rows_change_no_byte(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same document and lines, byte for byte, whatever the windows."""
    path = tmp_path / "section.sframe"
    path.write_bytes(long_functions().data)
    outputs = []
    for rows, functions in ((1 << 16, 1 << 12), (5, 3), (1, 1)):
        monkeypatch.setattr(dump, "JSON_CHUNK_ROWS", rows)
        monkeypatch.setattr(dump, "CHUNK_FUNCTIONS", functions)
        outputs.append(
            [_run(["dump", option, str(path)], capsys)[1] for option in ("--json", "--jsonl")]
        )
    assert outputs[0] == outputs[1] == outputs[2]


def test_memory_does_not_grow_with_the_rows_of_one_function() -> None:
    """One function of 100,000 rows: its JSON (25 MB) is written in pieces of a window of rows
    each (4,096: 1 MB); beyond the bulk row arrays, streaming takes a small fraction of it."""
    builder = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE, Version.V2)
    function = builder.add_function(0x1000, 0x80000)
    for row in range(100_000):
        function.add_row(4 * row, CfaRule(7, 8 + 8 * (row % 4)))
    total, beyond_rows = _streamed(
        builder.build(), lambda section: (piece for _, piece in function_json_pieces(section))
    )
    assert total > 20_000_000
    assert beyond_rows < total / 10
