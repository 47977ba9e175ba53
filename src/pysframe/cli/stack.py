"""``pysframe stack``: backtraces of every thread of a live process, a core file or a program
under a GDB remote stub (:mod:`pysframe.unwind.stack`), printed as eu-stack prints them, or as
JSON (``--json``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import UnwindError
from ..unwind.limits import DEFAULT_MAX_FRAMES, EXCHANGE_TIMEOUT, TIME_LIMIT
from .options import add_symbol_options, positive_int, symbol_options
from .report import warn
from .usage import UsageError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stack",
        help="print the stack of every thread of a process or a core file",
        description="Print each thread's backtrace, unwound with SFrame (generated from "
        ".eh_frame for modules without .sframe), like eu-stack.",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "pid", nargs="?", type=int, metavar="PID", help="process to attach to (ptrace)"
    )
    target.add_argument("--core", metavar="CORE", help="core file to read instead of a process")
    target.add_argument(
        "--remote", metavar="HOST:PORT", type=_remote_address,
        help="program stopped under a GDB remote stub (gdbserver, qemu-user -g PORT)",
    )
    parser.add_argument(
        "--exe", metavar="EXE",
        help="the executable of the core or remote program (needed when the core has no NT_FILE "
        "note, or the stub does not name it)",
    )
    parser.add_argument(
        "--sysroot", metavar="DIR",
        help="look for the program's files under DIR first (gdb's 'set sysroot'), for cores and "
        "remote programs of another machine",
    )
    parser.add_argument(
        "--time-limit", type=_seconds, default=None, metavar="SECONDS",
        help="with --remote: seconds the whole exchange with the stub may take (default "
        f"{TIME_LIMIT:g}; 0: no limit; each exchange also has {EXCHANGE_TIMEOUT:g} s at most); "
        "a slow link to a program with thousands of threads may need more",
    )
    parser.add_argument(
        "--continue", dest="resume", action="store_true",
        help="with --remote: let the program run to its next stop (a signal, a breakpoint) first",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--max-frames", type=positive_int, default=DEFAULT_MAX_FRAMES, metavar="N",
        help=f"at most N frames per thread (default {DEFAULT_MAX_FRAMES})",
    )
    parser.add_argument(
        "--sframe", choices=("auto", "own", "generated"), default="auto",
        help="which SFrame unwinds each module: auto (default) its own .sframe when it passes "
        "the checks (sorted, not overlapping, inside the module's code, not several sections "
        "back to back), else SFrame generated from its .eh_frame, with a warning; own: its "
        "own .sframe as it is, and none generated; generated: SFrame generated from its "
        ".eh_frame",
    )
    parser.add_argument(
        "--no-generate", dest="sframe", action="store_const", const="own",
        help="the same as --sframe own",
    )
    parser.add_argument(
        "--lines", action="store_true",
        help="show each frame's source file and line, and the functions inlined there, from "
        "DWARF (the file's, or its separate debug file's); with --json, a source list per "
        "frame",
    )
    parser.add_argument(
        "--format", choices=("eu-stack", "gdb"), default="eu-stack",
        help="eu-stack's layout (default), or gdb's 'thread apply all bt' (with --lines' "
        "source and inlined frames, without argument values)",
    )
    add_symbol_options(parser)
    parser.set_defaults(func=run)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _remote_address(text: str) -> str:
    from ..unwind.remote import parse_address
    try:
        parse_address(text)
    except UnwindError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def run(args: argparse.Namespace) -> int:
    from ..unwind.stack import (
        module_warnings,
        report_json,
        report_lines,
        report_lines_gdb,
        stack_of_core,
        stack_of_process,
        stack_of_remote,
    )
    if args.exe and not (args.core or args.remote):
        raise UsageError("stack: --exe needs --core or --remote")
    if args.sysroot and not (args.core or args.remote):
        raise UsageError("stack: --sysroot needs --core or --remote")
    if args.resume and not args.remote:
        raise UsageError("stack: --continue needs --remote")
    if args.time_limit is not None and not args.remote:
        raise UsageError("stack: --time-limit needs --remote")
    from ..sources.trust import Policy

    policy = Policy(args.sframe)
    symbols = symbol_options(args)
    if args.remote:
        report = stack_of_remote(
            args.remote, args.exe, sysroot=args.sysroot, resume=args.resume,
            time_limit=TIME_LIMIT if args.time_limit is None else args.time_limit or None,
            max_frames=args.max_frames, policy=policy, symbols=symbols,
        )
    elif args.core:
        report = stack_of_core(
            args.core, args.exe, sysroot=args.sysroot, max_frames=args.max_frames,
            policy=policy, symbols=symbols,
        )
    else:
        report = stack_of_process(
            args.pid, max_frames=args.max_frames, policy=policy, symbols=symbols
        )
    for warning in module_warnings(report):
        warn(warning)
    for warning in symbols.warnings:  # names left mangled for their size or time
        warn(warning)
    if args.json:
        json.dump(report_json(report, lines=args.lines), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        if args.format == "gdb":
            text = report_lines_gdb(report, demangle=args.demangle)
        else:
            text = report_lines(report, lines=args.lines)
        for line in text:
            sys.stdout.write(line + "\n")
    return 0
