"""The SFrame format itself: constants, binary layouts, the value model, the rules FRE data
words encode, decoding, encoding, sections, lookups and building.  Knows nothing of ELF.

The public names are re-exported by :mod:`pysframe`.
"""
