"""Where ``pysframe verify`` (and ``lookup``, in objects) puts a file's code, and what it calls
it.

A linked file's sections are at their addresses.  A relocatable object's sections all sit at
address 0; :class:`Placement` lays them out one after the other
(:func:`pysframe.elf.relocation.object_layout`) and relocates ``.eh_frame``, the SFrame
section and the symbols for that layout, so that each function has an address of its own.

Functions are named by :class:`Namer`: code in a linker-made PLT section by the section's
name, other code with the symbol gdb would give the address (:mod:`pysframe.elf.symbols`).
"""

from __future__ import annotations

from ..elf.reader import ElfReader, ElfSection
from ..elf.relocation import object_layout, relocated_at
from ..elf.symbols import FunctionSymbols, read_function_symbols
from ..errors import SFrameError
from ..format.merge import with_pcrel_starts


class Placement:
    """Addresses of an image: a relocatable object's sections laid out, a linked file's as
    they are."""

    def __init__(self, image: ElfReader) -> None:
        self.image = image
        self.layout = object_layout(image) if image.is_relocatable else None

    def address(self, index: int, address: int) -> int:
        """The address of section ``index`` whose header says ``address``."""
        return address if self.layout is None else self.layout.get(index, 0)

    def contents(self, section: ElfSection, data: bytes | None = None) -> bytes:
        """The contents of ``section`` (``data`` if given), relocated for the layout."""
        if data is None:
            data = section.data()
        if self.layout is None:
            return data
        return relocated_at(self.image, section, data, self.layout)

    def sframe(self, section: ElfSection, stored: bytes) -> bytes:
        """An SFrame section's bytes as placed: in an object, relocated for the layout, with
        its function starts read PC-relative
        (:func:`pysframe.format.merge.with_pcrel_starts`)."""
        if self.layout is None:
            return stored
        return with_pcrel_starts(self.contents(section, stored))


class Namer:
    """The function at an address, named as gdb names it (read on first use), or the
    linker-made section it is in; ``plt`` lists those sections as (start, end, name)."""

    def __init__(
        self, image: ElfReader, placement: Placement, plt: list[tuple[int, int, str]]
    ) -> None:
        self.image = image
        self.placement = placement
        self.plt = plt
        self._symbols: FunctionSymbols | None = None

    def __call__(self, address: int) -> str:
        # Linker-made code has no symbols of its own: name its section.
        section = next((name for lo, hi, name in self.plt if lo <= address < hi), None)
        if section is not None:
            return section
        if self._symbols is None:
            self._symbols = self._read()
        found = self._symbols.find(address)
        return "" if found is None else found[0]

    def _read(self) -> FunctionSymbols:
        """The file's function symbols (.symtab, else .dynsym), placed; none when they cannot
        be read (names are a courtesy of the report)."""
        layout = self.placement.layout
        records = []
        try:
            for table in (".symtab", ".dynsym"):
                records = read_function_symbols(self.image, table, layout)
                if records:
                    break
        except SFrameError:
            records = []
        return FunctionSymbols(records)


__all__ = ["Namer", "Placement"]
