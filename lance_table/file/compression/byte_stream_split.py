"""Byte-stream split: byte ``j`` of value ``i`` goes to ``j * n + i``, one stream per byte position.

It groups the bytes that vary alike (the exponent bytes of floats, the high bytes of small
integers), which general compression then squeezes better; Lance writes it under ``general``.
"""

from __future__ import annotations

import numpy as np


def encode(values: np.ndarray) -> bytes:
    """The byte streams of fixed-width values (1 to 8 bytes each), first byte position first."""
    values = np.ascontiguousarray(values)
    width = values.dtype.itemsize
    return values.view(np.uint8).reshape(values.size, width).T.tobytes()


def decode(data: bytes | memoryview, width: int, n: int) -> np.ndarray:
    """The ``n`` values of ``width`` bytes each, as rows of bytes ``(n, width)``."""
    return np.frombuffer(data, np.uint8, n * width).reshape(width, n).T.copy()
