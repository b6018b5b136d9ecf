"""Changes in place, lance_table vs pylance side by side: ``update`` of 1% of the rows.

Both libraries start from one dataset pylance writes (the standard table, ``--rows`` rows in
fragments of 1M rows, format ``--format``). Every timed call runs on a fresh copy of it (copied
untimed), alternately (who goes first alternates too); the medians and their ratio are reported.
With ``--memory`` each side also runs once in its own subprocess and its peak RSS is reported
beside the dataset's size on disk.

Other scenarios of changes in place (merge_insert, add_columns, ...) add a :class:`Scenario` to
:data:`SCENARIOS` from their own ``bench_*.py`` module, listed in :data:`MODULES`.

    python benchmarks/bench_mutations.py --rows 1000000
    python benchmarks/bench_mutations.py --rows 100000 --runs 5 --memory
"""

from __future__ import annotations

import importlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import Report, Result, argument_parser, benchmark_table, interleaved_on_datasets


@dataclass(frozen=True)
class Scenario:
    """One change, made by each library on its own copy of the dataset (the argument: its URI)."""

    name: str
    lance_table: Callable[[str], object]
    pylance: Callable[[str], object]


def _update_ours(uri: str) -> object:
    import lance_table as lt

    return lt.dataset(uri).update({"x": "x + 1", "cat": "'updated'"}, where="id % 100 = 7")


def _update_theirs(uri: str) -> object:
    import lance

    return lance.dataset(uri).update({"x": "x + 1", "cat": "'updated'"}, where="id % 100 = 7")


SCENARIOS: list[Scenario] = [Scenario("update 1% of rows", _update_ours, _update_theirs)]
# Modules (next to this one) that append their scenarios to SCENARIOS when imported.
MODULES: list[str] = ["bench_merge_insert"]


def _child(side: str, scenario: str, uri: str) -> None:
    """Run one scenario once in this process and print its peak RSS (MiB) and time as JSON."""
    chosen = next(s for s in _scenarios() if s.name == scenario)
    fn = chosen.lance_table if side == "lance_table" else chosen.pylance
    start = time.perf_counter()
    fn(uri)
    elapsed = time.perf_counter() - start
    peak = _high_water_mb()
    print(json.dumps({"peak_rss_mb": peak, "seconds": elapsed}))


def _high_water_mb() -> float:
    """This process's peak resident memory (MiB). ``VmHWM`` where the system has it: unlike
    ``ru_maxrss`` it starts afresh at exec, so the parent's peak does not show through."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _scenarios() -> list[Scenario]:
    for name in MODULES:
        importlib.import_module(name)
    return SCENARIOS


def _peak(side: str, scenario: str, source: Path) -> dict[str, float]:
    copy = source.parent / f"{source.name}-{side}-memory"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    out = subprocess.run(
        [sys.executable, __file__, "--child", side, scenario, str(copy)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    shutil.rmtree(copy, ignore_errors=True)
    return json.loads(out.strip().splitlines()[-1])


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(*argv[1:4])
        return 0
    parser = argument_parser(__doc__, rows=1_000_000, runs=5)
    parser.add_argument("--format", default="2.2", help="data_storage_version of the dataset")
    parser.add_argument("--memory", action="store_true", help="also measure each side's peak RSS")
    args = parser.parse_args(argv)
    import lance

    # lance_table loads its SQL parser (sqlglot) on the first SQL expression, a one-off cost of
    # about half a second (more on a loaded machine): loaded before the timings, as pylance is
    import lance_table.filters.values  # noqa: F401

    report = Report("Changes in place (each library on a fresh copy)", {"rows": args.rows, "runs": args.runs})
    work = Path(tempfile.mkdtemp(prefix="lance_table_bench_mutations_"))
    try:
        source = work / "source"
        lance.write_dataset(benchmark_table(args.rows), source, data_storage_version=args.format)
        size = _size_mb(source)
        copies = (str(work / "ours"), str(work / "theirs"))
        for uri in copies:
            shutil.copytree(source, uri)
        for s in _scenarios():
            mine, other = interleaved_on_datasets(s.lance_table, s.pylance, copies, args.runs, fresh=True)
            note = ""
            if args.memory:
                ours, theirs = _peak("lance_table", s.name, source), _peak("pylance", s.name, source)
                note = (
                    f"peak RSS {ours['peak_rss_mb']:.0f} MiB vs {theirs['peak_rss_mb']:.0f} MiB "
                    f"(dataset {size:.0f} MiB)"
                )
            report.add(Result(f"{s.name} ({args.format})", mine, other, args.runs, note))
        report.publish(args.out, f"mutations_{args.rows}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
