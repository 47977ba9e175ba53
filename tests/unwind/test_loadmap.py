"""Address spaces that do not list their files: the executable placed by address, permissions and
content, shared objects from the dynamic linker's r_debug list, the AArch64 address-space size;
and core files without NT_FILE (qemu-user's), with NT_ARM_PAC_MASK and s390x NT_PRFPREG notes."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from elf_build import Sec, Seg, build_elf
from pysframe.format.constants import Abi
from pysframe.unwind.corefile import CoreFile, CoreFileError
from pysframe.unwind.loadmap import (
    AddressSpace,
    ElfLayout,
    ExecutableMismatchError,
    Region,
    linked_objects,
    lookup_paths,
    place_executable,
    shared_object_mappings,
    va_bits_for,
    va_bits_from_pac_mask,
)
from pysframe.unwind.mappings import Mapping

EM_AARCH64, EM_S390 = 183, 22
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR = 1, 2, 3, 4, 6
R, W, X = 4, 2, 1
AT_PHDR, AT_PAGESZ, AT_BASE, AT_ENTRY = 3, 6, 7, 9
DT_DEBUG = 21
INTERP = b"/lib/ld-test.so.1\0"


def program(
    path: Path, *, base: int = 0x400000, e_type: int = 2, machine: int = EM_AARCH64,
    interp: bool = False, big_endian: bool = False,
) -> Path:
    """An executable (or shared object) with code at ``base`` (R X, file bytes 0-0x800) and
    data at ``base + 0x10800`` (R W, file bytes 0x800-0x900, its dynamic section first)."""
    segments = [
        Seg(PT_PHDR, flags=R, extra={"offset": 64, "vaddr": base + 64, "filesz": 56 * 5,
                                     "memsz": 56 * 5}),
        Seg(PT_LOAD, flags=R | X, extra={"offset": 0, "vaddr": base, "filesz": 0x800,
                                         "memsz": 0x800}),
        Seg(PT_LOAD, flags=R | W, extra={"offset": 0x800, "vaddr": base + 0x10800,
                                         "filesz": 0x100, "memsz": 0x200}),
        Seg(PT_DYNAMIC, flags=R | W, extra={"offset": 0x800, "vaddr": base + 0x10800,
                                            "filesz": 0x40, "memsz": 0x40}),
        Seg(PT_INTERP, ".interp", flags=R) if interp else Seg(0),
    ]
    sections = [
        Sec(".interp", 1, INTERP, addr=base + 0x400),
        Sec(".fill", 1, bytes(range(256)) * 10, align=16),
    ]
    image = build_elf(
        sections, machine=machine, e_type=e_type, segments=segments, entry=base + 0x100,
        big_endian=big_endian,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(image)
    return path


@dataclass
class Memory:
    """Sparse memory: (start, bytes) blocks; reads must fall in one block."""

    blocks: dict[int, bytes] = field(default_factory=dict)

    def put(self, address: int, data: bytes) -> Memory:
        self.blocks[address] = data
        return self

    def __call__(self, address: int, size: int) -> bytes:
        for start, data in self.blocks.items():
            if start <= address and address + size <= start + len(data):
                return data[address - start : address - start + size]
        raise OSError(f"nothing at {address:#x}")


NOTHING = Memory()
STATIC_REGIONS = (
    Region(0x400000, 0x401000, R | X),
    Region(0x401000, 0x410000, 0),
    Region(0x410000, 0x411000, R | W),
)


def space(
    memory: Memory = NOTHING, held: Memory = NOTHING, auxv: dict[int, int] | None = None,
    regions: tuple[Region, ...] | None = STATIC_REGIONS,
) -> AddressSpace:
    auxv = {AT_ENTRY: 0x400100} if auxv is None else auxv
    return AddressSpace("core", Abi.AARCH64_ENDIAN_LITTLE, memory, held, auxv, regions)


# -- the executable ------------------------------------------------------------------------------


def test_static_executable_placed_where_it_was_linked(tmp_path: Path) -> None:
    layout = ElfLayout.read(str(program(tmp_path / "prog")))
    assert place_executable(space(), layout) == 0
    assert layout.mappings(0, 4096) == [
        Mapping(0x400000, 0x400800, 0, layout.path),
        Mapping(0x410000, 0x410900, 0, layout.path),
    ]
    # The bytes the core holds are the file's: still placed.
    data = Path(layout.path).read_bytes()
    assert place_executable(space(held=Memory().put(0x400000, data[:0x800])), layout) == 0


@pytest.mark.parametrize(
    ("regions", "auxv", "held", "message"),
    [
        (STATIC_REGIONS, {AT_ENTRY: 0x400200}, None, "its entry point 0x400100 is not where core "
         "started (0x400200)"),
        ((Region(0x400000, 0x401000, R), *STATIC_REGIONS[1:]), None, None,
         "its r-x segment at 0x400000-0x401000 is mapped r-- at 0x400000"),
        (STATIC_REGIONS[:2], None, None,
         "its rw- segment at 0x410000-0x411000 is not mapped there"),
        (STATIC_REGIONS, None, bytes(0x800), "the bytes at 0x400000 are not its ELF header"),
    ],
)
def test_executable_that_does_not_fit(
    tmp_path: Path, regions: tuple[Region, ...], auxv: dict[int, int] | None,
    held: bytes | None, message: str,
) -> None:
    layout = ElfLayout.read(str(program(tmp_path / "prog")))
    memory = Memory().put(0x400000, held) if held is not None else NOTHING
    with pytest.raises(ExecutableMismatchError) as error:
        place_executable(space(held=memory, auxv=auxv, regions=regions), layout)
    assert str(error.value) == f"{layout.path}: is not the executable of core: {message}"


def test_executable_for_another_machine(tmp_path: Path) -> None:
    layout = ElfLayout.read(str(program(tmp_path / "prog", machine=EM_S390, big_endian=True)))
    with pytest.raises(ExecutableMismatchError, match="is for S390X_ENDIAN_BIG"):
        place_executable(space(), layout)


def test_position_independent_executable(tmp_path: Path) -> None:
    layout = ElfLayout.read(str(program(tmp_path / "pie", base=0, e_type=3)))
    base = 0x5500000000
    regions = (
        Region(0x1000, 0x2000, R | W),  # something else first
        Region(base, base + 0x1000, R | X),
        Region(base + 0x10000, base + 0x11000, R | W),
    )
    by_entry = space(auxv={AT_ENTRY: base + 0x100}, regions=regions)
    assert place_executable(by_entry, layout) == base
    by_phdr = space(auxv={AT_PHDR: base + 64}, regions=regions)
    assert place_executable(by_phdr, layout) == base
    by_address = space(auxv={}, regions=regions)
    assert place_executable(by_address, layout) == base
    assert layout.mappings(base, 4096)[1] == Mapping(base + 0x10000, base + 0x10900, 0, layout.path)


def test_remote_placement_needs_to_see_the_bytes(tmp_path: Path) -> None:
    layout = ElfLayout.read(str(program(tmp_path / "prog")))
    data = Path(layout.path).read_bytes()
    memory = Memory().put(0x400000, data[:0x800])
    assert place_executable(space(memory, memory, regions=None), layout) == 0
    with pytest.raises(ExecutableMismatchError, match="none of its headers can be read"):
        place_executable(space(regions=None), layout)


def test_remote_placement_by_the_reported_offset(tmp_path: Path) -> None:
    layout = ElfLayout.read(str(program(tmp_path / "pie", base=0, e_type=3)))
    data = Path(layout.path).read_bytes()
    memory = Memory().put(0x5500000000, data[:0x800])
    reported = AddressSpace("stub", Abi.AARCH64_ENDIAN_LITTLE, memory, memory, {}, None,
                            0x5500000000)
    assert place_executable(reported, layout) == 0x5500000000
    wrong = AddressSpace("stub", Abi.AARCH64_ENDIAN_LITTLE, memory, memory, {}, None, 0x1000)
    with pytest.raises(ExecutableMismatchError, match="none of its headers can be read"):
        place_executable(wrong, layout)


# -- shared objects ------------------------------------------------------------------------------

LIB_BASE = 0x5500100000


def linked_memory(entries: list[tuple[int, int, int]], names: dict[int, bytes],
                  version: int = 1) -> Memory:
    """The executable's dynamic section (DT_DEBUG) at 0x410800, r_debug at 0x420000, link_map
    entries (l_addr, l_name, l_ld) chained from 0x420100 (the last one back to the first)."""
    dynamic = struct.pack("<qQqQqQ", 1, 5, DT_DEBUG, 0x420000, 0, 0).ljust(0x40, b"\0")
    r_debug = struct.pack("<i4xQQi4xQ", version, 0x420100, 0, 0, 0)
    chain = b""
    for index, (bias, name, ld) in enumerate(entries):
        following = 0x420100 + 40 * ((index + 1) % len(entries))
        chain += struct.pack("<QQQQQ", bias, name, ld, following, 0)
    memory = Memory().put(0x410800, dynamic).put(0x420000, r_debug).put(0x420100, chain)
    for address, name in names.items():
        memory.put(address, name.ljust(0x100, b"\0"))
    return memory


def test_link_map_objects_and_their_files(tmp_path: Path) -> None:
    exe = ElfLayout.read(str(program(tmp_path / "prog", interp=True)))
    sysroot = tmp_path / "sysroot"
    program(sysroot / "lib/libfoo.so", base=0, e_type=3)
    # An object the sysroot holds for another machine, found as named instead.
    elsewhere = program(tmp_path / "elsewhere/libbar.so", base=0, e_type=3)
    program(sysroot / str(elsewhere).lstrip("/"), base=0, e_type=3, machine=EM_S390,
            big_endian=True)
    bar_base = LIB_BASE + 0x100000
    entries = [
        (0, 0x430000, 0x410800),  # the executable: no name
        (LIB_BASE, 0x430100, LIB_BASE + 0x10800),
        (bar_base + 0x5000, 0x430200, bar_base + 0x10800),  # l_ld says where it is
        (0x5500300000, 0x430300, 0x5500310800),  # no file anywhere
        (0x5500400000, 0x430400, 0x5500410800),  # linux-vdso.so.1: not a file, no mapping
    ]
    names = {0x430000: b"", 0x430100: b"/lib/libfoo.so", 0x430200: str(elsewhere).encode(),
             0x430300: b"/lib/libgone.so", 0x430400: b"linux-vdso.so.1"}
    memory = linked_memory(entries, names)
    listed = linked_objects(space(memory), exe, 0)
    assert [(o.bias, o.name) for o in listed] == [
        (LIB_BASE, "/lib/libfoo.so"), (bar_base + 0x5000, str(elsewhere)),
        (0x5500300000, "/lib/libgone.so"), (0x5500400000, "linux-vdso.so.1"),
    ]
    mappings = shared_object_mappings(space(memory), exe, 0, str(sysroot))
    foo = str(sysroot / "lib/libfoo.so")
    assert mappings == [
        Mapping(LIB_BASE, LIB_BASE + 0x800, 0, foo),
        Mapping(LIB_BASE + 0x10000, LIB_BASE + 0x10900, 0, foo),
        Mapping(bar_base, bar_base + 0x800, 0, str(elsewhere)),
        Mapping(bar_base + 0x10000, bar_base + 0x10900, 0, str(elsewhere)),
        Mapping(0x5500300000, 0x5500310800, 0, str(sysroot / "lib/libgone.so")),
    ]


def test_before_the_dynamic_linker_the_interpreter_is_at_at_base(tmp_path: Path) -> None:
    exe = ElfLayout.read(str(program(tmp_path / "prog", interp=True)))
    sysroot = tmp_path / "sysroot"
    interpreter = program(sysroot / "lib/ld-test.so.1", base=0, e_type=3)
    unfilled = linked_memory([(0, 0x430000, 0x410800)], {0x430000: b""}, version=0)
    base = 0x5500000000
    found = space(unfilled, auxv={AT_ENTRY: 0x400100, AT_BASE: base})
    assert linked_objects(found, exe, 0) == []
    assert shared_object_mappings(found, exe, 0, str(sysroot))[0] == Mapping(
        base, base + 0x800, 0, str(interpreter)
    )
    # No DT_DEBUG readable and no AT_BASE: nothing.
    assert shared_object_mappings(space(), exe, 0, str(sysroot)) == []


def test_unreadable_link_map_ends_the_list(tmp_path: Path) -> None:
    exe = ElfLayout.read(str(program(tmp_path / "prog")))
    entries = [(0, 0x430000, 0), (LIB_BASE, 0x430100, 0)]
    memory = linked_memory(entries, {0x430000: b""})  # the second name is unreadable
    assert linked_objects(space(memory), exe, 0) == []


def test_address_space_sizes_and_lookup_paths() -> None:
    assert va_bits_from_pac_mask(0x007F000000000000) == 48
    assert va_bits_from_pac_mask(0xFF7FFF8000000000) == 39
    assert va_bits_from_pac_mask(0) is None
    assert va_bits_for([0x5500802000, 0x400000]) == 39
    assert va_bits_for([0xFFFFFFFFF000]) == 48
    assert va_bits_for([1 << 50]) == 52
    assert va_bits_for([]) == 36
    assert lookup_paths("/lib/libc.so.6", "/sysroot") == ["/sysroot/lib/libc.so.6",
                                                          "/lib/libc.so.6"]
    assert lookup_paths("/lib/libc.so.6", None) == ["/lib/libc.so.6"]
    assert lookup_paths("libc.so.6", "/sysroot") == ["/sysroot/libc.so.6"]


# -- core files without NT_FILE ------------------------------------------------------------------


def note(name: bytes, note_type: int, desc: bytes, order: str = "<") -> bytes:
    name += b"\0"
    pad = (-len(name)) % 4
    return (struct.pack(order + "III", len(name), len(desc), note_type) + name + bytes(pad)
            + desc + bytes((-len(desc)) % 4))


def core_file(path: Path, notes: bytes, *, machine: int = EM_AARCH64,
              big_endian: bool = False) -> Path:
    """A core with the given notes, the code segment not dumped (as qemu writes them) and a
    dumped data segment."""
    segments = [
        Seg(PT_NOTE, ".notes", flags=0),
        Seg(PT_LOAD, flags=R | X, extra={"vaddr": 0x400000, "memsz": 0x1000}),
        Seg(PT_LOAD, flags=0, extra={"vaddr": 0x401000, "memsz": 0xF000}),
        Seg(PT_LOAD, ".data", flags=R | W),
        Seg(PT_LOAD, flags=R | W, extra={"vaddr": 0x5500001000, "memsz": 0x801000}),
    ]
    sections = [Sec(".notes", 7, notes, align=4),
                Sec(".data", 1, bytes(0x1000), addr=0x410000, align=4096)]
    path.write_bytes(build_elf(sections, machine=machine, e_type=4, segments=segments,
                               strip_section_headers=True, big_endian=big_endian))
    return path


def prstatus(pid: int, registers: list[int], order: str = "<") -> bytes:
    head = bytearray(112)
    struct.pack_into(order + "i", head, 32, pid)
    return bytes(head) + b"".join(struct.pack(order + "Q", r) for r in registers)


AUXV = struct.pack("<QQQQQQ", AT_ENTRY, 0x400100, AT_PAGESZ, 4096, 0, 0)


def test_core_without_nt_file_places_the_executable(tmp_path: Path) -> None:
    exe = program(tmp_path / "prog")
    registers = [*range(31), 0x7000, 0x400110, 0]
    notes = note(b"CORE", 1, prstatus(77, registers)) + note(b"CORE", 6, AUXV)
    core = core_file(tmp_path / "core", notes)
    with pytest.raises(CoreFileError, match="no NT_FILE note"):
        CoreFile(str(core))
    with CoreFile(str(core), str(exe)) as opened:
        assert opened.mappings == [
            Mapping(0x400000, 0x400800, 0, str(exe)),
            Mapping(0x410000, 0x410900, 0, str(exe)),
        ]
        assert opened.executable == str(exe)
        assert opened.pid == 77 and opened.threads[0].registers.pc == 0x400110
        # Code the core does not hold is read from the executable.
        assert opened.read_memory(0x400000, 4) == b"\x7fELF"
        with pytest.raises(OSError):
            opened.read_dumped(0x400000, 4)
        assert opened.read_dumped(0x410000, 4) == bytes(4)
        assert opened.pac_mask is None and opened.va_bits == 39
    other = program(tmp_path / "other", base=0x500000)
    with pytest.raises(ExecutableMismatchError, match="entry point"):
        CoreFile(str(core), str(other))


def test_core_pac_mask_note(tmp_path: Path) -> None:
    exe = program(tmp_path / "prog")
    mask = note(b"LINUX", 0x406, struct.pack("<QQ", 0x007FFF8000000000, 0x007FFF8000000000))
    notes = note(b"CORE", 1, prstatus(1, [0] * 34)) + note(b"CORE", 6, AUXV) + mask
    with CoreFile(str(core_file(tmp_path / "core", notes)), str(exe)) as opened:
        assert opened.pac_mask == 0x007FFF8000000000 and opened.va_bits == 39


def test_core_s390x_floating_point_registers(tmp_path: Path) -> None:
    exe = program(tmp_path / "prog", machine=EM_S390, big_endian=True)
    gregs = [0x0705000180000000, 0x400110, *range(0x100, 0x110)]
    fpregs = struct.pack(">I4x16Q", 0, *range(0xF00, 0xF10))
    auxv = struct.pack(">QQQQ", AT_ENTRY, 0x400100, 0, 0)
    notes = (note(b"CORE", 1, prstatus(5, gregs, ">"), ">") + note(b"CORE", 2, fpregs, ">")
             + note(b"CORE", 6, auxv, ">"))
    core = core_file(tmp_path / "core", notes, machine=EM_S390, big_endian=True)
    with CoreFile(str(core), str(exe)) as opened:
        registers = opened.threads[0].registers
        assert (registers.pc, registers.sp, registers.lr) == (0x400110, 0x10F, 0x10E)
        extra = dict(registers.extra)
        # f0 is DWARF 16, f1 is 20, f8 is 24, f15 is 31.
        assert (extra[16], extra[20], extra[24], extra[31]) == (0xF00, 0xF01, 0xF08, 0xF0F)


def test_core_with_nt_file_paths_under_the_sysroot(tmp_path: Path) -> None:
    sysroot = tmp_path / "sysroot"
    library = program(sysroot / "lib/libfoo.so", base=0, e_type=3)
    exe = program(tmp_path / "prog")
    files = [(0x400000, 0x401000, 0, b"/usr/bin/prog"), (0x5500000000, 0x5500001000, 0,
                                                         b"/lib/libfoo.so"),
             (0x5500100000, 0x5500101000, 0, b"/lib/libnone.so")]
    nt_file = struct.pack("<QQ", len(files), 4096)
    nt_file += b"".join(struct.pack("<QQQ", *entry[:3]) for entry in files)
    nt_file += b"".join(entry[3] + b"\0" for entry in files)
    notes = (note(b"CORE", 1, prstatus(1, [0] * 34)) + note(b"CORE", 6, AUXV)
             + note(b"CORE", 0x46494C45, nt_file))
    core = core_file(tmp_path / "core", notes)
    with CoreFile(str(core), str(exe), str(sysroot)) as opened:
        assert [m.path for m in opened.mappings] == [
            str(exe), str(library), "/lib/libnone.so"
        ]
