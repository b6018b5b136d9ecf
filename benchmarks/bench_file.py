"""File codec benchmark: lance_table vs pylance (format 2.0) on the same data, in one run.

Scenarios: write one file, full read, projection read of ``x``, take of 1000 random rows.
Each is timed ``--runs`` times; medians and the ratio lance_table / pylance are reported
(below 1.0 means lance_table is faster).

    python benchmarks/bench_file.py --rows 5000000 --runs 5 --out benchmarks/results
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table, interleaved_medians

from lance_table.file.reader import LanceFileReader
from lance_table.file.writer import LanceFileWriter

BATCH_ROWS = 128 * 1024
PYLANCE_BATCH = 64 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=5_000_000, runs=5)
    parser.add_argument("--take", type=int, default=1000)
    args = parser.parse_args(argv)

    import lance.file as pylance_file

    table = benchmark_table(args.rows)
    batches = table.to_batches(max_chunksize=BATCH_ROWS)
    idx = np.sort(np.random.default_rng(7).choice(args.rows, args.take, replace=False))
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_"))
    ours, theirs = work / "ours.lance", work / "theirs.lance"
    report = Report("File codec (format 2.0)", {"rows": args.rows, "runs": args.runs, "take": args.take})
    print(f"{args.rows} rows, {table.nbytes / 2**20:.0f} MiB in memory; files in {work}")

    def write_ours() -> None:
        with LanceFileWriter(ours, table.schema) as w:
            for b in batches:
                w.write(b)

    def write_theirs() -> None:
        with pylance_file.LanceFileWriter(str(theirs), table.schema, version="2.0") as w:
            for b in batches:
                w.write_batch(b)

    try:
        report.add(Result("write", *interleaved_medians(write_ours, write_theirs, args.runs), args.runs))
        # Each side reads the file it wrote; the contents are checked to be identical first.
        full_ours = LanceFileReader(ours).read_all()
        full_theirs = pylance_file.LanceFileReader(str(theirs)).read_all(batch_size=PYLANCE_BATCH).to_table()
        if not full_ours.equals(table) or not full_theirs.equals(table):
            raise SystemExit("benchmark data did not round-trip")

        report.add(
            Result(
                "full read",
                *interleaved_medians(
                    lambda: LanceFileReader(ours).read_all(),
                    lambda: (
                        pylance_file.LanceFileReader(str(theirs))
                        .read_all(batch_size=PYLANCE_BATCH)
                        .to_table()
                    ),
                    args.runs,
                ),
                args.runs,
                f"pylance batch_size={PYLANCE_BATCH}",
            )
        )
        report.add(
            Result(
                "projection read (x)",
                *interleaved_medians(
                    lambda: LanceFileReader(ours).read_all(columns=["x"]),
                    lambda: (
                        pylance_file.LanceFileReader(str(theirs), columns=["x"])
                        .read_all(batch_size=PYLANCE_BATCH)
                        .to_table()
                    ),
                    args.runs,
                ),
                args.runs,
            )
        )
        took = LanceFileReader(ours).take(idx)
        if not took.equals(table.take(pa.array(idx))):
            raise SystemExit("take returned wrong rows")
        report.add(
            Result(
                f"take {args.take} random rows",
                *interleaved_medians(
                    lambda: LanceFileReader(ours).take(idx),
                    lambda: pylance_file.LanceFileReader(str(theirs)).take_rows(idx).to_table(),
                    args.runs,
                ),
                args.runs,
                "includes opening the file",
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.publish(args.out, "file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
