"""Every binary layout of perf.data pysframe reads, declared once, and the numbers it uses.

Sources: the kernel's ``tools/perf/Documentation/perf.data-file-format.txt`` (the file and
pipe headers, the feature sections, the records ``perf record`` adds),
``include/uapi/linux/perf_event.h`` (``struct perf_event_attr``, ``PERF_RECORD_*``,
``PERF_SAMPLE_*``, the sample and ``sample_id`` layouts), ``tools/lib/perf/include/perf/event.h``
(the user record types from 64 up) and ``tools/perf/util/header.c`` (how perf reads them).

Every field is in the byte order of the machine that recorded the file, which the magic tells:
the u64 0x32454c4946524550 ("PERFILE2" when little-endian).  Each record is declared here as
its struct codes and field names; the ``struct.Struct`` and numpy dtype of either byte order
come from that one declaration (:meth:`Record.struct`, :meth:`Record.dtype`).

* File header, 104 bytes: magic, u64 size (of this header), u64 attr_size (one entry of the
  attribute section), three sections (u64 offset, u64 size): attrs, data, event_types, then
  a 256-bit feature bitmap (four u64, bit N = feature N present).
* Pipe header, 16 bytes: magic, u64 size (16).  Attributes and features then come as records.
* Record header, 8 bytes: u32 type, u16 misc, u16 size (of the whole record).
* ``struct perf_event_attr``: read as its own ``size`` says, missing fields zero
  (``read_attr`` in header.c); :data:`ATTR` declares it up to PERF_ATTR_SIZE_VER8.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import field
from enum import IntEnum
from functools import cache
from typing import TYPE_CHECKING, Any

from ..dataclass import dataclass

if TYPE_CHECKING:
    import numpy as np

#: The magic as a little-endian file stores it; a big-endian file stores it reversed.
MAGIC_LITTLE = b"PERFILE2"
MAGIC_BIG = MAGIC_LITTLE[::-1]
#: The version 1 magic (perf before 2.6.36), which pysframe does not read.
MAGIC_V1 = b"PERFFILE"


#: What the reader reads from: a file's memory map, or the bytes of a stream's block.
Buffer = bytes | bytearray | memoryview | mmap.mmap


def byte_order(big_endian: bool) -> str:
    """The struct prefix of a file's byte order."""
    return ">" if big_endian else "<"


@dataclass(frozen=True)
class Record:
    """A packed little structure: struct codes (standard sizes, no padding) and field names."""

    names: tuple[str, ...]
    codes: str
    #: Byte offset of each field.
    at: dict[str, int] = field(init=False, compare=False)
    size: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        offsets, position = {}, 0
        for name, code in zip(self.names, self.fields, strict=True):
            offsets[name] = position
            position += struct.calcsize("<" + code)
        object.__setattr__(self, "at", offsets)
        object.__setattr__(self, "size", position)

    @property
    def fields(self) -> list[str]:
        """The struct code of each field ("24s" for a 24-byte string)."""
        return re.findall(r"\d*[a-zA-Z]", self.codes)

    def struct(self, big_endian: bool) -> struct.Struct:
        return _struct(self.codes, big_endian)

    def dtype(self, big_endian: bool) -> np.dtype[Any]:
        return _dtype(self, big_endian)


@cache
def _struct(codes: str, big_endian: bool) -> struct.Struct:
    return struct.Struct(byte_order(big_endian) + codes)


@cache
def _dtype(record: Record, big_endian: bool) -> np.dtype[Any]:
    """numpy record type of ``record``: struct codes are numpy type codes too ("s" aside)."""
    import numpy as np

    order = byte_order(big_endian)
    return np.dtype({
        "names": list(record.names),
        "formats": [
            f"S{code[:-1]}" if code.endswith("s") else order + code for code in record.fields
        ],
        "offsets": [record.at[name] for name in record.names],
        "itemsize": record.size,
    })


# -- headers (perf.data-file-format.txt) ----------------------------------------------------------

