"""Thread pools. Work on whole fragments runs on one pool, page decoding on a second and the
pieces of one big page on a third, so a task can wait on tasks of the next pool without deadlock."""

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
PARTS = "lance_table-part"

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


def map_parts(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``, in order, on the pool for pieces of one page.

    ``fn`` must not itself call :func:`map_parts`' pool; it is meant for leaf work such as
    decoding one block of a large page.
    """
    items = list(items)
    if len(items) < 2 or threading.current_thread().name.startswith(PARTS):
        return [fn(x) for x in items]
    return list(pool(PARTS).map(fn, items))
