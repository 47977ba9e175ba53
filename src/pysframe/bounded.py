"""The in-memory caches: at most a given number of values, the least recently used one
dropped to make room (:class:`BoundedCache`); and, for numpy batches, integers by 64-bit key
in a table of fixed size (:class:`SlotTable`).  Each cache is an attribute of the object that
uses it (a section's lookups, an unwinder, an address space's files), so that it lives and
dies with its owner; no module keeps a table of its own that grows.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

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


class SlotTable:
    """Integers by 64-bit key, many at a time (numpy arrays): ``2**bits`` slots, each key kept
    in the slot its hash picks, a key put later taking it (a direct-mapped cache: what it
    holds is bounded, and finding a batch of keys costs a few array operations).

    >>> import numpy as np
    >>> table = SlotTable(4)
    >>> table.put(np.array([7, 9], np.uint64), np.array([70, 90]))
    >>> values, found = table.find(np.array([9, 8, 7], np.uint64))
    >>> values[found].tolist(), found.tolist()
    ([90, 70], [True, False, True])
    """

    #: The key of an empty slot, which is never found.
    EMPTY = (1 << 64) - 1
    #: Fibonacci hashing: the slot is the top bits of the key times 2**64 / phi.
    _HASH = 0x9E3779B97F4A7C15

    def __init__(self, bits: int) -> None:
        import numpy as np

        if not 0 < bits < 32:
            raise ValueError(f"a table has 2**1 to 2**31 slots, not 2**{bits}")
        self.bits = bits
        #: The hash's factor and shift, and the key never found, as numpy scalars.
        self._factor, self._shift = np.uint64(self._HASH), np.uint64(64 - bits)
        self._empty = np.uint64(self.EMPTY)
        #: Each slot's key, inverted (``~key``): the table starts as zeros, memory mapped from
        #: the system (:func:`_zeroed`), a page faulted in as it is first written (a table of
        #: 2**16 slots is 512 KiB of keys and as many of values, of which a short recording
        #: writes a few pages).
        self.inverted_keys = _zeroed(1 << bits, np.uint64)
        self.values = _zeroed(1 << bits, np.int64)

    def _slots(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        slots: npt.NDArray[np.uint64] = (keys * self._factor) >> self._shift
        return slots

    def find(
        self, keys: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """The value of each key (0 where not found), and which were found."""
        slots = self._slots(keys)
        found = self.inverted_keys.take(slots) == ~keys
        found &= keys != self._empty
        values: npt.NDArray[np.int64] = self.values.take(slots)
        return values, found

    def put(self, keys: npt.NDArray[np.uint64], values: npt.NDArray[np.int64]) -> None:
        """Keep ``values[i]`` for ``keys[i]`` (of two keys of one slot, the later stays)."""
        import numpy as np

        slots = self._slots(keys)
        # One key per slot, so that each slot's key and value are one pair's (numpy does not
        # say which of repeated indices an assignment keeps).
        _, last = np.unique(slots[::-1], return_index=True)
        chosen = len(keys) - 1 - last
        self.inverted_keys[slots[chosen]] = ~keys[chosen]
        self.values[slots[chosen]] = values[chosen]

    def clear(self) -> None:
        self.inverted_keys.fill(0)


def _zeroed(count: int, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """``count`` zeros of ``dtype`` in an anonymous memory map of their own: the kernel's
    zero page until a page is written.  (``numpy.zeros`` takes memory from the C library,
    which clears it itself where it reuses its heap: every page touched at once, as a
    report's allocator is tuned, ``pysframe.cli.perf``.)"""
    import mmap

    import numpy as np

    return np.frombuffer(mmap.mmap(-1, count * np.dtype(dtype).itemsize), dtype=dtype)


__all__ = ["BoundedCache", "CachedFunction", "SlotTable", "cached"]
