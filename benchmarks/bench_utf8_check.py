"""What the UTF-8 check of string reads costs: lance_table reading the same datasets with the check
and without it (the check replaced by a no-op in this process), alternately, round by round.

Datasets of ``--rows`` rows of the benchmark schema (``text``: 20 ASCII letters; ``cat``: 100
categories), format 2.2: one written by lance_table, one by pylance (FSST strings, dictionaries),
and one by lance_table whose ``text`` is 10 two-byte characters (``é``): strings that are not
ASCII pay Arrow's full UTF-8 validation. Scenarios: the ``text`` projection, the ``cat``
projection, the full scan. Medians of wall and process CPU time (every thread), their ratios
checked / unchecked, the load average, and the CPU time of checking the output's strings alone
(the check as a whole would cost without the shortcut of dictionary pages: the least of 5).

    python benchmarks/bench_utf8_check.py --rows 1000000 --runs 9
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from common import benchmark_table

import lance_table as lt
from lance_table.file import utf8

CHECKS = (utf8.check, utf8.problem_of)


def _checked(on: bool) -> None:
    if on:
        utf8.check, utf8.problem_of = CHECKS
    else:
        utf8.check = lambda table, path, types=None: table  # type: ignore[assignment]
        utf8.problem_of = lambda data, t=None: None  # type: ignore[assignment]


def _accented(table: pa.Table) -> pa.Table:
    """``table`` with its ``text`` of 10 random two-byte letters (``é``, ``ü``...) a row."""
    rows = table.num_rows
    letters = np.frombuffer("éèêëàâîïôöûüçñ".encode(), "<u2")
    rng = np.random.default_rng(7)
    data = letters[rng.integers(0, letters.size, rows * 10)]
    offsets = pa.py_buffer((np.arange(rows + 1, dtype=np.int32) * 20).tobytes())
    text = pa.Array.from_buffers(pa.string(), rows, [None, offsets, pa.py_buffer(data.tobytes())])
    return table.set_column(table.schema.get_field_index("text"), "text", text)


def _time(fn: Callable[[], object]) -> tuple[float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    table = benchmark_table(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        uris = {
            "own": os.path.join(tmp, "own"),
            "pylance": os.path.join(tmp, "pylance"),
            "own, é text": os.path.join(tmp, "accented"),
        }
        lt.write_dataset(table, uris["own"], data_storage_version="2.2")
        lance.write_dataset(table, uris["pylance"], data_storage_version="2.2")
        lt.write_dataset(_accented(table), uris["own, é text"], data_storage_version="2.2")
        print(f"rows={args.rows} runs={args.runs}")
        print(
            "| files | scenario | checked ms | unchecked ms | wall ratio | checked CPU ms | "
            "unchecked CPU ms | CPU ratio | output check alone CPU ms | load |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for files, uri in uris.items():
            ds = lt.dataset(uri)
            for name, columns in (
                ("projection (text)", ["text"]),
                ("projection (cat)", ["cat"]),
                ("full scan", None),
            ):
                times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
                for round_ in range(args.runs):
                    for on in (True, False) if round_ % 2 == 0 else (False, True):
                        _checked(on)
                        times[on].append(_time(lambda: ds.to_table(columns=columns)))  # noqa: B023
                _checked(True)
                med = {on: [statistics.median(t[i] for t in times[on]) * 1e3 for i in (0, 1)] for on in times}
                result = ds.to_table(columns=columns)
                alone = min(_time(lambda: [utf8.problem_of(c) for c in result.columns])[1] for _ in range(5))  # noqa: B023
                load = os.getloadavg()[0]
                print(
                    f"| {files} | {name} | {med[True][0]:.1f} | {med[False][0]:.1f} | "
                    f"{med[True][0] / med[False][0]:.3f} | {med[True][1]:.1f} | {med[False][1]:.1f} | "
                    f"{med[True][1] / med[False][1]:.3f} | {alone * 1e3:.2f} | {load:.1f} |"
                )


if __name__ == "__main__":
    main()