FILE_HEADER = Record(
    ("magic", "size", "attr_size", "attrs_offset", "attrs_size", "data_offset", "data_size",
     "event_types_offset", "event_types_size", "features0", "features1", "features2",
     "features3"),
    "8sQQQQQQQQQQQQ",
)  # fmt: skip
PIPE_HEADER = Record(("magic", "size"), "8sQ")
#: struct perf_file_section: where a section (attrs, data, a feature) lies in the file.
FILE_SECTION = Record(("offset", "size"), "QQ")
#: struct perf_event_header, the start of every record.
RECORD_HEADER = Record(("type", "misc", "size"), "IHH")
#: Bits in the feature bitmap of the file header.
FEATURE_BITS = 256


# -- struct perf_event_attr (include/uapi/linux/perf_event.h) -----------------------------------

ATTR = Record(
    ("type", "size", "config", "sample_period", "sample_type", "read_format", "flags",
     "wakeup_events", "bp_type", "config1", "config2", "branch_sample_type", "sample_regs_user",
     "sample_stack_user", "clockid", "sample_regs_intr", "aux_watermark", "sample_max_stack",
     "reserved_2", "aux_sample_size", "reserved_3", "sig_data", "config3"),
    "IIQQQQQIIQQQQIiQIHHIIQQ",
)  # fmt: skip
#: PERF_ATTR_SIZE_VER0: the smallest attribute a file may hold (up to config1).
ATTR_SIZE_VER0 = 64

#: Bits of the attribute's flag word (the bit fields after read_format; precise_ip takes two),
#: numbered from the first-declared field: a little-endian machine stores field N at bit N of
#: the u64, a big-endian one at bit 63 - N (perf's swap_bitfield in util/session.c reverses
#: them).
ATTR_FLAG_BITS = (
    "disabled", "inherit", "pinned", "exclusive", "exclude_user", "exclude_kernel",
    "exclude_hv", "exclude_idle", "mmap", "comm", "freq", "inherit_stat", "enable_on_exec",
    "task", "watermark", "precise_ip", "precise_ip", "mmap_data", "sample_id_all",
    "exclude_host", "exclude_guest", "exclude_callchain_kernel", "exclude_callchain_user",
    "mmap2", "comm_exec", "use_clockid", "context_switch", "write_backward", "namespaces",
    "ksymbol", "bpf_event", "aux_output", "cgroup", "text_poke", "build_id", "inherit_thread",
    "remove_on_exec", "sigtrap",
    # Linux 6.19 (perf_event.h, "perf: Support deferred user unwind"): ask for the user
    # callchain in a later PERF_RECORD_CALLCHAIN_DEFERRED record, and write those records.
    "defer_callchain", "defer_output",
)  # fmt: skip
FLAG_FREQ = 1 << ATTR_FLAG_BITS.index("freq")
FLAG_SAMPLE_ID_ALL = 1 << ATTR_FLAG_BITS.index("sample_id_all")
FLAG_EXCLUDE_CALLCHAIN_KERNEL = 1 << ATTR_FLAG_BITS.index("exclude_callchain_kernel")
FLAG_EXCLUDE_CALLCHAIN_USER = 1 << ATTR_FLAG_BITS.index("exclude_callchain_user")
FLAG_USE_CLOCKID = 1 << ATTR_FLAG_BITS.index("use_clockid")
FLAG_DEFER_CALLCHAIN = 1 << ATTR_FLAG_BITS.index("defer_callchain")


def reverse_bits64(value: int) -> int:
    """``value`` with its 64 bits in the opposite order (a big-endian attribute's flags)."""
    return int(f"{value:064b}"[::-1], 2)


# -- record types (perf_event.h enum perf_event_type; perf/event.h perf_user_event_type) -------


