"""``pysframe perf``: profiles from perf.data recordings, every sample's user stack unwound with
SFrame (:mod:`pysframe.perf`).

pysframe perf script [FILE...] [-F FIELDS]   # the text of perf script (--no-inline too)
pysframe perf report [FILE...] --format top|folded|speedscope|pprof|flamegraph|json
pysframe perf stats [FILE...]           # how the walks went, and what stack copies they needed

FILE defaults to ``perf.data`` (``-i FILE`` names one too, as perf does); ``-`` reads a
recording in perf's pipe format from standard input.  Several recordings (from several
machines) make one profile; ``-j N`` reads them in N processes, ``--dask SCHEDULER`` on a Dask
cluster.

perf's own options work where they apply: ``-i``, ``--stdio``, ``--sort``, ``--children``,
``-g``, ``--percent-limit`` of perf report; ``-F`` and ``--ns`` of perf script.  Another option
of perf gets one line that names it (exit status 2), not argparse's "unrecognized arguments",
which a misspelt option still gets.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .options import add_symbol_options, batch_jobs, positive_int, symbol_options
from .report import warn
from .usage import CommandParser, UsageError

if TYPE_CHECKING:
    from ..perf.analyze import Options, WalkStats
    from ..perf.callgraph import GraphOptions
    from ..perf.profile import Profile
    from ..perf.report import FoldedSlice
    from ..perf.script import ScriptFields, ScriptSlice
    from ..perf.top import TopOptions

#: ``--format`` choices of ``perf report``.
REPORT_FORMATS = ("top", "folded", "speedscope", "pprof", "flamegraph", "json")

#: The options of perf 6.1's ``perf report`` and ``perf script`` (``perf report -h``, ``perf
#: script -h``): long names, and the letters of the short ones.  An option of these that
#: pysframe does not have is refused by name (:class:`_PerfParser`).
PERF_OPTIONS = {
    "report": (
        frozenset({
            "asm-raw", "branch-history", "branch-stack", "call-graph", "children", "column-widths",
            "comms", "cpu", "demangle", "demangle-kernel", "disable-order", "disassembler-style",
            "dsos", "dump-raw-trace", "exclude-other", "field-separator", "fields", "force",
            "full-source-path", "group", "group-sort-idx", "gtk", "header", "header-only",
            "hide-unresolved", "hierarchy", "ignore-callees", "ignore-vmlinux", "inline",
            "input", "inverted", "itrace", "kallsyms", "max-stack", "mem-mode", "mmaps",
            "modules", "ns", "objdump", "parent", "percent-limit", "percent-type", "percentage",
            "pid", "prefix", "prefix-strip", "pretty", "quiet", "raw-trace", "samples",
            "show-cpu-utilization", "show-info", "show-nr-samples", "show-on-off-events",
            "show-ref-call-graph", "show-total-period", "skip-empty", "socket-filter", "sort",
            "source", "stats", "stdio", "stdio-color", "stitch-lbr", "switch-off", "switch-on",
            "symbol-filter", "symbols", "symfs", "tasks", "threads", "tid", "time",
            "time-quantum", "total-cycles", "tui", "verbose", "vmlinux",
        }),
        frozenset("bcCdDFfgGiIkMmnpqsStTUvwx"),
    ),
    "script": (
        frozenset({
            "addr-range", "all-cpus", "call-ret-trace", "call-trace", "comms", "cpu",
            "debug-mode", "deltatime", "demangle", "demangle-kernel", "dlarg", "dlfilter",
            "dsos", "dump-raw-trace", "dump-unsorted-raw-trace", "fields", "force",
            "full-source-path", "gen-script", "graph-function", "guest-code", "guestkallsyms",
            "guestmodules", "guestmount", "guestvmlinux", "header", "header-only",
            "hide-call-graph", "inline", "input", "insn-trace", "itrace", "kallsyms", "Latency",
            "list", "list-dlfilters", "max-blocks", "max-stack", "ns", "per-event-dump", "pid",
            "reltime", "script", "show-bpf-events", "show-cgroup-events", "show-info",
            "show-kernel-path", "show-lost-events", "show-mmap-events",
            "show-namespace-events", "show-on-off-events", "show-round-events",
            "show-switch-events", "show-task-events", "show-text-poke-events", "stitch-lbr",
            "stop-bt", "switch-off", "switch-on", "symbols", "symfs", "tid", "time", "verbose",
            "vmlinux", "xed",
        }),
        frozenset("acCdDFfgGiIkLlsSv"),
    ),
}  # fmt: skip


def _perf_option(token: str, command: str) -> str | None:
    """The option of perf ``token`` names (``--name``, ``--name=VALUE``, ``--no-name``,
    ``-X``, ``-XVALUE``), or None when it names none of perf ``command``'s."""
    longs, shorts = PERF_OPTIONS.get(command, (frozenset(), frozenset()))
    if token.startswith("--"):
        name = token[2:].split("=", 1)[0]
        if name in longs or (name.startswith("no-") and name[3:] in longs):
            return f"--{name}"
        return None
    if len(token) >= 2 and token[0] == "-" and token[1] in shorts:
        return token[:2]
    return None


