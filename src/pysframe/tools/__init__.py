"""Tools built on the format core: the objdump/readelf text dump, validation, statistics
and the fuzz harness."""

#: How compaction may share FRE blocks (:mod:`pysframe.tools.compact`).  Declared here, where
#: the command line reads it without importing the compaction.
SHARE_CHOICES = ("auto", "always", "never")
