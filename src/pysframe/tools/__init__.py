"""Tools built on the format core, one module per command's work (the command line in
:mod:`pysframe.cli` only parses arguments and prints what these return):

* :mod:`~pysframe.tools.dump`: the text of ``objdump``/``readelf --sframe``, and the same
  content as JSON;
* :mod:`~pysframe.tools.info`: a short summary of a file's section;
* :mod:`~pysframe.tools.lookup`: ``pysframe lookup``, PCs or symbols of a file resolved and
  looked up, and the answers as text and JSON;
* :mod:`~pysframe.tools.validate`: validation end to end, of raw bytes and of a section
  against its ELF file;
* :mod:`~pysframe.tools.verify`: SFrame checked against the file's CFI at every PC, with
  :mod:`~pysframe.tools.verify_compare` (the comparison), :mod:`~pysframe.tools.verify_place`
  (where a file's code is), :mod:`~pysframe.tools.verify_rules` (which differences matter),
  :mod:`~pysframe.tools.verify_report` (the reports as values, and their text, CSV and
  JSON);
* :mod:`~pysframe.tools.compact`: compacting and repairing a file's section;
* :mod:`~pysframe.tools.stats`: size statistics, their tables and plots;
* :mod:`~pysframe.tools.fuzz`, :mod:`~pysframe.tools.fuzz_targets`: the fuzzing harness;
* :mod:`~pysframe.tools.files`, :mod:`~pysframe.tools.parallel`: the ELF files of a tree, and
  one per-file function run over many files (in this process, a pool, or Dask).
"""

#: How compaction may share FRE blocks (:mod:`pysframe.tools.compact`).  Declared here, where
#: the command line reads it without importing the compaction.
SHARE_CHOICES = ("auto", "always", "never")
