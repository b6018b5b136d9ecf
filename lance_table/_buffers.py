"""Large uninitialized arrays from Arrow's memory pool.

A large ``np.empty`` is mapped fresh from the system on most calls, and its first writes fault its
pages in one by one: filling a fresh 8 MiB array with decoded values took twice as long as
filling one already mapped (2 page faults per 1024 64-bit values). Arrow's pool keeps the memory
it recently freed mapped and hands it back, so decode outputs and read buffers taken from it are
written at full speed. The arrays keep their Arrow buffer alive, and Arrow arrays made from their
memory share it without a copy.

Reads from object storage of a megabyte or more are received into :func:`reusable` buffers
instead, handed out again once nothing refers to them (Arrow's pool gives such blocks back to
the system within milliseconds).
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_table._parallel import after_fork_in_child

#: arrays of at least this many bytes come from Arrow's pool; smaller ones from numpy (the
#: allocator reuses small blocks, and a pool buffer costs a few microseconds more to make)
POOLED_BYTES = 1 << 16


def empty(n: int, dtype: npt.DTypeLike) -> np.ndarray:
    """An uninitialized, writable, contiguous array of ``n`` values of ``dtype`` (from Arrow's
    memory pool when it is large)."""
    dtype = np.dtype(dtype)
    size = n * dtype.itemsize
    if size < POOLED_BYTES:
        return np.empty(n, dtype)
    return np.frombuffer(pa.allocate_buffer(size), dtype, n)


#: buffers of at least this many bytes come from :func:`reusable`'s kept buffers
REUSED_BYTES = 1 << 20
#: the most bytes of buffers :func:`reusable` keeps (in use or free to reuse)
REUSED_LIMIT = 64 << 20
_KEPT: list[np.ndarray] = []
_KEPT_LOCK = threading.Lock()
# the references to a kept buffer that nothing else holds: the list's, the loop's and the
# argument of ``sys.getrefcount``
_UNHELD = 3


def reusable(n: int) -> np.ndarray:
    """An uninitialized, writable array of ``n`` bytes, for a large read received straight into
    it (from object storage or a local file; it often becomes the memory of the values decoded
    from it).

    A fresh array of megabytes is mapped from the system and its pages cleared by the kernel
    as they are first written: receiving a 19 MB page of vectors spent two thirds of its CPU
    time in the kernel clearing pages (the allocators hand memory that large back to the system
    when it is freed: glibc at once, Arrow's mimalloc within milliseconds). Large arrays are so
    taken from buffers kept here (at most :data:`REUSED_LIMIT` bytes of them), a buffer being
    free to reuse when nothing but this module refers to it: every view of its memory (a numpy
    view, a memoryview, an Arrow buffer made from one) holds a reference to it, so that a table
    still viewing it keeps it from being handed out again. Beyond that bound (a read holding many
    large buffers at once) arrays come from Arrow's pool (:func:`empty`)."""
    if n < REUSED_BYTES:
        return np.empty(n, np.uint8)
    size = _size_class(n)
    with _KEPT_LOCK:
        for buf in _KEPT:
            if buf.size == size and sys.getrefcount(buf) == _UNHELD:
                return buf[:n]
        kept = sum(buf.size for buf in _KEPT)
        if kept + size > REUSED_LIMIT:
            free = [k for k, buf in enumerate(_KEPT) if sys.getrefcount(buf) == _UNHELD]
            free.sort(key=lambda k: _KEPT[k].size)
            dropped = set()
            while free and kept + size > REUSED_LIMIT:  # the free ones make room, largest first
                k = free.pop()
                dropped.add(k)
                kept -= _KEPT[k].size
            _KEPT[:] = [buf for k, buf in enumerate(_KEPT) if k not in dropped]
        if kept + size > REUSED_LIMIT:  # not kept: Arrow's pool, which may have it mapped still
            return empty(n, np.uint8)
        buf = np.empty(size, np.uint8)
        _KEPT.append(buf)
        return buf[:n]


def _size_class(n: int) -> int:
    """``n`` rounded up to a multiple of an eighth of its power of two (at most 1/8 more), so
    that reads of about one size reuse one another's buffers."""
    step = 1 << max(n.bit_length() - 4, 0)
    return -(-n // step) * step


def _after_fork() -> None:
    """A forked child's lock is free (another thread may have held it at the fork)."""
    global _KEPT_LOCK
    _KEPT_LOCK = threading.Lock()


after_fork_in_child(_after_fork)
