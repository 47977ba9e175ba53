"""The stack's single-PC path held to the bulk path it stands in for, on every module of a live
process (the test program and its library with their own .sframe, libc, the dynamic linker,
the vDSO):

* the SFrame a module is unwound with (:func:`pysframe.unwind.facts.lookup_for`, single-PC
  lookups without numpy) is the one :func:`~pysframe.unwind.facts.sframe_for` gives (decoded
  sections), with the same origin and reason, under every policy, and answers the same row at
  PCs around every function -- once with the checks run, once with their verdicts taken from
  the cache;
* what the cache lacks is made before the threads are stopped, and nothing else;
* the whole report of a stopped process, frame by frame, is the one the bulk path gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pysframe.format.section import SFrameSection
from pysframe.format.single import SectionLookup
from pysframe.sources import ResolvedSFrame
from pysframe.sources.cache import CACHE_ENVIRONMENT
from pysframe.sources.trust import Policy
from pysframe.unwind import facts as facts_module
from pysframe.unwind import modules as modules_module
from pysframe.unwind.facts import (
    ElfFacts,
    elf_facts,
    generated_for,
    generated_lookup_for,
    lookup_for,
    sframe_for,
)
from pysframe.unwind.mappings import process_mappings, process_vdso_address
from pysframe.unwind.modules import ModuleSFrame, load_bias, load_modules, prepare_sframe
from pysframe.unwind.stack import StackReport, report_json, report_lines, stack_of_process
from pysframe.unwind.vdso import vdso_facts
from stack_support import Running, Unavailable, build_programs, check_ptrace, run_program

from conftest import unavailable

#: Functions looked at per module, spread over its section (all when it has fewer).
FUNCTIONS = 400


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    try:
        program = build_programs(tmp_path_factory.mktemp("scalar"))
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    with run_program(program, 3, 1) as running:
        yield running


def _modules(pid: int) -> list[tuple[str, ElfFacts, int]]:
    """(name, facts, load bias) of every ELF file the process maps, and its vDSO."""
    by_path: dict[str, list[object]] = {}
    for mapping in process_mappings(pid):
        by_path.setdefault(mapping.path, []).append(mapping)
    found = []
    for path, ranges in by_path.items():
        facts = elf_facts(path)
        bias = None if facts is None else load_bias(facts, ranges)  # type: ignore[arg-type]
        if facts is not None and bias is not None:
            found.append((path, facts, bias))
    address = process_vdso_address(pid)
    if address is not None:
        with open(f"/proc/{pid}/mem", "rb") as memory:

            def read(at: int, size: int) -> bytes:
                memory.seek(at)
                return memory.read(size)

            vdso = vdso_facts(address, read)
        if vdso is not None:
            found.append(("[vdso]", vdso[0], address))
    return found


def _pcs(section: object) -> Iterator[int]:
    count = len(section)  # type: ignore[arg-type]
    for index in range(0, count, max(1, count // FUNCTIONS)):
        function = section[index]  # type: ignore[index]
        start, end = function.start, function.start + function.size
        yield from (start - 1, start, start + 1, (start + end) // 2, end - 1, end)


def _row(found: object) -> object:
    if found is None:
        return None
    return found.function.start, found.row_index, found.row  # type: ignore[attr-defined]


def _compare(facts: ElfFacts, bias: int, policy: Policy) -> int:
    bulk = sframe_for(facts, bias, policy)
    single = lookup_for(facts, bias, policy)
    assert (single.origin, single.reason, single.with_fallback) == (
        bulk.origin, bulk.reason, bulk.with_fallback,
    )  # fmt: skip
    assert (single.section is None) == (bulk.section is None)
    compared = 0
    pairs = [(bulk.section, single.section)]
    if bulk.with_fallback:
        pairs.append((generated_for(facts, bias), generated_lookup_for(facts, bias)))
    for decoded, looked_up in pairs:
        if decoded is None:
            assert looked_up is None
            continue
        assert looked_up is not None
        for pc in _pcs(decoded):
            assert _row(looked_up.lookup(pc)) == _row(decoded.lookup(pc)), hex(pc)
            compared += 1
    return compared


@pytest.mark.parametrize("policy", list(Policy))
def test_every_module_unwinds_alike(running: Running, policy: Policy) -> None:
    modules = _modules(running.pid)
    assert {Path(name).name for name, _, _ in modules} >= {"stack_prog", "libstacklib.so"}
    compared = sum(_compare(facts, bias, policy) for _, facts, bias in modules)
    assert compared > (50 if policy is Policy.OWN else 1000)  # own: the program's alone
    # Again from scratch, the checks' verdicts now taken from the cache.
    facts_module._CACHE.clear()
    again = sum(_compare(facts, bias, policy) for _, facts, bias in _modules(running.pid))
    assert again == compared


def test_a_module_chooses_when_first_asked(running: Running) -> None:
    name, facts, bias = next(m for m in _modules(running.pid) if m[0].endswith("stack_prog"))
    sframe = ModuleSFrame(facts, bias)
    chosen = sframe.chosen
    assert chosen is sframe.chosen and chosen.origin == sframe_for(facts, bias).origin, name


def test_prepare_makes_what_the_cache_lacks_and_reads_nothing_else(
    running: Running, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the threads are stopped, SFrame is generated for the modules that will be
    unwound with it and whose SFrame the cache lacks; once the cache holds it, nothing is read
    until a frame needs it."""
    monkeypatch.setenv(CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    mappings = process_mappings(running.pid)

    def generated() -> dict[str, object]:
        facts_module._CACHE.clear()
        prepare_sframe(load_modules(mappings, pid=running.pid))
        found = {}
        for path in {m.path for m in mappings}:
            facts = elf_facts(path)
            if facts is not None and facts.own is None:
                found[Path(path).name] = facts.generated
        return found

    first = generated()
    assert first and all(isinstance(g, ResolvedSFrame) for g in first.values()), first
    monkeypatch.setattr("pysframe.generate.generate_from_elf", _refuse)
    assert set(generated().values()) == {None}  # kept in the cache: not even read


def _refuse(*_args: object, **_kwargs: object) -> object:
    raise AssertionError("generated again")


def _lookups(report: StackReport) -> set[type]:
    """The types of the SFrame lookups the report's modules were unwound with."""
    return {
        type(module._sframe.chosen.section)
        for module in report.modules.modules
        if module._sframe.chosen.section is not None
    }


def test_a_stopped_process_reports_as_the_bulk_path_reports_it(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stack_of_process`` with its single-PC lookups, then with the bulk path swapped in
    (decoded sections): the same lines, the same JSON (threads, frames, modules' origins and
    warnings)."""
    fast = stack_of_process(running.pid)
    assert _lookups(fast) == {SectionLookup}
    monkeypatch.setattr(modules_module, "lookup_for", sframe_for)
    monkeypatch.setattr(modules_module, "generated_lookup_for", generated_for)
    bulk = stack_of_process(running.pid)
    assert _lookups(bulk) == {SFrameSection}
    frames = sum(len(thread.backtrace.frames) for thread in fast.threads)
    assert frames >= 8  # the program's recursion, its library, libc
    assert list(report_lines(fast)) == list(report_lines(bulk))
    assert report_json(fast) == report_json(bulk)