def _fields_values(args: list[str]) -> list[str]:
    """``-F -FIELD`` as argparse takes it (``-F=-FIELD``): perf's -F removes a field with a
    value that starts with ``-``, which argparse would take for an option."""
    out: list[str] = []
    at = 0
    while at < len(args):
        if args[at] in ("-F", "--fields") and at + 1 < len(args) and args[at + 1][:1] == "-":
            out.append(f"{args[at]}={args[at + 1]}")
            at += 2
            continue
        if args[at] == "--":
            out += args[at:]
            break
        out.append(args[at])
        at += 1
    return out


class _PerfParser(CommandParser):
    """The parser of a ``pysframe perf`` command: an option of perf's own command that
    pysframe does not have is one clear usage error naming it; any other argument it does
    not know is argparse's (a misspelt option among them)."""

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        command = self.prog.split()[-1]
        if args is not None and command == "script":
            args = _fields_values(list(args))
        parsed, extras = super().parse_known_args(args, namespace)
        for token in extras:
            if token == "--":
                break
            option = _perf_option(token, command) if token.startswith("-") else None
            if option is not None:
                raise UsageError(f"perf {command}: option {option} of perf is not supported")
        return parsed, extras


#: The sub-commands of ``pysframe perf``.
SUBCOMMANDS = ("script", "report", "stats")


def register(subparsers: Any, only: str | None = None) -> None:
    """Add ``perf`` and its sub-commands, or of those ``only`` (the one a command line names:
    the others' parsers, some 2 ms, are not made)."""
    parser = subparsers.add_parser(
        "perf",
        help="profiles from perf.data recordings, unwound with SFrame",
        description="Read perf.data recordings made with perf record --call-graph dwarf, unwind "
        "every sample's user stack with SFrame (the module's own section where it passes the "
        "checks, else SFrame generated from its .eh_frame), and write what profiler users open.",
    )
    commands = parser.add_subparsers(
        dest="perf_command", metavar="COMMAND", required=True, parser_class=_PerfParser
    )
    if only in (None, "script"):
        _register_script(commands)
    if only in (None, "report"):
        _register_report(commands)
    if only in (None, "stats"):
        _register_stats(commands)


def _register_script(commands: Any) -> None:
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
    script.add_argument(
        "--merge-callchains", action=argparse.BooleanOptionalAction, default=True,
        help="stitch each sample whose user callchain was deferred (Linux 6.19, perf record "
        "--call-graph fp,defer) to the one its thread recorded later, perf's default; "
        "--no-merge-callchain(s): print them apart, as perf script --no-merge-callchains does",
    )  # fmt: skip
    script.add_argument(
        "-F", "--fields", metavar="FIELDS",
        help="the fields to print, as perf script -F takes them: a list (comm,tid,ip,sym), "
        "or +FIELD and -FIELD to add to perf's default or take from it; of comm, tid, pid, "
        "time, cpu, event, ip, sym, symoff, dso, srcline, period",
    )  # fmt: skip
    script.add_argument(
        "--ns", action="store_true", help="times with nanoseconds (9 decimal places)"
    )
    script.set_defaults(func=run_script)


