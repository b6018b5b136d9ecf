"""Value compression for the Lance 2.1/2.2 writer: Arrow values into ``CompressiveEncoding`` trees
and their bytes, in the two forms the layouts need.

* :func:`compress_values` (mini-block): an encoder that cuts any range of values into one
  chunk's buffers and says their sizes before building them, so the chunk planner can choose
  chunk boundaries. This is the single place where compressions plug in, each a
  :class:`MiniBlockValues` (the plain kinds are in :mod:`value_kinds`) picked here from the
  data, by measuring sizes: FastLanes ``inline_bitpacking`` for integers and floats whose bit
  width it narrows by at least an eighth (:mod:`compression.bitpacking`), ``flat`` for other
  fixed widths (bools as bitmaps),
  ``fixed_size_list`` over flat items (with item validity bitmaps), ``packed_struct`` of
  fixed-width fields; ``rle`` (u8 run lengths) when runs of equal values make it smaller than
  those; ``variable`` for binary data, ``fsst`` over it (one table trained per page, as pylance:
  not for values of 5 bytes or less on average nor below 32 KiB) and a page ``dictionary`` with
  indices (LZ4-wrapped in 2.2) when either makes the page smaller; in 2.2 zstd-compressed
  chunks of at most 8 KiB are a third choice for strings, weighed on a sample. Field metadata
  ``lance-encoding:compression`` ``zstd`` / ``lz4`` wraps each chunk's one buffer in ``general``
  (:mod:`general_values`; chunks then take as many values as the limits allow); ``none`` stores
  values plain.
* :class:`PerValue` (full-zip): the bytes of each value on its own (fixed width or
  length-prefixed), made by :func:`fullzip_values.per_value`.

The decoders in :mod:`compress` and :mod:`pervalue` read exactly these bytes.
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_table._lru import LRU
from lance_table._proto import encodings_v2_1_pb2 as pb
from lance_table.errors import UnsupportedFormatError
from lance_table.file.compression import bitpacking, dictionary, fsst_encode, fsst_train, general, rle
from lance_table.file.v2_1.general_values import SCHEME_PB, GeneralValues, general_values
from lance_table.file.v2_1.value_kinds import (
    FixedValues,
    MiniBlockValues,
    VariableValues,
    bitpacked,
    byte_values,
    fixed_bits,
    flat,
    fsl_encoding,
    fsl_levels,
    leaf_encoding,
    leaf_of,
    variable_parts,
)
from lance_table.schema import is_binary_like

# pylance skips FSST for values of this many bytes or fewer on average
FSST_MIN_AVG = 5
SCHEMES = ("zstd", "lz4")
# zstd chunks of short strings are chosen over plain bytes (or a dictionary) only when they take
# at most this share of their size: they cost a decompression on every read, which a few percent
# of bytes do not pay for (in 16 KiB chunks, random bytes save 0.3%, on their offsets)
GENERAL_MIN_GAIN = 0.95
# Values of a few hundred bytes to a few KiB (see ``fullzip_values.wide_values``) in chunks of
# at most this many bytes: a take of such values pays for the whole chunk of each row it wants.
WIDE_CHUNK_BYTES = 8 * 1024


@dataclass
class _RleValues(MiniBlockValues):
    """``rle``: each chunk holds its run values (flat) and their u8 run lengths, runs longer than
    255 split (:func:`rle.encode`)."""

    values: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    _cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def _runs(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        key = (start, stop)
        got = self._cache.get(key)
        if got is None:
            if len(self._cache) > 64:
                self._cache.clear()
            got = self._cache[key] = rle.encode(self.values[start:stop])
        return got

    def sizes(self, start: int, stop: int) -> list[int]:
        vals, lens = self._runs(start, stop)
        return [vals.nbytes, lens.nbytes]

    def chunk(self, start: int, stop: int) -> list[bytes]:
        vals, lens = self._runs(start, stop)
        return [vals.tobytes(), lens.tobytes()]


def _rle(values: pa.Array, alternative: MiniBlockValues) -> _RleValues | None:
    """Byte-aligned integers or floats in runs, when RLE stores them in fewer bytes than
    ``alternative``; else None."""
    t = values.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t)):
        return None
    bits = fixed_bits(t)
    n = len(values)
    if bits not in bitpacking.DTYPES or not n:
        return None
    words = byte_values(values, bits // 8).reshape(-1).view(bitpacking.DTYPES[bits])
    runs = rle.run_count(words)
    if runs * 4 > n:  # runs of fewer than 4 values never pay
        return None
    # upper bound: runs split at 255 values and at chunk ends (neither happens to a page of
    # at most 255 values: its runs are the entries)
    if n <= rle.MAX_RUN_U8 and n <= MiniBlockValues.max_chunk_values:
        entries = runs
    else:
        entries = int(rle.encode(words, chunk=MiniBlockValues.max_chunk_values)[1].size)
    if entries * (bits // 8 + 1) >= sum(alternative.sizes(0, n)):
        return None
    enc = pb.CompressiveEncoding()
    enc.rle.values.CopyFrom(flat(bits))
    enc.rle.run_lengths.CopyFrom(flat(8))
    return _RleValues(enc, 2, bits // 8, words)


def _variable(
    values: pa.Array, fsst: bool, rival: int | None = None, general_scheme: str | None = None
) -> MiniBlockValues:
    """``variable`` binary values, or ``fsst`` over them when FSST makes the page smaller.

    ``rival`` is the size of another encoding of the page (a dictionary): when a sample says
    FSST cannot beat it, the strings are not compressed at all (the caller takes the rival).
    With ``general_scheme`` (format 2.2), the chunks compressed with it are a third candidate,
    weighed on a sample and taken when smaller than both FSST and the rival.

    FSST is trained (the costly part: rounds of parsing and counting in Python) only when it can
    still win: the cheap candidates are sized first, then the training sample's byte-pair and
    k-gram counts say about the most FSST could save (:func:`fsst_train.savings_estimate`); when
    even that is no smaller than a rival, the table is never trained. On random letters, base64
    or random bytes zstd wins and training is skipped; the choice is the same as with training.
    """
    t = values.type
    offsets, data = variable_parts(values)
    width = 8 if pa.types.is_large_binary(t) or pa.types.is_large_string(t) else 4
    enc = pb.CompressiveEncoding()
    enc.variable.offsets.CopyFrom(flat(width * 8))
    widest = widest_value(values)
    n = len(values)
    plain = VariableValues(enc, 1, widest, offsets, data, width)
    if not fsst or width != 4 or data.size < fsst_encode.MIN_INPUT or data.size <= FSST_MIN_AVG * n:
        return plain
    # FSST codes cover at most 8 bytes each: when the rival is below that, FSST need not be tried
    fixed = fsst_encode.TABLE_SIZE + width * (n + 1)
    plain_size = width * (n + 1) + data.size
    rivals = [plain_size] if rival is None else [plain_size, rival]
    packed = None
    if general_scheme is not None:  # zstd chunks: estimated first, as they cost little to try
        packed = general_values(plain, general_scheme)
        rivals.append(packed.estimate(n))
    table = None
    fsst_size = plain_size
    if data.size // 8 + fixed < min(rivals):
        sample = fsst_train.training_sample(data, offsets)
        # what the sample's statistics say FSST might reach at best, before training for it
        best = min(rivals)
        scale = max(sample[0].size, 1)

        def wins(saving: int) -> bool:
            return data.size * (1 - saving / scale) + fixed < best

        if wins(fsst_train.savings_estimate(*sample, wins=wins)):
            table = fsst_train.train(data, offsets, sample=sample)
            fsst_size = fsst_encode.estimate(table, data, offsets) + fixed
    if packed is not None and rivals[-1] < fsst_size and rivals[-1] <= GENERAL_MIN_GAIN * min(rivals[:-1]):
        return packed
    if table is None or (rival is not None and fsst_size >= rival):
        return plain
    codes, code_offsets = fsst_encode.compress(table, data, offsets)
    if codes.size + fsst_encode.TABLE_SIZE >= data.size:
        return plain
    fenc = pb.CompressiveEncoding()
    fenc.fsst.symbol_table = table.to_bytes()
    fenc.fsst.values.CopyFrom(enc)
    return VariableValues(fenc, 1, widest, code_offsets, codes, width)


def dictionary_block(items: pa.Array, lz4: bool) -> tuple[Any, bytes]:
    """The block form of a dictionary of binary values: ``bits`` (32, or 64 for large types) and
    the data start as two words of that width, the n + 1 offsets counted from the data start, then
    the bytes; LZ4-compressed when ``lz4``."""
    offsets, data = variable_parts(items)
    large = pa.types.is_large_binary(items.type) or pa.types.is_large_string(items.type)
    bits = 64 if large else 32
    word = f"<u{bits // 8}"
    head = (2 + offsets.size) * (bits // 8)
    block = np.array([bits, head], word).tobytes() + offsets.astype(word).tobytes() + data.tobytes()
    return wrap_dictionary_block(block, bits, lz4)


def wrap_dictionary_block(block: bytes, bits: int, lz4: bool) -> tuple[Any, bytes]:
    """The encoding and page buffer of a dictionary block (see :func:`dictionary_block`) of
    ``bits`` offsets: the block as it is, or LZ4-compressed when ``lz4``.

    Small blocks are remembered by their bytes (the encoding is shared: copy it, never change
    it): a stream of small appends stores the same few dictionaries page after page, and each
    would pay for building the encoding and compressing the block again."""
    if len(block) > _KEPT_BLOCK_BYTES:
        return _wrap_dictionary_block(block, bits, lz4)
    key = (block, bits, lz4)
    got = _WRAPPED.get(key)
    if got is None:
        got = _wrap_dictionary_block(block, bits, lz4)
        _WRAPPED.put(key, got)
    return got


def _wrap_dictionary_block(block: bytes, bits: int, lz4: bool) -> tuple[Any, bytes]:
    enc = pb.CompressiveEncoding()
    enc.variable.offsets.CopyFrom(flat(bits))
    return _maybe_lz4(enc, block, lz4)


#: dictionary blocks of at most this many bytes are remembered, at most :data:`_WRAPPED`'s size
_KEPT_BLOCK_BYTES = 4096
_WRAPPED: LRU[tuple[bytes, int, bool], tuple[Any, bytes]] = LRU(256)


def _fixed_block(items: pa.Array, what: str, lz4: bool) -> tuple[Any, bytes]:
    """The block form of a dictionary of byte-aligned fixed-width values: the values, ``flat``."""
    bits = fixed_bits(items.type)
    if bits is None or bits % 8 or pa.types.is_fixed_size_list(items.type):
        raise UnsupportedFormatError(f"{what}: dictionaries of {items.type} values are not written")
    return _maybe_lz4(flat(bits), byte_values(items, bits // 8).tobytes(), lz4)


def _maybe_lz4(enc: Any, block: bytes, lz4: bool) -> tuple[Any, bytes]:
    """``block`` as it is, or wrapped in ``general`` LZ4 (what pylance does for 2.2 dictionaries)."""
    if not lz4:
        return enc, block
    outer = pb.CompressiveEncoding()
    outer.general.compression.scheme = SCHEME_PB["lz4"]
    outer.general.values.CopyFrom(enc)
    return outer, general.compress(block, "lz4")


def arrow_dictionary_values(values: pa.Array, what: str, lz4: bool) -> MiniBlockValues:
    """An Arrow dictionary array stored as it is: its indices (the key type's width; null rows
    hold 0) in mini-block chunks, its whole dictionary as the page dictionary.

    The dictionary must hold no nulls (see :func:`levels.normalize_dictionary`).

    Raises:
        UnsupportedFormatError: the dictionary's values have no block form in this writer.
    """
    items = values.dictionary
    if is_binary_like(items.type):
        enc, block = dictionary_block(items, lz4)
    else:
        enc, block = _fixed_block(items, what, lz4)
    indices = values.indices
    if indices.null_count:
        indices = indices.fill_null(0)
    idx = _base_values(indices, f"{what} (dictionary indices)", None, False)
    idx.dictionary = (enc, block, len(items))
    return idx


def widest_value(values: pa.Array) -> int:
    """The length of the longest of some binary values (0 for none).

    The last answer is kept (for as long as its array lives): a page's writer asks it of the
    same values up to three times (full-zip or mini-block, the dictionary's, the plain values')."""
    last = _last_widest
    if last is not None and last[0]() is values:
        return last[1]
    offsets, _ = variable_parts(values)
    widest = int(np.diff(offsets).max()) if offsets.size > 1 else 0
    _remember_widest(values, widest)
    return widest


#: the array :func:`widest_value` last answered for (weakly) and its answer
_last_widest: tuple[weakref.ref[pa.Array], int] | None = None


def _remember_widest(values: pa.Array, widest: int) -> None:
    global _last_widest
    _last_widest = (weakref.ref(values), widest)


def _total_bytes(values: MiniBlockValues, n: int) -> int:
    """A page's value bytes: its values, its FSST table and its dictionary."""
    extra = len(values.dictionary[1]) if values.dictionary is not None else 0
    return sum(values.sizes(0, n)) + _table_bytes(values) + extra


