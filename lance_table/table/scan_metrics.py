"""What a scan did, for ``LanceScanner.analyze_plan`` and a scan's ``scan_stats_callback``
(:class:`ScanStatistics`): the fragments and row ranges it read, the rows it read before its
filter, and (from the storage layer) its requests, IOPS and bytes.

Collected only while :func:`collecting` is active in the scan's context (pool tasks run in the
context that submitted them); otherwise noting a range costs one context variable lookup.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

from lance_table.storage.io_stats import IOStats
from lance_table.storage.io_stats import collecting as collecting_io


@dataclass
class ScanMetrics:
    """Counts of one scan (see the module)."""

    fragments: set[int] = field(default_factory=set)
    ranges_scanned: int = 0
    rows_scanned: int = 0
    io: IOStats = field(default_factory=IOStats)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def note(self, fragment_id: int, rows: int) -> None:
        """Count one range of a fragment, of which ``rows`` rows were read."""
        with self._lock:
            self.fragments.add(fragment_id)
            self.ranges_scanned += 1
            self.rows_scanned += rows


_ACTIVE: ContextVar[ScanMetrics | None] = ContextVar("lance_table_scan_metrics", default=None)


def note_range(fragment_id: int, rows: int) -> None:
    """Count a range read by a scan (nothing happens unless metrics are being collected)."""
    metrics = _ACTIVE.get()
    if metrics is not None:
        metrics.note(fragment_id, rows)


@contextlib.contextmanager
def collecting() -> Iterator[ScanMetrics]:
    """The metrics of what runs in this context until the block ends."""
    metrics = ScanMetrics()
    token = _ACTIVE.set(metrics)
    try:
        with collecting_io(metrics.io):
            yield metrics
    finally:
        _ACTIVE.reset(token)


@dataclass(frozen=True)
class ScanStatistics:
    """What a scan read, given to a scan's ``scan_stats_callback`` once the scan has returned its
    last row (pylance's ``ScanStatistics``, with the same attributes).

    Attributes:
        iops: reads of the store (nearby byte ranges merged; see ``lance_table.storage.io_stats``).
        requests: calls of the storage layer.
        bytes_read: bytes those reads returned.
        indices_loaded, parts_loaded, index_comparisons, index_cache_hits, index_cache_misses:
            index counters; always 0 (lance_table scans use no index).
        all_counts: further counts: ``fragments_scanned``, ``ranges_scanned`` and
            ``rows_scanned`` (rows read before the filter), as pylance names them.
        all_times: timings in nanoseconds; pylance's keys name its engine's stages, which
            lance_table does not have, so this is empty.

    Example:
        ```python
        seen = []
        ds.scanner(filter="score > 0.5", scan_stats_callback=seen.append).to_table()
        print(seen[0].bytes_read, seen[0].all_counts["rows_scanned"])
        ```
    """

    iops: int = 0
    requests: int = 0
    bytes_read: int = 0
    indices_loaded: int = 0
    parts_loaded: int = 0
    index_comparisons: int = 0
    index_cache_hits: int = 0
    index_cache_misses: int = 0
    all_counts: Mapping[str, int] = field(default_factory=dict)
    all_times: Mapping[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        numbers = ", ".join(
            f"{name}={getattr(self, name)}"
            for name in (
                "iops",
                "requests",
                "bytes_read",
                "indices_loaded",
                "parts_loaded",
                "index_comparisons",
                "index_cache_hits",
                "index_cache_misses",
            )
        )
        counts = json.dumps(dict(self.all_counts), separators=(", ", ": "))
        times = json.dumps(dict(self.all_times), separators=(", ", ": "))
        return f"ScanStatistics({numbers}, all_counts={counts}, all_times={times})"


def statistics(metrics: ScanMetrics) -> ScanStatistics:
    """The statistics of the scan that collected ``metrics``."""
    io = metrics.io
    counts = {
        "fragments_scanned": len(metrics.fragments),
        "ranges_scanned": metrics.ranges_scanned,
        "rows_scanned": metrics.rows_scanned,
    }
    return ScanStatistics(iops=io.iops, requests=io.requests, bytes_read=io.bytes_read, all_counts=counts)


T = TypeVar("T")


def reported(run: Callable[[], T], callback: Callable[[ScanStatistics], object]) -> T:
    """``run()``, then ``callback`` called with the statistics of the reads it made."""
    with collecting() as metrics:
        result = run()
    callback(statistics(metrics))
    return result


def reported_stream(
    batches: Callable[[], Iterator[T]], callback: Callable[[ScanStatistics], object]
) -> Iterator[T]:
    """The items of ``batches()``, each made while the scan's reads are counted (in a context of
    their own, so that the consumer's reads between items do not count), then ``callback`` called
    with the statistics once the last item is made."""
    context = contextvars.copy_context()
    collector = collecting()
    metrics = context.run(collector.__enter__)
    try:
        items = context.run(batches)
        while True:
            try:
                item = context.run(next, items)
            except StopIteration:
                break
            yield item
    finally:
        context.run(collector.__exit__, None, None, None)
    callback(statistics(metrics))


def lance_read_line(
    uri: str,
    projection: Sequence[str],
    num_fragments: int,
    system: Sequence[str],
    predicate: str | None,
    metrics: ScanMetrics | None = None,
    output_rows: int = 0,
    elapsed: float | None = None,
) -> str:
    """The scan as pylance's plans show it (``LanceRead: uri=..., projection=[...], ...``), and
    with ``metrics`` the counts pylance's ``analyze_plan`` gives it (``elapsed`` in seconds).

    ``projection`` is the columns read, the filter's included; ``system`` the system columns.
    """
    parts = [f"elapsed={_duration(elapsed)}"] if elapsed is not None else []
    parts += [
        f"uri={uri.rstrip('/')}/data",
        f"projection=[{', '.join(projection)}]",
        f"num_fragments={num_fragments}",
        "range_before=None",
        "range_after=None",
        f"row_id={str('_rowid' in system).lower()}",
        f"row_addr={str('_rowaddr' in system).lower()}",
        f"full_filter={predicate or '--'}",
        f"refine_filter={predicate or '--'}",
    ]
    if metrics is not None:
        io = metrics.io
        counts = [
            f"output_rows={output_rows}",
            f"fragments_scanned={len(metrics.fragments)}",
            f"ranges_scanned={metrics.ranges_scanned}",
            f"rows_scanned={metrics.rows_scanned}",
            f"bytes_read={io.bytes_read}",
            f"iops={io.iops}",
            f"requests={io.requests}",
        ]
        parts.append(f"metrics=[{', '.join(counts)}]")
    return f"LanceRead: {', '.join(parts)}"


def _duration(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f}µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f}ms"
    return f"{seconds:.2f}s"


__all__ = [
    "ScanMetrics",
    "ScanStatistics",
    "collecting",
    "lance_read_line",
    "note_range",
    "reported",
    "reported_stream",
    "statistics",
]
