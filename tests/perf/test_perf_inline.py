"""``pysframe perf``'s inline frames against perf 6.1's, and :mod:`pysframe.elf.addr2line`
against binutils' ``addr2line``.

perf 6.1 as Debian builds it (without libbfd) asks a spawned ``addr2line -e FILE -i -f`` about
every user frame and prints its answers in the frame's place (util/srcline.c, util/machine.c
append_inlines).  Recordings made here (``perf record --call-graph dwarf``, one CPU) of:

* ``c``: tests/data/perf/inlined.c and its library inlinedlib.c, ``-O2 -g``: a chain of static
  inline helpers, some from a header (inlined.h), inside a function GCC clones
  (``hot.constprop.0``, DWARF name ``hot``), and the same helpers inlined in a shared library;
* ``cxx``: tests/data/perf/profiledcxx.cc, ``-O2 -g``: templates and lambdas inlined through
  std::sort and std::function, whose DW_AT_name-only names BFD names by a symbol the first
  time and by their DWARF name after.

``pysframe perf script`` (inline frames by default) must be perf script's text for at least
99% of the samples, and each sample that differs must differ in ``--no-inline`` text too (its
walk differs: tests/perf/test_perf_walk.py is about those).  ``perf report --children`` rows, the
``(inlined)`` ones included, must be perf's; so must each frame's source line as ``perf script
-F +srcline`` prints it.

Then the answers of :class:`pysframe.elf.addr2line.Addr2Line` against ``addr2line -f -i``,
asked the same addresses in the same order, on those builds and on the system's debug files
(libc6-dbg), where they exist.
"""

from __future__ import annotations

import difflib
import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import require_program, unavailable
from perf_support import PERF, Unavailable, check_perf
from pysframe.elf.addr2line import Addr2Line
from pysframe.elf.addr2line_tables import UnitTable, arange_add
from pysframe.elf.reader import ElfReader
from pysframe.perf.analyze import KeptAddr2Line, Options, profile_recording
from pysframe.perf.script import script_fields, script_text
from pysframe.sources import cache

DATA = Path(__file__).parent.parent / "data" / "perf"
KINDS = ("c", "cxx")


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise Unavailable("gcc", f"cannot build: {' '.join(command[:3])}...: {done.stderr[:200]}")


def _build(out: Path, kind: str) -> Path:
    """Build program ``kind`` (see the module's docstring) in ``out``; its path."""
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        raise Unavailable("gcc", "gcc is not installed")
    out.mkdir()
    flags = ["-O2", "-g", "-fomit-frame-pointer"]
    if kind == "cxx":
        _run(["g++", *flags, "-pthread", "-o", str(out / "cxxprog"),
              str(DATA / "profiledcxx.cc")])  # fmt: skip
        return out / "cxxprog"
    _run(["gcc", *flags, "-fPIC", "-shared", "-o", str(out / "libinlined.so"),
          str(DATA / "inlinedlib.c")])  # fmt: skip
    _run(["gcc", *flags, "-o", str(out / "inlined"), str(DATA / "inlined.c"), f"-L{out}",
          "-linlined", "-Wl,-rpath,$ORIGIN"])  # fmt: skip
    return out / "inlined"


def _record(program: Path) -> Path:
    """Record ``program`` on one CPU (so that the file's records are in the order pysframe
    takes them: tests/perf/test_perf_names.py says why), without lazy binding: ld.so's trampoline,
    where perf 6.1's walks stop early and pysframe's go on, is never entered (a sample there
    made the texts differ, and the comparisons below fail, on some recordings)."""
    check_perf()
    data = program.parent / "perf.data"
    one_cpu = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    done = subprocess.run(
        [*one_cpu, PERF, "record", "-q", "-e", "cpu-clock", "-c", "100000", "--call-graph",
         "dwarf", "-o", str(data), "--", str(program), "1"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "LD_BIND_NOW": "1"},
    )  # fmt: skip
    if done.returncode:
        raise Unavailable("perf", f"perf record failed: {done.stderr[:200]}")
    return data


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("perf-inline")
    try:
        return {kind: _build(out / kind, kind) for kind in KINDS}
    except Unavailable as why:
        unavailable(why)


