"""Scans after deletes, lance_table vs pylance side by side, and each against its own clean scan.

For each format (``--formats``) and each writer (lance_table, pylance), a dataset of ``--rows``
rows (id int64, x float64, cat: 100 short strings, text: 20-character strings; ``--wide`` adds
the 16-float vector column) is written in one fragment and copied twice; the writer then deletes
``id % 10 = 0`` from one copy (rows deleted here and there) and a contiguous 10% id range from the
other. Both libraries then read each of the three datasets: ``to_table()``, a streaming
``to_batches()`` and ``count_rows()``, alternately (who goes first alternates too), each round
reading every dataset. Reported: medians of wall and process CPU time, ours / pylance, and for
each library the median over the rounds of after-delete / clean in the same round (wall and
CPU), and the median minor page faults of each read (fresh memory the read touches: its
output, and scratch memory an allocator mapped anew).

    python benchmarks/bench_delete_scan.py --rows 1000000 --runs 7
    python benchmarks/bench_delete_scan.py --rows 1000000 --memory
    python benchmarks/bench_delete_scan.py --wide --formats 2.2 --writers lance_table \
        --ops to_table --kinds 0,1 --keep DIR   # one scenario; datasets built once in DIR
"""

from __future__ import annotations

import functools
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import argument_parser, benchmark_table, copy_dataset

KINDS = ("clean", "every 10th deleted", "10% range deleted")
OPS: dict[str, Callable[[Any], object]] = {
    "to_table": lambda ds: ds.to_table(),
    "to_batches": lambda ds: sum(b.num_rows for b in ds.to_batches()),
    "count_rows": lambda ds: ds.count_rows(),
}


def _library(side: str) -> Any:
    if side == "lance_table":
        import lance_table

        return lance_table
    import lance

    return lance


def _make(root: Path, fmt: str, writer: str, rows: int, wide: bool) -> dict[str, str]:
    """The three datasets of one format and writer (clean, scattered delete, range delete); those
    already in ``root`` (``--keep``) are reused."""
    base = root / f"{writer}-{fmt}-{rows}{'-wide' if wide else ''}"
    uris = {kind: str(base) + f"-{k}" for k, kind in enumerate(KINDS)}
    if all(Path(u).is_dir() for u in uris.values()):
        return uris
    for u in uris.values():
        shutil.rmtree(u, ignore_errors=True)
    lib = _library(writer)
    table = benchmark_table(rows)
    if not wide:
        table = table.drop_columns(["vec"])
    lib.write_dataset(table, uris[KINDS[0]], data_storage_version=fmt)
    for kind, predicate in zip(
        KINDS[1:], ("id % 10 = 0", f"id >= {rows // 3} AND id < {rows // 3 + rows // 10}")
    ):
        copy_dataset(uris[KINDS[0]], uris[kind])
        lib.dataset(uris[kind]).delete(predicate)
    return uris


def _timed(fn: Callable[[], object]) -> tuple[float, float, int]:
    gc.collect()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


def _read(op: Callable[[Any], object], opener: Callable[[str], Any], uri: str) -> object:
    return op(opener(uri))


def _interleaved(
    uris: dict[str, str], op: Callable[[Any], object], runs: int
) -> tuple[dict[str, dict[str, tuple[float, float, float]]], dict[str, dict[str, tuple[float, float]]]]:
    """Per dataset (``uris``: kind -> uri) and library: the median (wall, cpu) seconds and page
    faults of ``op`` on a freshly opened dataset; and per dataset after deletes and library, the
    median over the rounds of its (wall, cpu) time over the clean scan's of the same round.

    Each round reads every dataset with both libraries (the order of the libraries and of the
    datasets alternates), so that a scan after deletes and the clean scan it is compared with
    run seconds apart, under the same load: medians of separate series drifted by 10% and more
    on a busy machine."""
    import lance

    import lance_table

    sides = {"lance_table": lance_table.dataset, "pylance": lance.dataset}
    times: dict[str, dict[str, list[tuple[float, float, int]]]] = {
        kind: {s: [] for s in sides} for kind in uris
    }
    order = list(sides)
    kinds = list(uris)
    for kind in kinds:  # warm up: the files in the page cache, the code loaded
        for fn_side in order:
            op(sides[fn_side](uris[kind]))
    for k in range(runs):
        for kind in kinds if k % 2 == 0 else kinds[::-1]:
            for side in order if k % 2 == 0 else order[::-1]:
                times[kind][side].append(_timed(functools.partial(_read, op, sides[side], uris[kind])))
    medians = {
        kind: {
            s: (
                statistics.median(w for w, _, _ in got),
                statistics.median(c for _, c, _ in got),
                statistics.median(f for _, _, f in got),
            )
            for s, got in by_side.items()
        }
        for kind, by_side in times.items()
    }
    clean = times[KINDS[0]]
    ratios = {
        kind: {
            s: (
                statistics.median(w / cw for (w, _, _), (cw, _, _) in zip(got, clean[s])),
                statistics.median(c / cc for (_, c, _), (_, cc, _) in zip(got, clean[s])),
            )
            for s, got in by_side.items()
        }
        for kind, by_side in times.items()
        if kind != KINDS[0]
    }
    return medians, ratios


