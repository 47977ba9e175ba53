"""SFrame generated from DWARF CFI: parsing ``.eh_frame``/``.debug_frame``, GNU as 2.47's
translation rules, the bulk numpy path that must match them, PLT rows, and the driver."""
