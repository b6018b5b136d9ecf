"""A lance_table dataset and scanner where a ``pyarrow.dataset.Dataset`` / ``Scanner`` is expected:
real DuckDB (replacement scans, ``from_arrow``), real Polars (``scan_pyarrow_dataset``, ``DataFrame``),
pyarrow (``pa.table``, joins, ``filter``, ``write_dataset``) and the Arrow PyCapsule stream (the
README's snippet runs in ``tests/test_readme.py``).

Results are compared with pylance's dataset (the oracle) on a copy of the same data, or with
pyarrow's own in-memory dataset for pyarrow's semantics. Pushdown is checked by counting what the
scan reads: a spy around ``FragmentReader.read`` (the one call through which every column of every
fragment is read) records the columns and the number of rows of each read, then runs the real read.
"""

from __future__ import annotations

import copy
import pickle
import shutil
import threading
from collections import Counter
from collections.abc import Iterator

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pytest
from helpers import assert_tables_equal

import lance_table as lt
from lance_table._parallel import workers
from lance_table.table import fragment_batch
from lance_table.table.dataset_arrow import FilteredDataset
from lance_table.table.fragment import FragmentReader
from lance_table.table.scan import STREAM_GROUP_TASKS

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")

pytestmark = pytest.mark.interop

N = 2000


def _table() -> pa.Table:
    i = np.arange(N)
    return pa.table(
        {
            "id": pa.array(i, pa.int64()),
            "x": pa.array((i * 7919 % 1000) / 1000, pa.float64()),
            "cat": pa.array(np.array(["a", "b", "c", "d"])[i % 4]),
            "n": pa.array([None if k % 10 == 3 else k for k in i.tolist()], pa.int64()),
            "payload": pa.array([f"payload-{k}" for k in i.tolist()]),
        }
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[lt.LanceDataset, lance.LanceDataset]:
    """lance_table's dataset of 4 fragments, and pylance's handle on a copy of it."""
    root = tmp_path_factory.mktemp("arrow")
    lt.write_dataset(_table(), root / "ours", max_rows_per_file=N // 4)
    shutil.copytree(root / "ours", root / "theirs")
    return lt.dataset(root / "ours"), lance.dataset(root / "theirs")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[tuple[str, ...], int]]]:
    """Every column read, with its number of rows: ``(names, rows)`` per read of a fragment's rows
    (``FragmentReader.read``) or of many small fragments' rows at once (``fragment_batch.read``,
    counted once, not again for the fragments it reads one by one)."""
    seen: list[tuple[tuple[str, ...], int]] = []
    inside = threading.local()
    one, many = FragmentReader.read, fragment_batch.read

    def spy_one(self: FragmentReader, names: list[str], runs, floors=None):  # type: ignore[no-untyped-def]
        if not getattr(inside, "batch", False):
            seen.append((tuple(names), runs.total))
        return one(self, names, runs, floors)

    def spy_many(frags, names, runs, floors=None, found=None, take=False):  # type: ignore[no-untyped-def]
        seen.append((tuple(names), sum(r.total for r in runs)))
        inside.batch = True
        try:
            return many(frags, names, runs, floors, found, take)
        finally:
            inside.batch = False

    monkeypatch.setattr(FragmentReader, "read", spy_one)
    monkeypatch.setattr(fragment_batch, "read", spy_many)
    yield seen


def _rows_read(seen: list[tuple[tuple[str, ...], int]]) -> dict[str, int]:
    """Rows read per column, summed over the reads."""
    out: Counter[str] = Counter()
    for names, rows in seen:
        for name in names:
            out[name] += rows
    return dict(out)


def _sorted(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=repr)


