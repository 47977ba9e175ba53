"""The one in-memory cache: at most a given number of values, the least recently used one
dropped to make room.  Each cache is an attribute of the object that uses it (a section's
lookups, an unwinder, an address space's files), so that it lives and dies with its owner;
no module keeps a table of its own that grows.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

_Key = TypeVar("_Key", bound=Hashable)
_Value = TypeVar("_Value")
_MISSING = object()


class BoundedCache(Generic[_Key, _Value]):
    """At most ``limit`` values by key, least recently used dropped first.

    >>> cache: BoundedCache[int, str | None] = BoundedCache(2)
    >>> cache.get(1, str, 1), cache.get(2, lambda: None), len(cache)
    ('1', None, 2)
    >>> cache.get(1, str, 0)  # kept: made once
    '1'
    >>> cache.get(3, str, 3), 2 in cache, 1 in cache  # full: 2, the least recently used, goes
    ('3', False, True)
    """

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a cache holds at least one value, not {limit}")
        self.limit = limit
        self._entries: OrderedDict[_Key, _Value] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: _Key, make: Callable[..., _Value], *arguments: object) -> _Value:
        """The value kept for ``key`` (None included), else ``make(*arguments)``, kept (an
        error from ``make`` keeps nothing)."""
        entries = self._entries
        found = entries.get(key, _MISSING)
        if found is not _MISSING:
            entries.move_to_end(key)
            return found  # type: ignore[return-value]
        value = make(*arguments)
        entries[key] = value
        if len(entries) > self.limit:
            entries.popitem(last=False)
        return value

    def put(self, key: _Key, value: _Value) -> None:
        """Keep ``value`` for ``key``."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)

    def peek(self, key: _Key) -> _Value | None:
        """The value kept for ``key``, or None (the entry is not marked as used)."""
        return self._entries.get(key)

    def clear(self) -> None:
        self._entries.clear()


class CachedFunction(Generic[_Key, _Value]):
    """A function of one argument whose answers a :class:`BoundedCache` of its own keeps
    (:func:`cached`)."""

    def __init__(self, function: Callable[[_Key], _Value], limit: int) -> None:
        self._function = function
        self.cache: BoundedCache[_Key, _Value] = BoundedCache(limit)
        functools.update_wrapper(self, function)

    def __call__(self, argument: _Key) -> _Value:
        return self.cache.get(argument, self._function, argument)

    def cache_clear(self) -> None:
        self.cache.clear()


def cached(limit: int) -> Callable[[Callable[[_Key], _Value]], CachedFunction[_Key, _Value]]:
    """A decorator: the function's answers kept in a :class:`BoundedCache` of ``limit``.

    >>> @cached(2)
    ... def square(n: int) -> int:
    ...     return n * n
    >>> square(3), len(square.cache)
    (9, 1)
    """

    def wrap(function: Callable[[_Key], _Value]) -> CachedFunction[_Key, _Value]:
        return CachedFunction(function, limit)

    return wrap


__all__ = ["BoundedCache", "CachedFunction", "cached"]
