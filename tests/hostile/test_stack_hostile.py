"""A traced process cannot stop ``pysframe stack`` by mapping crafted files: each file costs
at most its own module, and every thread's stack is printed (the process here maps ELF files
whose headers claim a 2**40-byte .sframe, 2**40 section headers, or a zlib bomb)."""

from __future__ import annotations

import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from conftest import CORPUS, unavailable
from stack_support import Unavailable, check_ptrace

APP = CORPUS / "x86_64/v3/app"
HOLDER = """
import mmap, sys, time
files = [open(path, "rb") for path in sys.argv[1:]]
maps = [mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) for f in files]
print("READY", flush=True)
time.sleep(60)
"""


def _crafted(tmp_path: Path) -> list[Path]:
    from pysframe.elf.reader import ElfReader

    data = APP.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 40)
    with ElfReader.open(str(APP)) as image:
        sframe = image.section(".sframe")
        assert sframe is not None
        header = shoff + sframe.index * 64
    huge = bytearray(data)
    struct.pack_into("<Q", huge, header + 32, 1 << 40)  # sh_size of .sframe
    many = bytearray(data)
    struct.pack_into("<H", many, 60, 0)  # e_shnum 0: section 0's sh_size counts them
    struct.pack_into("<Q", many, shoff + 32, 1 << 40)
    bomb = bytearray(data)
    body = struct.pack("<IIQQ", 1, 0, 400_000_000, 8) + zlib.compress(bytes(400_000_000), 9)
    struct.pack_into("<Q", bomb, header + 8, 0x2 | 0x800)  # SHF_ALLOC | SHF_COMPRESSED
    struct.pack_into("<Q", bomb, header + 24, len(bomb))
    struct.pack_into("<Q", bomb, header + 32, len(body))
    bomb += body
    paths = []
    for name, content in (("huge.so", huge), ("many.so", many), ("bomb.so", bomb)):
        path = tmp_path / name
        path.write_bytes(bytes(content))
        paths.append(path)
    return paths


def test_stack_of_a_process_mapping_crafted_files(tmp_path: Path) -> None:
    try:
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *map(str, _crafted(tmp_path))], stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"READY\n"

        def limit() -> None:  # 2 GiB of address space: the files claim far more
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

        done = subprocess.run(
            [sys.executable, "-m", "pysframe", "stack", str(holder.pid)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            preexec_fn=limit,
        )
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert done.stdout.startswith(f"PID {holder.pid} - process\nTID {holder.pid}:\n")
    assert "#1 " in done.stdout
