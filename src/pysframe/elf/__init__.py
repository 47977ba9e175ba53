"""ELF files: the only package that parses or writes ELF.

Each module's job:

* ``layout``: the ELF numbers and every layout read or written (headers, symbols,
  relocations, notes, the dynamic linker's structures), declared once;
* ``reader``: :class:`~pysframe.elf.reader.ElfReader`, the one reader of ELF files (headers,
  section and program header tables, section contents, notes, build ID), with struct alone;
* ``symbols``: symbol tables, the one reader of them; function symbols, and the one gdb
  names an address with;
* ``plt``: ``NAME@plt`` for PLT entries, as BFD's synthetic symbols;
* ``relocation``: an object's relocations, read and applied (with every section at 0, as
  objdump 2.47, or laid out one after the other);
* ``sframe``: which section is a file's SFrame section, and how it is loaded;
* ``debuginfo``: separate debug files (build ID, debuglink) and MiniDebugInfo;
* ``dwarf_info``, ``dwarf_ranges``, ``line_program``: the one DWARF reader, from the section
  bytes: the ``.debug_*`` sections, units, abbreviations, DIEs and their trees; the addresses
  units and DIEs cover; line-number programs decoded to flat arrays;
* ``dwarf_lines``: source lines and inlined functions at an address by gdb's rules;
* ``addr2line``, ``addr2line_tables``, ``addr2line_record``: what binutils' ``addr2line -f
  -i`` prints, by BFD's rules, and its answer (apart: kept answers are read without the
  reader);
* ``inject``, ``rewrite``: writing a copy that carries a new ``.sframe``, and a new SFrame
  section over the old one in place.
"""
