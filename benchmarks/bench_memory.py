"""Memory benchmark: append generated rows through an iterator and report the peak RSS.

Each side runs in its own subprocess (so peaks do not mix): lance_table and pylance append
``--rows`` rows of the benchmark schema, generated batch by batch, to a fresh dataset. The data
never exists in memory as a whole; a streaming writer's peak stays far below its size.

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


def _child(side: str, rows: int, uri: str, fmt: str) -> None:
    import pyarrow as pa
    from common import benchmark_table

    schema = benchmark_table(1).schema
    reader = pa.RecordBatchReader.from_batches(schema, _batches(rows))
    start = time.perf_counter()
    if side == "lance_table":
        import lance_table as lt

        lt.write_dataset(reader, uri, mode="append", data_storage_version=fmt)
    else:
        import lance

        lance.write_dataset(reader, uri, mode="append", data_storage_version=fmt)
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size_mb = sum(p.stat().st_size for p in Path(uri).rglob("*") if p.is_file()) / 2**20
    print(json.dumps({"side": side, "peak_rss_mb": peak_mb, "seconds": elapsed, "dataset_mb": size_mb}))


def main(argv: list[str] | None = None) -> int:
    from common import argument_parser

    parser = argument_parser(__doc__, rows=10_000_000)
    parser.add_argument("--format", default="2.2", help="data storage version (2.0, 2.1, 2.2)")
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "URI"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.rows, args.child[1], args.format)
        return 0
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_mem_"))
    results = []
    try:
        for side in ("lance_table", "pylance"):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    *("--rows", str(args.rows), "--format", args.format),
                    *("--child", side, str(work / side)),
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
        "## Memory: streaming append",
        "",
        f"rows={args.rows}, generated in batches of {BATCH}, format {args.format}",
        "",
        "| side | peak RSS (MiB) | dataset on disk (MiB) | seconds |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['side']} | {r['peak_rss_mb']:.0f} | {r['dataset_mb']:.0f} | {r['seconds']:.1f} |"
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
