"""Large decode outputs come from Arrow's memory pool: they behave as plain numpy arrays."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table import _buffers


def test_small_and_large_arrays_are_writable_contiguous_and_of_the_asked_type() -> None:
    for n in (0, 10, _buffers.POOLED_BYTES // 8, _buffers.POOLED_BYTES):
        got = _buffers.empty(n, np.uint64)
        assert got.shape == (n,) and got.dtype == np.uint64
        assert got.flags.c_contiguous and got.flags.writeable
        got[:] = np.arange(n, dtype=np.uint64)
        assert np.array_equal(got, np.arange(n, dtype=np.uint64))


def test_an_arrow_array_made_from_a_pooled_array_keeps_its_values() -> None:
    values = _buffers.empty(100_000, np.int64)
    values[:] = np.arange(100_000)
    arr = pa.Array.from_buffers(pa.int64(), values.size, [None, pa.py_buffer(values)])
    del values
    assert arr.to_numpy().tolist() == list(range(100_000))


def test_a_reusable_buffer_is_handed_out_again_only_once_nothing_refers_to_it(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_buffers, "_KEPT", [])
    n = _buffers.REUSED_BYTES + 12_345
    first = _buffers.reusable(n)
    assert first.size == n and first.flags.writeable
    owner = id(first.base)
    first[:] = 7
    holders = [
        lambda a: memoryview(a),
        lambda a: a[10:20],
        lambda a: np.frombuffer(memoryview(a)[5:], np.uint8),
        lambda a: pa.py_buffer(memoryview(a)),
        lambda a: pa.Array.from_buffers(pa.uint8(), 100, [None, pa.py_buffer(memoryview(a))]),
    ]
    for hold in holders:
        held = hold(first)
        del first
        other = _buffers.reusable(n)
        assert id(other.base) != owner  # still referred to: a buffer of its own
        del other
        view = held.buffers()[1] if isinstance(held, pa.Array) else memoryview(held)
        first = np.frombuffer(view, np.uint8)
        del view
        assert int(first[0]) == 7
        del held, first
        first = _buffers.reusable(n)
        assert id(first.base) == owner  # nothing else refers to it: handed out again
        first[:] = 7
    assert _buffers.reusable(100).base is None or id(_buffers.reusable(100).base) != owner  # small: plain


def test_reusable_buffers_are_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_buffers, "_KEPT", [])
    monkeypatch.setattr(_buffers, "REUSED_LIMIT", 5 * _buffers.REUSED_BYTES)
    held = [_buffers.reusable(_buffers.REUSED_BYTES) for _ in range(8)]  # all in use at once
    assert sum(buf.size for buf in _buffers._KEPT) <= _buffers.REUSED_LIMIT
    del held
    for size in (2, 3, 4):  # other sizes: the free buffers make room
        _buffers.reusable(size * _buffers.REUSED_BYTES)
        assert sum(buf.size for buf in _buffers._KEPT) <= _buffers.REUSED_LIMIT
