"""Fragments benchmark: reads over many small fragments, lance_table vs pylance side by side.

Each library writes its own dataset of ``--fragments`` fragments of ``--rows`` rows (one commit,
``max_rows_per_file``), in each format of ``--formats``; then each scenario runs alternately on
both, round by round, and the medians and their ratio are reported, with the cost per fragment.
Scenarios that change the dataset (delete, compaction) run on a fresh copy each round (the copy
is not timed). "scan after deleting 10%" reads a copy where every tenth row is deleted.

    python benchmarks/bench_fragments.py --fragments 500 5000
    python benchmarks/bench_fragments.py --fragments 500 --formats 2.2 2.0 legacy \
        --writers lance_table pylance
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, interleaved_on_datasets

import lance_table as lt


def _table(rows: int) -> pa.Table:
    ids = np.arange(rows, dtype=np.int64)
    return pa.table({"id": ids, "x": ids * 0.5, "s": pa.array([f"row-{i}" for i in ids.tolist()])})


def _write(writer: str, uri: str, data: pa.Table, rows: int, fmt: str) -> None:
    """``data`` as a dataset of fragments of ``rows`` rows, written by ``writer``."""
    if writer == "lance_table":
        lt.write_dataset(data, uri, max_rows_per_file=rows, data_storage_version=fmt)
    else:
        import lance

        lance.write_dataset(data, uri, max_rows_per_file=rows, data_storage_version=fmt)


def run(report: Report, root: Path, fragments: int, rows: int, fmt: str, writer: str, runs: int) -> None:
    """Every scenario on one dataset written by ``writer`` (a copy of it is read by each side)."""
    import lance

    total = fragments * rows
    base = str(root / f"{writer}-{fmt}-{fragments}")
    _write(writer, base, _table(total), rows, fmt)
    uris = (base, base)  # both libraries read the same files
    deleted = f"{base}-deleted"
    shutil.copytree(base, deleted)
    lance.dataset(deleted).delete("id % 10 = 0")
    lo = total // 2
    flt = f"id >= {lo} AND id < {lo + 100}"
    picks = np.sort(np.random.default_rng(1).choice(total, 100, replace=False))
    tag = f"[{fmt} by {writer}, {fragments} frags]"
    # The results must agree before anything is timed.
    assert lt.dataset(base).to_table().equals(lance.dataset(base).to_table())
    assert lt.dataset(deleted).to_table().equals(lance.dataset(deleted).to_table())
    assert lt.dataset(base).take(picks).equals(lance.dataset(base).take(picks))
    assert lt.dataset(base).to_table(filter=flt).equals(lance.dataset(base).to_table(filter=flt))

    def both(
        name: str, mine: Callable[[str], object], theirs: Callable[[str], object], fresh: bool = False
    ) -> None:
        ours, their = interleaved_on_datasets(mine, theirs, uris, runs, fresh)
        note = f"{ours / fragments * 1e3:.3f} vs {their / fragments * 1e3:.3f} ms/fragment"
        report.add(Result(f"{name} {tag}", ours, their, runs, note))

    both("full scan", lambda u: lt.dataset(u).to_table(), lambda u: lance.dataset(u).to_table())
    both(
        "projection id",
        lambda u: lt.dataset(u).to_table(columns=["id"]),
        lambda u: lance.dataset(u).to_table(columns=["id"]),
    )
    both(
        "filter 100-row id range",
        lambda u: lt.dataset(u).to_table(filter=flt),
        lambda u: lance.dataset(u).to_table(filter=flt),
    )
    both(
        "count with filter",
        lambda u: lt.dataset(u).count_rows(flt),
        lambda u: lance.dataset(u).count_rows(flt),
    )
    both("take 100 rows", lambda u: lt.dataset(u).take(picks), lambda u: lance.dataset(u).take(picks))
    both(
        "scan after deleting 10%",
        lambda u: lt.dataset(f"{u}-deleted").to_table(),
        lambda u: lance.dataset(f"{u}-deleted").to_table(),
    )
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


def main() -> None:
    parser = argument_parser(__doc__, rows=100, runs=5)
    parser.add_argument("--fragments", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--formats", nargs="+", default=["2.2"])
    parser.add_argument("--writers", nargs="+", default=["lance_table"])
    args = parser.parse_args()
    report = Report(
        f"Fragments: reads over many fragments of {args.rows} rows",
        {"fragments": args.fragments, "rows": args.rows, "runs": args.runs, "formats": args.formats},
    )
    root = Path(tempfile.mkdtemp(prefix="bench-fragments-"))
    try:
        for fragments in args.fragments:
            for fmt in args.formats:
                for writer in args.writers:
                    run(report, root, fragments, args.rows, fmt, writer, args.runs)
        report.publish(args.out, "fragments")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
