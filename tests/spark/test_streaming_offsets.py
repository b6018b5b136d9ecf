"""The streaming source's offsets and plans, driven as Spark drives them (no Spark session needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import SchemaError, UnsupportedOperationError

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from lance_table.spark.source import LanceTableDataSource


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def _reader(uri: str, **options: str):
    source = LanceTableDataSource({"path": uri, **options})
    return source.streamReader(source.schema())


def _ids(reader, start: dict, end: dict) -> list[int]:
    out: list[int] = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            out.extend(batch.column(0).to_pylist())
    return out


def test_offsets_split_versions_and_changes_stop_or_are_skipped(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 90), uri, max_rows_per_file=30)  # version 1: three fragments
    lt.write_dataset(_rows(90, 50), uri, mode="append")  # version 2
    lt.dataset(uri).compact_files()  # versions 3 (ReserveFragments: no rows) and 4 (Rewrite)
    lt.write_dataset(_rows(140, 10), uri, mode="append")  # version 5

    reader = _reader(uri, startingVersion="1")
    start = reader.initialOffset()
    assert start == {"version": 1, "row": 0}
    ends = []
    for _ in range(3):
        end = reader.latestOffset(start, ReadMaxRows(40))
        assert _ids(reader, start, end) == list(range(_row(start, 90), _row(start, 90) + 40))
        ends.append(end)
        start = end
    assert ends == [{"version": 1, "row": 40}, {"version": 1, "row": 80}, {"version": 2, "row": 30}]
    with pytest.raises(UnsupportedOperationError, match=r"version 4 .*operation Rewrite.*skipChangeCommits"):
        reader.latestOffset(start, ReadMaxRows(40))

    skipping = _reader(uri, startingVersion="1", skipChangeCommits="true")
    end = skipping.latestOffset(start, ReadMaxRows(40))
    assert end == {"version": 6, "row": 0}  # 20 rows of version 2, none of 3 and 4, 10 of 5
    assert _ids(skipping, start, end) == list(range(120, 150))
    assert skipping.latestOffset(end, ReadMaxRows(40)) == end  # nothing new: the same offset
    assert skipping.latestOffset(end, ReadAllAvailable()) == end
    skipping.commit(end)  # Spark is done up to here: what earlier versions added is forgotten
    assert not skipping._added and set(skipping._manifests) <= {5}

    # Without startingVersion: the table as of the start (after the compaction), then appends.
    default = _reader(uri)
    first = default.initialOffset()
    assert first == {"version": 5, "row": 0, "snapshot": True}
    end = default.latestOffset(first, ReadAllAvailable())
    assert end == {"version": 6, "row": 0}
    assert sorted(_ids(default, first, end)) == list(range(150))
    lt.write_dataset(_rows(150, 5), uri, mode="append")  # version 6, by another writer
    assert _ids(default, end, default.latestOffset(end, ReadAllAvailable())) == list(range(150, 155))
    assert _reader(uri, startingVersion="latest").initialOffset() == {"version": 7, "row": 0}


def _row(offset: dict, rows_of_v1: int) -> int:
    """The first id an offset of this test's dataset points at."""
    return offset["row"] if offset["version"] == 1 else rows_of_v1 + offset["row"]


def _changes(reader, start: dict, end: dict) -> list[tuple]:
    out = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            out += [(r["id"], r["_change_type"], r["_commit_version"]) for r in batch.to_pylist()]
    return out


