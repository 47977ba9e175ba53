"""What binutils' ``addr2line -f -i`` prints for an address of an ELF file: the function,
file and line there, then each function it was inlined into, with the call's file and line,
as BFD finds them in the DWARF (bfd/dwarf2.c ``_bfd_dwarf2_find_nearest_line`` and
``_bfd_dwarf2_find_inliner_info``, binutils 2.40).

perf 6.1 built without libbfd asks a spawned ``addr2line -e FILE -i -f`` for the inline
frames of each address it prints (tools/perf/util/srcline.c ``addr2line``); :class:`Addr2Line`
gives the same answers from the same DWARF without a process.  BFD's rules, which are not
gdb's (:mod:`pysframe.elf.dwarf_lines` follows gdb's):

* the compilation unit: the first, in section order, whose own ranges (DW_AT_low_pc,
  DW_AT_high_pc, DW_AT_ranges) hold the address and which finds a line or a function for
  it, then the units without ranges (``_bfd_dwarf2_find_nearest_line_with_alt``); where
  ``.debug_aranges`` lists the units, only those it says hold the address are read (a unit
  without ranges has no code there);
* the function: of every DW_TAG_subprogram, DW_TAG_entry_point and DW_TAG_inlined_subroutine
  of the unit, the one with the smallest range holding the address, the later one on a tie
  (``lookup_address_in_function_table``); a DIE's ranges are merged as they are read where
  one starts at another's end (``arange_add``);
* the line: the unit's line table with its sequences sorted, nested ones dropped and
  overlapping ones cut (``sort_line_sequences``), of rows in a row at one address the last
  (``add_line_info``); the row with the highest address not above the address, unless it
  ends its sequence (``lookup_address_in_line_info_table``);
* the name: DW_AT_linkage_name (or DW_AT_MIPS_linkage_name), else DW_AT_name, found through
  DW_AT_abstract_origin and DW_AT_specification (``find_abstract_instance``); where that name
  is a DW_AT_name of a language whose names are mangled (C++, Rust...: ``mangle_style``), or
  where only a line was found, the name is the ELF symbol's nearest at or below the address
  in its section (``_bfd_elf_find_function``); where DWARF knows nothing, that symbol alone,
  at no line;
* the inline chain: from an inlined function, each enclosing function DIE in turn, at the
  inlined call's DW_AT_call_file and DW_AT_call_line (``scan_unit_for_symbols``).

BFD's answers depend on the questions asked before, and so do these: a function named by
such a DW_AT_name is looked up in the symbols once, and named by its DWARF name from then on
(by the symbol's where the symbol starts at the function); the last symbol found is given
again for an address inside it.  Ask in the order perf asks (each address once, in the
order it first prints them) to get its answers.  :meth:`Addr2Line.answer` says whether an
answer is one that no earlier question could change (``fixed``), and the symbol BFD keeps
after it, so that answers kept from one run serve another whatever it asks
(:class:`pysframe.perf.analyze.KeptAddr2Line`).

Tables are built per compilation unit when an address first falls in it
(:mod:`pysframe.elf.addr2line_tables`): flat lists of numbers and names.
"""

from __future__ import annotations

import bisect
import itertools

from ..dataclass import dataclass
from ..errors import ElfError, SFrameError
from .addr2line_record import Record
from .addr2line_tables import (
    UnitFacts,
    UnitTable,
    arange_add,
    build_table,
    number,
    read_rangelist,
)
from .dwarf_info import (
    DebugSections,
    DW_AT_abstract_origin,
    DW_AT_comp_dir,
    DW_AT_high_pc,
    DW_AT_language,
    DW_AT_linkage_name,
    DW_AT_low_pc,
    DW_AT_MIPS_linkage_name,
    DW_AT_name,
    DW_AT_ranges,
    DW_AT_specification,
    DW_AT_stmt_list,
    DW_FORM_addr,
    DW_FORM_GNU_ref_alt,
    DW_FORM_ref_addr,
    DW_FORM_rnglistx,
    DW_TAG_inlined_subroutine,
    UnitHeader,
    Units,
)
from .dwarf_ranges import Spans, address_ranges
from .layout import SHF_ALLOC
from .reader import ElfReader

