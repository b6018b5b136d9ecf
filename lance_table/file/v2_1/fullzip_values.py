"""Which compression the binary values of a full-zip page get (Lance 2.1/2.2 writer).

Full-zip values must each decompress on their own; three forms qualify:

* ``zstd``: each value its own zstd frame (``general`` over ``variable``), which pylance's reader
  decodes whatever the values' sizes. pylance writes it when a value is longer than 32 KiB; here
  also when values are 1 KiB or more on average (over those that hold bytes:
  :data:`ZSTD_EACH_MIN_AVG`), or binary and large-string values of any size, as long as a sample of
  the page shows zstd saving at least a tenth (:func:`zstd_each_pays`). zstd runs in C on
  threads: for such values it is several times faster than FSST in numpy and compresses text
  better (2-8 KiB of English-like words: 2.5x against FSST's 2.3x).
* ``fsst``: one symbol table for the page, each value coded with it; for strings shorter than
  that on average, where a call to zstd per value costs more than FSST and gains less.
* (format 2.2, not full-zip at all) values of a few hundred bytes: zstd-compressed mini-block
  chunks, when a sample of chunks says they pay (:func:`zstd_chunks_pay`).
* ``plain``: the bytes as they are: pages under 32 KiB (as pylance), values the sample shows
  incompressible (random bytes, already compressed media), and every page whose field asks for
  no compression.

pylance never compresses ``binary`` full-zip values below 32 KiB (nor uses FSST on them); writing
them with zstd when that pays only makes the files smaller, and pylance reads them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_table.file.compression import fsst_encode, general

# Strings of at least this many bytes on average are compressed with zstd each, not FSST.
ZSTD_EACH_MIN_AVG = 1024
# A full-zip page holding a value longer than this compresses each value with zstd whatever
# the sample says (pylance's choice).
PER_VALUE_ZSTD_ABOVE = 32 * 1024
# zstd is kept when it makes the sample at most this fraction of its size.
MIN_GAIN = 0.9
# About this many bytes of values, evenly spread over the page, are compressed to decide.
SAMPLE_BYTES = 256 * 1024


def choose(offsets: np.ndarray, data: np.ndarray, *, fsst: bool, scheme: str | None) -> str:
    """``"zstd"``, ``"fsst"`` or ``"plain"`` for a full-zip page of binary values
    ``data[offsets[i]:offsets[i+1]]`` (offsets from 0); ``fsst`` when FSST may be used (strings
    with 32-bit offsets, as pylance: never binaries, and FSST here codes 32-bit offsets), ``scheme``
    the field's ``lance-encoding:compression`` (``none`` stores them plain; ``zstd`` or ``lz4``
    rule FSST out)."""
    n = int(offsets.size) - 1
    if scheme == "none" or n <= 0:
        return "plain"
    lengths = np.diff(offsets)
    if int(lengths.max()) > PER_VALUE_ZSTD_ABOVE:
        return "zstd"
    if data.size < fsst_encode.MIN_INPUT:
        return "plain"
    if not fsst or data.size >= ZSTD_EACH_MIN_AVG * _stored(lengths) or scheme is not None:
        return "zstd" if zstd_each_pays(offsets, data) else "plain"
    return "fsst"


def zstd_each_pays(offsets: np.ndarray, data: np.ndarray) -> bool:
    """Whether zstd, each value compressed on its own, makes a sample of the values (about
    :data:`SAMPLE_BYTES` of them, evenly spread) at most :data:`MIN_GAIN` of their size, frame
    headers counted."""
    n = int(offsets.size) - 1
    avg = max(data.size // _stored(np.diff(offsets)), 1)
    rows = np.unique(np.linspace(0, n - 1, max(1, min(n, SAMPLE_BYTES // avg))).astype(np.int64))
    starts, stops = offsets[rows].tolist(), offsets[rows + 1].tolist()
    codec = pa.Codec("zstd")
    raw = packed = 0
    for a, b in zip(starts, stops, strict=True):
        raw += b - a
        if b - a < general.RAW_FRAME_BELOW:  # stored as a raw frame by zstd_each
            packed += b - a + 17
        else:
            packed += len(codec.compress(data[a:b], asbytes=True)) + 8
    return packed <= MIN_GAIN * raw


def zstd_chunks_pay(offsets: np.ndarray, data: np.ndarray, chunk_bytes: int) -> bool:
    """Whether binary values too wide for plain mini-block chunks are better written as
    zstd-compressed chunks of about ``chunk_bytes`` (format 2.2): values under 1 KiB on average
    (:data:`ZSTD_EACH_MIN_AVG`; longer ones compress as well one by one, full-zip), none longer
    than half a chunk, at least 32 KiB of them, and zstd making a sample of a few chunk-sized runs
    of values at most :data:`MIN_GAIN` of their size."""
    lengths = np.diff(offsets)
    if not lengths.size or data.size < fsst_encode.MIN_INPUT:
        return False
    if data.size >= ZSTD_EACH_MIN_AVG * _stored(lengths) or int(lengths.max()) > chunk_bytes // 2:
        return False
    codec = pa.Codec("zstd")
    raw = packed = 0
    for at in np.linspace(0, data.size - chunk_bytes, max(1, min(32, data.size // chunk_bytes))).tolist():
        piece = data[int(at) : int(at) + chunk_bytes]
        raw += piece.size
        packed += len(codec.compress(piece, asbytes=True))
    return packed <= MIN_GAIN * raw


def _stored(lengths: np.ndarray) -> int:
    """How many values hold bytes (nulls and empty values do not; at least 1): the averages
    above are over these, since zstd is called once for each."""
    return max(int(np.count_nonzero(lengths)), 1)
