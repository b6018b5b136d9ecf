"""Object storage benchmark: lance_table vs pylance on a moto S3 server that delays every request.

The server (``slow_s3.py``) runs in a subprocess on 127.0.0.1 and adds ``--latency`` seconds to
each request and keeps connections open as S3 does (``--close``: one connection per request);
it counts requests by kind (LIST, GET, HEAD, PUT, ...), and each scenario reports
both libraries' counts beside their times. Reads run on one dataset pylance wrote (``--rows`` rows
in one fragment, formats 2.0 and 2.2) and on one of ``--fragments`` small fragments; both libraries
read the same bytes. Appends and deletes run on a dataset each library wrote itself. Reads go
through a handle opened once per library (as an application would hold it), except the ``open``
scenarios; ``cold`` scenarios open the dataset and forget every cached file reader first.

    python benchmarks/bench_s3.py --latency 0.02
    python benchmarks/bench_s3.py --latency 0.02 --rows 300000 --fragments 500 --runs 5
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table
from slow_s3 import SlowS3

import lance_table as lt
from lance_table.table.readers import READERS

BUCKET = "bench"


def _fmt(counts: Counter[str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"


class Bench:
    """Times scenarios on the slowed server and counts their requests."""

    def __init__(self, server: SlowS3, report: Report, runs: int, latency: float) -> None:
        self.server = server
        self.latency = latency
        self.report = report
        self.runs = runs
        self.requests: list[dict[str, Any]] = []
        #: options for lance_table only (its choice of range reader)
        self.own_options: dict[str, str] = {}

    def count(self, fn: Callable[[], object]) -> tuple[Counter[str], int]:
        """The requests of one run of ``fn`` by kind, and the bytes of the answers to its GETs."""
        self.server.counts(reset=True)
        fn()
        sent = self.server.bytes_sent()["GET"]
        return self.server.counts(reset=True), sent

    def both(self, name: str, mine: Callable[[], object], theirs: Callable[[], object]) -> None:
        """Time ``mine`` and ``theirs`` alternately (wall and process CPU time), then count one
        run of each."""
        (mine_s, theirs_s), (mine_cpu, theirs_cpu) = interleaved_wall_and_cpu(mine, theirs, self.runs)
        (ours, our_bytes), (other, other_bytes) = self.count(mine), self.count(theirs)
        note = (
            f"cpu ratio {mine_cpu / theirs_cpu if theirs_cpu else float('nan'):.2f} "
            f"({mine_cpu * 1000:.0f}/{theirs_cpu * 1000:.0f} ms); "
            f"requests: lance_table {sum(ours.values())} ({_fmt(ours)}), "
            f"pylance {sum(other.values())} ({_fmt(other)}); "
            f"GET MB {our_bytes / 1e6:.2f}/{other_bytes / 1e6:.2f}; load {os.getloadavg()[0]:.2f}"
        )
        self.report.add(Result(name, mine_s, theirs_s, self.runs, note))
        print(f"      {note}", flush=True)
        self.requests.append(
            {
                "scenario": name,
                "lance_table": dict(ours),
                "pylance": dict(other),
                "get_bytes": {"lance_table": our_bytes, "pylance": other_bytes},
                "cpu_s": {"lance_table": mine_cpu, "pylance": theirs_cpu},
                "load_average": os.getloadavg()[0],
            }
        )


def interleaved_wall_and_cpu(
    mine: Callable[[], object], other: Callable[[], object], runs: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Median wall times and median process CPU times of ``mine`` and ``other``, run alternately
    (who goes first alternates too)."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    for round_ in range(runs):
        order = ((0, mine), (1, other)) if round_ % 2 == 0 else ((1, other), (0, mine))
        for side, fn in order:
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            cpu[side].append(time.process_time() - start_cpu)
            wall[side].append(time.perf_counter() - start)
    med = statistics.median
    return (med(wall[0]), med(wall[1])), (med(cpu[0]), med(cpu[1]))


def _reads(bench: Bench, uri: str, options: dict[str, str], label: str, rows: int) -> None:
    import lance

    def mine() -> lt.Dataset:
        return lt.dataset(uri, storage_options={**options, **bench.own_options})

    def theirs() -> Any:
        return lance.dataset(uri, storage_options=options)

    def cold_mine() -> lt.Dataset:
        READERS.clear()
        return mine()

    held_mine, held_theirs = mine(), theirs()
    rng = np.random.default_rng(3)
    idx = np.sort(rng.choice(rows, min(1000, rows), replace=False))
    lo = rows // 2
    assert held_mine.to_table().equals(held_theirs.to_table())
    assert held_mine.take(idx).equals(held_theirs.take(idx))
    bench.both(f"{label}: open + count", lambda: mine().count_rows(), lambda: theirs().count_rows())
    bench.both(f"{label}: full scan", held_mine.to_table, held_theirs.to_table)
    bench.both(
        f"{label}: full scan, cold",
        lambda: cold_mine().to_table(),
        lambda: theirs().to_table(),
    )
    bench.both(
        f"{label}: stream scan (to_batches)",
        lambda: sum(b.num_rows for b in held_mine.to_batches()),
        lambda: sum(b.num_rows for b in held_theirs.to_batches()),
    )
    bench.both(
        f"{label}: projection x",
        lambda: held_mine.to_table(columns=["x"]),
        lambda: held_theirs.to_table(columns=["x"]),
    )
    where = f"id >= {lo} AND id < {lo + 1000}"
    bench.both(
        f"{label}: filter 1000-row id range",
        lambda: held_mine.to_table(filter=where),
        lambda: held_theirs.to_table(filter=where),
    )
    bench.both(f"{label}: take 1000 rows", lambda: held_mine.take(idx), lambda: held_theirs.take(idx))
    bench.both(
        f"{label}: take 1000 rows, cold",
        lambda: cold_mine().take(idx),
        lambda: theirs().take(idx),
    )


def _writes(bench: Bench, base: str, options: dict[str, str], fmt: str, data: pa.Table) -> None:
    import lance

    ours, theirs = f"{base}/writes-ours-{fmt}", f"{base}/writes-theirs-{fmt}"
    mine = {**options, **bench.own_options}
    bench.server.set_latency(0)
    lt.write_dataset(data, ours, storage_options=options, data_storage_version=fmt)
    lance.write_dataset(data, theirs, storage_options=options, data_storage_version=fmt)
    bench.server.set_latency(bench.latency)
    more = data.slice(0, 1000)
    bench.both(
        f"{fmt}: append 1000 rows",
        lambda: lt.write_dataset(more, ours, mode="append", storage_options=mine),
        lambda: lance.write_dataset(more, theirs, mode="append", storage_options=options),
    )
    ids = itertools.count(7)
    bench.both(
        f"{fmt}: delete 1 row",
        lambda: lt.dataset(ours, storage_options=mine).delete(f"id = {next(ids)}"),
        lambda: lance.dataset(theirs, storage_options=options).delete(f"id = {next(ids)}"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=300_000, runs=5)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds added to every request")
    parser.add_argument("--fragments", type=int, default=500)
    parser.add_argument("--formats", default="2.0,2.2")
    parser.add_argument("--only", default="", help="run only scenarios whose dataset label has this")
    parser.add_argument(
        "--reader",
        default="direct",
        choices=("direct", "s3fs", "pyarrow"),
        help="lance_table's client of data-file range reads (storage option lance_table_s3_reader)",
    )
    parser.add_argument(
        "--close", action="store_true", help="the server closes each connection (werkzeug's way), unlike S3"
    )
    args = parser.parse_args(argv)

    import lance
    import s3fs

    report = Report(
        "S3 with latency",
        {
            "latency_s": args.latency,
            "rows": args.rows,
            "fragments": args.fragments,
            "runs": args.runs,
            "keep_alive": not args.close,
            "reader": args.reader,
        },
    )
    with SlowS3(0.0, keep_alive=not args.close) as server:
        options = server.storage_options
        fs = s3fs.S3FileSystem(key="bench", secret="bench", client_kwargs={"endpoint_url": server.endpoint})
        fs.mkdir(BUCKET)
        bench = Bench(server, report, args.runs, args.latency)
        if args.reader != "direct":
            bench.own_options = {"lance_table_s3_reader": args.reader}
        data = benchmark_table(args.rows)
        for fmt in args.formats.split(","):
            if args.only and args.only not in fmt:
                continue
            uri = f"s3://{BUCKET}/read-{fmt}"
            lance.write_dataset(data, uri, storage_options=options, data_storage_version=fmt)
            server.set_latency(args.latency)
            _reads(bench, uri, options, fmt, args.rows)
            _writes(bench, f"s3://{BUCKET}", options, fmt, data)
            server.set_latency(0)
        if args.fragments and (not args.only or "frag" in args.only):
            per = 100
            uri = f"s3://{BUCKET}/fragments"
            small = benchmark_table(args.fragments * per, seed=9)
            lance.write_dataset(small, uri, storage_options=options, max_rows_per_file=per)
            server.set_latency(args.latency)
            _reads(bench, uri, options, f"{args.fragments} fragments", small.num_rows)
    print(f"load average at the end: {os.getloadavg()}", flush=True)
    report.publish(args.out, "s3")
    (args.out / "s3_requests.json").write_text(json.dumps(bench.requests, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
