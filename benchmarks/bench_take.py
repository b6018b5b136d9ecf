"""Take of random rows, lance_table vs pylance, formats 2.0 and 2.2, on files each library wrote
itself and on files pylance wrote (both libraries then read copies of pylance's files).

Each take opens the dataset and takes ``--take`` random rows (sorted); the sides run alternately
and medians of wall and process CPU time are reported with their ratios and the load average.

    python benchmarks/bench_take.py                          # 1M rows, 1000 rows taken
    python benchmarks/bench_take.py --rows 300000 --take 200 --formats 2.2
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, argument_parser, benchmark_table, interleaved_result

import lance_table as lt


def _case(args: Any, fmt: str, files: str, table: Any, work: Path) -> Report:
    import lance

    report = Report(
        f"Take of {args.take} rows of {args.rows:,}, format {fmt}, "
        + ("each library's own files" if files == "own" else "files pylance wrote"),
        {"rows": args.rows, "take": args.take, "runs": args.runs, "format": fmt, "files": files},
    )
    ours, theirs = str(work / f"ours-{fmt}-{files}"), str(work / f"theirs-{fmt}-{files}")
    if not (Path(ours).exists() and Path(theirs).exists() and args.keep):
        for uri in (ours, theirs):
            shutil.rmtree(uri, ignore_errors=True)
        lance.write_dataset(table, theirs, data_storage_version=fmt)
        if files == "own":
            lt.write_dataset(table, ours, data_storage_version=fmt)
        else:
            shutil.copytree(theirs, ours)
    rng = np.random.default_rng(3)
    for k in range(2):
        idx = np.sort(rng.choice(args.rows, args.take, replace=False))
        assert lt.dataset(ours).take(idx).equals(lance.dataset(theirs).take(idx))
        report.add(
            interleaved_result(
                f"take {args.take} random rows ({'sorted' if k == 0 else 'second draw'})",
                lambda i=idx: lt.dataset(ours).take(i),
                lambda i=idx: lance.dataset(theirs).take(i),
                args.runs,
                note="with open",
            )
        )
    return report


def main() -> None:
    parser = argument_parser(__doc__, rows=1_000_000, runs=15)
    parser.add_argument("--take", type=int, default=1000, help="rows taken")
    parser.add_argument("--formats", default="2.0,2.2")
    parser.add_argument("--files", default="own,pylance")
    parser.add_argument("--work", type=Path, help="keep the datasets here (reused when present)")
    args = parser.parse_args()
    args.keep = args.work is not None
    table = benchmark_table(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        for fmt in args.formats.split(","):
            for files in args.files.split(","):
                report = _case(args, fmt, files, table, work)
                report.publish(args.out, f"take_{fmt}_{files}_{args.rows}")


if __name__ == "__main__":
    main()
