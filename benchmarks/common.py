"""Shared pieces of the benchmark scripts: data generation, timing and reporting."""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa


def benchmark_table(rows: int, seed: int = 42) -> pa.Table:
    """The benchmark schema: id int64, x float64, cat string (100 values), text string (20 chars),
    vec fixed_size_list<float32, 16>."""
    rng = np.random.default_rng(seed)
    categories = np.array([f"category-{i:03d}" for i in range(100)], dtype=object)
    cat = pa.array(categories[rng.integers(0, 100, rows)], pa.string())
    width = 20
    letters = rng.integers(ord("a"), ord("z") + 1, rows * width, dtype=np.uint8)
    offsets = pa.py_buffer((np.arange(rows + 1, dtype=np.int32) * width).tobytes())
    text = pa.Array.from_buffers(pa.string(), rows, [None, offsets, pa.py_buffer(letters.tobytes())])
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 16, dtype=np.float32)), 16)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "x": pa.array(rng.random(rows)),
            "cat": cat,
            "text": text,
            "vec": vec,
        }
    )


def copy_dataset(src: str | Path, dst: str | Path) -> None:
    """Copy the dataset directory ``src`` to ``dst`` by plain reads and writes of large blocks.

    ``shutil.copytree`` copies each file with ``sendfile``, which leaves the copy in the page cache
    as 4 KiB pages, where a file written by a library (or read back from disk) is cached in large
    folios: a scan through a memory map of such a copy faulted 16 times as often (980 against
    40 faults for a 61 MB column), a cost of the copy, not of the read. Copied this way, every
    dataset a benchmark compares is cached as a freshly written one is."""

    def copy(a: str, b: str) -> None:
        with open(a, "rb") as fa, open(b, "wb") as fb:
            while block := fa.read(8 << 20):
                fb.write(block)
        shutil.copystat(a, b)

    shutil.copytree(src, dst, copy_function=copy)


