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
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import SFrameError
from .usage import UsageError, add_source_options

if TYPE_CHECKING:
    from ..format.section import SFrameSection
    from ..tools.source import OtherSection


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
    add_source_options(parser, "show")
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
        bare = _bare(path, args)
        if bare is not None:
            return _dump_other_text(bare, args, several)
        image = ElfImage.open(path)
    except SFrameError as error:
        _error(_named(path, error))
        return 1
    with image:
        found = None
        try:
            found = find_sframe(image, asked)
            objdump_header = objdump_file_header(path, image.file_format)
            if found is None and args.generate:
                from ..tools.source import generated_note, generated_section

                generated = generated_section(image)
                _error(generated_note(path))
                return _dump_other_text(generated, args, several)
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


def _named(path: str, error: SFrameError) -> str:
    text = str(error)
    return text if text.startswith(f"{path}:") else f"{path}: {text}"


def _bare(path: str, args: argparse.Namespace) -> OtherSection | None:
    """The bare section file ``path`` (``--raw``, or the SFrame magic), else None."""
    from ..tools.source import bare_section, is_bare_section

    if args.raw or is_bare_section(path):
        return bare_section(path, args.address or 0)
    return None


def _dump_other_text(other: OtherSection, args: argparse.Namespace, several: bool) -> int:
    """Write the dump of a bare or generated section, framed as an ELF file's."""
    from ..format.constants import Version
    from ..tools.dump import contents_line, objdump_file_header, readelf_file_header

    out = sys.stdout
    version = other.section.header.version
    readelf = args.format == "readelf" or (args.format is None and version is Version.V1)
    prefix = (
        (readelf_file_header(other.path) if several else "")
        if readelf
        else objdump_file_header(other.path, other.file_format)
    )
    try:
        body = _chunks(other.section)
    except SFrameError as error:
        out.write(prefix)
        _error(f"{other.path}: {other.name}: {error}")
        return 1
    out.write(prefix + contents_line(other.name))
    _write_ascii(out, body)
    return 0


def _chunks(section: SFrameSection) -> Iterable[bytes]:
    from ..tools.dump import section_chunks

    return section_chunks(section)  # checks the whole section first


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
    from ..tools.source import generated_note, generated_section

    try:
        bare = _bare(path, args)
        if bare is not None:
            return _write_json(out, first, args, bare.section, _about(bare))
        with ElfImage.open(path) as image:
            found = find_sframe(image, args.section)
            if found is None and args.generate:
                generated = generated_section(image)
                _error(generated_note(path))
                return _write_json(out, first, args, generated.section, _about(generated))
            if found is None:
                _error(f"{path}: no {args.section or DEFAULT_NAME} section")
                return False
            try:
                section = found.decode(args.relocate)
            except SFrameError as error:
                _error(f"{path}: {found.name}: {error}")
                return False
            about = {"file": path, "file_format": image.file_format, "section": found.name}
            return _write_json(out, first, args, section, about)
    except SFrameError as error:
        _error(_named(path, error))
        return False


def _about(other: OtherSection) -> dict[str, Any]:
    return {
        "file": other.path,
        "file_format": other.file_format,
        "section": other.name,
        "origin": other.origin,
    }


def _write_json(
    out: TextIO,
    first: bool,
    args: argparse.Namespace,
    section: SFrameSection,
    about: dict[str, Any],
) -> bool:
    from ..tools.dump_json import function_json_lines, section_header_json, section_json_chunks

    path = about["file"]
    try:
        # Every FDE and FRE is checked here, before the first byte is written.
        functions = function_json_lines(section) if args.jsonl else None
        pieces = None if args.jsonl else section_json_chunks(section)
    except SFrameError as error:
        _error(f"{path}: {about['section']}: {error}")
        return False
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
    from ..tools.source import is_elf_file

    if args.address is not None and not args.raw and any(is_elf_file(p) for p in args.files):
        raise UsageError("dump: --address goes with bare sections (--raw)")
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
