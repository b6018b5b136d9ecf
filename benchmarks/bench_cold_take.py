"""Cold reads over many small fragments: lance_table vs pylance, on local disk and on the slowed
moto S3 server (``slow_s3.py``), with CPU time, wall time, page faults and request counts.

"Cold" means each run opens the dataset afresh and lance_table forgets every cached file reader
first (``READERS.clear()``, timed with the run), as ``bench_s3.py``'s cold scenarios do.

    python benchmarks/bench_cold_take.py --fragments 500 --runs 7 --latency 0.02
    python benchmarks/bench_cold_take.py --where local --scenario take
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import benchmark_table
from slow_s3 import SlowS3

import lance_table as lt
from lance_table.table.readers import READERS


def _faults() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


def measure(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, tuple[float, float, float]]:
    """Median (wall s, CPU s, page faults) of each function, run alternately (order rotates)."""
    names = list(fns)
    got: dict[str, list[tuple[float, float, int]]] = {n: [] for n in names}
    for r in range(runs):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            gc.collect()
            f0, c0, w0 = _faults(), time.process_time(), time.perf_counter()
            fns[name]()
            got[name].append((time.perf_counter() - w0, time.process_time() - c0, _faults() - f0))
    med = statistics.median
    return {n: (med(x[0] for x in v), med(x[1] for x in v), med(x[2] for x in v)) for n, v in got.items()}


def scenarios(uri: str, options: dict[str, str] | None, rows: int, which: list[str]) -> dict[str, Any]:
    import lance

    rng = np.random.default_rng(3)
    idx = np.sort(rng.choice(rows, min(1000, rows), replace=False))
    opts = {"storage_options": options} if options else {}

    def mine() -> lt.Dataset:
        READERS.clear()
        return lt.dataset(uri, **opts)

    def theirs() -> Any:
        return lance.dataset(uri, **opts)

    assert mine().take(idx).equals(theirs().take(idx))
    assert mine().to_table().equals(theirs().to_table())
    out: dict[str, Any] = {}
    if "take" in which:
        out["cold take 1000 rows"] = {
            "lance_table": lambda: mine().take(idx),
            "pylance": lambda: theirs().take(idx),
        }
    if "scan" in which:
        out["cold full scan"] = {
            "lance_table": lambda: mine().to_table(),
            "pylance": lambda: theirs().to_table(),
        }
    return out


def report(name: str, res: dict[str, tuple[float, float, float]], extra: str = "") -> None:
    (mw, mc, mf), (tw, tc, tf) = res["lance_table"], res["pylance"]
    print(
        f"{name}: wall {mw * 1e3:.1f}/{tw * 1e3:.1f} ms ({mw / tw:.2f}), "
        f"cpu {mc * 1e3:.1f}/{tc * 1e3:.1f} ms ({mc / tc:.2f}), "
        f"faults {mf:.0f}/{tf:.0f}{extra}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )


def main() -> int:
    import argparse

    import lance
    import s3fs

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--fragments", type=int, default=500)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--latency", type=float, default=0.02)
    p.add_argument("--where", default="local,s3")
    p.add_argument("--scenario", default="take,scan")
    p.add_argument("--format", default=None, help="data storage version (default: pylance's)")
    args = p.parse_args()
    which = args.scenario.split(",")
    per = 100
    data = benchmark_table(args.fragments * per, seed=9)
    rows = data.num_rows
    if "local" in args.where:
        with tempfile.TemporaryDirectory() as tmp:
            uri = f"{tmp}/frags"
            lance.write_dataset(data, uri, max_rows_per_file=per, data_storage_version=args.format)
            for name, fns in scenarios(uri, None, rows, which).items():
                report(f"local {name}", measure(fns, args.runs))
    if "s3" in args.where:
        with SlowS3(0.0) as server:
            options = server.storage_options
            endpoint = {"endpoint_url": server.endpoint}
            s3fs.S3FileSystem(key="bench", secret="bench", client_kwargs=endpoint).mkdir("bench")
            uri = "s3://bench/frags"
            lance.write_dataset(
                data, uri, storage_options=options, max_rows_per_file=per, data_storage_version=args.format
            )
            server.set_latency(args.latency)
            for name, fns in scenarios(uri, options, rows, which).items():
                res = measure(fns, args.runs)
                counts = {}
                for side, fn in fns.items():
                    server.counts(reset=True)
                    fn()
                    counts[side] = sum(server.counts(reset=True).values())
                report(f"s3 {name}", res, f", requests {counts['lance_table']}/{counts['pylance']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
