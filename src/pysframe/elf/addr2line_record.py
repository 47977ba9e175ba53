"""One answer of binutils' ``addr2line -f -i`` (:mod:`pysframe.elf.addr2line`), apart from
the DWARF reader that finds it: the answers a report keeps in the cache are read back without
importing that reader."""

from __future__ import annotations

from ..dataclass import dataclass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Record:
    """One answer of addr2line: a function (None: ``??``), a file (None: ``??``) and a line
    (0: ``?``)."""

    function: str | None
    file: str | None
    line: int

    def text(self) -> str:
        """The two lines addr2line prints for it (without a discriminator)."""
        where = "??" if self.file is None else self.file
        return f"{self.function or '??'}\n{where}:{self.line or '?'}\n"


__all__ = ["Record"]