def _dictionary_values(values: pa.Array, best: MiniBlockValues | None, lz4: bool) -> MiniBlockValues | None:
    """Binary values as indices into a page dictionary, when that takes fewer bytes than ``best``
    (or whenever the values are few enough distinct ones, without ``best``)."""
    n = len(values)
    if (
        n < dictionary.MIN_VALUES
        or pa.types.is_large_binary(values.type)
        or pa.types.is_large_string(values.type)
    ):
        return None
    if n <= SET_COUNT_MAX:
        small = small_dictionary(values)
        if small is None:
            return None
        items, indices = small
    else:
        if _surely_high_cardinality(values):
            return None
        # one hash pass both counts the distinct values and encodes them
        items, indices = dictionary.encode(values)
        if (len(items) - items.null_count) * 2 > n:
            return None
    _, data = variable_parts(items)
    if data.size >= 1 << 31:
        return None
    enc, block = dictionary_block(items, lz4)
    idx = _base_values(pa.array(indices, pa.uint32()), "dictionary indices", None, False)
    if best is not None and len(block) + sum(idx.sizes(0, n)) >= sum(best.sizes(0, n)) + _table_bytes(best):
        return None
    idx.max_value_bytes = best.max_value_bytes if best is not None else widest_value(values)
    idx.dictionary = (enc, block, len(items))
    return idx