def nested_table(rows: int, seed: int = 7) -> pa.Table:
    """A nested, nullable table: id int64, score float64 (10% null), tags list<string> (null and
    empty lists, null items), point struct<x: float32, y: int32 (5% null)> (3% null rows), ints
    list<int32> (0-8 items), label string (20% null, 1000 values)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    score = pa.array(rng.random(rows), mask=rng.random(rows) < 0.1)
    words = np.array([f"tag-{i}" for i in range(500)], dtype=object)
    counts = rng.integers(0, 5, rows)
    tag_offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(counts, out=tag_offsets[1:])
    items = pa.array(
        words[rng.integers(0, 500, int(tag_offsets[-1]))],
        pa.string(),
        mask=rng.random(int(tag_offsets[-1])) < 0.02,
    )
    tags = pa.ListArray.from_arrays(pa.array(tag_offsets), items, mask=pa.array(rng.random(rows) < 0.05))
    x = pa.array(rng.random(rows, dtype=np.float32))
    y = pa.array(rng.integers(-1000, 1000, rows, dtype=np.int32), mask=rng.random(rows) < 0.05)
    point = pa.StructArray.from_arrays([x, y], names=["x", "y"], mask=pa.array(rng.random(rows) < 0.03))
    n_ints = rng.integers(0, 9, rows)
    int_offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(n_ints, out=int_offsets[1:])
    ints = pa.ListArray.from_arrays(
        pa.array(int_offsets), pa.array(rng.integers(0, 1 << 20, int(int_offsets[-1]), dtype=np.int32))
    )
    labels = np.array([f"label-{i:04d}" for i in range(1000)], dtype=object)
    label = pa.array(labels[rng.integers(0, 1000, rows)], pa.string(), mask=rng.random(rows) < 0.2)
    return pa.table({"id": ids, "score": score, "tags": tags, "point": point, "ints": ints, "label": label})


@dataclass
class Result:
    scenario: str
    lance_table_s: float
    pylance_s: float
    runs: int
    note: str = ""
    lance_table_cpu_s: float | None = None
    pylance_cpu_s: float | None = None
    load: float | None = None

    @property
    def ratio(self) -> float:
        return self.lance_table_s / self.pylance_s if self.pylance_s else float("nan")

    @property
    def cpu_ratio(self) -> float:
        """lance_table's median process CPU time over pylance's (NaN when not measured)."""
        if self.lance_table_cpu_s is None or not self.pylance_cpu_s:
            return float("nan")
        return self.lance_table_cpu_s / self.pylance_cpu_s


@dataclass
class Report:
    title: str
    params: dict[str, object]
    results: list[Result] = field(default_factory=list)

    def add(self, result: Result) -> None:
        self.results.append(result)
        print(
            f"  {result.scenario:<32} lance_table {result.lance_table_s * 1000:9.1f} ms   "
            f"pylance {result.pylance_s * 1000:9.1f} ms   ratio {result.ratio:5.2f}"
            + (
                f"   cpu ratio {result.cpu_ratio:5.2f}   load {result.load:.1f}"
                if result.lance_table_cpu_s is not None and result.load is not None
                else ""
            ),
            flush=True,
        )

    def markdown(self) -> str:
        if any(r.lance_table_cpu_s is not None for r in self.results):
            return self._markdown_cpu()
        lines = [
            f"## {self.title}",
            "",
            ", ".join(f"{k}={v}" for k, v in self.params.items()),
            "",
            "| scenario | lance_table (ms) | pylance (ms) | ratio lance_table/pylance | note |",
            "|---|---:|---:|---:|---|",
        ]
        for r in self.results:
            lines.append(
                f"| {r.scenario} | {r.lance_table_s * 1000:.1f} | {r.pylance_s * 1000:.1f} | "
                f"{r.ratio:.2f} | {r.note} |"
            )
        return "\n".join(lines) + "\n"

    def _markdown_cpu(self) -> str:
        lines = [
            f"## {self.title}",
            "",
            ", ".join(f"{k}={v}" for k, v in self.params.items()),
            "",
            "| scenario | lance_table (ms) | pylance (ms) | wall ratio | lance_table CPU (ms) "
            "| pylance CPU (ms) | CPU ratio | load | note |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in self.results:
            cpu = (
                f"{r.lance_table_cpu_s * 1000:.1f} | {(r.pylance_cpu_s or 0) * 1000:.1f} | {r.cpu_ratio:.2f}"
                if r.lance_table_cpu_s is not None
                else " | | "
            )
            load = f"{r.load:.1f}" if r.load is not None else ""
            lines.append(
                f"| {r.scenario} | {r.lance_table_s * 1000:.1f} | {r.pylance_s * 1000:.1f} | "
                f"{r.ratio:.2f} | {cpu} | {load} | {r.note} |"
            )
        return "\n".join(lines) + "\n"

    def publish(self, out_dir: Path, stem: str) -> None:
        """Save the report as ``stem.json`` and ``stem.md`` and print its table."""
        self.save(out_dir, stem)
        print()
        print(self.markdown())

    def save(self, out_dir: Path, stem: str) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        payload = {
            "title": self.title,
            "params": self.params,
            "machine": {"python": platform.python_version(), "platform": platform.platform()},
            "results": [{**asdict(r), "ratio": r.ratio, "cpu_ratio": r.cpu_ratio} for r in self.results],
        }
        (out_dir / f"{stem}.json").write_text(json.dumps(payload, indent=2))
        (out_dir / f"{stem}.md").write_text(self.markdown())


def auto_runs(*fns: Callable[[], object], minimum: int, maximum: int = 21, budget_s: float = 1.0) -> int:
    """How many runs a cheap, read-only scenario gets: enough to fill ``budget_s`` per side (less noise)."""
    start = time.perf_counter()
    for fn in fns:
        fn()
    return max(minimum, min(maximum, int(budget_s / max(time.perf_counter() - start, 1e-3))))


def median_time(fn: Callable[[], object], runs: int, setup: Callable[[], object] | None = None) -> float:
    """Median wall time of ``fn`` over ``runs`` runs (``setup`` runs untimed before each)."""
    times = []
    for _ in range(runs):
        if setup is not None:
            setup()
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(
    mine: Callable[[], object], other: Callable[[], object], runs: int
) -> tuple[float, float]:
    """Median wall times of ``mine`` and ``other`` over ``runs`` rounds each, run alternately (who
    goes first alternates too), so a noisy spell on the machine falls on both sides alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for round_ in range(runs):
        order = ((0, mine), (1, other)) if round_ % 2 == 0 else ((1, other), (0, mine))
        for side, fn in order:
            gc.collect()
            start = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def interleaved_result(
    name: str,
    mine: Callable[[], object],
    other: Callable[[], object],
    runs: int,
    note: str = "",
    setup: Callable[[int], object] | None = None,
) -> Result:
    """``mine`` and ``other`` run alternately for ``runs`` rounds (who goes first alternates); a
    :class:`Result` of their median wall and process CPU times (every thread of this process) and
    the 1-minute load average at the end. ``setup(side)`` (0: mine, 1: other) runs untimed before
    each call."""
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    fns = (mine, other)
    for round_ in range(runs):
        for side in (0, 1) if round_ % 2 == 0 else (1, 0):
            if setup is not None:
                setup(side)
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            fns[side]()
            wall[side].append(time.perf_counter() - t0)
            cpu[side].append(time.process_time() - c0)
    med = statistics.median
    return Result(name, med(wall[0]), med(wall[1]), runs, note, med(cpu[0]), med(cpu[1]), os.getloadavg()[0])


