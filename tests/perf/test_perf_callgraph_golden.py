"""perf report's table with children and call graphs, and perf script's fields, against perf
6.1 itself, on recordings made here and now, through the command line.

Two recordings with ``--call-graph dwarf``: the C program and its shared library of
tests/data/perf/profiled.c (built without frame pointers), and a Python workload (python3.11
is a non-PIE executable whose stripped functions perf names by their address in the process,
``0x6456ee``, not in the file).  Both run with ``LD_BIND_NOW=1``: ld.so's lazy-binding
trampoline is where pysframe's walks end early (README, "Profiles from perf.data").  The few
samples whose walks still part ways (pysframe's deeper, or perf's) are left out of both
commands with ``--time`` (ranges around them, which both read alike): a sample more or less
through ``main`` would change every percentage of the graphs under it, which is the walks'
business (tests/perf/test_perf_walk.py), not the report's.

* ``pysframe perf report -i FILE --stdio ...`` against ``perf report -i FILE --stdio ...``
  for perf's default (children, the caller graph), ``--no-children``, ``-g caller``, ``callee``,
  ``fractal``, ``flat``, ``folded``, ``none``, values, thresholds, ``--percent-limit`` and
  ``--sort``: at least 99% of the lines equal, in order.  And the writer on the stacks perf
  unwound itself (perf_report_support.profile_of_perf_stacks), every sample.
* ``pysframe perf script -F ...`` against ``perf script -F ...``.

What counts as perf's mistake, and is left out of the comparison: perf's closing tip
(``# (Tip: ...)``, picked at random) and its line about the header; fractal's ``[...]`` lines,
which perf prints `` (inlined)`` after by reading a symbol it never initialized
(ui/stdio/hist.c init_rem_hits: malloc, no memset).
"""

from __future__ import annotations

import difflib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import unavailable
from perf_report_support import profile_of_perf_stacks
from perf_support import PERF, Unavailable, build_profiled, check_perf, record
from pysframe.perf.callgraph import GraphOptions
from pysframe.perf.report import TopOptions, parse_sort, write_top

#: At least this share of perf's lines must be pysframe's, in order.
AGREEMENT = 0.99
#: The Python workload (its stacks hold functions of python3.11, libpython, _json and libc).
WORKLOAD = (
    "import json\n"
    "total = 0\n"
    "for i in range(60000):\n"
    "    total += len(json.dumps({'a': i, 'b': [i, str(i)]}))\n"
    "print(total)\n"
)
#: perf report's options, as both take them, and what they print.
VARIANTS = {
    "default": [],
    "no-children": ["--no-children"],
    "no-children caller": ["--no-children", "-g", "caller"],
    "children callee": ["-g", "callee"],
    "fractal": ["-g", "fractal"],
    "flat": ["--no-children", "-g", "flat"],
    "folded count": ["-g", "folded,0.5,caller,count"],
    "period and limit": ["-g", "graph,2,period", "--percent-limit", "1"],
    "limit then threshold": ["--percent-limit", "3", "-g", "graph,0.7"],
    "limit then order": ["--percent-limit", "2", "-g", "caller", "--no-children"],
    "no graph": ["-g", "none"],
    "sort dso,sym,pid": ["--sort", "dso,sym,pid", "--no-children"],
    "sort sym": ["--sort", "sym"],
    "sort symbol (ipc)": ["--sort", "comm,dso,symbol", "--no-children", "-G"],
    "sort pid,comm": ["--sort", "pid,comm", "-g", "none"],
}


