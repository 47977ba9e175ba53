"""Compacting and repairing the SFrame section of an ELF file.

* :func:`compact_file`: the file's section compacted (:mod:`pysframe.format.compact`) and
  written back in place of the old one (:mod:`pysframe.elf.rewrite`);
* :func:`repair_file`: a section that holds several SFrame sections back to back (what LLVM
  lld and mold write), or one per-object section that was never merged (unsorted), merged
  into one sorted section (:mod:`pysframe.format.merge`), compacted and written back;
* :class:`CompactedGeneration`: a generated section, compacted, for ``generate --compact``.

Files are written through :func:`pysframe.output.write_file`: atomically, never over the
input unless an in-place rewrite is asked for.

Shared FRE blocks (``share``): ``"auto"`` shares them unless the section is big-endian (see
:func:`pysframe.format.compact.safe_to_share`), ``"always"`` and ``"never"`` decide for every
section.
"""

from __future__ import annotations

from dataclasses import replace

from ..dataclass import dataclass
from ..elf.reader import ElfReader, ElfSection
from ..elf.rewrite import rewrite_sframe
from ..elf.sframe import ElfSFrame
from ..elf.symbols import SymbolRecord, read_function_symbols
from ..errors import ElfError, NoSFrameError, SFrameError
from ..format.compact import Compacted, CompactOptions, compact_section, safe_to_share
from ..format.constants import PT_GNU_SFRAME, Flags
from ..format.merge import Piece, describe, merge_sections, split_sections, with_pcrel_starts
from ..format.section import SFrameSection
from ..generate import GenerateResult
from ..input import read_input
from ..output import write_file
from ..sources import locate_sframe
from . import SHARE_CHOICES

_BIG_ENDIAN_NOTE = (
    "libsframe on little-endian hosts (objdump and readelf --sframe) swaps a big-endian "
    "section in place, one function at a time, and rejects shared FRE blocks"
)


@dataclass(frozen=True, slots=True)
class CompactReport:
    """What :func:`compact_file` or :func:`repair_file` found and did."""

    path: str
    section: str
    version: int
    #: The section's size in the file before, and as written.
    old_size: int
    new_size: int
    compacted: Compacted | None
    #: Whether a PT_GNU_SFRAME entry locates the section (and was updated).
    segment: bool
    #: Where the file was written (None: not written).
    output: str | None
    notes: tuple[str, ...] = ()
    #: repair: what the section held, and FDEs dropped (their code was discarded).
    found: str | None = None
    dropped: int = 0
    #: repair: the merged section's size before compaction.
    merged_size: int | None = None

    def lines(self) -> list[str]:
        """The report in words, one line each (what the commands print)."""
        out: list[str] = []
        head = f"{self.path}: {self.section} V{self.version}"
        if self.found is not None:
            out.append(f"{head}: found {self.found}")
            if self.dropped:
                out.append(
                    f"{self.path}: dropped {self.dropped} FDEs outside every executable segment "
                    "(code the linker discarded)"
                )
            if self.merged_size is not None:
                merged = f"merged into one sorted section of {self.merged_size} bytes"
                out.append(f"{self.path}: {merged}")
        saved = self.old_size - self.new_size
        share = f" ({100 * saved / self.old_size:.1f}% smaller)" if self.old_size else ""
        out.append(f"{head}: {self.old_size} -> {self.new_size} bytes{share}")
        compacted = self.compacted
        if compacted is not None:
            prefix = f", {compacted.prefixes} of them a prefix" if compacted.prefixes else ""
            out.append(
                f"{self.path}: {compacted.functions} functions name {compacted.blocks} FRE "
                f"blocks ({compacted.shared} share another's{prefix}); "
                f"{compacted.narrowed_functions} functions with a smaller FRE type, "
                f"{compacted.narrowed_forms} row forms with smaller data words"
            )
        out += [f"{self.path}: note: {note}" for note in self.notes]
        if self.output is not None:
            out.append(f"{self.path}: written to {self.output}")
        return out


def share_blocks(section: SFrameSection, share: str) -> tuple[bool, str | None]:
    """Whether to share FRE blocks in ``section`` for the ``share`` choice, and a note."""
    if share not in SHARE_CHOICES:
        raise SFrameError(f"share must be one of {', '.join(SHARE_CHOICES)}, not {share!r}")
    if share == "never":
        return False, None
    if safe_to_share(section):
        return True, None
    if share == "always":
        return True, f"FRE blocks shared in a big-endian section: {_BIG_ENDIAN_NOTE}"
    return False, f"FRE blocks not shared: {_BIG_ENDIAN_NOTE} (--share always shares them)"