def interleaved_on_datasets(
    mine: Callable[[str], object],
    other: Callable[[str], object],
    uris: tuple[str, str],
    runs: int,
    fresh: bool = False,
) -> tuple[float, float]:
    """:func:`interleaved_medians` of ``mine(uris[0])`` and ``other(uris[1])``; with ``fresh``, each
    call gets a copy of its dataset (copied untimed), for scenarios that change it."""
    times: tuple[list[float], list[float]] = ([], [])
    sides = ((mine, uris[0]), (other, uris[1]))
    for round_ in range(runs):
        for side in (0, 1) if round_ % 2 == 0 else (1, 0):
            fn, uri = sides[side]
            if fresh:
                copy = f"{uri}-copy"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(uri, copy)
                uri = copy
            gc.collect()
            start = time.perf_counter()
            fn(uri)
            times[side].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def argument_parser(
    doc: str | None, rows: int | None = None, runs: int | None = None
) -> argparse.ArgumentParser:
    """The options every benchmark takes: ``--out``, and ``--rows`` / ``--runs`` given defaults."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if rows is not None:
        parser.add_argument("--rows", type=int, default=rows)
    if runs is not None:
        parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return parser


Both = Callable[[str, Callable[[], object], Callable[[], object], str], None]


def side_by_side(report: Report, minimum_runs: int) -> Both:
    """A ``both(name, mine, other, note)`` that times each side (runs chosen by ``auto_runs``) into
    ``report``: wall and process CPU time (see :func:`interleaved_result`)."""

    def both(name: str, mine: Callable[[], object], other: Callable[[], object], note: str = "") -> None:
        n = auto_runs(mine, other, minimum=minimum_runs)
        report.add(interleaved_result(name, mine, other, n, note))

    return both


def read_scenarios(
    both: Both, mine: Callable[[], Any], theirs: Callable[[], Any], rows: int, projections: dict[str, str]
) -> None:
    """The read side of a dataset benchmark: full scan, projections of one column (``label ->
    column``), two filters and a take of 1000 random rows; ``mine`` / ``theirs`` open the dataset."""
    lo = rows // 2
    idx = np.sort(np.random.default_rng(3).choice(rows, 1000, replace=False))
    assert mine().take(idx).equals(theirs().take(idx))
    queries: list[tuple[str, Callable[[Any], object]]] = [("full scan", lambda ds: ds.to_table())]
    queries += [
        (label, lambda ds, c=column: ds.to_table(columns=[c])) for label, column in projections.items()
    ]
    queries += [
        ("filter x < 0.1", lambda ds: ds.to_table(filter="x < 0.1")),
        ("filter 1000-row id range", lambda ds: ds.to_table(filter=f"id >= {lo} AND id < {lo + 1000}")),
        ("take 1000 random rows", lambda ds: ds.take(idx)),
    ]
    for label, query in queries:
        note = "includes opening the dataset" if label.startswith("take") else ""
        both(label, lambda q=query: q(mine()), lambda q=query: q(theirs()), note)
