"""Spark benchmark: the lance_table data source vs Spark's built-in Parquet, same data, one run.

Read: ``spark.read.format("lance_table").load(...)`` vs ``spark.read.parquet(...)``, forcing every
column through (a no-op sink). Write: ``df.write.format("lance_table")`` vs ``df.write.parquet``.
Throughput in rows/s; the ratio here is lance_table / parquet throughput (higher is better).

    python benchmarks/bench_spark.py --rows 5000000 --runs 3
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import argument_parser, benchmark_table, median_time

import lance_table as lt


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__, rows=5_000_000, runs=3).parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_spark_"))
    rows = args.rows
    results = []
    try:
        table = benchmark_table(rows)
        ours = str(work / "lance")
        lt.write_dataset(table, ours, max_rows_per_file=rows // 8 + 1, data_storage_version="2.0")
        parquet = str(work / "parquet")
        import pyarrow.parquet as pq

        os.makedirs(parquet)
        for i, batch in enumerate(table.to_batches(max_chunksize=rows // 8 + 1)):
            pq.write_table(pa_table(batch), f"{parquet}/part-{i}.parquet")
        del table

        def read(fmt: str, path: str) -> None:
            df = spark.read.format(fmt).load(path)
            df.write.format("noop").mode("overwrite").save()

        read("lance_table", ours)  # warm-up (Python workers, JIT of plans)
        read("parquet", parquet)
        t_ours = median_time(lambda: read("lance_table", ours), args.runs)
        t_pq = median_time(lambda: read("parquet", parquet), args.runs)
        results.append(("read", rows / t_ours, rows / t_pq))

        source = spark.read.parquet(parquet).cache()
        source.count()

        def write_ours() -> None:
            source.write.format("lance_table").mode("overwrite").save(str(work / "out_lance"))

        def write_pq() -> None:
            source.write.mode("overwrite").parquet(str(work / "out_parquet"))

        write_ours()
        write_pq()
        t_ours_w = median_time(write_ours, args.runs)
        t_pq_w = median_time(write_pq, args.runs)
        assert lt.dataset(str(work / "out_lance")).count_rows() == rows
        results.append(("write", rows / t_ours_w, rows / t_pq_w))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "## Spark: lance_table data source vs Parquet",
        "",
        f"rows={rows}, runs={args.runs}, local[2]",
        "",
        "| scenario | lance_table (rows/s) | parquet (rows/s) | ratio lance_table/parquet |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {name} | {a:,.0f} | {b:,.0f} | {a / b:.2f} |" for name, a, b in results]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spark.md").write_text(text)
    (args.out / "spark.json").write_text(
        json.dumps(
            [{"scenario": n, "lance_table_rows_s": a, "parquet_rows_s": b} for n, a, b in results], indent=2
        )
    )
    print(text)
    return 0


def pa_table(batch):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    return pa.Table.from_batches([batch])


if __name__ == "__main__":
    sys.exit(main())
