"""Scans after deletes of columns of every fixed width (integers, floats, dates, decimals,
fixed-size binaries and lists, nullable or not), whose 2.1/2.2 mini-block pages of flat values
have their kept rows copied once from the chunks (``v2_1.kept_flat``), read what pylance reads:
rows deleted at random, in runs, every row of a chunk, the first and last rows, a whole
fragment; on files either library wrote, in 2.0, 2.1 and 2.2; with row ids, filters, limit and
offset, and batches."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table.file.v2_1 import kept_flat
from lance_table.table import scan

ROWS = 30_000
FRAGMENT_ROWS = 10_000


def _table() -> pa.Table:
    rng = np.random.default_rng(5)
    ids = np.arange(ROWS, dtype=np.int64)
    nulls = ids % 9 == 4
    return pa.table(
        {
            "id": pa.array(ids),
            "i8": pa.array(rng.integers(-128, 128, ROWS, dtype=np.int8)),
            "i16": pa.array(rng.integers(-(1 << 15), 1 << 15, ROWS, dtype=np.int16), mask=nulls),
            "u32": pa.array(rng.integers(0, 1 << 32, ROWS, dtype=np.uint32)),
            "i64": pa.array(rng.integers(-(1 << 62), 1 << 62, ROWS)),
            "f16": pa.array(rng.random(ROWS).astype(np.float16)),
            "f32": pa.array(rng.random(ROWS, dtype=np.float32), mask=nulls),
            "f64": pa.array(rng.random(ROWS)),
            "day": pa.array(rng.integers(0, 40_000, ROWS).astype(np.int32), pa.date32()),
            "ts": pa.array(rng.integers(0, 1 << 50, ROWS), pa.timestamp("us")),
            "dec": pa.array(rng.integers(-(10**12), 10**12, ROWS), pa.int64()).cast(pa.decimal128(25, 3)),
            "fsb": pa.array(
                [bytes(rng.integers(0, 256, 5, dtype=np.uint8)) for _ in range(ROWS)], pa.binary(5)
            ),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * 16, dtype=np.float32)), 16),
            "rgb": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.integers(0, 256, ROWS * 3, dtype=np.uint8)), 3
            ),
            "flag": pa.array(ids % 3 == 0),
            "text": pa.array([f"t{i * 7919 % 100003}" for i in ids.tolist()]),
        }
    )


# every 13th row, a random tenth, a run of 1500 rows (whole chunks of every column), the first and
# last rows of each fragment, then (second delete) the whole second fragment
_rng = np.random.default_rng(17)
_RANDOM = ", ".join(map(str, sorted(_rng.choice(ROWS, ROWS // 10, replace=False).tolist())))
_EDGES = ", ".join(map(str, [0, 1, FRAGMENT_ROWS - 1, 2 * FRAGMENT_ROWS, ROWS - 2, ROWS - 1]))
DELETES = [
    f"id % 13 = 5 OR (id >= 21000 AND id < 22500) OR id IN ({_EDGES}) OR id IN ({_RANDOM})",
    f"id >= {FRAGMENT_ROWS} AND id < {2 * FRAGMENT_ROWS}",
]


@pytest.fixture(scope="module", params=["2.0", "2.1", "2.2"])
def datasets(request, tmp_path_factory):
    """Per writer, its dataset of three fragments after the deletes (the first by the other library)."""
    version = request.param
    root = tmp_path_factory.mktemp(f"kept-{version}")
    table = _table()
    out = {}
    for writer, lib, other in (("ours", lt, lance), ("pylance", lance, lt)):
        uri = str(root / writer)
        lib.write_dataset(table, uri, data_storage_version=version, max_rows_per_file=FRAGMENT_ROWS)
        other.dataset(uri).delete(DELETES[0])
        out[writer] = uri
    return version, out, table


@pytest.fixture
def calls(monkeypatch):
    """The pages whose kept rows :func:`kept_flat.kept` copied during the test, by type."""
    seen: list[pa.DataType] = []
    real = kept_flat.kept

    def spy(read, enc, start, keep, dtype, io):
        seen.append(dtype)
        return real(read, enc, start, keep, dtype, io)

    monkeypatch.setattr(kept_flat, "kept", spy)
    return seen


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_scans_after_deletes_match_pylance(datasets, writer, calls, monkeypatch):
    version, uris, table = datasets
    uri = uris[writer]
    ranges = scan.TABLE_RANGE_ROWS
    for step in range(2):
        ours, theirs = lt.dataset(uri), lance.dataset(uri)
        expected = theirs.to_table()
        assert expected.num_rows < ROWS
        calls.clear()
        assert_tables_equal(ours.to_table(), expected)  # (small fragments: read as batches)
        if version != "2.0":  # the batches' vector pages too
            assert pa.list_(pa.float32(), 16) in calls
        monkeypatch.setattr(scan, "TABLE_RANGE_ROWS", 4000)  # ranges inside the fragments
        got = ours.to_table()
        assert_tables_equal(got, expected)
        # the rows left are the written rows minus the deleted ones, column for column
        kept = np.isin(table.column("id").to_numpy(), got.column("id").to_numpy())
        assert_tables_equal(got, table.filter(pa.array(kept)))
        with_ids = ours.to_table(with_row_id=True)
        assert (
            with_ids.column("_rowid").to_pylist()
            == theirs.to_table(with_row_id=True).column("_rowid").to_pylist()
        )
        cols = ["id", "vec", "f32", "dec", "rgb"]
        for flt, limit, offset in (("f64 < 0.5", None, None), ("i8 > 0", 700, 55), (None, 1000, 12_345)):
            a = ours.to_table(columns=cols, filter=flt, limit=limit, offset=offset)
            b = theirs.to_table(columns=cols, filter=flt, limit=limit, offset=offset)
            assert_tables_equal(a, b)
        batches = pa.Table.from_batches(list(ours.to_batches(batch_size=3001, columns=cols)))
        assert_tables_equal(batches, expected.select(cols))
        assert ours.count_rows() == theirs.count_rows()
        monkeypatch.setattr(scan, "TABLE_RANGE_ROWS", ranges)
        if step == 0:
            (lance if writer == "ours" else lt).dataset(uri).delete(DELETES[1])
    if version == "2.0":
        assert not calls  # 2.0 pages are not mini-block pages
    else:
        # the wide columns of both libraries' files are stored flat and take the one-copy path
        assert pa.list_(pa.float32(), 16) in calls
        if writer == "ours":
            assert {pa.float64(), pa.list_(pa.uint8(), 3)} <= set(calls)
