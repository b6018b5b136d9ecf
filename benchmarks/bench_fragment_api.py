"""Fragment API benchmark (distributed writes as Ray and Daft make them), lance_table vs pylance.

Scenarios, each library on its own dataset, timed alternately round by round (medians, ratio):
- ``write_fragments`` of ``--rows`` rows into files of ``--rows-per-file`` rows (not committed);
- ``commit Append`` of ``--fragments`` staged fragments (a fresh copy of the dataset each round,
  copied untimed; lance_table reads every new file's footer to check it, pylance trusts them);
- reading every fragment on its own (``get_fragments()`` then ``to_table()`` of each), and
  ``count_rows(filter)`` per fragment.

    python benchmarks/bench_fragment_api.py --rows 1000000 --fragments 200 --runs 5
"""

from __future__ import annotations

import gc
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table, interleaved_medians

import lance_table as lt


def _commit_rounds(
    template: dict[str, Path], commit: dict[str, Callable[[Path], object]], runs: int
) -> tuple[float, float]:
    """Median times of each side's commit on a fresh copy of its template (copies not timed)."""
    times: dict[str, list[float]] = {"lance_table": [], "pylance": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(runs):
            order = ("lance_table", "pylance") if r % 2 == 0 else ("pylance", "lance_table")
            for side in order:
                uri = Path(tmp) / f"{side}-{r}"
                shutil.copytree(template[side], uri)
                gc.collect()
                start = time.perf_counter()
                commit[side](uri)
                times[side].append(time.perf_counter() - start)
                shutil.rmtree(uri)
    return statistics.median(times["lance_table"]), statistics.median(times["pylance"])


def main() -> None:
    parser = argument_parser(__doc__, rows=1_000_000, runs=5)
    parser.add_argument("--fragments", type=int, default=200)
    parser.add_argument("--rows-per-file", type=int, default=100_000)
    args = parser.parse_args()
    import json

    import lance
    import lance.fragment

    table = benchmark_table(args.rows)
    report = Report("Fragment API", {"rows": args.rows, "fragments": args.fragments})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ours, theirs = root / "ours", root / "theirs"
        lt.write_dataset(table.slice(0, 10), ours)
        lance.write_dataset(table.slice(0, 10), theirs)

        def write(side: str) -> Callable[[], object]:
            target = root / f"w-{side}"
            if side == "lance_table":
                return lambda: lt.fragment.write_fragments(
                    table, str(target), max_rows_per_file=args.rows_per_file
                )
            return lambda: lance.fragment.write_fragments(
                table, str(target), max_rows_per_file=args.rows_per_file
            )

        mine, other = interleaved_medians(write("lance_table"), write("pylance"), args.runs)
        report.add(Result("write_fragments", mine, other, args.runs, f"{args.rows_per_file} rows per file"))

        # staged fragments of small batches (the commit's cost is per fragment)
        small = table.slice(0, args.fragments * 100)
        staged = {
            "lance_table": lt.fragment.write_fragments(small, str(ours), max_rows_per_file=100),
            "pylance": lance.fragment.write_fragments(small, str(theirs), max_rows_per_file=100),
        }
        ours_json = [json.dumps(m.to_json()) for m in staged["lance_table"]]
        theirs_json = [json.dumps(m.to_json()) for m in staged["pylance"]]

        def commit_ours(uri: Path) -> object:
            metas = [lt.fragment.FragmentMetadata.from_json(t) for t in ours_json]
            return lt.LanceDataset.commit(str(uri), lt.LanceOperation.Append(metas), read_version=1)

        def commit_theirs(uri: Path) -> object:
            metas = [lance.fragment.FragmentMetadata.from_json(t) for t in theirs_json]
            return lance.LanceDataset.commit(str(uri), lance.LanceOperation.Append(metas), read_version=1)

        mine, other = _commit_rounds(
            {"lance_table": ours, "pylance": theirs},
            {"lance_table": commit_ours, "pylance": commit_theirs},
            args.runs,
        )
        report.add(Result("commit Append", mine, other, args.runs, f"{args.fragments} fragments of 100 rows"))

        commit_ours(ours)
        commit_theirs(theirs)
        a, b = lt.dataset(ours), lance.dataset(theirs)

        def each(ds: object) -> Callable[[], object]:
            return lambda: [f.to_table() for f in ds.get_fragments()]  # type: ignore[attr-defined]

        mine, other = interleaved_medians(each(a), each(b), args.runs)
        report.add(Result("to_table per fragment", mine, other, args.runs, f"{args.fragments + 1} fragments"))

        def counts(ds: object) -> Callable[[], object]:
            return lambda: [f.count_rows("id % 3 = 0") for f in ds.get_fragments()]  # type: ignore[attr-defined]

        mine, other = interleaved_medians(counts(a), counts(b), args.runs)
        report.add(Result("count_rows(filter) per fragment", mine, other, args.runs, ""))
    print(report.markdown())
    report.save(args.out, "fragment_api")


if __name__ == "__main__":
    main()
