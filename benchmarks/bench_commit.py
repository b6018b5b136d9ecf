"""Commit benchmark: latency of a 10k-row append on local disk and on S3 (moto's server on
127.0.0.1), lance_table vs pylance (format 2.0), median of ``--commits``; and the throughput of
8 processes x 25 appends racing on one dataset (commits/s).

    python benchmarks/bench_commit.py --commits 50
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table, median_time

import lance_table as lt


def _race_worker(args: tuple[str, str, dict[str, str], int, int]) -> None:
    side, uri, options, worker, count = args
    import pyarrow as pa

    for i in range(count):
        ids = pa.array(range(worker * 10_000 + i * 10, worker * 10_000 + i * 10 + 10), pa.int64())
        data = pa.table({"id": ids})
        if side == "lance_table":
            lt.write_dataset(data, uri, mode="append", storage_options=options or None, max_retries=100)
        else:
            import lance

            lance.write_dataset(data, uri, mode="append", storage_options=options or None)


def _race(side: str, uri: str, options: dict[str, str], procs: int = 8, count: int = 25) -> float:
    import pyarrow as pa

    if side == "lance_table":
        lt.write_dataset(
            pa.table({"id": pa.array([], pa.int64())}),
            uri,
            storage_options=options or None,
            data_storage_version="2.0",
        )
    else:
        import lance

        lance.write_dataset(
            pa.table({"id": pa.array([], pa.int64())}),
            uri,
            storage_options=options or None,
            data_storage_version="2.0",
        )
    start = time.perf_counter()
    with mp.get_context("spawn").Pool(procs) as pool:
        pool.map(_race_worker, [(side, uri, options, w, count) for w in range(procs)])
    elapsed = time.perf_counter() - start
    ds = lt.dataset(uri, storage_options=options or None)
    assert ds.count_rows() == procs * count * 10 and ds.version == procs * count + 1
    return procs * count / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--commits", type=int, default=50)
    args = parser.parse_args(argv)

    import lance
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3 = {
        "aws_access_key_id": "bench",
        "aws_secret_access_key": "bench",
        "aws_endpoint": endpoint,
        "aws_region": "us-east-1",
        "allow_http": "true",
    }
    import s3fs

    s3fs.S3FileSystem(key="bench", secret="bench", client_kwargs={"endpoint_url": endpoint}).mkdir("bench")
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_commit_"))
    batch = benchmark_table(10_000, seed=5)
    report = Report("Commits", {"commits": args.commits, "rows_per_append": 10_000})
    try:
        for store, base, options in (("local", str(work), {}), ("s3 (moto)", "s3://bench", s3)):
            ours, theirs = f"{base}/ours", f"{base}/theirs"
            lt.write_dataset(batch, ours, storage_options=options or None, data_storage_version="2.0")
            lance.write_dataset(batch, theirs, storage_options=options or None, data_storage_version="2.0")
            so = options or None
            mine = median_time(
                lambda ours=ours, so=so: lt.write_dataset(batch, ours, mode="append", storage_options=so),
                args.commits,
            )
            other = median_time(
                lambda theirs=theirs, so=so: lance.write_dataset(
                    batch, theirs, mode="append", storage_options=so
                ),
                args.commits,
            )
            report.add(Result(f"append 10k rows, {store}", mine, other, args.commits, "median latency"))
        rate_ours = _race("lance_table", str(work / "race-ours"), {})
        rate_theirs = _race("pylance", str(work / "race-theirs"), {})
        report.add(
            Result(
                "8 procs x 25 appends, local",
                1 / rate_ours,
                1 / rate_theirs,
                1,
                f"ms per commit; {rate_ours:.0f} vs {rate_theirs:.0f} commits/s",
            )
        )
        rate_s3 = _race("lance_table", "s3://bench/race-ours", s3)
        report.add(
            Result(
                "8 procs x 25 appends, s3 (moto)",
                1 / rate_s3,
                float("nan"),
                1,
                f"lance_table {rate_s3:.1f} commits/s; pylance not raced on moto",
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        server.stop()
    report.publish(args.out, "commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
