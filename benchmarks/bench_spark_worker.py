"""What a Spark read costs in the Python workers, measured in one process without Spark or a JVM.

Each task of a ``spark.read.format("lance_table")`` read runs in a Python worker: it unpickles the
reader, reads its partition (one core: a task decodes on its own thread) and hands the batches to
PySpark, which writes them to the JVM as an Arrow stream. Here every partition the source plans
is read that way, on one thread, and the batches are written as PySpark writes them (a struct
column each, one stream) into ``/dev/null``: the CPU of the decoding (``read``) and of the
decoding and writing (``read + serialize``), against pylance reading the same dataset
(``to_batches``, its own threads: CPU of the process). ``--columns`` reads those columns, each
on its own (where the time of a read goes, column by column).

The JVM's share of a Spark read (its Arrow batches turned into Spark's rows) is measured by
``bench_spark.py``, which reports the CPU of the JVM and of the Python workers apart.

    python benchmarks/bench_spark_worker.py --rows 2000000 --runs 5
    python benchmarks/bench_spark_worker.py --rows 2000000 --columns id,x,cat,text,vec
"""

from __future__ import annotations

import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import pyarrow as pa
from common import argument_parser, benchmark_table

import lance_table as lt


def task_reads(path: str, options: dict[str, str], serialize: bool) -> Callable[[], int]:
    """A function reading every partition of ``path`` as Spark's tasks do (the pickled reader, one
    core), serializing the batches as a Python worker does when ``serialize``; it returns the rows."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    from lance_table._parallel import on_one_core
    from lance_table.spark.source import LanceTableDataSource

    source = LanceTableDataSource({"path": path, **options})
    reader = source.reader(source.schema())
    pickled = pickle.dumps(reader)
    partitions = reader.partitions()

    def run() -> int:
        rows = 0
        for partition in partitions:
            task = pickle.loads(pickled)
            with on_one_core():
                for batch in _serialized(task._read(partition)) if serialize else task._read(partition):
                    rows += batch.num_rows
        return rows

    def _serialized(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches``, each also written as Spark's Python worker writes it to the JVM."""
        with open(os.devnull, "wb", buffering=1 << 16) as sink:
            writer = None
            for batch in batches:
                wrapped = ArrowBatchTransformer.wrap_struct(batch)
                if writer is None:  # (as ArrowStreamSerializer.dump_stream writes them)
                    writer = pa.RecordBatchStreamWriter(sink, wrapped.schema)
                writer.write_batch(wrapped)
                yield batch
            if writer is not None:
                writer.close()

    return run


def cpu_medians(runs: int, sides: dict[str, Callable[[], int]]) -> dict[str, float]:
    """Median process CPU seconds of each side, the sides run in turn, ``runs`` rounds."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for fn in sides.values():  # warm-up
        fn()
    for round_ in range(runs):
        order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
        for name, fn in order:
            c0 = time.process_time()
            fn()
            times[name].append(time.process_time() - c0)
    return {name: statistics.median(v) for name, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=2_000_000, runs=5)
    parser.add_argument("--fragments", type=int, default=500, help="fragments of the many-fragment dataset")
    parser.add_argument("--columns", help="comma-separated columns to read one at a time, instead of all")
    args = parser.parse_args(argv)
    import lance

    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_spark_worker_"))
    rows = args.rows
    lines = [
        "## Spark: the Python workers' share of a read (in one process, one core)",
        "",
        f"rows={rows}, runs={args.runs}; process CPU seconds, medians; pylance: to_batches of the "
        "same dataset (its threads)",
        "",
        "| dataset | columns | read | read + serialize | pylance | read / pylance | load |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    try:
        table = benchmark_table(rows)
        datasets = {
            "2.0, 8 fragments": (8, "2.0"),
            "2.2, 8 fragments": (8, "2.2"),
            f"2.2, {min(args.fragments, rows)} fragments": (min(args.fragments, rows), "2.2"),
        }
        column_sets = [[c] for c in args.columns.split(",")] if args.columns else [None]
        for name, (pieces, version) in datasets.items():
            path = str(work / f"{pieces}_{version}")
            lt.write_dataset(table, path, max_rows_per_file=rows // pieces + 1, data_storage_version=version)
            for cols in column_sets:
                options = {"columns": ",".join(cols)} if cols else {}
                theirs = lance.dataset(path)

                def pylance(cols: list[str] | None = cols, ds: lance.LanceDataset = theirs) -> int:
                    return sum(b.num_rows for b in ds.to_batches(columns=cols))

                med = cpu_medians(
                    args.runs,
                    {
                        "read": task_reads(path, options, serialize=False),
                        "serialize": task_reads(path, options, serialize=True),
                        "pylance": pylance,
                    },
                )
                lines.append(
                    f"| {name} | {','.join(cols) if cols else 'all'} | {med['read']:.3f} "
                    f"| {med['serialize']:.3f} | {med['pylance']:.3f} | {med['read'] / med['pylance']:.2f} "
                    f"| {os.getloadavg()[0]:.1f} |"
                )
                print(lines[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spark_worker.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
