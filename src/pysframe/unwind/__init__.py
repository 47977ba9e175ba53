"""Stack unwinding: the sans-IO unwinder core, and beside it the adapters that feed it
(live processes through ptrace, core files, module discovery)."""

#: Frames per thread a walk gives at most, unless told otherwise.  Declared here, where the
#: command line reads it without importing the unwinder.
DEFAULT_MAX_FRAMES = 4096
