"""Dataset benchmark: lance_table vs pylance (data_storage_version="2.0") on the same data, in one run.

Scenarios: write, full scan, projection, filtered scans (``x < 0.1`` and a 1000-row id range),
take of 1000 random rows, 20 appends of 10k rows, open latest, open version 1, delete 10%,
count after delete, compaction. Medians of ``--runs`` runs; ratio = lance_table / pylance.

    python benchmarks/bench_dataset.py --rows 5000000 --runs 3
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, auto_runs, benchmark_table, median_time, read_scenarios

import lance_table as lt


def main(argv: list[str] | None = None) -> int:
    args = argument_parser(__doc__, rows=5_000_000, runs=3).parse_args(argv)

    import lance

    table = benchmark_table(args.rows)
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_ds_"))
    report = Report("Datasets (format 2.0)", {"rows": args.rows, "runs": args.runs})
    ours, theirs = str(work / "ours"), str(work / "theirs")
    runs = args.runs

    def both(
        name: str,
        mine: Callable[[], object],
        other: Callable[[], object],
        note: str = "",
        setup_mine: Callable[[], object] | None = None,
        setup_other: Callable[[], object] | None = None,
        repeat: int | None = None,
        mutates: bool = False,
    ) -> None:
        n = repeat or runs
        if not mutates and repeat is None:
            n = auto_runs(mine, other, minimum=runs)
        report.add(
            Result(name, median_time(mine, n, setup_mine), median_time(other, n, setup_other), n, note)
        )

    def fresh(path: str) -> Callable[[], None]:
        return lambda: shutil.rmtree(path, ignore_errors=True)

    try:
        both(
            "write",
            lambda: lt.write_dataset(table, ours, data_storage_version="2.0"),
            lambda: lance.write_dataset(table, theirs, data_storage_version="2.0"),
            setup_mine=fresh(ours),
            setup_other=fresh(theirs),
            mutates=True,
        )
        o, t = lt.dataset(ours), lance.dataset(theirs)
        assert o.to_table().equals(t.to_table())
        read_scenarios(
            both, lambda: lt.dataset(ours), lambda: lance.dataset(theirs), args.rows, {"projection (x)": "x"}
        )
        small = benchmark_table(10_000, seed=9)

        def appends_ours() -> None:
            for _ in range(20):
                lt.write_dataset(small, ours, mode="append")

        def appends_theirs() -> None:
            for _ in range(20):
                lance.write_dataset(small, theirs, mode="append")

        both("20 appends of 10k rows", appends_ours, appends_theirs, mutates=True)
        both("open latest", lambda: lt.dataset(ours), lambda: lance.dataset(theirs), repeat=max(runs, 21))
        both(
            "open version 1",
            lambda: lt.dataset(ours, version=1),
            lambda: lance.dataset(theirs, version=1),
            repeat=max(runs, 21),
        )
        # delete 10%: each run deletes a fresh 10% slice of ids
        counter = {"ours": 0, "theirs": 0}

        def delete(side: str, fn: Callable[[str], object]) -> Callable[[], object]:
            def run() -> object:
                k = counter[side]
                counter[side] += 1
                return fn(f"id % 10 = {k}")

            return run

        both(
            "delete 10%",
            delete("ours", lambda p: lt.dataset(ours).delete(p)),
            delete("theirs", lambda p: lance.dataset(theirs).delete(p)),
            "run k deletes id % 10 = k",
            mutates=True,
        )
        both(
            "count after delete",
            lambda: lt.dataset(ours).count_rows(),
            lambda: lance.dataset(theirs).count_rows(),
            repeat=max(runs, 21),
        )
        assert lt.dataset(ours).count_rows() == lance.dataset(theirs).count_rows()
        assert lt.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
        report.add(
            Result(
                "compaction",
                median_time(lambda: lt.dataset(ours).compact_files(), 1),
                median_time(lambda: lance.dataset(theirs).optimize.compact_files(), 1),
                1,
                "one run: rewrites every fragment (deletions above 10%)",
            )
        )
        assert lt.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.publish(args.out, "dataset")
    return 0


if __name__ == "__main__":
    sys.exit(main())
