"""What a fresh process pays: ``import`` and the first operation, lance_table beside pylance.

Every run is a new interpreter (bytecode compiled beforehand, as a wheel's is), one per side in
turn (lance_table, pylance, lance_table, ...). For each scenario it reports the whole process's CPU
time (user + system, interpreter start included) and, inside the process, the CPU of the import and
of the operation after it; ratios are medians of the per-round ratios (lance_table / pylance).

Scenarios, on a dataset of ``--rows`` rows of the benchmark schema written by pylance (10 files):
``import``, ``open`` (open and count rows), ``filter`` (``x < 0.1``), ``delete`` (10% of rows),
``update`` (100 rows), ``merge_insert`` (an upsert of 1,000 rows, half of them new); the mutations
run on a fresh copy each time.

    python benchmarks/bench_import.py --runs 15
    python benchmarks/bench_import.py --runs 9 --only import filter
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

SIDES = ("lance_table", "pylance")
SCENARIOS = ("import", "open", "filter", "delete", "update", "merge_insert")
MUTATIONS = ("delete", "update", "merge_insert")

# The child: import, then one operation; prints the CPU of each part as JSON.
CHILD = """
import json, sys, time
t0 = time.process_time()
import {module} as mod
t1 = time.process_time()
op, uri = sys.argv[1], sys.argv[2]
if op == "open":
    mod.dataset(uri).count_rows()
elif op == "filter":
    assert mod.dataset(uri).to_table(filter="x < 0.1").num_rows > 0
elif op == "delete":
    mod.dataset(uri).delete("id % 10 = 3")
elif op == "update":
    mod.dataset(uri).update({{"x": "x + 1.0"}}, where="id < 100")
elif op == "merge_insert":
    import pyarrow as pa
    ds = mod.dataset(uri)
    n = 1000
    ids = pa.array(list(range(0, n, 2)) + list(range(10**9, 10**9 + n // 2)), pa.int64())
    source = ds.take(list(range(n))).set_column(0, "id", ids)
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
t2 = time.process_time()
print(json.dumps({{"import": t1 - t0, "op": t2 - t1}}))
"""


def _child(side: str, op: str, uri: str) -> dict[str, float]:
    module = "lance_table" if side == "lance_table" else "lance"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(module=module), op, uri],
        check=True,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    inside = json.loads(out.stdout.strip().splitlines()[-1])
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"process": total, **inside}


def _report(op: str, ours: list[dict[str, float]], theirs: list[dict[str, float]]) -> None:
    def med(side: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in side)

    def ratio(key: str) -> float:
        pairs = zip(ours, theirs, strict=True)
        return statistics.median(a[key] / max(b[key], 1e-6) for a, b in pairs)

    print(
        f"{op:<13} process CPU {med(ours, 'process'):.3f} / {med(theirs, 'process'):.3f} s "
        f"ratio {ratio('process'):.2f}; import {med(ours, 'import'):.3f} / "
        f"{med(theirs, 'import'):.3f} s; op {med(ours, 'op'):.3f} / {med(theirs, 'op'):.3f} s "
        f"ratio {ratio('op'):.2f}; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios and print one line each."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=None, help="scenarios to run (default: all)")
    args = parser.parse_args(argv)
    import lance
    from common import benchmark_table

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).parents[1] / "lance_table")])
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_import_"))
    try:
        source = work / "source"
        per_file = max(args.rows // 10, 1)
        lance.write_dataset(benchmark_table(args.rows), str(source), max_rows_per_file=per_file)
        for op in args.only or SCENARIOS:
            runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
            for _ in range(args.runs):
                for side in SIDES:
                    uri = source
                    if op in MUTATIONS:
                        uri = work / "mutated"
                        shutil.rmtree(uri, ignore_errors=True)
                        shutil.copytree(source, uri)
                    runs[side].append(_child(side, op, str(uri)))
            _report(op, runs["lance_table"], runs["pylance"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
