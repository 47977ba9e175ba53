"""gdb script (``gdb -x``): print every thread's physical frames, one line each.

gdb shows a function inlined at the PC as a frame of its own, with the same PC as the
function it was inlined into, when it has debug info (libc with its -dbg package, for one).
An unwinder walks physical frames only, so inline frames are left out here.

Output: ``THREAD <lwp>`` then, newest first, ``FRAME <pc in hex>`` or ``FRAME signal`` for a
signal trampoline.
"""

import os
import sys
from collections.abc import Iterable

import gdb  # type: ignore[import-not-found]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gdb_walk import print_threads


def physical_frames(frames: Iterable["gdb.Frame"]) -> list[str]:
    lines = []
    for frame in frames:
        if frame.type() == gdb.SIGTRAMP_FRAME:
            lines.append("FRAME signal")
        elif frame.type() != gdb.INLINE_FRAME:
            lines.append(f"FRAME {frame.pc():#x}")
    return lines


print_threads(physical_frames)
