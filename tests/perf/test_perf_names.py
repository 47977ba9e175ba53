"""``pysframe perf script``'s function names against perf 6.1's own.

Recordings made here (``perf record --call-graph dwarf``) of four builds, each compared line
by line with ``perf script --no-inline``:

* ``c``: tests/data/perf/profiled.c and its shared library (threads, qsort callbacks, deep
  recursion), PIE, GNU ld: frames in the program, the library, libc (named from its separate
  debug file: libc6-dbg), ld.so (its ``_start``, a NOTYPE label) and the vDSO;
* ``nopie``: the same, not position-independent (ET_EXEC);
* ``lld``: the same linked by lld (read-only data and code on one file page, so that link-time
  addresses and file offsets differ, and a ``.plt`` whose entries have no size);
* ``cxx``: tests/data/perf/cxxprog.cc (templates, a lambda called back from std::sort,
  virtual calls, exceptions thrown and caught), demangled as perf demangles (no parameter
  list at the top level).

For every frame both list at the same place with the same address and module, the names must
be equal: all of them, in all four (100%).  Where the walks differ (a frame one side has and
the other has not), there is no name to compare; those samples are counted apart and must
stay few (the walks are tested against perf's in tests/perf/test_perf_walk.py).

Then perf's names for every symbol boundary of system libraries (libc with its debug file,
ld.so, libstdc++) and of the built programs, from hand-built perf.data files (a sample at each
address; perf script names it): all equal.  Then units on hand-built symbol lists: perf's
choice among aliases, its fixups, its tree walk where symbols overlap.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perf_oracles
from perf_support import IP, PERF, PERIOD, TID, TIME, Attr, PerfFile, Unavailable, check_perf
from pysframe.elf.reader import ElfReader
from pysframe.perf.kernel import parse_kallsyms
from pysframe.perf.modules import ModuleFinder
from pysframe.perf.symbols import candidate_files
from pysframe.perf.symtab import (
    STB_GLOBAL,
    STB_LOCAL,
    STB_WEAK,
    Candidate,
    PerfSymbols,
    SymbolSet,
    _RbTree,
    choose_best_symbol,
)
from pysframe.unwind import demangle as demangle_module
from pysframe.unwind.demangle import demangle_like_perf, demangle_like_perf_unbounded

DATA = Path(__file__).parent.parent / "data" / "perf"
#: The flags of every build.
FLAGS = ["-O2", "-fomit-frame-pointer"]


# -- builds and recordings -------------------------------------------------------------------


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise Unavailable(f"cannot build: {' '.join(command[:3])}...: {done.stderr[:200]}")


def _build(out: Path, kind: str) -> Path:
    """Build program ``kind`` in ``out`` (see the module's docstring); its path."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        raise Unavailable("gcc is not installed")
    out.mkdir()
    if kind == "cxx":
        _run(["g++", *FLAGS, "-o", str(out / "cxxprog"), str(DATA / "cxxprog.cc")])
        return out / "cxxprog"
    extra = {"c": [], "nopie": [], "lld": ["-fuse-ld=lld"]}[kind]
    if kind == "lld" and shutil.which("ld.lld") is None:
        raise Unavailable("lld is not installed")
    _run(["gcc", *FLAGS, *extra, "-fPIC", "-shared", "-o", str(out / "libprofiled.so"),
          str(DATA / "profiledlib.c")])  # fmt: skip
    program = ["-no-pie"] if kind == "nopie" else []
    _run(["gcc", *FLAGS, *extra, *program, "-pthread", "-o", str(out / "profiled"),
          str(DATA / "profiled.c"), f"-L{out}", "-lprofiled", "-Wl,-rpath,$ORIGIN"])  # fmt: skip
    return out / "profiled"


def _record(program: Path) -> Path:
    """Record ``program`` on one CPU: the records of one CPU are in time order in the file,
    which is the order ``pysframe perf`` takes them in (perf sorts the records of all CPUs
    by time: with several, a thread's exec or mappings may come in the file after its first
    samples, whose frames are then not comparable)."""
    check_perf()
    data = program.parent / "perf.data"
    one_cpu = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    done = subprocess.run(
        [*one_cpu, PERF, "record", "-q", "-e", "cpu-clock", "-c", "100000", "--call-graph",
         "dwarf", "-o", str(data), "--", str(program), "0.5"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode:
        raise Unavailable(f"perf record failed: {done.stderr[:200]}")
    return data


KINDS = ("c", "nopie", "lld", "cxx")


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("perf-names")
    try:
        check_perf()
        return {kind: _build(out / kind, kind) for kind in KINDS}
    except Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture(scope="module")
def recordings(builds: dict[str, Path]) -> dict[str, Path]:
    try:
        return {kind: _record(program) for kind, program in builds.items()}
    except Unavailable as why:
        pytest.skip(str(why))


# -- perf script's text --------------------------------------------------------------------

#: A frame line: ``\t%16lx NAME (MODULE)``.
_FRAME = re.compile(r"^\t\s*([0-9a-f]+) (.*) \((.*)\)$")
Frame = tuple[int, str, str]  # address, name (with +0xOFFSET), module


def _samples(text: str) -> dict[tuple[int, str], list[Frame]]:
    """Each sample's frames by (thread, time), from perf script's text."""
    out: dict[tuple[int, str], list[Frame]] = {}
    frames: list[Frame] = []
    for line in text.splitlines():
        if not line:
            continue
        found = _FRAME.match(line)
        if found:
            frames.append((int(found[1], 16), found[2], found[3]))
            continue
        header = re.match(r"^.*?\s(\d+)\s+(\d+\.\d+):", line)
        assert header, line
        frames = out.setdefault((int(header[1]), header[2]), [])
    return out


def _script_texts(path: Path) -> tuple[str, str]:
    ours = subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", "script", "--no-inline", str(path)],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout  # fmt: skip
    theirs = subprocess.run(
        [PERF, "script", "--no-inline", "-i", str(path)],
        capture_output=True, text=True, timeout=600, check=True, errors="replace",
    ).stdout  # fmt: skip
    return ours, theirs


@pytest.mark.parametrize("kind", KINDS)
def test_names_equal_perfs(recordings: dict[str, Path], kind: str) -> None:
    ours, theirs = (_samples(text) for text in _script_texts(recordings[kind]))
    assert ours.keys() == theirs.keys()
    named = equal = walked_apart = 0
    different: list[tuple[Frame, Frame]] = []
    for key, perf_frames in theirs.items():
        mine = ours[key]
        if mine != perf_frames:
            walked_apart += 1
        for own, other in zip(mine, perf_frames, strict=False):
            if own[0] != other[0] or own[2] != other[2]:
                break  # the walks part here: no names to compare beyond
            if other[1] != "[unknown]":
                named += 1
                equal += own[1] == other[1]
                if own[1] != other[1]:
                    different.append((own, other))
    assert named > 1000
    assert equal == named, different[:10]
    assert walked_apart <= len(theirs) // 20, walked_apart


def test_the_recordings_meet_the_cases(recordings: dict[str, Path]) -> None:
    """The frames the module's docstring promises are there to be compared."""
    text = _script_texts(recordings["c"])[1] + _script_texts(recordings["cxx"])[1]
    for expected in (
        "__GI___qsort_r+", "__libc_start_main@@GLIBC_2.34+", " _start+", "(/usr/lib/x86_64",
        "sorted_sum<int>", "{lambda(int, int)#1}", "__introsort_loop<",
    ):  # fmt: skip
        assert expected in text, expected


# -- hand-built recordings: perf's name for every symbol boundary ----------------------------

#: Where the hand-built recordings map a file.
BASE = 0x7F0000000000


def _perf_names(tmp: Path, path: str, offsets: list[int], size: int) -> list[str]:
    """``NAME+0xOFFSET`` or ``[unknown]`` that perf script gives a sample at each file offset
    of ``path``, mapped whole at :data:`BASE` by a hand-built recording."""
    perf = PerfFile()
    # perf 6.1 reads attributes up to PERF_ATTR_SIZE_VER7: a VER6 one (120 bytes) here.
    attr = perf.add_attr(Attr(IP | TID | TIME | PERIOD, size=120))
    perf.comm(attr, 42, 42, "prog", time=1)
    perf.mmap2(attr, 42, 42, BASE, (size + 0xFFF) & ~0xFFF, 0, path, prot=5, time=2)
    for number, offset in enumerate(offsets):
        perf.sample(attr, ip=BASE + offset, pid=42, tid=42, time=10 + number, period=1)
    data = tmp / "names.data"
    data.write_bytes(perf.build())
    text = subprocess.run(
        [PERF, "script", "-i", str(data), "-F", "ip,sym,symoff", "--no-inline"],
        capture_output=True, text=True, timeout=300, check=True, errors="replace",
    ).stdout  # fmt: skip
    return [line.strip().split(" ", 1)[1] for line in text.splitlines() if line.strip()]


def _our_names(path: str, offsets: list[int], size: int) -> list[str]:
    finder = ModuleFinder()
    module = finder.module(path, BASE, BASE + size, 0, None)
    assert module is not None
    table = finder.perf_symbols(module)
    assert table is not None
    out = []
    for offset, index in zip(
        offsets, table.find_many(np.array(offsets, np.uint64)).tolist(), strict=True
    ):
        if index < 0:
            out.append("[unknown]")
            continue
        start, end = table.start_of(index), int(table.ends[index])
        # Past its symbol's end (an empty symbol at its address), perf takes the map's
        # start off the offset too (__symbol__fprintf_symname_offs).
        shown = offset - start if offset < end else (offset - BASE - start) % (1 << 64)
        out.append(f"{table.name_of(index)}+{shown:#x}")
    return out


def _boundaries(path: str, seed: int = 7) -> list[int]:
    """File offsets around every symbol perf has for ``path``, and some at random."""
    finder = ModuleFinder()
    size = Path(path).stat().st_size
    module = finder.module(path, BASE, BASE + size, 0, None)
    assert module is not None
    table = finder.perf_symbols(module)
    assert table is not None and len(table) > 10
    offsets = set()
    for start, end in zip(table.starts.tolist(), table.ends.tolist(), strict=True):
        offsets.update(o for o in (start - 1, start, start + 1, (start + end) // 2, end - 1, end)
                       if 0 <= o < size)  # fmt: skip
    chance = random.Random(seed)
    offsets.update(chance.randrange(size) for _ in range(2000))
    return sorted(offsets)


SYSTEM = ("libc.so.6", "ld-linux-x86-64.so.2", "libstdc++.so.6", "libm.so.6")


@pytest.mark.parametrize("library", SYSTEM)
def test_every_boundary_of_system_libraries(tmp_path: Path, library: str) -> None:
    path = f"/usr/lib/x86_64-linux-gnu/{library}"
    if not Path(path).exists():
        pytest.skip(f"{path} is not here")
    try:
        check_perf()
    except Unavailable as why:
        pytest.skip(str(why))
    offsets = _boundaries(path)
    size = Path(path).stat().st_size
    theirs = _perf_names(tmp_path, path, offsets, size)
    ours = _our_names(path, offsets, size)
    assert len(theirs) == len(ours) == len(offsets)
    different = [(hex(o), a, b) for o, a, b in zip(offsets, ours, theirs, strict=True) if a != b]
    assert not different, different[:10]
    assert sum(name != "[unknown]" for name in theirs) > len(offsets) // 2


@pytest.mark.parametrize("kind", KINDS)
def test_every_boundary_of_the_builds(tmp_path: Path, builds: dict[str, Path], kind: str) -> None:
    for path in sorted(str(p) for p in builds[kind].parent.iterdir() if p.suffix != ".data"):
        offsets = _boundaries(path)
        size = Path(path).stat().st_size
        theirs = _perf_names(tmp_path, path, offsets, size)
        ours = _our_names(path, offsets, size)
        different = [
            (hex(o), a, b) for o, a, b in zip(offsets, ours, theirs, strict=True) if a != b
        ]
        assert not different, (path, different[:10])


# -- units: perf's choices on hand-built symbol lists ----------------------------------------


@pytest.mark.parametrize(("a", "b", "keeps_a"), [
    (Candidate(0, STB_GLOBAL, "sized"), Candidate(8, STB_LOCAL, "x"), False),  # non-empty first
    (Candidate(8, STB_WEAK, "a"), Candidate(8, STB_LOCAL, "b"), False),  # then not weak
    (Candidate(8, STB_LOCAL, "a"), Candidate(8, STB_GLOBAL, "b"), False),  # then global
    (Candidate(8, STB_GLOBAL, "__x"), Candidate(8, STB_GLOBAL, "_yy"), False),  # fewer _
    (Candidate(8, STB_LOCAL, "__GI___qsort_r"), Candidate(8, STB_LOCAL, "__qsort_r"), True),
    (Candidate(8, STB_GLOBAL, "ab"), Candidate(8, STB_GLOBAL, "cd"), True),  # a tie: the first
    (Candidate(8, STB_GLOBAL, "SyS_read"), Candidate(8, STB_GLOBAL, "sys_read"), False),
    (Candidate(8, STB_GLOBAL, "é"), Candidate(8, STB_GLOBAL, "ab"), True),  # 2 bytes each: a tie
])  # fmt: skip
def test_choose_best_symbol(a: Candidate, b: Candidate, keeps_a: bool) -> None:
    assert choose_best_symbol(a, b) is keeps_a


def _table(symbols: SymbolSet) -> list[tuple[int, int, str]]:
    table = symbols.table()
    return list(zip(table.starts.tolist(), table.ends.tolist(), table.names, strict=True))


def test_fixups_after_each_pass() -> None:
    symbols = SymbolSet()
    # .symtab: an empty label, a sized function, two aliases of one address, the last empty.
    symbols.add([0x100, 0x108, 0x200, 0x200, 0x3000], [0, 0x40, 0x20, 0x20, 0],
                [STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GLOBAL, STB_GLOBAL],
                ["label", "f", "alias_weak", "alias", "last"])  # fmt: skip
    symbols.fix()
    assert _table(symbols) == [
        (0x100, 0x108, "label"),  # empty: up to the next start
        (0x108, 0x148, "f"),
        (0x200, 0x220, "alias"),  # the global one
        (0x3000, 0x4000, "last"),  # empty and last: next page boundary, plus a page
    ]
    # .dynsym: the same address again, with a versioned, longer name; a new empty symbol.
    symbols.add([0x200, 0x400], [0x20, 0], [STB_GLOBAL, STB_GLOBAL],
                ["alias@@V_1", "dyn"])  # fmt: skip
    symbols.fix()
    assert [s[2] for s in _table(symbols)] == ["label", "f", "alias@@V_1", "dyn", "last"]
    assert _table(symbols)[3] == (0x400, 0x3000, "dyn")
    # The PLT comes after, with no fixups: an entry inside a stretched symbol stays there.
    symbols.add([0x1000], [0x10], [STB_GLOBAL], ["puts@plt"], named=True)
    table = symbols.table()
    assert not table.plain
    (found,) = table.find_many(np.array([0x1004], np.uint64)).tolist()
    assert [found] == perf_oracles.symbols_find(symbols, [0x1004])
    assert table.names[found] in ("dyn", "puts@plt")


def test_kallsyms_aliases_and_module_boundary() -> None:
    table = parse_kallsyms(
        b"ffffffff81000000 T _stext\n"
        b"ffffffff81000010 T memcpy\n"
        b"ffffffff81000010 T __pi_memcpy\n"  # the last listed of one address wins
        b"ffffffff81000040 t last_of_kernel\n"
        b"ffffffffc0000000 t mod_fn\t[mod]\n"
        b"ffffffffc0000100 W mod_weak\t[mod]\n"
    )
    assert table.names == ["_stext", "__pi_memcpy", "last_of_kernel", "mod_fn", "mod_weak"]
    assert table.modules[3] == "[mod]"
    # Empty before a module starts: the page after its end, not the module's start.
    assert int(table.ends[2]) == 0xFFFFFFFF81002000
    assert int(table.ends[-1]) == 0xFFFFFFFFC0002000


def test_the_tree_walk_depends_on_the_order_of_insertion() -> None:
    """perf's symbols__find walks its red-black tree: where a symbol holds another, an
    address in the outer one past the inner one is found only if the walk meets the outer
    one first."""
    entries = [(0x100, 0x100, "outer"), (0x150, 0x10, "inner")]
    # Outer first: the root; the walk stops at it for any address it holds.  Inner first:
    # the root; past its end the walk goes right, away from outer (its left child).
    for order, expected in (([0, 1], ["outer", "outer", "outer"]),
                            ([1, 0], ["outer", "inner", None])):  # fmt: skip
        symbols = SymbolSet()
        for number in order:
            start, size, name = entries[number]
            symbols.add([start], [size], [STB_GLOBAL], [name])
        table = symbols.table()
        addresses = [0x120, 0x155, 0x180]
        found = table.find_many(np.array(addresses, np.uint64)).tolist()
        assert [table.names[i] if i >= 0 else None for i in found] == expected
        assert found == perf_oracles.symbols_find(symbols, addresses)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30), st.booleans()), min_size=1,
                max_size=80), st.randoms(use_true_random=False))  # fmt: skip
