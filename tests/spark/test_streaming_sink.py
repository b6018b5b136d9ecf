"""The Structured Streaming sink on a real local Spark session: exactly once across a stop, a
restart and a forced replay; complete mode; the JVM connector's transaction properties."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lance_table as lt
from lance_table.spark.streaming_options import EPOCH_ID_KEY, QUERY_ID_KEY

pytestmark = pytest.mark.spark

SCHEMA = "id long, name string"
_EPOCH = int(time.time()) - 3600


def _put(folder: Path, k: int, table: pa.Table) -> None:
    """Input file ``k``; Spark's file source takes files oldest first, so file ``k`` is dated ``k``
    seconds after a fixed recent time (files written within one millisecond would come in any order)."""
    path = folder / f"part-{k:03d}.parquet"
    pq.write_table(table, path)
    stamp = _EPOCH + k
    os.utime(path, (stamp, stamp))


def _drop_file(folder: Path, k: int, rows: int = 100) -> None:
    """One more input file: ids ``k*rows .. (k+1)*rows - 1``."""
    ids = list(range(k * rows, (k + 1) * rows))
    _put(folder, k, pa.table({"id": ids, "name": [f"n{i}" for i in ids]}))


def _stream(spark, folder: Path):
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(folder))


def _epochs(uri: str) -> list[tuple[int, str | None, str | None]]:
    ds = lt.dataset(uri)
    out = []
    for v in ds.versions():
        props = ds.read_transaction(v["version"]).transaction_properties or {}
        out.append((v["version"], props.get(QUERY_ID_KEY), props.get(EPOCH_ID_KEY)))
    return out


def test_sink_exactly_once_across_stop_restart_and_replay(spark, tmp_path):
    lance = pytest.importorskip("lance")
    folder, uri, ck = tmp_path / "in", str(tmp_path / "out"), tmp_path / "ck"
    folder.mkdir()
    for k in range(2):
        _drop_file(folder, k)

    def run(trigger: dict) -> object:
        return (
            _stream(spark, folder)
            .writeStream.format("lance_table")
            .option("checkpointLocation", str(ck))
            .trigger(**trigger)
            .start(uri)
        )

    # Two files, one per micro-batch: the sink creates the dataset, then appends; one version each.
    q = run({"availableNow": True})
    q.awaitTermination()
    query_id = str(q.id)
    assert _epochs(uri) == [(1, query_id, "0"), (2, query_id, "1")]
    # The tasks of a micro-batch tag its files with one tag of their own (what an abort looks for).
    tags = {f.path[24:34] for frag in lt.dataset(uri).get_fragments() for f in frag.data_files()}
    assert len(tags) == 2

    # The sink committed micro-batch 1 but the checkpoint "did not": Spark replays it on restart.
    for name in ("1", ".1.crc"):  # the commit file and Hadoop's checksum of it
        (ck / "commits" / name).unlink(missing_ok=True)
    _drop_file(folder, 2)
    q = run({"availableNow": True})
    q.awaitTermination()
    assert str(q.id) == query_id  # the checkpoint keeps the query id the sink dedupes on
    assert _epochs(uri) == [(1, query_id, "0"), (2, query_id, "1"), (3, query_id, "2")]

    # Stopped mid-stream: a running query (processing-time trigger) stopped, more input, restarted.
    _drop_file(folder, 3)
    q = run({"processingTime": "200 milliseconds"})
    q.processAllAvailable()
    q.stop()
    _drop_file(folder, 4)
    _drop_file(folder, 5)
    q = run({"availableNow": True})
    q.awaitTermination()

    ids = sorted(lt.dataset(uri).to_table()["id"].to_pylist())
    assert ids == list(range(600))  # no loss, no duplicates
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == ids
    epochs = _epochs(uri)
    assert [e[2] for e in epochs] == [str(i) for i in range(6)]  # one version per non-empty epoch
    assert {e[1] for e in epochs} == {query_id}
    # No file of the replayed micro-batch stays behind.
    data_files = {p.name for p in (Path(uri) / "data").iterdir()}
    referenced = {f.path for frag in lt.dataset(uri).get_fragments() for f in frag.data_files()}
    assert data_files == referenced


def test_sink_complete_mode_and_recognises_another_writers_epochs(spark, tmp_path):
    folder, uri, ck = tmp_path / "in", str(tmp_path / "out"), tmp_path / "ck"
    folder.mkdir()
    for k in range(3):
        _drop_file(folder, k)
    # Another sink (the JVM connector, say) committed this query's epochs 0 and 1 already.
    lt.write_dataset(
        pa.table({"bucket": pa.array([0], pa.int64()), "count": pa.array([-1], pa.int64())}),
        uri,
        transaction_properties={QUERY_ID_KEY: "orders-v1", EPOCH_ID_KEY: "1"},
    )
    counts = _stream(spark, folder).selectExpr("id % 3 as bucket").groupBy("bucket").count()
    q = (
        counts.writeStream.format("lance_table")
        .outputMode("complete")
        .option("checkpointLocation", str(ck))
        .option("streamingQueryId", "orders-v1")
        .trigger(availableNow=True)
        .start(uri)
    )
    q.awaitTermination()
    # Epochs 0 and 1 were skipped as committed; epoch 2 overwrote the table with the full counts.
    assert [e[1:] for e in _epochs(uri)] == [("orders-v1", "1"), ("orders-v1", "2")]
    table = lt.dataset(uri).to_table().sort_by("bucket")
    assert table["bucket"].to_pylist() == [0, 1, 2]
    assert table["count"].to_pylist() == [100, 100, 100]
    assert lt.dataset(uri).versions()[-1]["operation"] == "overwrite"


def test_sink_merge_on_upserts_each_micro_batch_exactly_once(spark, tmp_path):
    lance = pytest.importorskip("lance")
    folder, uri, ck = tmp_path / "in", str(tmp_path / "out"), tmp_path / "ck"
    folder.mkdir()
    inputs = [
        pa.table({"id": list(range(0, 100)), "name": [f"a{i}" for i in range(0, 100)]}),
        pa.table({"id": list(range(50, 150)), "name": [f"b{i}" for i in range(50, 150)]}),
        pa.table({"id": list(range(140, 160)), "name": [f"c{i}" for i in range(140, 160)]}),
    ]
    for k in range(2):
        _put(folder, k, inputs[k])

    def run() -> None:
        (
            _stream(spark, folder)
            .writeStream.format("lance_table")
            .option("checkpointLocation", str(ck))
            .option("streamingQueryId", "upsert-1")
            .option("merge_on", "id")
            .trigger(availableNow=True)
            .start(uri)
        ).awaitTermination()

    run()
    for name in ("1", ".1.crc"):  # force a replay of the merged micro-batch 1
        (ck / "commits" / name).unlink(missing_ok=True)
    _put(folder, 2, inputs[2])
    run()

    assert [e[1:] for e in _epochs(uri)] == [("upsert-1", str(i)) for i in range(3)]
    # pylance's merge_insert of the same micro-batches, one after another
    oracle = str(tmp_path / "oracle")
    lance.write_dataset(inputs[0], oracle)
    for table in inputs[1:]:
        lance.dataset(oracle).merge_insert(
            "id"
        ).when_matched_update_all().when_not_matched_insert_all().execute(table)
    expected = lance.dataset(oracle).to_table().sort_by("id")
    actual = lt.dataset(uri).to_table().sort_by("id")
    assert actual["id"].to_pylist() == list(range(160)) == expected["id"].to_pylist()
    assert actual["name"].to_pylist() == expected["name"].to_pylist()
