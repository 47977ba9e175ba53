"""The profile writers against the real tools, on recordings made here and now.

* the top table against ``perf report --stdio --no-children --sort comm,dso,sym`` on a
  profile of the recording's sample IPs named as perf names them (``profile_of_ips``);
* folded stacks against perf's own stackcollapse script (``perf script report
  stackcollapse``) on a profile of the stacks perf unwound (``profile_of_perf_script``);
* pprof read back by ``go tool pprof`` (``-top`` against the top table, ``-traces`` against
  the profile's stacks);
* speedscope against the JSON schema the speedscope package publishes;
* the flame graph in headless Chromium (tests/node/flamegraph_check.mjs).

A missing tool skips its test with a message.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import require, require_module, unavailable
from perf_report_support import (
    SCRIPT_FIELDS,
    header_lines,
    parse_top,
    profile_of_ips,
    profile_of_perf_script,
)
from perf_support import Unavailable, build_program, perf_output, record
from pysframe.cli import main
from pysframe.perf.flamegraph import flame_tree, write_flamegraph
from pysframe.perf.pprof import write_pprof
from pysframe.perf.profile import Profile
from pysframe.perf.report import TopRow, folded_stacks, module_short_name, top_table, write_top
from pysframe.perf.speedscope import write_speedscope

NODE_TOOLS = Path(__file__).parent.parent / "node"
SPEEDSCOPE_SCHEMA = NODE_TOOLS / "node_modules/speedscope/dist/release/file-format-schema.json"
#: A Python workload with a few hundred functions on its stacks.
WORKLOAD = (
    "import json\n"
    "total = 0\n"
    "for i in range(120000):\n"
    "    total += len(json.dumps({'a': i, 'b': [i, str(i)]}))\n"
    "print(total)\n"
)
#: At most this share of perf report's rows may name their symbol otherwise (perf and
#: pysframe pick different aliases of one address: libc's __GI_ names, versioned names,
#: PLT stubs that perf leaves unnamed).
NAMING_TOLERANCE = 0.05


@pytest.fixture(scope="module", params=["python", "threads"])
def recording(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DWARF call-graph recording: of a Python workload, or of perfprog's threads and
    child process."""
    out = tmp_path_factory.mktemp("recording")
    try:
        if request.param == "python":
            program = [sys.executable, "-c", WORKLOAD]
        else:
            program = [str(build_program(out, "perfprog")), "6"]
        return record(
            out / "perf.data", program,
            options=("-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,4096"),
        )  # fmt: skip
    except Unavailable as error:
        unavailable(error)


@pytest.fixture(scope="module")
def perf_stacks(recording: Path) -> Profile:
    """The recording's stacks as perf unwinds them."""
    text = perf_output("script", "-i", str(recording), "-F", SCRIPT_FIELDS, "--ns")
    return profile_of_perf_script(text, str(recording))


# -- top --------------------------------------------------------------------------------------


def test_top_table_matches_perf_report(recording: Path) -> None:
    profile = profile_of_ips(recording)
    out = io.StringIO()
    write_top(profile, out)
    ours_text = out.getvalue()
    theirs_text = perf_output(
        "report", "-i", str(recording), "--stdio", "--no-children", "--sort", "comm,dso,sym",
        "-g", "none",
    )  # fmt: skip
    [ours], [theirs] = parse_top(ours_text), parse_top(theirs_text)
    assert theirs, "perf report printed no rows"
    # perf cuts commands to its column's width (the longest name its threads had when it
    # measured them); the table here does not.
    width = max(len(row.comm) for row in theirs)

    def key(row: object) -> tuple[str, ...]:
        percents, comm = row.percents, row.comm[:width]  # type: ignore[attr-defined]
        return (*percents, comm, row.dso)  # type: ignore[attr-defined]

    # Every row's percentage, command, module and symbol match, but for the symbols perf
    # names otherwise (which can make one row of two, or two of one).
    full = Counter((*key(row), row.symbol) for row in ours)
    common = full & Counter((*key(row), row.symbol) for row in theirs)
    renamed = len(theirs) - sum(common.values())
    allowed = max(2, NAMING_TOLERANCE * len(theirs))
    assert renamed <= allowed, f"{renamed} of {len(theirs)} rows renamed"
    assert abs(len(ours) - len(theirs)) <= renamed
    assert {row.comm[:width] for row in ours} == {row.comm for row in theirs}
    assert {row.dso for row in ours} == {row.dso for row in theirs}

    def in_common(rows: list[object]) -> list[tuple[str, ...]]:
        left, kept = Counter(common), []
        for row in rows:
            entry = (*key(row), row.symbol)  # type: ignore[attr-defined]
            if left[entry]:
                left[entry] -= 1
                kept.append(entry)
        return kept

    assert in_common(ours) == in_common(theirs)  # perf's order
    # The heads: lost samples, sample count, event count, the column names.
    ours_head, theirs_head = header_lines(ours_text), header_lines(theirs_text)
    for prefix in ("# Total Lost Samples:", "# Samples:", "# Event count"):
        assert [h for h in ours_head if h.startswith(prefix)] == [
            h for h in theirs_head if h.startswith(prefix)
        ]
    assert [h.split() for h in ours_head if h.startswith("# Overhead")] == [
        h.split() for h in theirs_head if h.startswith("# Overhead")
    ]