def test_a_dataset_is_a_pyarrow_dataset_as_pylances_is(pair):
    ours, theirs = pair
    assert isinstance(ours, pds.Dataset) and isinstance(theirs, pds.Dataset)
    assert isinstance(ours.scanner(), pds.Scanner)
    assert ours.schema == theirs.schema
    expr = (pc.field("x") < 0.3) & ~pc.field("n").is_null()
    # pyarrow's signatures (keywords pyarrow.dataset consumers pass are accepted)
    kw = {"columns": ["id", "cat"], "filter": expr}
    assert_tables_equal(ours.to_table(**kw), theirs.to_table(**kw))
    assert_tables_equal(
        ours.scanner(**kw, batch_size=64, use_threads=False).to_table(), theirs.to_table(**kw)
    )
    batches = list(ours.to_batches(**kw, batch_size=64))
    assert max(b.num_rows for b in batches) <= 64
    assert_tables_equal(pa.Table.from_batches(batches), theirs.to_table(**kw))
    assert (
        ours.count_rows(filter=expr)
        == theirs.count_rows(filter=expr)
        == ours.scanner(filter=expr).count_rows()
    )
    assert_tables_equal(
        ours.head(5, columns=["id"], filter=expr), theirs.head(5, columns=["id"], filter=expr)
    )
    assert_tables_equal(
        ours.take([3, 0, 1999], columns=["payload"]), theirs.take([3, 0, 1999], columns=["payload"])
    )
    assert ours.scanner(**kw).projected_schema == theirs.scanner(**kw).projected_schema
    assert ours.scanner(**kw).dataset_schema == theirs.scanner(**kw).dataset_schema
    assert [f.fragment_id for f in ours.get_fragments()] == [f.fragment_id for f in theirs.get_fragments()]
    # what pylance leaves unimplemented is a NotImplementedError here too, never a crash
    for side in (ours, theirs):
        with pytest.raises(NotImplementedError):
            side.replace_schema(side.schema)
        with pytest.raises(NotImplementedError):
            side.partition_expression  # noqa: B018
    # the Cython base class pickles a C++ dataset; a handle pickles as itself, at its version
    for back in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours), copy.copy(ours)):
        assert isinstance(back, lt.LanceDataset) and back.version == ours.version
        assert_tables_equal(back.to_table(), ours.to_table())


def test_fragments_are_pyarrow_fragments_as_pylances_are(pair):
    ours, theirs = pair
    expr = pc.field("x") < 0.5
    for mine, other in zip(ours.get_fragments(), theirs.get_fragments()):
        assert isinstance(mine, pds.Fragment) and isinstance(other, pds.Fragment)
        assert mine.physical_schema == ours.schema
        assert_tables_equal(
            mine.to_table(columns=["id"], filter=expr), other.to_table(columns=["id"], filter=expr)
        )
        assert mine.count_rows(expr) == other.count_rows(expr)
        assert_tables_equal(mine.head(3), other.head(3))
        assert_tables_equal(mine.take([1, 4], columns=["cat"]), other.take([1, 4], columns=["cat"]))
        assert_tables_equal(pickle.loads(pickle.dumps(mine)).to_table(), other.to_table())
        for side in (mine, other):
            with pytest.raises(NotImplementedError):
                side.partition_expression  # noqa: B018


def test_duckdb_replacement_scan_pushes_projection_and_filter_down(pair, reads):
    ours, theirs = pair  # noqa: RUF059 (DuckDB finds the variables by name)
    query = "select cat, count(*) from {} where x < 0.1 group by cat order by cat"
    got = duckdb.sql(query.format("ours")).fetchall()
    assert got == duckdb.sql(query.format("theirs")).fetchall()
    assert sum(c for _, c in got) == 200
    # only the filter's column x (every row) and the projected cat (the matching rows, read in whole
    # chunks since 10% match) were read: not id, n or payload
    assert set(_rows_read(reads)) == {"x", "cat"}
    assert _rows_read(reads)["x"] == N
    reads.clear()

    query = "select payload from {} where id in (7, 1500) and n is not null"
    got = duckdb.sql(query.format("ours")).fetchall()
    assert _sorted(got) == _sorted(duckdb.sql(query.format("theirs")).fetchall())
    assert _sorted(got) == [("payload-1500",), ("payload-7",)]
    # the filter's columns are read for every row; payload for the two matching rows alone
    assert _rows_read(reads) == {"id": N, "n": N, "payload": 2}


def test_duckdb_from_arrow_takes_a_dataset_and_a_scanner(pair, reads):
    ours, theirs = pair
    rel = duckdb.from_arrow(ours).filter("x > 0.995").project("id, cat")
    assert _sorted(rel.fetchall()) == _sorted(
        duckdb.from_arrow(theirs).filter("x > 0.995").project("id, cat").fetchall()
    )
    assert set(_rows_read(reads)) == {"x", "id", "cat"}
    reads.clear()
    # a scanner streams through the PyCapsule interface with its own projection and filter
    scanner = ours.scanner(columns=["id", "cat"], filter="id < 5")
    assert duckdb.from_arrow(scanner).fetchall() == [(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "a")]
    assert duckdb.sql("select count(*) from scanner").fetchall() == [(5,)]
    assert "payload" not in _rows_read(reads)


