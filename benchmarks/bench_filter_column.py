"""Decoding a filter column over many fragments, lance_table vs pylance side by side.

A table of ``--rows`` rows in ``--fragments`` fragments (pylance's 2.2 by default, written by
``--writer``); each scenario reads only the integer ``id`` column's pages: filters that match a
few rows (an id range, one id) and the projection of ``id``. The runs alternate; the medians of
wall and process CPU time (every thread), their ratios, the time per fragment and the load
average are printed.

    python benchmarks/bench_filter_column.py --rows 1000000 --fragments 50 --format 2.2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import benchmark_table, interleaved_result


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print one line per scenario."""
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--fragments", type=int, default=50)
    p.add_argument("--format", default="2.2")
    p.add_argument("--writer", default="pylance", choices=["pylance", "lance_table"])
    p.add_argument("--runs", type=int, default=9)
    a = p.parse_args(argv)
    import lance

    import lance_table as lt

    lo = a.rows // 2
    scenarios = {
        "id range (100 rows)": {"filter": f"id >= {lo} AND id < {lo + 100}"},
        "id = one value": {"filter": f"id = {min(lo + 12345, a.rows - 1)}"},
        "projection of id": {"columns": ["id"]},
    }
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "ds")
        write = lance.write_dataset if a.writer == "pylance" else lt.write_dataset
        per_file = -(-a.rows // a.fragments)
        write(benchmark_table(a.rows), uri, max_rows_per_file=per_file, data_storage_version=a.format)
        print(f"rows={a.rows} fragments={a.fragments} format={a.format} writer={a.writer}")
        for name, kwargs in scenarios.items():
            r = interleaved_result(
                name,
                lambda kw=kwargs: lt.dataset(uri).to_table(**kw),
                lambda kw=kwargs: lance.dataset(uri).to_table(**kw),
                a.runs,
            )
            per = 1e3 / a.fragments
            print(
                f"  {name:22s} ours {r.lance_table_s * 1e3:7.1f} ms (cpu {r.lance_table_cpu_s * 1e3:6.1f}, "
                f"{r.lance_table_cpu_s * per:5.3f}/fragment)  pylance {r.pylance_s * 1e3:7.1f} ms "
                f"(cpu {r.pylance_cpu_s * 1e3:6.1f}, {r.pylance_cpu_s * per:5.3f}/fragment)  "
                f"wall {r.ratio:4.2f}x cpu {r.cpu_ratio:4.2f}x  load {r.load:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
