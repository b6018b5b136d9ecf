"""Spark benchmark: the lance_table data source vs Spark's built-in Parquet, same data, one run.

Read: ``spark.read.format("lance_table").load(...)`` vs ``spark.read.parquet(...)``, forcing every
column through (a no-op sink), for file format 2.0 and 2.2 datasets of 8 fragments (against 8
Parquet files) and a dataset of ``--fragments`` fragments (against as many Parquet files). Write:
``df.write.format("lance_table")`` in 2.0 and 2.2 vs ``df.write.parquet``, from a cached DataFrame.

Each scenario runs both sides alternately (after two warm-up runs each: the JVM compiles its
Arrow and Parquet paths on the first queries). Reported: medians of the wall times and of the CPU
time of the whole process tree (this process, the JVM, Spark's Python workers), and the ratios
lance_table / Parquet (below 1: lance_table is faster), with the load average. On a shared,
oversubscribed machine the CPU ratio is the steadier of the two. ``--columns`` reads a projection
(the source's ``columns`` option against a select on Parquet): flat columns of many small
fragments are read as batches of fragments, nested or dictionary ones fragment by fragment.

    python benchmarks/bench_spark.py --rows 5000000 --runs 3
    python benchmarks/bench_spark.py --rows 400000 --only read --columns id,x,text
    python benchmarks/bench_spark.py --rows 2000000 --only read \\
        --java-options "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"

Where a read's time goes: the Python workers decode the rows and send them to the JVM as Arrow
batches, which the JVM turns into Spark's rows value by value (an ``UnsafeProjection`` over Arrow
vectors; list elements one by one). That per-value copy, not the number or size of the batches,
is most of the JVM's share. ``--java-options`` passes JVM options to the local Spark (the
driver, which is also the executor): Arrow Java's per-value bounds and null checks, which the
two properties above turn off, are part of that copy.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import argument_parser, benchmark_table

import lance_table as lt


def tree_cpu_split(root: int) -> dict[str, float]:
    """CPU seconds used so far by process ``root`` and its descendants (those reaped included),
    by kind: ``jvm`` (the Spark driver, which is also the local executor), ``python`` (Spark's
    Python workers: the planning of reads and writes, the tasks' decoding and their Arrow
    batches' serialization) and ``root`` (this process)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    java: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        if stat[stat.index("(") + 1 : stat.rindex(")")] == "java":
            java.add(int(entry))
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in tree]
        tree.update(children)
        frontier.extend(children)
    tick = os.sysconf("SC_CLK_TCK")
    split = {"root": times.get(root, 0) / tick, "jvm": 0.0, "python": 0.0}
    for p in tree - {root}:
        split["jvm" if p in java else "python"] += times.get(p, 0) / tick
    return split


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by process ``root`` and its descendants (those reaped included)."""
    return sum(tree_cpu_split(root).values())


def interleaved(
    mine: Callable[[], object], other: Callable[[], object], runs: int
) -> tuple[float, float, float, float, float, dict[str, float]]:
    """``mine`` and ``other`` run alternately ``runs`` times each: (median wall mine, median wall
    other, median CPU mine, median CPU other, median of the rounds' CPU ratios mine / other,
    median CPU of ``mine`` by kind of process, see :func:`tree_cpu_split`)."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    kinds: list[dict[str, float]] = []
    me = os.getpid()
    for round_ in range(runs):
        for side in (0, 1) if round_ % 2 == 0 else (1, 0):
            gc.collect()
            c0, t0 = tree_cpu_split(me), time.perf_counter()
            (mine, other)[side]()
            wall[side].append(time.perf_counter() - t0)
            c1 = tree_cpu_split(me)
            cpu[side].append(sum(c1.values()) - sum(c0.values()))
            if side == 0:
                kinds.append({k: c1[k] - c0[k] for k in c1})
    med = statistics.median
    ratio = med(a / b for a, b in zip(*cpu) if b > 0) if any(cpu[1]) else float("nan")
    split = {k: med(d[k] for d in kinds) for k in kinds[0]}
    return med(wall[0]), med(wall[1]), med(cpu[0]), med(cpu[1]), ratio, split


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=5_000_000, runs=3)
    parser.add_argument("--fragments", type=int, default=500, help="fragments of the many-fragment dataset")
    parser.add_argument("--only", choices=("read", "write"), help="run only the reads or the writes")
    parser.add_argument(
        "--columns",
        help="read only these columns (comma-separated): the lance_table source's columns option, "
        "a select on Parquet",
    )
    parser.add_argument(
        "--java-options", help="JVM options of the local Spark (spark.driver.extraJavaOptions)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

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
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_spark_"))
    rows = args.rows
    results = []
    try:
        table = benchmark_table(rows)
        import pyarrow as pa
        import pyarrow.parquet as pq

        def parquet_copy(name: str, pieces: int) -> str:
            path = str(work / name)
            os.makedirs(path)
            for i, batch in enumerate(table.to_batches(max_chunksize=rows // pieces + 1)):
                pq.write_table(pa.Table.from_batches([batch]), f"{path}/part-{i:04d}.parquet")
            return path

        def lance_copy(name: str, pieces: int, version: str) -> str:
            path = str(work / name)
            lt.write_dataset(table, path, max_rows_per_file=rows // pieces + 1, data_storage_version=version)
            return path

        many = min(args.fragments, rows)
        parquets = {"p8": parquet_copy("p8", 8)}

        def read(fmt: str, path: str) -> None:
            reader = spark.read.format(fmt)
            if args.columns and fmt == "lance_table":
                reader = reader.option("columns", args.columns)
            df = reader.load(path)
            if args.columns and fmt != "lance_table":
                df = df.select(*args.columns.split(","))
            df.write.format("noop").mode("overwrite").save()

        if args.only != "write":
            datasets = {
                "read 2.0": (lance_copy("l20", 8, "2.0"), "p8"),
                "read 2.2": (lance_copy("l22", 8, "2.2"), "p8"),
                f"read 2.2, {many} fragments": (lance_copy("lmany", many, "2.2"), "pmany"),
            }
            parquets["pmany"] = parquet_copy("pmany", many)
            for _ in range(2):  # warm-up (Python workers, JIT of plans)
                read("lance_table", datasets["read 2.0"][0])
                read("parquet", parquets["p8"])
            for name, (ours, theirs) in datasets.items():
                timings = interleaved(
                    lambda ours=ours: read("lance_table", ours),
                    lambda theirs=theirs: read("parquet", parquets[theirs]),
                    args.runs,
                )
                results.append((name, *timings, os.getloadavg()[0]))
                print(results[-1], flush=True)

        if args.only != "read":
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

            for version in ("2.0", "2.2"):
                for _ in range(2):
                    write_ours(version)
                    write_pq()
                timings = interleaved(lambda version=version: write_ours(version), write_pq, args.runs)
                assert lt.dataset(str(work / f"out_lance_{version}")).count_rows() == rows
                results.append((f"write {version}", *timings, os.getloadavg()[0]))
                print(results[-1], flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "## Spark: lance_table data source vs Parquet",
        "",
        f"rows={rows}, runs={args.runs}, local[2], columns={args.columns or 'all'}, "
        f"JVM options: {args.java_options or 'none'}; "
        "ratios = lance_table / Parquet (lower is better)",
        "",
        "CPU ratio: of the medians; round ratio: median of the rounds' ratios. lance_table's CPU "
        "by process: the JVM (Spark's own work: Arrow batches turned into rows) and Spark's "
        "Python workers (our decoding and the batches' serialization)",
        "",
        "| scenario | lance_table wall (s) | parquet wall (s) | wall ratio | lance_table CPU (s) "
        "| parquet CPU (s) | CPU ratio | round ratio | lance_table JVM / Python CPU (s) | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {w1:.3f} | {w2:.3f} | {w1 / w2:.2f} | {c1:.2f} | {c2:.2f} | {c1 / c2:.2f} "
        f"| {rr:.2f} | {split['jvm']:.2f} / {split['python']:.2f} | {load:.1f} |"
        for name, w1, w2, c1, c2, rr, split, load in results
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spark.md").write_text(text)
    keys = (
        "scenario",
        "lance_table_s",
        "parquet_s",
        "lance_table_cpu_s",
        "parquet_cpu_s",
        "cpu_round_ratio",
        "lance_table_cpu_by_process",
        "load",
    )
    (args.out / "spark.json").write_text(json.dumps([dict(zip(keys, r)) for r in results], indent=2))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
