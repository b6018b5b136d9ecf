"""The streaming source's offsets and plans, driven as Spark drives them (no Spark session needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lance_table as lt
from lance_table.errors import UnsupportedOperationError

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