def test_change_feed_offsets_split_versions_and_survive_a_restart(tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "ds")
    ds = lance.write_dataset(_rows(0, 12), uri, max_rows_per_file=4, enable_stable_row_ids=True)  # 1
    ds.delete("id IN (1, 5)")  # 2
    ds.update({"id": "id + 100"}, where="id IN (2, 9)")  # 3: two preimages, two postimages
    ds.optimize.compact_files()  # 4 and 5: no change rows
    source = pa.table({"id": pa.array([0, 50], pa.int64())})
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)  # 6
    expected = sorted(
        (r["id"], r["_change_type"], r["_commit_version"])
        for r in lt.dataset(uri).table_changes(1).read_all().to_pylist()
    )
    assert len(expected) == 12 + 2 + 4 + 3

    def reader():
        return _reader(uri, readChangeFeed="true", startingVersion="1")

    first = reader()
    start, got, ends = first.initialOffset(), [], []
    for _ in range(3):
        end = first.latestOffset(start, ReadMaxRows(5))
        got += _changes(first, start, end)
        ends.append(end)
        first.commit(end)
        start = end
    assert ends == [
        {"version": 1, "row": 5, "changes": True},
        {"version": 1, "row": 10, "changes": True},
        {"version": 3, "row": 1, "changes": True},
    ]
    # a checkpoint of one kind of source is refused by the other (their rows in a version differ)
    with pytest.raises(ValueError, match="written with readChangeFeed"):
        _reader(uri, startingVersion="1").latestOffset(start, ReadMaxRows(5))
    with pytest.raises(ValueError, match="written without readChangeFeed"):
        first.latestOffset({"version": 3, "row": 1}, ReadMaxRows(5))
    # a restart from the checkpoint: a new reader continues inside the update, exactly where it was
    again = reader()
    while (end := again.latestOffset(start, ReadMaxRows(5))) != start:
        got += _changes(again, start, end)
        start = end
    assert start == {"version": 7, "row": 0, "changes": True}
    assert sorted(got) == expected
    assert (0, "update_preimage", 6) in got and (50, "insert", 6) in got

    # Delta's older option name; without startingVersion: the table at the start, as inserts
    snapshot = _reader(uri, readChangeData="true")
    first = snapshot.initialOffset()
    end = snapshot.latestOffset(first, ReadAllAvailable())
    rows = _changes(snapshot, first, end)
    assert sorted(r[0] for r in rows) == sorted(lance.dataset(uri).to_table()["id"].to_pylist())
    assert {r[1:] for r in rows} == {("insert", 6)}


def test_change_feed_from_before_a_column_existed_shows_it_filled_in(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 3), uri)  # 1
    lt.dataset(uri).add_columns({"w": "id * 2"})  # 2: the stream (started now) reads w
    lt.write_dataset(
        pa.table({"id": pa.array([9], pa.int64()), "w": pa.array([18], pa.int64())}), uri, mode="append"
    )
    reader = _reader(uri, readChangeFeed="true", startingVersion="1")
    start = reader.initialOffset()
    rows = []
    for part in reader.partitions(start, reader.latestOffset(start, ReadAllAvailable())):
        for batch in reader.read(part):
            rows += [(r["_commit_version"], r["_change_type"], r["id"], r["w"]) for r in batch.to_pylist()]
    assert rows == [
        *((1, "insert", i, None) for i in range(3)),
        *((2, "update_preimage", i, None) for i in range(3)),
        *((2, "update_postimage", i, 2 * i) for i in range(3)),
        (3, "insert", 9, 18),
    ]


def test_batch_change_feed_reads_a_range_and_names_what_is_missing(tmp_path):
    uri = str(tmp_path / "ds")
    lt.write_dataset(_rows(0, 5), uri)  # 1
    lt.dataset(uri).delete("id = 2")  # 2
    lt.write_dataset(_rows(5, 2), uri, mode="append")  # 3

    def rows(**options: str) -> list[tuple]:
        source = LanceTableDataSource({"path": uri, "readChangeFeed": "true", **options})
        reader = source.reader(source.schema())
        return [
            (r["_commit_version"], r["_change_type"], r["id"])
            for part in reader.partitions()
            for batch in reader.read(part)
            for r in batch.to_pylist()
        ]

    assert rows(startingVersion="2") == [(2, "delete", 2), (3, "insert", 5), (3, "insert", 6)]
    assert rows(startingVersion="1", endingVersion="2")[-1] == (2, "delete", 2)
    with pytest.raises(ValueError, match="needs the option startingVersion"):
        rows()
    with pytest.raises(ValueError, match=r"startingVersion \(3\) is after endingVersion \(2\)"):
        rows(startingVersion="3", endingVersion="2")
    with pytest.raises(ValueError, match="'readChangeFeed' must be true or false"):
        LanceTableDataSource({"path": uri, "readChangeFeed": "yes"}).schema()
    clash = str(tmp_path / "clash")
    lt.write_dataset(pa.table({"_change_type": ["x"]}), clash)
    with pytest.raises(SchemaError, match="_change_type"):
        LanceTableDataSource({"path": clash, "readChangeFeed": "true"}).schema()
