"""The public API is what ``pysframe`` exports: every type a public method or field of an
exported class takes or returns is exported too, and libsframe's names are the
section's own methods (the library guide's examples run in tests/project/test_docs_examples.py)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Iterator

import pytest

import pysframe
from pysframe import SFrameBuilder


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
