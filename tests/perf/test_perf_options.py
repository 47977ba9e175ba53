"""perf's command line where ``pysframe perf`` applies it, and perf report's call graphs on
profiles made by hand.

* The table and its graphs of a hand-made profile, each line worked out by hand from perf's
  rules (ui/stdio/hist.c, util/callchain.c: the margins, the pipes, ``--N.NN%--``, the
  single root run as ``---``, children in the chain's order, thresholds);
* ``--sort``, ``-g`` and ``-F`` as perf reads them, and what is refused;
* the command line on a hand-made recording of JIT code (an executable anonymous mapping
  named from a ``/tmp/perf-PID.map`` written here): ``-i``, ``--stdio``, ``--sort``,
  ``-F``, ``--ns``, ``--title``, their exit status and exact text, and one clear line for
  an option of perf that pysframe does not have, where a misspelt option keeps argparse's
  message.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from perf_support import CPU, FEAT_ARCH, FEAT_EVENT_DESC, IP, PERIOD, TID, TIME, Attr, PerfFile
from pysframe.cli.perf import parse_call_graph
from pysframe.cli.usage import UsageError
from pysframe.perf.callgraph import GraphOptions
from pysframe.perf.profile import FrameInfo, Profile
from pysframe.perf.script import FieldError, parse_fields, script_fields
from pysframe.perf.top import SortKeyError, TopOptions, parse_sort, perf_defaults, write_top

APP = "/opt/app/bin/app"


def user(symbol: str, address: int) -> FrameInfo:
    return FrameInfo(0x555500000000 + address, APP, symbol, 0x10, module_address=address)


MAIN, WORK, LEAF, OTHER = (user(name, 0x1000 * n) for n, name in enumerate(
    ["main", "work", "leaf", "other"], 1))  # fmt: skip


@pytest.fixture
def profile() -> Profile:
    """Two samples in leaf (main > work > leaf), one in other (main > work > other), one in
    main; 100 each."""
    made = Profile(sources=["hand-made"])
    event = made.event_id("cpu-clock", "nanoseconds")
    stacks = [[LEAF, WORK, MAIN], [LEAF, WORK, MAIN], [OTHER, WORK, MAIN], [MAIN]]
    for time, frames in enumerate(stacks):
        made.add(
            made.stack_id([made.frame_id(frame) for frame in frames]), pid=1, tid=1,
            time=time, cpu=0, period=100, comm=made.comm_id("app"), event=event,
        )  # fmt: skip
    return made


def text(profile: Profile, options: TopOptions) -> list[str]:
    out = io.StringIO()
    write_top(profile, out, options=options)
    lines = out.getvalue().split("\n")[9:]  # the rows and graphs, after the head
    while lines and lines[-1] == "":
        lines.pop()
    return lines


HEAD = "# Children      Self  Command  Shared Object  Symbol   "


def test_perfs_default_children_and_caller_graphs(profile: Profile) -> None:
    options = perf_defaults(profile)
    assert options.children and options.graph == GraphOptions()
    out = io.StringIO()
    write_top(profile, out, options=options)
    assert HEAD in out.getvalue()
    assert text(profile, options) == [
        # main: in all four samples (self in one); its chains go from it to the leaves
        "   100.00%    25.00%  app      app            [.] main",
        "            |",
        "            ---main",
        "               |          ",
        "                --75.00%--work",
        "                          |          ",
        "                          |--50.00%--leaf",
        "                          |          ",
        "                           --25.00%--other",
        "",
        "    75.00%     0.00%  app      app            [.] work",
        "            |",
        "            ---work",
        "               |          ",
        "               |--50.00%--leaf",
        "               |          ",
        "                --25.00%--other",
        "",
        # a sample's own row has its whole chain, from the outermost caller
        "    50.00%    50.00%  app      app            [.] leaf",
        "            |",
        "            ---main",
        "               work",
        "               leaf",
        "",
        "    25.00%    25.00%  app      app            [.] other",
        "            |",
        "            ---main",
        "               work",
        "               other",
    ]


def test_no_children_callee_graphs(profile: Profile) -> None:
    options = TopOptions(graph=GraphOptions())
    assert text(profile, options) == [
        "    50.00%  app      app            [.] leaf",
        "            |",
        "            ---leaf",
        "               work",
        "               main",
        "",
        "    25.00%  app      app            [.] main",  # ties: by symbol name
        "            |",
        "            ---main",
        "",
        "    25.00%  app      app            [.] other",
        "            |",
        "            ---other",
        "               work",
        "               main",
    ]


def test_children_with_callees_first(profile: Profile) -> None:
    # -g callee with children: main's chains go from main outwards (its callers: none)
    rows = text(profile, TopOptions(children=True, graph=GraphOptions(order="callee")))
    assert rows[:4] == [
        "   100.00%    25.00%  app      app            [.] main",
        "            |",
        "            ---main",
        "",
    ]
    assert rows[4:10] == [
        "    75.00%     0.00%  app      app            [.] work",
        "            |",
        "            ---work",
        "               main",
        "",
        "    50.00%    50.00%  app      app            [.] leaf",
    ]


def test_inlined_functions_of_two_modules_are_one_node() -> None:
    """perf's match_chain (util/callchain.c, ``-g function``) tells an inlined function by
    its name alone: ``mix`` inlined in the program and ``mix`` inlined in a library, both
    under one caller, are one node of the graph (three samples and two: 100%), where two
    functions of the same name that are not inlined stay apart by module."""
    made = Profile(sources=["hand-made"])
    event = made.event_id("cpu-clock", "nanoseconds")
    library = "/opt/app/lib/libmix.so"
    irq = FrameInfo(0xFFFFFFFF81000100, "[kernel.kallsyms]", "irq_entry", 0x4, kernel=True)
    app_mix = FrameInfo(0x555500005000, APP, "mix", 0x8, module_address=0x5000, inlined=True)
    lib_mix = FrameInfo(0x7F0000002000, library, "mix", 0x8, module_address=0x2000,
                        inlined=True)  # fmt: skip
    lib_call = FrameInfo(0x7F0000002000, library, "lib_call", 0x40, module_address=0x2000)
    stacks = [[irq, app_mix, MAIN]] * 3 + [[irq, lib_mix, lib_call, MAIN]] * 2
    for time, frames in enumerate(stacks):
        made.add(
            made.stack_id([made.frame_id(frame) for frame in frames]), pid=1, tid=1,
            time=time, cpu=0, period=100, comm=made.comm_id("app"), event=event,
        )  # fmt: skip
    rows = text(made, TopOptions(children=True, graph=GraphOptions(order="callee")))
    at = rows.index("   100.00%   100.00%  app      [kernel.kallsyms]  [k] irq_entry")
    assert rows[at + 1 : at + 8] == [
        "            |",
        "            ---irq_entry",
        "               mix (inlined)",
        "               |          ",
        "               |--60.00%--main",
        "               |          ",
        "                --40.00%--lib_call",
    ]


def test_flat_folded_values_and_fractal(profile: Profile) -> None:
    flat = text(profile, TopOptions(graph=GraphOptions(mode="flat")))
    assert flat[:7] == [
        "    50.00%  app      app            [.] leaf",
        "           50.00%",
        "                leaf",
        "                work",
        "                main",
        "",
        "    25.00%  app      app            [.] main",
    ]
    folded = text(profile, TopOptions(children=True, graph=GraphOptions(
        mode="folded", value="count")))  # fmt: skip
    # folded: each chain with its own hits (here counts), from the root, joined with ";"
    assert folded[:4] == [
        "   100.00%    25.00%  app      app            [.] main",
        "2 main;work;leaf",
        "1 main;work;other",
        "1 main",
    ]
    period = text(profile, TopOptions(children=True, graph=GraphOptions(value="period")))
    assert period[4] == "                --300--work"
    # fractal: percentages of the parent's hits; what the children leave of them (main's
    # own sample) as "[...]", whose pipe the last child keeps
    fractal = text(profile, TopOptions(children=True, graph=GraphOptions(mode="fractal")))
    assert fractal[3:10] == [
        "               |          ",
        "               |--75.00%--work",
        "               |          |          ",
        "               |          |--66.67%--leaf",
        "               |          |          ",
        "               |           --33.33%--other",
        "                --25.00%--[...]",
    ]


def test_percent_limit_leaves_out_rows_and_branches(profile: Profile) -> None:
    options = TopOptions(children=True, graph=GraphOptions(threshold=30), percent_limit=30)
    rows = text(profile, options)
    assert [row for row in rows if "%  app" in row] == [
        "   100.00%    25.00%  app      app            [.] main",
        "    75.00%     0.00%  app      app            [.] work",
        "    50.00%    50.00%  app      app            [.] leaf",
    ]  # other: 25%, under 30
    assert rows[4:8] == [
        "                --75.00%--work",
        "                          |          ",
        "                           --50.00%--leaf",  # other, 100 of 400, under the threshold
        "",
    ]


def test_sort_keys_and_their_columns(profile: Profile) -> None:
    out = io.StringIO()
    write_top(profile, out, options=TopOptions(sort=parse_sort("pid,sym")))
    lines = out.getvalue().split("\n")
    assert lines[6:11] == [
        "# Overhead      Pid:Command  Symbol   ",
        "# ........  ...............  .........",
        "#",
        "    50.00%        1:app      [.] leaf",
        "    25.00%        1:app      [.] main",
    ]
    # the first chain frame of a single root run is not printed under --sort sym...: it is
    # the row's own symbol (callchain__fprintf_graph)
    rows = text(profile, TopOptions(sort=("symbol",), graph=GraphOptions(), sort_order="sym"))
    assert rows[:4] == [
        "    50.00%  [.] leaf", "            |", "            ---work", "               main",
    ]
    # "symbol" spelt whole brings perf's IPC column
    assert parse_sort("dso,symbol") == ("dso", "symbol", "ipc_null")
    out = io.StringIO()
    write_top(profile, out, options=TopOptions(sort=parse_sort("symbol")))
    assert "    50.00%  [.] leaf   -      -            " in out.getvalue().split("\n")


def test_srcline_key() -> None:
    """perf's srclines (util/srcline.c get_srcline): addr2line's FILE:LINE, ``??:0`` where it
    knows nothing; the kernel's and a perf map's symbol and offset in decimal, or the dso and
    address."""
    made = Profile()
    event = made.event_id("cpu-clock", "nanoseconds")
    frames = [
        FrameInfo(0x555500001010, APP, "main", 0x10, 0x1010, file="main.c", line=12),
        FrameInfo(0x555500002010, APP, "work", 0x10, 0x2010),
        FrameInfo(0xFFFFFFFF81000110, "[kernel.kallsyms]", "do_syscall_64", 0x93, kernel=True),
        FrameInfo(0x7F0000000800, "/tmp/perf-7.map", None, 0, 0x7F0000000800),
    ]
    for time, frame in enumerate(frames):
        made.add(made.stack_id([made.frame_id(frame)]), pid=1, tid=1, time=time, cpu=0,
                 period=100 * (4 - time), comm=made.comm_id("app"), event=event)  # fmt: skip
    out = io.StringIO()
    write_top(made, out, options=TopOptions(sort=parse_sort("srcline")))
    assert out.getvalue().split("\n")[6:13] == [
        "# Overhead  Source:Line              ",  # as wide as the longest (25)
        "# ........  .........................",
        "#",
        "    40.00%  main.c:12",
        "    30.00%  ??:0",
        "    20.00%  do_syscall_64+147",
        "    10.00%  [JIT] tid 7[7f0000000800]",
    ]


# -- what perf's options say ----------------------------------------------------------------------


def test_sort_keys_as_perf_reads_them() -> None:
    assert parse_sort("comm,dso,sym") == ("comm", "dso", "symbol")
    assert parse_sort("Pid , SRC") == ("pid", "srcline")  # prefixes, any case, commas or spaces
    assert parse_sort("d") == ("dso",)
    with pytest.raises(SortKeyError) as raised:
        parse_sort("comm,cpu")
    assert (raised.value.key, raised.value.known) == ("cpu", True)
    with pytest.raises(SortKeyError) as raised:
        parse_sort("nope")
    assert raised.value.known is False


def test_call_graph_words_as_perf_reads_them() -> None:
    assert parse_call_graph("graph,0.5,caller,function,percent") == GraphOptions(order="caller")
    assert parse_call_graph("f") == GraphOptions(mode="flat")  # flat comes before fractal
    assert parse_call_graph("fr,2,10,callee,cou") == GraphOptions("fractal", 2, 10, "callee",
                                                                   "count")  # fmt: skip
    assert parse_call_graph("caller,,period") == GraphOptions(order="caller", value="period")
    assert parse_call_graph("none") is None and parse_call_graph("graph,n") is None
    # the words given change what the options before set (perf's one callchain_param)
    assert parse_call_graph("caller", GraphOptions(threshold=3)) == GraphOptions(
        threshold=3, order="caller"
    )
    with pytest.raises(UsageError, match="-g address of perf is not supported"):
        parse_call_graph("address")
    with pytest.raises(UsageError, match="none of perf's words"):
        parse_call_graph("graph,sideways")


def test_fields_as_perf_reads_them() -> None:
    assert parse_fields("comm,tid,ip") == (frozenset({"comm", "tid", "ip"}), frozenset(),
                                           frozenset())  # fmt: skip
    assert parse_fields("+pid,-period") == (None, frozenset({"pid"}), frozenset({"period"}))
    assert script_fields("-dso,-cpu").fields == frozenset(
        {"comm", "tid", "time", "event", "ip", "sym", "symoff", "period"}
    )
    with pytest.raises(FieldError, match="Cannot mix"):
        parse_fields("comm,-dso")
    with pytest.raises(FieldError, match="Invalid field"):
        parse_fields("comm,bogus")
    with pytest.raises(FieldError) as raised:
        parse_fields("comm,iregs")
    assert raised.value.unsupported == "iregs"


# -- the command line on a hand-made recording of JIT code ----------------------------------------

#: Where the JIT mapping is, and the map's two functions in it.
JIT = 0x7F0000000000
MAP = b"7f0000000000 40 jit_one\n7f0000000040 20 with space\n"


@pytest.fixture
def jit(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A recording (no callchains) of a process ``jitapp`` whose 4 samples are in an
    executable anonymous mapping: two in jit_one, one in "with space", one past the map's
    functions; and the map of it."""
    pid = next(pid for pid in random.sample(range(40000, 99999), 100)
               if not os.path.exists(f"/tmp/perf-{pid}.map"))  # fmt: skip
    perf = PerfFile()
    attr = perf.add_attr(Attr(IP | TID | TIME | CPU | PERIOD, size=136))
    perf.add_feature(FEAT_ARCH, perf.string("x86_64"))
    event_desc = perf.pack("II", 1, 136)                     # u32 nr, u32 attr_size
    event_desc += perf.attr_bytes(perf.attrs[attr])          # struct perf_event_attr
    event_desc += perf.pack("I", 0)                          # u32 nr_ids
    event_desc += perf.string("cpu-clock")                   # the event's name
    perf.add_feature(FEAT_EVENT_DESC, event_desc)
    perf.comm(attr, pid, pid, "jitapp", time=1)
    perf.mmap2(attr, pid, pid, JIT, 0x1000, JIT, "//anon", prot=7, time=2)  # rwx, private
    for number, ip in enumerate([JIT + 0x10, JIT + 0x18, JIT + 0x48, JIT + 0x800]):
        perf.sample(attr, ip=ip, pid=pid, tid=pid, time=1_000_000_100 + number,
                    cpu=3, period=100)  # fmt: skip
    data = tmp_path / "jit.data"
    data.write_bytes(perf.build())
    map_path = Path(f"/tmp/perf-{pid}.map")
    map_path.write_bytes(MAP)
    try:
        yield data, pid
    finally:
        map_path.unlink(missing_ok=True)