#: Languages whose DW_AT_name is the linkage name (bfd/dwarf2.c mangle_style returns 0):
#: C89, C, Cobol74/85, Fortran77, Pascal83, PLI, C99, UPC, C11, Mips_Assembler, Upc,
#: HP_Basic91, HP_IMacro, HP_Assembler.
_UNMANGLED = frozenset({0x1, 0x2, 0x5, 0x6, 0x7, 0x9, 0xF, 0xC, 0x12, 0x1D, 0x8001, 0x8765,
                        0x8004, 0x8006, 0x8007})  # fmt: skip
_MASK = (1 << 64) - 1
#: STT_* and STB_LOCAL, STV_HIDDEN (gABI), for _bfd_elf_maybe_function_sym.
_STT_NOTYPE, _STT_OBJECT, _STT_SECTION, _STT_FILE, _STT_COMMON, _STT_TLS = 0, 1, 3, 4, 5, 6
_STT_RELC, _STT_SRELC = 8, 9
_NOT_FUNCTIONS = frozenset({_STT_SECTION, _STT_OBJECT, _STT_COMMON, _STT_TLS, _STT_RELC,
                            _STT_SRELC})  # fmt: skip
_STB_LOCAL, _STV_HIDDEN = 0, 2


@dataclass(frozen=True, slots=True)
class _Symbol:
    """An ELF symbol as _bfd_elf_find_function looks at it."""

    name: str
    value: int
    size: int
    section: int
    kind: int
    local: bool
    hidden: bool


#: A symbol as _bfd_elf_find_function keeps it for the next question: (section index,
#: name, STT_FILE name, value, end).
KeptSymbol = tuple[int, str, str | None, int, int]


@dataclass(frozen=True, slots=True, eq=False)
class Answer:
    """One answer of :meth:`Addr2Line.answer`: its ``records`` (:meth:`Addr2Line.records`);
    ``fixed``: whether no earlier question could have changed them (no function of the
    answer is named by a DW_AT_name of a mangling language, which BFD renames once it looked
    it up; and where a symbol names it, no other symbol that BFD may keep from an earlier
    question holds the address); ``looked_up``: whether a symbol was looked up, and then
    ``symbol``, the one BFD keeps for the next question (None: none)."""

    records: list[Record]
    fixed: bool
    looked_up: bool
    symbol: KeptSymbol | None


@dataclass(frozen=True, slots=True)
class _FoundSymbol:
    """A symbol _bfd_elf_find_function gives: its name, the STT_FILE name it gives with it,
    and where it starts and ends (its size, at least 1)."""

    name: str
    file: str | None
    value: int
    end: int


