"""The generator's driver: an SFrame section from ``.eh_frame`` / ``.debug_frame`` bytes or an
ELF file, as GNU as 2.47 would assemble it.

gas/gen-sframe.c ``create_sframe_all`` translates every FDE (``sframe_do_fde``) and
``output_sframe`` writes the section; here the FDEs are scanned
(:func:`pysframe.generate.cfi.scan_fdes`), translated with gas' rules
(:func:`pysframe.generate.translator.translate_fdes`), PLT FDEs added
(:mod:`pysframe.generate.plt`) and the section written by the one section writer
(:func:`pysframe.format.encode.assemble_section`).

Beyond gas: signal frames whose rows cannot be represented are kept with no rows (as gas
does); SFrame V1/V2 have no FLEX FDEs and no signal-frame bit, and cannot say that the RA is
undefined, so such functions are left out of V1/V2 sections with the reason.  A row the format
cannot hold (an offset beyond 32 bits, an s390x RA saved at CFA+0, which reads as RA padding)
leaves its function out with the format core's reason, where gas would write words that say
something else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..dataclass import dataclass
from ..errors import CfiError, ElfError, EncodeError
from ..format.constants import DEFAULT_FIXED_OFFSETS, Abi, Flags, Version
from ..format.encode import Column, FdeColumns, SectionSpec, assemble_section
from ..format.lookup import covered_bytes
from ..format.section import SFrameSection
from .cfi import CfiFormat, Cie, FdeSpan, PointerContext, oversized_program, scan_fdes
from .interpret import gc_paused
from .locate import find_eh_frame
from .plt import plt_functions, s390x_plt_functions
from .rows import ABI_PARAMS, FunctionEncoder, GeneratedFunction, SkippedFunction
from .translator import NO_FDE, V3_ONLY, translate_fdes

if TYPE_CHECKING:
    from ..elf.reader import ElfReader


@dataclass(slots=True)
class GenerateResult:
    """What :func:`generate_from_elf` / :func:`generate_from_eh_frame` made."""

    section: SFrameSection
    data: bytes
    skipped: list[SkippedFunction]
    functions_total: int
    text_bytes_total: int
    text_bytes_covered: int
    functions: list[GeneratedFunction] = field(default_factory=list)
    abi: Abi = Abi.AMD64_ENDIAN_LITTLE
    version: Version = Version.V3
    section_address: int = 0

    @property
    def functions_covered(self) -> int:
        """Functions with an FDE in the section (as ``info`` counts them)."""
        return len(self.section)

    @property
    def left_out(self) -> list[SkippedFunction]:
        """The functions without an FDE (``skipped`` less the signal frames kept without rows)."""
        return [s for s in self.skipped if not s.kept_without_rows]

    def encode(self, section_address: int, version: Version | int | None = None) -> bytes:
        """The section bytes for another address (PCREL starts depend on it) or version."""
        return encode_functions(
            self.functions,
            self.abi,
            Version(version) if version is not None else self.version,
            section_address,
        )


def encode_functions(
    functions: Sequence[GeneratedFunction],
    abi: Abi,
    version: Version | int = Version.V3,
    section_address: int = 0,
) -> bytes:
    """Write an SFrame section: header, FDEs sorted by start address, FREs in the same order.

    V3 and V2 sections carry SORTED; V3 also FDE_FUNC_START_PCREL (as GNU ld writes them).  V2
    and V1 starts are relative to the section (readable by binutils 2.40-2.47).  V1 has no
    rep_size: its PCMASK FDEs are read with 16-byte blocks.
    """
    version = Version(version)
    count = len(functions)
    start, size, info, info2, rep_size, num_fres, fres, v3_only = (
        tuple_columns(functions, 8) if count else [[]] * 8
    )
    order = _by_start(start)
    if version is not Version.V3:
        needs_v3 = [i for i in order.tolist() if v3_only[i]]
        if needs_v3:
            raise EncodeError(
                f"function at {start[needs_v3[0]]:#x} needs SFrame V3 (FLEX FDE, signal frame "
                "or undefined RA)"
            )
    flags = Flags.FDE_SORTED
    if version is Version.V3:
        flags |= Flags.FDE_FUNC_START_PCREL
    fixed_fp, fixed_ra = DEFAULT_FIXED_OFFSETS[abi]
    spec = SectionSpec(
        version, abi, flags, fixed_fp, fixed_ra, abi.big_endian, section_address=section_address
    )
    zeros = np.zeros(count, dtype=np.int64)
    columns = FdeColumns(
        start=_reordered(start, order),
        size=_reordered(size, order),
        num_fres=_reordered(num_fres, order),
        info=_reordered(info, order),
        info2=_reordered(info2, order),
        rep_size=zeros if version is Version.V1 else _reordered(rep_size, order),
        padding=zeros,
    )
    return assemble_section(spec, columns, [fres[i] for i in order.tolist()])


def tuple_columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """The columns of equal-length tuples (faster than ``zip(*rows)`` for many rows)."""
    return [list(map(itemgetter(k), rows)) for k in range(width)]


def _by_start(starts: list[int]) -> npt.NDArray[np.int64]:
    """Positions in order of start address (stable)."""
    try:
        return np.argsort(np.asarray(starts, dtype=np.int64), kind="stable")
    except OverflowError:
        return np.array(sorted(range(len(starts)), key=starts.__getitem__), dtype=np.int64)


def _reordered(column: list[int], order: npt.NDArray[np.int64]) -> Column:
    """``column`` in ``order``: an int64 array, or a list when a value is beyond int64."""
    try:
        return np.asarray(column, dtype=np.int64)[order]
    except OverflowError:
        return [column[i] for i in order.tolist()]


def generate_from_eh_frame(
    eh_frame: bytes,
    eh_frame_address: int,
    abi: Abi | int,
    *,
    version: Version | int = Version.V3,
    section_address: int = 0,
    debug_frame: bool = False,
    pointers: PointerContext | None = None,
    text_ranges: Sequence[tuple[int, int]] = (),
) -> GenerateResult:
    """Generate an SFrame section from raw ``.eh_frame`` (or ``.debug_frame``) bytes.

    ``eh_frame_address`` is the section's address (PC-relative pointers depend on it);
    ``section_address`` the address the SFrame section will have.  ``text_ranges`` ([start,
    end) pairs) are the code the coverage figures count.
    """
    abi = Abi(abi)
    version = Version(version)
    data = bytes(eh_frame)
    cies, spans = scan_fdes(
        data,
        eh_frame_address,
        big_endian=abi.big_endian,
        cfi_format=CfiFormat.DEBUG_FRAME if debug_frame else CfiFormat.EH_FRAME,
        pointers=pointers,
    )
    encoder = FunctionEncoder(ABI_PARAMS[abi], abi.big_endian)
    with gc_paused():
        functions, skipped, considered = _translate_fdes(data, cies, spans, encoder, version)
        return _result(functions, skipped, considered, abi, version, section_address, text_ranges)


def _translate_fdes(
    data: bytes,
    cies: dict[int, Cie],
    spans: Sequence[FdeSpan],
    encoder: FunctionEncoder,
    version: Version,
    exclude: Sequence[tuple[int, int]] = (),
) -> tuple[list[GeneratedFunction], list[SkippedFunction], int]:
    """Translate every FDE; returns (functions, skipped, FDEs considered)."""
    skipped: list[SkippedFunction] = []
    todo = _fdes_to_translate(spans, exclude, skipped)
    considered = len(todo) + len(skipped)
    out: list[GeneratedFunction] = []
    aarch64 = encoder.params.aarch64
    for span, made in zip(todo, translate_fdes(data, cies, todo, encoder, version), strict=True):
        if not isinstance(made, str):
            out.append(made)
            continue
        cie_offset, start, size = span[:3]
        cie = cies[cie_offset]
        if cie.signal_frame and version is Version.V3 and not made.startswith(V3_ONLY):
            # gas keeps a signal frame's FDE, without rows, when its CFI fails.
            b_key = cie.b_key and aarch64
            out.append(encoder.function(start, size, None, signal=True, b_key=b_key))
            skipped.append(SkippedFunction(start, size, made, kept_without_rows=True))
            continue
        skipped.append(SkippedFunction(start, size, made))
    return out, skipped, considered


def _fdes_to_translate(
    spans: Sequence[FdeSpan], exclude: Sequence[tuple[int, int]], skipped: list[SkippedFunction]
) -> list[FdeSpan]:
    """The FDEs with code outside the ``exclude`` ranges (PLT sections, described otherwise);
    those whose CFA program is far longer than their code go to ``skipped`` instead."""
    low_excluded = min((lo for lo, _ in exclude), default=0)
    high_excluded = max((hi for _, hi in exclude), default=0)
    todo = [
        span
        for span in spans
        if span[2] != 0
        and not (
            low_excluded <= span[1] < high_excluded
            and any(lo <= span[1] < hi for lo, hi in exclude)
        )
    ]
    # A CFA program far longer than its function's code is malformed (a flood of rows or
    # operands); refused before it is decoded, so decoding stays bounded by the code's size.
    oversized = [s for s in todo if oversized_program(s) is not None]
    if oversized:
        flooded = {id(s) for s in oversized}
        todo = [s for s in todo if id(s) not in flooded]
        skipped.extend(
            SkippedFunction(s[1], s[2], f"{NO_FDE}{oversized_program(s)}") for s in oversized
        )
    return todo


def skip_reasons(
    data: bytes,
    cies: dict[int, Cie],
    spans: Sequence[FdeSpan],
    abi: Abi | int,
    version: Version | int = Version.V3,
) -> list[str | None]:
    """Why each FDE of ``spans`` (as :func:`pysframe.generate.cfi.scan_fdes` gives them) is
    left out of a section of ``version``: gas' reason, or None where an FDE is written for it
    (a signal frame gas keeps without rows has its reason too)."""
    abi = Abi(abi)
    encoder = FunctionEncoder(ABI_PARAMS[abi], abi.big_endian)
    _, skipped, _ = _translate_fdes(data, cies, spans, encoder, Version(version))
    reasons: dict[tuple[int, int], str] = {}
    for function in skipped:
        reasons.setdefault((function.start, function.size), function.reason)
    return [reasons.get((span[1], span[2])) for span in spans]


def _result(
    functions: list[GeneratedFunction],
    skipped: list[SkippedFunction],
    considered: int,
    abi: Abi,
    version: Version,
    section_address: int,
    text_ranges: Sequence[tuple[int, int]],
) -> GenerateResult:
    data = encode_functions(functions, abi, version, section_address)
    section = SFrameSection.from_bytes(data, section_address)
    total = sum(max(0, hi - lo) for lo, hi in text_ranges)
    covered = 0
    if text_ranges and functions:
        top = (1 << 64) - 1  # a hostile file's function may end past the address space
        starts = np.array([f.start for f in functions], dtype=np.uint64)
        sizes = np.array([min(f.size, top - f.start) for f in functions], dtype=np.uint64)
        covered = covered_bytes(starts, sizes, text_ranges)
    skipped.sort(key=lambda s: s.start)
    return GenerateResult(
        section, data, skipped, considered, total, covered, functions, abi, version, section_address
    )


# ---------------------------------------------------------------------------------------------
# ELF files

_PLT_NAMES = (".plt", ".plt.sec", ".plt.got")

#: The s390x PLT entry size GNU ld writes (and describes in SFrame).
_S390X_PLT_ENTRY = 32


def generate_from_elf(
    path_or_image: object,
    version: Version | int = Version.V3,
    *,
    section_address: int | None = None,
    ld_compatible: bool = False,
    use_debug_frame: bool = True,
) -> GenerateResult:
    """Generate an SFrame section for an ELF file (a path or an open :class:`ElfReader`).

    Uses ``.eh_frame`` (relocated in relocatable objects, where every section sits at address
    0) and, for functions it does not describe, ``.debug_frame``; adds PLT FDEs.
    ``section_address`` defaults to where :mod:`pysframe.elf.inject` would place the section.
    """
    from ..elf.reader import ElfReader

    if isinstance(path_or_image, ElfReader):
        image = path_or_image
    elif isinstance(path_or_image, str):
        with ElfReader.open(path_or_image) as opened:
            return _generate_image(
                opened, Version(version), section_address, ld_compatible, use_debug_frame
            )
    else:
        raise TypeError("generate_from_elf needs a path or an ElfReader")
    return _generate_image(image, Version(version), section_address, ld_compatible, use_debug_frame)


def _generate_image(
    image: ElfReader,
    version: Version,
    section_address: int | None,
    ld_compatible: bool,
    use_debug_frame: bool,
) -> GenerateResult:
    from ..elf.layout import SHF_ALLOC, SHF_EXECINSTR, SHT_NOBITS

    abi = image.abi
    if abi is None:
        raise ElfError("SFrame defines no ABI for this machine", path=image.path)
    encoder = FunctionEncoder(ABI_PARAMS[abi], abi.big_endian)
    if section_address is None:
        if image.is_relocatable:
            section_address = 0
        else:
            from ..elf.inject import new_section_address

            section_address = new_section_address(image)
    text_ranges = [
        (s.address, s.address + s.size)
        for s in image.sections()
        if s.flags & SHF_EXECINSTR and s.flags & SHF_ALLOC and s.size
    ]
    if not image.has_section_headers():  # headers stripped: the executable segments are the text
        text_ranges = [(low, high) for low, high in image.code_ranges() if high > low]
    plts: dict[str, tuple[int, bytes, int]] = {}
    if abi is Abi.AMD64_ENDIAN_LITTLE and not image.is_relocatable:
        for name in _PLT_NAMES:
            sec = image.section(name)
            if sec is not None and sec.size and sec.type != SHT_NOBITS:
                plts[name] = (sec.address, sec.data(), sec.entsize)
    s390x_plt = None
    if abi is Abi.S390X_ENDIAN_BIG and not image.is_relocatable:
        sec = image.section(".plt")
        if sec is not None and sec.size and sec.entsize == _S390X_PLT_ENTRY:
            s390x_plt = (sec.address, sec.size, sec.entsize)
    exclude = [(a, a + len(d)) for a, d, _ in plts.values()]
    if s390x_plt is not None:
        exclude.append((s390x_plt[0], s390x_plt[0] + s390x_plt[1]))
    with gc_paused():
        functions, skipped, considered = _translate_cfi(
            image, encoder, version, exclude, use_debug_frame
        )
        if plts:
            plt = plts.get(".plt")
            plt_sec = plts.get(".plt.sec")
            made, lost = plt_functions(
                (plt[0], plt[1]) if plt else None,
                (plt_sec[0], plt_sec[1]) if plt_sec else None,
                plts.get(".plt.got"),
                encoder,
                ld_compatible=ld_compatible,
            )
            if version is Version.V1:
                made = [f for f in made if f.rep_size in (0, 16)]
            functions += made
            skipped += lost
            considered += len(made) + len(lost)
        if s390x_plt is not None:
            made = s390x_plt_functions(*s390x_plt, encoder)
            functions += made
            considered += len(made)
        if not image.is_relocatable:
            functions, outside = _inside_code(functions, image)
            skipped += outside
        return _result(functions, skipped, considered, abi, version, section_address, text_ranges)


def _inside_code(
    functions: list[GeneratedFunction], image: ElfReader
) -> tuple[list[GeneratedFunction], list[SkippedFunction]]:
    """The functions that lie inside an executable segment, and the others as skipped: an FDE
    of a damaged ``.eh_frame`` (a wrong section address or pointer) describes code that is not
    there, and a reader that checks (the Linux kernel; the fde-text rule) refuses a whole
    section for one such function.  A file without an executable segment keeps them all."""
    code = image.code_ranges()
    if not code or not functions:
        return functions, []
    starts, sizes = tuple_columns(functions, 2)
    try:
        start = np.array(starts, dtype=np.uint64)
        end = start + np.array(sizes, dtype=np.uint64)
        held = np.zeros(len(functions), dtype=bool)
        for low, high in code:  # a few segments: one numpy pass each
            held |= (start >= np.uint64(low)) & (end <= np.uint64(high)) & (end >= start)
        kept = held.tolist()
    except OverflowError:  # a segment or function past 2**64: Python integers
        kept = [
            any(low <= b and b + n <= high for low, high in code)
            for b, n in zip(starts, sizes, strict=True)
        ]
    if all(kept):
        return functions, []
    inside = [f for f, ok in zip(functions, kept, strict=True) if ok]
    outside = [
        SkippedFunction(
            f.start,
            f.size,
            f"{NO_FDE}[{f.start:#x}, {f.start + f.size:#x}) is outside every executable segment",
        )
        for f, ok in zip(functions, kept, strict=True)
        if not ok
    ]
    return inside, outside


def _translate_cfi(
    image: ElfReader,
    encoder: FunctionEncoder,
    version: Version,
    exclude: Sequence[tuple[int, int]],
    use_debug_frame: bool,
) -> tuple[list[GeneratedFunction], list[SkippedFunction], int]:
    """The functions of ``.eh_frame``, then those of ``.debug_frame`` it does not describe."""
    from ..elf.layout import SHT_NOBITS
    from ..elf.relocation import relocated

    functions: list[GeneratedFunction] = []
    skipped: list[SkippedFunction] = []
    considered = 0
    ptr = _pointer_context(image)
    sources = [(".eh_frame", CfiFormat.EH_FRAME)]
    if use_debug_frame:
        sources.append((".debug_frame", CfiFormat.DEBUG_FRAME))
    covered_starts: set[int] = set()
    for name, cfi_format in sources:
        # Without section headers, .eh_frame is found through PT_GNU_EH_FRAME.
        sec = find_eh_frame(image) if cfi_format is CfiFormat.EH_FRAME else image.section(name)
        if sec is None or not sec.size or sec.type == SHT_NOBITS:
            continue
        data = relocated(image, sec, sec.data())
        try:
            cies, spans = scan_fdes(
                data,
                sec.address,
                big_endian=encoder.big_endian,
                address_size=image.elfclass // 8,
                cfi_format=cfi_format,
                pointers=PointerContext(sec.address, ptr.text_base, ptr.data_base, ptr.read_memory),
            )
        except CfiError as error:
            raise error.at(path=image.path, section=name) from None
        if covered_starts:
            spans = [f for f in spans if f[1] not in covered_starts]
        made, lost, count = _translate_fdes(data, cies, spans, encoder, version, exclude)
        functions += made
        skipped += lost
        considered += count
        covered_starts.update(f[1] for f in spans)
    return functions, skipped, considered


def _pointer_context(image: ElfReader) -> PointerContext:
    """Bases for .eh_frame pointer encodings: .text (textrel), .got (datarel, i386 style), and a
    memory reader over the file's loadable segments (indirect pointers)."""
    text = image.section(".text")
    got = image.section(".got")
    segments = [s for s in image.load_segments() if s.filesz]

    def read_memory(address: int, size: int) -> bytes:
        for seg in segments:
            if seg.vaddr <= address and address + size <= seg.vaddr + seg.filesz:
                return image.read(seg.offset + address - seg.vaddr, size)
        return b""

    return PointerContext(
        0,
        text.address if text is not None else None,
        got.address if got is not None else None,
        read_memory if segments else None,
    )


__all__ = [
    "GenerateResult",
    "encode_functions",
    "generate_from_eh_frame",
    "generate_from_elf",
    "skip_reasons",
]
