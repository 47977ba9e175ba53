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
* ``__init__`` is the standard library's own code: for a class of that many fields, compiled
  once per process for each number of fields (and frozen or not), with the field names put in
  its names and constants (:meth:`types.CodeType.replace`); for a class with default
  factories, its own text, compiled.  It has the same bytecode, closure, signature, defaults
  and annotations as the one the standard library compiles for the class, and is made when
  first looked up (by the first instance): a class never instantiated compiles nothing.  A
  class whose ``__init__`` is not plain (``init=False``, a keyword-only field, an
  ``InitVar``, a ``__post_init__``, its own ``__init__``, a dataclass base, no docstring)
  gets the standard library's compiled one;
* the standard library makes the fields of a plain class from placeholders of their
  annotations, which this decorator has looked up once for a ``ClassVar``, an ``InitVar`` or
  a ``KW_ONLY`` as the standard library looks (``_is_type``: the first name of an annotation
  written as text, in the class's module), instead of three times.

The class is a dataclass (:func:`dataclasses.fields`, :func:`dataclasses.replace`,
:func:`dataclasses.asdict` take it); its ``__dataclass_params__`` say ``init`` and ``frozen``
as declared, ``repr`` and ``eq`` false, as the standard library made it so.

The type checker sees :func:`dataclasses.dataclass` itself.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import reprlib
import sys
import typing
from collections.abc import Callable, Collection
from operator import attrgetter
from types import CellType, CodeType, FunctionType, MethodType
from typing import TYPE_CHECKING, Any, ClassVar, get_origin

__all__ = ["dataclass"]

_STDLIB = dataclasses.dataclass
#: The names ``_init_fn`` gives the object whose ``__setattr__`` a frozen class's ``__init__``
#: calls, the marker a parameter whose field has a default factory takes by default, and
#: ``self`` (a field of one of these names gets the standard library's ``__init__``).
_OBJECT = "__dataclass_builtins_object__"
_MARKER = "_HAS_DEFAULT_FACTORY"
_SELF = "self"
_RESERVED = (_OBJECT, _MARKER, _SELF)
#: The standard library's marker (``repr`` ``<factory>``), a private name of its module.
_FACTORY = dataclasses._HAS_DEFAULT_FACTORY  # type: ignore[attr-defined]
#: An annotation's first name, after a module's (``dataclasses._MODULE_IDENTIFIER_RE``).
_LEADING = re.compile(r"^(?:\s*(\w+)\s*\.)?\s*(\w+)")
#: What the standard library is told each annotation of a plain class is (:func:`_plain_class`).
_PLACEHOLDER = object()
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


def _init_text(names: list[str], frozen: bool, factories: Collection[str]) -> str:
    """The text of ``__init__`` that ``_init_fn`` and ``_create_fn`` write for the fields
    ``names``, each set from its argument (``_field_init``, ``_field_assign``), or, for the
    fields in ``factories``, from its default factory when the argument is the standard
    library's marker; inside the function whose parameters its closure's cells are.  The
    annotations and defaults are the function's, not its code's: left out."""
    body = []
    for name in names:
        value = f"_dflt_{name}() if {name} is {_MARKER} else {name}" if name in factories else name
        body.append(
            f"{_OBJECT}.__setattr__({_SELF},{name!r},{value})" if frozen
            else f"{_SELF}.{name}={value}"
        )  # fmt: skip
    lines = "\n".join(f"  {line}" for line in body or ["pass"])
    outer = ",".join([_OBJECT, _MARKER, *(f"_dflt_{name}" for name in factories)])
    return (
        f"def __create_fn__({outer}):\n def __init__({','.join([_SELF, *names])}):\n{lines}\n"
        " return __init__"
    )


def _compiled(text: str) -> CodeType:
    """The code of the ``__init__`` in ``text`` (:func:`_init_text`), compiled as the standard
    library's module compiles it: without this module's ``from __future__ import
    annotations``."""
    create = compile(text, "<string>", "exec", dont_inherit=True).co_consts[0]
    return next(code for code in create.co_consts if isinstance(code, CodeType))


def _init_code(count: int, frozen: bool) -> CodeType:
    """The code of ``__init__`` for ``count`` fields without default factories, named ``_0``,
    ``_1``...: compiled once per process for each count, frozen or not."""
    key = (count, frozen)
    code = _init_codes.get(key)
    if code is None:
        code = _init_codes[key] = _compiled(
            _init_text([f"_{index}" for index in range(count)], frozen, ())
        )
    return code


def _plain_init(cls: type) -> frozenset[str] | None:
    """The ``ClassVar`` annotations of ``cls`` when the standard library's ``__init__`` for it
    would be plain: each field positional, set from its argument, its default or its default
    factory, then nothing else (see :func:`_init_text`); None when it would not be (an
    ``InitVar`` or a ``KW_ONLY``, ``init=False`` or keyword-only, a ``__post_init__``...)."""
    if "__init__" in cls.__dict__ or hasattr(cls, "__post_init__") or not cls.__doc__:
        return None
    if any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:]):
        return None
    module = sys.modules.get(cls.__module__)
    namespace = module.__dict__ if module is not None else {}
    classvars = []
    for name, annotation in inspect.get_annotations(cls).items():
        named = _named(annotation, namespace) if isinstance(annotation, str) else annotation
        if name in _RESERVED:
            return None
        if named is not None:  # most annotations name nothing of the module (int, str...)
            if named is dataclasses.KW_ONLY or named is dataclasses.InitVar or isinstance(
                named, dataclasses.InitVar
            ):
                return None
            if named is ClassVar or get_origin(named) is ClassVar:
                classvars.append(name)
                continue
        default = cls.__dict__.get(name)
        if isinstance(default, dataclasses.Field) and (not default.init or default.kw_only is True):
            return None
    return frozenset(classvars)


