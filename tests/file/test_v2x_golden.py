"""Golden corpus: files of formats 2.1 and 2.2 that pylance writes in the test, read back by lance_table.

Many 2.1/2.2 encodings (bitpacking widths, dictionaries, RLE, FSST, full-zip pages, constant pages)
are chosen by pylance only for pages of realistic size, so every file here has 100k+ rows (but the
one of ~300-byte values, which needs fewer rows for pages of that size). Columns
are grouped into a few files per version; the tests are parametrized per column so that a failure
names its column. Every column is compared with pylance's own reader and with the source table in
full, by ``take`` of about 1000 unsorted indices with repeats, and by ``read_range`` at random
positions and across page boundaries. A guard test checks that the corpus really contains the
encodings, page counts and chunk splits it claims to.

Cases in ``PENDING`` are read by code that other work is adding right now; they are expected to
raise ``UnsupportedFormatError`` until then (the xfail is not strict, so they may start passing).
Cases in ``KNOWN_BUGS`` are read wrongly today; their xfail is strict, so a fix must remove them.
"""

from __future__ import annotations

import decimal
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import assert_tables_equal

from lance_table.errors import CorruptFileError, UnsupportedFormatError
from lance_table.file.container import unpack_encoding
from lance_table.file.reader import LanceFileReader
from lance_table.storage.sources import LocalFileSource

lance_file = pytest.importorskip("lance.file")
pytestmark = [pytest.mark.interop, pytest.mark.corpus]

VERSIONS = ("2.1", "2.2")
Make = Callable[[np.random.Generator, int], pa.Array]


# --- generators (vectorized: the whole corpus is built in about a second) ----------------------------


def nulls(arr: pa.Array, fraction: float, rng: np.random.Generator) -> pa.Array:
    """``arr`` with about ``fraction`` of its values replaced by nulls."""
    if fraction >= 1:
        return pa.nulls(len(arr), arr.type)
    mask = pa.array(rng.random(len(arr)) < fraction)
    return pc.if_else(mask, pa.nulls(len(arr), arr.type), arr)


