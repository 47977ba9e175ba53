"""gdb script (``gdb -x``): print every thread's physical frames, one line each.

gdb shows a function inlined at the PC as a frame of its own, with the same PC as the
function it was inlined into, when it has debug info (libc with its -dbg package, for one).
An unwinder walks physical frames only, so inline frames are left out here.

Output: ``THREAD <lwp>`` then, newest first, ``FRAME <pc in hex>`` or ``FRAME signal`` for a
signal trampoline.
"""

import gdb  # type: ignore[import-not-found]


def physical_frames() -> list[str]:
    lines = []
    frame = gdb.newest_frame()
    while frame is not None:
        if frame.type() == gdb.SIGTRAMP_FRAME:
            lines.append("FRAME signal")
        elif frame.type() != gdb.INLINE_FRAME:
            lines.append(f"FRAME {frame.pc():#x}")
        try:
            frame = frame.older()
        except gdb.error:
            break
    return lines


for inferior in gdb.inferiors():
    for thread in sorted(inferior.threads(), key=lambda t: t.ptid[1]):
        thread.switch()
        print(f"THREAD {thread.ptid[1]}")
        print("\n".join(physical_frames()))