# At most this many values are drawn from a page to look for repeats before counting distinct
# values exactly; fewer on smaller pages (see :func:`_surely_high_cardinality`).
_SAMPLE = 4096


def _surely_high_cardinality(values: pa.Array) -> bool:
    """Whether a sample of the page repeats no value at all, which rules out a dictionary.

    With D distinct values, a random sample of k holds about k**2 / (2 D) repeats: for a page
    that would gain from a dictionary (D at most half its n values) that is k**2 / n, 16 for the
    k = 4 sqrt(n) drawn here (at most :data:`_SAMPLE`), so none means many more distinct values.
    The exact count (a hash of every value) is then not worth its cost. The rows are drawn at
    random (seeded: the same page gets the same sample) so that sorted values repeat in it too.
    """
    n = len(values)
    if n < _EXACT_BELOW:
        return False
    k = min(_SAMPLE, 4 * math.isqrt(n))
    if 2 * k > n:
        return False
    sample = values.take(_sample_rows(n, k))
    distinct = len(sample.unique()) - (1 if sample.null_count else 0)
    return distinct == len(sample) - sample.null_count or _many_distinct(values)


# Pages of at most this many values are dictionary-encoded in a Python dict (see
# :func:`small_dictionary`).
SET_COUNT_MAX = 256


