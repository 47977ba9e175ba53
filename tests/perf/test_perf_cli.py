"""``pysframe perf`` as a command: several recordings into one profile (in this process, in
worker processes with ``-j``, on a Dask cluster), the progress bar of one long recording, and
bad input as one line.

Two recordings of tests/data/perf/perfprog.c (threads and a child process; 3 million
iterations, a few hundred samples) are made with ``perf record --call-graph dwarf``; the folded
stacks of both together must be the sum of each one's, whichever way they are read.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import require_module, unavailable
from perf_support import Unavailable, build_program, record
from pysframe.cli import main

OPTIONS = ("-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,4096")


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("perf-cli")
    try:
        program = build_program(out, "perfprog")
        return [
            record(out / f"run{number}.data", [str(program), "3"], options=OPTIONS)
            for number in range(2)
        ]
    except Unavailable as why:
        unavailable(why)


def folded(capsys: pytest.CaptureFixture[str], *arguments: str) -> Counter[str]:
    """The folded stacks ``pysframe perf report --format folded ARGUMENTS`` prints, with
    their counts."""
    assert main(["perf", "report", "--format", "folded", *arguments]) == 0
    counts: Counter[str] = Counter()
    for line in capsys.readouterr().out.splitlines():
        stack, _, count = line.rpartition(" ")
        counts[stack] += int(count)
    return counts


def test_two_recordings_are_the_sum_of_each(
    recordings: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = (folded(capsys, str(path)) for path in recordings)
    assert sum(first.values()) > 30 and sum(second.values()) > 30
    both = folded(capsys, "-j", "1", *map(str, recordings))
    assert both == first + second
    assert folded(capsys, "-j", "2", *map(str, recordings)) == both


def test_two_recordings_on_a_dask_cluster(
    recordings: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    distributed = require_module("distributed", "dask", "Dask is not installed (pysframe[dask])")
    alone = folded(capsys, "-j", "1", *map(str, recordings))
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        on_dask = folded(capsys, "--dask", cluster.scheduler_address, *map(str, recordings))
    assert on_dask == alone


def test_one_recording_shows_its_bytes_read(
    recordings: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["perf", "report", "--format", "folded", "--progress", str(recordings[0])]) == 0
    err = without_warnings(capsys.readouterr().err)
    bars = [part for part in err.split("\r") if part.strip()]
    assert bars and all(part.startswith("[") and " MB " in part for part in bars), err
    assert err.endswith("\r")  # the bar is wiped at the end
    assert main(["perf", "report", "--format", "folded", "--no-progress", str(recordings[0])]) == 0
    assert without_warnings(capsys.readouterr().err) == ""


def without_warnings(err: str) -> str:
    """``err`` without the warning a recording made on a loaded machine may get (samples the
    kernel dropped: LOST records), which says nothing of the progress bar."""
    return re.sub(r"pysframe: warning: [^\r\n]*samples were lost[^\r\n]*\n", "", err)


def test_bad_input_is_one_line(
    recordings: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.data"
    assert main(["perf", "script", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pysframe: {missing}: ") and err.count("\n") == 1, err
    cut = tmp_path / "cut.data"
    cut.write_bytes(recordings[0].read_bytes()[: recordings[0].stat().st_size * 2 // 3])
    assert main(["perf", "report", "--format", "folded", str(cut)]) in (0, 1)
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") <= 2, err
    assert main(["perf", "report", "--time", "soon", str(recordings[0])]) == 2
    assert "pysframe" in capsys.readouterr().err
    assert main(["perf", "script", "-", "-"]) == 2
