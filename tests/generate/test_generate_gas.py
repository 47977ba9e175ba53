"""The generator against GNU as 2.47 itself, on random CFI.

Random functions of ``.cfi_*`` directives between instructions are assembled by ``as
--gsframe`` (binutils 2.47: ``$GAS``, and the AArch64 and s390x assemblers in
``$PATH_AARCH64`` / ``$PATH_S390X``), which writes both ``.eh_frame`` and its own ``.sframe``
from them.  pysframe generates SFrame V3 from the ``.eh_frame`` alone: every function gas
describes must have the same FREs (start, info byte, data words) and FDE info, and every
function gas leaves out ("no SFrame FDE emitted; ...", its warning) must be left out with
gas' reason.

The directives avoid what pysframe reads otherwise on purpose (pysframe.generate.translator:
``.cfi_def_cfa_register`` right after a change of the CFA offset, nested
``.cfi_remember_state``, ``.cfi_restore`` of an FP held in a register, a CFA offset change
on a CFA register other than the SP or FP, an FP saved while a tracked RA is undefined).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from libsframe_ref import reference_tool
from pysframe.elf.reader import ElfReader
from pysframe.format.model import Function
from pysframe.generate import generate_from_elf
from pysframe.sources import load_sframe


@dataclass(frozen=True)
class Target:
    """An assembler of binutils 2.47 and its registers' names."""

    name: str
    assembler: str
    sp: str
    fp: str
    ra: str
    others: tuple[str, ...]
    #: A one-byte or four-byte instruction that does nothing, and the CFA at entry.
    nop: str
    width: int
    entry: int
    ra_tracking: bool


def _targets() -> dict[str, Target]:
    gas = os.environ.get("GAS", "")
    aarch64 = os.environ.get("PATH_AARCH64", "")
    s390x = os.environ.get("PATH_S390X", "")
    return {
        "x86_64": Target("x86_64", gas, "%rsp", "%rbp", "%rip", ("%rbx", "%r12", "%r13"),
                         "nop", 1, 8, False),
        "aarch64": Target("aarch64", f"{aarch64}/aarch64-linux-gnu-as", "sp", "x29", "x30",
                          ("x19", "x20", "x21"), "nop", 4, 0, True),
        "s390x": Target("s390x", f"{s390x}/s390x-linux-gnu-as", "%r15", "%r11", "%r14",
                        ("%r6", "%r7", "%r8"), "nopr", 2, 160, True),
    }  # fmt: skip


def _function(rng: random.Random, target: Target, name: str) -> list[str]:
    """A function of random instructions and CFI directives, none of those pysframe reads
    otherwise than gas on purpose."""
    lines = [f".globl {name}", f".type {name}, @function", f"{name}:", ".cfi_startproc"]
    cfa_reg, offset = target.sp, target.entry
    remembered = False
    fp_in_register = False
    changed_offset = False
    # Where the RA is tracked, an FP saved while the RA is undefined: gas refuses the function
    # (FP without RA on stack), pysframe writes the outermost frame's rows (no words).
    fp_saved = ra_undefined = False

    def code() -> None:
        nonlocal changed_offset
        lines.extend([target.nop] * rng.choice([1, 1, 2, 3, 7]))
        changed_offset = False

    code()
    for _ in range(rng.randint(0, 14)):
        step = rng.random()
        stack = 16 if target.name == "x86_64" else 8
        if step < 0.25 and cfa_reg in (target.sp, target.fp):
            offset += rng.choice([stack, stack, 2 * stack, 4096, -stack])
            offset = max(offset, target.entry)
            lines.append(f".cfi_def_cfa_offset {offset}")
            changed_offset = True
        elif step < 0.40:
            register = rng.choice([target.fp, target.fp, target.ra, *target.others])
            if register == target.fp and target.ra_tracking and ra_undefined:
                continue
            fp_saved |= register == target.fp
            if register == target.ra and not target.ra_tracking and rng.random() < 0.7:
                slot = -8  # the x86-64 RA's fixed slot
            else:
                slot = -rng.choice([8, 16, 24, 32, 48])
            lines.append(f".cfi_offset {register}, {slot}")
            fp_in_register &= register != target.fp
        elif step < 0.47 and not changed_offset and cfa_reg in (target.sp, target.fp):
            cfa_reg = rng.choice([target.sp, target.fp])
            lines.append(f".cfi_def_cfa_register {cfa_reg}")
        elif step < 0.52:
            cfa_reg = rng.choice([target.sp, target.fp])
            offset = target.entry + 8 * rng.randrange(4)
            lines.append(f".cfi_def_cfa {cfa_reg}, {offset}")
        elif step < 0.58 and not fp_in_register:
            lines.append(f".cfi_restore {rng.choice([target.fp, target.ra])}")
        elif step < 0.64 and not remembered:
            lines.append(".cfi_remember_state")
            remembered = True
        elif step < 0.70 and remembered:
            lines.append(".cfi_restore_state")
            remembered = False
            fp_in_register = True  # not known here: no .cfi_restore of the FP after it
        elif step < 0.74:
            lines.append(f".cfi_same_value {rng.choice([target.fp, target.ra])}")
            fp_in_register = False
        elif step < 0.78:
            register = rng.choice([target.ra, target.ra, target.fp])
            if register == target.ra and target.ra_tracking and fp_saved:
                continue
            ra_undefined |= register == target.ra
            lines.append(f".cfi_undefined {register}")
        elif step < 0.82:
            register = rng.choice([target.fp, target.ra, *target.others])
            lines.append(f".cfi_register {register}, {rng.choice(target.others)}")
            fp_in_register |= register == target.fp
        elif step < 0.85:
            register = rng.choice([target.fp, target.ra, target.sp, *target.others])
            lines.append(f".cfi_val_offset {register}, {rng.choice([0, -8, 16])}")
        elif step < 0.88 and target.name == "aarch64":
            lines.append(".cfi_negate_ra_state")
        elif step < 0.90 and target.name == "x86_64":
            lines.append(f".cfi_escape 0x2e, {rng.choice([0, 16])}")  # DW_CFA_GNU_args_size
        elif step < 0.92 and target.name == "x86_64":
            # DRAP: CFA = *(rbp - 8), rbp saved at *(rbp + 0)
            lines.append(rng.choice([".cfi_escape 0x0f, 0x03, 0x76, 0x78, 0x06",
                                     ".cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00"]))  # fmt: skip
            fp_in_register = True
        code()
    lines += [".cfi_endproc", f".size {name}, .-{name}"]
    return lines