def test_tree_stays_red_black_and_lookups_agree(
    entries: list[tuple[int, int, bool]], chance: random.Random
) -> None:
    symbols = SymbolSet()
    symbols.add([e[0] for e in entries], [e[1] for e in entries],
                [STB_GLOBAL if e[2] else STB_LOCAL for e in entries],
                [f"s{i}" for i in range(len(entries))])  # fmt: skip
    symbols.fix()
    perf_oracles.replayed_tree(symbols, _check_red_black)
    table = symbols.table()
    addresses = [chance.randrange(0, 100) for _ in range(50)]
    assert table.find_many(np.array(addresses, np.uint64)).tolist() == (
        perf_oracles.symbols_find(symbols, addresses)
    )


def test_a_table_read_back_from_its_parts_finds_the_same_symbols() -> None:
    """The cache's form of a table (PerfSymbols.parts) reads back to the same lookups, the
    tree of overlapping symbols included; parts that make no table are refused."""
    symbols = SymbolSet()
    # An outer function holding an inner one, inserted inner first (the tree decides), and
    # a plain one after them.
    symbols.add([0x150, 0x100, 0x400], [0x10, 0x100, 0x20], [STB_GLOBAL] * 3,
                ["inner", "outer", "plain"])  # fmt: skip
    table = symbols.table()
    assert not table.plain
    kept = PerfSymbols.from_parts(table.parts())
    addresses = [0x0FF, 0x120, 0x155, 0x180, 0x410, 0x420]
    expected = perf_oracles.symbols_find(symbols, addresses)
    assert table.find_many(np.array(addresses, np.uint64)).tolist() == expected
    assert kept.find_many(np.array(addresses, np.uint64)).tolist() == expected
    assert kept.names == table.names
    parts = table.parts()
    count = len(parts[4]) // 8  # every symbol's start: the operations name symbols below it
    for at, damaged in (
        (6, np.array([0, count], dtype="<i8").tobytes()),  # inserts a symbol that is not there
        (6, np.array([0, -count - 1], dtype="<i8").tobytes()),  # erases one that is not there
        (3, json.dumps(["inner", 1, "plain"]).encode()),  # a name that is no text
        (3, json.dumps(["inner", "plain"]).encode()),  # a name short
    ):
        with pytest.raises(ValueError, match="not the parts of a symbol table"):
            PerfSymbols.from_parts([*parts[:at], damaged, *parts[at + 1 :]])


