"""Build an SFrame section in code, choosing encodings the way GNU as does.

* FRE start-address type: from the function size (ADDR1 below 0x100, ADDR2 below 0x10000,
  else ADDR4), widened if a row starts beyond it (V2 spec 2.3.3).
* Data-word size: the smallest signed size holding every word of the row (V2 spec 2.4.1).
* FDE type: DEFAULT when every row has a DEFAULT encoding, else FLEX (V3 only).
* FDEs sorted by start address with SORTED set; FDE_FUNC_START_PCREL set for V3 (and for V2
  when asked, errata 1).
"""

from __future__ import annotations

from dataclasses import field

import numpy as np
import numpy.typing as npt

from ..bounded import BoundedCache
from ..dataclass import dataclass
from ..errors import EncodeError
from .constants import (
    DEFAULT_FIXED_OFFSETS,
    KNOWN_FLAGS,
    Abi,
    FdeType,
    Flags,
    FreType,
    PauthKey,
    PcType,
    Version,
)
from .encode import SectionSpec, encode_section
from .layout import fde_info
from .model import CfaRule, FrameRow, Function, RegRule
from .rules import RowContext, decode_rules, encode_row
from .section import SFrameSection

_ADDR1, _ADDR2, _ADDR4 = FreType


def fre_type_for_size(size: int) -> FreType:
    """The FRE type of a function of ``size`` bytes (gas and libsframe's
    sframe_calc_fre_type): ADDR1 below 0x100 bytes, ADDR2 below 0x10000, else ADDR4."""
    if size < _ADDR1.limit:
        return _ADDR1
    return _ADDR2 if size < _ADDR2.limit else _ADDR4


#: First sizes each FRE type cannot describe, but the last.
_FRE_TYPE_LIMITS = np.array([_ADDR1.limit, _ADDR2.limit], dtype=np.int64)


