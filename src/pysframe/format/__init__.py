"""The SFrame format itself.  Knows nothing of ELF.

* :mod:`~pysframe.format.constants`: the format's numbers, as enums with the spec's names;
* :mod:`~pysframe.format.layout`: every binary layout (structs, dtypes, sizes, bit fields),
  declared once;
* :mod:`~pysframe.format.model`: the values (header, functions, rows, rules);
* :mod:`~pysframe.format.rules`: what FRE data words mean, in both directions;
* :mod:`~pysframe.format.walk`: stepping through FREs, one function or a whole section;
* :mod:`~pysframe.format.decode`, :mod:`~pysframe.format.encode`: reading and writing sections;
* :mod:`~pysframe.format.view`: what whole-section helpers read a section through (bytes,
  header, the FDE table as columns), so that they need not import the section type;
* :mod:`~pysframe.format.section`: ``SFrameSection``;
* :mod:`~pysframe.format.lookup`: ``SectionLookup``, the function and row at one PC or at
  many, with libsframe's semantics (what sections and the unwinders look PCs up with), and
  the bytes a section's functions cover;
* :mod:`~pysframe.format.builder`, :mod:`~pysframe.format.convert`: building sections in code,
  changing their version or byte order;
* :mod:`~pysframe.format.compact`, :mod:`~pysframe.format.merge`: compaction, and sections a
  linker concatenated, found and merged;
* :mod:`~pysframe.format.findings`, :mod:`~pysframe.format.validate`: the format's, GNU ld's
  and the kernel's rules.

The public names are re-exported by :mod:`pysframe`.
"""
