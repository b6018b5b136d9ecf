"""What Spark's JVM spends taking in a Python data source's Arrow batches, by batch shape.

A synthetic source (``spark_intake_source.py``) yields batches already in memory, so a read costs
only the hand-over and the JVM's intake; beside it, the same columns read through the lance_table
source (format 2.0 and 2.2) and through Spark's Parquet source. Each case is the read of every row
into a no-op sink, run in interleaved rounds; reported are the medians of the wall time, of the
CPU time of the whole process tree, and of the JVM process's own CPU time (the rest is the Python
workers'), with the load average.

    python benchmarks/bench_spark_intake.py --rows 2000000 --runs 5
    python benchmarks/bench_spark_intake.py --columns vec --batch-sizes 8192,262144

What it showed (2M rows, ``local[2]``): the JVM's time does not depend on the rows per batch
(8k to 256k) and grows with the number of values: it turns each row into Spark's row format
value by value, list elements one by one, and Arrow Java checks the bounds and validity of each
value it hands out (``--java-options`` with ``-Darrow.enable_unsafe_memory_access=true
-Darrow.enable_null_check_for_get=false`` measures the JVM without those checks).
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_spark import tree_cpu
from common import argument_parser, benchmark_table

import lance_table as lt

HERE = Path(__file__).parent


def _own_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` itself (its threads; not its children)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jvm_pid() -> int:
    """The Spark JVM this process started (its child running java)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == me and b"java" in cmdline:
            return int(entry)
    raise RuntimeError("no Spark JVM among this process's children")


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=2_000_000, runs=5)
    parser.add_argument("--columns", default="id,x,cat,text,vec", help="columns of the benchmark schema")
    parser.add_argument(
        "--batch-sizes", default="8192,65536,262144", help="rows per batch of the synthetic source"
    )
    parser.add_argument(
        "--java-options", help="JVM options of the local Spark (spark.driver.extraJavaOptions)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # the workers import the synthetic source from this folder
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from spark_intake_source import InMemorySource

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if args.java_options:
        builder = builder.config("spark.driver.extraJavaOptions", args.java_options)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(InMemorySource)
    import lance_table.spark

    lance_table.spark.register(spark)
    columns = args.columns.split(",")
    rows = args.rows
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_intake_"))
    table = benchmark_table(rows).select(columns)
    os.makedirs(work / "parquet")
    for i, batch in enumerate(table.to_batches(max_chunksize=rows // 8 + 1)):
        pq.write_table(pa.Table.from_batches([batch]), str(work / "parquet" / f"part-{i:04d}.parquet"))
    for version in ("2.0", "2.2"):
        lt.write_dataset(
            table, str(work / version), max_rows_per_file=rows // 8 + 1, data_storage_version=version
        )

    def in_memory(batch_size: str) -> None:
        reader = spark.read.format("bench_in_memory").option("rows", rows).option("columns", args.columns)
        reader.option("batch_size", batch_size).load().write.format("noop").mode("overwrite").save()

    def lance(version: str) -> None:
        df = spark.read.format("lance_table").load(str(work / version))
        df.write.format("noop").mode("overwrite").save()

    def parquet() -> None:
        spark.read.parquet(str(work / "parquet")).write.format("noop").mode("overwrite").save()

    cases = {
        f"in memory, {b} rows per batch": (lambda b=b: in_memory(b)) for b in args.batch_sizes.split(",")
    }
    cases.update({f"lance_table {v}": (lambda v=v: lance(v)) for v in ("2.0", "2.2")})
    cases["parquet"] = parquet
    try:
        for run in cases.values():  # warm-up: workers, the JVM's compiled paths, each worker's batches
            run()
            run()
        jvm, me = _jvm_pid(), os.getpid()
        wall, cpu, jvm_cpu = defaultdict(list), defaultdict(list), defaultdict(list)
        names = list(cases)
        for round_ in range(args.runs):
            for name in names if round_ % 2 == 0 else names[::-1]:
                gc.collect()
                c0, j0, t0 = tree_cpu(me), _own_cpu(jvm), time.perf_counter()
                cases[name]()
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(tree_cpu(me) - c0)
                jvm_cpu[name].append(_own_cpu(jvm) - j0)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    lines = [
        "## Spark: the JVM's intake of Python Arrow batches",
        "",
        f"rows={rows}, runs={args.runs}, local[2], columns={args.columns}, "
        f"JVM options: {args.java_options or 'none'}, load {os.getloadavg()[0]:.1f}",
        "",
        "| case | wall (s) | CPU (s) | JVM CPU (s) | Python workers CPU (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in names:
        c, j = med(cpu[name]), med(jvm_cpu[name])
        lines.append(f"| {name} | {med(wall[name]):.3f} | {c:.2f} | {j:.2f} | {c - j:.2f} |")
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spark_intake.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