def _assemble(target: Target, folder: Path, seed: int) -> tuple[Path, list[str]]:
    """An object of random functions, and gas' warnings for those it left out, in their
    order (gas/gen-sframe.c create_sframe_all warns as it translates each)."""
    rng = random.Random(seed)
    lines = [".text"]
    for k in range(rng.randint(4, 12)):
        lines += _function(rng, target, f"f{seed}_{k}")
    source = folder / f"{target.name}-{seed}.s"
    source.write_text("\n".join(lines) + "\n")
    obj = source.with_suffix(".o")
    done = subprocess.run([target.assembler, "--gsframe", "-o", str(obj), str(source)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return obj, re.findall(r"Warning: (no SFrame FDE emitted; .*)", done.stderr)


def _symbols(obj: Path) -> dict[int, str]:
    from pysframe.elf.symbols import read_function_symbols

    with ElfReader.open(str(obj)) as image:
        return {symbol.address: symbol.name for symbol in read_function_symbols(image, ".symtab")}


def _fres(function: Function) -> list[tuple[int, int, tuple[int, ...]]]:
    return [(row.start_offset, row.info, tuple(row.words)) for row in function.rows]


@pytest.mark.parametrize("arch", ["x86_64", "aarch64", "s390x"])
def test_random_cfi_generates_what_gnu_as_writes(arch: str, tmp_path: Path) -> None:
    reference_tool("GAS")
    target = _targets()[arch]
    if not Path(target.assembler).exists():
        pytest.skip(f"no binutils 2.47 assembler for {arch}")  # GAS is, its cross builds not
    functions = left_out = 0
    for seed in range(40):
        obj, warned = _assemble(target, tmp_path, seed)
        with ElfReader.open(str(obj)) as image:
            gas = load_sframe(image)
        ours = generate_from_elf(str(obj))
        names = _symbols(obj)
        theirs = {names[f.start]: f for f in gas}
        mine = {names[f.start]: f for f in ours.section}
        assert set(mine) == set(theirs), (obj, warned, ours.skipped)
        for name, reference in theirs.items():
            generated = mine[name]
            assert (generated.info, generated.info2) == (reference.info, reference.info2), name
            assert _fres(generated) == _fres(reference), (obj, name)
        # Those left out, in address order (one section of code): gas' reasons.
        assert [s.reason for s in ours.skipped] == warned, obj
        assert not any(s.kept_without_rows for s in ours.skipped)
        functions += len(theirs)
        left_out += len(warned)
    assert functions > 100 and left_out > 20  # both kinds were exercised
