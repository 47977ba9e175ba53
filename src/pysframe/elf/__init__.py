"""ELF files: the only package that parses or writes ELF (and the only one importing pyelftools).

``layout`` declares the ELF layouts and numbers; ``image`` reads files (sections, segments,
notes, symbols), ``relocation`` applies an object's relocations, ``sframe`` finds and loads a
file's SFrame section, ``inject`` writes a copy carrying one."""
