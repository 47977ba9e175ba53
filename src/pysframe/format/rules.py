"""What an FRE's data words mean, per ABI, version and FDE type, in both directions.

DEFAULT FDEs (V2 spec 2.4; docs/format.md, "DEFAULT rows"): ``CFA [RA] [FP]`` where the RA word
is present only when the header has no fixed RA offset (AMD64 has -8).  s390x stores the CFA
offset as ``(offset - 160) / 8``; in V2 an s390x FP/RA word with its low bit set names the
register holding the value (``word >> 1``); an s390x RA word of 0 is padding (docs/format.md,
"s390x").

FLEX FDEs (docs/format.md, "FLEX FDEs"): (control, offset) pairs for CFA, then RA (or one 0
padding word when only FP follows), then FP; ``control = (dwarf_regnum << 3) | (deref << 1) |
reg_p``.

No words at all: the return address is undefined (outermost frame; docs/format.md,
"RA undefined").

The bit fields of info bytes and control words are read and composed by
:mod:`pysframe.format.layout`; this module owns what the words mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

from ..dataclass import dataclass
from ..errors import EncodeError, InvalidFieldError
from .constants import (
    S390X_CFA_OFFSET_ADJUSTMENT,
    S390X_CFA_OFFSET_ALIGNMENT,
    Abi,
    BaseReg,
    DwarfReg,
    FdeType,
    Version,
    WordSize,
)
from .layout import (
    MAX_WORDS,
    fde_type_of,
    flex_control,
    flex_deref,
    flex_reg,
    flex_reg_p,
    fre_base_reg,
    word_mask,
)
from .layout import fre_info as fre_info  # sfre_info is composed in one place: the layout
from .model import CfaRule, Header, RegRule, RuleKind

_UNTRACKED = RegRule.untracked()
_PADDING = RegRule.padding()
_UNDEFINED = RegRule.undefined()


@cache
def _fixed(offset: int) -> RegRule:
    """``RegRule.fixed(offset)``, made once per offset (the header's fixed offsets: signed
    bytes) rather than for every row decoded."""
    return RegRule.fixed(offset)


@dataclass(frozen=True, slots=True)
class RowContext:
    """Everything besides the row itself that decides what its words mean."""

    abi: Abi
    version: Version
    fde_type: FdeType
    cfa_fixed_fp_offset: int
    cfa_fixed_ra_offset: int

    @property
    def s390x(self) -> bool:
        return self.abi is Abi.S390X_ENDIAN_BIG


def row_context(header: Header, info2: int) -> RowContext:
    """The context of a function's rows: the header's, and the FDE type in ``info2``."""
    fde_type = FdeType.FLEX if fde_type_of(info2) == FdeType.FLEX else FdeType.DEFAULT
    return RowContext(
        header.abi, header.version, fde_type, header.cfa_fixed_fp_offset, header.cfa_fixed_ra_offset
    )


# ---------------------------------------------------------------------------------------------
# Decoding


#: What decode_rules answers: (cfa, fp, ra).
Rules = tuple[CfaRule | None, RegRule, RegRule]


def decode_rules(
    ctx: RowContext, info: int, words: tuple[int, ...], word_size: int, offset: int | None = None
) -> Rules:
    """Return (cfa, fp, ra) for an FRE with ``info`` and signed ``words``.

    ``offset`` is where the FRE is, for error messages.
    """
    if not words:
        return None, _UNTRACKED, _UNDEFINED
    if ctx.fde_type is FdeType.FLEX:
        return _decode_flex(ctx, words, word_size, offset)
    return _decode_default(ctx, info, words)


def _decode_cfa_offset(ctx: RowContext, stored: int) -> int:
    if ctx.s390x:
        return stored * S390X_CFA_OFFSET_ALIGNMENT + S390X_CFA_OFFSET_ADJUSTMENT
    return stored


def _decode_default(
    ctx: RowContext, info: int, words: tuple[int, ...]
) -> tuple[CfaRule, RegRule, RegRule]:
    regs = DwarfReg.SP if fre_base_reg(info) == BaseReg.SP else DwarfReg.FP
    cfa = CfaRule(regs[ctx.abi], _decode_cfa_offset(ctx, words[0]))
    index = 1
    if ctx.cfa_fixed_ra_offset:
        ra = _fixed(ctx.cfa_fixed_ra_offset)
    elif len(words) > index:
        ra = _default_word_rule(ctx, words[index], is_ra=True)
        index += 1
    else:
        ra = _UNTRACKED
    if ctx.cfa_fixed_fp_offset:
        fp = _fixed(ctx.cfa_fixed_fp_offset)
    elif len(words) > index:
        fp = _default_word_rule(ctx, words[index], is_ra=False)
    else:
        fp = _UNTRACKED
    return cfa, fp, ra


def _default_word_rule(ctx: RowContext, word: int, *, is_ra: bool) -> RegRule:
    if ctx.s390x:
        if is_ra and word == 0:
            return _PADDING
        if ctx.version is Version.V2:
            reg = s390x_word_register(word)
            if reg is not None:
                return RegRule.in_register(reg)
    return RegRule.at_cfa(word)


def s390x_word_register(word: int) -> int | None:
    """The register an s390x V2 FP/RA word names (low bit set: ``word >> 1``), else None
    (errata 1; libsframe's sframe_s390x_offset_regnum_p)."""
    return word >> 1 if word & 1 else None


def s390x_register_word(reg: int) -> int:
    """The s390x V2 FP/RA word naming register ``reg``."""
    return (reg << 1) | 1


def _control_fields(control: int) -> tuple[int, bool, bool]:
    """(dwarf_regnum, deref, reg_p) of a FLEX control word."""
    return flex_reg(control), flex_deref(control), flex_reg_p(control)


def _flex_rule(control: int, offset: int) -> RegRule:
    reg, deref, reg_p = _control_fields(control)
    kind = RuleKind.SAVED if deref else RuleKind.VALUE
    return RegRule(kind, offset, reg if reg_p else None)


def _decode_flex(
    ctx: RowContext, words: tuple[int, ...], word_size: int, offset: int | None
) -> tuple[CfaRule, RegRule, RegRule]:
    mask = word_mask(word_size)
    count = len(words)
    if count < 2 or count > MAX_WORDS:
        raise InvalidFieldError(
            f"FLEX FRE with {count} data words (expected 2 to {MAX_WORDS})", offset
        )
    reg, deref, reg_p = _control_fields(words[0] & mask)
    if not reg_p:
        raise InvalidFieldError("FLEX FRE CFA control word names no register", offset)
    cfa = CfaRule(reg, _decode_cfa_offset(ctx, words[1]), deref)
    index = 2
    ra: RegRule
    if count in (3, 5):  # CFA pair, one RA padding word, then the FP pair (if any)
        if words[2] != 0:
            raise InvalidFieldError("FLEX FRE RA padding word is not zero", offset)
        ra, index = _PADDING, 3
    elif count >= 4:
        if words[2] & mask == 0:
            raise InvalidFieldError("FLEX FRE RA pair has a zero control word", offset)
        ra, index = _flex_rule(words[2] & mask, words[3]), 4
    else:
        ra = _fixed(ctx.cfa_fixed_ra_offset) if ctx.cfa_fixed_ra_offset else _UNTRACKED
    if count > index:
        fp = _flex_rule(words[index] & mask, words[index + 1])
    else:
        fp = _fixed(ctx.cfa_fixed_fp_offset) if ctx.cfa_fixed_fp_offset else _UNTRACKED
    return cfa, fp, ra


# ---------------------------------------------------------------------------------------------
# Encoding


def encode_rules(
    ctx: RowContext,
    cfa: CfaRule | None,
    fp: RegRule,
    ra: RegRule,
    fde_type: FdeType | None = None,
) -> tuple[int, tuple[int, ...]]:
    """Return (base_reg bit, words) for the rules; raise EncodeError when not representable."""
    if ra.kind is RuleKind.UNDEFINED:
        return 0, ()
    if cfa is None:
        raise EncodeError("a row needs a CFA rule unless its RA is undefined")
    if (fde_type or ctx.fde_type) is FdeType.FLEX:
        if ctx.version is not Version.V3:
            raise EncodeError(f"FLEX rows need SFrame V3, not V{int(ctx.version)}")
        return 0, _encode_flex(ctx, cfa, fp, ra)
    return _encode_default(ctx, cfa, fp, ra)


def _encode_cfa_offset(ctx: RowContext, offset: int) -> int:
    if not ctx.s390x:
        return offset
    stored, rest = divmod(offset - S390X_CFA_OFFSET_ADJUSTMENT, S390X_CFA_OFFSET_ALIGNMENT)
    if rest:
        raise EncodeError(f"s390x CFA offset {offset} is not 160 plus a multiple of 8")
    return stored


def _encode_default(
    ctx: RowContext, cfa: CfaRule, fp: RegRule, ra: RegRule
) -> tuple[int, tuple[int, ...]]:
    if cfa.deref:
        raise EncodeError("a CFA behind a dereference needs a FLEX FDE")
    if cfa.reg == DwarfReg.SP[ctx.abi]:
        base = BaseReg.SP
    elif cfa.reg == DwarfReg.FP[ctx.abi]:
        base = BaseReg.FP
    else:
        raise EncodeError(f"CFA based on DWARF register {cfa.reg} needs a FLEX FDE")
    words = [_encode_cfa_offset(ctx, cfa.offset)]
    fp_word = _default_word(ctx, fp, ctx.cfa_fixed_fp_offset, "FP")
    if ctx.cfa_fixed_ra_offset:
        if not _is_fixed(ra, ctx.cfa_fixed_ra_offset):
            raise EncodeError(f"RA rule {ra} differs from the header's fixed RA offset")
    else:
        ra_word = _default_word(ctx, ra, 0, "RA")
        if ra_word is None and fp_word is not None:
            if not ctx.s390x:
                raise EncodeError("an FP rule without an RA rule needs a FLEX FDE")
            ra_word = 0  # s390x: "FP saved, RA not" (errata 1)
        if ra_word is not None:
            words.append(ra_word)
    if fp_word is not None:
        words.append(fp_word)
    return int(base), tuple(words)


def _is_fixed(rule: RegRule, fixed: int) -> bool:
    return (rule.kind is RuleKind.FIXED and rule.offset == fixed) or (
        rule.kind is RuleKind.SAVED and rule.reg is None and rule.offset == fixed
    )


def _default_word(ctx: RowContext, rule: RegRule, fixed: int, what: str) -> int | None:
    """The DEFAULT word for an FP or RA rule, or None when the rule needs no word."""
    if fixed:
        if not _is_fixed(rule, fixed) and rule.kind is not RuleKind.UNTRACKED:
            raise EncodeError(f"{what} rule {rule} differs from the header's fixed offset")
        return None
    if rule.kind is RuleKind.UNTRACKED:
        return None
    if rule.kind is RuleKind.PADDING and ctx.s390x and what == "RA":
        return 0
    names_register = ctx.s390x and s390x_word_register(rule.offset) is not None
    if rule.kind is RuleKind.SAVED and rule.reg is None and not names_register:
        if ctx.s390x and what == "RA" and rule.offset == 0:
            raise EncodeError("s390x RA saved at CFA+0 reads as padding")
        return rule.offset
    if (
        ctx.s390x
        and ctx.version is Version.V2
        and rule.kind is RuleKind.VALUE
        and rule.reg is not None
        and rule.offset == 0
    ):
        return s390x_register_word(rule.reg)
    raise EncodeError(f"{what} rule {rule} needs a FLEX FDE")


def _flex_control(rule: RegRule, what: str) -> int:
    if rule.kind not in (RuleKind.SAVED, RuleKind.VALUE):
        raise EncodeError(f"{what} rule {rule} has no FLEX encoding")
    deref = rule.kind is RuleKind.SAVED
    if rule.reg is None:
        return flex_control(0, deref, reg_p=False)
    if rule.reg < 0:
        raise EncodeError(f"{what} rule names negative register {rule.reg}")
    return flex_control(rule.reg, deref, reg_p=True)


def _encode_flex(ctx: RowContext, cfa: CfaRule, fp: RegRule, ra: RegRule) -> tuple[int, ...]:
    if cfa.reg < 0:
        raise EncodeError(f"CFA rule names negative register {cfa.reg}")
    words = [flex_control(cfa.reg, cfa.deref, reg_p=True), _encode_cfa_offset(ctx, cfa.offset)]
    fp_tracked = fp.kind not in (RuleKind.UNTRACKED, RuleKind.FIXED)
    if ra.kind in (RuleKind.UNTRACKED, RuleKind.FIXED, RuleKind.PADDING):
        if ra.kind is RuleKind.FIXED and ra.offset != ctx.cfa_fixed_ra_offset:
            raise EncodeError(f"RA rule {ra} differs from the header's fixed RA offset")
        if fp_tracked:
            words.append(0)
    else:
        control = _flex_control(ra, "RA")
        if control == 0:
            raise EncodeError("an RA value of CFA+offset has no FLEX encoding (reads as padding)")
        words += [control, ra.offset]
    if fp_tracked:
        words += [_flex_control(fp, "FP"), fp.offset]
    elif fp.kind is RuleKind.FIXED and fp.offset != ctx.cfa_fixed_fp_offset:
        raise EncodeError(f"FP rule {fp} differs from the header's fixed FP offset")
    return tuple(words)


_FLEX_CONTROL_POSITIONS = {2: (0,), 4: (0, 2), 5: (0, 3), 6: (0, 2, 4)}


def flex_control_positions(count: int) -> tuple[int, ...]:
    """Which of a FLEX row's ``count`` words are control words (docs/format.md, "FLEX FDEs")."""
    return _FLEX_CONTROL_POSITIONS.get(count, (0,) if count else ())


#: Per data-word size, smallest first: (size, smallest signed word, one past the largest signed
#: word, one past the largest unsigned word).
_WORD_RANGES = tuple(
    (size, -(1 << (8 * size.size - 1)), 1 << (8 * size.size - 1), 1 << (8 * size.size))
    for size in WordSize
)


def word_size_for(words: tuple[int, ...], unsigned: tuple[int, ...] = ()) -> WordSize:
    """Smallest data-word size holding every word.

    Offsets must fit as signed integers; the words at positions ``unsigned`` (FLEX control
    words) as unsigned ones (gas' sframe_get_fre_dataword_size, which looks at the CFA offset,
    the offsets of an FP or RA saved on the stack and the control words; the other words, cut
    to its size in gas, are held here too).
    """
    offsets: Sequence[int] = words
    control_low = control_high = 0
    if unsigned:
        controls = [words[k] for k in unsigned if k < len(words)]
        offsets = [word for k, word in enumerate(words) if k not in unsigned]
        control_low, control_high = min(controls, default=0), max(controls, default=0)
    low, high = min(offsets, default=0), max(offsets, default=0)
    for size, smallest, signed_end, unsigned_end in _WORD_RANGES:
        if (
            smallest <= low
            and high < signed_end
            and control_low >= 0
            and control_high < unsigned_end
        ):
            return size
    raise EncodeError(f"data words {words} do not fit 32 bits")


def stored_words(words: tuple[int, ...], size: WordSize) -> tuple[int, ...]:
    """The words as a row holds them: signed integers of ``size`` (control words wrap)."""
    bits = 8 * size.size
    return tuple(w - (1 << bits) if w >= 1 << (bits - 1) else w for w in words)


class EncodedRow(NamedTuple):
    """A row as an FRE holds it after its start address: the sfre_info byte, the data-word
    size, and the words as stored (signed integers of that size; control words wrap)."""

    info: int
    word_size: WordSize
    words: tuple[int, ...]


def encode_row(
    ctx: RowContext, cfa: CfaRule | None, fp: RegRule, ra: RegRule, mangled_ra: bool = False
) -> EncodedRow:
    """The sfre_info byte, word size and stored words of a row with these rules (V2 spec 2.4.1,
    docs/format.md, "FLEX FDEs"): :func:`encode_rules`, the smallest word size that holds
    every word (gas ``sframe_get_fre_dataword_size``; FLEX control words unsigned), then the
    info byte.  Raises EncodeError when the rules have no encoding in ``ctx``."""
    base, words = encode_rules(ctx, cfa, fp, ra)
    flex = ctx.fde_type is FdeType.FLEX
    size = word_size_for(words, flex_control_positions(len(words)) if flex else ())
    return EncodedRow(fre_info(base, len(words), size, mangled_ra), size, stored_words(words, size))
