"""Memory benchmark: peak RSS of a streaming append, a streaming scan, a full read and a take.

Each side and each operation runs in its own subprocess (so peaks do not mix): lance_table and
pylance append ``--rows`` rows of the benchmark schema, generated batch by batch, to a fresh
dataset (the data never exists in memory as a whole; a streaming writer's peak stays far below
its size). Then both read the dataset pylance wrote: ``to_batches`` counting rows (streaming),
``to_table`` (the whole table, which must be held), and a take of 10,000 random rows. The RSS
after imports is reported beside each peak.

    python benchmarks/bench_memory.py --rows 10000000 --format 2.2
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

BATCH = 100_000


def _batches(rows: int) -> Iterator[object]:
    from common import benchmark_table

    for start in range(0, rows, BATCH):
        yield from benchmark_table(min(BATCH, rows - start), seed=start).to_batches()


OPS = ("write", "scan", "table", "take")


def _child(side: str, rows: int, uri: str, fmt: str, op: str) -> None:
    import numpy as np
    import pyarrow as pa
    from common import benchmark_table

    if side == "lance_table":
        import lance_table as mod
    else:
        import lance as mod  # type: ignore[no-redef]
    schema = benchmark_table(1).schema
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    if op == "write":
        reader = pa.RecordBatchReader.from_batches(schema, _batches(rows))
        mod.write_dataset(reader, uri, mode="append", data_storage_version=fmt)
    elif op == "scan":
        assert sum(b.num_rows for b in mod.dataset(uri).to_batches()) == rows
    elif op == "table":
        assert mod.dataset(uri).to_table().num_rows == rows
    else:
        picks = np.sort(np.random.default_rng(5).choice(rows, min(10_000, rows), replace=False))
        assert mod.dataset(uri).take(picks).num_rows == len(picks)
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size_mb = sum(p.stat().st_size for p in Path(uri).rglob("*") if p.is_file()) / 2**20
    print(
        json.dumps(
            {
                "side": side,
                "op": op,
                "peak_rss_mb": peak_mb,
                "after_import_mb": base_mb,
                "seconds": elapsed,
                "dataset_mb": size_mb,
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    from common import argument_parser

    parser = argument_parser(__doc__, rows=10_000_000)
    parser.add_argument("--format", default="2.2", help="data storage version (2.0, 2.1, 2.2)")
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "URI"), help=argparse.SUPPRESS)
    parser.add_argument("--op", default="write", choices=OPS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.rows, args.child[1], args.format, args.op)
        return 0
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_mem_"))
    results = []
    try:
        for op in OPS:
            for side in ("lance_table", "pylance"):
                # reads run on the dataset pylance wrote, so both read the same files
                uri = work / (side if op == "write" else "pylance")
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        *("--rows", str(args.rows), "--format", args.format, "--op", op),
                        *("--child", side, str(uri)),
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                results.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(results[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "## Memory: peak RSS",
        "",
        f"rows={args.rows} (written in batches of {BATCH}), format {args.format}",
        "",
        "| operation | side | peak RSS (MiB) | after imports (MiB) | dataset on disk (MiB) | seconds |",
        "|---|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['op']} | {r['side']} | {r['peak_rss_mb']:.0f} | {r['after_import_mb']:.0f} | "
        f"{r['dataset_mb']:.0f} | {r['seconds']:.1f} |"
        for r in results
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"memory_{args.format.replace('.', '_')}"
    (args.out / f"{name}.md").write_text(text)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=2))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
