"""Running one per-file function over many files: in this process, in a pool of processes
(``-j N``: :class:`concurrent.futures.ProcessPoolExecutor`), or on a Dask cluster
(``--dask SCHEDULER_ADDRESS``: ``distributed.Client``, from the optional extra
``pysframe[dask]``).  The function and its results must pickle; results come back in the
order of the files, whatever order they finish in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from ..errors import SFrameError

Result = TypeVar("Result")

#: How long to wait for a Dask scheduler to answer, in seconds.
DASK_CONNECT_TIMEOUT = 30


def map_files(
    function: Callable[[str], Result],
    paths: Sequence[str],
    *,
    jobs: int = 1,
    dask: str | None = None,
    dask_timeout: float = DASK_CONNECT_TIMEOUT,
    on_done: Callable[[int, Result], None] | None = None,
) -> list[Result]:
    """``function(path)`` for every path, in the order given.

    ``dask``: the address of a Dask scheduler to run on (``jobs`` is then not used; SFrameError
    when it does not answer within ``dask_timeout`` seconds); else ``jobs`` processes (1: in
    this process).  ``on_done(count, result)`` is called as each result arrives."""
    if dask is not None:
        return _on_dask(function, paths, dask, dask_timeout, on_done)
    results: list[Result | None] = [None] * len(paths)
    done = 0
    if jobs <= 1 or len(paths) <= 1:
        for index, path in enumerate(paths):
            result = function(path)
            results[index] = result
            done += 1
            if on_done:
                on_done(done, result)
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, len(paths))) as pool:
            futures = {pool.submit(function, path): index for index, path in enumerate(paths)}
            for future in as_completed(futures):
                result = future.result()
                results[futures[future]] = result
                done += 1
                if on_done:
                    on_done(done, result)
    return [r for r in results if r is not None]


def _on_dask(
    function: Callable[[str], Result],
    paths: Sequence[str],
    address: str,
    timeout: float,
    on_done: Callable[[int, Result], None] | None,
) -> list[Result]:
    """Each file as one Dask task on the cluster whose scheduler is at ``address``."""
    try:
        distributed: Any = importlib.import_module("distributed")
    except ImportError:
        raise SFrameError("--dask needs Dask: pip install 'pysframe[dask]'") from None
    try:
        client = distributed.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise SFrameError(f"cannot reach the Dask scheduler at {address}: {error}") from None
    with client, client.as_current():
        futures = client.map(function, list(paths), pure=False)
        position = {future.key: index for index, future in enumerate(futures)}
        results: list[Result | None] = [None] * len(paths)
        try:
            for done, future in enumerate(distributed.as_completed(futures), start=1):
                result = future.result()
                results[position[future.key]] = result
                if on_done:
                    on_done(done, result)
        except Exception as error:
            # The per-file function reports the files' own problems in its results: anything
            # raised here is the cluster's (a worker or the scheduler without pysframe...).
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise SFrameError(
                f"the Dask cluster at {address} failed: {type(error).__name__}: {first_line} "
                "(the scheduler and the workers need pysframe installed)"
            ) from None
    return [r for r in results if r is not None]


__all__ = ["DASK_CONNECT_TIMEOUT", "map_files"]