class RecordType(IntEnum):
    MMAP = 1
    LOST = 2
    COMM = 3
    EXIT = 4
    THROTTLE = 5
    UNTHROTTLE = 6
    FORK = 7
    READ = 8
    SAMPLE = 9
    MMAP2 = 10
    AUX = 11
    ITRACE_START = 12
    LOST_SAMPLES = 13
    SWITCH = 14
    SWITCH_CPU_WIDE = 15
    NAMESPACES = 16
    KSYMBOL = 17
    BPF_EVENT = 18
    CGROUP = 19
    TEXT_POKE = 20
    AUX_OUTPUT_HW_ID = 21
    #: A thread's user callchain, taken when it went back to user space (Linux 6.19).
    CALLCHAIN_DEFERRED = 22
    # Records perf itself writes (PERF_RECORD_USER_TYPE_START = 64).
    HEADER_ATTR = 64
    HEADER_EVENT_TYPE = 65
    HEADER_TRACING_DATA = 66
    HEADER_BUILD_ID = 67
    FINISHED_ROUND = 68
    ID_INDEX = 69
    AUXTRACE_INFO = 70
    AUXTRACE = 71
    AUXTRACE_ERROR = 72
    THREAD_MAP = 73
    CPU_MAP = 74
    STAT_CONFIG = 75
    STAT = 76
    STAT_ROUND = 77
    EVENT_UPDATE = 78
    TIME_CONV = 79
    HEADER_FEATURE = 80
    COMPRESSED = 81
    FINISHED_INIT = 82
    COMPRESSED2 = 83


USER_TYPE_START = 64


def record_type_name(value: int) -> str:
    """``MMAP2``, ``SAMPLE``...; ``type 123`` for a number no record type has."""
    try:
        return RecordType(value).name
    except ValueError:
        return f"type {value}"


# perf_event_header.misc (perf_event.h): the CPU mode in bits 0-2, then per-record flags.
MISC_CPUMODE_MASK = 0x7
MISC_KERNEL, MISC_USER, MISC_HYPERVISOR = 1, 2, 3
MISC_GUEST_KERNEL, MISC_GUEST_USER = 4, 5
#: MMAP/MMAP2: a data (non-executable) mapping.  COMM: the comm changed by an exec.
MISC_MMAP_DATA = MISC_COMM_EXEC = 1 << 13
#: MMAP2: the record holds a build ID instead of maj/min/ino.
MISC_MMAP_BUILD_ID = 1 << 14
#: HEADER_BUILD_ID (perf's event.h): the build ID's size is in the record.
MISC_BUILD_ID_SIZE = 1 << 15


# -- sample layout (perf_event.h "PERF_RECORD_SAMPLE"; kernel/events/core.c perf_output_sample) --


class SampleType:
    """PERF_SAMPLE_* bits of attr.sample_type."""

    IP = 1 << 0
    TID = 1 << 1
    TIME = 1 << 2
    ADDR = 1 << 3
    READ = 1 << 4
    CALLCHAIN = 1 << 5
    ID = 1 << 6
    CPU = 1 << 7
    PERIOD = 1 << 8
    STREAM_ID = 1 << 9
    RAW = 1 << 10
    BRANCH_STACK = 1 << 11
    REGS_USER = 1 << 12
    STACK_USER = 1 << 13
    WEIGHT = 1 << 14
    DATA_SRC = 1 << 15
    IDENTIFIER = 1 << 16
    TRANSACTION = 1 << 17
    REGS_INTR = 1 << 18
    PHYS_ADDR = 1 << 19
    AUX = 1 << 20
    CGROUP = 1 << 21
    DATA_PAGE_SIZE = 1 << 22
    CODE_PAGE_SIZE = 1 << 23
    WEIGHT_STRUCT = 1 << 24
    WEIGHT_TYPE = WEIGHT | WEIGHT_STRUCT
    #: Every bit this reader knows the layout of (a sample with another bit cannot be read).
    KNOWN = (1 << 25) - 1


