"""What a scan did, for ``LanceScanner.analyze_plan``: the fragments and row ranges it read, the
rows it read before its filter, and (from the storage layer) its requests, IOPS and bytes.

Collected only while :func:`collecting` is active in the scan's context (pool tasks run in the
context that submitted them); otherwise noting a range costs one context variable lookup.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

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


__all__ = ["ScanMetrics", "collecting", "lance_read_line", "note_range"]