#: No lazy binding: ld.so's trampoline, where pysframe's walks end early, is never entered.
BIND_NOW = {"LD_BIND_NOW": "1"}


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The C program's recording, and the ``--time`` arguments of its agreeing samples."""
    out = tmp_path_factory.mktemp("callgraph")
    try:
        program = build_profiled(out)
        data = record(
            out / "perf.data", [str(program), "0.5"],
            options=("-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,8192",
                     "--sample-cpu"),
            environment=BIND_NOW,
        )  # fmt: skip
    except Unavailable as why:
        unavailable(why)
    return data, agreeing_samples(data)


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The Python workload's recording, and the ``--time`` arguments of its agreeing
    samples."""
    out = tmp_path_factory.mktemp("callgraph-python")
    python3 = "/usr/bin/python3.11"
    if not Path(python3).exists():
        python3 = sys.executable
    try:
        data = record(
            out / "perf.data", [python3, "-c", WORKLOAD],
            options=("-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,4096"),
            environment=BIND_NOW,
        )  # fmt: skip
    except Unavailable as why:
        unavailable(why)
    return data, agreeing_samples(data)


def _sample_times(text: str) -> dict[int, str]:
    """Each sample of ``perf script -F tid,time,ip,sym,symoff,dso --ns`` text by its time (in
    ns), with its text."""
    samples: dict[int, str] = {}
    for sample in text.split("\n\n"):
        head = sample.split("\n", 1)[0].split()
        if len(head) >= 2:
            seconds, nanoseconds = head[1].rstrip(":").split(".")
            samples[int(seconds) * 10**9 + int(nanoseconds)] = sample
    return samples


def agreeing_samples(data: Path) -> list[str]:
    """``--time`` with the ranges that leave out the samples whose user frames pysframe and
    perf walk differently (none when they agree on all), at most one in a hundred."""
    arguments = ["script", "-i", str(data), "--no-inline", "-F", "tid,time,ip,sym,symoff,dso",
                 "--ns"]  # fmt: skip
    theirs = _sample_times("\n".join(perf_lines(*arguments)))
    ours = _sample_times("\n".join(pysframe_lines(*arguments)))
    assert ours.keys() == theirs.keys()
    differing = sorted(time for time in theirs if theirs[time] != ours[time])
    assert len(differing) <= len(theirs) // 100, differing
    if not differing:
        return []
    ranges, start = [], min(theirs)
    for time in differing:
        if time > start:
            ranges.append(f"{_seconds(start)},{_seconds(time - 1)}")
        start = time + 1
    ranges.append(f"{_seconds(start)},")
    return ["--time", " ".join(ranges)]


def _seconds(time: int) -> str:
    return f"{time // 10**9}.{time % 10**9:09d}"


def perf_lines(*arguments: str) -> list[str]:
    """What perf prints, without what it picks at random or says of its own options."""
    check_perf()
    done = subprocess.run(
        [PERF, *arguments], capture_output=True, text=True, timeout=300, check=False,
        errors="surrogateescape",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    lines = done.stdout.splitlines()
    if lines[:1] == [
        "# To display the perf.data header info, please use --header/--header-only options."
    ]:
        lines = lines[2:]
    while lines and (lines[-1] in ("#", "") or lines[-1].startswith("# (Tip:")):
        lines.pop()
    return [re.sub(r"--\[\.\.\.\] \(inlined\)$", "--[...]", line) for line in lines]


def pysframe_lines(*arguments: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", *arguments], capture_output=True, text=True,
        timeout=600, check=False, errors="surrogateescape",
    )  # fmt: skip
    # The one warning a busy machine may give (perf record lost samples; perf says so too).
    others = [line for line in done.stderr.splitlines()
              if not re.match(r"pysframe: warning: .*: \d+ samples were lost ", line)]  # fmt: skip
    assert done.returncode == 0 and not others, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def agreement(theirs: list[str], ours: list[str]) -> tuple[float, str]:
    """The share of perf's lines (of the longer text) that are pysframe's, in order, and a
    diff of the first differences."""
    matcher = difflib.SequenceMatcher(None, theirs, ours, autojunk=False)
    same = sum(block.size for block in matcher.get_matching_blocks())
    diff = "\n".join(list(difflib.unified_diff(theirs, ours, "perf", "pysframe", n=1,
                                               lineterm=""))[:40])  # fmt: skip
    return same / max(len(theirs), len(ours), 1), diff


def _report_agrees(recording: tuple[Path, list[str]], options: list[str]) -> None:
    data, agreeing = recording
    arguments = ["report", "-i", str(data), "--stdio", "--no-inline", *agreeing, *options]
    theirs = perf_lines(*arguments)
    ours = pysframe_lines(*arguments)
    assert len(theirs) > 10  # its head and some rows
    share, diff = agreement(theirs, ours)
    assert share >= AGREEMENT, f"{share:.4f} of the lines agree\n{diff}"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_report_of_the_c_program_is_perfs(
    profiled: tuple[Path, list[str]], variant: str
) -> None:
    _report_agrees(profiled, VARIANTS[variant])


@pytest.mark.parametrize("variant", [
    "default", "no-children", "no-children caller", "children callee", "period and limit",
    "sort dso,sym,pid", "no graph",
])  # fmt: skip
def test_report_of_python_is_perfs(python: tuple[Path, list[str]], variant: str) -> None:
    _report_agrees(python, VARIANTS[variant])


def _options(arguments: list[str], profile: object) -> TopOptions:
    """The table's options for perf's ``arguments``, as the command line makes them."""
    from pysframe.cli.perf import parse_call_graph

    children, graph = True, GraphOptions()
    sort, sort_order, limit = TopOptions().sort, None, 0.0
    words = iter(arguments)
    for word in words:
        if word == "--no-children":
            children = False
        elif word == "-g":
            graph = parse_call_graph(next(words))  # type: ignore[assignment]
        elif word == "-G":
            graph = GraphOptions(order="caller")
        elif word == "--sort":
            sort_order = next(words)
            sort = parse_sort(sort_order)
        elif word == "--percent-limit":
            limit = float(next(words))
            graph = GraphOptions(graph.mode, limit, graph.print_limit, graph.order, graph.value)
    return TopOptions(sort, children, graph, limit, sort_order)


@pytest.mark.parametrize("variant", [
    "default", "no-children caller", "children callee", "fractal", "folded count",
    "period and limit", "sort dso,sym,pid",
])  # fmt: skip
def test_report_of_perfs_python_stacks_is_perfs(
    python: tuple[Path, list[str]], variant: str
) -> None:
    data = python[0]
    profile = profile_of_perf_stacks(data)
    out = io.StringIO()
    write_top(profile, out, options=_options(VARIANTS[variant], profile))
    theirs = perf_lines("report", "-i", str(data), "--stdio", "--no-inline", *VARIANTS[variant])
    ours = out.getvalue().splitlines()
    while ours and ours[-1] == "":
        ours.pop()
    if "--no-children" not in VARIANTS[variant]:
        # The rows of python3.11's unnamed callers, at their address in the process.
        assert any(re.search(r"python3\.11 +\[\.\] 0x00000000006", line) for line in theirs)
    share, diff = agreement(theirs, ours)
    assert share >= AGREEMENT, f"{share:.4f} of the lines agree\n{diff}"


# -- perf script -F ---------------------------------------------------------------------------

#: -F lists, as both take them; those without ip give the same text whatever the walks.
FIELDS = [
    None, "comm,tid,ip,sym", "comm,pid,tid,time", "tid,ip,sym,symoff,dso", "comm,ip",
    "period,event", "comm,time,period,cpu", "+pid", "-period,-dso", "comm,cpu,event,ip",
    "pid,tid,time,ip,dso", "ip",
]  # fmt: skip


@pytest.mark.parametrize("fields", FIELDS, ids=lambda fields: fields or "default")
def test_script_fields_are_perfs(profiled: tuple[Path, list[str]], fields: str | None) -> None:
    data, agreeing = profiled
    arguments = ["script", "-i", str(data), "--no-inline", *agreeing,
                 *(["-F", fields] if fields else [])]  # fmt: skip
    theirs, ours = perf_lines(*arguments), pysframe_lines(*arguments)
    assert len(theirs) > 100
    assert ours == theirs


def test_script_nanoseconds_are_perfs(profiled: tuple[Path, list[str]]) -> None:
    arguments = ["script", "-i", str(profiled[0]), "-F", "comm,pid,tid,cpu,time,period", "--ns"]
    assert pysframe_lines(*arguments) == perf_lines(*arguments)


@pytest.mark.parametrize("ranges", [1, 2])
def test_report_of_time_slices_is_perfs(profiled: tuple[Path, list[str]], ranges: int) -> None:
    """``--time``: the samples in its ranges, and the header that names them, as perf's
    (builtin-report.c hists__fprintf_nr_sample_events: `` (time slices: TEXT)``)."""
    data = profiled[0]
    times = sorted(_sample_times("\n".join(perf_lines(
        "script", "-i", str(data), "--no-inline", "-F", "tid,time,ip,sym,symoff,dso", "--ns"
    ))))  # fmt: skip
    assert len(times) > 100
    quarter = len(times) // 4
    if ranges == 1:  # the middle half
        text = f"{_seconds(times[quarter])},{_seconds(times[3 * quarter])}"
    else:  # the first quarter, and from the last quarter on
        text = f"{_seconds(times[0])},{_seconds(times[quarter])} {_seconds(times[3 * quarter])},"
    arguments = ["report", "-i", str(data), "--stdio", "--no-inline", "--time", text,
                 "--sort", "pid,comm", "-g", "none"]  # fmt: skip
    theirs, ours = perf_lines(*arguments), pysframe_lines(*arguments)
    headers = [line for line in theirs if line.startswith("# Samples: ")]
    assert len(headers) == 1 and f" (time slices: {text})" in headers[0]
    # the samples counted per thread depend on no walk: the table is perf's, line for line
    assert ours == theirs
