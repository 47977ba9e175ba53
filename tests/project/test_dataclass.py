"""pysframe.dataclass against the standard library's dataclasses (the oracle): the same
classes declared with both make the same ``repr``, ``==``, ``hash``, frozen errors and
fields, on any values."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
import re
import typing
from pathlib import Path
from typing import Any, ClassVar

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


def _init_seen(cls: type) -> dict[str, Any]:
    """What can be seen of a class's ``__init__`` and declaration: its code (bytecode, names,
    constants), signature, defaults, annotations, names, and the class's parameters."""
    init: Any = cls.__init__  # type: ignore[misc]
    code = init.__code__
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    return {
        "code": (code.co_code, code.co_varnames, code.co_names, code.co_consts,
                 code.co_freevars, code.co_argcount, code.co_qualname, code.co_flags),
        "closure": [cell.cell_contents for cell in init.__closure__ or ()],
        "signature": str(inspect.signature(cls)),
        "defaults": init.__defaults__, "annotations": init.__annotations__,
        "names": (init.__name__, init.__qualname__, init.__module__, init.__doc__),
        "globals": init.__globals__ is globals(),
        "params": (params.init, params.frozen, params.order, params.unsafe_hash),
        "doc": cls.__doc__, "match_args": getattr(cls, "__match_args__", None),
        "slots": getattr(cls, "__slots__", None),
    }  # fmt: skip


@pytest.mark.parametrize("params", PARAMS, ids=lambda p: ",".join(k for k, v in p.items() if v))
def test_the_same_init_as_the_standard_librarys(params: dict[str, bool]) -> None:
    """``__init__`` is the code the standard library compiles for the class, with its defaults,
    annotations and names; it takes its arguments by position and by name and refuses the
    same wrong calls with the same words."""
    ours, theirs = twins(dataclass, **params), twins(dataclasses.dataclass, **params)
    for mine, reference in zip(ours, theirs, strict=True):
        assert _init_seen(mine) == _init_seen(reference), mine.__name__
        names = [f.name for f in dataclasses.fields(reference)]
        by_name = {name: index for index, name in enumerate(names)}
        assert _fields_of(mine(**by_name)) == _fields_of(reference(**by_name))
        for wrong in ((), (1, 2, 3, 4), {"z": 1}):
            assert _refusal(mine, wrong) == _refusal(reference, wrong), (mine.__name__, wrong)


def _fields_of(instance: Any) -> list[Any]:
    return [getattr(instance, f.name) for f in dataclasses.fields(instance)]


def _refusal(cls: type, arguments: tuple[Any, ...] | dict[str, Any]) -> str:
    try:
        cls(**arguments) if isinstance(arguments, dict) else cls(*arguments)
    except TypeError as error:
        return str(error)
    return "taken"


@pytest.mark.parametrize("slots", [False, True])
def test_a_frozen_instance_pickles_and_copies(slots: bool) -> None:
    instance = Pickled if not slots else PickledSlots
    value = instance(1, "a")  # type: ignore[call-arg]
    for copied in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
        assert copied == value and copied is not value
    assert ("__getstate__" in instance.__dict__) == slots


@dataclass(frozen=True)
class Pickled:
    """Frozen, module-level (pickle finds it by name)."""

    a: int
    b: str


@dataclass(frozen=True, slots=True)
class PickledSlots:
    """Frozen with slots: pickle restores its fields through ``__setstate__``."""

    a: int
    b: str


def test_subclasses_of_the_standard_library_see_it_frozen() -> None:
    """A dataclass of the standard library that derives from a frozen one must be frozen, as
    when both are the standard library's."""

    @dataclasses.dataclass(frozen=True)
    class Frozen(Pickled):
        c: int = 0

    assert Frozen(1, "a", 2).c == 2
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):

        @dataclasses.dataclass
        class Thawed(Pickled):
            c: int = 0


def test_a_field_without_default_after_one_with_is_refused() -> None:
    for decorate in (dataclass, dataclasses.dataclass):
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

            @decorate(frozen=True)
            class Wrong:
                """b has no default."""

                a: int = 0
                b: int  # type: ignore[misc]


def test_a_class_whose_init_is_not_plain_gets_the_standard_librarys() -> None:
    """``__post_init__``, ``InitVar``, ``init=False`` or keyword-only field, or no docstring:
    ``__init__`` (and the docstring) as the standard library makes them; with a default
    factory too (made here, from the text the standard library writes)."""

    def shapes(decorate: Any) -> list[type]:
        @decorate(frozen=True)
        class Factory:
            """A default factory."""

            a: list[int] = dataclasses.field(default_factory=list)

        @decorate()
        class Post:
            """A __post_init__ and an InitVar."""

            a: int
            b: dataclasses.InitVar[int] = 0

            def __post_init__(self, b: int) -> None:
                self.a += b

        @decorate()
        class Hidden:
            """A field not in __init__, a keyword-only one."""

            a: int = dataclasses.field(default=3, init=False)
            b: int = dataclasses.field(default=4, kw_only=True)

        @decorate(frozen=True)
        class Undocumented:
            a: int

        return [Factory, Post, Hidden, Undocumented]

    for mine, reference in zip(shapes(dataclass), shapes(dataclasses.dataclass), strict=True):
        seen, want = _init_seen(mine), _init_seen(reference)
        assert seen | {"doc": None} == want | {"doc": None}, mine.__name__
        assert seen["doc"].replace("dataclass", "") == want["doc"].replace("dataclass", "")
    assert shapes(dataclass)[1](1, 2).a == 3