def fre_types_for_sizes(sizes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """:func:`fre_type_for_size` of every one of ``sizes``, with numpy."""
    return np.searchsorted(_FRE_TYPE_LIMITS, sizes, side="right").astype(np.int64)


def fre_type_for(function_size: int, last_row_offset: int = 0) -> FreType:
    """FRE type for a function of ``function_size`` bytes whose last row starts
    ``last_row_offset`` bytes in (:func:`fre_type_for_size` of the larger); EncodeError when
    that does not fit a 32-bit FRE start address."""
    needed = max(function_size, last_row_offset, 0)
    if needed >= _ADDR4.limit:
        raise EncodeError(f"row offset {needed} does not fit a 32-bit FRE start address")
    return fre_type_for_size(needed)


@dataclass(frozen=True, slots=True)
class RowSpec:
    """A row as given to the builder: rules, not encodings."""

    offset: int
    cfa: CfaRule | None
    fp: RegRule
    ra: RegRule
    mangled_ra: bool = False


@dataclass(slots=True)
class FunctionBuilder:
    """Rows of one function; created by :meth:`SFrameBuilder.add_function`."""

    start: int
    size: int
    pc_type: PcType = PcType.INC
    rep_size: int = 0
    pauth_key: PauthKey = PauthKey.A
    signal_frame: bool = False
    fde_type: FdeType | None = None
    rows: list[RowSpec] = field(default_factory=list)
    default_ra: RegRule = field(default_factory=RegRule.untracked)

    def add_row(
        self,
        offset: int,
        cfa: CfaRule | None,
        fp: RegRule | None = None,
        ra: RegRule | None = None,
        *,
        mangled_ra: bool = False,
    ) -> FunctionBuilder:
        """Add a row starting ``offset`` bytes into the function (or its repeated block)."""
        if self.rows and offset <= self.rows[-1].offset:
            raise EncodeError(
                f"function at {self.start:#x}: row offset {offset} does not follow "
                f"{self.rows[-1].offset}"
            )
        if offset < 0:
            raise EncodeError(f"function at {self.start:#x}: negative row offset {offset}")
        self.rows.append(
            RowSpec(
                offset,
                cfa,
                RegRule.untracked() if fp is None else fp,
                self.default_ra if ra is None else ra,
                mangled_ra,
            )
        )
        return self

    def add_undefined_ra_row(self, offset: int) -> FunctionBuilder:
        """A row with no words: RA undefined, the outermost frame (errata 1)."""
        return self.add_row(offset, None, RegRule.untracked(), RegRule.undefined())


class SFrameBuilder:
    """Collects functions and rows, then encodes them as a section.

    >>> b = SFrameBuilder(Abi.AMD64_ENDIAN_LITTLE)
    >>> f = b.add_function(0x1000, 16)
    >>> _ = f.add_row(0, CfaRule(7, 8))
    >>> len(SFrameSection.from_bytes(b.to_bytes()))
    1
    """

    def __init__(
        self,
        abi: Abi,
        version: Version | int = Version.V3,
        *,
        big_endian: bool | None = None,
        cfa_fixed_fp_offset: int | None = None,
        cfa_fixed_ra_offset: int | None = None,
        pcrel: bool | None = None,
        sort: bool = True,
        frame_pointer: bool = False,
        auxiliary_header: bytes = b"",
        section_address: int = 0,
    ) -> None:
        self.abi = Abi(abi)
        self.version = Version(version)
        self.big_endian = self.abi.big_endian if big_endian is None else big_endian
        fixed_fp, fixed_ra = DEFAULT_FIXED_OFFSETS[self.abi]
        self.cfa_fixed_fp_offset = fixed_fp if cfa_fixed_fp_offset is None else cfa_fixed_fp_offset
        self.cfa_fixed_ra_offset = fixed_ra if cfa_fixed_ra_offset is None else cfa_fixed_ra_offset
        self.pcrel = (self.version is Version.V3) if pcrel is None else pcrel
        if self.pcrel and self.version is Version.V1:
            raise EncodeError("SFrame V1 has no FDE_FUNC_START_PCREL flag")
        if frame_pointer and self.version is Version.V3:
            raise EncodeError("SFrame V3 has no FRAME_POINTER flag")
        self.sort = sort
        self.frame_pointer = frame_pointer
        self.auxiliary_header = auxiliary_header
        self.section_address = section_address
        self.functions: list[FunctionBuilder] = []
        #: Rows' encodings, by context and rules (real and synthetic sections repeat a few).
        self._encodings: BoundedCache[tuple[object, ...], FrameRow | EncodeError] = (
            BoundedCache(4096)
        )

    def add_function(
        self,
        start: int,
        size: int,
        *,
        pc_type: PcType = PcType.INC,
        rep_size: int = 0,
        pauth_key: PauthKey = PauthKey.A,
        signal_frame: bool = False,
        fde_type: FdeType | None = None,
    ) -> FunctionBuilder:
        """Add a function; ``fde_type`` None lets the builder choose DEFAULT or FLEX."""
        fixed_ra = self.cfa_fixed_ra_offset
        default_ra = RegRule.fixed(fixed_ra) if fixed_ra else RegRule.untracked()
        function = FunctionBuilder(
            start,
            size,
            PcType(pc_type),
            rep_size,
            PauthKey(pauth_key),
            signal_frame,
            fde_type,
            default_ra=default_ra,
        )
        self.functions.append(function)
        return function

    @property
    def flags(self) -> Flags:
        flags = Flags.NONE
        if self.sort:
            flags |= Flags.FDE_SORTED
        if self.frame_pointer:
            flags |= Flags.FRAME_POINTER
        if self.pcrel:
            flags |= Flags.FDE_FUNC_START_PCREL
        return flags & KNOWN_FLAGS[self.version]

    def _context(self, fde_type: FdeType) -> RowContext:
        return RowContext(
            self.abi, self.version, fde_type, self.cfa_fixed_fp_offset, self.cfa_fixed_ra_offset
        )

    def _encoded(self, ctx: RowContext, rows: list[RowSpec]) -> list[FrameRow | EncodeError]:
        """Each row's encoding (at offset 0), or why it cannot be encoded."""
        get = self._encodings.get
        return [
            get((ctx, r.cfa, r.fp, r.ra, r.mangled_ra), _encoded, ctx, r.cfa, r.fp, r.ra,
                r.mangled_ra)
            for r in rows
        ]  # fmt: skip

    def _encode_rows(
        self, function: FunctionBuilder
    ) -> tuple[FdeType, list[FrameRow | EncodeError]]:
        """The FDE type and each row's encoding (at offset 0).  A function whose type is not
        given is DEFAULT unless some row needs FLEX (V3 only)."""
        fde_type = FdeType.DEFAULT if function.fde_type is None else function.fde_type
        ctx = self._context(fde_type)
        encoded = self._encoded(ctx, function.rows)
        if function.fde_type is None and any(isinstance(e, EncodeError) for e in encoded):
            if self.version is not Version.V3:
                row = next(
                    r
                    for r, e in zip(function.rows, encoded, strict=True)
                    if isinstance(e, EncodeError)
                )
                raise EncodeError(
                    f"function at {function.start:#x}, row at +{row.offset}: rules need a "
                    f"FLEX FDE, which SFrame V{int(self.version)} does not have"
                )
            fde_type = FdeType.FLEX
            ctx = self._context(fde_type)
            encoded = self._encoded(ctx, function.rows)
        return fde_type, encoded

    def _function(self, index: int, function: FunctionBuilder) -> Function:
        fde_type, encoded = self._encode_rows(function)
        last = function.rows[-1].offset if function.rows else 0
        fre_type = fre_type_for(function.size, last)
        if function.signal_frame and self.version is not Version.V3:
            raise EncodeError(f"function at {function.start:#x}: signal frames need SFrame V3")
        info = fde_info(fre_type, function.pc_type, function.pauth_key, function.signal_frame)
        start = function.start
        rows = []
        for row, row_encoded in zip(function.rows, encoded, strict=True):
            if isinstance(row_encoded, EncodeError):
                raise EncodeError(
                    f"function at {start:#x}, row at +{row.offset}: {row_encoded}"
                ) from None
            e = row_encoded
            offset = row.offset
            rows.append(FrameRow(offset, start + offset, e.info, e.words, e.cfa, e.fp, e.ra))
        return Function(
            index=index,
            start=start,
            size=function.size,
            start_field=0,
            fre_offset=0,
            num_rows=len(rows),
            info=info,
            info2=int(fde_type) if self.version is Version.V3 else 0,
            rep_size=function.rep_size if self.version is not Version.V1 else 0,
            _rows=tuple(rows),
        )

    def functions_in_order(self) -> list[FunctionBuilder]:
        if not self.sort:
            return list(self.functions)
        return sorted(self.functions, key=lambda f: f.start)

    def to_bytes(self) -> bytes:
        spec = SectionSpec(
            version=self.version,
            abi=self.abi,
            flags=self.flags,
            cfa_fixed_fp_offset=self.cfa_fixed_fp_offset,
            cfa_fixed_ra_offset=self.cfa_fixed_ra_offset,
            big_endian=self.big_endian,
            auxiliary_header=self.auxiliary_header,
            section_address=self.section_address,
        )
        functions = [self._function(i, f) for i, f in enumerate(self.functions_in_order())]
        return encode_section(spec, functions)

    def build(self) -> SFrameSection:
        """Encode and decode again: the section exactly as a reader will see it."""
        return SFrameSection.from_bytes(self.to_bytes(), self.section_address)


def _encoded(
    ctx: RowContext, cfa: CfaRule | None, fp: RegRule, ra: RegRule, mangled_ra: bool
) -> FrameRow | EncodeError:
    """A row (at offset 0) encoding the rules, as the reader decodes it; or why it cannot be
    (the builder keeps the answers: real and synthetic sections repeat the same few rules)."""
    try:
        info, size, words = encode_row(ctx, cfa, fp, ra, mangled_ra)
    except EncodeError as error:
        return error
    decoded_cfa, decoded_fp, decoded_ra = decode_rules(ctx, info, words, size.size)
    return FrameRow(0, 0, info, words, decoded_cfa, decoded_fp, decoded_ra)


def row_spec(row: FrameRow) -> RowSpec:
    """The rules of a decoded row, ready to be given to a builder again."""
    return RowSpec(row.start_offset, row.cfa, row.fp, row.ra, row.mangled_ra)


__all__ = [
    "FunctionBuilder",
    "RowSpec",
    "SFrameBuilder",
    "fre_type_for",
    "fre_type_for_size",
    "fre_types_for_sizes",
    "row_spec",
]
