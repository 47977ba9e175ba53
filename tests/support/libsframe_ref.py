"""GNU libsframe 2.47 through ctypes, for the tests that compare with it (``$LIBSFRAME``).

Declarations from binutils' include/sframe-api.h: ``sframe_decode``, ``sframe_decoder_free``,
``sframe_find_fre`` (PCs relative to the section's first byte) and the FRE accessors.  What a
lookup finds is compared as libsframe's users see it: the FRE's start offset, CFA base
register, CFA/FP/RA offsets (or the error each accessor gives) and the mangled-RA and
undefined-RA bits, never the raw bytes (compaction may narrow them).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

from conftest import in_ci, require

#: MAX_DATAWORD_BYTES: SFRAME_FRE_DATAWORD_4B (2) * 2 * MAX_NUM_DATAWORDS (6).
_DATAWORD_BYTES = 24


class FrameRowEntry(ctypes.Structure):
    """sframe_frame_row_entry."""

    _fields_ = [
        ("fre_start_addr", ctypes.c_uint32),
        ("fre_datawords", ctypes.c_ubyte * _DATAWORD_BYTES),
        ("fre_info", ctypes.c_ubyte),
    ]


def reference_tool(variable: str) -> str:
    """The binutils 2.47 tool or library ``$variable`` names; without it the test stops for
    want of "VARIABLE-2.47" (conftest.require: a skip, a failure under CI)."""
    __tracebackhide__ = True  # a skip or failure points at the test
    tool = f"{variable.lower()}-2.47"
    path = os.environ.get(variable)
    if not path or not Path(path).exists():
        require(tool, f"${variable} does not name a binutils 2.47 {variable.lower()}")
    if variable != "LIBSFRAME":
        done = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
        if "2.47" not in done.stdout.splitlines()[0] if done.stdout else True:
            require(tool, f"${variable} ({path}) is not binutils 2.47")
    return path


def reference_tool_if_present(variable: str) -> str | None:
    """:func:`reference_tool` for tests that fall back to a weaker check without it: None when
    it is missing, except under CI, where a missing reference fails the test."""
    __tracebackhide__ = True  # a skip or failure points at the test
    if in_ci():
        return reference_tool(variable)
    path = os.environ.get(variable)
    return path if path and Path(path).exists() else None


class LibSframe:
    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        lib.sframe_decode.restype = ctypes.c_void_p
        lib.sframe_decode.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_int),
        ]
        lib.sframe_decoder_free.restype = None
        lib.sframe_decoder_free.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.sframe_find_fre.restype = ctypes.c_int
        lib.sframe_find_fre.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.POINTER(FrameRowEntry),
        ]
        for name in ("sframe_fre_get_cfa_offset", "sframe_fre_get_fp_offset",
                     "sframe_fre_get_ra_offset"):  # fmt: skip
            getattr(lib, name).restype = ctypes.c_int32
            getattr(lib, name).argtypes = [
                ctypes.c_void_p, ctypes.POINTER(FrameRowEntry), ctypes.c_uint32,
                ctypes.POINTER(ctypes.c_int),
            ]  # fmt: skip
        lib.sframe_fre_get_base_reg_id.restype = ctypes.c_uint8
        lib.sframe_fre_get_base_reg_id.argtypes = [
            ctypes.POINTER(FrameRowEntry),
            ctypes.POINTER(ctypes.c_int),
        ]
        for name in ("sframe_fre_get_ra_mangled_p", "sframe_fre_get_ra_undefined_p"):
            getattr(lib, name).restype = ctypes.c_bool
            getattr(lib, name).argtypes = [
                ctypes.c_void_p,
                ctypes.POINTER(FrameRowEntry),
                ctypes.POINTER(ctypes.c_int),
            ]
        self.lib = lib

    def decode(self, data: bytes) -> Decoder | None:
        """A decoder of ``data``, or None when libsframe rejects it."""
        error = ctypes.c_int(0)
        buffer = ctypes.create_string_buffer(data, len(data))
        handle = self.lib.sframe_decode(buffer, len(data), ctypes.byref(error))
        return Decoder(self, handle, buffer) if handle else None


class Decoder:
    def __init__(self, owner: LibSframe, handle: int, buffer: ctypes.Array[ctypes.c_char]) -> None:
        self.lib = owner.lib
        self.handle = ctypes.c_void_p(handle)
        self.buffer = buffer  # libsframe keeps pointers into it

    def close(self) -> None:
        if self.handle:
            self.lib.sframe_decoder_free(ctypes.byref(self.handle))

    def __enter__(self) -> Decoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def find(self, pc: int, fde_type: int) -> tuple[object, ...]:
        """What sframe_find_fre finds at section-relative ``pc``, read through the accessors
        for a function of ``fde_type``; ``("none",)`` when it finds nothing."""
        entry = FrameRowEntry()
        if self.lib.sframe_find_fre(self.handle, pc, ctypes.byref(entry)) != 0:
            return ("none",)
        answers: list[object] = [entry.fre_start_addr]
        error = ctypes.c_int(0)
        answers.append(
            self.lib.sframe_fre_get_base_reg_id(ctypes.byref(entry), ctypes.byref(error))
        )
        for name in ("sframe_fre_get_cfa_offset", "sframe_fre_get_fp_offset",
                     "sframe_fre_get_ra_offset"):  # fmt: skip
            error = ctypes.c_int(0)
            value = getattr(self.lib, name)(self.handle, ctypes.byref(entry), fde_type,
                                            ctypes.byref(error))  # fmt: skip
            answers.append((value, error.value) if not error.value else ("error", error.value))
        for name in ("sframe_fre_get_ra_mangled_p", "sframe_fre_get_ra_undefined_p"):
            error = ctypes.c_int(0)
            answers.append(bool(getattr(self.lib, name)(self.handle, ctypes.byref(entry),
                                                        ctypes.byref(error))))  # fmt: skip
        return tuple(answers)


def libsframe() -> LibSframe:
    """libsframe 2.47 (``$LIBSFRAME``); :func:`reference_tool` says what happens without it."""
    __tracebackhide__ = True  # a skip or failure points at the test
    return LibSframe(reference_tool("LIBSFRAME"))
