"""Schema evolution, lance_table vs pylance side by side: ``add_columns`` of one SQL expression,
``alter_columns`` rename, ``drop_columns``, and an ``alter_columns`` cast (int64 to int32).

Both libraries start from copies of one dataset (the standard table, written by pylance in 2.2;
1M rows per fragment); every timed call runs on a fresh copy (copied untimed), alternately. With
``--rss``, each operation also runs once per library in a child process and the peak RSS of that
process (its VmHWM, interpreter and imports included) is reported beside the time.

    python benchmarks/bench_schema.py --rows 1000000
    python benchmarks/bench_schema.py --rows 200000 --runs 5 --rss
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table, interleaved_on_datasets

SCENARIOS = {
    "add_columns {'y': 'x * 2 + id'}": ("add_columns", {"y": "x * 2 + id"}),
    "alter_columns rename": ("alter_columns", {"path": "text", "name": "body"}),
    "alter_columns cast int64 -> int32": ("alter_columns", {"path": "id", "data_type": "int32"}),
    "drop_columns ['text', 'vec']": ("drop_columns", ["text", "vec"]),
}

# VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's peak (Linux keeps it across exec)
_CHILD = """
import json, sys
import pyarrow as pa
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
lib, uri, method, arg = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
if lib == "lance_table":
    import lance_table as mod
else:
    import lance as mod
ds = mod.dataset(uri)
before = hwm()
if method == "alter_columns" and "data_type" in arg:
    arg = dict(arg, data_type=getattr(pa, arg["data_type"])())
getattr(ds, method)(arg)
print(json.dumps([before, hwm()]))
"""


def _call(mod: object, method: str, arg: object):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    if method == "alter_columns" and isinstance(arg, dict) and "data_type" in arg:
        arg = dict(arg, data_type=getattr(pa, arg["data_type"])())

    def run(uri: str) -> object:
        return getattr(mod.dataset(uri), method)(arg)  # type: ignore[attr-defined]

    return run


def _cpu_timed(fn, cpu: list[float]):  # type: ignore[no-untyped-def]
    """``fn``, appending the CPU time of each call (every thread of this process) to ``cpu``."""

    def run(uri: str) -> object:
        start = time.process_time()
        try:
            return fn(uri)
        finally:
            cpu.append(time.process_time() - start)

    return run


def _peak_rss_mb(lib: str, uri: str, method: str, arg: object) -> float:
    copy = f"{uri}-rss"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(uri, copy)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, lib, copy, method, json.dumps(arg)],
        check=True,
        capture_output=True,
        text=True,
    )
    shutil.rmtree(copy, ignore_errors=True)
    _, peak = json.loads(out.stdout.strip().splitlines()[-1])
    return peak / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, rows=1_000_000, runs=5)
    parser.add_argument("--rss", action="store_true", help="also measure each side's peak RSS")
    args = parser.parse_args(argv)
    import lance

    import lance_table as lt

    # lance_table loads its SQL parser (sqlglot) on the first SQL expression, a one-off cost of
    # about half a second (more on a loaded machine): loaded before the timings, as pylance is
    import lance_table.filters.values

    report = Report("Schema evolution (fresh copy per call)", {"rows": args.rows, "runs": args.runs})
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_schema_"))
    try:
        base = work / "base"
        lance.write_dataset(benchmark_table(args.rows), base, data_storage_version="2.2")
        ours, theirs = str(work / "ours"), str(work / "theirs")
        shutil.copytree(base, ours)
        shutil.copytree(base, theirs)
        for name, (method, arg) in SCENARIOS.items():
            cpu: tuple[list[float], list[float]] = ([], [])
            t_ours, t_theirs = interleaved_on_datasets(
                _cpu_timed(_call(lt, method, arg), cpu[0]),
                _cpu_timed(_call(lance, method, arg), cpu[1]),
                (ours, theirs),
                args.runs,
                fresh=True,
            )
            # CPU time beside the wall time: on a shared machine the wall time follows the load
            note = (
                f"CPU {statistics.median(cpu[0]):.3f} s vs {statistics.median(cpu[1]):.3f} s, "
                f"load {os.getloadavg()[0]:.1f}"
            )
            if args.rss:
                mine = _peak_rss_mb("lance_table", ours, method, arg)
                other = _peak_rss_mb("lance", theirs, method, arg)
                note += f"; peak RSS {mine:.0f} MB vs {other:.0f} MB"
            report.add(Result(name, t_ours, t_theirs, args.runs, note))
            # same result on both sides
            a, b = f"{ours}-check", f"{theirs}-check"
            for src, dst, mod in ((ours, a, lt), (theirs, b, lance)):
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(src, dst)
                _call(mod, method, arg)(dst)
            assert lance.dataset(a).to_table().equals(lance.dataset(b).to_table()), name
        report.publish(args.out, "schema")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
