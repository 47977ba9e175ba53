"""Tools built on the format core: the objdump/readelf text dump, validation, statistics
and the fuzz harness."""