#: The u64 fields of a sample at fixed places before the variable part, in record order
#: (``{ u32 pid, tid; }`` and ``{ u32 cpu, res; }`` take one u64 each).
SAMPLE_FIXED_FIELDS = (
    ("identifier", SampleType.IDENTIFIER), ("ip", SampleType.IP), ("tid", SampleType.TID),
    ("time", SampleType.TIME), ("addr", SampleType.ADDR), ("id", SampleType.ID),
    ("stream_id", SampleType.STREAM_ID), ("cpu", SampleType.CPU), ("period", SampleType.PERIOD),
)  # fmt: skip
#: The u64 fields of ``struct sample_id``, the trailer of other records when sample_id_all is
#: set, in record order.
SAMPLE_ID_FIELDS = (
    ("tid", SampleType.TID), ("time", SampleType.TIME), ("id", SampleType.ID),
    ("stream_id", SampleType.STREAM_ID), ("cpu", SampleType.CPU),
    ("identifier", SampleType.IDENTIFIER),
)  # fmt: skip
#: The u64 fields after STACK_USER, in record order (REGS_INTR and AUX vary, see samples.py).
SAMPLE_TAIL_WORDS = (
    SampleType.WEIGHT_TYPE, SampleType.DATA_SRC, SampleType.TRANSACTION,
)
SAMPLE_LATE_WORDS = (
    SampleType.PHYS_ADDR, SampleType.CGROUP, SampleType.DATA_PAGE_SIZE,
    SampleType.CODE_PAGE_SIZE,
)
#: Two u32 in one u64 (``pid, tid`` and ``cpu, res``): the first is the low half of the u64 in a
#: little-endian file, the high half in a big-endian one.
U32_PAIR = Record(("first", "second"), "ii")


class ReadFormat:
    """PERF_FORMAT_* bits of attr.read_format (the PERF_SAMPLE_READ layout)."""

    TOTAL_TIME_ENABLED = 1 << 0
    TOTAL_TIME_RUNNING = 1 << 1
    ID = 1 << 2
    GROUP = 1 << 3
    LOST = 1 << 4


#: attr.branch_sample_type bits that change the BRANCH_STACK layout: a u64 hw_idx after nr,
#: and one u64 of counters per entry after the entries.
BRANCH_HW_INDEX = 1 << 17
BRANCH_COUNTERS = 1 << 19
#: One branch entry: u64 from, u64 to, u64 flags.
BRANCH_ENTRY_SIZE = 24

#: PERF_SAMPLE_REGS_ABI_*: the registers' ABI, the first u64 of REGS_USER (NONE: no registers
#: follow, as in a kernel thread's samples).
REGS_ABI_NONE, REGS_ABI_32, REGS_ABI_64 = 0, 1, 2

#: Callchain context markers (enum perf_callchain_context): entries >= PERF_CONTEXT_MAX say
#: whose addresses follow.
CONTEXT_HV = (1 << 64) - 32
CONTEXT_KERNEL = (1 << 64) - 128
CONTEXT_USER = (1 << 64) - 512
#: Linux 6.19: the user part comes later, in a CALLCHAIN_DEFERRED record; the entry after
#: this marker is the cookie that names that record.
CONTEXT_USER_DEFERRED = (1 << 64) - 640
CONTEXT_GUEST = (1 << 64) - 2048
CONTEXT_GUEST_KERNEL = (1 << 64) - 2176
CONTEXT_GUEST_USER = (1 << 64) - 2560
CONTEXT_MAX = (1 << 64) - 4095


# -- side-band records (perf_event.h, after the record header) ----------------------------------

#: MMAP: the mapping, then the NUL-terminated file name (padded to 8 bytes).
MMAP = Record(("pid", "tid", "start", "length", "pgoff"), "iiQQQ")
#: MMAP2 after the MMAP fields: maj, min, ino, ino_generation (or, with
#: MISC_MMAP_BUILD_ID, :data:`MMAP2_BUILD_ID`), then prot and flags, then the file name.
MMAP2 = Record(
    ("pid", "tid", "start", "length", "pgoff", "maj", "min", "ino", "ino_generation", "prot",
     "flags"),
    "iiQQQIIQQII",
)  # fmt: skip
MMAP2_BUILD_ID = Record(("size", "reserved_1", "reserved_2", "build_id"), "BBH20s")
MMAP2_IDENTITY_AT = MMAP2.at["maj"]
COMM = Record(("pid", "tid"), "ii")
#: FORK and EXIT.
TASK = Record(("pid", "ppid", "tid", "ptid", "time"), "iiiiQ")
LOST = Record(("id", "lost"), "QQ")
LOST_SAMPLES = Record(("lost",), "Q")
#: CALLCHAIN_DEFERRED (Linux 6.19 perf_event.h): u64 cookie, u64 nr, then u64 ips[nr] (user
#: addresses, innermost first, no context marker), then the sample_id trailer.
CALLCHAIN_DEFERRED = Record(("cookie", "nr"), "QQ")
#: mmap(2) prot and flags bits (MMAP2 records; asm-generic/mman-common.h).
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_SHARED = 1


