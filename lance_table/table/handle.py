"""The state every part of the dataset handle shares: the snapshot it reads, and where its writes
go (:meth:`Handle._committed`)."""

from __future__ import annotations

from typing import TypeVar

from lance_table.format.manifest import Manifest
from lance_table.storage import Storage
from lance_table.table.snapshot import Snapshot

_Result = TypeVar("_Result")


class Handle:
    """A handle on one snapshot of a dataset; writes through it move it."""

    _snapshot: Snapshot

    def _committed(self, snapshot: Snapshot, result: _Result = None) -> _Result:  # type: ignore[assignment]
        """Where every write through this handle ends: the handle moves to the version the write
        committed (as pylance's does), and the caller gets ``result`` (what pylance returns for that
        write: None, a dict of counts, metrics)."""
        self._snapshot = snapshot
        return result

    @property
    def uri(self) -> str:
        """The dataset's URI."""
        return self._snapshot.uri

    @property
    def version(self) -> int:
        """The version this handle reads (a write through it moves it)."""
        return self._snapshot.version

    @property
    def manifest(self) -> Manifest:
        """The manifest of the version this handle reads."""
        return self._snapshot.manifest

    @property
    def _storage(self) -> Storage:
        return self._snapshot.storage


__all__ = ["Handle"]
