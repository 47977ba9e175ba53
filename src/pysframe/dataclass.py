"""``@dataclass`` as the standard library's, made faster to declare.

Python 3.11's :func:`dataclasses.dataclass` writes the source of each method it adds and
compiles it (``exec``): some 0.1 to 0.2 ms a method, and a frozen class with equality gets six
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``).  A
command imports some 80 dataclasses before it reads its input, so that this compiling was a
fifth of a small report's time.  This decorator has the standard library make the class, its
fields, ``__init__``, the frozen class's ``__setattr__`` and ``__delattr__`` and its slots, and
adds ``__repr__``, ``__eq__`` and ``__hash__`` itself, made from closures: the same methods
(the rules of :func:`dataclasses.dataclass` in Python 3.11, "Class methods" and ``_hash_action``),
nothing compiled.  The class is a dataclass (:func:`dataclasses.fields`,
:func:`dataclasses.replace`, :func:`dataclasses.asdict` take it); its ``__dataclass_params__``
say ``repr`` and ``eq`` false, as the standard library made it so.

The type checker sees :func:`dataclasses.dataclass` itself.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

_STDLIB = dataclasses.dataclass


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of the attributes ``names`` of an object (what the generated methods compare
    and hash: ``(self.a, self.b,)``)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return lambda _instance: ()


def _methods(cls: type, repr: bool, eq: bool, frozen: bool) -> dict[str, Any]:
    """``__repr__``, ``__eq__`` and ``__hash__`` where :func:`dataclasses.dataclass` would add
    them, and as it makes them: none that the class defines itself."""
    own = cls.__dict__
    fields = dataclasses.fields(cls)
    methods: dict[str, Any] = {}
    if repr and "__repr__" not in own:
        shown = tuple(f.name for f in fields if f.repr)

        @reprlib.recursive_repr()
        def __repr__(self: Any) -> str:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
            return f"{self.__class__.__qualname__}({inner})"

        methods["__repr__"] = __repr__
    if not eq:
        return methods
    has_eq = "__eq__" in own
    if not has_eq:
        compared = _values(tuple(f.name for f in fields if f.compare))

        def __eq__(self: Any, other: Any) -> Any:
            if other.__class__ is self.__class__:
                return compared(self) == compared(other)
            return NotImplemented

        methods["__eq__"] = __eq__
    # _hash_action (unsafe_hash false, eq true): a __hash__ the class defines is kept (one it
    # set to None beside its own __eq__ is none); else frozen: the fields' hash; else None.
    class_hash = own.get("__hash__", dataclasses.MISSING)
    if class_hash is not dataclasses.MISSING and not (class_hash is None and has_eq):
        return methods
    if not frozen:
        methods["__hash__"] = None
        return methods
    hashed = _values(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    methods["__hash__"] = __hash__
    return methods


def _dataclass(
    cls: type | None = None, /, *, repr: bool = True, eq: bool = True, frozen: bool = False,
    slots: bool = False,
) -> Any:  # fmt: skip
    """:func:`dataclasses.dataclass` with its ``repr``, ``eq``, ``frozen`` and ``slots`` (the
    others keep their defaults: ``init``, no ``order``, no ``unsafe_hash``...)."""

    def wrap(cls: type) -> type:
        made: type = _STDLIB(cls, repr=False, eq=False, frozen=frozen, slots=slots)
        for name, method in _methods(made, repr, eq, frozen).items():
            if method is not None:
                method.__qualname__ = f"{made.__qualname__}.{name}"
            setattr(made, name, method)
        return made

    return wrap if cls is None else wrap(cls)


if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    dataclass = _dataclass
