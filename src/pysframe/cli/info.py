"""``pysframe info FILE...``: a short summary of each file's SFrame section."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

from ..elf.image import SHF_ALLOC, SHF_EXECINSTR, ElfImage
from ..errors import ElfError, SFrameError
from ..format.constants import FdeType, Flags, PcType
from ..format.section import SFrameSection
from .dump import load_section

#: p_flags bit of an executable segment (gABI).
PF_X = 0x1


@dataclass(frozen=True, slots=True)
class SectionInfo:
    file: str
    file_format: str
    section: str
    address: int
    size: int
    version: int
    abi: str
    flags: list[str]
    cfa_fixed_fp_offset: int
    cfa_fixed_ra_offset: int
    functions: int
    rows: int
    flex_functions: int
    pcmask_functions: int
    signal_functions: int
    #: Bytes of code the functions cover (their ranges merged; summed in relocatable objects,
    #: where every text section starts at 0).
    covered_bytes: int
    #: Bytes of executable sections (or PF_X segments when section headers are stripped).
    text_bytes: int

    @property
    def coverage(self) -> float | None:
        return self.covered_bytes / self.text_bytes if self.text_bytes else None


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "info",
        help="summarise the SFrame section of ELF files",
        description="Print version, ABI, flags, functions, rows, size and text coverage of the "
        "SFrame section of each FILE.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="ELF files")
    parser.add_argument("--section", metavar="NAME", help="section to read (default: .sframe)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def _covered(section: SFrameSection, relocatable: bool) -> int:
    ranges = sorted((f.start, f.end) for f in section if f.size > 0)
    if relocatable:
        return sum(end - start for start, end in ranges)
    covered, reach = 0, None
    for start, end in ranges:
        if reach is None or start >= reach:
            covered += end - start
            reach = end
        elif end > reach:
            covered += end - reach
            reach = end
    return covered


def _text_bytes(image: ElfImage) -> int:
    sections = image.sections()
    if sections:
        return sum(s.size for s in sections if s.flags & SHF_EXECINSTR and s.flags & SHF_ALLOC)
    return sum(seg.filesz for seg in image.load_segments() if seg.flags & PF_X)


def section_info(path: str, name: str | None = None) -> SectionInfo:
    """Summarise the SFrame section of ``path`` (ElfError / FormatError on failure)."""
    with ElfImage.open(path) as image:
        elf_section = image.find_sframe(name)
        if elf_section is None:
            raise ElfError(f"{path}: no {name or '.sframe'} section")
        try:
            sframe = load_section(image, elf_section)
            functions = list(sframe)
            h = sframe.header
            return SectionInfo(
                file=path,
                file_format=image.file_format,
                section=elf_section.name,
                address=elf_section.address,
                size=len(sframe.data),
                version=int(h.version),
                abi=h.abi.name,
                flags=[f.name or "" for f in Flags if f.value and h.flags & f],
                cfa_fixed_fp_offset=h.cfa_fixed_fp_offset,
                cfa_fixed_ra_offset=h.cfa_fixed_ra_offset,
                functions=len(functions),
                rows=sum(f.num_fres for f in functions),
                flex_functions=sum(f.fde_type is FdeType.FLEX for f in functions),
                pcmask_functions=sum(f.pc_type is PcType.MASK for f in functions),
                signal_functions=sum(f.signal_frame for f in functions if h.version >= 3),
                covered_bytes=_covered(sframe, image.is_relocatable),
                text_bytes=_text_bytes(image),
            )
        except SFrameError as error:
            raise SFrameError(f"{path}: {elf_section.name}: {error}") from None


def info_text(info: SectionInfo) -> str:
    coverage = f"{info.covered_bytes} of {info.text_bytes} bytes of executable code" + (
        f" ({100 * info.coverage:.1f}%)" if info.coverage is not None else ""
    )
    fixed = f"FP {info.cfa_fixed_fp_offset}, RA {info.cfa_fixed_ra_offset}"
    lines = [
        f"file:           {info.file} ({info.file_format})",
        f"section:        {info.section} at {info.address:#x}, {info.size} bytes",
        f"version:        {info.version}",
        f"abi:            {info.abi}",
        f"flags:          {', '.join(info.flags) or 'NONE'}",
        f"fixed offsets:  {fixed}",
        f"functions:      {info.functions} ({info.flex_functions} flex, "
        f"{info.pcmask_functions} pc-mask, {info.signal_functions} signal)",
        f"rows:           {info.rows}",
        f"text coverage:  {coverage}",
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    status = 0
    found: list[SectionInfo] = []
    for number, path in enumerate(args.files):
        try:
            info = section_info(path, args.section)
        except SFrameError as error:
            sys.stdout.flush()
            print(f"pysframe: {error}", file=sys.stderr)
            status = 1
            continue
        found.append(info)
        if not args.json:
            sys.stdout.write(("\n" if number else "") + info_text(info))
    if args.json:
        documents = [dict(asdict(i), coverage=i.coverage) for i in found]
        json.dump(documents, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return status
