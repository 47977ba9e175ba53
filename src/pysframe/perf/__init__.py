"""perf.data as ``perf record`` writes it: a bulk, chunked reader.

Following the kernel's ``tools/perf/Documentation/perf.data-file-format.txt`` and
``include/uapi/linux/perf_event.h``; both byte orders (the magic tells), file mode and pipe
mode (``perf record -o -``).

Opening::

    with PerfData.open("perf.data") as data:      # a file: memory-mapped; "-": standard input
        data.header            # FileHeader: byte order, pipe or file mode, sections
        data.features          # Features: hostname, os_release, version, arch, nrcpus_*,
                               #   cpudesc, cpuid, total_mem, cmdline, build_ids, sample_time...
        data.attrs             # [EventAttr]: type, config, sample_type, sample_regs_user,
                               #   sample_stack_user, sample_id_all, ids, name (EVENT_DESC)

Reading (each call is one pass over the data in file order; a stream can be read once):

* ``data.samples(chunk=4096)`` yields :class:`SampleChunk` objects: numpy columns (``attr``,
  ``misc``, ``pid``, ``tid``, ``time``, ``ip``, ``period``, ``cpu``, ``addr``, ``id``...),
  callchains as ``callchain_offsets`` + ``callchain`` (ragged), user registers as ``regs``
  (n, registers) with ``regs_abi`` beside, user stack copies as ``stack_offset`` /
  ``stack_size`` / ``stack_dyn_size`` into ``chunk.buffer`` (the file's map: no copy);
  ``chunk.stack(i)`` is sample ``i``'s used stack bytes, ``chunk.sample(i)`` the sample as one
  :class:`Sample`.
* ``data.events()`` yields the side-band records: :class:`MmapEvent` (MMAP and MMAP2: prot,
  flags, pgoff, build ID or maj/min/ino), :class:`CommEvent`, :class:`TaskEvent` (FORK,
  EXIT), :class:`LostEvent` (LOST, LOST_SAMPLES), :class:`DeferredCallchainEvent`
  (CALLCHAIN_DEFERRED, Linux 6.19), each with ``offset`` and ``time``.
* ``data.read(chunk)`` yields :class:`Stretch` objects: the events and the sample chunk of
  one stretch of the file, to process the two in file order.

``pysframe.perf.registers.register_layout(arch, mask)`` maps a chunk's register columns to
the DWARF numbers and :class:`~pysframe.unwind.core.Registers` of the unwinder (x86-64,
AArch64, s390x).

Records this reader does not need are stepped over by their size.  Compressed recordings
(``perf record -z``, the COMPRESSED feature: ``data.compressed``) are read decompressed, as if
recorded without ``-z`` (:mod:`~pysframe.perf.compressed`, with the optional ``zstandard``
package, ``pysframe[zstd]``): their records are pieces of one zstd stream, so that they are
read as a stream is, from the start, and the offsets of their records (in errors, events and
stretches) are offsets in the decompressed data; a compressed record that does not decompress,
or would decompress to more than the ring buffer it came from, is an error at its file offset.

Errors: :class:`PerfDataError` (a FormatError) with ``path`` and ``offset``; a file cut short,
or one perf record did not finish (data size 0), is read up to its last whole record and what
happened noted in ``data.problems`` (once).

The modules:

* the reader: :mod:`~pysframe.perf.layout` (every binary layout), :mod:`~pysframe.perf.header`,
  :mod:`~pysframe.perf.attrs`, :mod:`~pysframe.perf.records`, :mod:`~pysframe.perf.samples`,
  :mod:`~pysframe.perf.data`, :mod:`~pysframe.perf.errors`; :mod:`~pysframe.perf.compressed`:
  a compressed recording's data decompressed; :mod:`~pysframe.perf.order`: records in the
  order perf delivers them; :mod:`~pysframe.perf.deferred`: deferred user callchains
  stitched to their samples;
* :mod:`~pysframe.perf.registers`: perf's register numbers per architecture;
* :mod:`~pysframe.perf.modules`, :mod:`~pysframe.perf.spaces`: the file read for each mapped
  module as perf finds it, and each process's address space over the recording;
* :mod:`~pysframe.perf.walk`, :mod:`~pysframe.perf.session`: the samples' stack copies walked
  by the unwinder's batch form, and a recording read through in perf's order;
* :mod:`~pysframe.perf.kernel`, :mod:`~pysframe.perf.symbols`, :mod:`~pysframe.perf.symtab`:
  frames named as perf 6.1 names them (JIT code's from its perf map);
* :mod:`~pysframe.perf.analyze`, :mod:`~pysframe.perf.profile`: a recording made into a profile
  with its walk statistics; :mod:`~pysframe.perf.forked`: the worker processes that read the
  time slices of one recording;
* the writers: :mod:`~pysframe.perf.script`, :mod:`~pysframe.perf.stats`,
  :mod:`~pysframe.perf.report`, :mod:`~pysframe.perf.speedscope`, :mod:`~pysframe.perf.pprof`,
  :mod:`~pysframe.perf.flamegraph`; :mod:`~pysframe.perf.top`, :mod:`~pysframe.perf.callgraph`:
  perf report's table and the call graphs under its rows; :mod:`~pysframe.perf.filters`,
  :mod:`~pysframe.perf.aggregate`: choosing samples and grouping them for the writers.
"""

from __future__ import annotations

from .data import DEFAULT_CHUNK, PerfData, Stretch
from .errors import PerfDataError
from .header import BuildId, EventAttr, Features, FileHeader
from .records import (
    CommEvent,
    DeferredCallchainEvent,
    LostEvent,
    MmapEvent,
    SampleId,
    SideBandEvent,
    TaskEvent,
)
from .samples import Sample, SampleChunk

__all__ = [
    "DEFAULT_CHUNK",
    "BuildId",
    "CommEvent",
    "DeferredCallchainEvent",
    "EventAttr",
    "Features",
    "FileHeader",
    "LostEvent",
    "MmapEvent",
    "PerfData",
    "PerfDataError",
    "Sample",
    "SampleChunk",
    "SampleId",
    "SideBandEvent",
    "Stretch",
    "TaskEvent",
]
