"""One bounded, thread-safe map that drops its least recently used entries first: the shape of
every process-wide cache of lance_table (readers, manifests, fragments, deletion vectors, version
summaries, listings).

An :class:`LRU` is bounded by its number of entries and, when given ``max_bytes``, by the sum of
the weights its entries were put with. What a key means (and so that a rewritten path can never be
served stale) is each cache's own rule; this class only keeps, orders and drops.

Every lock of every :class:`LRU` is replaced in a forked child: another thread of the parent may
have held it at the fork.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from lance_table._parallel import after_fork_in_child

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_ALL: weakref.WeakSet[LRU[object, object]] = weakref.WeakSet()


class LRU(Generic[K, V]):
    """A map of at most ``size`` entries (and at most ``max_bytes`` of total weight, when given)
    that, when full, drops the least recently put or read entries first. Every method is
    thread-safe; the values themselves are shared, not copied.

    Raises:
        ValueError: ``size`` or ``max_bytes`` is negative.

    Example:
        ```python
        from lance_table._lru import LRU

        cache: LRU[str, int] = LRU(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.get("a")  # "a" is now the most recently used
        cache.put("c", 3)  # drops "b"
        print(list(cache))  # ['a', 'c']
        ```
    """

    def __init__(self, size: int, max_bytes: int | None = None) -> None:
        if size < 0 or (max_bytes is not None and max_bytes < 0):
            raise ValueError(f"an LRU bound must not be negative (size={size}, max_bytes={max_bytes})")
        self.size = size
        self.max_bytes = max_bytes
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        _ALL.add(self)  # type: ignore[arg-type]

    @property
    def lock(self) -> threading.Lock:
        """The lock every method takes (for a caller that must exclude them all for a moment)."""
        return self._lock

    @property
    def nbytes(self) -> int:
        """The total weight of the entries kept."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first (a snapshot)."""
        with self._lock:
            return iter(list(self._items))

    def __getitem__(self, key: K) -> V:
        """The value of ``key``, without marking it used.

        Raises:
            KeyError: ``key`` is not kept.
        """
        with self._lock:
            return self._items[key][0]

    def values(self) -> list[V]:
        """The values, least recently used first (a snapshot)."""
        with self._lock:
            return [value for value, _ in self._items.values()]

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value of ``key``, now the most recently used; ``default`` when it is not kept."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return default
            self._items.move_to_end(key)
            return found[0]

    def get_many(self, keys: Sequence[K]) -> list[V | None]:
        """The value of each key (None where it is not kept), the ones found now the most recently
        used, in one hold of the lock."""
        items = self._items
        with self._lock:
            found = [items.get(key) for key in keys]
            for key, hit in zip(keys, found):
                if hit is not None:
                    items.move_to_end(key)
        return [None if hit is None else hit[0] for hit in found]

    def put(self, key: K, value: V, weight: int = 0) -> bool:
        """Keep ``value`` under ``key`` (replacing what was kept there) as the most recently used,
        then drop the least recently used entries until both bounds hold. A value heavier than
        ``max_bytes`` on its own is not kept: False, and nothing else changes."""
        if self.max_bytes is not None and weight > self.max_bytes:
            return False
        with self._lock:
            self._put(key, value, weight)
            self._trim()
        return True

    def setdefault(self, key: K, value: V) -> V:
        """The value kept under ``key`` (now the most recently used), or ``value`` kept there
        when there is none (as :meth:`put` of no weight): one value per key across threads."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found[0]
            self._put(key, value, 0)
            self._trim()
        return value

    def put_many(self, items: Iterable[tuple[K, V]]) -> None:
        """:meth:`put` each ``(key, value)`` (of no weight) in order, in one hold of the lock."""
        with self._lock:
            for key, value in items:
                self._put(key, value, 0)
            self._trim()

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Forget ``key``: the value it had, ``default`` when it was not kept."""
        with self._lock:
            found = self._items.pop(key, None)
            if found is None:
                return default
            self._bytes -= found[1]
            return found[0]

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def _put(self, key: K, value: V, weight: int) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        self._items[key] = (value, weight)
        self._bytes += weight

    def _trim(self) -> None:
        items, limit = self._items, self.max_bytes
        while items and (len(items) > self.size or (limit is not None and self._bytes > limit)):
            _, (_, weight) = items.popitem(last=False)
            self._bytes -= weight


def clear_all() -> int:
    """Forget every entry of every :class:`LRU` of the process; returns how many caches were cleared."""
    caches = list(_ALL)
    for cache in caches:
        cache.clear()
    return len(caches)


def _new_locks() -> None:
    for cache in list(_ALL):
        cache._lock = threading.Lock()  # a forked child: another thread may have held it at the fork


after_fork_in_child(_new_locks)

__all__ = ["LRU", "clear_all"]
