"""Run-length encoded values and levels, and one-bit values, of many mini-block chunks in one
numpy pass (a part of :mod:`batch`).

Both libraries store runs as run values and run lengths: in one block led by the size of the
values (levels, and values of one buffer), or in two buffers of a chunk (pylance's values). The
runs of every chunk are cut to the chunk's value count, as the decoder of one chunk cuts them.

A chunk's level runs must add up to the level count its header declares. That field is 16 bits,
so pylance compares the two modulo 65536 and refuses a chunk whose counts differ otherwise; so
do :func:`levels` (runs congruent to the count but longer are cut to it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lance_table.file.pageio import PageIO
from lance_table.file.v2_1.byteranges import as_bytes, exclusive_cumsum, gather, join, spans
from lance_table.file.v2_1.values import Fixed


def flat_width(enc: Any) -> int:
    """The byte width of plain flat values of whole bytes (0: another form)."""
    if enc.WhichOneof("compression") != "flat" or enc.flat.HasField("data"):
        return 0
    bits = int(enc.flat.bits_per_value)
    return bits // 8 if bits > 0 and bits % 8 == 0 else 0


def levels(
    enc: Any, data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO
) -> np.ndarray | None:
    """Levels of many chunks in RLE block form (see :func:`block_runs`), ``counts`` the level
    counts of their headers.

    Raises:
        CorruptFileError: a chunk's runs add up to a level count other than its header's
            (modulo 65536: see the module).
    """
    got = block_runs(enc, data, at, sizes, counts, io, levels=True)
    if got is None:
        return None
    run_values, clipped = got
    return np.repeat(run_values.astype(np.uint16), clipped)


def block_runs(
    enc: Any,
    data: memoryview,
    at: np.ndarray,
    sizes: np.ndarray,
    counts: np.ndarray,
    io: PageIO,
    levels: bool = False,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The runs of many chunks in RLE block form, ``[u64 size of the run values][run values][run
    lengths]`` each (see :func:`chunk_runs`; ``levels``: see :func:`levels`)."""
    if not at.size:
        return None
    if bool(np.any(sizes < 8)):
        raise io.corrupt("RLE block without its length prefix")
    u8 = np.frombuffer(data, np.uint8)
    head = u8[(at[:, None] + np.arange(8)).reshape(-1)].reshape(-1, 8).copy().view("<u8").reshape(-1)
    if bool(np.any(head > (sizes - 8).astype(np.uint64))):
        raise io.corrupt("RLE block values run past the block")
    value_bytes = head.astype(np.int64)
    return chunk_runs(
        enc, data, at + 8, value_bytes, at + 8 + value_bytes, sizes - 8 - value_bytes, counts, io, levels
    )


def chunk_runs(
    enc: Any,
    data: memoryview,
    value_at: np.ndarray,
    value_bytes: np.ndarray,
    length_at: np.ndarray,
    length_bytes: np.ndarray,
    counts: np.ndarray,
    io: PageIO,
    levels: bool = False,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The runs of many chunks of run-length encoded values (each chunk's run values at
    ``value_at``, its run lengths at ``length_at``): the run values as stored and the run lengths,
    every chunk's runs cut to its value count ``counts``, as one chunk would be (None: not
    whole-byte flat runs). ``np.repeat`` of the two is the chunks' values. With ``levels``, the
    runs of each chunk must add up to its count modulo 65536 (see :func:`levels`)."""
    vw, lw = flat_width(enc.values), flat_width(enc.run_lengths)
    if vw not in (1, 2, 4, 8) or lw not in (1, 2, 4, 8) or not value_at.size:
        return None
    n_runs = np.minimum(value_bytes // vw, length_bytes // lw)
    run_values = np.frombuffer(gather(data, value_at, n_runs * vw), f"<u{vw}")
    run_lengths = np.frombuffer(gather(data, length_at, n_runs * lw), f"<u{lw}").astype(np.int64)
    # each run clipped to what is left of its chunk's count
    chunk = np.repeat(np.arange(value_at.size), n_runs)
    ends = np.zeros(run_lengths.size + 1, np.int64)
    np.cumsum(run_lengths, out=ends[1:])
    first = exclusive_cumsum(n_runs)
    if levels:
        _check_level_runs(ends[first + n_runs] - ends[first], counts, io)
    before = ends[:-1] - ends[first][chunk]
    left = np.maximum(counts[chunk] - before, 0)
    clipped = np.minimum(run_lengths, left)
    covered = np.bincount(chunk, clipped, value_at.size) if clipped.size else np.zeros(value_at.size)
    if bool(np.any(covered < counts)):
        raise io.corrupt("RLE runs cover fewer values than the chunk holds")
    return run_values, clipped


def _check_level_runs(totals: np.ndarray, counts: np.ndarray, io: PageIO) -> None:
    """Each chunk's runs add up to its header's level count, modulo 65536 (see :func:`levels`)."""
    bad = np.flatnonzero((totals & 0xFFFF) != (counts & 0xFFFF))
    if bad.size:
        k = int(bad[0])
        raise io.corrupt(
            f"chunk {k} of the page read has level runs adding up to {int(totals[k])} levels, but its "
            f"header declares {int(counts[k])}"
        )


def values(runs: tuple[np.ndarray, np.ndarray] | None) -> Fixed | None:
    """The values of runs found by :func:`chunk_runs` or :func:`block_runs`."""
    if runs is None:
        return None
    run_values, clipped = runs
    return Fixed(as_bytes(np.repeat(run_values, clipped)), run_values.itemsize * 8)


def flat_bits(data: memoryview, at: np.ndarray, sizes: np.ndarray, counts: np.ndarray, io: PageIO) -> Fixed:
    """One-bit values (booleans) of many chunks, each chunk's bits from a whole byte: one
    bitmap of them all, least significant bit first."""
    need = (counts + 7) >> 3
    if bool(np.any(need > sizes)):
        raise io.corrupt("a chunk's value buffer is shorter than its values")
    joined = join(data, at, need)
    if counts.size < 2 or not bool(np.any(counts[:-1] & 7)):
        return Fixed(joined, 1)  # every chunk but the last holds whole bytes: nothing to move
    bits = np.unpackbits(np.frombuffer(joined, np.uint8), bitorder="little")
    kept = bits[spans(exclusive_cumsum(need) * 8, counts)]
    return Fixed(np.packbits(kept, bitorder="little").data, 1)