def run(*arguments: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", *map(str, arguments)], capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip


def test_script_fields_of_jit_code(jit: tuple[Path, int]) -> None:
    data, pid = jit
    done = run("script", "-i", data, "-F", "comm,pid,tid,cpu,time,ip,sym,symoff,dso", "--ns")
    assert done.returncode == 0 and done.stderr == ""
    # No callchain: the command %16s, the IP on the header line after a space (the address as
    # the process saw it: a JIT's map is its own), the perf map as its module.
    head = f"          jitapp {pid:5d}/{pid:<5d} [003]     1.0000001"
    where = f"/tmp/perf-{pid}.map"
    assert done.stdout == (  # ": ", " " before the IP, and the IP as %16lx
        f"{head}00:      7f0000000010 jit_one+0x10 ({where})\n"
        f"{head}01:      7f0000000018 jit_one+0x18 ({where})\n"
        f"{head}02:      7f0000000048 with space+0x8 ({where})\n"
        f"{head}03:      7f0000000800 [unknown] ({where})\n"
    )
    default = run("script", data)  # perf's default fields: the CPU where samples have one
    assert default.stdout.splitlines()[0] == (
        f"          jitapp {pid:5d} [003]     1.000000:        100 cpu-clock:      "
        f"7f0000000010 jit_one+0x10 ({where})"
    )


def test_report_of_jit_code(jit: tuple[Path, int]) -> None:
    data, pid = jit
    done = run("report", "-i", data, "--stdio", "--sort", "pid,dso,sym")
    assert done.returncode == 0 and done.stderr == ""
    jit_dso = f"[JIT] tid {pid}"
    assert done.stdout.split("\n") == [
        "#",
        "# Total Lost Samples: 0",
        "#",
        "# Samples: 4  of event 'cpu-clock'",
        "# Event count (approx.): 400",
        "#",
        f"# Overhead      Pid:Command  {'Shared Object':<16}  Symbol                ",
        f"# ........  ...............  {'.' * 16}  ......................",
        "#",
        f"    50.00%  {pid:7d}:jitapp   {jit_dso:<16}  [.] jit_one",
        f"    25.00%  {pid:7d}:jitapp   {jit_dso:<16}  [.] with space",
        f"    25.00%  {pid:7d}:jitapp   {jit_dso:<16}  [.] 0x00007f0000000800",
        "",
        "",
        "",
    ]


def test_flame_graph_title(jit: tuple[Path, int], tmp_path: Path) -> None:
    data, _pid = jit
    page = tmp_path / "graph.html"
    done = run("report", data, "--format", "flamegraph", "--title", "jit <1>", "-o", page)
    assert done.returncode == 0 and done.stderr == ""
    assert "<title>jit &lt;1&gt;</title>" in page.read_text()


@pytest.mark.parametrize(("arguments", "message"), [
    (["report", "--max-stack", "3"], "perf report: option --max-stack of perf is not supported"),
    (["report", "-M", "intel"], "perf report: option -M of perf is not supported"),
    (["report", "--no-demangle-kernel"],
     "perf report: option --no-demangle-kernel of perf is not supported"),
    (["report", "--comms=x"], "perf report: option --comms of perf is not supported"),
    (["script", "--show-mmap-events"],
     "perf script: option --show-mmap-events of perf is not supported"),
    (["script", "-G"], "perf script: option -G of perf is not supported"),
    (["script", "-F", "comm,brstack"], "perf script: -F brstack of perf is not supported"),
    (["script", "-F", "comm,-dso"],
     "perf script: -F comm,-dso: Cannot mix +-field with overridden fields"),
    (["script", "-F", "ip,symoff"],
     "perf script: -F ip,symoff: Display of offsets requested but symbol is not selected."),
    (["report", "--sort", "cpu"], "perf report: --sort cpu of perf is not supported"),
    (["report", "--sort", "nope"], "perf report: unknown --sort key: 'nope'"),
    (["report", "-g", "address"], "perf report: -g address of perf is not supported"),
    (["report", "--format", "folded", "--sort", "sym"], "perf report: --sort is for --format top"),
    (["report", "--title", "x"], "perf report: --title is for --format flamegraph"),
    (["report", "--percent-limit", "lots"],
     "perf report: --percent-limit: not a percentage: 'lots'"),
    (["report", "-g", "caller"],
     "perf report: -g: the recording has no callchains (record with -g or --call-graph)"),
    (["report", "--sort", "comm,srcline"],
     "perf report: --sort srcline of perf is not supported yet"),
    (["script", "-F", "comm,cpu", "--cpu-less"], None),  # a misspelt option: argparse's
])  # fmt: skip
def test_refusals_are_one_line(
    jit: tuple[Path, int], arguments: list[str], message: str | None
) -> None:
    data, _pid = jit
    done = run(*arguments, "-i", data)
    assert done.returncode == 2 and done.stdout == ""
    if message is None:
        assert "error: unrecognized arguments: --cpu-less" in done.stderr
    else:
        assert done.stderr == f"pysframe: {message}\n"


def test_stdio_and_inputs_by_name_or_option(jit: tuple[Path, int]) -> None:
    data, _pid = jit
    by_option = run("report", "-i", data, "--stdio")
    assert by_option.returncode == 0
    assert run("report", data).stdout == by_option.stdout
    # -F -FIELD, as perf takes it (argparse would take -period for an option)
    removed = run("script", "-i", data, "-F", "-period,-cpu")
    assert removed.returncode == 0
    assert "   100 " not in removed.stdout and "[003]" not in removed.stdout
