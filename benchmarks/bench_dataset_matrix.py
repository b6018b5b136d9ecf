"""Every dataset scenario, lance_table vs pylance, in formats 2.0 and 2.2, on files each library
wrote itself and on files pylance wrote (both libraries then work on copies of pylance's files).

Scenarios: write, full scan, projections (x, text, cat, and id, x, vec: every column but the
strings), filters (``x < 0.1``, a 1000-row id range),
take of 1000 random rows, append of 10k and of 100 rows, open latest, open version 1, delete 10%,
count after delete, full scan after delete, compaction. Each scenario runs alternately on both
sides (who goes first alternates); medians of wall time and process CPU time (every thread) of
each side, their ratios lance_table / pylance and the load average are reported. The peak RSS of
the benchmark process is printed after each phase.

    python benchmarks/bench_dataset_matrix.py                      # 100k rows, both formats
    python benchmarks/bench_dataset_matrix.py --rows 5000000 --runs 3 --max-runs 5   # issue 28's run
    python benchmarks/bench_dataset_matrix.py --rows 5000000 --runs 3 --formats 2.2 --files pylance
    python benchmarks/bench_dataset_matrix.py --rows 1000000 --formats 2.0 --only "filter x,take" --runs 15

``--only`` times just the scenarios whose names start with one of its comma-separated prefixes (to
confirm one alone on a busy machine); the dataset is still written, untimed, when "write" is left out.

``--fragment-rows`` has both writers write files of at most that many rows (a living table's small
fragments: 1M rows in 20k-row fragments are 50 files, each with its own pages and, in pylance's 2.2
files, its own FSST symbol table); the report's title and file name say so.

    python benchmarks/bench_dataset_matrix.py --rows 1000000 --formats 2.2 --fragment-rows 20000

At 5M rows the process peaks at about 3.8 GB (the table in memory and both libraries' results).
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, argument_parser, auto_runs, benchmark_table, copy_dataset, interleaved_result

import lance_table as lt


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _case(args: Any, fmt: str, files: str, table: Any, small: dict[int, Any], work: Path) -> None:
    """Every scenario of one format on one kind of files, into one report."""
    import lance

    runs = args.runs
    per_file = {"max_rows_per_file": args.fragment_rows} if args.fragment_rows else {}
    report = Report(
        f"Datasets at {args.rows:,} rows, format {fmt}, "
        + ("each library's own files" if files == "own" else "files pylance wrote")
        + (f", {args.fragment_rows:,}-row fragments" if args.fragment_rows else ""),
        {"rows": args.rows, "runs": runs, "format": fmt, "files": files, **per_file},
    )
    ours, theirs = str(work / "ours"), str(work / "theirs")
    pristine = str(work / "pylance-pristine")

    def write_setup(side: int) -> None:
        shutil.rmtree(ours if side == 0 else theirs, ignore_errors=True)

    def wanted(name: str) -> bool:
        return not args.only or any(name.startswith(p.strip()) for p in args.only.split(","))

    if files == "own":
        result = interleaved_result(
            "write",
            lambda: lt.write_dataset(table, ours, data_storage_version=fmt, **per_file),
            lambda: lance.write_dataset(table, theirs, data_storage_version=fmt, **per_file),
            runs if wanted("write") else 1,
            setup=write_setup,
        )
        if wanted("write"):
            report.add(result)
    else:
        shutil.rmtree(pristine, ignore_errors=True)
        lance.write_dataset(table, pristine, data_storage_version=fmt, **per_file)
        for uri in (ours, theirs):
            shutil.rmtree(uri, ignore_errors=True)
            copy_dataset(pristine, uri)
    print(f"  [peak RSS {_peak_mb():.0f} MB]", flush=True)
    assert lt.dataset(ours).data_storage_version == fmt
    assert lt.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
    lt.dataset(ours).to_table(filter="id < 0")  # loads the SQL parser, untimed

    def both(
        name: str,
        mine: Callable[[Any], object],
        other: Callable[[Any], object],
        n: int | None = None,
        note: str = "",
    ) -> None:
        def m() -> object:
            return mine(lt.dataset(ours))

        def o() -> object:
            return other(lance.dataset(theirs))

        if not wanted(name):
            return
        if n is None:
            n = auto_runs(m, o, minimum=runs, maximum=args.max_runs, budget_s=2.0)
        report.add(interleaved_result(name, m, o, n, note))

    lo = args.rows // 2
    idx = np.sort(np.random.default_rng(3).choice(args.rows, 1000, replace=False))
    same = lambda ds: ds  # noqa: E731
    both("full scan", lambda ds: ds.to_table(), lambda ds: ds.to_table())
    for cols in (["x"], ["text"], ["cat"], ["id", "x", "vec"]):
        both(
            f"projection ({', '.join(cols)})",
            lambda ds, c=cols: ds.to_table(columns=c),
            lambda ds, c=cols: ds.to_table(columns=c),
        )
    flt = f"id >= {lo} AND id < {lo + 1000}"
    both(
        "filter x < 0.1",
        lambda ds: ds.to_table(filter="x < 0.1"),
        lambda ds: ds.to_table(filter="x < 0.1"),
    )
    both(
        "filter 1000-row id range",
        lambda ds: ds.to_table(filter=flt),
        lambda ds: ds.to_table(filter=flt),
    )
    both(
        "take 1000 random rows",
        lambda ds: ds.take(idx),
        lambda ds: ds.take(idx),
        note="with open",
    )
    print(f"  [peak RSS {_peak_mb():.0f} MB]", flush=True)
    for n_rows, tbl in small.items():
        if wanted(f"append {n_rows:,} rows"):
            report.add(
                interleaved_result(
                    f"append {n_rows:,} rows",
                    lambda t=tbl: lt.write_dataset(t, ours, mode="append"),
                    lambda t=tbl: lance.write_dataset(t, theirs, mode="append"),
                    max(runs, 5),
                )
            )
    both("open latest", same, same, n=max(runs, 21))
    if wanted("open version 1"):
        report.add(
            interleaved_result(
                "open version 1",
                lambda: lt.dataset(ours, version=1),
                lambda: lance.dataset(theirs, version=1),
                max(runs, 21),
            )
        )
    counter = [0, 0]

    def delete(side: int, ds: Any) -> object:
        k = counter[side]
        counter[side] += 1
        return ds.delete(f"id % 10 = {k}")

    both(
        "delete 10%",
        lambda ds: delete(0, ds),
        lambda ds: delete(1, ds),
        n=runs,
        note="run k deletes id % 10 = k",
    )
    both(
        "count after delete",
        lambda ds: ds.count_rows(),
        lambda ds: ds.count_rows(),
        n=max(runs, 21),
    )
    assert lt.dataset(ours).count_rows() == lance.dataset(theirs).count_rows()
    both(
        "full scan after delete",
        lambda ds: ds.to_table(),
        lambda ds: ds.to_table(),
        note="after the deletes above (one in ten rows per run)",
    )
    both(
        "compaction",
        lambda ds: ds.compact_files(),
        lambda ds: ds.optimize.compact_files(),
        n=1,
        note="one run: rewrites every fragment",
    )
    assert lt.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
    print(f"  [peak RSS {_peak_mb():.0f} MB]", flush=True)
    report.params["peak_rss_mb"] = round(_peak_mb())
    tail = f"_frag{args.fragment_rows}" if args.fragment_rows else ""
    report.publish(args.out, f"dataset_matrix_{fmt}_{files}_{args.rows}{tail}")
    for uri in (ours, theirs, pristine):
        shutil.rmtree(uri, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=100_000, runs=3)
    parser.add_argument("--formats", default="2.0,2.2", help="comma-separated data storage versions")
    parser.add_argument(
        "--files", default="own,pylance", help="own: each side's own files; pylance: pylance's files"
    )
    parser.add_argument("--max-runs", type=int, default=7, help="most runs of a cheap read scenario")
    parser.add_argument("--only", help="comma-separated prefixes of the scenarios to time (default: all)")
    parser.add_argument(
        "--fragment-rows", type=int, default=0, help="rows per file both writers write (0: their default)"
    )
    args = parser.parse_args(argv)

    table = benchmark_table(args.rows)
    small = {n: benchmark_table(n, seed=9) for n in (10_000, 100)}
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_matrix_"))

    try:
        for fmt in args.formats.split(","):
            for files in args.files.split(","):
                _case(args, fmt, files, table, small, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
