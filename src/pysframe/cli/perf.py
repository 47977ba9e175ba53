"""``pysframe perf``: profiles from perf.data recordings, every sample's user stack unwound with
SFrame (:mod:`pysframe.perf`).

pysframe perf script [FILE...]          # the text of perf script (--no-inline: of its --no-inline)
pysframe perf report [FILE...] --format top|folded|speedscope|pprof|flamegraph|json
pysframe perf stats [FILE...]           # how the walks went, and what stack copies they needed

FILE defaults to ``perf.data``; ``-`` reads a recording in perf's pipe format from standard
input.  Several recordings (from several machines) make one profile; ``-j N`` reads them in N
processes, ``--dask SCHEDULER`` on a Dask cluster.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .options import add_symbol_options, batch_jobs, positive_int, symbol_options
from .report import warn
from .usage import UsageError

if TYPE_CHECKING:
    from ..perf.analyze import Options, WalkStats
    from ..perf.profile import Profile

#: ``--format`` choices of ``perf report``.
REPORT_FORMATS = ("top", "folded", "speedscope", "pprof", "flamegraph", "json")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "perf",
        help="profiles from perf.data recordings, unwound with SFrame",
        description="Read perf.data recordings made with perf record --call-graph dwarf, unwind "
        "every sample's user stack with SFrame (the module's own section where it passes the "
        "checks, else SFrame generated from its .eh_frame), and write what profiler users open.",
    )
    commands = parser.add_subparsers(dest="perf_command", metavar="COMMAND", required=True)
    script = commands.add_parser(
        "script", help="print the samples as perf script prints them",
        description="Print every sample with its kernel and user frames, in time order, with the "
        "text of perf script (what stackcollapse-perf.pl, speedscope and the Firefox Profiler "
        "read): the functions inlined at each frame too, as perf shows them by default; "
        "--no-inline: the text of perf script --no-inline.",
    )  # fmt: skip
    _add_common(script)
    _add_filters(script)
    _add_inline(script)
    script.set_defaults(func=run_script)
    report = commands.add_parser(
        "report", help="a profile: a top table, folded stacks, speedscope, pprof, a flame graph",
        description="Write the profile of the recordings: a self/total table by function (top), "
        "folded stacks (FlameGraph), the speedscope file format, pprof (gzipped profile.proto), "
        "a self-contained interactive flame graph (HTML) or JSON.",
    )  # fmt: skip
    _add_common(report)
    _add_filters(report)
    report.add_argument(
        "--format", choices=REPORT_FORMATS, default="top", help="what to write (default top)"
    )
    report.add_argument(
        "--children", action="store_true", help="top: a total (children) column as well"
    )
    _add_inline(report)
    report.add_argument(
        "-o", "--output", metavar="OUT",
        help="write to OUT instead of standard output (pprof is binary: OUT is needed unless "
        "standard output is no terminal)",
    )  # fmt: skip
    report.set_defaults(func=run_report)
    stats = commands.add_parser(
        "stats", help="how deep walks went, why they stopped, what stack copies they needed",
        description="For the recordings' walks: their depth, where and why they stopped (the "
        "end of the copied stack, no rule, a return address outside every module), how many "
        "bytes of each stack copy they read (how large the dump must be), and which modules had "
        "no SFrame of their own, with the share of samples they hold.",
    )  # fmt: skip
    _add_common(stats)
    stats.add_argument("--json", action="store_true", help="print the statistics as JSON")
    stats.set_defaults(func=run_stats)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="*", metavar="FILE", default=[],
        help="perf.data recordings (default: perf.data; - for a pipe-mode recording on "
        "standard input)",
    )  # fmt: skip
    parser.add_argument(
        "--symfs", metavar="DIR",
        help="look for the recorded files under DIR first (perf's --symfs)",
    )  # fmt: skip
    parser.add_argument(
        "--buildid-dir", metavar="DIR", default="~/.debug",
        help="perf's build-ID cache, where perf record keeps the files it recorded "
        "(default ~/.debug)",
    )  # fmt: skip
    parser.add_argument(
        "--sframe", choices=("auto", "own", "generated"), default="auto",
        help="which SFrame unwinds each module: auto (default) its own .sframe when it passes the "
        "checks, else SFrame generated from its .eh_frame; own; generated",
    )  # fmt: skip
    add_symbol_options(parser)
    parser.add_argument(
        "--jobs", "-j", type=positive_int, default=None, metavar="N",
        help="processes for several recordings (default: the CPU count)",
    )  # fmt: skip
    parser.add_argument(
        "--dask", metavar="SCHEDULER",
        help="read the recordings on the Dask cluster of this scheduler (needs pysframe[dask])",
    )  # fmt: skip
    parser.add_argument(
        "--fix-leaf", action="store_true",
        help="insert the caller a frame-pointer chain (perf record -g) left out where the "
        "recording proves it; a caller whose return address only the stack holds cannot be, "
        "and one line says how many",
    )  # fmt: skip
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )  # fmt: skip


def _add_inline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--inline", action=argparse.BooleanOptionalAction, default=True,
        help="the functions inlined at each user frame as perf shows them, perf's default: "
        "from the DWARF of the file perf takes the module's symbols from, as binutils' "
        "addr2line -i finds them, with (inlined) after each; --no-inline: without",
    )  # fmt: skip


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pid", metavar="PID,...", help="only these processes")
    parser.add_argument("--tid", metavar="TID,...", help="only these threads")
    parser.add_argument("--comm", metavar="COMM,...", help="only these command names")
    parser.add_argument(
        "--dso", metavar="DSO,...", help="only samples with a frame in these modules"
    )
    parser.add_argument(
        "--time", metavar="START,END",
        help="only samples in this time range (seconds, as perf prints them; either side may "
        "be left out)",
    )  # fmt: skip


def _options(args: argparse.Namespace) -> Options:
    from ..perf.analyze import Options
    from ..sources.trust import Policy

    return Options(
        debug_dir=args.buildid_dir, symfs=args.symfs, policy=Policy(args.sframe),
        symbols=symbol_options(args), inline=_inline(args),
        fix_leaf=getattr(args, "fix_leaf", False),
    )  # fmt: skip


def _inline(args: argparse.Namespace) -> bool:
    """Whether inline frames are wanted: by default (perf's), except where they change
    nothing (stats; report's table without a children column names each sample's own
    symbol)."""
    if not getattr(args, "inline", False):
        return False
    return getattr(args, "format", "top") != "top" or bool(getattr(args, "children", True))


def _read(args: argparse.Namespace) -> tuple[Profile, WalkStats]:
    """The profile of every recording named, merged, and the walks' statistics."""
    from functools import partial

    from ..perf.profile import Profile
    from ..perf.stats import merged
    from ..tools.parallel import map_files
    from .options import batch_progress, progress_callback

    paths = _paths(args)
    if paths.count("-") > 1 or ("-" in paths and len(paths) > 1 and args.jobs not in (None, 1)):
        raise UsageError("perf: standard input (-) is read in this process, once")
    options = _options(args)
    if len(paths) == 1 and args.dask is None:  # one recording: progress by bytes read
        results = [_profile_one(paths[0], options, _byte_progress(args, paths[0]))]
    else:
        progress = batch_progress(args, len(paths))
        task = partial(_profile_one, options=options)
        jobs = 1 if "-" in paths else batch_jobs(args)
        results = map_files(
            task, paths, jobs=jobs, dask=args.dask, on_done=progress_callback(progress)
        )
        if progress is not None:
            progress.finish()
    profile = Profile()
    all_stats = []
    for _path, part, stats in results:
        profile.merge(part)
        all_stats.append(stats)
    total = merged(all_stats)
    for problem in dict.fromkeys(total.problems):  # each once (worker processes say the same)
        warn(problem)
    return profile, total


def _paths(args: argparse.Namespace) -> list[str]:
    """The recordings named (default ``perf.data``)."""
    return list(args.files) or ["perf.data"]


def _refuse_inputs(args: argparse.Namespace, output: str | None) -> None:
    """Refuse, before reading anything, an output (None: standard output) that is one of the
    recordings (:func:`pysframe.output.refuse_inputs`)."""
    from ..output import STDOUT, refuse_inputs

    refuse_inputs(output or STDOUT, _paths(args))


def _profile_one(
    path: str, options: Options, on_chunk: Callable[[int, int], None] | None = None
) -> tuple[str, Profile, WalkStats]:
    from ..perf.analyze import profile_recording

    try:
        profile, stats = profile_recording(path, options, on_chunk=on_chunk)
    finally:
        if on_chunk is not None:
            on_chunk(-1, 0)  # the end: the bar goes
    return path, profile, stats


def _byte_progress(args: argparse.Namespace, path: str) -> Callable[[int, int], None] | None:
    """``on_chunk(done, total)`` drawing a bar of the bytes of one recording read (shown
    with ``--progress``, by default when stderr is a terminal); ``done`` -1: finished."""
    shown = sys.stderr.isatty() if args.progress is None else args.progress
    if not shown:
        return None
    import time

    from .progress import Progress

    bar: list[Progress] = []
    began = time.monotonic()

    def on_chunk(done: int, total: int) -> None:
        if not bar:
            bar.append(Progress(total, sys.stderr, in_bytes=True))
            bar[0].began = began
        if done < 0:
            bar[0].finish()
        else:
            bar[0].update(done, path)

    return on_chunk


def _filtered(profile: Profile, args: argparse.Namespace) -> Profile:
    def split(text: str | None) -> list[str] | None:
        return None if text is None else [part for part in text.split(",") if part]

    def numbers(text: str | None) -> list[int] | None:
        values = split(text)
        try:
            return None if values is None else [int(v) for v in values]
        except ValueError:
            raise UsageError(f"perf: not a list of numbers: {text!r}") from None

    if not any((args.pid, args.tid, args.comm, args.dso, args.time)):
        return profile
    from ..perf.filters import FilterError, filter_profile

    try:
        return filter_profile(
            profile, pids=numbers(args.pid), tids=numbers(args.tid), comms=split(args.comm),
            dsos=split(args.dso), time_range=args.time,
        )  # fmt: skip
    except FilterError as error:
        raise UsageError(f"perf: {error.message}") from None


def _read_ahead(args: argparse.Namespace) -> None:
    """Start reading a pipe on standard input (``-``) now, before the modules the reading
    needs are imported: a pipe left full makes perf record lose samples."""
    if "-" in args.files:
        from ..input import standard_input

        standard_input()


def run_script(args: argparse.Namespace) -> int:
    _read_ahead(args)
    from ..perf.script import write_script

    _refuse_inputs(args, None)
    profile, _stats = _read(args)
    write_script(_filtered(profile, args), sys.stdout)
    return 0


def run_report(args: argparse.Namespace) -> int:
    _read_ahead(args)
    from ..perf import flamegraph, report, speedscope

    if args.format == "pprof":
        if args.output is None and sys.stdout.isatty():
            raise UsageError("perf report: pprof is binary: give -o OUT")
        from ..perf.pprof import pprof_bytes  # checks that protobuf is there, before any reading

    _refuse_inputs(args, args.output)
    profile, _stats = _read(args)
    profile = _filtered(profile, args)
    writers = {
        "top": lambda out: report.write_top(profile, out, children=args.children),
        "folded": lambda out: report.write_folded(profile, out),
        "speedscope": lambda out: speedscope.write_speedscope(profile, out),
        "flamegraph": lambda out: flamegraph.write_flamegraph(profile, out),
        "json": lambda out: report.write_json(profile, out),
    }
    inputs = _paths(args)
    if args.format == "pprof":
        _write_binary(args.output, pprof_bytes(profile), inputs)
        return 0
    _write_text(args.output, writers[args.format], inputs)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    _read_ahead(args)
    from ..perf.stats import stats_json, stats_text

    _refuse_inputs(args, None)
    _profile, stats = _read(args)
    if args.json:
        json.dump(stats_json(stats), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(stats_text(stats))
    return 0


def _write_text(output: str | None, write: Any, inputs: list[str]) -> None:
    import io

    from ..output import write_file

    if output is None:
        write(sys.stdout)
        return
    buffer = io.StringIO()
    write(buffer)
    write_file(output, buffer.getvalue().encode(), inputs=inputs)


def _write_binary(output: str | None, data: bytes, inputs: list[str]) -> None:
    from ..output import write_file

    write_file(output or "-", data, inputs=inputs)
