"""gdb script (``gdb -x``): print every thread's frames, inlined ones included, with the name
and source line gdb gives each.

Tail-call frames, which gdb rebuilds from DWARF call-site information (``DW_TAG_call_site``)
and which are not on the stack, are left out.

Output: ``THREAD <lwp>`` then, newest first, ``FRAME <kind>\\t<name>\\t<file>\\t<line>`` where
kind is ``inline``, ``normal`` or ``signal``, and ``-`` stands for no name or no line.
"""

import gdb  # type: ignore[import-not-found]


def frames() -> list[str]:
    lines = []
    frame = gdb.newest_frame()
    while frame is not None:
        kind = frame.type()
        if kind == gdb.SIGTRAMP_FRAME:
            lines.append("FRAME signal\t-\t-\t-")
        elif kind != gdb.TAILCALL_FRAME:
            sal = frame.find_sal()
            where = (sal.symtab.filename, str(sal.line)) if sal.symtab else ("-", "-")
            label = "inline" if kind == gdb.INLINE_FRAME else "normal"
            lines.append(f"FRAME {label}\t{frame.name() or '-'}\t{where[0]}\t{where[1]}")
        try:
            frame = frame.older()
        except gdb.error:
            break
    return lines


for inferior in gdb.inferiors():
    for thread in sorted(inferior.threads(), key=lambda t: t.ptid[1]):
        thread.switch()
        print(f"THREAD {thread.ptid[1]}")
        print("\n".join(frames()))
