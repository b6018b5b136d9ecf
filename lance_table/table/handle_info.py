"""What a handle tells about itself without reading storage: its version with the summary of its
manifest (pylance's ``get_version()``) and the reads made since it last asked (pylance's
``io_stats_snapshot()`` / ``io_stats_incremental()``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from lance_table.format.manifest import Manifest
from lance_table.storage.io_stats import bytes_read_counter, iops_counter
from lance_table.table.versions import _version_time


def manifest_totals(manifest: Manifest) -> dict[str, str]:
    """The summary pylance's ``versions()`` shows in ``metadata``, computed from a loaded manifest."""
    frags = manifest.fragments
    data_rows = sum(f.physical_rows for f in frags)
    deleted = sum(f.num_deleted for f in frags)
    return {
        "total_data_file_rows": str(data_rows),
        "total_data_files": str(sum(len(f.files) for f in frags)),
        "total_deletion_file_rows": str(deleted),
        "total_deletion_files": str(sum(f.deletion_file is not None for f in frags)),
        "total_files_size": str(sum(d.file_size_bytes or 0 for f in frags for d in f.files)),
        "total_fragments": str(len(frags)),
        "total_rows": str(data_rows - deleted),
    }


def current_version(manifest: Manifest) -> dict[str, Any]:
    """pylance's ``get_version()``: ``version``, ``timestamp`` (naive local time, as
    ``versions()``) and ``metadata`` (:func:`manifest_totals`)."""
    return {
        "version": manifest.version,
        "timestamp": _version_time(manifest.timestamp_ns),
        "metadata": manifest_totals(manifest),
    }


@dataclass(frozen=True)
class DatasetIOStats:
    """pylance's ``IOStats``: reads (and writes) counted between two points.

    lance_table counts the reads of its storage layer per process (:func:`lance_table.iops_counter`),
    not per handle: the counts cover the reads of every handle and thread in between. Writes are
    not counted: ``write_iops`` and ``written_bytes`` are 0.

    Example:
        ```python
        ds.to_table()
        stats = ds.io_stats_incremental()
        print(stats.read_iops, stats.read_bytes)
        ```
    """

    read_iops: int = 0
    read_bytes: int = 0
    write_iops: int = 0
    written_bytes: int = 0


class IOMark:
    """Where a handle last reset its IO counts (the process's start until it first does)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._iops = 0
        self._bytes = 0

    def snapshot(self) -> DatasetIOStats:
        """The reads since the mark, the mark left in place."""
        with self._lock:
            return DatasetIOStats(iops_counter() - self._iops, bytes_read_counter() - self._bytes)

    def incremental(self) -> DatasetIOStats:
        """The reads since the mark; the mark moves to now."""
        with self._lock:
            iops, nbytes = iops_counter(), bytes_read_counter()
            stats = DatasetIOStats(iops - self._iops, nbytes - self._bytes)
            self._iops, self._bytes = iops, nbytes
            return stats


def io_mark(handle: Any) -> IOMark:
    """The handle's mark (made on first use)."""
    mark = handle.__dict__.get("_io_mark")
    if mark is None:
        mark = handle.__dict__.setdefault("_io_mark", IOMark())
    return mark


__all__ = ["DatasetIOStats", "IOMark", "current_version", "io_mark", "manifest_totals"]
