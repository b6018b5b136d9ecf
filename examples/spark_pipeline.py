"""A small Spark pipeline on lance_table datasets: read, transform, append, time travel.

Run: python examples/spark_pipeline.py   (needs: pip install 'lance_table[spark]' and a Java runtime)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

import lance_table as lt


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("lance_table pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            raw, daily = str(Path(tmp) / "raw_events"), str(Path(tmp) / "daily")
            rng = np.random.default_rng(1)
            n = 50_000
            events = pa.table(
                {
                    "user": pa.array(rng.integers(0, 500, n)),
                    "day": pa.array(rng.integers(0, 7, n), pa.int32()),
                    "amount": pa.array(rng.random(n) * 100),
                }
            )
            lt.write_dataset(events, raw, max_rows_per_file=20_000)
            ds = lt.dataset(raw)
            print(f"raw events: {ds.count_rows()} rows in {len(ds.get_fragments())} fragments")

            # 1. read with Spark (one task per fragment) and aggregate
            df = spark.read.format("lance_table").load(raw)
            totals = df.groupBy("day").agg(F.count("*").alias("events"), F.sum("amount").alias("revenue"))

            # 2. append the aggregate to another dataset, one atomic commit per write
            totals.write.format("lance_table").mode("append").save(daily)
            print("daily totals v1:", lt.dataset(daily).count_rows(), "rows")

            # 3. new raw data arrives; recompute and append again
            lt.write_dataset(events.slice(0, 1000), raw, mode="append")
            spark.read.format("lance_table").load(raw).groupBy("day").agg(
                F.count("*").alias("events"), F.sum("amount").alias("revenue")
            ).write.format("lance_table").mode("append").save(daily)

            # 4. time travel: the first version of the raw data, and the latest daily totals
            v1 = spark.read.format("lance_table").option("version", "1").load(raw).count()
            print(f"raw events at version 1: {v1}; now: {lt.dataset(raw).count_rows()}")
            latest = spark.read.format("lance_table").load(daily).orderBy("day").limit(3).collect()
            print("daily totals (first rows):", [(r.day, r.events) for r in latest])
            print("daily versions:", [v["operation"] for v in lt.dataset(daily).versions()])
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
