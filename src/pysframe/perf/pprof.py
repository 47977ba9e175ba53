"""A profile as pprof's ``profile.proto``, gzipped, written with the ``protobuf`` package.

The schema is google/pprof's proto/profile.proto (package ``perftools.profiles``), declared
once here as a ``FileDescriptorProto`` from which the ``protobuf`` package makes the message
classes at run time: no protoc, no generated code to keep in step with the package's
version (protobuf 4.22 or later: ``message_factory.GetMessageClass``).  Only the fields that
have been in the schema since its first version are declared (Line.column and
Profile.doc_url are newer, and their readers ignore their absence).

What is written:

* ``sample_type``: ``samples``/``count``, then one value per event: ``cpu``/``nanoseconds``
  for cpu-clock, ``EVENT``/``nanoseconds`` for task-clock, ``EVENT``/``count`` for the
  others; the default is the first event's.  Each pprof sample is the samples of one (event,
  thread, command, stack), its values their count and summed period, with the labels
  ``comm`` (string), ``pid`` and ``tid`` (numbers);
* ``location``: one per distinct frame address, its ``line`` the functions there, innermost
  inlined one first and the function they were inlined into last (as profile.proto asks;
  an inlined function whose next frame is at another address is a location of its own);
  a frame without a symbol has no line (pprof then shows its address);
* ``mapping``: one per module, its ``filename`` the module (a path, ``[kernel.kallsyms]``,
  ``[vdso]``), ``build_id`` when the profile has one for it.  Addresses are the same in every
  process and recording that maps the module: a user frame's address in its module
  (``FrameInfo.module_address``), a kernel frame's own; a mapping spans its frames'
  addresses, from ``memory_start`` with ``file_offset`` 0;
* ``function``: one per (name, source file), ``system_name`` the name too.
"""

from __future__ import annotations

import gzip
import os
from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import IO, Any

import numpy as np

from ..errors import OutputError
from ..output import write_file
from .aggregate import FlatStacks, group
from .profile import FrameInfo, Profile, interned

#: The schema: message → fields (name, number, type, repeated, message type).
_SCHEMA: dict[str, list[tuple[str, int, str, bool, str | None]]] = {
    "Profile": [
        ("sample_type", 1, "message", True, "ValueType"),
        ("sample", 2, "message", True, "Sample"),
        ("mapping", 3, "message", True, "Mapping"),
        ("location", 4, "message", True, "Location"),
        ("function", 5, "message", True, "Function"),
        ("string_table", 6, "string", True, None),
        ("drop_frames", 7, "int64", False, None),
        ("keep_frames", 8, "int64", False, None),
        ("time_nanos", 9, "int64", False, None),
        ("duration_nanos", 10, "int64", False, None),
        ("period_type", 11, "message", False, "ValueType"),
        ("period", 12, "int64", False, None),
        ("comment", 13, "int64", True, None),
        ("default_sample_type", 14, "int64", False, None),
    ],
    "ValueType": [("type", 1, "int64", False, None), ("unit", 2, "int64", False, None)],
    "Sample": [
        ("location_id", 1, "uint64", True, None),
        ("value", 2, "int64", True, None),
        ("label", 3, "message", True, "Label"),
    ],
    "Label": [
        ("key", 1, "int64", False, None),
        ("str", 2, "int64", False, None),
        ("num", 3, "int64", False, None),
        ("num_unit", 4, "int64", False, None),
    ],
    "Mapping": [
        ("id", 1, "uint64", False, None),
        ("memory_start", 2, "uint64", False, None),
        ("memory_limit", 3, "uint64", False, None),
        ("file_offset", 4, "uint64", False, None),
        ("filename", 5, "int64", False, None),
        ("build_id", 6, "int64", False, None),
        ("has_functions", 7, "bool", False, None),
        ("has_filenames", 8, "bool", False, None),
        ("has_line_numbers", 9, "bool", False, None),
        ("has_inline_frames", 10, "bool", False, None),
    ],
    "Location": [
        ("id", 1, "uint64", False, None),
        ("mapping_id", 2, "uint64", False, None),
        ("address", 3, "uint64", False, None),
        ("line", 4, "message", True, "Line"),
        ("is_folded", 5, "bool", False, None),
    ],
    "Line": [("function_id", 1, "uint64", False, None), ("line", 2, "int64", False, None)],
    "Function": [
        ("id", 1, "uint64", False, None),
        ("name", 2, "int64", False, None),
        ("system_name", 3, "int64", False, None),
        ("filename", 4, "int64", False, None),
        ("start_line", 5, "int64", False, None),
    ],
}
_PACKAGE = "perftools.profiles"


