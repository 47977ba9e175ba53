"""``@dataclass`` as the standard library's, made faster to declare.

Python 3.11's :func:`dataclasses.dataclass` writes the source of each method it adds and
compiles it (``exec``): some 0.1 to 0.2 ms a method, and a frozen class with equality gets six
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``).  A
command imports some 80 dataclasses before it reads its input, so that this compiling was a
fifth of a small report's time.  This decorator has the standard library make the class, its
fields and its slots, and adds the methods itself, the same ones (the rules of
:func:`dataclasses.dataclass` in Python 3.11, "Class methods", ``_hash_action``,
``_frozen_get_del_attr``, ``_init_fn``), nothing compiled for each class:

* ``__repr__``, ``__eq__`` and ``__hash__``, and a frozen class's ``__setattr__`` and
  ``__delattr__``, are made from closures (and a frozen class with slots gets the
  ``__getstate__`` and ``__setstate__`` pickle needs, as the standard library gives it);
* ``__init__`` is the standard library's own code for a class of that many fields, compiled
  once per process for each number of fields (and frozen or not), with the field names put in
  its names and constants (:meth:`types.CodeType.replace`): the same bytecode, signature,
  defaults and annotations as the one the standard library compiles for the class.  A class
  whose ``__init__`` is not plain (a field with a default factory, ``init=False``, keyword-only
  or an ``InitVar``; a ``ClassVar``, a ``__post_init__``, its own ``__init__``, a dataclass
  base, no docstring) gets the standard library's compiled one.

The class is a dataclass (:func:`dataclasses.fields`, :func:`dataclasses.replace`,
:func:`dataclasses.asdict` take it); its ``__dataclass_params__`` say ``init`` and ``frozen``
as declared, ``repr`` and ``eq`` false, as the standard library made it so.

The type checker sees :func:`dataclasses.dataclass` itself.
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
import sys
from collections.abc import Callable
from operator import attrgetter
from types import CellType, CodeType, FunctionType
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

_STDLIB = dataclasses.dataclass
#: The names ``_init_fn`` gives the object whose ``__setattr__`` a frozen class's ``__init__``
#: calls, and ``self`` (a field of either name gets the standard library's ``__init__``).
_OBJECT = "__dataclass_builtins_object__"
_SELF = "self"
#: Annotations that make pseudo-fields or keyword-only fields (written as text under
#: ``from __future__ import annotations``): a class with one gets the standard library's
#: ``__init__``.
_NOT_PLAIN = ("ClassVar", "InitVar", "KW_ONLY")
#: ``__init__``'s code by number of fields and frozen, with placeholder names.
_init_codes: dict[tuple[int, bool], CodeType] = {}


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


def _init_code(count: int, frozen: bool) -> CodeType:
    """The code of ``__init__`` that ``_init_fn`` and ``_create_fn`` compile for ``count`` plain
    fields, the fields named ``_0``, ``_1``...: its text is theirs (``_field_assign``), but
    for the annotations and defaults, which are the function's, not its code's."""
    key = (count, frozen)
    code = _init_codes.get(key)
    if code is None:
        names = [f"_{index}" for index in range(count)]
        if frozen:
            body = [f"{_OBJECT}.__setattr__({_SELF},{name!r},{name})" for name in names]
        else:
            body = [f"{_SELF}.{name}={name}" for name in names]
        lines = "\n".join(f"  {line}" for line in body or ["pass"])
        text = (
            f"def __create_fn__({_OBJECT}):\n def __init__({','.join([_SELF, *names])}):\n"
            f"{lines}\n return __init__"
        )
        namespace: dict[str, Any] = {}
        # Compiled as the standard library's module compiles it: without this module's
        # ``from __future__ import annotations``.
        exec(compile(text, "<string>", "exec", dont_inherit=True), {}, namespace)
        code = namespace["__create_fn__"](object).__code__
        _init_codes[key] = code
    return code


def _plain_init(cls: type) -> bool:
    """Whether the standard library's ``__init__`` for ``cls`` would be plain: each annotation
    of the class a field, positional, set from its argument or its default, then nothing else
    (see :func:`_init_code`)."""
    if "__init__" in cls.__dict__ or hasattr(cls, "__post_init__") or not cls.__doc__:
        return False
    if any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:]):
        return False
    for name, annotation in inspect.get_annotations(cls).items():
        if name in (_SELF, _OBJECT) or (
            any(word in annotation for word in _NOT_PLAIN)
            if isinstance(annotation, str)
            else annotation is dataclasses.KW_ONLY
            or isinstance(annotation, dataclasses.InitVar)
            or "ClassVar" in repr(annotation)
        ):
            return False
        default = cls.__dict__.get(name)
        if isinstance(default, dataclasses.Field) and (
            default.default_factory is not dataclasses.MISSING
            or not default.init
            or default.kw_only is True
        ):
            return False
    return True


def _init(cls: type, frozen: bool) -> FunctionType:
    """The plain ``__init__`` of ``cls`` (made by the standard library without one): the
    code of :func:`_init_code` with the fields' names, and as ``_init_fn`` makes it, the
    fields' defaults and annotations and the module's globals."""
    fields = dataclasses.fields(cls)
    if len(fields) != len(cls.__dataclass_fields__) or any(  # type: ignore[attr-defined]
        not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING for f in fields
    ):
        raise TypeError(f"{cls.__name__}: not a plain __init__ (pysframe.dataclass)")
    defaults = []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            defaults.append(f.default)
        elif defaults:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    code = _init_code(len(fields), frozen)
    renamed = {f"_{index}": f.name for index, f in enumerate(fields)}
    code = code.replace(
        co_varnames=tuple(renamed.get(name, name) for name in code.co_varnames),
        co_names=tuple(renamed.get(name, name) for name in code.co_names),
        co_consts=tuple(
            renamed.get(value, value) if isinstance(value, str) else value
            for value in code.co_consts
        ),
    )
    module = sys.modules.get(cls.__module__)
    closure = tuple(CellType(object) for _ in code.co_freevars)
    init = FunctionType(
        code, module.__dict__ if module else {}, "__init__", tuple(defaults) or None, closure
    )
    init.__annotations__ = {f.name: f.type for f in fields} | {"return": None}
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _frozen_methods(cls: type, declared: Any) -> dict[str, Any]:
    """A frozen class's ``__setattr__`` and ``__delattr__`` (``_frozen_get_del_attr``: they
    name the class as declared, before its slots were added, as the standard library's do),
    and with slots its ``__getstate__`` and ``__setstate__`` (``_add_slots``)."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    frozen_error = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is declared or name in names:
            raise frozen_error(f"cannot assign to field {name!r}")
        super(declared, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is declared or name in names:
            raise frozen_error(f"cannot delete field {name!r}")
        super(declared, self).__delattr__(name)

    methods: dict[str, Any] = {"__setattr__": __setattr__, "__delattr__": __delattr__}
    for name in methods:
        if name in cls.__dict__:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    if "__slots__" in cls.__dict__:

        def __getstate__(self: Any) -> list[Any]:
            return [getattr(self, name) for name in names]

        def __setstate__(self: Any, state: list[Any]) -> None:
            for name, value in zip(names, state, strict=False):  # as _dataclass_setstate
                object.__setattr__(self, name, value)

        for name, method in (("__getstate__", __getstate__), ("__setstate__", __setstate__)):
            if name not in cls.__dict__:
                methods[name] = method
    return methods


def _dataclass(
    cls: type | None = None, /, *, repr: bool = True, eq: bool = True, frozen: bool = False,
    slots: bool = False,
) -> Any:  # fmt: skip
    """:func:`dataclasses.dataclass` with its ``repr``, ``eq``, ``frozen`` and ``slots`` (the
    others keep their defaults: ``init``, no ``order``, no ``unsafe_hash``...)."""

    def wrap(cls: type) -> type:
        if not _plain_init(cls):
            made: type = _STDLIB(cls, repr=False, eq=False, frozen=frozen, slots=slots)
            methods = _methods(made, repr, eq, frozen)
        else:
            made = _STDLIB(cls, init=False, repr=False, eq=False, slots=slots)
            methods = {"__init__": _init(made, frozen)}
            if frozen:
                methods |= _frozen_methods(made, cls)
            methods |= _methods(made, repr, eq, frozen)
            params = made.__dataclass_params__  # type: ignore[attr-defined]
            params.init, params.frozen = True, frozen
        for name, method in methods.items():
            if method is not None and name != "__init__":
                method.__qualname__ = f"{made.__qualname__}.{name}"
            setattr(made, name, method)
        return made

    return wrap if cls is None else wrap(cls)


if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    dataclass = _dataclass
