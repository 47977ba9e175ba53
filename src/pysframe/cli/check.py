"""``pysframe check FILE...``: validate SFrame sections (see :mod:`pysframe.validate`).

One line per finding: ``FILE: SEVERITY: [RULE] function N offset 0xOFF: MESSAGE``.
Exit status: 0 every file clean, 1 findings or a file that could not be read (or has no
SFrame section), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ..errors import SFrameError
from .options import add_source_options, check_source_options
from .report import error_text, report_error, warn
from .usage import UsageError

if TYPE_CHECKING:
    from ..tools.validate import Finding

#: Exit statuses: a file that cannot be read is a failure like a finding (exit 1; usage
#: errors exit 2); the JSON report tells them apart per file ("unreadable", "findings").
CLEAN, FINDINGS, UNREADABLE = 0, 1, 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check",
        help="validate SFrame sections (kernel, linker and ELF checks)",
        description="Validate the SFrame sections of ELF files (or raw sections with --raw) "
        "against the rules of the format and of GNU ld, and with --kernel the Linux kernel's. "
        "One line per finding: FILE: SEVERITY: [RULE] function N offset 0xOFF: MESSAGE. "
        "Exit status: 0 every file clean, 1 findings or a file that could not be read (or "
        "has no SFrame section), 2 a usage error.",
    )
    parser.add_argument("files", nargs="*", metavar="FILE", help="ELF files (or raw sections)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--kernel", action="store_true", help="also require what the Linux kernel requires"
    )
    parser.add_argument(
        "--gaps", action="store_true", help="warn about address gaps between functions"
    )
    parser.add_argument(
        "--foreign-endian",
        action="store_true",
        help="also warn about what readers of the other byte order reject (shared FRE blocks)",
    )
    parser.add_argument("--errors-only", action="store_true", help="do not report warnings")
    add_source_options(parser)
    parser.add_argument("--list-rules", action="store_true", help="list the rule ids and exit")
    parser.set_defaults(func=run)


def check_file(path: str, args: argparse.Namespace) -> list[Finding]:
    """Findings for one file (a bare section with ``--raw`` or the SFrame magic, else an ELF
    file's section, or with ``--generate`` one generated for a file without); SFrameError when
    it cannot be read."""
    from ..elf.reader import ElfReader
    from ..errors import NoSFrameError, NotSFrameDataError
    from ..input import read_input
    from ..sources import generated_sframe, is_bare_section
    from ..tools.validate import validate_bytes, validate_elf, validate_generated

    rules = {
        "kernel": args.kernel, "address_gaps": args.gaps, "foreign_endian": args.foreign_endian
    }
    if args.raw or is_bare_section(path):
        return validate_bytes(read_input(path), args.address or 0, **rules)
    with ElfReader.open(path) as image:
        try:
            return validate_elf(image, args.section, **rules)
        except NotSFrameDataError:
            raise
        except NoSFrameError:
            if not args.generate:
                raise
        generated = generated_sframe(image)
        warn(generated.note or "", path)
        return validate_generated(generated, **rules)


def run(args: argparse.Namespace) -> int:
    from ..tools.validate import RULES, Severity

    if args.list_rules:
        if args.files:
            raise UsageError("check: --list-rules takes no FILE")
        for rule, text in RULES.items():
            print(f"{rule:18} {text}")
        return CLEAN
    if not args.files:
        raise UsageError("check: no FILE given")
    check_source_options(args, "check", args.files)
    status = CLEAN
    report: list[dict[str, Any]] = []
    for path in args.files:
        try:
            findings = check_file(path, args)
        except SFrameError as error:
            error.at(path=path)
            message = error_text(error, args)
            report.append({"file": path, "status": "unreadable", "error": message, "findings": []})
            if not args.json:
                report_error(error, args)
            status = max(status, UNREADABLE)
            continue
        if args.errors_only:
            findings = [f for f in findings if f.severity is Severity.ERROR]
        report.append(
            {
                "file": path,
                "status": "findings" if findings else "clean",
                "findings": [f.to_dict() for f in findings],
            }
        )
        if not args.json:
            for finding in findings:
                print(f"{path}: {finding}")
        if findings:
            status = max(status, FINDINGS)
    if args.json:
        print(json.dumps({"status": status, "files": report}, indent=2))
    return status

