"""gdb script (``gdb -x``): print every thread's frames, inlined ones included, with the name
and source line gdb gives each.

Tail-call frames, which gdb rebuilds from DWARF call-site information (``DW_TAG_call_site``)
and which are not on the stack, are left out.

Output: ``THREAD <lwp>`` then, newest first, ``FRAME <kind>\\t<name>\\t<file>\\t<line>`` where
kind is ``inline``, ``normal`` or ``signal``, and ``-`` stands for no name or no line.
"""

import os
import sys
from collections.abc import Iterable

import gdb  # type: ignore[import-not-found]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gdb_walk import print_threads


def frames_with_lines(frames: Iterable["gdb.Frame"]) -> list[str]:
    lines = []
    for frame in frames:
        kind = frame.type()
        if kind == gdb.SIGTRAMP_FRAME:
            lines.append("FRAME signal\t-\t-\t-")
        elif kind != gdb.TAILCALL_FRAME:
            sal = frame.find_sal()
            where = (sal.symtab.filename, str(sal.line)) if sal.symtab else ("-", "-")
            label = "inline" if kind == gdb.INLINE_FRAME else "normal"
            lines.append(f"FRAME {label}\t{frame.name() or '-'}\t{where[0]}\t{where[1]}")
    return lines


print_threads(frames_with_lines)
