"""DWARF line-number programs decoded to rows (DWARF 5 section 6.2.5, "The Line Number Program").

A unit's line program is a byte code run by a state machine whose registers (address,
op_index, file, line, ...) are appended to the line table as a row at each special opcode,
``DW_LNS_copy`` and ``DW_LNE_end_sequence``.  Rows here are kept in four flat arrays (address,
file, line, end of sequence), never as an object per row: a program of two million rows costs
tens of MB, not a GB.

:func:`line_rows` decodes a program: each long run of consecutive special opcodes (one byte
each, most of a program) is decoded at once with numpy, the other opcodes one by one.

As gdb (``dwarf_decode_lines_1``) and unlike pyelftools, an unknown standard opcode skips the
operands ``standard_opcode_lengths`` gives it, an extended opcode always ends where its length
says, and ``maximum_operations_per_instruction`` 0 is taken as 1.  Addresses and lines wrap
at 64 bits, as the registers of a reader in C do.

:func:`read_line_program` reads a program's header (versions 2 to 5: the state machine's
parameters, the directory and file tables) for gdb's rules and BFD's alike.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Literal

from ..dataclass import dataclass
from ..errors import ElfError

if TYPE_CHECKING:
    import numpy as np

_MASK = (1 << 64) - 1
#: Runs of special opcodes at least this long are decoded with numpy (shorter ones cost less
#: one by one).
_RUN = 8
_SECTION = ".debug_line"

# Standard and extended opcodes (DWARF 5 7.22, tables 7.25 and 7.26).
DW_LNS_copy = 0x01
DW_LNS_advance_pc = 0x02
DW_LNS_advance_line = 0x03
DW_LNS_set_file = 0x04
DW_LNS_set_column = 0x05
DW_LNS_negate_stmt = 0x06
DW_LNS_set_basic_block = 0x07
DW_LNS_const_add_pc = 0x08
DW_LNS_fixed_advance_pc = 0x09
DW_LNS_set_prologue_end = 0x0A
DW_LNS_set_epilogue_begin = 0x0B
DW_LNS_set_isa = 0x0C
DW_LNE_end_sequence = 0x01
DW_LNE_set_address = 0x02
DW_LNE_define_file = 0x03  # DWARF 4 and earlier
#: The ULEB operands of the standard opcodes read as the state machine reads them, whatever
#: the header's standard_opcode_lengths says (gdb does the same); others: the header's count.
_OPERANDS = {
    DW_LNS_set_column: 1,
    DW_LNS_negate_stmt: 0,
    DW_LNS_set_basic_block: 0,
    DW_LNS_set_prologue_end: 0,
    DW_LNS_set_epilogue_begin: 0,
    DW_LNS_set_isa: 1,
}


@dataclass(frozen=True, slots=True)
class LineProgramHeader:
    """What the state machine needs of a line program's header (DWARF 5 6.2.4)."""

    minimum_instruction_length: int
    maximum_operations_per_instruction: int
    line_base: int
    line_range: int
    opcode_base: int
    standard_opcode_lengths: tuple[int, ...]
    #: The size of DW_LNE_set_address's operand (the unit's address size) and byte order.
    address_size: int
    big_endian: bool
    #: The is_stmt register at the start of each sequence.
    default_is_stmt: bool