def _shaped(decorate: Any, names: list[str], kinds: str, **params: Any) -> type:
    """A class of fields ``names``, each (``kinds``) without a default (``-``), with one
    (``d``) or with a default factory (``f``), and a ``ClassVar`` between them, declared
    with ``decorate(**params)``: its annotations are text, as in the package."""
    namespace: dict[str, Any] = {"__doc__": "Fields of each kind.", "__module__": __name__}
    annotations: dict[str, Any] = {}
    for at, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        annotations[name] = "int" if kind != "f" else "list[int]"
        if kind == "d":
            namespace[name] = at
        elif kind == "f":
            namespace[name] = dataclasses.field(default_factory=list)
        if at == 1:
            annotations["SHARED"] = "ClassVar[int]"
            namespace["SHARED"] = 7
    namespace["__annotations__"] = annotations
    return decorate(**params)(type("Shaped", (), namespace))


SHAPES = [
    ([f"f{index}" for index in range(count)], "-" * count) for count in (0, 1, 2, 9, 10, 25)
] + [
    (["zeta", "alpha", "mid"], "-ff"),  # factories in another order than their names'
    (["b", "a", "d", "c"], "-dff"),
    (["only"], "f"),
    (["x", "y", "z"], "ddf"),
]  # fmt: skip


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize(("names", "kinds"), SHAPES)
def test_the_same_init_for_fields_of_every_kind(frozen: bool, names: list[str], kinds: str) -> None:
    """Any number of fields (each count's code compiled once, its names put in), defaults,
    default factories in any order of their names (the closure's cells are in that order),
    a ``ClassVar`` among them: the standard library's ``__init__`` and fields."""
    for slots in (False, True):
        mine = _shaped(dataclass, names, kinds, frozen=frozen, slots=slots)
        reference = _shaped(dataclasses.dataclass, names, kinds, frozen=frozen, slots=slots)
        assert _init_seen(mine) == _init_seen(reference)
        assert list(mine.__dataclass_fields__) == list(reference.__dataclass_fields__)
        assert [f.type for f in dataclasses.fields(mine)] == [
            f.type for f in dataclasses.fields(reference)
        ]
        assert mine.SHARED == 7 if len(names) > 1 else True  # type: ignore[attr-defined]
        required = [at for at, kind in enumerate(kinds) if kind == "-"]
        made, want = mine(*required), reference(*required)
        assert _fields_of(made) == _fields_of(want)
        if "f" in kinds:  # a new value of the factory for each instance
            assert made.__eq__(mine(*required)) is not False and _fields_of(made) == _fields_of(
                mine(*required)
            )
            factory = names[kinds.index("f")]
            assert getattr(made, factory) is not getattr(mine(*required), factory)


def test_init_is_made_when_first_needed() -> None:
    """A class's ``__init__`` is made the first time it is looked up (nothing is compiled for
    a class never instantiated); a subclass instantiated first makes its base's."""

    @dataclass(frozen=True, slots=True)
    class Base:
        """Two fields."""

        a: int
        b: str = "b"

    class Derived(Base):
        __slots__ = ()

    assert "__init__" in Base.__dict__ and not inspect.isfunction(Base.__dict__["__init__"])
    assert Derived(1).b == "b"
    assert inspect.isfunction(Base.__dict__["__init__"])
    assert str(inspect.signature(Base)) == "(a: 'int', b: 'str' = 'b') -> None"


#: ``ClassVar`` under another name: the standard library looks an annotation's name up in the
#: class's module (``_is_type``).
SHARED_ALIAS = ClassVar


def test_a_class_variable_under_another_name() -> None:
    """A ``ClassVar`` named otherwise, or through its module, is one here as in the standard
    library: not a field, not an argument."""

    def declare(decorate: Any) -> type:
        @decorate(frozen=True)
        class Aliased:
            """Class variables written three ways."""

            a: int
            one: SHARED_ALIAS[int] = 1
            two: typing.ClassVar[int] = 2
            b: int = 0

        return Aliased

    mine, reference = declare(dataclass), declare(dataclasses.dataclass)
    assert _init_seen(mine) == _init_seen(reference)
    assert list(mine.__dataclass_fields__) == list(reference.__dataclass_fields__)
    assert [f.name for f in dataclasses.fields(mine)] == ["a", "b"]
    assert _fields_of(mine(3)) == [3, 0] and mine.one == 1  # type: ignore[attr-defined]