def small_dictionary(values: pa.Array) -> tuple[pa.Array, np.ndarray] | None:
    """The dictionary of a small page (at most :data:`SET_COUNT_MAX` binary or string values)
    exactly as :func:`dictionary.encode` makes it (the distinct non-null values in order of first
    appearance, the ``uint32`` index of each value, 0 for a null), or None when more than n / 2
    are distinct, which rules a dictionary out. Made in a dict of the values' bytes: Arrow's hash
    kernel has a fixed cost (some tens of microseconds in a write, where its tables are cold) that
    a small append would pay on every text column, and the page is small (the work is bounded)."""
    n = len(values)
    listed = values.view(pa.binary()).to_pylist()
    position = dict.fromkeys(listed)  # (a dict keeps its keys in order of first appearance)
    position.pop(None, None)
    if len(position) * 2 > n:
        return None
    items = pa.array(list(position), pa.binary()).view(values.type)
    for k, key in enumerate(position):
        position[key] = k
    position[None] = 0
    return items, np.array(list(map(position.__getitem__, listed)), np.uint32)


# Pages of at least this many values get a second, larger sample (:func:`_many_distinct`).
_SECOND_LOOK = 1 << 15


def _many_distinct(values: pa.Array) -> bool:
    """Whether a sample of one row in 8 holds too many distinct values for a page of at most
    n / 2 distinct ones (which a dictionary needs).

    Drawing a share q of the n rows, a value held by c rows shows up with probability
    1 - (1 - q)**c, concave in c: with D <= n / 2 values the expected count of distinct ones in
    the sample is at most D (1 - (1 - q)**(n / D)) <= k (1 - q / 2) for the k rows drawn, and its
    spread is under sqrt(k). More than 4 sqrt(k) above that bound rules the dictionary out (short
    text: 96% distinct in the sample against the bound of 94%) at an eighth of the cost of the
    exact hash pass; a page that would take a dictionary stays below it.
    """
    n = len(values)
    if n < _SECOND_LOOK:
        return False
    rows = _eighth_of_rows(n)
    k = int(rows.size)
    distinct = int(pc.count_distinct(values.take(pa.array(rows)), mode="only_valid").as_py())
    return distinct > k * (1 - k / n / 2) + 4 * math.sqrt(k)


