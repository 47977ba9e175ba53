"""Immutable values describing an SFrame section: header, functions (FDEs) and rows (FREs),
and the rules (CFA, FP, RA) a row gives.  Their bit fields are read with the accessors of
:mod:`pysframe.format.layout`.

Values keep the raw encoded fields next to their meaning, so a decoded section can be written
back byte for byte and a dump can show what is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from enum import Enum

from ..dataclass import dataclass
from .constants import (
    Abi,
    BaseReg,
    FdeType,
    Flags,
    FreType,
    PauthKey,
    PcType,
    Version,
    WordSize,
)
from .layout import (
    HEADER_SIZE,
    fde_fre_type,
    fde_pauth_key,
    fde_pc_type,
    fde_signal_frame,
    fde_type_of,
    fre_base_reg,
    fre_mangled_ra,
    fre_word_count,
    fre_word_size_code,
)


@dataclass(frozen=True, slots=True)
class Header:
    """The SFrame header (V2 spec 2.2), as stored."""

    version: Version
    flags: Flags
    abi: Abi
    cfa_fixed_fp_offset: int
    cfa_fixed_ra_offset: int
    auxiliary_header: bytes
    num_fdes: int
    num_fres: int
    fre_len: int
    fde_offset: int
    fre_offset: int
    big_endian: bool

    @property
    def size(self) -> int:
        """Bytes from the start of the section to the end of the (auxiliary) header."""
        return HEADER_SIZE + len(self.auxiliary_header)

    @property
    def fre_start(self) -> int:
        """Byte offset of the FRE sub-section in the section."""
        return self.size + self.fre_offset

    @property
    def fre_end(self) -> int:
        """Byte offset of the end of the FRE sub-section."""
        return self.size + self.fre_offset + self.fre_len

    @property
    def sorted(self) -> bool:
        return bool(self.flags & Flags.FDE_SORTED)

    @property
    def pcrel(self) -> bool:
        return bool(self.flags & Flags.FDE_FUNC_START_PCREL)


class RuleKind(Enum):
    """How a register (FP or RA) is recovered in the caller's frame."""

    #: Not saved by this frame: the register still holds the caller's value
    #: (for the AArch64 and s390x RA: it is in the link register).  Dumped as ``u``.
    UNTRACKED = "untracked"
    #: Saved at CFA + the header's fixed offset (AMD64 RA).  Dumped as ``f``.
    FIXED = "fixed"
    #: A padding word stands where the rule would be: the row gives no rule of its own, so the
    #: ABI's default applies (AMD64 RA: the header's fixed offset; s390x and AArch64 RA: the link
    #: register).  Kept apart from FIXED/UNTRACKED because the dump shows it as ``U``.
    PADDING = "padding"
    #: The return address is undefined: this is the outermost frame.
    UNDEFINED = "undefined"
    #: Saved in memory at (``reg`` or the CFA) + ``offset``.
    SAVED = "saved"
    #: The value itself is (``reg`` or the CFA) + ``offset``; with offset 0 and a register,
    #: "saved in register ``reg``".
    VALUE = "value"

    # Members are singletons: hash by identity, in C (rules are cache keys in hot loops).
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class RegRule:
    """Recovery rule of the FP or the RA.  ``reg`` None means "relative to the CFA"."""

    kind: RuleKind
    offset: int = 0
    reg: int | None = None

    @classmethod
    def untracked(cls) -> RegRule:
        return _UNTRACKED

    @classmethod
    def padding(cls) -> RegRule:
        return _PADDING

    @classmethod
    def undefined(cls) -> RegRule:
        return _UNDEFINED

    @classmethod
    def fixed(cls, offset: int) -> RegRule:
        return cls(RuleKind.FIXED, offset)

    @classmethod
    def at_cfa(cls, offset: int) -> RegRule:
        """Saved on the stack at CFA + offset."""
        return cls(RuleKind.SAVED, offset)

    @classmethod
    def in_register(cls, reg: int) -> RegRule:
        return cls(RuleKind.VALUE, 0, reg)

    @property
    def tracked(self) -> bool:
        return self.kind in (RuleKind.FIXED, RuleKind.SAVED, RuleKind.VALUE)


