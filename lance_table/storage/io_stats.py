"""Counts of the reads lance_table makes from storage: for the whole process (pylance's
``iops_counter()`` and ``bytes_read_counter()``) and for whoever collects them while an operation
runs (the metrics of ``LanceScanner.analyze_plan``).

A *request* is one call of the storage layer for bytes of one file (a whole-file read, or the
byte ranges the file reader asks for at once); its *IOPS* are the reads it makes of the store once
nearby ranges are merged (one positioned read of a local file, one GET of an object store); its
bytes are the bytes those reads return (gaps merged into a read count too). Every read of the
storage layer counts: data files, manifests, deletion files, transactions, blobs.

Collectors are kept in a context variable: the worker threads of lance_table's pools run each task
in the context of the caller that submitted it, so the reads a scan makes on them count for the
scan's collector, and the reads of other threads do not.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class IOStats:
    """Requests, IOPS and bytes read (see the module's description of each)."""

    requests: int = 0
    iops: int = 0
    bytes_read: int = 0

    def add(self, iops: int, nbytes: int) -> None:
        """Count one request of ``iops`` reads returning ``nbytes`` bytes."""
        self.requests += 1
        self.iops += iops
        self.bytes_read += nbytes


_TOTAL = IOStats()
_LOCK = threading.Lock()
_COLLECTORS: ContextVar[tuple[IOStats, ...]] = ContextVar("lance_table_io_collectors", default=())


def record(iops: int, nbytes: int) -> None:
    """Count one request of the storage layer: ``iops`` reads of the store, ``nbytes`` bytes."""
    collectors = _COLLECTORS.get()
    with _LOCK:
        _TOTAL.add(iops, nbytes)
        for stats in collectors:
            stats.add(iops, nbytes)


@contextlib.contextmanager
def collecting(stats: IOStats) -> Iterator[IOStats]:
    """Count into ``stats`` the reads made in this context (and in the pool tasks it submits)
    until the block ends."""
    token = _COLLECTORS.set((*_COLLECTORS.get(), stats))
    try:
        yield stats
    finally:
        _COLLECTORS.reset(token)


def iops_counter() -> int:
    """The reads of storage (after merging nearby byte ranges) lance_table has made in this
    process so far (pylance's ``lance.iops_counter()``; a difference of two calls counts the reads
    in between, of every thread).

    Example:
        ```python
        import lance_table as lance

        before = lance.iops_counter()
        lance.dataset(uri).to_table()
        print(lance.iops_counter() - before, "reads")
        ```
    """
    with _LOCK:
        return _TOTAL.iops


def bytes_read_counter() -> int:
    """The bytes lance_table has read from storage in this process so far (pylance's
    ``lance.bytes_read_counter()``).

    Example:
        ```python
        import lance_table as lance

        before = lance.bytes_read_counter()
        lance.dataset(uri).to_table()
        print(lance.bytes_read_counter() - before, "bytes")
        ```
    """
    with _LOCK:
        return _TOTAL.bytes_read


__all__ = ["IOStats", "bytes_read_counter", "collecting", "iops_counter", "record"]