class Addr2Line:
    """addr2line's answers for the addresses of one ELF file (link-time addresses, as
    ``objdump`` prints them).  Keeps the file open: :meth:`close` it.  ``problems``: a line
    for each unit that could not be read (its addresses get no answer from it, as BFD's)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[str] = []
        self._reader = ElfReader.open(path)
        try:
            self._sections = DebugSections(self._reader)
            self._alloc = [
                (section.address, section.address + section.size, section.index)
                for section in self._reader.sections()
                if section.flags & SHF_ALLOC
            ]
            self._units = Units(self._sections)
            #: Units read so far, by offset (None: not a compilation unit, or unreadable).
            self._facts: dict[int, UnitFacts | None] = {}
            #: ``.debug_aranges`` (value: the unit's offset), once read; None without it.
            self._aranges: Spans | None = None
            self._aranges_read = False
            self._symbols: dict[int, tuple[list[int], list[_FoundSymbol], list[int]]] | None = None
            #: The last symbol _bfd_elf_find_function found, with its section.
            self._last_symbol: tuple[int, _FoundSymbol] | None = None
            #: How many times _bfd_elf_find_function ran.
            self._lookups = 0
        except SFrameError:
            self._reader.close()
            raise

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> Addr2Line:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the answer -------------------------------------------------------------------------

    def records(self, address: int) -> list[Record]:
        """What ``addr2line -f -i`` prints for ``address``: the innermost function, file and
        line first, then each function it was inlined into; empty where it prints ``??`` and
        ``??:0`` (nothing known), and where the DWARF it needs cannot be read (a line in
        :attr:`problems` says why)."""
        return self.answer(address).records

    def answer(self, address: int) -> Answer:
        """:meth:`records` for ``address``, with what the questions before could change of
        it and what it leaves for the next (:class:`Answer`)."""
        lookups, fixed = self._lookups, True
        records: list[Record] = []
        try:
            for low, high, section in self._alloc:  # find_address_in_section, header order
                if low <= address < high:
                    records, alone = self._nearest(address, section)
                    fixed = fixed and alone
                    if records:
                        break
        except (ElfError, IndexError, ValueError) as error:
            why = error.message if isinstance(error, ElfError) else "runs past its section"
            line = f"{self.path}: DWARF at {address:#x}: {why}"
            if line not in self.problems:
                self.problems.append(line)
            records, fixed = [], False
        last = self._last_symbol
        symbol = None if last is None else (last[0], last[1].name, last[1].file,
                                            last[1].value, last[1].end)  # fmt: skip
        return Answer(records, fixed, self._lookups != lookups, symbol)

    def remember(self, symbol: KeptSymbol | None) -> None:
        """Take ``symbol`` as the one _bfd_elf_find_function found last (an answer given
        from elsewhere that looked it up: :attr:`Answer.symbol`)."""
        self._last_symbol = None if symbol is None else (
            symbol[0], _FoundSymbol(symbol[1], symbol[2], symbol[3], symbol[4])
        )  # fmt: skip

    def _nearest(self, address: int, section: int) -> tuple[list[Record], bool]:
        """_bfd_dwarf2_find_nearest_line for ``address`` in ``section``, then the inliner
        chain (empty when not found), and whether no earlier question could change that
        (:attr:`Answer.fixed`)."""
        table, function, line = self._dwarf(address)
        name: str | None = None
        is_linkage = False
        if table is not None and function >= 0:
            name, is_linkage = self._name(table, function)
        file = None if table is None or line is None else table.file_name(line[0])
        number = 0 if line is None else line[1]
        found = table is not None
        if not is_linkage:  # no function, or one named by a DW_AT_name of a mangling language
            symbol = self._find_function(address, section)
            if symbol is not None:
                name = symbol.name
                file = symbol.file if file is None else file
                found = True
            if table is not None and function >= 0:
                # BFD looks the function up in the symbols once: later answers name it by
                # its DWARF name, or by this symbol's where the symbol starts at its first
                # range.
                kept = table.names[function][0]
                if symbol is not None and symbol.value == table.functions[function].ranges[0][0]:
                    kept = symbol.name
                table.names[function] = (kept, True)
                table.looked_up.add(function)
        if table is None or function < 0:  # named by a symbol, if at all
            fixed = not self._shadowed(address, section)
        else:  # its functions' names: those BFD renames change with the questions
            fixed = function not in table.looked_up
        if not found:
            return [], fixed
        records = [Record(name, file, number)]
        if table is not None and function >= 0:
            current = table.functions[function]
            if current.tag == DW_TAG_inlined_subroutine:
                while current.caller >= 0:
                    caller_name, linkage = self._name(table, current.caller)
                    fixed = fixed and linkage and current.caller not in table.looked_up
                    records.append(Record(caller_name, table.file_name(current.call_file),
                                          current.call_line))  # fmt: skip
                    current = table.functions[current.caller]
        return records, fixed

    def _dwarf(self, address: int) -> tuple[UnitTable | None, int, tuple[int, int] | None]:
        """(unit table, function index or -1, (file, line) or None) of the first unit that
        knows ``address``; no table when none does."""
        for unit in self._candidates(address):
            table = self._table(unit)
            if not isinstance(table, UnitTable):
                continue
            function = table.function_at(address)
            line = table.line_at(address)
            if function >= 0 or line is not None:
                return table, function, line
        return None, -1, None

    def _candidates(self, address: int) -> list[UnitFacts]:
        """The units BFD looks for ``address`` in, in order: those whose own ranges hold it,
        then those without ranges.  Where ``.debug_aranges`` says which units hold it, only
        those are read (a unit of code without ranges does not occur there)."""
        headers = self._unit_headers()
        aranges = self._address_ranges()
        if aranges:
            offsets = sorted({span[2] for span in aranges.holding(address)})
            chosen = [self._unit_of(offset) for offset in offsets]
            return [
                unit for unit in chosen
                if unit is not None and any(low <= address < high for low, high in unit.ranges)
            ]  # fmt: skip
        units = [unit for unit in map(self._unit, headers) if unit is not None]
        return [
            unit for unit in units if any(low <= address < high for low, high in unit.ranges)
        ] + [unit for unit in units if not unit.ranges]

    # -- units -------------------------------------------------------------------------------

    def _unit_headers(self) -> list[UnitHeader]:
        """Every unit's header, up to the first that does not fit (a line in problems)."""
        headers = self._units.headers
        if self._units.error is not None:
            line = str(self._units.error.at(path=self.path))
            if line not in self.problems:
                self.problems.append(line)
        return headers

    def _address_ranges(self) -> Spans | None:
        """The ranges ``.debug_aranges`` gives the units, once read (None without any)."""
        if not self._aranges_read:
            self._aranges_read = True
            starts = {header.offset for header in self._unit_headers()}
            try:
                listed = address_ranges(self._sections.get(".debug_aranges"),
                                        self._sections.little)  # fmt: skip
            except ElfError as error:
                self.problems.append(str(error.at(path=self.path)))
                listed = []
            spans = [span for span in listed if span[2] in starts]
            self._aranges = Spans(spans) if spans else None
        return self._aranges

    def _unit(self, header: UnitHeader) -> UnitFacts | None:
        """The unit's own DIE (parse_comp_unit), read once; None for a unit that is no
        compilation unit or cannot be read."""
        if header.offset not in self._facts:
            self._facts[header.offset] = None
            try:
                self._facts[header.offset] = self._read_unit(header)
            except (ElfError, IndexError) as error:
                self._problem(header, error)
        return self._facts[header.offset]

    def _problem(self, header: UnitHeader, error: Exception) -> None:
        why = error.message if isinstance(error, ElfError) else "runs past its section"
        self.problems.append(f"{self.path}: .debug_info: unit at {header.offset:#x}: {why}")

    def _read_unit(self, header: UnitHeader) -> UnitFacts | None:
        if header.unit_type not in (0, 1, 3, 4):  # compile, partial, skeleton (or pre-5)
            return None
        reader = self._units.reader(header)
        abbrev, values = reader.unit_die()
        if abbrev is None:
            return None
        ranges: list[list[int]] = []
        low = number(values.get(DW_AT_low_pc))
        base = low or 0
        found = values.get(DW_AT_ranges)
        if found is not None and found[0] != DW_FORM_rnglistx:  # BFD's is_int_form
            read_rangelist(reader, base, number(found) or 0, ranges)
        high_value = values.get(DW_AT_high_pc)
        if high_value is not None and isinstance(high_value[1], int) and high_value[1]:
            high = high_value[1] + (base if high_value[0] != DW_FORM_addr else 0)
            arange_add(ranges, base, high & _MASK)
        comp_dir = values.get(DW_AT_comp_dir)
        directory = comp_dir[1] if comp_dir is not None and isinstance(comp_dir[1], str) else None
        if directory is not None:  # parse_comp_unit drops a "host:" before "./" or "/"
            colon = directory.find(":")
            if colon > 0 and directory[colon - 1] == "." and directory[colon + 1 :][:1] == "/":
                directory = directory[colon + 1 :]
        language = number(values.get(DW_AT_language)) or 0
        stmt = number(values.get(DW_AT_stmt_list))
        return UnitFacts(header, language, ranges, base, directory, stmt)

    def _table(self, unit: UnitFacts) -> UnitTable | bool:
        """The unit's table, built on first use (comp_unit_maybe_decode_line_info): False
        when it has no line program or cannot be read."""
        if unit.table is None:
            unit.table = False
            if unit.stmt_list is None:
                return False
            try:
                unit.table = build_table(self._units.reader(unit.header), unit)
            except (ElfError, IndexError, ValueError) as error:
                self._problem(unit.header, error)
        return unit.table

    # -- names -------------------------------------------------------------------------------

    def _name(self, table: UnitTable, index: int) -> tuple[str | None, bool]:
        """(name, is a linkage name) of function ``index`` (the second pass of
        scan_unit_for_symbols)."""
        found = table.names.get(index)
        if found is None:
            name: str | None = None
            linkage = False
            function = table.functions[index]
            unit = self._unit_of(function.offset)
            for attribute, form, value in function.naming:
                if attribute in (DW_AT_abstract_origin, DW_AT_specification):
                    name, linkage = self._abstract(form, value, 0, name, linkage)
                elif attribute == DW_AT_name:
                    if name is None and isinstance(value, str):
                        name = value
                        linkage = linkage or (unit is not None and unit.language in _UNMANGLED)
                elif isinstance(value, str):
                    name, linkage = value, True
            found = table.names[index] = (name, linkage)
        return found

    def _abstract(
        self, form: int, target: object, depth: int, name: str | None, linkage: bool
    ) -> tuple[str | None, bool]:
        """find_abstract_instance: ``name`` and ``linkage`` as the DIE ``target`` refers to
        makes them (its DW_AT_name when there is none yet, its linkage name, and those of
        its DW_AT_specification)."""
        if not isinstance(target, int) or depth >= 100 or form == DW_FORM_GNU_ref_alt:
            return name, linkage
        if form == DW_FORM_ref_addr and target == 0:
            return name, linkage
        unit = self._unit_of(target)
        if unit is None:
            return name, linkage
        abbrev, values, _ = self._units.reader(unit.header).attributes(target)
        if abbrev is None:
            return name, linkage
        for attribute, (attribute_form, value) in values.items():
            if attribute == DW_AT_name:
                if name is None and isinstance(value, str):
                    name = value
                    linkage = linkage or unit.language in _UNMANGLED
            elif attribute == DW_AT_specification:
                name, linkage = self._abstract(attribute_form, value, depth + 1, name, linkage)
            elif attribute in (DW_AT_linkage_name, DW_AT_MIPS_linkage_name) and isinstance(
                value, str
            ):
                name, linkage = value, True
        return name, linkage

    def _unit_of(self, offset: int) -> UnitFacts | None:
        """The unit that holds ``offset`` of ``.debug_info``, read."""
        self._unit_headers()
        header = self._units.at(offset)
        return None if header is None else self._unit(header)

    # -- symbols -----------------------------------------------------------------------------

    def _find_function(self, address: int, section: int) -> _FoundSymbol | None:
        """_bfd_elf_find_function: the symbol at or nearest below ``address`` in ``section``
        (of equals, the larger, then the first), with the name of the STT_FILE symbol before
        it where BFD gives it; None without one.  As BFD, the last one found is kept and
        given again for an address inside it (its size, at least 1) in the same section."""
        self._lookups += 1
        last = self._last_symbol
        if last is not None and last[0] == section and last[1].value <= address < last[1].end:
            return last[1]
        by_section = self._symbols_by_section()
        found = by_section.get(section)
        symbol = None
        if found is not None:
            values, symbols, _ = found
            at = bisect.bisect_right(values, address) - 1
            symbol = symbols[at] if at >= 0 else None
        self._last_symbol = None if symbol is None else (section, symbol)
        return symbol

    def _shadowed(self, address: int, section: int) -> bool:
        """Whether a symbol other than the one _bfd_elf_find_function looks up for
        ``address`` holds it, one that an earlier question could have left kept (the one
        found for a lower value): the answer then depends on the questions before."""
        found = self._symbols_by_section().get(section)
        if found is None:
            return False
        values, _, reach = found
        at = bisect.bisect_right(values, address) - 1
        return at >= 0 and reach[at] > address

    def _symbols_by_section(
        self,
    ) -> dict[int, tuple[list[int], list[_FoundSymbol], list[int]]]:
        """Per section, the symbols _bfd_elf_find_function may take (_bfd_elf_maybe_function_sym
        keeps no section, file, object, TLS or RELC symbol, nor a local hidden STT_NOTYPE one of
        size 0), sorted so that the last at or below an address is its choice: by value, size
        (0 counting as 1), then table order reversed; and for each, the furthest end of the
        symbols it may choose at lower values (the last of each value)."""
        if self._symbols is None:
            eligible: list[tuple[int, int, int, int, str, str | None]] = []
            file: str | None = None
            state = 0  # nothing seen, a symbol seen, a file seen after a symbol
            for index, symbol in enumerate(self._bfd_symbols()):
                if symbol.kind == _STT_FILE:
                    file = symbol.name
                    state = 2 if state == 1 else state
                    continue
                if symbol.kind not in _NOT_FUNCTIONS and not (
                    symbol.size == 0 and symbol.local and symbol.kind == _STT_NOTYPE
                    and symbol.hidden
                ):  # fmt: skip
                    named = file if file is not None and (symbol.local or state != 2) else None
                    eligible.append((symbol.section, symbol.value, symbol.size or 1, -index,
                                     symbol.name, named))  # fmt: skip
                state = state or 1
            eligible.sort()
            self._symbols = {}
            for section, group in itertools.groupby(eligible, key=lambda entry: entry[0]):
                entries = list(group)
                reach: list[int] = []
                furthest = 0
                for _, same in itertools.groupby(entries, key=lambda entry: entry[1]):
                    chosen = list(same)  # of one value: the last is chosen
                    reach += [furthest] * len(chosen)
                    furthest = max(furthest, chosen[-1][1] + chosen[-1][2])
                self._symbols[section] = (
                    [entry[1] for entry in entries],
                    [_FoundSymbol(entry[4], entry[5], entry[1], entry[1] + entry[2])
                     for entry in entries],
                    reach,
                )  # fmt: skip
        return self._symbols

    def _bfd_symbols(self) -> list[_Symbol]:
        """The symbols addr2line reads (slurp_symtab): ``.symtab``, else ``.dynsym``, in table
        order without the first entry."""
        import numpy as np

        from .symbols import read_symbol_entries

        for name in (".symtab", ".dynsym"):
            try:
                entries = read_symbol_entries(self._reader, name)
            except ElfError as error:
                self.problems.append(str(error))
                entries = None
            if entries is None or len(entries) <= 1:
                continue
            names = entries.names(np.arange(len(entries)))
            return [
                _Symbol(names[i], int(entries.values[i]), int(entries.sizes[i]),
                        int(entries.shndx[i]), int(entries.types[i]),
                        int(entries.binds[i]) == _STB_LOCAL,
                        int(entries.visibility[i]) == _STV_HIDDEN)
                for i in range(1, len(entries))
            ]  # fmt: skip
        return []


__all__ = ["Addr2Line", "Answer", "KeptSymbol", "Record", "UnitTable"]
