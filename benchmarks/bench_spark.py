"""Spark benchmark: the lance_table data source vs Spark's built-in Parquet, same data, one run.

Read: ``spark.read.format("lance_table").load(...)`` vs ``spark.read.parquet(...)``, forcing every
column through (a no-op sink), for file format 2.0 and 2.2 datasets of 8 fragments (against 8
Parquet files) and a dataset of ``--fragments`` fragments (against as many Parquet files). Write:
``df.write.format("lance_table")`` in 2.0 and 2.2 vs ``df.write.parquet``.
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
    parser = argument_parser(__doc__, rows=5_000_000, runs=3)
    parser.add_argument("--fragments", type=int, default=500, help="fragments of the many-fragment dataset")
    args = parser.parse_args(argv)
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
        import pyarrow.parquet as pq

        def parquet_copy(name: str, pieces: int) -> str:
            path = str(work / name)
            os.makedirs(path)
            for i, batch in enumerate(table.to_batches(max_chunksize=rows // pieces + 1)):
                pq.write_table(pa_table(batch), f"{path}/part-{i:04d}.parquet")
            return path

        def lance_copy(name: str, pieces: int, version: str) -> str:
            path = str(work / name)
            lt.write_dataset(table, path, max_rows_per_file=rows // pieces + 1, data_storage_version=version)
            return path

        many = min(args.fragments, rows)
        datasets = {
            "read 2.0": (lance_copy("l20", 8, "2.0"), "p8"),
            "read 2.2": (lance_copy("l22", 8, "2.2"), "p8"),
            f"read 2.2, {many} fragments": (lance_copy("lmany", many, "2.2"), "pmany"),
        }
        parquets = {"p8": parquet_copy("p8", 8), "pmany": parquet_copy("pmany", many)}

        def read(fmt: str, path: str) -> None:
            df = spark.read.format(fmt).load(path)
            df.write.format("noop").mode("overwrite").save()

        read("lance_table", datasets["read 2.0"][0])  # warm-up (Python workers, JIT of plans)
        read("parquet", parquets["p8"])
        for name, (ours, theirs) in datasets.items():
            t_ours = median_time(lambda ours=ours: read("lance_table", ours), args.runs)
            t_pq = median_time(lambda theirs=theirs: read("parquet", parquets[theirs]), args.runs)
            results.append((name, rows / t_ours, rows / t_pq))

        source = spark.read.parquet(parquets["p8"]).cache()
        source.count()

        def write_ours(version: str) -> None:
            (
                source.write.format("lance_table")
                .mode("overwrite")
                .option("data_storage_version", version)
                .save(str(work / f"out_lance_{version}"))
            )

        def write_pq() -> None:
            source.write.mode("overwrite").parquet(str(work / "out_parquet"))

        write_pq()
        t_pq_w = median_time(write_pq, args.runs)
        for version in ("2.0", "2.2"):
            write_ours(version)
            t_ours_w = median_time(lambda version=version: write_ours(version), args.runs)
            assert lt.dataset(str(work / f"out_lance_{version}")).count_rows() == rows
            results.append((f"write {version}", rows / t_ours_w, rows / t_pq_w))
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
