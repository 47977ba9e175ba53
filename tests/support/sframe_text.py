"""Parse the text GNU objdump/readelf --sframe print, into plain values for golden tests.

Each row is kept as the tool printed its cells; ``cell_rule`` turns a cell into the rule it
names, so tests compare meaning with the model, independent of pysframe's own dumper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_FUNC = re.compile(
    r"^    func idx \[(\d+)\]: pc = 0x([0-9a-f]+), size = (\d+) bytes"
    r"(?:, attr = \"([SF]+)\")?(?:, pauth = ([AB]) key)?$"
)
_ROW = re.compile(r"^    ([0-9a-f]{16})  (?:RA undefined|(\S+)\s+(\S+)\s+(\S+)\s*)$")


@dataclass
class TextRow:
    start: int
    cfa: str | None
    fp: str | None
    ra: str | None


@dataclass
class TextFunction:
    index: int
    pc: int
    size: int
    attrs: str
    pauth_b: bool
    pcmask: bool = False
    rows: list[TextRow] = field(default_factory=list)


@dataclass
class TextDump:
    version: int
    flags: list[str]
    fixed_ra: int | None
    fixed_fp: int | None
    num_fdes: int
    num_fres: int
    functions: list[TextFunction]


def parse_dump(path: Path) -> TextDump:
    version = num_fdes = num_fres = 0
    fixed_ra = fixed_fp = None
    flags: list[str] = []
    functions: list[TextFunction] = []
    in_flags = False
    for line in path.read_text().splitlines():
        if m := re.match(r"^    Version: SFRAME_VERSION_(\d)$", line):
            version = int(m[1])
        elif m := re.match(r"^    Flags: (.*?),?$", line):
            flags, in_flags = [m[1]], line.endswith(",")
        elif in_flags and (m := re.match(r"^\s+(SFRAME_F_\w+),?$", line)):
            flags.append(m[1])
            in_flags = line.endswith(",")
        elif m := re.match(r"^    CFA fixed RA offset: (-?\d+)$", line):
            fixed_ra = int(m[1])
        elif m := re.match(r"^    CFA fixed FP offset: (-?\d+)$", line):
            fixed_fp = int(m[1])
        elif m := re.match(r"^    Num FDEs: (\d+)$", line):
            num_fdes = int(m[1])
        elif m := re.match(r"^    Num FREs: (\d+)$", line):
            num_fres = int(m[1])
        elif m := _FUNC.match(line):
            functions.append(
                TextFunction(int(m[1]), int(m[2], 16), int(m[3]), m[4] or "", m[5] == "B")
            )
        elif line.startswith("    STARTPC"):
            functions[-1].pcmask = line.startswith("    STARTPC[m]")
        elif m := _ROW.match(line):
            functions[-1].rows.append(TextRow(int(m[1], 16), m[2], m[3], m[4]))
    return TextDump(version, flags, fixed_ra, fixed_fp, num_fdes, num_fres, functions)


_REGS = {
    "x86_64": {"sp": 7, "fp": 6, "ra": 16},
    "aarch64": {"sp": 31, "fp": 29, "ra": 30},
    "s390x": {"sp": 15, "fp": 11, "ra": 14},
}


def cfa_cell(cell: str, arch: str) -> tuple[int, int, bool]:
    """'sp+8' / 'fp+16' / 'r10+0' / '(fp-8)' -> (DWARF reg, offset, deref)."""
    deref = cell.startswith("(")
    body = cell.strip("()")
    m = re.fullmatch(r"(sp|fp|r\d+)(?:\+)?([+-]?\d+)", body)
    assert m, cell
    name, offset = m[1], int(m[2])
    reg = int(name[1:]) if name.startswith("r") else _REGS[arch][name]
    return reg, offset, deref


def reg_cell(cell: str, arch: str) -> tuple[str, int, int | None, bool]:
    """FP/RA cell -> (kind, offset, reg or None for CFA-relative, signed RA)."""
    signed = cell.endswith("[s]")
    body = cell.removesuffix("[s]")
    if body in ("u", "f", "U"):
        return {"u": "untracked", "f": "fixed", "U": "padding"}[body], 0, None, signed
    if m := re.fullmatch(r"c([+-]\d+)", body):
        return "saved", int(m[1]), None, signed
    if m := re.fullmatch(r"\((sp|fp|r\d+)([+-]\d+)\)", body):
        name = m[1]
        reg = int(name[1:]) if name.startswith("r") else _REGS[arch][name]
        return "saved", int(m[2]), reg, signed
    raise AssertionError(f"unparsed cell {cell!r}")