@pytest.fixture(scope="module")
def recordings(builds: dict[str, Path]) -> dict[str, Path]:
    """The recordings; each taken again (three times at most) while some of its samples are
    walked apart: on a busy machine a few samples of a recording (2 to 10 of 9,000 seen)
    reach ``__libc_start_call_main`` in pysframe's walk and stop at ``main`` in perf's, and
    the report's rows, sorted by those percentages, then come in another order (and a
    call graph whose root run one sample parts prints otherwise).  The walks themselves are
    held to perf's by tests/perf/test_perf_walk.py; here the text is."""
    try:
        taken = {kind: _record(program) for kind, program in builds.items()}
        for kind in taken:
            for _ in range(2):
                if not _names_walked_apart(str(taken[kind])):
                    break
                taken[kind] = _record(builds[kind])
        return taken
    except Unavailable as why:
        unavailable(why)


def _pysframe(*arguments: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "pysframe", "perf", *arguments],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout  # fmt: skip


def _perf(*arguments: str) -> str:
    return subprocess.run(
        [PERF, *arguments], capture_output=True, text=True, timeout=600, check=True,
        errors="replace",
    ).stdout  # fmt: skip


def _samples(text: str) -> list[str]:
    """Each sample's text (its header line and frame lines), in order."""
    return [block for block in text.split("\n\n") if block.strip()]


