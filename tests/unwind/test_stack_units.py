"""Module discovery and stack output pieces that need no live process."""

from __future__ import annotations

import sys
from pathlib import Path

from pysframe.elf.symbols import FunctionSymbols, SymbolRecord
from pysframe.sources.trust import Policy
from pysframe.unwind.core import Frame, FrameSource
from pysframe.unwind.mappings import Mapping, parse_maps_line
from pysframe.unwind.modules import load_modules
from pysframe.unwind.stack import format_frame


def test_parse_maps_line() -> None:
    line = "7f12a000-7f12c000 r-xp 00002000 fd:01 393 /usr/lib/libc.so.6\n"
    assert parse_maps_line(line) == Mapping(
        0x7F12A000, 0x7F12C000, 0x2000, "/usr/lib/libc.so.6", "r-xp", 393, (0xFD, 0x01)
    )
    assert parse_maps_line("7f12a000-7f12c000 rw-p 00000000 00:00 0 \n") is None
    assert parse_maps_line("7ffd000-7ffe000 r-xp 00000000 00:00 0 [vdso]\n") is None
    deleted = parse_maps_line("1000-2000 r-xp 00000000 fd:01 7 /tmp/prog (deleted)\n")
    assert deleted is not None and deleted.path == "/tmp/prog (deleted)"


def test_missing_and_deleted_files_are_kept_with_a_problem() -> None:
    table = load_modules(
        [
            Mapping(0x1000, 0x2000, 0, "/nonexistent/libgone.so"),
            Mapping(0x3000, 0x4000, 0, "/nonexistent/prog (deleted)"),
        ]
    )
    gone = table(0x1800)
    assert gone is not None and gone.problem == "/nonexistent/libgone.so is missing"
    deleted = table(0x3000)
    assert deleted is not None and "deleted" in (deleted.problem or "")
    assert table(0x2800) is None and table(0x4000) is None


def test_python_executable_module_has_symbols_and_bias() -> None:
    # The running interpreter is an ELF file mapped at some address: map it at 0x400000.
    exe = Path(sys.executable).resolve()
    table = load_modules([Mapping(0x400000, 0x500000, 0, str(exe))], policy=Policy.OWN)
    assert len(table) == 1
    module = table.modules[0]
    assert module.info.problem is None
    assert module.path == str(exe)


def test_symbolize_prefers_containing_symbol() -> None:
    symbols = FunctionSymbols(
        SymbolRecord(*s) for s in [(0x100, 0x20, "a"), (0x200, 0, "b"), (0x300, 0x10, "c")]
    )
    assert symbols.find(0x110) == ("a", 0x10)
    assert symbols.find(0x130) is None  # past a's end, before b
    assert symbols.find(0x2FF) == ("b", 0xFF)  # b has no size
    assert symbols.find(0x50) is None


def test_format_frame() -> None:
    frame = Frame(3, 0x55D1C8C3E3DE, 0x7000, 0x7010, FrameSource.FRAME_POINTER, "/tmp/prog",
                  "spin_here", 0xE, False)
    assert format_frame(frame) == (
        "#3  0x000055d1c8c3e3de spin_here+0xe - /tmp/prog [frame-pointer]"
    )
    signal = Frame(12, 0x7F0000001000, None, None, FrameSource.SFRAME, "/lib/libc.so.6",
                   None, None, True, signal_trampoline=True, problem="/lib/libc.so.6 is missing")
    assert format_frame(signal) == (
        "#12 0x00007f0000001000 <signal handler called> - /lib/libc.so.6 "
        "[unresolved: /lib/libc.so.6 is missing]"
    )
