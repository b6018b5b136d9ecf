"""Distributed merge_insert: ``lance_table.spark.merge_insert`` of N source rows into M target rows
on ``local[2]``, against pylance's single-process ``merge_insert`` of the same rows into a copy of
the same dataset, and against Spark's own Parquet-based equivalent (a full outer join of the source
and the Parquet target on the key, written out as a new Parquet table: Parquet has no in-place
update). Half the source rows match target rows, half are new. One timed run each (after a
warm-up on scratch data that starts Spark's Python workers); the source is read from Parquet
by every side.

    python benchmarks/bench_spark_merge.py                      # 1M into 5M
    python benchmarks/bench_spark_merge.py --source 200000 --target 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def table(ids: np.ndarray, tag: str) -> pa.Table:
    """Rows of the benchmark: an int64 key, a string, a double and an int32."""
    return pa.table(
        {
            "id": ids.astype(np.int64),
            "name": pa.array(np.char.add(tag, ids.astype(str)).astype(object)),
            "value": ids * 0.25,
            "bucket": (ids % 1000).astype(np.int32),
        }
    )


def rewrite_parquet(spark: object, source: str, target: str, out: str) -> None:
    """Spark's Parquet merge: a full outer join on the key (source values win), written anew."""
    from pyspark.sql import functions as F

    s = spark.read.parquet(source).alias("s")  # type: ignore[attr-defined]
    t = spark.read.parquet(target).alias("t")  # type: ignore[attr-defined]
    cols = [F.coalesce(F.col(f"s.{c}"), F.col(f"t.{c}")).alias(c) for c in ("id", "name", "value", "bucket")]
    t.join(s, F.col("t.id") == F.col("s.id"), "full_outer").select(*cols).write.mode("overwrite").parquet(out)


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", type=int, default=1_000_000, help="source rows (half new)")
    parser.add_argument("--target", type=int, default=5_000_000, help="target rows")
    parser.add_argument("--rows-per-file", type=int, default=1_000_000, help="target rows per fragment")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import lance
    from pyspark.sql import SparkSession

    import lance_table.spark as lts

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_spark_merge_"))
    n, m = args.source, args.target
    try:
        target = table(np.arange(m), "t")
        ours, theirs = str(work / "ours"), str(work / "theirs")
        lance.write_dataset(target, ours, max_rows_per_file=args.rows_per_file)
        shutil.copytree(ours, theirs)
        pq_target = str(work / "target_parquet")
        os.makedirs(pq_target)
        for i, batch in enumerate(target.to_batches(max_chunksize=args.rows_per_file)):
            pq.write_table(pa.Table.from_batches([batch]), f"{pq_target}/part-{i}.parquet")
        del target
        src_ids = np.arange(m - n // 2, m + n - n // 2)
        src_path = str(work / "source.parquet")
        pq.write_table(table(src_ids, "s"), src_path)

        # warm-up: Spark's Python workers (their imports) and plans, on scratch data of every kind
        scratch = str(work / "scratch")
        lance.write_dataset(table(np.arange(20_000), "w"), scratch, max_rows_per_file=5_000)
        pq.write_table(table(np.arange(15_000, 25_000), "x"), str(work / "scratch.parquet"))
        for _ in range(2):
            lts.merge_insert(spark.read.parquet(str(work / "scratch.parquet")), scratch, "id")
        pq.write_table(table(np.arange(20_000), "w"), str(work / "scratch_target.parquet"))
        warm = [str(work / n) for n in ("scratch.parquet", "scratch_target.parquet", "w")]
        rewrite_parquet(spark, *warm)

        counts: dict[str, object] = {}

        def distributed() -> None:
            counts["ours"] = lts.merge_insert(spark.read.parquet(src_path), ours, "id")

        def single() -> None:
            builder = lance.dataset(theirs).merge_insert("id").when_matched_update_all()
            counts["pylance"] = builder.when_not_matched_insert_all().execute(pq.read_table(src_path))

        def parquet_rewrite() -> None:
            rewrite_parquet(spark, src_path, pq_target, str(work / "merged_parquet"))

        t_ours = timed(distributed)
        t_pylance = timed(single)
        t_parquet = timed(parquet_rewrite)
        assert lance.dataset(ours).count_rows() == lance.dataset(theirs).count_rows() == m + n - n // 2
        assert spark.read.parquet(str(work / "merged_parquet")).count() == m + n - n // 2
        result = {
            "source_rows": n,
            "target_rows": m,
            "lance_table_spark_s": round(t_ours, 2),
            "pylance_single_process_s": round(t_pylance, 2),
            "spark_parquet_join_rewrite_s": round(t_parquet, 2),
            "ours_over_pylance": round(t_ours / t_pylance, 2),
            "ours_over_parquet": round(t_ours / t_parquet, 2),
            "counts": counts["ours"],
        }
        if args.json:
            print(json.dumps(result))
        else:
            print(f"merge_insert of {n:,} source rows into {m:,} target rows on local[2]")
            print(f"  lance_table.spark    : {t_ours:8.2f} s  {counts['ours']}")
            print(f"  pylance merge_insert: {t_pylance:8.2f} s  ours/pylance {t_ours / t_pylance:.2f}")
            print(f"  Spark Parquet rewrite: {t_parquet:8.2f} s  ours/parquet {t_ours / t_parquet:.2f}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
