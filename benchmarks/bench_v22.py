"""Benchmark on a dataset in pylance's default format (2.2): lance_table vs pylance reading the same files.

The dataset is written by pylance with its defaults (schema of ``common.benchmark_table``: id, x,
cat, a 20-character text column that pylance FSST-compresses, and a 16-float vector); both
libraries then run a full scan, projections of one column, filtered scans and a take of 1000
random rows.

    python benchmarks/bench_v22.py --rows 5000000 --runs 3
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, argument_parser, benchmark_table, read_scenarios, side_by_side

import lance_table as lt


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__, rows=5_000_000, runs=3).parse_args(argv)
    import lance

    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_v22_"))
    uri = str(work / "ds")
    report = Report("Dataset in format 2.2 (written by pylance)", {"rows": args.rows, "runs": args.runs})
    try:
        lance.write_dataset(benchmark_table(args.rows), uri)  # pylance's default: 2.2
        assert lt.dataset(uri).data_storage_version == "2.2"
        assert lt.dataset(uri).to_table().equals(lance.dataset(uri).to_table())

        read_scenarios(
            side_by_side(report, args.runs),
            lambda: lt.dataset(uri),
            lambda: lance.dataset(uri),
            args.rows,
            {"projection (x)": "x", "projection (text, FSST)": "text"},
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.publish(args.out, "v22")
    return 0


if __name__ == "__main__":
    sys.exit(main())
