"""A small end-to-end Spark pipeline on a lance_table dataset.

1. Ingest: files of account updates land in an inbox; a Structured Streaming query upserts each
   micro-batch into the dataset on its key (the sink's ``merge_on`` option), exactly once, and is
   restarted from its checkpoint when more files arrive.
2. Compact: the upserts left many small fragments and deleted rows; compaction rewrites them.
3. Time travel: Spark reads the dataset as of the first upsert and as of now.

Run: python examples/spark_pipeline.py [--rows N] [--files K]
(needs ``pip install 'lance_table[spark]'`` and a Java runtime; about half a minute on local[2])
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import lance_table as lt

SCHEMA = "account long, balance double, batch int"


def _drop(inbox: Path, k: int, rows: int, accounts: int) -> pa.Table:
    """Input file ``k``: ``rows`` updates of distinct accounts (some seen before, some new).

    Spark's file source takes the oldest files first, so file ``k`` is dated ``k`` seconds after
    a fixed time (files written within one millisecond would come in any order).
    """
    rng = np.random.default_rng(k)
    ids = rng.choice(accounts, size=rows, replace=False)
    table = pa.table(
        {
            "account": pa.array(ids, pa.int64()),
            "balance": pa.array(np.round(rng.random(rows) * 1000, 2)),
            "batch": pa.array(np.full(rows, k), pa.int32()),
        }
    )
    path = inbox / f"updates-{k:04d}.parquet"
    pq.write_table(table, path)
    stamp = int(time.time()) - 3600 + k
    os.utime(path, (stamp, stamp))
    return table


def _latest(updates: list[pa.Table]) -> pa.Table:
    """What the upserts must leave: each account's last update (the oracle, in pyarrow)."""
    all_rows = pa.concat_tables(updates).sort_by([("account", "ascending"), ("batch", "descending")])
    ids = all_rows["account"].to_numpy()
    first = np.ones(len(ids), dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    return all_rows.filter(pa.array(first))


def _ingest(spark: Any, inbox: Path, uri: str, checkpoint: Path) -> None:
    """Upsert every file of the inbox not yet ingested, one micro-batch per file, then stop."""
    query = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(inbox))
        .writeStream.format("lance_table")
        .option("merge_on", "account")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(uri)
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the ingest query failed: {query.exception()}")


def run(spark: Any, workdir: Path, *, rows: int = 20_000, files: int = 4) -> dict[str, Any]:
    """Run the pipeline in ``workdir`` with ``files`` input files of ``rows`` updates each; check
    each step against pyarrow and return what it did.

    Raises:
        AssertionError: a step's result is not what pyarrow computes from the same input.
    """
    inbox, uri, checkpoint = workdir / "inbox", str(workdir / "accounts.lance"), workdir / "checkpoint"
    inbox.mkdir(parents=True)
    accounts = rows * 2
    updates: list[pa.Table] = []

    # 1. Ingest: the first files, then (the query restarted from its checkpoint) the rest. The
    #    first micro-batch makes the dataset (version 1); each later one merges into it.
    first = files // 2 if files >= 3 else files
    updates += [_drop(inbox, k, rows, accounts) for k in range(first)]
    _ingest(spark, inbox, uri, checkpoint)
    if first < files:
        updates += [_drop(inbox, k, rows, accounts) for k in range(first, files)]
        _ingest(spark, inbox, uri, checkpoint)
    ds = lt.dataset(uri)
    expected = _latest(updates)
    got = spark.read.format("lance_table").load(uri).toArrow().sort_by("account")
    assert got["account"].to_pylist() == expected["account"].to_pylist(), "each account once"
    assert got["balance"].to_pylist() == expected["balance"].to_pylist(), "each account's last balance"
    ingested = ds.version

    # 2. Compact: the merges' small fragments and deleted rows are rewritten into one fragment.
    before = len(ds.get_fragments())
    metrics = ds.optimize.compact_files(target_rows_per_fragment=10 * rows)
    ds = lt.dataset(uri)
    assert ds.to_table().sort_by("account").equals(expected.select(ds.schema.names)), "compaction kept rows"

    # 3. Time travel: the dataset as the first micro-batch made it, and now.
    then = spark.read.format("lance_table").option("version", "1").load(uri).count()
    assert then == updates[0].num_rows
    now = spark.read.format("lance_table").load(uri).count()
    assert now == expected.num_rows
    return {
        "files": files,
        "updates": sum(t.num_rows for t in updates),
        "accounts": now,
        "accounts_at_version_1": then,
        "versions_after_ingest": ingested,
        "fragments_before_compaction": before,
        "fragments_after_compaction": len(ds.get_fragments()),
        "fragments_removed": metrics.fragments_removed,
        "version": ds.version,
    }


def _session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("lance_table pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000, help="updates per input file")
    parser.add_argument("--files", type=int, default=4, help="input files (one micro-batch each)")
    args = parser.parse_args(argv)
    spark = _session()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            summary = run(spark, Path(tmp), rows=args.rows, files=args.files)
            for key, value in summary.items():
                print(f"{key}: {value}")
            print(f"done in {time.perf_counter() - start:.1f}s")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
