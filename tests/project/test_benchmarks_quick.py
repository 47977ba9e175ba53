"""Every benchmark runs in --quick mode, so that none can rot unnoticed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysframe import SFrameSection, Version

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"
SCRIPTS = ("bench_open.py", "bench_lookup.py", "bench_dump.py", "bench_memory.py")

pytestmark = pytest.mark.skipif(not BENCHMARKS.is_dir(), reason="benchmarks/ not present")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-cache")


@pytest.fixture()
def common(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    monkeypatch.setenv("PYSFRAME_BENCH_CACHE", str(cache))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import common as module

    yield module


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick(script: str, cache: Path) -> None:
    assert "== synthetic 5,000 functions" in _run_quick(script, cache)


def _run_quick(script: str, cache: Path, timeout: float = 120) -> str:
    """Run a benchmark with ``--quick``; its output, once it succeeded without a traceback."""
    env = dict(os.environ, PYSFRAME_BENCH_CACHE=str(cache))
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def test_whole_process_benchmark_runs_quick(cache: Path) -> None:
    """bench_cli.py: start-up, dump (text, --json, --jsonl) and generate, with ratios."""
    out = _run_quick("bench_cli.py", cache)
    for expected in ("== start-up", "--version:", "ms above bare Python", "== dump synthetic"):
        assert expected in out, out
    rows = [line for line in out.splitlines() if line.lstrip().startswith("pysframe dump")]
    assert len(rows) == 3 and not any("(failed)" in row for row in rows), out
    if shutil.which(os.environ.get("OBJDUMP") or "objdump"):
        assert "objdump" in rows[0] and "memory" in rows[0], out


@pytest.mark.parametrize("version", [Version.V2, Version.V1])
def test_relayout_matches_the_builder(common: object, version: Version) -> None:
    v3 = common.build_synthetic(400, Version.V3)  # type: ignore[attr-defined]
    expected = common.build_synthetic(400, version)  # type: ignore[attr-defined]
    assert common.relayout_v3(v3, version) == expected  # type: ignore[attr-defined]


def test_minimal_elf_holds_the_section(common: object, tmp_path: Path) -> None:
    from elftools.elf.elffile import ELFFile

    data = common.build_synthetic(50, Version.V3)  # type: ignore[attr-defined]
    section = SFrameSection.from_bytes(data)
    path = common.write_elf(tmp_path / "x", data, section.abi)  # type: ignore[attr-defined]
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        assert elf.get_section_by_name(".sframe").data() == data
        assert elf["e_machine"] == "EM_X86_64"


def test_stack_benchmark_runs_quick(cache: Path) -> None:
    """bench_stack.py: pysframe stack PID against eu-stack -p PID, with ratios."""
    from conftest import require_program, unavailable
    from stack_support import Unavailable, check_ptrace

    require_program("eu-stack", "elfutils")
    try:
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    out = _run_quick("bench_stack.py", cache, timeout=300)
    assert "== Python's own start-up" in out and "== sleep" in out and "== python3" in out, out
    ratios = [line for line in out.splitlines() if "pysframe/eu-stack CPU" in line]
    assert len(ratios) >= 2, out
    assert "(exit" not in out, out  # every run succeeded
