"""Run-length encoding: runs of (value, length) expanded to values, bounded by what the page holds."""

from __future__ import annotations

import numpy as np

from lance_table.file.compression import Where

# No page holds more values than this: a longer run is damage.
MAX_RUN = 1 << 32


def expand(values: np.ndarray, lengths: np.ndarray, n: int, io: Where) -> np.ndarray:
    """The first ``n`` values of the runs (``n < 0``: all of them, as many as the lengths add up to).

    Runs are cut to ``n`` before expanding, so a damaged length cannot blow up memory.

    Raises:
        CorruptFileError: a run is longer than any page, or the runs cover fewer than ``n`` values.
    """
    raw = lengths.astype(np.uint64)
    vals = values[: raw.size]
    raw = raw[: vals.size]
    if n < 0:
        if raw.size and int(raw.max()) > MAX_RUN:
            raise io.corrupt("an RLE run is longer than any page")
        n = int(raw.sum())
    counts = np.minimum(raw, np.uint64(n)).astype(np.int64)
    if int(counts.sum()) < n:
        raise io.corrupt("RLE runs cover fewer values than the chunk holds")
    cut = int(np.searchsorted(np.cumsum(counts), n)) + 1
    return np.repeat(vals[:cut], counts[:cut])[:n]
