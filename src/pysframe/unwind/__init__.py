"""Stack unwinding: the sans-IO unwinder core, and beside it the adapters that feed it
(live processes through ptrace, core files, module discovery)."""

#: Frames per thread a walk gives at most, unless told otherwise.  Declared here, where the
#: command line reads it without importing the unwinder.
DEFAULT_MAX_FRAMES = 4096
#: Seconds an exchange with a GDB remote stub may take, by default (:mod:`pysframe.unwind.rsp`;
#: here for the command line, as above).
EXCHANGE_TIMEOUT = 30.0
#: Seconds all exchanges of a connection may take, by default (:mod:`pysframe.unwind.rsp`).
TIME_LIMIT = 120.0
