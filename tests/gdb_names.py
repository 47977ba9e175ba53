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

import gdb  # type: ignore[import-not-found]


def symbol_name(address: int) -> str:
    text = gdb.execute(f"info symbol {address:#x}", to_string=True).strip()
    if text.startswith("No symbol matches"):
        return "-"
    name = text.split(" in section ", 1)[0]
    head, plus, offset = name.rpartition(" + ")
    return head if plus and offset.isdigit() else name


def frames() -> list[str]:
    lines = []
    frame = gdb.newest_frame()
    caller = False
    while frame is not None:
        kind = frame.type()
        if kind == gdb.SIGTRAMP_FRAME:
            lines.append("FRAME signal")
            caller = False
        elif kind not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            pc = frame.pc()
            lines.append(f"FRAME {pc:#x}\t{frame.name() or '-'}\t{symbol_name(pc - caller)}")
            caller = True
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
