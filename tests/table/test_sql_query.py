"""``ds.sql(...)`` and ``ds.session()`` against pylance 14: the same queries on copies of one dataset
return the same tables; what lance_table does not run is a typed error naming the construct."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import FilterError, UnsupportedOperationError, UnsupportedOptionError

lance = pytest.importorskip("lance")
pytestmark = pytest.mark.interop

QUERIES = [
    ("SELECT * FROM test WHERE id > 1", "test"),
    ("SELECT value FROM test WHERE id = 1", "test"),
    ("SELECT id as user_id, UPPER(value) as val FROM dataset WHERE id BETWEEN 1 AND 3", None),
    ("SELECT value FROM dataset ORDER BY id DESC LIMIT 2 OFFSET 1", None),
    ("SELECT value, id FROM dataset ORDER BY id", None),
    ("SELECT id AS k FROM dataset ORDER BY k DESC NULLS LAST", None),
    ("SELECT count(*) AS n, sum(x) AS s, avg(x) AS a, min(value) AS mn FROM dataset", None),
    ("SELECT value, count(*) AS n, max(x) AS m FROM dataset GROUP BY value ORDER BY value", None),
    ("SELECT DISTINCT value FROM dataset ORDER BY value DESC", None),
    ("SELECT d.id FROM dataset AS d WHERE d.id < 3 ORDER BY d.id", None),
    ("SELECT dataset.id, x FROM dataset WHERE id < 4 ORDER BY 2 DESC", None),
    ("SELECT id FROM dataset LIMIT 2", None),
    ("SELECT id, x * 2 AS y FROM dataset WHERE x IS NOT NULL ORDER BY y DESC LIMIT 2", None),
]


@pytest.fixture
def copies(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    table = pa.table(
        {
            "id": [1, 2, 3, 4, None],
            "value": ["a", "b", "c", "a", None],
            "x": [1.5, 2.0, None, 4.0, 5.0],
        }
    )
    lance.write_dataset(table, ours, max_rows_per_file=2)
    shutil.copytree(ours, theirs)
    return lt.dataset(ours), lance.dataset(theirs)


def _run(ds, sql, name=None, **options):
    builder = ds.sql(sql)
    if name:
        builder = builder.table_name(name)
    if options.get("with_row_id"):
        builder = builder.with_row_id()
    query = builder.build()
    return pa.Table.from_batches(query.to_batch_records()), query.to_stream_reader().read_all()


def test_queries_return_pylance_s_tables(copies):
    ours, theirs = copies
    for sql, name in QUERIES:
        got, streamed = _run(ours, sql, name)
        want, _ = _run(theirs, sql, name)
        assert got.equals(want), sql
        assert streamed.equals(want), sql
    got, _ = _run(ours, "SELECT * FROM dataset WHERE id > 2", with_row_id=True)
    want, _ = _run(theirs, "SELECT * FROM dataset WHERE id > 2", with_row_id=True)
    assert got.equals(want)


def test_what_does_not_run_is_a_typed_error(copies):
    ours, theirs = copies
    with pytest.raises(ValueError, match="Invalid user input"):  # both: a table that is not there
        _run(theirs, "SELECT id FROM other")
    with pytest.raises(FilterError, match="'other' not found"):
        _run(ours, "SELECT id FROM other")
    with pytest.raises(FilterError, match="syntax error"):
        _run(ours, "SELEC id FROM dataset")
    for sql, construct in [
        ("SELECT a.id FROM dataset a JOIN dataset b ON a.id = b.id", "JOIN"),
        ("SELECT id FROM dataset WHERE id IN (SELECT id FROM dataset)", "subqueries"),
        ("SELECT value, count(*) FROM dataset GROUP BY value HAVING count(*) > 1", "HAVING"),
        ("SELECT id, row_number() OVER (ORDER BY id) FROM dataset", "window"),
        ("SELECT id FROM dataset UNION SELECT id FROM dataset", "UNION"),
    ]:
        with pytest.raises(UnsupportedOperationError, match=construct):
            _run(ours, sql)
    with pytest.raises(UnsupportedOptionError, match="blob_handling"):
        ours.sql("SELECT * FROM dataset").blob_handling("all_binary")


def test_session_reports_the_caches(copies):
    ours, theirs = copies
    ours.to_table()
    theirs.to_table()
    assert ours.session().size_bytes() > 0 and theirs.session().size_bytes() > 0
    assert ours.session().is_same_as(lt.dataset(ours.uri).session())
    assert ours.session().index_cache_size_bytes() == 0
    assert repr(ours.session()).startswith("Session(index_cache_size_bytes=")
