"""Deletes, lance_table vs pylance side by side: one row, a few rows spread over fragments, a
100-row id range, 10%.

Each library deletes from its own fresh copy (copied untimed) of a 1M-row dataset written by
pylance or by lance_table (``--writer``), in ``--fragments`` fragments, format ``--format``;
the runs alternate and the medians of wall and process CPU time are reported with their ratio.

    python benchmarks/bench_delete.py --rows 1000000 --fragments 50 --format 2.2
    python benchmarks/bench_delete.py --fragments 1 --link --runs 21   # one 1M-row fragment

``--link`` makes each copy of hard links (a delete never changes a file it did not write), so a
run costs no copy of the data and many runs fit in a short time; the data files are then read
from the page cache warm, where a fresh copy's pages were just written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import benchmark_table

PREDICATES = {
    "1 row": "id = 12345",
    "few rows": None,  # filled from the row count: 8 ids spread over the table
    "id range": None,  # filled from the row count: 100 ids in the middle of the table
    "10%": "id % 10 = 0",
}


def _write(writer: str, path: str, rows: int, fragments: int, version: str, appends: int) -> None:
    table = benchmark_table(rows)
    per_file = -(-rows // fragments)
    if writer == "pylance":
        import lance

        lance.write_dataset(table, path, max_rows_per_file=per_file, data_storage_version=version)
        for k in range(appends):
            lance.write_dataset(table.slice(k * 100, 100), path, mode="append", data_storage_version=version)
    else:
        import lance_table as lt

        lt.write_dataset(table, path, max_rows_per_file=per_file, data_storage_version=version)
        for k in range(appends):
            lt.write_dataset(table.slice(k * 100, 100), path, mode="append", data_storage_version=version)


def _ours(uri: str, predicate: str) -> None:
    import lance_table as lt

    lt.dataset(uri).delete(predicate)


def _theirs(uri: str, predicate: str) -> None:
    import lance

    lance.dataset(uri).delete(predicate)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print one line per scenario."""
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--fragments", type=int, default=50)
    p.add_argument("--format", default="2.2")
    p.add_argument("--writer", default="pylance", choices=["pylance", "lance_table"])
    p.add_argument("--appends", type=int, default=0)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--only", default="")
    p.add_argument("--link", action="store_true", help="copies of hard links, not of bytes")
    a = p.parse_args(argv)
    ids = ", ".join(str(i) for i in range(777, a.rows, max(1, a.rows // 8)))
    mid = a.rows // 2
    filled = {"few rows": f"id in ({ids})", "id range": f"id >= {mid} and id < {mid + 100}"}
    preds = dict(PREDICATES, **filled)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        _write(a.writer, src, a.rows, a.fragments, a.format, a.appends)
        print(f"rows={a.rows} fragments={a.fragments} format={a.format} writer={a.writer}", end=" ")
        print(f"appends={a.appends}")
        for name, pred in preds.items():
            if a.only and a.only not in name:
                continue
            times: dict[str, list[tuple[float, float]]] = {"ours": [], "pylance": []}
            for run in range(a.runs):
                order = [("ours", _ours), ("pylance", _theirs)]
                if run % 2:
                    order.reverse()
                for side, fn in order:
                    dst = os.path.join(tmp, side)
                    shutil.rmtree(dst, ignore_errors=True)
                    shutil.copytree(src, dst, copy_function=os.link if a.link else shutil.copy2)
                    w, c = time.perf_counter(), time.process_time()
                    fn(dst, pred)
                    times[side].append((time.perf_counter() - w, time.process_time() - c))
            ow = statistics.median(t[0] for t in times["ours"])
            oc = statistics.median(t[1] for t in times["ours"])
            pw = statistics.median(t[0] for t in times["pylance"])
            pc_ = statistics.median(t[1] for t in times["pylance"])
            print(
                f"  {name:9s} ours {ow * 1e3:7.1f} ms (cpu {oc * 1e3:7.1f})  pylance {pw * 1e3:7.1f} ms "
                f"(cpu {pc_ * 1e3:7.1f})  wall {ow / pw:4.2f}x cpu {oc / pc_:4.2f}x  "
                f"load {os.getloadavg()[0]:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
