"""Memory benchmark: peak RSS of writes, scans, takes and mutations, lance_table beside pylance.

Every scenario runs in its own fresh subprocess per side (so peaks do not mix), interleaved
(lance_table, pylance, lance_table, ...), and reports the process's peak RSS, the RSS before the
measured call (after imports and after building the scenario's input), wall and CPU time (user and
system apart: a fresh process pays the kernel for every page it touches first, and for every page
an allocator gave back and takes again), the context switches of all its threads (voluntary: waits
on locks and futures, hand-offs between threads), its page faults, and (lance_table only) the peak
of Arrow's default memory pool.

Scenarios, on ``--rows`` rows of the benchmark schema (``--format``), written in 10 fragments:

- ``write_reader``: ``write_dataset`` of a ``RecordBatchReader`` generating batches of 100k rows (the
  data never exists as a whole); ``write_table``: ``write_dataset`` of the whole ``pa.Table``.
- reads, on the dataset each side wrote (``ours``/``pylance's`` files: pylance's 2.2 strings are
  FSST): ``scan`` (``to_batches``, each batch dropped), ``to_table``, ``projection`` (the ``text``
  column), ``filter`` (``x < 0.1``, 10% of rows), ``take`` (1,000 random rows).
- mutations, each on a fresh copy of those datasets: ``append`` (10k rows), ``delete`` (10% of
  rows), ``compaction`` (10 fragments into one), ``copy_compaction`` (the same with
  ``compaction_mode="try_binary_copy"``: pages copied as they are), ``upsert`` (``merge_insert`` of
  10% of rows, half of them new ids).
- ``history``: a dataset of 500 appends of 100 rows (500 fragments), made by each side: ``scan``,
  ``filter``, ``take`` (100 rows), ``delete`` (``id = 42``: one row in each fragment), ``compaction``,
  ``copy_compaction``.

    python benchmarks/bench_memory.py --rows 1000000 --format 2.2
    python benchmarks/bench_memory.py --rows 5000000 --format 2.0 --only write scan
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

BATCH = 100_000
SIDES = ("lance_table", "pylance")
WRITES = ("write_reader", "write_table")
READS = ("scan", "to_table", "projection", "filter", "take")
MUTATIONS = ("append", "delete", "compaction", "copy_compaction", "upsert")
APPEND_ROWS = 10_000
#: what each child reports, as medians over the runs
KEYS = (
    "peak_rss_mb",
    "before_mb",
    "seconds",
    "cpu_seconds",
    "user_seconds",
    "system_seconds",
    "voluntary_switches",
    "involuntary_switches",
    "page_faults",
    "arrow_pool_peak_mb",
)
HISTORY = ("h_scan", "h_filter", "h_take", "h_delete", "h_compaction", "h_copy_compaction")
HISTORY_APPENDS = 500


def _batches(rows: int) -> Iterator[object]:
    from common import benchmark_table

    for start in range(0, rows, BATCH):
        yield from benchmark_table(min(BATCH, rows - start), seed=start).to_batches()


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _child(side: str, op: str, uri: str, rows: int, fmt: str) -> dict[str, object]:
    import numpy as np
    import pyarrow as pa
    from common import benchmark_table

    if side == "lance_table":
        import lance_table as mod
    else:
        import lance as mod  # type: ignore[no-redef]
    schema = benchmark_table(1).schema
    per_file = max(rows // 10, 1)
    work: object = None
    if op == "write_table":
        work = pa.Table.from_batches(list(_batches(rows)), schema)
    elif op == "upsert":
        rng = np.random.default_rng(3)
        n = rows // 10
        old = np.sort(rng.choice(rows, n // 2, replace=False))
        ids = np.concatenate([old, np.arange(rows, rows + n - n // 2)])
        source = benchmark_table(n, seed=11)
        work = source.set_column(0, "id", pa.array(ids.astype(np.int64)))
    elif op == "append":
        work = benchmark_table(APPEND_ROWS, seed=13)
        work = work.set_column(0, "id", pa.array(np.arange(rows, rows + APPEND_ROWS, dtype=np.int64)))
    elif op == "setup_history":
        work = [benchmark_table(100, seed=i) for i in range(HISTORY_APPENDS)]
    base = _rss_mb()
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = time.process_time()
    start = time.perf_counter()
    if op == "write_reader":
        reader = pa.RecordBatchReader.from_batches(schema, _batches(rows))
        mod.write_dataset(reader, uri, data_storage_version=fmt, max_rows_per_file=per_file)
    elif op == "write_table":
        mod.write_dataset(work, uri, data_storage_version=fmt, max_rows_per_file=per_file)
    elif op == "setup_history":
        for i, table in enumerate(work):  # type: ignore[arg-type]
            mod.write_dataset(table, uri, mode="create" if i == 0 else "append", data_storage_version=fmt)
    elif op in ("scan", "h_scan"):
        seen = 0
        for batch in mod.dataset(uri).to_batches():
            seen += batch.num_rows
        assert seen > 0
    elif op == "to_table":
        assert mod.dataset(uri).to_table().num_rows > 0
    elif op == "projection":
        assert mod.dataset(uri).to_table(columns=["text"]).num_rows > 0
    elif op in ("filter", "h_filter"):
        assert mod.dataset(uri).to_table(filter="x < 0.1").num_rows > 0
    elif op in ("take", "h_take"):
        ds = mod.dataset(uri)
        total = ds.count_rows()
        picks = np.sort(
            np.random.default_rng(5).choice(total, min(1000 if op == "take" else 100, total), replace=False)
        )
        assert ds.take(picks).num_rows == len(picks)
    elif op == "append":
        mod.write_dataset(work, uri, mode="append")
    elif op == "delete":
        mod.dataset(uri).delete("id % 10 = 3")
    elif op == "h_delete":
        mod.dataset(uri).delete("id = 42")
    elif op in ("compaction", "h_compaction"):
        ds = mod.dataset(uri)
        ds.optimize.compact_files()
    elif op in ("copy_compaction", "h_copy_compaction"):  # the pages copied as they are
        ds = mod.dataset(uri)
        ds.optimize.compact_files(compaction_mode="try_binary_copy")
    elif op == "upsert":
        ds = mod.dataset(uri)
        ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(work)
    else:
        raise SystemExit(f"unknown op {op}")
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak_mb = usage.ru_maxrss / 1024
    return {
        "side": side,
        "op": op,
        "peak_rss_mb": peak_mb,
        "before_mb": base,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "user_seconds": usage.ru_utime - usage0.ru_utime,
        "system_seconds": usage.ru_stime - usage0.ru_stime,
        # context switches of every thread: hand-offs between threads (a wait on a lock or a
        # future is a voluntary one; more runnable threads than cores make involuntary ones)
        "voluntary_switches": usage.ru_nvcsw - usage0.ru_nvcsw,
        "involuntary_switches": usage.ru_nivcsw - usage0.ru_nivcsw,
        "page_faults": usage.ru_minflt - usage0.ru_minflt,  # each maps in a page (system time)
        "arrow_pool_peak_mb": pa.default_memory_pool().max_memory() / 2**20,
    }


def _run(side: str, op: str, uri: Path, args: argparse.Namespace) -> dict[str, object]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            *("--rows", str(args.rows), "--format", args.format),
            *("--child", side, op, str(uri)),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _copy(src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def main(argv: list[str] | None = None) -> int:
    from common import argument_parser

    parser = argument_parser(__doc__, rows=1_000_000, runs=1)
    parser.add_argument("--format", default="2.2", help="data storage version (2.0, 2.1, 2.2)")
    parser.add_argument(
        "--only", nargs="*", default=None, help="run only scenarios whose name contains one of these"
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="work in this directory; keep its datasets for the next run"
    )
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "OP", "URI"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child[0], args.child[1], args.child[2], args.rows, args.format)))
        return 0

    def wanted(name: str) -> bool:
        return not args.only or any(word in name for word in args.only)

    if args.keep:  # datasets of other sizes and formats kept apart
        args.keep = args.keep / f"{args.format}_{args.rows}"
        args.keep.mkdir(parents=True, exist_ok=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="lance_table_bench_mem_"))
    rows: list[dict[str, object]] = []

    def scenario(name: str, op: str, data: dict[str, Path], mutate: bool = False) -> None:
        if not wanted(name):
            return
        runs: dict[str, list[dict[str, object]]] = {side: [] for side in SIDES}
        for _ in range(args.runs):
            for side in SIDES:
                uri = data[side]
                if mutate:
                    uri = _copy(uri, work / "mutated")
                elif op in WRITES:  # each run writes anew
                    shutil.rmtree(uri, ignore_errors=True)
                runs[side].append(_run(side, op, uri, args))
        load = os.getloadavg()[0]
        row: dict[str, object] = {"scenario": name, "load": load, "runs": args.runs}
        for side in SIDES:
            for key in KEYS:
                row[f"{side}_{key}"] = statistics.median(float(r[key]) for r in runs[side])  # type: ignore[arg-type]
        row["ratio"] = row["lance_table_peak_rss_mb"] / row["pylance_peak_rss_mb"]  # type: ignore[operator]
        rows.append(row)
        mine = {k[len("lance_table_") :]: v for k, v in row.items() if k.startswith("lance_table_")}
        theirs = {k[len("pylance_") :]: v for k, v in row.items() if k.startswith("pylance_")}
        print(
            f"{name:<26} peak {mine['peak_rss_mb']:5.0f} vs {theirs['peak_rss_mb']:5.0f} MiB "
            f"ratio {row['ratio']:.2f} (before {mine['before_mb']:.0f} / {theirs['before_mb']:.0f}, "
            f"Arrow pool {mine['arrow_pool_peak_mb']:.0f}) time {mine['seconds']:.2f} / "
            f"{theirs['seconds']:.2f} s CPU user {mine['user_seconds']:.2f} / {theirs['user_seconds']:.2f} "
            f"system {mine['system_seconds']:.2f} / {theirs['system_seconds']:.2f} s switches "
            f"{mine['voluntary_switches']:.0f}+{mine['involuntary_switches']:.0f} / "
            f"{theirs['voluntary_switches']:.0f}+{theirs['involuntary_switches']:.0f} load {load:.1f}",
            flush=True,
        )

    try:
        written = {side: work / f"write_reader_{side}" for side in SIDES}
        for op in WRITES:
            targets = {side: work / f"{op}_{side}" for side in SIDES}
            if wanted(op):
                scenario(op, op, targets)
        need_data = any(wanted(f"{n} ({w})") for n in READS + MUTATIONS for w in ("ours", "pylance's"))
        if need_data:
            for side in SIDES:
                if not written[side].exists():
                    _run(side, "write_reader", written[side], args)
        for name in READS:
            for who, side in (("ours", "lance_table"), ("pylance's", "pylance")):
                scenario(f"{name} ({who})", name, dict.fromkeys(SIDES, written[side]))
        for name in MUTATIONS:
            for who, side in (("ours", "lance_table"), ("pylance's", "pylance")):
                scenario(f"{name} ({who})", name, dict.fromkeys(SIDES, written[side]), mutate=True)
        if any(wanted(f"{n} (ours)") or wanted(f"{n} (pylance's)") for n in HISTORY):
            history = {side: work / f"history_{side}" for side in SIDES}
            for side in SIDES:
                if not history[side].exists():
                    _run(side, "setup_history", history[side], args)
            for name in HISTORY:
                for who, side in (("ours", "lance_table"), ("pylance's", "pylance")):
                    scenario(f"{name} ({who})", name, dict.fromkeys(SIDES, history[side]), mutate=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    lines = [
        "## Memory: peak RSS",
        "",
        f"rows={args.rows} (10 fragments), format {args.format}; "
        f"history: {HISTORY_APPENDS} appends of 100 rows; runs={args.runs} per side (medians)",
        "",
        "| scenario | lance_table peak (MiB) | pylance peak (MiB) | ratio | before call (ours / pylance) "
        "| Arrow pool peak (ours) | seconds (ours / pylance) | CPU s (ours / pylance) "
        "| user / system CPU s (ours; pylance) | context switches, voluntary + involuntary (ours / pylance) "
        "| load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['lance_table_peak_rss_mb']:.0f} | {r['pylance_peak_rss_mb']:.0f} "
            f"| {r['ratio']:.2f} | {r['lance_table_before_mb']:.0f} / {r['pylance_before_mb']:.0f} "
            f"| {r['lance_table_arrow_pool_peak_mb']:.0f} "
            f"| {r['lance_table_seconds']:.2f} / {r['pylance_seconds']:.2f} "
            f"| {r['lance_table_cpu_seconds']:.2f} / {r['pylance_cpu_seconds']:.2f} "
            f"| {r['lance_table_user_seconds']:.2f} / {r['lance_table_system_seconds']:.2f}; "
            f"{r['pylance_user_seconds']:.2f} / {r['pylance_system_seconds']:.2f} "
            f"| {r['lance_table_voluntary_switches']:.0f} + {r['lance_table_involuntary_switches']:.0f} / "
            f"{r['pylance_voluntary_switches']:.0f} + {r['pylance_involuntary_switches']:.0f} "
            f"| {r['load']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"memory_{args.format.replace('.', '_')}_{args.rows}"
    (args.out / f"{name}.md").write_text(text)
    (args.out / f"{name}.json").write_text(json.dumps(rows, indent=2))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
