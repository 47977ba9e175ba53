"""The public API is what ``pysframe`` exports: every type a public method or field of an
exported class takes or returns is exported too, and the names the README's library tour uses
work."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

import pysframe
from pysframe import Abi, CfaRule, RegRule, SFrameBuilder, SFrameSection, Version

sys.path.insert(0, str(Path(__file__).parent))
from stack_support import Unavailable, check_ptrace

from conftest import require, unavailable

README = Path(__file__).resolve().parent.parent / "README.md"


def _format_namespace() -> dict[str, object]:
    """Every name defined at the top of a module of the packages the exports come from (and
    pysframe.errors): the names annotations may use (some only under TYPE_CHECKING in their
    own module)."""
    import pysframe.elf
    import pysframe.generate
    import pysframe.sources
    import pysframe.unwind

    names: dict[str, object] = {}
    modules = ["pysframe.errors"] + [
        f"{package.__name__}.{m.name}"
        for package in (pysframe.format, pysframe.elf, pysframe.sources, pysframe.generate,
                        pysframe.unwind)
        for m in pkgutil.iter_modules(package.__path__)
    ]
    for name in modules:
        module = importlib.import_module(name)
        names.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    return names


def _members(cls: type) -> Iterator[tuple[str, object]]:
    """The public methods and properties of ``cls`` (its own and inherited from pysframe)."""
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name not in ("__init__", "__getitem__", "__iter__"):
            continue
        if isinstance(member, property) and member.fget is not None:
            yield name, member.fget
        elif inspect.isroutine(member) and _ours(member):
            yield name, member


def _ours(member: object) -> bool:
    return (getattr(member, "__module__", None) or "").startswith("pysframe")


def _classes_in(hint: object) -> Iterator[type]:
    """The pysframe classes a type hint names (inside unions, containers, callables)."""
    if isinstance(hint, type) and _ours(hint):
        yield hint
    for argument in typing.get_args(hint):
        if isinstance(argument, list):  # Callable's parameter list
            for inner in argument:
                yield from _classes_in(inner)
        else:
            yield from _classes_in(argument)


def _hints(owner: object, namespace: dict[str, object]) -> dict[str, object]:
    module = vars(importlib.import_module(owner.__module__))
    return typing.get_type_hints(owner, globalns={**namespace, **module})


def _types_used_by(cls: type, namespace: dict[str, object]) -> set[type]:
    used: set[type] = set()
    for _, member in _members(cls):
        for parameter, hint in _hints(member, namespace).items():
            if not parameter.startswith("_"):  # a private field's parameter is no API
                used.update(_classes_in(hint))
    if dataclasses.is_dataclass(cls):
        hints = _hints(cls, namespace)
        for field in dataclasses.fields(cls):
            if not field.name.startswith("_"):
                used.update(_classes_in(hints[field.name]))
    return used


def test_every_type_the_public_api_uses_is_exported() -> None:
    namespace = _format_namespace()
    import pysframe.perf

    exported = {name: getattr(pysframe, name) for name in pysframe.__all__}
    classes = [value for value in exported.values() if isinstance(value, type)]
    # The perf reader's records are the public names of pysframe.perf, where they are read.
    namespace.update({name: getattr(pysframe.perf, name) for name in pysframe.perf.__all__})
    perf_exports = {name: getattr(pysframe.perf, name) for name in pysframe.perf.__all__}
    missing = set()
    for cls in classes:
        for used in _types_used_by(cls, namespace):
            if exported.get(used.__name__) is not used and (
                perf_exports.get(used.__name__) is not used
            ):
                missing.add(f"{used.__module__}.{used.__name__} (used by {cls.__name__})")
    assert sorted(missing) == []


def test_the_check_sees_a_type_that_is_not_exported() -> None:
    # SFrameBuilder's add_function returns a FunctionBuilder: found as a type the API uses.
    assert pysframe.FunctionBuilder in _types_used_by(SFrameBuilder, _format_namespace())


def test_every_exported_name_resolves() -> None:
    for name in pysframe.__all__:
        assert getattr(pysframe, name) is not None, name
    with pytest.raises(AttributeError):
        pysframe.FdeTable  # noqa: B018  (the old name of FunctionTable)


def test_the_readme_tour_runs() -> None:
    """The README's library tour, run whole on the section its builder part makes."""
    tour = README.read_text().split("## Library tour", 1)[1]
    code = tour.split("```python\n", 1)[1].split("```", 1)[0]
    made: dict[str, object] = {}
    exec(code[code.index("builder = SFrameBuilder") :], dict(vars(pysframe)), made)
    data = made["data"]
    assert isinstance(data, bytes)
    # The tour opens it at 0x3278: PCREL starts move with the section.
    start = int(SFrameSection.from_bytes(data, section_address=0x3278).starts[0])
    namespace: dict[str, object] = {"data": data, "pc": start + 4, "pcs": [start, start + 4]}
    exec(code, namespace)
    section = namespace["section"]
    assert isinstance(section, SFrameSection) and section.section_address == 0x3278
    found = section.find_row(start + 4)
    assert found is not None and found.row_index == 1
    assert found.row.cfa == CfaRule(7, 16) and found.row.fp == RegRule.at_cfa(-16)
    assert section.find_rows([start]).cfa_offset.tolist() == [8]
    converted = section.convert(version=2)
    assert converted.version is Version.V2 and converted.abi is Abi.AMD64_ENDIAN_LITTLE


def test_the_readme_entry_points_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's second block (the entry points above the format), run from the top of the
    repository on a child process it may trace; its last line's answer checked."""
    if not Path("/usr/bin/ls").exists():
        require("coreutils", "the README's block reads /usr/bin/ls")
    try:
        check_ptrace()
    except Unavailable as why:
        unavailable(why)
    tour = README.read_text().split("## Library tour", 1)[1].split("## Layout", 1)[0]
    code = tour.split("```python\n")[2].split("```", 1)[0]
    monkeypatch.chdir(README.parent)
    child = subprocess.Popen(["sleep", "60"])
    try:
        namespace: dict[str, object] = {"pid": child.pid}
        exec(code, namespace)
    finally:
        child.kill()
        child.wait()
    found = namespace["found"]
    assert isinstance(found, pysframe.ResolvedSFrame) and found.origin is pysframe.Origin.GENERATED
    report = namespace["report"]
    assert isinstance(report, pysframe.StackReport) and report.threads[0].backtrace.frames
    trace = namespace["trace"]
    assert isinstance(trace, pysframe.Backtrace)
    assert [frame.pc for frame in trace.frames] == [0x1004, 0x2004]
    assert trace.stop is pysframe.StopKind.OUTERMOST