def compact(
    section: SFrameSection, share: str = "auto", options: CompactOptions | None = None
) -> tuple[Compacted, str | None]:
    """``section`` compacted with the ``share`` policy (and ``options`` for the rest)."""
    shared, note = share_blocks(section, share)
    options = options or CompactOptions()
    if not shared:
        options = replace(options, share_blocks=False, share_prefixes=False)
    return compact_section(section, options), note


# -- files ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Loaded:
    data: bytes
    found: ElfSFrame
    header: ElfSection
    segment: bool
    text_ranges: list[tuple[int, int]]
    #: The start addresses of the file's function symbols (empty: it has none).
    symbol_starts: frozenset[int] = frozenset()


def _load(path: str) -> _Loaded:
    data = read_input(path)
    with ElfReader.from_bytes(path, data) as image:
        if image.is_relocatable:
            raise ElfError(
                "a relocatable object: its linker lays its FREs out again (compact and repair "
                "take executables and shared objects)",
                path=path,
            )
        found = locate_sframe(image)
        found.stored  # noqa: B018  (read while the image is open)
        segments = image.segments()
        segment = any(
            s.type == PT_GNU_SFRAME and s.offset == found.section.offset for s in segments
        )
        text = image.code_ranges()
        starts = frozenset(s.address for s in _function_symbols(image))
    return _Loaded(data, found, found.section, segment, text, starts)


def _function_symbols(image: ElfReader) -> list[SymbolRecord]:
    """The file's function symbols (.symtab, else .dynsym); none when they cannot be read."""
    try:
        return read_function_symbols(image, ".symtab") or read_function_symbols(image, ".dynsym")
    except SFrameError:
        return []


def _write(
    path: str,
    loaded: _Loaded,
    sframe: bytes,
    output: str | None,
    in_place: bool,
) -> bool:
    """Write the file with ``sframe`` in place of its section; False when there is nowhere
    to write."""
    target = path if in_place else output
    if target is None:
        return False
    rewritten = rewrite_sframe(loaded.data, loaded.header, sframe)
    write_file(target, rewritten.data, inputs=[path], in_place=in_place, mode_from=path)
    return True


def _pieces(path: str, name: str, stored: bytes, address: int) -> list[Piece]:
    """The SFrame sections held back to back in ``stored``; SFrameError when there is none
    (an empty or SHT_NOBITS section)."""
    pieces = split_sections(stored, address)
    if not pieces:
        raise NoSFrameError(
            f"holds no SFrame data ({len(stored)} bytes)", path=path, section=name
        )
    return pieces


def _placed(path: str, number: int, piece: Piece, loaded: _Loaded) -> Piece:
    """``piece`` (the ``number``-th section of the file's) with its function starts read the
    way its producer wrote them.

    With FDE_FUNC_START_PCREL (V2 errata 1, V3) they are relative to their own fields.
    Without it (V1, V2 before the errata), an object's section from GNU as holds them
    relative to their own fields all the same (R_*_PC32), where a linked section holds them
    relative to the section's start; a linker that concatenated objects' sections left the
    first kind, but nothing in the bytes says which.  Both readings are tried: the one whose
    functions inside the code all start where function symbols start is taken.  When both or
    neither do (no symbols to tell them apart), the piece cannot be placed with certainty and
    the repair is refused with the reason."""
    section = piece.section
    if section.header.flags & Flags.FDE_FUNC_START_PCREL:
        return piece
    begin = piece.offset
    stored = loaded.found.stored[begin : piece.end]
    as_field = SFrameSection.from_bytes(with_pcrel_starts(stored), section.section_address)
    readings = {"to their own fields": as_field, "to the section's start": section}
    fits = [why for why, reading in readings.items() if _starts_at_symbols(reading, loaded)]
    if len(fits) == 1:
        return Piece(piece.offset, piece.end, readings[fits[0]])
    where = f"SFrame section {number} (V{int(section.version)}, without FDE_FUNC_START_PCREL)"
    if not loaded.symbol_starts:
        why = "the file has no function symbols to tell which reading of its starts is right"
    elif fits:
        why = "its function starts fit the file's symbols read both ways"
    else:
        why = (
            "its function starts fit the file's symbols neither relative to their own fields "
            "nor to the section's start"
        )
    raise SFrameError(f"cannot place {where} with certainty: {why}", path=path)


def _starts_at_symbols(section: SFrameSection, loaded: _Loaded) -> bool:
    """Whether some functions of ``section`` lie in the file's code and every one there starts
    where a function symbol starts."""
    import numpy as np

    table = section.table
    starts = table.start.astype(np.uint64)
    ends = starts + table.size.astype(np.uint64)
    inside = np.zeros(len(starts), dtype=bool)
    for low, high in loaded.text_ranges:
        inside |= (starts >= low) & (ends <= high)
    if not inside.any() or not loaded.symbol_starts:
        return False
    known = np.fromiter(loaded.symbol_starts, dtype=np.uint64, count=len(loaded.symbol_starts))
    return bool(np.isin(starts[inside], known).all())


