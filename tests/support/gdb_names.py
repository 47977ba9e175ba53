"""gdb script (``gdb -x``): print every thread's physical frames with the names gdb gives them.

Frames gdb makes for inlined functions, and the tail-call frames it rebuilds from DWARF
call-site information (``DW_TAG_call_site``), are left out: neither is on the stack, so an
unwinder has no such frames.

Output: ``THREAD <lwp>`` then, newest first, ``FRAME <pc>\\t<bt name>\\t<symbol name>`` or
``FRAME signal``.  ``<bt name>`` is the name ``bt`` prints (from DWARF when gdb has it, else
the minimal symbol's); ``<symbol name>`` is the minimal symbol ``info symbol`` gives for the
frame's address in its function (the PC, or the return address minus one for a caller, as
gdb's ``get_frame_address_in_block``).  ``-`` stands for no name.
"""

import os
import sys
from collections.abc import Iterable

import gdb  # type: ignore[import-not-found]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gdb_walk import print_threads


def symbol_name(address: int) -> str:
    text = gdb.execute(f"info symbol {address:#x}", to_string=True).strip()
    if text.startswith("No symbol matches"):
        return "-"
    name = text.split(" in section ", 1)[0]
    head, plus, offset = name.rpartition(" + ")
    return head if plus and offset.isdigit() else name


def named_frames(frames: Iterable["gdb.Frame"]) -> list[str]:
    lines = []
    caller = False
    for frame in frames:
        kind = frame.type()
        if kind == gdb.SIGTRAMP_FRAME:
            lines.append("FRAME signal")
            caller = False
        elif kind not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            pc = frame.pc()
            lines.append(f"FRAME {pc:#x}\t{frame.name() or '-'}\t{symbol_name(pc - caller)}")
            caller = True
    return lines


print_threads(named_frames)
