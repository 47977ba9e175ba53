"""The texts of a recording's time slices joined (``pysframe perf script -j N``, ``perf report
--format folded -j N``): where :func:`joined_script` and :func:`joined_folded` join them, the
result is the whole profile's text, byte for byte; they join them at least wherever the
slices cannot differ from the whole (same events, every sample with a CPU, times in order).

Profiles are built by hand as :func:`profile_recording` builds a slice's: samples of two
events (one without callchains) interned first, commands, CPUs (-1: none recorded), times in
any order, some delivered late, a deferred callchain shown apart; cut into slices anywhere.
The whole is the slices merged in order (:meth:`Profile.merge`, which test_perf_parts holds
to the recording read at once).
"""

from __future__ import annotations

import io
import itertools
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pysframe.perf.forked import Spooled
from pysframe.perf.profile import DeferredChain, FrameInfo, Profile
from pysframe.perf.report import folded_slice, folded_stacks, joined_folded
from pysframe.perf.script import (
    FieldError,
    ScriptSlice,
    joined_script,
    script_fields,
    script_slice,
    script_text,
)

#: The events of the recordings built: perf-like names, the second without callchains.
EVENTS = (("cpu-clock", "nanoseconds"), ("instructions:u", "events"))
#: ``-F`` lists: perf's default, lists of their own (one with the CPU named), changes.
FIELD_LISTS = (None, "comm,tid,time,event,ip,sym", "+pid,-period", "cpu,time,ip,sym",
               "comm,pid,tid,time,period,event", "-cpu,+symoff")  # fmt: skip

Sample = tuple[str, int, int, int, int, int]  # comm, event, cpu, time, late, stack depth
SAMPLES = st.lists(
    st.tuples(
        st.sampled_from(["app", "worker thread"]),
        st.integers(0, 1),
        st.integers(-1, 3),
        st.integers(1, 40),  # small: ties between slices
        st.integers(0, 5),  # delivered this much later (0: at its time)
        st.integers(0, 3),
    ),
    max_size=24,
)


def _slice(samples: list[Sample], both_events: bool, chain: bool) -> Profile:
    """A slice's profile as :func:`profile_recording` makes it: the recording's events
    first (``both_events`` False: each as it comes, as a pipe-mode recording has them)."""
    profile = Profile()
    profile.events_without_callchain = {EVENTS[1][0]}
    if both_events:
        for name, unit in EVENTS:
            profile.event_id(name, unit)
    frames = [profile.frame_id(FrameInfo(0x1000 + 16 * i, "/lib/m.so", f"f{i}", i))
              for i in range(3)]  # fmt: skip
    for comm, event, cpu, time, late, depth in samples:
        stack = profile.stack_id(frames[:depth])
        if late:
            profile.delivered[len(profile)] = time + late
        profile.add(stack, pid=7, tid=8, time=time, cpu=cpu, period=100, comm=profile.comm_id(comm),
                    event=profile.event_id(*EVENTS[event]))  # fmt: skip
    if chain:
        stack = profile.stack_id(frames[:2])
        profile.deferred.append(DeferredChain(20, 7, 8, profile.comm_id("app"), 0x5, stack))
    return profile


def _cut(samples: list[Sample], cuts: list[int]) -> list[list[Sample]]:
    bounds = [0, *sorted(min(cut, len(samples)) for cut in cuts), len(samples)]
    return [samples[low:high] for low, high in itertools.pairwise(bounds)]


def _whole(slices: list[Profile]) -> Profile:
    whole = Profile()
    for piece in slices:
        whole.merge(piece)
    return whole


@settings(max_examples=300, deadline=None)
@given(SAMPLES, st.lists(st.integers(0, 24), max_size=3), st.sampled_from(FIELD_LISTS),
       st.booleans(), st.booleans())  # fmt: skip
def test_joined_script_is_the_whole_text(
    samples: list[Sample], cuts: list[int], fields_text: str | None, both_events: bool,
    chain: bool,
) -> None:  # fmt: skip
    options = script_fields(fields_text)
    profiles = [_slice(part, both_events, chain and index == 0)
                for index, part in enumerate(_cut(samples, cuts))]  # fmt: skip
    slices: list[ScriptSlice | None] = []
    for profile in profiles:
        try:
            slices.append(script_slice(profile, options))
        except FieldError:  # refused: the whole's path says it (cli/perf.py)
            slices.append(None)
    try:
        expected: str | None = "".join(script_text(_whole(profiles), options=options))
    except FieldError:
        expected = None
    joined = _written(joined_script(slices))
    if joined is not None:
        assert joined == expected
    # where nothing of the whole can differ, they are joined
    delivered = [time + late for _comm, _event, _cpu, time, late, _depth in samples]
    if (both_events and not chain and delivered == sorted(delivered)
            and all(cpu >= 0 for _comm, _event, cpu, *_rest in samples)):  # fmt: skip
        assert joined == expected


@settings(max_examples=200, deadline=None)
@given(SAMPLES, st.lists(st.integers(0, 24), max_size=3), st.booleans())
def test_joined_folded_stacks_are_the_whole_ones(
    samples: list[Sample], cuts: list[int], both_events: bool
) -> None:
    profiles = [_slice(part, both_events, False) for part in _cut(samples, cuts)]
    joined = joined_folded([folded_slice(profile) for profile in profiles])
    expected = folded_stacks(_whole(profiles))
    if joined is not None:
        assert joined == expected
    if len({event for _comm, event, *_rest in samples}) <= 1:  # one event: always joined
        assert joined == expected


def _written(texts: list[Spooled] | None) -> str | None:
    """The texts :func:`joined_script` gives, written one after the other."""
    if texts is None:
        return None
    out = io.StringIO()
    for text in texts:
        text.write(out)
    return out.getvalue()


def _piece(text: str, delivered: tuple[int, int] | None, **changes: Any) -> ScriptSlice:
    fields = frozenset({"comm", "time"}) if delivered is not None else None
    piece = ScriptSlice(Spooled((text,)), (("cpu-clock", True),), fields, delivered, False)
    return replace(piece, **changes)


def test_slices_are_joined_in_order_when_they_agree() -> None:
    """Each rule, on slices made by hand: joined in the order given, empty slices (no
    fields, no times) taking no part in the checks; a tie between two slices' times keeps
    their order (a stable sort of the whole)."""
    first, second = _piece("a\n", (1, 5)), _piece("b\n", (5, 9))
    assert _written(joined_script([first, _piece("", None), second])) == "a\nb\n"
    assert joined_script([second, first]) is None  # a sample delivered before one earlier
    assert joined_script([first, _piece("b\n", (4, 9))]) is None
    assert joined_script([first, _piece("b\n", (5, 9), fields=frozenset({"cpu"}))]) is None
    assert joined_script([first, _piece("b\n", (5, 9), events=(("cpu-clock", False),))]) \
        is None  # fmt: skip
    assert joined_script([first, _piece("", None, deferred=True)]) is None
    assert joined_script([first, None]) is None  # a slice refused
    assert joined_script([]) is None  # read whole: nothing to join
    assert joined_folded([((EVENTS[0]), {"a;b": 2}), (None, {}), (EVENTS[0], {"a;b": 1, "c": 1})]) \
        == {"a;b": 3, "c": 1}  # fmt: skip
    assert joined_folded([(EVENTS[0], {"a": 1}), (EVENTS[1], {"a": 1})]) is None
    assert joined_folded([(EVENTS[0], {"a": 1}), None]) is None
    assert joined_folded([]) is None