# -- perf script -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_script_is_perf_scripts_text(recordings: dict[str, Path], kind: str) -> None:
    path = str(recordings[kind])
    ours, theirs = _samples(_pysframe("script", path)), _samples(_perf("script", "-i", path))
    assert len(ours) == len(theirs)
    differ = [index for index, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert len(theirs) > 300
    assert len(differ) <= len(theirs) // 100, differ[:5]
    if differ:  # each one's walk differs: its frames differ without inline frames too
        plain_ours = _samples(_pysframe("script", "--no-inline", path))
        plain_theirs = _samples(_perf("script", "--no-inline", "-i", path))
        assert all(plain_ours[index] != plain_theirs[index] for index in differ), [
            ours[index] for index in differ if plain_ours[index] == plain_theirs[index]
        ][:3]


def test_the_recordings_meet_the_cases(recordings: dict[str, Path]) -> None:
    """What the module's docstring promises is in perf's text, to be compared."""
    c = _perf("script", "-i", str(recordings["c"]))
    cxx = _perf("script", "-i", str(recordings["cxx"]))
    inlined_lines = [line for line in c.splitlines() if line.endswith(" (inlined)")]
    assert len(inlined_lines) > 500
    for expected in (" rotl+", " mix+", " scramble+", " step+", " chain3+", " hot+",
                     " lib_round+"):  # fmt: skip
        assert any(expected in line for line in inlined_lines), expected
    assert "hot.constprop.0" not in c  # named by its DWARF name, as an inlined function
    assert "operator()+" in cxx and "(inlined)" in cxx


def test_no_inline_and_inline_options(recordings: dict[str, Path]) -> None:
    path = str(recordings["c"])
    assert _pysframe("script", "--inline", path) == _pysframe("script", path)
    plain = _pysframe("script", "--no-inline", path)
    assert " (inlined)" not in plain
    assert _samples(plain) == _samples(_perf("script", "--no-inline", "-i", path))


def test_stacks_of_one_hash_get_their_inline_entries(
    recordings: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stack is expanded with its inline entries as it is first interned, found again by
    a hash of its frames before expansion; where two stacks of a chunk share a hash (here
    every stack: the hash made one number) the chunk's stacks are interned one at a time,
    expanded all the same, and the text is the same."""
    import numpy as np

    from pysframe.perf import analyze

    path = str(recordings["c"])
    text = "".join(script_text(profile_recording(path, Options(inline=True))[0]))
    assert " (inlined)" in text

    def one_hash(
        frames: np.ndarray, starts: np.ndarray, lengths: np.ndarray
    ) -> np.ndarray:
        return np.zeros(len(starts), dtype=np.uint64)

    monkeypatch.setattr(analyze, "_stack_hashes", one_hash)
    assert "".join(script_text(profile_recording(path, Options(inline=True))[0])) == text


@pytest.mark.parametrize("kind", KINDS)
def test_srcline_is_perf_scripts(recordings: dict[str, Path], kind: str) -> None:
    """Each frame's source line as ``perf script -F +srcline`` prints it: an inline entry's
    own, addr2line's first answer's, or the module's short name and address, ``??:0``
    (util/evsel_fprintf.c, util/srcline.c)."""
    path = str(recordings[kind])
    profile, _ = profile_recording(path, Options(inline=True, srcline=True))
    ours = _samples("".join(script_text(profile, options=script_fields("+srcline"))))
    theirs = _samples(_perf("script", "-F", "+srcline", "-i", path))
    assert len(ours) == len(theirs)
    differ = [index for index, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert len(differ) <= len(theirs) // 100, differ[:5]
    text = "\n".join(theirs)
    assert "\n  inlined.h:" in text or "\n  profiledcxx.cc:" in text
    if differ:  # walks apart, as above
        plain_ours = _samples(_pysframe("script", "--no-inline", path))
        plain_theirs = _samples(_perf("script", "--no-inline", "-i", path))
        assert all(plain_ours[index] != plain_theirs[index] for index in differ)


# -- perf report --children ------------------------------------------------------------------


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _names_walked_apart(path: str) -> set[str]:
    """The function names of the samples whose walks differ (their --no-inline text
    differs), as perf script prints them with inline frames, and as pysframe prints them
    (perf prints no frame at all for a sample whose first frame it cannot unwind: a new
    thread's first instruction after clone3's syscall, which no FDE of libc covers)."""
    ours = _samples(_pysframe("script", "--no-inline", path))
    theirs = _samples(_perf("script", "--no-inline", "-i", path))
    inlined = _samples(_perf("script", "-i", path))
    names = set()
    for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a != b:
            for line in [*inlined[index].splitlines()[1:], *a.splitlines()[1:]]:
                # ADDRESS NAME+0xOFFSET (MODULE)
                names.add(line.strip().partition(" ")[2].rsplit("+0x", 1)[0])
    return names


@pytest.mark.parametrize("kind", KINDS)
def test_children_rows_are_perfs(recordings: dict[str, Path], kind: str) -> None:
    """The rows of ``perf report --children``, the inline ones included: all of perf's
    inline rows are ours (but those of functions only in samples whose walks differ), and
    at least 99% of the rows are perf's to the character where no walk differs (c)."""
    path = str(recordings[kind])
    ours = _rows(_pysframe("report", "--children", "-g", "none", path))
    theirs = _rows(_perf("report", "--stdio", "--children", "--sort", "comm,dso,sym", "-g",
                         "none", "-i", path))  # fmt: skip

    def name(row: str) -> str:
        return row.split("] ", 1)[1]

    inlined = {name(row) for row in theirs if row.endswith(" (inlined)")}
    assert len(inlined) >= 5
    missing = inlined - {name(row) for row in ours}
    apart = _names_walked_apart(path)
    assert all(entry.removesuffix(" (inlined)") in apart for entry in missing), missing
    if kind == "c":
        pairs = list(zip(ours, theirs, strict=False))
        equal = sum(1 for a, b in pairs if a == b)
        assert equal >= 0.99 * len(theirs), [(a, b) for a, b in pairs if a != b][:5]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("options", [[], ["--no-children"], ["-g", "callee"]])
def test_call_graphs_with_inline_frames_are_perfs(
    recordings: dict[str, Path], kind: str, options: list[str]
) -> None:
    """perf report's default text (children, call graphs under the rows), whose graphs hold
    the inline frames too, through the command line: every line of perf's but its notes
    (the header hint and closing tip) is ours, in order (at least 99% where walks differ,
    or where perf's own call graphs part a function's chains: util/callchain.c's children
    of a node are a tree by a comparison that is no total order either).  The rows, and
    their order among equal shares (util/hist.c's trees of entries, where an inlined
    function goes by its name), are perf's to the character but where a walk differs."""
    path = str(recordings[kind])

    def lines(text: str) -> list[str]:  # without the notes and the bare "#" around them
        return [line for line in text.splitlines()
                if line != "#" and not line.startswith(("# To display", "# (Tip:"))]  # fmt: skip

    ours = lines(_pysframe("report", "-i", path, "--stdio", *options))
    theirs = lines(_perf("report", "-i", path, "--stdio", *options))
    hot = " hot (inlined)" if kind == "c" else " (inlined)"
    assert any(line.endswith(hot) for line in theirs)
    row = re.compile(r"^ +[0-9.]+% +(?:[0-9.]+% +)?\S")
    ours_rows = [line for line in ours if row.match(line)]
    theirs_rows = [line for line in theirs if row.match(line)]
    if ours_rows != theirs_rows:
        differ = difflib.unified_diff(theirs_rows, ours_rows, "perf", "pysframe", lineterm="")
        assert _names_walked_apart(path), "\n".join(list(differ)[:40])
    matcher = difflib.SequenceMatcher(None, theirs, ours, autojunk=False)
    same = sum(block.size for block in matcher.get_matching_blocks())
    if same < 0.99 * max(len(theirs), len(ours)):
        split = _rows_perf_splits(path, theirs)
        if split:
            pytest.skip(f"perf's own rows disagree: {split} are two rows with {options}, one "
                        "with -g none (two hist entries of one symbol, util/sort.c)")
        if _shares_alone_differ(theirs, ours):
            return  # perf parted a branch: a sliver of it hidden under the threshold
    assert same >= 0.99 * max(len(theirs), len(ours)), "\n".join(
        list(difflib.unified_diff(theirs, ours, "perf", "pysframe", n=1, lineterm=""))[:40]
    )


def _shares_alone_differ(theirs: list[str], ours: list[str]) -> bool:
    """Whether two call graph texts are one graph line for line, names and shape, but for
    percentages at most 0.1 points apart: what perf prints where its tree of a node's
    children (util/callchain.c append_chain_children, a comparison that is no total order
    where an inlined function meets another symbol) parted a function's chains into two
    branches, the second under the 0.5% threshold, so that the first shows a sliver less."""
    share = re.compile(r"(\d+\.\d+)%")
    if len(theirs) != len(ours):
        return False
    for a, b in zip(theirs, ours, strict=True):
        if share.sub("%", a) != share.sub("%", b):
            return False
        numbers = zip(share.findall(a), share.findall(b), strict=True)
        if any(abs(float(x) - float(y)) > 0.1 for x, y in numbers):
            return False
    return True


def _row_labels(text: list[str]) -> Counter[str]:
    """The labels (comm, module, symbol) of perf report's rows, counted."""
    return Counter(re.sub(r"^ +[0-9.]+% +[0-9.]+% +", "", line) for line in text
                   if re.match(r"^ +[0-9.]+% +[0-9.]+% ", line))  # fmt: skip


def _rows_perf_splits(path: str, theirs: list[str]) -> list[str]:
    """The rows perf's report of ``path`` gives twice (``theirs``), where its report without
    call graphs (the same rows, the same sort keys) gives them once: perf's own texts
    disagree there, so they are no oracle."""
    once = _row_labels(_perf("report", "-i", path, "--stdio", "-g", "none").splitlines())
    return sorted(label for label, count in _row_labels(theirs).items()
                  if count > 1 and once[label] == 1)  # fmt: skip


@pytest.mark.parametrize("fields", ["+srcline", "comm,tid,ip,sym,srcline"])
def test_srcline_field_through_the_command_line(
    recordings: dict[str, Path], fields: str
) -> None:
    """``pysframe perf script -F ...srcline``: perf script's text, but samples whose walks
    differ (as :func:`test_srcline_is_perf_scripts`)."""
    path = str(recordings["c"])
    ours = _samples(_pysframe("script", "-F", fields, path))
    theirs = _samples(_perf("script", "-F", fields, "-i", path))
    assert len(ours) == len(theirs) > 100
    assert "\n  inlined.h:" in "\n".join(ours)
    differ = sum(1 for a, b in zip(ours, theirs, strict=True) if a != b)
    assert differ <= len(theirs) // 100


# -- addr2line's answers ---------------------------------------------------------------------


def _addr2line(path: str, addresses: list[int]) -> list[list[str]]:
    """What ``addr2line -f -i`` prints for each address (asked in this order, of one
    process), as two lines per answer without the discriminator; empty for ``??``/``??:0``."""
    text = subprocess.run(
        ["addr2line", "-e", path, "-a", "-i", "-f"],
        input="".join(f"{address:#x}\n" for address in addresses),
        capture_output=True, text=True, errors="surrogateescape", timeout=600, check=True,
    ).stdout  # fmt: skip
    blocks = re.split(r"^0x[0-9a-f]{16}\n", text, flags=re.MULTILINE)[1:]
    out = []
    for block in blocks:
        lines = block.splitlines()
        answers = [
            f"{lines[at]}\n{re.sub(r' [(]discriminator [0-9]+[)]$', '', lines[at + 1])}\n"
            for at in range(0, len(lines) - 1, 2)
        ]
        out.append([] if answers == ["??\n??:0\n"] else answers)
    assert len(out) == len(addresses)
    return out


def _addresses(path: str, count: int, seed: int) -> list[int]:
    """Addresses in the file's executable sections, at random, in a random order."""
    with ElfReader.open(path) as reader:
        code = [s for s in reader.sections() if s.flags & 0x4 and s.size]  # SHF_EXECINSTR
    total = sum(section.size for section in code)
    chance = random.Random(seed)
    chosen = {
        chance.randrange(section.address, section.address + section.size)
        for section in code
        for _ in range(max(1, count * section.size // total))
    }
    ordered = sorted(chosen)
    chance.shuffle(ordered)
    return ordered


def _debug_file(library: str) -> str | None:
    """The separate debug file of a system library, by build ID, when installed."""
    try:
        with ElfReader.open(library) as reader:
            build_id = reader.build_id()
    except (OSError, ValueError, Exception):
        return None
    if not build_id:
        return None
    found = Path("/usr/lib/debug/.build-id") / build_id.hex()[:2] / f"{build_id.hex()[2:]}.debug"
    return str(found) if found.exists() else None


def _check_answers(path: str, count: int, seed: int = 7) -> tuple[int, int]:
    """Ask ``addr2line`` and :class:`Addr2Line` the same addresses in the same order;
    (answers compared, answers with an inline chain).  An answer that differs must be BFD's
    for that address when asked first (BFD widens a unit's ranges to its line table's once
    it has read it, which changes the answer for addresses between its functions): a new
    ``addr2line`` and a new reader, asked that address alone, must agree; and such answers
    stay few."""
    addresses = _addresses(path, count, seed)
    theirs = _addr2line(path, addresses)
    with Addr2Line(path) as ours:
        answers = [[record.text() for record in ours.records(a)] for a in addresses]
    differ = [i for i, (a, b) in enumerate(zip(answers, theirs, strict=True)) if a != b]
    for index in differ:
        alone = _addr2line(path, [addresses[index]])[0]
        with Addr2Line(path) as fresh:
            first = [record.text() for record in fresh.records(addresses[index])]
        assert first == alone, (hex(addresses[index]), first, alone, answers[index])
    assert len(differ) <= len(addresses) // 200, [hex(addresses[i]) for i in differ[:5]]
    return len(addresses), sum(len(answer) > 1 for answer in answers)


@pytest.mark.parametrize("kind", KINDS)
def test_answers_are_addr2lines_for_the_builds(builds: dict[str, Path], kind: str) -> None:
    require_program("addr2line", "binutils")
    files = [builds[kind]] + ([builds[kind].parent / "libinlined.so"] if kind == "c" else [])
    for path in files:
        asked, chains = _check_answers(str(path), 1500)
        assert asked > 100 and chains > asked // 20, (path, asked, chains)


def test_kept_answers_are_those_asked_in_any_order(
    builds: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers kept in the cache by one run serve a run that asks in another order: each is
    what a reader of the DWARF asked in that run's order gives.  BFD renames a function
    named by a DW_AT_name of a mangling language (a C++ lambda's ``operator()``) once it
    looked it up, so such answers depend on the order; the C++ build has them."""
    monkeypatch.setenv(cache.CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    path = str(builds["cxx"])
    addresses = _addresses(path, 3000, seed=11)
    later = addresses[:]
    random.Random(5).shuffle(later)

    def asked(order: list[int]) -> list[list[str]]:
        answers = KeptAddr2Line.open(path)
        try:
            return [[record.text() for record in answers.records(a)] for a in order]
        finally:
            answers.close()

    asked(addresses)  # kept
    kept = asked(later)
    assert any(tmp_path.glob("cache/generated-*/*.addr2line"))
    with Addr2Line(path) as fresh:
        answers = [[record.text() for record in fresh.records(a)] for a in later]
    assert kept == answers
    # and the order mattered: a reader asked in the first order answers some otherwise
    with Addr2Line(path) as first:
        before = {a: [record.text() for record in first.records(a)] for a in addresses}
    assert any(before[a] != answer for a, answer in zip(later, answers, strict=True))


#: A function symbol inside another's range: BFD keeps the last symbol it found and gives it
#: again for an address inside it (_bfd_elf_find_function), so ``inner`` is named ``outer``
#: when an address of ``outer`` was asked just before.
NESTED = """\
	.text
	.globl	outer
	.type	outer, @function
outer:
	.fill	16, 1, 0x90
	.type	inner, @function
inner:
	.fill	8, 1, 0x90
	ret
	.size	inner, .-inner
	.fill	8, 1, 0x90
	ret
	.size	outer, .-outer
	.globl	main
	.type	main, @function
main:
	xorl	%eax, %eax
	ret
	.size	main, .-main
	.section	.note.GNU-stack,"",@progbits
"""


def test_the_symbol_kept_from_an_answer_is_given_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """addr2line names an address of ``inner`` ``outer`` right after an address of
    ``outer``, and ``inner`` alone; so do the reader and the answers kept in the cache, a
    run that takes the first answer from the cache telling the reader which symbol BFD kept."""
    require_program("addr2line", "binutils")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    source, program = tmp_path / "nested.s", tmp_path / "nested"
    source.write_text(NESTED)
    subprocess.run(["gcc", "-o", str(program), str(source)], check=True)
    listed = subprocess.run(["nm", str(program)], capture_output=True, text=True, check=True)
    values = {
        fields[2]: int(fields[0], 16)
        for fields in map(str.split, listed.stdout.splitlines())
        if len(fields) == 3 and fields[2] in ("outer", "inner")
    }
    first, second = values["outer"] + 4, values["inner"] + 2
    both, alone = _addr2line(str(program), [first, second]), _addr2line(str(program), [second])
    assert both[1][0].startswith("outer\n") and alone[0][0].startswith("inner\n")
    with Addr2Line(str(program)) as fresh:
        answers = [fresh.answer(address) for address in (first, second)]
    assert [[r.text() for r in answer.records] for answer in answers] == both
    assert answers[0].fixed and not answers[1].fixed  # another symbol holds the second
    monkeypatch.setenv(cache.CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    for order, expected in (([first, second], both), ([first, second], both),
                            ([second], alone)):  # fmt: skip
        kept = KeptAddr2Line.open(str(program))
        try:
            assert [[r.text() for r in kept.records(a)] for a in order] == expected
        finally:
            kept.close()
    assert isinstance(KeptAddr2Line.open(str(program)), KeptAddr2Line)  # the first is kept


@pytest.mark.parametrize("library", ["libc.so.6", "ld-linux-x86-64.so.2"])
def test_answers_are_addr2lines_for_system_debug_files(library: str) -> None:
    require_program("addr2line", "binutils")
    found = [p for p in (Path("/lib/x86_64-linux-gnu") / library, Path("/lib64") / library)
             if p.exists()]  # fmt: skip
    debug = _debug_file(str(found[0])) if found else None
    if debug is None:
        pytest.skip(f"no separate debug file of {library} (libc6-dbg)")
    asked, chains = _check_answers(debug, 2500)
    assert asked > 1000 and chains > 50


# -- units: BFD's tables, built by hand ------------------------------------------------------


def test_arange_add_merges_as_bfd() -> None:
    ranges: list[list[int]] = []
    arange_add(ranges, 0x10, 0x10)  # empty: dropped
    assert ranges == []
    arange_add(ranges, 0x10, 0x20)
    arange_add(ranges, 0x30, 0x40)
    arange_add(ranges, 0x20, 0x28)  # starts where the first ends: extends it
    arange_add(ranges, 0x2C, 0x30)  # ends where the second starts: extends that one
    arange_add(ranges, 0x28, 0x2C)  # touches both: extends the first only, as BFD
    assert ranges == [[0x10, 0x2C], [0x2C, 0x40]]


def _table(ranges: list[tuple[int, int, int]]) -> UnitTable:
    table = UnitTable()
    table.ranges = sorted(ranges)
    table.lows = [low for low, _, _ in table.ranges]
    reach, high = [], 0
    for _, end, _ in table.ranges:
        high = max(high, end)
        reach.append(high)
    table.reach = reach
    return table


def test_function_lookup_takes_the_smallest_range_then_the_later_function() -> None:
    # function 0: [0x100, 0x200) (a subprogram); 1: [0x120, 0x180) inlined in it; 2: a
    # second range of function 0's size elsewhere; 3: [0x140, 0x150) and 4: the same range
    table = _table([(0x100, 0x200, 0), (0x120, 0x180, 1), (0x300, 0x400, 2),
                    (0x140, 0x150, 3), (0x140, 0x150, 4)])  # fmt: skip
    assert table.function_at(0x110) == 0
    assert table.function_at(0x130) == 1
    assert table.function_at(0x145) == 4  # equal lengths: the later function
    assert table.function_at(0x1FF) == 0
    assert table.function_at(0x200) == -1
    assert table.function_at(0x350) == 2
    assert table.function_at(0xFF) == -1


def test_line_lookup_stops_at_a_sequences_end() -> None:
    table = UnitTable()
    # one sequence [0x10, 0x30): rows at 0x10 (line 5), 0x20 (line 6), its end at 0x30
    table.sequences = [(0x10, 0x30, 0, 3)]
    table.sequence_lows = [0x10]
    table.row_addresses, table.row_files, table.row_lines = [0x10, 0x20, 0x30], [1, 1, 1], [5, 6, 6]
    assert table.line_at(0x0F) is None
    assert table.line_at(0x10) == (1, 5)
    assert table.line_at(0x2F) == (1, 6)
    assert table.line_at(0x30) is None


def test_damaged_dwarf_costs_answers_never_an_error(
    builds: dict[str, Path], tmp_path: Path
) -> None:
    """Bytes of ``.debug_info``, ``.debug_abbrev``, ``.debug_line`` and ``.debug_rnglists``
    overwritten at random: every question gets an answer or none, never an exception, and
    the damage is said in ``problems``."""
    source = builds["c"]
    data = source.read_bytes()
    with ElfReader.open(str(source)) as reader:
        damaged = [section for section in reader.sections()
                   if section.name in (".debug_info", ".debug_abbrev", ".debug_line",
                                       ".debug_rnglists", ".debug_aranges")]  # fmt: skip
        code = [s for s in reader.sections() if s.flags & 0x4 and s.size]
    assert len(damaged) >= 4
    chance = random.Random(11)
    addresses = [chance.randrange(s.address, s.address + s.size) for s in code for _ in range(20)]
    problems = 0
    for round_ in range(60):
        copy = bytearray(data)
        section = damaged[round_ % len(damaged)]
        for _ in range(1 + round_ % 8):
            copy[section.offset + chance.randrange(section.size)] = chance.randrange(256)
        path = tmp_path / f"damaged-{round_}"
        path.write_bytes(bytes(copy))
        with Addr2Line(str(path)) as ours:
            for address in addresses:
                for record in ours.records(address):
                    assert record.function is None or isinstance(record.function, str)
            problems += bool(ours.problems)
    assert problems > 0