def letters(
    rng: np.random.Generator,
    lengths: np.ndarray,
    t: pa.DataType | None = None,
    byte_range: tuple[int, int] = (97, 123),
) -> pa.Array:
    """Strings (``t``, by default utf8) of random lowercase letters (or bytes in ``byte_range``)."""
    t = t or pa.string()
    large = t in (pa.large_string(), pa.large_binary())
    offsets = np.zeros(len(lengths) + 1, np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(*byte_range, int(offsets[-1]), dtype=np.uint8)
    return pa.Array.from_buffers(t, len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def choice(rng: np.random.Generator, n: int, values: list, t: pa.DataType) -> pa.Array:
    """``n`` values drawn from ``values``."""
    return pa.array(values, t).take(pa.array(rng.integers(0, len(values), n)))


def runs(rng: np.random.Generator, n: int, run: int) -> pa.Array:
    """int32 values in runs of ``run`` equal values."""
    return pa.array(np.repeat(rng.integers(-(2**31), 2**31, n // run + 1), run)[:n].astype(np.int32))


def list_offsets(
    lengths: np.ndarray, null: np.ndarray | None = None, large: bool = False
) -> tuple[pa.Array, int]:
    """List offsets for ``lengths`` (null rows get length 0), and the number of items."""
    lengths = np.where(null, 0, lengths) if null is not None else lengths
    offsets = np.zeros(len(lengths) + 1, np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.array(offsets), int(offsets[-1])


def lists(
    rng: np.random.Generator,
    n: int,
    items: Callable[[int], pa.Array],
    max_len: int = 6,
    null: float = 0.1,
    large: bool = False,
) -> pa.Array:
    """Lists of 0 to ``max_len - 1`` items (so some are empty), about ``null`` of them null."""
    mask = rng.random(n) < null
    offsets, count = list_offsets(rng.integers(0, max_len, n), mask, large)
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(offsets, items(count), mask=pa.array(mask))


def long_lists(rng: np.random.Generator, n: int) -> pa.Array:
    """Mostly short lists; every 500th row holds 1000 to 6000 items, more than a mini-block chunk."""
    lengths = rng.integers(0, 4, n)
    lengths[::500] = rng.integers(1000, 6000, len(lengths[::500]))
    null = rng.random(n) < 0.05
    null[::500] = False
    offsets, count = list_offsets(lengths, null)
    return pa.ListArray.from_arrays(offsets, pa.array(rng.integers(0, 2**40, count)), mask=pa.array(null))


def all_valid_lists(rng: np.random.Generator, n: int) -> pa.Array:
    """Lists of 1 to 4 int64 items, some null; no null or empty lists (the all-valid list layer)."""
    offsets, count = list_offsets(rng.integers(1, 5, n))
    return pa.ListArray.from_arrays(offsets, nulls(pa.array(rng.integers(0, 100, count)), 0.2, rng))


def struct_ab(rng: np.random.Generator, n: int, null: float = 0.1) -> pa.Array:
    """struct<a: int32, b: string> with null structs and null children."""
    a = nulls(pa.array(rng.integers(-1000, 1000, n).astype(np.int32)), 0.1, rng)
    b = nulls(letters(rng, rng.integers(0, 12, n)), 0.1, rng)
    return pa.StructArray.from_arrays([a, b], names=["a", "b"], mask=pa.array(rng.random(n) < null))


def maps(rng: np.random.Generator, n: int) -> pa.Array:
    null = rng.random(n) < 0.1
    offsets, count = list_offsets(rng.integers(0, 5, n), null)
    keys = letters(rng, rng.integers(1, 8, count))
    items = nulls(pa.array(rng.integers(-100, 100, count).astype(np.int32)), 0.1, rng)
    return pa.MapArray.from_arrays(offsets, keys, items, mask=pa.array(null))


def fsl(rng: np.random.Generator, n: int, size: int) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * size).astype(np.float32)), size)


def ints(rng: np.random.Generator, n: int, lo: int, hi: int, t: pa.DataType) -> pa.Array:
    return pa.array(rng.integers(lo, hi, n, dtype=np.int64 if hi <= 2**63 else np.uint64)).cast(t)


def small_ints(bits: int) -> Make:
    """int32 values that bitpack to ``bits`` bits."""
    return lambda r, n: ints(r, n, 0, 2**bits, pa.int32())


def timestamps(rng: np.random.Generator, n: int, t: pa.DataType) -> pa.Array:
    base = 1_700_000_000_000_000
    return pa.array(np.sort(base + rng.integers(0, 10**12, n))).cast(pa.int64()).view(t)


def decimals(rng: np.random.Generator, n: int, t: pa.DataType) -> pa.Array:
    vals = rng.integers(-(10**9), 10**9, n)
    scale = decimal.Decimal(10) ** -t.scale
    return pa.array([decimal.Decimal(int(v)) * scale for v in vals], t)


def long_letters(rng: np.random.Generator, n: int, t: pa.DataType | None = None) -> pa.Array:
    """Values of about 300 letters: long enough that pylance stores them full-zip."""
    return letters(rng, rng.integers(280, 320, n), t)


def zstd_list_str(rng: np.random.Generator, n: int) -> pa.Array:
    """list<string> of long values with null lists and null items; ZSTD asked for the items."""
    arr = lists(rng, n, lambda k: nulls(long_letters(rng, k), 0.2, rng), max_len=4, null=0.15)
    return arr.cast(pa.list_(arr.type.value_field.with_metadata(ZSTD)))


def zstd_struct_str(rng: np.random.Generator, n: int) -> pa.Array:
    """struct<s: string, i: int32> with null structs and null long strings; ZSTD asked for ``s``."""
    s = nulls(long_letters(rng, n), 0.2, rng)
    arr = pa.StructArray.from_arrays(
        [s, ints(rng, n, 0, 100, pa.int32())], names=["s", "i"], mask=pa.array(rng.random(n) < 0.1)
    )
    return arr.cast(pa.struct([arr.type.field(0).with_metadata(ZSTD), arr.type.field(1)]))


# --- the corpus ---------------------------------------------------------------------------------------

SCALARS: dict[str, Make] = {
    # cardinality
    "int64_constant": lambda r, n: pa.array(np.full(n, 7, np.int64)),
    "int32_card3": lambda r, n: choice(r, n, [-5, 0, 17], pa.int32()),
    "int32_card1000": lambda r, n: ints(r, n, 0, 1000, pa.int32()),
    "int64_unique": lambda r, n: pa.array(r.permutation(n).astype(np.int64)),
    "int64_sequence": lambda r, n: pa.array(np.arange(n, dtype=np.int64) * 3 + 10**12),
    # run lengths
    "int32_runs1": lambda r, n: runs(r, n, 1),
    "int32_runs10": lambda r, n: runs(r, n, 10),
    "int32_runs1000": lambda r, n: runs(r, n, 1000),
    # widths
    **{f"int32_bits{b}": small_ints(b) for b in range(1, 8)},
    "uint8_bits3": lambda r, n: ints(r, n, 0, 8, pa.uint8()),
    "int8_random": lambda r, n: ints(r, n, -128, 128, pa.int8()),
    "int16_signed_small": lambda r, n: ints(r, n, -20, 20, pa.int16()),
    "uint16_random": lambda r, n: ints(r, n, 0, 2**16, pa.uint16()),
    "int32_random": lambda r, n: ints(r, n, -(2**31), 2**31, pa.int32()),
    "uint32_random": lambda r, n: ints(r, n, 0, 2**32, pa.uint32()),
    "int64_random": lambda r, n: ints(r, n, -(2**63), 2**63 - 1, pa.int64()),
    "uint64_random": lambda r, n: ints(r, n, 0, 2**64 - 1, pa.uint64()),
    "float16": lambda r, n: pa.array(r.random(n).astype(np.float16)),
    "float32_random": lambda r, n: pa.array(r.random(n).astype(np.float32)),
    "float64_random": lambda r, n: pa.array(r.standard_normal(n) * 1e6),
    "float64_card3": lambda r, n: choice(r, n, [0.5, -1.25, 1e300], pa.float64()),
    "timestamp_us": lambda r, n: timestamps(r, n, pa.timestamp("us")),
    "timestamp_ns_tz": lambda r, n: timestamps(r, n, pa.timestamp("ns", "UTC")),
    "date32": lambda r, n: pa.array(r.integers(0, 30000, n).astype(np.int32)).view(pa.date32()),
    "time64_us": lambda r, n: pa.array(r.integers(0, 86_400 * 10**6, n)).view(pa.time64("us")),
    "duration_ms": lambda r, n: pa.array(r.integers(-(10**10), 10**10, n)).view(pa.duration("ms")),
    "decimal128": lambda r, n: decimals(r, n, pa.decimal128(12, 2)),
    "decimal256": lambda r, n: decimals(r, n, pa.decimal256(40, 5)),
    "fixed_size_binary16": lambda r, n: pa.Array.from_buffers(
        pa.binary(16), n, [None, pa.py_buffer(r.integers(0, 256, n * 16, dtype=np.uint8))]
    ),
    "fixed_size_binary3_card3": lambda r, n: choice(r, n, [b"abc", b"\0\0\0", b"xyz"], pa.binary(3)),
    "bool_random": lambda r, n: pa.array(r.random(n) < 0.5),
    "bool_constant": lambda r, n: pa.array(np.ones(n, bool)),
    "bool_sparse": lambda r, n: pa.array(r.random(n) < 0.01),
    # null density
    "int32_nulls1": lambda r, n: nulls(ints(r, n, 0, 1000, pa.int32()), 0.01, r),
    "int32_nulls50": lambda r, n: nulls(ints(r, n, 0, 1000, pa.int32()), 0.5, r),
    "int32_nulls99": lambda r, n: nulls(ints(r, n, 0, 1000, pa.int32()), 0.99, r),
    "int32_nulls100": lambda r, n: pa.nulls(n, pa.int32()),
    "int64_random_nulls50": lambda r, n: nulls(ints(r, n, -(2**63), 2**63 - 1, pa.int64()), 0.5, r),
    "float64_nulls1": lambda r, n: nulls(pa.array(r.random(n)), 0.01, r),
    "float32_nulls99": lambda r, n: nulls(pa.array(r.random(n).astype(np.float32)), 0.99, r),
    "bool_nulls50": lambda r, n: nulls(pa.array(r.random(n) < 0.5), 0.5, r),
    "timestamp_nulls1": lambda r, n: nulls(timestamps(r, n, pa.timestamp("ms")), 0.01, r),
    "decimal128_nulls50": lambda r, n: nulls(decimals(r, n, pa.decimal128(20, 4)), 0.5, r),
    "fixed_size_binary_nulls50": lambda r, n: nulls(
        choice(r, n, [b"ab", b"cd", b"ef", b"gh"], pa.binary(2)), 0.5, r
    ),
    "int32_card3_nulls50": lambda r, n: nulls(choice(r, n, [1, 2, 3], pa.int32()), 0.5, r),
}

STRINGS: dict[str, Make] = {
    "str_empty": lambda r, n: pa.array([""] * n),
    "str_constant": lambda r, n: pa.array(["the same value"] * n),
    "str_len1to5": lambda r, n: letters(r, r.integers(1, 6, n)),
    "str_len20": lambda r, n: letters(r, r.integers(18, 23, n)),
    "str_len100": lambda r, n: letters(r, r.integers(90, 110, n)),
    "str_len300": lambda r, n: letters(r, r.integers(280, 320, n)),
    "str_mixed": lambda r, n: letters(r, r.choice([0, 1, 3, 20, 100, 400], n)),
    "str_card3": lambda r, n: choice(r, n, ["red", "green", "blue"], pa.string()),
    "str_card1000": lambda r, n: choice(r, n, [f"category-{i:04d}" for i in range(1000)], pa.string()),
    "str_unique": lambda r, n: pa.array([f"key{i}" for i in r.permutation(n)]),
    "str_utf8": lambda r, n: choice(
        r, n, ["héllo wörld", "日本語テキスト", "emoji 🙂🙃", "ascii"], pa.string()
    ),
    "str_nulls1": lambda r, n: nulls(letters(r, r.integers(18, 23, n)), 0.01, r),
    "str_nulls50": lambda r, n: nulls(letters(r, r.integers(0, 30, n)), 0.5, r),
    "str_nulls99": lambda r, n: nulls(letters(r, r.integers(0, 30, n)), 0.99, r),
    "str_nulls100": lambda r, n: pa.nulls(n, pa.string()),
    "str_card3_nulls50": lambda r, n: nulls(choice(r, n, ["a", "bb", "ccc"], pa.string()), 0.5, r),
    "binary_random": lambda r, n: letters(r, r.integers(0, 41, n), pa.binary(), (0, 256)),
    "binary_nulls50": lambda r, n: nulls(letters(r, r.integers(0, 40, n), pa.binary()), 0.5, r),
    "large_string": lambda r, n: letters(r, r.integers(10, 30, n), pa.large_string()),
    "large_string_nulls1": lambda r, n: nulls(letters(r, r.integers(0, 8, n), pa.large_string()), 0.01, r),
    "large_binary": lambda r, n: letters(r, r.integers(0, 50, n), pa.large_binary()),
    "dictionary": lambda r, n: choice(
        r, n, ["alpha", "beta", "gamma", "delta"], pa.string()
    ).dictionary_encode(),
    "dictionary_nulls50": lambda r, n: nulls(
        choice(r, n, [f"v{i}" for i in range(50)], pa.string()), 0.5, r
    ).dictionary_encode(),
    "dictionary_int_values": lambda r, n: choice(r, n, [10, 20, 30], pa.int64()).dictionary_encode(),
}

VECTORS: dict[str, Make] = {
    "fsl_float4": lambda r, n: fsl(r, n, 4),
    "fsl_float4_nulls10": lambda r, n: nulls(fsl(r, n, 4), 0.1, r),
    "fsl_float128": lambda r, n: fsl(r, n, 128),
    "fsl_int16_8": lambda r, n: pa.FixedSizeListArray.from_arrays(ints(r, n * 8, -50, 50, pa.int16()), 8),
}

NESTED: dict[str, Make] = {
    "list_int": lambda r, n: lists(r, n, lambda k: pa.array(r.integers(0, 1000, k).astype(np.int32))),
    "list_int_all_valid": lambda r, n: lists(
        r, n, lambda k: pa.array(r.integers(0, 2**40, k)), max_len=4, null=0.0
    ),
    "list_int_null_items": lambda r, n: lists(
        r, n, lambda k: nulls(pa.array(r.integers(0, 100, k).astype(np.int64)), 0.2, r)
    ),
    "list_null_items_all_valid": all_valid_lists,
    "list_empty_and_null": lambda r, n: lists(r, n, lambda k: pa.array(r.random(k)), max_len=2, null=0.4),
    "large_list_string": lambda r, n: lists(r, n, lambda k: letters(r, r.integers(0, 15, k)), large=True),
    "list_struct": lambda r, n: lists(r, n, lambda k: struct_ab(r, k)),
    "list_list_int16": lambda r, n: lists(
        r, n, lambda k: lists(r, k, lambda j: nulls(ints(r, j, -300, 300, pa.int16()), 0.05, r), max_len=4)
    ),
    "struct_ab": lambda r, n: struct_ab(r, n),
    "struct_all_valid": lambda r, n: pa.StructArray.from_arrays(
        [pa.array(r.integers(0, 10, n)), pa.array(r.random(n))], names=["x", "y"]
    ),
    "map_str_int": maps,
    "list_long": long_lists,
    "list_long_strings": lambda r, n: lists(
        r, n, lambda k: letters(r, r.integers(270, 330, k)), max_len=3, null=0.3
    ),
}

ZSTD = {"lance-encoding:compression": "zstd"}
# Compressions and layouts asked for by field metadata.
COMPRESSED: dict[str, Make] = {
    "zstd_int64": lambda r, n: pa.array(np.cumsum(r.integers(0, 1000, n))),
    "zstd_float64_nulls10": lambda r, n: nulls(pa.array(r.standard_normal(n)), 0.1, r),
    "zstd_string_nulls10": lambda r, n: nulls(letters(r, r.integers(0, 40, n)), 0.1, r),
    "lz4_string": lambda r, n: letters(r, r.integers(18, 23, n)),
    "no_compression_string": lambda r, n: letters(r, r.integers(18, 23, n)),
    "bss_float32": lambda r, n: pa.array((r.standard_normal(n) * 100).astype(np.float32)),
    "packed_struct": lambda r, n: pa.StructArray.from_arrays(
        [ints(r, n, -(2**31), 2**31, pa.int32()), pa.array(r.random(n)), ints(r, n, 0, 100, pa.int16())],
        names=["a", "b", "c"],
    ),
    "fullzip_int64_nulls10": lambda r, n: nulls(ints(r, n, 0, 2**40, pa.int64()), 0.1, r),
    "fullzip_string": lambda r, n: nulls(letters(r, r.integers(0, 30, n)), 0.1, r),
    "fullzip_list_int": lambda r, n: lists(r, n, lambda k: pa.array(r.integers(0, 2**40, k))),
    "miniblock_str300": lambda r, n: letters(r, r.integers(280, 320, n)),
}
METADATA: dict[str, dict[str, str]] = {
    "zstd_int64": ZSTD,
    "zstd_float64_nulls10": ZSTD,
    "zstd_string_nulls10": ZSTD,
    "lz4_string": {"lance-encoding:compression": "lz4"},
    "no_compression_string": {"lance-encoding:compression": "none"},
    "bss_float32": {"lance-encoding:bss": "on"},
    "packed_struct": {"lance-encoding:packed": "true"},
    "fullzip_int64_nulls10": {"lance-encoding:structural-encoding": "fullzip"},
    "fullzip_string": {"lance-encoding:structural-encoding": "fullzip"},
    "fullzip_list_int": {"lance-encoding:structural-encoding": "fullzip"},
    "miniblock_str300": {"lance-encoding:structural-encoding": "miniblock"},
}

# Long values with ZSTD asked for: full-zip pages whose values are each compressed on their own,
# null rows storing no bytes. The values make the file large, so it has fewer rows than the others.
ZSTD_LONG: dict[str, Make] = {
    "zstd_long_str": lambda r, n: long_letters(r, n),
    "zstd_long_str_nulls1": lambda r, n: nulls(long_letters(r, n), 0.01, r),
    "zstd_long_str_nulls20": lambda r, n: nulls(long_letters(r, n), 0.2, r),
    "zstd_long_str_nulls90": lambda r, n: nulls(long_letters(r, n), 0.9, r),
    "zstd_long_str_nulls100": lambda r, n: pa.nulls(n, pa.string()),
    "zstd_long_str_empty_nulls20": lambda r, n: nulls(letters(r, r.choice([0, 300, 600], n)), 0.2, r),
    "zstd_long_binary_nulls20": lambda r, n: nulls(
        letters(r, r.integers(280, 320, n), pa.binary(), (0, 256)), 0.2, r
    ),
    "zstd_long_large_string_nulls50": lambda r, n: nulls(long_letters(r, n, pa.large_string()), 0.5, r),
    "zstd_long_large_binary_nulls20": lambda r, n: nulls(long_letters(r, n, pa.large_binary()), 0.2, r),
    "lz4_long_str_nulls20": lambda r, n: nulls(long_letters(r, n), 0.2, r),
    "zstd_long_list_str": zstd_list_str,
    "zstd_long_struct_str": zstd_struct_str,
}
# (the list and the struct ask for ZSTD in their child's field metadata, which their type carries)
NESTED_ZSTD_LONG = ("zstd_long_list_str", "zstd_long_struct_str")
METADATA.update({c: ZSTD for c in ZSTD_LONG if c.startswith("zstd_long_") and c not in NESTED_ZSTD_LONG})
METADATA["lz4_long_str_nulls20"] = {"lance-encoding:compression": "lz4"}

# A file written in small pages: every column gets several of them.
PAGED: dict[str, Make] = {
    "p_int64_random": SCALARS["int64_random"],
    "p_int32_bits5": SCALARS["int32_bits5"],
    "p_float64_nulls1": SCALARS["float64_nulls1"],
    "p_bool_random": SCALARS["bool_random"],
    "p_str_len20": STRINGS["str_len20"],
    "p_str_card3": STRINGS["str_card3"],
    "p_str_nulls50": STRINGS["str_nulls50"],
    "p_fsl_float4": VECTORS["fsl_float4"],
    "p_list_int": NESTED["list_int"],
    "p_struct_ab": NESTED["struct_ab"],
    "p_list_struct": NESTED["list_struct"],
}


@dataclass(frozen=True)
class Spec:
    columns: dict[str, Make]
    rows: int
    batch_rows: int | None = None  # write in batches of this many rows (default: one batch)
    data_cache_bytes: int | None = None


FILES: dict[str, Spec] = {
    "scalars": Spec(SCALARS, 120_000),
    "strings": Spec(STRINGS, 120_000, batch_rows=30_000),
    "vectors": Spec(VECTORS, 100_000, batch_rows=30_000),
    "nested": Spec(NESTED, 100_000, batch_rows=30_000),
    "compressed": Spec(COMPRESSED, 100_000, batch_rows=50_000),
    "paged": Spec(PAGED, 120_000, batch_rows=10_000, data_cache_bytes=64 * 1024),
    "zstd_long": Spec(ZSTD_LONG, 3_000, batch_rows=1_000, data_cache_bytes=256 * 1024),
}
# pylance refuses maps in 2.1 files
ONLY_IN: dict[str, set[str]] = {"map_str_int": {"2.2"}}

# Columns that must end up in several pages (checked, so the page-crossing reads test something).
MULTI_PAGE = {*PAGED, *ZSTD_LONG, "fsl_float128", "str_len300", "list_long"} - {"zstd_long_str_nulls100"}

# Encodings the corpus claims to exercise: substrings of the pages' layouts, for both versions
# ("column") or for one ("version/column").
ENCODINGS: dict[str, tuple[str, ...]] = {
    "2.1/int64_constant": ("rle",),
    "2.2/int64_constant": ("constant_layout", "inline_value"),
    "2.2/bool_constant": ("constant_layout", "inline_value"),
    "int32_card3": ("rle",),
    "int32_runs1000": ("rle",),
    "int32_runs1": ("flat",),
    **{f"int32_bits{b}": ("inline_bitpacking",) for b in range(1, 8)},
    "int32_card1000": ("inline_bitpacking",),
    "timestamp_us": ("inline_bitpacking",),
    "2.2/float64_card3": ("dictionary", "LZ4"),
    "int32_nulls50": ("out_of_line_bitpacking",),
    "int32_nulls100": ("constant_layout",),
    "str_nulls100": ("constant_layout",),
    "2.2/int32_nulls99": ("rle",),
    "2.2/str_empty": ("constant_layout",),
    "2.2/str_constant": ("constant_layout",),
    "str_len20": ("fsst", "mini_block_layout"),
    "str_len300": ("fsst", "full_zip_layout"),
    "str_mixed": ("full_zip_layout",),
    "str_card3": ("dictionary",),
    "dictionary": ("dictionary",),
    "2.2/str_card1000": ("dictionary", "LZ4"),
    "fsl_float4": ("fixed_size_list", "mini_block_layout"),
    "fsl_float128": ("fixed_size_list", "full_zip_layout"),
    "list_int": ("repetition_index_depth",),
    "list_long": ("repetition_index_depth",),
    "list_long_strings": ("full_zip_layout", "fsst"),
    "zstd_int64": ("ZSTD", "byte_stream_split"),
    "zstd_string_nulls10": ("ZSTD", "variable"),
    "packed_struct": ("packed_struct",),
    "fullzip_int64_nulls10": ("full_zip_layout",),
    "fullzip_string": ("full_zip_layout",),
    "fullzip_list_int": ("full_zip_layout",),
    "miniblock_str300": ("mini_block_layout",),
    "2.2/int32_random": ("has_large_chunk",),
    # each value compressed on its own, null rows (def levels) storing no bytes
    **{
        c: (
            "full_zip_layout",
            "general {",
            "COMPRESSION_ALGORITHM_ZSTD",
            *(("bits_def: 1",) if "nulls" in c else ()),
        )
        for c in ZSTD_LONG
    },
    "zstd_long_str_nulls100": ("constant_layout",),
    "lz4_long_str_nulls20": ("full_zip_layout", "general {", "bits_def: 1"),  # pylance 14 uses ZSTD
    "zstd_long_list_str": ("full_zip_layout", "COMPRESSION_ALGORITHM_ZSTD", "bits_rep: 1", "bits_def: 2"),
    "zstd_long_struct_str": ("full_zip_layout", "COMPRESSION_ALGORITHM_ZSTD", "bits_def: 2"),
    "list_null_items_all_valid": ("REPDEF_NULLABLE_ITEM", "REPDEF_ALL_VALID_LIST"),
}

# version/column cases that raise UnsupportedFormatError until the readers for them land. Empty since
# nested columns and the metadata-driven compressions landed; keep it for the next encodings.
PENDING: set[str] = set()

# version/column cases that read wrongly today: strict, so a fix makes them fail until removed here.
KNOWN_BUGS: dict[str, str] = {}


# --- building and reading the corpus ----------------------------------------------------------------


def build_table(spec: Spec, version: str) -> pa.Table:
    arrays, fields = [], []
    for name, make in spec.columns.items():
        if version in ONLY_IN.get(name, VERSIONS):
            arrays.append(make(np.random.default_rng(zlib.crc32(name.encode())), spec.rows))
            fields.append(pa.field(name, arrays[-1].type, metadata=METADATA.get(name)))
    return pa.table(arrays, schema=pa.schema(fields))


@dataclass
class GoldenFile:
    path: Path
    source: pa.Table
    theirs: pa.Table  # what pylance reads back


class Corpus:
    """Each (version, file) is written once, when a test first asks for it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[tuple[str, str], GoldenFile] = {}

    def get(self, version: str, name: str) -> GoldenFile:
        key = (version, name)
        if key not in self.files:
            spec = FILES[name]
            table = build_table(spec, version)
            path = self.root / f"{name}-{version}.lance"
            kwargs = {} if spec.data_cache_bytes is None else {"data_cache_bytes": spec.data_cache_bytes}
            with lance_file.LanceFileWriter(str(path), table.schema, version=version, **kwargs) as w:
                for batch in table.to_batches(max_chunksize=spec.batch_rows or table.num_rows):
                    w.write_batch(batch)
            theirs = lance_file.LanceFileReader(str(path)).read_all().to_table()
            self.files[key] = GoldenFile(path, table, theirs)
        return self.files[key]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("golden"))


def leaf_count(field: pa.Field) -> int:
    """Columns ``field`` has in a 2.1+ file: one per leaf (fixed-size lists and packed structs are leaves)."""
    t = field.type
    if (field.metadata or {}).get(b"lance-encoding:packed") == b"true":
        return 1
    if pa.types.is_struct(t):
        return sum(leaf_count(f) for f in t)
    if pa.types.is_map(t):
        return leaf_count(t.key_field) + leaf_count(t.item_field)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return leaf_count(t.value_field)
    return 1


def column_indices(schema: pa.Schema, name: str) -> range:
    """The file columns that hold the leaves of top-level field ``name``."""
    start = 0
    for f in schema:
        if f.name == name:
            return range(start, start + leaf_count(f))
        start += leaf_count(f)
    raise KeyError(name)


def page_boundaries(reader: LanceFileReader, name: str) -> list[int]:
    """Rows at which a page of one of the field's columns ends (other than the last row)."""
    ends: set[int] = set()
    for i in column_indices(reader.schema, name):
        lengths = [p.length for p in reader.metadata.columns[i].pages]
        ends.update(int(e) for e in np.cumsum(lengths)[:-1])
    return sorted(ends)


def cases() -> list:
    """One case per version and column, with its expected-failure mark if it has one."""
    out = []
    for version in VERSIONS:
        for file, spec in FILES.items():
            for column in spec.columns:
                if version not in ONLY_IN.get(column, VERSIONS):
                    continue
                case = f"{version}/{column}"
                marks = []
                if case in PENDING:
                    marks.append(pytest.mark.xfail(raises=UnsupportedFormatError, strict=False))
                if case in KNOWN_BUGS:
                    marks.append(
                        pytest.mark.xfail(raises=CorruptFileError, strict=True, reason=KNOWN_BUGS[case])
                    )
                out.append(pytest.param(version, file, column, id=case, marks=marks))
    return out


# --- the tests ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "file", "column"), cases())
def test_golden_column(corpus, version, file, column):
    golden = corpus.get(version, file)
    reader = LanceFileReader(golden.path)
    assert reader.version == version
    n = golden.source.num_rows
    expected = golden.source.select([column])
    assert_tables_equal(golden.theirs.select([column]), expected, check_metadata=False)  # the oracle

    # in full
    ours = reader.read_all(columns=[column])
    assert ours.column(column).type == golden.theirs.column(column).type
    assert ours.column(column).equals(golden.theirs.column(column))
    assert_tables_equal(ours, expected, check_metadata=False)

    rng = np.random.default_rng(zlib.crc32(f"{version}/{column}".encode()))
    # take: unsorted, with repeats, both ends
    idx = rng.integers(0, n, 1000)
    idx = np.concatenate([idx, idx[:40], [0, n - 1, n - 1]])
    rng.shuffle(idx)
    assert len(np.unique(idx)) < len(idx)
    assert_tables_equal(
        reader.take(idx, columns=[column]), expected.take(pa.array(idx)), check_metadata=False
    )

    # ranges: random ones, the ends, and across page boundaries
    ranges = [(0, 1), (n - 1, n), (n - 5000, n + 10)]
    for lo in rng.integers(0, n, 4):
        ranges.append((int(lo), int(lo + rng.integers(1, 3000))))
    boundaries = page_boundaries(reader, column)
    for b in rng.permutation(boundaries)[:4]:
        ranges.append((int(b - rng.integers(1, 2000)), int(b + rng.integers(1, 2000))))
    if column in MULTI_PAGE:
        assert boundaries, f"{column} was supposed to span several pages"
        assert any(lo < b < hi for lo, hi in ranges for b in boundaries)
    for lo, hi in ranges:
        lo = max(lo, 0)
        got = reader.read_range(lo, hi, columns=[column])
        assert_tables_equal(got, expected.slice(lo, max(min(hi, n) - lo, 0)), check_metadata=False)


def _file_of(column: str) -> str:
    return next(f for f, spec in FILES.items() if column in spec.columns)


def _encodings_text(reader: LanceFileReader, column: str) -> str:
    src = LocalFileSource(reader.path)
    return "".join(
        str(unpack_encoding(page.encoding, src, column)[1])
        for i in column_indices(reader.schema, column)
        for page in reader.metadata.columns[i].pages
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_corpus_exercises_what_it_claims(corpus, version):
    """Guard: pylance picks encodings from the data, so a change in pylance (or in the corpus)
    must not silently drop coverage. Also checks the column-to-file-column mapping used for
    page boundaries, and that the long lists really span several mini-block chunks."""
    for file in FILES:
        golden = corpus.get(version, file)
        reader = LanceFileReader(golden.path)
        assert sum(leaf_count(f) for f in reader.schema) == len(reader.metadata.columns), file
    missing = []
    for key, needles in ENCODINGS.items():
        claim_version, _, column = key.rpartition("/")
        if claim_version not in ("", version):
            continue
        text = _encodings_text(LanceFileReader(corpus.get(version, _file_of(column)).path), column)
        missing += [f"{column}: {n}" for n in needles if n not in text]
    assert not missing, missing

    golden = corpus.get(version, "nested")
    reader = LanceFileReader(golden.path)
    raw = golden.path.read_bytes()
    word = np.uint16 if version == "2.1" else np.uint32
    chunk_values = 0
    for page in reader.metadata.columns[column_indices(reader.schema, "list_long")[0]].pages:
        start, size = page.buffer_offsets[0], page.buffer_sizes[0]
        meta = np.frombuffer(raw[start : start + size], word)
        chunk_values = max(chunk_values, int((1 << (meta[:-1] & 0xF)).max(initial=0)))
    lengths = pc.list_value_length(golden.source["list_long"]).to_numpy(zero_copy_only=False)
    assert 0 < chunk_values < np.nanmax(lengths.astype(float)), (chunk_values, lengths.max())
