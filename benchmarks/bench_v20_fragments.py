"""Scans, filters and takes of many small fragments of file format 2.0, against pylance.

300 appends of 100 rows of the "events" records of :mod:`bench_history` (ints, a timestamp,
strings with nulls, booleans, a struct and a list of strings), written by pylance in file format
2.0 (its old default, the format of many living tables); each call is run on both libraries,
interleaved, and the medians of process CPU time (every thread) and wall time are printed with
their ratios (ours / pylance). A copy with deleted rows is read too.

    python benchmarks/bench_v20_fragments.py [repeats]
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import lance
import numpy as np

import lance_table

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_history as bh

ROOT = os.path.join(tempfile.gettempdir(), "bench_v20_fragments")


def _write(uri: str) -> None:
    bh.SHAPE["columns"] = "events"
    for i in range(300):
        lance.write_dataset(
            bh._rows(i * 100, 100), uri, mode="append" if i else "create", data_storage_version="2.0"
        )


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(call: Callable[[Any], Any], ds: Any) -> tuple[float, float]:
    c0, w0 = _cpu(), time.perf_counter()
    call(ds)
    return _cpu() - c0, time.perf_counter() - w0


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    only = sys.argv[2:]
    plain = os.path.join(ROOT, "plain")
    deleted = os.path.join(ROOT, "deleted")
    if not os.path.exists(plain):
        _write(plain)
    if not os.path.exists(deleted):
        shutil.copytree(plain, deleted)
        lance.dataset(deleted).delete("id % 10 = 3")
    picks = np.random.default_rng(0).choice(29000, 200, replace=False).tolist()
    cases: list[tuple[str, str, Callable[[Any], Any]]] = [
        ("project id", plain, lambda ds: ds.to_table(columns=["id"])),
        ("project category", plain, lambda ds: ds.to_table(columns=["category"])),
        ("project flag", plain, lambda ds: ds.to_table(columns=["flag"])),
        ("project payload", plain, lambda ds: ds.to_table(columns=["payload"])),
        ("project tags", plain, lambda ds: ds.to_table(columns=["tags"])),
        ("full scan", plain, lambda ds: ds.to_table()),
        ("filter load > 50", plain, lambda ds: ds.to_table(columns=["id", "source"], filter="load > 50")),
        ("take 200", plain, lambda ds: ds.take(picks)),
        ("deleted: scan + row ids", deleted, lambda ds: ds.to_table(with_row_id=True)),
        ("deleted: filter id", deleted, lambda ds: ds.to_table(columns=["ts"], filter="id >= 5000")),
    ]
    if only:
        cases = [c for c in cases if c[0] in only]
    print(f"load average {os.getloadavg()}")
    for name, uri, call in cases:
        ours, theirs = lance_table.dataset(uri), lance.dataset(uri)
        assert call(ours).equals(call(theirs)), name
        got: dict[str, list[tuple[float, float]]] = {"ours": [], "pylance": []}
        for _ in range(repeats):
            got["ours"].append(_timed(call, ours))
            got["pylance"].append(_timed(call, theirs))
        med = {k: np.median(np.array(v), axis=0) * 1e3 for k, v in got.items()}
        o, p = med["ours"], med["pylance"]
        print(
            f"{name:26s} cpu {o[0]:7.1f} / {p[0]:7.1f} ms = {o[0] / p[0]:5.2f}   "
            f"wall {o[1]:7.1f} / {p[1]:7.1f} ms = {o[1] / p[1]:5.2f}"
        )
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
