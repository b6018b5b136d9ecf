"""Benchmark on a dataset in pylance's default format (2.2): lance_table vs pylance reading the same files.

The dataset is written by pylance with its defaults (schema of ``common.benchmark_table``: id, x,
cat, a 20-character text column that pylance FSST-compresses, and a 16-float vector); both
libraries then run a full scan, projections of one column, filtered scans and a take of 1000
random rows.

    python benchmarks/bench_v22.py --rows 5000000 --runs 3
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, auto_runs, benchmark_table, median_time

import lance_table as lt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    import lance

    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_v22_"))
    uri = str(work / "ds")
    report = Report("Dataset in format 2.2 (written by pylance)", {"rows": args.rows, "runs": args.runs})
    try:
        lance.write_dataset(benchmark_table(args.rows), uri)  # pylance's default: 2.2
        assert lt.dataset(uri).data_storage_version == "2.2"
        assert lt.dataset(uri).to_table().equals(lance.dataset(uri).to_table())

        def both(name: str, mine: Callable[[], object], other: Callable[[], object], note: str = "") -> None:
            n = auto_runs(mine, other, minimum=args.runs)
            report.add(Result(name, median_time(mine, n), median_time(other, n), n, note))

        both("full scan", lambda: lt.dataset(uri).to_table(), lambda: lance.dataset(uri).to_table())
        both(
            "projection (x)",
            lambda: lt.dataset(uri).to_table(columns=["x"]),
            lambda: lance.dataset(uri).to_table(columns=["x"]),
        )
        both(
            "projection (text, FSST)",
            lambda: lt.dataset(uri).to_table(columns=["text"]),
            lambda: lance.dataset(uri).to_table(columns=["text"]),
        )
        both(
            "filter x < 0.1",
            lambda: lt.dataset(uri).to_table(filter="x < 0.1"),
            lambda: lance.dataset(uri).to_table(filter="x < 0.1"),
        )
        lo = args.rows // 2
        pred = f"id >= {lo} AND id < {lo + 1000}"
        both(
            "filter 1000-row id range",
            lambda: lt.dataset(uri).to_table(filter=pred),
            lambda: lance.dataset(uri).to_table(filter=pred),
        )
        idx = np.sort(np.random.default_rng(3).choice(args.rows, 1000, replace=False))
        assert lt.dataset(uri).take(idx).equals(lance.dataset(uri).take(idx))
        both(
            "take 1000 random rows",
            lambda: lt.dataset(uri).take(idx),
            lambda: lance.dataset(uri).take(idx),
            "lance_table decodes the chunks holding the rows",
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.save(args.out, "v22")
    print()
    print(report.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