def _check_red_black(tree: _RbTree, alive: list[int]) -> None:
    """Parent links, no red node with a red child, one black height, keys in order."""
    seen: list[int] = []

    def walk(node: int, parent: int) -> int:
        if node < 0:
            return 1
        assert tree.parent[node] == parent
        if tree.red[node]:
            assert not any(c >= 0 and tree.red[c] for c in (tree.left[node], tree.right[node]))
        left = walk(tree.left[node], node)
        seen.append(node)
        right = walk(tree.right[node], node)
        assert left == right
        return left + (not tree.red[node])

    assert tree.root < 0 or not tree.red[tree.root]
    walk(tree.root, -1)
    assert sorted(seen) == sorted(alive)
    keys = [tree.starts[node] for node in seen]
    assert keys == sorted(keys)


def test_candidate_files_in_perfs_order(tmp_path: Path) -> None:
    """dso__read_binary_type_filename's places, in binary_type_symtab order, under --symfs."""
    build_id = bytes(range(1, 21))
    hexed = build_id.hex()
    symfs = tmp_path / "root"
    cache = tmp_path / "cache" / ".build-id" / hexed[:2] / hexed[2:]
    places = [
        cache / "elf", cache / "debug",
        symfs / "usr/lib/debug/usr/lib/libx.so.debug",
        symfs / "usr/lib/debug/usr/lib/libx.so",
        symfs / f"usr/lib/debug/.build-id/{hexed[:2]}/{hexed[2:]}.debug",
        symfs / "usr/lib/libx.so",
        symfs / "usr/lib/.debug/libx.so",
        symfs / "usr/lib/debug/lib/libx.so",
    ]  # fmt: skip
    for place in places:
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_bytes(b"not ELF")  # only being regular files counts here
    found = candidate_files("/usr/lib/libx.so", build_id, debug_dir=str(tmp_path / "cache"),
                            symfs=str(symfs))  # fmt: skip
    assert found == [str(p) for p in places]
    assert candidate_files("/usr/lib/libx.so", None, debug_dir=str(tmp_path / "cache"),
                           symfs=str(symfs))[0] == str(places[2])  # fmt: skip