def _register_report(commands: Any) -> None:
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
        "--stdio", action="store_true",
        help="accepted, as perf takes it: the top table is perf report --stdio's text",
    )  # fmt: skip
    report.add_argument(
        "-s", "--sort", metavar="KEYS",
        help="top: the rows' keys, as perf's --sort takes them: of comm, pid, dso, sym "
        "(default comm,dso,sym)",
    )  # fmt: skip
    report.add_argument(
        "--children", action=argparse.BooleanOptionalAction, default=None,
        help="top: a Children column of the samples with a function anywhere on their "
        "stack, and rows for callers (default: when the recording has callchains, as perf)",
    )  # fmt: skip
    report.add_argument(
        "-g", "--call-graph", nargs="?", const="graph,0.5,caller,function,percent",
        metavar="TYPE,THRESHOLD,LIMIT,ORDER,KEY,VALUE", action=_Ordered,
        help="top: the call graph under each row, as perf report -g takes it: graph, "
        "fractal, flat or folded; a threshold in percent; a print limit; caller or callee; "
        "function; percent, period or count; none for no graph (default: graph,0.5 under "
        "recordings with callchains, callers first with --children)",
    )  # fmt: skip
    report.add_argument(
        "--no-call-graph", dest="call_graph", action="store_const", const="none",
        help="top: no call graph (-g none)",
    )  # fmt: skip
    report.add_argument(
        "-G", "--inverted", action="store_true",
        help="top: call graphs from the outermost caller in (-g caller)",
    )  # fmt: skip
    report.add_argument(
        "--percent-limit", metavar="PERCENT", action=_Ordered,
        help="top: leave out the rows under PERCENT of the event (and, as perf, the call "
        "graphs' branches under it)",
    )  # fmt: skip
    report.add_argument(
        "--title", metavar="TEXT", help="flamegraph: the page's title (default: Flame Graph)"
    )
    _add_inline(report)
    report.add_argument(
        "-o", "--output", metavar="OUT",
        help="write to OUT instead of standard output (pprof is binary: OUT is needed unless "
        "standard output is no terminal)",
    )  # fmt: skip
    report.set_defaults(func=run_report)


def _register_stats(commands: Any) -> None:
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


