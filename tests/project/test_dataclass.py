"""pysframe.dataclass against the standard library's dataclasses (the oracle): the same
classes declared with both make the same ``repr``, ``==``, ``hash``, frozen errors and
fields, on any values."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pysframe
from pysframe.dataclass import dataclass

VALUES = st.one_of(
    st.integers(), st.floats(allow_nan=True), st.text(max_size=4), st.none(),
    st.tuples(st.integers()), st.lists(st.integers(), max_size=2),
)  # fmt: skip


def twins(decorate: Any, **params: Any) -> list[type]:
    """Classes of each shape declared with ``decorate(**params)``."""

    class Plain:
        """Three fields, one hidden from repr and compare, with a default."""

        a: Any
        b: Any
        c: Any = dataclasses.field(default=0, repr=False, compare=False)

    class One:
        """One field: compared and hashed as a 1-tuple."""

        a: Any

    class Empty:
        """No field."""

    class Hashed:
        """A field left out of the hash only."""

        a: Any
        b: Any = dataclasses.field(default=0, hash=False)

    class OwnEq:
        """Its own __eq__ (the class body sets __hash__ to None beside it)."""

        a: Any

        def __eq__(self, other: object) -> bool:
            return True

    class OwnHash:
        """Its own __hash__."""

        a: Any

        def __hash__(self) -> int:
            return 7

    class OwnRepr:
        """Its own __repr__."""

        a: Any

        def __repr__(self) -> str:
            return "mine"

    return [decorate(**params)(cls) for cls in (Plain, One, Empty, Hashed, OwnEq, OwnHash, OwnRepr)]


PARAMS = [
    dict(frozen=frozen, slots=slots, eq=eq, repr=repr_)
    for frozen in (False, True) for slots in (False, True) for eq in (False, True)
    for repr_ in (False, True)
]  # fmt: skip


def make(cls: type, values: list[Any]) -> Any:
    return cls(*values[: len(dataclasses.fields(cls))])


def observed(instance: Any, other: Any, twin: Any) -> dict[str, Any]:
    """What can be seen of an instance: its repr, == and != with another of its class and
    with its twin of the other declaration, its hash, what setting and deleting a field do,
    its fields."""
    shown = re.sub(r" at 0x[0-9a-f]+>$", ">", repr(instance))  # object's repr: no address
    seen: dict[str, Any] = {"repr": shown, "eq": instance == other}
    seen["ne"] = instance != other
    seen["eq_twin"] = instance == twin
    try:
        seen["hash"] = hash(instance) if type(instance).__hash__ is not object.__hash__ else "id"
    except TypeError as error:
        seen["hash"] = f"TypeError {error}"
    for action in ("set", "del"):
        try:
            if action == "set":
                instance.a = 1
            else:
                del instance.a
            seen[action] = "ok"
        except Exception as error:  # what each raises, by its type and message
            seen[action] = f"{type(error).__name__} {error}"
    seen["fields"] = [(f.name, f.repr, f.compare, f.hash) for f in dataclasses.fields(instance)]
    return seen


@pytest.mark.parametrize("params", PARAMS, ids=lambda p: ",".join(k for k, v in p.items() if v))
@given(values=st.lists(VALUES, min_size=3, max_size=3), others=st.lists(VALUES, min_size=3,
                                                                        max_size=3))  # fmt: skip
def test_the_same_methods_as_the_standard_librarys(
    params: dict[str, bool], values: list[Any], others: list[Any]
) -> None:
    ours, theirs = twins(dataclass, **params), twins(dataclasses.dataclass, **params)
    for mine, reference in zip(ours, theirs, strict=True):
        for second in (values, others):
            got = observed(make(mine, values), make(mine, second), make(reference, values))
            want = observed(make(reference, values), make(reference, second), make(mine, values))
            assert got == want or _same_but_nan(got, want), (mine.__name__, params)
        assert (mine.__hash__ is None) == (reference.__hash__ is None)


def _same_but_nan(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """The two differ only where a NaN hashes by identity (Python 3.10 on: each NaN object
    has its own hash), the objects being different ones."""
    return {k: v for k, v in got.items() if k != "hash"} == {
        k: v for k, v in want.items() if k != "hash"
    } and "nan" in got["repr"]


def test_the_repr_of_a_recursive_instance() -> None:
    @dataclass
    class Node:
        child: Any

    node = Node(None)
    node.child = node
    assert repr(node) == "test_the_repr_of_a_recursive_instance.<locals>.Node(child=...)"


def test_a_nan_field_compares_as_the_standard_librarys() -> None:
    """Fields compare as tuples do: the same NaN object is equal to itself."""
    nan = math.nan
    for decorate in (dataclass, dataclasses.dataclass):

        @decorate(frozen=True)
        class One:
            a: float

        assert One(nan) == One(nan)
        assert One(nan) != One(float("nan"))


def test_every_dataclass_of_the_package_is_declared_with_it() -> None:
    """No module of the package imports the standard library's decorator itself (its
    methods are compiled when the module is imported)."""
    source = Path(pysframe.__file__).parent
    stdlib = re.compile(
        r"^\s*from dataclasses import .*\bdataclass\b|@dataclasses\.dataclass", re.M
    )
    users = [
        str(path.relative_to(source)) for path in sorted(source.rglob("*.py"))
        if path.name != "dataclass.py" and stdlib.search(path.read_text())
    ]  # fmt: skip
    assert users == []