def test_polars_scan_pyarrow_dataset_pushes_projection_and_filter_down(pair, reads):
    ours, theirs = pair

    def query(ds):  # type: ignore[no-untyped-def]
        return pl.scan_pyarrow_dataset(ds).filter(pl.col("id").is_in([7, 1500])).select("payload").collect()

    got = query(ours)
    assert got.equals(query(theirs))
    assert sorted(got["payload"].to_list()) == ["payload-1500", "payload-7"]
    assert _rows_read(reads) == {"id": N, "payload": 2}
    reads.clear()

    frame = pl.scan_pyarrow_dataset(ours).select("cat", "id").collect()
    assert frame.equals(pl.scan_pyarrow_dataset(theirs).select("cat", "id").collect())
    assert _rows_read(reads) == {"id": N, "cat": N}
    reads.clear()

    head = pl.scan_pyarrow_dataset(ours).filter(pl.col("cat") == "b").head(3).collect()
    assert head["id"].to_list() == [1, 5, 9]


def test_the_stream_interface_streams(tmp_path, pair, reads):
    ours, theirs = pair
    assert_tables_equal(pa.table(ours), theirs.to_table())
    assert pl.DataFrame(ours).equals(pl.from_arrow(theirs.to_table()))
    scanner = ours.scanner(columns=["cat", "id"], filter=pc.field("id") >= 1990)
    assert_tables_equal(pa.table(scanner), theirs.to_table(columns=["cat", "id"], filter="id >= 1990"))
    assert pl.DataFrame(scanner).shape == (10, 2)
    # pyarrow's own writer takes the stream
    pds.write_dataset(ours, tmp_path / "pq", format="parquet")
    assert_tables_equal(
        pds.dataset(tmp_path / "pq").to_table().sort_by("id"), theirs.to_table(), check_metadata=False
    )

    # batch by batch: one batch read does not read the whole dataset (small fragments are read a
    # group at a time, a group on each worker and one more ahead: more fragments than those)
    files = STREAM_GROUP_TASKS * (workers() + 2)
    many = lt.write_dataset(
        pa.table({"id": np.arange(files * 5, dtype=np.int64)}), tmp_path / "many", max_rows_per_file=5
    )
    reads.clear()
    stream = pa.RecordBatchReader.from_stream(many.scanner(columns=["id"], batch_size=5))
    assert stream.read_next_batch().num_rows == 5
    assert 5 <= _rows_read(reads)["id"] < files * 5
    assert sum(b.num_rows for b in stream) == files * 5 - 5
    assert _rows_read(reads)["id"] == files * 5


EXPRESSIONS = {
    "comparison": pc.field("x") <= 0.25,
    "and or not": ((pc.field("cat") == "a") | (pc.field("cat") == "d")) & ~(pc.field("id") > 1000),
    "is_null": pc.field("n").is_null(),
    "is_valid": pc.field("n").is_valid() & (pc.field("n") < 20),
    "isin": pc.field("cat").isin(["b", "c"]),
    "isin nulls": pc.field("n").isin([1, 2, 3, None]),
    "function": pc.starts_with(pc.field("payload"), "payload-19"),
    "cast": pc.field("x").cast(pa.float32()) > pa.scalar(0.5, pa.float32()),
    "arithmetic": (pc.field("id") * 2 + 1) > 3900,
    "is_nan": pc.field("x").is_nan() | (pc.field("x") == 0),
}


@pytest.mark.parametrize("expr", EXPRESSIONS.values(), ids=EXPRESSIONS.keys())
def test_any_pyarrow_expression_filters_as_pyarrow_does(pair, expr, reads):
    """The Expression is the scan's filter as it is: Arrow evaluates it, so pyarrow's semantics
    hold (nulls, isin with nulls, functions pylance's SQL translation does not have)."""
    ours, _ = pair
    expected = pds.dataset(_table()).to_table(columns=["id"], filter=expr)
    assert_tables_equal(ours.to_table(columns=["id"], filter=expr), expected, check_metadata=False)
    assert ours.count_rows(filter=expr) == expected.num_rows
    # the filter reads its own columns (all rows); id only for the matching rows (or whole chunks)
    read = _rows_read(reads)
    assert "id" in read or expected.num_rows == 0
    assert set(read) <= {"id", *(n for n in ("x", "cat", "n", "payload") if n in str(expr))}


