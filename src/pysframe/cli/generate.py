"""``pysframe generate``: make an SFrame section from a file's DWARF CFI.

pysframe generate FILE -o OUT.sframe [--version 1|2|3]
pysframe generate FILE --inject -o NEWFILE
pysframe generate FILE --report
pysframe generate FILE --compact ...     # the section compacted (see pysframe compact)
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from .report import note, warn
from .usage import UsageError

if TYPE_CHECKING:
    from ..elf.inject import EncodableSection
    from ..generate import GenerateResult


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="generate .sframe from .eh_frame/.debug_frame (GNU as rules)",
        description="Translate the DWARF CFI of an ELF file to an SFrame section, with the "
        "rules GNU as 2.47 applies, and write the section or a copy of the file carrying it.",
    )
    parser.add_argument("file", metavar="FILE", help="ELF executable, shared library or object")
    parser.add_argument(
        "-o", "--output", metavar="OUT", help="where to write the section (or the new file)"
    )
    parser.add_argument(
        "--version",
        type=int,
        choices=(1, 2, 3),
        default=3,
        dest="sframe_version",
        help="SFrame version to write (default 3)",
    )
    parser.add_argument(
        "--inject",
        action="store_true",
        help="write a copy of FILE with a loadable .sframe section and PT_GNU_SFRAME segment",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="with --inject: replace FILE's own SFrame section (its PT_GNU_SFRAME and .sframe "
        "header then point at the new one; the old bytes stay, unused)",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="list skipped functions with reasons, and the coverage",
    )
    parser.add_argument(
        "--compact",
        action="store_true",
        help="compact the section (functions with identical FRE blocks share one copy; the "
        "smallest FRE widths); big-endian sections do not share blocks",
    )
    parser.add_argument(
        "--ld-compatible",
        action="store_true",
        help="describe .plt.got exactly as GNU ld 2.47 does (CFA sp+16)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..generate import generate_from_elf
    if not args.output and not args.report:
        raise UsageError("generate: nothing to do: give -o OUTPUT and/or --report")
    if args.inject and not args.output:
        raise UsageError("generate: --inject needs -o NEWFILE")
    if args.replace and not args.inject:
        raise UsageError("generate: --replace goes with --inject")
    from ..output import refuse_inputs

    if args.output:
        refuse_inputs(args.output, [args.file])  # before the work, not only when writing
    result = generate_from_elf(args.file, args.sframe_version, ld_compatible=args.ld_compatible)
    written: EncodableSection = result
    if args.compact:
        from ..tools.compact import CompactedGeneration

        written = compacted = CompactedGeneration(result)
        if compacted.note is not None:
            note(compacted.note, args.file)
    if args.output:
        if args.inject:
            from ..elf.inject import inject_file

            inject_file(args.file, args.output, written, replace=args.replace)
        else:
            from ..output import write_file

            # Atomically, never over the input; "-" is standard output.
            write_file(args.output, bytes(written.data), inputs=[args.file])
            _warn_if_relocatable(args.file)
    if args.report:
        print_report(args.file, result)
        if args.compact:
            print(f"compacted: {len(written.data)} bytes", file=sys.stdout)
    return 0


def _warn_if_relocatable(path: str) -> None:
    from ..elf.reader import ElfReader

    with ElfReader.open(path) as image:
        if image.is_relocatable:
            warn(
                "a relocatable object: function starts are addresses in its unlinked code "
                "sections, each at address 0, and no relocations are written, so the section "
                "cannot be linked",
                path,
            )


def print_report(path: str, result: GenerateResult) -> None:
    out = sys.stdout
    covered = result.functions_covered
    total = result.functions_total
    print(f"{path}: SFrame V{int(result.version)}, {result.abi.name}", file=out)
    for skip in result.skipped:
        if skip.kept_without_rows:
            # gas' reason begins "no SFrame FDE emitted": this FDE is there, without rows.
            reason = "signal frame; " + skip.reason.split("; ", 1)[-1]
            print(f"  kept without rows {skip.start:#x} (+{skip.size}): {reason}", file=out)
        else:
            print(f"  skipped {skip.start:#x} (+{skip.size}): {skip.reason}", file=out)
    share = 100.0 * covered / total if total else 100.0
    print(f"functions: {covered} of {total} covered ({share:.1f}%)", file=out)
    text_total = result.text_bytes_total
    text_share = 100.0 * result.text_bytes_covered / text_total if text_total else 0.0
    print(
        f"text bytes: {result.text_bytes_covered} of {text_total} covered ({text_share:.1f}%)",
        file=out,
    )
    print(
        f"FREs: {result.section.header.num_fres}, section size: {len(result.data)} bytes, "
        f"for address {result.section_address:#x}",
        file=out,
    )
