"""Scans, filters and takes of many small fragments with struct and list fields, against pylance.

300 appends of 100 rows (what streaming ingestion of JSON-like records makes), written by pylance
(one table of struct and list fields, one of fields constant within an append, which pylance 2.2
writes as constant pages);
each call is run on both libraries, interleaved, and the medians of process CPU time (every thread)
and wall time are printed with their ratios (ours / pylance). A copy with deleted rows is read too.

    python benchmarks/bench_nested_fragments.py [repeats]
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
import pyarrow as pa

import lance_table

ROOT = os.path.join(tempfile.gettempdir(), "bench_nested_fragments")


def _write(uri: str) -> None:
    for i in range(300):
        n = 100
        t = pa.table(
            {
                "id": pa.array(np.arange(i * n, i * n + n)),
                "tags": pa.array([["a", "b"][: k % 3] for k in range(n)], pa.list_(pa.string())),
                "st": pa.array([{"a": k, "b": str(k)} for k in range(n)]),
            }
        )
        lance.write_dataset(t, uri, mode="append" if i else "create")


def _write_records(uri: str) -> None:
    """Records with fields the same in all rows of an append (a source, a version) and an
    optional field absent from most appends: pylance 2.2 writes constant pages for them."""
    for i in range(300):
        n = 100
        src = pa.array([f"sensor-{i % 4}"] * n)
        t = pa.table(
            {
                "id": pa.array(np.arange(i * n, i * n + n)),
                "src": src,
                "opt": pa.array([None] * n if i % 3 else np.arange(n) * 0.5, pa.float64()),
                "meta": pa.StructArray.from_arrays([src, pa.array([2] * n)], ["src", "v"]),
                "tags": pa.array([["a", "b"][: k % 3] for k in range(n)], pa.list_(pa.string())),
            }
        )
        lance.write_dataset(t, uri, mode="append" if i else "create", data_storage_version="2.2")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(call: Callable[[Any], Any], ds: Any) -> tuple[float, float]:
    c0, w0 = _cpu(), time.perf_counter()
    call(ds)
    return _cpu() - c0, time.perf_counter() - w0


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    plain = os.path.join(ROOT, "plain")
    deleted = os.path.join(ROOT, "deleted")
    if not os.path.exists(plain):
        _write(plain)
    records = os.path.join(ROOT, "records")
    if not os.path.exists(records):
        _write_records(records)
    if not os.path.exists(deleted):
        shutil.copytree(plain, deleted)
        lance.dataset(deleted).delete("id % 10 = 3")
    picks = np.random.default_rng(0).choice(29000, 200, replace=False).tolist()
    cases: list[tuple[str, str, Callable[[Any], Any]]] = [
        ("project tags", plain, lambda ds: ds.to_table(columns=["tags"])),
        ("project st", plain, lambda ds: ds.to_table(columns=["st"])),
        ("full scan", plain, lambda ds: ds.to_table()),
        ("filter st.a > 80", plain, lambda ds: ds.to_table(columns=["tags", "id"], filter="st.a > 80")),
        ("take 200", plain, lambda ds: ds.take(picks)),
        ("deleted: scan + row ids", deleted, lambda ds: ds.to_table(with_row_id=True)),
        ("deleted: filter id", deleted, lambda ds: ds.to_table(columns=["st"], filter="id >= 5000")),
        ("records: full scan", records, lambda ds: ds.to_table()),
        (
            "records: filter src",
            records,
            lambda ds: ds.to_table(columns=["meta", "opt"], filter="src = 'sensor-1'"),
        ),
    ]
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
