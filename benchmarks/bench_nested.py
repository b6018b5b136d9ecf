"""One large fragment with nested columns: projections, full scan and a take, against pylance.

A 1M-row table (``id`` int64, ``st`` struct<a: int64, b: string>, ``tags`` list<string> of 0-3
items) written as one fragment, by pylance (2.2 and 2.0) and by lance_table (2.2); every call is
run on both libraries over the same files, interleaved (who goes first alternates), and the medians
of process CPU time (every thread) and wall time are printed with their ratios (ours / pylance),
with the 1-minute load average.

    python benchmarks/bench_nested.py [--runs N] [--rows N]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import lance
import numpy as np
import pyarrow as pa

import lance_table


def nested_table(n: int) -> pa.Table:
    """``n`` rows of id, a struct of an int and a repetitive string, and a list of 0-3 strings."""
    ids = np.arange(n)
    names = np.array([f"user-{i}" for i in range(977)])[ids % 977]
    st = pa.StructArray.from_arrays([pa.array(ids * 3), pa.array(names)], ["a", "b"])
    offs = np.zeros(n + 1, np.int32)
    np.cumsum(ids % 4, out=offs[1:])
    items = pa.array(np.array(["x", "y", "z"])[np.arange(offs[-1]) % 3])
    tags = pa.ListArray.from_arrays(pa.array(offs), items)
    return pa.table({"id": ids, "st": st, "tags": tags})


def _timed(fn: Callable[[], object], runs: int, other: Callable[[], object]) -> list[float]:
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    for round_ in range(runs):
        order = ((0, fn), (1, other)) if round_ % 2 == 0 else ((1, other), (0, fn))
        for side, f in order:
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            f()
            wall[side].append(time.perf_counter() - t0)
            cpu[side].append(time.process_time() - c0)
    med = statistics.median
    return [med(cpu[0]), med(cpu[1]), med(wall[0]), med(wall[1])]


def _scenarios(uri: str, idx: np.ndarray) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """Each scenario's call on lance_table and on pylance, checked to give equal results."""
    ours, theirs = lance_table.dataset(uri), lance.dataset(uri)
    idx = np.unique(idx % theirs.count_rows())
    assert ours.to_table().equals(theirs.to_table())
    assert ours.take(idx).equals(theirs.take(idx))
    return {
        "st": (lambda: ours.to_table(columns=["st"]), lambda: theirs.to_table(columns=["st"])),
        "tags": (lambda: ours.to_table(columns=["tags"]), lambda: theirs.to_table(columns=["tags"])),
        "full": (ours.to_table, theirs.to_table),
        "take1000": (lambda: ours.take(idx), lambda: theirs.take(idx)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--only", default=None, help="run only sources whose name contains this")
    args = parser.parse_args(argv)
    data = nested_table(args.rows)
    work = tempfile.mkdtemp(prefix="lance_table_bench_nested_")
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(args.rows, 1000, replace=False))
    try:
        sources = {
            "pylance-2.2": lambda u: lance.write_dataset(data, u, data_storage_version="2.2"),
            "ours-2.2": lambda u: lance_table.write_dataset(data, u, data_storage_version="2.2"),
            "pylance-2.0": lambda u: lance.write_dataset(data, u, data_storage_version="2.0"),
        }
        print(
            f"{'source':12} {'scenario':10} {'cpu ours':>9} {'cpu py':>8} {'ratio':>6} "
            f"{'wall ours':>9} {'wall py':>8} {'ratio':>6}  load"
        )
        for name, write in sources.items():
            if args.only and args.only not in name:
                continue
            uri = os.path.join(work, name)
            write(uri)
            deleted = uri + "-deleted"
            shutil.copytree(uri, deleted)
            lance.dataset(deleted).delete("id % 10 = 0")
            scenarios = _scenarios(uri, idx)
            scenarios["full-del"] = _scenarios(deleted, idx)["full"]
            for scen, (mine, other) in scenarios.items():
                c, p, wc, wp = _timed(mine, args.runs, other)
                print(
                    f"{name:12} {scen:10} {c * 1e3:8.1f}ms {p * 1e3:6.1f}ms {c / p:6.2f} "
                    f"{wc * 1e3:8.1f}ms {wp * 1e3:6.1f}ms {wc / wp:6.2f}  {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
