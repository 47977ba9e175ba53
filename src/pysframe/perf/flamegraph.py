"""A profile as an interactive flame graph: one self-contained HTML file.

The stacks are merged into a tree first (:func:`flame_tree`: ``all``, then the command, then
the functions from the outermost frame in), whose nodes the page lays out and draws on a
canvas, only those wider than a pixel.  The page (package data ``flamegraph.html``: its
script and style inline, nothing fetched) zooms into a frame on a click (its ancestors span
the width; a click on ``all`` or the Reset button undoes it), highlights the frames whose
name matches a search (a regular expression, else plain text) and shows the share they
account for, and shows a frame's name, module, samples and share in a tooltip and a status
line.  Colors tell the module's kind: user code warm, kernel blue, inlined functions light,
frames without a symbol grey.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import TextIO

import numpy as np

from ..dataclass import dataclass
from .aggregate import FlatStacks, group
from .profile import FrameInfo, Profile

#: Kinds of node (the page's colors): a user function, a kernel one, a frame without a
#: symbol, an inlined function, a command, the root.
USER, KERNEL, UNNAMED, INLINED, PROCESS, ROOT = range(6)


def _kind(frame: FrameInfo) -> int:
    if frame.symbol is None:
        return UNNAMED
    if frame.inlined:
        return INLINED
    return KERNEL if frame.kernel else USER


@dataclass(frozen=True, slots=True)
class FlameTree:
    """The merged stacks, in breadth-first order (the root first; a node's children are
    contiguous, sorted by name, and the nodes of a level are in the order of their parents).
    Per node: ``name`` (an index into :attr:`names`), ``children`` (how many),
    ``period`` and ``samples`` (of the samples whose stack passes through it)."""

    names: list[tuple[str, str, int]]
    name: np.ndarray
    children: np.ndarray
    period: np.ndarray
    samples: np.ndarray

    def __len__(self) -> int:
        return len(self.name)


def _names(profile: Profile) -> tuple[list[tuple[str, str, int]], np.ndarray, np.ndarray]:
    """The node names, sorted (name, module, kind): the root's, the commands', the frames'
    (frames of one function at different addresses share one); each frame's and each
    command's index among them."""
    frame_keys = [(frame.name, frame.module, _kind(frame)) for frame in profile.frames]
    comm_keys = [(comm, "", PROCESS) for comm in profile.comms]
    names = sorted({("all", "", ROOT), *frame_keys, *comm_keys})
    index = {key: at for at, key in enumerate(names)}
    frame_name = np.array([index[key] for key in frame_keys], dtype=np.int64)
    comm_name = np.array([index[key] for key in comm_keys], dtype=np.int64)
    return names, frame_name, comm_name


def flame_tree(profile: Profile) -> FlameTree:
    """The tree of ``profile``'s stacks, built a level at a time: at each depth, the (parent
    node, name) pairs of the stacks that reach it, grouped by one sort."""
    names, frame_name, comm_name = _names(profile)
    root_name = names.index(("all", "", ROOT))
    flat = FlatStacks.of(profile)
    stacks = group(
        [profile.column("comm"), profile.column("stack")], profile.column("period")
    )
    comm, stack = stacks.keys
    depth = flat.lengths[stack]
    outermost = flat.offsets[stack + 1] - 1  # frames are stored innermost first
    names_of = [np.array([root_name])]
    parents = [np.array([-1])]
    periods = [np.array([int(stacks.period.sum())])]
    samples = [np.array([int(stacks.count.sum())])]
    node_of = np.zeros(len(stack), dtype=np.int64)  # each stack's node at the last level
    first_of_level = 0
    level = 0
    while True:
        active = np.flatnonzero(depth >= level) if level else np.arange(len(stack))
        if not len(active):
            break
        key = comm_name[comm[active]] if level == 0 else (
            frame_name[flat.frames[outermost[active] - (level - 1)]]
        )
        parent = node_of[active]
        packed = parent * len(names) + key
        order = np.argsort(packed, kind="stable")
        new = np.ones(len(order), dtype=bool)
        new[1:] = packed[order][1:] != packed[order][:-1]
        starts = np.flatnonzero(new)
        level_start = first_of_level + len(names_of[-1])
        numbered = np.empty(len(order), dtype=np.int64)
        numbered[order] = level_start + np.cumsum(new) - 1
        node_of[active] = numbered
        names_of.append(key[order][starts])
        parents.append(parent[order][starts])
        periods.append(np.add.reduceat(stacks.period[active][order], starts))
        samples.append(np.add.reduceat(stacks.count[active][order], starts))
        first_of_level = level_start
        level += 1
    parent_all = np.concatenate(parents)
    children = np.bincount(parent_all[1:], minlength=len(parent_all)).astype(np.int64)
    return FlameTree(
        names, np.concatenate(names_of), children, np.concatenate(periods).astype(np.int64),
        np.concatenate(samples).astype(np.int64),
    )  # fmt: skip


def _template() -> str:
    return resources.files(__package__).joinpath("flamegraph.html").read_text(encoding="utf-8")


#: What JSON inside a <script> element must not hold as it is (the HTML Living Standard,
#: "Restrictions for contents of script elements"): "<" ("</script" ends the element, and
#: "<!--" followed by "<script" makes the parser look past the next "</script>"); ">" and
#: "&" for markup tools that read the page as XML or HTML; U+2028 and U+2029, line ends
#: for JavaScript before ES2019.  Each is written as its \u escape, which JSON.parse reads
#: back to the same character; they stand only inside strings, so nothing else changes.
_SCRIPT_ESCAPES = {ord(c): f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}


def _script_json(value: object) -> str:
    """JSON that may stand inside a <script> element whatever its strings hold."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_SCRIPT_ESCAPES)


#: The places the template fills in.
_PLACES = re.compile(r"\{\{(TITLE|DATA)\}\}")


def write_flamegraph(
    profile: Profile, out: TextIO, title: str = "Flame Graph", event: str | None = None
) -> None:
    """Write ``profile`` as a self-contained HTML flame graph (see the module's docstring),
    widths by period, with the samples counted beside, of one event: ``event``, by default
    the first sample's (periods of different events do not add up)."""
    if len(profile) and len(set(profile.event)) > 1:
        wanted = profile.event[0] if event is None else next(
            (at for at, (name, _) in enumerate(profile.events) if name == event), -1
        )
        profile = profile.take(i for i, chosen in enumerate(profile.event) if chosen == wanted)
    tree = flame_tree(profile)
    used = sorted(set(profile.event))
    units = sorted({profile.events[at][1] for at in used})
    # Periods are mostly multiples of one fixed period: written divided by their greatest
    # common divisor (the page multiplies it back), they take a few digits each.
    scale = int(np.gcd.reduce(tree.period)) if len(tree) else 1
    data = {
        "names": [list(entry) for entry in tree.names],
        "name": tree.name.tolist(),
        "children": tree.children.tolist(),
        "scale": scale or 1,
        "period": (tree.period // (scale or 1)).tolist(),
        "samples": tree.samples.tolist(),
        "unit": units[0] if len(units) == 1 else "events",
        "events": [profile.events[at][0] for at in used],
        "sources": list(profile.sources),
    }
    filled = {"TITLE": html.escape(title), "DATA": _script_json(data)}
    # One pass, so that a title holding "{{DATA}}" is not filled in again.
    out.write(_PLACES.sub(lambda place: filled[place[1]], _template()))


__all__ = [
    "INLINED",
    "KERNEL",
    "PROCESS",
    "ROOT",
    "UNNAMED",
    "USER",
    "FlameTree",
    "flame_tree",
    "write_flamegraph",
]
