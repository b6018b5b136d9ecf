"""The README's Structured Streaming snippet runs as written: the copy it starts follows the dataset,
the rows there at the start and the rows a later append adds."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

import lance_table as lt

pytestmark = pytest.mark.spark

README = Path(__file__).parents[2] / "README.md"


def test_readme_streaming_snippet(spark, tmp_path: Path) -> None:
    text = README.read_text()
    section = text[text.index("### Structured Streaming") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    # the README's trigger waits a minute between micro-batches: the test does not
    assert 'processingTime="1 minute"' in snippet
    snippet = snippet.replace('processingTime="1 minute"', 'processingTime="1 second"')
    events, copy = str(tmp_path / "events"), str(tmp_path / "copy")
    lt.write_dataset(pa.table({"id": pa.array(range(100), pa.int64())}), events)
    namespace = {"spark": spark, "events": events, "copy": copy, "checkpoint": str(tmp_path / "ck")}
    exec(snippet, namespace)  # the README's own code
    query = namespace["query"]
    try:
        query.processAllAvailable()
        lt.write_dataset(pa.table({"id": pa.array(range(100, 150), pa.int64())}), events, mode="append")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(lt.dataset(copy).to_table()["id"].to_pylist()) == list(range(150))


def _change_rows(table: pa.Table) -> list[tuple]:
    names = ["id", "name", "_change_type", "_commit_version", "_commit_timestamp"]
    return sorted(tuple(r.values()) for r in table.select(names).to_pylist())


def test_readme_change_feed_snippet_restarts_exactly_once(spark, tmp_path: Path) -> None:
    """The README's change feed query, in micro-batches of 12 rows that end inside versions, run,
    restarted from its checkpoint after more changes: the copy holds every change row once; and
    a batch read of a range of versions."""
    lance = pytest.importorskip("lance")
    text = README.read_text()
    section = text[text.index("#### Change data feed") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    assert '"maxRowsPerTrigger", "100000"' in snippet
    snippet = snippet.replace('"maxRowsPerTrigger", "100000"', '"maxRowsPerTrigger", "12"')
    events, audit = str(tmp_path / "events"), str(tmp_path / "audit")
    table = pa.table({"id": pa.array(range(20), pa.int64()), "name": [f"n{i}" for i in range(20)]})
    ds = lance.write_dataset(table, events, max_rows_per_file=10, enable_stable_row_ids=True)  # 1
    ds.delete("id IN (4, 14)")  # 2
    ds.update({"name": "'renamed'"}, where="id < 3")  # 3
    namespace = {"spark": spark, "events": events, "audit": audit, "checkpoint": str(tmp_path / "ck")}
    exec(snippet, namespace)  # the README's own code: 20 + 2 + 6 rows
    assert _change_rows(lt.dataset(audit).to_table()) == _change_rows(
        lt.dataset(events).table_changes(1).read_all()
    )
    assert lt.dataset(audit).version == 3  # 28 rows: 12 (of version 1), 12 (to the update's 2nd row), 4

    source = pa.table({"id": pa.array([5, 30], pa.int64()), "name": ["m5", "m30"]})
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)  # 4
    lance.dataset(events).optimize.compact_files()  # no change rows
    exec(snippet, namespace)  # restarted from its checkpoint
    expected = _change_rows(lt.dataset(events).table_changes(1).read_all())
    assert _change_rows(lt.dataset(audit).to_table()) == expected
    assert {r[2] for r in expected if r[3] == 4} == {"update_preimage", "update_postimage", "insert"}

    batch = (
        spark.read.format("lance_table")
        .option("readChangeFeed", "true")
        .option("startingVersion", "2")
        .option("endingVersion", "3")
        .load(events)
        .toArrow()
    )
    assert _change_rows(batch) == _change_rows(lt.dataset(events).table_changes(2, 3).read_all())
