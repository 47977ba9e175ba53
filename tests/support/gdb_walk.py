"""Shared by the gdb scripts (gdb_frames.py, gdb_names.py, gdb_lines.py): every thread's frames,
newest first, printed as ``THREAD <lwp>`` and then one line per frame the script describes."""

from collections.abc import Callable, Iterable, Iterator

import gdb  # type: ignore[import-not-found]


def frames_from_newest() -> Iterator["gdb.Frame"]:
    """The selected thread's frames, newest first, up to the first gdb cannot unwind past."""
    frame = gdb.newest_frame()
    while frame is not None:
        yield frame
        try:
            frame = frame.older()
        except gdb.error:
            return


def print_threads(describe: Callable[[Iterable["gdb.Frame"]], list[str]]) -> None:
    """For each thread in the order of its LWP: its header line, then ``describe``'s lines."""
    for inferior in gdb.inferiors():
        for thread in sorted(inferior.threads(), key=lambda t: t.ptid[1]):
            thread.switch()
            print(f"THREAD {thread.ptid[1]}")
            print("\n".join(describe(frames_from_newest())))
