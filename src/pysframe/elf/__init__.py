"""ELF files: the only package that parses or writes ELF (and the only one importing pyelftools).

``layout`` declares the ELF layouts and numbers; ``reader`` reads files with struct alone
(headers, sections, segments, notes) and ``image`` with pyelftools (the same, and DWARF: the
reference ``reader`` is held to); ``symbols`` reads symbol tables, in bulk or for a few
addresses, ``relocation`` applies an object's relocations, ``sframe`` finds and loads a file's
SFrame section, ``inject`` writes a copy carrying one."""
