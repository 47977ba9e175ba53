"""``pysframe stack``: backtraces of every thread of a live process or a core file
(:mod:`pysframe.unwind.stack`), printed as eu-stack prints them, or as JSON (``--json``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import UnwindError
from ..unwind.core import DEFAULT_MAX_FRAMES
from ..unwind.stack import report_json, report_lines, stack_of_core, stack_of_process


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "stack",
        help="print the stack of every thread of a process or a core file",
        description="Print each thread's backtrace, unwound with SFrame (generated from "
        ".eh_frame for modules without .sframe), like eu-stack.",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("pid", nargs="?", type=int, help="process to attach to (ptrace)")
    target.add_argument("--core", metavar="CORE", help="core file to read instead of a process")
    parser.add_argument("--exe", metavar="EXE", help="the core's executable, if it moved")
    parser.add_argument(
        "--sysroot", metavar="DIR",
        help="look for the core's shared objects under DIR first (gdb's 'set sysroot')",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--max-frames", type=int, default=DEFAULT_MAX_FRAMES, metavar="N",
        help=f"at most N frames per thread (default {DEFAULT_MAX_FRAMES})",
    )
    parser.add_argument(
        "--no-generate", action="store_true",
        help="do not generate SFrame from .eh_frame for modules without .sframe",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.exe and not args.core:
        raise UnwindError("--exe needs --core")
    if args.max_frames < 1:
        raise UnwindError(f"--max-frames must be at least 1, not {args.max_frames}")
    generate = not args.no_generate
    if args.core:
        report = stack_of_core(
            args.core, args.exe, sysroot=args.sysroot, max_frames=args.max_frames,
            generate=generate,
        )
    else:
        report = stack_of_process(args.pid, max_frames=args.max_frames, generate=generate)
    if args.json:
        json.dump(report_json(report), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for line in report_lines(report):
            sys.stdout.write(line + "\n")
    return 0
