"""The legacy format (0.1): lance_table vs pylance, each writing and then reading its own dataset.

Write time, on-disk size and the read scenarios (full scan, projections, ``x < 0.1``, a 1000-row
id range, take) on the standard table, plus the id-range filter with statistics off on both sides
(``use_stats=False``) to show what the page statistics are worth.

    python benchmarks/bench_legacy.py --rows 5000000 --runs 3
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
    interleaved_result,
    read_scenarios,
    side_by_side,
)

import lance_table as lt


def _size(path: Path) -> int:
    """Bytes of the latest version's data files (earlier overwrites stay on disk until cleanup)."""
    ds = lt.dataset(path)
    return sum(
        (path / "data" / f.path).stat().st_size for frag in ds.get_fragments() for f in frag.data_files()
    )


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__, rows=5_000_000, runs=3).parse_args(argv)
    import lance

    table = benchmark_table(args.rows)
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_legacy_"))
    ours, theirs = work / "ours", work / "theirs"
    report = Report("Legacy format 0.1 (each library reads its own files)", {"rows": args.rows})
    try:

        def write_ours() -> object:
            return lt.write_dataset(table, ours, mode="overwrite", data_storage_version="legacy")

        def write_theirs() -> object:
            return lance.write_dataset(table, theirs, mode="overwrite", data_storage_version="legacy")

        n = args.runs
        report.add(interleaved_result("write", write_ours, write_theirs, n))
        report.add(Result("on-disk size (MB)", _size(ours) / 1e9, _size(theirs) / 1e9, 1))
        assert lt.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
        both = side_by_side(report, args.runs)
        read_scenarios(
            both,
            lambda: lt.dataset(ours),
            lambda: lance.dataset(theirs),
            args.rows,
            {"projection (x)": "x", "projection (text)": "text"},
        )
        lo = args.rows // 2
        query = f"id >= {lo} AND id < {lo + 1000}"
        both(
            "id range, use_stats=False",
            lambda: lt.dataset(ours).to_table(filter=query, use_stats=False),
            lambda: lance.dataset(theirs).to_table(filter=query, use_stats=False),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.publish(args.out, "legacy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
