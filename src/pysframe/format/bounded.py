"""A bounded cache of values made on first use: what a section keeps of the functions, rows
and row indexes its lookups decoded.

The cache is emptied when it is full rather than evicting one entry at a time: its values are
cheap to make again, and a run of lookups mostly comes back to the last few functions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

_Key = TypeVar("_Key", bound=Hashable)
_Value = TypeVar("_Value")


class BoundedCache(Generic[_Key, _Value]):
    """At most ``limit`` values by key.

    >>> cache: BoundedCache[int, str] = BoundedCache(2)
    >>> cache.get(1, str, 1), cache.get(2, str, 2), len(cache)
    ('1', '2', 2)
    >>> cache.get(3, str, 3), len(cache)  # full: emptied, then the new value kept
    ('3', 1)
    """

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._entries: dict[_Key, _Value] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: _Key, make: Callable[..., _Value], *arguments: object) -> _Value:
        """The value kept for ``key``, else ``make(*arguments)``, kept (an error from ``make``
        keeps nothing)."""
        found = self._entries.get(key)
        if found is None:
            found = make(*arguments)
            if len(self._entries) >= self.limit:
                self._entries.clear()
            self._entries[key] = found
        return found


__all__ = ["BoundedCache"]