def test_an_event_without_samples_has_no_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """perf report leaves out the table of an event none of whose samples was recorded
    (``--skip-empty``, its default): here a dummy event beside cpu-clock, as perf record
    ``-a`` adds one."""
    try:
        path = record(tmp_path / "two.data", [sys.executable, "-c", "sum(range(3_000_000))"],
                      options=("-e", "cpu-clock", "-e", "dummy", "-c", "100000"))  # fmt: skip
    except Unavailable as error:
        unavailable(error)
    table = ("--stdio", "--no-children", "--sort", "comm", "-g", "none")
    theirs = header_lines(perf_output("report", "-i", str(path), *table))
    assert "dummy" in perf_output("report", "-i", str(path), "--stdio", "--no-skip-empty")
    capsys.readouterr()
    assert main(["perf", "report", *table, str(path)]) == 0
    ours = header_lines(capsys.readouterr().out)
    for prefix in ("# Total Lost Samples:", "# Samples:", "# Event count"):
        assert [h for h in ours if h.startswith(prefix)] == [
            h for h in theirs if h.startswith(prefix)
        ]
    assert [h for h in theirs if h.startswith("# Samples:")] != []


# -- folded -----------------------------------------------------------------------------------

_BRACKETED = re.compile(r"^\[.*\]$")


def test_folded_stacks_match_perfs_stackcollapse(recording: Path, perf_stacks: Profile) -> None:
    theirs: Counter[str] = Counter()
    text = perf_output("script", "report", "stackcollapse", "-i", str(recording))
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        theirs[stack] += int(count)
    assert theirs, "perf's stackcollapse printed nothing"
    # perf's script names a frame without a symbol [unknown] where stackcollapse-perf.pl
    # names its module ([libc.so.6]); the rest of their rules agree on these names.
    ours: Counter[str] = Counter()
    for stack, count in folded_stacks(perf_stacks).items():
        process, *frames = stack.split(";")
        ours[";".join([process, *(_BRACKETED.sub("[unknown]", f) for f in frames)])] += count
    assert sum(ours.values()) == sum(theirs.values()) == len(perf_stacks)
    differing = sum((ours - theirs).values())
    # perf's script and perf script's text part ways on a few samples whose stack ends in
    # perf's own markers; nothing more.
    assert differing <= 0.01 * len(perf_stacks), f"{differing} samples fold otherwise"


# -- pprof ------------------------------------------------------------------------------------


def _go_pprof(*arguments: str) -> str:
    go = shutil.which("go")
    if go is None:
        require("go", "go is not installed (apt-get install golang-go): no go tool pprof")
    done = subprocess.run(
        [go, "tool", "pprof", *arguments], capture_output=True, text=True, timeout=300,
        check=False, env={**os.environ, "PPROF_TMPDIR": os.environ.get("TMPDIR", "/tmp")},
    )  # fmt: skip
    if done.returncode:
        raise AssertionError(f"go tool pprof failed: {done.stderr[:500]}")
    return done.stdout


def _pprof_name(row: TopRow) -> str:
    """How pprof names a row's function: its name, or "[module]" for an address."""
    return row.symbol if row.symbol is not None else f"[{module_short_name(row.module)}]"


def test_pprof_top_matches_the_top_table(recording: Path, tmp_path: Path) -> None:
    require_module("google.protobuf", "protobuf")
    profile = profile_of_ips(recording)
    path = tmp_path / "profile.pb.gz"
    write_pprof(profile, path)
    text = _go_pprof(
        "-top", "-unit=ns", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0",
        "-symbolize=none", str(path),
    )  # fmt: skip
    [section] = top_table(profile)
    total = re.search(r"Total samples = (\d+)ns", text)
    assert total is not None and int(total[1]) == section.period
    flat: Counter[str] = Counter()
    for line in text.splitlines():
        match = re.match(r"^\s*(\d+)ns\s+[\d.]+%\s+[\d.]+%\s+\d+ns\s+[\d.]+%\s+(.+)$", line)
        if match:
            flat[match[2]] += int(match[1])
    expected: Counter[str] = Counter()
    for row in section.rows:
        expected[_pprof_name(row)] += row.period
    assert +flat == +expected