def test_filter_returns_a_dataset_view(pair, reads, tmp_path):
    ours, _ = pair
    arrow = pds.dataset(_table())
    expr = pc.field("cat") == "c"
    view = ours.filter(expr)
    assert isinstance(view, FilteredDataset) and isinstance(view, pds.Dataset)
    for got, want in [
        (view, arrow.filter(expr)),
        (view.filter(pc.field("id") > 1000), arrow.filter(expr).filter(pc.field("id") > 1000)),
    ]:
        assert_tables_equal(got.to_table(), want.to_table(), check_metadata=False)
        assert got.count_rows() == want.count_rows()
        assert got.count_rows(filter=pc.field("n").is_null()) == want.count_rows(
            filter=pc.field("n").is_null()
        )
        assert_tables_equal(got.head(4, columns=["id"]), want.head(4, columns=["id"]), check_metadata=False)
        assert_tables_equal(
            got.take([5, 0, 2], columns=["id", "x"]),
            want.take([5, 0, 2], columns=["id", "x"]),
            check_metadata=False,
        )
        assert_tables_equal(pa.table(got), want.to_table(), check_metadata=False)
    # SQL text works in a view too, and the view pickles
    sql = ours.filter("id < 10").filter("cat = 'b'")
    assert sql.to_table(columns=["id"])["id"].to_pylist() == [1, 5, 9]
    assert pickle.loads(pickle.dumps(sql)).count_rows() == 3
    with pytest.raises(IndexError):
        view.take([500])
    # take by position among the view's rows on a dataset with stable row ids and deletions too
    stable = lt.write_dataset(
        _table().slice(0, 40), tmp_path / "stable", max_rows_per_file=15, enable_stable_row_ids=True
    )
    stable.delete("id % 3 = 0")
    mine = stable.filter(pc.field("cat") != "b")
    want = pds.dataset(stable.to_table()).filter(pc.field("cat") != "b")
    assert_tables_equal(
        mine.take([7, 0, 3], columns=["id"]), want.take([7, 0, 3], columns=["id"]), check_metadata=False
    )
    # DuckDB and Polars take the view with pushdown
    reads.clear()
    assert duckdb.sql("select count(*) from view where id < 100").fetchall() == [(25,)]
    assert set(_rows_read(reads)) == {"cat", "id"}
    assert pl.scan_pyarrow_dataset(view).select(pl.len()).collect().item() == 500


def test_joins_and_sort_run_pyarrows_plans(pair, tmp_path):
    ours, theirs = pair
    right = pa.table({"cat": ["a", "b", "z"], "label": ["first", "second", "none"]})
    right_ds = lt.write_dataset(right, tmp_path / "right")
    arrow = pds.dataset(_table())
    for join_type in ("inner", "left outer", "full outer", "left anti"):
        want = arrow.join(pds.dataset(right), "cat", join_type=join_type).to_table().sort_by("id")
        for other in (right, right_ds, pds.dataset(right), lance.dataset(tmp_path / "right")):
            got = ours.join(other, "cat", join_type=join_type)
            assert isinstance(got, pds.InMemoryDataset)
            assert_tables_equal(got.to_table().sort_by("id"), want, check_metadata=False)
    keys = [("cat", "descending"), ("id", "ascending")]
    assert_tables_equal(ours.sort_by(keys).to_table(), arrow.sort_by(keys).to_table(), check_metadata=False)
    left = pa.table({"t": [1, 5, 10], "k": [1, 1, 1]})
    events = lt.write_dataset(pa.table({"t": [0, 4, 9], "k": [1, 1, 1], "v": [10, 40, 90]}), tmp_path / "ev")
    assert_tables_equal(
        events.join_asof(pds.dataset(left), "t", "k", -2).to_table(),
        pds.dataset(events.to_table()).join_asof(pds.dataset(left), "t", "k", -2).to_table(),
        check_metadata=False,
    )
    assert theirs is not None