def _eighth_of_rows(n: int) -> np.ndarray:
    """Each of ``n`` rows drawn with probability 1/8 (seeded), in order: geometric gaps, no sort."""
    draws = n // 8 + 4 * math.isqrt(n // 8) + 64  # gaps that fall short of n only in a vanishing share
    rows = np.cumsum(np.random.default_rng(n + 1).geometric(1 / 8, draws)) - 1
    return rows[: int(np.searchsorted(rows, n))]


# Below this many values, counting the distinct ones exactly costs less than drawing a sample.
_EXACT_BELOW = 2048


@functools.lru_cache(maxsize=64)
def _sample_rows(n: int, k: int) -> pa.Array:
    """The rows :func:`_surely_high_cardinality` draws from a page of ``n`` values, sorted, each
    once (the same every time: a stream of equal appends draws them once)."""
    rows = np.sort(np.random.default_rng(n).integers(0, n, k))
    return pa.array(rows[np.concatenate(([True], rows[1:] != rows[:-1]))])  # a row drawn twice is no repeat


def _table_bytes(values: MiniBlockValues) -> int:
    return len(values.encoding.fsst.symbol_table) if values.encoding.HasField("fsst") else 0


def compression_scheme(metadata: Any) -> str | None:
    """The ``lance-encoding:compression`` of a field's metadata (``zstd``, ``lz4``, ``none``), or None."""
    raw = (metadata or {}).get("lance-encoding:compression")
    if raw is None:
        return None
    text = (raw.decode() if isinstance(raw, bytes) else str(raw)).strip().lower()
    return text if text in (*SCHEMES, "none") else None


def compress_values(
    values: pa.Array, what: str, scheme: str | None = None, v2_2: bool = False
) -> MiniBlockValues:
    """Choose the mini-block compression of a page's visible values (nulls included as slots).

    ``scheme`` is the field's ``lance-encoding:compression``: ``zstd`` / ``lz4`` wrap the
    values' one buffer in ``general`` (as pylance does), ``none`` stores them plain.

    Raises:
        UnsupportedFormatError: the values' type has no encoding in this writer.
    """
    base = _base_values(values, what, scheme, v2_2)
    if scheme in SCHEMES and base.num_buffers == 1:
        return general_values(base, scheme)
    return base


def _base_values(values: pa.Array, what: str, scheme: str | None, v2_2: bool) -> MiniBlockValues:
    t = values.type
    plain = scheme == "none"
    if is_binary_like(t):
        if scheme is not None:
            return _variable(values, fsst=False)
        # the dictionary first: when it beats what a sample says FSST would make of the page,
        # the strings are never compressed in full
        dict_values = _dictionary_values(values, None, v2_2)
        rival = None if dict_values is None else _total_bytes(dict_values, len(values))
        var = _variable(values, fsst=True, rival=rival, general_scheme="zstd" if v2_2 else None)
        if isinstance(var, GeneralValues):
            return var  # weighed against the dictionary already
        if dict_values is not None and rival is not None and rival < _total_bytes(var, len(values)):
            return dict_values
        return var
    packed = None if plain else bitpacked(values)
    levels, leaf_arr = fsl_levels(values)
    leaf = leaf_of(leaf_arr, what)
    per_value = levels[-1][0] if levels else 1
    bitmaps = [(m, v) for m, v in levels if v is not None]
    enc = fsl_encoding(levels, leaf_encoding(leaf_arr, leaf))
    fixed: MiniBlockValues = FixedValues(
        enc, len(bitmaps) + 1, (per_value * leaf.bits + 7) // 8, leaf, bitmaps, per_value
    )
    best = packed if packed is not None else fixed
    if not plain and scheme is None:
        runs = _rle(values, best)
        if runs is not None:
            return runs
    return best


@dataclass
class PerValue:
    """Full-zip values: ``bits`` per value (fixed) or ``lengths`` with a length prefix of
    ``offset_bits`` (variable); ``data`` holds the values back to back."""

    encoding: Any
    data: np.ndarray
    bits: int | None = None
    lengths: np.ndarray | None = None
    offset_bits: int = 32
