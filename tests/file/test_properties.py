"""Property tests: random schemas, null patterns, page budgets and batchings round-trip exactly,
through our reader and through pylance's."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter

LEAVES = [
    pa.bool_(),
    pa.int8(),
    pa.uint16(),
    pa.int32(),
    pa.int64(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.date32(),
    pa.timestamp("us"),
    pa.timestamp("ns", "UTC"),
    pa.time64("us"),
    pa.duration("s"),
    pa.decimal128(9, 2),
    pa.binary(4),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.dictionary(pa.int32(), pa.string()),
]
FIXED = [t for t in LEAVES if pa.types.is_integer(t) or pa.types.is_floating(t) or t == pa.bool_()]


def types(depth: int = 2) -> st.SearchStrategy[pa.DataType]:
    leaf = st.sampled_from(LEAVES)
    fsl = st.builds(lambda t, d: pa.list_(t, d), st.sampled_from(FIXED), st.integers(1, 4))
    base = st.one_of(leaf, fsl)
    if depth == 0:
        return base

    def nested(child: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
        return st.one_of(
            st.builds(pa.list_, child),
            st.builds(pa.large_list, child),
            st.lists(child, min_size=1, max_size=3).map(
                lambda ts: pa.struct([(f"c{i}", t) for i, t in enumerate(ts)])
            ),
        )

    return st.recursive(base, nested, max_leaves=4)


def generate(
    t: pa.DataType, n: int, rng: np.random.Generator, null_p: float, nullable: bool = True
) -> pa.Array:
    mask = (rng.random(n) < null_p) if nullable and null_p else None
    if pa.types.is_struct(t):  # 2.0 stores no struct validity
        kids = [generate(f.type, n, rng, null_p) for f in t]
        return pa.StructArray.from_arrays(kids, fields=list(t))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        lengths = rng.integers(0, 4, n)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        values = generate(t.value_type, int(offsets[-1]), rng, null_p)
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        off = pa.array(offsets, pa.int64() if pa.types.is_large_list(t) else pa.int32())
        return cls.from_arrays(off, values, type=t, mask=pa.array(mask) if mask is not None else None)
    if pa.types.is_fixed_size_list(t):
        values = generate(t.value_type, n * t.list_size, rng, null_p)
        return pa.FixedSizeListArray.from_arrays(
            values, type=t, mask=pa.array(mask) if mask is not None else None
        )
    if pa.types.is_dictionary(t):
        return generate(pa.string(), n, rng, null_p).dictionary_encode()
    if pa.types.is_boolean(t):
        return pa.array(rng.random(n) < 0.5, t, mask=mask)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        words = [("x" * int(k) + str(int(k))) for k in rng.integers(0, 12, n)]
        return pa.array(words if not pa.types.is_binary(t) else [w.encode() for w in words], t, mask=mask)
    if pa.types.is_fixed_size_binary(t):
        return pa.array(
            [bytes(rng.integers(0, 256, t.byte_width, dtype=np.uint8)) for _ in range(n)], t, mask=mask
        )
    if pa.types.is_floating(t):
        return pa.array(rng.standard_normal(n).astype(t.to_pandas_dtype()), t, mask=mask)
    if pa.types.is_decimal(t):
        return pa.array(
            [decimal.Decimal(int(v)).scaleb(-t.scale) for v in rng.integers(-(10**6), 10**6, n)], t, mask=mask
        )
    bits = t.bit_width
    raw = rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1, n, dtype=np.int64)
    if pa.types.is_integer(t):
        return pa.array(raw.astype(t.to_pandas_dtype()), t, mask=mask)
    base = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[bits]
    return pa.array(raw.astype(base.to_pandas_dtype()), base, mask=mask).view(t)


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, int, int]:
    ncols = draw(st.integers(1, 4))
    schema = pa.schema([pa.field(f"f{i}", draw(types())) for i in range(ncols)])
    n = draw(st.integers(0, 300))
    null_p = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    table = pa.table([generate(f.type, n, rng, null_p) for f in schema], schema=schema)
    page_size = draw(st.sampled_from([64, 700, 4096, 8 * 1024 * 1024]))
    batch = draw(st.integers(1, 400))
    return table, page_size, batch


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables())
def test_random_tables_round_trip(tmp_path_factory, case):
    table, page_size, batch = case
    path = tmp_path_factory.mktemp("prop") / "f.lance"
    with LanceFileWriter(path, table.schema, page_size_bytes=page_size) as w:
        for b in table.to_batches(max_chunksize=batch):
            w.write(b)
    reader = LanceFileReader(path)
    assert_tables_equal(reader.read_all(), table)
    if table.num_rows:
        rng = np.random.default_rng(table.num_rows)
        idx = rng.integers(0, table.num_rows, 17)
        assert_tables_equal(reader.take(idx), table.take(pa.array(idx)))
        lo = int(rng.integers(0, table.num_rows))
        assert_tables_equal(reader.read_range(lo, lo + 50), table.slice(lo, 50))


@pytest.mark.interop
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables())
def test_random_tables_read_by_pylance(tmp_path_factory, case):
    lance_file = pytest.importorskip("lance.file")
    table, page_size, batch = case
    path = tmp_path_factory.mktemp("prop") / "f.lance"
    with LanceFileWriter(path, table.schema, page_size_bytes=page_size) as w:
        for b in table.to_batches(max_chunksize=batch):
            w.write(b)
    try:
        theirs = lance_file.LanceFileReader(str(path)).read_all().to_table()
    except BaseException as exc:  # pylance panics surface as BaseException; let hypothesis shrink them
        raise AssertionError(f"pylance failed to read the file: {exc}") from None
    assert_tables_equal(theirs, table)
