"""The profile writers on profiles made by hand: what each format says of them, field by field.

The expected values come from the formats' own rules (perf report's layout and order,
stackcollapse-perf.pl's naming rules, speedscope's and pprof's schemas), worked out by hand
for each profile; the bulk paths are held equal to plain oracles (perf_oracles).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perf_oracles
from conftest import require, require_module
from perf_report_support import synthetic_profile
from pysframe.perf.aggregate import FlatStacks, group, innermost_real_frames
from pysframe.perf.filters import FilterError, filter_profile, parse_time_ranges
from pysframe.perf.flamegraph import flame_tree, write_flamegraph
from pysframe.perf.pprof import profile_message_class, write_pprof
from pysframe.perf.profile import KERNEL_MODULE, UNKNOWN, FrameInfo, Profile
from pysframe.perf.report import (
    FoldOptions,
    folded_stacks,
    perf_defaults,
    profile_document,
    top_table,
    write_folded,
    write_json,
    write_top,
)
from pysframe.perf.speedscope import write_speedscope

SPEEDSCOPE_SCHEMA = (
    Path(__file__).parent.parent / "node" / "node_modules" / "speedscope" / "dist" / "release"
    / "file-format-schema.json"
)  # fmt: skip

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
APP = "/opt/app/bin/app"


def make_profile(
    samples: list[tuple[list[FrameInfo], dict[str, object]]],
    events: tuple[tuple[str, str], ...] = (("cpu-clock", "nanoseconds"),),
) -> Profile:
    """A profile of ``samples``: (frames innermost first, fields); fields default to pid 1,
    tid 1, time = 1000 * index, period 100, comm "app", the first event."""
    profile = Profile(sources=["hand-made"])
    event_ids = [profile.event_id(name, unit) for name, unit in events]
    for index, (frames, fields) in enumerate(samples):
        stack = profile.stack_id([profile.frame_id(frame) for frame in frames])
        profile.add(
            stack,
            pid=int(fields.get("pid", 1)),  # type: ignore[call-overload]
            tid=int(fields.get("tid", fields.get("pid", 1))),  # type: ignore[call-overload]
            time=int(fields.get("time", 1000 * index)),  # type: ignore[call-overload]
            cpu=0,
            period=int(fields.get("period", 100)),  # type: ignore[call-overload]
            comm=profile.comm_id(str(fields.get("comm", "app"))),
            event=event_ids[int(fields.get("event", 0))],  # type: ignore[call-overload]
        )
    return profile


def user(symbol: str | None, address: int, module: str = APP, **fields: object) -> FrameInfo:
    """A user frame at ``address`` in its module (loaded at 0x555500000000)."""
    return FrameInfo(
        0x555500000000 + address, module, symbol, fields.pop("offset", 0x10),  # type: ignore[arg-type]
        module_address=address, **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def kernel(symbol: str | None, address: int) -> FrameInfo:
    return FrameInfo(address, KERNEL_MODULE, symbol, 0x4 if symbol else 0, kernel=True)


MAIN = user("main", 0x1100)
WORK = user("work", 0x1200)
LEAF = user("leaf", 0x1300)
MEMCPY = user("memcpy", 0x9100, LIBC)
SYSCALL = kernel("do_syscall_64", 0xFFFFFFFF81000100)


def text_of(write: object, profile: Profile, **options: object) -> str:
    out = io.StringIO()
    write(profile, out, **options)  # type: ignore[operator]
    return out.getvalue()


def speedscope_document(profile: Profile) -> dict[str, Any]:
    """The speedscope file written of ``profile``, read back."""
    document: dict[str, Any] = json.loads(text_of(write_speedscope, profile))
    return document


# -- the top table ----------------------------------------------------------------------------


def test_top_rows_percentages_and_perf_order() -> None:
    profile = make_profile(
        [
            ([LEAF, WORK, MAIN], {}),  # self: leaf
            ([LEAF, WORK, MAIN], {}),
            ([LEAF, WORK, MAIN], {"comm": "helper"}),  # the same function, another command
            ([MEMCPY, WORK, MAIN], {"period": 200}),  # period 200: as heavy as two leafs
            ([SYSCALL, MEMCPY, MAIN], {}),  # a kernel sample
            ([user(None, 0x1400), MAIN], {}),  # no symbol: the address in the module
        ]
    )
    text = text_of(write_top, profile)
    # 700 in all: leaf/app 200 (28.57%), memcpy 200 (28.57%), then the 100s.  Ties go by
    # command, module short name and symbol name, ascending; an unnamed symbol last.
    assert text.splitlines() == [
        "#",
        "# Total Lost Samples: 0",
        "#",
        "# Samples: 6  of event 'cpu-clock'",
        "# Event count (approx.): 700",
        "#",
        "# Overhead  Command  Shared Object      Symbol                ",
        "# ........  .......  .................  ......................",
        "#",
        "    28.57%  app      app                [.] leaf",
        "    28.57%  app      libc.so.6          [.] memcpy",
        "    14.29%  app      [kernel.kallsyms]  [k] do_syscall_64",
        "    14.29%  app      app                [.] 0x0000000000001400",
        "    14.29%  helper   app                [.] leaf",
        "",
        "",
    ]


def test_top_sections_per_event_and_sample_count_units() -> None:
    samples = [([LEAF], {})] * 1500 + [([WORK], {"event": 1, "period": 7})]
    profile = make_profile(samples, events=(("cpu-clock", "nanoseconds"), ("cycles", "events")))
    profile.lost_samples = 3
    lines = text_of(write_top, profile).splitlines()
    # perf's convert_unit: 1500 samples print as "1K".
    assert lines[1] == "# Total Lost Samples: 3"
    assert "# Samples: 1K of event 'cpu-clock'" in lines
    assert "# Samples: 1  of event 'cycles'" in lines
    assert "# Event count (approx.): 150000" in lines
    assert "# Event count (approx.): 7" in lines
    sections = top_table(profile)
    assert [(s.event, s.samples, s.period, len(s.rows)) for s in sections] == [
        ("cpu-clock", 1500, 150000, 1), ("cycles", 1, 7, 1),
    ]  # fmt: skip


def test_top_self_is_the_innermost_real_frame_and_children_count_once() -> None:
    inlined = user("inline_helper", 0x1300, inlined=True)  # inlined into leaf, at leaf's IP
    recursive = [LEAF, WORK, WORK, WORK, MAIN]  # work calls itself: counted once per sample
    profile = make_profile([([inlined, *recursive], {}), (recursive, {}), ([MAIN], {})])
    self_rows = {(r.symbol, r.inlined): (r.samples, r.period) for r in top_table(profile)[0].rows}
    # The inlined function is never a sample's own frame: leaf is (perf: the IP's symbol).
    assert self_rows == {("leaf", False): (2, 200), ("main", False): (1, 100)}
    rows = top_table(profile, children=True)[0].rows
    totals = {(r.symbol, r.inlined): (r.total_samples, r.total_period, r.period) for r in rows}
    assert totals == {
        ("main", False): (3, 300, 100),
        ("work", False): (2, 200, 0),
        ("leaf", False): (2, 200, 200),
        ("inline_helper", True): (1, 100, 0),
    }
    lines = text_of(write_top, profile, children=True).splitlines()
    # The Symbol column is as wide as the longest name and its "[.] " (17).
    assert "# Children      Self  Command  Shared Object  Symbol           " in lines
    # Sorted by the total, then by self: main (100%) first, leaf (self 66.67%) before work.
    rows_text = [line for line in lines if "%" in line]
    assert rows_text == [
        "   100.00%    33.33%  app      app            [.] main",
        "    66.67%    66.67%  app      app            [.] leaf",
        "    66.67%     0.00%  app      app            [.] work",
        "    33.33%     0.00%  app      app            [.] inline_helper (inlined)",
    ]


def test_top_ties_follow_perfs_trees_of_inlined_functions() -> None:
    """Rows of one Children share whose order perf's trees decide (util/hist.c): inlined
    functions are placed by name in its trees of entries, the others by start.

    Symbols (start): main 0x1000, start2 0x1100, bz 0x1800, by 0x2000, bx 0x3000; inlined
    a in bz, b in by, c in bx.  Sample 1 (thread 1) makes the entries bz (its own), main,
    bx, c, a in that order (callers first); sample 2 (thread 2) by, start2, b.

    hists__findnew_entry (hist_entry__cmp; an inlined function against anything by name,
    descending; other symbols by start, ascending) links them, with the red-black tree's
    rotations, into the in-order main, start2, c, bz, by, bx, b, a; hists__collapse_resort
    adds them again in that order to a new tree, whose in-order is the same.

    hists__output_resort adds them in that order by hist_entry__sort: the Children share
    (main, bx 4/7; start2 3/7; the others 1/7), and between two entries of one thread the
    caller first (the longer chain: main before bx, bz before c before a), else Self (by,
    bz before the inlined ones), else the name (by before bz, b before c, a before b).
    Among a, b and c that is a circle (c before a before b before c): c goes right of bz,
    b left of c, a right of c, giving b, c, a.  (Sorting by start, ties kept in the order
    made, gives main, start2, bz, a, by, b, bx, c, and then c, a, b.)"""
    main, start2 = user("main", 0x1010), user("start2", 0x1110)
    bz, by, bx = user("bz", 0x1810), user("by", 0x2010), user("bx", 0x3010)
    a = user("a", 0x1810, inlined=True, base_symbol="bz")
    b = user("b", 0x2010, inlined=True, base_symbol="by")
    c = user("c", 0x3010, inlined=True, base_symbol="bx")
    profile = make_profile([
        ([a, bz, c, bx, main], {"tid": 1}),
        ([b, by, start2], {"tid": 2}),
        ([bx, main], {"tid": 1, "period": 300}),
        ([start2], {"tid": 2, "period": 200}),
    ])  # fmt: skip
    rows = [line for line in text_of(write_top, profile, options=perf_defaults(profile))
            .splitlines() if line.startswith("  ") and "%" in line and "--" not in line]
    assert rows == [
        "    57.14%     0.00%  app      app            [.] main",
        "    57.14%    42.86%  app      app            [.] bx",
        "    42.86%    28.57%  app      app            [.] start2",
        "    14.29%    14.29%  app      app            [.] by",
        "    14.29%    14.29%  app      app            [.] bz",
        "    14.29%     0.00%  app      app            [.] b (inlined)",
        "    14.29%     0.00%  app      app            [.] c (inlined)",
        "    14.29%     0.00%  app      app            [.] a (inlined)",
    ]


def test_graph_siblings_of_equal_hits_by_symbol_names_where_one_is_inlined() -> None:
    """perf's match_chain (util/callchain.c, ``-g function``) orders an inlined function
    against any other symbol by the two symbols' names (match_chain_strings), where two
    other symbols go by module and start; a node's children are its tree in that order,
    highest first, and children of equal hits are printed in it.  Under app_run, hot
    (inlined) and lib_digest (another module) have half the hits each: "lib_digest" is the
    higher name, so it comes first (the frame that is not inlined has a name too)."""
    main, run = user("main", 0x1010), user("app_run", 0x2010)
    hot = user("hot", 0x2010, inlined=True, base_symbol="app_run")
    lib_digest = user("lib_digest", 0x3010, "/usr/lib/libd.so")
    profile = make_profile([([hot, run, main], {}), ([lib_digest, run, main], {})])
    text = text_of(write_top, profile, options=perf_defaults(profile))
    main_row = "   100.00%     0.00%  app      app            [.] main\n"
    assert main_row + (
        "            |\n"
        "            ---main\n"
        "               app_run\n"
        "               |          \n"
        "               |--50.00%--lib_digest\n"
        "               |          \n"
        "                --50.00%--hot (inlined)\n"
        "\n"
    ) in text


def test_top_empty_profile() -> None:
    assert text_of(write_top, Profile()) == "#\n# Total Lost Samples: 0\n#\n"


# -- folded stacks ----------------------------------------------------------------------------


PLAIN = FoldOptions()


def fold(frames: list[FrameInfo], options: FoldOptions = PLAIN, **fields: object) -> str:
    [line] = folded_stacks(make_profile([(frames, fields)]), options)
    return line


def test_folded_lines_outermost_first_sorted_and_counted_in_samples() -> None:
    profile = make_profile(
        [
            ([LEAF, WORK, MAIN], {"period": 500}),
            ([LEAF, WORK, MAIN], {}),
            ([MEMCPY, MAIN], {"comm": "my tool"}),  # spaces in the command become _
            ([], {}),  # no frames: the command alone
        ]
    )
    assert text_of(write_folded, profile) == (
        "app 1\napp;main;work;leaf 2\nmy_tool;main;memcpy 1\n"
    )


def test_folded_pid_and_tid() -> None:
    assert fold([MAIN], FoldOptions(pid=True), pid=42, tid=43) == "app-42;main"
    assert fold([MAIN], FoldOptions(tid=True), pid=42, tid=43) == "app-42/43;main"


def test_folded_names_follow_the_scripts_rules() -> None:
    cases = {
        # Everything from the first "(" is dropped (arguments of demangled C++ names) ...
        "ns::Class::method(int, char const*) const": "ns::Class::method",
        # ... unless it opens "(anonymous namespace)" ...
        "ns::(anonymous namespace)::helper(int)": "ns::(anonymous namespace)::helper",
        # ... or the name looks like a Go method.
        "net/http.(*Client).Do": "net/http.(*Client).Do",
        # ";" is the separator: it becomes ":"; quotes go.
        "weird;name": "weird:name",
        "RegExp:[&<>\"']": "RegExp:[&<>]",
        # A name with "->" is split there, the later pieces annotated as inlined.
        "outer->inner": "outer;inner_[i]",
    }
    for name, expected in cases.items():
        assert fold([user(name, 0x2000)]) == f"app;{expected}", name


def test_folded_unknown_frames_name_their_module() -> None:
    assert fold([user(None, 0x2000, LIBC)]) == "app;[libc.so.6]"
    assert fold([FrameInfo(0x1234, UNKNOWN)]) == "app;[unknown]"
    assert fold([kernel(None, 0xFFFFFFFF81000000)]) == "app;[[kernel.kallsyms]]"
    # --addrs: the address perf script prints (a user frame's in its module).
    assert fold([user(None, 0x2abc, LIBC)], FoldOptions(addresses=True)) == (
        "app;[libc.so.6 <2abc>]"
    )


def test_folded_annotations() -> None:
    options = FoldOptions(annotate_kernel=True, annotate_jit=True)
    vdso = FrameInfo(0x7FFF0000, "[vdso]", "__vdso_clock_gettime", 0, module_address=0x100)
    jitted = FrameInfo(0x7F000000, "/tmp/perf-1234.map", "Interpreter", 0)
    inlined = user("helper", 0x1300, inlined=True)
    assert fold([SYSCALL, inlined, LEAF, vdso, jitted], options) == (
        # The script marks any "[...]" module as kernel, [vdso] too; perf script prints
        # "(inlined)" for an inlined function's module, which it leaves unmarked.
        "app;Interpreter_[j];__vdso_clock_gettime_[k];leaf;helper;do_syscall_64_[k]"
    )


def test_folded_java_names_and_skipped_frames() -> None:
    java = user("Lorg/mozilla/javascript/MemberBox;.<init>(Ljava/lang/reflect/Method;)V", 0x10)
    # For a process named exactly "java": the leading L of a name with "/" goes.
    assert fold([java], comm="java") == "java;org/mozilla/javascript/MemberBox:.<init>"
    assert fold([java]) == "app;Lorg/mozilla/javascript/MemberBox:.<init>"
    # A name that starts with "(" is a process name to the script: skipped.
    assert fold([user("(deleted)", 0x10), MAIN]) == "app;main"


def test_folded_takes_the_first_samples_event() -> None:
    profile = make_profile(
        [([WORK], {"event": 1}), ([MAIN], {}), ([WORK], {"event": 1})],
        events=(("cpu-clock", "nanoseconds"), ("cycles", "events")),
    )
    assert folded_stacks(profile) == {"app;work": 2}
    assert folded_stacks(profile, event="cpu-clock") == {"app;main": 1}


# -- JSON -------------------------------------------------------------------------------------


def test_json_document() -> None:
    profile = make_profile(
        [([LEAF, MAIN], {}), ([LEAF, MAIN], {"period": 300}), ([MAIN], {"tid": 2})]
    )
    profile.build_ids[APP] = "ab" * 20
    document = json.loads(text_of(write_json, profile))
    assert document == profile_document(profile)
    assert document["format"] == "pysframe-profile" and document["version"] == 1
    assert document["events"] == [{"name": "cpu-clock", "unit": "nanoseconds"}]
    assert document["comms"] == ["app"]
    assert document["build_ids"] == {APP: "ab" * 20}
    assert document["sample_count"] == 3
    assert document["time_range"] == [0, 2000]
    assert document["stacks"] == [[0, 1], [1]]
    assert document["frames"][0] == {
        "address": 0x555500001300, "module": APP, "symbol": "leaf", "offset": 0x10,
        "module_address": 0x1300, "kernel": False, "inlined": False,
    }  # fmt: skip
    # Aggregated by (event, comm, pid, tid, stack): the two leaf samples are one row.
    assert document["samples"] == {
        "event": [0, 0], "comm": [0, 0], "pid": [1, 1], "tid": [1, 2], "stack": [0, 1],
        "count": [2, 1], "period": [400, 100],
    }  # fmt: skip


# -- speedscope -------------------------------------------------------------------------------


def test_speedscope_profiles_per_thread_in_time_order() -> None:
    profile = make_profile(
        [
            ([LEAF, MAIN], {"tid": 2, "time": 30}),
            ([LEAF, MAIN], {"tid": 2, "time": 10}),
            ([WORK, MAIN], {"tid": 2, "time": 20, "period": 50}),
            ([MEMCPY, MAIN], {"tid": 1, "time": 5, "period": 1000}),
            ([LEAF, MAIN], {"tid": 2, "time": 40}),
        ]
    )
    document = speedscope_document(profile)
    assert document["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = [frame["name"] for frame in document["shared"]["frames"]]
    assert frames == ["leaf", "main", "work", "memcpy"]
    assert document["shared"]["frames"][0] == {"name": "leaf", "file": APP}
    profiles = document["profiles"]
    # In the order of their first sample in the profile: thread 2's came first.
    assert [p["name"] for p in profiles] == ["app pid: 1 tid: 2", "app pid: 1 tid: 1"]
    # Time order (10, 20, 30, 40); the consecutive leaf samples at 30 and 40 merge.
    assert profiles[0]["samples"] == [[1, 0], [1, 2], [1, 0]]
    assert profiles[0]["weights"] == [100, 50, 200]
    assert profiles[0]["unit"] == "nanoseconds"
    assert profiles[0]["endValue"] == 350
    # The heaviest thread opens first.
    assert document["activeProfileIndex"] == 1


def test_speedscope_events_name_their_profiles_and_units() -> None:
    profile = make_profile(
        [([MAIN], {}), ([MAIN], {"event": 1})],
        events=(("cpu-clock", "nanoseconds"), ("cycles", "events")),
    )
    profiles = speedscope_document(profile)["profiles"]
    assert [(p["name"], p["unit"]) for p in profiles] == [
        ("app pid: 1 tid: 1 [cpu-clock]", "nanoseconds"), ("app pid: 1 tid: 1 [cycles]", "none"),
    ]  # fmt: skip


def test_speedscope_is_valid_against_the_published_schema() -> None:
    jsonschema = require_module("jsonschema")
    if not SPEEDSCOPE_SCHEMA.exists():
        require("speedscope", "speedscope's schema is not installed (npm ci --prefix tests/node)")
    schema = json.loads(SPEEDSCOPE_SCHEMA.read_text())
    profile = synthetic_profile(400, 60)
    jsonschema.validate(json.loads(text_of(write_speedscope, profile)), schema)
    broken = json.loads(text_of(write_speedscope, profile))
    broken["profiles"][0]["type"] = "sampled-ish"  # the validator does catch a bad file
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


# -- pprof ------------------------------------------------------------------------------------


def decode_pprof(profile: Profile) -> object:
    require_module("google.protobuf", "protobuf")
    out = io.BytesIO()
    write_pprof(profile, out)
    message = profile_message_class()()
    message.ParseFromString(gzip.decompress(out.getvalue()))
    return message


def test_pprof_samples_locations_and_inlined_lines() -> None:
    inlined = user("helper", 0x1300, inlined=True, file="app.c", line=12)
    profile = make_profile(
        [([inlined, LEAF, MAIN], {"period": 250}), ([user(None, 0x1400), MAIN], {"tid": 7})]
    )
    profile.build_ids[APP] = "0123abcd"
    message = decode_pprof(profile)
    strings = list(message.string_table)  # type: ignore[attr-defined]
    assert strings[0] == ""

    def text(index: int) -> str:
        return strings[index]

    assert [(text(t.type), text(t.unit)) for t in message.sample_type] == [  # type: ignore[attr-defined]
        ("samples", "count"), ("cpu", "nanoseconds"),
    ]  # fmt: skip
    assert text(message.default_sample_type) == "cpu"  # type: ignore[attr-defined]
    functions = {f.id: text(f.name) for f in message.function}  # type: ignore[attr-defined]
    locations = {
        location.id: (location.address, [functions[line.function_id] for line in location.line])
        for location in message.location  # type: ignore[attr-defined]
    }
    samples = []
    for sample in message.sample:  # type: ignore[attr-defined]
        labels = {text(label.key): text(label.str) or label.num for label in sample.label}
        samples.append(
            ([locations[i] for i in sample.location_id], list(sample.value), labels)
        )
    # The inlined function and leaf share one location (leaf's address), the inlined one
    # first; a frame without a symbol is a location without lines.
    assert samples == [
        ([(0x1300, ["helper", "leaf"]), (0x1100, ["main"])], [1, 250],
         {"comm": "app", "pid": 1, "tid": 1}),
        ([(0x1400, []), (0x1100, ["main"])], [1, 100], {"comm": "app", "pid": 1, "tid": 7}),
    ]  # fmt: skip
    [mapping] = message.mapping  # type: ignore[attr-defined]
    assert text(mapping.filename) == APP and text(mapping.build_id) == "0123abcd"
    assert (mapping.memory_start, mapping.memory_limit) == (0x1100, 0x1401)
    assert mapping.has_functions and mapping.has_inline_frames and mapping.has_line_numbers
    assert message.duration_nanos == 1000  # type: ignore[attr-defined]


def test_pprof_to_a_path(tmp_path: Path) -> None:
    require_module("google.protobuf", "protobuf")
    path = tmp_path / "profile.pb.gz"
    write_pprof(make_profile([([MAIN], {})]), path)
    assert gzip.decompress(path.read_bytes())  # gzipped, not empty


# -- the flame graph --------------------------------------------------------------------------


def test_flame_tree_nodes() -> None:
    profile = make_profile(
        [
            ([LEAF, WORK, MAIN], {}),
            ([user("leaf", 0x1308), WORK, MAIN], {"period": 300}),  # leaf at another address
            ([MEMCPY, MAIN], {}),
            ([MAIN], {"comm": "other"}),
        ]
    )
    tree = flame_tree(profile)
    named = [(tree.names[n][0], int(c), int(p), int(s)) for n, c, p, s in zip(
        tree.name, tree.children, tree.period, tree.samples, strict=True)]  # fmt: skip
    # Breadth first, children sorted by name; one node for leaf's two addresses.
    assert named == [
        ("all", 2, 600, 4),
        ("app", 1, 500, 3), ("other", 1, 100, 1),
        ("main", 2, 500, 3), ("main", 0, 100, 1),
        ("memcpy", 0, 100, 1), ("work", 1, 400, 2),
        ("leaf", 0, 400, 2),
    ]  # fmt: skip


def test_flamegraph_page_is_self_contained() -> None:
    profile = make_profile([([user("</script><b>x", 0x10), MAIN], {})])
    page = text_of(write_flamegraph, profile, title="A <title>")
    assert "<title>A &lt;title&gt;</title>" in page
    # The name cannot close the data's script element; nothing is loaded from elsewhere.
    assert page.count("</script>") == 2
    assert "\\u003c/script\\u003e\\u003cb\\u003ex" in page
    for fetching in ("http://", "https://", " src=", "@import", "url("):
        assert fetching not in page


# -- filters ----------------------------------------------------------------------------------


def test_time_ranges_in_perfs_syntax() -> None:
    assert parse_time_ranges("1.5,2") == [(1_500_000_000, 2_000_000_000)]
    assert parse_time_ranges("100.000000001,") == [(100_000_000_001, None)]
    assert parse_time_ranges(",3.25") == [(None, 3_250_000_000)]
    assert parse_time_ranges("7") == [(7_000_000_000, None)]  # no comma: a start
    assert parse_time_ranges("1,2 5,") == [(10**9, 2 * 10**9), (5 * 10**9, None)]
    for bad in ("2,1", "1.0123456789,", "abc", "10%/2", "", "1,2,3"):
        with pytest.raises(FilterError):
            parse_time_ranges(bad)


def test_filters_choose_samples() -> None:
    profile = make_profile(
        [
            ([LEAF, WORK, MAIN], {"pid": 1, "tid": 1, "time": 10**9}),
            ([MEMCPY, MAIN], {"pid": 1, "tid": 2, "time": 2 * 10**9}),
            ([SYSCALL, MEMCPY, MAIN], {"pid": 2, "tid": 5, "comm": "other", "time": 3 * 10**9}),
            ([], {"pid": 3, "time": 4 * 10**9}),
        ]
    )

    def times(**filters: object) -> list[int]:
        chosen = filter_profile(profile, **filters)  # type: ignore[arg-type]
        assert chosen.time == perf_oracles.filtered(profile, **filters).time  # type: ignore[arg-type]
        return [time // 10**9 for time in chosen.time]

    assert times(pids=[1]) == [1, 2]
    assert times(tids=[2]) == [2]
    assert times(comms=["other"]) == [3]
    assert times(dsos=["libc.so.6"]) == [2, 3]  # a short name, any frame
    assert times(dsos=[LIBC], dso_frames="own") == [2]  # a long name, the sample's own frame
    assert times(dsos=["[kernel.kallsyms]"]) == [3]
    assert times(time_range="2,3") == [2, 3]  # both ends in
    assert times(time_range=(None, 2 * 10**9 - 1)) == [1]
    assert times(pids=[1], time_range="1.5,") == [2]
    chosen = filter_profile(profile, pids=[2])
    assert chosen.frames is profile.frames and chosen.sources == profile.sources


# -- bulk against the oracles -----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(-3, 3), st.integers(0, 1000), st.integers(0, 3)),
        max_size=60,
    ),
    st.booleans(),
)
def test_group_equals_its_oracle(rows: list[tuple[int, int, int, int]], weighed: bool) -> None:
    first, second, period, weight = (
        np.array([row[at] for row in rows], dtype=np.int64) for at in range(4)
    )
    bulk = group([first, second], period, weight if weighed else None)
    keys, count, summed, first_row, labels = perf_oracles.grouped(
        [first.tolist(), second.tolist()], period.tolist(), weight.tolist() if weighed else None
    )
    assert list(zip(*(key.tolist() for key in bulk.keys), strict=True)) == keys
    assert bulk.count.tolist() == count
    assert bulk.period.tolist() == summed
    assert bulk.first.tolist() == first_row
    assert bulk.labels.tolist() == labels


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 400), st.integers(1, 80), st.integers(0, 10**6))
def test_bulk_paths_equal_their_oracles(samples: int, stacks: int, seed: int) -> None:
    profile = synthetic_profile(samples, stacks, seed)
    empty = profile.stack_id([])
    profile.add(empty, pid=1, tid=1, time=1, cpu=0, period=5, comm=0, event=0)
    flat = FlatStacks.of(profile)
    assert innermost_real_frames(profile, flat).tolist() == (
        perf_oracles.innermost_real_frames(profile)
    )
    tree = flame_tree(profile)
    nodes = list(zip(
        [tree.names[name] for name in tree.name.tolist()], tree.children.tolist(),
        tree.period.tolist(), tree.samples.tolist(), strict=True,
    ))  # fmt: skip
    assert nodes == perf_oracles.flame_nodes(profile)
    filters = {"pids": [1000, 1002], "dsos": ["lib3.so", "[kernel.kallsyms]"], "time_range": (
        profile.time[len(profile) // 3], None)}  # fmt: skip
    for dso_frames in ("any", "own"):
        assert filter_profile(profile, dso_frames=dso_frames, **filters).stack == (  # type: ignore[arg-type]
            perf_oracles.filtered(profile, dso_frames=dso_frames, **filters).stack  # type: ignore[arg-type]
        )


def test_merge_keeps_build_ids_and_lost_samples() -> None:
    first, second = make_profile([([MAIN], {})]), make_profile([([LEAF], {})])
    second.build_ids[APP] = "ff"
    second.lost_samples = 4
    first.merge(second)
    assert (len(first), first.build_ids, first.lost_samples) == (2, {APP: "ff"}, 4)
    assert [row.symbol for row in top_table(first)[0].rows] == ["leaf", "main"]


def test_merge_into_an_empty_profile_keeps_its_ids() -> None:
    """A profile merged into an empty one keeps every id (its tables taken as they are): the
    profile that interning each frame, stack, command and event again gives (from tables
    without their indexes, a frame twice among them), and one of its own."""
    source = synthetic_profile(300, 40, 7)
    source.delivered[3] = source.time[3] + 1
    taken = Profile()
    taken.merge(source)
    unindexed = dataclasses.replace(
        source, frames=[*source.frames, source.frames[0]], _frame_ids={}, _stack_ids={},
        _comm_ids={}, _event_ids={},
    )  # fmt: skip
    interned = Profile()
    interned.merge(unindexed)
    tables = ("frames", "stacks", "comms", "events", *Profile.COLUMNS, "delivered", "sources")
    for name in tables:
        assert getattr(taken, name) == getattr(interned, name), name
        assert getattr(taken, name) is not getattr(source, name), name
    source.stack.append(0)
    source.stacks.append((1, 2))
    assert len(taken) == len(interned) and len(taken.stacks) == len(interned.stacks)
    taken.merge(taken.take(range(len(taken))))  # into a profile that is not empty
    assert taken.stack == interned.stack * 2 and taken.stacks == interned.stacks


def test_every_writer_takes_an_empty_profile() -> None:
    empty = Profile()
    assert text_of(write_folded, empty) == ""
    assert json.loads(text_of(write_json, empty))["samples"]["count"] == []
    assert speedscope_document(empty)["profiles"] == []
    assert "<canvas" in text_of(write_flamegraph, empty)
    assert list(decode_pprof(empty).sample) == []  # type: ignore[attr-defined]
    assert len(filter_profile(empty, pids=[1], time_range="1,")) == 0