@cache
def profile_message_class() -> Callable[[], Any]:
    """The class of pprof's ``perftools.profiles.Profile`` message, made from :data:`_SCHEMA`
    in a descriptor pool of its own (so that another copy of the schema loaded elsewhere
    cannot clash with it)."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError as error:
        raise OutputError(
            "writing pprof needs the protobuf package (pip install 'protobuf>=4.22')"
        ) from error
    types = descriptor_pb2.FieldDescriptorProto
    kinds = {
        "message": types.TYPE_MESSAGE, "string": types.TYPE_STRING, "int64": types.TYPE_INT64,
        "uint64": types.TYPE_UINT64, "bool": types.TYPE_BOOL,
    }  # fmt: skip
    schema = descriptor_pb2.FileDescriptorProto(
        name="pysframe/perftools_profiles.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _SCHEMA.items():
        message = schema.message_type.add(name=name)
        for field_name, number, kind, repeated, message_type in fields:
            declared = message.field.add(
                name=field_name, number=number, type=kinds[kind],
                label=types.LABEL_REPEATED if repeated else types.LABEL_OPTIONAL,
            )  # fmt: skip
            if message_type is not None:
                declared.type_name = f".{_PACKAGE}.{message_type}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    descriptor = pool.FindMessageTypeByName(f"{_PACKAGE}.Profile")
    made: Callable[[], Any] = message_factory.GetMessageClass(descriptor)
    return made


class _Strings:
    """pprof's string table: index 0 is the empty string."""

    def __init__(self) -> None:
        self.table: list[str] = [""]
        self.index: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        return interned(self.index, self.table, text)


def _value_type(name: str, unit: str) -> tuple[str, str]:
    if name == "cpu-clock":
        return "cpu", "nanoseconds"
    return name, "nanoseconds" if unit == "nanoseconds" else "count"


def pprof_message(profile: Profile) -> Any:
    """The ``Profile`` message of ``profile`` (see the module's docstring)."""
    message = profile_message_class()()
    strings = _Strings()
    value_types = [("samples", "count")] + [_value_type(n, u) for n, u in profile.events]
    for kind, unit in value_types:
        message.sample_type.add(type=strings(kind), unit=strings(unit))
    if profile.events:
        message.default_sample_type = strings(value_types[1][0])
        message.period_type.type = strings(value_types[1][0])
        message.period_type.unit = strings(value_types[1][1])

    location_of_stack = _locations(profile, message, strings)

    keys = [profile.column(name) for name in ("event", "comm", "pid", "tid", "stack")]
    groups = group(keys, profile.column("period"))
    comm_key, pid_key, tid_key = strings("comm"), strings("pid"), strings("tid")
    width = len(value_types)
    comm_strings = [strings(name) for name in profile.comms]
    for event, comm, pid, tid, stack, count, period in zip(
        *(key.tolist() for key in groups.keys), groups.count.tolist(), groups.period.tolist(),
        strict=True,
    ):  # fmt: skip
        values = [0] * width
        values[0], values[event + 1] = count, period
        labels = [
            {"key": comm_key, "str": comm_strings[comm]},
            {"key": pid_key, "num": pid},
            {"key": tid_key, "num": tid},
        ]
        message.sample.add(location_id=location_of_stack(stack), value=values, label=labels)

    if len(profile):
        times = profile.column("time")
        message.duration_nanos = int(times.max() - times.min())
        first_event = profile.column("event") == profile.event[0]
        periods = Counter(profile.column("period")[first_event].tolist())
        message.period = periods.most_common(1)[0][0]
    for source in profile.sources:
        message.comment.append(strings(f"recording: {source}"))
    message.string_table.extend(strings.table)
    return message


def _address(frame: FrameInfo) -> int:
    if frame.kernel or frame.module_address is None:
        return frame.address
    return frame.module_address


def _locations(profile: Profile, message: Any, strings: _Strings) -> Callable[[int], list[int]]:
    """Add the locations, functions and mappings of the profile's stacks to ``message`` (once
    per distinct stack); a function giving a stack's location ids, innermost first."""
    location_ids: dict[tuple[int, ...], int] = {}
    function_ids: dict[tuple[str, str], int] = {}
    mapping_of: dict[str, Any] = {}

    def mapping(frame: FrameInfo) -> Any:
        found = mapping_of.get(frame.module)
        if found is None:
            found = mapping_of[frame.module] = message.mapping.add(
                id=len(mapping_of) + 1, filename=strings(frame.module),
                build_id=strings(profile.build_ids.get(frame.module, "")),
                memory_start=_address(frame), memory_limit=_limit(_address(frame)),
            )  # fmt: skip
        address = _address(frame)
        found.memory_start = min(found.memory_start, address)
        found.memory_limit = max(found.memory_limit, _limit(address))
        return found

    def function(frame: FrameInfo) -> int:
        key = (frame.name, frame.file or "")
        found = function_ids.get(key)
        if found is None:
            found = function_ids[key] = len(function_ids) + 1
            message.function.add(
                id=found, name=strings(key[0]), system_name=strings(key[0]),
                filename=strings(key[1]),
            )  # fmt: skip
        return found

    def location(frame_ids: tuple[int, ...]) -> int:
        found = location_ids.get(frame_ids)
        if found is not None:
            return found
        found = location_ids[frame_ids] = len(location_ids) + 1
        frames = [profile.frames[frame_id] for frame_id in frame_ids]
        place = frames[-1]
        owner = mapping(place)
        made = message.location.add(id=found, mapping_id=owner.id, address=_address(place))
        for frame in frames:
            if frame.symbol is None:
                continue
            made.line.add(function_id=function(frame), line=frame.line or 0)
            owner.has_functions = True
            owner.has_inline_frames |= frame.inlined
            owner.has_filenames |= frame.file is not None
            owner.has_line_numbers |= frame.line is not None
        return found

    main = _main_frame(profile)
    if main is not None:
        mapping(main)  # pprof takes mapping[0] for the main binary
    return _stack_locations(profile, location)


