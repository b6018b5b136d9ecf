"""Writing format 2.2: lance_table vs pylance, each writing and then reading its own dataset.

Write time, on-disk size, and the read scenarios (full scan, projections, filters, take) of each
library on the files it wrote itself, on the standard table (id, x, cat, text, vec16).

    python benchmarks/bench_write22.py --rows 5000000 --runs 3
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table, median_time, read_scenarios, side_by_side

import lance_table as lt


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__, rows=5_000_000, runs=3).parse_args(argv)
    import lance

    table = benchmark_table(args.rows)
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_w22_"))
    ours, theirs = work / "ours", work / "theirs"
    report = Report("Writing format 2.2 (each library reads its own files)", {"rows": args.rows})
    try:

        def write_ours() -> object:
            return lt.write_dataset(table, ours, mode="overwrite", data_storage_version="2.2")

        def write_theirs() -> object:
            return lance.write_dataset(table, theirs, mode="overwrite", data_storage_version="2.2")

        n = args.runs
        report.add(Result("write", median_time(write_ours, n), median_time(write_theirs, n), n))
        size_ours, size_theirs = _size(ours), _size(theirs)
        # sizes in MB, shown in the time columns (which print seconds as milliseconds)
        report.add(Result("on-disk size (MB)", size_ours / 1e9, size_theirs / 1e9, 1))
        assert lt.dataset(ours).to_table().equals(lance.dataset(ours).to_table())

        read_scenarios(
            side_by_side(report, args.runs),
            lambda: lt.dataset(ours),
            lambda: lance.dataset(theirs),
            args.rows,
            {"projection (x)": "x", "projection (text)": "text"},
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.publish(args.out, "write22")
    return 0


if __name__ == "__main__":
    sys.exit(main())
