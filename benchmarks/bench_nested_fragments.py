"""Scans, filters and takes of many small fragments with struct and list fields, against pylance.

300 appends of 100 rows (what streaming ingestion of JSON-like records makes), written by pylance
(one table of struct and list fields, one of fields constant within an append, which pylance 2.2
writes as constant pages);
each call is run on both libraries, interleaved, and the medians of process CPU time (every thread)
and wall time are printed with the medians of each round's ratio (ours / pylance). A copy with
deleted rows is read too.

    python benchmarks/bench_nested_fragments.py [repeats]

With ``large`` after the repeats, the cases run instead on 1M rows of :func:`common.nested_table`
(lists of strings and of ints, a struct, nulls; its struct without nulls, which 2.0 cannot
store) written by pylance in file format 2.0 in 20k-row fragments (50 files of several pages per
column): scans, projections of the nested columns and filters.

    python benchmarks/bench_nested_fragments.py 5 large
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import nested_table

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


def _write_large(uri: str) -> None:
    """1M rows of nested columns in 2.0 files of 20k rows, by pylance."""
    table = nested_table(1_000_000)
    point = table.column("point").combine_chunks()
    point = pa.StructArray.from_arrays([point.field("x"), point.field("y")], names=["x", "y"])
    table = table.set_column(table.schema.get_field_index("point"), "point", point)
    lance.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=20_000)


def _large_cases() -> list[tuple[str, str, Callable[[Any], Any]]]:
    large = os.path.join(ROOT, "large20")
    if not os.path.exists(large):
        _write_large(large)
    return [
        ("2.0 20k: full scan", large, lambda ds: ds.to_table()),
        ("2.0 20k: project tags", large, lambda ds: ds.to_table(columns=["tags"])),
        ("2.0 20k: project point", large, lambda ds: ds.to_table(columns=["point"])),
        ("2.0 20k: project ints", large, lambda ds: ds.to_table(columns=["ints"])),
        ("2.0 20k: filter score", large, lambda ds: ds.to_table(filter="score < 0.1")),
        (
            "2.0 20k: filter point.x",
            large,
            lambda ds: ds.to_table(columns=["tags", "id"], filter="point.x < 0.5"),
        ),
    ]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(call: Callable[[Any], Any], ds: Any) -> tuple[float, float]:
    c0, w0 = _cpu(), time.perf_counter()
    call(ds)
    return _cpu() - c0, time.perf_counter() - w0


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    if sys.argv[2:3] == ["large"]:
        _run(_large_cases(), repeats)
        return
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
    _run(cases, repeats)


def _run(cases: list[tuple[str, str, Callable[[Any], Any]]], repeats: int) -> None:
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
        # the median of each round's ratio (the load changes from round to round)
        ratio = np.median(np.array(got["ours"]) / np.array(got["pylance"]), axis=0)
        print(
            f"{name:26s} cpu {o[0]:7.1f} / {p[0]:7.1f} ms = {ratio[0]:5.2f}   "
            f"wall {o[1]:7.1f} / {p[1]:7.1f} ms = {ratio[1]:5.2f}"
        )
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
