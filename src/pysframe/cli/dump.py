"""``pysframe dump FILE...``: print SFrame sections as objdump --sframe (2.47) prints them.

V1 sections print as ``readelf --sframe`` of binutils 2.40 (objdump 2.47 cannot read V1);
``--format readelf`` asks for readelf's framing for every version.  For each file objdump
prints ``\\nFILE:     file format NAME\\n\\n`` and then the section, or ``No .sframe section
present``; readelf prints nothing before a single file and ``\\nFile: FILE\\n`` before each of
several.  Problems with one file are reported on stderr and the others are still dumped;
the exit status is then 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from ..errors import SFrameError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dump",
        help="print SFrame sections like objdump --sframe",
        description=(
            "Print the SFrame section of each FILE with the text of GNU objdump --sframe "
            "(binutils 2.47); V1 sections with the text of readelf --sframe (binutils 2.40)."
        ),
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="ELF files")
    parser.add_argument(
        "--section",
        metavar="NAME",
        help="section to dump (default: .sframe, found by name, section type or PT_GNU_SFRAME)",
    )
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


def _error(message: str) -> None:
    sys.stdout.flush()
    print(f"pysframe: {message}", file=sys.stderr)


def _dump_text(path: str, args: argparse.Namespace, several: bool) -> int:
    """Write one file's dump; return its exit status."""
    from ..elf.image import ElfImage
    from ..elf.sframe import DEFAULT_NAME, find_sframe
    from ..format.constants import Version
    from ..tools.dump import (
        contents_line,
        objdump_file_header,
        objdump_no_section,
        objdump_not_sframe,
        readelf_file_header,
        section_chunks,
    )
    out = sys.stdout
    asked: str | None = args.section
    shown = asked or DEFAULT_NAME
    try:
        image = ElfImage.open(path)
    except SFrameError as error:
        _error(str(error))
        return 1
    with image:
        found = None
        try:
            found = find_sframe(image, asked)
            objdump_header = objdump_file_header(path, image.file_format)
            if found is None or not found.is_sframe_data(asked):
                if args.format != "readelf":
                    out.write(objdump_header)
                    missing = found is None
                    out.write(objdump_no_section(shown) if missing else objdump_not_sframe(shown))
                elif several:
                    out.write(readelf_file_header(path))
                what = "no" if found is None else "no SFrame data in the"
                _error(f"{path}: {what} {shown} section")
                return 1
            readelf = args.format == "readelf" or (
                args.format is None and found.version is Version.V1
            )
            prefix = (readelf_file_header(path) if several else "") if readelf else objdump_header
            try:
                sframe = found.decode(args.relocate)
                body = section_chunks(sframe)  # checks the whole section first
            except SFrameError:
                out.write(prefix)
                raise
            out.write(prefix + contents_line(found.name))
            _write_ascii(out, body)
        except SFrameError as error:
            _error(f"{path}: {found.name}: {error}" if found else f"{error}")
            return 1
    return 0


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
    from ..elf.image import ElfImage
    from ..elf.sframe import DEFAULT_NAME, find_sframe
    from ..tools.dump_json import function_json_lines, section_header_json, section_json_chunks

    try:
        with ElfImage.open(path) as image:
            found = find_sframe(image, args.section)
            if found is None:
                _error(f"{path}: no {args.section or DEFAULT_NAME} section")
                return False
            try:
                section = found.decode(args.relocate)
                # Every FDE and FRE is checked here, before the first byte is written.
                functions = function_json_lines(section) if args.jsonl else None
                pieces = None if args.jsonl else section_json_chunks(section)
            except SFrameError as error:
                _error(f"{path}: {found.name}: {error}")
                return False
            about = {"file": path, "file_format": image.file_format, "section": found.name}
            if functions is not None:
                header = {"record": "section", **about, "sframe": section_header_json(section)}
                out.write(json.dumps(header) + "\n")
                prefix = json.dumps({"record": "function", "file": path})[:-1] + ', "function": '
                _write_batched(out, (prefix + line + "}\n" for line in functions))
                return True
            assert pieces is not None
            out.write(("[\n" if first else ",\n") + json.dumps(about)[:-1] + ', "sframe": ')
            _write_batched(out, pieces)
            out.write("}")
            return True
    except SFrameError as error:
        _error(str(error))
        return False


def _write_batched(out: TextIO, pieces: Iterable[str], batch: int = 1024) -> None:
    """Write ``pieces`` a batch at a time (fewer calls when the stream is unbuffered)."""
    held: list[str] = []
    for piece in pieces:
        held.append(piece)
        if len(held) == batch:
            out.write("".join(held))
            held.clear()
    out.write("".join(held))


def run(args: argparse.Namespace) -> int:
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
