"""Many files at once: the same results in this process, in a process pool and on a local Dask
cluster (pysframe stats and the shared runner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import require_module
from pysframe.cli import main
from pysframe.tools.parallel import map_files
from pysframe.tools.stats import collect

CORPUS = Path(__file__).parent.parent / "data" / "corpus"
FILES = [str(p) for p in sorted(CORPUS.glob("x86_64/v3/*")) if p.suffix != ".txt"]


def test_results_come_back_in_the_order_of_the_files() -> None:
    seen: list[int] = []
    names = map_files(len, ["aaa", "b", "cc"], on_done=lambda count, _r: seen.append(count))
    assert names == [3, 1, 2] and seen == [1, 2, 3]
    assert map_files(len, ["aaa", "b", "cc"], jobs=2) == [3, 1, 2]


def test_stats_on_a_dask_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    distributed = require_module("distributed", "dask", "Dask is not installed (pysframe[dask])")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        assert collect(FILES, dask=address) == collect(FILES, jobs=1)
        assert main(["stats", "--dask", address, "--json", *FILES]) == 0
    on_dask = json.loads(capsys.readouterr().out)
    assert main(["stats", "--json", "-j", "2", *FILES]) == 0
    assert json.loads(capsys.readouterr().out) == on_dask
