"""Values too wide for plain mini-block chunks (Lance 2.1/2.2 writer): the full-zip form of a
page's values (:func:`per_value`), and the mini-block forms that beat it for wide binary values
(:func:`wide_values`).

Full-zip values must each decompress on their own; binary ones take one of three forms:

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

from lance_table._numpy import sorted_unique
from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.file.compression import fsst_encode, general
from lance_table.file.v2_1.general_values import SCHEME_PB, general_values
from lance_table.file.v2_1.value_kinds import (
    MiniBlockValues,
    VariableValues,
    flat,
    fsl_encoding,
    fsl_levels,
    leaf_encoding,
    leaf_of,
    variable_parts,
)
from lance_table.file.v2_1.values_encode import (
    WIDE_CHUNK_BYTES,
    PerValue,
    _dictionary_values,
    _variable,
)
from lance_table.schema import is_binary_like

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
    rows = sorted_unique(np.linspace(0, n - 1, max(1, min(n, SAMPLE_BYTES // avg))).astype(np.int64))
    starts, stops = offsets[rows].tolist(), offsets[rows + 1].tolist()
    codec = general.codec("zstd")
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
    codec = general.codec("zstd")
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


def wide_values(values: pa.Array, scheme: str | None, v2_2: bool) -> MiniBlockValues | None:
    """Mini-block values for binary values too wide for plain chunks (a full-zip page otherwise),
    or None to write them full-zip.

    A page of few distinct values (at most half as many as values) is a dictionary with indices,
    as pylance writes it: it takes their bytes once. In 2.2, values of a few hundred bytes (see
    :func:`zstd_chunks_pay`) are zstd-compressed chunks: zstd on a few KiB at a
    time compresses them better than FSST or zstd per value, and costs a call per chunk, not per
    value. Fields that name a compression keep pylance's full-zip forms.
    """
    if scheme is not None:
        return None
    found = _dictionary_values(values, None, v2_2)
    if found is not None or not v2_2:
        return found
    offsets, data = variable_parts(values)
    if not zstd_chunks_pay(offsets, data, WIDE_CHUNK_BYTES):
        return None
    return general_values(_variable(values, fsst=False), "zstd", WIDE_CHUNK_BYTES)


def per_value(values: pa.Array, what: str, scheme: str | None = None) -> PerValue | None:
    """The full-zip form of the values, or None when they have none (bit-packed items).

    Binary values are stored as :func:`choose` says from the values and
    ``scheme`` (the field's ``lance-encoding:compression``): each compressed on its own with
    zstd, FSST-compressed with one table for the page (when that makes them smaller), or plain.
    """
    t = values.type
    if is_binary_like(t):
        large = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
        offset_bits = 64 if large else 32
        offsets, data = variable_parts(values)
        enc = pb.CompressiveEncoding()
        enc.variable.offsets.CopyFrom(flat(offset_bits))
        kind = choose(offsets, data, fsst=pa.types.is_string(t), scheme=scheme)
        if kind == "zstd":
            # null values get no frame: full-zip pages store nothing for them
            keep = None
            if values.null_count:
                data, offsets = fsst_encode.arrow_buffers(values)
                keep = values.is_valid().to_numpy(zero_copy_only=False)
            packed, packed_at = general.zstd_each(data, offsets, keep)
            wrapped = pb.CompressiveEncoding()
            wrapped.general.compression.scheme = SCHEME_PB["zstd"]
            wrapped.general.values.CopyFrom(enc)
            return PerValue(wrapped, packed, lengths=np.diff(packed_at), offset_bits=offset_bits)
        if kind == "fsst":
            mb = _variable(values, fsst=True)
            if isinstance(mb, VariableValues) and mb.encoding.HasField("fsst"):
                return PerValue(mb.encoding, mb.data, lengths=np.diff(mb.offsets), offset_bits=32)
        return PerValue(enc, data, lengths=np.diff(offsets), offset_bits=offset_bits)
    levels, leaf_arr = fsl_levels(values)
    leaf = leaf_of(leaf_arr, what)
    if leaf.table is None:
        return None
    n = len(values)
    per = levels[-1][0] if levels else 1
    parts = []
    for m, valid in levels:
        if valid is not None:
            parts.append(np.packbits(valid.reshape(n, m), axis=1, bitorder="little"))
    parts.append(leaf.table.reshape(n, per * leaf.table.shape[1]))
    table = np.hstack(parts) if len(parts) > 1 else parts[0]
    enc = fsl_encoding(levels, leaf_encoding(leaf_arr, leaf))
    return PerValue(enc, table.reshape(-1), bits=table.shape[1] * 8)