def _stack_locations(
    profile: Profile, location: Callable[[tuple[int, ...]], int]
) -> Callable[[int], list[int]]:
    """Every stack's location ids (innermost first), made with ``location`` (the location id
    of a tuple of frame ids, made when new; cheap when known).

    A location is a frame that is not an inlined function with the inlined ones just before
    it at its address (or what a stack ends with).  Most are one frame: their locations are
    made once per frame, and only the others once per run of frames, found with numpy."""
    inlined = np.fromiter((frame.inlined for frame in profile.frames), dtype=bool,
                          count=len(profile.frames))  # fmt: skip
    own_location = np.array(
        [0 if inlined[frame_id] else location((frame_id,)) for frame_id in range(len(inlined))],
        dtype=np.int64,
    )
    flat = FlatStacks.of(profile)
    last = np.zeros(len(flat.frames), dtype=bool)
    last[flat.offsets[1:][flat.lengths > 0] - 1] = True
    # An inlined function joins the frame after it when that frame is at its address.
    addresses = np.fromiter((frame.address for frame in profile.frames), dtype=np.uint64,
                            count=len(profile.frames))[flat.frames]  # fmt: skip
    same_as_next = np.zeros(len(flat.frames), dtype=bool)
    same_as_next[:-1] = addresses[:-1] == addresses[1:]
    closing = np.flatnonzero(~(inlined[flat.frames] & same_as_next & ~last))
    # Where each location's run of frames starts: after the previous location of its stack.
    run_start = np.empty(len(closing), dtype=np.int64)
    run_start[1:] = closing[:-1] + 1
    run_start[:1] = 0
    stack_start = np.repeat(flat.offsets[:-1], np.diff(np.searchsorted(closing, flat.offsets)))
    run_start = np.maximum(run_start, stack_start)
    placed = own_location[flat.frames[closing]]
    others = np.flatnonzero((run_start < closing) | (placed == 0))
    frame_list = flat.frames.tolist()
    placed[others] = [
        location(tuple(frame_list[begin : end + 1]))
        for begin, end in zip(run_start[others].tolist(), closing[others].tolist(), strict=True)
    ]
    bounds = np.searchsorted(closing, flat.offsets).tolist()

    def of_stack(stack: int) -> list[int]:
        found: list[int] = placed[bounds[stack] : bounds[stack + 1]].tolist()
        return found

    return of_stack


def _limit(address: int) -> int:
    """The end of a mapping holding ``address`` (a uint64: the last address holds itself)."""
    return min(address + 1, (1 << 64) - 1)


def _main_frame(profile: Profile) -> FrameInfo | None:
    """A frame of the main binary: the module of most samples' outermost user frame."""
    weights = np.bincount(profile.column("stack"), minlength=len(profile.stacks))
    votes: Counter[int] = Counter()
    for stack, weight in enumerate(weights.tolist()):
        if weight:
            outermost = next(
                (f for f in reversed(profile.stacks[stack]) if not profile.frames[f].kernel), None
            )
            if outermost is not None:
                votes[outermost] += weight
    by_module: Counter[str] = Counter()
    example: dict[str, FrameInfo] = {}
    for frame_id, weight in votes.items():
        frame = profile.frames[frame_id]
        by_module[frame.module] += weight
        example.setdefault(frame.module, frame)
    return example[by_module.most_common(1)[0][0]] if by_module else None


def pprof_bytes(profile: Profile) -> bytes:
    """The gzipped ``profile.proto`` of ``profile`` (gzip's time stamp 0: the same profile
    gives the same bytes)."""
    # zlib's default level: level 9 takes three times as long for a few per cent less.
    return gzip.compress(pprof_message(profile).SerializeToString(), compresslevel=6, mtime=0)


def write_pprof(profile: Profile, path_or_binary_out: str | os.PathLike[str] | IO[bytes]) -> None:
    """Write ``profile`` as a gzipped pprof profile to a path (atomically, ``-`` for standard
    output; :func:`pysframe.output.write_file`) or a binary stream."""
    data = pprof_bytes(profile)
    if isinstance(path_or_binary_out, str | os.PathLike):
        write_file(os.fspath(path_or_binary_out), data)
    else:
        path_or_binary_out.write(data)


__all__ = ["pprof_bytes", "pprof_message", "profile_message_class", "write_pprof"]
