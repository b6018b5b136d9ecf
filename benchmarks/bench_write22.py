"""Writing format 2.2: lance_table vs pylance, each writing and then reading its own dataset.

Write time, on-disk size, and the read scenarios (full scan, projections, filters, take) of each
library on the files it wrote itself, on the standard table (id, x, cat, text, vec16).

    python benchmarks/bench_write22.py --rows 5000000 --runs 3
    python benchmarks/bench_write22.py --table nested --rows 2000000

``--table nested`` writes the nested, nullable table (lists of strings, structs, lists of ints,
nulls everywhere) instead; its reads are a full scan, projections, a filter and a take.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import (
    Report,
    Result,
    argument_parser,
    benchmark_table,
    interleaved_medians,
    nested_table,
    read_scenarios,
    side_by_side,
)

import lance_table as lt


def _size(path: Path) -> int:
    """Bytes of the latest version's data files (earlier overwrites stay on disk until cleanup)."""
    ds = lt.dataset(path)
    return sum((path / "data" / f.path).stat().st_size for frag in ds.get_fragments() for f in frag.files)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=5_000_000, runs=3)
    parser.add_argument("--table", choices=("standard", "nested"), default="standard")
    args = parser.parse_args(argv)
    import lance

    nested = args.table == "nested"
    table = nested_table(args.rows) if nested else benchmark_table(args.rows)
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_w22_"))
    ours, theirs = work / "ours", work / "theirs"
    title = "Writing format 2.2 (each library reads its own files)"
    report = Report(title, {"rows": args.rows, "table": args.table})
    try:

        def write_ours() -> object:
            return lt.write_dataset(table, ours, mode="overwrite", data_storage_version="2.2")

        def write_theirs() -> object:
            return lance.write_dataset(table, theirs, mode="overwrite", data_storage_version="2.2")

        n = args.runs
        report.add(Result("write", *interleaved_medians(write_ours, write_theirs, n), n))
        size_ours, size_theirs = _size(ours), _size(theirs)
        # sizes in MB, shown in the time columns (which print seconds as milliseconds)
        report.add(Result("on-disk size (MB)", size_ours / 1e9, size_theirs / 1e9, 1))
        assert lt.dataset(ours).to_table().equals(lance.dataset(ours).to_table())

        if nested:
            _nested_reads(side_by_side(report, args.runs), ours, theirs, args.rows)
        else:
            read_scenarios(
                side_by_side(report, args.runs),
                lambda: lt.dataset(ours),
                lambda: lance.dataset(theirs),
                args.rows,
                {"projection (x)": "x", "projection (text)": "text"},
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.publish(args.out, "write22_nested" if nested else "write22")
    return 0


def _nested_reads(both: object, ours: Path, theirs: Path, rows: int) -> None:
    import lance
    import numpy as np

    idx = np.sort(np.random.default_rng(3).choice(rows, 1000, replace=False))
    assert lt.dataset(ours).take(idx).equals(lance.dataset(theirs).take(idx))
    queries = {
        "full scan": lambda ds: ds.to_table(),
        "projection (tags)": lambda ds: ds.to_table(columns=["tags"]),
        "projection (point)": lambda ds: ds.to_table(columns=["point"]),
        "filter point.y > 900": lambda ds: ds.to_table(filter="point.y > 900"),
        "take 1000 random rows": lambda ds: ds.take(idx),
    }
    for label, query in queries.items():
        both(  # type: ignore[operator]
            label, lambda q=query: q(lt.dataset(ours)), lambda q=query: q(lance.dataset(theirs))
        )


if __name__ == "__main__":
    sys.exit(main())
