"""Thread pools. Work on whole fragments runs on one pool; page decoding on another (see
:mod:`lance_table.file.reader`), so a fragment task can wait on page tasks without deadlock."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()


def fragment_pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(
                max_workers=min(8, os.cpu_count() or 2), thread_name_prefix="lance_table-frag"
            )
        return _POOL


def map_fragments(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``, in order, on the fragment pool when there is more than one item."""
    items = list(items)
    if len(items) < 2 or threading.current_thread().name.startswith("lance_table-frag"):
        return [fn(x) for x in items]
    return list(fragment_pool().map(fn, items))
