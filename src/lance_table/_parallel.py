"""Thread pools. Work on whole fragments runs on one pool and page decoding on another, so a
fragment task can wait on page tasks without deadlock."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

FRAGMENTS = "lance_table-frag"
DECODE = "lance_table-decode"

_POOLS: dict[str, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()


def pool(name: str) -> ThreadPoolExecutor:
    """The process-wide pool called ``name`` (numpy, pyarrow and file reads release the GIL)."""
    with _LOCK:
        found = _POOLS.get(name)
        if found is None:
            workers = min(8, os.cpu_count() or 2)
            found = _POOLS[name] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        return found


def map_fragments(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``, in order, on the fragment pool when there is more than one item."""
    items = list(items)
    if len(items) < 2 or threading.current_thread().name.startswith(FRAGMENTS):
        return [fn(x) for x in items]
    return list(pool(FRAGMENTS).map(fn, items))
