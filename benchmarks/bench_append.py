"""Appends: the fixed cost of a small append, lance_table vs pylance side by side.

Each library keeps its own dataset per format (2.0 and 2.2); every round appends the same rows to
both, alternately (who goes first alternates too), and the medians of the append times and their
ratio are reported, for appends of 100 and of 10k rows of the standard table (id, x, cat, text,
vec16). With ``--fragments N`` each dataset starts with N one-row-batch appends, so the appends
land on a table with a long history.

    python benchmarks/bench_append.py
    python benchmarks/bench_append.py --fragments 500 --runs 30
    python benchmarks/bench_append.py --threads 16  # threads of each of lance_table's pools
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table, interleaved_medians

FORMATS = ("2.0", "2.2")
SIZES = (100, 10_000)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, runs=31)
    parser.add_argument("--fragments", type=int, default=0, help="appends before the timed ones")
    parser.add_argument("--threads", type=int, default=None, help="threads of lance_table's pools")
    args = parser.parse_args(argv)
    import lance

    import lance_table as lt
    from lance_table import _parallel

    if args.threads is not None:  # before any pool exists (pools are sized when first used)
        threads = args.threads
        _parallel.workers = lambda: threads

    params: dict[str, object] = {"runs": args.runs, "fragments": args.fragments}
    if args.threads is not None:
        params["threads"] = args.threads
    report = Report("Appends (each library appends to its own dataset)", params)
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_append_"))
    try:
        for fmt in FORMATS:
            for size in SIZES:
                data = benchmark_table(size)
                ours, theirs = work / f"ours-{fmt}-{size}", work / f"theirs-{fmt}-{size}"
                lt.write_dataset(data, ours, data_storage_version=fmt)
                lance.write_dataset(data, theirs, data_storage_version=fmt)
                for i in range(args.fragments):
                    lt.write_dataset(data.slice(i % size, 1), ours, mode="append")
                    lance.write_dataset(data.slice(i % size, 1), theirs, mode="append")

                def mine(d=data, u=ours) -> object:
                    return lt.write_dataset(d, u, mode="append")

                def other(d=data, u=theirs) -> object:
                    return lance.write_dataset(d, u, mode="append")

                report.add(
                    Result(
                        f"append {size} rows ({fmt})", *interleaved_medians(mine, other, args.runs), args.runs
                    )
                )
                assert lt.dataset(ours).to_table().equals(lance.dataset(ours).to_table())
        stem = "append" if not args.fragments else f"append_{args.fragments}"
        report.publish(args.out, stem)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