def test_pprof_traces_are_the_profiles_stacks(perf_stacks: Profile, tmp_path: Path) -> None:
    require_module("google.protobuf", "protobuf")
    path = tmp_path / "profile.pb.gz"
    write_pprof(perf_stacks, path)
    text = _go_pprof("-traces", "-unit=ns", "-symbolize=none", str(path))
    traces: Counter[tuple[str, ...]] = Counter()
    for block in text.split("-----------+-------------------------------------------------------"):
        lines = [line for line in block.splitlines() if line.strip()]
        labels = tuple(
            line.split(":", 1)[1].strip() for line in lines if re.match(r"^\s+\w+:", line)
        )
        value_at = next((i for i, line in enumerate(lines) if re.match(r"^\s*\d+ns\s", line)), None)
        if value_at is None or not labels:
            continue
        value, first = lines[value_at].split(None, 1)
        frames = [first.strip()] + [line.strip() for line in lines[value_at + 1 :]]
        traces[(*labels, *frames)] += int(value.removesuffix("ns"))
    expected: Counter[tuple[str, ...]] = Counter()
    for index in range(len(perf_stacks)):
        frames = perf_stacks.stack_frames(perf_stacks.stack[index])
        names = []
        for at, frame in enumerate(frames):
            name = frame.symbol if frame.symbol is not None else (
                f"[{module_short_name(frame.module)}]"
            )
            # pprof marks the inlined functions of a location (all its lines but the last):
            # an inlined function and the frames after it at its address.
            inlined_here = (
                frame.inlined and at + 1 < len(frames) and frames[at + 1].address == frame.address
            )
            names.append(name + (" (inline)" if inlined_here else ""))
        key = (
            perf_stacks.comms[perf_stacks.comm[index]], str(perf_stacks.pid[index]),
            str(perf_stacks.tid[index]), *names,
        )  # fmt: skip
        expected[key] += perf_stacks.period[index]
    assert traces == expected


# -- speedscope -------------------------------------------------------------------------------


def test_speedscope_of_a_recording_is_valid(perf_stacks: Profile) -> None:
    jsonschema = require_module("jsonschema")
    if not SPEEDSCOPE_SCHEMA.exists():
        require("speedscope", "speedscope's schema is not installed (npm ci --prefix tests/node)")
    profile = perf_stacks.take(range(min(len(perf_stacks), 1500)))  # the validator is slow
    out = io.StringIO()
    write_speedscope(profile, out)
    document = json.loads(out.getvalue())
    jsonschema.validate(document, json.loads(SPEEDSCOPE_SCHEMA.read_text()))
    weights = sum(sum(p["weights"]) for p in document["profiles"])
    assert weights == sum(profile.period)


# -- the flame graph in Chromium --------------------------------------------------------------


def _browser_check(page: Path, search: str) -> dict[str, object]:
    node = shutil.which("node")
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if node is None:
        require("node", "node is not installed: the flame graph cannot be driven in Chromium")
    if not Path(chromium).exists():
        require("chromium", f"Chromium is not installed at {chromium} (apt-get install chromium)")
    if not (NODE_TOOLS / "node_modules" / "playwright-core").exists():
        require("playwright-core", "playwright-core is not installed (npm ci --prefix tests/node)")
    done = subprocess.run(
        [node, str(NODE_TOOLS / "flamegraph_check.mjs"), str(page), search],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    try:
        result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise AssertionError(f"the browser check failed: {done.stderr[-2000:]}") from None
    return result


def test_flamegraph_in_chromium(perf_stacks: Profile, tmp_path: Path) -> None:
    page = tmp_path / "flamegraph.html"
    with page.open("w", encoding="utf-8") as out:
        write_flamegraph(perf_stacks, out, title="perf report test")
    tree = flame_tree(perf_stacks)
    # Search for the heaviest function below the commands, and work out the share of the
    # samples whose stack has it: what the page must say.
    heaviest = max(
        (node for node in range(len(tree)) if tree.names[int(tree.name[node])][2] < 4),
        key=lambda node: int(tree.period[node]),
    )
    name = tree.names[int(tree.name[heaviest])][0]
    search = re.escape(name)
    matched = [
        node for node in range(len(tree)) if re.search(search, tree.names[int(tree.name[node])][0],
                                                       re.IGNORECASE)
    ]  # fmt: skip
    covered = _covered_period(tree, set(matched))
    result = _browser_check(page, search)

    assert result["errors"] == [] and result["foreign_requests"] == []
    assert int(result["frames_drawn"]) > 3  # type: ignore[call-overload]
    canvas_width = result["canvas"]["width"]  # type: ignore[index]
    clicked, zoomed = result["clicked"], result["zoomed_frame"]
    assert result["zoomed"] == clicked["node"]  # type: ignore[index]
    assert abs(zoomed["width"] - canvas_width) < 1 and zoomed["x"] == 0  # type: ignore[index]
    assert result["tooltip"]["shown"]  # type: ignore[index]
    assert result["tooltip"]["text"].startswith(clicked["name"])  # type: ignore[index]
    assert result["zoomed_after_reset"] == 0
    assert int(result["highlighted"]) > 0  # type: ignore[call-overload]
    assert result["highlight_pixel"] == [230, 0, 230, 255]
    assert result["matched_share"] == pytest.approx(covered / int(tree.period[0]))
    assert result["matched_text"] == f"Matched: {100 * covered / int(tree.period[0]):.2f}%"


def _covered_period(tree: object, matched: set[int]) -> int:
    """The period of the matched nodes that have no matched ancestor (each sample once)."""
    children, period = tree.children, tree.period  # type: ignore[attr-defined]
    covered, total, child = [False] * len(children), 0, 1
    for node in range(len(children)):
        for below in range(child, child + int(children[node])):
            covered[below] = covered[node] or below in matched
            if below in matched and not covered[node]:
                total += int(period[below])
        child += int(children[node])
    return total

