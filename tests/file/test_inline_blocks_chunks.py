"""Inline-bitpacked chunks of ragged value counts decoded together (:mod:`inline_blocks`): chunks
of a few values, of exactly 1024 * k, of none, at any byte spacing, with runs of one bit width and
widths changing block to block, signed values, and floors (blocks whose values all lie below a
floor may read as zeros); in place, by width, and by the default choice between them."""

from __future__ import annotations

import numpy as np
import pytest

from lance_table.file.compression import bitpacking
from lance_table.file.v2_1 import inline_blocks

SIGNED = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def _chunk(rng: np.random.Generator, t: int, count: int, mode: str) -> np.ndarray:
    dtype = bitpacking.DTYPES[t]
    top = 2 ** (t - 1)
    if mode == "runs":  # runs of four blocks of one width, negatives in some chunks (full width)
        widths = np.repeat(rng.integers(0, t + 1, count // 4096 + 1), 4)
        values = np.concatenate(
            [rng.integers(0, min(2 ** int(w), top), 1024, dtype=np.uint64) for w in widths]
        )[:count].astype(dtype)
        if rng.random() < 0.3:
            values = (values.astype(SIGNED[t]) - SIGNED[t](3)).view(dtype)
        return values
    if mode == "sorted":
        return np.sort(rng.integers(0, 2 ** (t - 2), count, dtype=np.uint64)).astype(dtype)
    return np.zeros(count, dtype)


@pytest.mark.parametrize("run_blocks", [1, 8, 10**9], ids=["in-place", "default", "by-width"])
def test_ragged_chunks_decode_to_their_values_with_and_without_floors(monkeypatch, run_blocks):
    monkeypatch.setattr(inline_blocks, "RUN_BLOCKS", run_blocks)
    rng = np.random.default_rng(5)
    for _ in range(40):
        t = int(rng.choice([8, 16, 32, 64]))
        mode = str(rng.choice(["runs", "sorted", "zero"]))
        counts = []
        for k in range(int(rng.integers(1, 8))):
            shape = rng.random()
            if shape < 0.4:
                counts.append(1024 * int(rng.integers(1, 12)))
            elif shape < 0.5:
                counts.append(0 if k else 1024)
            else:
                counts.append(int(rng.integers(1, 12000)))
        chunks = [_chunk(rng, t, c, mode) for c in counts]
        parts, at, pos = [], [], 0
        for values in chunks:
            gap = int(rng.integers(0, 3)) * 8  # a chunk's header and padding before its values
            words = bitpacking.pack_inline(values).tobytes() if values.size else b""
            parts += [b"\0" * gap, words]
            at.append(pos + gap)
            pos += gap + len(words)
        data = memoryview(b"".join(parts) + b"\0" * 8)
        want = np.concatenate(chunks)
        for floor in (None, 1, 300, 2**20):
            got = inline_blocks.values(t, data, np.array(at), np.array(counts), None, floor)  # type: ignore[arg-type]
            assert got is not None
            values = np.frombuffer(got.data, want.dtype)
            assert values.size == want.size
            if not floor:
                np.testing.assert_array_equal(values, want)
                continue
            # a value may read differently only where it and what is read both lie below the floor
            differ = values != want
            below = (want.astype(SIGNED[t]) >= 0) & (want < floor) & (values < floor)
            assert not np.any(differ & ~below), (t, mode, counts, floor)
