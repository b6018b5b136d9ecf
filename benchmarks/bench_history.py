"""History benchmark: a living table of many small appends, lance_table vs pylance side by side.

Each library builds its own dataset (pylance's default format, 2.2) from ``--appends`` appends of
``--rows-per-append`` rows, then every scenario runs alternately on both, round by round, and the
medians and their ratio are reported. Scenarios that change the dataset run on a fresh copy each
round (the copy is not timed).

    python benchmarks/bench_history.py --appends 500
    python benchmarks/bench_history.py --appends 5000 --runs 3
"""

from __future__ import annotations

import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, interleaved_on_datasets

import lance_table as lt
from lance_table.table import version_summaries

FORMAT = "2.2"


def _rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "x": ids * 0.5, "s": pa.array([f"row-{i}" for i in ids.tolist()])})


def _build(side: str, uri: str, appends: int, size: int, history: str = "appends") -> list[float]:
    """Create the dataset with ``appends`` commits; return the times of the last 50.

    ``history="appends"``: each commit appends ``size`` rows. ``"deletes"``: the table is written
    once (``appends * size`` rows in fragments of ``size`` rows), then each commit deletes one row,
    and every 100th overwrites the table with itself (as a reload would).
    """
    return [step() for step in _steps(side, uri, appends, size, history)][-50:]


def _build_both(
    uris: tuple[str, str], appends: int, size: int, history: str
) -> tuple[list[float], list[float]]:
    """:func:`_build` of both sides, commit by commit in turn (the side going first alternating),
    so that both see the same load of a shared machine; the times of each side's last 50."""
    steps = (
        _steps("lance_table", uris[0], appends, size, history),
        _steps("pylance", uris[1], appends, size, history),
    )
    times: tuple[list[float], list[float]] = ([], [])
    for k, pair in enumerate(zip(*steps)):
        for side in (0, 1) if k % 2 == 0 else (1, 0):
            times[side].append(pair[side]())
    return times[0][-50:], times[1][-50:]


def _steps(side: str, uri: str, appends: int, size: int, history: str) -> list[Callable[[], float]]:
    """The commits that build a side's dataset, each a call returning its time."""
    import lance

    mod = lt if side == "lance_table" else lance

    def timed(fn: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        return run

    if history == "deletes":
        total = appends * size

        def first() -> None:
            mod.write_dataset(_rows(0, total), uri, max_rows_per_file=size, data_storage_version=FORMAT)

        def change(i: int) -> None:
            if i % 100 == 0:
                table = mod.dataset(uri).to_table()
                mod.write_dataset(table, uri, mode="overwrite", max_rows_per_file=size)
            else:
                mod.dataset(uri).delete(f"id = {(i * 7919) % total}")

        return [timed(first)] + [timed(lambda i=i: change(i)) for i in range(1, appends)]

    def append(i: int) -> None:
        data = _rows(i * size, size)
        mod.write_dataset(data, uri, mode="append" if i else "create", data_storage_version=FORMAT)

    return [timed(lambda i=i: append(i)) for i in range(appends)]


def main() -> None:
    parser = argument_parser(__doc__, runs=5)
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--rows-per-append", type=int, default=100)
    parser.add_argument("--history", choices=["appends", "deletes"], default="appends")
    args = parser.parse_args()
    import lance

    n, size = args.appends, args.rows_per_append
    what = f"{n} appends of {size} rows" if args.history == "appends" else f"{n} deletes and overwrites"
    report = Report(
        f"History: {what} (format {FORMAT})",
        {"commits": n, "rows_per_append": size, "history": args.history, "runs": args.runs},
    )
    root = Path(tempfile.mkdtemp(prefix="bench-history-"))
    uris = (str(root / "ours"), str(root / "theirs"))
    try:
        print(f"building two datasets of {what} ...", flush=True)
        ours_appends, theirs_appends = _build_both(uris, n, size, args.history)
        report.add(
            Result(
                f"append {size} rows (last 50)"
                if args.history == "appends"
                else "delete/overwrite (last 50)",
                statistics.median(ours_appends),
                statistics.median(theirs_appends),
                50,
            )
        )
        total = n * size
        lo = total // 2

        def both(name: str, mine: Callable[[str], object], theirs: Callable[[str], object], fresh=False):
            report.add(
                Result(name, *interleaved_on_datasets(mine, theirs, uris, args.runs, fresh), args.runs)
            )

        both("open latest", lambda u: lt.dataset(u), lambda u: lance.dataset(u))
        both("open version 1", lambda u: lt.dataset(u, version=1), lambda u: lance.dataset(u, version=1))
        both("versions()", lambda u: lt.dataset(u).versions(), lambda u: lance.dataset(u).versions())

        def cold_versions(u: str) -> object:
            version_summaries.clear()
            return lt.dataset(u).versions()

        both("versions(), first call", cold_versions, lambda u: lance.dataset(u).versions())
        both("count rows", lambda u: lt.dataset(u).count_rows(), lambda u: lance.dataset(u).count_rows())
        both("full scan", lambda u: lt.dataset(u).to_table(), lambda u: lance.dataset(u).to_table())
        flt = f"id >= {lo} AND id < {lo + 100}"
        both(
            "filter 100-row id range",
            lambda u: lt.dataset(u).to_table(filter=flt),
            lambda u: lance.dataset(u).to_table(filter=flt),
        )
        picks = np.random.default_rng(1).choice(total, 100, replace=False).tolist()
        both("take 100 rows", lambda u: lt.dataset(u).take(picks), lambda u: lance.dataset(u).take(picks))
        both(
            "delete 1 row",
            lambda u: lt.dataset(u).delete(f"id = {lo}"),
            lambda u: lance.dataset(u).delete(f"id = {lo}"),
            fresh=True,
        )
        both(
            "compaction",
            lambda u: lt.dataset(u).compact_files(),
            lambda u: lance.dataset(u).optimize.compact_files(),
            fresh=True,
        )
        zero = dt.timedelta(0)
        both(
            "cleanup (all but latest)",
            lambda u: lt.dataset(u).cleanup_old_versions(older_than=zero),
            lambda u: lance.dataset(u).cleanup_old_versions(older_than=zero),
            fresh=True,
        )
        both(
            "restore version 1",
            lambda u: lt.dataset(u, version=1).restore(),
            lambda u: lance.dataset(u, version=1).restore(),
            fresh=True,
        )
        both(
            "tag creation",
            lambda u: lt.dataset(u).tags.create("t", 1),
            lambda u: lance.dataset(u).tags.create("t", 1),
            fresh=True,
        )
        report.publish(args.out, f"history_{args.history}_{n}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