def compact_file(
    path: str,
    output: str | None = None,
    *,
    in_place: bool = False,
    share: str = "auto",
    options: CompactOptions | None = None,
) -> CompactReport:
    """Compact the SFrame section of the ELF file ``path`` and write the file to ``output``
    (or over ``path`` with ``in_place``; neither: only report).

    A section that is not smaller compacted is written unchanged.  A section holding several
    SFrame sections back to back is refused (:func:`repair_file` merges them)."""
    loaded = _load(path)
    stored = loaded.found.stored
    address = loaded.header.address
    pieces = _pieces(path, loaded.header.name, stored, address)
    if len(pieces) > 1:
        raise SFrameError(
            f"holds {describe(pieces)}: pysframe repair merges them",
            path=path,
            section=loaded.header.name,
        )
    section = pieces[0].section
    compacted, note = compact(section, share, options)
    notes = [] if note is None else [note]
    new = compacted.data
    if len(new) >= len(stored):
        new = stored
        notes.append("compaction gains nothing here: the section is written unchanged")
    written = _write(path, loaded, new, output, in_place)
    return CompactReport(
        path=path,
        section=loaded.header.name,
        version=int(section.version),
        old_size=len(stored),
        new_size=len(new),
        compacted=compacted,
        segment=loaded.segment,
        output=(path if in_place else output) if written else None,
        notes=tuple(notes),
    )


def repair_file(
    path: str,
    output: str | None = None,
    *,
    in_place: bool = False,
    share: str = "auto",
    compact_result: bool = True,
) -> CompactReport:
    """Merge the SFrame sections that ``path``'s section holds back to back, or sort its one
    unmerged section, into one sorted section; compact it (``compact_result``) and write the
    file to ``output`` (or over ``path`` with ``in_place``).

    FDEs of functions outside every executable segment are dropped: the linker discarded their
    code (a COMDAT group kept from another object) and resolved their starts to nothing.
    A section with nothing to repair (one section, flagged sorted) is left as it is."""
    loaded = _load(path)
    stored = loaded.found.stored
    address = loaded.header.address
    pieces = _pieces(path, loaded.header.name, stored, address)
    found = describe(pieces)
    notes: list[str] = []
    if not loaded.segment:
        notes.append(
            "no PT_GNU_SFRAME segment locates the section: the Linux kernel's unwinder does "
            "not find it (the linker did not write one; adding a program header does not fit "
            "in place)"
        )
    version = int(pieces[0].section.version)
    if len(pieces) == 1 and pieces[0].section.header.sorted:
        notes.insert(0, "nothing to repair: one section, flagged sorted")
        written = _write(path, loaded, stored, output, in_place)
        return CompactReport(
            path, loaded.header.name, version, len(stored), len(stored), None,
            loaded.segment, (path if in_place else output) if written else None,
            tuple(notes), found,
        )  # fmt: skip
    pieces = [_placed(path, number, piece, loaded) for number, piece in enumerate(pieces, 1)]
    merged_bytes, dropped = merge_sections(pieces, address, loaded.text_ranges)
    merged = SFrameSection.from_bytes(merged_bytes, address)
    compacted: Compacted | None = None
    new = merged_bytes
    if compact_result:
        compacted, note = compact(merged, share)
        new = compacted.data
        if note is not None:
            notes.append(note)
    written = _write(path, loaded, new, output, in_place)
    return CompactReport(
        path=path,
        section=loaded.header.name,
        version=version,
        old_size=len(stored),
        new_size=len(new),
        compacted=compacted,
        segment=loaded.segment,
        output=(path if in_place else output) if written else None,
        notes=tuple(notes),
        found=found,
        dropped=dropped,
        merged_size=len(merged_bytes),
    )


# -- generate --compact --------------------------------------------------------------------------


class CompactedGeneration:
    """A generated section, compacted: what ``generate --compact`` writes or injects (it is an
    :class:`~pysframe.elf.inject.EncodableSection`)."""

    def __init__(self, result: GenerateResult, share: str = "auto") -> None:
        self.result = result
        self.share = share
        self.section_address = result.section_address
        self.compacted, self.note = compact(result.section, share)

    @property
    def data(self) -> bytes:
        return self.compacted.data

    def encode(self, section_address: int) -> bytes:
        """The section generated for ``section_address``, compacted."""
        data = self.result.encode(section_address)
        section = SFrameSection.from_bytes(data, section_address)
        return compact(section, self.share)[0].data


__all__ = [
    "SHARE_CHOICES",
    "CompactReport",
    "CompactedGeneration",
    "compact",
    "compact_file",
    "repair_file",
    "share_blocks",
]