_UNTRACKED = RegRule(RuleKind.UNTRACKED)
_PADDING = RegRule(RuleKind.PADDING)
_UNDEFINED = RegRule(RuleKind.UNDEFINED)


@dataclass(frozen=True, slots=True)
class CfaRule:
    """CFA = ``reg`` + ``offset`` (``deref``: the CFA is the word stored there).

    ``reg`` is a DWARF register number; s390x offsets are given decoded (real bytes).
    """

    reg: int
    offset: int
    deref: bool = False


@dataclass(frozen=True, slots=True)
class FrameRow:
    """One frame row entry (V2 spec 2.4) with its rules decoded for the section's ABI."""

    #: sfre_start_address: offset from the function start (PCMASK: from the repeated block start).
    start_offset: int
    #: Absolute address of the row's first PC (function start + start_offset).
    start_address: int
    #: The raw sfre_info byte (V2 spec 2.4.1).
    info: int
    #: The trailing data words, each as a signed integer of the row's word size.
    words: tuple[int, ...]
    #: CFA rule; None when the row has no words (RA undefined, outermost frame).
    cfa: CfaRule | None
    fp: RegRule
    ra: RegRule

    @property
    def base_reg(self) -> BaseReg:
        """fre_cfa_base_reg_id (meaningful for DEFAULT FDEs)."""
        return BaseReg(fre_base_reg(self.info))

    @property
    def word_count(self) -> int:
        return fre_word_count(self.info)

    @property
    def word_size(self) -> WordSize:
        return WordSize(fre_word_size_code(self.info))

    @property
    def mangled_ra(self) -> bool:
        """fre_mangled_ra_p: the return address is signed (AArch64 PAC)."""
        return bool(fre_mangled_ra(self.info))

    @property
    def ra_undefined(self) -> bool:
        return self.ra.kind is RuleKind.UNDEFINED


@dataclass(frozen=True, slots=True)
class Function:
    """One function descriptor entry (V2 spec 2.3, V3 index entry + attribute record).

    ``rows`` are decoded on first use for functions read from a section.
    """

    index: int
    #: Absolute address of the function's first byte (after PCREL / section rebasing).
    start: int
    size: int
    #: Raw sfde_func_start_address / func_start_offset as stored.
    start_field: int
    #: sfde_func_start_fre_off: offset of the function's FREs (V3: of its attribute record).
    fre_offset: int
    #: How many rows (FREs) the function has: sfde_func_num_fres (V3: in the attribute record).
    num_rows: int
    #: Raw sfde_func_info (V3: attribute-record info byte).
    info: int
    #: V3 attribute-record info2 byte (0 before V3).
    info2: int
    rep_size: int
    #: V2 sfde_func_padding2, kept so a section re-encodes byte for byte.
    padding: int = 0
    _rows: tuple[FrameRow, ...] | None = field(default=None, compare=False, repr=False)
    #: Decodes the rows of a function read from a section (called with the function).
    _loader: Callable[[Function], tuple[FrameRow, ...]] | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def fre_type(self) -> FreType:
        return FreType(fde_fre_type(self.info))

    @property
    def pc_type(self) -> PcType:
        return PcType(fde_pc_type(self.info))

    @property
    def fde_type(self) -> FdeType:
        return FdeType(fde_type_of(self.info2))

    @property
    def pauth_key(self) -> PauthKey:
        return PauthKey(fde_pauth_key(self.info))

    @property
    def signal_frame(self) -> bool:
        """V3 info bit 7: the function is a signal trampoline."""
        return bool(fde_signal_frame(self.info))

    @property
    def rows(self) -> tuple[FrameRow, ...]:
        if self._rows is not None:
            return self._rows
        if self._loader is None:
            return ()
        return self._loader(self)

    def __len__(self) -> int:
        return self.num_rows

    def __contains__(self, pc: object) -> bool:
        return isinstance(pc, int) and self.start <= pc < self.start + self.size


@dataclass(frozen=True, slots=True)
class LookupResult:
    """A function and the row that applies at a PC (:meth:`SFrameSection.lookup`)."""

    function: Function
    row: FrameRow
    row_index: int


__all__ = [
    "Abi",
    "CfaRule",
    "FrameRow",
    "Function",
    "Header",
    "LookupResult",
    "RegRule",
    "RuleKind",
]