@dataclass(slots=True)
class LineRows:
    """The rows of a line program, in program order: address, file register (as the program
    sets it), line, whether the row ends a sequence, and its is_stmt register;
    ``defined_files``: the (name,
    directory index) of each ``DW_LNE_define_file``."""

    addresses: np.ndarray
    files: np.ndarray
    lines: np.ndarray
    ends: np.ndarray
    stmts: np.ndarray
    defined_files: list[tuple[bytes, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.addresses)


@dataclass(frozen=True, slots=True)
class LineProgram:
    """A line-number program as its header gives it (DWARF 5 6.2.4): the state machine's
    parameters, the directory and file tables as stored (DWARF 5: entry 0 is the
    compilation's; earlier versions number both from 1), and the opcodes."""

    version: int
    header: LineProgramHeader
    directories: list[str]
    #: (name, directory index) of each file entry.
    files: list[tuple[str, int]]
    code: bytes


# Content types of DWARF 5 directory and file entries (7.22, table 7.27) and the forms they
# may take (table 7.6).
_DW_LNCT_path, _DW_LNCT_directory_index = 0x1, 0x2
_FORM_SIZES = {0x0B: 1, 0x05: 2, 0x06: 4, 0x07: 8, 0x1E: 16, 0x0C: 1}  # data1/2/4/8/16, flag
_DW_FORM_string, _DW_FORM_udata, _DW_FORM_block = 0x08, 0x0F, 0x09
_DW_FORM_strp, _DW_FORM_line_strp = 0x0E, 0x1F


def read_line_program(
    data: bytes,
    offset: int,
    *,
    address_size: int,
    big_endian: bool,
    string: Callable[[int, int], str],
) -> LineProgram:
    """The line-number program at ``offset`` of ``.debug_line`` (versions 2 to 5), read as
    BFD reads it (bfd/dwarf2.c ``decode_line_info``): the opcodes start right after the file
    table and end with the unit.  ``string(form, offset)`` reads a DW_FORM_strp or
    DW_FORM_line_strp name; ``address_size`` is the compilation unit's.  ElfError when the
    header does not fit."""
    order: Literal["big", "little"] = "big" if big_endian else "little"
    end = len(data)
    try:
        length = int.from_bytes(data[offset : offset + 4], order)
        pos, offset_size = offset + 4, 4
        if length == 0xFFFFFFFF:
            length = int.from_bytes(data[pos : pos + 8], order)
            pos, offset_size = pos + 8, 8
        if length > end - pos:
            raise ElfError(f"line program of {length:#x} bytes runs past the section", offset,
                           section=_SECTION)  # fmt: skip
        end = pos + length
        version = int.from_bytes(data[pos : pos + 2], order)
        pos += 2
        if not 2 <= version <= 5:
            raise ElfError(f"line program of version {version}", offset, section=_SECTION)
        if version >= 5:
            pos += 2  # address_size, segment_selector_size
        pos += offset_size  # header_length
        min_length = data[pos]
        pos += 1
        max_ops = 1
        if version >= 4:
            max_ops = data[pos]
            pos += 1
        default_is_stmt = data[pos] != 0
        line_base = data[pos + 1] - (256 if data[pos + 1] >= 128 else 0)
        line_range, opcode_base = data[pos + 2], data[pos + 3]
        pos += 4
        lengths = tuple(data[pos : pos + max(0, opcode_base - 1)])
        pos += max(0, opcode_base - 1)
        directories: list[str] = []
        files: list[tuple[str, int]] = []
        if version >= 5:
            for table in (directories, files):
                entries, pos = _formatted_entries(data, pos, end, order, offset_size, string)
                if table is directories:
                    directories += [name for name, _ in entries]
                else:
                    files += entries
        else:
            while data[pos]:
                name_end = data.index(b"\0", pos, end)
                directories.append(os.fsdecode(data[pos:name_end]))
                pos = name_end + 1
            pos += 1
            while data[pos]:
                name_end = data.index(b"\0", pos, end)
                name = os.fsdecode(data[pos:name_end])
                directory, pos = read_uleb(data, name_end + 1, end)
                for _ in range(2):  # mtime, length
                    _, pos = read_uleb(data, pos, end)
                files.append((name, directory))
            pos += 1
    except (IndexError, ValueError):
        raise ElfError("line program header runs past its end", offset,
                       section=_SECTION) from None  # fmt: skip
    header = LineProgramHeader(min_length, max_ops, line_base, line_range, opcode_base, lengths,
                               address_size, big_endian, default_is_stmt)  # fmt: skip
    return LineProgram(version, header, directories, files, data[pos:end])


def _formatted_entries(
    data: bytes, pos: int, end: int, order: Literal["big", "little"], offset_size: int,
    string: Callable[[int, int], str],
) -> tuple[list[tuple[str, int]], int]:
    """DWARF 5 directory or file entries (6.2.4.1): the format (content type, form pairs),
    then the entries; each as (path, directory index).  IndexError when they run past."""
    count = data[pos]
    pos += 1
    formats = []
    for _ in range(count):
        kind, pos = read_uleb(data, pos, end)
        form, pos = read_uleb(data, pos, end)
        formats.append((kind, form))
    entries, pos = read_uleb(data, pos, end)
    out = []
    for _ in range(min(entries, end - pos)):
        name, directory = "", 0
        for kind, form in formats:
            value: int | str
            if form == _DW_FORM_string:
                name_end = data.index(b"\0", pos, end)
                value, pos = os.fsdecode(data[pos:name_end]), name_end + 1
            elif form in (_DW_FORM_strp, _DW_FORM_line_strp):
                value = string(form, int.from_bytes(data[pos : pos + offset_size], order))
                pos += offset_size
            elif form == _DW_FORM_udata:
                value, pos = read_uleb(data, pos, end)
            elif form == _DW_FORM_block:
                size, pos = read_uleb(data, pos, end)
                value, pos = 0, pos + size
            elif form in _FORM_SIZES:
                value = int.from_bytes(data[pos : pos + _FORM_SIZES[form]], order)
                pos += _FORM_SIZES[form]
            else:
                raise ElfError(f"line table entry of form {form:#x}", pos, section=_SECTION)
            if kind == _DW_LNCT_path and isinstance(value, str):
                name = value
            elif kind == _DW_LNCT_directory_index and isinstance(value, int):
                directory = value
        if pos > end:
            raise IndexError(pos)
        out.append((name, directory))
    return out, pos


class _Out:
    """Rows appended to typed arrays (8 + 8 + 8 + 1 + 1 bytes a row)."""

    def __init__(self) -> None:
        self.addresses = array("Q")
        self.files = array("Q")
        self.lines = array("Q")
        self.ends = array("B")
        self.stmts = array("B")

    def row(self, address: int, file: int, line: int, end: bool, stmt: bool) -> None:
        self.addresses.append(address & _MASK)
        self.files.append(file)
        self.lines.append(line & _MASK)
        self.ends.append(end)
        self.stmts.append(stmt)

    def rows(self, addresses: np.ndarray, file: int, lines: np.ndarray, stmt: bool) -> None:
        import numpy as np

        self.addresses.frombytes(addresses.tobytes())
        self.files.frombytes(np.full(len(addresses), file, dtype=np.uint64).tobytes())
        self.lines.frombytes(lines.tobytes())
        self.ends.frombytes(bytes(len(addresses)))
        self.stmts.frombytes(bytes([stmt]) * len(addresses))

    def done(self, defined: list[tuple[bytes, int]]) -> LineRows:
        import numpy as np

        return LineRows(
            np.frombuffer(self.addresses, dtype=np.uint64),
            np.frombuffer(self.files, dtype=np.uint64),
            np.frombuffer(self.lines, dtype=np.uint64).view(np.int64),
            np.frombuffer(self.ends, dtype=np.bool_),
            np.frombuffer(self.stmts, dtype=np.bool_),
            defined,
        )


def line_rows(program: bytes, header: LineProgramHeader, first_file: int = 1) -> LineRows:
    """The rows of the line program ``program`` (its bytes after the header), long runs of
    special opcodes decoded with numpy; ElfError when it is malformed.  ``first_file``: the
    file register at the start of each sequence (1, as DWARF says; BFD starts DWARF 5
    sequences at file 0).

    The state machine of DWARF 5 6.2.5.  Over 80 lines: one loop over the opcodes, each
    branch the few lines its opcode's rule takes (6.2.5.1-6.2.5.3), which read best together."""
    import numpy as np

    if header.line_range == 0:
        raise ElfError("line program with line_range 0", section=_SECTION)
    base, line_range, line_base = header.opcode_base, header.line_range, header.line_base
    min_length = header.minimum_instruction_length
    max_ops = header.maximum_operations_per_instruction or 1
    order: Literal["big", "little"] = "big" if header.big_endian else "little"
    out = _Out()
    defined: list[tuple[bytes, int]] = []
    address, op_index, file, line = 0, 0, first_file, 1
    size = len(program)
    # Where each long run of special opcodes ends: at the next byte below opcode_base (found
    # for the whole program at the first long run).
    others: np.ndarray | None = None
    # Special opcode N moves the address and the line by these (6.2.5.1).
    address_steps = [(n - base) // line_range * min_length for n in range(256)]
    line_steps = [line_base + (n - base) % line_range for n in range(256)]
    add_address, add_file = out.addresses.append, out.files.append
    add_line, add_end, add_stmt = out.lines.append, out.ends.append, out.stmts.append
    stmt = header.default_is_stmt

    def advance(operations: int) -> None:
        nonlocal address, op_index
        if max_ops == 1:
            address += min_length * operations
        else:  # VLIW (6.2.5.1): the operation pointer moves through instruction bundles
            address += min_length * ((op_index + operations) // max_ops)
            op_index = (op_index + operations) % max_ops

    pos = 0
    try:
        while pos < size:
            opcode = program[pos]
            if opcode >= base:
                # A run of special opcodes: each one byte, no operands.  Long runs at once.
                run_end = pos + 1
                if max_ops == 1 and (run_end == size or program[run_end] < base):
                    address += address_steps[opcode]  # alone (most are): from the tables
                    line += line_steps[opcode]
                    add_address(address & _MASK)
                    add_file(file)
                    add_line(line & _MASK)
                    add_end(0)
                    add_stmt(stmt)
                    pos = run_end
                    continue
                if max_ops == 1:
                    while run_end < size and run_end - pos < _RUN and program[run_end] >= base:
                        run_end += 1
                    if run_end - pos == _RUN:
                        if others is None:
                            bytes_ = np.frombuffer(program, dtype=np.uint8)
                            others = np.flatnonzero(bytes_ < base)
                        run_end = _run_end(others, pos, size)
                        run = np.frombuffer(program, np.uint8, run_end - pos, pos)
                        codes = run.astype(np.int64) - base
                        steps = (codes // line_range * min_length).astype(np.uint64)
                        addresses = np.cumsum(steps, dtype=np.uint64) + np.uint64(address & _MASK)
                        moves = (line_base + codes % line_range).astype(np.uint64)
                        lines = np.cumsum(moves, dtype=np.uint64) + np.uint64(line & _MASK)
                        out.rows(addresses, file, lines, stmt)
                        address, line = int(addresses[-1]), int(lines[-1])
                        pos = run_end
                        continue
                if max_ops == 1:  # each special opcode's steps, from tables
                    for special in program[pos:run_end]:
                        address += address_steps[special]
                        line += line_steps[special]
                        add_address(address & _MASK)
                        add_file(file)
                        add_line(line & _MASK)
                        add_end(0)
                        add_stmt(stmt)
                    pos = run_end
                    continue
                for special in program[pos:run_end]:
                    adjusted = special - base
                    advance(adjusted // line_range)
                    line += line_base + adjusted % line_range
                    out.row(address, file, line, False, stmt)
                pos = run_end
                continue
            pos += 1
            if opcode == 0:  # extended: ULEB length, then the sub-opcode and its operands
                length, pos = read_uleb(program, pos, size)
                end = pos + length
                if not length or end > size:
                    raise ElfError(f"extended opcode of {length} bytes", pos, section=_SECTION)
                extended = program[pos]
                if extended == DW_LNE_end_sequence:
                    out.row(address, file, line, True, stmt)
                    address, op_index, file, line = 0, 0, first_file, 1
                    stmt = header.default_is_stmt
                elif extended == DW_LNE_set_address:
                    if pos + 1 + header.address_size > end:
                        raise ElfError("DW_LNE_set_address too short", pos, section=_SECTION)
                    operand = program[pos + 1 : pos + 1 + header.address_size]
                    address, op_index = int.from_bytes(operand, order), 0
                elif extended == DW_LNE_define_file:
                    name_end = program.find(b"\0", pos + 1, end)
                    if name_end < 0:
                        raise ElfError("DW_LNE_define_file without a name", pos,
                                       section=_SECTION)
                    directory, _ = read_uleb(program, name_end + 1, end)
                    defined.append((program[pos + 1 : name_end], directory))
                pos = end  # DW_LNE_set_discriminator and unknown ones: skipped
            elif opcode == DW_LNS_set_column:  # the commonest: one ULEB, mostly one byte
                if program[pos] < 0x80:
                    pos += 1
                else:
                    _, pos = read_uleb(program, pos, size)
            elif opcode == DW_LNS_negate_stmt:
                stmt = not stmt
            elif opcode == DW_LNS_copy:
                out.row(address, file, line, False, stmt)
            elif opcode == DW_LNS_advance_pc:
                operations, pos = read_uleb(program, pos, size)
                advance(operations)
            elif opcode == DW_LNS_advance_line:
                delta, pos = read_sleb(program, pos, size)
                line += delta
            elif opcode == DW_LNS_set_file:
                file, pos = read_uleb(program, pos, size)
            elif opcode == DW_LNS_const_add_pc:
                advance((255 - base) // line_range)
            elif opcode == DW_LNS_fixed_advance_pc:
                if pos + 2 > size:
                    raise ElfError("DW_LNS_fixed_advance_pc too short", pos, section=_SECTION)
                address += int.from_bytes(program[pos : pos + 2], order)
                op_index = 0
                pos += 2
            else:
                # DW_LNS_set_column, set_isa and the flag setters; an unknown opcode has as
                # many ULEB operands as standard_opcode_lengths says (6.2.5.2).
                count = _OPERANDS.get(opcode)
                if count is None:
                    lengths = header.standard_opcode_lengths
                    count = lengths[opcode - 1] if opcode - 1 < len(lengths) else 0
                for _ in range(count):
                    _, pos = read_uleb(program, pos, size)
    except IndexError:  # a LEB128 number runs past the end of the program
        raise ElfError("line program runs past its end", pos, section=_SECTION) from None
    return out.done(defined)


def read_uleb(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of an unsigned LEB128 at ``pos`` (DWARF 5 7.6); IndexError when
    it runs past ``end``.  (``pysframe.generate.cfi`` has its own, with its CFI errors; the
    layers keep ELF and DWARF reading below generation.)"""
    byte = data[pos] if pos < end else _past(pos)
    if byte < 0x80:  # most operands: one byte
        return byte, pos + 1
    result, shift = 0, 0
    while True:
        byte = data[pos] if pos < end else _past(pos)
        pos += 1
        if shift < 64:  # bits past 64 are dropped (a long run of 0x80 costs its bytes only)
            result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result & _MASK, pos


def read_sleb(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of a signed LEB128 at ``pos`` (DWARF 5 7.6)."""
    result, shift = 0, 0
    while True:
        byte = data[pos] if pos < end else _past(pos)
        pos += 1
        if shift < 64:
            result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                result -= 1 << min(shift, 64)
            return result, pos


def _past(pos: int) -> int:
    raise IndexError(pos)


def _run_end(others: np.ndarray, pos: int, size: int) -> int:
    """Where the run of special opcodes starting at ``pos`` ends (the next other byte)."""
    import numpy as np

    following = int(np.searchsorted(others, pos))
    return int(others[following]) if following < len(others) else size


__all__ = [
    "LineProgram",
    "LineProgramHeader",
    "LineRows",
    "line_rows",
    "read_line_program",
]
