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


# --- encoding --------------------------------------------------------------------------------------

# pylance stores run lengths as u8: a longer run becomes several entries of 255 and a remainder.
MAX_RUN_U8 = 255


def run_count(values: np.ndarray) -> int:
    """How many runs of equal neighbours the values make (0 for no values)."""
    values = np.asarray(values)
    if not values.size:
        return 0
    return int(np.count_nonzero(values[1:] != values[:-1])) + 1


def encode(
    values: np.ndarray, *, max_run: int = MAX_RUN_U8, chunk: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Run-length encode: the value of each run and its length (``uint8`` for pylance's limit of
    255, wider for a larger ``max_run``), with runs longer than ``max_run`` split into entries
    of ``max_run`` followed by the remainder.

    Values are compared bit for bit, so NaNs with equal bits form runs and 0.0 / -0.0 do not.
    With ``chunk``, runs also break at every multiple of ``chunk`` values, so that each
    mini-block chunk of that many values has runs of its own (see :func:`chunk_runs`).

    Raises:
        ValueError: ``max_run`` or ``chunk`` is not positive.
    """
    if max_run < 1 or (chunk is not None and chunk < 1):
        raise ValueError("max_run and chunk must be positive")
    values = np.ascontiguousarray(values)
    raw = values.view(np.dtype(f"u{values.dtype.itemsize}")) if values.dtype.kind in "fb" else values
    n = values.size
    len_dtype = np.uint8 if max_run <= 0xFF else np.uint16 if max_run <= 0xFFFF else np.uint32
    if not n:
        return values[:0], np.zeros(0, len_dtype)
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(raw[1:], raw[:-1], out=new[1:])
    if chunk is not None:
        new[::chunk] = True
    starts = np.flatnonzero(new)
    lengths = np.empty_like(starts)  # (np.diff with append= joins arrays first: slower)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = n - starts[-1]
    pieces = -(-lengths // max_run)
    if int(pieces.max()) == 1:
        return values[starts], lengths.astype(len_dtype)
    run_values = np.repeat(values[starts], pieces)
    out = np.full(run_values.size, max_run, np.int64)
    last = np.cumsum(pieces) - 1
    out[last] = lengths - (pieces - 1) * max_run
    return run_values, out.astype(len_dtype)


def chunk_runs(lengths: np.ndarray, chunk: int) -> np.ndarray:
    """How many of the runs (from :func:`encode` with the same ``chunk``) belong to each chunk of
    ``chunk`` values."""
    ends = np.cumsum(lengths, dtype=np.int64)
    if not ends.size:
        return np.zeros(0, np.int64)
    n = int(ends[-1])
    boundaries = np.minimum(np.arange(chunk, n + chunk, chunk), n)
    return np.diff(np.searchsorted(ends, boundaries, "right"), prepend=0)


def encode_block(values: np.ndarray, *, max_run: int = MAX_RUN_U8) -> bytes:
    """The block form of RLE that Lance uses for repetition/definition levels:
    ``u64 size of the run values in bytes``, the run values, then the u8 run lengths."""
    run_values, run_lengths = encode(values, max_run=max_run)
    head = np.array([run_values.nbytes], "<u8").tobytes()
    return head + run_values.tobytes() + run_lengths.tobytes()
