"""Large uninitialized arrays from Arrow's memory pool.

A large ``np.empty`` is mapped fresh from the system on most calls, and its first writes fault its
pages in one by one: filling a fresh 8 MiB array with decoded values took twice as long as
filling one already mapped (2 page faults per 1024 64-bit values). Arrow's pool keeps the memory
it recently freed mapped and hands it back, so decode outputs and read buffers taken from it are
written at full speed. The arrays keep their Arrow buffer alive, and Arrow arrays made from their
memory share it without a copy.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

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
