"""The default limits of a walk and of a GDB remote exchange, declared where the command line
reads them without importing the unwinder."""

#: Frames per thread a walk gives at most, unless told otherwise.
DEFAULT_MAX_FRAMES = 4096
#: Seconds an exchange with a GDB remote stub may take, by default (:mod:`pysframe.unwind.rsp`).
EXCHANGE_TIMEOUT = 30.0
#: Seconds all exchanges of a connection may take, by default (:mod:`pysframe.unwind.rsp`).
TIME_LIMIT = 120.0

__all__ = ["DEFAULT_MAX_FRAMES", "EXCHANGE_TIMEOUT", "TIME_LIMIT"]
