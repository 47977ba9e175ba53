"""``pysframe dump FILE...``: print SFrame sections as objdump --sframe (2.47) prints them.

V1 sections print as ``readelf --sframe`` of binutils 2.40 (objdump 2.47 cannot read V1);
``--format readelf`` asks for readelf's framing for every version.  For each file objdump
prints ``\\nFILE:     file format NAME\\n\\n`` and then the section, or ``No .sframe section
present``; readelf prints nothing before a single file and ``\\nFile: FILE\\n`` before each of
several.  Problems with one file are reported on stderr and the others are still dumped;
the exit status is then 1.  The section comes from :func:`pysframe.sources.resolve_sframe`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import NoSFrameError, NotSFrameDataError, SFrameError
from .options import add_source_options, check_source_options
from .report import report_error, warn
from .usage import UsageError

if TYPE_CHECKING:
    from ..sources import ResolvedSFrame


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dump",
        help="print SFrame sections like objdump --sframe",
        description=(
            "Print the SFrame section of each FILE with the text of GNU objdump --sframe "
            "(binutils 2.47); V1 sections with the text of readelf --sframe (binutils 2.40)."
        ),
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="ELF files (or bare sections)")
    parser.add_argument(
        "--format",
        choices=("objdump", "readelf"),
        default=None,
        help="framing of the output (default: objdump for V2/V3, readelf for V1)",
    )
    parser.add_argument(
        "--no-relocate",
        dest="relocate",
        action="store_false",
        help="in relocatable objects show the stored fields, without applying the section's "
        "relocations (as objdump 2.44 did)",
    )
    add_source_options(parser)
    formats = parser.add_mutually_exclusive_group()
    formats.add_argument(
        "--json", action="store_true", help="print the content as JSON (a list, one item a file)"
    )
    formats.add_argument(
        "--jsonl",
        action="store_true",
        help="print JSON Lines: per file a section record, then one record per function",
    )
    parser.set_defaults(func=run)


def _resolve(path: str, args: argparse.Namespace) -> ResolvedSFrame:
    from ..sources import resolve_sframe

    found = resolve_sframe(
        path,
        section=args.section,
        raw=args.raw,
        address=args.address,
        generate=args.generate,
        relocate=args.relocate,
    )
    if found.note:
        warn(found.note, path)
    pieces = found.pieces
    if pieces > 1:
        warn(
            f"{found.name} holds {pieces} SFrame sections back to back (a linker concatenated "
            "them); showing the first (pysframe repair merges them)",
            path,
        )
    return found


def _dump_text(path: str, args: argparse.Namespace, several: bool) -> int:
    """Write one file's dump; return its exit status."""
    from ..format.constants import Version
    from ..tools.dump import (
        contents_line,
        objdump_file_header,
        readelf_file_header,
        section_chunks,
    )

    out = sys.stdout
    try:
        found = _resolve(path, args)
    except NoSFrameError as error:
        _no_section_text(path, error, args, several)
        report_error(error, args)
        return 1
    except SFrameError as error:
        report_error(error, args)
        return 1
    readelf = args.format == "readelf" or (args.format is None and found.version is Version.V1)
    if readelf:
        prefix = readelf_file_header(path) if several else ""
    else:
        prefix = objdump_file_header(path, found.file_format)
    try:
        with found.located():
            body = section_chunks(found.section)  # decodes and checks the whole section first
    except SFrameError as error:
        out.write(prefix)
        report_error(error, args)
        return 1
    out.write(prefix + contents_line(found.name))
    _write_ascii(out, body)
    return 0


def _no_section_text(
    path: str, error: NoSFrameError, args: argparse.Namespace, several: bool
) -> None:
    """What objdump (readelf) prints on stdout for an ELF file without the section."""
    from ..elf.reader import ElfReader
    from ..elf.sframe import DEFAULT_NAME
    from ..tools.dump import (
        objdump_file_header,
        objdump_no_section,
        objdump_not_sframe,
        readelf_file_header,
    )

    shown = args.section or DEFAULT_NAME
    if args.format == "readelf":
        if several:
            sys.stdout.write(readelf_file_header(path))
        return
    with ElfReader.open(path) as image:
        file_format = image.file_format
    present = isinstance(error, NotSFrameDataError)
    text = objdump_not_sframe(shown) if present else objdump_no_section(shown)
    sys.stdout.write(objdump_file_header(path, file_format) + text)


def _write_ascii(out: TextIO, chunks: Iterable[bytes]) -> None:
    """Write ASCII chunks to the bytes layer of ``out`` when it has one (no re-encoding)."""
    binary = getattr(out, "buffer", None)
    if binary is None:
        out.write(b"".join(chunks).decode("ascii"))
        return
    out.flush()
    for chunk in chunks:
        binary.write(chunk)
    binary.flush()


def _dump_json(path: str, args: argparse.Namespace, out: TextIO, first: bool) -> bool:
    """Write one file's JSON document (``--json``: an item of the list; ``--jsonl``: a line for
    the section, then one per function), streamed; False when the file could not be dumped (and
    nothing was written for it)."""
    from ..tools.dump import function_json_pieces, section_header_json, section_json_chunks

    try:
        found = _resolve(path, args)
        with found.located():
            # Every FDE and FRE is checked here, before the first byte is written.
            functions = function_json_pieces(found.section) if args.jsonl else None
            pieces = None if args.jsonl else section_json_chunks(found.section)
    except SFrameError as error:
        report_error(error, args)
        return False
    about = {
        "file": path,
        "file_format": found.file_format,
        "section": found.name,
        "origin": str(found.origin),
    }
    if functions is not None:
        header = {"record": "section", **about, "sframe": section_header_json(found.section)}
        out.write(json.dumps(header) + "\n")
        prefix = json.dumps({"record": "function", "file": path})[:-1] + ', "function": '
        _write_batched(out, _lines(functions, prefix))
        return True
    assert pieces is not None
    out.write(("[\n" if first else ",\n") + json.dumps(about)[:-1] + ', "sframe": ')
    _write_batched(out, pieces)
    out.write("}")
    return True


def _lines(functions: Iterable[tuple[bool, str]], prefix: str) -> Iterator[str]:
    """A JSON Lines record per function, ``prefix`` then its object, from the pieces of
    :func:`~pysframe.tools.dump.function_json_pieces`."""
    first = True
    for begins, piece in functions:
        if begins:
            yield prefix if first else "}\n" + prefix
            first = False
        yield piece
    if not first:
        yield "}\n"


def _write_batched(
    out: TextIO, pieces: Iterable[str], batch: int = 1024, size: int = 1 << 20
) -> None:
    """Write ``pieces`` a batch at a time (fewer calls when the stream is unbuffered): ``batch``
    pieces, or fewer holding ``size`` characters."""
    held: list[str] = []
    length = 0
    for piece in pieces:
        held.append(piece)
        length += len(piece)
        if len(held) == batch or length >= size:
            out.write("".join(held))
            held.clear()
            length = 0
    out.write("".join(held))


def run(args: argparse.Namespace) -> int:
    check_source_options(args, "dump", args.files)
    if args.format is not None and (args.json or args.jsonl):
        raise UsageError("dump: --format frames the text dump; JSON has one layout")
    status = 0
    if args.json or args.jsonl:
        written = 0
        for path in args.files:
            if _dump_json(path, args, sys.stdout, written == 0):
                written += 1
            else:
                status = 1
        if args.json:
            sys.stdout.write("[]\n" if written == 0 else "\n]\n")
        return status
    several = len(args.files) > 1
    for path in args.files:
        status = max(status, _dump_text(path, args, several))
    return status
