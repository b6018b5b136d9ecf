"""merge_insert benchmark: an upsert of ``--source-rows`` rows (half matching existing ids, half
new) into a ``--rows``-row dataset, lance_table vs pylance side by side.

Times: each round runs both libraries on fresh copies of the same dataset (copied untimed), the
side going first alternating; medians and their ratio are printed. Peak RSS: each side runs once
more in a child process of its own, which reports its peak resident memory and the peak above what
the process held just before the merge (the library imported, the source built), from Linux's
/proc peak RSS reset just before the merge.

    python benchmarks/bench_merge_insert.py --rows 1000000 --source-rows 100000 --runs 3

Imported by ``bench_mutations.py`` (listed in its ``MODULES``), this module adds its scenarios
there: upserts of 100k and of 1M source rows, half matched, into that benchmark's dataset.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa


def dataset_rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": ids * 0.5,
            "s": pa.array([f"row-{i}" for i in ids.tolist()]),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(np.ones(n * 4, np.float32)), 4),
        }
    )


def source_rows(rows: int, n: int) -> pa.Table:
    """``n`` rows: the first half update ids spread over the dataset, the second half are new."""
    matched = np.linspace(0, rows - 1, n // 2).astype(np.int64)
    new = np.arange(rows, rows + n - n // 2, dtype=np.int64)
    table = dataset_rows(0, n)
    return table.set_column(0, "id", pa.array(np.concatenate([matched, new])))


def merge(side: str, uri: str, source: pa.Table) -> dict:
    if side == "lance_table":
        import lance_table as lib
    else:
        import lance as lib  # type: ignore[no-redef]
    builder = lib.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    return builder.execute(source)


def child(side: str, uri: str, rows: int, source_n: int) -> None:
    """Run one merge in this process and print its peak RSS (MiB) as JSON."""
    if side == "lance_table":
        import lance_table  # noqa: F401
    else:
        import lance  # noqa: F401
    source = source_rows(rows, source_n)
    before = _status_mb("VmRSS")
    _reset_peak()
    start = time.perf_counter()
    stats = merge(side, uri, source)
    elapsed = time.perf_counter() - start
    peak = _status_mb("VmHWM")
    print(json.dumps({"side": side, "peak_mb": peak, "above_start_mb": peak - before, "s": elapsed, **stats}))


def _status_mb(key: str) -> float:
    """A memory figure of this process from /proc (ru_maxrss would carry the parent's peak over
    the exec that started this child)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    """Start the peak RSS (VmHWM) over from the current RSS (Linux: clear_refs 5)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


# Sources of the bench_mutations scenarios, by (dataset rows, source rows): built once, untimed
# after the first call.
_SOURCES: dict[tuple[int, int], pa.Table] = {}


def mutations_source(rows: int, n: int) -> pa.Table:
    """``n`` rows of bench_mutations' table, half of them updating ids spread over its ``rows``."""
    key = (rows, n)
    if key not in _SOURCES:
        from common import benchmark_table

        matched = np.linspace(0, rows - 1, n // 2).astype(np.int64)
        new = np.arange(rows, rows + n - n // 2, dtype=np.int64)
        table = benchmark_table(n, seed=7)
        _SOURCES[key] = table.set_column(0, "id", pa.array(np.concatenate([matched, new])))
    return _SOURCES[key]


def _mutation(side: str, n: int) -> Callable[[str], object]:
    def run(uri: str) -> object:
        if side == "lance_table":
            import lance_table as lib
        else:
            import lance as lib  # type: ignore[no-redef]
        ds = lib.dataset(uri)
        source = mutations_source(ds.count_rows(), n)
        return ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)

    return run


def _register() -> None:
    """Add the upsert scenarios to bench_mutations' list (the one of the module running as the
    main script too, which is another module object than the imported one)."""
    import bench_mutations

    targets = [bench_mutations]
    main_module = sys.modules.get("__main__")
    if main_module is not None and hasattr(main_module, "SCENARIOS") and hasattr(main_module, "Scenario"):
        targets.append(main_module)
    for module in targets:
        for n, label in ((100_000, "100k"), (1_000_000, "1M")):
            name = f"merge_insert upsert {label} rows (half matched)"
            if all(s.name != name for s in module.SCENARIOS):
                module.SCENARIOS.append(
                    module.Scenario(name, _mutation("lance_table", n), _mutation("pylance", n))
                )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--source-rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "URI"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.rows, args.source_rows)
        return
    import lance

    work = Path(tempfile.mkdtemp(prefix="bench_merge_insert_"))
    try:
        base = str(work / "base")
        lance.write_dataset(dataset_rows(0, args.rows), base, data_storage_version="2.2")
        source = source_rows(args.rows, args.source_rows)
        sides = ("lance_table", "pylance")
        times: dict[str, list[float]] = {s: [] for s in sides}
        results = {}
        for round_ in range(args.runs):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                uri = str(work / side)
                shutil.rmtree(uri, ignore_errors=True)
                shutil.copytree(base, uri)
                start = time.perf_counter()
                results[side] = merge(side, uri, source)
                times[side].append(time.perf_counter() - start)
        assert results["lance_table"] == results["pylance"], results
        mem = {}
        for side in sides:
            uri = str(work / side)
            shutil.rmtree(uri, ignore_errors=True)
            shutil.copytree(base, uri)
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--rows",
                    str(args.rows),
                    "--source-rows",
                    str(args.source_rows),
                    "--child",
                    side,
                    uri,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            mem[side] = json.loads(out.strip().splitlines()[-1])
        ours, theirs = (statistics.median(times[s]) for s in sides)
        print(
            f"merge_insert upsert of {args.source_rows} rows (half matched) into {args.rows} rows; "
            f"{results['pylance']}"
        )
        print("| side | median s | peak RSS MiB | peak above start MiB |")
        print("|---|---|---|---|")
        for side, t in zip(sides, (ours, theirs)):
            print(f"| {side} | {t:.3f} | {mem[side]['peak_mb']:.0f} | {mem[side]['above_start_mb']:.0f} |")
        print(f"time ratio lance_table/pylance: {ours / theirs:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
else:
    _register()
