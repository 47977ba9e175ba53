"""ELF files: the only package that parses or writes ELF.  Images (sections, segments, notes,
symbols, relocations), finding and loading a file's SFrame section, and injection."""