# -- demangling as perf does ----------------------------------------------------------------


@pytest.mark.parametrize(("mangled", "expected"), [
    ("_ZZ4workRSt6vectorIiSaIiEEiENKUliiE_clEii",
     "work(std::vector<int, std::allocator<int> >&, int)::{lambda(int, int)#1}::operator()"),
    ("_Z10sorted_sumIiElRSt6vectorIT_SaIS1_EEi", "sorted_sum<int>"),
    ("_ZNK6shapes3BoxIiE4areaERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
     "shapes::Box<int>::area"),
    ("_Z3fooi.cold", "foo"),  # no clone suffix
    ("_Z3fooi@@VERS_1", "foo"),  # libiberty reads no further than the name
    ("_ZTV3Foo", "vtable for Foo"),
    ("camlFoo__bar$41", "Foo.barA"),  # OCaml's names
    ("main", None), ("__libc_start_main@@GLIBC_2.34", None), ("_GLOBAL__sub_I_main", None),
])  # fmt: skip
def test_demangle_like_perf(mangled: str, expected: str | None) -> None:
    assert demangle_like_perf(mangled) == expected


def test_the_fallback_demangling_agrees_with_libiberty() -> None:
    """Without libiberty, names are cut from __cxa_demangle's: nearly always the same."""
    if demangle_like_perf("_Z1fv") is None:
        pytest.skip("no demangler here")
    if demangle_module._libiberty is None:
        pytest.skip("libiberty (the system's libbfd) is not here to compare with")
    path = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
    if not Path(path).exists():
        pytest.skip(f"{path} is not here")
    from pysframe.elf.symbols import read_symbol_entries

    with ElfReader.open(path) as image:
        entries = read_symbol_entries(image, ".dynsym")
    assert entries is not None
    names = [n for n in entries.names(np.arange(len(entries))) if n.startswith("_Z")]
    exact = [demangle_like_perf_unbounded(n) for n in names]
    saved = demangle_module._libiberty
    demangle_module._libiberty = None
    try:
        cut = [demangle_like_perf_unbounded(n) for n in names]
    finally:
        demangle_module._libiberty = saved
    agree = sum(a == b for a, b in zip(exact, cut, strict=True))
    assert len(names) > 3000 and agree >= len(names) * 0.999, len(names) - agree
