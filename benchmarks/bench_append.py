"""Appends: the fixed cost of a small append, lance_table vs pylance side by side.

Each library keeps its own dataset per format (2.0 and 2.2); every round appends the same rows to
both, alternately (who goes first alternates too), and the medians of the append times and their
ratio are reported, for appends of 100 and of 10k rows of the standard table (id, x, cat, text,
vec16). With ``--fragments N`` each dataset starts with N one-row-batch appends, so the appends
land on a table with a long history; with ``--base-rows N`` each dataset starts with N rows (one
write) instead of the appended rows; with ``--files pylance`` both sides append to copies of a
dataset pylance wrote (our appends then carry pylance's manifest and schema forward). Beside the
wall times, each row's note gives both sides'
median process CPU times and their ratio (on a shared machine wall times follow the load; CPU
times less so), and the 1-minute load average after the scenario.

    python benchmarks/bench_append.py
    python benchmarks/bench_append.py --fragments 500 --runs 30
    python benchmarks/bench_append.py --base-rows 1000000
    python benchmarks/bench_append.py --threads 16  # threads of each of lance_table's pools
    python benchmarks/bench_append.py --formats 2.2 --base-rows 1000000 --files pylance
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table

FORMATS = ("2.0", "2.2")
SIZES = (100, 10_000)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, runs=31)
    parser.add_argument("--fragments", type=int, default=0, help="appends before the timed ones")
    parser.add_argument("--threads", type=int, default=None, help="threads of lance_table's pools")
    parser.add_argument("--base-rows", type=int, default=None, help="rows of each dataset at the start")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated data storage versions")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated rows per append")
    parser.add_argument("--files", choices=("own", "pylance"), default="own", help="who writes the start")
    args = parser.parse_args(argv)
    import lance

    import lance_table as lt
    from lance_table import _parallel

    if args.threads is not None:  # before any pool exists (pools are sized when first used)
        threads = args.threads
        _parallel.workers = lambda: threads

    params: dict[str, object] = {"runs": args.runs, "fragments": args.fragments, "files": args.files}
    if args.base_rows is not None:
        params["base_rows"] = args.base_rows
    if args.threads is not None:
        params["threads"] = args.threads
    report = Report("Appends (each library appends to its own dataset)", params)
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_append_"))
    try:
        for fmt in args.formats.split(","):
            for size in map(int, args.sizes.split(",")):
                data = benchmark_table(size)
                first = data if args.base_rows is None else benchmark_table(args.base_rows)
                ours, theirs = work / f"ours-{fmt}-{size}", work / f"theirs-{fmt}-{size}"
                lance.write_dataset(first, theirs, data_storage_version=fmt)
                for i in range(args.fragments):
                    lance.write_dataset(data.slice(i % size, 1), theirs, mode="append")
                if args.files == "pylance":
                    shutil.copytree(theirs, ours)
                else:
                    lt.write_dataset(first, ours, data_storage_version=fmt)
                    for i in range(args.fragments):
                        lt.write_dataset(data.slice(i % size, 1), ours, mode="append")

                def mine(d=data, u=ours) -> object:
                    return lt.write_dataset(d, u, mode="append")

                def other(d=data, u=theirs) -> object:
                    return lance.write_dataset(d, u, mode="append")

                wall, cpu = interleaved_wall_and_cpu(mine, other, args.runs)
                note = (
                    f"CPU {cpu[0] * 1000:.2f} / {cpu[1] * 1000:.2f} ms, ratio {cpu[0] / cpu[1]:.2f}; "
                    f"load {os.getloadavg()[0]:.1f}"
                )
                report.add(Result(f"append {size} rows ({fmt})", *wall, args.runs, note))
                print(f"    {note}", flush=True)
                assert lt.dataset(ours).to_table().equals(lance.dataset(ours).to_table())
                shutil.rmtree(ours, ignore_errors=True)
                shutil.rmtree(theirs, ignore_errors=True)
        stem = "append" if not args.fragments else f"append_{args.fragments}"
        if args.files == "pylance":
            stem += "_pylance_files"
        if args.base_rows is not None:
            stem += f"_base{args.base_rows}"
        report.publish(args.out, stem)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def interleaved_wall_and_cpu(
    mine: Callable[[], object], other: Callable[[], object], runs: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Median wall and process CPU times of ``mine`` and ``other`` over ``runs`` rounds each, run
    alternately (who goes first alternates too): ((wall mine, wall other), (cpu mine, cpu other))."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    for round_ in range(runs):
        order = ((0, mine), (1, other)) if round_ % 2 == 0 else ((1, other), (0, mine))
        for side, fn in order:
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall[side].append(time.perf_counter() - t0)
            cpu[side].append(time.process_time() - c0)
    med = statistics.median
    return (med(wall[0]), med(wall[1])), (med(cpu[0]), med(cpu[1]))


if __name__ == "__main__":
    sys.exit(main())