def _named(annotation: str, namespace: dict[str, Any]) -> object:
    """What the standard library takes an annotation written as text for when it looks for a
    ``ClassVar``, an ``InitVar`` or a ``KW_ONLY`` (``_is_type``): the object its first name
    names in the class's module, or, after ``typing.`` or ``dataclasses.`` (as the module
    names either), in that module."""
    found = _LEADING.match(annotation)
    if found is None:
        return None
    module, name = found.groups()
    if not module:
        return namespace.get(name)
    where = namespace.get(module)
    return getattr(where, name, None) if where is typing or where is dataclasses else None


def _plain_class(cls: type, slots: bool, classvars: frozenset[str]) -> type:
    """The standard library's dataclass of ``cls`` (its fields, its slots), without methods,
    for a class :func:`_plain_init` found plain.  The annotations of its fields are handed to
    the standard library as placeholders, then put back, in the class and its fields: the
    standard library looks each annotation written as text up three times in the class's
    module, for a ``ClassVar``, an ``InitVar`` and a ``KW_ONLY`` (``_is_type``, some 3 us a
    field), which :func:`_plain_init` has looked for once.  (The ``classvars`` are handed as
    they are.)"""
    annotations = inspect.get_annotations(cls)
    if not annotations:
        made: type = _STDLIB(cls, init=False, repr=False, eq=False, slots=slots)
        return made
    cls.__annotations__ = {
        name: annotation if name in classvars else _PLACEHOLDER
        for name, annotation in annotations.items()
    }
    try:
        made = _STDLIB(cls, init=False, repr=False, eq=False, slots=slots)
    finally:
        cls.__annotations__ = annotations
    made.__annotations__ = annotations
    for f in made.__dataclass_fields__.values():  # type: ignore[attr-defined]
        f.type = annotations[f.name]
    return made


def _init_defaults(cls: type, classvars: frozenset[str]) -> tuple[Any, ...]:
    """The defaults of the plain ``__init__`` of ``cls`` (made by the standard library without
    one): the fields' own, the marker for a default factory; TypeError where ``_init_fn``
    raises it (a field without a default after one with)."""
    fields = dataclasses.fields(cls)
    if len(fields) + len(classvars) != len(cls.__dataclass_fields__) or any(  # type: ignore[attr-defined]
        not f.init or f.kw_only for f in fields
    ):
        raise TypeError(f"{cls.__name__}: not a plain __init__ (pysframe.dataclass)")
    defaults = []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            defaults.append(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            defaults.append(_FACTORY)
        elif defaults:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    return tuple(defaults)


def _init(cls: type, frozen: bool, defaults: tuple[Any, ...]) -> FunctionType:
    """The plain ``__init__`` of ``cls``, as ``_init_fn`` makes it: the code of
    :func:`_init_code` with the fields' names in its names and constants, or, with default
    factories, of its own text; the fields' ``defaults`` and annotations, the module's
    globals, and the cells of the names its code takes from ``__create_fn__``."""
    fields = dataclasses.fields(cls)
    factories = {
        f.name: f.default_factory for f in fields if f.default_factory is not dataclasses.MISSING
    }
    names = [f.name for f in fields]
    if factories:
        code = _compiled(_init_text(names, frozen, factories))
    else:
        code = _init_code(len(fields), frozen)
        renamed = {f"_{index}": name for index, name in enumerate(names)}
        code = code.replace(
            co_varnames=tuple(renamed.get(name, name) for name in code.co_varnames),
            co_names=tuple(renamed.get(name, name) for name in code.co_names),
            co_consts=tuple(
                renamed.get(value, value) if isinstance(value, str) else value
                for value in code.co_consts
            ),
        )
    cells = {_OBJECT: object, _MARKER: _FACTORY}
    cells |= {f"_dflt_{name}": factory for name, factory in factories.items()}
    module = sys.modules.get(cls.__module__)
    init = FunctionType(
        code, module.__dict__ if module else {}, "__init__", defaults or None,
        tuple(CellType(cells[name]) for name in code.co_freevars),
    )  # fmt: skip
    init.__annotations__ = {f.name: f.type for f in fields} | {"return": None}
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


class _LazyInit:
    """A plain class's ``__init__`` until it is first looked up (by the class's first instance,
    or by anyone asking the class for it): then made (:func:`_init`), put in the class in its
    place and given, so that a class never instantiated compiles nothing.  (``type.__call__``
    looks ``__init__`` up through its ``__get__``, as any descriptor's.)"""

    __slots__ = ("_cls", "_defaults", "_frozen")

    def __init__(self, cls: type, frozen: bool, defaults: tuple[Any, ...]) -> None:
        self._cls, self._frozen, self._defaults = cls, frozen, defaults

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        init = _init(self._cls, self._frozen, self._defaults)
        type.__setattr__(self._cls, "__init__", init)
        return init if instance is None else MethodType(init, instance)


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
        classvars = _plain_init(cls)
        if classvars is None:
            made: type = _STDLIB(cls, repr=False, eq=False, frozen=frozen, slots=slots)
            methods = _methods(made, repr, eq, frozen)
        else:
            made = _plain_class(cls, slots, classvars)
            defaults = _init_defaults(made, classvars)
            methods = {"__init__": _LazyInit(made, frozen, defaults)}
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