def _peak_child(side: str, uri: str) -> None:
    """Stream ``uri`` once in this process; print its peak RSS (MiB)."""
    ds = _library(side).dataset(uri)
    rows = sum(b.num_rows for b in ds.to_batches())
    peak = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    print(json.dumps({"rows": rows, "peak_rss_mb": peak}))


def _peak(side: str, uri: str) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, __file__, "--child", side, uri], capture_output=True, text=True, check=True, env=env
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_mb"])


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        _peak_child(sys.argv[2], sys.argv[3])
        return 0
    parser = argument_parser(__doc__, rows=1_000_000, runs=7)
    parser.add_argument("--formats", default="2.0,2.2")
    parser.add_argument("--wide", action="store_true", help="add the 16-float vector column")
    parser.add_argument("--memory", action="store_true", help="peak RSS of a streaming scan, per side")
    parser.add_argument("--writers", default="lance_table,pylance", help="whose files are read")
    parser.add_argument("--ops", default=",".join(OPS), help="the reads timed")
    parser.add_argument(
        "--kinds", default="0,1,2", help="the datasets read: 0 clean, 1 every 10th deleted, 2 range deleted"
    )
    parser.add_argument("--keep", type=Path, help="build the datasets here once, reuse and keep them")
    args = parser.parse_args(argv)
    ops = {name: OPS[name] for name in args.ops.split(",")}
    chosen = {KINDS[int(k)] for k in args.kinds.split(",")} | {KINDS[0]}  # (the ratios need clean)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    root = args.keep or Path(tempfile.mkdtemp(prefix="lance_table_bench_delscan_"))
    lines = [
        f"## Scans after deletes ({args.rows} rows, {args.runs} runs, load {os.getloadavg()[0]:.1f})",
        "",
        "| format | written by | dataset | read | lance_table wall / cpu (ms) | pylance wall / cpu (ms) "
        "| ratio wall / cpu | ours vs clean (wall / cpu) | pylance vs clean (wall / cpu) "
        "| page faults (ours / pylance) |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    peaks = []
    try:
        for fmt in args.formats.split(","):
            for writer in args.writers.split(","):
                uris = _make(root, fmt, writer, args.rows, args.wide)
                chosen_uris = {kind: uri for kind, uri in uris.items() if kind in chosen}
                for name, op in ops.items():
                    medians, ratios = _interleaved(chosen_uris, op, args.runs)
                    for kind, got in medians.items():
                        (ow, oc, of), (pw, pc, pf) = got["lance_table"], got["pylance"]
                        vs = pvs = ""
                        if kind != KINDS[0]:
                            (rw, rc), (qw, qc) = ratios[kind]["lance_table"], ratios[kind]["pylance"]
                            vs, pvs = f"{rw:.2f} / {rc:.2f}", f"{qw:.2f} / {qc:.2f}"
                        line = (
                            f"| {fmt} | {writer} | {kind} | {name} | {ow * 1e3:.1f} / {oc * 1e3:.1f} | "
                            f"{pw * 1e3:.1f} / {pc * 1e3:.1f} | {ow / pw:.2f} / {oc / pc:.2f} "
                            f"| {vs} | {pvs} | {of:.0f} / {pf:.0f} |"
                        )
                        print(line, flush=True)
                        lines.append(line)
                if args.memory:
                    for kind, uri in uris.items():
                        peaks.append(
                            f"| {fmt} | {writer} | {kind} | {_peak('lance_table', uri):.0f} | "
                            f"{_peak('pylance', uri):.0f} |"
                        )
                        print(peaks[-1], flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    if peaks:
        lines += ["", "| format | written by | dataset | lance_table peak RSS (MiB) | pylance (MiB) |"]
        lines += ["|---|---|---|---:|---:|", *peaks]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "delete_scan.md").write_text(text)
    print()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