# -- records perf writes (perf.data-file-format.txt; perf/event.h) ------------------------------

#: HEADER_BUILD_ID after the record header, and each entry of the BUILD_ID feature:
#: s32 pid, the build ID in 24 bytes (20 used; with MISC_BUILD_ID_SIZE its size in byte 20),
#: then the NUL-terminated file name.
BUILD_ID = Record(("pid", "build_id"), "i24s")
BUILD_ID_MAX = 20
BUILD_ID_SIZE_AT = 20
#: HEADER_FEATURE: u64 feature number, then the feature's section bytes.
FEATURE_RECORD = Record(("feature",), "Q")
#: HEADER_TRACING_DATA: u32 size of the tracing data, which follows the record (8-aligned).
TRACING_DATA = Record(("size",), "I")
#: AUXTRACE: u64 size of the trace data, which follows the record.
AUXTRACE = Record(("size", "offset", "reference", "idx", "tid", "cpu", "reserved"), "QQQIIII")
#: EVENT_UPDATE: u64 type, u64 id, then the payload (for NAME, the event's name).
EVENT_UPDATE = Record(("type", "id"), "QQ")
EVENT_UPDATE_NAME = 2
#: COMPRESSED2: u64 data_size after the header (COMPRESSED has none).
COMPRESSED2 = Record(("data_size",), "Q")

# -- feature sections (perf.data-file-format.txt "Flags section"; header.c write_*) -------------


class Feature(IntEnum):
    TRACING_DATA = 1
    BUILD_ID = 2
    HOSTNAME = 3
    OSRELEASE = 4
    VERSION = 5
    ARCH = 6
    NRCPUS = 7
    CPUDESC = 8
    CPUID = 9
    TOTAL_MEM = 10
    CMDLINE = 11
    EVENT_DESC = 12
    CPU_TOPOLOGY = 13
    NUMA_TOPOLOGY = 14
    BRANCH_STACK = 15
    PMU_MAPPINGS = 16
    GROUP_DESC = 17
    AUXTRACE = 18
    STAT = 19
    CACHE = 20
    SAMPLE_TIME = 21
    MEM_TOPOLOGY = 22
    CLOCKID = 23
    DIR_FORMAT = 24
    BPF_PROG_INFO = 25
    BPF_BTF = 26
    COMPRESSED = 27
    CPU_PMU_CAPS = 28
    CLOCK_DATA = 29
    HYBRID_TOPOLOGY = 30
    PMU_CAPS = 31


#: struct perf_header_string: u32 len, then len bytes (NUL-terminated, padded).
STRING_LENGTH = Record(("length",), "I")
#: perf_header_string_list and EVENT_DESC's counts: u32 nr.
COUNT = Record(("nr",), "I")
#: NRCPUS: u32 nr_cpus_available, u32 nr_cpus_online (header.c write_nrcpus).
NRCPUS = Record(("available", "online"), "II")
#: EVENT_DESC: u32 nr, u32 attr_size; per event the attribute, u32 nr_ids, the name (a
#: perf_header_string), u64 ids[nr_ids].
EVENT_DESC = Record(("nr", "attr_size"), "II")
U64 = Record(("value",), "Q")
U32 = Record(("value",), "I")
#: SAMPLE_TIME: u64 first, u64 last sample time.
SAMPLE_TIME = Record(("first", "last"), "QQ")
#: COMPRESSED: u32 version, type, level, ratio, mmap_len.
COMPRESSED_FEATURE = Record(("version", "type", "level", "ratio", "mmap_len"), "IIIII")