class _Ordered(argparse.Action):
    """Stores its value and the order it came in (perf takes -g's threshold and
    --percent-limit's, which set the same thing, in the order they are given)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
        option_string: str | None = None,
    ) -> None:  # fmt: skip
        setattr(namespace, self.dest, values)
        order = list(getattr(namespace, "option_order", None) or [])
        namespace.option_order = [*order, self.dest]


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="*", metavar="FILE", default=[],
        help="perf.data recordings (default: perf.data; - for a pipe-mode recording on "
        "standard input)",
    )  # fmt: skip
    parser.add_argument(
        "-i", "--input", dest="inputs", metavar="FILE", action="append", default=[],
        help="a recording, as perf names it (with the FILEs)",
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
        help="processes for several recordings, or for the time slices of one, where no "
        "frame is named by addr2line (--no-inline, no srcline) and it is not compressed "
        "(perf record -z) (default: the CPU count)",
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
        merge_callchains=getattr(args, "merge_callchains", True),
        srcline=bool(getattr(args, "srcline", False)),
        fix_leaf=getattr(args, "fix_leaf", False),
    )  # fmt: skip


def _inline(args: argparse.Namespace) -> bool:
    """Whether inline frames are wanted: by default (perf's), except where they change
    nothing (stats; report's table without a children column or call graphs names each
    sample's own symbol)."""
    if not getattr(args, "inline", False):
        return False
    if getattr(args, "format", "top") != "top":
        return True
    children, graph = getattr(args, "children", None), getattr(args, "call_graph", None)
    return children is not False or graph != "none"


def _read(
    args: argparse.Namespace,
    finish: Callable[[Profile], Any] | None = None,
    *,
    count_walks: bool = False,
) -> tuple[Callable[[], Profile], WalkStats, list[Any]]:
    """The profile of every recording named, merged (when first asked for), and the walks'
    statistics (their counts with ``count_walks``: ``perf stats``); and, where one
    recording is read in time slices (``-j``), ``finish`` of each slice's profile, in
    order, made in the process that read it (:func:`pysframe.perf.analyze.profile_parts`);
    else no such results."""
    from dataclasses import replace
    from functools import partial

    from ..perf.profile import Profile

    _keep_freed_memory()
    paths = _paths(args)
    if paths.count("-") > 1 or ("-" in paths and len(paths) > 1 and args.jobs not in (None, 1)):
        raise UsageError("perf: standard input (-) is read in this process, once")
    options = replace(_options(args), count_walks=count_walks)
    finished: list[Any] = []
    if len(paths) == 1 and args.dask is None and paths[0] != "-" and batch_jobs(args) > 1:
        from ..perf.analyze import profile_parts  # one recording, in time slices

        on_chunk = _byte_progress(args, paths[0])
        try:
            whole, parts, finished = profile_parts(
                paths[0], options, batch_jobs(args), on_chunk, finish=finish or _nothing,
                cut=finish is not None,  # what finish makes does not number frames
            )  # fmt: skip
        finally:
            if on_chunk is not None:
                on_chunk(-1, 0)  # the end: the bar goes
        total = _merged(parts)
    else:
        if len(paths) == 1 and args.dask is None:  # one recording: progress by bytes read
            results = [_profile_one(paths[0], options, _byte_progress(args, paths[0]))]
        else:
            from ..tools.parallel import map_files  # worker processes: several recordings only
            from .options import batch_progress, progress_callback

            progress = batch_progress(args, len(paths))
            task = partial(_profile_one, options=options)
            jobs = 1 if "-" in paths else batch_jobs(args)
            results = map_files(
                task, paths, jobs=jobs, dask=args.dask, on_done=progress_callback(progress)
            )
            if progress is not None:
                progress.finish()
        if len(results) == 1:  # one recording: its profile is the whole
            profile = results[0][1]
        else:
            profile = Profile()
            for _path, part, _stats in results:
                profile.merge(part)
        whole, total = (lambda: profile), _merged([stats for *_, stats in results])
    for problem in dict.fromkeys(total.problems):  # each once (worker processes say the same)
        warn(problem)
    return whole, total, finished


def _merged(parts: list[WalkStats]) -> WalkStats:
    """The walks' statistics of the recordings (or slices) read, as one: one recording's are
    its own (:func:`pysframe.perf.stats.merged` is imported to merge several)."""
    if len(parts) == 1:
        return parts[0]
    from ..perf.stats import merged

    return merged(parts)


#: glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _keep_freed_memory() -> None:
    """Ask glibc's malloc to keep the memory of the arrays a report frees for the next ones:
    to map a block of its own only from 32 MiB (its greatest bound on 64-bit machines) and to
    give back the top of its heap only when 64 MiB are free there.  By default it maps blocks
    from 128 KiB (a bound it raises as such blocks are freed) and trims the heap from 128 KiB
    free, so that the arrays of each chunk of samples come from fresh pages: a page fault
    each, and the kernel clears each page (some 16,000 faults of 40,000 on 50,000 samples).
    Elsewhere (another C library, another system) nothing is changed; numpy has imported
    ctypes already."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc's (musl has one that does nothing)
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 64 << 20)


def _nothing(_profile: Profile) -> None:
    """Nothing made of a time slice's profile (:func:`_read`)."""


def _paths(args: argparse.Namespace) -> list[str]:
    """The recordings named, with ``-i`` or as FILEs (default ``perf.data``)."""
    return [*getattr(args, "inputs", []), *args.files] or ["perf.data"]


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
    if "-" in _paths(args):
        from ..input import standard_input

        standard_input()


def _script_fields(args: argparse.Namespace) -> ScriptFields:
    from ..perf.script import FieldError, script_fields

    try:
        fields = script_fields(args.fields, args.ns)
    except FieldError as error:
        if error.unsupported is not None:
            raise UsageError(
                f"perf script: -F {error.unsupported} of perf is not supported"
            ) from None
        raise UsageError(f"perf script: -F {args.fields}: {error}") from None
    return fields


def run_script(args: argparse.Namespace) -> int:
    _read_ahead(args)
    from functools import partial

    from ..perf.script import FieldError, joined_script, write_script

    fields = _script_fields(args)
    args.srcline = "srcline" in fields.fields  # addr2line's answers for each frame
    _refuse_inputs(args, None)
    whole, _stats, slices = _read(args, partial(_script_slice, args, fields))
    texts = joined_script(slices)  # each time slice's text, made where it was read (-j)
    if texts is not None:
        for text in texts:  # a worker's copied from its temporary file; this one's made now
            text.write(sys.stdout)
        return 0
    try:
        write_script(_filtered(whole(), args), sys.stdout, fields)
    except FieldError as error:
        raise UsageError(f"perf script: -F {args.fields}: {error}") from None
    return 0


def _script_slice(
    args: argparse.Namespace, fields: ScriptFields, profile: Profile
) -> ScriptSlice | None:
    """The text of a time slice's profile, filtered (:func:`pysframe.perf.script.script_slice`);
    None where a filter or a field is refused (the whole profile's path says it, as one
    process does)."""
    from ..perf.script import FieldError, script_slice

    try:
        return script_slice(_filtered(profile, args), fields)
    except (UsageError, FieldError):
        return None


def _folded_slice(args: argparse.Namespace, profile: Profile) -> FoldedSlice | None:
    """The folded stacks of a time slice's profile, filtered
    (:func:`pysframe.perf.report.folded_slice`); None where a filter is refused."""
    from ..perf.report import folded_slice

    try:
        return folded_slice(_filtered(profile, args))
    except UsageError:
        return None


#: The options of ``perf report`` that only the top table takes, and the flame graph's.
_TOP_ONLY = (("sort", "--sort"), ("children", "--children"), ("call_graph", "-g"),
             ("percent_limit", "--percent-limit"), ("inverted", "-G"))  # fmt: skip


def _percent(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"perf report: {option}: not a percentage: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise UsageError(f"perf report: {option}: not a percentage: {text!r}")
    return value


def parse_call_graph(text: str, base: GraphOptions | None = None) -> GraphOptions | None:
    """perf report's ``-g`` argument (util/callchain.c __parse_callchain_report_opt), changing
    ``base`` (perf's callchain_param as the options before left it; by default perf's
    defaults): words separated by commas, each the first thing it is a prefix of among the
    print types (graph, flat, fractal, folded), orders (caller, callee), keys (function) and
    values (percent, period, count), else the threshold, then the print limit; ``none`` (or a
    prefix of it) for no graph (None).  UsageError for a word it is not, or perf's keys
    address, srcline and branch, which the table does not have."""
    from dataclasses import replace

    from ..perf.callgraph import MODES, ORDERS, VALUES, GraphOptions

    graph = base or GraphOptions()
    numbers: list[float] = []
    kinds = (("mode", MODES), ("order", ORDERS), ("key", ("function", "address", "srcline",
             "branch")), ("value", VALUES))  # fmt: skip
    for word in filter(None, text.split(",")):  # strtok: no empty words
        if "none".startswith(word):  # strncmp(tok, "none", strlen(tok))
            return None
        found = next(((kind, name) for kind, names in kinds for name in names
                      if name.startswith(word)), None)  # fmt: skip
        if found is None:
            try:
                numbers.append(float(word))
            except ValueError:
                raise UsageError(f"perf report: -g: {word!r} is none of perf's words") from None
            continue
        kind, name = found
        if kind == "key" and name != "function":
            raise UsageError(f"perf report: -g {name} of perf is not supported")
        if kind == "mode":
            graph = replace(graph, mode=name)
        elif kind == "order":
            graph = replace(graph, order=name)
        elif kind == "value":
            graph = replace(graph, value=name)
    if numbers:
        graph = replace(graph, threshold=numbers[0])
    if len(numbers) > 1:
        graph = replace(graph, print_limit=int(numbers[1]))
    return graph


def _float32(value: float) -> float:
    """``value`` as perf's strtof gives it (a C float)."""
    import struct

    return float(struct.unpack("f", struct.pack("f", value))[0])


def _top_options(args: argparse.Namespace, profile: Profile) -> TopOptions:
    """The table's options: perf's defaults for ``profile`` (:func:`perf_defaults`), with the
    options given in the order given."""
    from dataclasses import replace

    from ..perf.callgraph import GraphOptions
    from ..perf.top import SortKeyError, TopOptions, parse_sort, perf_defaults

    defaults = perf_defaults(profile)
    children = args.children if args.children is not None else defaults.children
    sort = TopOptions().sort
    if args.sort is not None:
        try:
            sort = parse_sort(args.sort)
        except SortKeyError as error:
            if error.known:
                raise UsageError(f"perf report: --sort {error.key} of perf is not supported") \
                    from None  # fmt: skip
            raise UsageError(f"perf report: unknown --sort key: {error.key!r}") from None
        if "srcline" in sort:
            # The table sorts by the frames' source lines, which the frames do not carry yet:
            # perf's come from addr2line (util/srcline.c), which is not read here.
            raise UsageError("perf report: --sort srcline of perf is not supported yet")
    # perf's callchain_param, as the options change it in their order, and whether the
    # graphs are shown (by default where the recording has callchains).
    state = GraphOptions()
    shown = profile.has_callchains()
    percent_limit = 0.0
    for option in getattr(args, "option_order", None) or []:
        if option == "call_graph":
            changed = parse_call_graph(args.call_graph, state)
            state, shown = changed or state, changed is not None
        elif option == "percent_limit":
            percent_limit = _percent(args.percent_limit, "--percent-limit")
            # parse_percent_limit: callchain_param.min_percent too, as a C float
            state = replace(state, threshold=_float32(percent_limit))
    if args.call_graph == "none":  # --no-call-graph
        shown = False
    if args.inverted:  # builtin-report.c: callchain_param.order = ORDER_CALLER
        state = replace(state, order="caller")
    graph = state if shown else None
    if graph is not None and not profile.has_callchains():
        raise UsageError(
            "perf report: -g: the recording has no callchains (record with -g or --call-graph)"
        )
    return TopOptions(sort, children, graph, percent_limit, args.sort, args.time)


def run_report(args: argparse.Namespace) -> int:
    _read_ahead(args)
    from functools import partial

    if args.format != "top":
        given = [option for name, option in _TOP_ONLY if getattr(args, name) not in (None, False)]
        if given:
            raise UsageError(f"perf report: {given[0]} is for --format top")
    if args.title is not None and args.format != "flamegraph":
        raise UsageError("perf report: --title is for --format flamegraph")
    if args.format == "pprof":
        if args.output is None and sys.stdout.isatty():
            raise UsageError("perf report: pprof is binary: give -o OUT")
        from ..perf.pprof import pprof_bytes  # checks that protobuf is there, before any reading

    _refuse_inputs(args, args.output)
    folding = args.format == "folded"
    whole, _stats, slices = _read(args, partial(_folded_slice, args) if folding else None)
    if folding:
        from ..perf import report

        folded = report.joined_folded(slices)  # made in parallel (-j)
        if folded is not None:
            _write_text(args.output, partial(report.write_folded_stacks, folded), _paths(args))
            return 0
    profile = _filtered(whole(), args)
    top = _top_options(args, profile) if args.format == "top" else None
    inputs = _paths(args)
    if args.format == "pprof":
        _write_binary(args.output, pprof_bytes(profile), inputs)
        return 0
    _write_text(args.output, _text_writer(args, profile, top), inputs)
    return 0


def _text_writer(
    args: argparse.Namespace, profile: Profile, top: TopOptions | None
) -> Callable[[Any], None]:
    """What writes ``profile`` in the text ``--format`` asked for (its writer's module, and
    that one alone, imported: the flame graph's page and speedscope's are not needed for
    folded stacks)."""
    if args.format == "speedscope":
        from ..perf.speedscope import write_speedscope

        return lambda out: write_speedscope(profile, out)
    if args.format == "flamegraph":
        from ..perf.flamegraph import write_flamegraph

        title = "Flame Graph" if args.title is None else args.title
        return lambda out: write_flamegraph(profile, out, title=title)
    from ..perf import report

    writers = {
        "top": lambda out: report.write_top(profile, out, options=top),
        "folded": lambda out: report.write_folded(profile, out),
        "json": lambda out: report.write_json(profile, out),
    }
    return writers[args.format]


def run_stats(args: argparse.Namespace) -> int:
    _read_ahead(args)
    from ..perf.stats import stats_json, stats_text

    _refuse_inputs(args, None)
    _whole, stats, _slices = _read(args, count_walks=True)
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
