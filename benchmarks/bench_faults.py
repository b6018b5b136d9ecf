"""Page faults and user/system CPU of projections of a 1M-row nested fragment, against pylance.

The fragment of ``bench_nested`` (``id``, struct ``st`` with an FSST string leaf, list<string>
``tags``) is written by pylance (2.2); every projection is run on both libraries, interleaved (who
goes first alternates) in a process that only reads, and the medians per call of minor page
faults, user and system CPU time (every thread, from ``getrusage``) and wall time are printed,
with the CPU ratio (ours / pylance) and the 1-minute load average.
The results of both libraries are compared in full first.

    python benchmarks/bench_faults.py [--runs N] [--rows N]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import lance
from bench_nested import nested_table

import lance_table


def _one(fn: Callable[[], object]) -> tuple[float, float, float, float]:
    """Minor faults, user and system CPU seconds and wall seconds of one call."""
    gc.collect()
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    fn()
    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    return r1.ru_minflt - r0.ru_minflt, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, t1 - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--write", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write:
        lance.write_dataset(nested_table(args.rows), args.write, data_storage_version="2.2")
        return 0
    work = tempfile.mkdtemp(prefix="lance_table_bench_faults_")
    try:
        uri = os.path.join(work, "pylance-2.2")
        # written by a child process: how many pages a read faults in depends on what the process
        # allocated and freed before (a large write leaves the allocator's heap grown)
        subprocess.run([sys.executable, __file__, "--write", uri, "--rows", str(args.rows)], check=True)
        ours, theirs = lance_table.dataset(uri), lance.dataset(uri)
        print(f"{'scenario':8} {'side':7} {'faults':>7} {'user':>8} {'sys':>7} {'cpu':>8} {'wall':>8}")
        for cols in (["st"], ["tags"], None):
            mine = lambda c=cols: ours.to_table(columns=c)  # noqa: E731
            other = lambda c=cols: theirs.to_table(columns=c)  # noqa: E731
            assert mine().equals(other())
            got: tuple[list[tuple[float, ...]], list[tuple[float, ...]]] = ([], [])
            for round_ in range(args.runs):
                for side in (0, 1) if round_ % 2 == 0 else (1, 0):
                    got[side].append(_one((mine, other)[side]))
            cpu = []
            for side, name in ((0, "ours"), (1, "pylance")):
                runs = got[side]
                flt, usr, sy, wall = (statistics.median(r[k] for r in runs) for k in range(4))
                cpu.append(statistics.median(r[1] + r[2] for r in runs))
                label = "+".join(cols or ["full"])
                print(
                    f"{label:8} {name:7} {flt:7.0f} {usr * 1e3:6.1f}ms {sy * 1e3:5.1f}ms "
                    f"{cpu[-1] * 1e3:6.1f}ms {wall * 1e3:6.1f}ms"
                )
            print(f"{'':8} cpu ratio {cpu[0] / cpu[1]:.2f}  load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
